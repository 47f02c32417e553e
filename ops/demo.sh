#!/usr/bin/env bash
# The main job: installs the pinned nats-server if needed, builds, and runs
# `holdpoint demo` (a private nats-server, the ingress and a worker; a runtime and a
# person play out an approval, a question and a connection request).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh
# The first build takes a few minutes on 2 cores and shows cargo's progress.
bin="$(holdpoint_build)"
exec "$bin" demo "$@"

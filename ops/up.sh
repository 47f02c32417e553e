#!/usr/bin/env bash
# Runs Holdpoint locally: a nats-server of its own (store under .holdpoint/nats),
# the ingress on 127.0.0.1:8080 and a worker. Extra arguments go to `holdpoint up`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh
# The first build takes a few minutes on 2 cores and shows cargo's progress.
bin="$(holdpoint_build)"
exec "$bin" up "$@"

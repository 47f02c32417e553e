#!/usr/bin/env bash
# The project's test command: installs/locates nats-server, builds the
# workspace binaries, then runs the whole test suite. Extra arguments are
# passed to the test runner (cargo nextest run, or cargo test without it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash ops/setup.sh
HOLDPOINT_NATS_SERVER="$(cat .tools/nats-server.path)"
export HOLDPOINT_NATS_SERVER

cargo build --workspace --bins --locked 2>/dev/null || cargo build --workspace --bins

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "$@"
else
    cargo test --workspace "$@"
fi

#!/usr/bin/env bash
# The benchmark: builds release binaries and runs holdpoint-bench against fresh
# local nats-servers (file storage; default fsync, then sync_interval: always).
#   ops/bench.sh            short mode (about a minute)
#   ops/bench.sh --mode full   full mode (several minutes; see BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh >/dev/null
cargo build --release --quiet --bin holdpoint --bin holdpoint-bench
built="${CARGO_TARGET_DIR:-target}/release"
exec "$built/holdpoint-bench" --holdpoint-bin "$built/holdpoint" "$@"

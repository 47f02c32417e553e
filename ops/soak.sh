#!/usr/bin/env bash
# The long mode of the fault suite: a whole Holdpoint on a private
# nats-server (file store) with several `holdpoint worker` processes, answered by
# concurrent HTTP clients while workers are SIGKILLed at random moments and the
# nats-server is restarted (SIGKILL and SIGTERM), then every guarantee is checked.
# It stops by itself once every target is met (or after --max-minutes) and prints
# the figures that go into RELIABILITY.md; exit status 0 means every check passed.
#
#   ops/soak.sh                      # 10,000 answers, 100 worker kills, 20 restarts
#   ops/soak.sh --answers 2000 --worker-kills 20 --nats-restarts 5   # a short one
#   ops/soak.sh --sync-always        # nats-server with sync_interval: always
#   HOLDPOINT_FAULT_SEED=<seed> ops/soak.sh   # replay the random choices of a run
#
# Flags: --answers N, --worker-kills N, --nats-restarts N, --workers N (>= 2),
# --clients N, --batch N (interactions per round), --max-minutes N, --seed N,
# --sync-always. The workers' logs go to target/soak/workers-<time>.log and the
# run's output to target/soak/soak-<time>.log as well as the terminal.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

source ops/env.sh

# `holdpoint` (the worker processes) and `holdpoint-soak` (the driver).
cargo build --workspace --bins --locked 2>/dev/null || cargo build --workspace --bins

mkdir -p target/soak
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
log="target/soak/soak-$stamp.log"
workers="target/soak/workers-$stamp.log"
# Run copies, so a rebuild during the run cannot swap the binaries under it.
built="${CARGO_TARGET_DIR:-target}/debug"
cp "$built/holdpoint" "target/soak/holdpoint-$stamp"
cp "$built/holdpoint-soak" "target/soak/holdpoint-soak-$stamp"
HOLDPOINT_BIN="$PWD/target/soak/holdpoint-$stamp"
export HOLDPOINT_BIN
echo "soak: output in $log, worker logs in $workers"
set +e
"./target/soak/holdpoint-soak-$stamp" "$@" 2>"$workers" | tee "$log"
status=${PIPESTATUS[0]}
set -e
exit "$status"

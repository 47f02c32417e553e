#!/usr/bin/env bash
# Runs the cluster node-loss test (a 3-node nats-server cluster, R3 streams; the
# commands leader is SIGKILLed, then another node, while answers flow) N times in
# a row, each alongside a CPU hog that keeps one core busy, and prints the
# violations of each run and a total. Each run has its own random seed, printed so
# a failure can be replayed with HOLDPOINT_FAULT_SEED=<seed>.
#
#   ops/stress-cluster.sh        # 20 runs
#   ops/stress-cluster.sh 5      # 5 runs
#   HOLDPOINT_STRESS_HOG=0 ops/stress-cluster.sh   # without the CPU hog
#
# Exit status 0 when every run passed with 0 violations. Logs of each run go to
# target/stress-cluster/run-<n>.log. CI runs the test once, in ops/test.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs="${1:-20}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: ops/stress-cluster.sh [N>=1]" >&2
    exit 2
fi
test_name='cluster::killing_the_commands_leader_then_another_node_loses_nothing'

source ops/env.sh >/dev/null
cargo build --workspace --bins --all-targets --locked 2>/dev/null || cargo build --workspace --bins --all-targets

logs=target/stress-cluster
mkdir -p "$logs"
hog=""
if [[ "${HOLDPOINT_STRESS_HOG:-1}" != "0" ]]; then
    # One core kept busy for the whole stress run (the machine has two).
    sha256sum /dev/zero >/dev/null 2>&1 &
    hog=$!
fi
cleanup() { [[ -n "$hog" ]] && kill "$hog" 2>/dev/null || true; }
trap cleanup EXIT

failed=0
total_violations=0
for ((n = 1; n <= runs; n++)); do
    log="$logs/run-$n.log"
    seed="$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')"
    started=$SECONDS
    status=0
    HOLDPOINT_FAULT_SEED="$seed" cargo nextest run -p holdpoint-tests --test integration \
        --no-capture --run-ignored all -E "test(=$test_name)" >"$log" 2>&1 || status=$?
    violations="$(grep -oE 'violations [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)"
    delay="$(grep -oE 'longest effect delay [^;]*' "$log" | tail -1 | sed 's/longest effect delay //' || true)"
    repeats="$(grep -oE '[0-9]+ republished again' "$log" | tail -1 | cut -d' ' -f1 || true)"
    if [[ -z "$violations" ]]; then
        violations="?"
        failed=$((failed + 1))
    else
        total_violations=$((total_violations + violations))
        [[ "$status" -ne 0 || "$violations" -ne 0 ]] && failed=$((failed + 1))
    fi
    printf 'run %2d/%d: exit %d, violations %s, longest effect delay %s, core repeats %s, %ds (seed %s, log %s)\n' \
        "$n" "$runs" "$status" "$violations" "${delay:-?}" "${repeats:-?}" $((SECONDS - started)) "$seed" "$log"
done
echo "stress-cluster: $runs runs, $failed failed, $total_violations violations in all"
[[ "$failed" -eq 0 ]]

#!/usr/bin/env bash
# The long test of the production topology (ops/cluster-up.sh): three
# nats-servers (R3, sync_interval: always, the role users), two ingresses, two
# workers and a notifier, all as separate processes on loopback.
#
#   ops/cluster-test.sh              # about two minutes
#
# 1. Starts ops/cluster-up.sh and waits until every /readyz answers.
# 2. Runs an approval end to end through each ingress: organisation acme's own
#    runtime user (`holdpoint nats-config --role runtime`, in holdpoint.conf)
#    holds a call, a person approves it over HTTP (a development JWT), the runtime
#    reports the result; the other ingress reads it finished.
# 3. SIGKILLs the node leading HP_COMMANDS and worker-1 (the supervisor starts
#    both again), and runs 20 more approvals across both ingresses meanwhile,
#    retrying a 503 or a lost answer with the same Idempotency-Key.
# 4. Checks the guarantees: every approval answered 2xx, every interaction
#    finished, exactly one tool-call-released and one tool-call-finished event per
#    held call (HP_EVENTS read from the start through GET /v1/events), the killed
#    node back with every stream's replicas current, two live workers again.
# 5. Stops the cluster with SIGTERM: every process must exit 0.
#
# Exit status 0 when every check passed. Output and logs: target/cluster-test/.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh >/dev/null
cargo build --bins --locked -q 2>/dev/null || cargo build --bins -q
HOLDPOINT="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/holdpoint"
export HOLDPOINT_BIN="$HOLDPOINT"

dir="$PWD/target/cluster-test"
rm -rf "$dir"
mkdir -p "$dir"
out="$dir/cluster-up.out"
: >"$out"
E2E_NAME=cluster-test
# shellcheck source=ops/lib/e2e.sh
source ops/lib/e2e.sh

# A port offset whose ports are all free (NATS 14222+, routes, monitoring, the
# services' 8080+).
offset="$(free_offset 14222 14223 14224 16222 16223 16224 18222 18223 18224 8080 8081 8090 8091 \
    8102 8103 8122 -- 1000 2000 3000 4000 5000)" || { log "no free set of ports"; exit 1; }

bash ops/cluster-up.sh --dir "$dir/cluster" --port-offset "$offset" >"$out" 2>&1 &
cluster=$!
cleanup() {
    if kill -0 "$cluster" 2>/dev/null; then
        kill -TERM "$cluster" 2>/dev/null || true
        wait "$cluster" 2>/dev/null || true
    fi
}
trap cleanup EXIT

start=$SECONDS
until grep -q '^cluster-up: ready' "$out"; do
    if ! kill -0 "$cluster" 2>/dev/null || ((SECONDS - start > 240)); then
        cat "$out" >&2
        log "the cluster did not come up"
        exit 1
    fi
    sleep 1
done
log "cluster up in $((SECONDS - start)) s (ports +$offset)"

api=("http://127.0.0.1:$((8080 + offset))" "http://127.0.0.1:$((8090 + offset))")
nats_urls() {
    local out="" i
    for i in 0 1 2; do out+="${out:+,}nats://$1:$1-dev-only@127.0.0.1:$((14222 + i + offset))"; done
    echo "$out"
}
export HOLDPOINT_DEV_JWT_DIR="$dir/cluster/dev-jwt"
TOKEN="$("$HOLDPOINT" dev-token --org acme --person ana 2>/dev/null)"

retry 30 rt session --session s1 || fail "open session s1"
one 1 "${api[0]}"
one 2 "${api[1]}"
for pair in "1 ${api[1]}" "2 ${api[0]}"; do
    read -r n base <<<"$pair"
    finished "$base" "eff_c$n" || fail "eff_c$n is not finished as the other ingress reads it"
done
((failures == 0)) && log "an approval ran end to end through each ingress"

# ── a node and a worker killed while answers flow ─────────────────────────────
leader="$(commands_leader)"
node="nats-${leader##*-}"
node_pid="$(cat "$dir/cluster/pids/$node")"
worker_pid="$(cat "$dir/cluster/pids/worker-1")"
kill_while_answering "$node" "$node_pid" "worker-1" "$worker_pid"

# ── the guarantees ────────────────────────────────────────────────────────────
check_answers
check_events "${api[1]}"
# The killed node is back and current, and two workers live again.
if wait_recovered 2 90; then
    log "recovered: $node back with every replica current, two live workers"
else
    fail "the cluster did not recover: every replica current and two live workers"
fi

# ── a clean stop ──────────────────────────────────────────────────────────────
kill -TERM "$cluster"
status=0
wait "$cluster" || status=$?
trap - EXIT
if [[ "$status" != 0 ]] || ! grep -q 'stopped cleanly' "$out"; then
    tail -12 "$out" >&2
    fail "the cluster did not stop cleanly (exit $status)"
fi
if ((failures)); then
    echo "cluster-test: $failures checks failed (logs: $dir)"
    exit 1
fi
log "stopped cleanly: every process exited 0"
echo "cluster-test: 5 passed, 0 failed"

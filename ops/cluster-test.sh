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
log() { printf 'cluster-test: %s\n' "$*"; }
failures=0
fail() {
    log "FAILED: $*"
    failures=$((failures + 1))
}

# A port offset whose ports are all free (NATS 14222+, routes, monitoring, the
# services' 8080+).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
offset=""
for candidate in 1000 2000 3000 4000 5000; do
    ok=1
    for p in 14222 14223 14224 16222 16223 16224 18222 18223 18224 8080 8081 8090 8091 8102 8103 8122; do
        port_free $((p + candidate)) || { ok=0; break; }
    done
    ((ok)) && { offset=$candidate; break; }
done
[[ -n "$offset" ]] || { log "no free set of ports"; exit 1; }

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
rt() { "$HOLDPOINT" runtime --nats-url "$(nats_urls runtime-acme)" --org acme "$@"; }
status_json() { "$HOLDPOINT" status --json --nats-url "$(nats_urls setup)" 2>/dev/null; }

# retry N CMD...: runs CMD until it succeeds, at most N times, a second apart (a
# runtime command's id is a digest of what it says: sending it again is safe).
retry() {
    local n="$1" i
    shift
    for ((i = 1; i <= n; i++)); do
        "$@" >>"$dir/runtime.log" 2>&1 && return 0
        sleep 1
    done
    return 1
}

# approve INGRESS EFFECT: POST approve with one Idempotency-Key until a 2xx, for
# at most 60 s (a 503 or no answer is retried with the same key).
approve() {
    local base="$1" effect="$2" key="key-$2" start=$SECONDS code
    while ((SECONDS - start < 60)); do
        code="$(curl -s -o "$dir/approve-$effect.body" -w '%{http_code}' --max-time 10 \
            -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
            -H "Idempotency-Key: $key" -X POST "$base/v1/interactions/$effect/approve" \
            --data '{"approved":true}' || true)"
        case "$code" in
            2*) echo "$effect $code" >>"$dir/answers.log"; return 0 ;;
            503 | 000) sleep 0.5 ;;
            *) echo "$effect $code $(cat "$dir/approve-$effect.body")" >>"$dir/answers.log"; return 1 ;;
        esac
    done
    return 1
}

# one N INGRESS: the whole approval of task tN through that ingress.
effects=()
one() {
    local n="$1" base="$2" effect="eff_c$1"
    effects+=("$effect")
    retry 30 rt hold --session s1 --task "t$n" --call "call-$n" --effect "$effect" \
        --server github --tool create_pull_request --arguments "{\"n\":$n}" ||
        { fail "hold $effect"; return; }
    approve "$base" "$effect" || { fail "approve $effect through $base"; return; }
    retry 30 rt tool-result "$effect" --output "{\"pr\":$n}" || fail "tool result of $effect"
}

retry 30 rt session --session s1 || fail "open session s1"
one 1 "${api[0]}"
one 2 "${api[1]}"
for pair in "1 ${api[1]}" "2 ${api[0]}"; do
    read -r n base <<<"$pair"
    curl -s -H "Authorization: Bearer $TOKEN" "$base/v1/interactions/eff_c$n" | grep -q '"state":"finished"' ||
        fail "eff_c$n is not finished as the other ingress reads it"
done
((failures == 0)) && log "an approval ran end to end through each ingress"

# ── a node and a worker killed while answers flow ─────────────────────────────
leader="$(status_json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(next(x["leader"] for x in s["streams"] if x["name"]=="HP_COMMANDS"))')"
node="nats-${leader##*-}"
node_pid="$(cat "$dir/cluster/pids/$node")"
worker_pid="$(cat "$dir/cluster/pids/worker-1")"
(
    sleep 2
    kill -KILL "$node_pid" && echo "killed $node (pid $node_pid, the HP_COMMANDS leader)"
    sleep 3
    kill -KILL "$worker_pid" && echo "killed worker-1 (pid $worker_pid)"
) >"$dir/kills.log" 2>&1 &
killer=$!
started=$SECONDS
for n in $(seq 3 22); do
    one "$n" "${api[$((n % 2))]}"
done
wait "$killer" || true
log "$(tr '\n' ';' <"$dir/kills.log") 20 approvals in $((SECONDS - started)) s"
[[ "$(wc -l <"$dir/kills.log")" == 2 ]] || fail "the node or the worker was not killed"

# ── the guarantees ────────────────────────────────────────────────────────────
answered="$(grep -c ' 2[0-9][0-9]$' "$dir/answers.log" || true)"
[[ "$answered" == "${#effects[@]}" ]] || fail "$answered of ${#effects[@]} approvals answered 2xx"
for effect in "${effects[@]}"; do
    curl -s -H "Authorization: Bearer $TOKEN" "${api[0]}/v1/interactions/$effect" |
        grep -q '"state":"finished"' || fail "$effect is not finished"
done
# Every event of acme from the start of HP_EVENTS (the stream stays open: read
# until no event came for 3 s).
curl -sN --max-time 20 -H "Authorization: Bearer $TOKEN" "${api[1]}/v1/events?after=0" \
    >"$dir/events.sse" 2>/dev/null || true
python3 - "$dir/events.sse" "${effects[@]}" <<'EOF' || fail "events: see above"
import json, sys
path, effects = sys.argv[1], sys.argv[2:]
released, finished = {}, {}
for line in open(path, encoding="utf-8"):
    if not line.startswith("data:"):
        continue
    event = json.loads(line[5:])
    data = event.get("data", {})
    if event["type"].endswith(".tool-call-released"):
        released[data["effectId"]] = released.get(data["effectId"], 0) + 1
    if event["type"].endswith(".tool-call-finished"):
        finished[data["interactionId"]] = finished.get(data["interactionId"], 0) + 1
bad = [(e, released.get(e, 0), finished.get(e, 0)) for e in effects
       if released.get(e, 0) != 1 or finished.get(e, 0) != 1]
for e, r, f in bad:
    print(f"cluster-test: {e}: {r} tool-call-released, {f} tool-call-finished (want 1 and 1)")
print(f"cluster-test: {len(effects)} held calls, {sum(released.values())} released, "
      f"{sum(finished.values())} finished events")
sys.exit(1 if bad else 0)
EOF
# The killed node is back and current, and two workers live again.
start=$SECONDS
until status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)
ok = all(len(x.get("peers", [])) == 2 and all(p["current"] and not p["offline"] for p in x["peers"])
         for x in s["streams"]) and len(s["workers"]) == 2
sys.exit(0 if ok else 1)'; do
    if ((SECONDS - start > 90)); then
        fail "the cluster did not recover: every replica current and two live workers"
        status_json >"$dir/status.json" || true
        break
    fi
    sleep 2
done
((SECONDS - start <= 90)) && log "recovered: $node back with every replica current, two live workers"

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

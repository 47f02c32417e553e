# shellcheck shell=bash
# The end-to-end steps the topology tests share (ops/cluster-test.sh: processes
# on loopback; ops/compose-test.sh: containers), sourced by them. The caller sets:
#
#   HOLDPOINT  the holdpoint binary on this machine (runtime commands, status)
#   dir        the test's output folder (answers.log, runtime.log, bodies)
#   TOKEN      a person's development JWT for organisation acme
#   api        the ingresses' base URLs (an array)
#   nats_urls  a function: `nats_urls USER` prints the cluster's URLs for USER
#
# and gets fail/log (counting failures in $failures), rt (acme's runtime user),
# status_json, retry, approve, one (one approval end to end; the effect ids in
# $effects), kill_while_answering (a node and a worker SIGKILLed while 20 more
# approvals flow), check_answers, check_events (one release and one finish per
# held call), wait_recovered (every replica current and N live workers) and
# free_offset (a port offset whose ports are all free).

failures=0
effects=()
log() { printf '%s: %s\n' "${E2E_NAME:-e2e}" "$*"; }
fail() {
    log "FAILED: $*"
    failures=$((failures + 1))
}
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

# one N INGRESS: the whole approval of task tN through that ingress: the runtime
# holds call-N, a person approves it, the runtime reports its result.
one() {
    local n="$1" base="$2" effect="eff_c$1"
    effects+=("$effect")
    retry 30 rt hold --session s1 --task "t$n" --call "call-$n" --effect "$effect" \
        --server github --tool create_pull_request --arguments "{\"n\":$n}" ||
        { fail "hold $effect"; return; }
    approve "$base" "$effect" || { fail "approve $effect through $base"; return; }
    retry 30 rt tool-result "$effect" --output "{\"pr\":$n}" || fail "tool result of $effect"
}

# finished BASE EFFECT: the interaction reads finished through that ingress.
finished() {
    curl -s -H "Authorization: Bearer $TOKEN" "$1/v1/interactions/$2" | grep -q '"state":"finished"'
}

# check_answers: every approval answered 2xx and every interaction finished.
check_answers() {
    local answered effect
    answered="$(grep -c ' 2[0-9][0-9]$' "$dir/answers.log" || true)"
    [[ "$answered" == "${#effects[@]}" ]] || fail "$answered of ${#effects[@]} approvals answered 2xx"
    for effect in "${effects[@]}"; do
        finished "${api[0]}" "$effect" || fail "$effect is not finished"
    done
}

# check_events BASE: every event of acme from the start of HP_EVENTS (read until
# none came for 20 s) holds one tool-call-released and one tool-call-finished per
# held call.
check_events() {
    curl -sN --max-time 20 -H "Authorization: Bearer $TOKEN" "$1/v1/events?after=0" \
        >"$dir/events.sse" 2>/dev/null || true
    python3 - "$dir/events.sse" "${E2E_NAME:-e2e}" "${effects[@]}" <<'PY' || fail "events: see above"
import json, sys
path, name, effects = sys.argv[1], sys.argv[2], sys.argv[3:]
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
    print(f"{name}: {e}: {r} tool-call-released, {f} tool-call-finished (want 1 and 1)")
print(f"{name}: {len(effects)} held calls, {sum(released.values())} released, "
      f"{sum(finished.values())} finished events")
sys.exit(1 if bad else 0)
PY
}

# wait_recovered WORKERS SECS: until every stream's two other replicas are current
# and online and WORKERS workers are live, at most SECS; returns 1 on timeout.
wait_recovered() {
    local workers="$1" within="$2" start=$SECONDS
    until status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)
ok = all(len(x.get("peers", [])) == 2 and all(p["current"] and not p["offline"] for p in x["peers"])
         for x in s["streams"]) and len(s["workers"]) == int(sys.argv[1])
sys.exit(0 if ok else 1)' "$workers"; do
        if ((SECONDS - start > within)); then
            status_json >"$dir/status.json" || true
            return 1
        fi
        sleep 2
    done
}

# commands_leader: the server name of the HP_COMMANDS stream's leader.
commands_leader() {
    status_json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(next(x["leader"] for x in s["streams"] if x["name"]=="HP_COMMANDS"))'
}

# kill_while_answering NODE NODE_PID WORKER WORKER_PID: SIGKILLs the node (2 s
# in) and the worker (3 s later) while 20 more approvals (t3 to t22) alternate
# between the ingresses; fails when either was not killed.
kill_while_answering() {
    local node="$1" node_pid="$2" worker="$3" worker_pid="$4" killer started n
    (
        sleep 2
        kill -KILL "$node_pid" && echo "killed $node (pid $node_pid, the HP_COMMANDS leader)"
        sleep 3
        kill -KILL "$worker_pid" && echo "killed $worker (pid $worker_pid)"
    ) >"$dir/kills.log" 2>&1 &
    killer=$!
    started=$SECONDS
    for n in $(seq 3 22); do
        one "$n" "${api[$((n % 2))]}"
    done
    wait "$killer" || true
    log "$(tr '\n' ';' <"$dir/kills.log") 20 approvals in $((SECONDS - started)) s"
    [[ "$(wc -l <"$dir/kills.log")" == 2 ]] || fail "the node or the worker was not killed"
}

# free_offset PORTS... -- CANDIDATES...: prints the first candidate offset at
# which every one of PORTS (+ offset) is free on 127.0.0.1; returns 1 when none is.
free_offset() {
    local ports=() candidate p ok
    while [[ "$1" != "--" ]]; do ports+=("$1"); shift; done
    shift
    for candidate in "$@"; do
        ok=1
        for p in "${ports[@]}"; do
            ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + candidate))") 2>/dev/null || { ok=0; break; }
        done
        ((ok)) && { echo "$candidate"; return 0; }
    done
    return 1
}

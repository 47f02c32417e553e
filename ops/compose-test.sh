#!/usr/bin/env bash
# The long test of ops/compose.yaml: the production topology as containers of
# the image ops/image.sh builds, started by a compose tool.
#
#   ops/image.sh --build-only    # once: localhost/holdpoint:dev (about 30 min)
#   ops/compose-test.sh          # about three minutes
#
# The compose tool is podman-compose (PyPI, pinned below, installed into
# .tools/compose-venv when missing) driving podman; `docker compose` reads the
# same file. Containers run with runc and probed ulimits (ops/lib/podman.sh), set
# through a containers.conf of the test's own (CONTAINERS_CONF), so the file
# itself carries nothing specific to this machine.
#
# 1. `up -d` with free host ports (the file's NATS_*_PORT and INGRESS_*_PORT
#    variables); waits until both ingresses' /readyz answer.
# 2. An approval end to end through each ingress: organisation acme's own runtime
#    user (through the nats-N ports) holds a call, a person approves it over HTTP
#    (a development JWT minted inside ingress-1), the runtime reports the result;
#    the other ingress reads it finished.
# 3. SIGKILLs the nats-server leading HP_COMMANDS and one worker from outside
#    their containers (a crash: `restart: unless-stopped` starts them again), and
#    runs 20 more approvals across both ingresses meanwhile.
# 4. The guarantees: every approval answered 2xx, every interaction finished, one
#    tool-call-released and one tool-call-finished per held call, the node back
#    with every replica current, two live workers.
# 5. `stop` (SIGTERM, the file's grace period): every Holdpoint container exits 0;
#    then `down -v` removes the containers, the network and the volumes.
#
# Exit status 0 when every check passed. Output and container logs:
# target/compose-test/.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
source ops/env.sh >/dev/null
# shellcheck source=ops/lib/podman.sh
source ops/lib/podman.sh
IMAGE="${HOLDPOINT_IMAGE:-localhost/holdpoint:dev}"
PODMAN_COMPOSE_VERSION=1.6.0

dir="$ROOT/target/compose-test"
rm -rf "$dir"
mkdir -p "$dir"
E2E_NAME=compose-test
# shellcheck source=ops/lib/e2e.sh
source ops/lib/e2e.sh

die() {
    log "error: $*"
    exit 1
}
[[ "$(id -u)" == 0 ]] || die "needs root (podman as root)"
command -v podman >/dev/null || die "podman is missing (ops/image.sh installs it)"
podman image exists "$IMAGE" || die "no image $IMAGE: build it first with ops/image.sh --build-only"

PC="$ROOT/.tools/compose-venv/bin/podman-compose"
if ! "$PC" --version 2>/dev/null | grep -q "$PODMAN_COMPOSE_VERSION"; then
    log "installing podman-compose $PODMAN_COMPOSE_VERSION into .tools/compose-venv"
    python3 -m venv "$ROOT/.tools/compose-venv"
    "$ROOT/.tools/compose-venv/bin/pip" install -q "podman-compose==$PODMAN_COMPOSE_VERSION" \
        >"$dir/pip.log" 2>&1 || { cat "$dir/pip.log" >&2; die "could not install podman-compose"; }
fi

cargo build --bins --locked -q 2>/dev/null || cargo build --bins -q
HOLDPOINT="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/holdpoint"

limits="$(podman_limits "$IMAGE")" || die "no container starts with any ulimits tried (runtime $PODMAN_RUNTIME)"
read -r nofile nproc <<<"$limits"
cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "$PODMAN_RUNTIME"
EOF
export CONTAINERS_CONF="$dir/containers.conf"

# Host ports: the first offset whose ports are all free.
offset="$(free_offset 14222 14223 14224 8080 8081 8090 8091 -- 1100 2100 3100 4100 5100)" ||
    die "no free set of ports"
export NATS_1_PORT=$((14222 + offset)) NATS_2_PORT=$((14223 + offset)) NATS_3_PORT=$((14224 + offset))
export INGRESS_1_PORT=$((8080 + offset)) INGRESS_1_ADMIN_PORT=$((8081 + offset))
export INGRESS_2_PORT=$((8090 + offset)) INGRESS_2_ADMIN_PORT=$((8091 + offset))
export HOLDPOINT_IMAGE="$IMAGE"

project="hpcompose$$"
compose() { "$PC" --project-name "$project" -f "$ROOT/ops/compose.yaml" "$@"; }
container() { echo "${project}_$1_${2:-1}"; }
save_logs() {
    local c
    for c in $(podman ps -a --filter "label=io.podman.compose.project=$project" --format '{{.Names}}'); do
        podman logs "$c" >"$dir/$c.log" 2>&1 || true
    done
}
cleanup() {
    save_logs
    compose down -v >>"$dir/compose.log" 2>&1 || true
}
trap cleanup EXIT

start=$SECONDS
compose up -d >"$dir/compose.log" 2>&1 || { tail -20 "$dir/compose.log" >&2; die "compose up failed"; }
api=("http://127.0.0.1:$INGRESS_1_PORT" "http://127.0.0.1:$INGRESS_2_PORT")
until curl -sf "http://127.0.0.1:$INGRESS_1_ADMIN_PORT/readyz" >/dev/null &&
    curl -sf "http://127.0.0.1:$INGRESS_2_ADMIN_PORT/readyz" >/dev/null; do
    ((SECONDS - start < 240)) || { save_logs; die "the ingresses were not ready in 240 s (logs: $dir)"; }
    sleep 1
done
log "up and ready in $((SECONDS - start)) s (host ports +$offset)"

nats_urls() {
    local out="" p
    for p in "$NATS_1_PORT" "$NATS_2_PORT" "$NATS_3_PORT"; do out+="${out:+,}nats://$1:$1-dev-only@127.0.0.1:$p"; done
    echo "$out"
}
TOKEN="$(podman exec "$(container ingress-1)" holdpoint dev-token --org acme --person ana 2>/dev/null)"
[[ -n "$TOKEN" ]] || die "no development token from ingress-1"

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
pid_of() { podman inspect --format '{{.State.Pid}}' "$1"; }
node_pid="$(pid_of "$(container "$node")")"
worker_pid="$(pid_of "$(container worker 1)")"
kill_while_answering "$node" "$node_pid" "worker 1" "$worker_pid"

# ── the guarantees ────────────────────────────────────────────────────────────
check_answers
check_events "${api[1]}"
if wait_recovered 2 120; then
    log "recovered: $node restarted with every replica current, two live workers"
else
    fail "the topology did not recover: every replica current and two live workers"
fi

# ── a clean stop ──────────────────────────────────────────────────────────────
compose stop >>"$dir/compose.log" 2>&1 || fail "compose stop failed"
for c in $(podman ps -a --filter "label=io.podman.compose.project=$project" --format '{{.Names}}'); do
    case "$c" in *_nats-* | *_setup_*) continue ;; esac
    code="$(podman inspect --format '{{.State.ExitCode}}' "$c")"
    [[ "$code" == 0 ]] || fail "$c exited $code after SIGTERM"
done
((failures == 0)) && log "stopped cleanly: every ingress, worker and notifier exited 0"

if ((failures)); then
    echo "compose-test: $failures checks failed (logs: $dir)"
    exit 1
fi
echo "compose-test: 5 passed, 0 failed"

#!/usr/bin/env bash
# The production topology on one machine, in one command, without containers
# (ops/compose.yaml is the same for a container engine):
#
#   * three nats-servers in one JetStream cluster, from ops/nats/cluster/nats-N.conf
#     (sync_interval: always; the HOLDPOINT account and its role users of
#     ops/nats/holdpoint.conf), on loopback;
#   * `holdpoint setup` as the `setup` user: every stream and bucket at R3;
#   * two ingresses (`ingress` user), two workers (`worker` user) and one notifier
#     (`notifier` user), each with its admin port (/healthz, /readyz, /metrics);
#   * a Prometheus scrape file of every admin port beside the Grafana dashboard
#     ops/grafana/holdpoint.json.
#
#   ops/cluster-up.sh                     # runs until Ctrl-C / SIGTERM, then stops all
#   ops/cluster-up.sh --workers 4 --ingresses 3 --notifiers 2
#   ops/cluster-up.sh --dir /tmp/hp --port-offset 1000
#
# Each process runs under a supervisor that starts it again a second after it
# dies (as `restart: unless-stopped` does in compose), so a killed node or worker
# comes back. Ctrl-C or SIGTERM stops everything gracefully (ingresses, notifiers,
# workers, then the nodes, each with SIGTERM) and the script exits 0 only when
# every process exited 0. Logs: <dir>/logs/<name>.log; the running processes'
# pids: <dir>/pids/<name>; a line `cluster-up: ready` once every /readyz answers.
#
# Ports (plus --port-offset): NATS clients 14222-14224, routes 16222-16224,
# monitoring 18222-18224; ingress i: API 8080+10(i-1), admin 8081+10(i-1); worker
# i: admin 8101+i; notifier i: admin 8121+i. Identity: development JWTs
# (`--dev-jwt`, the key in <dir>/dev-jwt): HOLDPOINT_DEV_JWT_DIR=<dir>/dev-jwt
# holdpoint dev-token --org acme --person ana. Use --insecure-dev-identity for the
# X-Holdpoint-Org / X-Holdpoint-Person headers instead.
#
# Scaling: see README.md, "Running in production". In short: ingresses are
# stateless (add any number behind a load balancer); workers share the partition
# consumers (up to nats.partitions of them own a partition each, the rest stand
# by); notifiers share one durable consumer; the NATS cluster stays 3 (or 5) nodes
# with every stream at R3.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

dir=""
ingresses=2
workers=2
notifiers=1
offset=0
identity=(--dev-jwt)
while (($#)); do
    case "$1" in
        --dir) dir="$2"; shift 2 ;;
        --ingresses) ingresses="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --notifiers) notifiers="$2"; shift 2 ;;
        --port-offset) offset="$2"; shift 2 ;;
        --insecure-dev-identity) identity=(--insecure-dev-identity); shift ;;
        -h | --help) sed -n '2,40p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "cluster-up: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
done
for n in "$ingresses" "$workers" "$notifiers" "$offset"; do
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "cluster-up: counts and offsets are numbers" >&2; exit 2; }
done
((ingresses >= 1 && workers >= 1)) || { echo "cluster-up: at least one ingress and one worker" >&2; exit 2; }

source ops/env.sh >/dev/null
HOLDPOINT="${HOLDPOINT_BIN:-}"
if [[ -z "$HOLDPOINT" ]]; then
    cargo build --bins --locked -q 2>/dev/null || cargo build --bins -q
    HOLDPOINT="$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/holdpoint"
fi
[[ -x "$HOLDPOINT" ]] || { echo "cluster-up: no holdpoint binary at $HOLDPOINT" >&2; exit 1; }

dir="${dir:-$ROOT/target/cluster}"
mkdir -p "$dir"/{logs,pids,exit,nats}
rm -f "$dir"/pids/* "$dir"/exit/* "$dir/stopping"
export HOLDPOINT_DEV_JWT_DIR="$dir/dev-jwt"

log() { printf 'cluster-up: %s\n' "$*"; }

client_port() { echo $((14221 + $1 + offset)); }
route_port() { echo $((16221 + $1 + offset)); }
monitor_port() { echo $((18221 + $1 + offset)); }

# ── the three nodes' configurations: the production files, on loopback ────────
# (an include is relative to the including file: the accounts file goes beside)
cp ops/nats/holdpoint.conf "$dir/holdpoint.conf"
routes=""
for i in 1 2 3; do routes+="    nats-route://127.0.0.1:$(route_port "$i")"$'\n'; done
for i in 1 2 3; do
    sed -e "s|^listen: 0.0.0.0:4222|listen: 127.0.0.1:$(client_port "$i")|" \
        -e "s|^http: 127.0.0.1:8222|http: 127.0.0.1:$(monitor_port "$i")|" \
        -e "s|  listen: 0.0.0.0:6222|  listen: 127.0.0.1:$(route_port "$i")|" \
        -e "s|include \"../holdpoint.conf\"|include \"holdpoint.conf\"|" \
        -e "s|store_dir: \"/var/lib/holdpoint/nats\"|store_dir: \"$dir/nats/nats-$i\"|" \
        -e "s|max_file_store: 200GB|max_file_store: 2GB|" \
        -e '/^    nats-route:\/\/nats-[123]:6222$/d' \
        "ops/nats/cluster/nats-$i.conf" >"$dir/nats-$i.conf.tmp"
    # The routes, on loopback.
    awk -v routes="$routes" '{print} /^  routes: \[$/ {printf "%s", routes}' \
        "$dir/nats-$i.conf.tmp" >"$dir/nats-$i.conf"
    rm -f "$dir/nats-$i.conf.tmp"
    grep -q "store_dir: \"$dir/nats/nats-$i\"" "$dir/nats-$i.conf" ||
        { echo "cluster-up: could not rewrite ops/nats/cluster/nats-$i.conf" >&2; exit 1; }
done

urls() {
    local user="$1" pass="$1-dev-only" out="" i
    for i in 1 2 3; do out+="${out:+,}nats://$user:$pass@127.0.0.1:$(client_port "$i")"; done
    echo "$out"
}

# ── supervision ───────────────────────────────────────────────────────────────
supervisors=()
# supervise NAME CMD...: runs CMD (output to logs/NAME.log), starts it again a
# second after it dies unless stopping; writes its last exit status to exit/NAME.
supervise() {
    local name="$1"
    shift
    (
        trap '' INT
        stop=0
        child=""
        trap 'stop=1; [[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null' TERM
        while ((!stop)) && [[ ! -e "$dir/stopping" ]]; do
            "$@" >>"$dir/logs/$name.log" 2>&1 &
            child=$!
            echo "$child" >"$dir/pids/$name"
            # A trapped TERM interrupts `wait` (status > 128) while the child
            # still runs: wait again until it is gone; bash keeps its status.
            while :; do
                status=0
                wait "$child" || status=$?
                kill -0 "$child" 2>/dev/null || break
            done
            if ((status > 128)); then
                status=0
                wait "$child" 2>/dev/null || status=$?
            fi
            child=""
            echo "$status" >"$dir/exit/$name"
            if ((stop)) || [[ -e "$dir/stopping" ]]; then
                break
            fi
            echo "cluster-up: $name exited $status; starting it again" >>"$dir/logs/$name.log"
            printf 'cluster-up: %s exited %s; starting it again\n' "$name" "$status"
            sleep 1
        done
    ) &
    supervisors+=("$name:$!")
}

stop_group() {
    local prefix="$1" entry name sup
    for entry in "${supervisors[@]}"; do
        name="${entry%%:*}"
        sup="${entry##*:}"
        [[ "$name" == "$prefix"* ]] && kill -TERM "$sup" 2>/dev/null || true
    done
    for entry in "${supervisors[@]}"; do
        name="${entry%%:*}"
        sup="${entry##*:}"
        [[ "$name" == "$prefix"* ]] && wait "$sup" 2>/dev/null || true
    done
}

stopped=0
stop_all() {
    ((stopped)) && return
    stopped=1
    touch "$dir/stopping"
    log "stopping (SIGTERM): ingresses, notifiers, workers, then the nodes"
    stop_group ingress
    stop_group notifier
    stop_group worker
    stop_group nats
    local failed=0 f
    for f in "$dir"/exit/*; do
        [[ -e "$f" ]] || continue
        if [[ "$(cat "$f")" != 0 ]]; then
            log "$(basename "$f") exited $(cat "$f") at the stop"
            failed=1
        fi
    done
    if ((failed)); then
        log "stopped, not cleanly"
        exit 1
    fi
    log "stopped cleanly: every process exited 0"
    exit 0
}
trap stop_all INT TERM

# ── start ─────────────────────────────────────────────────────────────────────
for i in 1 2 3; do
    supervise "nats-$i" "$HOLDPOINT_NATS_SERVER" -c "$dir/nats-$i.conf"
done
wait_http() { # URL SECONDS
    local start=$SECONDS
    until curl -sf -o /dev/null "$1"; do
        ((SECONDS - start < $2)) || return 1
        sleep 0.3
    done
}
for i in 1 2 3; do
    wait_http "http://127.0.0.1:$(monitor_port "$i")/healthz?js-enabled-only=true" 60 ||
        { log "nats-$i did not start (logs/nats-$i.log)"; stop_all; }
done
# JetStream answers once the cluster has a meta leader: setup retries until then.
start=$SECONDS
until "$HOLDPOINT" setup --nats-url "$(urls setup)" --replicas 3 >>"$dir/logs/setup.log" 2>&1; do
    if ((SECONDS - start > 90)); then
        log "holdpoint setup failed (logs/setup.log)"
        stop_all
    fi
    sleep 1
done
log "$(grep "^holdpoint setup:" "$dir/logs/setup.log" | tail -1)"

for ((i = 1; i <= workers; i++)); do
    supervise "worker-$i" "$HOLDPOINT" worker --nats-url "$(urls worker)" --replicas 3 \
        --worker-id "worker-$i" --admin-listen "127.0.0.1:$((8101 + i + offset))"
done
for ((i = 1; i <= notifiers; i++)); do
    supervise "notifier-$i" "$HOLDPOINT" notifier --nats-url "$(urls notifier)" --replicas 3 \
        --admin-listen "127.0.0.1:$((8121 + i + offset))"
done
for ((i = 1; i <= ingresses; i++)); do
    supervise "ingress-$i" "$HOLDPOINT" ingress --nats-url "$(urls ingress)" --replicas 3 \
        --listen "127.0.0.1:$((8080 + 10 * (i - 1) + offset))" \
        --admin-listen "127.0.0.1:$((8081 + 10 * (i - 1) + offset))" "${identity[@]}"
done

# Prometheus: every admin port, for the dashboard ops/grafana/holdpoint.json.
{
    echo "# Prometheus scrape configuration of this cluster's admin ports (ops/cluster-up.sh)."
    echo "scrape_configs:"
    echo "  - job_name: holdpoint"
    echo "    scrape_interval: 5s"
    echo "    static_configs:"
    echo "      - targets:"
    for ((i = 1; i <= ingresses; i++)); do echo "          - 127.0.0.1:$((8081 + 10 * (i - 1) + offset))"; done
    for ((i = 1; i <= workers; i++)); do echo "          - 127.0.0.1:$((8101 + i + offset))"; done
    for ((i = 1; i <= notifiers; i++)); do echo "          - 127.0.0.1:$((8121 + i + offset))"; done
} >"$dir/prometheus.yml"

admins=()
for ((i = 1; i <= ingresses; i++)); do admins+=("ingress-$i:$((8081 + 10 * (i - 1) + offset))"); done
for ((i = 1; i <= workers; i++)); do admins+=("worker-$i:$((8101 + i + offset))"); done
for ((i = 1; i <= notifiers; i++)); do admins+=("notifier-$i:$((8121 + i + offset))"); done
for a in "${admins[@]}"; do
    wait_http "http://127.0.0.1:${a##*:}/readyz" 90 || { log "${a%%:*} is not ready (logs/${a%%:*}.log)"; stop_all; }
done

printf '\n%-12s %s\n' "process" "where"
for i in 1 2 3; do
    printf '%-12s nats://127.0.0.1:%s (monitoring http://127.0.0.1:%s, store %s)\n' \
        "nats-$i" "$(client_port "$i")" "$(monitor_port "$i")" "$dir/nats/nats-$i"
done
for ((i = 1; i <= ingresses; i++)); do
    printf '%-12s API http://127.0.0.1:%s, admin http://127.0.0.1:%s\n' "ingress-$i" \
        "$((8080 + 10 * (i - 1) + offset))" "$((8081 + 10 * (i - 1) + offset))"
done
for ((i = 1; i <= workers; i++)); do
    printf '%-12s admin http://127.0.0.1:%s\n' "worker-$i" "$((8101 + i + offset))"
done
for ((i = 1; i <= notifiers; i++)); do
    printf '%-12s admin http://127.0.0.1:%s\n' "notifier-$i" "$((8121 + i + offset))"
done
printf '%-12s %s (dashboard: ops/grafana/holdpoint.json)\n' "prometheus" "$dir/prometheus.yml"
printf '%-12s %s\n' "logs" "$dir/logs/"
printf '%-12s holdpoint status --nats-url %s\n\n' "status" "'$(urls setup)'"
log "ready"

# Runs until stopped; the supervisors restart what dies.
while :; do
    sleep 1 &
    wait $! || true
done

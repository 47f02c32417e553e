#!/usr/bin/env bash
# The project's test command: installs/locates nats-server, builds the
# workspace binaries, then runs the whole test suite. Extra arguments are
# passed to the test runner (cargo nextest run, or cargo test without it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

source ops/env.sh

# The official A2A Python SDK (v1.0 client), pinned, in its own venv, for the
# conformance test tests/python/conformance.py (driven by tests/integration/a2a.rs
# through HOLDPOINT_A2A_PYTHON). HOLDPOINT_SKIP_PYTHON=1 skips it.
# The same venv holds the Standard Webhooks reference library, with which
# tests/python/verify_webhook.py (driven by tests/integration/webhooks.rs) checks
# the notifier's signatures.
A2A_REQUIREMENTS="a2a-sdk==1.3.0 httpx==0.28.1 protobuf==7.36.2 googleapis-common-protos==1.76.0 pydantic==2.14.4 standardwebhooks==1.1.0"
A2A_VENV=".tools/a2a-venv"
if [[ "${HOLDPOINT_SKIP_PYTHON:-}" != "1" ]]; then
    stamp="$A2A_VENV/.holdpoint-requirements"
    if [[ ! -x "$A2A_VENV/bin/python" ]]; then
        python3 -m venv "$A2A_VENV"
    fi
    if [[ "$(cat "$stamp" 2>/dev/null)" != "$A2A_REQUIREMENTS" ]]; then
        # shellcheck disable=SC2086 # the list is meant to split into arguments
        if ! "$A2A_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            $A2A_REQUIREMENTS >.tools/a2a-pip-install.log 2>&1; then
            cat .tools/a2a-pip-install.log >&2
            echo "test: could not install the A2A Python SDK into $A2A_VENV (see above);" \
                "HOLDPOINT_SKIP_PYTHON=1 skips the conformance test" >&2
            exit 1
        fi
        printf '%s' "$A2A_REQUIREMENTS" >"$stamp"
    fi
    "$A2A_VENV/bin/python" -c 'import a2a.client, a2a.types.a2a_pb2, standardwebhooks'
    HOLDPOINT_A2A_PYTHON="$PWD/$A2A_VENV/bin/python"
    export HOLDPOINT_A2A_PYTHON

    # Schemathesis, pinned, in a venv of its own (its dependencies must not move
    # the A2A SDK's): tests/integration/openapi_fuzz.rs runs it against
    # `holdpoint up` through HOLDPOINT_SCHEMATHESIS.
    ST_REQUIREMENTS="schemathesis==4.32.5"
    ST_VENV=".tools/schemathesis-venv"
    st_stamp="$ST_VENV/.holdpoint-requirements"
    if [[ ! -x "$ST_VENV/bin/python" ]]; then
        python3 -m venv "$ST_VENV"
    fi
    if [[ "$(cat "$st_stamp" 2>/dev/null)" != "$ST_REQUIREMENTS" ]]; then
        # shellcheck disable=SC2086 # the list is meant to split into arguments
        if ! "$ST_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            $ST_REQUIREMENTS >.tools/schemathesis-pip-install.log 2>&1; then
            cat .tools/schemathesis-pip-install.log >&2
            echo "test: could not install schemathesis into $ST_VENV (see above);" \
                "HOLDPOINT_SKIP_PYTHON=1 skips the Python-driven tests" >&2
            exit 1
        fi
        printf '%s' "$ST_REQUIREMENTS" >"$st_stamp"
    fi
    HOLDPOINT_SCHEMATHESIS="$PWD/$ST_VENV/bin/schemathesis"
    export HOLDPOINT_SCHEMATHESIS
fi

# The Python SDK (sdks/python) and its tests: its pinned dependencies, pytest and
# the agent frameworks its adapters are tested against (openai-agents, mcp, langgraph with
# its SQLite checkpointer for the runtime restart test) in a venv
# of their own, then the SDK itself installed from the working tree on
# every run (a wheel built by hatchling, no build isolation: nothing downloaded).
# Its tests run after the workspace build, against the binary just built.
PY_SDK_REQUIREMENTS="nats-py==2.16.0 httpx==0.28.1 PyYAML==6.0.4 hatchling==1.33.0 pytest==9.2.0 pytest-asyncio==1.5.0 pytest-timeout==2.4.0 standardwebhooks==1.1.0 mypy==2.4.1 types-PyYAML==6.0.12.20261122 openai-agents==0.24.0 mcp==2.3.0 jsonschema==4.26.0 langgraph==1.2.24 langgraph-checkpoint-sqlite==3.1.2"
PY_SDK_VENV=".tools/python-sdk-venv"
if [[ "${HOLDPOINT_SKIP_PYTHON:-}" != "1" ]]; then
    py_stamp="$PY_SDK_VENV/.holdpoint-requirements"
    if [[ ! -x "$PY_SDK_VENV/bin/python" ]]; then
        python3 -m venv "$PY_SDK_VENV"
    fi
    if [[ "$(cat "$py_stamp" 2>/dev/null)" != "$PY_SDK_REQUIREMENTS" ]]; then
        # shellcheck disable=SC2086 # the list is meant to split into arguments
        if ! "$PY_SDK_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            $PY_SDK_REQUIREMENTS >.tools/python-sdk-pip-install.log 2>&1; then
            cat .tools/python-sdk-pip-install.log >&2
            echo "test: could not install the Python SDK's dependencies into $PY_SDK_VENV (see above);" \
                "HOLDPOINT_SKIP_PYTHON=1 skips the Python-driven tests" >&2
            exit 1
        fi
        printf '%s' "$PY_SDK_REQUIREMENTS" >"$py_stamp"
    fi
    if ! "$PY_SDK_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-deps --no-build-isolation --force-reinstall ./sdks/python >.tools/python-sdk-install.log 2>&1; then
        cat .tools/python-sdk-install.log >&2
        echo "test: could not install sdks/python into $PY_SDK_VENV (see above)" >&2
        exit 1
    fi
fi

# The TypeScript SDK and the web inbox's browser tests (sdks/typescript, Node's
# test runner): npm packages from the committed lockfile, and Debian's chromium
# for playwright-core to drive (never a browser download of its own).
# HOLDPOINT_SKIP_NODE=1 skips them; HOLDPOINT_CHROMIUM names another Chromium.
SDK_DIR="sdks/typescript"
if [[ "${HOLDPOINT_SKIP_NODE:-}" != "1" ]]; then
    if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then
        echo "test: the SDK tests need Node.js 20 or newer (HOLDPOINT_SKIP_NODE=1 skips them)" >&2
        exit 1
    fi
    CHROMIUM="${HOLDPOINT_CHROMIUM:-/usr/bin/chromium}"
    if [[ ! -x "$CHROMIUM" ]]; then
        echo "test: installing Debian's chromium for the inbox's browser tests"
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
            >.tools/chromium-install.log 2>&1; then
            cat .tools/chromium-install.log >&2
            echo "test: could not install chromium (as root: apt-get install chromium);" \
                "HOLDPOINT_SKIP_NODE=1 skips the SDK and browser tests" >&2
            exit 1
        fi
    fi
    export HOLDPOINT_CHROMIUM="$CHROMIUM"
    stamp="$SDK_DIR/node_modules/.holdpoint-lock.sha256"
    lock_sum="$(sha256sum "$SDK_DIR/package-lock.json" | cut -d' ' -f1)"
    if [[ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]]; then
        (cd "$SDK_DIR" && npm ci --no-audit --no-fund --loglevel=error)
        printf '%s' "$lock_sum" >"$stamp"
    fi
fi

# The lab tests (tests/integration/partition.rs, clocks.rs, disk.rs) need root for
# network namespaces, nft, tc and mounts, and Debian's nftables and faketime. Where
# they cannot run they are left out of the run and reported NOT RUN here, never
# counted as passed; as root they always run (and fail with the reason if the lab
# cannot be made).
# HOLDPOINT_SKIP_LAB=1 leaves it out on purpose.
not_run=()
if [[ "${HOLDPOINT_SKIP_LAB:-}" != "1" && "$(id -u)" == "0" ]]; then
    bash ops/lab-tools.sh
else
    reason="not root"
    [[ "${HOLDPOINT_SKIP_LAB:-}" == "1" ]] && reason="HOLDPOINT_SKIP_LAB=1"
    echo "test: NOT RUN: the lab tests (integration partition::, clocks::, disk::): $reason"
    export HOLDPOINT_SKIP_LAB=1
    not_run+=(partition clocks disk)
fi

# The version-floor test (tests/integration/compat.rs) needs a nats-server older
# than the floor: Debian's 2.9 at /usr/sbin/nats-server, or Debian's package
# unpacked (never installed, nothing started) into .tools/old-nats. Where neither
# works the test is left out and reported NOT RUN here, never counted as passed.
if [[ -z "${HOLDPOINT_OLD_NATS_SERVER:-}" ]]; then
    if /usr/sbin/nats-server --version 2>/dev/null | grep -q 'v2\.9\.'; then
        HOLDPOINT_OLD_NATS_SERVER=/usr/sbin/nats-server
    elif [[ -x .tools/old-nats/usr/sbin/nats-server ]] ||
        { mkdir -p .tools/old-nats &&
            (cd .tools/old-nats && { apt-get download nats-server || { apt-get update -qq && apt-get download nats-server; }; } &&
                dpkg-deb -x nats-server_*.deb .) >.tools/old-nats.log 2>&1; }; then
        HOLDPOINT_OLD_NATS_SERVER="$PWD/.tools/old-nats/usr/sbin/nats-server"
    fi
fi
if [[ -n "${HOLDPOINT_OLD_NATS_SERVER:-}" && -x "$HOLDPOINT_OLD_NATS_SERVER" ]]; then
    export HOLDPOINT_OLD_NATS_SERVER
else
    echo "test: NOT RUN: compat:: (no nats-server older than the floor: Debian's package could not be unpacked, see .tools/old-nats.log)"
    not_run+=(compat)
fi
# What cannot run here is left out of the run (one filter: nextest joins several
# -E expressions with "or").
filter=()
if [[ ${#not_run[@]} -gt 0 ]]; then
    filter=(-E "not test(/^($(IFS='|'; echo "${not_run[*]}"))::/)")
fi

holdpoint_build >/dev/null

status=0
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "${filter[@]}" "$@" || status=$?
else
    skips=()
    for t in "${not_run[@]}"; do skips+=(--skip "$t::"); done
    cargo test --workspace "$@" -- "${skips[@]}" || status=$?
fi
if [[ ${#not_run[@]} -gt 0 ]]; then
    echo "test: NOT RUN: ${not_run[*]/%/::} (see above)"
fi

if [[ "${HOLDPOINT_SKIP_PYTHON:-}" != "1" ]]; then
    # The Python SDK's tests (unit, vectors, and against `holdpoint up`), against
    # the binary just built; from the SDK's directory so the installed package,
    # not the source tree, is what they import.
    py_sdk_python="$PWD/$PY_SDK_VENV/bin/python"
    (cd sdks/python && "$py_sdk_python" -m pytest -q -p no:cacheprovider tests) || status=$?
fi

if [[ "${HOLDPOINT_SKIP_NODE:-}" != "1" ]]; then
    # Against the binary just built (target/debug/holdpoint, or CARGO_TARGET_DIR's).
    # A test that hangs fails after 3 minutes instead of holding the run.
    (cd "$SDK_DIR" && npm run --silent build && node --test --test-concurrency=1 --test-timeout=180000 test/) || status=$?
fi
exit "$status"

#!/usr/bin/env bash
# The project's test command: installs/locates nats-server, builds the
# workspace binaries, then runs the whole test suite. Extra arguments are
# passed to the test runner (cargo nextest run, or cargo test without it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash ops/setup.sh
HOLDPOINT_NATS_SERVER="$(cat .tools/nats-server.path)"
export HOLDPOINT_NATS_SERVER

# The official A2A Python SDK (v1.0 client), pinned, in its own venv, for the
# conformance test tests/python/conformance.py (driven by tests/integration/a2a.rs
# through HOLDPOINT_A2A_PYTHON). HOLDPOINT_SKIP_PYTHON=1 skips it.
A2A_REQUIREMENTS="a2a-sdk==1.3.0 httpx==0.28.1 protobuf==7.36.2 googleapis-common-protos==1.76.0 pydantic==2.14.4"
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
    "$A2A_VENV/bin/python" -c 'import a2a.client, a2a.types.a2a_pb2'
    HOLDPOINT_A2A_PYTHON="$PWD/$A2A_VENV/bin/python"
    export HOLDPOINT_A2A_PYTHON
fi

cargo build --workspace --bins --examples --locked 2>/dev/null || cargo build --workspace --bins --examples

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "$@"
else
    cargo test --workspace "$@"
fi

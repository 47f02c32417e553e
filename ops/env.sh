# shellcheck shell=bash
# The prelude the scripts in ops/ share. Sourced, not run:
#
#   source ops/env.sh              # setup's status line on stdout
#   source ops/env.sh >/dev/null   # without it (warnings and errors still on stderr)
#
# Makes sure a current nats-server is installed (ops/setup.sh) and exports
# HOLDPOINT_NATS_SERVER, the absolute path of that binary, into the shell that
# sources it. Works from any directory; a shell can source it by hand before
# running `holdpoint` or `cargo nextest` itself. Fails (the sourcing `source`
# returns setup's status) when setup fails.
bash "$(dirname "${BASH_SOURCE[0]}")/setup.sh" || return
HOLDPOINT_NATS_SERVER="$(cat "$(dirname "${BASH_SOURCE[0]}")/../.tools/nats-server.path")" || return
export HOLDPOINT_NATS_SERVER

# Builds the workspace's binaries and examples (cargo's progress on stderr) and
# prints the path of the `holdpoint` binary. ops/up.sh, ops/demo.sh and ops/test.sh
# all build this one set: cargo unifies dependency features per build, and
# `cargo run --bin holdpoint` alone would select another feature set and compile
# many dependencies a second time (minutes on 2 cores) after the test build.
holdpoint_build() {
    cargo build --workspace --bins --examples >&2 || return
    printf '%s\n' "${CARGO_TARGET_DIR:-$PWD/target}/debug/holdpoint"
}

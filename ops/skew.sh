#!/usr/bin/env bash
# Version skew: builds another release's `holdpoint` (a commit of this repository
# of the same store format) in a worktree under .tools/skew/, then runs the ignored test
# skew::an_older_and_a_newer_worker_share_one_store with that binary as the older
# worker and this checkout's as the newer (README.md, "Upgrades and version skew").
#
#   ops/skew.sh <commit>   # against any commit of the same store format
#
# Store format 2 (the state stream) began with this release: the releases before
# it (format 1) cannot share a store with it, and `holdpoint migrate` moves a
# store over instead (README.md, "Upgrades and version skew").
#
# The first build of a commit takes as long as a clean build (minutes on 2 cores);
# later runs reuse it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh >/dev/null

if [[ $# -lt 1 ]]; then
    echo "usage: ops/skew.sh <commit of store format 2>" >&2
    exit 2
fi
commit="$(git rev-parse --verify "$1^{commit}")"
dir=".tools/skew/${commit:0:12}"
if [[ ! -d "$dir" ]]; then
    git worktree add --detach "$dir" "$commit" >/dev/null
fi
echo "skew: building holdpoint at ${commit:0:12} in $dir"
(cd "$dir" && CARGO_TARGET_DIR="$PWD/target" cargo build --bin holdpoint)
old_bin="$PWD/$dir/target/debug/holdpoint"

holdpoint_build >/dev/null
HOLDPOINT_OLD_BIN="$old_bin" cargo nextest run --workspace --run-ignored only \
    -E 'test(=skew::an_older_and_a_newer_worker_share_one_store)'

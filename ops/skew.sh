#!/usr/bin/env bash
# Version skew: builds another release's `holdpoint` (a commit of this repository,
# default OLD below) in a worktree under .tools/skew/, then runs the ignored test
# skew::an_older_and_a_newer_worker_share_one_store with that binary as the older
# worker and this checkout's as the newer (README.md, "Upgrades and version skew").
#
#   ops/skew.sh            # against OLD
#   ops/skew.sh <commit>   # against any commit of the same store format
#
# The first build of a commit takes as long as a clean build (minutes on 2 cores);
# later runs reuse it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/env.sh >/dev/null

# The last commit before the store format was recorded (format 1 implicitly).
OLD=be3180c
commit="$(git rev-parse --verify "${1:-$OLD}^{commit}")"
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

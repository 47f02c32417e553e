#!/usr/bin/env bash
# The long schedule of the partition harness (RELIABILITY.md, "Partitions, slow
# links and skewed clocks"): three nats-servers (R3, sync_interval: always), two
# workers, an ingress, a notifier and the load, each in a network namespace of its
# own on one bridge, through a seeded schedule of faults (leader isolated, 1-2
# split, zombie worker, asymmetric cut, 200 ms / 5 % loss / reordering links,
# worker and ingress clocks 30 s or 10 min off, the notifier cut from every node),
# then the checker over the history.
#
#   ops/partition.sh --minutes 10 --seed 42     # one long run
#   ops/partition.sh --minutes 5                # a random seed (printed)
#
# Needs root (ip netns, nft, tc) and Debian's nftables and faketime (installed
# when missing). Exit status: 0 clean, 1 a violation (or the run failed), 2 NOT
# RUN (the lab cannot be made here; the reason is printed). The output goes to
# target/partition/partition-<time>.log as well as the terminal.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ "$(id -u)" != "0" ]]; then
    echo "NOT RUN: ops/partition.sh needs root (network namespaces, nft, tc)" >&2
    exit 2
fi
source ops/env.sh >/dev/null
bash ops/lab-tools.sh

cargo build --workspace --bins --locked 2>/dev/null || cargo build --workspace --bins

mkdir -p target/partition
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
log="target/partition/partition-$stamp.log"
# Run copies, so a rebuild during the run cannot swap the binaries under it.
cp target/debug/holdpoint "target/partition/holdpoint-$stamp"
cp target/debug/holdpoint-partition "target/partition/holdpoint-partition-$stamp"
HOLDPOINT_BIN="$PWD/target/partition/holdpoint-$stamp"
HOLDPOINT_PARTITION_LOGS="$PWD/target/partition/logs-$stamp"
export HOLDPOINT_BIN HOLDPOINT_PARTITION_LOGS
echo "partition: output in $log, process logs in $HOLDPOINT_PARTITION_LOGS"
set +e
"./target/partition/holdpoint-partition-$stamp" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
rm -f "target/partition/holdpoint-$stamp" "target/partition/holdpoint-partition-$stamp"
exit "$status"

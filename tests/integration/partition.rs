//! The partition harness's short schedule (RELIABILITY.md, "Partitions, slow links
//! and skewed clocks"): a 3-node R3 cluster, two workers, an ingress, a notifier and
//! the load, each in its own network namespace, through every fault kind of
//! `holdpoint_tests::partition::FaultKind` once (seeded; `HOLDPOINT_FAULT_SEED`
//! replays the choices), then the history is checked. The long schedule is
//! `ops/partition.sh`.
//!
//! It needs root (network namespaces, nft, tc) and Debian's `faketime`. Where the
//! lab cannot be made it fails with the reason, unless `HOLDPOINT_SKIP_LAB=1`
//! says to leave it out; `ops/test.sh` then excludes it from the run and prints
//! that it was not run. It never passes without running.

use std::sync::Arc;

use holdpoint_tests::chaos::Rng;
use holdpoint_tests::lab::Lab;
use holdpoint_tests::netcluster::{FAKETIME_LIB, HOSTS, LOAD, in_namespace};
use holdpoint_tests::partition::{self, FaultKind, ScheduleOptions};

fn require_lab() {
    let why_not = Lab::unavailable().or_else(|| {
        (!std::path::Path::new(FAKETIME_LIB).is_file())
            .then(|| format!("{FAKETIME_LIB} is missing (Debian package faketime)"))
    });
    if let Some(why) = why_not {
        panic!(
            "NOT RUN: the partition harness cannot run here: {why}. ops/test.sh leaves it out \
             (and says so) when HOLDPOINT_SKIP_LAB=1"
        );
    }
}

/// Runs `opts` in a lab of its own, checks the history and that the lab is gone.
fn run_checked(opts: ScheduleOptions) {
    let lab = Arc::new(Lab::create(&HOSTS).expect("the lab"));
    let l = lab.clone();
    let (_, report) = in_namespace(&lab, LOAD, move || partition::run(l, opts))
        .expect("the load's namespace")
        .expect("the schedule ran");
    println!("{report}");
    report.assert_clean();
    let prefix = lab.prefix().to_owned();
    drop(lab);
    let left: Vec<String> = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_owned)
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

#[test]
fn every_fault_kind_once_loses_nothing_and_duplicates_nothing() {
    require_lab();
    let (_, seed) = Rng::from_env("HOLDPOINT_FAULT_SEED");
    println!("seed {seed} (HOLDPOINT_FAULT_SEED replays it)");
    run_checked(ScheduleOptions::short(seed));
}

/// The notifier cut from every node (its consumers' pull requests and acks lost,
/// its reads of the endpoints failing), then healed: every event stored reaches
/// the webhook receiver, once per `webhook-id` (the checker's webhook reader), and
/// the rest of the history is clean. Under a minute.
#[test]
fn a_notifier_cut_off_delivers_every_event_after_the_heal() {
    require_lab();
    let (_, seed) = Rng::from_env("HOLDPOINT_FAULT_SEED");
    println!("seed {seed} (HOLDPOINT_FAULT_SEED replays it)");
    run_checked(ScheduleOptions {
        faults: vec![FaultKind::NotifierCut],
        agents: 3,
        ..ScheduleOptions::short(seed)
    });
}

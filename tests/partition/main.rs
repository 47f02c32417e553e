//! `holdpoint-partition`: the long schedule of the partition harness, run by
//! `ops/partition.sh` (RELIABILITY.md, "Partitions, slow links and skewed clocks").
//!
//! ```text
//! holdpoint-partition [--minutes N] [--seed S] [--agents N]
//! ```
//!
//! Builds the network lab (needs root), runs Holdpoint across it, applies faults
//! from the seeded schedule (every kind once, then random kinds) for `--minutes`
//! (default 10), checks the history and prints the figures per fault kind. Exit
//! status: 0 when the check found no violation, 1 when it found one, 2 when the
//! harness could not run here (the reason is printed: "NOT RUN").

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_tests::lab::Lab;
use holdpoint_tests::netcluster::{FAKETIME_LIB, HOSTS, LOAD, in_namespace};
use holdpoint_tests::partition::{self, ScheduleOptions};

fn parse() -> Result<(u64, u64, Option<usize>), String> {
    let mut minutes = 10;
    let mut seed = None;
    let mut agents = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("{name} takes a whole number"))
        };
        match a.as_str() {
            "--minutes" => minutes = value("--minutes")?,
            "--seed" => seed = Some(value("--seed")?),
            "--agents" => agents = Some(value("--agents")? as usize),
            "-h" | "--help" => {
                return Err("holdpoint-partition [--minutes N] [--seed S] [--agents N]".into());
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    let seed =
        seed.unwrap_or_else(|| holdpoint_tests::chaos::Rng::from_env("HOLDPOINT_FAULT_SEED").1);
    Ok((minutes, seed, agents))
}

fn main() -> ExitCode {
    let (minutes, seed, agents) = match parse() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let why_not = Lab::unavailable().or_else(|| {
        (!std::path::Path::new(FAKETIME_LIB).is_file())
            .then(|| format!("{FAKETIME_LIB} is missing (Debian package faketime)"))
    });
    if let Some(why) = why_not {
        eprintln!("NOT RUN: the partition harness cannot run here: {why}");
        return ExitCode::from(2);
    }
    println!("partition: seed {seed}, {minutes} min of faults (--seed {seed} replays the choices)");
    let lab = match Lab::create(&HOSTS) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            eprintln!("NOT RUN: the lab could not be made: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut opts = ScheduleOptions::long(seed, Duration::from_secs(minutes * 60));
    if let Some(a) = agents {
        opts.agents = a.max(1);
    }
    let l = lab.clone();
    let result = in_namespace(&lab, LOAD, move || partition::run(l, opts));
    drop(lab);
    match result {
        Ok(Ok((_, report))) => {
            println!("{report}");
            for v in report.violations.iter().take(60) {
                println!("violation: {v}");
            }
            println!("partition: seed {seed}");
            if report.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Ok(Err(e)) | Err(e) => {
            eprintln!("partition: the run failed: {e:#}");
            ExitCode::from(1)
        }
    }
}

//! `holdpoint-soak`: the long mode of the fault suite, run by `ops/soak.sh`.
//!
//! A whole Holdpoint on a private nats-server (file store) with several
//! `holdpoint worker` processes. In rounds until every target is met (or the time
//! budget runs out): open a batch of blocking questions and approvals, answer them
//! from concurrent HTTP clients (each retrying `503` with the same
//! `Idempotency-Key`; some interactions get a second, racing answer), and
//! meanwhile SIGKILL a random worker at random moments (respawning it) and restart
//! the nats-server once mid-round (SIGKILL or SIGTERM, at random). After each
//! round the workers settle and `holdpoint_tests::chaos::check` verifies the
//! guarantees over the round's interactions, while two live readers (a core
//! subscriber on `hp.evt.>` and a durable consumer on `HP_EVENTS`) count event ids
//! received twice and the effect delay (2xx, or NATS back after an outage, to the
//! first reader seeing the answer's effect; bound 5 s). At the end it prints the
//! figures (kills, restarts, answers, 2xx, lost, duplicated effects, stuck, reader
//! duplicates, effect delay, wall time) and exits 1 if any guarantee was violated
//! or a target was not reached.
//!
//! ```text
//! holdpoint-soak [--answers 10000] [--worker-kills 100] [--nats-restarts 20]
//!                [--workers 3] [--clients 16] [--batch 500] [--max-minutes 45]
//!                [--sync-always] [--seed N]
//! ```

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use holdpoint_bus::Topology;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::chaos::{Batch, ClientOptions, Figures, Rng, Scenario, Verdict, WorkerPool};
use holdpoint_tests::nats::NatsServerOptions;
use holdpoint_tests::readers::ReaderFigures;

/// The longest an answer's effect may take to reach a live reader after its 2xx,
/// counted from when NATS was back if it was away meanwhile.
const EFFECT_DELAY_BOUND: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Args {
    answers: u64,
    worker_kills: u64,
    nats_restarts: u64,
    workers: usize,
    clients: usize,
    batch: usize,
    max_minutes: u64,
    sync_always: bool,
    seed: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        answers: 10_000,
        worker_kills: 100,
        nats_restarts: 20,
        workers: 3,
        clients: 16,
        batch: 500,
        max_minutes: 45,
        sync_always: false,
        seed: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--sync-always" {
            a.sync_always = true;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: {value:?} is not a number"))?;
        match flag.as_str() {
            "--answers" => a.answers = n,
            "--worker-kills" => a.worker_kills = n,
            "--nats-restarts" => a.nats_restarts = n,
            "--workers" => a.workers = (n as usize).max(2),
            "--clients" => a.clients = (n as usize).max(1),
            "--batch" => a.batch = (n as usize).max(10),
            "--max-minutes" => a.max_minutes = n.max(1),
            "--seed" => a.seed = Some(n),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

const USAGE: &str = "holdpoint-soak [--answers 10000] [--worker-kills 100] [--nats-restarts 20] \
                     [--workers 3] [--clients 16] [--batch 500] [--max-minutes 45] \
                     [--sync-always] [--seed N]";

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("holdpoint-soak: {e}");
            }
            eprintln!("usage: {USAGE}");
            return ExitCode::from(2);
        }
    };
    match soak(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("holdpoint-soak: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn soak(args: Args) -> anyhow::Result<bool> {
    let (mut rng, seed) = match args.seed {
        Some(s) => (Rng::seeded(s), s),
        None => Rng::from_env("HOLDPOINT_FAULT_SEED"),
    };
    println!("soak: {args:?}, seed {seed}");
    let ack_wait = Duration::from_secs(1);
    let outcome_timeout = Duration::from_secs(2);
    // A request is answered within its outcome timeout; allow the machine a margin.
    let bound = outcome_timeout + Duration::from_secs(3);
    let mut app = TestApp::start_with(AppOptions {
        topo: Topology {
            ack_wait,
            ..Topology::default()
        },
        workers: 0,
        outcome_timeout,
        nats: NatsServerOptions::default().sync_always(args.sync_always),
        ..AppOptions::default()
    })
    .await;
    println!(
        "soak: nats-server {} (store {}), {} worker processes",
        app.nats.url(),
        app.nats.store_dir().display(),
        args.workers
    );
    let mut pool = WorkerPool::start(&mut app, args.workers);
    let started = Instant::now();
    let budget = Duration::from_secs(args.max_minutes * 60);
    let mut totals = Figures::default();
    let mut seen_totals = ReaderFigures::default();
    let (mut kills_sigkill, mut kills_sigterm) = (0u64, 0u64);
    let mut outage_503 = 0u64;
    let orgs = ["acme", "globex", "initech"];
    let mut round = 0usize;
    loop {
        let restarts = kills_sigkill + kills_sigterm;
        let done = totals.answers >= args.answers
            && pool.kills >= args.worker_kills
            && restarts >= args.nats_restarts;
        if done || started.elapsed() >= budget {
            break;
        }
        round += 1;
        let org = orgs[round % orgs.len()];
        let approvals = args.batch * 15 / 100;
        let scenario = Scenario {
            batches: vec![Batch::new(org, args.batch - approvals, approvals)],
            open_parallel: 16,
            race: 0.15,
            clients: ClientOptions {
                clients: args.clients,
                pace: (Duration::ZERO, Duration::from_millis(30)),
                retry_pause: (Duration::from_millis(100), Duration::from_millis(400)),
                request_bound: bound,
                give_up_after: Duration::from_secs(120),
                stop: None,
            },
            settle: Duration::from_secs(120),
            effect_delay_bound: EFFECT_DELAY_BOUND,
        };
        let mut run = scenario.start(&app, &mut rng).await?;
        let (progress, n_jobs) = (run.progress.clone(), run.jobs);
        let mut outages = Vec::new();
        // One nats-server restart per round while restarts are wanted, at a random
        // point of the round's answers.
        let mut restart_at =
            (restarts < args.nats_restarts).then(|| n_jobs * (20 + rng.below(50)) / 100);
        let round_kills = pool.kills;
        let mut outage = String::from("no nats restart");
        let round_started = Instant::now();
        while !progress.finished.load(Ordering::SeqCst) {
            tokio::time::sleep(rng.between(Duration::from_millis(80), Duration::from_millis(400)))
                .await;
            if progress.finished.load(Ordering::SeqCst) {
                break;
            }
            if restart_at.is_some_and(|n| progress.jobs_done.load(Ordering::SeqCst) >= n) {
                restart_at = None;
                let kill = rng.chance(0.5);
                let before_503 = progress.unavailable.load(Ordering::SeqCst);
                let down = Instant::now();
                if kill {
                    app.nats.kill().await;
                    kills_sigkill += 1;
                } else {
                    app.nats.stop().await;
                    kills_sigterm += 1;
                }
                tokio::time::sleep(
                    rng.between(Duration::from_millis(300), Duration::from_millis(3000)),
                )
                .await;
                // A worker may also die while NATS is away.
                if rng.chance(0.3) {
                    pool.kill_random(&mut app, &mut rng);
                    pool.spawn(&mut app);
                }
                let away = Instant::now();
                app.nats.try_restart().await?;
                outages.push((down, Instant::now()));
                outage = format!(
                    "nats {} after {} of {n_jobs} answers, restarted in {:?}",
                    if kill { "SIGKILL" } else { "SIGTERM" },
                    progress.jobs_done.load(Ordering::SeqCst),
                    away.elapsed()
                );
                outage_503 += progress.unavailable.load(Ordering::SeqCst) - before_503;
                continue;
            }
            pool.kill_random(&mut app, &mut rng);
            tokio::time::sleep(rng.between(Duration::ZERO, Duration::from_millis(80))).await;
            pool.spawn(&mut app);
        }
        let results = run.results().await?;
        let flow = round_started.elapsed();
        if !pool.all_running(&mut app) {
            totals
                .violations
                .push(format!("round {round}: a worker died by itself"));
        }
        let Verdict { mut figures, seen } = run.judge(&app, &scenario, &results, &outages).await?;
        println!(
            "round {round:>3} ({org}, {:>6.1}s flow, {:>3} kills, {outage}): {figures}\n          {seen}",
            flow.as_secs_f64(),
            pool.kills - round_kills
        );
        figures.violations.extend(seen.violations.iter().cloned());
        seen_totals.add(&seen);
        for v in figures.violations.iter().take(20) {
            println!("  VIOLATION {v}");
        }
        totals.add(&figures);
    }
    let wall = started.elapsed();
    let restarts = kills_sigkill + kills_sigterm;
    println!();
    println!(
        "soak figures (seed {seed}, {round} rounds, wall time {:.0?})",
        wall
    );
    println!(
        "  worker processes:     {} (SIGKILLs {})",
        args.workers, pool.kills
    );
    println!(
        "  nats-server restarts: {restarts} (SIGKILL {kills_sigkill}, SIGTERM {kills_sigterm}); \
         503 answers while it was away or recovering: {outage_503}"
    );
    println!("  interactions:         {}", totals.targets);
    println!(
        "  answers sent:         {} ({} HTTP requests with retries)",
        totals.answers, totals.requests
    );
    println!("  2xx:                  {}", totals.ok);
    println!("  409 (race lost):      {}", totals.conflicts);
    println!("  503 (retried):        {}", totals.unavailable);
    println!("  hung requests:        {}", totals.hangs);
    println!("  lost:                 {}", totals.lost);
    println!("  duplicated effects:   {}", totals.duplicated);
    println!("  missing effects:      {}", totals.missing_effects);
    println!("  stuck:                {}", totals.stuck);
    println!("  event-id conflicts:   {}", totals.id_conflicts);
    println!(
        "  events checked:       {} (of these interactions)",
        totals.events
    );
    println!("  longest request:      {:?}", totals.max_request);
    println!(
        "  core subscriber:      {} events, {} republished again (same Nats-Sequence, \
         dropped), {} ids received twice",
        seen_totals.core_events, seen_totals.core_repeats, seen_totals.core_duplicates
    );
    println!(
        "  durable consumer:     {} deliveries, {} ids stored twice",
        seen_totals.durable_events, seen_totals.durable_duplicates
    );
    println!(
        "  effects unseen:       {} (by either reader)",
        seen_totals.unseen_effects
    );
    println!(
        "  longest effect delay: {:?} (2xx, or NATS back, to the first reader seeing it; bound {:?})",
        seen_totals.max_effect_delay, EFFECT_DELAY_BOUND
    );
    println!("  violations:           {}", totals.violations.len());
    let reached = totals.answers >= args.answers
        && pool.kills >= args.worker_kills
        && restarts >= args.nats_restarts;
    if !reached {
        println!("  TARGETS NOT REACHED within {} minutes", args.max_minutes);
    }
    let clean = totals.violations.is_empty() && reached;
    println!(
        "  result:               {}",
        if clean { "PASS" } else { "FAIL" }
    );
    Ok(clean)
}

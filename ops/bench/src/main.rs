//! `holdpoint-bench`: raw JetStream and Holdpoint end to end, side by side, in one
//! run against fresh local nats-servers with file storage.
//!
//! For each fsync setting (the server's default, then `sync_interval: always`):
//! 1. the raw baseline on a stream configured like `HP_COMMANDS`: asynchronous
//!    publish with `Nats-Msg-Id` (messages/s) and synchronous publish (messages/s,
//!    round trip p50/p99), 128-byte payloads; then the commit path's ceiling on
//!    the same server: a transition (a 700-byte record by compare-and-set plus
//!    three 350-byte events) as four separate publishes, and as atomic batches of
//!    32 transitions (`holdpoint_bus::batch`), in transitions/s;
//! 2. Holdpoint (`holdpoint ingress` and `holdpoint worker` as separate release
//!    processes, people authenticated with real EdDSA JWTs): the time to open the
//!    pending pool (questions and approvals on blocking sessions), the latency of
//!    reading one interaction and listing a page with the pool pending, answers/s at
//!    saturation (closed loop), and at 25% and 50% of saturation (open loop, so
//!    latency is measured from each request's scheduled time: no coordinated
//!    omission) the latency of answer -> 204 and answer -> its `tool-call-finished`
//!    seen by a subscriber; with one worker, then two;
//! 3. peak RSS (VmHWM) of the ingress and the worker processes;
//! 4. with one worker, 100 approvals answered as one `POST /v1/answers` against
//!    100 single `approve` requests, sent one after another and all at once.
//!
//! It prints one table per fsync setting and the ratios that matter.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use async_nats::jetstream::{self, stream};
use clap::Parser;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use hdrhistogram::Histogram;
use holdpoint_cli::localnats::{self, free_port};
use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{QuestionSpec, SessionMode};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use tokio::sync::Mutex;

mod jwt;
mod load;
mod raw;
mod report;
mod servers;
mod tenants;

use jwt::*;
use load::*;
use raw::*;
use report::*;
use servers::*;

/// Benchmark options.
#[derive(Debug, Parser)]
#[command(name = "holdpoint-bench")]
struct Args {
    /// `short` (about a minute, for a quick check) or `full` (about 6 minutes).
    #[arg(long, default_value = "short")]
    mode: String,
    /// The holdpoint binary (a release build).
    #[arg(
        long,
        env = "HOLDPOINT_BIN",
        default_value = "target/release/holdpoint"
    )]
    holdpoint_bin: PathBuf,
    /// The nats-server binary.
    #[arg(
        long,
        env = "HOLDPOINT_NATS_SERVER",
        default_value = ".tools/bin/nats-server"
    )]
    nats_server: PathBuf,
    /// Only run this setting: `default` or `always` (one nats-server, that fsync
    /// setting), or `cluster` (a 3-node cluster, R3 streams, `sync_interval: always`,
    /// run only when named), or `tenants` (the listing's cost as the pending
    /// interactions of 1,000 organisations grow; see `tenants.rs`).
    #[arg(long)]
    only: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    raw_async: usize,
    raw_sync: usize,
    pool: usize,
    saturation: Duration,
    latency: Duration,
    clients: usize,
    /// Rounds of the batch figure (a batch of 100, 100 singles in turn, 100 at once).
    batch_rounds: usize,
}

impl Plan {
    fn of(mode: &str) -> anyhow::Result<Self> {
        Ok(match mode {
            "short" => Plan {
                raw_async: 20_000,
                raw_sync: 1_000,
                pool: 6_000,
                saturation: Duration::from_secs(2),
                latency: Duration::from_secs(2),
                clients: 32,
                batch_rounds: 5,
            },
            "full" => Plan {
                raw_async: 200_000,
                raw_sync: 5_000,
                pool: 100_000,
                saturation: Duration::from_secs(10),
                latency: Duration::from_secs(10),
                clients: 64,
                batch_rounds: 20,
            },
            other => bail!("--mode is short or full, not {other}"),
        })
    }
}

struct Report {
    fsync: &'static str,
    version: String,
    raw: Raw,
    commits: Commits,
    open: (usize, Duration),
    get_one: [u64; 2],
    list_page: [u64; 2],
    runs: Vec<(usize, f64, u64, Lat, Lat)>,
    rss: [(f64, f64); 2],
    /// CPU seconds per answer during the one-worker saturation phase:
    /// nats-server(s), ingress, worker, load generator.
    cpu: [f64; 4],
    /// CPU seconds per answer of each nats-server in that phase (a cluster's
    /// nodes, in start order).
    cpu_nodes: Vec<f64>,
    /// Which node (start order) leads each of the streams an answer writes (a
    /// cluster only).
    leaders: Vec<(&'static str, Option<usize>)>,
    /// Messages clients sent to nats-server per answer in that phase (one server).
    ops: Option<f64>,
    /// Messages stored per answer in that phase (one server): the PubAcks an
    /// answer costs.
    stored: Option<f64>,
    /// Transitions per atomic batch the worker committed in that phase (its
    /// `holdpoint_commit_transitions` histogram).
    per_batch: Option<f64>,
    /// One `POST /v1/answers` of 100 against 100 single answers (one worker).
    batch: BatchFigure,
    /// Per worker count: the effects not yet in the public streams when the
    /// saturation phase ended (see [`effects_backlog`]), and how long they took
    /// to drain (`None`: longer than [`DRAIN_DEADLINE`]).
    backlogs: Vec<(usize, Option<u64>, Option<Duration>)>,
    /// How long the saturation phase ran.
    saturation: Duration,
}

/// How long the benchmark waits for the effects left behind by saturation.
const DRAIN_DEADLINE: Duration = Duration::from_secs(120);

async fn holdpoint_run(args: &Args, plan: &Plan, setting: Setting) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir()?;
    let (nats, url, version, monitor) = start_nats(&args.nats_server, dir.path(), setting).await?;
    println!(
        "── {}: {version}, store in {}",
        setting.name(),
        dir.path().display()
    );
    let raw = raw_baseline(&url, plan, setting.replicas()).await?;
    let commits = commit_baseline(&url, plan, setting.replicas()).await?;
    let replicas = setting.replicas().to_string();

    let key = holdpoint_cli::devtoken::DevKey::load_or_create(&dir.path().join("jwt"))?;
    let token = key.token("bench", "bench-person", "org", 3600)?;
    let (api, admin) = (free_port()?, free_port()?);
    let spawn = |args_: Vec<String>| -> anyhow::Result<Proc> {
        Ok(Proc {
            child: Command::new(&args.holdpoint_bin)
                .args(args_)
                .env(
                    "RUST_LOG",
                    std::env::var("HOLDPOINT_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
                )
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {}", args.holdpoint_bin.display()))?,
        })
    };
    let ingress = spawn(ingress_args(&url, (api, admin), &key, setting.replicas()))?;
    // Each worker serves /metrics, where the bench reads how many partitions it owns.
    let worker_args = |admin: u16| {
        vec![
            "worker".to_owned(),
            "--nats-url".into(),
            url.clone(),
            "--admin-listen".into(),
            format!("127.0.0.1:{admin}"),
            "--replicas".into(),
            replicas.clone(),
        ]
    };
    let mut worker_admins = vec![free_port()?];
    let mut workers = vec![spawn(worker_args(worker_admins[0]))?];
    localnats::wait_listening(api, WAIT_LISTENING).await?;

    let rt = Runtime::connect(&url, "bench")
        .await?
        .with_timeout(Duration::from_secs(60));
    let (items, took) = open_pool(&rt, plan.pool, 0).await?;
    let opened = items.len();
    let t = Arc::new(Target {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()?,
        base: format!("http://127.0.0.1:{api}"),
        token,
    });

    // Reads with the whole pool pending.
    let mut get_h = hist();
    let mut list_h = hist();
    for p in items.iter().take(50) {
        let s = Instant::now();
        let r = t
            .http
            .get(format!("{}/v1/interactions/{}", t.base, p.id))
            .bearer_auth(&t.token)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("GET one answered {}", r.status());
        }
        get_h.record(s.elapsed().as_micros() as u64).ok();
    }
    for _ in 0..5 {
        let s = Instant::now();
        let r = t
            .http
            .get(format!("{}/v1/interactions?limit=50", t.base))
            .bearer_auth(&t.token)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("list answered {}", r.status());
        }
        let _ = r.bytes().await?;
        list_h.record(s.elapsed().as_micros() as u64).ok();
    }
    let rss_after_pool = [memory(ingress.pid()), memory(workers[0].pid())];
    println!(
        "  opened {opened} in {:.1}s; GET one p50 {} ms; list page p50 {} ms; RSS ingress {:.0} MiB, worker {:.0} MiB",
        took.as_secs_f64(),
        ms(get_h.value_at_quantile(0.5)),
        ms(list_h.value_at_quantile(0.5)),
        rss_after_pool[0].1,
        rss_after_pool[1].1
    );

    // The batch figure, with one worker, on approvals of its own.
    let batch = batch_figure(&t, &rt, plan.batch_rounds, 50_000_000).await?;
    println!(
        "  batch of {BATCH}: p50 {} ms; {BATCH} singles in turn p50 {} ms, all at once p50 {} ms ({} not 204)",
        ms(batch.batch[0]),
        ms(batch.sequential[0]),
        ms(batch.concurrent[0]),
        batch.errors
    );

    // tool-call-finished observer (a core NATS subscriber on the events subjects).
    let finished: Arc<Mutex<HashMap<String, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let nc = holdpoint_bus::connect(&url, "bench-observer").await?;
    let obs = jetstream::new(nc.clone());
    let mut sub = nc.subscribe("hp.evt.bench.*.tool-call-finished").await?;
    let f2 = finished.clone();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let now = Instant::now();
            if let Ok(v) = serde_json::from_slice::<Value>(&m.payload)
                && let Some(id) = v["data"]["interactionId"].as_str()
            {
                f2.lock().await.entry(id.to_owned()).or_insert(now);
            }
        }
    });

    let mut pool = Arc::new(Pool {
        items,
        next: AtomicUsize::new(0),
    });
    let mut runs = Vec::new();
    let mut backlogs = Vec::new();
    let mut cpu = [0.0f64; 4];
    let mut cpu_nodes = Vec::new();
    let mut ops = None;
    let mut stored = None;
    let mut per_batch = None;
    for n_workers in [1usize, 2] {
        while workers.len() < n_workers {
            let admin = free_port()?;
            workers.push(spawn(worker_args(admin))?);
            worker_admins.push(admin);
        }
        let took = balanced(&t.http, &worker_admins, &rt).await?;
        println!(
            "  {n_workers} worker(s) own every partition between them after {:.1}s",
            took.as_secs_f64()
        );
        let pids = [
            nats.pids(),
            vec![ingress.pid()],
            vec![workers[0].pid()],
            vec![std::process::id()],
        ];
        let cpu_of = |ps: &[u32]| ps.iter().map(|p| cpu_secs(*p)).sum::<f64>();
        let before: Vec<f64> = pids.iter().map(|ps| cpu_of(ps)).collect();
        let nodes_before: Vec<f64> = pids[0].iter().map(|p| cpu_secs(*p)).collect();
        let in_before = messages_in(&t.http, monitor).await;
        let stored_before = messages_stored(&t.http, monitor).await;
        let answered_before = pool.next.load(Ordering::Relaxed);
        let batches_before = commit_histogram(&t.http, worker_admins[0]).await;
        let (sat, sat_errors) = saturation(&t, &pool, plan).await;
        if n_workers == 1 {
            let answered = (pool.next.load(Ordering::Relaxed) - answered_before).max(1) as f64;
            for (i, ps) in pids.iter().enumerate() {
                cpu[i] = (cpu_of(ps) - before[i]) / answered;
            }
            cpu_nodes = pids[0]
                .iter()
                .zip(&nodes_before)
                .map(|(p, b)| (cpu_secs(*p) - b) / answered)
                .collect();
            if let (Some(a), Some(b)) = (in_before, messages_in(&t.http, monitor).await) {
                ops = Some(b.saturating_sub(a) as f64 / answered);
            }
            if let (Some(a), Some(b)) = (stored_before, messages_stored(&t.http, monitor).await) {
                stored = Some(b.saturating_sub(a) as f64 / answered);
            }
            if let (Some((s0, c0)), Some((s1, c1))) = (
                batches_before,
                commit_histogram(&t.http, worker_admins[0]).await,
            ) && c1 > c0
            {
                per_batch = Some((s1 - s0) / (c1 - c0));
            }
        }
        // Saturation drives answers (their 204s) faster than sourcing may store
        // their effects in the public streams: measure what is left behind, and
        // start the open-loop phases only once it has drained, so that they
        // measure latency at that load and not the tail of this phase.
        let behind = effects_backlog(&obs).await;
        let drain_from = Instant::now();
        let drained = loop {
            match effects_backlog(&obs).await {
                Some(0) => break Some(drain_from.elapsed()),
                _ if drain_from.elapsed() > DRAIN_DEADLINE => break None,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        println!(
            "  {n_workers} worker(s): effects behind after saturation: {}, drained in {}",
            behind.map_or("unknown".into(), |b| b.to_string()),
            drained.map_or(format!("more than {DRAIN_DEADLINE:?}"), |d| format!(
                "{d:.2?}"
            ))
        );
        backlogs.push((n_workers, behind, drained));
        let need = ((sat * 0.75) * plan.latency.as_secs_f64()) as usize + 100;
        if pool.left() < need {
            let (more, _) = open_pool(&rt, need, opened + runs.len() * 1_000_000).await?;
            pool = Arc::new(Pool {
                items: more,
                next: AtomicUsize::new(0),
            });
        }
        let l25 = open_loop(&t, &pool, &finished, sat * 0.25, plan.latency).await;
        let l50 = open_loop(&t, &pool, &finished, sat * 0.5, plan.latency).await;
        println!(
            "  {n_workers} worker(s): {sat:.0} answers/s; p99 204 at 25% {} ms",
            ms(l25.to_204[2])
        );
        runs.push((n_workers, sat, sat_errors, l25, l50));
    }
    let rss = [memory(ingress.pid()), memory(workers[0].pid())];
    let leaders = stream_leaders(&nats, &url).await;
    drop(workers);
    drop(ingress);
    drop(nats);
    Ok(Report {
        backlogs,
        saturation: plan.saturation,
        fsync: setting.name(),
        version,
        raw,
        commits,
        open: (opened, took),
        get_one: [get_h.value_at_quantile(0.5), get_h.value_at_quantile(0.99)],
        list_page: [
            list_h.value_at_quantile(0.5),
            list_h.value_at_quantile(0.99),
        ],
        runs,
        rss,
        cpu,
        cpu_nodes,
        leaders,
        ops,
        stored,
        per_batch,
        batch,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plan = Plan::of(&args.mode)?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    println!(
        "holdpoint-bench --mode {}: {cores} cores, {mem:.1} GiB; plan {plan:?}",
        args.mode
    );
    let started = Instant::now();
    if args.only.as_deref() == Some("tenants") {
        tenants::tenants_run(&args).await?;
        println!("\nran in {:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let mut reports = Vec::new();
    for setting in [Setting::Default, Setting::Always, Setting::Cluster] {
        let wanted = match args.only.as_deref() {
            Some(o) => o == setting.name(),
            // The cluster runs only when asked for: three servers on two cores.
            None => setting != Setting::Cluster,
        };
        if wanted {
            reports.push(holdpoint_run(&args, &plan, setting).await?);
        }
    }
    if reports.is_empty() {
        bail!("--only is default, always or cluster");
    }
    let tmp = tempfile::tempdir()?;
    let jwt = jwt_costs(tmp.path(), if args.mode == "full" { 5_000 } else { 500 }).await?;
    for r in &reports {
        print(r);
    }
    println!("\n### JWT verification (one core, keys cached)\n");
    println!("| algorithm | µs per verification |");
    println!("|---|---|");
    for (name, us) in jwt {
        println!("| {name} | {us:.1} |");
    }
    println!("\nran in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

//! `holdpoint-bench`: raw JetStream and Holdpoint end to end, side by side, in one
//! run against fresh local nats-servers with file storage.
//!
//! For each fsync setting (the server's default, then `sync_interval: always`):
//! 1. the raw baseline on a stream configured like `HP_COMMANDS`: asynchronous
//!    publish with `Nats-Msg-Id` (messages/s) and synchronous publish (messages/s,
//!    round trip p50/p99), 128-byte payloads;
//! 2. Holdpoint (`holdpoint ingress` and `holdpoint worker` as separate release
//!    processes, people authenticated with real EdDSA JWTs): the time to open the
//!    pending pool (questions and approvals on blocking sessions), the latency of
//!    reading one interaction and listing a page with the pool pending, answers/s at
//!    saturation (closed loop), and at 25% and 50% of saturation (open loop, so
//!    latency is measured from each request's scheduled time: no coordinated
//!    omission) the latency of answer -> 204 and answer -> its `tool-call-finished`
//!    seen by a subscriber; with one worker, then two;
//! 3. peak RSS (VmHWM) of the ingress and the worker processes.
//!
//! It prints one table per fsync setting and the ratios that matter.

use std::collections::HashMap;
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
use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{QuestionSpec, SessionMode};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use tokio::sync::Mutex;

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
    /// Only run this fsync setting (`default` or `always`).
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
            },
            "full" => Plan {
                raw_async: 200_000,
                raw_sync: 5_000,
                pool: 100_000,
                saturation: Duration::from_secs(10),
                latency: Duration::from_secs(10),
                clients: 64,
            },
            other => bail!("--mode is short or full, not {other}"),
        })
    }
}

struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_secs(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after the name.
    (tick(11) + tick(12)) / 100.0
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `VmHWM` (peak RSS) and `VmRSS` of a process, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

async fn wait_port(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("nothing listens on {port}")
}

async fn start_nats(
    bin: &Path,
    dir: &Path,
    sync_always: bool,
) -> anyhow::Result<(Proc, String, String)> {
    let port = free_port()?;
    let store = dir.join("store");
    let conf = dir.join("nats.conf");
    let sync = if sync_always {
        "\n  sync_interval: always"
    } else {
        ""
    };
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: \"{}\"{sync}\n}}\n",
            store.display()
        ),
    )?;
    let child = Command::new(bin)
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let p = Proc { child };
    wait_port(port).await?;
    let version = String::from_utf8_lossy(&Command::new(bin).arg("--version").output()?.stdout)
        .trim()
        .to_owned();
    Ok((p, format!("nats://127.0.0.1:{port}"), version))
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("  {msg:<44} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_owned());
    pb
}

#[derive(Debug, Default, Clone)]
struct Raw {
    async_rate: f64,
    sync_rate: f64,
    sync_p50: u64,
    sync_p99: u64,
}

async fn raw_baseline(url: &str, plan: &Plan) -> anyhow::Result<Raw> {
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client);
    js.create_stream(stream::Config {
        name: "BENCH_RAW".into(),
        subjects: vec!["bench.raw.>".into()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await?;
    let payload = bytes::Bytes::from(vec![b'x'; 128]);
    let pb = bar(
        plan.raw_async as u64,
        "raw JetStream async publish + Nats-Msg-Id",
    );
    let started = Instant::now();
    let mut inflight = FuturesUnordered::new();
    for i in 0..plan.raw_async {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("a-{i}").as_str());
        let ack = js
            .publish_with_headers(format!("bench.raw.{}", i % 16), h, payload.clone())
            .await?;
        inflight.push(ack.into_future());
        while inflight.len() >= 4096 {
            if let Some(r) = inflight.next().await {
                r?;
                pb.inc(1);
            }
        }
    }
    while let Some(r) = inflight.next().await {
        r?;
        pb.inc(1);
    }
    let async_rate = plan.raw_async as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let pb = bar(plan.raw_sync as u64, "raw JetStream sync publish");
    let mut h = hist();
    let started = Instant::now();
    for i in 0..plan.raw_sync {
        let mut hd = async_nats::HeaderMap::new();
        hd.insert("Nats-Msg-Id", format!("s-{i}").as_str());
        let t = Instant::now();
        js.publish_with_headers("bench.raw.sync", hd, payload.clone())
            .await?
            .await?;
        h.record(t.elapsed().as_micros() as u64).ok();
        pb.inc(1);
    }
    let sync_rate = plan.raw_sync as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(Raw {
        async_rate,
        sync_rate,
        sync_p50: h.value_at_quantile(0.5),
        sync_p99: h.value_at_quantile(0.99),
    })
}

/// An interaction waiting in the pool: its answer path and body.
#[derive(Debug, Clone)]
struct Pending {
    id: String,
    path: String,
    body: Value,
}

struct Pool {
    items: Vec<Pending>,
    next: AtomicUsize,
}

impl Pool {
    fn take(&self) -> Option<&Pending> {
        self.items.get(self.next.fetch_add(1, Ordering::Relaxed))
    }
    fn left(&self) -> usize {
        self.items
            .len()
            .saturating_sub(self.next.load(Ordering::Relaxed))
    }
}

async fn open_pool(
    rt: &Runtime,
    n: usize,
    offset: usize,
) -> anyhow::Result<(Vec<Pending>, Duration)> {
    let session = format!("bench-{}", uuid::Uuid::new_v4().simple());
    rt.open_session(&session, SessionMode::Blocking).await?;
    let pb = bar(n as u64, "opening pending interactions");
    let started = Instant::now();
    let rt = Arc::new(rt.clone());
    let results: Vec<anyhow::Result<Pending>> = futures::stream::iter(0..n)
        .map(|i| {
            let (rt, session, pb) = (rt.clone(), session.clone(), pb.clone());
            async move {
                let k = i + offset;
                let at = Placement::new(&session, "main", &format!("task-{k}"), "ctx")?;
                let p = if k.is_multiple_of(2) {
                    let id = rt
                        .ask_user(
                            &at,
                            &format!("call-{k}"),
                            vec![
                                QuestionSpec { text: "Which branch?".into(), options: vec!["main".into(), "release".into()], multiple: false, allow_text: false },
                                QuestionSpec { text: "Duplicates?".into(), options: vec!["Delete".into(), "Merge".into(), "Keep both".into()], multiple: false, allow_text: true },
                            ],
                            None,
                        )
                        .await?;
                    Pending {
                        path: format!("/v1/questions/{id}/answer"),
                        id: id.to_string(),
                        body: json!({"answers": [{"options": [0]}, {"options": [2], "text": "Keep both and reconcile nightly."}]}),
                    }
                } else {
                    let id = format!("eff_{k}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
                    rt.hold_for_approval(
                        &at,
                        HoldCall {
                            effect_id: id.clone(),
                            call_id: format!("call-{k}"),
                            server: "github".into(),
                            tool: "create_pull_request".into(),
                            arguments: json!({"repo": "acme/app", "n": k}),
                            reason: None,
                        },
                    )
                    .await?;
                    // Denied, so the blocked call finishes at once (no executor in the loop).
                    Pending { path: format!("/v1/interactions/{id}/approve"), id, body: json!({"approved": false}) }
                };
                pb.inc(1);
                Ok(p)
            }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    let took = started.elapsed();
    pb.finish_and_clear();
    results
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()
        .map(|v| (v, took))
}

#[derive(Debug, Clone, Default)]
struct Lat {
    rate: f64,
    sent: u64,
    to_204: [u64; 4],
    to_finished: [u64; 4],
    errors: u64,
}

struct Target {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Target {
    async fn answer(&self, p: &Pending) -> bool {
        match self
            .http
            .post(format!("{}{}", self.base, p.path))
            .bearer_auth(&self.token)
            .json(&p.body)
            .send()
            .await
        {
            Ok(r) => r.status().as_u16() == 204,
            Err(_) => false,
        }
    }
}

async fn saturation(t: &Arc<Target>, pool: &Arc<Pool>, plan: &Plan) -> (f64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let pb = ProgressBar::new_spinner();
    pb.set_message("saturation (closed loop)");
    let deadline = Instant::now() + plan.saturation;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..plan.clients {
        let (t, pool, done, errors, pb) = (
            t.clone(),
            pool.clone(),
            done.clone(),
            errors.clone(),
            pb.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let Some(p) = pool.take() else { break };
                if t.answer(p).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                pb.inc(1);
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    pb.finish_and_clear();
    let n = done.load(Ordering::Relaxed);
    (
        n as f64 / started.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
    )
}

async fn open_loop(
    t: &Arc<Target>,
    pool: &Arc<Pool>,
    finished: &Arc<Mutex<HashMap<String, Instant>>>,
    rate: f64,
    d: Duration,
) -> Lat {
    let h204 = Arc::new(Mutex::new(hist()));
    let errors = Arc::new(AtomicU64::new(0));
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let total = (d.as_secs_f64() * rate) as u64;
    let pb = bar(total, &format!("open loop at {rate:.0}/s"));
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    let mut scheduled_ids = Vec::new();
    for i in 0..total {
        let at = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(at.into()).await;
        let Some(p) = pool.take() else { break };
        scheduled_ids.push((p.id.clone(), at));
        let (t, h204, errors, pb, p) = (
            t.clone(),
            h204.clone(),
            errors.clone(),
            pb.clone(),
            p.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let ok = t.answer(&p).await;
            let us = at.elapsed().as_micros() as u64;
            if ok {
                h204.lock().await.record(us.max(1)).ok();
            } else {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            pb.inc(1);
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    pb.finish_and_clear();
    // Wait (bounded) for the last tool-call-finished events.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = {
            let f = finished.lock().await;
            scheduled_ids
                .iter()
                .filter(|(id, _)| f.contains_key(id))
                .count()
        };
        if seen >= scheduled_ids.len() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut hf = hist();
    {
        let f = finished.lock().await;
        for (id, at) in &scheduled_ids {
            if let Some(seen) = f.get(id) {
                hf.record(seen.saturating_duration_since(*at).as_micros() as u64 + 1)
                    .ok();
            }
        }
    }
    let h = h204.lock().await;
    let q = |h: &Histogram<u64>| {
        [
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.max(),
        ]
    };
    Lat {
        rate,
        sent: scheduled_ids.len() as u64,
        to_204: q(&h),
        to_finished: q(&hf),
        errors: errors.load(Ordering::Relaxed) + (scheduled_ids.len() as u64 - hf.len()),
    }
}

struct Report {
    fsync: &'static str,
    version: String,
    raw: Raw,
    open: (usize, Duration),
    get_one: [u64; 2],
    list_page: [u64; 2],
    runs: Vec<(usize, f64, u64, Lat, Lat)>,
    rss: [(f64, f64); 2],
    /// CPU seconds per answer during the one-worker saturation phase:
    /// nats-server, ingress, worker, load generator.
    cpu: [f64; 4],
}

async fn holdpoint_run(args: &Args, plan: &Plan, sync_always: bool) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir()?;
    let (nats, url, version) = start_nats(&args.nats_server, dir.path(), sync_always).await?;
    println!(
        "── fsync {}: {version}, store in {}",
        if sync_always { "always" } else { "default" },
        dir.path().display()
    );
    let raw = raw_baseline(&url, plan).await?;

    let key = holdpoint_cli::devtoken::DevKey::load_or_create(&dir.path().join("jwt"))?;
    let token = key.token("bench", "bench-person", "org", 3600)?;
    let (api, admin) = (free_port()?, free_port()?);
    let spawn = |args_: Vec<String>| -> anyhow::Result<Proc> {
        Ok(Proc {
            child: Command::new(&args.holdpoint_bin)
                .args(args_)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {}", args.holdpoint_bin.display()))?,
        })
    };
    let ingress = spawn(vec![
        "ingress".into(),
        "--nats-url".into(),
        url.clone(),
        "--listen".into(),
        format!("127.0.0.1:{api}"),
        "--admin-listen".into(),
        format!("127.0.0.1:{admin}"),
        "--jwt-issuer".into(),
        holdpoint_cli::devtoken::DEV_ISSUER.into(),
        "--jwt-audience".into(),
        holdpoint_cli::devtoken::DEV_AUDIENCE.into(),
        "--jwks-file".into(),
        key.jwks.display().to_string(),
        "--jwt-algorithms".into(),
        "EdDSA".into(),
    ])?;
    let worker_args = vec!["worker".to_owned(), "--nats-url".into(), url.clone()];
    let mut workers = vec![spawn(worker_args.clone())?];
    wait_port(api).await?;

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

    // tool-call-finished observer (a core NATS subscriber on the events subjects).
    let finished: Arc<Mutex<HashMap<String, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let nc = async_nats::connect(&url).await?;
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
    let mut cpu = [0.0f64; 4];
    for n_workers in [1usize, 2] {
        while workers.len() < n_workers {
            workers.push(spawn(worker_args.clone())?);
        }
        let pids = [
            nats.pid(),
            ingress.pid(),
            workers[0].pid(),
            std::process::id(),
        ];
        let before: Vec<f64> = pids.iter().map(|p| cpu_secs(*p)).collect();
        let answered_before = pool.next.load(Ordering::Relaxed);
        let (sat, sat_errors) = saturation(&t, &pool, plan).await;
        if n_workers == 1 {
            let answered = (pool.next.load(Ordering::Relaxed) - answered_before).max(1) as f64;
            for (i, p) in pids.iter().enumerate() {
                cpu[i] = (cpu_secs(*p) - before[i]) / answered;
            }
        }
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
    drop(workers);
    drop(ingress);
    drop(nats);
    Ok(Report {
        fsync: if sync_always { "always" } else { "default" },
        version,
        raw,
        open: (opened, took),
        get_one: [get_h.value_at_quantile(0.5), get_h.value_at_quantile(0.99)],
        list_page: [
            list_h.value_at_quantile(0.5),
            list_h.value_at_quantile(0.99),
        ],
        runs,
        rss,
        cpu,
    })
}

fn print(r: &Report) {
    println!("\n### fsync: {} ({})\n", r.fsync, r.version);
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| raw async publish + Nats-Msg-Id | {:.0} msg/s |",
        r.raw.async_rate
    );
    println!(
        "| raw sync publish | {:.0} msg/s, RTT p50 {} ms, p99 {} ms |",
        r.raw.sync_rate,
        ms(r.raw.sync_p50),
        ms(r.raw.sync_p99)
    );
    println!(
        "| open {} interactions | {:.1} s ({:.0}/s) |",
        r.open.0,
        r.open.1.as_secs_f64(),
        r.open.0 as f64 / r.open.1.as_secs_f64()
    );
    println!(
        "| GET one, {} pending | p50 {} ms, p99 {} ms |",
        r.open.0,
        ms(r.get_one[0]),
        ms(r.get_one[1])
    );
    println!(
        "| list a page of 50, {} pending | p50 {} ms, p99 {} ms |",
        r.open.0,
        ms(r.list_page[0]),
        ms(r.list_page[1])
    );
    for (w, sat, errs, l25, l50) in &r.runs {
        println!("| {w} worker(s): saturation | {sat:.0} answers/s ({errs} errors) |");
        for (name, l) in [("25%", l25), ("50%", l50)] {
            println!(
                "| {w} worker(s) at {name} ({:.0}/s, {} sent) answer→204 | p50 {} / p90 {} / p99 {} / max {} ms |",
                l.rate,
                l.sent,
                ms(l.to_204[0]),
                ms(l.to_204[1]),
                ms(l.to_204[2]),
                ms(l.to_204[3])
            );
            println!(
                "| {w} worker(s) at {name} answer→tool-call-finished | p50 {} / p90 {} / p99 {} / max {} ms ({} missing or failed) |",
                ms(l.to_finished[0]),
                ms(l.to_finished[1]),
                ms(l.to_finished[2]),
                ms(l.to_finished[3]),
                l.errors
            );
        }
    }
    println!(
        "| peak RSS ingress / worker | {:.0} / {:.0} MiB |",
        r.rss[0].0, r.rss[1].0
    );
    println!(
        "| CPU per answer at saturation, 1 worker: nats-server / ingress / worker / load generator | {:.0} / {:.0} / {:.0} / {:.0} µs |",
        r.cpu[0] * 1e6,
        r.cpu[1] * 1e6,
        r.cpu[2] * 1e6,
        r.cpu[3] * 1e6
    );
    let best = r.runs.iter().map(|x| x.1).fold(0.0, f64::max);
    let p50_25 = r.runs.first().map_or(0, |x| x.3.to_204[0]);
    println!(
        "| **ratio** e2e answers/s ÷ raw async msg/s | {:.3} (1/{:.1}) |",
        best / r.raw.async_rate,
        r.raw.async_rate / best.max(1.0)
    );
    println!(
        "| **ratio** answer→204 p50 @25% ÷ raw sync RTT p50 | {:.1} |",
        p50_25 as f64 / r.raw.sync_p50.max(1) as f64
    );
    println!(
        "| **ratio** e2e answers/s ÷ raw sync msg/s | {:.2} |",
        best / r.raw.sync_rate
    );
}

/// Verification cost per algorithm: one token per algorithm, verified `n` times by
/// the ingress's own `Verifier` (keys cached after the first load).
async fn jwt_costs(dir: &Path, n: u32) -> anyhow::Result<Vec<(&'static str, f64)>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use ring::signature::{self, KeyPair as _};
    let rng = ring::rand::SystemRandom::new();
    let ed =
        signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| anyhow::anyhow!("keygen"))?;
    let ed_pub =
        signature::Ed25519KeyPair::from_pkcs8(ed.as_ref()).map_err(|_| anyhow::anyhow!("key"))?;
    let ec_alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let ec = signature::EcdsaKeyPair::generate_pkcs8(ec_alg, &rng)
        .map_err(|_| anyhow::anyhow!("keygen"))?;
    let ec_pair = signature::EcdsaKeyPair::from_pkcs8(ec_alg, ec.as_ref(), &rng)
        .map_err(|_| anyhow::anyhow!("key"))?;
    let ec_pub = ec_pair.public_key().as_ref();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let rsa_pem = std::fs::read(fixtures.join("rsa-test-key.pem"))?;
    let mut rsa_jwk: Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("rsa-test.jwk.json"))?)?;
    rsa_jwk["kid"] = json!("rsa");
    let jwks = json!({"keys": [
        rsa_jwk,
        {"kty": "EC", "crv": "P-256", "kid": "ec", "x": B64.encode(&ec_pub[1..33]), "y": B64.encode(&ec_pub[33..65])},
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": B64.encode(ed_pub.public_key().as_ref())},
    ]});
    let path = dir.join("bench-jwks.json");
    std::fs::write(&path, serde_json::to_vec(&jwks)?)?;
    let verifier = Verifier::new(AuthConfig::new("bench", JwksSource::File(path)))
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let claims = json!({"iss": "bench", "sub": "p", "org": "bench", "exp": 4_000_000_000u64});
    let mut out = Vec::new();
    for (name, alg, kid, key) in [
        (
            "RS256",
            Algorithm::RS256,
            "rsa",
            EncodingKey::from_rsa_pem(&rsa_pem)?,
        ),
        (
            "ES256",
            Algorithm::ES256,
            "ec",
            EncodingKey::from_ec_der(ec.as_ref()),
        ),
        (
            "EdDSA",
            Algorithm::EdDSA,
            "ed",
            EncodingKey::from_ed_der(ed.as_ref()),
        ),
    ] {
        let mut header = Header::new(alg);
        header.kid = Some(kid.into());
        let token = jsonwebtoken::encode(&header, &claims, &key)?;
        verifier
            .verify(&token)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let started = Instant::now();
        for _ in 0..n {
            verifier
                .verify_uncached(&token)
                .await
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        out.push((name, started.elapsed().as_secs_f64() * 1e6 / f64::from(n)));
        if name == "EdDSA" {
            let started = Instant::now();
            for _ in 0..n {
                verifier
                    .verify(&token)
                    .await
                    .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            }
            out.push((
                "any, token seen before (cache hit)",
                started.elapsed().as_secs_f64() * 1e6 / f64::from(n),
            ));
        }
    }
    Ok(out)
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
    let mut reports = Vec::new();
    for sync_always in [false, true] {
        let name = if sync_always { "always" } else { "default" };
        if args.only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        reports.push(holdpoint_run(&args, &plan, sync_always).await?);
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

//! The partition harness: a seeded schedule of network, clock and process faults
//! against a [`NetCluster`] under a steady load, recorded as a [`History`] and
//! judged by [`crate::history::check`]. The short schedule runs in the test suite
//! (`tests/integration/partition.rs`); `ops/partition.sh --minutes N --seed S` runs a
//! long one (`tests/partition/main.rs`).
//!
//! **The load** (threads of the test process in the `ld` namespace): `agents`
//! concurrent agents, each in a loop: open a question or an approval through the
//! runtime client (two organisations), answer it over HTTP as its own person with its
//! own `Idempotency-Key` (retrying `503`s and transport errors with the same key; one
//! answer in seven races a second one from another person), and report the result of
//! an approved call. One opening in twelve asks for a deadline of 5-12 s and is left
//! unanswered (also while a worker's clock is skewed; none from the last fault on). Four readers follow the events: a core subscriber, a durable consumer,
//! `GET /v1/events` per organisation (resumed with `Last-Event-ID`) and a webhook
//! endpoint per organisation (the receiver listens on the notifier's loopback).
//!
//! **The faults** ([`FaultKind`]), each held for long enough for elections
//! (nats-server's Raft election timeout is 4-9 s), pin lapses and `ack_wait` to pass,
//! then healed; the next one starts after a calm pause. Which hosts a fault takes,
//! and the skew of a clock, come from the seed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use async_nats::jetstream;
use futures::StreamExt as _;
use holdpoint_client::{ClientError, Expiry, HoldCall, Placement, Runtime};
use holdpoint_domain::{CallResult, Event, SessionMode};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::chaos::{Rng, two_questions};
use crate::history::{Answered, History, Opened, Reader, Report, Window};
use crate::lab::Lab;
use crate::linkem::{LinkEmulator, Profile};
use crate::load::{AttemptLog, Target, TargetKind};
use crate::netcluster::{
    INGRESS, NODES, NOTIFIER, NetCluster, NetClusterOptions, WORKERS, stream_leader,
};
use crate::readers::{Readers, Seen};

/// What the webhook receiver got: (organisation, event).
type Hooks = Arc<std::sync::Mutex<Vec<(String, Seen)>>>;

/// The organisations the load answers in.
pub const ORGS: [&str; 2] = ["acme", "globex"];
/// The webhook receiver's port on the notifier's loopback.
pub const HOOK_PORT: u16 = 9000;

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// The node leading `HP_COMMANDS` (and, with it, the consumers it leads) cut
    /// from every other host, both ways.
    LeaderIsolated,
    /// A 1-2 split of the nodes: a stream leader alone, the majority without it;
    /// every client still reaches all three nodes.
    MajorityWithoutLeader,
    /// A worker cut from every node while it holds partitions: it comes back still
    /// believing it owns them.
    ZombieWorker,
    /// One direction only: the leader's packets to the other nodes are dropped, or
    /// theirs to it (from the seed).
    Asymmetric,
    /// The links between the ingress and the nodes: 200 ms ± 50 ms, 5 % loss, 25 %
    /// reordered.
    SlowIngress,
    /// The links between the nodes, as above.
    SlowNodes,
    /// A worker restarted with its wall clock 30 s or 10 min off, either way.
    SkewedWorker,
    /// The ingress restarted with its wall clock 30 s or 10 min off, either way.
    SkewedIngress,
    /// The notifier cut from every node (it comes back to consumers whose pull
    /// requests and acks were lost, and to leaders that moved).
    NotifierCut,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::LeaderIsolated,
        FaultKind::MajorityWithoutLeader,
        FaultKind::ZombieWorker,
        FaultKind::Asymmetric,
        FaultKind::SlowIngress,
        FaultKind::SlowNodes,
        FaultKind::SkewedWorker,
        FaultKind::SkewedIngress,
        FaultKind::NotifierCut,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::LeaderIsolated => "leader-isolated",
            FaultKind::MajorityWithoutLeader => "majority-without-leader",
            FaultKind::ZombieWorker => "zombie-worker",
            FaultKind::Asymmetric => "asymmetric",
            FaultKind::SlowIngress => "slow-ingress-links",
            FaultKind::SlowNodes => "slow-node-links",
            FaultKind::SkewedWorker => "skewed-worker-clock",
            FaultKind::SkewedIngress => "skewed-ingress-clock",
            FaultKind::NotifierCut => "notifier-cut",
        }
    }

    fn is_partition(self) -> bool {
        matches!(
            self,
            FaultKind::LeaderIsolated
                | FaultKind::MajorityWithoutLeader
                | FaultKind::ZombieWorker
                | FaultKind::Asymmetric
                | FaultKind::NotifierCut
        )
    }
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    /// Drives every choice.
    pub seed: u64,
    /// The faults in order; see [`ScheduleOptions::short`] and
    /// [`ScheduleOptions::long`].
    pub faults: Vec<FaultKind>,
    /// Keep drawing faults until this much time has passed (long runs); `None`:
    /// exactly [`ScheduleOptions::faults`].
    pub budget: Option<Duration>,
    /// How long a partition is held (random in the range).
    pub partition_hold: (Duration, Duration),
    /// How long a degraded link or a skewed clock is held.
    pub other_hold: (Duration, Duration),
    /// The calm pause before each fault.
    pub calm: (Duration, Duration),
    /// Concurrent agents.
    pub agents: usize,
    /// The cluster's settings.
    pub cluster: NetClusterOptions,
}

impl ScheduleOptions {
    /// Every kind once, in an order from `seed`, held briefly: under 3 minutes.
    pub fn short(seed: u64) -> ScheduleOptions {
        let mut rng = Rng::seeded(seed ^ 0x5c4e_d01e);
        let mut faults = FaultKind::ALL.to_vec();
        for i in (1..faults.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            faults.swap(i, j);
        }
        ScheduleOptions {
            seed,
            faults,
            budget: None,
            partition_hold: (Duration::from_secs(10), Duration::from_secs(11)),
            other_hold: (Duration::from_secs(6), Duration::from_secs(7)),
            calm: (Duration::from_millis(1500), Duration::from_millis(2500)),
            agents: 6,
            cluster: NetClusterOptions::default(),
        }
    }

    /// Random kinds (every kind once first) until `budget` has passed, held longer.
    pub fn long(seed: u64, budget: Duration) -> ScheduleOptions {
        ScheduleOptions {
            budget: Some(budget),
            partition_hold: (Duration::from_secs(12), Duration::from_secs(30)),
            other_hold: (Duration::from_secs(10), Duration::from_secs(25)),
            calm: (Duration::from_secs(3), Duration::from_secs(10)),
            agents: 8,
            ..ScheduleOptions::short(seed)
        }
    }
}

/// A fault in force, and how to heal it.
enum Active {
    Cut,
    Link(LinkEmulator),
    Skew(String),
}

/// The shared state of the load.
struct Load {
    history: Mutex<History>,
    stop: AtomicBool,
    last_ok: std::sync::Mutex<Option<Instant>>,
    ok: AtomicU64,
    /// Set from the last fault on: no more deadlines, so the run ends soon after.
    winding_down: AtomicBool,
    http: reqwest::Client,
    base: String,
    request_bound: Duration,
    give_up: Duration,
}

/// Runs a whole schedule on `lab` (call it inside the lab's `ld` namespace, see
/// [`crate::netcluster::in_namespace`]) and returns the history and its check.
///
/// # Errors
/// When the cluster does not start, or a fault cannot be applied or healed.
pub async fn run(lab: Arc<Lab>, opts: ScheduleOptions) -> Result<(History, Report)> {
    let started = Instant::now();
    let mut rng = Rng::seeded(opts.seed);
    let mut cluster = NetCluster::start(lab.clone(), opts.cluster.clone()).await?;
    println!(
        "partition: cluster up in {:.1} s (namespaces {}-*, logs in {})",
        started.elapsed().as_secs_f64(),
        lab.prefix(),
        cluster.dir().display()
    );
    let urls = cluster.nats_urls();
    let client = holdpoint_bus::connect(&urls, "partition-load").await?;
    let js = jetstream::new(client.clone());
    let bus = holdpoint_bus::Bus::setup(
        client,
        holdpoint_bus::Topology {
            replicas: 3,
            partitions: opts.cluster.partitions,
            ..holdpoint_bus::Topology::default()
        },
    )
    .await?;

    let watch_stop = CancellationToken::new();
    let watcher = tokio::spawn(watch_sources(
        js.clone(),
        vec![
            bus.topo.events_stream(),
            bus.topo.lanes_stream(),
            bus.topo.audit_stream(),
            bus.topo.commands_stream(),
        ],
        started,
        watch_stop.clone(),
    ));

    // The webhook receiver, on the notifier's loopback, and one endpoint per org.
    let hooks: Hooks = Arc::default();
    let hook_stop = CancellationToken::new();
    let receiver = {
        let (hooks, stop) = (hooks.clone(), hook_stop.clone());
        crate::netcluster::spawn_in_namespace(&lab, NOTIFIER, move || receive_hooks(hooks, stop))?
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()?;
    let base = cluster.base();
    for org in ORGS {
        register_webhook(&http, &base, org).await?;
    }

    let first_sequence = loop {
        if let Ok(mut s) = js.get_stream(bus.topo.events_stream()).await
            && let Ok(info) = s.info().await
        {
            break info.state.last_sequence + 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let readers = Readers::start(&urls).await;
    let sse_stop = CancellationToken::new();
    let sse: Vec<_> = ORGS
        .iter()
        .map(|org| {
            let progress = Arc::new(AtomicU64::new(0));
            let handle = tokio::spawn(follow_sse(
                http.clone(),
                base.clone(),
                (*org).to_owned(),
                first_sequence - 1,
                progress.clone(),
                sse_stop.clone(),
            ));
            (*org, progress, handle)
        })
        .collect();

    let load = Arc::new(Load {
        history: Mutex::new(History {
            first_sequence,
            ..History::default()
        }),
        stop: AtomicBool::new(false),
        last_ok: std::sync::Mutex::new(None),
        ok: AtomicU64::new(0),
        winding_down: AtomicBool::new(false),
        http: reqwest::Client::builder().build()?,
        base: base.clone(),
        request_bound: opts.cluster.outcome_timeout + Duration::from_secs(7),
        give_up: Duration::from_secs(150),
    });
    let mut runtimes = HashMap::new();
    for org in ORGS {
        let rt = Runtime::with_bus(bus.clone(), org)
            .await
            .context("runtime")?
            .with_timeout(Duration::from_secs(10));
        runtimes.insert(org.to_owned(), rt);
    }
    let runtimes = Arc::new(runtimes);
    let mut agents = tokio::task::JoinSet::new();
    for a in 0..opts.agents {
        agents.spawn(agent(
            a,
            opts.agents,
            load.clone(),
            runtimes.clone(),
            rng.next_u64(),
        ));
    }

    // Warm up: answers flow before the first fault.
    wait_until(Duration::from_secs(120), || {
        load.ok.load(Ordering::SeqCst) >= 10
    })
    .await
    .context("no answers flowed within 120 s of the start")?;

    let mut faults: std::collections::VecDeque<FaultKind> = opts.faults.iter().copied().collect();
    let fault_start = Instant::now();
    loop {
        let kind = match faults.pop_front() {
            Some(k) => k,
            None => match opts.budget {
                Some(b) if fault_start.elapsed() < b => {
                    FaultKind::ALL[rng.below(FaultKind::ALL.len() as u64) as usize]
                }
                _ => break,
            },
        };
        if faults.is_empty() && opts.budget.is_none_or(|b| fault_start.elapsed() >= b) {
            load.winding_down.store(true, Ordering::SeqCst);
        }
        tokio::time::sleep(rng.between(opts.calm.0, opts.calm.1)).await;
        let hold = if kind.is_partition() {
            rng.between(opts.partition_hold.0, opts.partition_hold.1)
        } else {
            rng.between(opts.other_hold.0, opts.other_hold.1)
        };
        let (active, detail) = apply(kind, &mut cluster, &js, &mut rng).await?;
        let start = Instant::now();
        println!(
            "partition: {:>6.1} s {} ({detail}) for {:.1} s",
            started.elapsed().as_secs_f64(),
            kind.name(),
            hold.as_secs_f64()
        );
        tokio::time::sleep(hold).await;
        heal(active, &mut cluster, &load).await?;
        let healed = Instant::now();
        let recovered = wait_ok_after(&load, healed, Duration::from_secs(90)).await;
        println!(
            "partition: {:>6.1} s healed; first 2xx after the heal {}",
            started.elapsed().as_secs_f64(),
            recovered.map_or("none in 90 s".to_owned(), |t| format!(
                "{:.1} s later",
                (t - healed).as_secs_f64()
            ))
        );
        let dead = cluster.dead();
        load.history.lock().await.windows.push(Window {
            kind: kind.name().to_owned(),
            detail: detail.clone(),
            start,
            healed,
            recovered,
        });
        if !dead.is_empty() {
            // A Holdpoint or nats-server process that exits by itself under a
            // network fault is a failure of the run (it is started again so the
            // run goes on).
            let mut h = load.history.lock().await;
            h.stuck.push(format!(
                "after {} ({detail}): {} exited by itself",
                kind.name(),
                dead.join(", ")
            ));
            drop(h);
            for host in dead {
                eprintln!(
                    "partition: {host} exited; its log:\n{}",
                    cluster.log_tail(&host, 40)
                );
                cluster.respawn(&host)?;
            }
        }
    }

    // Let the agents finish what they hold, then settle.
    load.stop.store(true, Ordering::SeqCst);
    while let Some(r) = agents.join_next().await {
        r.context("an agent panicked")?;
    }
    println!(
        "partition: {:.1} s load stopped; settling",
        started.elapsed().as_secs_f64()
    );
    let mut history = std::mem::take(&mut *load.history.lock().await);
    let left = settle(&js, &bus, &history).await;
    if !left.is_empty() {
        history.stuck.push(format!(
            "commands still in the commands stream 90 s after the load stopped: {left:?}"
        ));
    }
    println!(
        "partition: {:.1} s settled",
        started.elapsed().as_secs_f64()
    );
    watch_stop.cancel();
    for silence in watcher.await.unwrap_or_default() {
        let line = format!(
            "source of {} silent from {:.1} s for {:.1} s (lag up to {})",
            silence.stream,
            silence.from.as_secs_f64(),
            silence.lasted.as_secs_f64(),
            silence.max_lag
        );
        println!("partition: {line}");
        if silence.lasted > Duration::from_secs(15) {
            history.notes.push(line);
        }
    }
    history.views = views(&load, &history).await;
    history.stored = stored_events(&bus, first_sequence).await?;
    println!(
        "partition: {:.1} s read {} views and {} stored events",
        started.elapsed().as_secs_f64(),
        history.views.len(),
        history.stored.len()
    );
    let expected_hooks = history.stored.len();
    let (core, durable, at_finish) = readers
        .finish(Duration::from_secs(30), Duration::from_millis(500))
        .await;
    if let Some(d) = at_finish
        && (d.pending > 0 || d.ack_pending > 0)
    {
        history.notes.push(format!(
            "durable consumer at the end: {} pending, {} unacked",
            d.pending, d.ack_pending
        ));
    }
    // SSE: until each stream has reached its organisation's last stored event (bounded).
    let targets: Vec<u64> = sse
        .iter()
        .map(|(org, _, _)| {
            history
                .stored
                .iter()
                .filter(|(_, e)| e.orgid.as_str() == *org)
                .map(|(s, _)| *s)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let _ = wait_until(Duration::from_secs(30), || {
        sse.iter()
            .zip(&targets)
            .all(|((_, p, _), t)| p.load(Ordering::SeqCst) >= *t)
    })
    .await;
    sse_stop.cancel();
    for (_, _, h) in sse {
        if let Ok(seen) = h.await {
            history
                .received
                .extend(seen.into_iter().map(|(org, s)| (Reader::Sse, org, s)));
        }
    }
    // Webhooks: until every stored event has come, for as long as deliveries keep
    // coming. The notifier drains a backlog left by the faults (each endpoint one
    // delivery at a time) at a rate that depends on the machine's load; a backlog
    // still draining is not a loss, a receiver that stops getting anything is.
    let drained = wait_while_advancing(
        WEBHOOK_STALL,
        WEBHOOK_DRAIN_MAX,
        || hooks.lock().map(|h| distinct(&h)).unwrap_or(0),
        expected_hooks,
    )
    .await;
    if drained > Duration::from_secs(30) {
        history.notes.push(format!(
            "webhook receiver: the backlog took {:.1} s to drain after the readers' deadline",
            drained.as_secs_f64()
        ));
    }
    println!(
        "partition: {:.1} s readers done",
        started.elapsed().as_secs_f64()
    );
    hook_stop.cancel();
    let _ = receiver.join();
    history.received.extend(
        hooks
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|(org, s)| (Reader::Webhook, org, s)),
    );
    history
        .received
        .extend(core.into_iter().map(|s| (Reader::Core, String::new(), s)));
    history.received.extend(
        durable
            .into_iter()
            .map(|s| (Reader::Durable, String::new(), s)),
    );
    let report = crate::history::check(&history);
    println!(
        "partition: {:.1} s in all, seed {}",
        started.elapsed().as_secs_f64(),
        opts.seed
    );
    drop(cluster);
    Ok((history, report))
}

fn distinct(h: &[(String, Seen)]) -> usize {
    h.iter()
        .map(|(_, s)| s.id.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// How long the webhook receiver may get nothing new before the run stops
/// waiting for it (its notifier is then stuck, not slow).
const WEBHOOK_STALL: Duration = Duration::from_secs(30);
/// The most a run waits for the webhook backlog, however steadily it drains.
const WEBHOOK_DRAIN_MAX: Duration = Duration::from_secs(300);

/// Waits until `count()` reaches `target`, or it has not grown for `stall`, or
/// `max` has passed; returns how long it waited.
async fn wait_while_advancing(
    stall: Duration,
    max: Duration,
    mut count: impl FnMut() -> usize,
    target: usize,
) -> Duration {
    let start = Instant::now();
    let mut last = count();
    let mut last_change = start;
    while last < target && start.elapsed() < max && last_change.elapsed() < stall {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = count();
        if now != last {
            last = now;
            last_change = Instant::now();
        }
    }
    start.elapsed()
}

async fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> Result<()> {
    let end = Instant::now() + within;
    while !f() {
        if Instant::now() >= end {
            anyhow::bail!("condition not met in {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_ok_after(load: &Load, after: Instant, within: Duration) -> Option<Instant> {
    let end = Instant::now() + within;
    loop {
        let last = *load.last_ok.lock().ok()?;
        if let Some(t) = last
            && t > after
        {
            return Some(t);
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn apply(
    kind: FaultKind,
    cluster: &mut NetCluster,
    js: &jetstream::Context,
    rng: &mut Rng,
) -> Result<(Active, String)> {
    let lab = cluster.lab.clone();
    let leader_of = |stream: &'static str| {
        let js = js.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(5), stream_leader(&js, stream))
                .await
                .ok()
                .flatten()
                .filter(|l| NODES.contains(&l.as_str()))
        }
    };
    let others = |me: &str| -> Vec<&'static str> {
        crate::netcluster::HOSTS
            .iter()
            .copied()
            .filter(|h| *h != me)
            .collect()
    };
    let other_nodes =
        |me: &str| -> Vec<&'static str> { NODES.iter().copied().filter(|n| *n != me).collect() };
    Ok(match kind {
        FaultKind::LeaderIsolated => {
            let l = leader_of("HP_COMMANDS")
                .await
                .unwrap_or_else(|| "n1".into());
            lab.split(&[&l], &others(&l))?;
            (
                Active::Cut,
                format!("{l}, HP_COMMANDS leader, cut from every host"),
            )
        }
        FaultKind::MajorityWithoutLeader => {
            let streams = ["HP_COMMANDS", "HP_EVENTS", "KV_HP_INTERACTIONS"];
            let stream = streams[rng.below(3) as usize];
            let l = leader_of(stream).await.unwrap_or_else(|| "n2".into());
            lab.split(&[&l], &other_nodes(&l))?;
            (
                Active::Cut,
                format!(
                    "{l} ({stream} leader) alone, {} together; clients reach all",
                    other_nodes(&l).join("+")
                ),
            )
        }
        FaultKind::ZombieWorker => {
            let w = WORKERS[rng.below(2) as usize];
            lab.split(&[w], &NODES)?;
            (Active::Cut, format!("{w} cut from every node"))
        }
        FaultKind::NotifierCut => {
            lab.split(&[NOTIFIER], &NODES)?;
            (Active::Cut, "the notifier cut from every node".to_owned())
        }
        FaultKind::Asymmetric => {
            let l = leader_of("HP_COMMANDS")
                .await
                .unwrap_or_else(|| "n3".into());
            if rng.chance(0.5) {
                lab.cut(&[&l], &other_nodes(&l))?;
                (
                    Active::Cut,
                    format!("{l} (HP_COMMANDS leader) -> other nodes dropped; they reach it"),
                )
            } else {
                lab.cut(&other_nodes(&l), &[&l])?;
                (
                    Active::Cut,
                    format!("other nodes -> {l} (HP_COMMANDS leader) dropped; it reaches them"),
                )
            }
        }
        FaultKind::SlowIngress => {
            let em = LinkEmulator::start(&lab, &[INGRESS], &NODES, Profile::WAN, rng.next_u64())?;
            (
                Active::Link(em),
                format!("ingress <-> nodes: {}", Profile::WAN),
            )
        }
        FaultKind::SlowNodes => {
            let em = LinkEmulator::start(&lab, &NODES, &NODES, Profile::WAN, rng.next_u64())?;
            (Active::Link(em), format!("node <-> node: {}", Profile::WAN))
        }
        FaultKind::SkewedWorker => {
            let w = WORKERS[rng.below(2) as usize];
            let skew = [-600, -30, 30, 600][rng.below(4) as usize];
            // Deadlines go on being opened: a worker counts them on the server's
            // clock, whatever its own (RELIABILITY.md, "Clocks").
            cluster.restart(w, skew).await?;
            (
                Active::Skew(w.to_owned()),
                format!("{w} restarted {skew:+} s off"),
            )
        }
        FaultKind::SkewedIngress => {
            let skew = [-600, -30, 30, 600][rng.below(4) as usize];
            cluster.restart(INGRESS, skew).await?;
            (
                Active::Skew(INGRESS.to_owned()),
                format!("ingress restarted {skew:+} s off"),
            )
        }
    })
}

async fn heal(active: Active, cluster: &mut NetCluster, load: &Load) -> Result<()> {
    match active {
        Active::Cut => cluster.lab.heal_cuts()?,
        Active::Link(em) => {
            let stats = em.stop();
            load.history.lock().await.notes.push(format!(
                "link emulator: {} packets, {} dropped, {} reordered",
                stats.packets.load(Ordering::Relaxed),
                stats.dropped.load(Ordering::Relaxed),
                stats.reordered.load(Ordering::Relaxed)
            ));
        }
        Active::Skew(host) => {
            cluster.restart(&host, 0).await?;
        }
    }
    Ok(())
}

/// Retries a runtime call while NATS or the workers are away (timeouts, bus
/// errors), up to `within`.
async fn retry<T, F, Fut>(within: Duration, mut f: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let end = Instant::now() + within;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(ClientError::Timeout(_) | ClientError::Bus(_)) if Instant::now() < end => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_owned()
}

async fn agent(
    me: usize,
    agents: usize,
    load: Arc<Load>,
    runtimes: Arc<HashMap<String, Runtime>>,
    seed: u64,
) {
    let mut rng = Rng::seeded(seed);
    let person = format!("person-{me}");
    let mut sessions: HashMap<&str, String> = HashMap::new();
    while !load.stop.load(Ordering::SeqCst) {
        let org = ORGS[rng.below(2) as usize];
        let rt = &runtimes[org];
        if !sessions.contains_key(org) {
            let s = format!("s-{me}-{}", short_id());
            if retry(Duration::from_secs(60), || {
                rt.open_session(&s, SessionMode::Blocking)
            })
            .await
            .is_err()
            {
                continue;
            }
            sessions.insert(org, s);
        }
        let session = sessions[org].clone();
        let kind = if rng.chance(0.5) {
            TargetKind::Question
        } else {
            TargetKind::Approval
        };
        let expires_in = rng.chance(1.0 / 12.0).then(|| 5 + rng.below(8));
        let expires_in = expires_in.filter(|_| !load.winding_down.load(Ordering::SeqCst));
        let task = format!("task-{}", short_id());
        let Ok(mut at) = Placement::new(&session, "main", &task, "ctx-1") else {
            continue;
        };
        if let Some(secs) = expires_in {
            at = at.with_expiry(Expiry {
                expires_in: Some(secs),
                ..Expiry::default()
            });
        }
        let call = format!("call-{}", short_id());
        let sent = Instant::now();
        let opened = match kind {
            TargetKind::Question => retry(Duration::from_secs(90), || {
                rt.ask_user(&at, &call, two_questions(), Some(uuid::Uuid::new_v4()))
            })
            .await
            .map(|id| id.to_string()),
            TargetKind::Approval => {
                let effect = format!("eff_{}", short_id());
                retry(Duration::from_secs(90), || {
                    rt.hold_for_approval(
                        &at,
                        HoldCall {
                            effect_id: effect.clone(),
                            call_id: call.clone(),
                            server: "github".into(),
                            tool: "create_pull_request".into(),
                            arguments: json!({"repo": "acme/app", "agent": me}),
                            reason: None,
                            editable: false,
                            approvals: None,
                        },
                    )
                })
                .await
                .map(|_| effect)
            }
        };
        let Ok(id) = opened else { continue };
        let target = {
            let mut h = load.history.lock().await;
            h.opened.push(Opened {
                org: org.to_owned(),
                id: id.clone(),
                kind,
                sent,
                done: Instant::now(),
                expires_in,
            });
            h.opened.len() - 1
        };
        if expires_in.is_some() {
            continue;
        }
        let t = Target {
            org: org.to_owned(),
            id: id.clone(),
            kind,
        };
        let v = rng.next_u64();
        let racing = rng.chance(1.0 / 7.0);
        let mut rng2 = Rng::seeded(rng.next_u64());
        let main = answer(
            &load,
            &t,
            target,
            &person,
            format!("k-{id}-{me}"),
            t.body(v),
            &mut rng,
        );
        if racing {
            let racer = format!("person-{}", (me + 1) % agents.max(1));
            let race = answer(
                &load,
                &t,
                target,
                &racer,
                format!("k-{id}-{me}-race"),
                t.body(v + 1),
                &mut rng2,
            );
            futures::join!(main, race);
        } else {
            main.await;
        }
        if kind == TargetKind::Approval {
            report_if_released(&load, rt, &t, target).await;
        }
        tokio::time::sleep(rng.between(Duration::from_millis(20), Duration::from_millis(150)))
            .await;
    }
}

async fn answer(
    load: &Load,
    t: &Target,
    target: usize,
    person: &str,
    key: String,
    body: Value,
    rng: &mut Rng,
) {
    let url = format!("{}{}", load.base, t.path());
    let started = Instant::now();
    let mut attempts = Vec::new();
    loop {
        let sent = Instant::now();
        let reply = tokio::time::timeout(
            load.request_bound,
            load.http
                .post(&url)
                .header("X-Holdpoint-Org", &t.org)
                .header("X-Holdpoint-Person", person)
                .header("Idempotency-Key", &key)
                .json(&body)
                .send(),
        )
        .await;
        let log = match reply {
            Ok(Ok(resp)) => {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                AttemptLog {
                    sent,
                    done: Instant::now(),
                    status,
                    code: body["code"].as_str().unwrap_or("").to_owned(),
                    retry_after,
                }
            }
            Ok(Err(e)) => AttemptLog {
                sent,
                done: Instant::now(),
                status: 0,
                code: format!("transport: {e}"),
                retry_after: None,
            },
            Err(_) => AttemptLog {
                sent,
                done: Instant::now(),
                status: 0,
                code: "no answer within the bound".into(),
                retry_after: None,
            },
        };
        let status = log.status;
        let done = log.done;
        attempts.push(log);
        if (200..300).contains(&status) {
            load.ok.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut last) = load.last_ok.lock() {
                *last = Some(last.map_or(done, |l| l.max(done)));
            }
            break;
        }
        if !(status == 503 || status == 0) || started.elapsed() >= load.give_up {
            break;
        }
        tokio::time::sleep(rng.between(Duration::from_millis(200), Duration::from_millis(500)))
            .await;
    }
    load.history.lock().await.answered.push(Answered {
        target,
        person: person.to_owned(),
        key,
        attempts,
    });
}

/// GET the interaction's view until NATS answers (bounded); `None` if it never did.
async fn view(load: &Load, org: &str, id: &str, within: Duration) -> Option<Value> {
    let end = Instant::now() + within;
    loop {
        let r = load
            .http
            .get(format!("{}/v1/interactions/{id}", load.base))
            .header("X-Holdpoint-Org", org)
            .header("X-Holdpoint-Person", "checker")
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        if let Ok(r) = r
            && r.status().is_success()
            && let Ok(v) = r.json::<Value>().await
        {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn report_if_released(load: &Load, rt: &Runtime, t: &Target, target: usize) {
    let Some(v) = view(load, &t.org, &t.id, Duration::from_secs(60)).await else {
        return;
    };
    if v["state"] != "resolved" {
        return;
    }
    let accepted = retry(Duration::from_secs(90), || {
        rt.report_tool_result(
            &t.id,
            CallResult::Ok {
                output: json!({"ran": t.id}),
            },
        )
    })
    .await
    .is_ok();
    load.history.lock().await.reported.push((target, accepted));
}

/// Waits (bounded, 90 s) until no command is left in the commands stream (its
/// deadline schedules aside), every deadline asked for is due plus 5 s, and the
/// public streams have sourced every effect ([`sourced`]). Returns the commands
/// still there when the bound passed (by subject; a placeholder entry when only
/// the sourcing lagged), empty when settled.
async fn settle(
    js: &jetstream::Context,
    bus: &holdpoint_bus::Bus,
    h: &History,
) -> Vec<(String, u64)> {
    let due = h
        .opened
        .iter()
        .filter_map(|o| o.expires_in.map(|s| o.done + Duration::from_secs(s + 5)))
        .max();
    let filter = format!("{}.cmd.>", bus.topo.subject_prefix);
    let end = Instant::now() + Duration::from_secs(90);
    let mut left = Vec::new();
    loop {
        let counted = async {
            let s = js.get_stream(bus.topo.commands_stream()).await.ok()?;
            let mut subjects = s.info_with_subjects(&filter).await.ok()?;
            let mut out = Vec::new();
            while let Some(Ok((subject, n))) = subjects.next().await {
                if n > 0 {
                    out.push((subject, n as u64));
                }
            }
            Some(out)
        }
        .await;
        let deadlines_due = due.is_none_or(|d| Instant::now() >= d);
        if let Some(c) = counted {
            // The commands stream empty is not enough: a decision's effects (its
            // follow-up commands among them) reach the public streams by sourcing,
            // which resumes some seconds after a heal; and a stream's replica that
            // was cut off catches up after it.
            if c.is_empty() && deadlines_due && sourced(js, bus).await {
                return Vec::new();
            }
            left = c;
        }
        if Instant::now() >= end {
            if left.is_empty() {
                left.push((
                    "(the public streams had not sourced every effect)".into(),
                    0,
                ));
            }
            return left;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// True when every public stream has sourced everything the state stream holds
/// for it and every replica of the events stream is current.
async fn sourced(js: &jetstream::Context, bus: &holdpoint_bus::Bus) -> bool {
    let caught_up = bus.sourcing_lag().await.is_ok_and(|lag| lag == 0)
        && bus.effects_sourced().await.unwrap_or(false);
    if !caught_up {
        return false;
    }
    let Ok(mut events) = js.get_stream(bus.topo.events_stream()).await else {
        return false;
    };
    events.info().await.is_ok_and(|info| {
        info.cluster.as_ref().is_none_or(|c| {
            c.leader.is_some()
                && c.replicas
                    .iter()
                    .all(|p| p.current && !p.offline && p.lag.unwrap_or(0) == 0)
        })
    })
}

async fn views(load: &Load, h: &History) -> Vec<Option<Value>> {
    futures::stream::iter(h.opened.iter())
        .map(|o| view(load, &o.org, &o.id, Duration::from_secs(30)))
        .buffered(16)
        .collect()
        .await
}

async fn stored_events(bus: &holdpoint_bus::Bus, from: u64) -> Result<Vec<(u64, Event)>> {
    let stream = bus.js.get_stream(bus.topo.events_stream()).await?;
    let consumer: jetstream::consumer::Consumer<jetstream::consumer::pull::OrderedConfig> = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            filter_subject: format!("{}.evt.>", bus.topo.subject_prefix),
            deliver_policy: jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: from,
            },
            ..Default::default()
        })
        .await?;
    let mut out = Vec::new();
    if consumer.cached_info().num_pending == 0 {
        return Ok(out);
    }
    let mut messages = consumer.messages().await?;
    while let Some(m) = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .context("reading HP_EVENTS timed out")?
    {
        let m = m?;
        let info = m.info().map_err(|e| anyhow::anyhow!("{e}"))?;
        let (seq, pending) = (info.stream_sequence, info.pending);
        if let Ok(e) = serde_json::from_slice::<Event>(&m.payload) {
            out.push((seq, e));
        }
        if pending == 0 {
            break;
        }
    }
    Ok(out)
}

async fn register_webhook(http: &reqwest::Client, base: &str, org: &str) -> Result<()> {
    let r = http
        .post(format!("{base}/v1/webhooks"))
        .header("X-Holdpoint-Org", org)
        .header("X-Holdpoint-Person", "admin")
        .json(&json!({"url": format!("http://127.0.0.1:{HOOK_PORT}/hook/{org}")}))
        .send()
        .await?;
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    anyhow::ensure!(
        status.is_success(),
        "registering the webhook of {org}: {status} {body}"
    );
    Ok(())
}

async fn receive_hooks(hooks: Hooks, stop: CancellationToken) {
    use axum::extract::{Path, State};
    use axum::http::HeaderMap;
    async fn hook(
        State(hooks): State<Hooks>,
        Path(org): Path<String>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> axum::http::StatusCode {
        if let Ok(e) = serde_json::from_slice::<Event>(&body) {
            let id = headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or(&e.id)
                .to_owned();
            if let Ok(mut h) = hooks.lock() {
                h.push((
                    org,
                    Seen {
                        name: e.name(),
                        id,
                        sequence: 0,
                        subject: e.subject,
                        at: Instant::now(),
                    },
                ));
            }
        }
        axum::http::StatusCode::NO_CONTENT
    }
    let app = axum::Router::new()
        .route("/hook/{org}", axum::routing::post(hook))
        .with_state(hooks);
    let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", HOOK_PORT)).await else {
        eprintln!("partition: the webhook receiver cannot listen on 127.0.0.1:{HOOK_PORT}");
        return;
    };
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await;
}

/// Follows `GET /v1/events` for `org` from after `after`, reconnecting with
/// `Last-Event-ID` whenever the stream breaks; returns what it received.
async fn follow_sse(
    http: reqwest::Client,
    base: String,
    org: String,
    after: u64,
    progress: Arc<AtomicU64>,
    stop: CancellationToken,
) -> Vec<(String, Seen)> {
    use eventsource_stream::Eventsource as _;
    let mut out = Vec::new();
    let mut last = after;
    while !stop.is_cancelled() {
        let req = http
            .get(format!("{base}/v1/events"))
            .header("X-Holdpoint-Org", &org)
            .header("X-Holdpoint-Person", "sse-reader")
            .header("Last-Event-ID", last.to_string())
            .timeout(Duration::from_secs(24 * 3600));
        let resp = tokio::select! {
            _ = stop.cancelled() => break,
            r = req.send() => r,
        };
        let Ok(resp) = resp else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        if !resp.status().is_success() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        let mut events = resp.bytes_stream().eventsource();
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return out,
                n = events.next() => n,
            };
            let Some(Ok(ev)) = next else { break };
            let Ok(seq) = ev.id.parse::<u64>() else {
                continue;
            };
            let Ok(e) = serde_json::from_str::<Event>(&ev.data) else {
                continue;
            };
            last = seq;
            progress.fetch_max(seq, Ordering::SeqCst);
            out.push((
                org.clone(),
                Seen {
                    name: e.name(),
                    id: e.id,
                    sequence: seq,
                    subject: e.subject,
                    at: Instant::now(),
                },
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    out
}

/// A time when a sourcing stream's source was silent: it reported no contact for
/// longer than [`SOURCE_SILENT`] (its source consumer delivers a heartbeat every
/// second when idle, so a healthy source is never silent that long).
#[derive(Debug, Clone)]
pub struct SourceSilence {
    /// The sourcing stream (`HP_EVENTS`, …).
    pub stream: String,
    /// Since the run started, when the silence was first seen.
    pub from: Duration,
    /// How long it lasted (to the last sample that saw it).
    pub lasted: Duration,
    /// The largest source lag reported during it.
    pub max_lag: u64,
}

/// A source silent for longer than this is recorded by [`watch_sources`].
const SOURCE_SILENT: Duration = Duration::from_secs(5);

/// Samples every sourcing stream's source (its `active` and `lag`) twice a second
/// until `stop`, and returns the silences it saw: what tells a stall of
/// nats-server's sourcing apart from one of Holdpoint's own.
async fn watch_sources(
    js: jetstream::Context,
    streams: Vec<String>,
    started: Instant,
    stop: CancellationToken,
) -> Vec<SourceSilence> {
    let mut open: HashMap<String, SourceSilence> = HashMap::new();
    let mut done = Vec::new();
    while !stop.is_cancelled() {
        for name in &streams {
            let sample = match js.get_stream(name).await {
                Ok(mut s) => s.info().await.ok().map(|i| {
                    let active = i.sources.iter().filter_map(|s| s.active).max();
                    let lag = i.sources.iter().map(|s| s.lag).sum::<u64>();
                    (active, lag)
                }),
                Err(_) => None,
            };
            // A stream whose info cannot be read (no leader yet) says nothing.
            let Some((active, lag)) = sample else {
                continue;
            };
            let silent = active.is_none_or(|a| a > SOURCE_SILENT);
            match (silent, open.remove(name)) {
                (true, Some(mut s)) => {
                    s.lasted = started.elapsed().saturating_sub(s.from);
                    s.max_lag = s.max_lag.max(lag);
                    open.insert(name.clone(), s);
                }
                (true, None) => {
                    let from = started.elapsed().saturating_sub(active.unwrap_or_default());
                    open.insert(
                        name.clone(),
                        SourceSilence {
                            stream: name.clone(),
                            from,
                            lasted: started.elapsed().saturating_sub(from),
                            max_lag: lag,
                        },
                    );
                }
                (false, Some(s)) => done.push(s),
                (false, None) => {}
            }
        }
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|s| s.from);
    done
}

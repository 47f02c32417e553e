//! The Holdpoint worker: the only place that decides.
//!
//! [`run`] pulls commands from `HP_COMMANDS` and decides them with the pure
//! `holdpoint_domain::decide`:
//!
//! - [`runner`]: one pull loop per command partition; the server pins each partition
//!   to one worker at a time (priority groups), so a task's commands are decided in
//!   order; workers hand partitions to their preferred owner and take them over when
//!   a worker dies.
//! - [`batch`]: group commit. A pulled batch is decided in memory, and every record
//!   it changed and every effect it has are written as one atomic batch to the
//!   state stream (`holdpoint_bus::commit`); replies and acks follow the commit.
//! - [`working`]: the records a batch works on. [`cache`]: what a worker keeps of
//!   them between batches (a KV watch keeps session headers fresh).
//! - [`rules`]: the remembered approval rules (a KV watch of the state bucket's
//!   `rule.>` keys), passed
//!   to `decide` as data when an approval opens.
//! - [`watch`]: the KV watch loop the session cache and the rule book share
//!   (restart with back-off when a watch breaks), and [`watch::pause`].
//! - A delivered command is a `holdpoint_bus::delivery::Delivery` (ack, NAK with a
//!   delay by the error's kind, or term; NAKed at once when dropped unsettled): the
//!   bus owns the pull, the headers, progress acks and replies.
//!
//! **Observability.** Each command's events, lane messages and follow-up commands
//! carry a `traceparent` that continues the trace of its `traceparent` header (set by
//! the ingress). [`WorkerConfig::metrics`] counts commands by verb and outcome,
//! redeliveries, revision conflicts, batch sizes and owned
//! partitions; the consumers' backlog is polled every [`WorkerConfig::consumer_poll`].
//!
//! **Shutdown.** When the token is cancelled the worker stops pulling, decides and
//! acks the commands already delivered to it, releases its partitions (so another
//! worker takes them over at once), flushes its connection and returns.

pub mod batch;
pub mod cache;
pub mod rules;
pub mod runner;
pub mod server_clock;
pub mod watch;
pub mod working;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_telemetry::Metrics;
use time::OffsetDateTime;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::cache::SessionCache;

/// A point where a test may make the worker abort, to prove crash safety.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// Abort right after a batch is committed (its records and effects stored),
    /// before its outcomes are stored and replied.
    AfterWrite,
    /// Abort after everything but the replies and acks.
    BeforeAck,
    /// Stop this process (SIGSTOP, as a pause or a partition would) after a batch
    /// is decided and before it is committed: a zombie whose batch the next owner
    /// overtakes. A test sends SIGCONT.
    StopBeforeCommit,
}

impl std::str::FromStr for Failpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "after-write" => Ok(Failpoint::AfterWrite),
            "before-ack" => Ok(Failpoint::BeforeAck),
            "stop-before-commit" => Ok(Failpoint::StopBeforeCommit),
            other => Err(format!(
                "unknown failpoint {other:?} (after-write, before-ack, stop-before-commit)"
            )),
        }
    }
}

/// The worker's settings: partitions, batch and timing limits, deadlines, metrics
/// (built from the `holdpoint` configuration, `services/cli/src/config.rs`).
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Most commands decided together in one batch.
    pub batch: usize,
    /// Memory for the records the worker keeps between batches, in bytes, split over
    /// its partitions (each record weighed at about four times its JSON size; see
    /// `cache::RecordCache`).
    pub cache_bytes: u64,
    /// Most session headers kept (fresh through a KV watch).
    pub session_cache: usize,
    /// This worker's id in the presence bucket (`[A-Za-z0-9_-]`, at most 64); a
    /// random one when `None`.
    pub worker_id: Option<String>,
    /// Test only: abort the process at this point on the first batch that writes.
    pub failpoint: Option<Failpoint>,
    /// Where commands, redeliveries, conflicts and the consumer's backlog are counted.
    pub metrics: Arc<Metrics>,
    /// How often the consumers' pending and ack-pending counts are read.
    pub consumer_poll: Duration,
    /// Deadlines: the default, maximum and warning lead (`supported` is set when the
    /// worker starts: every server at the version floor keeps message schedules).
    pub deadlines: holdpoint_domain::Deadlines,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            batch: 128,
            cache_bytes: 16 * 1024 * 1024,
            session_cache: 100_000,
            worker_id: None,
            failpoint: None,
            metrics: Arc::new(Metrics::new()),
            consumer_poll: Duration::from_secs(5),
            deadlines: holdpoint_domain::Deadlines::default(),
        }
    }
}

/// Runs the worker until `shutdown` is cancelled, then stops pulling, finishes and
/// acks the commands delivered to it, releases its partitions, and returns.
///
/// # Errors
/// Only when the configuration is wrong (a bad worker id); NATS failures are
/// retried.
pub async fn run(bus: Bus, cfg: WorkerConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = match &cfg.worker_id {
        Some(id) if holdpoint_bus::partitions::is_worker_id(id) => id.clone(),
        Some(id) => anyhow::bail!("worker id {id:?} must be 1 to 64 of [A-Za-z0-9_-]"),
        None => format!("w-{}", uuid::Uuid::new_v4().simple()),
    };
    let mut cfg = cfg;
    cfg.deadlines.supported = true;
    let cfg = Arc::new(cfg);
    let sessions = SessionCache::new(cfg.session_cache);
    let live: runner::Live = Arc::new(RwLock::new(vec![(me.clone(), OffsetDateTime::now_utc())]));
    let mut tasks = JoinSet::new();
    let background = CancellationToken::new();
    tasks.spawn(sessions.clone().watch(bus.clone(), background.clone()));
    let rules = rules::RuleBook::new();
    tasks.spawn(rules.clone().watch(bus.clone(), background.clone()));
    tasks.spawn(poll_backlog(
        bus.clone(),
        cfg.metrics.clone(),
        cfg.consumer_poll,
        background.clone(),
    ));
    tasks.spawn(runner::presence(
        bus.clone(),
        me.clone(),
        live.clone(),
        background.clone(),
    ));
    let partitions: Vec<u32> = (0..bus.topo.partitions).collect();
    info!(
        worker = %me,
        loops = partitions.len(),
        "worker pulling commands"
    );
    // One committer for every partition of this worker; it stops once the last
    // runner has dropped its handle.
    let (committer, commit_loop) =
        batch::group::GroupCommit::on_bus(&bus, "g", cfg.metrics.clone());
    tasks.spawn(commit_loop);
    let mut loops = JoinSet::new();
    for p in partitions {
        loops.spawn(runner::run(
            bus.clone(),
            cfg.clone(),
            p,
            runner::Shared {
                sessions: sessions.clone(),
                rules: rules.clone(),
                committer: committer.clone(),
            },
            me.clone(),
            live.clone(),
            shutdown.clone(),
        ));
    }
    drop(committer);
    while loops.join_next().await.is_some() {}
    info!("worker stopped pulling; flushing");
    background.cancel();
    while tasks.join_next().await.is_some() {}
    // Acks and replies are buffered by the client: send them before returning
    // (bounded: with NATS away, what is unacked is redelivered anyway).
    match tokio::time::timeout(Duration::from_secs(5), bus.client.flush()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            warn!(error = %e, "flush at shutdown failed; unacked commands will be redelivered")
        }
        Err(_) => warn!("flush at shutdown timed out; unacked commands will be redelivered"),
    }
    info!("worker stopped");
    Ok(())
}

/// Reads the consumers' pending and ack-pending counts into `metrics` every `every`
/// until `shutdown`.
pub async fn poll_backlog(
    bus: Bus,
    metrics: Arc<Metrics>,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match bus.consumer_backlog().await {
            Ok((pending, ack_pending)) => metrics.consumer_info(pending, ack_pending),
            Err(e) => debug!(error = %e, "cannot read the consumers' backlog"),
        }
    }
}

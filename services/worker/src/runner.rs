//! The pull loops: one per command partition, each deciding the batches it pulls,
//! one after the other, so one task's commands are decided in the order JetStream stored them.
//!
//! **Taking a partition over.** The first message a runner gets under a new
//! `Nats-Pin-Id` means the server pinned it: it empties its record cache, reads the
//! partition's checkpoint and sweeps the records written since (the relay), before
//! deciding that message's batch.
//!
//! **Handing a partition over.** When the preferred worker of a partition (see
//! `holdpoint_bus::partitions::preferred`) is alive and another worker holds it, the
//! holder stops pulling, releases the pin and stays away for a while, so the
//! preferred worker, pulling on standby, is pinned.
//!
//! **Checkpoints** are saved about once a second while a runner owns its partition:
//! the time before which every transition it committed is confirmed.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_bus::backoff::Backoff;
use holdpoint_bus::delivery::{Deliveries, Delivery, PullError};
use holdpoint_bus::partitions::preferred;
use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::WorkerConfig;
use crate::batch::Runner;
use crate::cache::{RecordCache, SessionCache};
use crate::relay;
use crate::watch::pause;

/// The live workers with when each started, as the presence loop last read them.
pub type Live = Arc<RwLock<Vec<(String, OffsetDateTime)>>>;

/// How long a worker must have been alive before partitions are handed to it, so a
/// worker that crashes and restarts in a loop does not make partitions move.
const SETTLED: Duration = Duration::from_secs(10);

/// How long a pull stream may go without a heartbeat or a message before the runner
/// drops it and pulls anew (losing its pin id with it). Heartbeats come every tenth of
/// [`holdpoint_bus::Topology::priority_timeout`] or so; one or two missed on a busy
/// machine are noise.
const STALE_STREAM: Duration = Duration::from_secs(3);

/// How long the pull stream has been silent: from the first of a run of missed
/// heartbeats. The client reports a miss after two heartbeat intervals without
/// anything, then again every two intervals while the silence lasts; a message, or a
/// gap between misses longer than that pace, ends the run.
#[derive(Debug)]
struct Silence {
    heartbeat: Duration,
    since: Option<Instant>,
    last: Option<Instant>,
}

impl Silence {
    fn new(heartbeat: Duration) -> Silence {
        Silence {
            heartbeat,
            since: None,
            last: None,
        }
    }

    /// A message came: the stream is alive.
    fn heard(&mut self) {
        self.since = None;
        self.last = None;
    }

    /// A heartbeat was missed; returns how long the silence has lasted.
    fn missed(&mut self) -> Duration {
        let now = Instant::now();
        let pace = self.heartbeat * 3;
        if self.last.is_none_or(|last| now - last > pace) {
            self.since = Some(now);
        }
        self.last = Some(now);
        // The first miss already stands for two intervals of silence.
        self.since
            .map_or(Duration::ZERO, |since| now - since + self.heartbeat * 2)
    }
}

/// How often a runner that owns its partition saves its checkpoint.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Refreshes this worker's presence and the list of live workers until shutdown,
/// then withdraws it.
pub async fn presence(bus: Bus, me: String, live: Live, shutdown: CancellationToken) {
    let every = bus.topo.presence_ttl / 3;
    let since = OffsetDateTime::now_utc();
    loop {
        if let Err(e) = bus.announce(&me, since).await {
            debug!(error = %e, "presence not refreshed");
        }
        match bus.live_workers().await {
            Ok(mut workers) => {
                if !workers.iter().any(|(w, _)| w == &me) {
                    workers.push((me.clone(), since));
                    workers.sort();
                }
                if let Ok(mut l) = live.write() {
                    *l = workers;
                }
            }
            Err(e) => debug!(error = %e, "live workers not read"),
        }
        if pause(&shutdown, every).await {
            break;
        }
    }
    let _ = bus.withdraw(&me).await;
}

/// What a runner knows of its ownership.
#[derive(Debug, Default)]
struct Ownership {
    /// The pin id the server gave this runner, while it holds the partition.
    pin: Option<String>,
    /// When the checkpoint was last saved.
    saved: Option<Instant>,
    /// The sweep of the takeover still has to run (it failed, or is due).
    sweep_due: bool,
    /// When the fence sweep is due (see `relay::zombie_bound`), while it is.
    fence_due: Option<Instant>,
    /// The sweep running beside the pull loop, if one is.
    sweeping: Option<Sweeping>,
}

/// Which sweep of a partition's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SweepKind {
    /// From the partition's checkpoint, after a takeover.
    Takeover,
    /// From the takeover, once a previous owner can no longer be committing.
    Fence,
}

/// A sweep running in its own task, so the runner goes on pulling (and keeps its
/// pin: the server unpins a runner that sends no pull request for the priority
/// timeout, and a sweep after a busy stretch reads every write since its start).
/// Dropped with the ownership, it is aborted.
#[derive(Debug)]
struct Sweeping {
    kind: SweepKind,
    /// The moment the sweep covers up to.
    at: OffsetDateTime,
    task: tokio::task::JoinHandle<Result<usize, holdpoint_bus::BusError>>,
}

impl Drop for Sweeping {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a worker's partition runners share: session headers and remembered rules,
/// each kept fresh by its own KV watch.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The session headers this worker keeps between batches (a KV watch keeps
    /// them fresh).
    pub sessions: SessionCache,
    /// Remembered approval rules.
    pub rules: crate::rules::RuleBook,
    /// Transitions this worker saw confirmed.
    pub confirmed: crate::cache::Confirmed,
}

/// Pulls and decides partition `partition` until shutdown.
pub async fn run(
    bus: Bus,
    cfg: Arc<WorkerConfig>,
    partition: u32,
    shared: Shared,
    me: String,
    live: Live,
    shutdown: CancellationToken,
) {
    let cache_bytes = cfg.cache_bytes / u64::from(bus.topo.partitions.max(1));
    let mut runner = Runner {
        bus: bus.clone(),
        cfg: cfg.clone(),
        partition,
        cache: RecordCache::new(cache_bytes),
        sessions: shared.sessions,
        rules: shared.rules,
        confirmed: shared.confirmed,
        owed: BTreeMap::new(),
        checkpoint: None,
        swept: false,
        fence: None,
        server_clock: crate::server_clock::ServerClock::default(),
    };
    let mut own = Ownership::default();
    let mut attempt = 0;
    while !shutdown.is_cancelled() {
        let messages = match bus.pull_partition(partition, cfg.batch).await {
            Ok(m) => m,
            Err(e) => {
                attempt += 1;
                warn!(partition, error = %e, "cannot pull commands; retrying");
                if pause(&shutdown, Backoff::RECONNECT.delay(attempt)).await {
                    break;
                }
                continue;
            }
        };
        attempt = 0;
        match serve(&mut runner, &mut own, messages, &me, &live, &shutdown).await {
            Served::Shutdown => break,
            Served::Broken => {
                if pause(&shutdown, Backoff::RECONNECT.delay(1)).await {
                    break;
                }
            }
            Served::HandedOver(p) => {
                own = Ownership::default();
                runner.cache.clear();
                cfg.metrics.partitions_owned.dec();
                info!(
                    partition = p,
                    "handed the partition to its preferred worker"
                );
                // Vouch for what this runner confirmed, so the next owner's takeover
                // sweep starts here rather than at an older checkpoint.
                save_checkpoint(&runner, p).await;
                if let Err(e) = bus.unpin(p).await {
                    debug!(partition = p, error = %e, "unpin failed; the pin lapses by itself");
                }
                // Stay away long enough for the preferred worker to be pinned.
                if pause(&shutdown, bus.topo.priority_timeout * 3).await {
                    break;
                }
            }
        }
    }
    if own.pin.is_some() {
        cfg.metrics.partitions_owned.dec();
        save_checkpoint(&runner, partition).await;
        // Let a standby worker take over now rather than after the timeout.
        let _ = bus.unpin(partition).await;
    }
}

enum Served {
    Shutdown,
    Broken,
    HandedOver(u32),
}

async fn serve(
    runner: &mut Runner,
    own: &mut Ownership,
    mut messages: Deliveries,
    me: &str,
    live: &Live,
    shutdown: &CancellationToken,
) -> Served {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut owed_attempt = 0;
    let mut silence = Silence::new(runner.bus.pull_heartbeat());
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => {
                // Decide what was delivered already instead of leaving it to ack_wait.
                let msgs = messages.ready(runner.cfg.batch);
                if !msgs.is_empty() {
                    runner.process(msgs).await;
                }
                return Served::Shutdown;
            }
            _ = tick.tick() => {
                if !runner.retry_owed().await {
                    owed_attempt += 1;
                    let _ = pause(shutdown, Backoff::TRANSIENT.delay(owed_attempt)).await;
                } else {
                    owed_attempt = 0;
                }
                let p = runner.partition;
                if own.pin.is_some() && lost_pin(runner, own, p).await {
                    continue;
                }
                if own.pin.is_some() {
                    if own.sweeping.as_ref().is_some_and(|s| s.task.is_finished()) {
                        sweep_done(runner, own).await;
                    }
                    if own.sweeping.is_none() {
                        if own.sweep_due {
                            start_sweep(runner, own, SweepKind::Takeover);
                        } else if own.fence_due.is_some_and(|at| at <= Instant::now()) {
                            start_sweep(runner, own, SweepKind::Fence);
                        }
                    }
                    if own.saved.is_none_or(|t| t.elapsed() >= CHECKPOINT_EVERY) && !own.sweep_due {
                        save_checkpoint(runner, p).await;
                        own.saved = Some(Instant::now());
                    }
                    if should_hand_over(p, me, live) {
                        return Served::HandedOver(p);
                    }
                }
                continue;
            }
            next = messages.next() => next,
        };
        let msg = match first {
            Some(Ok(m)) => {
                silence.heard();
                m
            }
            Some(Err(PullError::MissedHeartbeat)) => {
                // A late heartbeat on a busy machine, or the server away: the stream
                // re-pulls by itself after a reconnect and keeps this runner's pin id,
                // which a new stream would not have (its pulls would be refused until
                // the pin lapsed). Pull anew only after a silence of STALE_STREAM.
                if silence.missed() < STALE_STREAM {
                    debug!(
                        partition = runner.partition,
                        "missed idle heartbeat; still pulling"
                    );
                    continue;
                }
                warn!(
                    partition = runner.partition,
                    "no heartbeat for {STALE_STREAM:?}; pulling anew"
                );
                return Served::Broken;
            }
            Some(Err(PullError::Broken(e))) => {
                // The consumer was deleted, or a pull failed: pull anew.
                warn!(partition = runner.partition, error = %e, "command stream error; pulling anew");
                return Served::Broken;
            }
            None => return Served::Broken,
        };
        let mut batch = vec![msg];
        batch.extend(messages.ready(runner.cfg.batch.saturating_sub(1)));
        notice_pin(runner, own, &batch).await;
        runner.process(batch).await;
    }
}

/// Takes the partition over when the server pinned this runner anew.
async fn notice_pin(runner: &mut Runner, own: &mut Ownership, batch: &[Delivery]) {
    let pin = batch.iter().find_map(|d| d.pin.clone());
    let Some(pin) = pin else { return };
    if own.pin.as_deref() == Some(pin.as_str()) {
        return;
    }
    if own.pin.is_none() {
        runner.cfg.metrics.partitions_owned.inc();
    }
    info!(
        partition = runner.partition,
        "pinned to this worker: taking the partition over"
    );
    own.pin = Some(pin);
    own.saved = None;
    runner.cache.clear();
    runner.swept = false;
    let p = runner.partition;
    runner.checkpoint = runner.bus.checkpoint(p).await.unwrap_or_else(|e| {
        warn!(partition = p, error = %e, "checkpoint not read; relaying the duplicate window only");
        None
    });
    // A partition nobody vouched for yet: vouch for what the relay's duplicate
    // window rule covers anyway, before this runner commits anything, so what it
    // commits is newer than the partition's checkpoint for whoever comes next (its
    // takeover sweep runs beside the pull loop and vouches later).
    if runner.checkpoint.is_none() {
        let horizon = relay::dedup_horizon(&runner.bus, OffsetDateTime::now_utc());
        if let Err(e) = runner.bus.save_checkpoint(p, horizon).await {
            warn!(partition = p, error = %e, "first checkpoint not saved");
        }
    }
    own.sweep_due = true;
    own.fence_due = None;
    start_sweep(runner, own, SweepKind::Takeover);
}

/// Checks with the server that this runner still holds partition `p`'s pin (it may
/// have moved while a batch took long); forgets the partition if not.
async fn lost_pin(runner: &mut Runner, own: &mut Ownership, p: u32) -> bool {
    let Ok(pinned) = runner.bus.pinned_client(p).await else {
        return false;
    };
    if pinned.is_some() && pinned == own.pin {
        return false;
    }
    info!(partition = p, "the partition's pin moved to another worker");
    *own = Ownership::default();
    runner.cache.clear();
    runner.cfg.metrics.partitions_owned.dec();
    true
}

/// Starts the `kind` sweep of the runner's partition in its own task (the takeover
/// sweep from the checkpoint read at the takeover; the fence sweep from the
/// takeover, inside the duplicate window only).
fn start_sweep(runner: &Runner, own: &mut Ownership, kind: SweepKind) {
    let at = OffsetDateTime::now_utc();
    let (scope, since) = match kind {
        SweepKind::Takeover => (
            relay::Scope::Partition(Some(runner.partition)),
            runner.checkpoint,
        ),
        SweepKind::Fence => match runner.fence {
            Some(taken) => (relay::Scope::Window(Some(runner.partition)), Some(taken)),
            None => {
                own.fence_due = None;
                return;
            }
        },
    };
    let bus = runner.bus.clone();
    own.sweeping = Some(Sweeping {
        kind,
        at,
        task: tokio::spawn(async move { relay::sweep(&bus, scope, since, at).await }),
    });
}

/// Takes the result of the finished sweep: after the takeover sweep the runner
/// vouches for its partition from the sweep's start (and the fence sweep falls due
/// `relay::zombie_bound` later); after the fence sweep its checkpoint may pass the
/// takeover. A failed sweep runs again on a later tick.
async fn sweep_done(runner: &mut Runner, own: &mut Ownership) {
    let Some(mut s) = own.sweeping.take() else {
        return;
    };
    let result = match (&mut s.task).await {
        Ok(r) => r,
        Err(e) => Err(holdpoint_bus::BusError::transient("relay sweep", e)),
    };
    let n = match result {
        Ok(n) => n,
        Err(e) => {
            warn!(partition = runner.partition, kind = ?s.kind, error = %e, "relay sweep failed; trying again");
            return;
        }
    };
    runner.cfg.metrics.relayed.inc_by(n as u64);
    match s.kind {
        SweepKind::Takeover => {
            own.sweep_due = false;
            runner.swept = true;
            runner.fence = Some(s.at);
            own.fence_due = Some(Instant::now() + relay::zombie_bound(&runner.bus));
            // Vouch at once: if this runner dies before its next save, whoever
            // takes over sweeps from here (or from the oldest transition this
            // runner committed meanwhile and still owes).
            let p = runner.partition;
            let at = runner.checkpoint_to_save(s.at);
            if let Err(e) = runner.bus.save_checkpoint(p, at).await {
                warn!(partition = p, error = %e, "checkpoint not saved after the takeover sweep");
            }
            own.saved = Some(Instant::now());
        }
        SweepKind::Fence => {
            if n > 0 {
                info!(
                    partition = runner.partition,
                    relayed = n,
                    "fence sweep relayed what the previous owner left"
                );
            }
            runner.fence = None;
            own.fence_due = None;
        }
    }
}

/// Saves the checkpoint the runner can vouch for; nothing before its takeover sweep
/// ran (until then it vouches for nothing the previous owners left).
async fn save_checkpoint(runner: &Runner, p: u32) {
    if !runner.swept {
        return;
    }
    let at = runner.checkpoint_to_save(OffsetDateTime::now_utc());
    if let Err(e) = runner.bus.save_checkpoint(p, at).await {
        debug!(partition = p, error = %e, "checkpoint not saved");
    }
}

/// True when partition `p` should go to another worker: its preferred one among the
/// workers alive for at least [`SETTLED`] (this one always counts).
fn should_hand_over(p: u32, me: &str, live: &Live) -> bool {
    let Ok(workers) = live.read() else {
        return false;
    };
    let Ok(settled) = time::Duration::try_from(SETTLED) else {
        return false;
    };
    let now = OffsetDateTime::now_utc();
    let eligible: Vec<String> = workers
        .iter()
        .filter(|(w, since)| w == me || now - *since >= settled)
        .map(|(w, _)| w.clone())
        .collect();
    matches!(preferred(p, &eligible), Some(w) if w != me)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_of_missed_heartbeats_counts_from_its_first_miss() {
        let hb = Duration::from_millis(100);
        let mut s = Silence::new(hb);
        // The client reports a miss every two intervals while nothing comes.
        assert_eq!(s.missed(), hb * 2);
        tokio::time::advance(hb * 2).await;
        assert_eq!(s.missed(), hb * 4);
        tokio::time::advance(hb * 2).await;
        assert_eq!(s.missed(), hb * 6);
        // Heartbeats came back for a while: the next miss starts a new run.
        tokio::time::advance(hb * 10).await;
        assert_eq!(s.missed(), hb * 2);
        // A message ends the run too.
        tokio::time::advance(hb * 2).await;
        s.heard();
        assert_eq!(s.missed(), hb * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_silent_past_the_bound_is_dropped_and_one_late_heartbeat_is_not() {
        let hb = Duration::from_millis(50);
        let mut s = Silence::new(hb);
        assert!(s.missed() < STALE_STREAM);
        let mut silent = hb * 2;
        while silent < STALE_STREAM {
            tokio::time::advance(hb * 2).await;
            silent = s.missed();
        }
        assert!(silent >= STALE_STREAM && silent < STALE_STREAM + hb * 4);
    }
}

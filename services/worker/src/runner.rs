//! The pull loops: one per command partition, each deciding the batches it pulls,
//! one after the other, so one task's commands are decided in the order JetStream stored them.
//!
//! **Taking a partition over.** The first message a runner gets under a new
//! `Nats-Pin-Id` means the server pinned it: it empties its record cache before
//! deciding that message's batch. Nothing else is owed across a takeover: a
//! decision's effects were committed with its records or not at all.
//!
//! **Handing a partition over.** When the preferred worker of a partition (see
//! `holdpoint_bus::partitions::preferred`) is alive and another worker holds it, the
//! holder stops pulling, releases the pin and stays away for a while, so the
//! preferred worker, pulling on standby, is pinned.
//!
//! **A paused or partitioned previous owner** (a zombie) cannot commit once
//! another runner decided the same records: its batch's expectations fail, and
//! none of its effects is stored.

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

/// How often a runner that owns its partition checks its pin and whether to hand
/// the partition over.
const OWNER_TICK: Duration = Duration::from_secs(1);

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
    /// The worker's committer: one atomic batch for the groups its runners
    /// decided meanwhile.
    pub committer: crate::batch::group::GroupCommit,
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
        server_clock: crate::server_clock::ServerClock::default(),
        committer: shared.committer,
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
    let mut tick = tokio::time::interval(OWNER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
                let p = runner.partition;
                if own.pin.is_some() && lost_pin(runner, own, p).await {
                    continue;
                }
                if own.pin.is_some() && should_hand_over(p, me, live) {
                    return Served::HandedOver(p);
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
    runner.cache.clear();
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

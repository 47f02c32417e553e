//! The outbox relay: a committed transition's effects go out whatever happens to
//! the command that made it.
//!
//! A transition is committed with its record (see `holdpoint_domain::transition`).
//! Its effects are then published; once every PubAck came back it is *confirmed*,
//! which the next write of the record records. Effects that are not confirmed are
//! published again, with the same `Nats-Msg-Id`s:
//!
//! 1. **On every load** of a record from KV, before the batch decides anything on
//!    it ([`due`]).
//! 2. **By a sweep when a worker takes a partition over** ([`sweep`]): the records
//!    written since the partition's checkpoint, whoever wrote them.
//! 3. **Periodically**, for the transitions whose publish failed in this worker
//!    (the partition runner's list of owed effects), with the transient back-off.
//!
//! Which transitions are due: those not confirmed that are either recent enough for
//! JetStream to drop a second copy (younger than 80 % of the duplicate window), or
//! newer than their partition's checkpoint (every transition a partition's owners
//! committed before it was confirmed). So a transition is published again after the
//! duplicate window only when it was not recorded confirmed: a worker died between
//! its write and its PubAcks, or stopped owning the partition before its checkpoint
//! could pass the transition, and no worker owned the partition for longer than the
//! window. Past the window a relay publishes only what the streams do not hold yet
//! (`Bus::publish_owed` probes them), so a copy that was stored is not stored again
//! (RELIABILITY.md).

use std::time::Duration;

use futures::StreamExt as _;

use holdpoint_bus::records::Bucket;
use holdpoint_bus::{Bus, BusError, ErrorKind};
use holdpoint_domain::{CommandId, Effects, Interaction, Lane, Session, Transition};
use time::OffsetDateTime;
use tracing::{debug, info, warn};

use crate::cache::Record;
use crate::working::{encode, outbox_of};

/// When transitions stop being safe to publish again regardless of checkpoints.
pub fn dedup_horizon(bus: &Bus, now: OffsetDateTime) -> OffsetDateTime {
    let window = time::Duration::try_from(bus.topo.duplicate_window.mul_f64(0.8))
        .unwrap_or(time::Duration::ZERO);
    now - window
}

/// The unconfirmed transitions of `record` that a loader must publish again;
/// `checkpoint` is the loader's partition's checkpoint, used for transitions of that
/// partition.
pub fn due(
    record: &Record,
    horizon: OffsetDateTime,
    partition: Option<u32>,
    checkpoint: Option<OffsetDateTime>,
) -> Vec<&Transition> {
    let Some(outbox) = outbox_of(record) else {
        return Vec::new();
    };
    outbox
        .iter()
        .filter(|t| {
            let cp = if partition.is_some() && t.partition == partition {
                checkpoint
            } else {
                None
            };
            t.needs_relay(horizon, cp)
        })
        .collect()
}

/// A transition to publish again, with what the sweep needs to confirm it.
#[derive(Debug, Clone)]
pub struct Owed {
    /// The command that made it.
    pub command_id: CommandId,
    /// When it was committed.
    pub at: OffsetDateTime,
    /// Its effects.
    pub effects: Effects,
}

impl Owed {
    /// The owed effects of `t`.
    pub fn of(t: &Transition) -> Self {
        Owed {
            command_id: t.command_id.clone(),
            at: t.at,
            effects: t.effects.clone(),
        }
    }
}

/// How long a worker that lost a partition may still commit to it: a runner learns
/// that its pin moved between batches (at most a second apart) or when a pull is
/// refused, so a batch it had already started is the most it writes after the
/// takeover. A batch holds its commands for at most `ack_wait` before they are
/// delivered again; the bound is three times that (at least 10 s, and never more
/// than half the relay horizon, so that the fence sweep still finds every late write
/// inside the duplicate window, where publishing it again is harmless).
///
/// The runner that takes a partition over sweeps again once this long has passed
/// (the *fence sweep*, from its takeover on) before its checkpoint may pass the
/// takeover; so a partition's checkpoint always vouches for what a previous owner
/// committed late. A worker frozen for longer than this (say, SIGSTOPped) whose
/// stalled batch then commits and which dies before its PubAcks leaves that
/// transition to be relayed by the next load of its record (inside the duplicate
/// window), not by a sweep (RELIABILITY.md, "The outbox relay").
pub fn zombie_bound(bus: &Bus) -> Duration {
    let t = &bus.topo;
    (t.ack_wait * 3)
        .max(t.priority_timeout * 3)
        .max(Duration::from_secs(10))
        .min(t.duplicate_window.mul_f64(0.4))
}

/// How far back a sweep reads: the checkpoint (or the duplicate window when the
/// partition has none), less a margin for clocks that disagree.
const CLOCK_MARGIN: Duration = Duration::from_secs(5);

/// Whose transitions a sweep relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One partition's, with its checkpoint.
    Partition(Option<u32>),
    /// One partition's, in records written since the given moment, inside the
    /// duplicate window only: the fence sweep of the runner that took the partition
    /// over (since its takeover), and the sweep of a worker that starts (since each
    /// partition's checkpoint). The transitions there may be a live owner's,
    /// confirmed with the record not rewritten yet; publishing one of those again
    /// outside the window would store it twice.
    Window(Option<u32>),
}

/// Publishes again the unconfirmed effects of every transition partition `p`'s
/// owners committed since `checkpoint`, in records written since then, and records
/// them confirmed. Returns how many transitions it relayed.
///
/// The sweep reads the buckets' streams headers only: a write whose record owes
/// effects carries [`holdpoint_bus::UNCONFIRMED_HEADER`] naming the partitions that
/// owe them, so only the keys whose last write in the range names `p` are loaded, and the cost of a takeover is the
/// number of writes since, not their size. Keys this process wrote last are
/// skipped ([`holdpoint_bus::WRITER_HEADER`]): so a fence sweep relays only what
/// the previous owner wrote late. Up to [`SWEEP_CONCURRENCY`] keys are relayed at
/// once.
///
/// # Errors
/// Transient when the buckets cannot be read or a publish fails (the caller tries
/// again later; every publish is deduplicated).
pub async fn sweep(
    bus: &Bus,
    scope: Scope,
    checkpoint: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Result<usize, BusError> {
    let horizon = dedup_horizon(bus, now);
    let since = checkpoint.unwrap_or(horizon) - CLOCK_MARGIN;
    let traceparent = holdpoint_telemetry::trace::TraceContext::new_root().header_value();
    let mine = bus.writer.as_deref();
    let mut relayed = 0;
    for bucket in [Bucket::Interactions, Bucket::Sessions] {
        let keys = bus
            .keys_marked(bucket, since, |marker, writer| {
                // This process relayed what its own writes' records owed when it
                // loaded them, and retries what it owes itself.
                names(marker, scope) && (writer.is_none() || writer != mine)
            })
            .await?;
        let at = Relay {
            bus,
            bucket,
            scope,
            horizon,
            checkpoint,
            traceparent: &traceparent,
        };
        let mut each = futures::stream::iter(keys)
            .map(|key| at.key(key))
            .buffer_unordered(SWEEP_CONCURRENCY);
        while let Some(n) = each.next().await {
            relayed += n?;
        }
    }
    if relayed > 0 {
        info!(scope = ?scope, relayed, "relay sweep published unconfirmed effects again");
    } else {
        debug!(scope = ?scope, "relay sweep found nothing unconfirmed");
    }
    Ok(relayed)
}

/// Keys a sweep works on at once: their loads, publishes and confirming writes are
/// pipelined, so a takeover after a busy second costs round trips shared by many
/// records, not one each.
const SWEEP_CONCURRENCY: usize = 64;

/// What a sweep relays in one bucket.
struct Relay<'a> {
    bus: &'a Bus,
    bucket: Bucket,
    scope: Scope,
    horizon: OffsetDateTime,
    checkpoint: Option<OffsetDateTime>,
    traceparent: &'a str,
}

impl Relay<'_> {
    /// Publishes again what the record at `key` owes and records it confirmed;
    /// returns how many transitions it relayed.
    async fn key(&self, key: String) -> Result<usize, BusError> {
        let (bus, bucket) = (self.bus, self.bucket);
        let Some((revision, mut record)) = load(bus, bucket, &key).await? else {
            return Ok(0);
        };
        // Another partition's transitions in the record are due only inside the
        // duplicate window (as on any load): publishing them again is harmless,
        // and the record is rewritten once for all.
        let due = match self.scope {
            Scope::Partition(p) => due(&record, self.horizon, p, self.checkpoint),
            Scope::Window(_) => due(&record, self.horizon, None, None),
        };
        let owed: Vec<Owed> = due.into_iter().map(Owed::of).collect();
        if owed.is_empty() {
            return Ok(0);
        }
        let mut inflight = holdpoint_bus::effects::Inflight::default();
        for o in &owed {
            inflight.extend(bus.publish_owed(&o.effects, o.at, self.traceparent).await?);
        }
        // Past the window the probe of `publish_owed` found what was stored: record
        // those transitions confirmed, so no later sweep probes them again.
        let past_window = owed.iter().any(|o| o.at < self.horizon);
        if inflight.stored_new().await? == 0 && !past_window {
            // JetStream had every one of them: their writer published them and the
            // record is confirmed by its next write. Not rewriting it keeps a
            // takeover from touching every record of the window.
            return Ok(owed.len());
        }
        // Record them confirmed, unless the record moved on meanwhile (its writer
        // confirms what it knows).
        let ids: Vec<&str> = owed.iter().map(|o| o.command_id.as_str()).collect();
        if confirm(&mut record, &ids) {
            let marker = outbox_of(&record).and_then(|o| o.unconfirmed_marker());
            match bus
                .cas(bucket, &key, revision, encode(&record)?, marker.as_deref())
                .await
            {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(owed.len())
    }
}

fn confirm(record: &mut Record, ids: &[&str]) -> bool {
    let mark = |t: &Transition| ids.contains(&t.command_id.as_str());
    match record {
        Record::Interaction(i) => i.outbox.confirm(mark),
        Record::Session(s) => s.outbox.confirm(mark),
        Record::Lane(l) => l.outbox.confirm(mark),
        Record::Task(_) => false,
    }
}

/// Whether an [`holdpoint_bus::UNCONFIRMED_HEADER`] value names a partition `scope`
/// sweeps.
fn names(marker: &str, scope: Scope) -> bool {
    match scope {
        Scope::Partition(p) | Scope::Window(p) => {
            let want = p.map_or_else(|| "-".to_owned(), |p| p.to_string());
            marker.split(',').any(|m| m.trim() == want)
        }
    }
}

/// The latest value of `key` and its revision (`None`: deleted, or a value that
/// does not decode, which is logged and skipped).
async fn load(bus: &Bus, bucket: Bucket, key: &str) -> Result<Option<(u64, Record)>, BusError> {
    let key = key.to_owned();
    let loaded = match bucket {
        Bucket::Interactions => bus
            .load::<Interaction>(bucket, key.clone())
            .await
            .map(|l| l.value.map(|v| (l.revision, Record::Interaction(v)))),
        _ if key.split('.').count() == 3 => bus
            .load::<Lane>(bucket, key.clone())
            .await
            .map(|l| l.value.map(|v| (l.revision, Record::Lane(v)))),
        _ => bus
            .load::<Session>(bucket, key.clone())
            .await
            .map(|l| l.value.map(|v| (l.revision, Record::Session(v)))),
    };
    match loaded {
        Err(e) if e.kind() == ErrorKind::Permanent => {
            warn!(key, error = %e, "relay sweep skipped a record that does not decode");
            Ok(None)
        }
        other => other,
    }
}

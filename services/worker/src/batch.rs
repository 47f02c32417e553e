//! Group commit: a partition runner decides a pulled batch of commands in memory,
//! then pipelines everything they change, so concurrent answers share round trips
//! (and, on a JetStream cluster, fsyncs).
//!
//! For one batch, in this order:
//!
//! 1. **Admit.** Decode each command; one that cannot be decoded, or does not match
//!    its subject, is terminated with a `dead-letter` event.
//! 2. **Load.** The records every command needs, from the caches or, every miss at
//!    once, from KV. A record read from KV has its due unconfirmed transitions
//!    queued for the relay (see [`crate::relay`]).
//! 3. **Decide.** Each command in turn with the pure `decide`, on the records as the
//!    commands before it left them.
//! 4. **Write.** Every changed session header, lane and task (compare-and-set, all in
//!    flight at once), then every changed interaction. A record changed by several
//!    commands is written once. A write that fails fails every command that touched
//!    that record, and every command that touched a record those changed; the others
//!    go on.
//! 5. **Publish.** The relayed effects, then each command's effects and (for a
//!    decision that wrote nothing) its stored outcome, all in flight at once.
//! 6. **Reply and ack** each command whose effects were all confirmed.
//!
//! A command that failed is decided again at once when it lost a race (conflict), up
//! to [`CONFLICT_ROUNDS`] times, else NAKed with the transient back-off; only a
//! command that cannot be decoded is terminated. A transition whose effects did not
//! all get PubAcks stays owed: the runner publishes it again, and so does the
//! command's redelivery.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use holdpoint_bus::backoff::Backoff;
use holdpoint_bus::effects::Inflight;
use holdpoint_bus::records::PendingWrite;
use holdpoint_bus::{Bus, BusError, ErrorKind, REPLY_HEADER, TRACEPARENT_HEADER};
use holdpoint_domain::Effects;
use holdpoint_domain::{
    Command, CommandEnvelope, Ctx, Decision, Event, EventData, OpenRequest, OrgId, Snapshot,
    Transition, decide, decode_subject_token,
};
use holdpoint_telemetry::metrics::{OUTCOME_DEAD_LETTER, OUTCOME_OK, OUTCOME_RETRY};
use time::OffsetDateTime;
use tracing::{debug, warn};

use crate::cache::{Record, RecordCache, SessionCache};
use crate::delivery::Delivery;
use crate::relay::{self, Owed};
use crate::working::{Key, KeysOf, WorkingSet, encode, outbox_of};
use crate::{Failpoint, WorkerConfig};

/// How many times a batch decides again the commands that lost a race.
pub const CONFLICT_ROUNDS: usize = 4;

/// Where outcome replies may go (`Hp-Reply-To`): the default inboxes, as
/// `holdpoint_bus::outcome::Waiter` makes them.
const REPLY_INBOX_PREFIX: &str = "_INBOX.";

/// The state a partition runner keeps between batches.
#[derive(Debug)]
pub struct Runner {
    /// The NATS boundary the runner reads and writes through.
    pub bus: Bus,
    /// Settings and metrics.
    pub cfg: Arc<WorkerConfig>,
    /// The partition it decides (`None`: the shared consumer of an unpartitioned
    /// deployment).
    pub partition: Option<u32>,
    /// Records of this partition.
    pub cache: RecordCache,
    /// Session headers (shared by the worker's runners).
    pub sessions: SessionCache,
    /// Remembered approval rules (shared by the worker's runners).
    pub rules: crate::rules::RuleBook,
    /// Committed transitions whose effects are not confirmed yet, by command id.
    pub owed: BTreeMap<String, Owed>,
    /// This partition's checkpoint as read when the runner took the partition.
    pub checkpoint: Option<OffsetDateTime>,
    /// True once the takeover sweep relayed what the previous owners left
    /// unconfirmed: from then on this runner vouches for its partition itself.
    pub swept: bool,
    /// Set at a takeover: when this runner took the partition. Until the fence sweep
    /// (see [`relay::zombie_bound`]) ran, what the previous owner may still have
    /// committed after that moment is not known to be confirmed, so the runner
    /// vouches for nothing later.
    pub fence: Option<OffsetDateTime>,
}

/// True when some command of the batch is still on its way and writes a record.
fn has_writes(cmds: &[Cmd]) -> bool {
    cmds.iter()
        .any(|c| c.failure.is_none() && !c.writes.is_empty())
}

/// One command of a batch.
#[derive(Debug)]
struct Cmd {
    delivery: Delivery,
    env: CommandEnvelope,
    ctx: Ctx,
    outcome_key: String,
    reply: Option<String>,
    traceparent: String,
    keys: KeysOf,
    writes: Vec<Key>,
    decision: Option<Decision>,
    failure: Option<(ErrorKind, String)>,
}

impl Cmd {
    fn fail(&mut self, kind: ErrorKind, why: impl Into<String>) {
        if self.failure.is_none() {
            self.failure = Some((kind, why.into()));
        }
    }

    fn touches(&self, keys: &HashSet<Key>) -> bool {
        self.keys
            .all()
            .chain(self.writes.iter())
            .any(|k| keys.contains(k))
    }
}

impl Runner {
    /// Decides, writes, publishes, replies and acks one batch of delivered commands.
    pub async fn process(&mut self, msgs: Vec<jetstream::Message>) {
        if msgs.is_empty() {
            return;
        }
        self.cfg.metrics.batch_commands.observe(msgs.len() as f64);
        let replies: Vec<String> = msgs
            .iter()
            .filter_map(|m| m.reply.as_ref().map(|r| r.to_string()))
            .collect();
        // Long work (NATS slow, a leader election) keeps its messages: a progress ack
        // restarts their ack_wait.
        let every = (self.bus.topo.ack_wait / 3).max(Duration::from_millis(100));
        let client = self.bus.client.clone();
        let work = self.run_batch(msgs);
        tokio::pin!(work);
        let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                () = &mut work => return,
                _ = progress.tick() => {
                    for r in &replies {
                        let _ = client.publish(r.clone(), Bytes::from_static(b"+WPI")).await;
                    }
                }
            }
        }
    }

    async fn run_batch(&mut self, msgs: Vec<jetstream::Message>) {
        let mut cmds = Vec::with_capacity(msgs.len());
        for msg in msgs {
            if let Some(c) = self.admit(msg).await {
                cmds.push(c);
            }
        }
        let mut pending: Vec<Cmd> = cmds;
        for round in 0..CONFLICT_ROUNDS {
            let now = OffsetDateTime::now_utc();
            for c in &mut pending {
                c.ctx = Ctx::new(&c.env, now, self.partition).with_deadlines(self.cfg.deadlines);
            }
            pending = self.round(pending, now).await;
            let (conflicts, others): (Vec<Cmd>, Vec<Cmd>) = pending
                .into_iter()
                .partition(|c| matches!(c.failure, Some((ErrorKind::Conflict, _))));
            self.settle_failed(others).await;
            if conflicts.is_empty() {
                return;
            }
            self.cfg
                .metrics
                .revision_conflicts
                .inc_by(conflicts.len() as u64);
            debug!(
                round,
                conflicts = conflicts.len(),
                "deciding again after lost races"
            );
            pending = conflicts
                .into_iter()
                .map(|mut c| {
                    c.failure = None;
                    c.decision = None;
                    c.writes.clear();
                    c
                })
                .collect();
        }
        self.settle_failed(pending).await;
    }

    /// Decodes a delivered command; terminates it with a dead letter when it cannot
    /// be decided.
    async fn admit(&self, msg: jetstream::Message) -> Option<Cmd> {
        let header = |name: &str| {
            msg.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.to_string())
        };
        let traceparent = holdpoint_telemetry::trace::TraceContext::continue_or_start(
            header(TRACEPARENT_HEADER).as_deref(),
        )
        .child()
        .header_value();
        let (msg_id, reply) = (header("Nats-Msg-Id"), header(REPLY_HEADER));
        let subject = msg.subject.to_string();
        let decoded = serde_json::from_slice::<CommandEnvelope>(&msg.payload);
        let delivery = Delivery::new(msg);
        if delivery.delivered > 1 {
            self.cfg.metrics.redeliveries.inc();
        }
        let env = match decoded {
            Ok(env) => env,
            Err(e) => {
                let why = format!("undecodable command: {e}");
                self.dead_letter(delivery, &subject, &why, &traceparent)
                    .await;
                self.cfg.metrics.command("unknown", OUTCOME_DEAD_LETTER);
                return None;
            }
        };
        let published = self
            .bus
            .topo
            .published_command_subject(&subject, self.partition.is_some());
        if self.bus.topo.command_subject(&env) != published {
            let why = "command does not match its subject";
            self.dead_letter(delivery, &subject, why, &traceparent)
                .await;
            self.cfg.metrics.command(env.verb(), OUTCOME_DEAD_LETTER);
            return None;
        }
        let ctx = Ctx::new(&env, OffsetDateTime::now_utc(), self.partition)
            .with_deadlines(self.cfg.deadlines);
        // Outcomes are stored under the publish's Nats-Msg-Id: the command id, or the
        // command id with a `-r<n>` suffix (see holdpoint_bus::outcome).
        let outcome_key = msg_id
            .filter(|k| {
                k.strip_prefix(&ctx.command_id)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with("-r"))
            })
            .unwrap_or_else(|| ctx.command_id.clone());
        // Outcomes go to inboxes only: the worker may publish into every stream and
        // bucket, and the header is the publisher's to choose.
        let reply = reply.filter(|r| {
            let inbox = r.starts_with(REPLY_INBOX_PREFIX);
            if !inbox {
                warn!(reply = %r, "reply subject is not an inbox; not replying");
            }
            inbox
        });
        Some(Cmd {
            delivery,
            env,
            ctx,
            outcome_key,
            reply,
            traceparent,
            keys: KeysOf::default(),
            writes: Vec::new(),
            decision: None,
            failure: None,
        })
    }

    /// One round: load, decide, write, publish, reply, ack. Returns the commands
    /// that failed (the others are settled).
    async fn round(&mut self, mut cmds: Vec<Cmd>, now: OffsetDateTime) -> Vec<Cmd> {
        let mut ws = WorkingSet::default();
        let mut relay: BTreeMap<String, Owed> = BTreeMap::new();
        if let Err((key, e)) = self.load(&mut ws, &cmds, &mut relay, now).await {
            let kind = e.kind();
            warn!(key = ?key, error = %e, "cannot load records; commands will be redelivered");
            for c in &mut cmds {
                c.fail(kind, e.to_string());
            }
            return cmds;
        }
        self.decide_all(&mut ws, &mut cmds, &mut relay, now).await;
        let landed = self.write(&ws, &mut cmds).await;
        self.failpoint(Failpoint::AfterWrite, &cmds);
        let published = self.publish(&mut cmds, &relay).await;
        self.remember(&ws, &landed, &cmds);
        for (id, o) in relay {
            if published.contains(&id) {
                self.cfg.metrics.relayed.inc();
                self.owed.remove(&id);
            } else {
                self.owed.insert(id, o);
            }
        }
        self.failpoint(Failpoint::BeforeAck, &cmds);
        let (done, failed): (Vec<Cmd>, Vec<Cmd>) =
            cmds.into_iter().partition(|c| c.failure.is_none());
        for c in done {
            self.finish(c).await;
        }
        failed
    }

    fn failpoint(&self, at: Failpoint, cmds: &[Cmd]) {
        if self.cfg.failpoint == Some(at) && has_writes(cmds) {
            eprintln!("holdpoint worker: failpoint {at:?} reached, aborting");
            std::process::abort();
        }
    }

    /// Loads what every command needs: first what the commands name, then what their
    /// interactions lead to. Queues the due transitions of records read from KV.
    async fn load(
        &mut self,
        ws: &mut WorkingSet,
        cmds: &[Cmd],
        relay: &mut BTreeMap<String, Owed>,
        now: OffsetDateTime,
    ) -> Result<(), (Key, BusError)> {
        for _ in 0..2 {
            let wanted: Vec<Key> = cmds
                .iter()
                .flat_map(|c| ws.keys_of(&c.env).all().cloned().collect::<Vec<_>>())
                .collect();
            let read = ws
                .load(&self.bus, &self.cache, &self.sessions, wanted)
                .await?;
            self.queue_due(ws, &read, relay, now);
        }
        Ok(())
    }

    fn queue_due(
        &self,
        ws: &WorkingSet,
        read: &[Key],
        relay: &mut BTreeMap<String, Owed>,
        now: OffsetDateTime,
    ) {
        let horizon = relay::dedup_horizon(&self.bus, now);
        let checkpoint = self.effective_checkpoint(now);
        for key in read {
            if let Some(record) = ws.record(key) {
                for t in relay::due(record, horizon, self.partition, checkpoint) {
                    relay
                        .entry(t.command_id.clone())
                        .or_insert_with(|| Owed::of(t));
                }
            }
        }
    }

    async fn decide_all(
        &mut self,
        ws: &mut WorkingSet,
        cmds: &mut [Cmd],
        relay: &mut BTreeMap<String, Owed>,
        now: OffsetDateTime,
    ) {
        let in_batch: HashSet<String> = cmds.iter().map(|c| c.ctx.command_id.clone()).collect();
        // Openings of approvals are decided with every rule written before now.
        if cmds.iter().any(|c| opens_approval(&c.env)) && !self.rules.fresh(&self.bus).await {
            warn!(
                partition = ?self.partition,
                "the rule watch is behind; deciding approvals with the rules it has"
            );
        }
        for c in cmds.iter_mut() {
            let rules = if opens_approval(&c.env) {
                self.rules.for_org(&c.env.org)
            } else {
                Vec::new()
            };
            let mut verified = false;
            loop {
                // A decision earlier in the batch may lead this one to a record not
                // loaded yet (a session opened in this batch makes its question a
                // product one).
                if let Err(e) = self
                    .load_late(ws, &c.env, &ws.keys_of(&c.env), relay, now)
                    .await
                {
                    c.fail(e.0, e.1);
                    break;
                }
                let keys = ws.keys_of(&c.env);
                let snapshot = Snapshot {
                    rules: &rules,
                    ..ws.snapshot(&keys)
                };
                let mut d = decide(snapshot, &c.env, &c.ctx);
                // A refusal decided on cached records is checked on fresh ones: the
                // cache of a record another partition wrote may be behind, and a
                // refusal writes nothing a revision could catch.
                if !d.writes() && !d.replay && !verified {
                    let dropped = ws.drop_cached(&keys);
                    if !dropped.is_empty() {
                        for k in &dropped {
                            self.forget(k);
                        }
                        verified = true;
                        continue;
                    }
                }
                if d.replay && !d.effects.is_empty() && !self.replay_due(ws, &keys, &c.ctx, now) {
                    // Its effects were confirmed (by this runner, or by a sweep): a
                    // late repeat of the command must not store them a second time.
                    d.effects = Effects::default();
                }
                let owed = &self.owed;
                let confirmed = |t: &Transition| {
                    !in_batch.contains(&t.command_id)
                        && !owed.contains_key(&t.command_id)
                        && !relay.contains_key(&t.command_id)
                };
                c.writes = ws.apply(&c.env, &d, &confirmed);
                c.keys = keys;
                c.decision = Some(d);
                break;
            }
        }
    }

    /// Loads records a decision needs that the batch did not load up front; their
    /// transitions due for the relay join this round's relay (published before any
    /// command's effects).
    async fn load_late(
        &mut self,
        ws: &mut WorkingSet,
        env: &CommandEnvelope,
        keys: &KeysOf,
        relay: &mut BTreeMap<String, Owed>,
        now: OffsetDateTime,
    ) -> Result<(), (ErrorKind, String)> {
        let mut keys = keys.clone();
        let mut read = Vec::new();
        // Twice: an interaction read now leads to its task, session and lane.
        for _ in 0..2 {
            if keys.all().all(|k| ws.has(k)) {
                break;
            }
            let wanted: Vec<Key> = keys.all().cloned().collect();
            read.extend(
                ws.load(&self.bus, &self.cache, &self.sessions, wanted)
                    .await
                    .map_err(|(_, e)| (e.kind(), e.to_string()))?,
            );
            keys = ws.keys_of(env);
        }
        self.queue_due(ws, &read, relay, now);
        Ok(())
    }

    /// True when the replayed transition of `ctx`'s command is due for the relay.
    fn replay_due(&self, ws: &WorkingSet, keys: &KeysOf, ctx: &Ctx, now: OffsetDateTime) -> bool {
        let horizon = relay::dedup_horizon(&self.bus, now);
        let checkpoint = self.effective_checkpoint(now);
        keys.all().filter_map(|k| ws.record(k)).any(|r| {
            relay::due(r, horizon, self.partition, checkpoint)
                .iter()
                .any(|t| t.command_id == ctx.command_id)
        })
    }

    /// The checkpoint this runner reads its partition's transitions against: what it
    /// vouches for itself once its takeover sweep ran, else the one it read.
    pub fn effective_checkpoint(&self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        if self.swept {
            Some(self.vouched(now))
        } else {
            self.checkpoint
        }
    }

    /// Writes every changed record (secondary ones, then interactions) and fails the
    /// commands a failed write concerns. Returns the new revision of each key that
    /// landed.
    async fn write(&self, ws: &WorkingSet, cmds: &mut [Cmd]) -> BTreeMap<Key, u64> {
        let mut landed = BTreeMap::new();
        let mut tainted: HashSet<Key> = HashSet::new();
        for secondary in [true, false] {
            let dirty: Vec<(&Key, &crate::working::Slot)> = ws
                .slots()
                .filter(|(k, s)| s.dirty && k.is_secondary() == secondary && !tainted.contains(*k))
                .collect();
            let mut inflight: Vec<(Key, Result<PendingWrite, BusError>)> = Vec::new();
            for (key, slot) in dirty {
                let Some(record) = slot.record.as_deref() else {
                    continue;
                };
                let marker = outbox_of(record).and_then(|o| o.unconfirmed_marker());
                let started = match encode(record) {
                    Ok(body) => {
                        self.bus
                            .cas_start(
                                key.bucket(),
                                key.kv(),
                                slot.revision,
                                body,
                                marker.as_deref(),
                            )
                            .await
                    }
                    Err(e) => Err(e),
                };
                inflight.push((key.clone(), started));
            }
            for (key, started) in inflight {
                let result = match started {
                    Ok(w) => w.landed().await,
                    Err(e) => Err(e),
                };
                match result {
                    Ok(rev) => {
                        landed.insert(key, rev);
                    }
                    Err(e) => {
                        debug!(key = ?key, error = %e, "record write failed");
                        for c in cmds.iter_mut().filter(|c| c.writes.contains(&key)) {
                            c.fail(e.kind(), e.to_string());
                        }
                        tainted.insert(key);
                    }
                }
            }
            spread_failures(cmds, &mut tainted);
        }
        landed
    }

    /// Publishes the relayed effects and each surviving command's effects (and
    /// stored outcome); fails the commands whose PubAcks did not all come back.
    /// Returns the command ids of the relayed transitions that were confirmed.
    async fn publish(
        &mut self,
        cmds: &mut [Cmd],
        relay: &BTreeMap<String, Owed>,
    ) -> HashSet<String> {
        let tp = holdpoint_telemetry::trace::TraceContext::new_root().header_value();
        let mut relayed: Vec<(String, Result<Inflight, BusError>)> = Vec::new();
        for (id, o) in relay {
            relayed.push((id.clone(), self.bus.publish_effects(&o.effects, &tp).await));
        }
        let mut mine: Vec<Option<Result<Inflight, BusError>>> = Vec::with_capacity(cmds.len());
        for c in cmds.iter() {
            mine.push(match (&c.failure, &c.decision) {
                (None, Some(d)) => Some(self.publish_one(c, d).await),
                _ => None,
            });
        }
        let mut confirmed = HashSet::new();
        for (id, r) in relayed {
            let ok = match r {
                Ok(f) => f.confirmed().await.is_ok(),
                Err(_) => false,
            };
            if ok {
                confirmed.insert(id);
            }
        }
        for (c, r) in cmds.iter_mut().zip(mine) {
            let Some(r) = r else { continue };
            let result = match r {
                Ok(f) => f.confirmed().await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                warn!(command_id = %c.ctx.command_id, error = %e, "effects not confirmed; they stay owed");
                if let Some(d) = &c.decision
                    && d.writes()
                    && !d.effects.is_empty()
                {
                    self.owed.insert(
                        c.ctx.command_id.clone(),
                        Owed {
                            command_id: c.ctx.command_id.clone(),
                            at: c.ctx.now,
                            effects: d.effects.clone(),
                        },
                    );
                }
                c.fail(e.kind(), e.to_string());
            } else {
                self.owed.remove(&c.ctx.command_id);
            }
        }
        confirmed
    }

    async fn publish_one(&self, c: &Cmd, d: &Decision) -> Result<Inflight, BusError> {
        let mut out = self.bus.publish_effects(&d.effects, &c.traceparent).await?;
        // The outcome is stored where no record answers a repeated request: for a
        // decision that wrote nothing, or a retry under a fresh message id.
        if (!d.writes() && !d.replay) || c.outcome_key != c.ctx.command_id {
            let body = serde_json::to_vec(&d.outcome)
                .map_err(|e| BusError::permanent("encode outcome", e))?;
            out.extend(self.bus.store_outcome(&c.outcome_key, body.into()).await?);
        }
        Ok(out)
    }

    /// Keeps what landed in the caches; forgets what did not.
    fn remember(&mut self, ws: &WorkingSet, landed: &BTreeMap<Key, u64>, cmds: &[Cmd]) {
        let failed: HashSet<&Key> = cmds
            .iter()
            .filter(|c| c.failure.is_some())
            .flat_map(|c| c.writes.iter())
            .collect();
        for (key, slot) in ws.slots() {
            let Some(record) = &slot.record else { continue };
            let revision = match (slot.dirty, landed.get(key)) {
                // Clean and from a cache: nothing new to keep.
                (false, _) if !slot.from_kv => continue,
                (false, _) => slot.revision,
                (true, Some(rev)) if !failed.contains(key) => *rev,
                _ => {
                    self.forget(key);
                    continue;
                }
            };
            match (key, record.as_ref()) {
                (Key::Session(k), Record::Session(s)) => {
                    self.sessions.offer(k, Arc::new(s.clone()), revision);
                }
                _ => {
                    let bytes = encode(record).map_or(4096, |b| b.len() as u64);
                    self.cache
                        .put(key.cache_key(), record.clone(), revision, bytes);
                }
            }
        }
    }

    fn forget(&mut self, key: &Key) {
        match key {
            Key::Session(k) => self.sessions.forget(k),
            other => self.cache.forget(&other.cache_key()),
        }
    }

    /// Replies and acks a command whose effects are confirmed.
    async fn finish(&self, c: Cmd) {
        let Some(d) = &c.decision else { return };
        self.cfg.metrics.command(
            c.env.verb(),
            match &d.outcome.result {
                Ok(_) => OUTCOME_OK,
                Err(r) => r.code.spec().code,
            },
        );
        if let Some(reply) = &c.reply
            && let Ok(body) = serde_json::to_vec(&d.outcome)
        {
            let _ = self.bus.client.publish(reply.clone(), body.into()).await;
        }
        debug!(
            command_id = %c.ctx.command_id,
            verb = c.env.verb(),
            org = %c.env.org,
            result = ?d.outcome.result,
            replay = d.replay,
            "command done"
        );
        c.delivery.ack().await;
    }

    /// NAKs (or, for a permanent failure, terminates with a dead letter) the
    /// commands that failed.
    async fn settle_failed(&self, cmds: Vec<Cmd>) {
        for c in cmds {
            let Some((kind, why)) = c.failure.clone() else {
                // Not failed: settled already (unreachable by construction).
                continue;
            };
            match kind {
                ErrorKind::Permanent => {
                    let subject = c
                        .delivery
                        .message()
                        .map(|m| m.subject.to_string())
                        .unwrap_or_default();
                    self.cfg.metrics.command(c.env.verb(), OUTCOME_DEAD_LETTER);
                    self.dead_letter(c.delivery, &subject, &why, &c.traceparent)
                        .await;
                }
                kind => {
                    self.cfg.metrics.command(c.env.verb(), OUTCOME_RETRY);
                    warn!(command_id = %c.ctx.command_id, error = %why, "command not finished; will be redelivered");
                    c.delivery.fail(kind, &Backoff::TRANSIENT).await;
                }
            }
        }
    }

    /// Terminates a command and leaves a `dead-letter` event naming it; if the event
    /// cannot be stored the command is NAKed instead (nothing is dropped silently).
    async fn dead_letter(
        &self,
        delivery: Delivery,
        subject: &str,
        reason: &str,
        traceparent: &str,
    ) {
        let seq = delivery.stream_sequence;
        warn!(subject, seq, reason, "dead-lettering command");
        // `hp.cmd.[<p>.]<org>.…`
        let at = if self.partition.is_some() { 3 } else { 2 };
        let org = subject
            .split('.')
            .nth(at)
            .and_then(decode_subject_token)
            .and_then(|s| OrgId::parse(s).ok())
            .or_else(|| OrgId::parse("_unknown").ok());
        let Some(org) = org else {
            delivery
                .fail(ErrorKind::Permanent, &Backoff::TRANSIENT)
                .await;
            return;
        };
        let event = Event::new(
            &org,
            None,
            subject,
            &format!("dead-letter\u{0}{seq}"),
            OffsetDateTime::now_utc(),
            EventData::DeadLetter {
                subject: subject.to_owned(),
                stream_sequence: seq,
                reason: reason.to_owned(),
            },
        );
        let stored = match self.bus.publish_event(&event, traceparent).await {
            Ok(f) => f.confirmed().await,
            Err(e) => Err(e),
        };
        match stored {
            Ok(()) => {
                delivery
                    .fail(ErrorKind::Permanent, &Backoff::TRANSIENT)
                    .await
            }
            Err(e) => {
                warn!(error = %e, "dead-letter event not stored; command stays for redelivery");
                delivery
                    .fail(ErrorKind::Transient, &Backoff::TRANSIENT)
                    .await;
            }
        }
    }
}

/// Fails, to a fixed point, every command that touched a tainted record, and taints
/// every record such a command changed.
fn spread_failures(cmds: &mut [Cmd], tainted: &mut HashSet<Key>) {
    loop {
        let mut changed = false;
        for c in cmds.iter_mut() {
            let doomed = c.failure.is_some() || c.touches(tainted);
            if !doomed {
                continue;
            }
            if c.failure.is_none() {
                c.fail(
                    ErrorKind::Conflict,
                    "a record it depends on was not written",
                );
            }
            for k in &c.writes {
                if tainted.insert(k.clone()) {
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

impl Runner {
    /// Publishes again the transitions whose effects this runner could not confirm.
    /// Returns true when none is owed any more.
    pub async fn retry_owed(&mut self) -> bool {
        if self.owed.is_empty() {
            return true;
        }
        let tp = holdpoint_telemetry::trace::TraceContext::new_root().header_value();
        let mut confirmed = Vec::new();
        for (id, o) in &self.owed {
            let r = match self.bus.publish_effects(&o.effects, &tp).await {
                Ok(f) => f.confirmed().await,
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => confirmed.push(id.clone()),
                Err(e) => {
                    debug!(command_id = %id, error = %e, "owed effects still not confirmed");
                    break;
                }
            }
        }
        for id in confirmed {
            self.owed.remove(&id);
            self.cfg.metrics.relayed.inc();
        }
        self.owed.is_empty()
    }

    /// The checkpoint this runner can vouch for now: every transition it committed
    /// before it is confirmed.
    pub fn vouched(&self, now: OffsetDateTime) -> OffsetDateTime {
        self.owed
            .values()
            .map(|o| o.at)
            .min()
            .unwrap_or(now)
            .min(now)
    }

    /// The checkpoint to save for the partition's next owners: [`Runner::vouched`],
    /// but no later than the takeover until the fence sweep ran (what a previous
    /// owner committed late is not this runner's to vouch for before that).
    pub fn checkpoint_to_save(&self, now: OffsetDateTime) -> OffsetDateTime {
        let own = self.vouched(now);
        self.fence.map_or(own, |taken| own.min(taken))
    }

    /// The effects owed, for tests and metrics.
    pub fn owed_effects(&self) -> impl Iterator<Item = &Effects> {
        self.owed.values().map(|o| &o.effects)
    }
}

/// True when `env` opens an approval (decided with the organisation's rules).
fn opens_approval(env: &CommandEnvelope) -> bool {
    matches!(&env.command, Command::Open(o) if matches!(o.request, OpenRequest::Approval { .. }))
}

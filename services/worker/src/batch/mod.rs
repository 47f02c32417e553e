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

use holdpoint_bus::delivery::Delivery;
use holdpoint_bus::{Bus, BusError, ErrorKind};
use holdpoint_domain::{
    Command, CommandEnvelope, Ctx, Decision, OpenRequest, Snapshot, Transition, decide,
};
use holdpoint_domain::{CommandId, Effects};
use holdpoint_telemetry::metrics::OUTCOME_DEAD_LETTER;
use time::OffsetDateTime;
use tracing::{debug, warn};

use crate::cache::{RecordCache, SessionCache};
use crate::relay::{self, Owed};
use crate::working::{Key, KeysOf, WorkingSet};
use crate::{Failpoint, WorkerConfig};

/// How many times a batch decides again the commands that lost a race.
pub const CONFLICT_ROUNDS: usize = 4;

/// The state a partition runner keeps between batches.
#[derive(Debug)]
pub struct Runner {
    /// The NATS boundary the runner reads and writes through.
    pub bus: Bus,
    /// Settings and metrics.
    pub cfg: Arc<WorkerConfig>,
    /// The partition it decides.
    pub partition: u32,
    /// Records of this partition.
    pub cache: RecordCache,
    /// Session headers (shared by the worker's runners).
    pub sessions: SessionCache,
    /// Remembered approval rules (shared by the worker's runners).
    pub rules: crate::rules::RuleBook,
    /// Transitions this worker saw confirmed (shared by the worker's runners).
    pub confirmed: crate::cache::Confirmed,
    /// Committed transitions whose effects are not confirmed yet, by command id.
    pub owed: BTreeMap<CommandId, Owed>,
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
    /// The server's clock as the delivered commands show it: deadlines are
    /// computed on it (see [`crate::server_clock`]).
    pub server_clock: crate::server_clock::ServerClock,
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
    pub async fn process(&mut self, msgs: Vec<Delivery>) {
        if msgs.is_empty() {
            return;
        }
        self.cfg.metrics.batch_commands.observe(msgs.len() as f64);
        let acks: Vec<_> = msgs.iter().filter_map(|d| d.progress(&self.bus)).collect();
        // Long work (NATS slow, a leader election) keeps its messages: a progress ack
        // restarts their ack_wait.
        let every = (self.bus.topo.ack_wait / 3).max(Duration::from_millis(100));
        let work = self.run_batch(msgs);
        tokio::pin!(work);
        let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                () = &mut work => return,
                _ = progress.tick() => {
                    for a in &acks {
                        a.send().await;
                    }
                }
            }
        }
    }

    async fn run_batch(&mut self, msgs: Vec<Delivery>) {
        let mut cmds = Vec::with_capacity(msgs.len());
        for published in msgs.iter().filter_map(|d| d.published) {
            self.server_clock.observe(published);
        }
        for msg in msgs {
            if let Some(c) = self.admit(msg).await {
                cmds.push(c);
            }
        }
        let mut pending: Vec<Cmd> = cmds;
        for round in 0..CONFLICT_ROUNDS {
            let now = OffsetDateTime::now_utc();
            // Deadlines on the server's clock; everything else (event times, the
            // relay's checkpoints) on this worker's.
            let server_now = self.server_clock.now();
            for c in &mut pending {
                c.ctx = Ctx::new(&c.env, now, Some(self.partition))
                    .with_deadlines(self.cfg.deadlines)
                    .with_server_now(server_now);
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
    async fn admit(&self, mut delivery: Delivery) -> Option<Cmd> {
        let traceparent = holdpoint_telemetry::trace::TraceContext::continue_or_start(
            delivery.traceparent.as_deref(),
        )
        .child()
        .header_value();
        let (msg_id, reply) = (delivery.msg_id.take(), delivery.reply.take());
        let subject = delivery.subject.clone();
        let decoded = serde_json::from_slice::<CommandEnvelope>(&delivery.payload);
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
        let published = self.bus.topo.published_command_subject(&subject);
        if self.bus.topo.command_subject(&env) != published {
            let why = "command does not match its subject";
            self.dead_letter(delivery, &subject, why, &traceparent)
                .await;
            self.cfg.metrics.command(env.verb(), OUTCOME_DEAD_LETTER);
            return None;
        }
        let ctx = Ctx::new(&env, OffsetDateTime::now_utc(), Some(self.partition))
            .with_deadlines(self.cfg.deadlines);
        // Outcomes are stored under the publish's Nats-Msg-Id: the command id, or the
        // command id with a `-r<n>` suffix (see holdpoint_bus::outcome).
        let outcome_key = msg_id
            .filter(|k| {
                k.strip_prefix(ctx.command_id.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with("-r"))
            })
            .unwrap_or_else(|| ctx.command_id.to_string());
        // Outcomes go to inboxes only, and never to another organisation's own
        // prefix: the worker may publish into every stream and bucket, and the
        // header is the publisher's to choose.
        let reply = reply.filter(|r| {
            let allowed = holdpoint_bus::permissions::reply_allowed(r, &env.org);
            if !allowed {
                warn!(reply = %r, "reply subject is not this organisation's inbox; not replying");
            }
            allowed
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
        let mut relay: BTreeMap<CommandId, Owed> = BTreeMap::new();
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
        relay: &mut BTreeMap<CommandId, Owed>,
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
        relay: &mut BTreeMap<CommandId, Owed>,
        now: OffsetDateTime,
    ) {
        let horizon = relay::dedup_horizon(&self.bus, now);
        let checkpoint = self.effective_checkpoint(now);
        for key in read {
            if let Some(record) = ws.record(key) {
                for t in relay::due(record, horizon, Some(self.partition), checkpoint) {
                    if self.confirmed.contains(t.command_id.as_str()) {
                        continue;
                    }
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
        relay: &mut BTreeMap<CommandId, Owed>,
        now: OffsetDateTime,
    ) {
        let in_batch: HashSet<CommandId> = cmds.iter().map(|c| c.ctx.command_id.clone()).collect();
        // Openings of approvals are decided with every rule written before now.
        if cmds.iter().any(|c| opens_approval(&c.env)) && !self.rules.fresh(&self.bus).await {
            warn!(
                partition = self.partition,
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
                // A refusal is checked on the records as the buckets' stream leaders
                // hold them: a cache of a record another partition wrote may be
                // behind, a direct get may be answered by a lagging replica (an
                // interaction read as absent gave `404 NRY-0004` under the partition
                // schedule), and a refusal writes nothing a revision could catch.
                if !d.writes() && !d.replay && !verified {
                    verified = true;
                    match ws.reload_from_leader(&self.bus, &keys).await {
                        Ok(replaced) if !replaced.is_empty() => {
                            for k in &replaced {
                                self.forget(k);
                            }
                            self.queue_due(ws, &replaced, relay, now);
                            continue;
                        }
                        Ok(_) => {}
                        Err((_, e)) => {
                            c.fail(e.kind(), e.to_string());
                            break;
                        }
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
        relay: &mut BTreeMap<CommandId, Owed>,
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
        !self.confirmed.contains(ctx.command_id.as_str())
            && keys.all().filter_map(|k| ws.record(k)).any(|r| {
                relay::due(r, horizon, Some(self.partition), checkpoint)
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
}

mod commit;
mod settle;
mod vouch;

/// True when `env` opens an approval (decided with the organisation's rules).
fn opens_approval(env: &CommandEnvelope) -> bool {
    matches!(&env.command, Command::Open(o) if matches!(o.request, OpenRequest::Approval { .. }))
}

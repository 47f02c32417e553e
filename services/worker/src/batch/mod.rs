//! Group commit: a partition runner decides a pulled batch of commands in memory,
//! then writes everything they change, and every effect they have, as **one atomic
//! batch** to the state stream, so concurrent answers share one commit (and one
//! fsync) and a decision is never stored without its effects.
//!
//! For one batch, in this order:
//!
//! 1. **Admit.** Decode each command; one that cannot be decoded, or does not match
//!    its subject, is terminated with a `dead-letter` event.
//! 2. **Load.** The records every command needs, from the caches or, every miss at
//!    once, from the state stream.
//! 3. **Decide.** Each command in turn with the pure `decide`, on the records as the
//!    commands before it left them. A redelivered command whose transition the
//!    record holds is a replay: its outcome is sent again, and nothing is written
//!    (its effects were committed with it).
//! 4. **Commit.** Every changed record once, at the revision it was read at, then
//!    every command's effects, in one batch ([`holdpoint_bus::commit`]), which the
//!    worker stores together with the other partitions' batches of the moment
//!    ([`group`]); then the outcomes of the decisions that wrote nothing are
//!    stored.
//! 5. **Reply and ack** each command, after the commit's PubAck.
//!
//! What each failure of the commit means is [`holdpoint_bus::batch::next_step`]:
//! an abandoned or unanswered batch is resent under a new id (the bus does that),
//! and a conflict stored nothing, so every command of the batch is decided again on
//! fresh reads, **each alone** (one batch per command: the command that conflicts
//! holds back nothing else), up to [`CONFLICT_ROUNDS`] times, then NAKed with the
//! transient back-off. A transition the fresh read already holds was this runner's
//! own earlier commit whose PubAck was lost: it is a replay. Only a command that
//! cannot be decoded, or a batch the server refuses for good, is terminated.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_bus::delivery::Delivery;
use holdpoint_bus::{Bus, BusError, ErrorKind};
use holdpoint_domain::{
    Command, CommandEnvelope, Ctx, Decision, Effects, OpenRequest, Snapshot, decide,
};
use holdpoint_telemetry::metrics::OUTCOME_DEAD_LETTER;
use time::OffsetDateTime;
use tracing::{debug, warn};

use crate::cache::{RecordCache, SessionCache};
use crate::working::{Key, KeysOf, WorkingSet};
use crate::{Failpoint, WorkerConfig};

/// How many times the commands of a batch that lost a race are decided again.
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
    /// The server's clock as the delivered commands show it: deadlines are
    /// computed on it (see [`crate::server_clock`]).
    pub server_clock: crate::server_clock::ServerClock,
    /// The worker's committer, shared by its runners ([`group`]).
    pub committer: group::GroupCommit,
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
}

impl Runner {
    /// Decides, commits, replies and acks one batch of delivered commands.
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
        // The whole group in one commit; after a conflict, each command alone.
        let mut conflicts = self.round_settling(cmds).await;
        for round in 1..=CONFLICT_ROUNDS {
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
                "deciding again, one command per commit, after a lost race"
            );
            let mut next = Vec::new();
            for mut c in conflicts {
                c.failure = None;
                c.decision = None;
                c.writes.clear();
                next.extend(self.round_settling(vec![c]).await);
            }
            conflicts = next;
        }
        self.settle_failed(conflicts).await;
    }

    /// One round on `cmds` with fresh contexts; settles the commands that failed
    /// for another reason than a conflict, and returns the conflicting ones.
    async fn round_settling(&mut self, mut cmds: Vec<Cmd>) -> Vec<Cmd> {
        let now = OffsetDateTime::now_utc();
        // Deadlines on the server's clock; event times on this worker's.
        let server_now = self.server_clock.now();
        for c in &mut cmds {
            c.ctx = Ctx::new(&c.env, now, Some(self.partition))
                .with_deadlines(self.cfg.deadlines)
                .with_server_now(server_now);
        }
        let failed = self.round(cmds).await;
        let (conflicts, others): (Vec<Cmd>, Vec<Cmd>) = failed
            .into_iter()
            .partition(|c| matches!(c.failure, Some((ErrorKind::Conflict, _))));
        self.settle_failed(others).await;
        conflicts
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

    /// One round: load, decide, commit, reply, ack. Returns the commands that
    /// failed (the others are settled).
    async fn round(&mut self, mut cmds: Vec<Cmd>) -> Vec<Cmd> {
        let mut ws = WorkingSet::default();
        if let Err((key, e)) = self.load(&mut ws, &cmds).await {
            let kind = e.kind();
            warn!(key = ?key, error = %e, "cannot load records; commands will be redelivered");
            for c in &mut cmds {
                c.fail(kind, e.to_string());
            }
            return cmds;
        }
        self.decide_all(&mut ws, &mut cmds).await;
        self.failpoint(Failpoint::StopBeforeCommit, &cmds);
        let committed = self.commit(&ws, &mut cmds).await;
        self.failpoint(Failpoint::AfterWrite, &cmds);
        self.store_outcomes(&mut cmds).await;
        self.remember(&ws, committed.as_ref());
        self.failpoint(Failpoint::BeforeAck, &cmds);
        let (done, failed): (Vec<Cmd>, Vec<Cmd>) =
            cmds.into_iter().partition(|c| c.failure.is_none());
        for c in done {
            self.finish(c).await;
        }
        failed
    }

    fn failpoint(&self, at: Failpoint, cmds: &[Cmd]) {
        if self.cfg.failpoint != Some(at) || !has_writes(cmds) {
            return;
        }
        if at == Failpoint::StopBeforeCommit {
            eprintln!("holdpoint worker: failpoint {at:?} reached, stopping");
            // The process stops here until a SIGCONT; the batch then commits. The
            // signal is raised on this thread (`tgkill`), which stops before it
            // returns. Sent to the process (`kill -STOP <pid>`, as a `kill` child
            // did before), it may be taken by another thread, and this one ran on
            // and committed before the stop reached it: the zombie test failed in
            // 1 to 3 of every 16 runs on a loaded machine that way, 0 of 16 since.
            if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
                eprintln!("holdpoint worker: cannot stop: {e}; aborting");
                std::process::abort();
            }
            return;
        }
        eprintln!("holdpoint worker: failpoint {at:?} reached, aborting");
        std::process::abort();
    }

    /// Loads what every command needs: first what the commands name, then what their
    /// interactions lead to.
    async fn load(&mut self, ws: &mut WorkingSet, cmds: &[Cmd]) -> Result<(), (Key, BusError)> {
        for _ in 0..2 {
            let wanted: Vec<Key> = cmds
                .iter()
                .flat_map(|c| ws.keys_of(&c.env).all().cloned().collect::<Vec<_>>())
                .collect();
            ws.load(&self.bus, &self.cache, &self.sessions, wanted)
                .await?;
        }
        Ok(())
    }

    async fn decide_all(&mut self, ws: &mut WorkingSet, cmds: &mut [Cmd]) {
        // Openings of approvals are decided with every rule written before now.
        if cmds.iter().any(|c| opens_approval(&c.env)) && !self.rules.fresh(&self.bus).await {
            warn!(
                partition = self.partition,
                "the rule watch is behind; deciding approvals with the rules it has"
            );
        }
        for c in cmds.iter_mut() {
            let rules = if opens_approval(&c.env) {
                // Rules match on the server's clock (`decide::open`): only what
                // has expired on both clocks leaves the book.
                self.rules
                    .for_org(&c.env.org, c.ctx.now.min(c.ctx.server_now))
            } else {
                Vec::new()
            };
            let mut verified = false;
            loop {
                // A decision earlier in the batch may lead this one to a record not
                // loaded yet (a session opened in this batch makes its question a
                // product one).
                if let Err(e) = self.load_late(ws, &c.env, &ws.keys_of(&c.env)).await {
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
                            continue;
                        }
                        Ok(_) => {}
                        Err((_, e)) => {
                            c.fail(e.kind(), e.to_string());
                            break;
                        }
                    }
                }
                if d.replay {
                    // Its effects were committed with its transition: a repeat of the
                    // command stores nothing again.
                    d.effects = Effects::default();
                }
                c.writes = ws.apply(&c.env, &d);
                c.keys = keys;
                c.decision = Some(d);
                break;
            }
        }
    }

    /// Loads records a decision needs that the batch did not load up front.
    async fn load_late(
        &mut self,
        ws: &mut WorkingSet,
        env: &CommandEnvelope,
        keys: &KeysOf,
    ) -> Result<(), (ErrorKind, String)> {
        let mut keys = keys.clone();
        // Twice: an interaction read now leads to its task, session and lane.
        for _ in 0..2 {
            if keys.all().all(|k| ws.has(k)) {
                break;
            }
            let wanted: Vec<Key> = keys.all().cloned().collect();
            ws.load(&self.bus, &self.cache, &self.sessions, wanted)
                .await
                .map_err(|(_, e)| (e.kind(), e.to_string()))?;
            keys = ws.keys_of(env);
        }
        Ok(())
    }
}

mod commit;
pub mod group;
mod settle;

/// True when `env` opens an approval (decided with the organisation's rules).
fn opens_approval(env: &CommandEnvelope) -> bool {
    matches!(&env.command, Command::Open(o) if matches!(o.request, OpenRequest::Approval { .. }))
}

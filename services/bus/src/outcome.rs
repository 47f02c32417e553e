//! Publishing a command and waiting, bounded, for its outcome: the reply-inbox and
//! retry-id protocol, in one place.
//!
//! Each request registers a reply subject under this process's inbox and publishes
//! the command with it in the `Hp-Reply-To` header, with `Nats-Msg-Id` = the command
//! id. When JetStream reports the publish as a duplicate (a retry, or a concurrent
//! request with the same key, inside the duplicate window), the original's reply goes
//! elsewhere, so the request reads the recorded outcome instead
//! ([`Bus::recorded_outcome`]): from the record the command wrote (its transition in
//! the outbox, or an interaction's resolution), else from `HP_OUTCOMES`, where the
//! worker stores the outcomes of decisions that wrote nothing. If no outcome arrives
//! in time the caller gets a retryable 503; the retry with the same key gets the
//! recorded outcome.
//!
//! Only decisions are replayed. A stored or replayed refusal that changed nothing
//! and may not hold any more (the interaction did not exist yet, a lane was full,
//! Holdpoint was unavailable: [`Outcome::is_decision`] is false, the rule is the
//! domain's [`ErrorCode::is_provisional`]) is not the key's answer: the command is
//! published again under a fresh `Nats-Msg-Id`, `<command id>-r<unique>`, so a
//! worker decides it anew. The command id itself would not do: inside JetStream's
//! duplicate window a publish with it is dropped and never reaches a worker. The
//! records keep a retry of a decision from deciding twice (an interaction's
//! resolution keeps its key, a record's outbox its command id).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Bus, BusError, REPLY_HEADER, TRACEPARENT_HEADER};
use async_nats::HeaderMap;
use async_nats::jetstream::publish::PublishAck;
use futures::StreamExt as _;
use holdpoint_domain::{Command, CommandEnvelope, CommandId, Outcome};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

/// Why no outcome could be had.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// NATS did not take the command in time.
    #[error("command not accepted by NATS: {0}")]
    Publish(String),
    /// The worker did not answer in time.
    #[error("no outcome within the deadline")]
    Timeout,
}

type Table = Mutex<HashMap<u64, oneshot::Sender<Outcome>>>;

/// Routes replies on this process's inbox to the requests waiting for them.
pub struct Waiter {
    prefix: String,
    next: AtomicU64,
    pending: Arc<Table>,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Removes a registration when the request stops waiting, whatever the reason.
struct Registration<'a> {
    table: &'a Table,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.table.lock() {
            t.remove(&self.id);
        }
    }
}

impl Waiter {
    /// Subscribes to `<inbox>.>` and starts routing replies.
    ///
    /// # Errors
    /// When the subscription fails.
    pub async fn start(client: &async_nats::Client) -> Result<Self, BusError> {
        let prefix = client.new_inbox();
        let mut sub = client
            .subscribe(format!("{prefix}.>"))
            .await
            .map_err(|e| BusError::transient("subscribe replies", e))?;
        let pending: Arc<Table> = Arc::new(Mutex::new(HashMap::new()));
        let table = Arc::downgrade(&pending);
        tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let Some(table) = table.upgrade() else { break };
                let Some(id) = msg
                    .subject
                    .rsplit('.')
                    .next()
                    .and_then(|t| t.parse::<u64>().ok())
                else {
                    continue;
                };
                let Ok(outcome) = serde_json::from_slice::<Outcome>(&msg.payload) else {
                    warn!(subject = %msg.subject, "undecodable outcome");
                    continue;
                };
                let sender = table.lock().ok().and_then(|mut t| t.remove(&id));
                if let Some(tx) = sender {
                    let _ = tx.send(outcome);
                }
            }
        });
        Ok(Waiter {
            prefix,
            next: AtomicU64::new(1),
            pending,
        })
    }

    /// Publishes `env` and waits until `timeout` for its outcome.
    ///
    /// A duplicate publish reads the stored outcome. When that outcome is not a
    /// decision (a refusal that left nothing behind and may not hold any more:
    /// `NRY-0004` before the interaction was opened, `NRY-0032` when the question
    /// is pending again, see [`Outcome::is_decision`]), the command is published
    /// again under a fresh `Nats-Msg-Id` (`<command id>-r<unique>`) so a worker
    /// decides anew; the worker's record-based idempotency still makes the retry
    /// resolve at most once.
    ///
    /// # Errors
    /// [`WaitError`] when NATS or the worker did not answer in time: answer a
    /// retryable 503.
    pub async fn submit(
        &self,
        bus: &Bus,
        env: &CommandEnvelope,
        timeout: Duration,
    ) -> Result<Outcome, WaitError> {
        self.submit_traced(bus, env, timeout, None).await
    }

    /// [`Waiter::submit`], with the W3C `traceparent` of the request's span carried in
    /// the command's [`TRACEPARENT_HEADER`](crate::TRACEPARENT_HEADER), so the worker
    /// continues the trace.
    ///
    /// # Errors
    /// As [`Waiter::submit`].
    pub async fn submit_traced(
        &self,
        bus: &Bus,
        env: &CommandEnvelope,
        timeout: Duration,
        traceparent: Option<&str>,
    ) -> Result<Outcome, WaitError> {
        let deadline = Instant::now() + timeout;
        let command_id = env.command_id();
        let mut attempt = 0u32;
        loop {
            let msg_id = if attempt == 0 {
                command_id.to_string()
            } else {
                fresh_msg_id(&bus.client, &command_id)
            };
            let (outcome, duplicate) = self
                .publish_and_wait(bus, env, &msg_id, deadline, traceparent)
                .await?;
            // Decided by this very publish: whatever it says is today's answer. Read
            // back from an earlier publish: replayed only when it is a decision.
            if duplicate && !outcome.is_decision() && attempt < MAX_REATTEMPTS {
                attempt += 1;
                continue;
            }
            return Ok(outcome);
        }
    }

    async fn publish_and_wait(
        &self,
        bus: &Bus,
        env: &CommandEnvelope,
        msg_id: &str,
        deadline: Instant,
        traceparent: Option<&str>,
    ) -> Result<(Outcome, bool), WaitError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut t) = self.pending.lock() {
            t.insert(id, tx);
        }
        let _registration = Registration {
            table: &self.pending,
            id,
        };
        let mut headers = HeaderMap::new();
        headers.insert(REPLY_HEADER, format!("{}.{id}", self.prefix).as_str());
        if let Some(tp) = traceparent {
            headers.insert(TRACEPARENT_HEADER, tp);
        }
        let ack = tokio::time::timeout_at(deadline, bus.publish_command(env, msg_id, headers))
            .await
            .map_err(|_| WaitError::Publish("timed out".into()))?
            .map_err(|e| WaitError::Publish(e.to_string()))?;
        if !ack.duplicate
            && let Ok(Ok(outcome)) = tokio::time::timeout_at(deadline, rx).await
        {
            return Ok((outcome, false));
        }
        // A duplicate (or a lost reply): read the stored outcome until the deadline
        // (each read bounded by it too: a stalled server must not hold the request).
        let mut attempt = 1;
        loop {
            let pause = crate::backoff::Backoff::POLL.delay(attempt);
            attempt += 1;
            match tokio::time::timeout_at(deadline, bus.recorded_outcome(env, msg_id)).await {
                Ok(Ok(Some(outcome))) => return Ok((outcome, ack.duplicate)),
                Err(_) => return Err(WaitError::Timeout),
                Ok(_) => {}
            }
            if Instant::now() + pause > deadline {
                return Err(WaitError::Timeout);
            }
            tokio::time::sleep(pause).await;
        }
    }
}

/// How many fresh publishes a request makes past stored refusals that are not
/// decisions. Each fresh id is unique, so its publish is never a duplicate and is
/// decided by a worker: one is enough, the second only guards against a reply that
/// came back as a duplicate all the same.
const MAX_REATTEMPTS: u32 = 2;

/// A message id no publish used before: `<command id>-r<nuid>`. The worker stores
/// the outcome of a publish under its message id (the `-r` suffix tells it this
/// is a retry of command `command_id`), so a lost reply can still be read.
fn fresh_msg_id(client: &async_nats::Client, command_id: &CommandId) -> String {
    let inbox = client.new_inbox();
    let unique = inbox.rsplit('.').next().unwrap_or(&inbox);
    format!("{command_id}-r{unique}")
}

impl Bus {
    /// Publishes a command with `Nats-Msg-Id` = `msg_id` (its command id unless a
    /// retry after a refusal needs a fresh one), and optional headers, on
    /// `hp.cmd.<org>.<key>.<verb>`. Returns the PubAck (its `duplicate` says
    /// JetStream dropped it as a duplicate).
    ///
    /// # Errors
    /// When the publish or its PubAck fails (typed).
    pub async fn publish_command(
        &self,
        env: &CommandEnvelope,
        msg_id: &str,
        mut headers: HeaderMap,
    ) -> Result<PublishAck, BusError> {
        let body = serde_json::to_vec(env).map_err(|e| BusError::permanent("encode command", e))?;
        headers.insert("Nats-Msg-Id", msg_id);
        self.js
            .publish_with_headers(self.topo.command_subject(env), headers, body.into())
            .await
            .map_err(|e| BusError::publish("publish command", &e))?
            .await
            .map_err(|e| BusError::publish("publish command", &e))
    }

    /// The outcome recorded for the command `env` published as `msg_id`, if a worker
    /// decided it: its transition in the outbox of the record it wrote (or the
    /// resolution of the interaction it answered), else the outcome the worker stored
    /// for a decision that wrote nothing.
    ///
    /// A decision's effects were committed in the batch that wrote its record, so
    /// an outcome read from the record never precedes them.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn recorded_outcome(
        &self,
        env: &CommandEnvelope,
        msg_id: &str,
    ) -> Result<Option<Outcome>, BusError> {
        let stored = self.stored_outcome(msg_id).await?;
        if let Some(o) = &stored
            && o.is_decision()
        {
            return Ok(stored);
        }
        let cmd = &env.command_id();
        if cmd != msg_id {
            // A retry under a fresh id (`-r<unique>`) is answered by its stored
            // outcome or its reply only.
            return Ok(stored);
        }
        // A stored refusal that is not a decision (the interaction did not exist
        // yet...) may have been followed by a decision of the same command under a
        // fresh id: the record says so, and that decision is the key's answer.
        match self.recorded_decision(env, cmd).await? {
            Some(o) => Ok(Some(o)),
            None => Ok(stored),
        }
    }

    /// The outcome of the decision command `cmd` (`env`'s id) recorded in the record
    /// it wrote: its transition in the record's outbox, the interaction's
    /// resolution, or a counted approval (`givenApprovals`).
    async fn recorded_decision(
        &self,
        env: &CommandEnvelope,
        cmd: &CommandId,
    ) -> Result<Option<Outcome>, BusError> {
        let found: Option<Outcome> = match &env.command {
            Command::Message { session, lane, .. }
            | Command::TurnStart { session, lane, .. }
            | Command::TurnFinish { session, lane, .. } => {
                let loaded = self.load_lane(&env.org, session, lane).await?;
                loaded
                    .value
                    .and_then(|l| l.outbox.find(cmd).cloned())
                    .map(|t| t.outcome)
            }
            Command::SessionOpen { session, .. }
            | Command::SessionClose { session }
            | Command::SessionEnd { session } => {
                let loaded = self.load_session(&env.org, session).await?;
                loaded
                    .value
                    .and_then(|s| s.outbox.find(cmd).cloned())
                    .map(|t| t.outcome)
            }
            _ => match env.interaction_id() {
                Some(id) => {
                    let loaded = self.load_interaction(&env.org, id).await?;
                    loaded.value.and_then(|i| match &i.resolution {
                        Some(r) if &r.command_id == cmd => Some(r.outcome.clone()),
                        // A counted approval of a hold that needs several people
                        // keeps its outcome as long as the record lives, however
                        // many transitions came after it.
                        _ => i
                            .given_approvals
                            .iter()
                            .chain(&i.withdrawn_approvals)
                            .find(|g| &g.command_id == cmd)
                            .map(|g| g.outcome.clone())
                            .or_else(|| i.outbox.find(cmd).map(|t| t.outcome.clone())),
                    })
                }
                None => None,
            },
        };
        Ok(found)
    }
}

//! The Holdpoint worker: the only place that decides.
//!
//! [`run`] pulls commands from the shared durable consumer on `HP_COMMANDS` (any
//! number of worker processes may share it) and, for each, in this order:
//! loads the interaction and session records from KV, calls
//! [`holdpoint_domain::decide`], writes the new records by compare-and-set on their
//! KV revision (a lost race reloads and decides again), publishes the events with
//! `Nats-Msg-Id` = their deterministic id (awaiting every PubAck), stores the outcome,
//! replies it to the ingress, and acks last. A message that cannot be
//! decoded is terminated and leaves a `dead-letter` event. A command it cannot finish
//! (NATS away) is NAKed with a delay and redelivered.
//!
//! **Observability.** Each command runs in a `command` span that continues the W3C
//! trace of its `traceparent` header (set by the ingress; a command without one
//! starts a trace), and every event, lane message and follow-up command it
//! publishes carries the worker's `traceparent`. [`WorkerConfig::metrics`] counts
//! commands by verb and outcome, redeliveries and revision conflicts; the consumer's
//! pending and ack-pending counts are polled every [`WorkerConfig::consumer_poll`].
//!
//! **Shutdown.** When the token is cancelled the worker stops pulling, hands the
//! commands already delivered to it to the handlers (so none waits out `ack_wait`),
//! finishes and acks every command in flight, flushes the connection, and returns.

use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use futures::StreamExt as _;
use holdpoint_bus::{Bus, BusError, Cas, Loaded, REPLY_HEADER, TRACEPARENT_HEADER, Topology};
use holdpoint_domain::{
    CommandEnvelope, Effects, Event, EventData, OrgId, Outcome, Snapshot, decide,
    decode_subject_token, digest,
};
use holdpoint_telemetry::Metrics;
use holdpoint_telemetry::metrics::{OUTCOME_DEAD_LETTER, OUTCOME_OK, OUTCOME_RETRY};
use time::OffsetDateTime;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span, warn};

/// Where outcome replies may go (`Hp-Reply-To`): the default inboxes, as
/// `holdpoint_bus::outcome::Waiter` makes them.
const REPLY_INBOX_PREFIX: &str = "_INBOX.";

/// A point where a test may make the worker abort, to prove crash safety.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// Abort right after the records are written, before any event is published.
    AfterWrite,
    /// Abort after everything but the ack.
    BeforeAck,
}

impl std::str::FromStr for Failpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "after-write" => Ok(Failpoint::AfterWrite),
            "before-ack" => Ok(Failpoint::BeforeAck),
            other => Err(format!(
                "unknown failpoint {other:?} (after-write, before-ack)"
            )),
        }
    }
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Commands handled at once by this process.
    pub concurrency: usize,
    /// Messages per pull request.
    pub batch: usize,
    /// Test only: abort the process at this point on the first command that writes.
    pub failpoint: Option<Failpoint>,
    /// Where commands, redeliveries, conflicts and the consumer's backlog are counted.
    pub metrics: Arc<Metrics>,
    /// How often the consumer's pending and ack-pending counts are read.
    pub consumer_poll: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: 64,
            batch: 64,
            failpoint: None,
            metrics: Arc::new(Metrics::new()),
            consumer_poll: Duration::from_secs(5),
        }
    }
}

/// Runs the worker until `shutdown` is cancelled, then stops pulling, finishes and
/// acks the commands in flight, and returns.
///
/// # Errors
/// Only when the consumer cannot be created at start; later NATS failures are
/// retried.
pub async fn run(bus: Bus, cfg: WorkerConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let cfg = Arc::new(cfg);
    let permits = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    let mut consumer = bus.worker_consumer().await?;
    info!(consumer = %bus.topo.worker_consumer(), "worker pulling commands");
    let poller = tokio::spawn(poll_backlog(
        bus.clone(),
        cfg.metrics.clone(),
        cfg.consumer_poll,
        shutdown.clone(),
    ));
    'outer: while !shutdown.is_cancelled() {
        let stream = consumer
            .stream()
            .max_messages_per_batch(cfg.batch)
            .heartbeat(Duration::from_secs(5))
            .expires(Duration::from_secs(30))
            .messages()
            .await;
        let mut messages = match stream {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, "cannot pull commands; retrying");
                if pause(&shutdown, Duration::from_millis(500)).await {
                    break;
                }
                if let Ok(c) = bus.worker_consumer().await {
                    consumer = c;
                }
                continue;
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => {
                    drain(&bus, &cfg, &permits, &mut tasks, &mut messages).await;
                    break 'outer;
                }
                next = messages.next() => next,
            };
            while tasks.try_join_next().is_some() {}
            match next {
                Some(Ok(msg)) => {
                    let Ok(permit) = permits.clone().acquire_owned().await else {
                        break 'outer;
                    };
                    let bus = bus.clone();
                    let cfg = cfg.clone();
                    tasks.spawn(async move {
                        handle(&bus, &cfg, msg).await;
                        drop(permit);
                    });
                }
                Some(Err(e)) => {
                    // Heartbeats missed (server restarted, consumer lost): pull anew.
                    warn!(error = %e, "command stream error; re-subscribing");
                    if pause(&shutdown, Duration::from_millis(200)).await {
                        break 'outer;
                    }
                    if let Ok(c) = bus.worker_consumer().await {
                        consumer = c;
                    }
                    continue 'outer;
                }
                None => continue 'outer,
            }
        }
    }
    while tasks.try_join_next().is_some() {}
    info!(
        in_flight = tasks.len(),
        "worker stopping; finishing commands in flight"
    );
    while tasks.join_next().await.is_some() {}
    poller.abort();
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

/// At shutdown: hands the commands already delivered to this worker (buffered by
/// the pull stream) to the handlers instead of leaving them to wait out
/// `ack_wait`. Takes what arrives without a pause of more than 50 ms, at most one
/// batch; anything later is redelivered to another worker after `ack_wait`.
async fn drain(
    bus: &Bus,
    cfg: &Arc<WorkerConfig>,
    permits: &Arc<Semaphore>,
    tasks: &mut JoinSet<()>,
    messages: &mut jetstream::consumer::pull::Stream,
) {
    for _ in 0..cfg.batch {
        let Ok(Some(Ok(msg))) =
            tokio::time::timeout(Duration::from_millis(50), messages.next()).await
        else {
            break;
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (bus, cfg) = (bus.clone(), cfg.clone());
        tasks.spawn(async move {
            handle(&bus, &cfg, msg).await;
            drop(permit);
        });
    }
}

/// Reads the workers' consumer's backlog (pending, ack-pending) into `metrics`
/// every `every`, the first time at once, until `shutdown`. [`run`] runs it.
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
        match bus.worker_consumer_backlog().await {
            Ok((pending, ack_pending)) => metrics.consumer_info(pending, ack_pending),
            Err(e) => debug!(error = %e, "cannot read the consumer's backlog"),
        }
    }
}

/// Sleeps `d` unless shutdown comes first; true when shutting down.
async fn pause(shutdown: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

async fn handle(bus: &Bus, cfg: &WorkerConfig, msg: jetstream::Message) {
    let (delivered, stream_seq) = match msg.info() {
        Ok(i) => (i.delivered, i.stream_sequence),
        Err(_) => (1, 0),
    };
    if delivered > 1 {
        cfg.metrics.redeliveries.inc();
    }
    // This worker's span, in the command's trace (or a new trace).
    let span = info_span!(
        "command",
        org = tracing::field::Empty,
        verb = tracing::field::Empty,
        command_id = tracing::field::Empty,
        delivered,
        trace_id = tracing::field::Empty
    );
    let trace = holdpoint_telemetry::trace::link(
        &span,
        msg.headers
            .as_ref()
            .and_then(|h| h.get(TRACEPARENT_HEADER))
            .map(|v| v.as_str()),
    );
    let traceparent = trace.header_value();
    let subject = msg.subject.to_string();
    let env: CommandEnvelope = match serde_json::from_slice(&msg.payload) {
        Ok(env) => env,
        Err(e) => {
            dead_letter(
                bus,
                &msg,
                &subject,
                stream_seq,
                &format!("undecodable command: {e}"),
                &traceparent,
            )
            .await;
            cfg.metrics.command("unknown", OUTCOME_DEAD_LETTER);
            return;
        }
    };
    if bus.topo.command_subject(&env) != subject {
        dead_letter(
            bus,
            &msg,
            &subject,
            stream_seq,
            "command does not match its subject",
            &traceparent,
        )
        .await;
        cfg.metrics.command(env.verb(), OUTCOME_DEAD_LETTER);
        return;
    }
    let command_id = env.command_id();
    // Outcomes are stored under the publish's Nats-Msg-Id: the command id, or the
    // command id with a `-r<n>` suffix for a retry after a refusal (see
    // holdpoint_bus::outcome).
    let outcome_key = msg
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Msg-Id"))
        .map(|v| v.to_string())
        .filter(|k| {
            k.strip_prefix(&command_id)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("-r"))
        })
        .unwrap_or_else(|| command_id.clone());
    span.record("org", tracing::field::display(&env.org));
    span.record("verb", env.verb());
    span.record("command_id", command_id.as_str());
    async {
        let work = process(
            bus,
            cfg,
            &env,
            &command_id,
            &outcome_key,
            delivered,
            &traceparent,
        );
        tokio::pin!(work);
        let mut progress = tokio::time::interval(bus.topo.ack_wait / 3);
        progress.tick().await;
        let result = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = progress.tick() => {
                    // Still working: keep the message ours (progress ack resets ack_wait).
                    let _ = msg.ack_with(AckKind::Progress).await;
                }
            }
        };
        match result {
            Ok((outcome, encoded)) => {
                cfg.metrics.command(
                    env.verb(),
                    match &outcome.result {
                        Ok(_) => OUTCOME_OK,
                        Err(r) => r.code.spec().code,
                    },
                );
                let reply = msg.headers.as_ref().and_then(|h| h.get(REPLY_HEADER));
                // Outcomes go to inboxes only: the worker may publish into every
                // stream and bucket, and the header is the publisher's to choose.
                let reply = reply.filter(|r| {
                    let inbox = r.as_str().starts_with(REPLY_INBOX_PREFIX);
                    if !inbox {
                        warn!(
                            reply = r.as_str(),
                            "reply subject is not an inbox; not replying"
                        );
                    }
                    inbox
                });
                if let Some(reply) = reply {
                    let _ = bus.client.publish(reply.to_string(), encoded).await;
                }
                if cfg.failpoint == Some(Failpoint::BeforeAck) {
                    abort("before-ack");
                }
                // A plain ack, not a double ack: if it is lost, the command comes back
                // after ack_wait and is replayed from the record's outbox (same
                // outcome, same event ids), so the effect still happens once. That
                // saves a round trip per command.
                if let Err(e) = msg.ack().await {
                    warn!(error = %e, "ack failed; the command will be redelivered and replayed");
                }
                debug!(result = ?outcome.result, "command done");
            }
            Err(e) => {
                cfg.metrics.command(env.verb(), OUTCOME_RETRY);
                warn!(error = %e, "command not finished; will be redelivered");
                let delay = Duration::from_millis(250 * u64::from(delivered.min(20) as u32));
                let _ = msg.ack_with(AckKind::Nak(Some(delay))).await;
            }
        }
    }
    .instrument(span)
    .await;
}

fn abort(point: &str) -> ! {
    eprintln!("holdpoint worker: failpoint {point} reached, aborting");
    std::process::abort();
}

/// Load, decide, write, publish, store the outcome. Returns the outcome to reply and
/// its encoded bytes (stored and replied as they are).
async fn process(
    bus: &Bus,
    cfg: &WorkerConfig,
    env: &CommandEnvelope,
    command_id: &str,
    outcome_key: &str,
    delivered: i64,
    traceparent: &str,
) -> Result<(Outcome, bytes::Bytes), BusError> {
    let started = std::time::Instant::now();
    for attempt in 0..64 {
        let interaction = match env.interaction_id() {
            Some(id) => bus.load_interaction(&env.org, id).await?,
            None => Loaded {
                value: None,
                revision: 0,
            },
        };
        let session_id = env
            .session_id()
            .cloned()
            .or_else(|| interaction.value.as_ref().map(|i| i.session.clone()));
        let session = match &session_id {
            Some(id) => bus.load_session(&env.org, id).await?,
            None => Loaded {
                value: None,
                revision: 0,
            },
        };
        let snapshot = Snapshot {
            interaction: interaction.value.as_ref(),
            session: session.value.as_ref(),
        };
        let decision = decide(snapshot, env, command_id, OffsetDateTime::now_utc());
        if let (Some(s), Some(id)) = (&decision.session, &session_id) {
            let key = Topology::session_key(&env.org, id);
            let body = encode(s)?;
            if Bus::cas(&bus.sessions, &key, session.revision, body).await? == Cas::Conflict {
                cfg.metrics.revision_conflicts.inc();
                continue;
            }
        }
        if let Some(i) = &decision.interaction {
            let key = Topology::interaction_key(&env.org, &i.id);
            let body = encode(i)?;
            if Bus::cas(&bus.interactions, &key, interaction.revision, body).await? == Cas::Conflict
            {
                cfg.metrics.revision_conflicts.inc();
                continue;
            }
        }
        let wrote = decision.session.is_some() || decision.interaction.is_some();
        if wrote && cfg.failpoint == Some(Failpoint::AfterWrite) {
            abort("after-write");
        }
        let written = started.elapsed();
        // The outcome is stored in the same pipeline as the events: every PubAck is
        // awaited before the reply, so a 2xx never precedes the events it implies.
        // The same encoded bytes are the reply.
        let encoded = encode(&decision.outcome)?;
        let outcome = (
            format!("$KV.{}.{outcome_key}", bus.topo.outcomes_bucket()),
            encoded.clone(),
        );
        // Publish the recorded effects again when this may be the command that made
        // the transition and died before publishing: a redelivery, or (since a
        // nats-server crash can lose the consumer's delivery count) any replay of a
        // transition recent enough that JetStream still deduplicates its event ids.
        // An old transition replayed on a first delivery is a client's late retry:
        // its events went out long ago.
        let window = time::Duration::try_from(bus.topo.duplicate_window.mul_f64(0.8))
            .unwrap_or(time::Duration::ZERO);
        let stamped = decision
            .effects
            .events
            .iter()
            .chain(&decision.effects.audit)
            .map(|e| e.time)
            .chain(decision.effects.lane_messages.iter().map(|m| m.at))
            .max();
        // Effects without a timestamp (follow-up commands only) are idempotent
        // commands: publishing them again is always safe.
        let recent = stamped.is_none_or(|t| OffsetDateTime::now_utc() - t < window);
        if !decision.replay || delivered > 1 || recent {
            publish_effects(bus, &decision.effects, Some(outcome), traceparent).await?;
        } else {
            publish_effects(bus, &Effects::default(), Some(outcome), traceparent).await?;
        }
        debug!(
            attempt,
            load_decide_write_us = written.as_micros() as u64,
            total_us = started.elapsed().as_micros() as u64,
            "processed"
        );
        return Ok((decision.outcome, encoded));
    }
    Err(BusError::Nats {
        op: "decide",
        message: "too many revision conflicts".into(),
    })
}

fn encode<T: serde::Serialize>(v: &T) -> Result<bytes::Bytes, BusError> {
    serde_json::to_vec(v)
        .map(Into::into)
        .map_err(|e| BusError::Nats {
            op: "encode",
            message: e.to_string(),
        })
}

fn nats_err(op: &'static str) -> impl Fn(async_nats::jetstream::context::PublishError) -> BusError {
    move |e| BusError::Nats {
        op,
        message: e.to_string(),
    }
}

/// Publishes every effect, pipelined: all publishes go out, then every PubAck is
/// awaited. Each carries a deterministic `Nats-Msg-Id` and the worker's
/// `traceparent`.
async fn publish_effects(
    bus: &Bus,
    effects: &Effects,
    outcome: Option<(String, bytes::Bytes)>,
    traceparent: &str,
) -> Result<(), BusError> {
    let mut acks = Vec::new();
    if let Some((subject, body)) = outcome {
        acks.push(
            bus.js
                .publish(subject, body)
                .await
                .map_err(nats_err("store outcome"))?,
        );
    }
    for e in &effects.events {
        acks.push(publish_event(bus, bus.topo.event_subject(e), e, traceparent).await?);
    }
    for e in &effects.audit {
        acks.push(publish_event(bus, bus.topo.audit_subject(&e.orgid), e, traceparent).await?);
    }
    for m in &effects.lane_messages {
        let mut headers = HeaderMap::new();
        let id = format!(
            "lane-{}",
            // The lane is part of the id: a message that reuses a question's id on
            // another lane must not swallow that question's answer.
            &digest(&[
                m.org.as_str(),
                m.session.as_str(),
                m.lane.as_str(),
                m.message_id.as_str()
            ])[..40]
        );
        headers.insert("Nats-Msg-Id", id.as_str());
        headers.insert(TRACEPARENT_HEADER, traceparent);
        let body = encode(m)?;
        acks.push(
            bus.js
                .publish_with_headers(bus.topo.lane_subject(m), headers, body)
                .await
                .map_err(nats_err("publish lane message"))?,
        );
    }
    for ack in
        futures::future::join_all(acks.into_iter().map(std::future::IntoFuture::into_future)).await
    {
        ack.map_err(nats_err("event ack"))?;
    }
    for f in &effects.follow_ups {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT_HEADER, traceparent);
        bus.publish_command(f, &f.command_id(), headers).await?;
    }
    Ok(())
}

async fn publish_event(
    bus: &Bus,
    subject: String,
    e: &Event,
    traceparent: &str,
) -> Result<jetstream::context::PublishAckFuture, BusError> {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", e.id.as_str());
    headers.insert(TRACEPARENT_HEADER, traceparent);
    headers.insert("Content-Type", "application/cloudevents+json");
    let body = encode(e)?;
    bus.js
        .publish_with_headers(subject, headers, body)
        .await
        .map_err(nats_err("publish event"))
}

/// Terminates `msg` and leaves a `dead-letter` event naming it.
async fn dead_letter(
    bus: &Bus,
    msg: &jetstream::Message,
    subject: &str,
    seq: u64,
    reason: &str,
    traceparent: &str,
) {
    warn!(subject, seq, reason, "dead-lettering command");
    let org = subject
        .split('.')
        .nth(2)
        .and_then(decode_subject_token)
        .and_then(|s| OrgId::parse(s).ok())
        .or_else(|| OrgId::parse("_unknown").ok());
    if let Some(org) = org {
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
        match publish_event(bus, bus.topo.event_subject(&event), &event, traceparent).await {
            Ok(ack) => {
                if let Err(e) = ack.await {
                    warn!(error = %e, "dead-letter event not stored; command stays for redelivery");
                    return;
                }
            }
            Err(e) => {
                warn!(error = %e, "dead-letter event not published; command stays for redelivery");
                return;
            }
        }
    }
    if let Err(e) = msg.ack_with(AckKind::Term).await {
        warn!(error = %e, "term failed");
    }
}

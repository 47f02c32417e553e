//! A decision's commit: every record it changed and every effect it has, written
//! to the state stream as **one atomic batch** ([`crate::batch`]), so that they are
//! stored together or not at all. Nothing is ever published twice: a batch that
//! did not commit stored nothing, and one that did is never sent again (its
//! records' expectations refuse a second copy as a conflict).
//!
//! A [`Commit`] holds, in this order, the records (each with the revision it was
//! read at: `Nats-Expected-Last-Subject-Sequence`, 0 for a new one) and then the
//! effects, each on a subject of its own in the state stream, from where the public
//! streams source it under its public subject ([`crate::topology`]):
//!
//! | effect | state-stream subject | public subject | `Nats-Msg-Id` |
//! |---|---|---|---|
//! | remembered rule | `$KV.HP_STATE.rule.<org>.<ruleId>` (a record, new) | (read by KV watch) | none |
//! | event | `hp.fx.evt.<org>.<task>.<eventId>.<name>` | `hp.evt.<org>.<task>.<name>` | the CloudEvents `id` ([`Event::new`](holdpoint_domain::Event::new)) |
//! | audit record | `hp.fx.audit.<org>.<eventId>` | `hp.audit.<org>` | the CloudEvents `id` |
//! | lane message | `hp.fx.lane.<org>.<session>.<lane>.<msgId>` | `hp.lane.<org>.<session>.<lane>` | `lane-<40 hex>` ([`LaneMessage::msg_id`](holdpoint_domain::LaneMessage::msg_id)) |
//! | follow-up command | `hp.fx.cmd.<org>.<key>.<verb>.<commandId>` | `hp.cmd.<org>.<key>.<verb>` (then partitioned) | its command id |
//! | deadline schedule | `hp.fx.sched.<org>.<interactionId>.<warn\|expire>` | (fires into `hp.fx.cmd.…`) | none |
//!
//! The `Nats-Msg-Id`s are the same deterministic ids format 1 used; the public
//! streams keep them (sourcing copies headers), so a reader can still recognise a
//! message by its id. Every effect carries `Nats-TTL` ([`Topology::effect_ttl`]):
//! the state stream keeps it only for sourcing.
//!
//! A deadline schedule carries `Nats-Schedule: @at <RFC 3339>` and
//! `Nats-Schedule-Target: hp.fx.cmd.<org>.<task>.expire.<scheduleId>`, the
//! schedule id being `sched-<40 hex>` ([`Scheduled::msg_id`]); its body is the
//! command the server stores there at that time, which `HP_COMMANDS` sources.
//!
//! Every message also carries the worker's W3C `traceparent`.
//!
//! [`Topology::effect_ttl`]: crate::Topology::effect_ttl

use async_nats::HeaderMap;
use bytes::Bytes;
use holdpoint_domain::{Effects, Event, Scheduled};

use crate::batch::{self, AtomicBatch, BatchError, BuildError, Committed};
use crate::records::Bucket;
use crate::{Bus, BusError, TRACEPARENT_HEADER, Topology};

/// A batch being built for one commit: records first, then effects.
#[derive(Debug, Clone, Default)]
pub struct Commit {
    batch: AtomicBatch,
    transitions: usize,
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Bytes, BusError> {
    serde_json::to_vec(v)
        .map(Into::into)
        .map_err(|e| BusError::permanent("encode", e))
}

impl Commit {
    /// An empty commit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the write of record `key` (a [`Topology`] `*_key`, of kind `b`) at
    /// `revision` (0: it must not exist yet).
    ///
    /// # Errors
    /// [`BuildError::SubjectTwice`] when this commit already writes `key` (merge
    /// the changes into one write).
    pub fn record(
        &mut self,
        topo: &Topology,
        b: Bucket,
        key: &str,
        revision: u64,
        value: Bytes,
    ) -> Result<&mut Self, BuildError> {
        debug_assert!(key.starts_with(b.key_prefix()));
        self.batch.record(
            format!("$KV.{}.{key}", topo.state_bucket()),
            revision,
            HeaderMap::new(),
            value,
        )?;
        Ok(self)
    }

    /// Adds every effect of one transition (rules, events, audit records, lane
    /// messages, follow-up commands, schedules, in that order) and counts the
    /// transition.
    ///
    /// # Errors
    /// Permanent when an effect cannot be encoded; [`BuildError`] (as permanent)
    /// when a rule's key is written twice in this commit.
    pub fn transition(
        &mut self,
        topo: &Topology,
        effects: &Effects,
        traceparent: &str,
    ) -> Result<&mut Self, BusError> {
        self.transitions += 1;
        for r in &effects.rules {
            let key = crate::rules::rule_key(&r.org, &r.id);
            self.record(topo, Bucket::Rules, &key, 0, encode(r)?)
                .map_err(|e| BusError::permanent("remembered rule", e))?;
        }
        for e in &effects.events {
            self.event(topo, e, traceparent)?;
        }
        for e in &effects.audit {
            let headers = effect_headers(topo, &e.id, Some(CLOUDEVENTS), traceparent);
            self.batch
                .effect(topo.audit_state_subject(e), headers, encode(e)?);
        }
        for m in &effects.lane_messages {
            let headers = effect_headers(topo, &m.msg_id(), None, traceparent);
            self.batch
                .effect(topo.lane_state_subject(m), headers, encode(m)?);
        }
        for f in &effects.follow_ups {
            let id = f.command_id();
            let headers = effect_headers(topo, id.as_str(), None, traceparent);
            self.batch.effect(
                topo.command_state_subject(f, id.as_str()),
                headers,
                encode(f)?,
            );
        }
        for s in &effects.schedules {
            self.schedule(topo, s, traceparent)?;
        }
        Ok(self)
    }

    /// Adds one event.
    ///
    /// # Errors
    /// Permanent when it cannot be encoded.
    pub fn event(
        &mut self,
        topo: &Topology,
        e: &Event,
        traceparent: &str,
    ) -> Result<&mut Self, BusError> {
        let headers = effect_headers(topo, &e.id, Some(CLOUDEVENTS), traceparent);
        self.batch
            .effect(topo.event_state_subject(e), headers, encode(e)?);
        Ok(self)
    }

    fn schedule(
        &mut self,
        topo: &Topology,
        s: &Scheduled,
        traceparent: &str,
    ) -> Result<(), BusError> {
        const OP: &str = "deadline schedule";
        let at =
            s.at.to_offset(time::UtcOffset::UTC)
                .format(&time::format_description::well_known::Rfc3339)
                .map_err(|e| BusError::permanent(OP, e))?;
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT_HEADER, traceparent);
        headers.insert("Nats-Schedule", format!("@at {at}").as_str());
        headers.insert(
            "Nats-Schedule-Target",
            topo.command_state_subject(&s.command, &s.msg_id()).as_str(),
        );
        self.batch.effect(
            topo.schedule_subject(&s.command),
            headers,
            encode(&s.command)?,
        );
        Ok(())
    }

    /// Appends `other` after this commit's messages, so both are stored by one
    /// batch (a worker's partitions share commits: fewer fsyncs, fewer staged
    /// batches). `other`'s messages start at the old [`Commit::len`]. Nothing
    /// changes when it fails.
    ///
    /// # Errors
    /// [`BuildError::SubjectTwice`] when both write the same record.
    pub fn append(&mut self, other: &Commit) -> Result<&mut Self, BuildError> {
        self.batch.append(&other.batch)?;
        self.transitions += other.transitions;
        Ok(self)
    }

    /// How many transitions the commit carries.
    pub fn transitions(&self) -> usize {
        self.transitions
    }

    /// How many messages the commit stores.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// True when it stores nothing.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The batch, as it will be sent.
    pub fn batch(&self) -> &AtomicBatch {
        &self.batch
    }
}

const CLOUDEVENTS: &str = "application/cloudevents+json";

fn effect_headers(
    topo: &Topology,
    msg_id: &str,
    content_type: Option<&str>,
    traceparent: &str,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    headers.insert("Nats-TTL", ttl_value(topo).as_str());
    if !traceparent.is_empty() {
        headers.insert(TRACEPARENT_HEADER, traceparent);
    }
    if let Some(ct) = content_type {
        headers.insert("Content-Type", ct);
    }
    headers
}

/// `Nats-TTL` of an effect: whole seconds, at least 1.
fn ttl_value(topo: &Topology) -> String {
    topo.effect_ttl.as_secs().max(1).to_string()
}

impl Bus {
    /// Commits `c` as one atomic batch under `id` (at most 60 characters; resent
    /// under `<id>.<n>` while [`batch::next_step`] says so) and returns its PubAck.
    ///
    /// # Errors
    /// The [`BatchError`] the caller acts on: a conflict or duplicate (reload the
    /// records and decide again, or isolate a group), or a refusal (give up).
    /// Nothing of the batch was stored, except for [`BatchError::Unanswered`]
    /// after the last resend, where it is not known (the next attempt's
    /// expectations tell).
    pub async fn commit(&self, id: &str, c: &Commit) -> Result<Committed, BatchError> {
        batch::commit_resending(&self.client, id, &c.batch, c.transitions.max(1)).await
    }

    /// Stores one event on its own (a dead letter, which no record carries) in the
    /// state stream, from where the events stream sources it, and waits for its
    /// PubAck.
    ///
    /// # Errors
    /// Transient when it cannot be stored.
    pub async fn store_event(&self, e: &Event, traceparent: &str) -> Result<(), BusError> {
        let headers = effect_headers(&self.topo, &e.id, Some(CLOUDEVENTS), traceparent);
        self.js
            .publish_with_headers(self.topo.event_state_subject(e), headers, encode(e)?)
            .await
            .map_err(|e| BusError::publish("store event", &e))?
            .await
            .map_err(|e| BusError::publish("store event", &e))?;
        Ok(())
    }

    /// Stores `outcome` (encoded) under a command publish's `Nats-Msg-Id`, for a
    /// duplicate request to read, and waits for its PubAck.
    ///
    /// # Errors
    /// Transient when it cannot be stored.
    pub async fn store_outcome(&self, msg_id: &str, encoded: Bytes) -> Result<(), BusError> {
        let subject = format!("$KV.{}.{msg_id}", self.topo.outcomes_bucket());
        self.js
            .publish(subject, encoded)
            .await
            .map_err(|e| BusError::publish("store outcome", &e))?
            .await
            .map_err(|e| BusError::publish("store outcome", &e))?;
        Ok(())
    }
}

/// A [`BatchError`] as the [`BusError`] a caller that does not act on each step
/// reports: a conflict or duplicate is [`crate::ErrorKind::Conflict`], a refusal
/// permanent, the rest transient.
pub fn as_bus_error(e: &BatchError) -> BusError {
    match e {
        BatchError::Conflict(m) | BatchError::Duplicate(m) => BusError::Nats {
            op: "commit",
            kind: crate::ErrorKind::Conflict,
            message: m.clone(),
        },
        BatchError::Refused { .. } => BusError::permanent("commit", e),
        _ => BusError::transient("commit", e),
    }
}

impl Bus {
    /// How many effects of the state stream the public streams (events, lanes,
    /// audit, commands) have still to source: for each, the larger of its
    /// source's `lag` (as its stream info reports it) and the `num_pending` of
    /// its durable source consumer (what that consumer has not delivered yet). A
    /// source's `lag` comes from the last message it was delivered, so it reads 0
    /// before its consumer has delivered anything (right after setup); the
    /// consumer's count does not. A decision's effects reach the public streams
    /// this many messages after its commit: normally within milliseconds.
    ///
    /// # Errors
    /// Transient when a stream's or a source consumer's info cannot be read.
    pub async fn sourcing_lag(&self) -> Result<u64, BusError> {
        let state = self
            .js
            .get_stream_no_info(self.topo.state_stream())
            .await
            .map_err(|e| BusError::transient("sourcing lag", e))?;
        let mut lag = 0;
        for name in [
            self.topo.events_stream(),
            self.topo.lanes_stream(),
            self.topo.audit_stream(),
            self.topo.commands_stream(),
        ] {
            let mut stream = self
                .js
                .get_stream(&name)
                .await
                .map_err(|e| BusError::transient("sourcing lag", e))?;
            let info = stream
                .info()
                .await
                .map_err(|e| BusError::transient("sourcing lag", e))?;
            let reported = info.sources.iter().map(|s| s.lag).sum::<u64>();
            // Only a durable source names its consumer; an ephemeral one (a store
            // not yet switched) has its lag alone.
            let mut undelivered = 0;
            for source in info.config.sources.iter().flatten() {
                if let Some(c) = &source.consumer {
                    undelivered += state
                        .consumer_info(&c.name)
                        .await
                        .map_err(|e| BusError::transient("sourcing lag", e))?
                        .num_pending;
                }
            }
            lag += reported.max(undelivered);
        }
        Ok(lag)
    }
}

impl Bus {
    /// True when the events, lanes and audit streams have sourced every effect the
    /// state stream stored for them so far: each one's last message says (in its
    /// `Nats-Stream-Source` header) it was sourced from a state-stream sequence at
    /// or past the state stream's last message on that stream's effect subjects.
    /// For tests and tools that read a stream right after a decision; readers that
    /// follow a stream need nothing of the kind.
    ///
    /// # Errors
    /// Transient when a stream cannot be read.
    pub async fn effects_sourced(&self) -> Result<bool, BusError> {
        let sp = &self.topo.subject_prefix;
        let state = self
            .js
            .get_stream_no_info(self.topo.state_stream())
            .await
            .map_err(|e| BusError::transient("effects sourced", e))?;
        for (public, what) in [
            (self.topo.events_stream(), "evt"),
            (self.topo.lanes_stream(), "lane"),
            (self.topo.audit_stream(), "audit"),
        ] {
            let wanted = match state
                .get_last_raw_message_by_subject(&format!("{sp}.fx.{what}.>"))
                .await
            {
                Ok(m) => m.sequence,
                Err(e)
                    if e.kind()
                        == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
                {
                    continue;
                }
                Err(e) => return Err(BusError::transient("effects sourced", e)),
            };
            let stream = self
                .js
                .get_stream_no_info(&public)
                .await
                .map_err(|e| BusError::transient("effects sourced", e))?;
            let last = match stream
                .get_last_raw_message_by_subject(&format!("{sp}.{what}.>"))
                .await
            {
                Ok(m) => m,
                Err(_) => return Ok(false),
            };
            let sourced = last
                .headers
                .get("Nats-Stream-Source")
                .and_then(|v| v.as_str().split(' ').nth(1).map(str::to_owned))
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            if sourced < wanted {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

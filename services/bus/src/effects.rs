//! Publishing a transition's effects, pipelined: every publish goes out first, then
//! every PubAck is awaited ([`Inflight::confirmed`]).
//!
//! Each effect carries a deterministic `Nats-Msg-Id`, so publishing it again (a
//! redelivered command, the relay of an unconfirmed transition) is dropped by
//! JetStream inside its duplicate window. The domain makes every one of them (they
//! are dedup keys, so they never change):
//!
//! | effect | subject (published; see [`crate::topology`]) | `Nats-Msg-Id` |
//! |---|---|---|
//! | event | `hp.in.evt.<org>.<task>.<name>` | the CloudEvents `id` ([`Event::new`](holdpoint_domain::Event::new)) |
//! | audit record | `hp.in.audit.<org>` | the CloudEvents `id` ([`Event::new`](holdpoint_domain::Event::new)) |
//! | lane message | `hp.in.lane.<org>.<session>.<lane>` | `lane-<40 hex>` of org, session, lane and message id ([`LaneMessage::msg_id`](holdpoint_domain::LaneMessage::msg_id)) |
//! | follow-up command | `hp.cmd.<org>.<key>.<verb>` | its command id ([`CommandEnvelope::command_id`](holdpoint_domain::CommandEnvelope::command_id)) |
//! | remembered rule | `$KV.HP_RULES.<org>.<ruleId>` (a KV put) | `rule-<ruleId>` ([`Rule::msg_id`](holdpoint_domain::Rule::msg_id)) |
//! | deadline schedule | `hp.sched.<org>.<interactionId>.<warn|expire>` | `sched-<40 hex>` of the scheduled command's id and the id of the command that set it ([`Scheduled::msg_id`](holdpoint_domain::Scheduled::msg_id)) |
//!
//! A deadline schedule (JetStream message schedules, `nats-server` 2.12+) carries
//! `Nats-Schedule: @at <RFC 3339>` and `Nats-Schedule-Target:
//! hp.cmd.<org>.<task>.expire`; its body is the command the server publishes there
//! at that time (without the schedule's `Nats-Msg-Id`, which the server strips: the
//! worker recognises a second firing by the command's id).
//!
//! Every message also carries the worker's W3C `traceparent`.

use async_nats::HeaderMap;
use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use bytes::Bytes;
use holdpoint_domain::{Effects, Event, Scheduled};

use crate::{Bus, BusError, TRACEPARENT_HEADER};

/// Publishes whose PubAcks are still on their way.
#[derive(Debug, Default)]
pub struct Inflight(Vec<(&'static str, PublishAckFuture)>);

impl Inflight {
    /// How many publishes are in flight.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the publishes of `other`.
    pub fn extend(&mut self, other: Inflight) {
        self.0.extend(other.0);
    }

    /// Waits for every PubAck; the first failure is the result.
    ///
    /// # Errors
    /// The first failed PubAck, typed (see [`BusError::publish`]).
    pub async fn confirmed(self) -> Result<(), BusError> {
        self.stored_new().await.map(|_| ())
    }

    /// Waits for every PubAck, like [`Inflight::confirmed`], and counts the messages
    /// JetStream stored anew (not dropped as duplicates inside its duplicate window).
    ///
    /// # Errors
    /// As [`Inflight::confirmed`].
    pub async fn stored_new(self) -> Result<usize, BusError> {
        let results = futures::future::join_all(
            self.0
                .into_iter()
                .map(|(op, f)| async move { (op, f.await) }),
        )
        .await;
        let mut fresh = 0;
        for (op, r) in results {
            let ack = match r {
                Ok(ack) => ack,
                // A rule's create found the key written: the rule is stored already.
                Err(e) if op == STORE_RULE && e.kind() == PublishErrorKind::WrongLastSequence => {
                    continue;
                }
                Err(e) => return Err(BusError::publish(op, &e)),
            };
            if !ack.duplicate {
                fresh += 1;
            }
        }
        Ok(fresh)
    }
}

/// The operation name of a remembered rule's create (see [`Bus::publish_effects`]).
const STORE_RULE: &str = "store remembered rule";

fn encode<T: serde::Serialize>(v: &T) -> Result<Bytes, BusError> {
    serde_json::to_vec(v)
        .map(Into::into)
        .map_err(|e| BusError::permanent("encode", e))
}

impl Bus {
    pub(crate) async fn publish_keyed(
        &self,
        op: &'static str,
        subject: String,
        msg_id: &str,
        content_type: Option<&str>,
        traceparent: &str,
        body: Bytes,
    ) -> Result<(&'static str, PublishAckFuture), BusError> {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", msg_id);
        headers.insert(TRACEPARENT_HEADER, traceparent);
        if let Some(ct) = content_type {
            headers.insert("Content-Type", ct);
        }
        let f = self
            .js
            .publish_with_headers(subject, headers, body)
            .await
            .map_err(|e| BusError::publish(op, &e))?;
        Ok((op, f))
    }

    /// Publishes one event (not awaiting its PubAck).
    ///
    /// # Errors
    /// Transient when the publish cannot be sent.
    pub async fn publish_event(&self, e: &Event, traceparent: &str) -> Result<Inflight, BusError> {
        let subject = self.topo.event_publish_subject(e);
        let p = self
            .publish_keyed(
                "publish event",
                subject,
                &e.id,
                Some("application/cloudevents+json"),
                traceparent,
                encode(e)?,
            )
            .await?;
        Ok(Inflight(vec![p]))
    }

    /// Publishes every effect of a transition (remembered rules, events, audit
    /// records, lane messages, follow-up commands, in that order) without awaiting the
    /// PubAcks.
    ///
    /// # Errors
    /// Transient when a publish cannot be sent; what was sent before stays in the
    /// returned error's stead (the caller retries the whole transition: every message
    /// is deduplicated by its id).
    pub async fn publish_effects(
        &self,
        effects: &Effects,
        traceparent: &str,
    ) -> Result<Inflight, BusError> {
        let mut out = Inflight::default();
        for r in &effects.rules {
            out.0.push(self.publish_rule(r, traceparent).await?);
        }
        for e in &effects.events {
            out.extend(self.publish_event(e, traceparent).await?);
        }
        for e in &effects.audit {
            let subject = self.topo.audit_publish_subject(&e.orgid);
            out.0.push(
                self.publish_keyed(
                    "publish audit record",
                    subject,
                    &e.id,
                    Some("application/cloudevents+json"),
                    traceparent,
                    encode(e)?,
                )
                .await?,
            );
        }
        for m in &effects.lane_messages {
            let subject = self.topo.lane_publish_subject(m);
            out.0.push(
                self.publish_keyed(
                    "publish lane message",
                    subject,
                    &m.msg_id(),
                    None,
                    traceparent,
                    encode(m)?,
                )
                .await?,
            );
        }
        for f in &effects.follow_ups {
            let subject = self.topo.command_subject(f);
            out.0.push(
                self.publish_keyed(
                    "publish follow-up command",
                    subject,
                    f.command_id().as_str(),
                    None,
                    traceparent,
                    encode(f)?,
                )
                .await?,
            );
        }
        for s in &effects.schedules {
            out.0.push(self.publish_schedule(s, traceparent).await?);
        }
        Ok(out)
    }

    /// Stores a remembered rule as a KV create: besides its `Nats-Msg-Id`, the put
    /// expects no earlier value on the key (`Nats-Expected-Last-Subject-Sequence: 0`),
    /// so a relayed copy published after the duplicate window cannot write the rule
    /// back over its revocation. JetStream refusing it (wrong last sequence) means
    /// the rule is stored already: [`Inflight`] counts that as stored.
    async fn publish_rule(
        &self,
        r: &holdpoint_domain::Rule,
        traceparent: &str,
    ) -> Result<(&'static str, PublishAckFuture), BusError> {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", r.msg_id().as_str());
        headers.insert("Nats-Expected-Last-Subject-Sequence", "0");
        headers.insert(TRACEPARENT_HEADER, traceparent);
        let f = self
            .js
            .publish_with_headers(
                crate::rules::rule_subject(&self.topo, r),
                headers,
                encode(r)?,
            )
            .await
            .map_err(|e| BusError::publish(STORE_RULE, &e))?;
        Ok((STORE_RULE, f))
    }

    async fn publish_schedule(
        &self,
        s: &Scheduled,
        traceparent: &str,
    ) -> Result<(&'static str, PublishAckFuture), BusError> {
        const OP: &str = "publish deadline schedule";
        let at =
            s.at.to_offset(time::UtcOffset::UTC)
                .format(&time::format_description::well_known::Rfc3339)
                .map_err(|e| BusError::permanent(OP, e))?;
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", s.msg_id().as_str());
        headers.insert(TRACEPARENT_HEADER, traceparent);
        headers.insert("Nats-Schedule", format!("@at {at}").as_str());
        headers.insert(
            "Nats-Schedule-Target",
            self.topo.command_subject(&s.command).as_str(),
        );
        let f = self
            .js
            .publish_with_headers(
                self.topo.schedule_subject(&s.command),
                headers,
                encode(&s.command)?,
            )
            .await
            .map_err(|e| BusError::publish(OP, &e))?;
        Ok((OP, f))
    }

    /// Stores `outcome` (encoded) under a command publish's `Nats-Msg-Id`, for a
    /// duplicate request to read, without awaiting the PubAck.
    ///
    /// # Errors
    /// Transient when the publish cannot be sent.
    pub async fn store_outcome(&self, msg_id: &str, encoded: Bytes) -> Result<Inflight, BusError> {
        let subject = format!("$KV.{}.{msg_id}", self.topo.outcomes_bucket());
        let f = self
            .js
            .publish(subject, encoded)
            .await
            .map_err(|e| BusError::publish("store outcome", &e))?;
        Ok(Inflight(vec![("store outcome", f)]))
    }
}

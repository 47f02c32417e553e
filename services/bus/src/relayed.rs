//! Publishing a transition's effects again once JetStream's duplicate window no
//! longer covers them ([`Bus::publish_owed`]).
//!
//! Inside the window a relayed copy is dropped by its `Nats-Msg-Id`. Past it, a copy
//! of a message that was stored would be stored again, so the relay first reads
//! what the streams hold since the transition was committed and publishes only what
//! is missing: events on their own subject (`hp.evt.<org>.<task>.<name>`), audit
//! records on the organisation's audit subject, lane messages on their lane. Rules
//! are creates (a copy is refused), and commands and schedules are idempotent by
//! their records, so those go out again as they are.

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream::consumer::DeliverPolicy;
use holdpoint_domain::{Effects, LaneMessage};
use time::OffsetDateTime;

use crate::effects::Inflight;
use crate::{Bus, BusError};

/// How far before a transition's commit time the probe starts reading (clocks of
/// workers and servers that disagree).
const PROBE_MARGIN: time::Duration = time::Duration::seconds(5);

/// Most messages one probe reads on one subject. A message past the probe is taken
/// as missing and stored again: that takes more than this many messages on one
/// task's event name, one organisation's audit or one lane since the commit.
pub const OWED_PROBE: usize = 10_000;

/// The part of the duplicate window inside which a relayed copy is published
/// without a probe (the worker's relay horizon uses the same share).
const TRUSTED_SHARE: f64 = 0.8;

#[derive(serde::Deserialize)]
struct IdOnly {
    id: String,
}

impl Bus {
    /// Publishes again what a transition committed at `at` owes (not awaiting the
    /// PubAcks). Inside 80 % of the duplicate window, everything, as
    /// [`Bus::publish_effects`]; older, only the events, audit records and lane
    /// messages the streams do not hold yet.
    ///
    /// # Errors
    /// Transient when a stream cannot be read or a publish cannot be sent.
    pub async fn publish_owed(
        &self,
        effects: &Effects,
        at: OffsetDateTime,
        traceparent: &str,
    ) -> Result<Inflight, BusError> {
        let trusted = time::Duration::try_from(self.topo.duplicate_window.mul_f64(TRUSTED_SHARE))
            .unwrap_or(time::Duration::ZERO);
        if at >= OffsetDateTime::now_utc() - trusted {
            return self.publish_effects(effects, traceparent).await;
        }
        let missing = self.not_stored(effects, at).await?;
        self.publish_effects(&missing, traceparent).await
    }

    /// `effects` without the events, audit records and lane messages stored since
    /// `at` (less [`PROBE_MARGIN`]).
    async fn not_stored(&self, effects: &Effects, at: OffsetDateTime) -> Result<Effects, BusError> {
        let from = at - PROBE_MARGIN;
        let mut out = effects.clone();
        let mut subjects: Vec<String> = effects
            .events
            .iter()
            .map(|e| self.topo.event_subject(e))
            .collect();
        subjects.sort();
        subjects.dedup();
        let mut have = HashSet::new();
        for s in subjects {
            have.extend(
                self.stored_ids(self.topo.events_stream(), s, from, id_of)
                    .await?,
            );
        }
        out.events.retain(|e| !have.contains(&e.id));

        let mut orgs: Vec<_> = effects.audit.iter().map(|e| e.orgid.clone()).collect();
        orgs.sort();
        orgs.dedup();
        let mut have = HashSet::new();
        for org in orgs {
            let s = self.topo.audit_subject(&org);
            have.extend(
                self.stored_ids(self.topo.audit_stream(), s, from, id_of)
                    .await?,
            );
        }
        out.audit.retain(|e| !have.contains(&e.id));

        let mut lanes: Vec<String> = effects
            .lane_messages
            .iter()
            .map(|m| self.topo.lane_subject(m))
            .collect();
        lanes.sort();
        lanes.dedup();
        let mut have = HashSet::new();
        for s in lanes {
            have.extend(
                self.stored_ids(self.topo.lanes_stream(), s, from, |payload| {
                    serde_json::from_slice::<LaneMessage>(payload)
                        .ok()
                        .map(|m| m.msg_id())
                })
                .await?,
            );
        }
        out.lane_messages.retain(|m| !have.contains(&m.msg_id()));
        Ok(out)
    }

    /// The ids of the messages stored on `subject` of `stream` from `from` on (at
    /// most [`OWED_PROBE`]), as `id` reads them from each payload.
    async fn stored_ids(
        &self,
        stream: String,
        subject: String,
        from: OffsetDateTime,
        id: fn(&[u8]) -> Option<String>,
    ) -> Result<Vec<String>, BusError> {
        let stored = tokio::time::timeout(
            Duration::from_secs(30),
            self.read_stored(
                stream,
                subject,
                DeliverPolicy::ByStartTime { start_time: from },
                OWED_PROBE,
                "probe what is stored",
            ),
        )
        .await
        .map_err(|_| BusError::transient("probe what is stored", "timed out"))??;
        Ok(stored.iter().filter_map(|s| id(&s.payload)).collect())
    }
}

/// A CloudEvent's id, from its JSON.
fn id_of(payload: &[u8]) -> Option<String> {
    serde_json::from_slice::<IdOnly>(payload).ok().map(|e| e.id)
}

//! Session and lane records (KV bucket `HP_SESSIONS`).
//!
//! A session's header ([`Session`], key `<org>.<sessionId>`) holds its mode, status
//! and lane capacity; it changes only when the session opens, closes or ends. Each
//! lane has a record of its own ([`Lane`], key `<org>.<sessionId>.<lane>`): the
//! running turn, the queue, the product questions open on it and the recent
//! deliveries. Splitting them keeps every record small whatever the number of lanes,
//! and lets workers keep session headers in a cache that a KV watch keeps fresh.
//!
//! **Bounds.** A lane record stays under [`LANE_RECORD_BOUND`] bytes of JSON: its
//! queue holds at most `laneCapacity` (≤ [`MAX_LANE_CAPACITY`]) message ids, it lists
//! at most [`MAX_OPEN_QUESTIONS`] open questions, and it remembers the last
//! [`DELIVERIES_KEEP`] deliveries, of which the newest keep their answer while the
//! answers together fit in [`DELIVERED_ANSWER_BYTES`]; older deliveries keep only
//! their message id and admission, which is all a redelivered message needs to be
//! recognised. Confirmed transitions carry no effects (see [`crate::transition`]).

use std::collections::VecDeque;

use crate::ids::{
    IdempotencyKey, InteractionId, LaneId, MessageId, OrgId, PersonId, SessionId, TaskId,
};
use crate::transition::{Outbox, Transition};
use crate::vocab::{Admission, Answer, SessionMode};
use serde::{Deserialize, Serialize};

/// How many recent deliveries a lane remembers, to recognise a redelivered message.
pub const DELIVERIES_KEEP: usize = 64;
/// How many bytes of delivered answers (JSON) a lane keeps with its deliveries.
pub const DELIVERED_ANSWER_BYTES: usize = 128 * 1024;
/// The largest `laneCapacity` a session may ask for.
pub const MAX_LANE_CAPACITY: u32 = 1024;
/// How many product questions may be open on one lane at once.
pub const MAX_OPEN_QUESTIONS: usize = 256;
/// The documented upper bound of a lane record's JSON, in bytes, with the limits
/// above and ids of at most 128 bytes (its unconfirmed transitions aside).
pub const LANE_RECORD_BOUND: usize = 512 * 1024;

/// A session's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    /// Messages are admitted.
    Open,
    /// The session refuses new messages and new interactions; its records stay.
    Closed,
    /// The host ended it: it answers as not found (`NRY-0002`).
    Ended,
}

/// The session header (KV `<org>.<sessionId>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The owning organisation.
    pub org: OrgId,
    /// The session id.
    pub id: SessionId,
    /// `blocking` (tool calls wait) or `product` (answers become lane messages).
    pub mode: SessionMode,
    /// `open`, `closed` or `ended`.
    pub status: SessionStatus,
    /// How many messages a busy lane keeps queued before refusing (lane full);
    /// 0 to [`MAX_LANE_CAPACITY`].
    pub lane_capacity: u32,
    /// Recent transitions (session opened, closed, ended).
    #[serde(default)]
    pub outbox: Outbox,
}

impl Session {
    /// True unless the host ended the session.
    pub fn is_live(&self) -> bool {
        self.status != SessionStatus::Ended
    }

    pub(crate) fn push_outbox(&mut self, t: Transition) {
        self.outbox.push(t);
    }
}

/// A message the lane took, remembered so a redelivery is recognised by message id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The message id (the question id for a product answer).
    pub message_id: MessageId,
    /// Whether its turn started at once or it was queued.
    pub admission: Admission,
    /// The product questions the message closed (superseded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closes: Vec<InteractionId>,
    /// For a product answer: whether it carried one, and while the lane's answer
    /// budget allows, the recorded answer itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<DeliveredAnswer>,
}

/// The answer a lane delivery carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeliveredAnswer {
    /// The recorded answer; absent once the lane's answer budget dropped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// The person who acted: a verified JWT `sub` or the local OS user (1 to 256
    /// characters, no control characters).
    pub by: PersonId,
    /// The idempotency key of the answer that was delivered.
    pub key: IdempotencyKey,
}

/// A product question open on a lane, with the task it belongs to (so the command
/// that closes it can be routed to that task's partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OpenQuestion {
    /// The question (interaction) id.
    pub id: InteractionId,
    /// Its A2A task.
    pub task_id: TaskId,
}

/// A lane record (KV `<org>.<sessionId>.<lane>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    /// The owning organisation.
    pub org: OrgId,
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session: SessionId,
    /// The lane's name.
    pub lane: LaneId,
    /// The message (or turn id) whose turn is running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<MessageId>,
    /// Messages waiting for the lane to free, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub queue: VecDeque<MessageId>,
    /// Product questions open on this lane, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_questions: Vec<OpenQuestion>,
    /// Recent deliveries, oldest first (at most [`DELIVERIES_KEEP`]).
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub delivered: VecDeque<Delivery>,
    /// Recent transitions (messages, turns, product answers' deliveries).
    #[serde(default)]
    pub outbox: Outbox,
}

impl Lane {
    /// An empty lane of `session`.
    pub fn new(org: &OrgId, session: &SessionId, lane: &LaneId) -> Self {
        Lane {
            org: org.clone(),
            session: session.clone(),
            lane: lane.clone(),
            running: None,
            queue: VecDeque::new(),
            open_questions: Vec::new(),
            delivered: VecDeque::new(),
            outbox: Outbox::default(),
        }
    }

    /// The delivery of `message_id`, if the lane took it.
    pub fn delivery(&self, message_id: &MessageId) -> Option<&Delivery> {
        self.delivered.iter().find(|d| &d.message_id == message_id)
    }

    /// True when a message on this lane already closed `question`.
    pub fn superseded(&self, question: &InteractionId) -> bool {
        self.delivered.iter().any(|d| d.closes.contains(question))
    }

    /// True when `question` is listed as open on this lane.
    pub fn lists(&self, question: &InteractionId) -> bool {
        self.open_questions.iter().any(|q| &q.id == question)
    }

    /// Remembers a delivery, keeping the last [`DELIVERIES_KEEP`] and the newest
    /// answers that fit in [`DELIVERED_ANSWER_BYTES`].
    pub(crate) fn remember(&mut self, d: Delivery) {
        self.delivered.push_back(d);
        while self.delivered.len() > DELIVERIES_KEEP {
            self.delivered.pop_front();
        }
        let mut budget = DELIVERED_ANSWER_BYTES;
        for d in self.delivered.iter_mut().rev() {
            let Some(a) = d.answer.as_mut() else { continue };
            let Some(v) = a.answer.as_ref() else { continue };
            let size = serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
            if size > budget {
                a.answer = None;
            } else {
                budget -= size;
            }
        }
    }

    pub(crate) fn push_outbox(&mut self, t: Transition) {
        self.outbox.push(t);
    }
}

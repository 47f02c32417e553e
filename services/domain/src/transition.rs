//! A committed transition and its effects, and the recent transitions every record
//! keeps (its `outbox`).
//!
//! [`decide`](crate::decide::decide) seals each change as a [`Transition`] on the
//! record it writes last (the *primary* record: the interaction if the command
//! writes one, else the lane, else the session), with the [`Effects`] the worker
//! commits in the same atomic batch as the record (`holdpoint_bus::commit`). The
//! worker writes the record with every transition *confirmed* ([`Outbox::confirm`]:
//! the effects dropped, since the batch stores them): a kept transition holds its
//! command id and outcome, enough to recognise a redelivered command and answer it
//! as the first time, storing nothing again. An outbox holds at most
//! [`OUTBOX_KEEP`] transitions.
//!
//! Store format 1 wrote transitions unconfirmed, their effects still in the
//! record until a relay confirmed them; `holdpoint migrate` commits what such a
//! record still owed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::command::CommandEnvelope;
use crate::event::Event;
use crate::ids::CommandId;
use crate::outcome::Outcome;
use crate::policy::Rule;
use crate::vocab::LaneMessage;

/// How many recent transitions a record keeps (confirmed ones without their effects).
pub const OUTBOX_KEEP: usize = 8;

/// Everything one transition publishes, in this order: events on
/// `hp.evt.<org>.<task>.<name>`, audit records on `hp.audit.<org>`, lane messages on
/// `hp.lane.<org>.<session>.<lane>`, follow-up commands, then deadline schedules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Effects {
    /// CloudEvents for the events stream, each with a deterministic `id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// Decision-audit records (approvals only; never a question).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit: Vec<Event>,
    /// Messages delivered to a session's lane (product sessions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lane_messages: Vec<LaneMessage>,
    /// Commands to run next (closing the product questions a lane message superseded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub follow_ups: Vec<CommandEnvelope>,
    /// Remembered rules to store in `HP_RULES` (key `<org>.<ruleId>`), written by an
    /// approval's answer that carried `remember`; stored before the events go out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// Commands the server runs later: JetStream message schedules (`@at`) in the
    /// commands stream, one per interaction and stage (a newer one replaces it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Scheduled>,
}

/// A command the server publishes at `at` (a one-shot JetStream message schedule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Scheduled {
    /// When, RFC 3339 (the server fires it at this instant or shortly after).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The command it publishes (an `expire` or `expiring`).
    pub command: CommandEnvelope,
    /// The command whose transition stored it: with the scheduled command's id it
    /// makes the schedule's `Nats-Msg-Id`, so setting a deadline back to an earlier
    /// value stores a new schedule instead of being dropped as a duplicate.
    pub set_by: CommandId,
}

impl Scheduled {
    /// The `Nats-Msg-Id` of its schedule: `sched-` + the first 40 hex digits of the
    /// [`digest`](crate::digest::digest) of (the scheduled command's id, the id of
    /// the command that set it). A dedup key: changing it would break exactly-once
    /// across an upgrade.
    pub fn msg_id(&self) -> String {
        let d = crate::digest::digest(&[self.command.command_id().as_str(), self.set_by.as_str()]);
        format!("sched-{}", &d[..40])
    }
}

impl Effects {
    /// True when there is nothing to publish.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.audit.is_empty()
            && self.lane_messages.is_empty()
            && self.follow_ups.is_empty()
            && self.schedules.is_empty()
            && self.rules.is_empty()
    }

    /// How many messages publishing these effects takes.
    pub fn len(&self) -> usize {
        self.rules.len()
            + self.events.len()
            + self.audit.len()
            + self.lane_messages.len()
            + self.follow_ups.len()
            + self.schedules.len()
    }
}

/// One committed change of a record: which command made it, when, what it answered
/// and what it publishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// The command that made it (`cmd-<40 hex>`, its `Nats-Msg-Id`).
    pub command_id: CommandId,
    /// When it was committed (the deciding worker's clock), RFC 3339.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The command partition whose owner committed it (absent on an unpartitioned
    /// deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// True once its effects are stored (with the record, in format 2; format 1
    /// noted it on the record's next write); the effects are then dropped.
    #[serde(default)]
    pub confirmed: bool,
    /// What the command answered; replayed to a redelivery of the same command.
    pub outcome: Outcome,
    /// What it stores; empty once confirmed (as every record writes it now).
    #[serde(flatten)]
    pub effects: Effects,
}

/// A record's recent transitions, oldest first, at most [`OUTBOX_KEEP`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Outbox(VecDeque<Transition>);

impl Outbox {
    /// Appends `t`, dropping the oldest confirmed transitions beyond [`OUTBOX_KEEP`].
    /// Unconfirmed transitions are never dropped: their effects are still owed.
    pub fn push(&mut self, t: Transition) {
        self.0.push_back(t);
        while self.0.len() > OUTBOX_KEEP {
            match self.0.iter().position(|t| t.confirmed) {
                Some(i) => {
                    self.0.remove(i);
                }
                None => break,
            }
        }
    }

    /// The transition `command_id` made, if it is still kept.
    pub fn find(&self, command_id: &CommandId) -> Option<&Transition> {
        self.0.iter().find(|t| &t.command_id == command_id)
    }

    /// Marks the transitions `is_confirmed` accepts as confirmed and drops their
    /// effects. Returns whether anything changed.
    pub fn confirm(&mut self, mut is_confirmed: impl FnMut(&Transition) -> bool) -> bool {
        let mut changed = false;
        for t in self.0.iter_mut().filter(|t| !t.confirmed) {
            if is_confirmed(t) {
                t.confirmed = true;
                t.effects = Effects::default();
                changed = true;
            }
        }
        changed
    }

    /// Every kept transition, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Transition> {
        self.0.iter()
    }

    /// The newest transition.
    pub fn last(&self) -> Option<&Transition> {
        self.0.back()
    }

    /// How many transitions are kept.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no transition is kept.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

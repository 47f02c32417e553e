//! What every step of the state machine shares, below them all: the records a
//! command touches ([`Snapshot`]), what it is decided with ([`Ctx`], [`Deadlines`]),
//! the decision ([`Decision`]) and the writes that seal one, and the small helpers
//! every step uses. The steps (`answer`, `close`, `open`, ...) and `decide` itself
//! use this module; it uses none of them.

use std::time::Duration;

use time::OffsetDateTime;

use crate::error::{ErrorCode, Rejection};
use crate::ids::{CommandId, OrgId, SessionId};
use crate::session::{Lane, Session};
use crate::task::Task;
use crate::transition::{Effects, Transition};
use crate::{CommandEnvelope, Outcome};
use crate::{Interaction, Kind, SessionMode};

/// The records a command touches, as loaded (revisions are the worker's business).
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot<'a> {
    /// The interaction the command names, if it exists.
    pub interaction: Option<&'a Interaction>,
    /// The task of that interaction (or of the opening), if it exists.
    pub task: Option<&'a Task>,
    /// The session header the command (or its interaction) names, if it exists.
    pub session: Option<&'a Session>,
    /// The lane the command (or its product question) is on, if it has a record.
    pub lane: Option<&'a Lane>,
    /// The organisation's remembered rules for an approval's opening (the worker's
    /// KV watch of `HP_RULES`); [`crate::policy::pick`] chooses the one that decides.
    /// Empty for every other command.
    pub rules: &'a [crate::policy::Rule],
}

/// What a command is decided with besides the records: its id, the clock, and the
/// partition whose owner decides it.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The organisation (the envelope's).
    pub org: OrgId,
    /// [`CommandEnvelope::command_id`] of the command, computed once.
    pub command_id: CommandId,
    /// The deciding worker's clock: the time stamped on events and records.
    pub now: OffsetDateTime,
    /// The server's clock at the decision, as the worker estimates it (by default
    /// [`Ctx::now`]). Deadlines are counted and checked on it, since the server's
    /// message schedule fires them by its own clock: `expiresIn`, the default
    /// deadline, the `warning` lead, and the lifetime of a remembered rule.
    pub server_now: OffsetDateTime,
    /// The command partition (stamped on the transition; `None` unpartitioned).
    pub partition: Option<u32>,
    /// How deadlines are kept (none supported by default; the worker sets it).
    pub deadlines: Deadlines,
}

impl Ctx {
    /// The context for deciding `env` at `now` in `partition`. `now` (and
    /// [`Ctx::server_now`]) are cut to the millisecond, the precision records are
    /// stored at ([`crate::timestamp::truncate`]).
    pub fn new(env: &CommandEnvelope, now: OffsetDateTime, partition: Option<u32>) -> Self {
        let now = crate::timestamp::truncate(now);
        Ctx {
            org: env.org.clone(),
            command_id: env.command_id(),
            now,
            server_now: now,
            partition,
            deadlines: Deadlines::default(),
        }
    }

    /// This context, counting deadlines from `server_now` (the server's time).
    pub fn with_server_now(mut self, server_now: OffsetDateTime) -> Self {
        self.server_now = crate::timestamp::truncate(server_now);
        self
    }

    /// This context, deciding with `deadlines`.
    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    pub(super) fn outcome(&self, result: Result<crate::Accepted, Rejection>) -> Outcome {
        Outcome {
            command_id: self.command_id.clone(),
            result,
        }
    }
}

/// What to do for one command.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The new session header to write (first).
    pub session: Option<Session>,
    /// The new lane record to write (before the task).
    pub lane: Option<Lane>,
    /// The new task record to write (before the interaction).
    pub task: Option<Task>,
    /// The new interaction record to write (last).
    pub interaction: Option<Interaction>,
    /// The effects to publish once the writes landed (for a replay: the recorded
    /// ones, empty when they were confirmed).
    pub effects: Effects,
    /// What to reply.
    pub outcome: Outcome,
    /// True when this repeats a committed transition: nothing is written.
    pub replay: bool,
}

impl Decision {
    pub(super) fn reply(outcome: Outcome) -> Self {
        Decision {
            session: None,
            lane: None,
            task: None,
            interaction: None,
            effects: Effects::default(),
            outcome,
            replay: false,
        }
    }

    pub(super) fn replay(t: &Transition) -> Self {
        Decision {
            effects: t.effects.clone(),
            replay: true,
            ..Self::reply(t.outcome.clone())
        }
    }

    /// True when the decision writes a record.
    pub fn writes(&self) -> bool {
        self.session.is_some()
            || self.lane.is_some()
            || self.task.is_some()
            || self.interaction.is_some()
    }
}

/// The records a decision writes, before they are sealed by [`Writes::commit`].
#[derive(Debug, Default)]
pub(super) struct Writes {
    pub(super) session: Option<Session>,
    pub(super) lane: Option<Lane>,
    pub(super) task: Option<Task>,
    pub(super) interaction: Option<Interaction>,
}

impl Writes {
    /// Seals the change: the transition goes on the primary record (interaction,
    /// else lane, else session).
    pub(super) fn commit(mut self, ctx: &Ctx, effects: Effects, outcome: Outcome) -> Decision {
        let t = Transition {
            command_id: ctx.command_id.clone(),
            at: ctx.now,
            partition: ctx.partition,
            confirmed: false,
            outcome: outcome.clone(),
            effects: effects.clone(),
        };
        if let Some(i) = self.interaction.as_mut() {
            i.push_outbox(t);
        } else if let Some(l) = self.lane.as_mut() {
            l.push_outbox(t);
        } else if let Some(s) = self.session.as_mut() {
            s.push_outbox(t);
        }
        Decision {
            session: self.session,
            lane: self.lane,
            task: self.task,
            interaction: self.interaction,
            effects,
            outcome,
            replay: false,
        }
    }
}

pub(super) fn reject(ctx: &Ctx, code: ErrorCode, message: impl Into<String>) -> Decision {
    Decision::reply(ctx.outcome(Err(Rejection::new(code, message))))
}

pub(super) fn accept(ctx: &Ctx, a: crate::Accepted) -> Decision {
    Decision::reply(ctx.outcome(Ok(a)))
}

pub(super) fn session_missing(ctx: &Ctx, id: &SessionId) -> Decision {
    reject(
        ctx,
        ErrorCode::SessionNotFound,
        format!("No session with id {id} exists on this host."),
    )
}

pub(super) fn live_session(s: Option<&Session>) -> Option<&Session> {
    s.filter(|s| s.is_live())
}

/// True when answering releases or finishes a blocked call (everything except a
/// question on a product session).
pub(super) fn blocks(i: &Interaction) -> bool {
    !(i.mode == SessionMode::Product && i.kind() == Kind::Question)
}

/// How deadlines are kept where the command is decided: whether the server can
/// schedule, and the configured default, maximum and warning lead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// True when the connected nats-server has JetStream message schedules (2.12+).
    /// Without them an explicit deadline is refused (`NRY-0022`) and the default is
    /// not applied.
    pub supported: bool,
    /// The deadline of an opening that names none (none when `None`).
    pub default: Option<Duration>,
    /// The farthest deadline an opening or a change may ask for, from the moment it
    /// is decided (no limit beyond [`MAX_EXPIRES_IN_SECS`](crate::command::MAX_EXPIRES_IN_SECS) when `None`).
    pub max: Option<Duration>,
    /// How long before the deadline `interaction-expiring` goes out (none when
    /// `None`, or when the deadline is nearer than this when set).
    pub warning: Option<Duration>,
}

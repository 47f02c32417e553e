//! The interaction state machine: [`decide`] is a pure function of the records a
//! command touches, the command and a [`Ctx`] (its id, the clock). It returns the
//! records to write, the effects to publish and the outcome to reply; the worker
//! does the IO (load, compare-and-set writes, publishes, reply, ack).
//!
//! **Write order.** A decision writes the session header, the lane and the task
//! first, and its *primary* record last: the interaction if it writes one, else the
//! lane, else the session. The primary record carries the new [`Transition`], so a
//! change is committed exactly when its primary write lands. A crash between the
//! writes leaves the secondary records a step ahead; every transition is written so
//! that deciding the same command again on them gives the same records and the same
//! effects (removing a pending interaction twice, listing a question twice, taking a
//! message twice are all no-ops).
//!
//! **Exactly once** rests on three facts the tests check: a command whose id is in
//! its primary record's outbox is a replay (the recorded outcome; the recorded effects
//! if they are not confirmed yet; no write); an answer whose key resolved the
//! interaction replays the recorded outcome; and every event id derives from the
//! transition, so publishing it again is a no-op.
//!
//! One file per step: [`session`](self::session) (a session opens, closes, ends),
//! [`open`](self::open) (an interaction opens), [`answer`](self::answer) (a person
//! answers), [`close`](self::close) (the host closes an interaction, or reports a
//! released call's result), [`expire`](self::expire) (deadlines: set, warned,
//! expired), [`lane`](self::lane) (messages and turns), and
//! [`events`](self::events) (the events they build).

mod answer;
mod close;
mod events;
mod expire;
mod lane;
mod open;
mod session;

use time::OffsetDateTime;

pub use expire::Deadlines;

use crate::error::{ErrorCode, Rejection};
use crate::ids::{LaneId, OrgId, SessionId, TaskId};
use crate::session::{Lane, Session};
use crate::task::Task;
use crate::transition::{Effects, Transition};
use crate::{Command, CommandEnvelope, Outcome};
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
    pub command_id: String,
    /// The deciding worker's clock.
    pub now: OffsetDateTime,
    /// The command partition (stamped on the transition; `None` unpartitioned).
    pub partition: Option<u32>,
    /// How deadlines are kept (none supported by default; the worker sets it).
    pub deadlines: Deadlines,
}

impl Ctx {
    /// The context for deciding `env` at `now` in `partition`.
    pub fn new(env: &CommandEnvelope, now: OffsetDateTime, partition: Option<u32>) -> Self {
        Ctx {
            org: env.org.clone(),
            command_id: env.command_id(),
            now,
            partition,
            deadlines: Deadlines::default(),
        }
    }

    /// This context, deciding with `deadlines`.
    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    fn outcome(&self, result: Result<crate::Accepted, Rejection>) -> Outcome {
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
    fn reply(outcome: Outcome) -> Self {
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

    fn replay(t: &Transition) -> Self {
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
struct Writes {
    session: Option<Session>,
    lane: Option<Lane>,
    task: Option<Task>,
    interaction: Option<Interaction>,
}

impl Writes {
    /// Seals the change: the transition goes on the primary record (interaction,
    /// else lane, else session).
    fn commit(mut self, ctx: &Ctx, effects: Effects, outcome: Outcome) -> Decision {
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

fn reject(ctx: &Ctx, code: ErrorCode, message: impl Into<String>) -> Decision {
    Decision::reply(ctx.outcome(Err(Rejection::new(code, message))))
}

fn accept(ctx: &Ctx, a: crate::Accepted) -> Decision {
    Decision::reply(ctx.outcome(Ok(a)))
}

fn session_missing(ctx: &Ctx, id: &SessionId) -> Decision {
    reject(
        ctx,
        ErrorCode::SessionNotFound,
        format!("No session with id {id} exists on this host."),
    )
}

fn live_session(s: Option<&Session>) -> Option<&Session> {
    s.filter(|s| s.is_live())
}

/// True when answering releases or finishes a blocked call (everything except a
/// question on a product session).
fn blocks(i: &Interaction) -> bool {
    !(i.mode == SessionMode::Product && i.kind() == Kind::Question)
}

/// Decides `env` against `snap`, in `ctx` (built from `env` with [`Ctx::new`]).
pub fn decide(snap: Snapshot<'_>, env: &CommandEnvelope, ctx: &Ctx) -> Decision {
    // A command already applied (its id is in the outbox of a record it wrote last) is
    // a replay, whatever the records say now.
    let recorded = [
        snap.interaction.map(|i| &i.outbox),
        snap.lane.map(|l| &l.outbox),
        snap.session.map(|s| &s.outbox),
    ]
    .into_iter()
    .flatten()
    .find_map(|o| o.find(&ctx.command_id));
    if let Some(t) = recorded {
        return Decision::replay(t);
    }
    let mut d = transition(snap, env, ctx);
    if !d.writes() {
        undo_partial_task_write(snap, env, ctx, &mut d);
    }
    d
}

/// A decision writes the task record before its primary record. When a worker dies
/// between the two writes and the redelivered command is then refused (its session
/// ended meanwhile, say), the task is a step ahead of the interaction: it no longer
/// lists an interaction that still waits, or lists one that was never recorded. The
/// refused command undoes its own step, which the task record marks with its command
/// id; a step of any other command is left alone (its worker may still be writing).
fn undo_partial_task_write(snap: Snapshot<'_>, env: &CommandEnvelope, ctx: &Ctx, d: &mut Decision) {
    let (Some(task), Some(id)) = (snap.task, env.interaction_id()) else {
        return;
    };
    let mut fixed = task.clone();
    let changed = match snap.interaction {
        Some(i) if i.state == crate::State::Pending => fixed.restore(i, &ctx.command_id),
        None => fixed.forget_opening(id, &ctx.command_id),
        Some(_) => false,
    };
    if changed {
        d.task = Some(fixed);
    }
}

fn transition(snap: Snapshot<'_>, env: &CommandEnvelope, ctx: &Ctx) -> Decision {
    match &env.command {
        Command::SessionOpen {
            session,
            mode,
            lane_capacity,
        } => session::open(ctx, snap.session, session, *mode, *lane_capacity),
        Command::SessionClose { session } => session::close(ctx, snap.session, session, false),
        Command::SessionEnd { session } => session::close(ctx, snap.session, session, true),
        Command::Open(o) => open::open(ctx, snap, o),
        Command::Close {
            interaction_id,
            reason,
            by_message,
            ..
        } => close::close(ctx, snap, interaction_id, *reason, by_message.as_ref()),
        Command::Answer(a) => answer::answer(ctx, snap, a),
        Command::ToolResult {
            interaction_id,
            result,
            ..
        } => close::tool_result(ctx, snap, interaction_id, result),
        Command::Deadline {
            interaction_id,
            expires_at,
            expires_in,
            ..
        } => expire::set(ctx, snap, interaction_id, *expires_at, *expires_in),
        Command::Expire {
            interaction_id,
            expires_at,
            stage,
            ..
        } => expire::tick(ctx, snap, interaction_id, *expires_at, *stage),
        Command::Message {
            session,
            lane,
            message_id,
            by,
            text,
        } => lane::message(ctx, snap, session, lane, message_id, by, text),
        Command::TurnStart {
            session,
            lane,
            turn_id,
        } => lane::turn_start(ctx, snap, session, lane, turn_id),
        Command::TurnFinish {
            session,
            lane,
            turn_id,
        } => lane::turn_finish(ctx, snap, session, lane, turn_id),
    }
}

/// Which records deciding `env` needs, beyond the interaction it names: the worker
/// loads the interaction first (when the command names one), then asks this.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Needs {
    /// The task record.
    pub task: Option<TaskId>,
    /// The session header.
    pub session: Option<SessionId>,
    /// The lane record, as (session, lane).
    pub lane: Option<(SessionId, LaneId)>,
}

/// The records `env` needs given its interaction (if it names one and it exists) and
/// the mode of its session (if known; a product-session opening needs its lane).
pub fn needs(
    env: &CommandEnvelope,
    interaction: Option<&Interaction>,
    mode: Option<SessionMode>,
) -> Needs {
    let product_question = |i: &Interaction| !blocks(i);
    match &env.command {
        Command::SessionOpen { session, .. }
        | Command::SessionClose { session }
        | Command::SessionEnd { session } => Needs {
            session: Some(session.clone()),
            ..Needs::default()
        },
        Command::Message { session, lane, .. }
        | Command::TurnStart { session, lane, .. }
        | Command::TurnFinish { session, lane, .. } => Needs {
            task: None,
            session: Some(session.clone()),
            lane: Some((session.clone(), lane.clone())),
        },
        Command::Open(o) => {
            let product = mode == Some(SessionMode::Product)
                && matches!(o.request, crate::OpenRequest::Question { .. });
            Needs {
                task: Some(o.task_id.clone()),
                session: Some(o.session.clone()),
                lane: product.then(|| (o.session.clone(), o.lane.clone())),
            }
        }
        Command::Answer(_)
        | Command::Close { .. }
        | Command::Deadline { .. }
        | Command::Expire { .. } => match interaction {
            Some(i) => Needs {
                task: Some(i.task_id.clone()),
                session: Some(i.session.clone()),
                lane: product_question(i).then(|| (i.session.clone(), i.lane.clone())),
            },
            None => Needs::default(),
        },
        Command::ToolResult { .. } => Needs::default(),
    }
}

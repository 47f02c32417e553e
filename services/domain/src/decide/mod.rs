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
//! answers), [`approve`](self::approve) (an approval counted toward a hold that
//! needs several people, and what an approval's decision records),
//! [`close`](self::close) (the host closes an interaction, or reports a
//! released call's result), [`assign`](self::assign) (the runtime changes who may
//! answer), [`expire`](self::expire) (deadlines: set, warned,
//! expired), [`escalate`](self::escalate) (the warning stage adds the
//! escalation to the assignees), [`lane`](self::lane) (messages and turns), and
//! [`events`](self::events) (the events they build). Below them all, `base`: what
//! every step shares ([`Snapshot`], [`Ctx`], [`Deadlines`], [`Decision`], the writes
//! that seal a decision, the reply helpers). A step uses `base`, `events` and the
//! steps it builds on (`answer` uses `approve`; `close` and `expire` use
//! `answer`; `expire` uses `close` and `escalate`; `open` uses
//! `approve`, `expire` and `escalate`; `assign` uses `escalate`), never this
//! module and never a step that uses it, so there is no import cycle.

mod answer;
mod approve;
mod assign;
mod base;
mod close;
mod escalate;
mod events;
mod expire;
mod lane;
mod open;
mod session;

use base::blocks;
pub use base::{Ctx, Deadlines, Decision, Snapshot};

use crate::ids::{LaneId, SessionId, TaskId};
use crate::{Command, CommandEnvelope};
use crate::{Interaction, SessionMode};

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
/// A pending entry's `detail` (the approvals counted so far) is shown again as the
/// interaction records it: a counted approval whose interaction write never landed
/// must not be claimed by the task's views.
fn undo_partial_task_write(snap: Snapshot<'_>, env: &CommandEnvelope, ctx: &Ctx, d: &mut Decision) {
    let (Some(task), Some(id)) = (snap.task, env.interaction_id()) else {
        return;
    };
    let mut fixed = task.clone();
    let changed = match snap.interaction {
        // `|`, not `||`: a departure undone and a detail shown again are both fixed.
        Some(i) if i.state == crate::State::Pending => {
            fixed.restore(i, &ctx.command_id) | fixed.refresh(i)
        }
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
        Command::Reassign {
            interaction_id,
            change_id,
            assignees,
            ..
        } => assign::reassign(ctx, snap, interaction_id, change_id, assignees.as_ref()),
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
        | Command::Reassign { .. }
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

//! The host closes a pending interaction without an answer (the turn was
//! interrupted, a lane message superseded it, it expired, it was canceled), and the
//! tool executor reports the result of a released call.

use crate::Accepted;
use crate::error::ErrorCode;
use crate::event::EventData;
use crate::ids::{InteractionId, MessageId};
use crate::transition::Effects;
use crate::{Answer, CallResult, CloseReason, Closure, Interaction, Spec, State};

use super::answer::leave_pending;
use super::base::{Ctx, Decision, Snapshot, Writes, accept, blocks, reject};
use super::events::{self, Verdict};

pub(super) fn close(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    reason: CloseReason,
    by_message: Option<&MessageId>,
) -> Decision {
    close_with(ctx, snap, id, reason, by_message, None)
}

/// [`close`], with the result the blocked call finishes with when it is not the
/// usual `interaction.closed` error (an expired blocking question).
pub(super) fn close_with(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    reason: CloseReason,
    by_message: Option<&MessageId>,
    finish: Option<CallResult>,
) -> Decision {
    let i = match closable(ctx, snap, id) {
        Ok(i) => i,
        Err(d) => return *d,
    };
    let mut next = i.clone();
    next.state = State::Closed;
    next.closure = Some(Closure {
        reason,
        at: ctx.now,
        by_message: by_message.cloned(),
    });
    let mut events = vec![events::on_interaction(
        i,
        "close",
        ctx.now,
        EventData::InteractionClosed {
            interaction_id: i.id.clone(),
            reason,
        },
    )];
    if blocks(i) {
        let result = finish.unwrap_or_else(|| CallResult::Error {
            code: "interaction.closed".into(),
            message: format!(
                "The interaction was closed ({}).",
                CloseReason::message_word(reason)
            ),
        });
        next.result = Some(result.clone());
        events.push(events::finished(i, result, ctx.now));
    }
    let lane = snap.lane.filter(|l| !blocks(i) && l.lists(&i.id)).map(|l| {
        let mut l = l.clone();
        l.open_questions.retain(|q| q.id != i.id);
        l
    });
    let task = leave_pending(ctx, snap.task, i);
    events.push(events::task_status(i, &task, "close", ctx.now));
    let mut effects = Effects {
        events,
        ..Effects::default()
    };
    if reason == CloseReason::Expired {
        // An approval whose deadline passed is decided by expiry: audited like a
        // person's or a rule's decision (a question or a connection never is).
        effects.audit.extend(events::approval_decided(
            i,
            Verdict::expired(
                Some("the approval's deadline passed before anyone decided".into()),
                events::approvers(i),
            ),
            ctx.now,
        ));
    }
    Writes {
        lane,
        task: Some(task),
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Closed)))
}

/// The pending interaction a close of `id` closes; `Err` is the reply when there
/// is none (missing, already closed, or already answered).
fn closable<'a>(
    ctx: &Ctx,
    snap: Snapshot<'a>,
    id: &InteractionId,
) -> Result<&'a Interaction, Box<Decision>> {
    let Some(i) = snap.interaction else {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::NotFound,
            format!("no interaction {id}"),
        )));
    };
    match i.state {
        State::Closed => return Err(Box::new(accept(ctx, Accepted::Closed))),
        State::Resolved | State::Finished => {
            return Err(Box::new(reject(
                ctx,
                ErrorCode::AlreadySettled,
                format!("interaction {id} was already answered"),
            )));
        }
        State::Pending => {}
    }
    // A product answer is taken once its message is on the lane (the lane is written
    // before the interaction): a close arriving between those two writes is too late,
    // or the lane would run a message that was never announced.
    let taken = !blocks(i)
        && MessageId::parse(i.id.as_str()).is_ok_and(|m| {
            snap.lane
                .and_then(|l| l.delivery(&m))
                .is_some_and(|d| d.answer.is_some())
        });
    if taken {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::AlreadySettled,
            format!("interaction {id} was already answered"),
        )));
    }
    Ok(i)
}

pub(super) fn tool_result(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    result: &CallResult,
) -> Decision {
    let Some(i) = snap.interaction else {
        return reject(ctx, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    let released = matches!(
        (&i.spec, i.resolution.as_ref().map(|r| &r.answer)),
        (
            Spec::Approval { .. },
            Some(Answer::Approval { approved: true, .. })
        )
    );
    match i.state {
        State::Resolved if released => {}
        State::Finished if released && i.result.as_ref() == Some(result) => {
            return accept(ctx, Accepted::Finished);
        }
        State::Finished if released => {
            return reject(
                ctx,
                ErrorCode::CommandConflict,
                format!("call for {id} already finished with another result"),
            );
        }
        _ => {
            return reject(
                ctx,
                ErrorCode::UnsupportedOperation,
                format!("interaction {id} released no call that waits for a result"),
            );
        }
    }
    let mut next = i.clone();
    next.state = State::Finished;
    next.result = Some(result.clone());
    let effects = Effects {
        events: vec![events::finished(i, result.clone(), ctx.now)],
        ..Effects::default()
    };
    Writes {
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Finished)))
}

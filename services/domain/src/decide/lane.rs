//! The message road: a person's message on a lane, and the runtime's turns.
//!
//! Admission (documented in the README): an idle lane admits the message and its
//! turn starts; a busy lane queues it (`NRY-0031`, kept) until the running turn
//! finishes; a full lane or a closed session refuses it (`NRY-0030`, nothing kept);
//! an ended or unknown session is `NRY-0002`. A message on a product session's lane
//! closes the questions open on it (superseded). Message ids are keys of their lane.

use crate::Admission;
use crate::error::{ErrorCode, Rejection};
use crate::ids::{InteractionId, LaneId, MessageId, PersonId, SessionId};
use crate::rules::{MAX_TEXT_CHARS, forbidden_control};
use crate::session::{Delivery, Lane, OpenQuestion, Session, SessionStatus};
use crate::transition::Effects;
use crate::{Accepted, Command, CommandEnvelope, Outcome};
use crate::{CloseReason, LaneContent, SessionMode};

use super::base::{Ctx, Decision, Snapshot, Writes, accept, live_session, reject, session_missing};
use super::events::{self, LaneNote};

fn lane_of(ctx: &Ctx, lane: Option<&Lane>, session: &SessionId, id: &LaneId) -> Lane {
    lane.cloned()
        .unwrap_or_else(|| Lane::new(&ctx.org, session, id))
}

fn admission_outcome(ctx: &Ctx, lane: &LaneId, a: Admission) -> Outcome {
    match a {
        Admission::Admitted => ctx.outcome(Ok(Accepted::Admitted)),
        Admission::Queued => ctx.outcome(Err(Rejection::new(
            ErrorCode::LaneBusy,
            format!(
                "lane {lane} is busy: the message is queued and its turn starts when the lane frees"
            ),
        ))),
    }
}

/// Checks the text of a message: 1 to [`MAX_TEXT_CHARS`] characters, no control
/// character but TAB, LF and CR (the ingress refuses them too; a message that
/// reaches NATS another way is held to the same rule).
fn text_fits(text: &str) -> Result<(), String> {
    if text.trim().is_empty() || text.chars().count() > MAX_TEXT_CHARS {
        return Err(format!("text must hold 1 to {MAX_TEXT_CHARS} characters"));
    }
    match forbidden_control(text) {
        Some(c) => Err(format!(
            "text holds the control character U+{:04X}; only TAB, LF and CR are allowed",
            u32::from(c)
        )),
        None => Ok(()),
    }
}

pub(super) fn message(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &SessionId,
    lane_id: &LaneId,
    message_id: &MessageId,
    by: &PersonId,
    text: &str,
) -> Decision {
    let Some(session) = live_session(snap.session) else {
        return session_missing(ctx, id);
    };
    if let Err(why) = text_fits(text) {
        return reject(ctx, ErrorCode::InvalidRequest, why);
    }
    let lane = lane_of(ctx, snap.lane, id, lane_id);
    if let Some(d) = lane.delivery(message_id) {
        return Decision::reply(admission_outcome(ctx, lane_id, d.admission));
    }
    if let Some(refusal) = refused(ctx, session, &lane) {
        return refusal;
    }
    take_message(ctx, session, lane, message_id, by, text)
}

/// The lane's refusal of a new message, if it refuses one.
fn refused(ctx: &Ctx, session: &Session, lane: &Lane) -> Option<Decision> {
    if session.status != SessionStatus::Open {
        return Some(reject(
            ctx,
            ErrorCode::LaneRefused,
            format!("session {} is closed", session.id),
        ));
    }
    if lane.running.is_some() && lane.queue.len() >= session.lane_capacity as usize {
        return Some(reject(
            ctx,
            ErrorCode::LaneRefused,
            format!("lane {} is full", lane.lane),
        ));
    }
    None
}

fn take_message(
    ctx: &Ctx,
    session: &Session,
    mut lane: Lane,
    message_id: &MessageId,
    by: &PersonId,
    text: &str,
) -> Decision {
    let (admission, closes) = admit(session, &mut lane, message_id);
    let content = LaneContent::Text {
        text: text.to_owned(),
    };
    let note = LaneNote {
        org: &ctx.org,
        session: &session.id,
        lane: &lane.lane,
        message_id,
        admission,
        by,
        content: &content,
    };
    let effects = Effects {
        events: events::delivered(&note, ctx.now),
        lane_messages: vec![note.message(ctx.now)],
        follow_ups: supersede(ctx, closes, message_id),
        ..Effects::default()
    };
    let outcome = admission_outcome(ctx, &lane.lane, admission);
    Writes {
        lane: Some(lane),
        ..Writes::default()
    }
    .commit(ctx, effects, outcome)
}

/// The lane takes `message_id`: it runs it when idle, else queues it, and
/// remembers the delivery. In a product session the message also takes the lane's
/// open questions, returned for [`supersede`].
fn admit(
    session: &Session,
    lane: &mut Lane,
    message_id: &MessageId,
) -> (Admission, Vec<OpenQuestion>) {
    let admission = if lane.running.is_some() {
        lane.queue.push_back(message_id.clone());
        Admission::Queued
    } else {
        lane.running = Some(message_id.clone());
        Admission::Admitted
    };
    let closes = if session.mode == SessionMode::Product {
        std::mem::take(&mut lane.open_questions)
    } else {
        Vec::new()
    };
    lane.remember(Delivery {
        message_id: message_id.clone(),
        admission,
        closes: closes
            .iter()
            .map(|q| q.id.clone())
            .collect::<Vec<InteractionId>>(),
        answer: None,
    });
    (admission, closes)
}

/// The follow-up closes of the open questions message `message_id` took (reason
/// `superseded`).
fn supersede(ctx: &Ctx, closes: Vec<OpenQuestion>, message_id: &MessageId) -> Vec<CommandEnvelope> {
    closes
        .into_iter()
        .map(|q| CommandEnvelope {
            org: ctx.org.clone(),
            command: Command::Close {
                interaction_id: q.id,
                reason: CloseReason::Superseded,
                by_message: Some(message_id.clone()),
                task_id: Some(q.task_id),
            },
        })
        .collect()
}

pub(super) fn turn_start(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &SessionId,
    lane_id: &LaneId,
    turn: &MessageId,
) -> Decision {
    if live_session(snap.session).is_none() {
        return session_missing(ctx, id);
    }
    let mut lane = lane_of(ctx, snap.lane, id, lane_id);
    match &lane.running {
        Some(r) if r == turn => return accept(ctx, Accepted::Unchanged),
        Some(r) => {
            return reject(
                ctx,
                ErrorCode::CommandConflict,
                format!("turn {r} is running on lane {lane_id}"),
            );
        }
        None => {}
    }
    // A turn that already ran (its start redelivered after it finished and left the
    // outbox) does not run again.
    if lane.delivery(turn).is_some() {
        return accept(ctx, Accepted::Unchanged);
    }
    lane.running = Some(turn.clone());
    lane.remember(Delivery {
        message_id: turn.clone(),
        admission: Admission::Admitted,
        closes: Vec::new(),
        answer: None,
    });
    let effects = Effects {
        events: vec![events::turn_started(&ctx.org, id, lane_id, turn, ctx.now)],
        ..Effects::default()
    };
    Writes {
        lane: Some(lane),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Admitted)))
}

pub(super) fn turn_finish(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &SessionId,
    lane_id: &LaneId,
    turn: &MessageId,
) -> Decision {
    if live_session(snap.session).is_none() {
        return session_missing(ctx, id);
    }
    let mut lane = lane_of(ctx, snap.lane, id, lane_id);
    if lane.running.as_ref() != Some(turn) {
        return accept(ctx, Accepted::Unchanged);
    }
    lane.running = lane.queue.pop_front();
    let mut effects = Effects::default();
    if let Some(next) = lane.running.clone() {
        effects
            .events
            .push(events::turn_started(&ctx.org, id, lane_id, &next, ctx.now));
    }
    Writes {
        lane: Some(lane),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Unchanged)))
}

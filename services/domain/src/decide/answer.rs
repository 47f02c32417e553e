//! A person answers an interaction, read by its kind (README "The HTTP API": the
//! reading rules and the question body).
//!
//! On a blocking session the answer resolves the interaction and releases or
//! finishes the call it blocks; answering again is a conflict unless it repeats the
//! resolving key. On a product session the answer becomes the person's next message
//! on the question's lane, keyed by the question id, so a second press delivers the
//! recorded answer once and answers as the first did.

use serde_json::Value;

use crate::Admission;
use crate::error::ErrorCode;
use crate::ids::MessageId;
use crate::rulebook;
use crate::rules::{question_output, read_answer};
use crate::session::{DeliveredAnswer, Delivery, Lane, Session, SessionStatus};
use crate::task::Task;
use crate::transition::Effects;
use crate::{Accepted, AnswerCommand, AnswerInput, AnswerRoute};
use crate::{
    Answer, CallResult, Interaction, Kind, LaneContent, Resolution, Resolver, Spec, State,
};

use super::approve::{ApprovalDecision, approval_decided, count, count_approval};
use super::base::{Ctx, Decision, Snapshot, Writes, blocks, live_session, reject, session_missing};
use super::events::{self, LaneNote};

pub(super) fn answer(ctx: &Ctx, snap: Snapshot<'_>, a: &AnswerCommand) -> Decision {
    let i = match addressed(ctx, snap, a) {
        Ok(i) => i,
        Err(d) => return *d,
    };
    if let Some(g) = i.approval_by_key(&a.by, &a.key) {
        // A counted (or since withdrawn) approval's key again, from the person who
        // gave it: what it replied, whatever came since (a reassignment, a deadline
        // moved, the body sent differently, the call released).
        return Decision::reply(ctx.outcome(g.outcome.result.clone()));
    }
    if !i.admits(&a.by, &a.groups) {
        // Checked before anything else the answer could learn or change: a person
        // outside the assignees gets the same refusal whatever the state.
        return reject(
            ctx,
            ErrorCode::NotAssignee,
            format!(
                "interaction {} is assigned to other people or groups; you may not answer it \
                 and nothing was decided",
                i.id
            ),
        );
    }
    if a.remember.is_some() && i.kind() != Kind::Approval {
        // Nothing about a question or a connection is ever remembered: refused before
        // anything else, so the answer writes nothing.
        return Decision::reply(ctx.outcome(Err(rulebook::not_rememberable(i))));
    }
    if a.remember.is_some() && i.approvals_required() > 1 {
        return reject(
            ctx,
            ErrorCode::NotRememberable,
            format!(
                "interaction {} needs approvals from {} people and a remembered rule never \
                 counts as one: answer without remember; nothing was decided",
                i.id,
                i.approvals_required()
            ),
        );
    }
    if let Some(r) = &i.resolution
        && r.resolved_by.is_person()
        && ((r.key == a.key && r.by == a.by) || !blocks(i))
    {
        // The resolving key again, or a second press on a product question: the
        // recorded outcome, once more, with nothing new.
        return Decision::reply(ctx.outcome(r.outcome.result.clone()));
    }

    if let Some(d) = settled(ctx, i) {
        return d;
    }
    let reading = match read_answer(&i.spec, &a.input) {
        Ok(r) => r,
        Err(r) => return Decision::reply(ctx.outcome(Err(r))),
    };
    if a.remember.is_some()
        && matches!(
            &reading,
            Answer::Approval {
                edited_arguments: Some(_),
                ..
            }
        )
    {
        return reject(
            ctx,
            ErrorCode::EditNotRememberable,
            "remember cannot be combined with editedArguments: a rule about arguments the agent never proposed is not written; nothing was decided",
        );
    }
    if let (
        Spec::Approval {
            arguments_digest, ..
        },
        AnswerInput::Approved {
            arguments_digest: Some(seen),
            ..
        },
    ) = (&i.spec, &a.input)
        && seen != arguments_digest
    {
        return reject(
            ctx,
            ErrorCode::ArgumentsChanged,
            "the call's arguments are not the ones you were shown",
        );
    }
    let Some(session) = live_session(snap.session) else {
        return session_missing(ctx, &i.session);
    };
    if let Some(d) = count_approval(ctx, snap, i, a, &reading) {
        return d;
    }
    let task = leave_pending(ctx, snap.task, i);
    if blocks(i) {
        resolve_blocking(ctx, i, task, a, reading)
    } else {
        resolve_product(ctx, i, task, session, snap.lane, a, reading)
    }
}

/// The interaction the answer addresses. Existence (scoped by organisation through
/// the key) comes before every other check, so nothing about another tenant's
/// interaction can leak.
fn addressed<'a>(
    ctx: &Ctx,
    snap: Snapshot<'a>,
    a: &AnswerCommand,
) -> Result<&'a Interaction, Box<Decision>> {
    let not_found = || {
        let what = if a.route == AnswerRoute::Question {
            "question"
        } else {
            "interaction"
        };
        Box::new(reject(
            ctx,
            ErrorCode::NotFound,
            format!("no {what} {}", a.interaction_id),
        ))
    };
    let Some(i) = snap.interaction else {
        return Err(not_found());
    };
    if a.route == AnswerRoute::Question && i.kind() != Kind::Question {
        return Err(not_found());
    }
    if a.task_id.as_ref().is_some_and(|t| t != &i.task_id) {
        return Err(not_found());
    }
    if a.context_id.as_ref().is_some_and(|c| c != &i.context_id) {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::InvalidRequest,
            "contextId does not match the task's context",
        )));
    }
    Ok(i)
}

/// The conflict for an interaction that no longer waits, saying since when (in
/// the one timestamp format, [`crate::timestamp::format`]).
fn settled(ctx: &Ctx, i: &Interaction) -> Option<Decision> {
    let when = crate::timestamp::format;
    let message = match (i.state, &i.resolution, &i.closure) {
        (State::Pending, ..) => return None,
        (State::Closed, _, Some(c)) if c.reason == crate::CloseReason::Expired => format!(
            "interaction {} expired at {} with no answer and no longer waits for one",
            i.id,
            when(c.at)
        ),
        (State::Resolved | State::Finished, Some(r), _) if r.resolved_by == Resolver::Expiry => {
            format!(
                "interaction {} expired at {} with no answer (its deadline decided it) and no \
                 longer waits for one",
                i.id,
                when(r.at)
            )
        }
        (State::Resolved | State::Finished, Some(r), _) if r.resolved_by == Resolver::Rule => {
            format!(
                "interaction {} was decided at {} by a remembered rule ({}) and no longer waits \
                 for an answer",
                i.id,
                when(r.at),
                r.key.as_str()
            )
        }
        (State::Closed, _, Some(c)) => format!(
            "interaction {} was closed ({}) at {} and no longer waits for an answer",
            i.id,
            c.reason.message_word(),
            when(c.at)
        ),
        (State::Resolved | State::Finished, Some(r), _) => format!(
            "interaction {} was already answered at {} and no longer waits for an answer",
            i.id,
            when(r.at)
        ),
        _ => format!("interaction {} no longer waits for an answer", i.id),
    };
    Some(reject(ctx, ErrorCode::AlreadySettled, message))
}

/// The task record once `i` no longer waits (created when missing).
pub(super) fn leave_pending(ctx: &Ctx, task: Option<&Task>, i: &Interaction) -> Task {
    let mut task = task
        .cloned()
        .unwrap_or_else(|| Task::new(&i.org, &i.task_id, &i.context_id, ctx.now));
    let before = task.status();
    task.remove_pending(&i.id, &ctx.command_id);
    if task.status() != before {
        task.updated_at = ctx.now;
    }
    task
}

fn resolution(
    ctx: &Ctx,
    a: &AnswerCommand,
    answer: Answer,
    outcome: &crate::Outcome,
) -> Resolution {
    Resolution {
        key: a.key.clone(),
        command_id: ctx.command_id.clone(),
        by: a.by.clone(),
        at: ctx.now,
        answer,
        resolved_by: crate::Resolver::Person,
        outcome: outcome.clone(),
    }
}

fn resolved_event(
    ctx: &Ctx,
    i: &Interaction,
    answer: &Answer,
    d: &DeliveredAnswer,
) -> crate::event::Event {
    events::resolved(i, answer, &d.by, &d.key, Resolver::Person, None, ctx.now)
}

fn resolve_blocking(
    ctx: &Ctx,
    i: &Interaction,
    task: Task,
    a: &AnswerCommand,
    answer: Answer,
) -> Decision {
    let outcome = ctx.outcome(Ok(Accepted::Resolved));
    let mut next = i.clone();
    next.resolution = Some(resolution(ctx, a, answer.clone(), &outcome));
    let by = DeliveredAnswer {
        answer: None,
        by: a.by.clone(),
        key: a.key.clone(),
    };
    let mut effects = Effects::default();
    if let Answer::Approval {
        approved: true,
        reason,
        ..
    } = &answer
        && i.approvals_required() > 1
    {
        // The approval that completes the count (count_approval let it through).
        count(ctx, &mut next, a, reason.as_deref(), &outcome, &mut effects);
    }
    effects.events.push(resolved_event(ctx, i, &answer, &by));
    let approvals = events::approvers(&next);
    let result = match blocked_call_result(ctx, i, a, &answer, &mut effects, approvals) {
        Ok(r) => r,
        Err(d) => return *d,
    };
    match result {
        Some(r) => {
            next.state = State::Finished;
            next.result = Some(r.clone());
            effects.events.push(events::finished(i, r, ctx.now));
        }
        None => next.state = State::Resolved,
    }
    effects
        .events
        .push(events::task_status(i, &task, "resolve", ctx.now));
    Writes {
        task: Some(task),
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, outcome)
}

/// What the blocked call finishes with (`None`: an approved call, released to run;
/// its result comes later), adding the approval's audit record and release, and the
/// rule the answer asked to remember.
fn blocked_call_result(
    ctx: &Ctx,
    i: &Interaction,
    a: &AnswerCommand,
    answer: &Answer,
    effects: &mut Effects,
    approvals: Vec<crate::PersonId>,
) -> Result<Option<CallResult>, Box<Decision>> {
    match (&i.spec, answer) {
        (
            Spec::Approval { .. },
            Answer::Approval {
                approved,
                reason,
                edited_arguments,
            },
        ) => {
            if let Some(remember) = &a.remember {
                let rule = rulebook::rule_for(
                    i,
                    remember,
                    *approved,
                    &a.by,
                    &ctx.command_id,
                    ctx.server_now,
                )
                .map_err(|r| Box::new(Decision::reply(ctx.outcome(Err(r)))))?;
                effects.audit.push(rulebook::written_event(&rule, ctx.now));
                effects.rules.push(rule);
            }
            Ok(approval_decided(
                ctx,
                i,
                &ApprovalDecision {
                    approved: *approved,
                    by: &a.by,
                    reason: reason.as_deref(),
                    rule: None,
                    edited: edited_arguments.as_ref(),
                    approvals,
                },
                effects,
            ))
        }
        (Spec::Connection { app, .. }, Answer::Connection { connected }) => {
            Ok(Some(CallResult::Ok {
                output: Value::String(if *connected {
                    format!("Connected: {app}")
                } else {
                    format!("Not connected: {app}")
                }),
            }))
        }
        (Spec::Question { questions }, other) => Ok(Some(CallResult::Ok {
            output: question_output(questions, other),
        })),
        _ => Err(Box::new(reject(
            ctx,
            ErrorCode::Internal,
            "answer does not match the interaction kind",
        ))),
    }
}

/// The lane's delivery of the answer: the one a worker already made (a crash came
/// between the lane's write and the interaction's), or a new one. `Err` is the
/// refusal when the lane does not take it.
fn deliver(
    ctx: &Ctx,
    i: &Interaction,
    session: &Session,
    lane: Option<&Lane>,
    a: &AnswerCommand,
    answer: &Answer,
) -> Result<(Delivery, Option<Lane>), Box<Decision>> {
    let lane = lane
        .cloned()
        .unwrap_or_else(|| Lane::new(&i.org, &i.session, &i.lane));
    let Ok(message_id) = MessageId::parse(i.id.as_str()) else {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::Internal,
            "question id is not a message id",
        )));
    };
    if let Some(d) = lane.delivery(&message_id) {
        return Ok((d.clone(), None));
    }
    // The lane lists the question until something takes it: a message on the lane
    // (which closes it; its follow-up close may not have run yet), or a host close
    // whose lane write landed before its interaction write. Either way the question
    // no longer waits, and the answer must not become a message on the lane.
    if !lane.lists(&i.id) {
        let why = if lane.superseded(&i.id) {
            "was closed by a message on its lane"
        } else {
            "is being closed"
        };
        return Err(Box::new(reject(
            ctx,
            ErrorCode::AlreadySettled,
            format!("question {} {why} and no longer waits for an answer", i.id),
        )));
    }
    let refuse = |why: String| {
        Box::new(reject(
            ctx,
            ErrorCode::AnswerNotDelivered,
            format!(
                "{why}: the answer was not delivered and question {} is pending again",
                i.id
            ),
        ))
    };
    if session.status != SessionStatus::Open {
        return Err(refuse(format!("session {} is closed", session.id)));
    }
    let busy = lane.running.is_some();
    if busy && lane.queue.len() >= session.lane_capacity as usize {
        return Err(refuse(format!("lane {} is full", i.lane)));
    }
    let mut next = lane;
    let admission = if busy {
        next.queue.push_back(message_id.clone());
        Admission::Queued
    } else {
        next.running = Some(message_id.clone());
        Admission::Admitted
    };
    next.open_questions.retain(|q| q.id != i.id);
    let d = Delivery {
        message_id,
        admission,
        closes: Vec::new(),
        answer: Some(DeliveredAnswer {
            answer: Some(answer.clone()),
            by: a.by.clone(),
            key: a.key.clone(),
        }),
    };
    next.remember(d.clone());
    Ok((d, Some(next)))
}

/// What a product answer replies: resolved when the lane admitted it, else
/// lane busy (queued as the person's next message).
fn answer_outcome(ctx: &Ctx, i: &Interaction, admission: Admission) -> crate::Outcome {
    match admission {
        Admission::Admitted => ctx.outcome(Ok(Accepted::Resolved)),
        Admission::Queued => ctx.outcome(Err(crate::error::Rejection::new(
            ErrorCode::LaneBusy,
            format!(
                "lane {} is busy: the answer is queued as the person's next message and its turn starts when the lane frees",
                i.lane
            ),
        ))),
    }
}

fn resolve_product(
    ctx: &Ctx,
    i: &Interaction,
    task: Task,
    session: &Session,
    lane: Option<&Lane>,
    a: &AnswerCommand,
    reading: Answer,
) -> Decision {
    let (delivery, lane_write) = match deliver(ctx, i, session, lane, a, &reading) {
        Ok(d) => d,
        Err(d) => return *d,
    };
    let Some(delivered) = delivery.answer.clone() else {
        return reject(
            ctx,
            ErrorCode::AlreadySettled,
            format!(
                "a message with id {} is already on the lane",
                delivery.message_id
            ),
        );
    };
    // A delivery whose answer the lane's budget dropped: the answer is the one being
    // decided again (the same command, redelivered).
    let answer = delivered.answer.clone().unwrap_or(reading);
    let outcome = answer_outcome(ctx, i, delivery.admission);
    let mut next = i.clone();
    next.state = State::Resolved;
    next.resolution = Some(Resolution {
        key: delivered.key.clone(),
        by: delivered.by.clone(),
        ..resolution(ctx, a, answer.clone(), &outcome)
    });
    let content = LaneContent::Answer {
        question_id: i.id.clone(),
        answer: answer.clone(),
    };
    let note = LaneNote {
        org: &i.org,
        session: &i.session,
        lane: &i.lane,
        message_id: &delivery.message_id,
        admission: delivery.admission,
        by: &delivered.by,
        content: &content,
    };
    let mut events = vec![resolved_event(ctx, i, &answer, &delivered)];
    events.extend(events::delivered(&note, ctx.now));
    events.push(events::task_status(i, &task, "resolve", ctx.now));
    let effects = Effects {
        events,
        lane_messages: vec![note.message(ctx.now)],
        ..Effects::default()
    };
    Writes {
        lane: lane_write,
        task: Some(task),
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, outcome)
}

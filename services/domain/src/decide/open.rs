//! A runtime opens an interaction: a held tool call (approval), an `ask_user` call
//! (question) or a `request_connection` call (connection).
//!
//! The opening is checked against the task record: a call id is held once per task
//! (holding it again under another interaction id is `NRY-0021`), and a task stays
//! in the context it was first opened in. Reopening the same interaction with the
//! same content is a no-op; with other content, a conflict.

use crate::digest::digest;
use crate::error::ErrorCode;
use crate::event::EventData;
use crate::ids::IdempotencyKey;
use crate::policy::{Rule, RuleEffect};
use crate::rulebook;
use crate::rules::{canonical_json, spec_from_request};
use crate::session::{Lane, MAX_OPEN_QUESTIONS, OpenQuestion, SessionStatus};
use crate::task::{MAX_TASK_CALLS, Task, Waiting};
use crate::transition::Effects;
use crate::{Accepted, OpenInteraction};
use crate::{Answer, CloseReason, Closure, Interaction, Resolution, State};

use super::approve::{ApprovalDecision, approval_decided};
use super::base::{
    Ctx, Decision, Snapshot, Writes, accept, blocks, live_session, reject, session_missing,
};
use super::{escalate, events, expire};

pub(super) fn open(ctx: &Ctx, snap: Snapshot<'_>, open: &OpenInteraction) -> Decision {
    let spec = match spec_from_request(&open.request) {
        Ok(s) => s,
        Err(r) => return Decision::reply(ctx.outcome(Err(r))),
    };
    if let Some(a) = &open.assignees
        && let Err(m) = a.check()
    {
        return reject(ctx, ErrorCode::InvalidRequest, m);
    }
    let open_digest = match serde_json::to_value(open) {
        Ok(v) => digest(&[&canonical_json(&v)]),
        Err(e) => return reject(ctx, ErrorCode::Internal, format!("encode: {e}")),
    };
    if let Some(existing) = snap.interaction {
        if existing.open_digest == open_digest {
            return accept(ctx, Accepted::Opened);
        }
        return reject(
            ctx,
            ErrorCode::CommandConflict,
            format!(
                "interaction {} is already open with other content",
                open.interaction_id
            ),
        );
    }
    let expires_at =
        match expire::requested(ctx, open.expires_at, open.expires_in, ctx.deadlines.default) {
            Ok(at) => at,
            Err(r) => return Decision::reply(ctx.outcome(Err(r))),
        };
    if let Err(r) = escalate::check_opening(ctx, open, expires_at) {
        return Decision::reply(ctx.outcome(Err(r)));
    }
    let Some(session) = live_session(snap.session) else {
        return session_missing(ctx, &open.session);
    };
    if session.status == SessionStatus::Closed {
        return reject(
            ctx,
            ErrorCode::CommandConflict,
            format!("session {} is closed", session.id),
        );
    }
    let task = match task_for(ctx, snap.task, open) {
        Ok(t) => t,
        Err(d) => return *d,
    };
    let interaction = Interaction {
        id: open.interaction_id.clone(),
        org: ctx.org.clone(),
        session: open.session.clone(),
        mode: session.mode,
        lane: open.lane.clone(),
        task_id: open.task_id.clone(),
        context_id: open.context_id.clone(),
        call_id: open.call_id.clone(),
        agent: open.agent.clone(),
        prompt: spec.prompt(),
        spec,
        assignees: open.assignees.clone(),
        given_approvals: Vec::new(),
        withdrawn_approvals: Vec::new(),
        escalation: open.escalation.clone(),
        escalated_at: None,
        state: State::Pending,
        opened_at: ctx.now,
        open_digest,
        expires_at,
        on_expiry: open.on_expiry,
        resolution: None,
        closure: None,
        result: None,
        outbox: Default::default(),
    };
    if let Some(rule) = rulebook::pick(snap.rules, &interaction, ctx.server_now) {
        return by_rule(ctx, interaction, task, rule);
    }
    let (lane, superseded) = if blocks(&interaction) {
        (None, false)
    } else {
        match list_question(ctx, snap.lane, open) {
            Ok(l) => l,
            Err(d) => return *d,
        }
    };
    seal(ctx, interaction, task, lane, superseded)
}

/// The task record with the new call listed, or the refusal.
fn task_for(ctx: &Ctx, task: Option<&Task>, open: &OpenInteraction) -> Result<Task, Box<Decision>> {
    let mut task = task
        .cloned()
        .unwrap_or_else(|| Task::new(&ctx.org, &open.task_id, &open.context_id, ctx.now));
    if task.context_id != open.context_id {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::CommandConflict,
            format!(
                "task {} belongs to context {}, not {}",
                task.id, task.context_id, open.context_id
            ),
        )));
    }
    match task.holder_of(&open.call_id) {
        Some(holder) if holder != &open.interaction_id => {
            return Err(Box::new(reject(
                ctx,
                ErrorCode::CommandConflict,
                format!(
                    "call {} of task {} is already held as {holder}: a call is held, released \
                     and finished once",
                    open.call_id, open.task_id
                ),
            )));
        }
        Some(_) => {}
        None if task.calls.len() >= MAX_TASK_CALLS => {
            return Err(Box::new(reject(
                ctx,
                ErrorCode::CommandConflict,
                format!(
                    "task {} has held {MAX_TASK_CALLS} calls, the most one task may hold",
                    open.task_id
                ),
            )));
        }
        None => {
            task.calls.insert(
                open.call_id.as_str().to_owned(),
                open.interaction_id.clone(),
            );
        }
    }
    Ok(task)
}

/// A product question is listed on its lane until answered or superseded. Returns
/// the lane to write (if it changes) and whether a message on the lane already
/// superseded the question (its opening arrived after that message).
fn list_question(
    ctx: &Ctx,
    lane: Option<&Lane>,
    open: &OpenInteraction,
) -> Result<(Option<Lane>, bool), Box<Decision>> {
    let mut lane = lane
        .cloned()
        .unwrap_or_else(|| Lane::new(&ctx.org, &open.session, &open.lane));
    if lane.superseded(&open.interaction_id) {
        return Ok((None, true));
    }
    if lane.lists(&open.interaction_id) {
        return Ok((None, false));
    }
    if lane.open_questions.len() >= MAX_OPEN_QUESTIONS {
        return Err(Box::new(reject(
            ctx,
            ErrorCode::CommandConflict,
            format!(
                "lane {} already has {MAX_OPEN_QUESTIONS} open questions, the most one lane may hold",
                open.lane
            ),
        )));
    }
    lane.open_questions.push(OpenQuestion {
        id: open.interaction_id.clone(),
        task_id: open.task_id.clone(),
    });
    Ok((Some(lane), false))
}

fn seal(
    ctx: &Ctx,
    mut interaction: Interaction,
    mut task: Task,
    lane: Option<Lane>,
    superseded: bool,
) -> Decision {
    let mut events = vec![events::opened(&interaction, ctx.now)];
    let before = task.status();
    if superseded {
        // A crashed first attempt of this opening may have listed it already.
        task.remove_pending(&interaction.id, &ctx.command_id);
        interaction.state = State::Closed;
        interaction.closure = Some(Closure {
            reason: CloseReason::Superseded,
            at: ctx.now,
            by_message: None,
        });
        events.push(events::on_interaction(
            &interaction,
            "close",
            ctx.now,
            EventData::InteractionClosed {
                interaction_id: interaction.id.clone(),
                reason: CloseReason::Superseded,
            },
        ));
    } else {
        task.add_pending(Waiting::of(&interaction, &ctx.command_id));
    }
    if task.status() != before {
        task.updated_at = ctx.now;
    }
    events.push(events::task_status(&interaction, &task, "open", ctx.now));
    let schedules = if superseded {
        Vec::new()
    } else {
        expire::schedules(ctx, &interaction)
    };
    let effects = Effects {
        events,
        schedules,
        ..Effects::default()
    };
    Writes {
        lane,
        task: Some(task),
        interaction: Some(interaction),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Opened)))
}

/// A live remembered rule matches the held call: it is decided at once, with no
/// person and nothing pending. The interaction is recorded resolved (allow: the call
/// is released, `approvedBy` naming the rule and its author) or finished (deny:
/// `tool.denied`), with the same events a person's decision has, each naming the rule.
fn by_rule(ctx: &Ctx, mut i: Interaction, mut task: Task, rule: &Rule) -> Decision {
    let approved = rule.effect == RuleEffect::Allow;
    let by = rule.approved_by();
    let Ok(key) = IdempotencyKey::parse(rule.id.as_str()) else {
        return reject(ctx, ErrorCode::Internal, "rule id is not a key");
    };
    // A crashed first attempt of this opening may have listed it as pending.
    task.remove_pending(&i.id, &ctx.command_id);
    task.updated_at = ctx.now;
    let outcome = ctx.outcome(Ok(Accepted::Opened));
    let answer = Answer::Approval {
        approved,
        reason: None,
        edited_arguments: None,
    };
    let mut effects = Effects {
        events: vec![events::resolved(
            &i,
            &answer,
            &by,
            &key,
            crate::Resolver::Rule,
            Some(&rule.id),
            ctx.now,
        )],
        ..Effects::default()
    };
    let decision = ApprovalDecision {
        approved,
        by: &by,
        reason: None,
        rule: Some(rule),
        edited: None,
        approvals: Vec::new(),
    };
    match approval_decided(ctx, &i, &decision, &mut effects) {
        Some(r) => {
            i.state = State::Finished;
            i.result = Some(r.clone());
            effects.events.push(events::finished(&i, r, ctx.now));
        }
        None => i.state = State::Resolved,
    }
    i.resolution = Some(Resolution {
        key,
        command_id: ctx.command_id.clone(),
        resolved_by: crate::Resolver::Rule,
        by,
        at: ctx.now,
        answer,
        outcome: outcome.clone(),
    });
    effects
        .events
        .push(events::task_status(&i, &task, "resolve", ctx.now));
    Writes {
        task: Some(task),
        interaction: Some(i),
        ..Writes::default()
    }
    .commit(ctx, effects, outcome)
}

//! The runtime changes who may answer a pending interaction (README "Assignees"):
//! the interaction record takes the new assignees (and drops the counted
//! approvals of people they no longer admit), and the change is an
//! `interaction-reassigned` event and an `assignees-changed` audit record, both
//! named after the change's id, so a retried change is published once.

use crate::error::ErrorCode;
use crate::event::EventData;
use crate::ids::{InteractionId, MessageId};
use crate::transition::Effects;
use crate::{Accepted, Assignees, State};

use super::base::{Ctx, Decision, Snapshot, Writes, accept, reject};
use super::{escalate, events};

pub(super) fn reassign(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    change: &MessageId,
    assignees: Option<&Assignees>,
) -> Decision {
    let Some(i) = snap.interaction else {
        return reject(ctx, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    if let Some(a) = assignees
        && let Err(m) = a.check()
    {
        return reject(ctx, ErrorCode::InvalidRequest, m);
    }
    // An escalation still to come must fit beside the new assignees
    // (`escalate.rs`, "Bounds").
    if let (Some(a), Some(e), None) = (assignees, &i.escalation, i.escalated_at)
        && let Err(m) = escalate::fits(a, e)
    {
        return reject(ctx, ErrorCode::InvalidRequest, m);
    }
    if i.state != State::Pending {
        return reject(
            ctx,
            ErrorCode::CommandConflict,
            format!("interaction {id} no longer waits; its assignees cannot change"),
        );
    }
    if i.assignees.as_ref() == assignees {
        return accept(ctx, Accepted::Unchanged);
    }
    let mut next = i.clone();
    next.assignees = assignees.cloned();
    // An approval counts only while its giver may still answer (README
    // "Two-person approvals"): the new assignees must admit the person, or one of
    // the assigned groups they approved as a member of.
    let (kept, withdrawn): (Vec<_>, Vec<_>) = std::mem::take(&mut next.given_approvals)
        .into_iter()
        .partition(|g| next.admits(&g.by, &g.via));
    next.given_approvals = kept;
    let withdrawn_by: Vec<crate::PersonId> = withdrawn.iter().map(|g| g.by.clone()).collect();
    next.withdrawn_approvals.extend(withdrawn);
    let excess = next
        .withdrawn_approvals
        .len()
        .saturating_sub(crate::WITHDRAWN_KEEP);
    next.withdrawn_approvals.drain(..excess);
    let withdrawn = withdrawn_by;
    let transition = format!("reassign\u{0}{change}");
    let event = |data| events::on_interaction(i, &transition, ctx.now, data);
    // The task's status message names the assignees (A2A metadata): a new status.
    let task = snap
        .task
        .cloned()
        .and_then(|mut t| t.refresh(&next).then_some(t));
    let status = task
        .as_ref()
        .map(|t| events::task_status(i, t, &transition, ctx.now));
    let effects = Effects {
        events: std::iter::once(event(EventData::InteractionReassigned {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            assignees: next.assignees.clone(),
            previous: i.assignees.clone(),
            withdrawn_approvals: withdrawn.clone(),
        }))
        .chain(status)
        .collect(),
        audit: vec![event(EventData::AssigneesChanged {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            assignees: next.assignees.clone(),
            previous: i.assignees.clone(),
            withdrawn_approvals: withdrawn,
        })],
        ..Effects::default()
    };
    Writes {
        task,
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Reassigned)))
}

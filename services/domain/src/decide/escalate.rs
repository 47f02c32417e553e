//! Escalation (README "Escalation"): an opening may name an `escalation`, people
//! and groups who are added to the assignees when the deadline's warning stage
//! comes and nobody has answered yet.
//!
//! - **When.** At the `warn` stage of the interaction's current deadline (the
//!   server's `[deadlines] warning_secs` lead before it), in the same decision as
//!   the `interaction-expiring` warning. The warning stage is a JetStream message
//!   schedule like the expiry, so the escalation survives a worker crash or a
//!   server restart, and the stage's command id (interaction, deadline, stage)
//!   makes a second firing a replay.
//! - **Seen.** The task's pending entry takes the new assignees, so the A2A
//!   status message shows them, and a new `task-status` goes out.
//! - **Once.** The record keeps `escalatedAt`; a later warning stage (the runtime
//!   moved the deadline) warns again but does not escalate again. The event
//!   (`interaction-escalated`) and the audit record (`escalated`) are named after
//!   the transition `escalate\0<deadline>`, so a redelivery publishes nothing new.
//! - **What it adds.** The union: the assignees as they are then (the runtime may
//!   have reassigned since the opening), then the escalation's names they lack, each
//!   list in order. An interaction open to the whole organisation stays open (an
//!   escalation never narrows who may answer); the event still goes out, to notify.
//! - **Bounds.** The opening refuses an escalation that, with the assignees, names
//!   more than [`MAX_ASSIGNEES`] people or groups, and a reassignment refuses new
//!   assignees that would (both `NRY-0001`), so the union fits. A record that
//!   still would not (written before these checks) keeps the first
//!   [`MAX_ASSIGNEES`] of each list: the assignees it had come first.

use time::OffsetDateTime;

use crate::error::{ErrorCode, Rejection};
use crate::event::{Event, EventData};
use crate::task::Task;
use crate::{Assignees, Interaction, MAX_ASSIGNEES, OpenInteraction};

use super::base::Ctx;
use super::events;

/// Checks an opening's escalation against its deadline `at` (as decided) and the
/// configured warning lead: `Ok` when it names none.
///
/// # Errors
/// `NRY-0001` ([`ErrorCode::InvalidRequest`]) when the escalation is out of
/// bounds (as [`Assignees::check`]), names with the assignees more than
/// [`MAX_ASSIGNEES`] people or groups, or would never fire: no deadline, no
/// warning lead configured, or a deadline closer than that lead.
pub(super) fn check_opening(
    ctx: &Ctx,
    open: &OpenInteraction,
    at: Option<OffsetDateTime>,
) -> Result<(), Rejection> {
    let Some(e) = &open.escalation else {
        return Ok(());
    };
    let invalid = |m: String| Rejection::new(ErrorCode::InvalidRequest, m);
    if e.people.is_empty() && e.groups.is_empty() {
        return Err(invalid(
            "escalation names nobody: name at least one person or group, or leave \
             escalation out"
                .into(),
        ));
    }
    if let Err(m) = e.check() {
        return Err(invalid(m.replacen("assignees", "escalation", 1)));
    }
    if let Some(a) = &open.assignees {
        fits(a, e).map_err(invalid)?;
    }
    let Some(at) = at else {
        return Err(invalid(
            "escalation needs a deadline: give expiresAt or expiresIn (the escalation \
             happens at the deadline's warning stage)"
                .into(),
        ));
    };
    let Some(lead) = ctx.deadlines.warning else {
        return Err(invalid(
            "escalation happens at the deadline's warning stage, and this server has no \
             warning lead configured ([deadlines] warning_secs): open it without escalation"
                .into(),
        ));
    };
    if at - lead <= ctx.server_now {
        return Err(invalid(format!(
            "the deadline {} is closer than the warning lead of {} seconds, so the \
             warning stage that escalates is already past: give a later deadline or no \
             escalation",
            crate::timestamp::format(at),
            lead.as_secs()
        )));
    }
    Ok(())
}

/// Checks that `assignees` with `escalation` name at most [`MAX_ASSIGNEES`]
/// people and [`MAX_ASSIGNEES`] groups.
///
/// # Errors
/// A message for the runtime (the caller answers `NRY-0001`).
pub(super) fn fits(assignees: &Assignees, escalation: &Assignees) -> Result<(), String> {
    let all = assignees.union(escalation);
    for (what, len) in [("people", all.people.len()), ("groups", all.groups.len())] {
        if len > MAX_ASSIGNEES {
            return Err(format!(
                "assignees and escalation together name {len} {what}; at most \
                 {MAX_ASSIGNEES} are allowed"
            ));
        }
    }
    Ok(())
}

/// What escalating `i` at the warning stage of its deadline `at` changes: the
/// records to write (the interaction; its task, whose status message names the
/// assignees) and the effects (`interaction-escalated` and a new `task-status`,
/// the audit record). `None` when it names no escalation or was escalated already.
pub(super) fn due(
    ctx: &Ctx,
    task: Option<&Task>,
    i: &Interaction,
    at: OffsetDateTime,
) -> Option<Escalated> {
    let escalation = i.escalation.as_ref()?;
    if i.escalated_at.is_some() {
        return None;
    }
    let assignees = i.assignees.as_ref().map(|a| {
        let mut all = a.union(escalation);
        all.people.truncate(MAX_ASSIGNEES);
        all.groups.truncate(MAX_ASSIGNEES);
        all
    });
    let mut next = i.clone();
    next.assignees = assignees.clone();
    next.escalated_at = Some(ctx.now);
    let transition = format!("escalate\u{0}{}", crate::timestamp::format(at));
    let event = |data| events::on_interaction(i, &transition, ctx.now, data);
    let task = task
        .cloned()
        .and_then(|mut t| t.refresh(&next).then_some(t));
    let status = task
        .as_ref()
        .map(|t| events::task_status(i, t, &transition, ctx.now));
    Some(Escalated {
        events: std::iter::once(event(EventData::InteractionEscalated {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            escalation: escalation.clone(),
            assignees: assignees.clone(),
            previous: i.assignees.clone(),
            expires_at: at,
        }))
        .chain(status)
        .collect(),
        task,
        audit: event(EventData::Escalated {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            escalation: escalation.clone(),
            assignees,
            previous: i.assignees.clone(),
            expires_at: at,
        }),
        next,
    })
}

/// An escalation as decided: the records after it, and its effects.
pub(super) struct Escalated {
    /// The interaction with the escalation applied.
    pub next: Interaction,
    /// Its task with the pending entry refreshed, when it has one.
    pub task: Option<Task>,
    /// `interaction-escalated`, then the task's new `task-status` (when it has a
    /// task that lists it).
    pub events: Vec<Event>,
    /// The `escalated` audit record.
    pub audit: Event,
}

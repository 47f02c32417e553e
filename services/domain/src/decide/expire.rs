//! Deadlines: an interaction may wait until `expiresAt`; the server then runs an
//! `expire` command (a JetStream message schedule stored when the deadline was set),
//! and the same command with stage `warn` the configured lead before it. The
//! `warn` stage also applies an escalation the opening named (`escalate.rs`).
//!
//! **What expiry decides**, unless the opening asked for `onExpiry: close`:
//!
//! | kind | session | the interaction | the blocked call finishes as |
//! |---|---|---|---|
//! | approval | any | resolved by `expiry`: `approved: false`, reason `expired`; audited | `tool.denied`, message starting `expired` |
//! | question | blocking | closed, reason `expired` | `{"expired": true, "expiresAt", "answers": [], "message"}` |
//! | question | product | closed, reason `expired`; taken off its lane | (none; no lane message) |
//! | connection | any | resolved by `expiry`: `connected: false` | `Not connected: <app>` |
//!
//! An approval never defaults to approved. With `onExpiry: close` every kind closes
//! as `expired` (a blocked call then finishes as `interaction.closed`).
//!
//! **Exactly once.** An `expire` names the deadline it was scheduled for: if the
//! interaction no longer waits, or its deadline moved since, it does nothing. Its
//! command id derives from (interaction, deadline, stage), so a schedule that fires
//! twice is decided once; an answer and the expiry are serialised by the task's
//! partition and the record's revision, so exactly one of them settles it and the
//! other gets the usual refusal (`NRY-0009`, saying it expired).

use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use crate::error::{ErrorCode, Rejection};
use crate::event::EventData;
use crate::ids::{IdempotencyKey, InteractionId, PersonId};
use crate::transition::{Effects, Scheduled};
use crate::{
    Accepted, Answer, CallResult, CloseReason, Command, CommandEnvelope, DeadlineStage,
    EXPIRY_ACTOR, Interaction, MAX_EXPIRES_IN_SECS, OnExpiry, Resolution, Resolver, Spec, State,
};

use super::answer::leave_pending;
use super::base::{Ctx, Decision, Snapshot, Writes, accept, blocks, reject};
use super::events::Verdict;
use super::{close, escalate, events};

/// The deadline an opening or a change asks for: `Ok(None)` when it asks for none.
/// `default` applies when neither field is given.
pub(super) fn requested(
    ctx: &Ctx,
    expires_at: Option<OffsetDateTime>,
    expires_in: Option<u64>,
    default: Option<Duration>,
) -> Result<Option<OffsetDateTime>, Rejection> {
    let invalid = |m: String| Rejection::new(ErrorCode::DeadlineInvalid, m);
    let at = match (expires_at, expires_in) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "give either expiresAt or expiresIn, not both".into(),
            ));
        }
        (Some(at), None) => at,
        (None, Some(secs)) if secs == 0 || secs > MAX_EXPIRES_IN_SECS => {
            return Err(invalid(format!(
                "expiresIn must be 1 to {MAX_EXPIRES_IN_SECS} seconds (got {secs})"
            )));
        }
        (None, Some(secs)) => ctx.server_now + Duration::from_secs(secs),
        (None, None) => {
            return Ok(default
                .filter(|_| ctx.deadlines.supported)
                .map(|d| ctx.server_now + d));
        }
    };
    if !ctx.deadlines.supported {
        return Err(Rejection::new(
            ErrorCode::DeadlineUnsupported,
            "this NATS server has no JetStream message schedules (nats-server 2.12 or later \
             keeps deadlines): open the interaction without expiresAt or expiresIn",
        ));
    }
    if at <= ctx.server_now {
        return Err(invalid(format!(
            "the deadline {} is already past",
            crate::timestamp::format(at)
        )));
    }
    let limit = Duration::from_secs(MAX_EXPIRES_IN_SECS).min(
        ctx.deadlines
            .max
            .unwrap_or(Duration::from_secs(MAX_EXPIRES_IN_SECS)),
    );
    if at > ctx.server_now + limit {
        return Err(invalid(format!(
            "the deadline {} is further than the configured maximum of {} seconds",
            crate::timestamp::format(at),
            limit.as_secs()
        )));
    }
    Ok(Some(at))
}

/// The schedules that keep `i`'s deadline (none when it has none): the expiry at
/// the deadline, and the warning the configured lead before it when that is still
/// ahead.
pub(super) fn schedules(ctx: &Ctx, i: &Interaction) -> Vec<Scheduled> {
    let Some(at) = i.expires_at else {
        return Vec::new();
    };
    let tick = |stage| CommandEnvelope {
        org: i.org.clone(),
        command: Command::Expire {
            interaction_id: i.id.clone(),
            task_id: i.task_id.clone(),
            expires_at: at,
            stage,
        },
    };
    let mut out = Vec::new();
    if let Some(lead) = ctx.deadlines.warning {
        let warn = at - lead;
        if warn > ctx.server_now {
            out.push(Scheduled {
                at: warn,
                command: tick(DeadlineStage::Warn),
                set_by: ctx.command_id.clone(),
            });
        }
    }
    out.push(Scheduled {
        at,
        command: tick(DeadlineStage::Expire),
        set_by: ctx.command_id.clone(),
    });
    out
}

/// A runtime sets, moves or clears a pending interaction's deadline.
pub(super) fn set(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    expires_at: Option<OffsetDateTime>,
    expires_in: Option<u64>,
) -> Decision {
    let Some(i) = snap.interaction else {
        return reject(ctx, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    if i.state != State::Pending {
        return reject(
            ctx,
            ErrorCode::DeadlineInvalid,
            format!("interaction {id} no longer waits; its deadline cannot change"),
        );
    }
    let at = match requested(ctx, expires_at, expires_in, None) {
        Ok(at) => at,
        Err(r) => return Decision::reply(ctx.outcome(Err(r))),
    };
    if at == i.expires_at {
        return accept(ctx, Accepted::Rescheduled);
    }
    let mut next = i.clone();
    next.expires_at = at;
    let mut task = snap.task.cloned();
    let mut events = Vec::new();
    if let Some(t) = task.as_mut() {
        for w in t.pending.iter_mut().filter(|w| w.interaction_id == i.id) {
            w.expires_at = at;
        }
        // A new deadline is a new status: its event id names the deadline.
        let stamp = at.map(crate::timestamp::format).unwrap_or_default();
        events.push(events::task_status(
            i,
            t,
            &format!("deadline\u{0}{stamp}"),
            ctx.now,
        ));
    }
    let effects = Effects {
        events,
        schedules: schedules(ctx, &next),
        ..Effects::default()
    };
    Writes {
        task,
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Rescheduled)))
}

/// The server's `expire` (stage `warn` or `expire`) for the deadline `at` of interaction `id`.
pub(super) fn tick(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    id: &InteractionId,
    at: OffsetDateTime,
    stage: DeadlineStage,
) -> Decision {
    let Some(i) = snap.interaction else {
        return reject(ctx, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    // Answered, closed, or the deadline moved since this schedule was made: nothing.
    if i.state != State::Pending || i.expires_at != Some(at) {
        return accept(ctx, Accepted::Unchanged);
    }
    match stage {
        DeadlineStage::Warn => warn(ctx, snap, i, at),
        DeadlineStage::Expire => expire(ctx, snap, i, at),
    }
}

fn warn(ctx: &Ctx, snap: Snapshot<'_>, i: &Interaction, at: OffsetDateTime) -> Decision {
    let event = events::on_interaction(
        i,
        &format!("expiring\u{0}{}", crate::timestamp::format(at)),
        ctx.now,
        EventData::InteractionExpiring {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            expires_at: at,
        },
    );
    let mut effects = Effects {
        events: vec![event],
        ..Effects::default()
    };
    // The interaction is written unchanged but for the transition in its outbox, so
    // the warning is published exactly like any other effect; an escalation it
    // names is applied in the same decision (`escalate.rs`).
    let (next, task) = match escalate::due(ctx, snap.task, i, at) {
        Some(e) => {
            effects.events.extend(e.events);
            effects.audit.push(e.audit);
            (e.next, e.task)
        }
        None => (i.clone(), None),
    };
    Writes {
        task,
        interaction: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Unchanged)))
}

fn expire(ctx: &Ctx, snap: Snapshot<'_>, i: &Interaction, at: OffsetDateTime) -> Decision {
    let stamp = crate::timestamp::format(at);
    if i.on_expiry == OnExpiry::Close {
        return close::close_with(ctx, snap, &i.id, CloseReason::Expired, None, None);
    }
    let (answer, result) = match &i.spec {
        Spec::Question { .. } => {
            // Closed; a blocked `ask_user` gets a result a model can read.
            let result = blocks(i).then(|| CallResult::Ok {
                output: json!({
                    "expired": true,
                    "expiresAt": stamp,
                    "answers": [],
                    "message": format!(
                        "The person did not answer before the deadline ({stamp}); the question expired."
                    ),
                }),
            });
            return close::close_with(ctx, snap, &i.id, CloseReason::Expired, None, result);
        }
        Spec::Approval { .. } => (
            Answer::Approval {
                approved: false,
                reason: Some("expired".into()),
                edited_arguments: None,
            },
            CallResult::Error {
                code: "tool.denied".into(),
                message: if i.given_approvals.is_empty() {
                    format!(
                        "expired: nobody answered the approval before its deadline ({stamp}), so the call was denied"
                    )
                } else {
                    format!(
                        "expired: {} of the {} approvals it needs were given before its deadline ({stamp}), so the call was denied",
                        i.given_approvals.len(),
                        i.approvals_required()
                    )
                },
            },
        ),
        Spec::Connection { app, .. } => (
            Answer::Connection { connected: false },
            CallResult::Ok {
                output: serde_json::Value::String(format!("Not connected: {app}")),
            },
        ),
    };
    resolve_by_expiry(ctx, snap, i, answer, result)
}

fn resolve_by_expiry(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    i: &Interaction,
    answer: Answer,
    result: CallResult,
) -> Decision {
    let (Ok(by), Ok(key)) = (
        PersonId::parse(EXPIRY_ACTOR),
        IdempotencyKey::parse("expired"),
    ) else {
        return reject(ctx, ErrorCode::Internal, "expiry actor is not a valid id");
    };
    let outcome = ctx.outcome(Ok(Accepted::Expired));
    let task = leave_pending(ctx, snap.task, i);
    let mut next = i.clone();
    next.state = State::Finished;
    next.result = Some(result.clone());
    next.resolution = Some(Resolution {
        key: key.clone(),
        command_id: ctx.command_id.clone(),
        by: by.clone(),
        at: ctx.now,
        answer: answer.clone(),
        resolved_by: Resolver::Expiry,
        outcome: outcome.clone(),
    });
    let mut effects = Effects::default();
    effects.events.push(events::resolved(
        i,
        &answer,
        &by,
        &key,
        Resolver::Expiry,
        None,
        ctx.now,
    ));
    if let Answer::Approval { reason, .. } = &answer {
        effects.audit.extend(events::approval_decided(
            i,
            Verdict::expired(reason.clone(), events::approvers(i)),
            ctx.now,
        ));
    }
    effects.events.push(events::finished(i, result, ctx.now));
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

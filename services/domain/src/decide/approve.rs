//! Approvals: how an approval is counted toward a hold that needs several
//! distinct people (README "Two-person approvals"), and what any approval's
//! decision (a person's, a remembered rule's) records and releases. `answer`
//! uses both; `open` uses the decision for a remembered rule.

use serde_json::Value;

use crate::error::ErrorCode;
use crate::event::{AuditOutcome, Decider, EventData};
use crate::transition::Effects;
use crate::{Accepted, Answer, AnswerCommand, CallResult, GivenApproval, Interaction, Spec};

use super::base::{Ctx, Decision, Snapshot, Writes, reject};
use super::events::{self, Verdict};

/// An approval of a hold that needs several people (README "Two-person
/// approvals"): `None` when the answer is decided as any other (one person
/// decides; a denial, which decides at once; or the approval that completes the
/// count, which `answer.rs` counts as it releases the call). Else the
/// refusal of a person already counted (`NRY-0038`), or the approval counted with
/// the call still waiting: the interaction records it, the task's views show it,
/// and it is an `approval-counted` event and an `approval-recorded` audit record.
pub(super) fn count_approval(
    ctx: &Ctx,
    snap: Snapshot<'_>,
    i: &Interaction,
    a: &AnswerCommand,
    reading: &Answer,
) -> Option<Decision> {
    let required = i.approvals_required();
    let Answer::Approval {
        approved: true,
        reason,
        ..
    } = reading
    else {
        return None;
    };
    if required < 2 {
        return None;
    }
    if i.approved_by(&a.by) {
        return Some(reject(
            ctx,
            ErrorCode::AlreadyApproved,
            format!(
                "your approval of interaction {} is already counted ({} of {required}): it \
                 waits for approvals from other people; nothing changed",
                i.id,
                i.given_approvals.len()
            ),
        ));
    }
    let given = u8::try_from(i.given_approvals.len() + 1).unwrap_or(u8::MAX);
    if given >= required {
        return None;
    }
    let outcome = ctx.outcome(Ok(Accepted::ApprovalCounted { given, required }));
    let mut next = i.clone();
    let mut effects = Effects::default();
    count(ctx, &mut next, a, reason.as_deref(), &outcome, &mut effects);
    let mut task = snap.task.cloned();
    if let Some(t) = task.as_mut()
        && t.refresh(&next)
    {
        t.updated_at = ctx.now;
        let transition = format!("approval\u{0}{}", a.by);
        effects
            .events
            .push(events::task_status(&next, t, &transition, ctx.now));
    }
    Some(
        Writes {
            task,
            interaction: Some(next),
            ..Writes::default()
        }
        .commit(ctx, effects, outcome),
    )
}

/// Counts `a`'s approval on `next` (the record being written), with its
/// `approval-counted` event and `approval-recorded` audit record.
pub(super) fn count(
    ctx: &Ctx,
    next: &mut Interaction,
    a: &AnswerCommand,
    reason: Option<&str>,
    outcome: &crate::Outcome,
    effects: &mut Effects,
) {
    let g = GivenApproval {
        by: a.by.clone(),
        key: a.key.clone(),
        command_id: ctx.command_id.clone(),
        at: ctx.now,
        reason: reason.map(str::to_owned),
        via: next.assignees.as_ref().map_or_else(Vec::new, |named| {
            a.groups
                .iter()
                .filter(|g| named.groups.contains(g))
                .cloned()
                .collect()
        }),
        outcome: outcome.clone(),
    };
    let given = u8::try_from(next.given_approvals.len() + 1).unwrap_or(u8::MAX);
    if let Some((event, audit)) = events::approval_counted(next, &g, given, ctx.now) {
        effects.events.push(event);
        effects.audit.push(audit);
    }
    next.given_approvals.push(g);
}

/// An approval's decision, by a person or by a remembered rule.
pub(super) struct ApprovalDecision<'a> {
    /// Released (`true`) or denied.
    pub approved: bool,
    /// `approvedBy`: the person, or the rule's [`Rule::approved_by`](crate::Rule::approved_by).
    pub by: &'a crate::PersonId,
    /// The person's reason.
    pub reason: Option<&'a str>,
    /// The remembered rule that decided, when one did.
    pub rule: Option<&'a crate::Rule>,
    /// The person's edit of the arguments (released instead of the held ones).
    pub edited: Option<&'a Value>,
    /// For a hold that needs several approvals: whose had counted (all of them for
    /// a release, the partial ones for a denial).
    pub approvals: Vec<crate::PersonId>,
}

/// The audit record and the release (or the denial's result) of an approval's
/// decision: `None` when the call is released (its result comes later), else what
/// it finishes with (`tool.denied`).
pub(super) fn approval_decided(
    ctx: &Ctx,
    i: &Interaction,
    d: &ApprovalDecision<'_>,
    effects: &mut Effects,
) -> Option<CallResult> {
    let Spec::Approval {
        server,
        tool,
        arguments,
        arguments_digest,
        ..
    } = &i.spec
    else {
        return None;
    };
    let reason = match d.rule {
        Some(r) => Some(format!(
            "remembered rule {} ({} {}, scope {}) by {}",
            r.id,
            match r.effect {
                crate::RuleEffect::Allow => "allow",
                crate::RuleEffect::Deny => "deny",
            },
            tool,
            r.scope.as_str(),
            r.created_by
        )),
        None => d.reason.map(str::to_owned),
    };
    effects.audit.extend(events::approval_decided(
        i,
        Verdict {
            approved: d.approved,
            outcome: if d.approved {
                AuditOutcome::Allowed
            } else {
                AuditOutcome::Denied
            },
            decided_by: if d.rule.is_some() {
                Decider::Rule
            } else {
                Decider::Person
            },
            approved_by: Some(d.by),
            rule: d.rule.map(|r| &r.id),
            reason: reason.clone(),
            edited: d.edited,
            approvals: d.approvals.clone(),
        },
        ctx.now,
    ));
    if !d.approved {
        return Some(CallResult::Error {
            code: "tool.denied".into(),
            message: reason.unwrap_or_else(|| "The person denied this call.".into()),
        });
    }
    effects.events.push(events::on_interaction(
        i,
        "resolve",
        ctx.now,
        EventData::ToolCallReleased {
            effect_id: i.id.clone(),
            call_id: i.call_id.clone(),
            server: server.clone(),
            tool: tool.clone(),
            arguments: d.edited.unwrap_or(arguments).clone(),
            arguments_digest: arguments_digest.clone(),
            edited: d.edited.is_some(),
            edited_arguments_digest: d.edited.map(crate::digest::arguments_digest),
            approved_by: d.by.clone(),
            rule: d.rule.map(|r| r.id.clone()),
            approvals: d.approvals.clone(),
        },
    ));
    None
}

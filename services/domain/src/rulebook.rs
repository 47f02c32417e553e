//! Remembered approval rules at work: a person who approves or denies a held call may ask
//! Holdpoint to remember the decision ([`Remember`]); the answer then writes a
//! [`Rule`], and later holds that a live rule matches are decided by the rule at
//! once, without a person.
//!
//! The rules live in the KV bucket `HP_RULES` under `<org>.<ruleId>`; the worker
//! watches it and passes the organisation's rules into
//! [`decide`](crate::decide::decide) as data ([`Snapshot::rules`]), so this module is
//! pure: matching ([`pick`]) is a function of the rules, the held call and the clock.
//!
//! **Which rule decides.** A rule matches a held call when it is live (not revoked,
//! not expired at the server's time, as the deciding worker estimates it), belongs
//! to the call's organisation, names the call's `server` and `tool`, its scope
//! covers the call (a `session` rule the same session, an `agent` rule the same
//! agent, an `organisation` rule any call of the organisation) and, when it is
//! narrowed to an arguments digest, the call's arguments have that digest. Of the
//! matching rules the most specific scope wins (`session`, then `agent`, then
//! `organisation`); at the same scope a deny beats an allow; among equals the oldest
//! rule (then the smallest id) decides, so every worker picks the same one.
//!
//! [`Snapshot::rules`]: crate::decide::Snapshot::rules

use time::OffsetDateTime;

use crate::error::{ErrorCode, Rejection};
use crate::event::{Event, EventData};
use crate::ids::{CommandId, PersonId};
use crate::interaction::Interaction;
use crate::policy::{Narrowing, Remember, Revocation, Rule, RuleEffect, RuleScope, rule_id};
use crate::vocab::Spec;

/// True when `rule` is live and decides the approval `i` at `now`.
pub fn matches(rule: &Rule, i: &Interaction, now: OffsetDateTime) -> bool {
    let Spec::Approval {
        server,
        tool,
        arguments_digest,
        ..
    } = &i.spec
    else {
        return false;
    };
    let scoped = match rule.scope {
        RuleScope::Session => rule.session.as_ref() == Some(&i.session),
        RuleScope::Agent => rule.agent.is_some() && rule.agent == i.agent,
        RuleScope::Organisation => true,
    };
    rule.live(now)
        && rule.org == i.org
        && &rule.server == server
        && &rule.tool == tool
        && scoped
        && rule
            .arguments_digest
            .as_ref()
            .is_none_or(|d| d == arguments_digest)
}

/// The rule that decides approval `i` at `now`, if any (see the module's order).
///
/// A hold that needs several approvals (README "Two-person approvals") is never
/// released by a remembered allow rule, which is one person's past decision; a
/// deny rule still denies it, as one person's denial would.
pub fn pick<'a>(rules: &'a [Rule], i: &Interaction, now: OffsetDateTime) -> Option<&'a Rule> {
    let counts = |r: &Rule| r.effect == RuleEffect::Deny || i.approvals_required() == 1;
    rules
        .iter()
        .filter(|r| matches(r, i, now) && counts(r))
        .max_by(|a, b| {
            let rank = |r: &Rule| (r.scope.specificity(), r.effect == RuleEffect::Deny);
            rank(a)
                .cmp(&rank(b))
                // Older first, then smaller id: reversed, since max_by keeps the greatest.
                .then_with(|| b.created_at.cmp(&a.created_at))
                .then_with(|| b.id.cmp(&a.id))
        })
}

/// The rule an approval's answer writes when it carries `remember`.
///
/// # Errors
/// - `NRY-0025` when `i` is not an approval (a question or a connection is never
///   remembered);
/// - `NRY-0026` for scope `agent` when the runtime named no agent for the call;
/// - `NRY-0010` when a digest narrowing is not the call's digest;
/// - `NRY-0001` for a lifetime out of bounds.
pub fn rule_for(
    i: &Interaction,
    remember: &Remember,
    approved: bool,
    by: &PersonId,
    command_id: &CommandId,
    now: OffsetDateTime,
) -> Result<Rule, Rejection> {
    let Spec::Approval {
        server,
        tool,
        arguments_digest,
        ..
    } = &i.spec
    else {
        return Err(not_rememberable(i));
    };
    remember.check()?;
    let agent = match remember.scope {
        RuleScope::Agent => match &i.agent {
            Some(a) => Some(a.clone()),
            None => {
                return Err(Rejection::new(
                    ErrorCode::ScopeUnavailable,
                    format!(
                        "remember.scope agent: the runtime named no agent for call {} \
                         (use session or organisation)",
                        i.call_id
                    ),
                ));
            }
        },
        _ => None,
    };
    let narrowed = match &remember.arguments_digest {
        None | Some(Narrowing::This(false)) => None,
        Some(Narrowing::This(true)) => Some(arguments_digest.clone()),
        Some(Narrowing::Digest(d)) if d == arguments_digest => Some(d.clone()),
        Some(Narrowing::Digest(_)) => {
            return Err(Rejection::new(
                ErrorCode::ArgumentsChanged,
                "remember.argumentsDigest is not the digest of the call's arguments",
            ));
        }
    };
    let expires_at = remember
        .expires_in
        .and_then(|s| i64::try_from(s).ok())
        .map(|s| now + time::Duration::seconds(s));
    Ok(Rule {
        id: rule_id(command_id),
        org: i.org.clone(),
        effect: if approved {
            RuleEffect::Allow
        } else {
            RuleEffect::Deny
        },
        server: server.clone(),
        tool: tool.clone(),
        scope: remember.scope,
        session: (remember.scope == RuleScope::Session).then(|| i.session.clone()),
        agent,
        arguments_digest: narrowed,
        created_by: by.clone(),
        created_at: now,
        expires_at,
        from_interaction: i.id.clone(),
        revoked: None,
    })
}

/// The refusal of `remember` on anything but an approval.
pub fn not_rememberable(i: &Interaction) -> Rejection {
    Rejection::new(
        ErrorCode::NotRememberable,
        format!(
            "remember applies to approvals only; {} is a {} and no rule can be written about it",
            i.id,
            i.kind().as_str()
        ),
    )
}

/// The audit record of a rule written by an answer.
pub fn written_event(rule: &Rule, now: OffsetDateTime) -> Event {
    Event::new(
        &rule.org,
        None,
        rule.id.as_str(),
        "write",
        now,
        EventData::RuleWritten { rule: rule.clone() },
    )
}

/// Revokes `rule` as `by` at `now`: the revoked rule to write and its audit record.
/// Revoking a revoked rule changes nothing and returns the recorded revocation's
/// audit record again (same id, so publishing it again is a no-op).
pub fn revoke(rule: &Rule, by: &PersonId, now: OffsetDateTime) -> (Rule, Event) {
    let mut next = rule.clone();
    if next.revoked.is_none() {
        next.revoked = Some(Revocation {
            by: by.clone(),
            at: now,
        });
    }
    let at = next.revoked.as_ref().map_or(now, |r| r.at);
    let event = Event::new(
        &next.org,
        None,
        next.id.as_str(),
        "revoke",
        at,
        EventData::RuleRevoked { rule: next.clone() },
    );
    (next, event)
}

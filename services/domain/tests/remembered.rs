//! Remembered approval rules in the pure state machine: an answer with `remember`
//! writes a rule as an effect; an opening that a live rule matches is decided at
//! once (no person, nothing pending), once, replays included; `remember` on a
//! question or a connection is refused with nothing written; which rule decides.

mod common;

use common::*;
use holdpoint_domain::rulebook::pick;
use holdpoint_domain::{
    Accepted, CallResult, Decider, ErrorCode, EventData, Remember, RuleEffect, RuleScope,
    SessionMode, State,
};
use serde_json::json;

fn remember(scope: RuleScope) -> Remember {
    Remember {
        scope,
        expires_in: None,
        arguments_digest: None,
    }
}

fn answer_remembering(
    id: &str,
    k: &str,
    ok: bool,
    r: Remember,
) -> holdpoint_domain::CommandEnvelope {
    let mut a = answer_cmd(id, k, approved(ok));
    a.remember = Some(r);
    answer_env(a)
}

#[test]
fn an_answer_with_remember_writes_a_rule_and_the_next_hold_is_decided_by_it() {
    let mut s = Fixture::new().blocking(S).approval("eff_1", S).store();
    let d = s.deliver(
        &answer_remembering("eff_1", "k-1", true, remember(RuleScope::Session)),
        false,
    );
    assert_eq!(d.outcome.result, Ok(Accepted::Resolved));
    assert_eq!(d.effects.rules.len(), 1);
    assert_eq!(
        names(&d.effects.audit),
        ["rule-written", "approval-decided"]
    );
    let rule = d.effects.rules[0].clone();
    assert_eq!(
        (rule.effect, rule.scope),
        (RuleEffect::Allow, RuleScope::Session)
    );
    assert_eq!(rule.session, Some(sid("s1")));
    assert_eq!(rule.created_by, person(PERSON));

    // The next hold in the session: decided by the rule, nothing pending.
    let d = s.deliver(&open("eff_2", "s1", pr_approval()), false);
    assert_eq!(d.outcome.result, Ok(Accepted::Opened));
    assert_eq!(
        names(&d.effects.events),
        ["interaction-resolved", "tool-call-released", "task-status"]
    );
    match &d.effects.audit[..] {
        [e] => match &e.body {
            EventData::ApprovalDecided {
                decided_by,
                rule: r,
                approved_by,
                ..
            } => {
                assert_eq!(*decided_by, Decider::Rule);
                assert_eq!(r.as_ref(), Some(&rule.id));
                assert_eq!(
                    approved_by.as_ref().map(|p| p.as_str().to_owned()),
                    Some(format!("{PERSON} (rule {})", rule.id))
                );
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let rec = s.interaction("eff_2");
    assert_eq!(rec.state, State::Resolved);
    assert!(
        s.task(TASK)
            .pending
            .iter()
            .all(|w| w.interaction_id != iid("eff_2"))
    );
    // The same opening again: a replay, no second decision.
    let again = s.deliver(&open("eff_2", "s1", pr_approval()), true);
    assert!(again.replay || !again.writes());
    assert_eq!(s.interaction("eff_2").state, State::Resolved);

    // Another session: pending as before.
    s.deliver(&session_open("s2", SessionMode::Blocking), false);
    s.deliver(&open("eff_3", "s2", pr_approval()), false);
    assert_eq!(s.interaction("eff_3").state, State::Pending);
}

#[test]
fn a_deny_rule_finishes_the_call_as_tool_denied() {
    let mut s = Fixture::new().blocking(S).approval("eff_1", S).store();
    s.deliver(
        &answer_remembering("eff_1", "k-1", false, remember(RuleScope::Organisation)),
        false,
    );
    let d = s.deliver(&open("eff_2", "s1", pr_approval()), false);
    assert_eq!(
        names(&d.effects.events),
        ["interaction-resolved", "tool-call-finished", "task-status"]
    );
    let rec = s.interaction("eff_2");
    assert_eq!(rec.state, State::Finished);
    assert!(
        matches!(rec.result, Some(CallResult::Error { ref code, .. }) if code == "tool.denied")
    );
}

#[test]
fn remember_on_a_question_or_a_connection_is_refused_and_writes_nothing() {
    let mut s = Fixture::new()
        .blocking(S)
        .question("q1", S)
        .then(open("c1", S, connection_req("Linear", "file tickets")))
        .store();
    for (id, input) in [
        ("q1", example_answers()),
        ("c1", value(json!({"connected": true}))),
    ] {
        let writes = s.writes;
        let mut a = answer_cmd(id, "k-1", input);
        a.remember = Some(remember(RuleScope::Session));
        let d = s.deliver(&answer_env(a), false);
        let code = d.outcome.result.as_ref().err().map(|r| r.code);
        assert_eq!(code, Some(ErrorCode::NotRememberable), "{id}");
        assert_eq!(s.writes, writes, "{id}: nothing written");
        assert!(d.effects.is_empty());
        assert_eq!(s.interaction(id).state, State::Pending);
    }
    assert!(s.rules.is_empty());
}

#[test]
fn the_most_specific_scope_wins_and_deny_beats_allow_at_the_same_scope() {
    let mut s = Fixture::new()
        .blocking(S)
        .approval("a", S)
        .approval("b", S)
        .approval("c", S)
        .approval("d", S)
        .store();
    s.deliver(
        &answer_remembering("a", "k", true, remember(RuleScope::Organisation)),
        false,
    );
    s.deliver(
        &answer_remembering("b", "k", false, remember(RuleScope::Organisation)),
        false,
    );
    s.deliver(
        &answer_remembering("c", "k", true, remember(RuleScope::Session)),
        false,
    );
    let rules = s.rules.clone();
    let held = s.interaction("d");
    let now = s.now;
    // Session allow beats both organisation rules.
    assert_eq!(
        pick(&rules, held, now).map(|r| r.scope),
        Some(RuleScope::Session)
    );
    // Without it: the organisation deny beats the organisation allow.
    let wide: Vec<_> = rules
        .iter()
        .filter(|r| r.scope != RuleScope::Session)
        .cloned()
        .collect();
    assert_eq!(
        pick(&wide, held, now).map(|r| r.effect),
        Some(RuleEffect::Deny)
    );
    // Another organisation's rule never matches.
    let mut foreign = rules[0].clone();
    foreign.org = holdpoint_domain::OrgId::parse("globex").expect("org");
    assert!(pick(&[foreign], held, now).is_none());
    // Expired and revoked rules never match.
    let mut expired = rules[0].clone();
    expired.expires_at = Some(now);
    assert!(pick(&[expired], held, now).is_none());
    let (revoked, _) = holdpoint_domain::rulebook::revoke(&rules[0], &person("bo"), now);
    assert!(pick(&[revoked], held, now).is_none());
}

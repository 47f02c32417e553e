//! Table tests of `decide` for approvals that need several people (README
//! "Two-person approvals"): each distinct approval is counted once, with an event
//! and an audit record; the call is released when the last one needed arrives; one
//! denial decides at once; an expiry with too few approvals denies and audits the
//! partial ones; remembered allow rules never count; the bounds at the opening.

mod common;

use std::time::Duration;

use common::*;
use holdpoint_domain::{
    Accepted, AuditOutcome, CallResult, Command, CommandEnvelope, DeadlineStage, Deadlines,
    ErrorCode, EventData, OpenRequest, Remember, RuleEffect, RuleScope, State,
};
use serde_json::json;

/// The test hold (`github / create_pull_request`) needing `n` approvals.
fn needing(n: Option<u8>, editable: bool) -> OpenRequest {
    match pr_approval() {
        OpenRequest::Approval {
            server,
            tool,
            arguments,
            reason,
            ..
        } => OpenRequest::Approval {
            server,
            tool,
            arguments,
            reason,
            editable,
            approvals: n,
        },
        other => other,
    }
}

fn store_needing(n: u8) -> Store {
    let mut s = Fixture::new().blocking(S).store();
    accept(
        &mut s,
        &open(APPROVAL, S, needing(Some(n), false)),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    s
}

/// `who`'s answer under key `k`: approve (`true`) or deny.
fn by(who: &str, k: &str, ok: bool) -> CommandEnvelope {
    let mut a = answer_cmd(APPROVAL, k, approved(ok));
    a.by = person(who);
    answer_env(a)
}

fn counted(given: u8, required: u8) -> Accepted {
    Accepted::ApprovalCounted { given, required }
}

fn given(s: &Store) -> Vec<String> {
    s.interaction(APPROVAL)
        .given_approvals
        .iter()
        .map(|g| g.by.as_str().to_owned())
        .collect()
}

#[test]
fn the_call_is_released_once_when_the_last_distinct_approval_arrives() {
    let mut s = store_needing(3);
    let first = accept(
        &mut s,
        &by("ana", "k-ana", true),
        counted(1, 3),
        &["approval-counted", "task-status"],
    );
    assert_eq!(names(&first.effects.audit), ["approval-recorded"]);
    assert_eq!(
        data(&first.effects.events, "approval-counted"),
        &EventData::ApprovalCounted {
            interaction_id: iid(APPROVAL),
            by: person("ana"),
            given: 1,
            required: 3,
        }
    );
    assert_replays(&mut s, &by("ana", "k-ana", true), &first);
    // The task's status message shows how far the approval has come.
    let status = task_status(&first.effects.events);
    let shown = serde_json::to_value(status).expect("status");
    assert!(
        shown.to_string().contains(r#""approvals":{"given":[{"at""#)
            && shown.to_string().contains(r#""by":"ana""#),
        "{shown}"
    );
    assert_eq!(s.interaction(APPROVAL).state, State::Pending);

    accept(
        &mut s,
        &by("bo", "k-bo", true),
        counted(2, 3),
        &["approval-counted", "task-status"],
    );
    let last = accept(
        &mut s,
        &by("cy", "k-cy", true),
        Accepted::Resolved,
        &[
            "approval-counted",
            "interaction-resolved",
            "tool-call-released",
            "task-status",
        ],
    );
    assert_eq!(
        names(&last.effects.audit),
        ["approval-recorded", "approval-decided"]
    );
    let everyone = vec![person("ana"), person("bo"), person("cy")];
    match data(&last.effects.events, "tool-call-released") {
        EventData::ToolCallReleased {
            approved_by,
            approvals,
            ..
        } => {
            assert_eq!(approved_by, &person("cy"));
            assert_eq!(approvals, &everyone);
        }
        other => panic!("{other:?}"),
    }
    match data(&last.effects.audit, "approval-decided") {
        EventData::ApprovalDecided {
            approved,
            approvals,
            ..
        } => assert!(*approved && approvals == &everyone),
        other => panic!("{other:?}"),
    }
    assert_eq!(given(&s), ["ana", "bo", "cy"]);
    assert_eq!(s.interaction(APPROVAL).state, State::Resolved);
    // A fourth person is too late; an earlier approver's key still replays what it
    // replied then.
    refuse(&mut s, &by("di", "k-di", true), ErrorCode::AlreadySettled);
    let again = s.run(&by("ana", "k-ana", true));
    assert_eq!(again.outcome.result, Ok(counted(1, 3)));
    assert!(!again.writes());
}

#[test]
fn the_same_person_counts_once_and_may_still_deny() {
    let mut s = store_needing(2);
    accept(
        &mut s,
        &by("ana", "k-1", true),
        counted(1, 2),
        &["approval-counted", "task-status"],
    );
    // Another key, another press, another tab: still one person.
    let d = refuse(&mut s, &by("ana", "k-2", true), ErrorCode::AlreadyApproved);
    let message = d
        .outcome
        .result
        .err()
        .map(|r| r.message)
        .unwrap_or_default();
    assert!(message.contains("1 of 2"), "{message}");
    assert!(ErrorCode::AlreadyApproved.is_provisional());
    assert_eq!(ErrorCode::AlreadyApproved.spec().status, 409);
    assert_eq!(given(&s), ["ana"]);
    // Withdrawing consent is always allowed: her denial decides.
    let d = accept(
        &mut s,
        &by("ana", "k-3", false),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    assert!(matches!(
        finished_result(&d.effects.events),
        CallResult::Error { code, .. } if code == "tool.denied"
    ));
}

#[test]
fn one_denial_decides_at_once_and_the_audit_keeps_the_partial_approvals() {
    let mut s = store_needing(3);
    accept(
        &mut s,
        &by("ana", "k-1", true),
        counted(1, 3),
        &["approval-counted", "task-status"],
    );
    let d = accept(
        &mut s,
        &by("bo", "k-2", false),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    assert_eq!(names(&d.effects.audit), ["approval-decided"]);
    match data(&d.effects.audit, "approval-decided") {
        EventData::ApprovalDecided {
            approved,
            approved_by,
            approvals,
            ..
        } => {
            assert!(!approved);
            assert_eq!(approved_by.as_ref(), Some(&person("bo")));
            assert_eq!(approvals, &[person("ana")]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.interaction(APPROVAL).state, State::Finished);
    refuse(&mut s, &by("cy", "k-3", true), ErrorCode::AlreadySettled);
}

#[test]
fn an_expiry_with_too_few_approvals_denies_and_audits_them() {
    let mut s = Fixture::new()
        .deadlines(Deadlines {
            supported: true,
            default: None,
            max: Some(Duration::from_secs(3600)),
            warning: None,
        })
        .blocking(S)
        .store();
    let mut opening = open(APPROVAL, S, needing(Some(2), false));
    if let Command::Open(o) = &mut opening.command {
        o.expires_in = Some(60);
    }
    s.run(&opening);
    accept(
        &mut s,
        &by("ana", "k-1", true),
        counted(1, 2),
        &["approval-counted", "task-status"],
    );
    let i = s.interaction(APPROVAL).clone();
    let tick = env(Command::Expire {
        interaction_id: i.id.clone(),
        task_id: i.task_id.clone(),
        expires_at: i.expires_at.expect("deadline"),
        stage: DeadlineStage::Expire,
    });
    let d = accept(
        &mut s,
        &tick,
        Accepted::Expired,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    match data(&d.effects.audit, "approval-decided") {
        EventData::ApprovalDecided {
            outcome, approvals, ..
        } => {
            assert_eq!(*outcome, AuditOutcome::Expired);
            assert_eq!(approvals, &[person("ana")]);
        }
        other => panic!("{other:?}"),
    }
    match finished_result(&d.effects.events) {
        CallResult::Error { code, message } => {
            assert_eq!(code, "tool.denied");
            assert!(message.contains("1 of the 2 approvals"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn approvals_out_of_bounds_or_with_an_editable_hold_open_nothing() {
    let mut s = Fixture::new().blocking(S).store();
    for req in [
        needing(Some(0), false),
        needing(Some(6), false),
        needing(Some(u8::MAX), false),
        needing(Some(2), true),
    ] {
        refuse(&mut s, &open(APPROVAL, S, req), ErrorCode::InvalidRequest);
    }
    // One, said or left out, is one person deciding.
    for (id, n) in [("eff-one", Some(1)), ("eff-default", None)] {
        s.run(&open(id, S, needing(n, false)));
        assert_eq!(s.interaction(id).approvals_required(), 1);
        let mut a = answer_cmd(id, "k", approved(true));
        a.by = person("ana");
        accept(
            &mut s,
            &answer_env(a),
            Accepted::Resolved,
            &["interaction-resolved", "tool-call-released", "task-status"],
        );
    }
}

#[test]
fn remembered_allow_rules_never_count_and_remember_is_refused() {
    let mut s = Fixture::new().blocking(S).approval("eff_1", S).store();
    let remember = Remember {
        scope: RuleScope::Organisation,
        expires_in: None,
        arguments_digest: None,
    };
    let mut a = answer_cmd("eff_1", "k-1", approved(true));
    a.remember = Some(remember.clone());
    s.run(&answer_env(a));
    assert_eq!(s.rules.len(), 1);
    assert_eq!(s.rules[0].effect, RuleEffect::Allow);
    // The organisation-wide allow rule decides a one-person hold at once...
    let d = s.run(&open("eff_2", S, pr_approval()));
    assert_eq!(s.interaction("eff_2").state, State::Resolved, "{d:?}");
    // ...but never a hold that needs two: it waits for people.
    accept(
        &mut s,
        &open(APPROVAL, S, needing(Some(2), false)),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    assert_eq!(s.interaction(APPROVAL).state, State::Pending);
    // An answer with remember on it is refused and changes nothing.
    let mut a = answer_cmd(APPROVAL, "k-2", approved(true));
    a.remember = Some(remember);
    refuse(&mut s, &answer_env(a), ErrorCode::NotRememberable);

    // A deny rule still denies such a hold, as one person's denial would.
    let mut t = Fixture::new().blocking(S).approval("eff_1", S).store();
    let mut a = answer_cmd("eff_1", "k-1", approved(false));
    a.remember = Some(Remember {
        scope: RuleScope::Organisation,
        expires_in: None,
        arguments_digest: None,
    });
    t.run(&answer_env(a));
    t.run(&open(APPROVAL, S, needing(Some(2), false)));
    assert_eq!(t.interaction(APPROVAL).state, State::Finished);
}

#[test]
fn the_views_show_who_approved_and_whether_you_did() {
    let mut s = store_needing(2);
    s.run(&by("ana", "k-1", true));
    let i = s.interaction(APPROVAL);
    let ana = i.view_for(&person("ana"), &[]);
    let bo = i.view_for(&person("bo"), &[]);
    let a = ana.approvals.expect("approvals");
    assert_eq!((a.required, a.by_you), (2, Some(true)));
    assert_eq!(a.given.len(), 1);
    assert_eq!(bo.approvals.and_then(|a| a.by_you), Some(false));
    assert_eq!(i.view().detail["approvals"]["given"][0]["by"], json!("ana"));
    assert!(i.view().detail.get("arguments").is_none());
    // A one-person hold shows no approvals section.
    let one = Fixture::new().blocking(S).approval("eff_1", S).store();
    assert!(one.interaction("eff_1").view().approvals.is_none());
    assert!(
        one.interaction("eff_1")
            .view()
            .detail
            .get("approvals")
            .is_none()
    );
}

fn reassign_to(change: &str, people: &[&str], groups: &[&str]) -> CommandEnvelope {
    env(Command::Reassign {
        interaction_id: iid(APPROVAL),
        task_id: None,
        change_id: holdpoint_domain::MessageId::parse(change).expect("change"),
        assignees: Some(holdpoint_domain::Assignees::of(people, groups).expect("assignees")),
    })
}

fn by_in(who: &str, groups: &[&str], k: &str) -> CommandEnvelope {
    let mut a = answer_cmd(APPROVAL, k, approved(true));
    a.by = person(who);
    a.groups = groups
        .iter()
        .map(|g| holdpoint_domain::GroupName::parse(*g).expect("group"))
        .collect();
    answer_env(a)
}

#[test]
fn a_reassignment_withdraws_the_approvals_of_people_it_no_longer_admits() {
    let mut s = Fixture::new().blocking(S).store();
    let mut opening = open(APPROVAL, S, needing(Some(3), false));
    if let Command::Open(o) = &mut opening.command {
        o.assignees =
            Some(holdpoint_domain::Assignees::of(&["ana"], &["payments"]).expect("assignees"));
    }
    s.run(&opening);
    accept(
        &mut s,
        &by_in("ana", &["dev"], "k-ana"),
        counted(1, 3),
        &["approval-counted", "task-status"],
    );
    accept(
        &mut s,
        &by_in("bo", &["payments", "ops"], "k-bo"),
        counted(2, 3),
        &["approval-counted", "task-status"],
    );
    assert_eq!(
        s.interaction(APPROVAL).given_approvals[1]
            .via
            .iter()
            .map(|g| g.as_str())
            .collect::<Vec<_>>(),
        ["payments"],
        "only the assigned group is kept"
    );
    // Ana is no longer named; the payments group still is: Bo's approval stands.
    let d = accept(
        &mut s,
        &reassign_to("c-1", &["cy"], &["payments"]),
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
    match data(&d.effects.events, "interaction-reassigned") {
        EventData::InteractionReassigned {
            withdrawn_approvals,
            ..
        } => assert_eq!(withdrawn_approvals, &[person("ana")]),
        other => panic!("{other:?}"),
    }
    assert_eq!(given(&s), ["bo"]);
    // Her key still replays what it answered (idempotency), but counts for
    // nothing; a new answer from her is refused, and the call needs two more.
    let again = s.run(&by_in("ana", &[], "k-ana"));
    assert_eq!(again.outcome.result, Ok(counted(1, 3)));
    assert!(!again.writes());
    assert_eq!(s.interaction(APPROVAL).withdrawn_approvals.len(), 1);
    refuse(
        &mut s,
        &by_in("ana", &[], "k-ana-2"),
        ErrorCode::NotAssignee,
    );
    accept(
        &mut s,
        &by_in("cy", &[], "k-cy"),
        counted(2, 3),
        &["approval-counted", "task-status"],
    );
    // The group goes too: Bo's approval is withdrawn as well.
    accept(
        &mut s,
        &reassign_to("c-2", &["cy", "di"], &[]),
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
    assert_eq!(given(&s), ["cy"]);
}

#[test]
fn a_counted_approval_replays_after_any_number_of_later_transitions() {
    let mut s = Fixture::new().blocking(S).store();
    let mut opening = open(APPROVAL, S, needing(Some(2), false));
    if let Command::Open(o) = &mut opening.command {
        o.assignees = Some(holdpoint_domain::Assignees::of(&["ana", "bo"], &[]).expect("a"));
    }
    s.run(&opening);
    s.run(&by_in("ana", &[], "k-ana"));
    // More transitions than the record's outbox keeps.
    for n in 0..(holdpoint_domain::OUTBOX_KEEP + 2) {
        let people: &[&str] = if n % 2 == 0 {
            &["ana", "bo", "cy"]
        } else {
            &["ana", "bo"]
        };
        s.run(&reassign_to(&format!("c-{n}"), people, &[]));
    }
    let again = s.run(&by_in("ana", &[], "k-ana"));
    assert_eq!(again.outcome.result, Ok(counted(1, 2)));
    assert!(!again.writes());
    // Sent with remember this time: still the recorded answer, not a new refusal.
    let mut a = answer_cmd(APPROVAL, "k-ana", approved(true));
    a.by = person("ana");
    a.remember = Some(Remember {
        scope: RuleScope::Session,
        expires_in: None,
        arguments_digest: None,
    });
    let again = s.run(&answer_env(a));
    assert_eq!(again.outcome.result, Ok(counted(1, 2)));
}

//! Table tests of `decide` for assignees (README "Assignees"): who may answer, the
//! bounds at the opening, and the runtime's reassignment (one event and one audit
//! record per change, a retried change is a replay).

mod common;

use common::*;
use holdpoint_domain::{
    Accepted, Assignees, Command, CommandEnvelope, ErrorCode, EventData, GroupName, MessageId,
    State,
};

fn assigned(people: &[&str], groups: &[&str]) -> Assignees {
    Assignees::of(people, groups).expect("assignees")
}

/// Opening approval `id` on `S` for `assignees`.
fn open_assigned(id: &str, assignees: Assignees) -> CommandEnvelope {
    let mut e = open(id, S, pr_approval());
    if let Command::Open(o) = &mut e.command {
        o.assignees = Some(assignees);
    }
    e
}

fn by(person_: &str, groups: &[&str], k: &str) -> CommandEnvelope {
    let mut a = answer_cmd(APPROVAL, k, approved(true));
    a.by = person(person_);
    a.groups = groups
        .iter()
        .map(|g| GroupName::parse(*g).expect("group"))
        .collect();
    answer_env(a)
}

fn reassign(change: &str, assignees: Option<Assignees>) -> CommandEnvelope {
    env(Command::Reassign {
        interaction_id: iid(APPROVAL),
        task_id: None,
        change_id: MessageId::parse(change).expect("change"),
        assignees,
    })
}

fn store_with(assignees: Assignees) -> Store {
    let mut s = Fixture::new().blocking(S).store();
    accept(
        &mut s,
        &open_assigned(APPROVAL, assignees),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    s
}

#[test]
fn people_and_groups_outside_the_assignees_are_refused_and_nothing_changes() {
    let mut s = store_with(assigned(&["ana"], &["oncall"]));
    for (who, groups) in [
        ("bob", &[][..]),
        ("bob", &["OnCall"][..]),
        ("bob", &["oncall2", "on-call"][..]),
        ("Ana", &[][..]),
    ] {
        refuse(&mut s, &by(who, groups, "k-1"), ErrorCode::NotAssignee);
    }
    assert_eq!(s.interaction(APPROVAL).state, State::Pending);
    accept(
        &mut s,
        &by("carol", &["dev", "oncall"], "k-2"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    assert_eq!(
        s.interaction(APPROVAL)
            .resolution
            .as_ref()
            .map(|r| r.by.as_str()),
        Some("carol")
    );
}

#[test]
fn not_assignee_is_provisional_so_a_reassignment_lets_the_same_key_decide() {
    assert!(ErrorCode::NotAssignee.is_provisional());
    assert_eq!(ErrorCode::NotAssignee.spec().status, 403);
    let mut s = store_with(assigned(&["ana"], &[]));
    refuse(&mut s, &by("bob", &[], "k-1"), ErrorCode::NotAssignee);
    accept(
        &mut s,
        &reassign("c-1", Some(assigned(&["bob"], &[]))),
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
    accept(
        &mut s,
        &by("bob", &[], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn assignees_out_of_bounds_open_nothing() {
    let names: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    for a in [
        Assignees::default(),
        assigned(&refs, &[]),
        assigned(&[], &refs),
        assigned(&["ana", "ana"], &[]),
        assigned(&[], &["ops", "ops"]),
    ] {
        let mut s = Fixture::new().blocking(S).store();
        refuse(
            &mut s,
            &open_assigned(APPROVAL, a),
            ErrorCode::InvalidRequest,
        );
    }
    let mut s = Fixture::new().blocking(S).store();
    accept(
        &mut s,
        &open_assigned(APPROVAL, assigned(&refs[..32], &refs[..32])),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
}

#[test]
fn a_reassignment_is_one_event_and_one_audit_record_and_a_retry_is_a_replay() {
    let mut s = store_with(assigned(&["ana"], &[]));
    let change = reassign("c-1", Some(assigned(&[], &["ops"])));
    let d = accept(
        &mut s,
        &change,
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
    assert_eq!(d.effects.audit.len(), 1);
    // The task's status message (A2A metadata) names the new assignees.
    assert_eq!(
        task_status(&d.effects.events)
            .interaction
            .as_ref()
            .and_then(|r| r.assignees.as_ref()),
        Some(&assigned(&[], &["ops"]))
    );
    assert!(matches!(
        &d.effects.audit[0].body,
        EventData::AssigneesChanged { previous: Some(p), assignees: Some(a), .. }
            if p.people[0].as_str() == "ana" && a.groups[0].as_str() == "ops"
    ));
    // The same change again (a retry): a replay, nothing new.
    let again = s.run(&change);
    assert!(again.replay);
    // The same assignees under a new change id: unchanged, nothing published.
    noop(
        &mut s,
        &reassign("c-2", Some(assigned(&[], &["ops"]))),
        Accepted::Unchanged,
    );
    // Back again is a new change, with its own event id.
    let back = accept(
        &mut s,
        &reassign("c-3", Some(assigned(&["ana"], &[]))),
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
    assert_ne!(back.effects.events[0].id, d.effects.events[0].id);
    refuse(
        &mut s,
        &reassign("c-4", Some(Assignees::default())),
        ErrorCode::InvalidRequest,
    );
    // Settled: no more changes.
    accept(
        &mut s,
        &by("ana", &[], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    refuse(&mut s, &reassign("c-5", None), ErrorCode::CommandConflict);
}

#[test]
fn without_assignees_anyone_of_the_organisation_answers() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    assert!(s.interaction(APPROVAL).assignees.is_none());
    accept(
        &mut s,
        &by("zed", &[], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

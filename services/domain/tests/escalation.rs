//! Escalation in the pure state machine (README "Escalation"): what an opening
//! must have for its escalation to be accepted, what the deadline's warning stage
//! adds to the assignees, and that it escalates once, however often the stage is
//! delivered or the deadline moves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use holdpoint_domain::{
    Accepted, Assignees, Command, CommandEnvelope, DeadlineStage, Deadlines, ErrorCode, EventData,
    GroupName, MessageId, State,
};

fn deadlines(warning: Option<u64>) -> Deadlines {
    Deadlines {
        supported: true,
        default: None,
        max: Some(Duration::from_secs(3600)),
        warning: warning.map(Duration::from_secs),
    }
}

fn store_warning(warning: Option<u64>) -> Store {
    Fixture::new()
        .deadlines(deadlines(warning))
        .blocking(S)
        .store()
}

fn store() -> Store {
    store_warning(Some(30))
}

fn assigned(people: &[&str], groups: &[&str]) -> Assignees {
    Assignees::of(people, groups).expect("assignees")
}

/// Approval [`APPROVAL`] on [`S`] with `assignees`, `escalation` and a deadline
/// `expires_in` seconds ahead.
fn open_escalating(
    assignees: Option<Assignees>,
    escalation: Option<Assignees>,
    expires_in: Option<u64>,
) -> CommandEnvelope {
    let mut e = open(APPROVAL, S, pr_approval());
    if let Command::Open(o) = &mut e.command {
        o.assignees = assignees;
        o.escalation = escalation;
        o.expires_in = expires_in;
    }
    e
}

fn opened(s: &mut Store, assignees: Option<Assignees>, escalation: Assignees) {
    accept(
        s,
        &open_escalating(assignees, Some(escalation), Some(60)),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
}

fn tick(s: &Store, stage: DeadlineStage) -> CommandEnvelope {
    let i = s.interaction(APPROVAL);
    env(Command::Expire {
        interaction_id: i.id.clone(),
        task_id: i.task_id.clone(),
        expires_at: i.expires_at.expect("a deadline"),
        stage,
    })
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

fn escalations(s: &Store) -> (usize, usize) {
    let events = s
        .published
        .events
        .iter()
        .filter(|e| e.name() == "interaction-escalated")
        .count();
    let audit = s
        .published
        .audit
        .iter()
        .filter(|e| e.name() == "escalated")
        .count();
    (events, audit)
}

#[test]
fn the_warning_stage_adds_the_escalation_and_its_group_may_then_answer() {
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&["ana"], &["dev"])),
        assigned(&["ana", "lead"], &["oncall"]),
    );
    let i = s.interaction(APPROVAL);
    assert_eq!(i.escalation, Some(assigned(&["ana", "lead"], &["oncall"])));
    assert_eq!(i.escalated_at, None);
    // Before the warning stage, the escalation group is not assigned yet.
    refuse(
        &mut s,
        &by("olga", &["oncall"], "k-1"),
        ErrorCode::NotAssignee,
    );

    let warn = tick(&s, DeadlineStage::Warn);
    let d = accept(
        &mut s,
        &warn,
        Accepted::Unchanged,
        &[
            "interaction-expiring",
            "interaction-escalated",
            "task-status",
        ],
    );
    let after = assigned(&["ana", "lead"], &["dev", "oncall"]);
    match data(&d.effects.events, "interaction-escalated") {
        EventData::InteractionEscalated {
            interaction_id,
            escalation,
            assignees,
            previous,
            expires_at,
            ..
        } => {
            assert_eq!(interaction_id.as_str(), APPROVAL);
            assert_eq!(escalation, &assigned(&["ana", "lead"], &["oncall"]));
            assert_eq!(assignees.as_ref(), Some(&after));
            assert_eq!(previous, &Some(assigned(&["ana"], &["dev"])));
            assert_eq!(Some(*expires_at), s.interaction(APPROVAL).expires_at);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(names(&d.effects.audit), ["escalated"]);
    // The task's status message (A2A metadata) names the new assignees.
    let status = task_status(&d.effects.events)
        .interaction
        .clone()
        .expect("waiting");
    assert_eq!(status.assignees.as_ref(), Some(&after));
    assert!(status.escalated_at.is_some());
    assert_eq!(
        s.task(TASK).pending[0].escalation,
        Some(assigned(&["ana", "lead"], &["oncall"]))
    );
    let i = s.interaction(APPROVAL);
    assert_eq!(i.assignees.as_ref(), Some(&after));
    assert!(i.escalated_at.is_some());
    assert_eq!(i.view().escalated_at, i.escalated_at);
    assert_eq!(escalations(&s), (1, 1));

    // The same stage delivered again is a replay: nothing new is published.
    assert_replays(&mut s, &warn, &d);
    s.run(&warn);
    assert_eq!(escalations(&s), (1, 1));

    // The same key that was refused now decides.
    accept(
        &mut s,
        &by("olga", &["oncall"], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn it_escalates_once_even_when_the_stage_is_decided_afresh_or_the_deadline_moves() {
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&["ana"], &[])),
        assigned(&[], &["oncall"]),
    );
    let warn = tick(&s, DeadlineStage::Warn);
    s.run(&warn);
    assert_eq!(escalations(&s), (1, 1));
    // The outbox forgot the stage (many later transitions): decided afresh, the
    // warning is built again (same event id) but the escalation is not.
    s.forget_outboxes();
    let d = s.run(&warn);
    assert_eq!(names(&d.effects.events), ["interaction-expiring"]);
    assert!(d.effects.audit.is_empty());
    // The runtime moves the deadline: its new warning stage warns, and does not
    // escalate a second time.
    accept(
        &mut s,
        &env(Command::Deadline {
            interaction_id: iid(APPROVAL),
            task_id: None,
            expires_at: None,
            expires_in: Some(600),
            change_id: None,
        }),
        Accepted::Rescheduled,
        &["task-status"],
    );
    let warn = tick(&s, DeadlineStage::Warn);
    let d = s.run(&warn);
    assert_eq!(names(&d.effects.events), ["interaction-expiring"]);
    assert_eq!(escalations(&s), (1, 1));
    assert_eq!(
        s.interaction(APPROVAL).assignees,
        Some(assigned(&["ana"], &["oncall"]))
    );
}

#[test]
fn an_interaction_open_to_everyone_stays_open_and_the_event_notifies() {
    let mut s = store();
    opened(&mut s, None, assigned(&["lead"], &["oncall"]));
    let warn = tick(&s, DeadlineStage::Warn);
    let d = accept(
        &mut s,
        &warn,
        Accepted::Unchanged,
        &[
            "interaction-expiring",
            "interaction-escalated",
            "task-status",
        ],
    );
    assert!(matches!(
        data(&d.effects.events, "interaction-escalated"),
        EventData::InteractionEscalated {
            assignees: None,
            previous: None,
            ..
        }
    ));
    let i = s.interaction(APPROVAL);
    assert_eq!(i.assignees, None);
    assert!(i.escalated_at.is_some());
    // Anyone of the organisation still answers.
    accept(
        &mut s,
        &by("zed", &[], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn an_answer_before_the_warning_stage_leaves_nothing_to_escalate() {
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&["ana"], &[])),
        assigned(&["lead"], &[]),
    );
    let warn = tick(&s, DeadlineStage::Warn);
    accept(
        &mut s,
        &by("ana", &[], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    noop(&mut s, &warn, Accepted::Unchanged);
    assert_eq!(escalations(&s), (0, 0));
    assert_eq!(s.interaction(APPROVAL).state, State::Resolved);
}

/// (warning lead, assignees, escalation, expiresIn, what the refusal says)
type Case<'a> = (
    Option<u64>,
    Option<Assignees>,
    Option<Assignees>,
    Option<u64>,
    &'a str,
);

#[test]
fn an_escalation_that_would_never_fire_or_is_out_of_bounds_opens_nothing() {
    let many: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let ok = || Some(assigned(&["lead"], &["oncall"]));
    let cases: Vec<Case> = vec![
        (Some(30), None, ok(), None, "needs a deadline"),
        (None, None, ok(), Some(60), "no warning lead"),
        (
            Some(30),
            None,
            ok(),
            Some(30),
            "closer than the warning lead",
        ),
        (
            Some(30),
            None,
            ok(),
            Some(10),
            "closer than the warning lead",
        ),
        (
            Some(30),
            None,
            Some(Assignees::default()),
            Some(60),
            "names nobody",
        ),
        (
            Some(30),
            None,
            Some(assigned(&refs, &[])),
            Some(60),
            "escalation.people names 33",
        ),
        (
            Some(30),
            None,
            Some(assigned(&[], &refs)),
            Some(60),
            "escalation.groups names 33",
        ),
        (
            Some(30),
            None,
            Some(assigned(&["lead", "lead"], &[])),
            Some(60),
            "twice",
        ),
        (
            Some(30),
            None,
            Some(assigned(&[], &["ops", "ops"])),
            Some(60),
            "twice",
        ),
        // 32 assignees and one more person in the escalation: 33 together.
        (
            Some(30),
            Some(assigned(&refs[..32], &[])),
            Some(assigned(&[refs[32]], &[])),
            Some(60),
            "together name 33 people",
        ),
        (
            Some(30),
            Some(assigned(&[], &refs[..32])),
            Some(assigned(&[], &[refs[32]])),
            Some(60),
            "together name 33 groups",
        ),
    ];
    for (warning, assignees, escalation, secs, says) in cases {
        let mut s = store_warning(warning);
        let d = refuse(
            &mut s,
            &open_escalating(assignees, escalation, secs),
            ErrorCode::InvalidRequest,
        );
        let msg = &d.outcome.result.as_ref().expect_err("refused").message;
        assert!(msg.contains(says), "{says}: {msg}");
        assert!(!s.has_interaction(APPROVAL));
    }
}

#[test]
fn lists_at_their_bounds_fit_and_a_name_in_both_counts_once() {
    let many: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    // 31 assigned people, an escalation of two of whom one is assigned already:
    // 32 together. Groups: 32 in the escalation alone.
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&refs[..31], &[])),
        assigned(&[refs[0], refs[31]], &refs[..32]),
    );
    let warn = tick(&s, DeadlineStage::Warn);
    s.run(&warn);
    let a = s
        .interaction(APPROVAL)
        .assignees
        .clone()
        .expect("assignees");
    assert_eq!(a.people.len(), 32);
    assert_eq!(a.people[31].as_str(), refs[31]);
    assert_eq!(a.groups.len(), 32);
    assert!(a.check().is_ok());
    // Look-alike names are other names: after the escalation to `oncall`, a caller
    // in `OnCall` or `on-call` is still refused, and a name with a Cyrillic `о` or a
    // trailing space cannot be an escalation's at all.
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&["ana"], &[])),
        assigned(&[], &["oncall"]),
    );
    let warn = tick(&s, DeadlineStage::Warn);
    s.run(&warn);
    refuse(
        &mut s,
        &by("olga", &["OnCall", "on-call", "oncall2"], "k-1"),
        ErrorCode::NotAssignee,
    );
    assert!(Assignees::of(&[], &["\u{43e}ncall"]).is_err());
    assert!(Assignees::of(&[], &["oncall "]).is_err());
    accept(
        &mut s,
        &by("olga", &["oncall"], "k-1"),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn a_reassignment_that_would_not_fit_beside_a_coming_escalation_is_refused() {
    let many: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut s = store();
    opened(
        &mut s,
        Some(assigned(&["ana"], &[])),
        assigned(&["lead"], &[]),
    );
    let reassign = |change: &str, a: Assignees| {
        env(Command::Reassign {
            interaction_id: iid(APPROVAL),
            task_id: None,
            change_id: MessageId::parse(change).expect("change"),
            assignees: Some(a),
        })
    };
    let d = refuse(
        &mut s,
        &reassign("c-1", assigned(&refs[..32], &[])),
        ErrorCode::InvalidRequest,
    );
    assert!(
        d.outcome
            .result
            .expect_err("refused")
            .message
            .contains("together")
    );
    // With the escalation applied, the same change is the runtime's to make.
    let warn = tick(&s, DeadlineStage::Warn);
    s.run(&warn);
    accept(
        &mut s,
        &reassign("c-1", assigned(&refs[..32], &[])),
        Accepted::Reassigned,
        &["interaction-reassigned", "task-status"],
    );
}

#[test]
fn a_command_naming_a_look_alike_or_malformed_escalation_does_not_decode() {
    let open = |escalation: &str| {
        format!(
            r#"{{"org":"acme","command":{{"type":"open","interactionId":"eff_1","session":"s1","lane":"main","taskId":"t1","contextId":"c1","callId":"call_1","request":{{"kind":"approval","server":"k8s","tool":"deploy","arguments":{{}}}},"expiresIn":60,"escalation":{escalation}}}}}"#
        )
    };
    let decodes = |escalation: &str| serde_json::from_str::<CommandEnvelope>(&open(escalation));
    assert!(decodes(r#"{"groups":["oncall"]}"#).is_ok());
    for bad in [
        r#"{"groups":["\u043encall"]}"#, // a Cyrillic о
        r#"{"groups":["oncall "]}"#,
        r#"{"groups":["on call"]}"#,
        r#"{"groups":[""]}"#,
        r#"{"people":["ana\u0000"]}"#,
        r#"{"groups":"oncall"}"#,
        r#"["oncall"]"#,
    ] {
        assert!(decodes(bad).is_err(), "{bad} decoded");
    }
}

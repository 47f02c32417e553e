//! Deadlines in the pure state machine: what an opening's deadline stores and
//! schedules, what expiry decides per kind, and that an expiry and an answer never
//! both settle an interaction, whichever comes first.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use holdpoint_domain::{
    Accepted, Answer, CallResult, CloseReason, Command, CommandEnvelope, DeadlineStage, Deadlines,
    ErrorCode, EventData, OnExpiry, OpenInteraction, Resolver, SessionMode, State,
};
use time::OffsetDateTime;

fn store(supported: bool) -> Store {
    Fixture::new()
        .deadlines(Deadlines {
            supported,
            default: None,
            max: Some(Duration::from_secs(3600)),
            warning: Some(Duration::from_secs(30)),
        })
        .blocking(S)
        .session(P, SessionMode::Product)
        .store()
}

fn with_deadline(
    env: CommandEnvelope,
    at: Option<OffsetDateTime>,
    secs: Option<u64>,
    on_expiry: OnExpiry,
) -> CommandEnvelope {
    let Command::Open(o) = env.command else {
        panic!("an opening")
    };
    CommandEnvelope {
        org: env.org,
        command: Command::Open(Box::new(OpenInteraction {
            expires_at: at,
            expires_in: secs,
            on_expiry,
            ..*o
        })),
    }
}

/// Approval `eff_1` on [`S`], expiring in a minute and decided then.
fn approval_in_a_minute() -> CommandEnvelope {
    in_a_minute(open("eff_1", S, pr_approval()), OnExpiry::Decide)
}

/// `env` (an opening) expiring in a minute, `on_expiry`.
fn in_a_minute(env: CommandEnvelope, on_expiry: OnExpiry) -> CommandEnvelope {
    with_deadline(env, None, Some(60), on_expiry)
}

fn tick(s: &Store, id: &str, stage: DeadlineStage) -> CommandEnvelope {
    let i = s.interaction(id);
    env(Command::Expire {
        interaction_id: i.id.clone(),
        task_id: i.task_id.clone(),
        expires_at: i.expires_at.expect("a deadline"),
        stage,
    })
}

#[test]
fn a_deadline_is_refused_without_schedules_and_changes_nothing() {
    let mut s = store(false);
    let before = s.revisions();
    let d = s.run(&approval_in_a_minute());
    assert_eq!(code_of(&d), ErrorCode::DeadlineUnsupported);
    assert!(!d.writes());
    assert_eq!(s.revisions(), before);
    // Without one, the same server opens it.
    let d = s.run(&open("eff_1", S, pr_approval()));
    assert_eq!(d.outcome.result, Ok(Accepted::Opened));
}

#[test]
fn bad_deadlines_are_refused() {
    let mut s = store(true);
    let now = s.now;
    for (at, secs) in [
        (Some(now + time::Duration::minutes(5)), Some(60)),
        (Some(now - time::Duration::minutes(5)), None),
        (None, Some(0)),
        (None, Some(7200)), // beyond the configured maximum of an hour
    ] {
        let d = s.run(&with_deadline(
            open("eff_1", S, pr_approval()),
            at,
            secs,
            OnExpiry::Decide,
        ));
        assert_eq!(code_of(&d), ErrorCode::DeadlineInvalid, "{at:?} {secs:?}");
        assert!(!d.writes());
    }
}

#[test]
fn an_opening_stores_its_deadline_and_schedules_the_warning_and_the_expiry() {
    let mut s = store(true);
    let d = s.run(&with_deadline(
        open("eff_1", S, pr_approval()),
        None,
        Some(600),
        OnExpiry::Decide,
    ));
    let i = s.interaction("eff_1");
    let at = i.expires_at.expect("deadline");
    assert_eq!(at, i.opened_at + Duration::from_secs(600));
    let stages: Vec<(OffsetDateTime, DeadlineStage)> = d
        .effects
        .schedules
        .iter()
        .map(|sch| match &sch.command.command {
            Command::Expire {
                stage, expires_at, ..
            } => {
                assert_eq!(*expires_at, at);
                (sch.at, *stage)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        stages,
        vec![
            (at - Duration::from_secs(30), DeadlineStage::Warn),
            (at, DeadlineStage::Expire)
        ]
    );
    // The task's status carries it (A2A status metadata).
    let status = d
        .effects
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventData::TaskStatus(t) => t.interaction.clone(),
            _ => None,
        })
        .expect("status");
    assert_eq!(status.expires_at, Some(at));
}

#[test]
fn an_expired_approval_is_denied_once_and_a_late_answer_is_told_it_expired() {
    let mut s = store(true);
    s.run(&approval_in_a_minute());
    let warn = tick(&s, "eff_1", DeadlineStage::Warn);
    let d = s.run(&warn);
    assert_eq!(names(&d.effects.events), ["interaction-expiring"]);
    let expire = tick(&s, "eff_1", DeadlineStage::Expire);
    let d = s.run(&expire);
    assert_eq!(d.outcome.result, Ok(Accepted::Expired));
    assert_eq!(
        names(&d.effects.events),
        ["interaction-resolved", "tool-call-finished", "task-status"]
    );
    assert_eq!(d.effects.audit.len(), 1);
    let i = s.interaction("eff_1");
    assert_eq!(i.state, State::Finished);
    let r = i.resolution.as_ref().expect("resolution");
    assert_eq!(r.resolved_by, Resolver::Expiry);
    assert_eq!(
        r.answer,
        Answer::Approval {
            approved: false,
            reason: Some("expired".into()),
            edited_arguments: None,
        }
    );
    assert!(matches!(
        &i.result,
        Some(CallResult::Error { code, .. }) if code == "tool.denied"
    ));
    // The schedule firing again is a replay: nothing new.
    let again = s.run(&expire);
    assert!(again.replay || again.effects.events.is_empty());
    assert_eq!(again.outcome.result, Ok(Accepted::Expired));
    // A person answering now: NRY-0009, saying it expired.
    let late = s.run(&answer("eff_1", "k-1", approved(true)));
    let r = late.outcome.result.as_ref().expect_err("refused");
    assert_eq!(r.code, ErrorCode::AlreadySettled);
    assert!(r.message.contains("expired"), "{}", r.message);
    assert!(!late.writes());
}

#[test]
fn an_answer_first_makes_the_expiry_a_no_op() {
    let mut s = store(true);
    s.run(&approval_in_a_minute());
    let expire = tick(&s, "eff_1", DeadlineStage::Expire);
    let d = s.run(&answer("eff_1", "k-1", approved(true)));
    assert_eq!(d.outcome.result, Ok(Accepted::Resolved));
    let before = s.revisions();
    let d = s.run(&expire);
    assert_eq!(d.outcome.result, Ok(Accepted::Unchanged));
    assert!(!d.writes());
    assert_eq!(s.revisions(), before);
    assert_eq!(
        s.interaction("eff_1")
            .resolution
            .as_ref()
            .unwrap()
            .resolved_by,
        Resolver::Person
    );
}

#[test]
fn a_moved_or_cleared_deadline_makes_the_old_schedule_a_no_op() {
    let mut s = store(true);
    s.run(&approval_in_a_minute());
    let old = tick(&s, "eff_1", DeadlineStage::Expire);
    let id = s.interaction("eff_1").id.clone();
    let d = s.run(&env(Command::Deadline {
        interaction_id: id.clone(),
        task_id: None,
        expires_at: None,
        expires_in: Some(120),
        change_id: None,
    }));
    assert_eq!(d.outcome.result, Ok(Accepted::Rescheduled));
    assert_eq!(d.effects.schedules.len(), 2);
    let d = s.run(&old);
    assert_eq!(d.outcome.result, Ok(Accepted::Unchanged));
    assert_eq!(s.interaction("eff_1").state, State::Pending);
    // Cleared: no schedule, no deadline.
    let d = s.run(&env(Command::Deadline {
        interaction_id: id,
        task_id: None,
        expires_at: None,
        expires_in: None,
        change_id: None,
    }));
    assert_eq!(d.outcome.result, Ok(Accepted::Rescheduled));
    assert!(d.effects.schedules.is_empty());
    assert_eq!(s.interaction("eff_1").expires_at, None);
}

#[test]
fn each_kind_expires_with_its_default() {
    let mut s = store(true);
    s.run(&in_a_minute(
        open_on("q-1", S, LANE, example_question_req()),
        OnExpiry::Decide,
    ));
    s.run(&in_a_minute(
        open_on("con-1", S, LANE, connection_req("Linear", "file")),
        OnExpiry::Decide,
    ));
    s.run(&in_a_minute(
        open_on("eff_2", S, LANE, pr_approval()),
        OnExpiry::Close,
    ));
    let q = tick(&s, "q-1", DeadlineStage::Expire);
    let d = s.run(&q);
    assert_eq!(d.outcome.result, Ok(Accepted::Closed));
    assert_eq!(
        s.interaction("q-1").closure.as_ref().unwrap().reason,
        CloseReason::Expired
    );
    assert!(matches!(
        &s.interaction("q-1").result,
        Some(CallResult::Ok { output }) if output["expired"] == true
    ));
    let c = tick(&s, "con-1", DeadlineStage::Expire);
    s.run(&c);
    assert!(matches!(
        &s.interaction("con-1").result,
        Some(CallResult::Ok { output }) if output == "Not connected: Linear"
    ));
    let a = tick(&s, "eff_2", DeadlineStage::Expire);
    let d = s.run(&a);
    assert_eq!(d.outcome.result, Ok(Accepted::Closed));
    // Closed by its deadline, the approval was still not approved: the audit says
    // it expired (one record, no person).
    assert_eq!(d.effects.audit.len(), 1, "{:?}", d.effects.audit);
    assert!(matches!(
        &d.effects.audit[0].body,
        holdpoint_domain::EventData::ApprovalDecided {
            approved: false,
            outcome: holdpoint_domain::AuditOutcome::Expired,
            approved_by: None,
            ..
        }
    ));
    assert!(matches!(
        &s.interaction("eff_2").result,
        Some(CallResult::Error { code, .. }) if code == "interaction.closed"
    ));
}

/// A runtime's `deadline`, named by change `change`, setting the deadline `secs`
/// from now.
fn deadline_in(id: &str, secs: u64, change: Option<&str>) -> CommandEnvelope {
    env(Command::Deadline {
        interaction_id: holdpoint_domain::InteractionId::parse(id).expect("id"),
        task_id: None,
        expires_at: None,
        expires_in: Some(secs),
        change_id: change.map(|c| holdpoint_domain::MessageId::parse(c).expect("change")),
    })
}

#[test]
fn a_deadline_set_back_to_an_earlier_one_moves_when_each_change_is_named() {
    let mut s = store(true);
    s.run(&approval_in_a_minute());
    let first = s.interaction("eff_1").expires_at;
    // 120 s, then 300 s, then 120 s again: three changes, three ids.
    for (n, secs) in [120, 300, 120].into_iter().enumerate() {
        let change = format!("chg-{n}");
        let d = s.run(&deadline_in("eff_1", secs, Some(&change)));
        assert_eq!(d.outcome.result, Ok(Accepted::Rescheduled), "{secs}");
        assert!(!d.replay, "change {n} is not a replay");
    }
    let last = s.interaction("eff_1").expires_at.expect("deadline");
    let opened = s.interaction("eff_1").opened_at;
    assert_ne!(Some(last), first);
    assert!(
        last - opened < time::Duration::seconds(300),
        "the deadline went back to 120 s: {last}"
    );
    // The same change again is a replay of itself.
    let again = s.run(&deadline_in("eff_1", 120, Some("chg-2")));
    assert!(again.replay || !again.writes());
    // Without change ids, the third setting has the first one's id: the record
    // still lists it, so it is taken for that setting and the deadline stays put
    // (why the clients name every change).
    let mut t = store(true);
    t.run(&approval_in_a_minute());
    t.run(&deadline_in("eff_1", 120, None));
    t.run(&deadline_in("eff_1", 300, None));
    let stuck = t.interaction("eff_1").expires_at;
    let d = t.run(&deadline_in("eff_1", 120, None));
    assert!(d.replay);
    assert_eq!(t.interaction("eff_1").expires_at, stuck);
}

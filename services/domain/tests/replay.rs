//! Table tests of `decide` for redeliveries: a recorded transition replays with the
//! same outcome and effects, and the unconfirmed marker names each partition that
//! owes effects once.

mod common;

use common::*;
use holdpoint_domain::{
    Accepted, AnswerRoute, CloseReason, CommandEnvelope, CommandId, Ctx, Effects, Event, EventData,
    OrgId, SessionMode, decide,
};
use serde_json::json;

// ================================================================ replay

#[test]
fn a_redelivered_command_replays_its_recorded_transition() {
    let mut s = Store::new();
    let steps: Vec<CommandEnvelope> = vec![
        session_open(S, SessionMode::Blocking),
        session_open(P, SessionMode::Product),
        open(APPROVAL, S, pr_approval()),
        answer_via(AnswerRoute::Approve, APPROVAL, "k-1", approved(true)),
        tool_result(APPROVAL, ok_output(json!("done"))),
        open(QUESTION, S, example_question_req()),
        close(QUESTION, CloseReason::Interrupted),
        open(CONNECTION, S, connection_req("Linear", "why")),
        answer_a2a(
            CONNECTION,
            "m-2",
            TASK,
            CONTEXT,
            value(json!({"connected": true})),
        ),
        open("pq-1", P, example_question_req()),
        turn_start(P, LANE, "turn-1"),
        answer("pq-1", "k-1", example_answers()),
        message(P, "side", "m-1", "hello"),
        turn_finish(P, LANE, "turn-1"),
        session_close(S),
    ];
    for env in &steps {
        let first = s.run(env);
        assert!(!first.replay, "{}", env.verb());
        assert!(first.writes(), "{} wrote something", env.verb());
        let before = s.revisions();
        assert_replays(&mut s, env, &first);
        // Redelivered through the worker: nothing written, the same events again.
        let published = s.published.events.len();
        let again = s.deliver(env, true);
        assert!(again.replay);
        assert_eq!(s.revisions(), before);
        assert_eq!(
            s.published.events[published..].to_vec(),
            first.effects.events,
            "{}",
            env.verb()
        );
        // Decided directly on the records, the replay is the same.
        let loaded = s.load(env);
        let direct = decide(
            loaded.snapshot(),
            env,
            &Ctx::new(env, s.now + time::Duration::hours(1), None),
        );
        assert!(direct.replay);
        assert_eq!(direct.effects, first.effects, "{}", env.verb());
    }
}

#[test]
fn the_unconfirmed_marker_names_each_partition_that_owes_effects_once() {
    use holdpoint_domain::{Outbox, Outcome, Transition};
    let at = time::OffsetDateTime::UNIX_EPOCH;
    let org = OrgId::parse("acme").expect("org");
    let owing = |id: &str, partition: Option<u32>| {
        let mut effects = Effects::default();
        effects.audit.push(Event::new(
            &org,
            None,
            id,
            "marker",
            at,
            EventData::DeadLetter {
                subject: "s".into(),
                stream_sequence: 1,
                reason: "r".into(),
            },
        ));
        Transition {
            command_id: CommandId::from_raw(id),
            at,
            partition,
            confirmed: false,
            outcome: Outcome::ok(&CommandId::from_raw(id), Accepted::Unchanged),
            effects,
        }
    };
    let mut outbox = Outbox::default();
    assert_eq!(outbox.unconfirmed_marker(), None);
    outbox.push(owing("a", Some(3)));
    outbox.push(owing("b", Some(3)));
    outbox.push(owing("c", None));
    outbox.push(owing("d", Some(1)));
    assert_eq!(outbox.unconfirmed_marker().as_deref(), Some("-,1,3"));
    outbox.confirm(|t| t.command_id != "b");
    assert_eq!(outbox.unconfirmed_marker().as_deref(), Some("3"));
    outbox.confirm(|_| true);
    assert_eq!(outbox.unconfirmed_marker(), None);
}

/// The `Nats-Msg-Id`s of lane messages and deadline schedules are dedup keys: they
/// are the ones Holdpoint always published (taken from the bus's code before they
/// moved into the domain, and recomputed independently), or a message published
/// before an upgrade would be stored again after it.
#[test]
fn publish_ids_do_not_change() {
    use holdpoint_domain::{
        Command, DeadlineStage, InteractionId, LaneId, LaneMessage, MessageId, PersonId, Scheduled,
        SessionId, TaskId,
    };
    let id = |s: &str| s.to_owned();
    let at = time::macros::datetime!(2026-04-01 10:00:00 UTC);
    let mut m = LaneMessage {
        org: OrgId::parse(id("acme")).expect("org"),
        session: SessionId::parse(id("s-1")).expect("session"),
        lane: LaneId::parse(id("main")).expect("lane"),
        message_id: MessageId::parse(id("m-1")).expect("message"),
        by: PersonId::parse(id("alice")).expect("person"),
        content: holdpoint_domain::LaneContent::Text { text: id("hi") },
        at,
    };
    assert_eq!(m.msg_id(), "lane-40a0ce6ec22234d0ea769244adbdb834862b9bda");
    m.lane = LaneId::parse(id("side")).expect("lane");
    assert_eq!(m.msg_id(), "lane-d9aaf9e8fd1646f1f7081f7c80e0c35a14522e8b");
    let s = Scheduled {
        at,
        command: CommandEnvelope {
            org: OrgId::parse(id("acme")).expect("org"),
            command: Command::Expire {
                interaction_id: InteractionId::parse(id("appr-1")).expect("interaction"),
                task_id: TaskId::parse(id("t-1")).expect("task"),
                expires_at: at,
                stage: DeadlineStage::Expire,
            },
        },
        set_by: CommandId::from_raw("cmd-0123"),
    };
    assert_eq!(
        s.command.command_id(),
        "cmd-9b1c3a692da1d9b228216b609d89cc8f971c20be"
    );
    assert_eq!(s.msg_id(), "sched-5bbb0e22e35b9cc7686d8a5cea0bfaf1f9021a00");
}

//! Table tests of `decide` on product sessions: questions listed on their lane,
//! answers delivered, kept or queued by the lane's state and capacity, messages
//! superseding questions, and interrupted transitions completing.

mod common;

use common::*;
use holdpoint_domain::{
    Accepted, Admission, Answer, AnswerRoute, CloseReason, Command, CommandEnvelope, Effects,
    ErrorCode, EventData, LaneContent, SessionMode, State, TaskState,
};

// ================================================================ product sessions

#[test]
fn a_product_question_is_listed_on_its_lane() {
    let mut s = Fixture::new().product(P, 8).store();
    let d = accept(
        &mut s,
        &open(QUESTION, P, example_question_req()),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    match data(&d.effects.events, "question-asked") {
        EventData::QuestionAsked { mode, .. } => assert_eq!(*mode, SessionMode::Product),
        other => panic!("{other:?}"),
    }
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.mode, SessionMode::Product);
    let l = s.lane(P, LANE);
    assert_eq!(open_ids(&l), vec![iid(QUESTION)]);
    // An approval on a product session still blocks and is not listed.
    accept(
        &mut s,
        &open(APPROVAL, P, pr_approval()),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    let l = s.lane(P, LANE);
    assert_eq!(open_ids(&l), vec![iid(QUESTION)]);
}

#[test]
fn a_product_answer_on_an_idle_lane_starts_the_next_turn() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let d = accept(
        &mut s,
        &answer_via(AnswerRoute::Question, QUESTION, "k-1", example_answers()),
        Accepted::Resolved,
        &[
            "interaction-resolved",
            "lane-message",
            "turn-started",
            "task-status",
        ],
    );
    let recorded = Answer::Question {
        answers: vec![oa(&[0]), oa_text(&[2], "Keep both and reconcile nightly.")],
    };
    let content = LaneContent::Answer {
        question_id: iid(QUESTION),
        answer: recorded.clone(),
    };
    assert_eq!(
        data(&d.effects.events, "lane-message"),
        &EventData::LaneMessage {
            session: sid(P),
            lane: lane(LANE),
            message_id: mid(QUESTION),
            admission: Admission::Admitted,
            by: person(PERSON),
            content: content.clone(),
        }
    );
    assert_eq!(
        data(&d.effects.events, "turn-started"),
        &turn_started(QUESTION)
    );
    assert_eq!(task_status(&d.effects.events).state, TaskState::Working);
    assert_eq!(d.effects.lane_messages.len(), 1);
    let lm = &d.effects.lane_messages[0];
    assert_eq!(
        lm.message_id,
        mid(QUESTION),
        "the question id is the message id"
    );
    assert_eq!(lm.content, content);
    assert_eq!(lm.by, person(PERSON));
    assert!(
        !d.effects
            .events
            .iter()
            .any(|e| e.name() == "tool-call-finished"),
        "nothing was blocked"
    );
    assert!(d.effects.audit.is_empty());

    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Resolved);
    assert_eq!(rec.result, None);
    assert_eq!(
        rec.resolution.as_ref().map(|r| r.answer.clone()),
        Some(recorded)
    );
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid(QUESTION)));
    assert!(l.queue.is_empty());
    assert!(l.open_questions.is_empty());
    let delivery = l.delivery(&mid(QUESTION)).expect("delivery recorded");
    assert_eq!(delivery.admission, Admission::Admitted);
    assert_eq!(
        delivery.answer.as_ref().map(|a| a.key.clone()),
        Some(key("k-1"))
    );
}

#[test]
fn a_product_answer_on_a_busy_lane_is_kept_and_queued() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let d = accept(
        &mut s,
        &turn_start(P, LANE, "turn-1"),
        Accepted::Admitted,
        &["turn-started"],
    );
    assert_eq!(d.effects.events[0].body, turn_started("turn-1"));

    let env = answer(QUESTION, "k-1", example_answers());
    let d = s.run(&env);
    assert_eq!(code_of(&d), ErrorCode::LaneBusy);
    assert_eq!(ErrorCode::LaneBusy.spec().code, "NRY-0031");
    assert!(d.lane.is_some(), "the lane queues the answer");
    assert!(d.interaction.is_some(), "the answer is recorded");
    assert_eq!(
        names(&d.effects.events),
        ["interaction-resolved", "lane-message", "task-status"]
    );
    match data(&d.effects.events, "lane-message") {
        EventData::LaneMessage { admission, .. } => assert_eq!(*admission, Admission::Queued),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.effects.lane_messages.len(), 1);
    let rec = s.interaction(QUESTION).clone();
    assert_eq!(rec.state, State::Resolved);
    let r = rec.resolution.clone().expect("resolution");
    assert_eq!(r.outcome.result, d.outcome.result);
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid("turn-1")));
    assert_eq!(l.queue, [mid(QUESTION)]);
    assert!(l.open_questions.is_empty());

    // A second press with another body (and key): the same outcome, the first answer.
    let second = answer(QUESTION, "k-2", answers(vec![oa(&[1]), oa(&[0])]));
    let before = s.revisions();
    let d2 = s.run(&second);
    assert_eq!(d2.outcome.result, d.outcome.result);
    assert!(d2.session.is_none() && d2.interaction.is_none());
    assert_eq!(d2.effects, Effects::default());
    assert_eq!(s.revisions(), before);
    assert_eq!(s.interaction(QUESTION).resolution, Some(r.clone()));
    // The same key again: the recorded transition.
    assert_replays(&mut s, &env, &d);

    // The running turn ends: the answer's turn starts.
    let d = accept(
        &mut s,
        &turn_finish(P, LANE, "turn-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    assert_eq!(d.effects.events[0].body, turn_started(QUESTION));
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid(QUESTION)));
    assert!(l.queue.is_empty());
    assert_eq!(s.interaction(QUESTION).resolution, Some(r));
}

#[test]
fn a_product_answer_on_a_full_lane_is_not_delivered_and_a_retry_succeeds() {
    let mut s = Fixture::new().product(P, 1).store();
    accept(
        &mut s,
        &turn_start(P, LANE, "turn-1"),
        Accepted::Admitted,
        &["turn-started"],
    );
    let d = s.run(&message(P, LANE, "m-1", "one more thing"));
    assert_eq!(code_of(&d), ErrorCode::LaneBusy, "the message is queued");
    accept(
        &mut s,
        &open(QUESTION, P, example_question_req()),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    let env = answer(QUESTION, "k-1", example_answers());
    let d = refuse(&mut s, &env, ErrorCode::AnswerNotDelivered);
    assert_eq!(ErrorCode::AnswerNotDelivered.spec().code, "NRY-0032");
    assert!(
        d.outcome
            .result
            .expect_err("refused")
            .message
            .contains("pending again")
    );
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Pending, "the question is pending again");
    assert!(rec.resolution.is_none());
    let l = s.lane(P, LANE);
    assert_eq!(open_ids(&l), vec![iid(QUESTION)], "still open on the lane");
    assert!(l.delivery(&mid(QUESTION)).is_none());

    // The lane frees: turn-1 ends (m-1 runs), then m-1 ends.
    accept(
        &mut s,
        &turn_finish(P, LANE, "turn-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    accept(
        &mut s,
        &turn_finish(P, LANE, "m-1"),
        Accepted::Unchanged,
        &[],
    );
    assert_eq!(s.lane(P, LANE).running, None);
    // The retry with the same key is delivered.
    accept(
        &mut s,
        &env,
        Accepted::Resolved,
        &[
            "interaction-resolved",
            "lane-message",
            "turn-started",
            "task-status",
        ],
    );
    assert_eq!(s.interaction(QUESTION).state, State::Resolved);
}

#[test]
fn a_retry_after_a_full_lane_is_queued_once_there_is_room() {
    let mut s = Fixture::new().product(P, 1).store();
    s.run(&turn_start(P, LANE, "turn-1"));
    s.run(&message(P, LANE, "m-1", "first"));
    s.run(&open(QUESTION, P, example_question_req()));
    let env = answer(QUESTION, "k-1", example_answers());
    refuse(&mut s, &env, ErrorCode::AnswerNotDelivered);
    s.run(&turn_finish(P, LANE, "turn-1"));
    // m-1 runs, the queue has room again: the answer is kept (409 NRY-0031).
    let d = s.run(&env);
    assert_eq!(code_of(&d), ErrorCode::LaneBusy);
    assert_eq!(
        names(&d.effects.events),
        ["interaction-resolved", "lane-message", "task-status"]
    );
    assert_eq!(s.interaction(QUESTION).state, State::Resolved);
}

#[test]
fn a_product_answer_on_a_closed_or_ended_session() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    accept(
        &mut s,
        &session_close(P),
        Accepted::Closed,
        &["session-closed"],
    );
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::AnswerNotDelivered,
    );
    assert_eq!(s.interaction(QUESTION).state, State::Pending);
    assert!(s.lane(P, LANE).delivery(&mid(QUESTION)).is_none());
    // A closed session refuses messages too, and keeps nothing.
    refuse(
        &mut s,
        &message(P, LANE, "m-1", "hello"),
        ErrorCode::LaneRefused,
    );

    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    s.run(&session_end(P));
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::SessionNotFound,
    );
}

#[test]
fn a_message_on_the_lane_supersedes_its_open_question() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    // A question on another lane stays open.
    s.run(&open_on("q-side", P, "side", example_question_req()));
    let d = accept(
        &mut s,
        &message(P, LANE, "m-1", "never mind, use Postgres"),
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    assert_eq!(
        d.effects.follow_ups,
        vec![CommandEnvelope {
            org: org(),
            command: Command::Close {
                interaction_id: iid(QUESTION),
                reason: CloseReason::Superseded,
                by_message: Some(mid("m-1")),
                task_id: Some(task(TASK)),
            },
        }]
    );
    assert_eq!(d.effects.lane_messages.len(), 1);
    assert_eq!(
        d.effects.lane_messages[0].content,
        LaneContent::Text {
            text: "never mind, use Postgres".into()
        }
    );
    let l = s.lane(P, LANE);
    assert!(l.open_questions.is_empty());
    assert_eq!(l.running, Some(mid("m-1")));
    assert!(l.superseded(&iid(QUESTION)));
    let side = s.lane(P, "side");
    assert_eq!(open_ids(&side), vec![iid("q-side")]);

    // Applying the follow-up closes the question, without a tool-call-finished.
    let follow = d.effects.follow_ups[0].clone();
    let c = accept(
        &mut s,
        &follow,
        Accepted::Closed,
        &["interaction-closed", "task-status"],
    );
    assert_eq!(
        c.effects.events[0].body,
        EventData::InteractionClosed {
            interaction_id: iid(QUESTION),
            reason: CloseReason::Superseded
        }
    );
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Closed);
    assert_eq!(rec.result, None);
    let closure = rec.closure.clone().expect("closure");
    assert_eq!(closure.reason, CloseReason::Superseded);
    assert_eq!(closure.by_message, Some(mid("m-1")));

    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction("q-side").state, State::Pending);
}

#[test]
fn an_answer_after_the_superseding_message_but_before_its_close_is_already_settled() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let d = s.run(&message(P, LANE, "m-1", "never mind"));
    assert_eq!(d.effects.follow_ups.len(), 1);
    // The follow-up close has not run yet: the question was closed by the message all
    // the same, so the answer is not delivered as a second message.
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::AlreadySettled,
    );
    let l = s.lane(P, LANE);
    assert!(l.delivery(&mid(QUESTION)).is_none());
    accept(
        &mut s,
        &d.effects.follow_ups[0],
        Accepted::Closed,
        &["interaction-closed", "task-status"],
    );
}

#[test]
fn host_close_of_a_product_question_unlists_it() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let d = accept(
        &mut s,
        &close(QUESTION, CloseReason::Expired),
        Accepted::Closed,
        &["interaction-closed", "task-status"],
    );
    assert!(d.lane.is_some(), "the lane forgets the question");
    assert!(s.lane(P, LANE).open_questions.is_empty());
    assert_eq!(s.interaction(QUESTION).state, State::Closed);
    // A later message closes nothing.
    let m = accept(
        &mut s,
        &message(P, LANE, "m-1", "hi"),
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    assert!(m.effects.follow_ups.is_empty());
}

#[test]
fn a_host_close_racing_a_taken_answer_does_not_strand_the_lane() {
    // The answer's worker wrote the lane (the message is on it) and has not written
    // the interaction yet when the host closes the question.
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let ans = answer(QUESTION, "k-1", example_answers());
    let loaded = s.load(&ans);
    let d = s.decide_on(&loaded, &ans);
    s.write_lane(&ans, &loaded, &d)
        .expect("the answer's lane write lands");

    let c = s.run(&close(QUESTION, CloseReason::Interrupted));
    assert_eq!(
        c.outcome.result.as_ref().map_err(|r| r.code),
        Err(ErrorCode::AlreadySettled),
        "the answer was taken to the lane first"
    );
    // The answer's worker finishes (here: its write lands or it decides again).
    let done = s.run(&ans);
    assert_eq!(done.outcome.result, Ok(Accepted::Resolved));
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Resolved);
    assert_eq!(s.lane(P, LANE).running, Some(mid(QUESTION)));
    assert!(
        s.published
            .events
            .iter()
            .any(|e| e.name() == "lane-message"),
        "the message the lane runs was announced"
    );
}

#[test]
fn messages_are_deduplicated_by_message_id() {
    let mut s = Fixture::new().product(P, 8).store();
    let env = message(P, LANE, "m-1", "hello");
    let first = accept(
        &mut s,
        &env,
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    assert_replays(&mut s, &env, &first);
    // The same id with another text: the same message.
    let again = message(P, LANE, "m-1", "hello again");
    assert_eq!(again.command_id(), env.command_id());
    s.forget_outboxes();
    noop(&mut s, &again, Accepted::Admitted);
    let l = s.lane(P, LANE);
    assert_eq!(l.delivered.len(), 1);
    assert_eq!(l.running, Some(mid("m-1")));

    // A queued message deduplicates to its queued outcome.
    let m2 = message(P, LANE, "m-2", "later");
    let d = s.run(&m2);
    assert_eq!(code_of(&d), ErrorCode::LaneBusy);
    assert_eq!(names(&d.effects.events), ["lane-message"]);
    s.forget_outboxes();
    let before = s.revisions();
    let d = s.run(&m2);
    assert_eq!(code_of(&d), ErrorCode::LaneBusy);
    assert!(d.effects.events.is_empty());
    assert_eq!(s.revisions(), before);
    assert_eq!(s.lane(P, LANE).queue, [mid("m-2")]);
}

#[test]
fn a_message_id_names_one_message_on_its_lane() {
    let mut s = Fixture::new().product(P, 8).store();
    let first = message(P, LANE, "m-1", "hello");
    accept(
        &mut s,
        &first,
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    // Message ids are keys of their lane (each lane is a record of its own): the same
    // id on another lane is another message, with another command id.
    let other = message(P, "side", "m-1", "hello on the side");
    assert_ne!(other.command_id(), first.command_id());
    accept(
        &mut s,
        &other,
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    assert_eq!(s.lane(P, "side").running, Some(mid("m-1")));
    assert_eq!(s.lane(P, LANE).running, Some(mid("m-1")));
}

#[test]
fn an_answer_after_a_host_close_took_the_question_off_its_lane_is_already_settled() {
    // The close's worker wrote the lane (it no longer lists the question) and has
    // not written the interaction yet when the answer comes.
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let c = close(QUESTION, CloseReason::Interrupted);
    let loaded = s.load(&c);
    let d = s.decide_on(&loaded, &c);
    s.write_lane(&c, &loaded, &d)
        .expect("the close's lane write lands");
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::AlreadySettled,
    );
    let l = s.lane(P, LANE);
    assert!(
        l.delivery(&mid(QUESTION)).is_none(),
        "nothing taken to the lane"
    );
    assert_eq!(l.running, None);
    // The close finishes.
    accept(
        &mut s,
        &c,
        Accepted::Closed,
        &["interaction-closed", "task-status"],
    );
    assert_eq!(s.interaction(QUESTION).state, State::Closed);
}

/// A message whose worker died after writing its lane and before publishing, then
/// redelivered after many later transitions of that lane, is still announced: an
/// outbox never drops a transition whose effects are not confirmed.
#[test]
fn a_message_redelivered_after_many_later_transitions_is_still_announced() {
    let mut s = Fixture::new().product(P, 8).store();
    let m = message(P, LANE, "m-1", "hello");
    let loaded = s.load(&m);
    let d = s.decide_on(&loaded, &m);
    s.apply(&m, &loaded, &d)
        .expect("written, then the worker dies");
    s.run(&turn_finish(P, LANE, "m-1"));
    for n in 0..2 * holdpoint_domain::OUTBOX_KEEP {
        let x = format!("x-{n}");
        s.run(&message(P, LANE, &x, "later"));
        s.run(&turn_finish(P, LANE, &x));
    }
    assert!(
        !s.published
            .lane_messages
            .iter()
            .any(|l| l.message_id == mid("m-1")),
        "m-1 was never published before its redelivery"
    );
    let again = s.deliver(&m, true);
    assert!(again.replay, "the redelivery finds its transition");
    assert!(
        s.published
            .lane_messages
            .iter()
            .any(|l| l.message_id == mid("m-1")),
        "m-1 was taken by the lane and is announced by its redelivery"
    );
}

#[test]
fn messages_on_a_full_lane_or_without_text_are_refused() {
    let mut s = Fixture::new().product(P, 1).store();
    s.run(&turn_start(P, LANE, "turn-1"));
    s.run(&message(P, LANE, "m-1", "queued"));
    refuse(
        &mut s,
        &message(P, LANE, "m-2", "no room"),
        ErrorCode::LaneRefused,
    );
    refuse(
        &mut s,
        &message(P, LANE, "m-3", "   "),
        ErrorCode::InvalidRequest,
    );
    let l = s.lane(P, LANE);
    assert!(l.delivery(&mid("m-2")).is_none());
    assert_eq!(l.queue, [mid("m-1")]);
}

#[test]
fn a_message_on_a_blocking_session_closes_nothing() {
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    let d = accept(
        &mut s,
        &message(S, LANE, "m-1", "hello"),
        Accepted::Admitted,
        &["lane-message", "turn-started"],
    );
    assert!(d.effects.follow_ups.is_empty());
    assert_eq!(s.interaction(QUESTION).state, State::Pending);
}

#[test]
fn a_product_open_interrupted_before_its_record_is_closed_by_the_message() {
    // The open's lane and task writes land (the question is listed), the worker dies
    // before writing the interaction; a message then supersedes the question.
    let mut s = Fixture::new().product(P, 8).store();
    let env = open(QUESTION, P, example_question_req());
    let loaded = s.load(&env);
    let d = s.decide_on(&loaded, &env);
    s.write_lane(&env, &loaded, &d).expect("lane write");
    s.write_task(&env, &loaded, &d).expect("task write");
    let m = s.run(&message(P, LANE, "m-1", "hello"));
    assert_eq!(m.effects.follow_ups.len(), 1);
    refuse(&mut s, &m.effects.follow_ups[0], ErrorCode::NotFound);
    // The open is redelivered: the question is recorded closed.
    let d = s.deliver(&env, true);
    assert_eq!(d.outcome.result, Ok(Accepted::Opened));
    assert_eq!(
        names(&d.effects.events),
        ["question-asked", "interaction-closed", "task-status"]
    );
    assert!(
        s.task(TASK).pending.is_empty(),
        "the task no longer lists the superseded question"
    );
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Closed);
    assert_eq!(
        rec.closure.as_ref().map(|c| c.reason),
        Some(CloseReason::Superseded)
    );
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::AlreadySettled,
    );
}

#[test]
fn a_product_answer_interrupted_after_its_session_write_completes_with_its_answer() {
    let mut s = Fixture::new().product(P, 8).question(QUESTION, P).store();
    let first = answer(QUESTION, "k-1", example_answers());
    let loaded = s.load(&first);
    let d = s.decide_on(&loaded, &first);
    s.write_lane(&first, &loaded, &d).expect("lane write");
    // Before the redelivery, a second press with another body arrives.
    let second = answer(QUESTION, "k-2", answers(vec![oa(&[1]), oa(&[1])]));
    let d2 = s.run(&second);
    assert_eq!(d2.outcome.result, Ok(Accepted::Resolved));
    let r = s
        .interaction(QUESTION)
        .resolution
        .clone()
        .expect("resolved");
    assert_eq!(
        r.key,
        key("k-1"),
        "the answer taken to the lane is the recorded one"
    );
    assert_eq!(
        r.answer,
        d.interaction
            .as_ref()
            .and_then(|i| i.resolution.clone())
            .expect("first decision resolves")
            .answer
    );
    // The first is redelivered: the same outcome.
    let d1 = s.deliver(&first, true);
    assert_eq!(d1.outcome.result, Ok(Accepted::Resolved));
    assert_eq!(s.interaction(QUESTION).resolution, Some(r));
    let lane_messages = s
        .published
        .events
        .iter()
        .filter(|e| e.name() == "lane-message")
        .map(|e| e.id.clone())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(lane_messages.len(), 1);
}

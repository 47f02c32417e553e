//! The task record and the record bounds: what a task waits for when several
//! interactions are pending on it, one call held once, and how large session, lane
//! and interaction records may grow.

mod common;

use common::*;
use holdpoint_domain::session::{DELIVERED_ANSWER_BYTES, DELIVERIES_KEEP, LANE_RECORD_BOUND};
use holdpoint_domain::{
    Accepted, Command, CommandEnvelope, Decision, ErrorCode, EventData, OpenInteraction,
    SessionMode, TaskState,
};
use serde_json::json;

/// Holds call `call` as interaction `effect` on task [`TASK`].
fn hold(effect: &str, call: &str, tool: &str) -> CommandEnvelope {
    env(Command::Open(Box::new(OpenInteraction {
        interaction_id: iid(effect),
        session: sid(S),
        lane: lane(LANE),
        task_id: task(TASK),
        context_id: ctx(CONTEXT),
        call_id: holdpoint_domain::CallId::parse(call).expect("call id"),
        agent: None,
        request: approval_req("github", tool, json!({"tool": tool})),
        expires_at: None,
        expires_in: None,
        on_expiry: Default::default(),
        assignees: None,
        escalation: None,
    })))
}

#[track_caller]
fn status_of(d: &Decision) -> (TaskState, Option<String>) {
    let status = d
        .effects
        .events
        .iter()
        .rev()
        .find_map(|e| match &e.body {
            EventData::TaskStatus(t) => Some(t.clone()),
            _ => None,
        })
        .expect("a task-status event");
    (
        status.state,
        status.interaction.map(|i| i.interaction_id.to_string()),
    )
}

#[test]
fn a_task_waiting_on_several_interactions_names_the_oldest_until_none_is_pending() {
    let mut s = Fixture::new().blocking(S).store();
    let a = s.run(&hold("eff_A", "call-A", "tool_a"));
    assert_eq!(
        status_of(&a),
        (TaskState::AuthRequired, Some("eff_A".into()))
    );
    // Later holds on the same task: the task still names the oldest.
    for (e, c, t) in [("eff_B", "call-B", "tool_b"), ("eff_C", "call-C", "tool_c")] {
        let d = s.run(&hold(e, c, t));
        assert_eq!(
            status_of(&d),
            (TaskState::AuthRequired, Some("eff_A".into()))
        );
    }
    let pending: Vec<String> = s
        .task(TASK)
        .pending
        .iter()
        .map(|w| w.interaction_id.to_string())
        .collect();
    assert_eq!(pending, ["eff_A", "eff_B", "eff_C"]);

    // Answering the oldest names the next, and so on; working only once none waits.
    let d = s.run(&answer("eff_A", "k-a", approved(true)));
    assert_eq!(d.outcome.result, Ok(Accepted::Resolved));
    assert_eq!(
        status_of(&d),
        (TaskState::AuthRequired, Some("eff_B".into()))
    );
    assert_eq!(
        s.task(TASK)
            .waiting_on()
            .map(|w| w.interaction_id.to_string()),
        Some("eff_B".into())
    );
    // Answering one in the middle of the list leaves the oldest named.
    let d = s.run(&answer("eff_C", "k-c", approved(false)));
    assert_eq!(
        status_of(&d),
        (TaskState::AuthRequired, Some("eff_B".into()))
    );
    // A host close takes it off the list too.
    let d = s.run(&close("eff_B", holdpoint_domain::CloseReason::Interrupted));
    assert_eq!(status_of(&d), (TaskState::Working, None));
    assert!(s.task(TASK).pending.is_empty());
}

#[test]
fn a_question_and_an_approval_on_one_task_show_the_oldest_kind() {
    let mut s = Fixture::new().blocking(S).store();
    s.run(&open("q-1", S, example_question_req()));
    let d = s.run(&hold("eff_A", "call-A", "tool_a"));
    assert_eq!(
        status_of(&d),
        (TaskState::InputRequired, Some("q-1".into()))
    );
    let d = s.run(&answer("q-1", "k-1", example_answers()));
    assert_eq!(
        status_of(&d),
        (TaskState::AuthRequired, Some("eff_A".into()))
    );
}

#[test]
fn a_call_is_held_released_and_finished_once_per_task() {
    let mut s = Fixture::new().blocking(S).store();
    s.run(&hold("eff_A", "call-X", "tool_a"));
    // The identical hold again: a replay, fine.
    let again = s.run(&hold("eff_A", "call-X", "tool_a"));
    assert_eq!(again.outcome.result, Ok(Accepted::Opened));
    // The same call under another effect id while eff_A is pending: refused.
    let before = s.revisions();
    let d = s.run(&hold("eff_B", "call-X", "tool_b"));
    assert_eq!(code_of(&d), ErrorCode::CommandConflict);
    assert!(
        d.outcome
            .result
            .as_ref()
            .err()
            .is_some_and(|r| r.message.contains("eff_A")),
        "{:?}",
        d.outcome
    );
    assert_eq!(s.revisions(), before, "a refusal writes nothing");
    assert!(!s.has_interaction("eff_B"));
    // Released: still refused.
    s.run(&answer("eff_A", "k-1", approved(true)));
    assert_eq!(
        code_of(&s.run(&hold("eff_B", "call-X", "tool_b"))),
        ErrorCode::CommandConflict
    );
    // Finished: still refused; and the approval of eff_B can never happen.
    s.run(&tool_result("eff_A", ok_output(json!("done"))));
    assert_eq!(
        code_of(&s.run(&hold("eff_B", "call-X", "tool_b"))),
        ErrorCode::CommandConflict
    );
    assert_eq!(
        code_of(&s.run(&answer("eff_B", "k-2", approved(true)))),
        ErrorCode::NotFound
    );
    let released = s
        .published
        .events
        .iter()
        .filter(|e| matches!(&e.body, EventData::ToolCallReleased { call_id, .. } if call_id.as_str() == "call-X"))
        .count();
    let finished = s
        .published
        .events
        .iter()
        .filter(|e| matches!(&e.body, EventData::ToolCallFinished { call_id, .. } if call_id.as_str() == "call-X"))
        .count();
    assert_eq!((released, finished), (1, 1));
    // Another task may use the same call id.
    let mut other = hold("eff_C", "call-X", "tool_c");
    if let Command::Open(o) = &mut other.command {
        o.task_id = task("task-2");
    }
    assert_eq!(s.run(&other).outcome.result, Ok(Accepted::Opened));
}

#[test]
fn a_task_stays_in_its_context() {
    let mut s = Fixture::new().blocking(S).store();
    s.run(&hold("eff_A", "call-A", "tool_a"));
    let mut elsewhere = hold("eff_B", "call-B", "tool_b");
    if let Command::Open(o) = &mut elsewhere.command {
        o.context_id = ctx("another-context");
    }
    assert_eq!(code_of(&s.run(&elsewhere)), ErrorCode::CommandConflict);
}

fn json_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

#[test]
fn a_session_with_ten_thousand_lanes_keeps_a_small_header() {
    let mut s = Fixture::new().session(P, SessionMode::Product).store();
    let header = json_len(s.session(P));
    for n in 0..10_000 {
        let d = s.run(&message(P, &format!("lane-{n}"), "m-1", "hello"));
        assert_eq!(d.outcome.result, Ok(Accepted::Admitted), "lane-{n}");
    }
    assert_eq!(s.lanes.len(), 10_000);
    // Every lane is a record of its own; the session header does not grow.
    assert_eq!(json_len(s.session(P)), header);
    let largest = s
        .lanes
        .values()
        .map(|r| json_len(&r.value))
        .max()
        .unwrap_or(0);
    assert!(
        largest < 4096,
        "a one-message lane record is {largest} bytes"
    );
}

#[test]
fn a_lane_with_a_thousand_product_answers_stays_under_its_bound() {
    let mut s = Fixture::new().session(P, SessionMode::Product).store();
    // Large answers: free text close to the limit.
    let big = "x".repeat(7_000);
    let mut largest = 0;
    for n in 0..1_000 {
        let q = format!("q-{n}");
        let d = s.run(&open(&q, P, example_question_req()));
        assert_eq!(d.outcome.result, Ok(Accepted::Opened), "{q}");
        let d = s.run(&answer(
            &q,
            "k-1",
            answers(vec![oa(&[0]), oa_text(&[2], &big)]),
        ));
        assert_eq!(d.outcome.result, Ok(Accepted::Resolved), "{q}");
        s.run(&turn_finish(P, LANE, &q));
        largest = largest.max(json_len(&s.lane(P, LANE)));
    }
    let l = s.lane(P, LANE);
    assert_eq!(l.delivered.len(), DELIVERIES_KEEP);
    let kept: usize = l
        .delivered
        .iter()
        .filter_map(|d| d.answer.as_ref()?.answer.as_ref())
        .map(json_len)
        .sum();
    assert!(
        kept <= DELIVERED_ANSWER_BYTES,
        "{kept} bytes of answers kept"
    );
    assert!(
        largest < LANE_RECORD_BOUND,
        "the lane record reached {largest} bytes"
    );
    // Every answer got through once; the oldest deliveries are pruned, not the
    // answers: each interaction keeps its own.
    assert_eq!(
        s.interaction("q-0")
            .resolution
            .as_ref()
            .map(|r| r.key.as_str()),
        Some("k-1")
    );
}

//! Table tests of `decide` for redeliveries: a recorded transition replays with the
//! same outcome and effects, and the unconfirmed marker names each partition that
//! owes effects once.

mod common;

use common::*;
use holdpoint_domain::{AnswerRoute, CloseReason, CommandEnvelope, Ctx, SessionMode, decide};
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

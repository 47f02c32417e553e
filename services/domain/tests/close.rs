//! Table tests of `decide` for the host closing an interaction: a blocked call
//! finishes once, a settled interaction stays settled.

mod common;

use common::*;
use holdpoint_domain::{
    Accepted, CallResult, CloseReason, ErrorCode, EventData, Kind, OpenRequest, State,
};

// ================================================================ host close

#[test]
fn host_close_finishes_a_blocked_call_once() {
    let rows: Vec<(&str, OpenRequest, Kind)> = vec![
        (APPROVAL, pr_approval(), Kind::Approval),
        (QUESTION, example_question_req(), Kind::Question),
        (
            CONNECTION,
            connection_req("Linear", "why"),
            Kind::Connection,
        ),
    ];
    for (id, req, kind) in rows {
        let mut s = Fixture::new().blocking(S).store();
        s.run(&open(id, S, req));
        let env = close(id, CloseReason::Interrupted);
        let d = accept(
            &mut s,
            &env,
            Accepted::Closed,
            &["interaction-closed", "tool-call-finished", "task-status"],
        );
        assert_eq!(
            d.effects.events[0].body,
            EventData::InteractionClosed {
                interaction_id: iid(id),
                reason: CloseReason::Interrupted
            }
        );
        let closed = CallResult::Error {
            code: "interaction.closed".into(),
            message: "The interaction was closed (interrupted).".into(),
        };
        assert_eq!(
            d.effects.events[1].body,
            EventData::ToolCallFinished {
                call_id: call_of(id),
                interaction_id: iid(id),
                kind,
                result: closed.clone(),
            }
        );
        let rec = s.interaction(id);
        assert_eq!(rec.state, State::Closed);
        assert_eq!(rec.result, Some(closed));
        let closure = rec.closure.as_ref().expect("closure");
        assert_eq!(closure.reason, CloseReason::Interrupted);
        assert_eq!(closure.by_message, None);

        // Closing again: the same command replays; another reason is a no-op.
        assert_replays(&mut s, &env, &d);
        noop(&mut s, &close(id, CloseReason::Expired), Accepted::Closed);
        s.forget_outboxes();
        noop(&mut s, &env, Accepted::Closed);
        assert_eq!(
            s.interaction(id).closure.as_ref().map(|c| c.reason),
            Some(CloseReason::Interrupted)
        );
    }
}

#[test]
fn host_close_of_an_answered_interaction_is_already_settled() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    s.run(&answer(APPROVAL, "k-1", approved(true)));
    refuse(
        &mut s,
        &close(APPROVAL, CloseReason::Canceled),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction(APPROVAL).state, State::Resolved);

    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    s.run(&answer(QUESTION, "k-1", example_answers()));
    refuse(
        &mut s,
        &close(QUESTION, CloseReason::Interrupted),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction(QUESTION).state, State::Finished);

    let mut s = Fixture::new().blocking(S).store();
    refuse(
        &mut s,
        &close("missing", CloseReason::Interrupted),
        ErrorCode::NotFound,
    );
}

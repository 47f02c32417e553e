//! Table tests of `decide` for answers on blocking sessions, per kind (questions,
//! approvals, connections), then their idempotency and conflicts: the exact outcome,
//! the records left behind and the exact events emitted.

mod common;

use common::*;
use holdpoint_domain::event::{AuditOutcome, Decider, TaskStatusData};
use holdpoint_domain::rules::arguments_digest;
use holdpoint_domain::{
    Accepted, Answer, AnswerRoute, CallResult, CloseReason, Command, CommandEnvelope, ErrorCode,
    EventData, Kind, OrgId, State, TaskState,
};
use serde_json::{Value, json};

// ================================================================ blocking answers: questions

#[test]
fn rest_example_answer_resolves_and_finishes_the_question() {
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    let d = accept(
        &mut s,
        &answer_via(AnswerRoute::Question, QUESTION, "k-1", example_answers()),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    let recorded = Answer::Question {
        answers: vec![oa(&[0]), oa_text(&[2], "Keep both and reconcile nightly.")],
    };
    assert_eq!(
        data(&d.effects.events, "interaction-resolved"),
        &EventData::InteractionResolved {
            interaction_id: iid(QUESTION),
            kind: Kind::Question,
            answer: recorded.clone(),
            by: person(PERSON),
            key: key("k-1"),
            resolved_by: holdpoint_domain::Resolver::Person,
            rule: None,
        }
    );
    let expected_output = json!({"answers": [
        {"question": "Which database should the service use?", "options": [0], "labels": ["Postgres"]},
        {"question": "How should conflicting rows be handled?", "options": [2], "labels": ["Keep both"],
         "text": "Keep both and reconcile nightly."}
    ]});
    assert_eq!(
        data(&d.effects.events, "tool-call-finished"),
        &EventData::ToolCallFinished {
            call_id: call_of(QUESTION),
            interaction_id: iid(QUESTION),
            kind: Kind::Question,
            result: CallResult::Ok {
                output: expected_output.clone()
            },
        }
    );
    assert_eq!(
        task_status(&d.effects.events),
        &TaskStatusData {
            task_id: task(TASK),
            context_id: ctx(CONTEXT),
            state: TaskState::Working,
            interaction: None,
        }
    );
    assert!(d.effects.audit.is_empty(), "a question is never audited");
    assert!(d.effects.lane_messages.is_empty());
    assert!(d.session.is_none(), "a blocking answer writes no session");
    let rec = s.interaction(QUESTION);
    assert_eq!(rec.state, State::Finished);
    let r = rec.resolution.as_ref().expect("resolution");
    assert_eq!(r.answer, recorded);
    assert_eq!(r.key, key("k-1"));
    assert_eq!(r.by, person(PERSON));
    assert_eq!(r.outcome.result, Ok(Accepted::Resolved));
    assert_eq!(
        rec.result,
        Some(CallResult::Ok {
            output: expected_output
        })
    );
}

#[test]
fn answers_that_do_not_fit_the_questions_change_nothing() {
    let rows: Vec<(&str, Value)> = vec![
        ("no entries", json!([])),
        ("one entry for two questions", json!([{"options": [0]}])),
        (
            "three entries",
            json!([{"options": [0]}, {"options": [1]}, {"options": [1]}]),
        ),
        (
            "index out of range",
            json!([{"options": [3]}, {"options": [1]}]),
        ),
        (
            "index out of range on the second",
            json!([{"options": [0]}, {"options": [7]}]),
        ),
        (
            "repeated index",
            json!([{"options": [0]}, {"options": [1, 1]}]),
        ),
        (
            "several options on a single-choice question",
            json!([{"options": [0, 1]}, {"options": [1]}]),
        ),
        (
            "text where not allowed",
            json!([{"options": [0], "text": "and also"}, {"options": [1]}]),
        ),
        ("empty choice", json!([{"options": []}, {"options": [1]}])),
        (
            "empty choice with blank text",
            json!([{"options": [0]}, {"options": [], "text": "  "}]),
        ),
    ];
    for (label, entries) in rows {
        let entries: Vec<holdpoint_domain::OptionAnswer> =
            serde_json::from_value(entries).expect("fixture entries");
        let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
        let d = refuse(
            &mut s,
            &answer(QUESTION, "k-bad", answers(entries.clone())),
            ErrorCode::AnswerMismatch,
        );
        assert!(
            !d.outcome.result.expect_err("refused").message.is_empty(),
            "{label}"
        );
        assert_eq!(s.interaction(QUESTION).state, State::Pending, "{label}");
        assert!(s.interaction(QUESTION).resolution.is_none(), "{label}");
        // The same entries under `value: {answers}` are checked the same way.
        refuse(
            &mut s,
            &answer(
                QUESTION,
                "k-bad-value",
                value(json!({ "answers": entries })),
            ),
            ErrorCode::AnswerMismatch,
        );
        // And the question still takes a good answer.
        accept(
            &mut s,
            &answer(QUESTION, "k-good", example_answers()),
            Accepted::Resolved,
            &["interaction-resolved", "tool-call-finished", "task-status"],
        );
    }
}

#[test]
fn a_question_takes_several_options_text_alone_or_any_value() {
    let rows: Vec<(&str, holdpoint_domain::AnswerInput, Answer, Value)> = vec![
        (
            "several options where allowed",
            answers(vec![oa(&[1]), oa(&[0, 2])]),
            Answer::Question {
                answers: vec![oa(&[1]), oa(&[0, 2])],
            },
            json!({"answers": [
                {"question": "Which database should the service use?", "options": [1], "labels": ["SQLite"]},
                {"question": "How should conflicting rows be handled?", "options": [0, 2], "labels": ["Overwrite", "Keep both"]}
            ]}),
        ),
        (
            "text alone where allowed",
            answers(vec![oa(&[2]), oa_text(&[], "merge by hand")]),
            Answer::Question {
                answers: vec![oa(&[2]), oa_text(&[], "merge by hand")],
            },
            json!({"answers": [
                {"question": "Which database should the service use?", "options": [2], "labels": ["MySQL"]},
                {"question": "How should conflicting rows be handled?", "options": [], "labels": [], "text": "merge by hand"}
            ]}),
        ),
        (
            "value holding answers",
            value(json!({"answers": [{"options": [0]}, {"options": [1]}]})),
            Answer::Question {
                answers: vec![oa(&[0]), oa(&[1])],
            },
            json!({"answers": [
                {"question": "Which database should the service use?", "options": [0], "labels": ["Postgres"]},
                {"question": "How should conflicting rows be handled?", "options": [1], "labels": ["Skip"]}
            ]}),
        ),
        (
            "any JSON value",
            value(json!({"free": ["form"]})),
            Answer::Value {
                value: json!({"free": ["form"]}),
            },
            json!({"value": {"free": ["form"]}}),
        ),
        (
            "a text reply answers a question",
            text("Postgres, and keep both"),
            Answer::Value {
                value: json!("Postgres, and keep both"),
            },
            json!({"value": "Postgres, and keep both"}),
        ),
        (
            "approved is read as the value",
            approved(true),
            Answer::Value { value: json!(true) },
            json!({"value": true}),
        ),
    ];
    for (label, input, recorded, out) in rows {
        let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
        let d = accept(
            &mut s,
            &answer(QUESTION, "k-1", input),
            Accepted::Resolved,
            &["interaction-resolved", "tool-call-finished", "task-status"],
        );
        assert_eq!(
            finished_result(&d.effects.events),
            &CallResult::Ok { output: out },
            "{label}"
        );
        let rec = s.interaction(QUESTION);
        assert_eq!(rec.state, State::Finished, "{label}");
        assert_eq!(
            rec.resolution.as_ref().map(|r| &r.answer),
            Some(&recorded),
            "{label}"
        );
    }
    // A blank text reply chooses nothing.
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", text("   ")),
        ErrorCode::AnswerMismatch,
    );
}

// ================================================================ blocking answers: approvals

#[test]
fn approving_releases_the_exact_call_then_its_result_finishes_it() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    let d = accept(
        &mut s,
        &answer_via(AnswerRoute::Approve, APPROVAL, "k-1", approved(true)),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    assert_eq!(
        data(&d.effects.events, "tool-call-released"),
        &EventData::ToolCallReleased {
            effect_id: iid(APPROVAL),
            call_id: call_of(APPROVAL),
            server: "github".into(),
            tool: "create_pull_request".into(),
            arguments: pr_arguments(),
            arguments_digest: arguments_digest(&pr_arguments()),
            approved_by: person(PERSON),
            rule: None,
            edited: false,
            edited_arguments_digest: None,
            approvals: Vec::new(),
        }
    );
    assert_eq!(names(&d.effects.audit), ["approval-decided"]);
    assert_eq!(
        d.effects.audit[0].body,
        EventData::ApprovalDecided {
            effect_id: iid(APPROVAL),
            server: "github".into(),
            tool: "create_pull_request".into(),
            arguments_digest: Some(arguments_digest(&pr_arguments())),
            approved: true,
            outcome: AuditOutcome::Allowed,
            decided_by: Decider::Person,
            approved_by: Some(person(PERSON)),
            rule: None,
            reason: None,
            edited_arguments: None,
            edited_arguments_digest: None,
            approvals: Vec::new(),
        }
    );
    assert_eq!(task_status(&d.effects.events).state, TaskState::Working);
    let rec = s.interaction(APPROVAL);
    assert_eq!(rec.state, State::Resolved);
    assert!(rec.result.is_none(), "no result before the call returns");
    assert_eq!(
        rec.resolution.as_ref().map(|r| &r.answer),
        Some(&Answer::Approval {
            approved: true,
            reason: None,
            edited_arguments: None,
        })
    );

    let res = ok_output(json!({"pr": 42}));
    let d = accept(
        &mut s,
        &tool_result(APPROVAL, res.clone()),
        Accepted::Finished,
        &["tool-call-finished"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::ToolCallFinished {
            call_id: call_of(APPROVAL),
            interaction_id: iid(APPROVAL),
            kind: Kind::Approval,
            result: res.clone(),
        }
    );
    assert!(d.effects.audit.is_empty());
    let rec = s.interaction(APPROVAL);
    assert_eq!(rec.state, State::Finished);
    assert_eq!(rec.result, Some(res.clone()));

    // The same result again, long after: a no-op; another result: a conflict.
    s.forget_outboxes();
    noop(
        &mut s,
        &tool_result(APPROVAL, res.clone()),
        Accepted::Finished,
    );
    refuse(
        &mut s,
        &tool_result(APPROVAL, ok_output(json!({"pr": 43}))),
        ErrorCode::CommandConflict,
    );
    assert_eq!(s.interaction(APPROVAL).result, Some(res));
}

#[test]
fn a_second_result_for_a_released_call_never_finishes_it_twice() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    accept(
        &mut s,
        &answer(APPROVAL, "k-1", approved(true)),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    let first = ok_output(json!("done"));
    accept(
        &mut s,
        &tool_result(APPROVAL, first.clone()),
        Accepted::Finished,
        &["tool-call-finished"],
    );
    // The same result again: the same command (its id names the effect and the
    // result), so the recorded transition replays.
    let d = s.run(&tool_result(APPROVAL, first.clone()));
    assert!(d.replay);
    assert_eq!(d.outcome.result, Ok(Accepted::Finished));
    // A different result: another command, refused; nothing changes and no event.
    let other = tool_result(APPROVAL, ok_output(json!("other")));
    let d = s.run(&other);
    assert!(!d.replay);
    assert_eq!(
        d.outcome.result.as_ref().map_err(|r| r.code),
        Err(ErrorCode::CommandConflict)
    );
    assert!(d.effects.events.is_empty());
    assert!(d.session.is_none() && d.interaction.is_none());
    assert_eq!(s.interaction(APPROVAL).result, Some(first));
    let finished = s
        .published
        .events
        .iter()
        .filter(|e| e.name() == "tool-call-finished")
        .map(|e| e.id.clone())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(finished.len(), 1);
}

#[test]
fn denying_fails_the_call_as_tool_denied_and_the_reason_travels() {
    let rows: Vec<(holdpoint_domain::AnswerInput, Option<&str>, &str)> = vec![
        (
            approved_because(false, "not on a Friday"),
            Some("not on a Friday"),
            "not on a Friday",
        ),
        (approved(false), None, "The person denied this call."),
        (
            holdpoint_domain::AnswerInput::Value {
                value: json!(false),
                reason: Some("too risky".into()),
            },
            Some("too risky"),
            "too risky",
        ),
    ];
    for (input, reason, message) in rows {
        let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
        let d = accept(
            &mut s,
            &answer(APPROVAL, "k-1", input),
            Accepted::Resolved,
            &["interaction-resolved", "tool-call-finished", "task-status"],
        );
        let denied = CallResult::Error {
            code: "tool.denied".into(),
            message: message.into(),
        };
        assert_eq!(finished_result(&d.effects.events), &denied);
        assert_eq!(
            d.effects.audit.iter().map(|e| &e.body).collect::<Vec<_>>(),
            [&EventData::ApprovalDecided {
                effect_id: iid(APPROVAL),
                server: "github".into(),
                tool: "create_pull_request".into(),
                arguments_digest: Some(arguments_digest(&pr_arguments())),
                approved: false,
                outcome: AuditOutcome::Denied,
                decided_by: Decider::Person,
                approved_by: Some(person(PERSON)),
                rule: None,
                reason: reason.map(str::to_owned),
                edited_arguments: None,
                edited_arguments_digest: None,
                approvals: Vec::new(),
            }]
        );
        let rec = s.interaction(APPROVAL);
        assert_eq!(rec.state, State::Finished);
        assert_eq!(rec.result, Some(denied));
        assert_eq!(
            rec.resolution.as_ref().map(|r| &r.answer),
            Some(&Answer::Approval {
                approved: false,
                reason: reason.map(str::to_owned),
                edited_arguments: None,
            })
        );
        // Nothing was released, so nothing waits for a result.
        refuse(
            &mut s,
            &tool_result(APPROVAL, ok_output(json!("ran anyway"))),
            ErrorCode::UnsupportedOperation,
        );
    }
}

#[test]
fn a_boolean_value_reads_as_approved() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    let d = accept(
        &mut s,
        &answer_a2a(APPROVAL, "m-2", TASK, CONTEXT, value(json!(true))),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    assert_eq!(names(&d.effects.audit), ["approval-decided"]);
    assert_eq!(
        s.interaction(APPROVAL)
            .resolution
            .as_ref()
            .map(|r| &r.answer),
        Some(&Answer::Approval {
            approved: true,
            reason: None,
            edited_arguments: None,
        })
    );
}

#[test]
fn approvals_refuse_what_is_not_a_decision() {
    let rows: Vec<(&str, holdpoint_domain::AnswerInput, ErrorCode)> = vec![
        (
            "string value",
            value(json!("yes")),
            ErrorCode::InvalidRequest,
        ),
        ("number value", value(json!(1)), ErrorCode::InvalidRequest),
        ("null value", value(Value::Null), ErrorCode::InvalidRequest),
        (
            "object value",
            value(json!({"approved": true})),
            ErrorCode::InvalidRequest,
        ),
        (
            "question answers",
            answers(vec![oa(&[0])]),
            ErrorCode::InvalidRequest,
        ),
        (
            "text never approves",
            text("yes"),
            ErrorCode::UnsupportedOperation,
        ),
        (
            "text never approves, even 'true'",
            text("true"),
            ErrorCode::UnsupportedOperation,
        ),
        (
            "arguments changed",
            approved_digest(true, &arguments_digest(&json!({"repo": "acme/web"}))),
            ErrorCode::ArgumentsChanged,
        ),
        (
            "arguments changed, even to deny",
            approved_digest(false, "00"),
            ErrorCode::ArgumentsChanged,
        ),
    ];
    for (label, input, code) in rows {
        let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
        refuse(&mut s, &answer(APPROVAL, "k-1", input), code);
        assert_eq!(s.interaction(APPROVAL).state, State::Pending, "{label}");
    }
    assert_eq!(ErrorCode::UnsupportedOperation.spec().code, "NRY-0020");
    assert_eq!(ErrorCode::ArgumentsChanged.spec().code, "NRY-0010");
}

#[test]
fn an_approval_bound_to_the_digest_it_showed_is_taken() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    accept(
        &mut s,
        &answer(
            APPROVAL,
            "k-1",
            approved_digest(true, &arguments_digest(&pr_arguments())),
        ),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn the_question_route_finds_only_questions() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    refuse(
        &mut s,
        &answer_via(AnswerRoute::Question, APPROVAL, "k-1", approved(true)),
        ErrorCode::NotFound,
    );
    let mut s = Fixture::new().blocking(S).connection(CONNECTION, S).store();
    refuse(
        &mut s,
        &answer_via(AnswerRoute::Question, CONNECTION, "k-1", value(json!(true))),
        ErrorCode::NotFound,
    );
    let mut s = Fixture::new().blocking(S).store();
    refuse(
        &mut s,
        &answer_via(
            AnswerRoute::Question,
            "no-such-question",
            "k-1",
            example_answers(),
        ),
        ErrorCode::NotFound,
    );
    refuse(
        &mut s,
        &answer(APPROVAL, "k-1", approved(true)),
        ErrorCode::NotFound,
    );
}

#[test]
fn tool_results_need_a_released_call() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    refuse(
        &mut s,
        &tool_result(APPROVAL, ok_output(json!("early"))),
        ErrorCode::UnsupportedOperation,
    );
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    refuse(
        &mut s,
        &tool_result(QUESTION, ok_output(json!("no"))),
        ErrorCode::UnsupportedOperation,
    );
    refuse(
        &mut s,
        &tool_result("missing", ok_output(json!("no"))),
        ErrorCode::NotFound,
    );
}

// ================================================================ blocking answers: connections

#[test]
fn connection_answers_read_connected_only_for_true() {
    let rows: Vec<(&str, holdpoint_domain::AnswerInput, bool)> = vec![
        ("{connected: true}", value(json!({"connected": true})), true),
        ("true", value(json!(true)), true),
        ("approved: true", approved(true), true),
        ("\"yes\"", value(json!("yes")), false),
        (
            "{connected: \"true\"}",
            value(json!({"connected": "true"})),
            false,
        ),
        ("false", value(json!(false)), false),
        (
            "{connected: false}",
            value(json!({"connected": false})),
            false,
        ),
        ("approved: false", approved(false), false),
        ("text", text("connected"), false),
        ("null", value(Value::Null), false),
    ];
    for (label, input, connected) in rows {
        let mut s = Fixture::new().blocking(S).connection(CONNECTION, S).store();
        let d = accept(
            &mut s,
            &answer(CONNECTION, "k-1", input),
            Accepted::Resolved,
            &["interaction-resolved", "tool-call-finished", "task-status"],
        );
        let out = if connected {
            "Connected: Linear"
        } else {
            "Not connected: Linear"
        };
        assert_eq!(finished_result(&d.effects.events), &output(out), "{label}");
        assert!(
            d.effects.audit.is_empty(),
            "{label}: connections are not audited"
        );
        let rec = s.interaction(CONNECTION);
        assert_eq!(rec.state, State::Finished, "{label}");
        assert_eq!(rec.result, Some(output(out)), "{label}");
        assert_eq!(
            rec.resolution.as_ref().map(|r| &r.answer),
            Some(&Answer::Connection { connected }),
            "{label}"
        );
    }
    let mut s = Fixture::new().blocking(S).connection(CONNECTION, S).store();
    refuse(
        &mut s,
        &answer(CONNECTION, "k-1", answers(vec![oa(&[0])])),
        ErrorCode::InvalidRequest,
    );
}

#[test]
fn a_cut_app_is_what_the_model_is_told() {
    let mut s = Fixture::new().blocking(S).store();
    let app = "é".repeat(90);
    accept(
        &mut s,
        &open(CONNECTION, S, connection_req(&app, "why")),
        Accepted::Opened,
        &["connection-requested", "task-status"],
    );
    let d = accept(
        &mut s,
        &answer(CONNECTION, "k-1", value(json!(true))),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    assert_eq!(
        finished_result(&d.effects.events),
        &output(&format!("Connected: {}", "é".repeat(80)))
    );
}

// ================================================================ idempotency and conflicts

#[test]
fn the_same_key_again_returns_the_same_outcome_and_changes_nothing() {
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    let env = answer(QUESTION, "k-1", example_answers());
    let first = accept(
        &mut s,
        &env,
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-finished", "task-status"],
    );
    let recorded = s.interaction(QUESTION).clone();

    // The same command (same key, another body): the recorded transition replays.
    let later_body = answer(QUESTION, "k-1", answers(vec![oa(&[1]), oa(&[1])]));
    assert_eq!(later_body.command_id(), env.command_id());
    assert_replays(&mut s, &later_body, &first);

    // The same key through another operation, and long after: the recorded outcome,
    // with nothing written or published.
    let via_a2a = answer_a2a(QUESTION, "k-1", TASK, CONTEXT, value(json!("late")));
    assert_ne!(via_a2a.command_id(), env.command_id());
    noop(&mut s, &via_a2a, Accepted::Resolved);
    s.forget_outboxes();
    noop(&mut s, &env, Accepted::Resolved);
    noop(&mut s, &later_body, Accepted::Resolved);
    let now = s.interaction(QUESTION);
    assert_eq!(now.resolution, recorded.resolution, "the answer is kept");
    assert_eq!(now.result, recorded.result);
}

#[test]
fn another_key_after_resolution_is_already_settled() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    accept(
        &mut s,
        &answer(APPROVAL, "k-1", approved(true)),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    let recorded = s.interaction(APPROVAL).resolution.clone();
    let d = refuse(
        &mut s,
        &answer(APPROVAL, "k-2", approved(false)),
        ErrorCode::AlreadySettled,
    );
    // The message says when, in the one timestamp format (three fractional
    // digits and `Z`, as every record and event shows it).
    let at = holdpoint_domain::timestamp::format(recorded.as_ref().expect("resolved").at);
    assert!(at.ends_with(".000Z"), "{at}");
    assert!(
        matches!(&d.outcome.result, Err(r) if r.message.contains(&format!("already answered at {at} "))),
        "{:?}",
        d.outcome
    );
    accept(
        &mut s,
        &tool_result(APPROVAL, ok_output(json!("ok"))),
        Accepted::Finished,
        &["tool-call-finished"],
    );
    refuse(
        &mut s,
        &answer(APPROVAL, "k-3", approved(true)),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction(APPROVAL).resolution, recorded);
    assert_eq!(ErrorCode::AlreadySettled.spec().status, 409);
}

#[test]
fn answering_a_closed_interaction_is_already_settled() {
    for (id, req, input) in [
        (APPROVAL, pr_approval(), approved(true)),
        (QUESTION, example_question_req(), example_answers()),
        (
            CONNECTION,
            connection_req("Linear", "why"),
            value(json!(true)),
        ),
    ] {
        let mut s = Fixture::new().blocking(S).store();
        s.run(&open(id, S, req));
        s.run(&close(id, CloseReason::Interrupted));
        refuse(&mut s, &answer(id, "k-1", input), ErrorCode::AlreadySettled);
        assert_eq!(s.interaction(id).state, State::Closed);
        assert!(s.interaction(id).resolution.is_none());
    }
}

#[test]
fn answering_on_an_ended_session_is_session_not_found() {
    let mut s = Fixture::new().blocking(S).question(QUESTION, S).store();
    accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::SessionNotFound,
    );
    assert_eq!(s.interaction(QUESTION).state, State::Pending);
}

#[test]
fn task_and_context_must_match() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    refuse(
        &mut s,
        &answer_a2a(APPROVAL, "m-2", "task-other", CONTEXT, approved(true)),
        ErrorCode::NotFound,
    );
    refuse(
        &mut s,
        &answer_a2a(APPROVAL, "m-2", TASK, "ctx-other", approved(true)),
        ErrorCode::InvalidRequest,
    );
    accept(
        &mut s,
        &answer_a2a(APPROVAL, "m-2", TASK, CONTEXT, approved(true)),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
}

#[test]
fn another_organisation_finds_nothing_and_keys_do_not_collide() {
    let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
    let mut a = answer_cmd(APPROVAL, "m-2", approved(true));
    a.task_id = Some(task(TASK));
    let other = CommandEnvelope {
        org: OrgId::parse("globex").expect("fixture org"),
        command: Command::Answer(Box::new(a.clone())),
    };
    refuse(&mut s, &other, ErrorCode::NotFound);
    assert_eq!(s.interaction(APPROVAL).state, State::Pending);

    let ours = answer_env(a.clone());
    assert_ne!(
        ours.command_id(),
        other.command_id(),
        "scoped by organisation"
    );
    let mut other_task = a;
    other_task.task_id = Some(task("task-2"));
    assert_ne!(
        ours.command_id(),
        answer_env(other_task).command_id(),
        "scoped by task"
    );
}

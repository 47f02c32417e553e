//! Table tests of `decide`: every transition and every refusal, each checking the
//! exact outcome, the records left behind and the exact events emitted.

mod common;

use common::*;
use holdpoint_domain::event::{AuditOutcome, Decider, OpenInteractionRef, TaskStatusData};
use holdpoint_domain::rules::{APP_CHARS, REASON_CHARS, arguments_digest};
use holdpoint_domain::{
    Accepted, Admission, Answer, AnswerRoute, CallResult, CloseReason, Command, CommandEnvelope,
    Ctx, Decision, Effects, ErrorCode, Event, EventData, Kind, LaneContent, OpenRequest, OrgId,
    SessionMode, SessionStatus, Spec, State, TaskState, decide,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------- assertions

#[track_caller]
fn accepted_of(d: &Decision) -> Accepted {
    match &d.outcome.result {
        Ok(a) => *a,
        Err(r) => panic!("expected success, got {r:?}"),
    }
}

#[track_caller]
fn code_of(d: &Decision) -> ErrorCode {
    match &d.outcome.result {
        Ok(a) => panic!("expected a refusal, got {a:?}"),
        Err(r) => r.code,
    }
}

/// Runs `env` and checks it succeeds as `want`, emitting exactly `events`.
#[track_caller]
fn accept(store: &mut Store, env: &CommandEnvelope, want: Accepted, events: &[&str]) -> Decision {
    let d = store.run(env);
    assert_eq!(accepted_of(&d), want, "outcome of {}", env.verb());
    assert!(
        !d.replay,
        "{} is a new transition, not a replay",
        env.verb()
    );
    assert_eq!(names(&d.effects.events), events, "events of {}", env.verb());
    assert_eq!(d.outcome.command_id, env.command_id());
    d
}

/// Runs `env` and checks it is refused with `code` and changes nothing: no record
/// to write, nothing to publish, the store untouched.
#[track_caller]
fn refuse(store: &mut Store, env: &CommandEnvelope, code: ErrorCode) -> Decision {
    let before = store.revisions();
    let published = store.published.events.len();
    let d = store.run(env);
    assert_eq!(
        code_of(&d),
        code,
        "outcome of {}: {:?}",
        env.verb(),
        d.outcome
    );
    assert!(d.session.is_none(), "a refusal writes no session");
    assert!(d.interaction.is_none(), "a refusal writes no interaction");
    assert_eq!(d.effects, Effects::default(), "a refusal publishes nothing");
    assert!(!d.replay);
    assert_eq!(store.revisions(), before, "a refusal changes no record");
    assert_eq!(store.published.events.len(), published);
    d
}

/// Runs `env` and checks it succeeds as `want` without writing or emitting anything
/// (and is not a replay of a recorded transition).
#[track_caller]
fn noop(store: &mut Store, env: &CommandEnvelope, want: Accepted) -> Decision {
    let before = store.revisions();
    let d = store.run(env);
    assert_eq!(accepted_of(&d), want, "outcome of {}", env.verb());
    assert!(d.session.is_none() && d.interaction.is_none(), "no write");
    assert_eq!(d.effects, Effects::default(), "nothing published");
    assert!(!d.replay);
    assert_eq!(store.revisions(), before);
    d
}

/// Decides `env` again on the current records, as a redelivery would, and checks it
/// is a replay of `first`: same outcome, same effects, nothing to write.
#[track_caller]
fn assert_replays(store: &mut Store, env: &CommandEnvelope, first: &Decision) {
    let loaded = store.load(env);
    let again = store.decide_on(&loaded, env);
    assert!(
        again.replay,
        "{} decided again instead of replaying",
        env.verb()
    );
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(again.effects, first.effects);
    assert_eq!(ids(&again.effects.events), ids(&first.effects.events));
    assert!(again.session.is_none() && again.interaction.is_none());
}

fn data<'a>(events: &'a [Event], name: &str) -> &'a EventData {
    &events
        .iter()
        .find(|e| e.name() == name)
        .unwrap_or_else(|| panic!("no {name} event"))
        .body
}

fn task_status(events: &[Event]) -> &TaskStatusData {
    match data(events, "task-status") {
        EventData::TaskStatus(t) => t,
        other => panic!("not a task status: {other:?}"),
    }
}

fn finished_result(events: &[Event]) -> &CallResult {
    match data(events, "tool-call-finished") {
        EventData::ToolCallFinished { result, .. } => result,
        other => panic!("not tool-call-finished: {other:?}"),
    }
}

fn output(s: &str) -> CallResult {
    CallResult::Ok {
        output: Value::String(s.into()),
    }
}

// ---------------------------------------------------------------- fixtures

const S: &str = "s1";
const P: &str = "p1";
const APPROVAL: &str = "eff-01J9";
const QUESTION: &str = "6b9f6d2e-1c3a-4f5b-9d7e-2a8c4e6f0b1d";
const CONNECTION: &str = "conn-1";

fn blocking() -> Store {
    let mut s = Store::new();
    accept(
        &mut s,
        &session_open(S, SessionMode::Blocking),
        Accepted::Opened,
        &["session-opened"],
    );
    s
}

fn product(cap: u32) -> Store {
    let mut s = Store::new();
    accept(
        &mut s,
        &session_open_cap(P, SessionMode::Product, cap),
        Accepted::Opened,
        &["session-opened"],
    );
    s
}

fn with_approval() -> Store {
    let mut s = blocking();
    accept(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    s
}

fn with_question() -> Store {
    let mut s = blocking();
    accept(
        &mut s,
        &open(QUESTION, S, example_question_req()),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    s
}

fn with_connection() -> Store {
    let mut s = blocking();
    accept(
        &mut s,
        &open(CONNECTION, S, connection_req("Linear", "to file the bug")),
        Accepted::Opened,
        &["connection-requested", "task-status"],
    );
    s
}

fn product_question(cap: u32) -> Store {
    let mut s = product(cap);
    accept(
        &mut s,
        &open(QUESTION, P, example_question_req()),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    s
}

// ================================================================ sessions

#[test]
fn session_open_writes_an_open_session_and_announces_it() {
    let mut s = Store::new();
    let d = accept(
        &mut s,
        &session_open(S, SessionMode::Blocking),
        Accepted::Opened,
        &["session-opened"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionOpened {
            session: sid(S),
            mode: SessionMode::Blocking
        }
    );
    let rec = s.session(S);
    assert_eq!(rec.status, SessionStatus::Open);
    assert_eq!(rec.mode, SessionMode::Blocking);
    assert_eq!(rec.lane_capacity, 8, "default lane capacity");
    assert!(s.lanes.is_empty(), "no lane record");

    let mut p = Store::new();
    accept(
        &mut p,
        &session_open_cap(P, SessionMode::Product, 3),
        Accepted::Opened,
        &["session-opened"],
    );
    assert_eq!(p.session(P).lane_capacity, 3);
    assert_eq!(p.session(P).mode, SessionMode::Product);
}

#[test]
fn session_reopen_in_the_same_mode_is_idempotent() {
    let mut s = Store::new();
    let env = session_open(S, SessionMode::Blocking);
    let first = accept(&mut s, &env, Accepted::Opened, &["session-opened"]);
    // Redelivered while the transition is recorded: a replay.
    assert_replays(&mut s, &env, &first);
    // Long after: decided again, a no-op.
    s.forget_outboxes();
    noop(&mut s, &env, Accepted::Opened);
    assert_eq!(s.session(S).status, SessionStatus::Open);
}

#[test]
fn session_reopen_in_another_mode_conflicts() {
    let mut s = blocking();
    refuse(
        &mut s,
        &session_open(S, SessionMode::Product),
        ErrorCode::CommandConflict,
    );
    s.forget_outboxes();
    refuse(
        &mut s,
        &session_open(S, SessionMode::Product),
        ErrorCode::CommandConflict,
    );
    assert_eq!(s.session(S).mode, SessionMode::Blocking);
}

#[test]
fn session_close_then_end() {
    let mut s = blocking();
    let d = accept(
        &mut s,
        &session_close(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionClosed {
            session: sid(S),
            ended: false
        }
    );
    assert_eq!(s.session(S).status, SessionStatus::Closed);
    assert_replays(&mut s, &session_close(S), &d);
    s.forget_outboxes();
    noop(&mut s, &session_close(S), Accepted::Closed);

    let d = accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionClosed {
            session: sid(S),
            ended: true
        }
    );
    assert_eq!(s.session(S).status, SessionStatus::Ended);
    s.forget_outboxes();
    // An ended session answers as not found ...
    refuse(&mut s, &session_end(S), ErrorCode::SessionNotFound);
    refuse(&mut s, &session_close(S), ErrorCode::SessionNotFound);
    refuse(
        &mut s,
        &message(S, LANE, "m-1", "hello"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &turn_start(S, LANE, "t-1"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &turn_finish(S, LANE, "t-1"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        ErrorCode::SessionNotFound,
    );
    // ... and cannot be opened again.
    refuse(
        &mut s,
        &session_open(S, SessionMode::Blocking),
        ErrorCode::CommandConflict,
    );
}

#[test]
fn session_end_of_an_open_session() {
    let mut s = blocking();
    accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(s.session(S).status, SessionStatus::Ended);
}

#[test]
fn closing_or_ending_a_missing_session_is_session_not_found() {
    let mut s = Store::new();
    let d = refuse(&mut s, &session_close("nope"), ErrorCode::SessionNotFound);
    assert_eq!(ErrorCode::SessionNotFound.spec().code, "NRY-0002");
    assert!(
        d.outcome
            .result
            .as_ref()
            .expect_err("refused")
            .message
            .contains("nope")
    );
    refuse(&mut s, &session_end("nope"), ErrorCode::SessionNotFound);
    refuse(
        &mut s,
        &message("nope", LANE, "m-1", "hi"),
        ErrorCode::SessionNotFound,
    );
    assert!(!s.has_session("nope"));
}

// ================================================================ opening

#[test]
fn open_approval_announces_it_without_the_arguments() {
    let mut s = blocking();
    let d = accept(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    let prompt = "Approve github / create_pull_request?";
    let detail = json!({
        "server": "github",
        "tool": "create_pull_request",
        "reason": "writes to a repository"
    });
    assert_eq!(
        task_status(&d.effects.events),
        &TaskStatusData {
            task_id: task(TASK),
            context_id: ctx(CONTEXT),
            state: TaskState::AuthRequired,
            interaction: Some(OpenInteractionRef {
                interaction_id: iid(APPROVAL),
                kind: Kind::Approval,
                prompt: prompt.into(),
                detail: detail.clone(),
                expires_at: None,
            }),
        }
    );
    assert_eq!(
        data(&d.effects.events, "approval-requested"),
        &EventData::ApprovalRequested {
            interaction_id: iid(APPROVAL),
            call_id: call_of(APPROVAL),
            session: sid(S),
            lane: lane(LANE),
            prompt: prompt.into(),
            detail: detail.clone(),
            arguments_digest: arguments_digest(&pr_arguments()),
        }
    );
    // Never the arguments: not in detail, not anywhere in what is published.
    for e in &d.effects.events {
        let wire = serde_json::to_string(e).expect("event serializes");
        assert!(!wire.contains("s3cr3t-arg-value"), "{wire}");
        assert!(!wire.contains("\"arguments\""), "{wire}");
        assert_eq!(e.taskid, Some(task(TASK)));
    }
    let rec = s.interaction(APPROVAL);
    assert_eq!(rec.state, State::Pending);
    assert_eq!(rec.prompt, prompt);
    assert_eq!(rec.spec.detail(), detail);
    assert_eq!(rec.mode, SessionMode::Blocking);
    assert_eq!(rec.call_id, call_of(APPROVAL));
    assert!(rec.resolution.is_none() && rec.closure.is_none() && rec.result.is_none());
    match &rec.spec {
        Spec::Approval { arguments, .. } => assert_eq!(arguments, &pr_arguments()),
        other => panic!("not an approval: {other:?}"),
    }
    assert!(rec.view().detail.get("arguments").is_none());
}

#[test]
fn open_approval_without_reason_has_server_and_tool_only() {
    let mut s = blocking();
    let req = OpenRequest::Approval {
        server: "fs".into(),
        tool: "delete".into(),
        arguments: json!({"path": "/tmp/x"}),
        reason: None,
    };
    let d = accept(
        &mut s,
        &open(APPROVAL, S, req),
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    let status = task_status(&d.effects.events);
    let open_ref = status.interaction.as_ref().expect("open interaction ref");
    assert_eq!(open_ref.prompt, "Approve fs / delete?");
    assert_eq!(open_ref.detail, json!({"server": "fs", "tool": "delete"}));
}

#[test]
fn open_question_asks_in_engine_order() {
    let mut s = blocking();
    let d = accept(
        &mut s,
        &open(QUESTION, S, example_question_req()),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    let prompt =
        "1. Which database should the service use?\n2. How should conflicting rows be handled?";
    assert_eq!(
        task_status(&d.effects.events),
        &TaskStatusData {
            task_id: task(TASK),
            context_id: ctx(CONTEXT),
            state: TaskState::InputRequired,
            interaction: Some(OpenInteractionRef {
                interaction_id: iid(QUESTION),
                kind: Kind::Question,
                prompt: prompt.into(),
                detail: json!({"questions": example_questions()}),
                expires_at: None,
            }),
        }
    );
    match data(&d.effects.events, "question-asked") {
        EventData::QuestionAsked {
            question_id,
            call_id,
            mode,
            prompt: p,
            questions,
            ..
        } => {
            assert_eq!(question_id, &iid(QUESTION));
            assert_eq!(call_id, &call_of(QUESTION));
            assert_eq!(*mode, SessionMode::Blocking);
            assert_eq!(p, prompt);
            assert_eq!(
                questions[1]["options"],
                json!(["Overwrite", "Skip", "Keep both"])
            );
            assert_eq!(questions[1]["allowText"], json!(true));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.interaction(QUESTION).state, State::Pending);
    // A blocking question is not listed on the lane.
    assert!(s.lanes.is_empty(), "no lane record");

    // One question: the prompt is its text.
    let d = accept(
        &mut s,
        &open(
            "q-single",
            S,
            OpenRequest::Question {
                questions: vec![question("Ship it?", &["Yes", "No"], false, false)],
            },
        ),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    assert_eq!(s.interaction("q-single").prompt, "Ship it?");
    // The task still waits on its oldest pending interaction, and every view names
    // that one.
    let open_ref = task_status(&d.effects.events)
        .interaction
        .clone()
        .expect("open ref");
    assert_eq!(open_ref.interaction_id, iid(QUESTION));
}

#[test]
fn open_connection_prompts_and_cuts_in_characters() {
    let e80 = "é".repeat(80);
    let plug = "🔌".repeat(APP_CHARS);
    let rows: Vec<(String, String, String, String)> = vec![
        // (app, reason, app kept, reason kept)
        (
            "Linear".into(),
            "to file the bug".into(),
            "Linear".into(),
            "to file the bug".into(),
        ),
        ("é".repeat(100), "why".into(), e80.clone(), "why".into()),
        (e80.clone(), "x".into(), e80.clone(), "x".into()),
        (
            "🔌".repeat(81),
            "😀".repeat(300),
            plug.clone(),
            "😀".repeat(REASON_CHARS),
        ),
        (
            "  Notion  ".into(),
            format!("{}{}", "r".repeat(279), "ééé"),
            "Notion".into(),
            format!("{}é", "r".repeat(279)),
        ),
    ];
    for (n, (app, reason, app_kept, reason_kept)) in rows.into_iter().enumerate() {
        let mut s = blocking();
        let id = format!("conn-{n}");
        let d = accept(
            &mut s,
            &open(&id, S, connection_req(&app, &reason)),
            Accepted::Opened,
            &["connection-requested", "task-status"],
        );
        assert_eq!(app_kept.chars().count(), app.trim().chars().count().min(80));
        let prompt = format!("Connect {app_kept}: {reason_kept}");
        let detail = json!({"app": app_kept, "reason": reason_kept});
        assert_eq!(
            task_status(&d.effects.events),
            &TaskStatusData {
                task_id: task(TASK),
                context_id: ctx(CONTEXT),
                state: TaskState::AuthRequired,
                interaction: Some(OpenInteractionRef {
                    interaction_id: iid(&id),
                    kind: Kind::Connection,
                    prompt: prompt.clone(),
                    detail: detail.clone(),
                    expires_at: None,
                }),
            },
            "row {n}"
        );
        assert_eq!(
            data(&d.effects.events, "connection-requested"),
            &EventData::ConnectionRequested {
                interaction_id: iid(&id),
                call_id: call_of(&id),
                session: sid(S),
                lane: lane(LANE),
                prompt: prompt.clone(),
                detail,
            },
            "row {n}"
        );
        let rec = s.interaction(&id);
        assert_eq!(
            rec.spec,
            Spec::Connection {
                app: app_kept.clone(),
                reason: reason_kept.clone()
            },
            "row {n}"
        );
        assert!(
            rec.spec.detail()["app"]
                .as_str()
                .is_some_and(|a| a.chars().count() <= 80)
        );
        assert_eq!(rec.prompt, prompt);
    }
}

#[test]
fn reopen_with_the_same_content_is_a_noop() {
    let mut s = blocking();
    let env = open(APPROVAL, S, pr_approval());
    let first = accept(
        &mut s,
        &env,
        Accepted::Opened,
        &["approval-requested", "task-status"],
    );
    assert_replays(&mut s, &env, &first);
    s.forget_outboxes();
    let before = s.interaction(APPROVAL).clone();
    noop(&mut s, &env, Accepted::Opened);
    assert_eq!(s.interaction(APPROVAL).state, before.state);
    assert_eq!(s.interaction(APPROVAL).open_digest, before.open_digest);
}

#[test]
fn reopen_with_other_content_conflicts() {
    let others: Vec<(&str, CommandEnvelope)> = vec![
        (
            "other arguments",
            open(
                APPROVAL,
                S,
                approval_req("github", "create_pull_request", json!({"repo": "acme/web"})),
            ),
        ),
        (
            "other kind",
            open(APPROVAL, S, connection_req("GitHub", "to open the PR")),
        ),
        ("other lane", open_on(APPROVAL, S, "side", pr_approval())),
    ];
    for (label, env) in others {
        let mut s = with_approval();
        let before = s.interaction(APPROVAL).clone();
        let d = refuse(&mut s, &env, ErrorCode::CommandConflict);
        assert!(!d.replay, "{label}");
        // Also long after the opening left the outbox.
        s.forget_outboxes();
        refuse(&mut s, &env, ErrorCode::CommandConflict);
        assert_eq!(s.interaction(APPROVAL).spec, before.spec, "{label}");
    }
}

#[test]
fn open_on_a_missing_ended_or_closed_session_is_refused() {
    let mut s = Store::new();
    refuse(
        &mut s,
        &open(APPROVAL, "nope", pr_approval()),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &open(QUESTION, "nope", example_question_req()),
        ErrorCode::SessionNotFound,
    );
    assert!(!s.has_interaction(APPROVAL));

    let mut s = blocking();
    accept(
        &mut s,
        &session_close(S),
        Accepted::Closed,
        &["session-closed"],
    );
    refuse(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        ErrorCode::CommandConflict,
    );

    let mut s = blocking();
    accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    refuse(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        ErrorCode::SessionNotFound,
    );
}

#[test]
fn invalid_openings_are_invalid_requests() {
    let q = |t: &str| question(t, &["a", "b"], false, false);
    let rows: Vec<(&str, OpenRequest)> = vec![
        ("no questions", OpenRequest::Question { questions: vec![] }),
        (
            "five questions",
            OpenRequest::Question {
                questions: vec![q("1"), q("2"), q("3"), q("4"), q("5")],
            },
        ),
        (
            "empty question text",
            OpenRequest::Question {
                questions: vec![q("ok"), q("   ")],
            },
        ),
        (
            "no options and no text",
            OpenRequest::Question {
                questions: vec![question("Anything?", &[], false, false)],
            },
        ),
        (
            "an empty option",
            OpenRequest::Question {
                questions: vec![question("Pick", &["a", " "], false, false)],
            },
        ),
        (
            "question text too long",
            OpenRequest::Question {
                questions: vec![q(&"x".repeat(2001))],
            },
        ),
        (
            "empty server",
            approval_req(" ", "create_pull_request", json!({})),
        ),
        ("empty tool", approval_req("github", "", json!({}))),
        ("empty app", connection_req("   ", "because")),
    ];
    for (label, req) in rows {
        let mut s = blocking();
        let d = refuse(&mut s, &open("i-1", S, req), ErrorCode::InvalidRequest);
        assert_eq!(ErrorCode::InvalidRequest.spec().code, "NRY-0001", "{label}");
        assert!(!s.has_interaction("i-1"), "{label}: {:?}", d.outcome);
    }
    // The edges that are fine: four questions; no options when text is allowed.
    let mut s = blocking();
    accept(
        &mut s,
        &open(
            "i-4",
            S,
            OpenRequest::Question {
                questions: vec![q("1"), q("2"), q("3"), q("4")],
            },
        ),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
    accept(
        &mut s,
        &open(
            "i-free",
            S,
            OpenRequest::Question {
                questions: vec![question("Anything else?", &[], false, true)],
            },
        ),
        Accepted::Opened,
        &["question-asked", "task-status"],
    );
}

// ================================================================ blocking answers: questions

#[test]
fn rest_example_answer_resolves_and_finishes_the_question() {
    let mut s = with_question();
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
        let mut s = with_question();
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
        let mut s = with_question();
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
    let mut s = with_question();
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", text("   ")),
        ErrorCode::AnswerMismatch,
    );
}

// ================================================================ blocking answers: approvals

#[test]
fn approving_releases_the_exact_call_then_its_result_finishes_it() {
    let mut s = with_approval();
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
            reason: None
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
    let mut s = with_approval();
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
    // A different result while the first is still recorded: the same command (its id
    // names the effect), so the recorded transition replays and nothing changes.
    let other = tool_result(APPROVAL, ok_output(json!("other")));
    let d = s.run(&other);
    assert!(d.replay);
    assert_eq!(d.outcome.result, Ok(Accepted::Finished));
    assert_eq!(names(&d.effects.events), ["tool-call-finished"]);
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
        let mut s = with_approval();
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
            }]
        );
        let rec = s.interaction(APPROVAL);
        assert_eq!(rec.state, State::Finished);
        assert_eq!(rec.result, Some(denied));
        assert_eq!(
            rec.resolution.as_ref().map(|r| &r.answer),
            Some(&Answer::Approval {
                approved: false,
                reason: reason.map(str::to_owned)
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
    let mut s = with_approval();
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
            reason: None
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
        let mut s = with_approval();
        refuse(&mut s, &answer(APPROVAL, "k-1", input), code);
        assert_eq!(s.interaction(APPROVAL).state, State::Pending, "{label}");
    }
    assert_eq!(ErrorCode::UnsupportedOperation.spec().code, "NRY-0020");
    assert_eq!(ErrorCode::ArgumentsChanged.spec().code, "NRY-0010");
}

#[test]
fn an_approval_bound_to_the_digest_it_showed_is_taken() {
    let mut s = with_approval();
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
    let mut s = with_approval();
    refuse(
        &mut s,
        &answer_via(AnswerRoute::Question, APPROVAL, "k-1", approved(true)),
        ErrorCode::NotFound,
    );
    let mut s = with_connection();
    refuse(
        &mut s,
        &answer_via(AnswerRoute::Question, CONNECTION, "k-1", value(json!(true))),
        ErrorCode::NotFound,
    );
    let mut s = blocking();
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
    let mut s = with_approval();
    refuse(
        &mut s,
        &tool_result(APPROVAL, ok_output(json!("early"))),
        ErrorCode::UnsupportedOperation,
    );
    let mut s = with_question();
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
        let mut s = with_connection();
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
    let mut s = with_connection();
    refuse(
        &mut s,
        &answer(CONNECTION, "k-1", answers(vec![oa(&[0])])),
        ErrorCode::InvalidRequest,
    );
}

#[test]
fn a_cut_app_is_what_the_model_is_told() {
    let mut s = blocking();
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
    let mut s = with_question();
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
    let mut s = with_approval();
    accept(
        &mut s,
        &answer(APPROVAL, "k-1", approved(true)),
        Accepted::Resolved,
        &["interaction-resolved", "tool-call-released", "task-status"],
    );
    let recorded = s.interaction(APPROVAL).resolution.clone();
    refuse(
        &mut s,
        &answer(APPROVAL, "k-2", approved(false)),
        ErrorCode::AlreadySettled,
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
        let mut s = blocking();
        s.run(&open(id, S, req));
        s.run(&close(id, CloseReason::Interrupted));
        refuse(&mut s, &answer(id, "k-1", input), ErrorCode::AlreadySettled);
        assert_eq!(s.interaction(id).state, State::Closed);
        assert!(s.interaction(id).resolution.is_none());
    }
}

#[test]
fn answering_on_an_ended_session_is_session_not_found() {
    let mut s = with_question();
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
    let mut s = with_approval();
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
    let mut s = with_approval();
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
        let mut s = blocking();
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
    let mut s = with_approval();
    s.run(&answer(APPROVAL, "k-1", approved(true)));
    refuse(
        &mut s,
        &close(APPROVAL, CloseReason::Canceled),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction(APPROVAL).state, State::Resolved);

    let mut s = with_question();
    s.run(&answer(QUESTION, "k-1", example_answers()));
    refuse(
        &mut s,
        &close(QUESTION, CloseReason::Interrupted),
        ErrorCode::AlreadySettled,
    );
    assert_eq!(s.interaction(QUESTION).state, State::Finished);

    let mut s = blocking();
    refuse(
        &mut s,
        &close("missing", CloseReason::Interrupted),
        ErrorCode::NotFound,
    );
}

// ================================================================ product sessions

#[test]
fn a_product_question_is_listed_on_its_lane() {
    let mut s = product(8);
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
    let mut s = product_question(8);
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
        &EventData::TurnStarted {
            session: sid(P),
            lane: lane(LANE),
            turn_id: mid(QUESTION),
        }
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
    let mut s = product_question(8);
    let d = accept(
        &mut s,
        &turn_start(P, LANE, "turn-1"),
        Accepted::Admitted,
        &["turn-started"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::TurnStarted {
            session: sid(P),
            lane: lane(LANE),
            turn_id: mid("turn-1")
        }
    );

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
    assert_eq!(
        d.effects.events[0].body,
        EventData::TurnStarted {
            session: sid(P),
            lane: lane(LANE),
            turn_id: mid(QUESTION)
        }
    );
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid(QUESTION)));
    assert!(l.queue.is_empty());
    assert_eq!(s.interaction(QUESTION).resolution, Some(r));
}

#[test]
fn a_product_answer_on_a_full_lane_is_not_delivered_and_a_retry_succeeds() {
    let mut s = product(1);
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
    let mut s = product(1);
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
    let mut s = product_question(8);
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

    let mut s = product_question(8);
    s.run(&session_end(P));
    refuse(
        &mut s,
        &answer(QUESTION, "k-1", example_answers()),
        ErrorCode::SessionNotFound,
    );
}

#[test]
fn a_message_on_the_lane_supersedes_its_open_question() {
    let mut s = product_question(8);
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
    let mut s = product_question(8);
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
    let mut s = product_question(8);
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
    let mut s = product_question(8);
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
    let mut s = product(8);
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
    let mut s = product(8);
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
    let mut s = product_question(8);
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
    let mut s = product(8);
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
    let mut s = product(1);
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
    let mut s = with_question();
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
fn turns_admit_queued_messages_in_order() {
    let mut s = product(8);
    accept(
        &mut s,
        &turn_start(P, LANE, "turn-1"),
        Accepted::Admitted,
        &["turn-started"],
    );
    // The running turn again: unchanged; another turn while one runs: a conflict.
    s.forget_outboxes();
    noop(&mut s, &turn_start(P, LANE, "turn-1"), Accepted::Unchanged);
    refuse(
        &mut s,
        &turn_start(P, LANE, "turn-2"),
        ErrorCode::CommandConflict,
    );
    for m in ["m-1", "m-2"] {
        let d = s.run(&message(P, LANE, m, "queued"));
        assert_eq!(code_of(&d), ErrorCode::LaneBusy);
        assert_eq!(names(&d.effects.events), ["lane-message"]);
    }
    // Finishing a turn that is not running changes nothing.
    noop(&mut s, &turn_finish(P, LANE, "m-2"), Accepted::Unchanged);

    let d = accept(
        &mut s,
        &turn_finish(P, LANE, "turn-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::TurnStarted {
            session: sid(P),
            lane: lane(LANE),
            turn_id: mid("m-1")
        }
    );
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid("m-1")));
    assert_eq!(l.queue, [mid("m-2")]);
    accept(
        &mut s,
        &turn_finish(P, LANE, "m-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    accept(
        &mut s,
        &turn_finish(P, LANE, "m-2"),
        Accepted::Unchanged,
        &[],
    );
    let l = s.lane(P, LANE);
    assert_eq!(l.running, None);
    assert!(l.queue.is_empty());
}

#[test]
fn a_redelivered_turn_start_does_not_restart_a_finished_turn() {
    let mut s = product(8);
    let start = turn_start(P, LANE, "turn-1");
    s.run(&start);
    s.run(&turn_finish(P, LANE, "turn-1"));
    // Long after, the start is delivered again (its ack was lost).
    s.forget_outboxes();
    let before = s.revisions();
    let d = s.deliver(&start, true);
    assert!(d.effects.events.is_empty(), "no second turn-started");
    assert_eq!(s.revisions(), before);
    assert_eq!(s.lane(P, LANE).running, None);
}

#[test]
fn a_product_open_interrupted_before_its_record_is_closed_by_the_message() {
    // The open's lane and task writes land (the question is listed), the worker dies
    // before writing the interaction; a message then supersedes the question.
    let mut s = product(8);
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
    let mut s = product_question(8);
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
            command_id: id.into(),
            at,
            partition,
            confirmed: false,
            outcome: Outcome::ok(id, Accepted::Unchanged),
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

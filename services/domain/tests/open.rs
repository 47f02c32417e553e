//! Table tests of `decide` for opening an interaction (approval, question,
//! connection): what is stored and announced, and every refusal.

mod common;

use common::*;
use holdpoint_domain::event::{OpenInteractionRef, TaskStatusData};
use holdpoint_domain::rules::{APP_CHARS, REASON_CHARS, arguments_digest};
use holdpoint_domain::{
    Accepted, CommandEnvelope, ErrorCode, EventData, Kind, OpenRequest, SessionMode, Spec, State,
    TaskState,
};
use serde_json::json;

// ================================================================ opening

#[test]
fn open_approval_announces_it_without_the_arguments() {
    let mut s = Fixture::new().blocking(S).store();
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
                assignees: None,
                escalation: None,
                escalated_at: None,
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
    let mut s = Fixture::new().blocking(S).store();
    let req = OpenRequest::Approval {
        server: "fs".into(),
        tool: "delete".into(),
        arguments: json!({"path": "/tmp/x"}),
        reason: None,
        editable: false,
        approvals: None,
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
    let mut s = Fixture::new().blocking(S).store();
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
                assignees: None,
                escalation: None,
                escalated_at: None,
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
        let mut s = Fixture::new().blocking(S).store();
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
                    assignees: None,
                    escalation: None,
                    escalated_at: None,
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
    let mut s = Fixture::new().blocking(S).store();
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
        let mut s = Fixture::new().blocking(S).approval(APPROVAL, S).store();
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

    let mut s = Fixture::new().blocking(S).store();
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

    let mut s = Fixture::new().blocking(S).store();
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
        let mut s = Fixture::new().blocking(S).store();
        let d = refuse(&mut s, &open("i-1", S, req), ErrorCode::InvalidRequest);
        assert_eq!(ErrorCode::InvalidRequest.spec().code, "NRY-0001", "{label}");
        assert!(!s.has_interaction("i-1"), "{label}: {:?}", d.outcome);
    }
    // The edges that are fine: four questions; no options when text is allowed.
    let mut s = Fixture::new().blocking(S).store();
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

//! Deadlines: an interaction opened with `expiresIn` / `expiresAt` is decided by its
//! deadline when nobody answers (per kind: approval denied, question closed,
//! connection not connected, product question closed without a lane message),
//! `interaction-expiring` comes first, an answer and the expiry never both win, and
//! the deadline is kept by the server (JetStream message schedules), so neither a
//! worker crash nor a nats-server restart loses it or fires it twice. A server
//! without schedules (2.9) refuses deadlines and does the rest.

use std::time::Duration;

use holdpoint_client::{AgentManifest, Expiry, Placement, Runtime};
use holdpoint_domain::{
    Answer, CallResult, CloseReason, Event, EventData, OnExpiry, Resolver, SessionMode, State,
};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::json;

use crate::common::*;

fn options(warning_secs: Option<u64>) -> AppOptions {
    AppOptions {
        deadlines: holdpoint_domain::Deadlines {
            warning: warning_secs.map(Duration::from_secs),
            ..Default::default()
        },
        ..AppOptions::default()
    }
}

fn expiring_in(at: Placement, secs: u64) -> Placement {
    at.with_expiry(Expiry {
        expires_in: Some(secs),
        ..Expiry::default()
    })
}

async fn hold(rt: &Runtime, at: &Placement) -> String {
    hold_call(rt, at, "merge", json!({"pr": 7}), None).await
}

/// Waits until `id` no longer waits and its deciding transition's events (the task
/// status is the last of them) are stored; returns every event of `org`.
async fn settled(app: &TestApp, org: &str, id: &str) -> Vec<Event> {
    wait_for(
        Duration::from_secs(20),
        "the deadline to decide",
        || async {
            let i = app.interaction(org, id).await?;
            (i.state != State::Pending).then_some(())
        },
    )
    .await;
    wait_for(Duration::from_secs(10), "the expiry's events", || async {
        let events = app.events(org).await;
        let decided = events.iter().position(|e| {
            e.subject == id && matches!(e.name(), "interaction-resolved" | "interaction-closed")
        })?;
        events[decided..]
            .iter()
            .any(|e| e.subject == id && e.name() == "task-status")
            .then_some(events)
    })
    .await
}

fn position(events: &[Event], name: &str, id: &str) -> usize {
    events
        .iter()
        .position(|e| e.name() == name && e.subject == id)
        .unwrap_or_else(|| panic!("no {name} for {id}: {events:#?}"))
}

#[tokio::test]
async fn each_kind_expires_with_its_default_after_a_warning() {
    let app = TestApp::start_with(options(Some(1))).await;
    let rt = app.runtime("acme").await;
    let blocking = open_session(&rt, SessionMode::Blocking).await;
    let product = open_session(&rt, SessionMode::Product).await;
    let approval = hold(&rt, &expiring_in(placement(&blocking), 2)).await;
    let question = rt
        .ask_user(
            &expiring_in(placement(&blocking), 2),
            "call-q",
            two_questions(),
            None,
        )
        .await
        .expect("ask")
        .to_string();
    let manifest =
        AgentManifest::from_markdown("---\nloop:\n  connections: true\n---\n").expect("manifest");
    let connection = rt
        .request_connection(
            &manifest,
            &expiring_in(placement(&blocking), 2),
            "call-c",
            "Linear",
            "to file the bug",
            None,
        )
        .await
        .expect("connect")
        .to_string();
    let product_q = rt
        .ask_user(
            &expiring_in(placement(&product), 2),
            "call-p",
            two_questions(),
            None,
        )
        .await
        .expect("ask product")
        .to_string();

    // The views show the deadline while pending; the soonest-first listing has them.
    let ana = app.person("acme", "ana");
    let view = ana.get(&format!("/v1/interactions/{approval}")).await;
    assert_eq!(view.status, 200, "{view:?}");
    assert!(view.body["expiresAt"].is_string(), "{view:?}");
    let sorted = ana.get("/v1/interactions?sort=expiresAt").await;
    assert_eq!(sorted.status, 200, "{sorted:?}");
    assert_eq!(sorted.body["items"].as_array().map(Vec::len), Some(4));
    let other = app.person("globex", "gil");
    let theirs = other.get("/v1/interactions?sort=expiresAt").await;
    assert_eq!(theirs.body["items"].as_array().map(Vec::len), Some(0));

    let mut events = Vec::new();
    for id in [&approval, &question, &connection, &product_q] {
        events = settled(&app, "acme", id).await;
    }
    for id in [&approval, &question, &connection, &product_q] {
        assert_eq!(named(&events, "interaction-expiring", id).len(), 1, "{id}");
        let warned = position(&events, "interaction-expiring", id);
        let decided = events
            .iter()
            .position(|e| {
                e.subject == *id
                    && matches!(e.name(), "interaction-resolved" | "interaction-closed")
            })
            .expect("decided");
        assert!(warned < decided, "{id}: the warning comes first");
    }

    // Approval: denied by the expiry, never approved; audited; the call fails.
    let i = app.interaction("acme", &approval).await.expect("approval");
    let r = i.resolution.expect("resolved");
    assert_eq!(r.resolved_by, Resolver::Expiry);
    assert_eq!(
        r.answer,
        Answer::Approval {
            approved: false,
            reason: Some("expired".into()),
            edited_arguments: None,
        }
    );
    let fin = finished(&events, &approval);
    assert_eq!(fin.len(), 1);
    match &fin[0].body {
        EventData::ToolCallFinished {
            result: CallResult::Error { code, message },
            ..
        } => {
            assert_eq!(code, "tool.denied");
            assert!(message.starts_with("expired"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(named(&events, "tool-call-released", &approval).is_empty());
    let resolved = named(&events, "interaction-resolved", &approval);
    assert!(matches!(
        resolved[0].body,
        EventData::InteractionResolved {
            resolved_by: Resolver::Expiry,
            ..
        }
    ));
    let audit: Vec<Event> =
        holdpoint_tests::app::read_all(&app.bus, &app.bus.topo.audit_stream(), "hp.audit.acme")
            .await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert!(matches!(
        &audit[0].body,
        EventData::ApprovalDecided { approved: false, decided_by: holdpoint_domain::Decider::Expiry, reason: Some(r), .. } if r == "expired"
    ));

    // Blocking question: closed as expired; the call's result says so for a model.
    let i = app.interaction("acme", &question).await.expect("question");
    assert_eq!(i.state, State::Closed);
    assert_eq!(i.closure.expect("closure").reason, CloseReason::Expired);
    let fin = finished(&events, &question);
    assert_eq!(fin.len(), 1);
    match &fin[0].body {
        EventData::ToolCallFinished {
            result: CallResult::Ok { output },
            ..
        } => {
            assert_eq!(output["expired"], true, "{output}");
            assert_eq!(output["answers"], json!([]));
        }
        other => panic!("{other:?}"),
    }

    // Connection: not connected.
    let fin = finished(&events, &connection);
    assert_eq!(fin.len(), 1);
    assert!(matches!(
        &fin[0].body,
        EventData::ToolCallFinished { result: CallResult::Ok { output }, .. } if output == "Not connected: Linear"
    ));

    // Product question: closed as expired, no lane message, no finished call.
    let i = app.interaction("acme", &product_q).await.expect("product");
    assert_eq!(i.state, State::Closed);
    assert_eq!(i.closure.expect("closure").reason, CloseReason::Expired);
    assert!(finished(&events, &product_q).is_empty());
    assert!(app.lane_messages("acme").await.is_empty());

    // The task status follows: nothing waits any more.
    let last = named(&events, "task-status", &approval);
    assert!(matches!(
        &last.last().expect("status").body,
        EventData::TaskStatus(s) if s.interaction.is_none()
    ));

    // A person answering after the deadline: 409 NRY-0009, saying it expired.
    let late = ana
        .post(
            &format!("/v1/interactions/{approval}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(late.status, 409, "{late:?}");
    assert_eq!(late.code(), "NRY-0009");
    assert!(
        late.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "{late:?}"
    );
    let late = ana
        .post(
            &format!("/v1/questions/{question}/answer"),
            &example_answer(),
        )
        .await;
    assert_eq!(late.status, 409, "{late:?}");
    assert_eq!(late.code(), "NRY-0009");
    assert!(
        late.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired"))
    );
    let late = ana
        .post(
            &format!("/v1/questions/{product_q}/answer"),
            &example_answer(),
        )
        .await;
    assert_eq!(late.status, 409, "{late:?}");
    assert!(
        late.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired"))
    );
    assert_ids_consistent(&events);
}

#[tokio::test]
async fn on_expiry_close_and_deadline_changes() {
    let app = TestApp::start_with(options(None)).await;
    let rt = app.runtime("acme").await;
    let blocking = open_session(&rt, SessionMode::Blocking).await;
    let closing = placement(&blocking).with_expiry(Expiry {
        expires_in: Some(1),
        on_expiry: OnExpiry::Close,
        ..Expiry::default()
    });
    let closed = hold(&rt, &closing).await;
    let moved = hold(&rt, &expiring_in(placement(&blocking), 1)).await;
    let cleared = hold(&rt, &expiring_in(placement(&blocking), 1)).await;
    // Another organisation cannot touch the deadline.
    let globex = app.runtime("globex").await;
    let refused = globex
        .set_deadline(
            &moved,
            Expiry {
                expires_in: Some(60),
                ..Expiry::default()
            },
        )
        .await;
    assert!(
        matches!(&refused, Err(holdpoint_client::ClientError::Rejected(r)) if r.code == holdpoint_domain::ErrorCode::NotFound),
        "{refused:?}"
    );
    rt.set_deadline(
        &moved,
        Expiry {
            expires_in: Some(3),
            ..Expiry::default()
        },
    )
    .await
    .expect("move");
    rt.set_deadline(&cleared, Expiry::default())
        .await
        .expect("clear");
    // Bad deadlines change nothing.
    let past = rt
        .set_deadline(
            &moved,
            Expiry {
                expires_at: Some(time::OffsetDateTime::now_utc() - time::Duration::minutes(1)),
                ..Expiry::default()
            },
        )
        .await;
    assert!(
        matches!(&past, Err(holdpoint_client::ClientError::Rejected(r)) if r.code.spec().code == "NRY-0023"),
        "{past:?}"
    );

    // onExpiry close: closed as expired, the call finishes as interaction.closed.
    let events = settled(&app, "acme", &closed).await;
    let i = app.interaction("acme", &closed).await.expect("closed");
    assert_eq!(i.state, State::Closed);
    assert_eq!(i.closure.expect("closure").reason, CloseReason::Expired);
    assert!(matches!(
        &finished(&events, &closed)[0].body,
        EventData::ToolCallFinished { result: CallResult::Error { code, .. }, .. } if code == "interaction.closed"
    ));
    // The moved deadline did not fire at its first time; it fires once, later.
    let i = app.interaction("acme", &moved).await.expect("moved");
    assert_eq!(i.state, State::Pending, "the old schedule did nothing");
    let events = settled(&app, "acme", &moved).await;
    assert_eq!(finished(&events, &moved).len(), 1);
    // The cleared one still waits, past both its old deadline and the moved one.
    let i = app.interaction("acme", &cleared).await.expect("cleared");
    assert_eq!(i.state, State::Pending);
    assert_eq!(i.expires_at, None);
    assert!(finished(&events, &cleared).is_empty());
}

/// 200 approvals whose deadlines fall together with a person's approval: each ends
/// exactly once, and the answer's status says which side won.
#[tokio::test]
async fn answer_and_expiry_race_with_one_outcome_each() {
    let app = TestApp::start_with(options(None)).await;
    let rt = app.runtime("acme").await;
    let blocking = open_session(&rt, SessionMode::Blocking).await;
    // Opened with a far deadline, then all moved (a runtime's deadline change) to
    // one near instant, so a slow machine cannot make the deadline pass mid-opening.
    let at = placement(&blocking).with_expiry(Expiry {
        expires_in: Some(600),
        ..Expiry::default()
    });
    let ids: Vec<String> = futures::future::join_all((0..200).map(|_| hold(&rt, &at))).await;
    let deadline = move_deadlines(&rt, &ids, 5).await;
    let ana = app.person("acme", "ana");
    let retried = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Answers spread over 600 ms around the deadline.
    let until = deadline - time::OffsetDateTime::now_utc() - time::Duration::milliseconds(300);
    tokio::time::sleep(until.try_into().unwrap_or_default()).await;
    let replies = futures::future::join_all(ids.iter().enumerate().map(|(n, id)| {
        let ana = ana.clone();
        let retried = retried.clone();
        async move {
            tokio::time::sleep(Duration::from_millis((n as u64 * 3) % 600)).await;
            // A 503 (no outcome in time on a loaded machine) is retried with the same
            // key, as the API documents; the retry returns the recorded outcome.
            let mut reply = None;
            for _ in 0..10 {
                let r = ana
                    .post_keyed(
                        &format!("/v1/interactions/{id}/approve"),
                        &format!("k-{id}"),
                        &json!({"approved": true}),
                    )
                    .await;
                if r.status != 503 {
                    reply = Some(r);
                    break;
                }
                retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            reply.expect("an outcome within ten tries")
        }
    }))
    .await;
    let mut by_person = 0;
    for (id, reply) in ids.iter().zip(&replies) {
        let i = wait_for(
            Duration::from_secs(30),
            "every approval to settle",
            || async {
                app.interaction("acme", id)
                    .await
                    .filter(|i| i.state != State::Pending)
            },
        )
        .await;
        let r = i.resolution.expect("resolved");
        match reply.status {
            204 => {
                assert_eq!(r.resolved_by, Resolver::Person, "{id}");
                by_person += 1;
            }
            409 => {
                assert_eq!(reply.code(), "NRY-0009", "{reply:?}");
                assert_eq!(r.resolved_by, Resolver::Expiry, "{id}");
            }
            other => panic!("{id}: unexpected {other}: {reply:?}"),
        }
    }
    // Every approval has exactly one decision and one release or one finish.
    let events = wait_for(Duration::from_secs(20), "every decision event", || async {
        let events = app.events("acme").await;
        ids.iter()
            .all(|id| named(&events, "interaction-resolved", id).len() == 1)
            .then_some(events)
    })
    .await;
    for id in &ids {
        let released = named(&events, "tool-call-released", id).len();
        let fin = finished(&events, id).len();
        assert_eq!(
            released + fin,
            1,
            "{id}: released {released}, finished {fin}"
        );
    }
    assert_ids_consistent(&events);
    eprintln!(
        "race: {by_person} of 200 answered before the deadline; {} answers retried after a 503",
        retried.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The worker is SIGKILLed and the nats-server restarted between the opening and
/// the deadline: the expiry still fires, once.
#[tokio::test]
async fn a_deadline_outlives_a_worker_crash_and_a_server_restart() {
    let mut app = TestApp::start_with(AppOptions {
        workers: 0,
        ..options(Some(1))
    })
    .await;
    let first = app.spawn_worker_process(None);
    let rt = app.runtime("acme").await;
    let blocking = open_session(&rt, SessionMode::Blocking).await;
    let approval = hold(&rt, &expiring_in(placement(&blocking), 5)).await;
    app.kill_process(first);
    app.nats.restart().await;
    let _second = app.spawn_worker_process(None);
    wait_for(
        Duration::from_secs(40),
        "the expiry after the crash",
        || async {
            app.interaction("acme", &approval)
                .await
                .filter(|i| i.state != State::Pending)
        },
    )
    .await;
    let events = wait_for(Duration::from_secs(20), "the finished call", || async {
        let events = app.events("acme").await;
        (!finished(&events, &approval).is_empty()).then_some(events)
    })
    .await;
    let i = app.interaction("acme", &approval).await.expect("approval");
    assert_eq!(
        i.resolution.expect("resolved").resolved_by,
        Resolver::Expiry
    );
    assert_eq!(finished(&events, &approval).len(), 1);
    assert_eq!(named(&events, "interaction-resolved", &approval).len(), 1);
    assert!(named(&events, "interaction-expiring", &approval).len() <= 1);
    // Nothing more arrives: no second expiry.
    app.wait_idle().await;
    let again = app.events("acme").await;
    assert_eq!(finished(&again, &approval).len(), 1);
}

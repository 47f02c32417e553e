//! An answer applies only to what the person saw, and the contract says what the
//! server does (README "A2A" and "The HTTP API"):
//!
//! - an A2A approval or connection answer that names no `interactionId` (and, for
//!   an approval, no `argumentsDigest` of the held call) is refused with
//!   `NRY-0024` and decides nothing, so a retried message never lands on a later
//!   call; a plain reply still answers a question;
//! - JSON `null` is a value on REST as on A2A, and `false`, `0`, `""`, `[]`, `{}`
//!   stay values;
//! - `ListTasks` refuses an explicit `pageSize` of 0.

use holdpoint_client::{AgentManifest, Runtime};
use holdpoint_domain::{Answer, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, answer};

/// The decision-audit records (`approval-decided`) about `effect`.
async fn decisions_about(app: &TestApp, effect: &str) -> Vec<Value> {
    audit_records(app, "auditor", "approval-decided", "effectId", effect).await
}

/// The `argumentsDigest` `GET /v1/interactions/{id}` shows for a held call.
async fn shown_digest(app: &TestApp, effect: &str) -> String {
    let r = app
        .person("acme", "ana")
        .get(&format!("/v1/interactions/{effect}"))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.body["call"]["argumentsDigest"]
        .as_str()
        .expect("argumentsDigest")
        .to_owned()
}

#[tokio::test]
async fn an_a2a_approval_that_names_nothing_never_lands_on_a_later_call() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let eff_a = hold_call(&rt, &at, "merge", json!({"repo": "acme/app"}), None).await;
    let ana = Rpc::new(&app, "acme", "ana");
    let approve = json!([{"data": {"approved": true}}]);

    // A data part `{"approved": true}` without interactionId, with or without the
    // extension's metadata: refused, nothing decided.
    for (id, meta) in [
        ("m1", None),
        ("m1-meta", Some(json!({"approved": true}))),
        ("m1-value", Some(json!({"value": true}))),
    ] {
        let r = ana
            .call("SendMessage", answer(&at, id, approve.clone(), meta))
            .await;
        r.assert_error_for(id, -32602, "NRY-0024");
    }
    assert_eq!(state_of(&app, "acme", &eff_a).await, State::Pending);
    assert!(decisions_about(&app, &eff_a).await.is_empty());

    // Named: released.
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m2",
                approve.clone(),
                Some(json!({"interactionId": eff_a})),
            ),
        )
        .await;
    r.result();
    assert_eq!(state_of(&app, "acme", &eff_a).await, State::Resolved);

    // The runtime holds another call on the same task; the client retries its
    // first message under a fresh messageId, as SDK retry paths do.
    let eff_b = hold_call(
        &rt,
        &at,
        "delete_repo",
        json!({"repo": "acme/app", "confirm": true}),
        None,
    )
    .await;
    for id in ["m1", "m1-retry-1", "m1-retry-2"] {
        let r = ana
            .call("SendMessage", answer(&at, id, approve.clone(), None))
            .await;
        r.assert_error_for(id, -32602, "NRY-0024");
    }
    // The retry of the named answer goes back to eff_a and replays it.
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m2",
                approve.clone(),
                Some(json!({"interactionId": eff_a})),
            ),
        )
        .await;
    r.result();
    app.wait_idle().await;
    let b = app.interaction("acme", &eff_b).await.expect("stored");
    assert_eq!(b.state, State::Pending, "{b:?}");
    assert!(decisions_about(&app, &eff_b).await.is_empty());
    assert_eq!(decisions_about(&app, &eff_a).await.len(), 1);
    let events = app.events("acme").await;
    assert!(named(&events, "tool-call-released", &eff_b).is_empty());
    assert_eq!(named(&events, "tool-call-released", &eff_a).len(), 1);

    // An argumentsDigest binds a decision that names no interaction: eff_a's digest
    // is not eff_b's call (409-style refusal, NRY-0010); eff_b's own decides it.
    let digest_a = shown_digest(&app, &eff_a).await;
    let digest_b = shown_digest(&app, &eff_b).await;
    assert_ne!(digest_a, digest_b);
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m3",
                json!([]),
                Some(json!({"approved": true, "argumentsDigest": digest_a})),
            ),
        )
        .await;
    r.assert_error(-32602, "NRY-0010");
    assert_eq!(state_of(&app, "acme", &eff_b).await, State::Pending);
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m4",
                json!([]),
                Some(json!({"approved": false, "argumentsDigest": digest_b})),
            ),
        )
        .await;
    r.assert_working();
    assert_eq!(state_of(&app, "acme", &eff_b).await, State::Finished);

    // Text on an approval is still refused for what it is (text never approves).
    let eff_c = hold_call(&rt, &at, "merge", json!({"n": 3}), None).await;
    let r = ana
        .call(
            "SendMessage",
            answer(&at, "m5", json!([{"text": "yes"}]), None),
        )
        .await;
    r.assert_error(-32004, "NRY-0020");
    assert_eq!(state_of(&app, "acme", &eff_c).await, State::Pending);
}

#[tokio::test]
async fn a_connection_needs_its_id_and_a_question_takes_a_plain_reply() {
    let app = TestApp::start().await;
    let rt: Runtime = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let agent =
        AgentManifest::from_markdown("---\nloop:\n  connections: true\n---\n").expect("manifest");
    let conn = rt
        .request_connection(&agent, &at, "call-conn", "Linear", "file tickets", None)
        .await
        .expect("connection")
        .to_string();
    let ana = Rpc::new(&app, "acme", "ana");
    for (id, parts, meta) in [
        ("c1", json!([{"data": {"connected": true}}]), None),
        ("c2", json!([{"text": "done"}]), None),
        ("c3", json!([]), Some(json!({"value": {"connected": true}}))),
    ] {
        let r = ana.call("SendMessage", answer(&at, id, parts, meta)).await;
        r.assert_error_for(id, -32602, "NRY-0024");
    }
    assert_eq!(state_of(&app, "acme", &conn).await, State::Pending);
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "c4",
                json!([{"data": {"connected": true}}]),
                Some(json!({"interactionId": conn})),
            ),
        )
        .await;
    r.assert_working();
    assert_eq!(state_of(&app, "acme", &conn).await, State::Finished);

    // A question on another task: a text reply and a data reply without
    // interactionId answer it, as the extension says.
    for (n, part, want) in [
        (1, json!({"text": "main"}), json!("main")),
        (
            2,
            json!({"data": {"branch": "release"}}),
            json!({"branch": "release"}),
        ),
    ] {
        let (qat, q) = open_question(&rt, SessionMode::Blocking).await;
        let r = ana
            .call(
                "SendMessage",
                answer(&qat, &format!("q{n}"), json!([part]), None),
            )
            .await;
        r.assert_working();
        let record = app.interaction("acme", &q).await.expect("stored");
        assert_eq!(record.state, State::Finished);
        assert_eq!(
            record.resolution.map(|r| r.answer),
            Some(Answer::Value { value: want })
        );
    }
}

#[tokio::test]
async fn json_null_is_a_value_on_rest_and_a2a() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let rpc = Rpc::new(&app, "acme", "ana");
    let values = [
        json!(null),
        json!(false),
        json!(0),
        json!(""),
        json!([]),
        json!({}),
    ];
    for value in &values {
        // REST: respond, and approve (which reads a non-boolean value by the kind).
        for path in ["respond", "approve"] {
            let (_, q) = open_question(&rt, SessionMode::Blocking).await;
            let r = ana
                .post(
                    &format!("/v1/interactions/{q}/{path}"),
                    &json!({ "value": value }),
                )
                .await;
            assert_eq!(r.status, 204, "{path} {value}: {r:?}");
            let record = app.interaction("acme", &q).await.expect("stored");
            assert_eq!(
                record.resolution.map(|r| r.answer),
                Some(Answer::Value {
                    value: value.clone()
                }),
                "{path} {value}"
            );
        }
        // A2A: the same value in the extension's metadata.
        let (at, q) = open_question(&rt, SessionMode::Blocking).await;
        let r = rpc
            .call(
                "SendMessage",
                answer(
                    &at,
                    "a2a-value",
                    json!([]),
                    Some(json!({"interactionId": q, "value": value})),
                ),
            )
            .await;
        r.assert_working_for(&value.to_string());
        let record = app.interaction("acme", &q).await.expect("stored");
        assert_eq!(
            record.resolution.map(|r| r.answer),
            Some(Answer::Value {
                value: value.clone()
            })
        );
    }
    // An absent value is still not a value; both is still refused; and on an
    // approval, null is not a decision.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    for body in [json!({}), json!({"value": null, "approved": true})] {
        let r = ana
            .post(&format!("/v1/interactions/{q}/respond"), &body)
            .await;
        assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{body}: {r:?}");
    }
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
    let (_, eff) = open_approval(&rt).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"value": null}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
}

#[tokio::test]
async fn list_tasks_refuses_an_explicit_page_size_of_zero() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let _ = open_approval(&rt).await;
    let ana = Rpc::new(&app, "acme", "ana");
    for size in [json!(0), json!("0"), json!(-1), json!(101)] {
        let r = ana.call("ListTasks", json!({ "pageSize": size })).await;
        r.assert_error_for(&size.to_string(), -32602, "NRY-0001");
    }
    let r = ana.call("ListTasks", json!({})).await;
    assert_eq!(r.result()["pageSize"], 50, "{}", r.body);
    let r = ana.call("ListTasks", json!({"pageSize": 1})).await;
    assert_eq!(r.result()["tasks"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn a_not_found_is_not_the_keys_answer_once_the_interaction_exists() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let ana = app.person("acme", "ana");
    let effect = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    let path = format!("/v1/interactions/{effect}/approve");
    let body = json!({"approved": true});

    // Sent before the runtime's opening landed: 404, and nothing is written.
    let r = ana.post_keyed(&path, "k-early", &body).await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"), "{r:?}");
    let r = ana.post_keyed(&path, "k-early", &body).await;
    assert_eq!(
        (r.status, r.code()),
        (404, "NRY-0004"),
        "still not there: {r:?}"
    );

    // The runtime opens it; the same key, inside the duplicate window, decides now.
    hold_on(&rt, &at, &effect).await;
    let r = ana.post_keyed(&path, "k-early", &body).await;
    assert_eq!(r.status, 204, "{r:?}");
    let record = app.interaction("acme", &effect).await.expect("stored");
    assert_eq!(record.state, State::Resolved);
    assert_eq!(
        record.resolution.as_ref().map(|r| r.key.as_str()),
        Some("k-early")
    );
    // A key that decided something gets that decision back, again and again.
    for _ in 0..3 {
        assert_eq!(ana.post_keyed(&path, "k-early", &body).await.status, 204);
    }
    // Another key is a conflict, as always.
    let r = ana.post_keyed(&path, "k-other", &body).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-resolved", &effect).len(), 1);
    assert_eq!(named(&events, "tool-call-released", &effect).len(), 1);

    // A runtime's hold refused because its session was not open yet is decided
    // afresh once the session exists (the same command, inside the window).
    let later = format!("s-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let at2 = placement(&later);
    let early = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    let refused = rt
        .hold_for_approval(&at2, hold(&early))
        .await
        .expect_err("no session yet");
    assert!(refused.to_string().contains("NRY-0002"), "{refused}");
    rt.open_session(&later, SessionMode::Blocking)
        .await
        .expect("session");
    rt.hold_for_approval(&at2, hold(&early))
        .await
        .expect("held once the session is open");
    assert_eq!(state_of(&app, "acme", &early).await, State::Pending);
}

fn hold(effect: &str) -> holdpoint_client::HoldCall {
    holdpoint_client::HoldCall {
        effect_id: effect.to_owned(),
        call_id: format!("call-{effect}"),
        server: "github".into(),
        tool: "merge".into(),
        arguments: json!({"repo": "acme/app"}),
        reason: None,
        editable: false,
        approvals: None,
    }
}

async fn hold_on(rt: &Runtime, at: &holdpoint_client::Placement, effect: &str) {
    rt.hold_for_approval(at, hold(effect)).await.expect("hold");
}

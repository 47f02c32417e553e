//! Regressions for what an adversarial review found: deep values, a lane message
//! reusing a question's id, idempotency keys reused by another person, a runtime
//! resetting the operator's stream settings, and an extreme listing cursor.

use std::time::Duration;

use holdpoint_bus::Topology;
use holdpoint_domain::{LaneContent, SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn deep_values_are_refused_and_change_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Product).await;
    let ana = app.person("acme", "ana");
    for depth in [33usize, 60, 122, 126] {
        let v = format!("{{\"value\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let r = ana
            .post_raw(
                &format!("/v1/interactions/{q}/respond"),
                "application/json",
                v.into_bytes(),
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "NRY-0001"),
            "depth {depth}: {r:?}"
        );
    }
    // Still readable and answerable.
    assert_eq!(ana.get(&format!("/v1/interactions/{q}")).await.status, 200);
    assert_eq!(answer_example(&ana, &q).await.status, 204);
    // A runtime cannot store arguments too deep to read back either.
    let session = "deep-s";
    rt.open_session(session, SessionMode::Blocking)
        .await
        .expect("session");
    let deep: serde_json::Value =
        serde_json::from_str(&format!("{}{}", "[".repeat(40), "]".repeat(40))).expect("json");
    let err = rt
        .hold_for_approval(
            &placement(session),
            holdpoint_client::HoldCall {
                effect_id: "eff_deep".into(),
                call_id: "c".into(),
                server: "s".into(),
                tool: "t".into(),
                arguments: deep,
                reason: None,
                editable: false,
                approvals: None,
            },
        )
        .await;
    assert!(
        matches!(err, Err(holdpoint_client::ClientError::Rejected(ref r)) if r.code == holdpoint_domain::ErrorCode::InvalidRequest),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_message_reusing_a_question_id_on_another_lane_does_not_swallow_the_answer() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Product).await;
    let mallory = app.person("acme", "mallory");
    let r = mallory
        .post(
            &format!("/v1/sessions/{}/messages", at.session),
            &json!({"text": "unrelated", "lane": "other", "messageId": q}),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let r = answer_example(&app.person("acme", "ana"), &q).await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;
    let lane = app.lane_messages("acme").await;
    let delivered: Vec<_> = lane
        .iter()
        .filter(|m| m.lane.as_str() == "main" && matches!(&m.content, LaneContent::Answer { question_id, .. } if question_id.as_str() == q))
        .collect();
    assert_eq!(delivered.len(), 1, "the answer reached its lane: {lane:?}");
}

#[tokio::test]
async fn another_person_reusing_a_key_is_another_answer() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = open_approval(&rt).await;
    let path = format!("/v1/interactions/{eff}/approve");
    let ana = app
        .person("acme", "ana")
        .post_keyed(&path, "samekey", &json!({"approved": true}))
        .await;
    assert_eq!(ana.status, 204);
    let bea = app
        .person("acme", "bea")
        .post_keyed(&path, "samekey", &json!({"approved": false}))
        .await;
    assert_eq!((bea.status, bea.code()), (409, "NRY-0009"), "{bea:?}");
    // Ana's retry still gets her outcome.
    assert_eq!(
        app.person("acme", "ana")
            .post_keyed(&path, "samekey", &json!({"approved": true}))
            .await,
        ana
    );
    app.wait_idle().await;
    let record = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(record.state, State::Resolved);
    assert_eq!(record.resolution.expect("resolved").by.as_str(), "ana");
}

#[tokio::test]
async fn a_runtime_does_not_reset_the_operators_stream_settings() {
    let app = TestApp::start_with(AppOptions {
        topo: Topology {
            duplicate_window: Duration::from_secs(30),
            ..AppOptions::default().topo
        },
        ..AppOptions::default()
    })
    .await;
    let window = |app: &TestApp| {
        let js = app.bus.js.clone();
        let name = app.bus.topo.commands_stream();
        async move {
            js.get_stream(&name)
                .await
                .expect("stream")
                .cached_info()
                .config
                .duplicate_window
        }
    };
    assert_eq!(window(&app).await, Duration::from_secs(30));
    let rt = holdpoint_client::Runtime::connect(&app.nats.url(), "acme")
        .await
        .expect("runtime");
    rt.open_session("s-attach", SessionMode::Blocking)
        .await
        .expect("session");
    assert_eq!(
        window(&app).await,
        Duration::from_secs(30),
        "the runtime's default topology changed the stream"
    );
}

#[tokio::test]
async fn an_extreme_listing_cursor_is_not_a_server_error() {
    let app = TestApp::start().await;
    let r = app
        .person("acme", "ana")
        .get("/v1/interactions?cursor=18446744073709551615")
        .await;
    assert!(r.status == 200 || r.status == 400, "{r:?}");
    let r = app
        .person("acme", "ana")
        .get("/v1/interactions?cursor=-1")
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"));
}

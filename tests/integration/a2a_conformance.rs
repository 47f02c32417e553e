//! A2A v1.0 conformance and the contract A2A shares with REST (README "A2A"): the
//! version rule, agent card caching, params validation, timestamps, ProtoJSON
//! input, and an approval bound to the arguments the person saw.

use holdpoint_domain::{EventData, State};
use holdpoint_tests::app::TestApp;
use serde_json::json;

use crate::a2a::{Rpc, answer};
use crate::common::*;

/// `argumentsDigest` in the extension metadata binds an A2A approval as it binds a
/// REST one: another digest is `NRY-0010` (invalid params) and releases nothing;
/// the digest of `GET /v1/interactions/{id}` releases the call.
#[tokio::test]
async fn arguments_digest_binds_an_a2a_approval() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let ana = app.person("acme", "ana");
    let view = ana.get(&format!("/v1/interactions/{eff}")).await;
    let digest = view.body["call"]["argumentsDigest"]
        .as_str()
        .expect("digest")
        .to_owned();
    let rpc = Rpc::new(&app, "acme", "ana");
    let meta = |d: &str| json!({"interactionId": eff, "approved": true, "argumentsDigest": d});
    let r = rpc
        .call(
            "SendMessage",
            answer(
                &at,
                "m-d1",
                json!([{"data": {"approved": true}}]),
                Some(meta("0".repeat(64).as_str())),
            ),
        )
        .await;
    assert_eq!(
        (r.error_code(), r.holdpoint()),
        (-32602, "NRY-0010"),
        "{}",
        r.body
    );
    app.wait_idle().await;
    assert_eq!(
        app.interaction("acme", &eff).await.expect("stored").state,
        State::Pending
    );
    let r = rpc
        .call(
            "SendMessage",
            answer(
                &at,
                "m-d2",
                json!([{"data": {"approved": true}}]),
                Some(meta(&digest)),
            ),
        )
        .await;
    assert_eq!(
        r.result()["task"]["status"]["state"],
        "TASK_STATE_WORKING",
        "{}",
        r.body
    );
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    assert!(events.iter().any(|e| matches!(
        &e.body,
        EventData::ToolCallReleased { arguments_digest, .. } if *arguments_digest == digest
    )));
    // Still refused where it cannot bind anything.
    let r = rpc
        .call(
            "SendMessage",
            answer(
                &at,
                "m-d3",
                json!([{"text": "ok"}]),
                Some(json!({"interactionId": eff, "value": true, "argumentsDigest": digest})),
            ),
        )
        .await;
    assert_eq!((r.error_code(), r.holdpoint()), (-32602, "NRY-0001"));
}

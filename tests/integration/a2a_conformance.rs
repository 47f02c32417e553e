//! A2A v1.0 conformance and the contract A2A shares with REST (README "A2A"): the
//! version rule, agent card caching, params validation, timestamps, ProtoJSON
//! input, and an approval bound to the arguments the person saw.

use holdpoint_domain::{EventData, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, answer};
use crate::streams::{Next, WAIT};

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
        .send(answer(
            &at,
            "m-d1",
            json!([{"data": {"approved": true}}]),
            Some(meta("0".repeat(64).as_str())),
        ))
        .await;
    r.assert_error(-32602, "NRY-0010");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    let r = rpc
        .send(answer(
            &at,
            "m-d2",
            json!([{"data": {"approved": true}}]),
            Some(meta(&digest)),
        ))
        .await;
    r.assert_working();
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    assert!(events.iter().any(|e| matches!(
        &e.body,
        EventData::ToolCallReleased { arguments_digest, .. } if *arguments_digest == digest
    )));
    // Still refused where it cannot bind anything.
    let r = rpc
        .send(answer(
            &at,
            "m-d3",
            json!([{"text": "ok"}]),
            Some(json!({"interactionId": eff, "value": true, "argumentsDigest": digest})),
        ))
        .await;
    r.assert_error(-32602, "NRY-0001");
}

/// A JSON-RPC request with the development identity and exactly `headers`; the
/// reply's body.
async fn raw_rpc(app: &TestApp, body: Value, headers: &[(&str, &str)]) -> Value {
    let r = Rpc::new(app, "acme", "ana")
        .raw(body.to_string(), headers)
        .await;
    assert_eq!(r.status, 200);
    r.body
}

/// A2A v1.0: a request without `A2A-Version` is version 0.3, which a v1.0 server
/// refuses with `VersionNotSupportedError` (it used to be read as 1.0); an empty
/// header is the same as none. The compatibility switch, off by default, reads
/// both as 1.0.
#[tokio::test]
async fn a_missing_a2a_version_is_read_as_0_3_and_refused() {
    let get = |task: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}});
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, _) = open_approval(&rt).await;
    let task = at.task_id.as_str();
    for headers in [&[][..], &[("A2A-Version", "")][..]] {
        let v = raw_rpc(&app, get(task), headers).await;
        assert_eq!(v["error"]["code"], -32009, "{headers:?}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED",
            "{v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("0.3")),
            "{v}"
        );
    }
    let v = raw_rpc(&app, get(task), &[("A2A-Version", "1.0")]).await;
    assert_eq!(v["result"]["id"], task, "{v}");

    let lenient = TestApp::start_with(AppOptions {
        a2a_missing_version_is_1_0: true,
        ..AppOptions::default()
    })
    .await;
    let rt = lenient.runtime("acme").await;
    let (at, _) = open_approval(&rt).await;
    let task = at.task_id.as_str();
    for headers in [&[][..], &[("A2A-Version", "")][..]] {
        let v = raw_rpc(&lenient, get(task), headers).await;
        assert_eq!(v["result"]["id"], task, "{headers:?}: {v}");
    }
    let v = raw_rpc(&lenient, get(task), &[("A2A-Version", "0.3")]).await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
}

/// The agent card has an `ETag` from its content and answers a matching
/// `If-None-Match` with `304 Not Modified` and no body.
#[tokio::test]
async fn the_agent_card_has_an_etag_and_answers_if_none_match() {
    let app = TestApp::start().await;
    let url = format!("{}/.well-known/agent-card.json", app.base);
    let http = reqwest::Client::new();
    let first = http.get(&url).send().await.expect("http");
    assert_eq!(first.status().as_u16(), 200);
    let etag = first
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .expect("an ETag")
        .to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let card: Value = first.json().await.expect("card");
    assert_eq!(card["name"], "Holdpoint");
    for given in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
    ] {
        let r = http
            .get(&url)
            .header("If-None-Match", &given)
            .send()
            .await
            .expect("http");
        assert_eq!(r.status().as_u16(), 304, "{given}");
        assert_eq!(
            r.headers().get("etag").and_then(|v| v.to_str().ok()),
            Some(etag.as_str())
        );
        assert!(r.headers().get("cache-control").is_some());
        assert!(r.bytes().await.expect("body").is_empty());
    }
    let r = http
        .get(&url)
        .header("If-None-Match", "\"stale\"")
        .send()
        .await
        .expect("http");
    assert_eq!(r.status().as_u16(), 200);
    // Another host is another card (its URL), so another tag.
    let other = http
        .get(&url)
        .header("Host", "holdpoint.example.test")
        .send()
        .await
        .expect("http");
    assert_ne!(
        other.headers().get("etag").and_then(|v| v.to_str().ok()),
        Some(etag.as_str())
    );
}

/// A negative `historyLength` is invalid params (-32602), as a negative
/// `pageSize` is; it used to be accepted.
#[tokio::test]
async fn a_negative_history_length_is_invalid_params() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let rpc = Rpc::new(&app, "acme", "ana");
    let task = at.task_id.as_str();
    for (method, params) in [
        ("GetTask", json!({"id": task, "historyLength": -1})),
        ("ListTasks", json!({"historyLength": -5})),
        ("ListTasks", json!({"historyLength": -1, "pageSize": 10})),
    ] {
        let r = rpc.call(method, params.clone()).await;
        r.assert_error_for(&format!("{method} {params}"), -32602, "NRY-0001");
    }
    let mut send = answer(&at, "m-h", json!([{"data": {"approved": true}}]), None);
    send["configuration"] = json!({"historyLength": -1});
    let r = rpc.send(send).await;
    r.assert_code(-32602);
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    for (method, params) in [
        ("GetTask", json!({"id": task, "historyLength": 0})),
        ("ListTasks", json!({"historyLength": 3})),
    ] {
        rpc.call(method, params).await.result();
    }
}

fn one_format(what: &str, t: &Value) {
    let s = t
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no timestamp in {t}"));
    let shape: String = s
        .chars()
        .map(|c| if c.is_ascii_digit() { 'd' } else { c })
        .collect();
    assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ", "{what}: {s}");
}

/// Every timestamp Holdpoint emits has one format, RFC 3339 in UTC with
/// milliseconds and `Z`: A2A `status.timestamp` (it carried nanoseconds), A2A
/// `error.data[].metadata.timestamp` (it used `+00:00`), REST and CloudEvents
/// `time`.
#[tokio::test]
async fn every_timestamp_has_one_format() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let (qat, _) = open_question(&rt, holdpoint_domain::SessionMode::Blocking).await;
    app.wait_idle().await;
    let rpc = Rpc::new(&app, "acme", "ana");
    let task = rpc
        .call("GetTask", json!({"id": at.task_id.as_str()}))
        .await;
    one_format("GetTask", &task.result()["status"]["timestamp"]);
    let list = rpc.call("ListTasks", json!({})).await;
    let tasks = list.result()["tasks"].as_array().expect("tasks").clone();
    assert!(tasks.len() >= 2);
    for t in &tasks {
        one_format("ListTasks", &t["status"]["timestamp"]);
    }
    let missing = rpc.call("GetTask", json!({"id": "no-such-task"})).await;
    missing.assert_code(-32001);
    one_format(
        "error data",
        &missing.body["error"]["data"][0]["metadata"]["timestamp"],
    );
    let mut sub = rpc
        .stream("SubscribeToTask", json!({"id": qat.task_id.as_str()}))
        .await;
    let Next::Frame(first) = sub.next(WAIT).await else {
        panic!("no first frame");
    };
    one_format(
        "SubscribeToTask",
        &first.json()["result"]["task"]["status"]["timestamp"],
    );
    let sent = rpc
        .send(answer(
            &at,
            "m-ts",
            json!([{"data": {"approved": true}}]),
            Some(json!({"interactionId": eff})),
        ))
        .await;
    one_format("SendMessage", &sent.result()["task"]["status"]["timestamp"]);
    drop(sub);
    let view = app
        .person("acme", "ana")
        .get(&format!("/v1/interactions/{eff}"))
        .await;
    one_format("REST openedAt", &view.body["openedAt"]);
    one_format("REST resolution.at", &view.body["resolution"]["at"]);
    app.wait_idle().await;
    let org = holdpoint_domain::OrgId::parse("acme").expect("org");
    let stored: Vec<Value> = holdpoint_tests::app::read_all(
        &app.bus,
        &app.bus.topo.events_stream(),
        &app.bus.topo.org_events_filter(&org),
    )
    .await;
    assert!(stored.len() > 4);
    for e in &stored {
        one_format("CloudEvents time", &e["time"]);
    }
}

/// ProtoJSON input, as the A2A v1.0 JSON binding's readers accept it: proto field
/// names, enum numbers, integers as strings. Holdpoint answers in the canonical
/// form, and the extension's metadata still refuses fields it does not define.
#[tokio::test]
async fn protojson_input_is_read_and_canonical_json_written() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let (other, other_eff) = open_approval(&rt).await;
    let rpc = Rpc::new(&app, "acme", "ana");
    let r = rpc
        .call(
            "GetTask",
            json!({"id": at.task_id.as_str(), "history_length": "0"}),
        )
        .await;
    let status = &r.result()["status"];
    assert_eq!(status["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(
        status["message"]["role"], "ROLE_AGENT",
        "canonical enum names"
    );
    assert!(
        status["message"].get("messageId").is_some(),
        "lowerCamel names"
    );
    assert!(status["message"].get("message_id").is_none());
    let r = rpc
        .call("ListTasks", json!({"page_size": "1", "status": 8}))
        .await;
    assert_eq!(r.result()["pageSize"], 1, "{}", r.body);
    assert_eq!(r.result()["tasks"].as_array().map(Vec::len), Some(1));
    // The extension's metadata is the sender's own: `interaction_id` is unknown there.
    let r = rpc
        .send(json!({"message": {
                "message_id": "m-p0", "task_id": other.task_id.as_str(), "role": 1,
                "parts": [{"data": {"approved": true}}],
                "extensions": [holdpoint_domain::EXTENSION_URI],
                "metadata": {holdpoint_domain::EXTENSION_URI: {"interaction_id": other_eff, "approved": true}}
            }}),
        )
        .await;
    r.assert_error(-32602, "NRY-0001");
    let r = rpc
        .send(json!({"message": {
                "message_id": "m-p1", "task_id": at.task_id.as_str(),
                "context_id": at.context_id.as_str(), "role": 1,
                "parts": [{"data": {"approved": true}}],
                "extensions": [holdpoint_domain::EXTENSION_URI],
                "metadata": {holdpoint_domain::EXTENSION_URI: {"interactionId": eff}}
            }, "configuration": {"history_length": "0"}}))
        .await;
    r.assert_working();
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &eff).await, State::Resolved);
    assert_eq!(state_of(&app, "acme", &other_eff).await, State::Pending);
    // A name given twice is refused.
    let r = rpc
        .call(
            "GetTask",
            json!({"id": at.task_id.as_str(), "historyLength": 1, "history_length": 1}),
        )
        .await;
    r.assert_code(-32602);
}

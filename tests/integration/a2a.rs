//! Holdpoint as an A2A v1.0 server with the interactions/v1 extension (README
//! "A2A: answering paused tasks from any A2A client"): the agent card, the JSON-RPC methods, the reading rules, idempotency by
//! `messageId`, isolation, the task streams, and a conformance run of the official
//! Python SDK (`a2a-sdk`) against a live Holdpoint.

use std::path::PathBuf;
use std::time::Duration;

use holdpoint_client::{AgentManifest, Placement, Runtime};
use holdpoint_domain::{Answer, EventData, SessionMode, State, TaskState};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::workspace_root;
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, URI, answer, get};
use crate::streams::{Next, WAIT};

fn connections_agent() -> AgentManifest {
    AgentManifest::from_markdown("---\nloop:\n  connections: true\n---\n").expect("manifest")
}

/// Opens a blocking session and a connection request; returns (placement, id).
async fn open_connection(rt: &Runtime) -> (Placement, String) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let id = rt
        .request_connection(
            &connections_agent(),
            &at,
            &format!("call-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
            "Linear",
            "file tickets",
            None,
        )
        .await
        .expect("connection");
    (at, id.to_string())
}

#[tokio::test]
async fn agent_card_declares_interface_extension_streaming_and_bearer() {
    let app = TestApp::start().await;
    let resp = reqwest::get(format!("{}/.well-known/agent-card.json", app.base))
        .await
        .expect("http");
    assert_eq!(resp.status().as_u16(), 200, "public, no identity needed");
    // Built from the request's host: caches keep one copy per host and scheme.
    let vary = resp
        .headers()
        .get("vary")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        vary.contains("Host") && vary.contains("X-Forwarded-Proto"),
        "vary: {vary:?}"
    );
    let card: Value = resp.json().await.expect("json");
    assert_eq!(card["name"], "Holdpoint");
    assert!(card["description"].as_str().is_some_and(|d| !d.is_empty()));
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["url"], format!("{}/a2a", app.base));
    assert_eq!(iface["protocolBinding"], "JSONRPC");
    assert_eq!(iface["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    let ext = &card["capabilities"]["extensions"][0];
    assert_eq!(ext["uri"], URI);
    assert!(ext["description"].as_str().is_some_and(|d| !d.is_empty()));
    let scheme = &card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"];
    assert_eq!(scheme["scheme"], "Bearer");
    assert_eq!(scheme["bearerFormat"], "JWT");
    assert!(card["securityRequirements"][0]["schemes"]["bearer"].is_object());
}

#[tokio::test]
async fn a_waiting_approval_shows_its_interaction_only_with_the_extension() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let ana = Rpc::new(&app, "acme", "ana");

    let r = ana.call("GetTask", get(&at)).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("a2a-extensions"),
        Some(URI),
        "activation is echoed"
    );
    let task = r.result();
    assert_eq!(task["id"], at.task_id.as_str());
    assert_eq!(task["contextId"], at.context_id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    let m = &task["status"]["message"];
    assert_eq!(m["role"], "ROLE_AGENT");
    assert_eq!(
        m["parts"],
        json!([{"text": "Approve github / create_pull_request?"}])
    );
    assert_eq!(m["extensions"], json!([URI]));
    assert_eq!(
        m["metadata"][URI],
        json!({
            "interactionId": eff,
            "kind": "approval",
            "prompt": "Approve github / create_pull_request?",
            "detail": {"server": "github", "tool": "create_pull_request", "reason": "writes"},
        })
    );
    let text = r.body.to_string();
    assert!(
        !text.contains("arguments") && !text.contains("acme/app"),
        "never the arguments: {text}"
    );

    // Not activated: the same message as plain text.
    let r = ana.plain("GetTask", get(&at)).await;
    assert_eq!(r.header("a2a-extensions"), None);
    let m = &r.result()["status"]["message"];
    assert_eq!(
        m["parts"],
        json!([{"text": "Approve github / create_pull_request?"}])
    );
    assert!(
        m.get("metadata").is_none() && m.get("extensions").is_none(),
        "{m}"
    );
    assert_eq!(r.result()["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
}

#[tokio::test]
async fn approval_with_extension_metadata_resumes_the_task_and_records_the_approver() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let ana = Rpc::new(&app, "acme", "ana@acme.example");
    let r = ana
        .send(answer(
            &at,
            "m-2",
            json!([{"data": {"approved": true}}]),
            Some(json!({"interactionId": eff, "approved": true})),
        ))
        .await;
    let task = &r.result()["task"];
    assert_eq!(task["id"], at.task_id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");

    let i = app.interaction("acme", &eff).await.expect("stored");
    let res = i.resolution.expect("resolved");
    assert_eq!(res.by.as_str(), "ana@acme.example", "approvedBy");
    assert_eq!(res.key.as_str(), "m-2");
    assert!(matches!(
        res.answer,
        Answer::Approval { approved: true, .. }
    ));
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    let working = named(&events, "task-status", &eff)
        .into_iter()
        .filter(|e| matches!(&e.body, EventData::TaskStatus(s) if s.state == TaskState::Working))
        .count();
    assert_eq!(working, 1);
    let r = ana.call("GetTask", get(&at)).await;
    assert_eq!(r.result()["status"]["state"], "TASK_STATE_WORKING");
    assert!(r.result()["status"].get("message").is_none());
}

#[tokio::test]
async fn data_and_text_parts_are_read_by_the_reading_rules() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = Rpc::new(&app, "acme", "ana");

    // A data part {approved: true} approves once the answer names the interaction
    // (without a name it is refused, NRY-0024: see `seen`).
    let (at, eff) = open_approval(&rt).await;
    let r = ana
        .send_plain(answer(
            &at,
            "m-a",
            json!([{"data": {"approved": true}}]),
            None,
        ))
        .await;
    r.assert_error(-32602, "NRY-0024");
    let r = ana
        .send(answer(
            &at,
            "m-a",
            json!([{"data": {"approved": true}}]),
            Some(json!({"interactionId": eff})),
        ))
        .await;
    r.assert_working();
    assert!(matches!(
        app.interaction("acme", &eff)
            .await
            .expect("stored")
            .resolution
            .expect("r")
            .answer,
        Answer::Approval { approved: true, .. }
    ));

    // {approved: false} denies: the call fails as tool.denied.
    let (at, denied) = open_approval(&rt).await;
    let r = ana
        .send(answer(
            &at,
            "m-d",
            json!([{"data": {"approved": false}}]),
            Some(json!({"interactionId": denied})),
        ))
        .await;
    r.assert_working();

    // Text never approves: -32004, and nothing changes.
    let (at, held) = open_approval(&rt).await;
    for r in [
        ana.send_plain(answer(&at, "m-t", json!([{"text": "yes, go"}]), None))
            .await,
        ana.send(answer(
            &at,
            "m-t2",
            json!([{"text": "yes"}]),
            Some(json!({"interactionId": held})),
        ))
        .await,
    ] {
        r.assert_error(-32004, "NRY-0020");
    }
    assert_eq!(state_of(&app, "acme", &held).await, State::Pending);
    let r = ana.call("GetTask", get(&at)).await;
    assert_eq!(r.result()["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    // A boolean value approves; any other value does not fit.
    let r = ana
        .send(answer(
            &at,
            "m-v",
            json!([]),
            Some(json!({"interactionId": held, "value": "ok"})),
        ))
        .await;
    r.assert_error(-32602, "NRY-0001");
    assert_eq!(state_of(&app, "acme", &held).await, State::Pending);

    // A text part answers a question.
    let (at, q) = open_question(&rt, SessionMode::Blocking).await;
    let r = ana.call("GetTask", get(&at)).await;
    assert_eq!(r.result()["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        r.result()["status"]["message"]["metadata"][URI]["kind"],
        "question"
    );
    let r = ana
        .send_plain(answer(
            &at,
            "m-q",
            json!([{"text": "main, and keep both"}]),
            None,
        ))
        .await;
    r.assert_working();
    assert_eq!(
        app.interaction("acme", &q)
            .await
            .expect("stored")
            .resolution
            .expect("r")
            .answer,
        Answer::Value {
            value: json!("main, and keep both")
        }
    );

    // A data part answers a question too (its `answers` are checked like the REST body).
    let (at, q2) = open_question(&rt, SessionMode::Blocking).await;
    let bad = ana
        .send_plain(answer(
            &at,
            "m-q2",
            json!([{"data": {"answers": [{"options": [9]}, {"options": [0]}]}}]),
            None,
        ))
        .await;
    bad.assert_error(-32602, "NRY-0003");
    let r = ana
        .send_plain(answer(
            &at,
            "m-q3",
            json!([{"data": {"answers": [{"options": [1]}, {"options": [2]}]}}]),
            None,
        ))
        .await;
    r.assert_working();
    assert!(matches!(
        app.interaction("acme", &q2)
            .await
            .expect("stored")
            .resolution
            .expect("r")
            .answer,
        Answer::Question { .. }
    ));

    app.wait_idle().await;
    let events = app.events("acme").await;
    let EventData::ToolCallFinished { result, .. } = &finished(&events, &denied)[0].body else {
        panic!("finished");
    };
    assert!(format!("{result:?}").contains("tool.denied"), "{result:?}");
}

#[tokio::test]
async fn connections_follow_the_reading_rules() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = Rpc::new(&app, "acme", "ana");
    let mut expect = Vec::new();
    for (i, (parts, meta, connected)) in [
        (
            json!([{"data": {"connected": true}}]),
            Some(json!({})),
            true,
        ),
        (json!([{"data": true}]), Some(json!({})), true),
        (
            json!([{"data": {"connected": false}}]),
            Some(json!({})),
            false,
        ),
        (json!([{"text": "done, connected"}]), Some(json!({})), false),
        (json!([]), Some(json!({"approved": true})), true),
        (json!([]), Some(json!({"value": {"connected": true}})), true),
        (json!([]), Some(json!({"value": "yes"})), false),
    ]
    .into_iter()
    .enumerate()
    {
        let (at, id) = open_connection(&rt).await;
        let r = ana.call("GetTask", get(&at)).await;
        assert_eq!(r.result()["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
        assert_eq!(
            r.result()["status"]["message"]["metadata"][URI]["detail"],
            json!({"app": "Linear", "reason": "file tickets"})
        );
        let meta = meta.map(|mut m: Value| {
            m["interactionId"] = json!(id);
            m
        });
        let r = ana
            .send(answer(&at, &format!("m-{i}"), parts.clone(), meta))
            .await;
        r.assert_working_for(&format!("{parts}"));
        expect.push((id, connected));
    }
    app.wait_idle().await;
    let events = app.events("acme").await;
    for (id, connected) in expect {
        let EventData::ToolCallFinished { result, .. } = &finished(&events, &id)[0].body else {
            panic!("finished");
        };
        let want = if connected {
            "Connected: Linear"
        } else {
            "Not connected: Linear"
        };
        assert!(format!("{result:?}").contains(want), "{id}: {result:?}");
    }
}

#[tokio::test]
async fn a_retry_with_the_same_message_id_answers_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = Rpc::new(&app, "acme", "ana");
    let (at, eff) = open_approval(&rt).await;
    let with_ext = answer(
        &at,
        "m-2",
        json!([{"data": {"approved": true}}]),
        Some(json!({"interactionId": eff, "approved": true})),
    );
    let first = ana.send(with_ext.clone()).await;
    let again = ana.send(with_ext).await;
    first.assert_working();
    assert_eq!(again.result()["task"]["id"], first.result()["task"]["id"]);
    again.assert_working();
    // Without naming the interaction, the same messageId still finds its answer.
    let plain = ana
        .send_plain(answer(
            &at,
            "m-2",
            json!([{"data": {"approved": true}}]),
            None,
        ))
        .await;
    plain.assert_working();
    // Another messageId: the task waits for nothing now.
    let other = ana
        .send_plain(answer(
            &at,
            "m-3",
            json!([{"data": {"approved": false}}]),
            None,
        ))
        .await;
    other.assert_error(-32602, "NRY-0009");
    // Naming the resolved interaction with another messageId: a conflict.
    let named_other = ana
        .send(answer(
            &at,
            "m-4",
            json!([]),
            Some(json!({"interactionId": eff, "approved": false})),
        ))
        .await;
    named_other.assert_error(-32602, "NRY-0009");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    let res = app
        .interaction("acme", &eff)
        .await
        .expect("stored")
        .resolution
        .expect("r");
    assert!(matches!(
        res.answer,
        Answer::Approval { approved: true, .. }
    ));
}

#[tokio::test]
async fn the_same_message_id_in_two_orgs_and_two_tasks_does_not_collide() {
    let app = TestApp::start().await;
    let acme = app.runtime("acme").await;
    let globex = app.runtime("globex").await;
    let (a1, e1) = open_approval(&acme).await;
    let (a2, e2) = open_approval(&acme).await;
    let (g1, e3) = open_approval(&globex).await;
    for (org, at, eff) in [("acme", &a1, &e1), ("acme", &a2, &e2), ("globex", &g1, &e3)] {
        let r = Rpc::new(&app, org, "ana")
            .send(answer(
                at,
                "m-2",
                json!([]),
                Some(json!({"interactionId": eff, "approved": true})),
            ))
            .await;
        r.assert_working_for(&format!("{org} {eff}"));
        let res = app
            .interaction(org, eff)
            .await
            .expect("stored")
            .resolution
            .expect("resolved");
        assert_eq!(res.key.as_str(), "m-2");
    }
}

#[tokio::test]
async fn unknown_and_foreign_tasks_are_not_found() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let bo = Rpc::new(&app, "globex", "bo");
    let ana = Rpc::new(&app, "acme", "ana");
    for r in [
        ana.call("GetTask", json!({"id": "no-such-task"})).await,
        bo.call("GetTask", get(&at)).await,
        bo.send(answer(
            &at,
            "m-x",
            json!([]),
            Some(json!({"interactionId": eff, "approved": true})),
        ))
        .await,
        bo.call("CancelTask", get(&at)).await,
        bo.call("SubscribeToTask", get(&at)).await,
    ] {
        assert_eq!(r.status, 200);
        r.assert_error(-32001, "NRY-0004");
    }
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    // The owner may not cancel either: Holdpoint does not run tasks.
    let r = ana.call("CancelTask", get(&at)).await;
    r.assert_code(-32002);
}

#[tokio::test]
async fn bad_answers_change_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = Rpc::new(&app, "acme", "ana");
    let (at, eff) = open_approval(&rt).await;
    let (other_at, other) = open_approval(&rt).await;
    let yes = json!([{"data": {"approved": true}}]);

    // contextId of another context.
    let mut p = answer(&at, "m-c", yes.clone(), None);
    p["message"]["contextId"] = json!("ctx-other");
    let r = ana.send_plain(p).await;
    r.assert_code(-32602);
    // No taskId.
    let mut p = answer(&at, "m-t", yes.clone(), None);
    p["message"].as_object_mut().expect("obj").remove("taskId");
    let r = ana.send_plain(p).await;
    r.assert_code(-32602);
    // A messageId that is not a key.
    let r = ana.send_plain(answer(&at, "m 1", yes.clone(), None)).await;
    r.assert_code(-32602);
    // An interactionId that is not the task's: an error, never a new message.
    for id in ["eff_nope", other.as_str()] {
        let r = ana
            .send(answer(
                &at,
                "m-u",
                json!([]),
                Some(json!({"interactionId": id, "approved": true})),
            ))
            .await;
        r.assert_error(-32602, "NRY-0004");
    }
    // Metadata under the extension without activating it.
    let mut p = answer(
        &at,
        "m-n",
        yes.clone(),
        Some(json!({"interactionId": eff, "approved": true})),
    );
    p["message"]
        .as_object_mut()
        .expect("obj")
        .remove("extensions");
    let r = ana.send_plain(p).await;
    r.assert_code(-32602);
    // An agent's message, file parts, two parts.
    let mut p = answer(&at, "m-r", yes.clone(), None);
    p["message"]["role"] = json!("ROLE_AGENT");
    ana.send_plain(p).await.assert_code(-32602);
    let r = ana
        .send_plain(answer(
            &at,
            "m-f",
            json!([{"url": "https://x.example/f"}]),
            None,
        ))
        .await;
    r.assert_code(-32005);
    let r = ana
        .send_plain(answer(
            &at,
            "m-2p",
            json!([{"text": "a"}, {"text": "b"}]),
            None,
        ))
        .await;
    r.assert_code(-32602);

    app.wait_idle().await;
    for id in [&eff, &other] {
        assert_eq!(state_of(&app, "acme", id).await, State::Pending);
    }
    let events = app.events("acme").await;
    assert!(named(&events, "interaction-resolved", &eff).is_empty());
    assert!(named(&events, "interaction-resolved", &other).is_empty());
    let _ = other_at;
}

#[tokio::test]
async fn protocol_headers_and_envelopes() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, _) = open_approval(&rt).await;
    let ana = Rpc::new(&app, "acme", "ana");

    for v in ["0.3", "2.0", "1.1"] {
        let r = ana
            .call_with("GetTask", get(&at), &[("A2A-Version", v)])
            .await;
        assert_eq!((r.status, r.error_code()), (200, -32009), "{v}: {}", r.body);
    }
    for v in ["1.0", "1"] {
        let r = ana
            .call_with("GetTask", get(&at), &[("A2A-Version", v)])
            .await;
        assert_eq!(r.result()["id"], at.task_id.as_str(), "{v}");
    }
    // Extension activation is echoed under both header names.
    let r = ana
        .call_with("GetTask", get(&at), &[("A2A-Extensions", URI)])
        .await;
    assert_eq!(r.header("a2a-extensions"), Some(URI));
    assert_eq!(r.header("x-a2a-extensions"), None);
    assert!(r.result()["status"]["message"]["metadata"][URI].is_object());
    let r = ana
        .call_with("GetTask", get(&at), &[("X-A2A-Extensions", URI)])
        .await;
    assert_eq!(r.header("a2a-extensions"), Some(URI));
    assert_eq!(r.header("x-a2a-extensions"), Some(URI));
    assert!(r.result()["status"]["message"]["metadata"][URI].is_object());
    let r = ana
        .call_with(
            "GetTask",
            get(&at),
            &[("A2A-Extensions", "https://other.example/ext/v1")],
        )
        .await;
    assert_eq!(r.header("a2a-extensions"), None);
    assert!(r.result()["status"]["message"].get("metadata").is_none());

    // Envelopes.
    for (body, code) in [
        ("{not json", -32700),
        ("[]", -32600),
        (
            r#"{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}"#,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {}}"#,
            -32003,
        ),
    ] {
        let r = ana.raw(body, &[("A2A-Version", "1.0")]).await;
        assert_eq!(r.status, 200, "{body}");
        let v = &r.body;
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
        assert_eq!(v["jsonrpc"], "2.0");
    }
    // No identity: 401 before any JSON-RPC.
    let resp = reqwest::Client::new()
        .post(format!("{}/a2a", app.base))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": get(&at)}))
        .send()
        .await
        .expect("http");
    assert_eq!(resp.status().as_u16(), 401);
    let v: Value = resp.json().await.expect("json");
    assert_eq!(v["code"], "NRY-0011");
}

#[tokio::test]
async fn list_tasks_shows_the_org_tasks_that_wait() {
    let app = TestApp::start().await;
    let acme = app.runtime("acme").await;
    let globex = app.runtime("globex").await;
    let (a1, _) = open_approval(&acme).await;
    let (a2, _) = open_question(&acme, SessionMode::Blocking).await;
    let (a3, e3) = open_approval(&acme).await;
    let (_g, _) = open_approval(&globex).await;
    let ana = Rpc::new(&app, "acme", "ana");
    let r = ana
        .send(answer(
            &a3,
            "m-1",
            json!([]),
            Some(json!({"interactionId": e3, "approved": true})),
        ))
        .await;
    r.result();
    let r = ana.call("ListTasks", json!({})).await;
    let list = r.result();
    let mut ids: Vec<&str> = list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    ids.sort_unstable();
    let mut want = vec![a1.task_id.as_str(), a2.task_id.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);
    assert_eq!(list["totalSize"], 2);
    assert_eq!(list["nextPageToken"], "");
    // Paged, newest first.
    let r = ana.call("ListTasks", json!({"pageSize": 1})).await;
    let page = r.result();
    assert_eq!(page["tasks"][0]["id"], a2.task_id.as_str());
    let token = page["nextPageToken"].as_str().expect("token").to_owned();
    assert!(!token.is_empty());
    let r = ana
        .call("ListTasks", json!({"pageSize": 1, "pageToken": token}))
        .await;
    assert_eq!(r.result()["tasks"][0]["id"], a1.task_id.as_str());
    assert_eq!(r.result()["nextPageToken"], "");
    let r = ana
        .call("ListTasks", json!({"status": "TASK_STATE_INPUT_REQUIRED"}))
        .await;
    assert_eq!(r.result()["tasks"].as_array().map(Vec::len), Some(1));
    ana.call("ListTasks", json!({"pageSize": 1000}))
        .await
        .assert_code(-32602);
}

#[tokio::test]
async fn subscribe_to_task_streams_the_working_update_after_an_answer() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    let ana = Rpc::new(&app, "acme", "ana");
    let mut sub = ana.stream("SubscribeToTask", get(&at)).await;
    assert_eq!(sub.status, 200);
    assert!(sub.is_stream());
    assert_eq!(
        sub.headers
            .get("a2a-extensions")
            .and_then(|v| v.to_str().ok()),
        Some(URI)
    );
    let first = sub.expect(WAIT, "the task").await.json();
    assert_eq!(first["jsonrpc"], "2.0");
    assert_eq!(first["id"], 7);
    let task = &first["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(
        task["status"]["message"]["metadata"][URI]["interactionId"],
        eff.as_str()
    );

    let r = ana
        .send(answer(
            &at,
            "m-2",
            json!([]),
            Some(json!({"interactionId": eff, "approved": true})),
        ))
        .await;
    r.result();
    let update = sub.expect(WAIT, "the WORKING update").await.json();
    let su = &update["result"]["statusUpdate"];
    assert_eq!(su["taskId"], at.task_id.as_str());
    assert_eq!(su["contextId"], at.context_id.as_str());
    assert_eq!(su["status"]["state"], "TASK_STATE_WORKING");

    // The task waits again (a new hold on the same task): the next update shows it.
    let next = hold_call(&rt, &at, "merge", json!({"pr": 42}), None).await;
    let update = sub.expect(WAIT, "the AUTH_REQUIRED update").await.json();
    let su = &update["result"]["statusUpdate"];
    assert_eq!(su["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(
        su["status"]["message"]["metadata"][URI]["interactionId"],
        next.as_str()
    );
}

#[tokio::test]
async fn send_streaming_message_answers_then_streams_until_the_task_waits_again() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Blocking).await;
    let ana = Rpc::new(&app, "acme", "ana");

    // A refused answer is a plain JSON-RPC error, not a stream.
    let bad = ana
        .stream(
            "SendStreamingMessage",
            answer(
                &at,
                "m-0",
                json!([]),
                Some(json!({"interactionId": "nope", "value": 1})),
            ),
        )
        .await;
    assert!(!bad.is_stream());
    assert_eq!(bad.body_json().await["error"]["code"], -32602);

    let mut s = ana
        .stream(
            "SendStreamingMessage",
            answer(&at, "m-1", json!([{"text": "main"}]), None),
        )
        .await;
    assert!(s.is_stream());
    let first = s.expect(WAIT, "the task").await.json();
    assert_eq!(
        first["result"]["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(state_of(&app, "acme", &q).await, State::Finished);
    let (_, q2) = {
        let id = rt
            .ask_user(&at, "call-2", two_questions(), None)
            .await
            .expect("ask");
        (at.clone(), id.to_string())
    };
    let update = s.expect(WAIT, "the INPUT_REQUIRED update").await.json();
    let su = &update["result"]["statusUpdate"];
    assert_eq!(su["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        su["status"]["message"]["metadata"][URI]["interactionId"],
        q2.as_str()
    );
    assert!(
        matches!(s.next(WAIT).await, Next::End),
        "the stream ends: the task waits again"
    );
}

#[tokio::test]
async fn no_outcome_in_time_is_a_retryable_internal_error_then_the_recorded_answer() {
    let mut app = TestApp::start_with(AppOptions {
        outcome_timeout: Duration::from_millis(500),
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    app.stop_workers().await;
    let ana = Rpc::new(&app, "acme", "ana");
    let params = answer(
        &at,
        "m-2",
        json!([]),
        Some(json!({"interactionId": eff, "approved": true})),
    );
    let r = ana.send(params.clone()).await;
    assert_eq!(r.status, 200);
    r.assert_error(-32603, "NRY-0050");
    assert_eq!(r.body["error"]["data"][0]["metadata"]["retryable"], "true");
    assert_eq!(r.header("retry-after"), Some("1"));
    app.start_worker().await;
    app.wait_idle().await;
    // The command was kept: the retry with the same messageId reads its outcome.
    let r = ana.send(params).await;
    r.assert_working();
    assert_eq!(
        named(&app.events("acme").await, "interaction-resolved", &eff).len(),
        1
    );
}

/// The Python interpreter of the venv `ops/test.sh` makes (`HOLDPOINT_A2A_PYTHON`).
pub(crate) fn a2a_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HOLDPOINT_A2A_PYTHON").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if std::env::var("HOLDPOINT_SKIP_PYTHON").is_ok_and(|v| v == "1") {
        return None;
    }
    panic!(
        "HOLDPOINT_A2A_PYTHON is not set: run `bash ops/test.sh` (it installs the pinned \
         a2a-sdk into .tools/a2a-venv and sets it), or export \
         HOLDPOINT_A2A_PYTHON=$PWD/.tools/a2a-venv/bin/python, or HOLDPOINT_SKIP_PYTHON=1 to skip"
    );
}

#[tokio::test]
async fn the_official_python_sdk_answers_through_holdpoint() {
    let Some(python) = a2a_python() else {
        eprintln!("HOLDPOINT_SKIP_PYTHON=1: skipping the a2a-sdk conformance run");
        return;
    };
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (approval_at, approval) = open_approval(&rt).await;
    let (question_at, question) = open_question(&rt, SessionMode::Blocking).await;
    let (refused_at, refused) = open_approval(&rt).await;
    let script = workspace_root().join("tests/python/conformance.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg("--base")
        .arg(&app.base)
        .arg("--org")
        .arg("acme")
        .arg("--person")
        .arg("ana@acme.example")
        .arg("--approval")
        .arg(format!(
            "{}:{}:{}",
            approval_at.task_id, approval_at.context_id, approval
        ))
        .arg("--question")
        .arg(format!(
            "{}:{}:{}",
            question_at.task_id, question_at.context_id, question
        ))
        .arg("--refused")
        .arg(format!(
            "{}:{}:{}",
            refused_at.task_id, refused_at.context_id, refused
        ))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("conformance run timed out")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "conformance.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("conformance: ok"), "{stdout}\n{stderr}");

    // What the SDK did is what Holdpoint recorded.
    let a = app.interaction("acme", &approval).await.expect("stored");
    let res = a.resolution.expect("approved");
    assert_eq!(res.by.as_str(), "ana@acme.example");
    assert!(matches!(
        res.answer,
        Answer::Approval { approved: true, .. }
    ));
    let q = app.interaction("acme", &question).await.expect("stored");
    assert_eq!(
        q.resolution.expect("answered").answer,
        Answer::Value {
            value: json!("main, keep both")
        }
    );
    assert_eq!(state_of(&app, "acme", &refused).await, State::Pending);
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &approval).len(), 1);
    assert_eq!(finished(&events, &question).len(), 1);
    assert!(named(&events, "interaction-resolved", &refused).is_empty());
}

//! One task, several open interactions: every view names the same one (the oldest
//! pending), an answer without `interactionId` goes to it, and the task shows
//! `TASK_STATE_WORKING` only once none is pending. And the second-press rule: without
//! an explicit key, a second answer on a blocking session is `409 NRY-0009`.

use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{SessionMode, State};
use holdpoint_tests::app::{Person, Reply, TestApp};
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, URI, answer};
use crate::streams::WAIT;

/// A blocking session with three approvals held on one task, in the order A, B, C.
async fn three_holds(rt: &Runtime) -> (Placement, [String; 3]) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..10];
    let mut ids = Vec::new();
    for name in ["A", "B", "C"] {
        let effect = format!("eff_{name}_{tag}");
        rt.hold_for_approval(
            &at,
            HoldCall {
                effect_id: effect.clone(),
                call_id: format!("call-{name}"),
                server: "github".into(),
                tool: format!("tool_{}", name.to_lowercase()),
                arguments: json!({"n": name}),
                reason: None,
                editable: false,
                approvals: None,
            },
        )
        .await
        .expect("hold");
        ids.push(effect);
    }
    let [a, b, c] = <[String; 3]>::try_from(ids).expect("three");
    (at, [a, b, c])
}

/// The state and the named interaction of an A2A task (`status.message` metadata).
fn waits_on(task: &Value) -> (String, Option<String>) {
    let status = &task["status"];
    (
        status["state"].as_str().unwrap_or("").to_owned(),
        status["message"]["metadata"][URI]["interactionId"]
            .as_str()
            .map(str::to_owned),
    )
}

async fn get_task(rpc: &Rpc, at: &Placement) -> (String, Option<String>) {
    let r = rpc
        .call("GetTask", json!({"id": at.task_id.as_str()}))
        .await;
    waits_on(r.result())
}

async fn listed(rpc: &Rpc, at: &Placement) -> Option<(String, Option<String>)> {
    let r = rpc.call("ListTasks", json!({})).await;
    r.result()["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["id"] == at.task_id.as_str())
        .map(waits_on)
}

fn auth(id: &str) -> (String, Option<String>) {
    ("TASK_STATE_AUTH_REQUIRED".into(), Some(id.to_owned()))
}

#[tokio::test]
async fn every_view_of_a_task_names_its_oldest_pending_interaction() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, [a, b, c]) = three_holds(&rt).await;
    let rpc = Rpc::new(&app, "acme", "ana");
    let ana = app.person("acme", "ana");

    assert_eq!(get_task(&rpc, &at).await, auth(&a));
    assert_eq!(listed(&rpc, &at).await, Some(auth(&a)));

    // A is approved over REST: every view now names B.
    let r = ana
        .post(
            &format!("/v1/interactions/{a}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(get_task(&rpc, &at).await, auth(&b));
    assert_eq!(listed(&rpc, &at).await, Some(auth(&b)));
    let mut sub = rpc
        .stream("SubscribeToTask", json!({"id": at.task_id.as_str()}))
        .await;
    let first = sub.expect(WAIT, "the task").await.json();
    assert_eq!(waits_on(&first["result"]["task"]), auth(&b));

    // An approval without interactionId decides nothing (NRY-0024); naming B, the
    // one every view shows, resolves it, and the reply names C.
    let r = rpc
        .send(answer(
            &at,
            "m-b0",
            json!([{"data": {"approved": true}}]),
            None,
        ))
        .await;
    r.assert_error(-32602, "NRY-0024");
    assert_eq!(get_task(&rpc, &at).await, auth(&b));
    let r = rpc
        .send(answer(
            &at,
            "m-b",
            json!([{"data": {"approved": true}}]),
            Some(json!({"interactionId": b})),
        ))
        .await;
    assert_eq!(waits_on(&r.result()["task"]), auth(&c));
    assert_ne!(
        app.interaction("acme", &b).await.expect("b").state,
        State::Pending
    );
    assert_eq!(
        app.interaction("acme", &c).await.expect("c").state,
        State::Pending
    );
    let update = sub.expect(WAIT, "the status naming C").await.json();
    assert_eq!(waits_on(&update["result"]["statusUpdate"]), auth(&c));
    assert_eq!(get_task(&rpc, &at).await, auth(&c));

    // The last one: SendStreamingMessage answers C and shows the task working.
    let mut s = rpc
        .stream(
            "SendStreamingMessage",
            answer(
                &at,
                "m-c",
                json!([{"data": {"approved": true}}]),
                Some(json!({"interactionId": c})),
            ),
        )
        .await;
    let t = s.expect(WAIT, "the task").await.json();
    assert_eq!(
        waits_on(&t["result"]["task"]),
        ("TASK_STATE_WORKING".to_owned(), None)
    );
    let update = sub.expect(WAIT, "the WORKING status").await.json();
    assert_eq!(
        waits_on(&update["result"]["statusUpdate"]),
        ("TASK_STATE_WORKING".to_owned(), None)
    );
    assert_eq!(
        get_task(&rpc, &at).await,
        ("TASK_STATE_WORKING".to_owned(), None)
    );
    assert_eq!(
        listed(&rpc, &at).await,
        None,
        "a working task is not listed"
    );
    let pending = ana.get("/v1/interactions?state=pending").await;
    assert_eq!(pending.body["items"], json!([]), "{pending:?}");
}

#[tokio::test]
async fn two_open_questions_on_one_task_are_answered_oldest_first() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q1) = open_question(&rt, SessionMode::Blocking).await;
    let q2 = rt
        .ask_user(&at, "call-second", two_questions(), None)
        .await
        .expect("ask")
        .to_string();
    let rpc = Rpc::new(&app, "acme", "ana");
    let input = |id: &str| ("TASK_STATE_INPUT_REQUIRED".to_owned(), Some(id.to_owned()));
    assert_eq!(get_task(&rpc, &at).await, input(&q1));
    assert_eq!(listed(&rpc, &at).await, Some(input(&q1)));

    let send_text = |id: &str, text: &str| rpc.send(answer(&at, id, json!([{"text": text}]), None));
    let r = send_text("m-1", "main").await;
    assert_eq!(waits_on(&r.result()["task"]), input(&q2));
    assert_ne!(state_of(&app, "acme", &q1).await, State::Pending);
    // A retry of the same message goes back to the question it answered, not to q2.
    let again = send_text("m-1", "main").await;
    assert_eq!(waits_on(&again.result()["task"]), input(&q2));
    assert_eq!(state_of(&app, "acme", &q2).await, State::Pending);
    let r = send_text("m-2", "second").await;
    assert_eq!(
        waits_on(&r.result()["task"]),
        ("TASK_STATE_WORKING".to_owned(), None)
    );
}

#[tokio::test]
async fn a_second_press_without_a_key_on_a_blocking_session_is_a_conflict() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");

    // A question: the same body twice, no key.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let second = press_twice(
        &ana,
        &format!("/v1/questions/{q}/answer"),
        &example_answer(),
    )
    .await;
    let message = second.body["message"].as_str().unwrap_or("");
    assert!(
        message.contains("already answered at 20"),
        "the 409 says when: {message}"
    );

    // The same explicit key replays the recorded outcome.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let path = format!("/v1/questions/{q}/answer");
    assert_eq!(
        ana.post_keyed(&path, "k-1", &example_answer()).await.status,
        204
    );
    assert_eq!(
        ana.post_keyed(&path, "k-1", &example_answer()).await.status,
        204
    );
    let other = ana.post(&path, &example_answer()).await;
    assert_eq!((other.status, other.code()), (409, "NRY-0009"));

    // Approve and respond follow the same rule.
    for op in ["approve", "respond"] {
        let (_, eff) = open_approval(&rt).await;
        let path = format!("/v1/interactions/{eff}/{op}");
        press_twice(&ana, &path, &json!({"approved": true})).await;
    }
}

/// `ana` presses `path` with `body` twice without a key: the first is taken
/// (204), the second is a conflict (409 `NRY-0009`); returns the second reply.
async fn press_twice(ana: &Person, path: &str, body: &Value) -> Reply {
    assert_eq!(ana.post(path, body).await.status, 204, "{path}");
    let second = ana.post(path, body).await;
    assert_eq!(
        (second.status, second.code()),
        (409, "NRY-0009"),
        "{path}: {second:?}"
    );
    second
}

#[tokio::test]
async fn a_second_press_on_a_product_session_replays_the_recorded_answer() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let (_, q) = open_question(&rt, SessionMode::Product).await;
    let path = format!("/v1/questions/{q}/answer");
    assert_eq!(ana.post(&path, &example_answer()).await.status, 204);
    assert_eq!(ana.post(&path, &example_answer()).await.status, 204);
    app.wait_idle().await;
    assert_eq!(
        app.lane_messages("acme").await.len(),
        1,
        "the replay delivers nothing new"
    );
}

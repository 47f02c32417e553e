//! Product sessions: the answer becomes the person's next message on the lane,
//! keyed by the question id; both kinds of lane refusal (README "Sessions, lanes and the
//! message road").

use holdpoint_domain::{LaneContent, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn answer_on_an_idle_lane_starts_the_next_turn_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Product).await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    assert_eq!(ana.post(&path, &example_answer()).await.status, 204);
    // A second press, even with another body, returns as the first did.
    let second = ana
        .post(
            &path,
            &json!({"answers": [{"options": [1]}, {"options": [0]}]}),
        )
        .await;
    assert_eq!(second.status, 204, "{second:?}");
    app.wait_idle().await;
    let lane = app.lane_messages("acme").await;
    assert_eq!(lane.len(), 1, "{lane:?}");
    assert_eq!(lane[0].message_id.as_str(), q);
    assert_eq!(lane[0].session, at.session);
    let LaneContent::Answer { answer, .. } = &lane[0].content else {
        panic!("not an answer")
    };
    assert_eq!(
        serde_json::to_value(answer).expect("json")["answers"][1]["text"],
        json!("Keep both and reconcile nightly.")
    );
    let events = app.events("acme").await;
    // Nothing was blocked: no tool-call-finished on a product session.
    assert!(finished(&events, &q).is_empty());
    assert_eq!(
        events.iter().filter(|e| e.name() == "turn-started").count(),
        1
    );
    assert_eq!(state_of(&app, "acme", &q).await, State::Resolved);
}

#[tokio::test]
async fn busy_lane_keeps_the_message_and_says_so() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Product).await;
    rt.start_turn(at.session.as_str(), "main", "turn-1")
        .await
        .expect("turn");
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let first = ana.post(&path, &example_answer()).await;
    assert_eq!((first.status, first.code()), (409, "NRY-0031"), "{first:?}");
    // A retry returns as the first did, and the message stays single.
    assert_eq!(ana.post(&path, &example_answer()).await, first);
    app.wait_idle().await;
    assert_eq!(app.lane_messages("acme").await.len(), 1);
    assert_eq!(state_of(&app, "acme", &q).await, State::Resolved);
    // When the running turn ends, the queued answer's turn starts.
    rt.finish_turn(at.session.as_str(), "main", "turn-1")
        .await
        .expect("finish");
    app.wait_idle().await;
    let events = app.events("acme").await;
    let started: Vec<_> = events
        .iter()
        .filter(|e| e.name() == "turn-started")
        .map(|e| serde_json::to_value(&e.body).expect("json")["data"]["turnId"].clone())
        .collect();
    assert_eq!(started, vec![json!("turn-1"), json!(q)]);
}

#[tokio::test]
async fn refusal_without_a_message_reopens_the_question() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = format!("s-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    // A lane that keeps no message while busy: every answer during a turn is refused.
    rt.send(holdpoint_domain::Command::SessionOpen {
        session: holdpoint_domain::SessionId::parse(session.clone()).expect("id"),
        mode: SessionMode::Product,
        lane_capacity: Some(0),
    })
    .await
    .expect("session");
    let at = placement(&session);
    let q = rt
        .ask_user(&at, "call-1", two_questions(), None)
        .await
        .expect("ask")
        .to_string();
    rt.start_turn(&session, "main", "turn-1")
        .await
        .expect("turn");
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let r = ana.post(&path, &example_answer()).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0032"), "{r:?}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
    assert!(app.lane_messages("acme").await.is_empty());
    // The lane frees: the retry is delivered.
    rt.finish_turn(&session, "main", "turn-1")
        .await
        .expect("finish");
    assert_eq!(ana.post(&path, &example_answer()).await.status, 204);

    // A closed session refuses too, and keeps nothing.
    let (at2, q2) = open_question(&rt, SessionMode::Product).await;
    rt.close_session(at2.session.as_str()).await.expect("close");
    let r = ana
        .post(&format!("/v1/questions/{q2}/answer"), &example_answer())
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0032"), "{r:?}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q2).await, State::Pending);
    assert_eq!(app.lane_messages("acme").await.len(), 1);
}

#[tokio::test]
async fn a_message_on_the_lane_closes_the_question() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Product).await;
    let ana = app.person("acme", "ana");
    let r = ana
        .post(
            &format!("/v1/sessions/{}/messages", at.session),
            &json!({"text": "never mind, do the other thing", "messageId": "msg-1"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    app.wait_idle().await;
    let record = app.interaction("acme", &q).await.expect("stored");
    assert_eq!(record.state, State::Closed);
    let r = answer_example(&ana, &q).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    // Same message id again: one message on the lane.
    let again = ana
        .post(
            &format!("/v1/sessions/{}/messages", at.session),
            &json!({"text": "never mind, do the other thing", "messageId": "msg-1"}),
        )
        .await;
    assert_eq!(again.status, 202);
    app.wait_idle().await;
    assert_eq!(app.lane_messages("acme").await.len(), 1);
    assert_eq!(
        named(&app.events("acme").await, "interaction-closed", &q).len(),
        1
    );
    // Unknown session: NRY-0002.
    let r = ana
        .post("/v1/sessions/nope/messages", &json!({"text": "hi"}))
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0002"));
}

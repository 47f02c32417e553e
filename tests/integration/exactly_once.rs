//! Exactly once under duplicates and races (RELIABILITY.md guarantees 1 and 2).

use std::time::Duration;

use holdpoint_bus::Topology;
use holdpoint_domain::{SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn same_key_fifty_times_at_once_resolves_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let replies = at_once((0..50).map(|_| Shot {
        person: ana.clone(),
        path: path.clone(),
        key: Some("press-1".into()),
        body: example_answer(),
    }))
    .await;
    assert!(replies.iter().all(|r| r == &replies[0]), "{replies:?}");
    assert_eq!(replies[0].status, 204);
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-resolved", &q).len(), 1);
    assert_eq!(finished(&events, &q).len(), 1);
    assert_ids_consistent(&events);
}

#[tokio::test]
async fn twenty_different_answers_race_one_wins() {
    let app = TestApp::start_with(AppOptions {
        workers: 2,
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let path = format!("/v1/questions/{q}/answer");
    let replies = at_once((0..20).map(|i| Shot {
        person: app.person("acme", &format!("p{i}")),
        path: path.clone(),
        key: None,
        body: json!({"answers": [{"options": [i % 2]}, {"options": [i % 3], "text": format!("answer {i}")}]}),
    }))
    .await;
    let ok = replies.iter().filter(|r| r.status == 204).count();
    let conflicts = replies
        .iter()
        .filter(|r| r.status == 409 && r.code() == "NRY-0009")
        .count();
    assert_eq!((ok, conflicts), (1, 19), "{replies:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(finished(&events, &q).len(), 1);
    // The winner is the one recorded.
    let winner = replies
        .iter()
        .position(|r| r.status == 204)
        .expect("a winner");
    let record = app.interaction("acme", &q).await.expect("stored");
    assert_eq!(
        record.resolution.expect("resolved").by.as_str(),
        format!("p{winner}")
    );
}

#[tokio::test]
async fn idempotency_outlives_the_duplicate_window() {
    let app = TestApp::start_with(AppOptions {
        topo: Topology {
            duplicate_window: Duration::from_secs(1),
            ack_wait: Duration::from_secs(2),
            ..Topology::default()
        },
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (_, eff) = open_approval(&rt).await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/interactions/{eff}/approve");
    let first = ana
        .post_keyed(&path, "m-2", &json!({"approved": true}))
        .await;
    assert_eq!(first.status, 204);
    app.wait_idle().await;
    // Let the 1 s duplicate window pass: JetStream no longer knows the key.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Same key, different body: the recorded outcome; the answer does not change.
    let again = ana
        .post_keyed(&path, "m-2", &json!({"approved": false}))
        .await;
    assert_eq!(again, first);
    // A different key: conflict.
    let other = ana
        .post_keyed(&path, "m-3", &json!({"approved": true}))
        .await;
    assert_eq!((other.status, other.code()), (409, "NRY-0009"));
    app.wait_idle().await;
    let record = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(record.state, State::Resolved);
    assert_eq!(
        serde_json::to_value(&record.resolution.expect("resolved").answer).expect("json")["approved"],
        json!(true)
    );
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
}

#[tokio::test]
async fn keys_are_scoped_by_organisation_and_task() {
    let app = TestApp::start().await;
    // Same effect id in two organisations, and two tasks in one organisation,
    // all answered with the same key inside the duplicate window.
    let cases = one_effect_in_two_orgs_and_two_tasks(&app).await;
    for (org, id) in &cases {
        let r = app
            .person(org, "p")
            .post_keyed(
                &format!("/v1/interactions/{id}/approve"),
                "m-2",
                &json!({"approved": true}),
            )
            .await;
        assert_eq!(r.status, 204, "{org}/{id}: {r:?}");
    }
    app.wait_idle().await;
    for (org, id) in &cases {
        assert_eq!(state_of(&app, org, id).await, State::Resolved, "{org}/{id}");
        let events = app.events(org).await;
        assert_eq!(
            named(&events, "tool-call-released", id).len(),
            1,
            "{org}/{id}"
        );
    }
}

/// A released call's result is reported once: the same result again is a replay,
/// another result is refused with `NRY-0021` and changes nothing, inside the
/// duplicate window too (the result is part of the command's id, so JetStream
/// does not drop the second one as a copy of the first and report it finished).
#[tokio::test]
async fn a_second_different_tool_result_is_refused_not_reported_finished() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = open_approval(&rt).await;
    let r = app
        .person("acme", "ana")
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let first = holdpoint_domain::CallResult::Ok {
        output: json!({"pr": 42}),
    };
    rt.report_tool_result(&eff, first.clone())
        .await
        .expect("the result");
    rt.report_tool_result(&eff, first)
        .await
        .expect("the same result again is a replay");
    let other = rt
        .report_tool_result(
            &eff,
            holdpoint_domain::CallResult::Ok {
                output: json!({"pr": 43}),
            },
        )
        .await;
    match other {
        Err(holdpoint_client::ClientError::Rejected(rej)) => {
            assert_eq!(
                rej.code,
                holdpoint_domain::ErrorCode::CommandConflict,
                "{rej:?}"
            );
        }
        other => panic!("another result: {other:?}"),
    }
    app.wait_idle().await;
    let events = app.events("acme").await;
    let done = finished(&events, &eff);
    assert_eq!(done.len(), 1, "one tool-call-finished");
    assert!(
        serde_json::to_string(&done[0].body)
            .expect("json")
            .contains("42"),
        "{:?}",
        done[0].body
    );
}

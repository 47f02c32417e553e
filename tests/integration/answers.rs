//! Every REST status of the answer operations, the reading rules (README "The HTTP API"),
//! reads and listings.

use holdpoint_domain::{CloseReason, EventData, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn question_answer_follows_the_rest_api() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");

    // Answers that do not fit change nothing.
    for (body, code) in [
        (json!({"answers": [{"options": [0]}]}), "NRY-0003"),
        (
            json!({"answers": [{"options": [2]}, {"options": [0]}]}),
            "NRY-0003",
        ),
        (
            json!({"answers": [{"options": [0]}, {"options": [0, 1]}]}),
            "NRY-0003",
        ),
        (
            json!({"answers": [{"options": [0], "text": "no"}, {"options": [0]}]}),
            "NRY-0003",
        ),
        (
            json!({"answers": [{"options": []}, {"options": [0]}]}),
            "NRY-0003",
        ),
        (
            json!({"answers": [{"options": [-1]}, {"options": [0]}]}),
            "NRY-0001",
        ),
        (
            json!({"answers": [{"options": ["0"]}, {"options": [0]}]}),
            "NRY-0001",
        ),
        (json!({"answers": []}), "NRY-0003"),
        (
            json!({"answers": [{"options": [0]}], "extra": 1}),
            "NRY-0001",
        ),
    ] {
        let r = ana.post(&path, &body).await;
        assert_eq!(r.code(), code, "{body}: {r:?}");
        assert!(r.status == 400, "{body}: {r:?}");
    }
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);

    let r = ana.post_keyed(&path, "k-seed", &example_answer()).await;
    assert_eq!(r.status, 204, "{r:?}");
    // The same key again: the recorded outcome, not a conflict.
    assert_eq!(
        ana.post_keyed(&path, "k-seed", &example_answer())
            .await
            .status,
        204
    );
    // The same body without a key: a second press on a blocking session, a conflict.
    let r = ana.post(&path, &example_answer()).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    // A different answer: conflict.
    let r = ana
        .post(
            &path,
            &json!({"answers": [{"options": [1]}, {"options": [0]}]}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    // Another person, same body: a different key, so also a conflict.
    let r = app
        .person("acme", "bo")
        .post(&path, &example_answer())
        .await;
    assert_eq!(r.status, 409, "{r:?}");

    app.wait_idle().await;
    let events = app.events("acme").await;
    let done = finished(&events, &q);
    assert_eq!(done.len(), 1);
    let EventData::ToolCallFinished { result, .. } = &done[0].body else {
        unreachable!()
    };
    let out = serde_json::to_value(result).expect("json");
    assert_eq!(out["output"]["answers"][0]["options"], json!([0]));
    assert_eq!(out["output"]["answers"][1]["labels"], json!(["Keep both"]));
    assert_eq!(
        out["output"]["answers"][1]["text"],
        json!("Keep both and reconcile nightly.")
    );
    assert_eq!(named(&events, "question-asked", &q).len(), 1);
    let record = app.interaction("acme", &q).await.expect("stored");
    assert_eq!(record.state, State::Finished);
    assert_eq!(record.resolution.expect("resolved").by.as_str(), "ana");
}

#[tokio::test]
async fn unknown_closed_and_sessionless_questions() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");

    let r = ana
        .post(
            &format!("/v1/questions/{}/answer", uuid::Uuid::new_v4()),
            &example_answer(),
        )
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"));

    // Closed by the host (turn interrupted): conflict.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    rt.close_interaction(&q, CloseReason::Interrupted)
        .await
        .expect("close");
    let r = answer_example(&ana, &q).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"));

    // The session is gone: 400 NRY-0002 (README, error catalog).
    let (at, q) = open_question(&rt, SessionMode::Blocking).await;
    rt.end_session(at.session.as_str()).await.expect("end");
    let r = answer_example(&ana, &q).await;
    assert_eq!((r.status, r.code()), (400, "NRY-0002"), "{r:?}");
    assert_eq!(r.body["title"], "Session not found");
    assert_eq!(
        r.body["message"],
        format!("No session with id {} exists on this host.", at.session)
    );
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);

    // An approval is not a question.
    let (_, eff) = open_approval(&rt).await;
    let r = ana
        .post(&format!("/v1/questions/{eff}/answer"), &example_answer())
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"));

    app.wait_idle().await;
    let events = app.events("acme").await;
    let closed = events
        .iter()
        .filter(|e| e.name() == "interaction-closed")
        .count();
    assert_eq!(closed, 1);
}

#[tokio::test]
async fn approve_and_respond_follow_the_reading_rules() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");

    // Denied: tool.denied with the reason.
    let (_, denied) = open_approval(&rt).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{denied}/approve"),
            &json!({"approved": false, "reason": "not today"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");

    // A boolean value reads as approved; a stale digest is refused.
    let (_, eff) = open_approval(&rt).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true, "argumentsDigest": "00"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0010"));
    // A boolean value carries the digest as approved does; another value cannot.
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"value": true, "argumentsDigest": "00"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0010"), "{r:?}");
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/respond"),
            &json!({"value": {"ok": 1}, "argumentsDigest": "00"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/respond"),
            &json!({"value": "yes"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"));
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/respond"),
            &json!({"value": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    rt.report_tool_result(
        &eff,
        holdpoint_domain::CallResult::Ok {
            output: json!({"n": 42}),
        },
    )
    .await
    .expect("result");

    // Connections: {connected:true}, true and approved:true connect; others do not.
    let agent =
        holdpoint_client::AgentManifest::from_markdown("---\nloop:\n  connections: true\n---\n")
            .expect("manifest");
    let mut expect = Vec::new();
    for (i, (op, body, connected)) in [
        ("respond", json!({"value": {"connected": true}}), true),
        ("respond", json!({"value": true}), true),
        ("approve", json!({"approved": true}), true),
        ("respond", json!({"value": {"connected": false}}), false),
        ("respond", json!({"value": "connected"}), false),
        ("approve", json!({"approved": false}), false),
    ]
    .into_iter()
    .enumerate()
    {
        let session = format!(
            "conn-{i}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        rt.open_session(&session, SessionMode::Blocking)
            .await
            .expect("session");
        let at = placement(&session);
        let id = rt
            .request_connection(
                &agent,
                &at,
                &format!("c{i}"),
                "Linear",
                "file tickets",
                None,
            )
            .await
            .expect("connection");
        let r = ana
            .post(&format!("/v1/interactions/{id}/{op}"), &body)
            .await;
        assert_eq!(r.status, 204, "{body}: {r:?}");
        expect.push((
            id.to_string(),
            if connected {
                "Connected: Linear"
            } else {
                "Not connected: Linear"
            },
        ));
    }
    // Off by default.
    let off =
        holdpoint_client::AgentManifest::from_markdown("---\nname: x\n---\n").expect("manifest");
    let at = placement("whatever");
    assert!(matches!(
        rt.request_connection(&off, &at, "c", "Linear", "r", None)
            .await,
        Err(holdpoint_client::ClientError::ConnectionsDisabled { .. })
    ));

    app.wait_idle().await;
    let events = app.events("acme").await;
    let d = finished(&events, &denied);
    assert_eq!(d.len(), 1);
    let EventData::ToolCallFinished { result, .. } = &d[0].body else {
        unreachable!()
    };
    assert_eq!(
        serde_json::to_value(result).expect("json"),
        json!({"status": "error", "code": "tool.denied", "message": "not today"})
    );
    assert_eq!(named(&events, "tool-call-released", &denied).len(), 0);
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
    let a = finished(&events, &eff);
    assert_eq!(a.len(), 1);
    for (id, text) in expect {
        let f = finished(&events, &id);
        assert_eq!(f.len(), 1, "{id}");
        let EventData::ToolCallFinished { result, .. } = &f[0].body else {
            unreachable!()
        };
        assert_eq!(
            serde_json::to_value(result).expect("json")["output"],
            json!(text),
            "{id}"
        );
    }
    // The audit subject carries approvals only.
    let audit: Vec<holdpoint_domain::Event> =
        holdpoint_tests::app::read_all(&app.bus, &app.bus.topo.audit_stream(), "hp.audit.>").await;
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(audit.iter().all(|e| e.name() == "approval-decided"));
}

#[tokio::test]
async fn reads_listing_and_request_hygiene() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(open_question(&rt, SessionMode::Blocking).await.1);
    }
    let (_, eff) = open_approval(&rt).await;

    let r = ana.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["kind"], "approval");
    assert_eq!(r.body["prompt"], "Approve github / create_pull_request?");
    assert_eq!(
        r.body["detail"],
        json!({"server": "github", "tool": "create_pull_request", "reason": "writes"})
    );
    assert_eq!(
        r.body["call"]["arguments"],
        json!({"repo": "acme/app", "title": "Fix"})
    );

    // Pages of 4: 6 pending in all, oldest first, no repeats.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/interactions?limit=4&cursor={c}"),
            None => "/v1/interactions?limit=4".to_owned(),
        };
        let r = ana.get(&path).await;
        assert_eq!(r.status, 200, "{r:?}");
        for item in r.body["items"].as_array().expect("items") {
            seen.push(item["interactionId"].as_str().expect("id").to_owned());
        }
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6);
    let mut expected = ids.clone();
    expected.push(eff.clone());
    assert_eq!(seen, expected);
    // Answered ones leave the pending list.
    assert_eq!(
        ana.post(
            &format!("/v1/questions/{}/answer", ids[0]),
            &example_answer()
        )
        .await
        .status,
        204
    );
    let r = ana.get("/v1/interactions").await;
    assert_eq!(r.body["items"].as_array().expect("items").len(), 5);
    let r = ana.get("/v1/interactions?state=finished").await;
    assert_eq!(r.body["items"].as_array().expect("items").len(), 1);
    assert_eq!(ana.get("/v1/interactions?limit=0").await.code(), "NRY-0001");
    assert_eq!(
        ana.get("/v1/interactions?state=bogus").await.code(),
        "NRY-0001"
    );

    // No identity: 401 NRY-0011.
    let r = ana
        .post_anonymous(
            &format!("/v1/questions/{}/answer", ids[1]),
            &example_answer(),
        )
        .await;
    assert_eq!((r.status, r.code()), (401, "NRY-0011"));
    // Wrong content type, oversized body, invalid JSON, duplicate keys.
    let path = format!("/v1/questions/{}/answer", ids[1]);
    let r = ana
        .post_raw(
            &path,
            "text/plain",
            example_answer().to_string().into_bytes(),
        )
        .await;
    assert_eq!((r.status, r.code()), (415, "NRY-0014"));
    let big = format!(
        "{{\"answers\":[{{\"options\":[{}0]}}]}}",
        "0,".repeat(100_000)
    );
    let r = ana
        .post_raw(&path, "application/json", big.into_bytes())
        .await;
    assert_eq!((r.status, r.code()), (413, "NRY-0013"));
    let r = ana
        .post_raw(&path, "application/json", b"{\"answers\":".to_vec())
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"));
    let r = ana
        .post_raw(
            &format!("/v1/interactions/{eff}/approve"),
            "application/json",
            br#"{"approved":false,"approved":true}"#.to_vec(),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    assert_eq!(
        app.interaction("acme", &ids[1])
            .await
            .expect("stored")
            .state,
        State::Pending
    );
}

#[tokio::test]
async fn organisations_do_not_see_each_other() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let (_, eff) = open_approval(&rt).await;
    let eve = app.person("globex", "eve");
    let missing = uuid::Uuid::new_v4().to_string();

    let a = answer_example(&eve, &q).await;
    let b = eve
        .post(
            &format!("/v1/questions/{missing}/answer"),
            &example_answer(),
        )
        .await;
    assert_eq!((a.status, a.code()), (404, "NRY-0004"));
    assert_eq!(a.body["title"], b.body["title"]);
    let a = eve.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!((a.status, a.code()), (404, "NRY-0004"));
    let a = eve
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!((a.status, a.code()), (404, "NRY-0004"));
    let a = eve.get("/v1/interactions").await;
    assert_eq!(a.body["items"], json!([]));
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    assert!(app.events("globex").await.is_empty());
}

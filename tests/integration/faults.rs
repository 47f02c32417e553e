//! Restarts, crashes and timeouts: pending interactions survive worker
//! and nats-server restarts; a worker killed between its write and its ack leaves
//! exactly one resolution; no worker means a retryable 503.

use std::time::Duration;

use holdpoint_domain::{SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn pending_survives_a_worker_restart() {
    let mut app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    app.stop_workers().await;
    app.start_worker().await;
    let r = answer_example(&app.person("acme", "ana"), &q).await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;
    assert_eq!(finished(&app.events("acme").await, &q).len(), 1);
}

#[tokio::test]
async fn pending_survives_a_nats_server_kill() {
    let mut app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    app.nats.kill().await;
    // While NATS is away the ingress answers a retryable 503, within its bound.
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let started = std::time::Instant::now();
    let r = ana.post_keyed(&path, "k1", &example_answer()).await;
    assert_eq!((r.status, r.code()), (503, "NRY-0050"), "{r:?}");
    assert_eq!(r.retry_after.as_deref(), Some("1"));
    assert!(started.elapsed() < Duration::from_secs(10));
    app.nats.restart().await;
    // The services reconnect by themselves; the retry with the same key succeeds.
    let r = wait_for(Duration::from_secs(30), "answer after restart", || {
        let (ana, path) = (ana.clone(), path.clone());
        async move {
            let r = ana.post_keyed(&path, "k1", &example_answer()).await;
            (r.status != 503).then_some(r)
        }
    })
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    // Settled: the answer finished and every partition consumer has delivered and
    // had acknowledged every command. Not `wait_idle` (an empty commands stream): a
    // SIGKILLed server can come back still holding a work-queue message whose ack
    // it had taken (the removal was not on disk yet) below the consumer's ack floor,
    // where no consumer delivers it again; it is the server's to drop, not a command
    // anyone is still working on.
    let bus = app.bus.clone();
    let org = "acme";
    wait_for(Duration::from_secs(30), "the answer to settle", || {
        let (bus, app, q) = (bus.clone(), &app, q.clone());
        async move {
            let backlog = bus.consumer_backlog().await.ok()?;
            let events = app.events(org).await;
            (backlog == (0, 0) && !finished(&events, &q).is_empty()).then_some(())
        }
    })
    .await;
    let events = app.events("acme").await;
    assert_eq!(finished(&events, &q).len(), 1);
    assert_ids_consistent(&events);
}

#[tokio::test]
async fn worker_killed_between_write_and_ack_resolves_once() {
    for failpoint in ["after-write", "before-ack"] {
        let mut app = TestApp::start_with(AppOptions {
            workers: 0,
            outcome_timeout: Duration::from_secs(2),
            ..AppOptions::default()
        })
        .await;
        let rt = app.runtime("acme").await;
        // Opening needs a worker: use an in-process one, then stop it.
        app.start_worker().await;
        let (_, eff) = open_approval(&rt).await;
        app.stop_workers().await;

        let w = app.spawn_worker_process(Some(failpoint));
        let ana = app.person("acme", "ana");
        let path = format!("/v1/interactions/{eff}/approve");
        let first = ana.post_keyed(&path, "k", &json!({"approved": true})).await;
        // The worker died before replying (after-write) or replied then died (before-ack).
        let status = app.process(w).wait().expect("worker exit");
        assert!(!status.success(), "{failpoint}: worker should have aborted");
        assert!(
            first.status == 204 || first.status == 503,
            "{failpoint}: {first:?}"
        );
        assert_eq!(
            state_of(&app, "acme", &eff).await,
            State::Resolved,
            "{failpoint}: the write happened"
        );

        // A healthy worker picks the unacked command up after ack_wait and replays it.
        app.spawn_worker_process(None);
        app.wait_idle().await;
        let again = ana.post_keyed(&path, "k", &json!({"approved": true})).await;
        assert_eq!(again.status, 204, "{failpoint}: {again:?}");
        rt.report_tool_result(
            &eff,
            holdpoint_domain::CallResult::Ok {
                output: json!("done"),
            },
        )
        .await
        .expect("result");
        app.wait_idle().await;
        let events = app.events("acme").await;
        assert_eq!(
            named(&events, "interaction-resolved", &eff).len(),
            1,
            "{failpoint}"
        );
        assert_eq!(
            named(&events, "tool-call-released", &eff).len(),
            1,
            "{failpoint}"
        );
        assert_eq!(finished(&events, &eff).len(), 1, "{failpoint}");
        assert_ids_consistent(&events);
    }
}

#[tokio::test]
async fn no_worker_means_503_then_the_recorded_outcome() {
    let mut app = TestApp::start_with(AppOptions {
        outcome_timeout: Duration::from_millis(500),
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    app.stop_workers().await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let r = ana.post_keyed(&path, "k", &example_answer()).await;
    assert_eq!((r.status, r.code()), (503, "NRY-0050"));
    assert_eq!(r.retry_after.as_deref(), Some("1"));
    app.start_worker().await;
    app.wait_idle().await;
    // The command was kept; the retry (a duplicate inside the window) reads its outcome.
    let r = ana.post_keyed(&path, "k", &example_answer()).await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(finished(&app.events("acme").await, &q).len(), 1);
}

#[tokio::test]
async fn undecodable_commands_are_dead_lettered() {
    let app = TestApp::start().await;
    let ack = app
        .bus
        .js
        .publish("hp.cmd.acme.t1.answer", "{not json".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    app.wait_idle().await;
    let events = app.events("acme").await;
    let dead: Vec<_> = events
        .iter()
        .filter(|e| e.name() == "dead-letter")
        .collect();
    assert_eq!(dead.len(), 1, "{events:?}");
    let v = serde_json::to_value(&dead[0].body).expect("json");
    assert_eq!(v["data"]["streamSequence"], json!(ack.sequence));
    // The stored subject: partitioned, the server put the partition in front.
    let subject = v["data"]["subject"].as_str().unwrap_or_default().to_owned();
    assert!(
        subject.starts_with("hp.cmd.") && subject.ends_with(".acme.t1.answer"),
        "{subject}"
    );
}

//! Effects are never lost or late, and a call is released once (one atomic batch
//! per decision, stream RePublish, one release per call, fast failover):
//!
//! - a committed decision whose command is lost (purged, never redelivered) has
//!   its events out with no worker running at all, once, also past the duplicate
//!   window;
//! - a refusal decided after it finds the release stored;
//! - a live core subscriber sees each event once when a worker dies after
//!   committing and its command is redelivered and replayed;
//! - holding a call again under another effect id is refused;
//! - a worker killed with `kill -9` under load hands its partitions over within
//!   seconds: no answer waits for `ack_wait` times a backoff;
//! - answers committed by a worker that stopped are not stored again when the
//!   next owner comes after the duplicate window;
//! - no second copy, ever: through kills at both failpoints, a nats-server
//!   `kill -9` and restart and an idle stretch past the duplicate window, every
//!   event, audit record and lane message is stored once (the cluster's node-loss
//!   test counts the same after its kills).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use holdpoint_bus::Topology;
use holdpoint_client::HoldCall;
use holdpoint_domain::{Event, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::json;

use crate::common::*;

/// An app with no worker running, and a short ack_wait.
async fn app_without_workers(duplicate_window: Duration) -> TestApp {
    TestApp::start_with(AppOptions {
        topo: Topology {
            ack_wait: Duration::from_secs(1),
            duplicate_window,
            ..Topology::default()
        },
        workers: 0,
        outcome_timeout: Duration::from_secs(2),
        ..AppOptions::default()
    })
    .await
}

/// Runs `failpoint` in a worker process on one answer to a fresh approval, and
/// waits for the worker to die at it. Returns the effect id.
async fn answer_into_failpoint(app: &mut TestApp, failpoint: &str, key: &str) -> String {
    let rt = app.runtime("acme").await;
    app.start_worker().await;
    let (_, eff) = open_approval(&rt).await;
    app.wait_idle().await;
    app.stop_workers().await;
    let w = app.spawn_worker_process(Some(failpoint));
    let r = app
        .person("acme", "ana")
        .post_keyed(
            &format!("/v1/interactions/{eff}/approve"),
            key,
            &json!({"approved": true}),
        )
        .await;
    // The worker dies before replying (after-write) or after (before-ack).
    assert!(r.status == 503 || r.status == 204, "{r:?}");
    wait_for(
        Duration::from_secs(20),
        "the worker to die at its failpoint",
        || {
            let running = app.process_running(w);
            async move { (!running).then_some(()) }
        },
    )
    .await;
    eff
}

/// Deletes every command waiting in HP_COMMANDS: the transition stays committed,
/// but its command will never be delivered again.
async fn lose_the_commands(app: &TestApp) {
    let stream = app
        .bus
        .js
        .get_stream(app.bus.topo.commands_stream())
        .await
        .expect("commands stream");
    stream.purge().await.expect("purge");
}

/// Waits until `span` has passed (the duplicate window and some): what these tests
/// check is what happens after it, so the wait is the condition, not a guess.
async fn pass_the_window(span: Duration) {
    let until = Instant::now() + span;
    wait_for(
        span + Duration::from_secs(10),
        "the duplicate window to pass",
        || async move { (Instant::now() > until).then_some(()) },
    )
    .await;
}

fn released(events: &[Event], eff: &str) -> usize {
    named(events, "tool-call-released", eff).len()
}

#[tokio::test]
async fn a_committed_decision_whose_command_is_lost_has_its_events_out_once() {
    // A 1 s duplicate window: the copies a relay would have made after it are
    // what this checks against.
    let mut app = app_without_workers(Duration::from_secs(1)).await;
    let eff = answer_into_failpoint(&mut app, "after-write", "k-1").await;
    let record = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(record.state, State::Resolved, "the answer was committed");
    assert!(
        record
            .outbox
            .iter()
            .all(|t| t.confirmed && t.effects.is_empty()),
        "a record owes no effects: {:?}",
        record.outbox
    );
    lose_the_commands(&app).await;
    // No worker runs: the effects were committed with the record.
    let events = wait_for(Duration::from_secs(20), "the release, sourced", || {
        let app = &app;
        let eff = eff.clone();
        async move {
            let events = app.events("acme").await;
            (released(&events, &eff) == 1).then_some(events)
        }
    })
    .await;
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
    assert_ids_consistent(&events);
    // Past the duplicate window, a worker comes and decides another answer to it.
    pass_the_window(Duration::from_millis(2500)).await;
    app.start_worker().await;
    let ana = app.person("acme", "ana");
    let r = wait_for(Duration::from_secs(20), "the second answer", || {
        let (ana, eff) = (ana.clone(), eff.clone());
        async move {
            let r = ana
                .post_keyed(
                    &format!("/v1/interactions/{eff}/approve"),
                    "k-2",
                    &json!({"approved": false}),
                )
                .await;
            (r.status != 503).then_some(r)
        }
    })
    .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(released(&events, &eff), 1, "the release, once");
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
}

#[tokio::test]
async fn a_refusal_after_a_lost_command_comes_after_its_committed_effects() {
    // The release was committed with the answer; the refusal is decided on the
    // record that holds it.
    let mut app = app_without_workers(Duration::from_secs(120)).await;
    let eff = answer_into_failpoint(&mut app, "after-write", "k-1").await;
    lose_the_commands(&app).await;
    app.start_worker().await;
    let r = app
        .person("acme", "ana")
        .post_keyed(
            &format!("/v1/interactions/{eff}/approve"),
            "k-2",
            &json!({"approved": true}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    let events = app.events("acme").await;
    assert_eq!(released(&events, &eff), 1, "{events:?}");
}

#[tokio::test]
async fn a_live_subscriber_sees_each_event_once_across_a_worker_crash() {
    let mut app = app_without_workers(Duration::from_secs(120)).await;
    let client = async_nats::connect(app.nats.url()).await.expect("connect");
    let mut live = client.subscribe("hp.evt.acme.>").await.expect("subscribe");
    client.flush().await.expect("flush");
    // The worker publishes every effect, then dies before its ack: the command is
    // delivered again to the next worker, which replays the transition and publishes
    // its effects again (deduplicated by JetStream, and never republished).
    let eff = answer_into_failpoint(&mut app, "before-ack", "k-1").await;
    app.start_worker().await;
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(released(&events, &eff), 1);
    // Everything the stream stored reached the subscriber exactly once.
    let stored: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while counts.len() < stored.len() && Instant::now() < deadline {
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), live.next()).await
            && let Ok(e) = serde_json::from_slice::<Event>(&m.payload)
        {
            *counts.entry(e.id).or_default() += 1;
        }
    }
    // Stragglers: anything still in flight would arrive now.
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), live.next()).await {
        if let Ok(e) = serde_json::from_slice::<Event>(&m.payload) {
            *counts.entry(e.id).or_default() += 1;
        }
    }
    for id in &stored {
        assert_eq!(counts.get(*id), Some(&1), "event {id}: {counts:?}");
    }
}

#[tokio::test]
async fn holding_a_call_again_under_another_effect_id_is_refused() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff_a) = open_approval(&rt).await;
    let hold = |effect: &str| HoldCall {
        effect_id: effect.into(),
        call_id: format!("call-{eff_a}"),
        server: "github".into(),
        tool: "delete_repo".into(),
        arguments: json!({"repo": "acme/app"}),
        reason: None,
        editable: false,
        approvals: None,
    };
    let err = rt
        .hold_for_approval(&at, hold("eff_B"))
        .await
        .expect_err("the same call under another effect id");
    match err {
        holdpoint_client::ClientError::Rejected(r) => {
            assert_eq!(r.code.spec().code, "NRY-0021", "{r:?}");
            assert!(r.message.contains(&eff_a), "{}", r.message);
        }
        other => panic!("{other:?}"),
    }
    let ana = app.person("acme", "ana");
    let r = ana
        .post(
            &format!("/v1/interactions/{eff_a}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204);
    // Released: still refused; eff_B never exists, so it can never be approved.
    assert!(rt.hold_for_approval(&at, hold("eff_B")).await.is_err());
    let r = ana
        .post("/v1/interactions/eff_B/approve", &json!({"approved": true}))
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"));
    app.wait_idle().await;
    assert_eq!(released(&app.events("acme").await, &eff_a), 1);
}

#[tokio::test]
async fn a_killed_worker_hands_its_partitions_over_within_seconds() {
    // Two workers; answers flow; one is killed with kill -9. Its partitions move
    // to the other once their pin lapses (priority timeout) and its commands in
    // flight come back after ack_wait: no request waits for more than 5 s.
    let mut app = TestApp::start_with(AppOptions {
        topo: Topology {
            ack_wait: Duration::from_secs(2),
            ..Topology::default()
        },
        workers: 0,
        outcome_timeout: Duration::from_secs(10),
        ..AppOptions::default()
    })
    .await;
    let a = app.spawn_worker_process(None);
    let _b = app.spawn_worker_process(None);
    let rt = app.runtime("acme").await;
    let mut effects = Vec::new();
    for _ in 0..60 {
        effects.push(open_approval(&rt).await.1);
    }
    let ana = app.person("acme", "ana");
    let mut longest = Duration::ZERO;
    let mut statuses = Vec::new();
    let mut requests = futures::stream::FuturesUnordered::new();
    for (n, eff) in effects.iter().enumerate() {
        let ana = ana.clone();
        let path = format!("/v1/interactions/{eff}/approve");
        requests.push(async move {
            // Spread over about 3 s.
            tokio::time::sleep(Duration::from_millis(50 * n as u64)).await;
            let started = Instant::now();
            let r = ana.post_keyed(&path, "k", &json!({"approved": true})).await;
            (r.status, started.elapsed())
        });
    }
    let killer = async {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        app.kill_process(a);
    };
    let ((), done) = tokio::join!(killer, async {
        let mut out = Vec::new();
        while let Some(r) = requests.next().await {
            out.push(r);
        }
        out
    });
    for (status, took) in done {
        statuses.push(status);
        longest = longest.max(took);
    }
    println!("longest answer across the kill: {longest:?}");
    assert!(statuses.iter().all(|s| *s == 204), "{statuses:?}");
    assert!(
        longest < Duration::from_secs(5),
        "an answer waited {longest:?} across a worker kill"
    );
    app.wait_idle().await;
    let events = app.events("acme").await;
    for eff in &effects {
        assert_eq!(released(&events, eff), 1, "{eff}");
    }
}

#[tokio::test]
async fn effects_a_stopped_owner_committed_are_not_stored_again_after_the_window() {
    // A 2 s duplicate window. A worker takes the partitions over, commits answers
    // and stops; nobody owns the partitions for longer than the window; then new
    // commands come. Nothing the stopped worker committed is stored a second time.
    let window = Duration::from_secs(2);
    let mut app = app_without_workers(window).await;
    let rt = app.runtime("acme").await;
    app.start_worker().await;
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(open_approval(&rt).await);
    }
    app.wait_idle().await;
    app.stop_workers().await;

    app.start_worker().await;
    let ana = app.person("acme", "ana");
    let answers = held.iter().map(|(_, eff)| {
        let ana = ana.clone();
        let eff = eff.clone();
        async move {
            ana.post(
                &format!("/v1/interactions/{eff}/approve"),
                &json!({"approved": true}),
            )
            .await
        }
    });
    for r in futures::future::join_all(answers).await {
        assert_eq!(r.status, 204, "{r:?}");
    }
    app.stop_workers().await;

    // Longer than the window with no owner, then a command on every task.
    pass_the_window(window * 2).await;
    app.start_worker().await;
    for (at, _) in &held {
        hold_call(&rt, at, "merge", json!({"n": 2}), None).await;
    }
    app.wait_idle().await;

    let events = app.events("acme").await;
    let mut copies: HashMap<&str, usize> = HashMap::new();
    for e in &events {
        *copies.entry(e.id.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "events stored twice: {twice:?}");
    for (_, eff) in &held {
        assert_eq!(released(&events, eff), 1, "{eff}");
    }
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn a_zombie_worker_commits_nothing_once_another_owner_decided() {
    // A worker decides an approval, and is paused (SIGSTOP) before its commit, as a
    // long GC pause or a partition would; past its pin another worker takes the
    // partition and decides a deny of the same call under another key. Resumed, the
    // paused worker's batch fails on its records' expectations: the call is never
    // released, and nothing of its batch appears anywhere.
    // A long ack_wait: the approval the zombie holds is not delivered to the next
    // owner before the deny.
    let mut app = TestApp::start_with(AppOptions {
        topo: Topology {
            ack_wait: Duration::from_secs(10),
            ..Topology::default()
        },
        workers: 0,
        outcome_timeout: Duration::from_secs(2),
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    app.start_worker().await;
    let (_, eff) = open_approval(&rt).await;
    app.wait_idle().await;
    app.stop_workers().await;

    let zombie = app.spawn_worker_process(Some("stop-before-commit"));
    let pid = app.process(zombie).id();
    let ana = app.person("acme", "ana");
    let approve = ana
        .post_keyed(
            &format!("/v1/interactions/{eff}/approve"),
            "k-approve",
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(
        approve.status, 503,
        "the approval waits on the paused worker: {approve:?}"
    );
    wait_for(
        Duration::from_secs(20),
        "the worker to stop before its commit",
        || async move { stopped(pid).then_some(()) },
    )
    .await;

    app.start_worker().await;
    let deny = wait_for(
        Duration::from_secs(30),
        "the deny, by the next owner",
        || {
            let (ana, eff) = (ana.clone(), eff.clone());
            async move {
                let r = ana
                    .post_keyed(
                        &format!("/v1/interactions/{eff}/approve"),
                        "k-deny",
                        &json!({"approved": false, "reason": "not now"}),
                    )
                    .await;
                (r.status != 503).then_some(r)
            }
        },
    )
    .await;
    assert_eq!(deny.status, 204, "{deny:?}");

    // The zombie resumes, commits (refused), decides again and acks.
    app.signal_process(zombie, nix::sys::signal::Signal::SIGCONT);
    app.wait_idle_within(Duration::from_secs(40)).await;
    let again = ana
        .post_keyed(
            &format!("/v1/interactions/{eff}/approve"),
            "k-approve",
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (409, "NRY-0009"),
        "the approval, retried, finds the deny: {again:?}"
    );
    app.wait_idle().await;
    let record = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(
        record.state,
        State::Finished,
        "a denied call is finished at once"
    );
    let events = app.events("acme").await;
    assert_eq!(
        released(&events, &eff),
        0,
        "the zombie's release: {events:?}"
    );
    assert_eq!(
        finished(&events, &eff).len(),
        1,
        "one tool-call-finished, the deny's"
    );
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
    // Nor in the state stream, where a refused batch would have left it.
    let state = app
        .bus
        .js
        .get_stream(app.bus.topo.state_stream())
        .await
        .expect("state stream");
    let released_in_state = state
        .get_last_raw_message_by_subject("hp.fx.evt.acme.*.*.tool-call-released")
        .await;
    assert!(
        released_in_state.is_err(),
        "a release in the state stream: {:?}",
        released_in_state.map(|m| m.subject)
    );
    app.kill_process(zombie);
}

/// Answers `eff` with `key` until the answer is decided (a 503 while the worker or
/// the server is away is retried with the same key, as the API documents).
async fn approve_until_decided(app: &TestApp, eff: &str, key: &str, approved: bool) -> u16 {
    let ana = app.person("acme", "ana");
    wait_for(Duration::from_secs(30), "the answer decided", || {
        let (ana, eff, key) = (ana.clone(), eff.to_owned(), key.to_owned());
        async move {
            let r = ana
                .post_keyed(
                    &format!("/v1/interactions/{eff}/approve"),
                    &key,
                    &json!({"approved": approved}),
                )
                .await;
            (r.status != 503).then_some(r.status)
        }
    })
    .await
}

/// No second copy, ever: through a worker killed after its commit and another
/// killed before its ack (both commands redelivered), a `kill -9` of nats-server
/// and its restart, and an idle stretch longer than the duplicate window, with
/// every answer and lane message sent again at each step, every event, audit
/// record and lane message is stored once in its stream (counted by
/// `Nats-Msg-Id`); and each that should be there is.
#[tokio::test]
async fn every_effect_is_stored_once_through_kills_a_server_restart_and_an_idle_window() {
    let window = Duration::from_secs(1);
    let mut app = app_without_workers(window).await;
    let after_write = answer_into_failpoint(&mut app, "after-write", "k-1").await;
    let before_ack = answer_into_failpoint(&mut app, "before-ack", "k-2").await;
    let rt = app.runtime("acme").await;
    app.start_worker().await;
    let (at, question) = open_question(&rt, holdpoint_domain::SessionMode::Product).await;
    let ana = app.person("acme", "ana");
    let message = json!({"text": "never mind", "messageId": "msg-1"});
    let lane_path = format!("/v1/sessions/{}/messages", at.session);
    let send_message = || {
        let (ana, lane_path, message) = (ana.clone(), lane_path.clone(), message.clone());
        async move {
            wait_for(Duration::from_secs(30), "the lane message taken", || {
                let (ana, lane_path, message) = (ana.clone(), lane_path.clone(), message.clone());
                async move {
                    let r = ana.post(&lane_path, &message).await;
                    (r.status != 503).then_some(r.status)
                }
            })
            .await
        }
    };

    // Each step: the two answers again with their keys (replays), the lane
    // message again (a replay), then everything settles.
    let mut copies_after = Vec::new();
    for step in [
        "after the kills",
        "after the server restart",
        "after the window",
    ] {
        match step {
            "after the server restart" => {
                app.nats.kill().await;
                app.nats.restart().await;
            }
            "after the window" => {
                pass_the_window(window * 3).await;
                // A new owner too: the worker restarts.
                app.stop_workers().await;
                app.start_worker().await;
            }
            _ => {}
        }
        assert_eq!(
            approve_until_decided(&app, &after_write, "k-1", true).await,
            204,
            "{step}"
        );
        assert_eq!(
            approve_until_decided(&app, &before_ack, "k-2", true).await,
            204,
            "{step}"
        );
        assert_eq!(send_message().await, 202, "{step}");
        app.wait_idle_within(Duration::from_secs(40)).await;
        let copies = holdpoint_tests::copies::count(&app.bus).await;
        println!("{step}: {copies}");
        copies.assert_each_once();
        copies_after.push(copies);
    }

    // What should be there is there, once: each release, each approval's audit
    // record, the lane message; and the question the message closed.
    let events = app.events("acme").await;
    for eff in [&after_write, &before_ack] {
        assert_eq!(released(&events, eff), 1, "{eff}");
        assert_eq!(
            named(&events, "interaction-resolved", eff).len(),
            1,
            "{eff}"
        );
    }
    assert_eq!(named(&events, "interaction-closed", &question).len(), 1);
    assert_eq!(app.lane_messages("acme").await.len(), 1);
    let audit = app.bus.topo.audit_stream();
    let last = copies_after.last().expect("three steps");
    assert!(last.messages(&audit) >= 2, "{last}");
    // Nothing was added after the first step: the retries were replays.
    let first = &copies_after[0];
    for stream in [
        app.bus.topo.events_stream(),
        audit,
        app.bus.topo.lanes_stream(),
    ] {
        assert_eq!(
            first.messages(&stream),
            last.messages(&stream),
            "{stream}: the replays stored something"
        );
    }
}

/// A store whose public streams source the state stream through nats-server's
/// ephemeral source consumers (the first releases of store format 2) is switched
/// to durable source consumers by the next setup: effects stored before the
/// switch, past the duplicate window, are not sourced again, and effects stored
/// after it are sourced once.
#[tokio::test]
async fn a_switch_to_durable_sourcing_sources_nothing_twice_and_loses_nothing() {
    let window = Duration::from_secs(2);
    let mut app = app_without_workers(window).await;
    let (js, topo) = (app.bus.js.clone(), app.bus.topo.clone());
    let public = [
        topo.commands_stream(),
        topo.events_stream(),
        topo.lanes_stream(),
        topo.audit_stream(),
    ];
    // What the earlier release set up: the same sources, with no consumer named.
    for name in &public {
        let mut stream = js.get_stream(name).await.expect("stream");
        let mut cfg = stream.info().await.expect("info").config.clone();
        for source in cfg.sources.iter_mut().flatten() {
            assert!(source.consumer.is_some(), "{name} sources durably");
            source.consumer = None;
        }
        js.update_stream(&cfg).await.expect("ephemeral sourcing");
        let state = js.get_stream(topo.state_stream()).await.expect("state");
        state
            .delete_consumer(&topo.source_consumer(name))
            .await
            .expect("delete the durable source consumer");
    }
    app.start_worker().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let approve = |eff: String| {
        let ana = ana.clone();
        async move {
            let r = ana
                .post_keyed(
                    &format!("/v1/interactions/{eff}/approve"),
                    &format!("k-{eff}"),
                    &json!({"approved": true}),
                )
                .await;
            assert_eq!(r.status, 204, "{r:?}");
        }
    };
    let mut effs = Vec::new();
    for _ in 0..3 {
        let (_, eff) = open_approval(&rt).await;
        approve(eff.clone()).await;
        effs.push(eff);
    }
    app.wait_idle_within(Duration::from_secs(40)).await;
    let before = holdpoint_tests::copies::count(&app.bus).await;
    before.assert_each_once();
    pass_the_window(window * 2).await;

    // The next setup switches every public stream to its durable consumer.
    let bus = holdpoint_bus::Bus::setup(app.nats.connect().await, topo.clone())
        .await
        .expect("setup");
    for name in &public {
        let mut stream = bus.js.get_stream(name).await.expect("stream");
        let info = stream.info().await.expect("info");
        let sources = info.config.sources.clone().unwrap_or_default();
        assert_eq!(
            sources
                .iter()
                .map(|s| s.consumer.clone())
                .collect::<Vec<_>>(),
            vec![Some(
                async_nats::jetstream::stream::StreamConsumerSource::new(
                    topo.source_consumer(name),
                    topo.source_deliver_subject(name)
                )
            )],
            "{name}"
        );
    }
    for _ in 0..3 {
        let (_, eff) = open_approval(&rt).await;
        approve(eff.clone()).await;
        effs.push(eff);
    }
    app.wait_idle_within(Duration::from_secs(40)).await;
    let after = holdpoint_tests::copies::count(&app.bus).await;
    println!("before the switch: {before}\nafter it: {after}");
    after.assert_each_once();
    let events = app.events("acme").await;
    for eff in &effs {
        assert_eq!(released(&events, eff), 1, "{eff}");
        assert_eq!(
            named(&events, "interaction-resolved", eff).len(),
            1,
            "{eff}"
        );
    }
    for stream in [topo.events_stream(), topo.audit_stream()] {
        assert!(
            after.messages(&stream) > before.messages(&stream),
            "{stream}: the decisions after the switch were sourced"
        );
    }
}

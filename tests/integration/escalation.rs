//! Escalation (README "Escalation"): an opening names people and groups who are
//! added to the assignees at the deadline's warning stage if nobody answered by
//! then. A person of the escalation group is refused (403 `NRY-0037`) before and
//! may answer after; the `interaction-escalated` event and the `escalated` audit
//! record appear once, also across a worker kill -9 and a nats-server restart;
//! an escalation that would never fire, or is out of bounds, opens nothing.

use std::time::Duration;

use holdpoint_client::{ClientError, Expiry, HoldCall, Placement, Runtime};
use holdpoint_domain::{Assignees, Event, EventData, SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, URI, get};

fn options(warning_secs: Option<u64>) -> AppOptions {
    AppOptions {
        deadlines: holdpoint_domain::Deadlines {
            warning: warning_secs.map(Duration::from_secs),
            ..Default::default()
        },
        ..AppOptions::default()
    }
}

fn who(people: &[&str], groups: &[&str]) -> Assignees {
    Assignees::of(people, groups).expect("assignees")
}

/// A placement on a new blocking session: assigned to `ana`, escalating to the
/// group `oncall`, expiring in `secs`.
async fn escalating(rt: &Runtime, secs: u64) -> Placement {
    let session = open_session(rt, SessionMode::Blocking).await;
    placement(&session)
        .assigned_to(who(&["ana"], &[]))
        .escalate_to(who(&[], &["oncall"]))
        .with_expiry(Expiry {
            expires_in: Some(secs),
            ..Expiry::default()
        })
}

/// Waits for `eff`'s `interaction-escalated` event; returns every event of acme.
async fn escalated(app: &TestApp, eff: &str, within: Duration) -> Vec<Event> {
    wait_for(within, "the escalation", || async {
        let events = app.events("acme").await;
        (!named(&events, "interaction-escalated", eff).is_empty()).then_some(events)
    })
    .await
}

/// The `escalated` audit records of `eff`.
async fn audited(app: &TestApp, eff: &str) -> Vec<Value> {
    audit_records(app, "ana", "escalated", "interactionId", eff).await
}

fn approve(eff: &str) -> String {
    format!("/v1/interactions/{eff}/approve")
}

#[tokio::test]
async fn the_warning_stage_adds_the_escalation_group_who_may_then_answer() {
    // A deadline 20 s out with a 17 s lead: the escalation comes 3 s after the
    // opening, and the answer after it has 17 s before the deadline.
    let app = TestApp::start_with(options(Some(17))).await;
    let rt = app.runtime("acme").await;
    let at = escalating(&rt, 20).await;
    let eff = hold_call(&rt, &at, "deploy", json!({"service": "api"}), Some("prod")).await;

    // Before the warning stage: someone of the escalation group is not assigned.
    let olga = app.person("acme", "olga").with_groups("oncall");
    let r = olga.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["forYou"], false);
    assert_eq!(r.body["escalation"], json!({"groups": ["oncall"]}));
    assert!(r.body.get("escalatedAt").is_none(), "{r:?}");
    let refused = olga
        .post_keyed(&approve(&eff), "k-olga", &json!({"approved": true}))
        .await;
    assert_eq!((refused.status, refused.code()), (403, "NRY-0037"));

    let events = escalated(&app, &eff, Duration::from_secs(20)).await;
    let e = named(&events, "interaction-escalated", &eff);
    assert_eq!(e.len(), 1);
    match &e[0].body {
        EventData::InteractionEscalated {
            escalation,
            assignees,
            previous,
            ..
        } => {
            assert_eq!(escalation, &who(&[], &["oncall"]));
            assert_eq!(assignees, &Some(who(&["ana"], &["oncall"])));
            assert_eq!(previous, &Some(who(&["ana"], &[])));
        }
        other => panic!("{other:?}"),
    }
    // The warning still goes out, in the same decision.
    assert_eq!(named(&events, "interaction-expiring", &eff).len(), 1);

    // The view and the A2A status say so.
    let r = olga.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(r.body["forYou"], true, "{r:?}");
    assert!(r.body["escalatedAt"].is_string(), "{r:?}");
    assert_eq!(
        r.body["assignees"],
        json!({"people": ["ana"], "groups": ["oncall"]})
    );
    let task = Rpc::new(&app, "acme", "olga")
        .call("GetTask", get(&at))
        .await;
    let meta = &task.result()["status"]["message"]["metadata"][URI];
    assert_eq!(
        meta["assignees"],
        json!({"people": ["ana"], "groups": ["oncall"]}),
        "{meta}"
    );
    assert_eq!(meta["escalation"], json!({"groups": ["oncall"]}));
    assert!(meta["escalatedAt"].is_string(), "{meta}");

    // The same key that was refused now decides, once.
    let r = olga
        .post_keyed(&approve(&eff), "k-olga", &json!({"approved": true}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let i = app.interaction("acme", &eff).await.expect("approval");
    assert_eq!(i.resolution.expect("resolved").by.as_str(), "olga");

    // Exactly once: one event, one audit record, nothing more arrives.
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-escalated", &eff).len(), 1);
    let audit = audited(&app, &eff).await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        audit[0]["data"]["escalation"],
        json!({"groups": ["oncall"]})
    );
    assert_eq!(audit[0]["data"]["previous"], json!({"people": ["ana"]}));
}

#[tokio::test]
async fn an_interaction_open_to_everyone_is_escalated_as_a_notice() {
    let app = TestApp::start_with(options(Some(18))).await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session)
        .escalate_to(who(&["lead"], &[]))
        .with_expiry(Expiry {
            expires_in: Some(20),
            ..Expiry::default()
        });
    let eff = hold_call(&rt, &at, "deploy", json!({}), None).await;
    let events = escalated(&app, &eff, Duration::from_secs(20)).await;
    assert!(matches!(
        &named(&events, "interaction-escalated", &eff)[0].body,
        EventData::InteractionEscalated {
            assignees: None,
            previous: None,
            ..
        }
    ));
    // Still open to the whole organisation.
    let r = app
        .person("acme", "zed")
        .post(&approve(&eff), &json!({"approved": true}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
}

/// Opens `eff` at `at`; the client's error when refused.
async fn try_hold(rt: &Runtime, at: &Placement, eff: &str) -> Result<(), ClientError> {
    rt.hold_for_approval(
        at,
        HoldCall {
            effect_id: eff.into(),
            call_id: format!("call-{eff}"),
            server: "github".into(),
            tool: "deploy".into(),
            arguments: json!({}),
            reason: None,
            editable: false,
            approvals: None,
        },
    )
    .await
    .map(|_| ())
}

#[tokio::test]
async fn an_escalation_that_would_never_fire_or_is_out_of_bounds_opens_nothing() {
    let names: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let app = TestApp::start_with(options(Some(30))).await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let expiring = |secs| Expiry {
        expires_in: Some(secs),
        ..Expiry::default()
    };
    let base = || placement(&session);
    let cases: Vec<(Placement, &str)> = vec![
        (base().escalate_to(who(&["lead"], &[])), "needs a deadline"),
        (
            base()
                .escalate_to(who(&["lead"], &[]))
                .with_expiry(expiring(20)),
            "closer than the warning lead",
        ),
        (
            base()
                .escalate_to(Assignees::default())
                .with_expiry(expiring(60)),
            "names nobody",
        ),
        (
            base()
                .escalate_to(who(&refs, &[]))
                .with_expiry(expiring(60)),
            "at most 32",
        ),
        (
            base()
                .escalate_to(who(&[], &["ops", "ops"]))
                .with_expiry(expiring(60)),
            "twice",
        ),
        (
            base()
                .assigned_to(who(&refs[..32], &[]))
                .escalate_to(who(&[refs[32]], &[]))
                .with_expiry(expiring(60)),
            "together name 33 people",
        ),
    ];
    for (n, (at, says)) in cases.into_iter().enumerate() {
        let eff = format!("eff_esc{n}");
        match try_hold(&rt, &at, &eff).await {
            Err(ClientError::Rejected(rej)) => {
                assert_eq!(rej.code.spec().code, "NRY-0001", "{says}");
                assert!(rej.message.contains(says), "{says}: {}", rej.message);
            }
            other => panic!("{says}: {other:?}"),
        }
        assert!(app.interaction("acme", &eff).await.is_none(), "{says}");
    }
    // Look-alike names cannot be named at all (a Cyrillic `о`, a trailing space).
    assert!(Assignees::of(&[], &["\u{43e}ncall"]).is_err());
    assert!(Assignees::of(&[], &["oncall "]).is_err());
    // At the bounds: 31 assigned and an escalation of 2 (one assigned already)
    // make 32 together, and open.
    let at = base()
        .assigned_to(who(&refs[..31], &refs[..32]))
        .escalate_to(who(&[refs[0], refs[31]], &refs[..32]))
        .with_expiry(expiring(60));
    try_hold(&rt, &at, "eff_esc_bound").await.expect("opens");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert!(
        events
            .iter()
            .all(|e| !e.subject.starts_with("eff_esc") || e.subject == "eff_esc_bound"),
        "a refused opening published nothing"
    );

    // A server without a warning lead refuses any escalation.
    let bare = TestApp::start_with(options(None)).await;
    let rt = bare.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session)
        .escalate_to(who(&["lead"], &[]))
        .with_expiry(expiring(60));
    match try_hold(&rt, &at, "eff_nolead").await {
        Err(ClientError::Rejected(rej)) => {
            assert_eq!(rej.code.spec().code, "NRY-0001");
            assert!(rej.message.contains("no warning lead"), "{}", rej.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(bare.interaction("acme", "eff_nolead").await.is_none());
}

/// The worker is SIGKILLed and the nats-server restarted between the opening
/// and the warning stage, and again after the escalation: it escalates once.
#[tokio::test]
async fn an_escalation_fires_once_across_a_worker_kill_and_a_server_restart() {
    let mut app = TestApp::start_with(AppOptions {
        workers: 0,
        ..options(Some(25))
    })
    .await;
    let first = app.spawn_worker_process(None);
    let rt = app.runtime("acme").await;
    // The warning stage 5 s after the opening, the deadline 30 s after it: time
    // for two restarts and the answer.
    let at = escalating(&rt, 30).await;
    let eff = hold_call(&rt, &at, "deploy", json!({}), None).await;
    app.kill_process(first);
    app.nats.restart().await;
    let second = app.spawn_worker_process(None);
    escalated(&app, &eff, Duration::from_secs(40)).await;
    // Again after the escalation: kill the worker that decided it, restart the
    // server, and let a new worker take over.
    app.kill_process(second);
    app.nats.restart().await;
    let _third = app.spawn_worker_process(None);
    let olga = app.person("acme", "olga").with_groups("oncall");
    let r = wait_for(Duration::from_secs(30), "olga's answer", || async {
        let r = olga
            .post_keyed(&approve(&eff), "k-olga", &json!({"approved": true}))
            .await;
        (r.status != 503).then_some(r)
    })
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-escalated", &eff).len(), 1);
    assert_eq!(named(&events, "interaction-expiring", &eff).len(), 1);
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
    assert_eq!(audited(&app, &eff).await.len(), 1);
    let i = app.interaction("acme", &eff).await.expect("approval");
    assert_ne!(i.state, State::Pending);
    assert_eq!(i.assignees, Some(who(&["ana"], &["oncall"])));
}

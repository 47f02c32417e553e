//! `holdpoint migrate` on a store the release before the state stream wrote:
//! `tests/fixtures/store-format-1.tar.gz`, made with that release's own binary by
//! `tests/fixtures/make-store-format-1.sh` (what it holds is listed there). The
//! services refuse the store until it is migrated; after it, nothing pending is
//! lost, every effect the old records still owed is stored once, nothing already
//! stored is stored again, the deadline fires once, and a second run does nothing.

use std::collections::HashMap;
use std::time::Duration;

use holdpoint_bus::{Bus, BusError, Topology};
use holdpoint_client::{HoldCall, Placement};
use holdpoint_domain::{Event, State};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::{NatsServer, NatsServerOptions, wait_for};
use serde_json::json;

use crate::common::*;

fn holdpoint(args: &[&str]) -> std::process::Output {
    std::process::Command::new(holdpoint_tests::app::holdpoint_binary())
        .args(args)
        .output()
        .expect("run holdpoint")
}

/// A nats-server on a copy of the fixture's store.
async fn format_1_store() -> (tempfile::TempDir, NatsServer) {
    let dir = tempfile::tempdir().expect("tmp");
    let fixture =
        holdpoint_tests::nats::workspace_root().join("tests/fixtures/store-format-1.tar.gz");
    let untar = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("tar");
    assert!(untar.success(), "the fixture unpacks");
    let nats =
        NatsServer::start_with(NatsServerOptions::default().store_dir(dir.path().to_path_buf()))
            .await;
    (dir, nats)
}

/// How many times each id occurs.
fn copies<'a>(ids: impl IntoIterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut n = HashMap::new();
    for id in ids {
        *n.entry(id).or_default() += 1;
    }
    n
}

fn count(events: &[Event], subject: &str, name: &str) -> usize {
    events
        .iter()
        .filter(|e| e.subject == subject && e.name() == name)
        .count()
}

#[tokio::test]
async fn a_format_1_store_is_migrated_losing_nothing_and_storing_nothing_twice() {
    let (_dir, nats) = format_1_store().await;

    // Before: every service refuses the store, naming the command that fixes it.
    let refused = Bus::setup(nats.connect().await, Topology::default()).await;
    assert!(
        matches!(refused, Err(BusError::StoreFormat { found: 1 })),
        "{refused:?}"
    );
    let up = holdpoint(&["worker", "--nats-url", &nats.url()]);
    assert!(!up.status.success());
    assert!(
        String::from_utf8_lossy(&up.stderr).contains("holdpoint migrate"),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );

    let out = holdpoint(&["migrate", "--nats-url", &nats.url(), "--json"]);
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&printed).expect("a JSON report");
    let r = &report["migrated"];
    println!("migrate: {r}");
    assert_eq!(r["records"], 18, "every record of the fixture: {r}");
    assert_eq!(r["already"], 0);
    assert!(
        r["effects"].as_u64() >= Some(2),
        "e-owed's release and resolution were owed: {r}"
    );
    assert!(
        r["alreadyStored"].as_u64() >= Some(3),
        "e-stored's were stored: {r}"
    );
    // q-later's schedule waits in HP_COMMANDS; q-expiring's was still owed by its
    // record (its first stage fired while the fixture was made).
    assert!(
        r["schedules"].as_u64() >= Some(1),
        "q-later's deadline: {r}"
    );
    let again = holdpoint(&["migrate", "--nats-url", &nats.url()]);
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    // After: the services run on it.
    let app = TestApp::start_on(nats, AppOptions::default()).await;
    let ana = app.person("acme", "ana");
    app.wait_idle().await;

    // Nothing pending was lost: the approval and the lane's question are answered.
    assert_eq!(state_of(&app, "acme", "e-pending").await, State::Pending);
    let r = ana
        .post(
            "/v1/interactions/e-pending/approve",
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let q_lane = "22222222-2222-4222-8222-222222222222";
    assert_eq!(state_of(&app, "acme", q_lane).await, State::Pending);
    let r = ana
        .post(
            &format!("/v1/questions/{q_lane}/answer"),
            &json!({"answers": [{"options": [0]}]}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");

    // The deadline that passed while the store was being migrated fires once.
    let q_expiring = "11111111-1111-4111-8111-111111111111";
    wait_for(
        Duration::from_secs(20),
        "the moved deadline to fire",
        || {
            let app = &app;
            async move { (state_of(app, "acme", q_expiring).await != State::Pending).then_some(()) }
        },
    )
    .await;

    // The deadline still to come is kept: its schedule is in the state stream
    // (the fixture set it about a year after it was made; past that day it has
    // fired, once, like the other).
    let q_later = "33333333-3333-4333-8333-333333333333";
    let later = app.interaction("acme", q_later).await.expect("q-later");
    let schedule = app
        .bus
        .js
        .get_stream(app.bus.topo.state_stream())
        .await
        .expect("state stream")
        .get_last_raw_message_by_subject(&format!("hp.fx.sched.acme.{q_later}.expire"))
        .await;
    match later.expires_at {
        Some(at) if at > time::OffsetDateTime::now_utc() + time::Duration::minutes(1) => {
            assert_eq!(later.state, State::Pending);
            let schedule = schedule.expect("q-later's schedule, moved");
            assert!(
                schedule.headers.get("Nats-Schedule").is_some(),
                "{:?}",
                schedule.headers
            );
        }
        _ => {}
    }

    // The remembered rule still decides the next hold of git/merge in s1.
    let rt = app.runtime("acme").await;
    let at = Placement::new("s1", "main", "t-rule", "ctx-1").expect("ids");
    rt.hold_for_approval(
        &at,
        HoldCall {
            effect_id: "e-rule".into(),
            call_id: "c-rule".into(),
            server: "git".into(),
            tool: "merge".into(),
            arguments: json!({"n": 9}),
            reason: None,
            editable: false,
            approvals: None,
        },
    )
    .await
    .expect("hold");
    wait_for(
        Duration::from_secs(20),
        "the rule to decide the hold",
        || {
            let app = &app;
            async move { (state_of(app, "acme", "e-rule").await == State::Resolved).then_some(()) }
        },
    )
    .await;

    app.wait_idle().await;
    let events = app.events("acme").await;
    // What e-owed's record owed is stored now, once; what e-stored's had stored
    // already is not stored again.
    for eff in ["e-owed", "e-stored", "e-resolved", "e-pending"] {
        assert_eq!(
            count(&events, eff, "interaction-resolved"),
            1,
            "{eff}: {:?}",
            events
                .iter()
                .filter(|e| e.subject == eff)
                .map(Event::name)
                .collect::<Vec<_>>()
        );
        assert_eq!(count(&events, eff, "tool-call-released"), 1, "{eff}");
    }
    let ended = count(&events, q_expiring, "interaction-resolved")
        + count(&events, q_expiring, "interaction-closed");
    assert_eq!(ended, 1, "the deadline decided once");
    // No id twice, in any stream.
    let twice: Vec<_> = copies(events.iter().map(|e| e.id.as_str()))
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "events stored twice: {twice:?}");
    let audit = read_audit(&app).await;
    let twice: Vec<_> = copies(audit.iter().map(String::as_str))
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "audit records stored twice: {twice:?}");
    let lanes = app.lane_messages("acme").await;
    let ids: Vec<String> = lanes.iter().map(|m| m.msg_id()).collect();
    let twice: Vec<_> = copies(ids.iter().map(String::as_str))
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "lane messages stored twice: {twice:?}");
}

/// Every audit record id of acme, in stream order.
async fn read_audit(app: &TestApp) -> Vec<String> {
    app.wait_sourced().await;
    let org = holdpoint_domain::OrgId::parse("acme").expect("org");
    app.bus
        .read_audit(&org, 0, 10_000)
        .await
        .expect("audit")
        .into_iter()
        .filter_map(|s| serde_json::from_slice::<Event>(&s.payload).ok())
        .map(|e| e.id)
        .collect()
}

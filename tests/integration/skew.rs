//! Version skew (README.md, "Upgrades and version skew"): a worker of an older
//! release and one of this build decide commands of one store side by side, and
//! each takes over the other's partitions when it is killed, with every approval
//! decided once.
//!
//! Needs the older release's `holdpoint` binary in `HOLDPOINT_OLD_BIN`;
//! `ops/skew.sh [commit]` builds one and runs this test. Ignored in the suite
//! (which builds only this release), so it is reported as skipped, never as
//! passed, there.

use std::path::PathBuf;
use std::time::Duration;

use holdpoint_domain::State;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::json;

use crate::common::*;

/// Opens `n` approvals, approves each over REST with its own key and checks the
/// answers are 204.
async fn approve_round(app: &TestApp, round: &str, n: usize) -> Vec<String> {
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let mut ids = Vec::new();
    for i in 0..n {
        let (_, id) = open_approval(&rt).await;
        let r = ana
            .post_keyed(
                &format!("/v1/interactions/{id}/approve"),
                &format!("{round}-{i}"),
                &json!({"approved": true}),
            )
            .await;
        assert_eq!(r.status, 204, "{round} #{i}: {r:?}");
        ids.push(id);
    }
    ids
}

#[tokio::test]
#[ignore = "needs HOLDPOINT_OLD_BIN, another release's holdpoint: run ops/skew.sh"]
async fn an_older_and_a_newer_worker_share_one_store() {
    let old = PathBuf::from(
        std::env::var_os("HOLDPOINT_OLD_BIN").expect("HOLDPOINT_OLD_BIN names the older binary"),
    );
    assert!(old.is_file(), "{} is not a file", old.display());
    let mut app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let older = app.spawn_worker_binary(&old, None, &[]);
    let newer = app.spawn_worker_process(None);
    // Both run: the partitions are spread over them.
    let mut ids = approve_round(&app, "both", 24).await;
    // The older one alone, after the newer is killed, then the newer alone.
    app.kill_process(newer);
    ids.extend(approve_round(&app, "older", 12).await);
    let _newer_again = app.spawn_worker_process(None);
    app.kill_process(older);
    ids.extend(approve_round(&app, "newer", 12).await);

    let events = wait_for(Duration::from_secs(30), "every release event", || async {
        let events = app.events("acme").await;
        ids.iter()
            .all(|id| !named(&events, "tool-call-released", id).is_empty())
            .then_some(events)
    })
    .await;
    for id in &ids {
        assert_eq!(state_of(&app, "acme", id).await, State::Resolved, "{id}");
        assert_eq!(
            named(&events, "tool-call-released", id).len(),
            1,
            "{id}: released more than once"
        );
        assert_eq!(named(&events, "interaction-resolved", id).len(), 1, "{id}");
    }
    assert_ids_consistent(&events);
}

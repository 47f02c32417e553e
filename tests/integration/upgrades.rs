//! Upgrades and version skew (README.md, "Upgrades and version skew"): the
//! commands stream records the store format it was set up with; every service
//! (and `holdpoint setup`) refuses to start on a store of a newer format, and
//! starts again once the store is back at its own (a rollback).

use std::time::Duration;

use holdpoint_bus::{Bus, STORE_FORMAT, STORE_FORMAT_KEY, store_format_of};
use holdpoint_tests::app::{TestApp, holdpoint_binary};

/// `holdpoint status --json`'s `storeFormat`.
fn status_store_format(app: &TestApp) -> serde_json::Value {
    let out = std::process::Command::new(holdpoint_binary())
        .args(["status", "--json", "--nats-url", &app.nats.url()])
        .output()
        .expect("run holdpoint status");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    status["storeFormat"].clone()
}

async fn set_store_format(app: &TestApp, format: &str) {
    let js = &app.bus.js;
    let mut stream = js
        .get_stream(app.bus.topo.commands_stream())
        .await
        .expect("the commands stream");
    let mut config = stream.info().await.expect("info").config.clone();
    config
        .metadata
        .insert(STORE_FORMAT_KEY.to_owned(), format.to_owned());
    js.update_stream(&config)
        .await
        .expect("update the metadata");
}

#[tokio::test]
async fn a_store_of_a_newer_format_is_refused_at_start_and_a_rollback_starts_again() {
    let app = TestApp::start().await;
    let mut stream = app
        .bus
        .js
        .get_stream(app.bus.topo.commands_stream())
        .await
        .expect("the commands stream");
    let metadata = stream.info().await.expect("info").config.metadata.clone();
    assert_eq!(
        store_format_of(&metadata).expect("a format"),
        STORE_FORMAT,
        "{metadata:?}"
    );

    assert_eq!(status_store_format(&app), serde_json::json!(STORE_FORMAT));

    // What a setup of the next format would leave; status still reads it.
    let newer = (STORE_FORMAT + 1).to_string();
    set_store_format(&app, &newer).await;
    assert_eq!(
        status_store_format(&app),
        serde_json::json!(STORE_FORMAT + 1)
    );
    let refused = Bus::setup(app.nats.connect().await, app.bus.topo.clone())
        .await
        .map(|_| ())
        .expect_err("a newer store format is refused");
    assert_eq!(refused.kind(), holdpoint_bus::ErrorKind::Permanent);
    assert!(
        refused.to_string().contains(&format!("format {newer}")),
        "{refused}"
    );
    // The binary's services exit with it rather than retrying.
    for verb in ["worker", "setup"] {
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new(holdpoint_binary())
                .args([verb, "--nats-url", &app.nats.url()])
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("holdpoint {verb} kept running on a newer store"))
        .expect("run holdpoint");
        assert!(!out.status.success(), "holdpoint {verb} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("the store has format {newer}")),
            "holdpoint {verb}: {stderr}"
        );
    }

    // A value that is not a number is refused as corrupt, never read as 1.
    set_store_format(&app, "two").await;
    assert!(
        Bus::setup(app.nats.connect().await, app.bus.topo.clone())
            .await
            .is_err()
    );

    // Back at this build's format (a rollback of the newer setup): it starts.
    set_store_format(&app, &STORE_FORMAT.to_string()).await;
    Bus::setup(app.nats.connect().await, app.bus.topo.clone())
        .await
        .expect("this build's own format");
}

//! Holdpoint works with nats-server 2.9 (what Debian ships) as well as the
//! current release. Runs the core flow on Debian's 2.9 binary when the machine has
//! one (never the shared server on 4222: a private process on a free port).

use holdpoint_domain::SessionMode;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::NatsServerOptions;

use crate::common::*;

#[tokio::test]
async fn core_flow_on_nats_server_2_9() {
    let Some(binary) = debian_nats() else {
        eprintln!("no nats-server 2.9 on this machine; compatibility not checked here");
        return;
    };
    let app = TestApp::start_with(AppOptions {
        nats: NatsServerOptions {
            binary: Some(binary),
            ..NatsServerOptions::default()
        },
        ..AppOptions::default()
    })
    .await;
    assert!(app.bus.client.server_info().version.starts_with("2.9."));
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/questions/{q}/answer");
    let body = example_answer();
    let replies =
        futures::future::join_all((0..10).map(|_| ana.post_keyed(&path, "k", &body))).await;
    assert!(replies.iter().all(|r| r.status == 204), "{replies:?}");
    let r = ana.get("/v1/interactions?state=finished").await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(1));
    app.wait_idle().await;
    assert_eq!(finished(&app.events("acme").await, &q).len(), 1);
}

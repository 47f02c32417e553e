//! The version floor (`holdpoint_bus::MIN_SERVER`, 2.15.1): a nats-server older
//! than that is refused, by the library and by every role of the binary, with an
//! error that names the version found and the version needed, and nothing is
//! created in it.
//!
//! The old server is Debian's 2.9 (`HOLDPOINT_OLD_NATS_SERVER`; ops/test.sh finds
//! it or unpacks Debian's package into `.tools/old-nats`), run as a private process
//! on a free port, never the shared server on 4222. Without it the test fails with
//! "NOT RUN" rather than passing; ops/test.sh leaves it out and says so when it
//! cannot get the binary.

use std::time::Duration;

use holdpoint_tests::app::holdpoint_binary;
use holdpoint_tests::nats::{NatsServer, NatsServerOptions};

use crate::common::*;

#[tokio::test]
async fn a_server_older_than_the_floor_is_refused_by_every_role() {
    let binary = debian_nats().expect(
        "NOT RUN: no nats-server 2.9 here (HOLDPOINT_OLD_NATS_SERVER or /usr/sbin/nats-server); \
         ops/test.sh unpacks Debian's package or leaves this test out",
    );
    let server = NatsServer::start_with(NatsServerOptions {
        binary: Some(binary),
        ..NatsServerOptions::default()
    })
    .await;
    let url = server.url();
    let floor = format!(
        "{}.{}.{}",
        holdpoint_bus::MIN_SERVER.0,
        holdpoint_bus::MIN_SERVER.1,
        holdpoint_bus::MIN_SERVER.2
    );

    // The library refuses at connect.
    match holdpoint_bus::connect(&url, "compat").await {
        Err(e @ holdpoint_bus::BusError::ServerTooOld { .. }) => {
            let text = e.to_string();
            assert!(text.contains("2.9.10"), "{text}");
            assert!(text.contains(&floor), "{text}");
            assert_eq!(e.kind(), holdpoint_bus::ErrorKind::Permanent);
        }
        other => panic!("a 2.9 server was not refused: {other:?}"),
    }
    // And at setup, for a client connected some other way.
    let raw = async_nats::connect(&url).await.expect("raw connect");
    let setup = holdpoint_bus::Bus::setup(raw, holdpoint_bus::Topology::default()).await;
    assert!(
        matches!(setup, Err(holdpoint_bus::BusError::ServerTooOld { .. })),
        "{setup:?}"
    );

    // Every role of the binary exits non-zero at start, saying both versions.
    for role in ["setup", "worker", "ingress", "notifier"] {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(holdpoint_binary())
                .arg(role)
                .env("HOLDPOINT_NATS_URL", &url)
                .env("HOLDPOINT_LISTEN", "127.0.0.1:0")
                .env("HOLDPOINT_ADMIN_LISTEN", "127.0.0.1:0")
                .env("HOLDPOINT_INSECURE_DEV_IDENTITY", "true")
                .env("RUST_LOG", "warn")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("`holdpoint {role}` did not stop on a 2.9 server"))
        .expect("run holdpoint");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "`holdpoint {role}` succeeded: {stderr}"
        );
        assert!(
            stderr.contains("2.9.10") && stderr.contains(&floor),
            "`holdpoint {role}` did not name both versions: {stderr}"
        );
    }

    // Nothing was created in the old server.
    let raw = async_nats::connect(&url).await.expect("raw connect");
    let js = async_nats::jetstream::new(raw);
    let names: Vec<String> = futures::StreamExt::collect::<Vec<_>>(js.stream_names())
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("stream names");
    assert!(
        names.is_empty(),
        "streams created on a refused server: {names:?}"
    );
}

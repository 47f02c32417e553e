//! Backups and restore (`holdpoint backup` / `holdpoint restore`, README.md
//! "Backups and restore"): a store with pending, resolved and expiring
//! interactions is saved with the services stopped and put back into a fresh
//! nats-server; there, the pending one is answered once, the resolved one
//! replays its recorded outcome to its key and refuses another decision, and the
//! deadline in flight fires once, at its time. A restore over existing streams,
//! or from a damaged archive, is refused and writes nothing.
//!
//! Found here: nats-server 2.15.1 does not rebuild a restored stream's duplicate
//! window until it restarts; without the restart the owed events of the last
//! commits before the backup were stored a second time.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use holdpoint_client::{Expiry, Placement};
use holdpoint_domain::{Resolver, SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp, holdpoint_binary};
use holdpoint_tests::nats::{NatsServer, wait_for};
use serde_json::json;

use crate::common::*;

fn holdpoint(args: &[&str]) -> Output {
    std::process::Command::new(holdpoint_binary())
        .args(args)
        .output()
        .expect("run holdpoint")
}

fn expect_ok(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn restore(url: &str, dir: &Path) -> Output {
    holdpoint(&[
        "restore",
        "--nats-url",
        url,
        "--from",
        dir.to_str().expect("utf-8 path"),
    ])
}

#[tokio::test]
async fn a_restored_store_answers_once_replays_outcomes_and_fires_deadlines_once() {
    let opts = AppOptions::default();
    let mut before = TestApp::start_with(opts.clone()).await;
    let rt = before.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let ana = before.person("acme", "ana");

    let resolved = hold_call(&rt, &placement(&session), "merge", json!({"pr": 1}), None).await;
    let path = |id: &str| format!("/v1/interactions/{id}/approve");
    let first = ana
        .post_keyed(&path(&resolved), "key-resolved", &json!({"approved": true}))
        .await;
    assert_eq!(first.status, 204, "{first:?}");
    let pending = hold_call(&rt, &placement(&session), "merge", json!({"pr": 2}), None).await;
    // Long enough for the backup and the restore to finish first; the schedule
    // that keeps it is a message in the commands stream, saved with the rest.
    let expiring_at: Placement = placement(&session).with_expiry(Expiry {
        expires_in: Some(8),
        ..Expiry::default()
    });
    let expiring = hold_call(&rt, &expiring_at, "merge", json!({"pr": 3}), None).await;
    // Each command above returned its decision: they are committed. Events a
    // commit still owes are in its record and go out from the restored store.
    before.stop_workers().await;

    let dir = tempfile::tempdir().expect("tmp");
    let saved = dir.path().join("backup");
    let out = holdpoint(&[
        "backup",
        "--nats-url",
        &before.nats.url(),
        "--out",
        saved.to_str().expect("utf-8 path"),
    ]);
    let printed = expect_ok("backup", &out);
    assert!(printed.contains("KV_HP_STATE"), "{printed}");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(saved.join("holdpoint-backup.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    assert_eq!(manifest["format"], 1, "{manifest}");
    drop(before);

    // Into a fresh nats-server; then a second restore over it is refused.
    let fresh = NatsServer::start().await;
    expect_ok("restore", &restore(&fresh.url(), &saved));
    let again = restore(&fresh.url(), &saved);
    assert!(
        !again.status.success(),
        "a restore over existing streams ran"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists in the target"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // As README.md says: nats-server (2.15.1) rebuilds a restored stream's
    // duplicate window from its stored message ids only when it starts, and the
    // events a commit still owed go out again from the restored records.
    let mut fresh = fresh;
    fresh.restart().await;
    let after = TestApp::start_on(fresh, opts).await;
    let ana = after.person("acme", "ana");

    // The resolved one: its key gets its decision back; another key is refused.
    let replay = ana
        .post_keyed(&path(&resolved), "key-resolved", &json!({"approved": true}))
        .await;
    assert_eq!(replay.status, 204, "{replay:?}");
    let other = ana
        .post_keyed(&path(&resolved), "key-other", &json!({"approved": false}))
        .await;
    assert_eq!(other.status, 409, "{other:?}");

    // The pending one is answered once.
    let answered = ana
        .post_keyed(&path(&pending), "key-pending", &json!({"approved": true}))
        .await;
    assert_eq!(answered.status, 204, "{answered:?}");

    // The deadline fires at its time, once.
    wait_for(
        Duration::from_secs(30),
        "the deadline to decide",
        || async {
            let i = after.interaction("acme", &expiring).await?;
            (i.state != State::Pending).then_some(i)
        },
    )
    .await;
    let i = after
        .interaction("acme", &expiring)
        .await
        .expect("expiring");
    assert_eq!(
        i.resolution.expect("resolved").resolved_by,
        Resolver::Expiry
    );
    let events = wait_for(
        Duration::from_secs(20),
        "every decision's events",
        || async {
            let events = after.events("acme").await;
            let all = [&resolved, &pending, &expiring]
                .iter()
                .all(|id| !named(&events, "interaction-resolved", id).is_empty())
                && !finished(&events, &expiring).is_empty()
                && !named(&events, "tool-call-released", &pending).is_empty();
            all.then_some(events)
        },
    )
    .await;
    for id in [&resolved, &pending, &expiring] {
        assert_eq!(
            named(&events, "interaction-resolved", id).len(),
            1,
            "{id}: {events:#?}"
        );
    }
    assert_eq!(named(&events, "tool-call-released", &resolved).len(), 1);
    assert_eq!(named(&events, "tool-call-released", &pending).len(), 1);
    assert_eq!(finished(&events, &expiring).len(), 1);
    assert_ids_consistent(&events);
}

#[tokio::test]
async fn a_damaged_archive_or_a_newer_manifest_is_refused_and_restores_nothing() {
    let before = TestApp::start().await;
    let rt = before.runtime("acme").await;
    open_approval(&rt).await;
    before.wait_idle().await;
    let dir = tempfile::tempdir().expect("tmp");
    let saved = dir.path().join("backup");
    let saved_str = saved.to_str().expect("utf-8 path");
    expect_ok(
        "backup",
        &holdpoint(&[
            "backup",
            "--nats-url",
            &before.nats.url(),
            "--out",
            saved_str,
        ]),
    );
    // A second backup into the same directory is refused.
    let twice = holdpoint(&[
        "backup",
        "--nats-url",
        &before.nats.url(),
        "--out",
        saved_str,
    ]);
    assert!(!twice.status.success());

    let fresh = NatsServer::start().await;
    let archive = saved.join("KV_HP_STATE.snapshot");
    let original = std::fs::read(&archive).expect("archive");
    let mut damaged = original.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    std::fs::write(&archive, &damaged).expect("damage");
    let out = restore(&fresh.url(), &saved);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checksum"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&archive, &original).expect("repair");

    let manifest_path = saved.join("holdpoint-backup.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).expect("manifest")).expect("json");
    manifest["format"] = json!(99);
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let out = restore(&fresh.url(), &saved);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("format is 99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Nothing was written: the target has no stream.
    let js = async_nats::jetstream::new(fresh.connect().await);
    let names: Vec<String> = futures::StreamExt::collect::<Vec<_>>(js.stream_names())
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("stream names");
    assert!(names.is_empty(), "{names:?}");
}

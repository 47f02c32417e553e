//! A nats-server whose store fills up (RELIABILITY.md, "A full disk"): its store is
//! a 48 MiB tmpfs the test mounts itself; once answers flow, a ballast file takes
//! every byte left. Answers then get `503 NRY-0050` with `Retry-After` within their
//! bound, and nothing is half-written: each interaction answered meanwhile is still
//! pending, or resolved with every effect. When the ballast goes the answers, retried
//! with the same keys, resolve once each, with their effects once.
//!
//! nats-server's part: a write that fails with `ENOSPC` makes it disable JetStream
//! ("JetStream out of File resources, will be DISABLED"), and it stays disabled
//! after space returns, until the server restarts; the test restarts it then (the
//! operator's step, documented) and the ingress and worker recover by themselves.
//!
//! Needs root (mount); fails with the reason otherwise, unless `HOLDPOINT_SKIP_LAB=1`
//! (ops/test.sh then leaves it out and says so).

use std::io::Write as _;
use std::time::{Duration, Instant};

use holdpoint_domain::State;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::chaos;
use holdpoint_tests::lab;
use holdpoint_tests::load::TargetKind;
use holdpoint_tests::nats::{NatsServer, NatsServerOptions, wait_for};

/// Unmounts on drop.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = lab::run("umount", &["-l", &self.0.display().to_string()]);
    }
}

/// Fills the filesystem of `dir` with one file until a write fails (ENOSPC).
fn fill(path: &std::path::Path) -> u64 {
    let mut f = std::fs::File::create(path).expect("ballast");
    let chunk = vec![0u8; 256 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    let _ = f.sync_all();
    written
}

#[tokio::test]
async fn a_full_store_answers_503_changes_nothing_half_way_and_recovers() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "NOT RUN: mounting the small store needs root. HOLDPOINT_SKIP_LAB=1 leaves this test out"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).expect("mkdir");
    lab::run(
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=48m",
            "hpl-store",
            &store.display().to_string(),
        ],
    )
    .expect("mount a tmpfs");
    let _mount = Mount(store.clone());
    let nats = NatsServer::start_with(
        NatsServerOptions::default()
            .store_dir(store.join("js"))
            .sync_always(true),
    )
    .await;
    let outcome_timeout = Duration::from_secs(3);
    let app = TestApp::start_on(
        nats,
        AppOptions {
            workers: 1,
            outcome_timeout,
            ..AppOptions::default()
        },
    )
    .await;
    let mut targets = chaos::open_targets(&app, "acme", 10, 10, 8)
        .await
        .expect("open");
    let late = targets.split_off(10);
    let person = app.person("acme", "pat");
    for t in &targets {
        let r = person
            .post_keyed(&t.path(), &format!("k-{}", t.id), &t.body(1))
            .await;
        assert_eq!(r.status, 204, "{}: {r:?}", t.id);
    }

    // The disk fills.
    let ballast = store.join("ballast");
    let filled = fill(&ballast);
    println!("ballast: {filled} bytes");
    let bound = outcome_timeout + Duration::from_millis(1500);
    let mut statuses = Vec::new();
    for t in &late {
        let sent = Instant::now();
        let r = person
            .post_keyed(&t.path(), &format!("k-{}", t.id), &t.body(2))
            .await;
        let took = sent.elapsed();
        assert!(
            took <= bound,
            "{}: answered after {took:?} (bound {bound:?})",
            t.id
        );
        statuses.push(r.status);
        if r.status != 204 {
            assert_eq!(
                (r.status, r.code(), r.retry_after.as_deref()),
                (503, "NRY-0050", Some("1")),
                "{}: with the store full",
                t.id
            );
        }
    }
    let refused = statuses.iter().filter(|s| **s == 503).count();
    println!(
        "with the store full: {refused} of {} answers 503",
        late.len()
    );
    assert!(
        refused > 0,
        "no answer was refused with the store full: {statuses:?}"
    );

    // Space returns. nats-server 2.15.1 keeps failing the writes of a stream whose
    // write hit ENOSPC (`nats_server_alone_keeps_failing_writes_after_space_returns`)
    // until it restarts: wait a while for a recovery by itself, then restart it (the
    // operator's step, RELIABILITY.md).
    std::fs::remove_file(&ballast).expect("remove the ballast");
    let mut app = app;
    let probe = &late[0];
    let alone = wait_until_2xx(&person, probe, Duration::from_secs(15)).await;
    println!("after space returned: the probe answered without a restart: {alone}");
    // A stream whose write hit ENOSPC stays failed until the server restarts, even
    // when another stream (the probe's) recovered: restart when the log says a
    // stream is in that state, or when nothing recovered.
    let log = app.nats.log_contents();
    if !alone || log.contains("critical write error") {
        assert!(
            log.contains("no space left on device"),
            "no 2xx 15 s after space returned, and the server logged no ENOSPC:\n{log}"
        );
        app.nats.restart().await;
    }
    // Every answer, retried with its key, resolves once; nothing was half-written.
    for t in &late {
        let r = wait_for(
            Duration::from_secs(60),
            "the answer after space returned",
            || {
                let person = person.clone();
                let (path, key, body) = (t.path(), format!("k-{}", t.id), t.body(2));
                async move {
                    let r = person.try_post_keyed(&path, &key, &body).await.ok()?;
                    (r.status != 503).then_some(r)
                }
            },
        )
        .await;
        assert_eq!(r.status, 204, "{}: {r:?}", t.id);
    }
    app.wait_decided().await;
    chaos::finish_released(&app, &targets)
        .await
        .expect("results");
    chaos::finish_released(&app, &late).await.expect("results");
    app.wait_decided().await;
    let events = app.events("acme").await;
    for t in targets.iter().chain(&late) {
        let record = app.interaction("acme", &t.id).await.expect("record");
        assert_eq!(record.state, State::Finished, "{}", t.id);
        let count = |name: &str| {
            events
                .iter()
                .filter(|e| e.subject == t.id && e.name() == name)
                .count()
        };
        assert_eq!(count("interaction-resolved"), 1, "{}", t.id);
        assert_eq!(count("tool-call-finished"), 1, "{}", t.id);
        if t.kind == TargetKind::Approval {
            assert!(count("tool-call-released") <= 1, "{}", t.id);
        }
    }
    let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "an event is stored twice");
}

/// Polls `t`'s answer (its own key) until it is not a 503, for up to `within`:
/// true when it then got a 2xx.
async fn wait_until_2xx(
    person: &holdpoint_tests::app::Person,
    t: &holdpoint_tests::load::Target,
    within: Duration,
) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Ok(r) = person
            .try_post_keyed(&t.path(), &format!("k-{}", t.id), &t.body(2))
            .await
            && r.status != 503
        {
            return (200..300).contains(&r.status);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// nats-server alone, no Holdpoint: a file-storage stream on a full filesystem
/// refuses a publish; once space returns, publishing to it still fails (the
/// store keeps the write error) until the server restarts. This pins the pinned
/// server's behaviour that RELIABILITY.md documents; if a release fixes it, this
/// test fails and the restart step can go.
#[tokio::test]
async fn nats_server_alone_keeps_failing_writes_after_space_returns() {
    use async_nats::jetstream::{self, stream};
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "NOT RUN: mounting the small store needs root. HOLDPOINT_SKIP_LAB=1 leaves this test out"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).expect("mkdir");
    lab::run(
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=16m",
            "hpl-store",
            &store.display().to_string(),
        ],
    )
    .expect("mount a tmpfs");
    let _mount = Mount(store.clone());
    let mut nats = NatsServer::start_with(
        NatsServerOptions::default()
            .store_dir(store.join("js"))
            .sync_always(true),
    )
    .await;
    let publish = |client: async_nats::Client, n: u32| async move {
        let js = jetstream::new(client);
        let body = format!("message {n} {}", "x".repeat(4096));
        let ack = js.publish("full.one", body.into()).await.ok()?;
        tokio::time::timeout(Duration::from_secs(5), ack)
            .await
            .ok()?
            .ok()
    };
    let client = nats.connect().await;
    jetstream::new(client.clone())
        .create_stream(stream::Config {
            name: "FULL".into(),
            subjects: vec!["full.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .expect("stream");
    assert!(
        publish(client.clone(), 0).await.is_some(),
        "a publish with space"
    );
    let ballast = store.join("ballast");
    fill(&ballast);
    // The pages already allocated take a few; then a write needs a new one.
    let mut refused_at = None;
    for n in 1..200 {
        if publish(client.clone(), n).await.is_none() {
            refused_at = Some(n);
            break;
        }
    }
    assert!(
        refused_at.is_some(),
        "200 publishes of 4 KiB taken with the disk full"
    );
    std::fs::remove_file(&ballast).expect("remove the ballast");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut after = Vec::new();
    for n in 200..203 {
        after.push(publish(client.clone(), n).await.is_some());
    }
    assert_eq!(
        after,
        [false, false, false],
        "nats-server took writes again after space returned, without a restart"
    );
    drop(client);
    nats.restart().await;
    let client = nats.connect().await;
    assert!(
        publish(client, 203).await.is_some(),
        "a publish after the restart"
    );
}

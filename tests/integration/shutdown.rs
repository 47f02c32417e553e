//! Graceful shutdown (README "Shutdown"): SIGTERM to `holdpoint ingress` and
//! `holdpoint worker` child processes while answers are in flight. Nothing may be
//! lost or half-done: every answer that got a 2xx is resolved with exactly one
//! `tool-call-finished`; every other one (an error, a 503, a connection failure)
//! resolves exactly once when retried with the same key against restarted
//! processes; and both processes exit 0 within a deadline.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use holdpoint_domain::{SessionMode, State};
use holdpoint_tests::app::{AppOptions, TestApp, holdpoint_binary};
use holdpoint_tests::nats::wait_for;

use crate::common::*;

/// A `holdpoint` child process and the addresses it printed.
struct Proc {
    child: Child,
    /// `http://…` of the API (ingress only).
    api: Option<String>,
    /// `http://…` of the admin listener.
    admin: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Starts `holdpoint <args>` and reads its stdout until the lines naming its
    /// listeners arrive (deadline 20 s). Stdout is drained until the process ends,
    /// so later prints never block or fail.
    fn start(args: &[String]) -> Proc {
        let mut child = Command::new(holdpoint_binary())
            .args(args)
            .env("RUST_LOG", "warn")
            .env_remove("HOLDPOINT_FAILPOINT")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn holdpoint");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let (mut api, mut admin) = (None, None);
        let wants_api = args.first().is_some_and(|a| a == "ingress");
        while admin.is_none() || (wants_api && api.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("holdpoint {args:?} printed no listener in time"));
            let url_after = |marker: &str| {
                line.split_once(marker)
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .map(|a| format!("http://{a}"))
            };
            if let Some(a) = url_after("api http://") {
                api = Some(a);
            }
            if let Some(a) = url_after("admin http://") {
                admin = Some(a);
            }
        }
        Proc {
            child,
            api,
            admin: admin.expect("admin"),
        }
    }

    fn ingress(app: &TestApp) -> Proc {
        Proc::start(&[
            "ingress".into(),
            "--nats-url".into(),
            app.nats.url(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
            "--insecure-dev-identity".into(),
            "--ack-wait-ms".into(),
            app.opts.topo.ack_wait.as_millis().to_string(),
            "--outcome-timeout-ms".into(),
            "3000".into(),
            "--log-format".into(),
            "json".into(),
        ])
    }

    fn worker(app: &TestApp) -> Proc {
        Proc::start(&[
            "worker".into(),
            "--nats-url".into(),
            app.nats.url(),
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
            "--ack-wait-ms".into(),
            app.opts.topo.ack_wait.as_millis().to_string(),
            "--consumer-poll-ms".into(),
            "200".into(),
        ])
    }

    fn sigterm(&self) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
    }

    /// Waits until the process exits (deadline `within`).
    async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let end = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < end,
                "holdpoint did not exit within {within:?} of SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_ready(&self, http: &reqwest::Client) {
        let url = format!("{}/readyz", self.admin);
        wait_for(Duration::from_secs(20), "readyz", || {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let r = http.get(&url).send().await.ok()?;
                (r.status().as_u16() == 200).then_some(())
            }
        })
        .await;
    }
}

/// What one answer got.
#[derive(Debug, Clone, PartialEq)]
enum Got {
    Status(u16),
    Transport(String),
}

async fn answer(http: &reqwest::Client, base: &str, question: &str, key: &str) -> Got {
    let r = http
        .post(format!("{base}/v1/questions/{question}/answer"))
        .header("X-Holdpoint-Org", "acme")
        .header("X-Holdpoint-Person", "ana")
        .header("Idempotency-Key", key)
        .json(&example_answer())
        .timeout(Duration::from_secs(15))
        .send()
        .await;
    match r {
        Ok(resp) => Got::Status(resp.status().as_u16()),
        Err(e) => Got::Transport(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_load_loses_nothing_and_exits_zero() {
    const QUESTIONS: usize = 48;
    const CLIENTS: usize = 8;
    let app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let http = reqwest::Client::new();
    let mut worker = Proc::worker(&app);
    let mut ingress = Proc::ingress(&app);
    worker.wait_ready(&http).await;
    ingress.wait_ready(&http).await;
    let base = ingress.api.clone().expect("api");

    let rt = app.runtime("acme").await;
    let mut questions = Vec::new();
    for _ in 0..QUESTIONS {
        questions.push(open_question(&rt, SessionMode::Blocking).await.1);
    }
    let keys: HashMap<String, String> = questions
        .iter()
        .map(|q| (q.clone(), format!("key-{q}")))
        .collect();

    // CLIENTS people answer their share one after another; SIGTERM goes to both
    // processes once a third of the answers are back, so the rest are in flight,
    // queued, or refused.
    let done = Arc::new(AtomicUsize::new(0));
    let notify = Arc::new(tokio::sync::Notify::new());
    // Answers sent before the signal that got their 204 after it: drained, not cut.
    let signalled = Arc::new(AtomicBool::new(false));
    let after_signal = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let mine: Vec<String> = questions.iter().skip(c).step_by(CLIENTS).cloned().collect();
        let (http, base, keys, done, notify) = (
            http.clone(),
            base.clone(),
            keys.clone(),
            done.clone(),
            notify.clone(),
        );
        let (signalled, after_signal) = (signalled.clone(), after_signal.clone());
        clients.spawn(async move {
            let mut got = Vec::new();
            for q in mine {
                let signalled_before = signalled.load(Ordering::SeqCst);
                let r = answer(&http, &base, &q, &keys[&q]).await;
                if !signalled_before && signalled.load(Ordering::SeqCst) && r == Got::Status(204) {
                    after_signal.fetch_add(1, Ordering::SeqCst);
                }
                got.push((q, r));
                done.fetch_add(1, Ordering::SeqCst);
                notify.notify_one();
            }
            got
        });
    }
    let third = tokio::time::timeout(Duration::from_secs(30), async {
        while done.load(Ordering::SeqCst) < QUESTIONS / 3 {
            notify.notified().await;
        }
    })
    .await;
    assert!(
        third.is_ok(),
        "a third of the answers did not come back in 30 s"
    );
    signalled.store(true, Ordering::SeqCst);
    ingress.sigterm();
    worker.sigterm();

    let mut first: HashMap<String, Got> = HashMap::new();
    while let Some(r) = clients.join_next().await {
        first.extend(r.expect("client"));
    }
    assert_eq!(first.len(), QUESTIONS);
    let ingress_exit = ingress.exit_status(Duration::from_secs(15)).await;
    let worker_exit = worker.exit_status(Duration::from_secs(15)).await;
    assert_eq!(ingress_exit.code(), Some(0), "ingress: {ingress_exit:?}");
    assert_eq!(worker_exit.code(), Some(0), "worker: {worker_exit:?}");
    let ok = first.values().filter(|g| **g == Got::Status(204)).count();
    let unavailable = first.values().filter(|g| **g == Got::Status(503)).count();
    eprintln!(
        "SIGTERM after {} answers: {ok} got 204 ({} of them in flight at the signal), \
         {unavailable} got 503, {} no answer",
        QUESTIONS / 3,
        after_signal.load(Ordering::SeqCst),
        QUESTIONS - ok - unavailable
    );
    assert!(ok >= QUESTIONS / 3, "{first:?}");
    // Anything else is a retryable answer or no answer at all, never a refusal.
    for (q, g) in &first {
        assert!(
            matches!(g, Got::Status(204) | Got::Status(503) | Got::Transport(_)),
            "{q}: {g:?}"
        );
    }

    // Restart both; retry every answer with its key until it is 204. An answer that
    // already got 204 gets 204 again and changes nothing.
    let mut worker = Proc::worker(&app);
    let mut ingress = Proc::ingress(&app);
    worker.wait_ready(&http).await;
    ingress.wait_ready(&http).await;
    let base = ingress.api.clone().expect("api");
    for q in &questions {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            match answer(&http, &base, q, &keys[q]).await {
                Got::Status(204) => break,
                Got::Status(503) | Got::Transport(_) if Instant::now() < end => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                g => panic!("{q}: retry answered {g:?} (first: {:?})", first[q]),
            }
        }
    }
    app.wait_idle().await;

    // Exactly once, whatever the first attempt got.
    let events = app.events("acme").await;
    assert_ids_consistent(&events);
    for q in &questions {
        assert_eq!(
            named(&events, "interaction-resolved", q).len(),
            1,
            "{q} (first: {:?})",
            first[q]
        );
        assert_eq!(finished(&events, q).len(), 1, "{q} (first: {:?})", first[q]);
        let record = app.interaction("acme", q).await.expect("stored");
        assert!(
            matches!(record.state, State::Resolved | State::Finished),
            "{q}: {:?}",
            record.state
        );
        let resolution = record.resolution.expect("resolved");
        assert_eq!(resolution.key.as_str(), keys[q].as_str(), "{q}");
    }

    // The restarted worker's metrics saw the retried answers; both stop cleanly again.
    let metrics = http
        .get(format!("{}/metrics", worker.admin))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    assert!(
        metrics.contains("holdpoint_consumer_pending "),
        "worker /metrics: {metrics}"
    );
    ingress.sigterm();
    worker.sigterm();
    assert_eq!(
        ingress.exit_status(Duration::from_secs(15)).await.code(),
        Some(0)
    );
    assert_eq!(
        worker.exit_status(Duration::from_secs(15)).await.code(),
        Some(0)
    );
}

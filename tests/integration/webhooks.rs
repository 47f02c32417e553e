//! Signed webhooks, against a real nats-server, the real ingress, the notifier
//! (in-process, or a `holdpoint notifier` child process that is SIGKILLed) and
//! local HTTP receivers:
//!
//! - deliveries are CloudEvents whose Standard Webhooks signature verifies with the
//!   reference Python library (`standardwebhooks`), also with either secret during a
//!   rotation's overlap, and not once the body is changed;
//! - 500s and timeouts are retried on the schedule, every attempt is recorded, and
//!   the endpoint is disabled at the limit with a `webhook-disabled` event; enabling
//!   it delivers what was kept;
//! - a notifier killed with `kill -9` mid-delivery loses nothing;
//! - a slow endpoint of one organisation does not delay another's;
//! - another organisation's events never reach an endpoint, and its endpoints can
//!   be neither seen nor changed;
//! - a redirect is not followed; a private address is refused, before sending.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use holdpoint_bus::Topology;
use holdpoint_domain::EventData;
use holdpoint_notifier::NotifierConfig;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::nats::{wait_for, workspace_root};
use serde_json::{Value, json};

use crate::common::*;

/// What a receiver answers.
#[derive(Debug, Clone)]
enum Answer {
    /// This status, at once.
    Status(u16),
    /// 200 after a pause.
    SlowOk(Duration),
    /// 302 to this URL.
    Redirect(String),
}

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Got {
    /// The request's path and query, as the receiver read them.
    target: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Got {
    fn id(&self) -> &str {
        self.headers.get("webhook-id").map_or("", String::as_str)
    }
    fn event(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Clone, Default)]
struct Log {
    /// Every request, at arrival.
    arrived: Arc<Mutex<Vec<Got>>>,
    /// The ids answered 2xx (recorded after the answer's pause, so a request whose
    /// connection died before it is not here).
    answered: Arc<Mutex<Vec<String>>>,
    answer: Arc<Mutex<Vec<Answer>>>,
}

/// A local HTTP receiver; answers with the front of its answer list (the last one
/// repeats).
struct Receiver {
    addr: SocketAddr,
    log: Log,
}

impl Receiver {
    async fn start(answers: Vec<Answer>) -> Receiver {
        let log = Log {
            answer: Arc::new(Mutex::new(answers)),
            ..Log::default()
        };
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind receiver");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, log }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn set(&self, answers: Vec<Answer>) {
        *self.log.answer.lock().expect("lock") = answers;
    }

    fn arrived(&self) -> Vec<Got> {
        self.log.arrived.lock().expect("lock").clone()
    }

    fn answered(&self) -> Vec<String> {
        self.log.answered.lock().expect("lock").clone()
    }
}

async fn receive(
    State(log): State<Log>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let got = Got {
        target: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let id = got.id().to_owned();
    log.arrived.lock().expect("lock").push(got);
    let answer = {
        let mut a = log.answer.lock().expect("lock");
        if a.len() > 1 {
            a.remove(0)
        } else {
            a[0].clone()
        }
    };
    match answer {
        Answer::Status(s) => {
            let status = StatusCode::from_u16(s).expect("status");
            if status.is_success() {
                log.answered.lock().expect("lock").push(id);
            }
            (status, format!("answer {s}")).into_response()
        }
        Answer::SlowOk(d) => {
            tokio::time::sleep(d).await;
            log.answered.lock().expect("lock").push(id);
            (StatusCode::OK, "ok").into_response()
        }
        Answer::Redirect(to) => (StatusCode::FOUND, [("location", to)], "moved").into_response(),
    }
}

/// A notifier configuration for tests: local mode, short schedule.
fn quick(schedule_ms: &[u64], disable_after: u32, timeout: Duration) -> NotifierConfig {
    NotifierConfig {
        local_mode: true,
        timeout,
        schedule: schedule_ms
            .iter()
            .copied()
            .map(Duration::from_millis)
            .collect(),
        disable_after,
        reconcile: Duration::from_millis(100),
        ..NotifierConfig::default()
    }
}

async fn app_with(ack_wait: Duration, local: bool) -> TestApp {
    TestApp::start_with(AppOptions {
        topo: Topology {
            ack_wait: Duration::from_secs(2),
            webhook_ack_wait: ack_wait,
            ..Topology::default()
        },
        webhooks_local: local,
        ..AppOptions::default()
    })
    .await
}

/// Registers `url` for `org` wanting `types`; returns (id, secret).
async fn register(app: &TestApp, org: &str, url: &str, types: &[&str]) -> (String, String) {
    let r = app
        .person(org, "ops")
        .post(
            "/v1/webhooks",
            &json!({"url": url, "eventTypes": types, "description": "test"}),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let id = r.body["id"].as_str().expect("id").to_owned();
    let secret = r.body["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    (id, secret)
}

async fn arrivals(rx: &Receiver, n: usize, what: &str) -> Vec<Got> {
    wait_for(Duration::from_secs(30), what, || {
        let got = rx.arrived();
        async move { (got.len() >= n).then_some(got) }
    })
    .await
}

async fn attempts(app: &TestApp, org: &str, id: &str) -> Vec<Value> {
    let r = app
        .person(org, "ops")
        .get(&format!("/v1/webhooks/{id}/attempts"))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.body["items"].as_array().cloned().unwrap_or_default()
}

/// Runs the Standard Webhooks reference verifier (Python) on `got` with `secret`.
fn verify_with_python(secret: &str, headers: &HashMap<String, String>, body: &str) -> bool {
    let python = std::env::var("HOLDPOINT_WEBHOOK_PYTHON")
        .or_else(|_| std::env::var("HOLDPOINT_A2A_PYTHON"))
        .expect(
            "HOLDPOINT_WEBHOOK_PYTHON or HOLDPOINT_A2A_PYTHON must name a python with the \
             `standardwebhooks` package (ops/test.sh installs it)",
        );
    let input = json!({
        "headers": {
            "webhook-id": headers.get("webhook-id"),
            "webhook-timestamp": headers.get("webhook-timestamp"),
            "webhook-signature": headers.get("webhook-signature"),
        },
        "body": body,
    });
    let mut child = std::process::Command::new(python)
        .arg(workspace_root().join("tests/python/verify_webhook.py"))
        .arg(secret)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("run the python verifier");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.to_string().as_bytes())
            .expect("write to the verifier");
    }
    let out = child.wait_with_output().expect("verifier output");
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        assert_eq!(
            text.trim(),
            headers["webhook-id"],
            "the verified event's id"
        );
        true
    } else {
        assert!(
            text.contains("invalid"),
            "the verifier failed otherwise: {text}"
        );
        false
    }
}

#[tokio::test]
async fn deliveries_are_signed_cloudevents_that_verify_and_rotation_overlaps() {
    let mut app = app_with(Duration::from_secs(5), true).await;
    let metrics = Arc::new(holdpoint_telemetry::Metrics::new());
    app.start_notifier(NotifierConfig {
        metrics: metrics.clone(),
        ..quick(&[100], 10, Duration::from_secs(5))
    })
    .await;
    let rx = Receiver::start(vec![Answer::Status(204)]).await;
    let (id, secret) = register(&app, "acme", &rx.url(), &["approval-requested"]).await;
    // The secret is shown once: not in the list nor the endpoint.
    let listed = app.person("acme", "ops").get("/v1/webhooks").await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1));
    assert!(!listed.body.to_string().contains(&secret));

    let rt = app.runtime("acme").await;
    let (_, effect) = open_approval(&rt).await;
    let got = arrivals(&rx, 1, "the approval-requested delivery").await;
    let first = &got[0];
    let event = first.event();
    assert_eq!(event["type"], "dev.holdpoint.approval-requested");
    assert_eq!(event["specversion"], "1.0");
    assert_eq!(event["data"]["interactionId"], effect.as_str());
    assert_eq!(first.id(), event["id"].as_str().expect("id"));
    assert_eq!(
        first.headers.get("content-type").map(String::as_str),
        Some("application/cloudevents+json")
    );
    assert!(!first.headers.contains_key("authorization"));
    assert!(!first.headers.contains_key("cookie"));
    assert!(verify_with_python(&secret, &first.headers, &first.body));
    // Changed by one byte, it no longer verifies.
    let tampered = first.body.replacen("approval", "apprOval", 1);
    assert!(!verify_with_python(&secret, &first.headers, &tampered));
    // Only the wanted type: the session-opened before it was not sent.
    assert!(
        got.iter()
            .all(|g| g.event()["type"] == "dev.holdpoint.approval-requested")
    );

    // Rotation: both secrets sign during the overlap.
    let r = app
        .person("acme", "ops")
        .post(
            &format!("/v1/webhooks/{id}/rotate"),
            &json!({"overlapSecs": 3600}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let new_secret = r.body["secret"].as_str().expect("secret").to_owned();
    assert_ne!(new_secret, secret);
    assert!(r.body["previousSecretExpiresAt"].is_string());
    let t = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!(t.status, 202, "{t:?}");
    let test_id = t.body["eventId"].as_str().expect("eventId").to_owned();
    let got = arrivals(&rx, 2, "the test delivery").await;
    let test = got
        .iter()
        .find(|g| g.id() == test_id)
        .expect("test delivered");
    assert_eq!(test.event()["type"], "dev.holdpoint.webhook-test");
    assert_eq!(
        test.headers["webhook-signature"].split(' ').count(),
        2,
        "one signature per live secret"
    );
    assert!(verify_with_python(&secret, &test.headers, &test.body));
    assert!(verify_with_python(&new_secret, &test.headers, &test.body));
    // Without overlap the old secret stops at once.
    let r = app
        .person("acme", "ops")
        .post(
            &format!("/v1/webhooks/{id}/rotate"),
            &json!({"overlapSecs": 0}),
        )
        .await;
    let newest = r.body["secret"].as_str().expect("secret").to_owned();
    let t = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    let test_id = t.body["eventId"].as_str().expect("eventId").to_owned();
    let got = arrivals(&rx, 3, "the second test delivery").await;
    let test = got
        .iter()
        .find(|g| g.id() == test_id)
        .expect("test delivered");
    assert!(verify_with_python(&newest, &test.headers, &test.body));
    assert!(!verify_with_python(&new_secret, &test.headers, &test.body));

    // Every attempt is recorded, delivered, with its status and latency.
    let recorded = attempts(&app, "acme", &id).await;
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert!(
        recorded
            .iter()
            .all(|a| a["result"] == "delivered" && a["status"] == 204)
    );
    // Metrics per endpoint.
    let text = metrics.encode();
    let line = format!(
        "holdpoint_webhook_attempts_total{{org=\"acme\",webhook=\"{id}\",result=\"delivered\"}} 3"
    );
    assert!(text.contains(&line), "{line} not in\n{text}");
    assert!(text.contains(&format!(
        "holdpoint_webhook_latency_seconds_count{{org=\"acme\",webhook=\"{id}\"}} 3"
    )));
}

#[tokio::test]
async fn failures_are_retried_on_the_schedule_and_the_endpoint_is_disabled_at_the_limit() {
    let mut app = app_with(Duration::from_secs(5), true).await;
    let schedule = [300, 600, 900, 900, 900];
    app.start_notifier(quick(&schedule, 4, Duration::from_secs(1)))
        .await;
    // A timeout, then 500s.
    let rx = Receiver::start(vec![
        Answer::SlowOk(Duration::from_secs(3)),
        Answer::Status(500),
    ])
    .await;
    let (id, _) = register(&app, "acme", &rx.url(), &[]).await;
    let t = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!(t.status, 202, "{t:?}");
    let event_id = t.body["eventId"].as_str().expect("eventId").to_owned();
    let view = wait_for(
        Duration::from_secs(30),
        "the endpoint to be disabled",
        || {
            let p = app.person("acme", "ops");
            let id = id.clone();
            async move {
                let r = p.get(&format!("/v1/webhooks/{id}")).await;
                (r.body["disabled"] == true).then_some(r.body)
            }
        },
    )
    .await;
    assert_eq!(view["consecutiveFailures"], 4);
    let recorded = attempts(&app, "acme", &id).await;
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    assert!(
        recorded[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("timed out")),
        "{:?}",
        recorded[0]
    );
    for (n, a) in recorded.iter().enumerate() {
        assert_eq!(a["attempt"], n as u64 + 1, "{a:?}");
        assert_eq!(a["eventId"], event_id.as_str());
        assert_eq!(a["result"], "failed");
    }
    for a in &recorded[1..] {
        assert_eq!(a["status"], 500, "{a:?}");
        assert_eq!(a["responseStart"], "answer 500");
    }
    // The gaps follow the schedule (JetStream redelivers after the NAK's delay).
    let at = |a: &Value| {
        holdpoint_domain::timestamp::parse(a["at"].as_str().expect("at")).expect("time")
    };
    for n in 1..recorded.len() {
        let gap = at(&recorded[n]) - at(&recorded[n - 1]);
        let min = time::Duration::milliseconds(i64::try_from(schedule[n - 1]).expect("ms") - 50);
        assert!(
            gap >= min,
            "attempt {} came {gap} after the one before",
            n + 1
        );
    }
    // The disabling is an event of the organisation.
    let disabled = wait_for(Duration::from_secs(10), "the webhook-disabled event", || {
        let app = &app;
        let id = id.clone();
        async move {
            app.events("acme").await.into_iter().find(|e| {
                matches!(&e.body, EventData::WebhookDisabled { webhook_id, .. } if webhook_id.as_str() == id)
            })
        }
    })
    .await;
    assert!(disabled.taskid.is_none());
    // Disabled: nothing more is tried, and a test is refused.
    let t = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!((t.status, t.code()), (409, "NRY-0043"), "{t:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.arrived().len(), 4, "a disabled endpoint is not called");
    // Enabled again, the kept event is delivered.
    rx.set(vec![Answer::Status(200)]);
    let r = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/enable"), &json!({}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["disabled"], false);
    wait_for(
        Duration::from_secs(20),
        "the kept event to be delivered",
        || {
            let answered = rx.answered();
            let event_id = event_id.clone();
            async move { answered.contains(&event_id).then_some(()) }
        },
    )
    .await;
}

#[tokio::test]
async fn a_notifier_killed_mid_delivery_loses_nothing() {
    // `holdpoint notifier` child processes; ack_wait is the timeout + 2 s.
    let mut app = app_with(Duration::from_secs(3), true).await;
    let rx = Receiver::start(vec![Answer::SlowOk(Duration::from_millis(400))]).await;
    register(&app, "acme", &rx.url(), &["approval-requested"]).await;
    let args = [
        "--webhooks-local-mode",
        "--webhook-timeout-secs",
        "1",
        "--webhook-retry-schedule-secs",
        "1,1,1,1,1",
    ];
    let first = app.spawn_notifier_process(&args);
    let rt = app.runtime("acme").await;
    let mut effects = Vec::new();
    for _ in 0..6 {
        effects.push(open_approval(&rt).await.1);
    }
    // Kill it while a request is in flight (arrived, not answered yet).
    let in_flight: Vec<String> = wait_for(Duration::from_secs(30), "a request in flight", || {
        let answered: HashSet<String> = rx.answered().into_iter().collect();
        let arrived = rx.arrived();
        async move {
            let open: Vec<String> = arrived
                .iter()
                .map(|g| g.id().to_owned())
                .filter(|id| !answered.contains(id))
                .collect();
            (arrived.len() >= 2 && !open.is_empty()).then_some(open)
        }
    })
    .await;
    app.kill_process(first);
    app.spawn_notifier_process(&args);
    let delivered = wait_for(Duration::from_secs(60), "every event delivered", || {
        let answered: HashSet<String> = rx.answered().into_iter().collect();
        async move { (answered.len() >= 6).then_some(answered) }
    })
    .await;
    let delivered_effects: HashSet<String> = rx
        .arrived()
        .iter()
        .map(|g| {
            g.event()["data"]["interactionId"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    for e in &effects {
        assert!(delivered_effects.contains(e), "{e} was never delivered");
    }
    assert_eq!(delivered.len(), 6);
    for id in &in_flight {
        assert!(
            delivered.contains(id),
            "the request in flight at the kill ({id}) was sent again"
        );
    }
    // Only the request in flight at the kill may have been answered twice
    // (receivers deduplicate on webhook-id); no other 2xx delivery was repeated.
    let answered = rx.answered();
    let mut seen = HashSet::new();
    for id in &answered {
        if !seen.insert(id) {
            assert!(
                in_flight.contains(id),
                "{id} was delivered twice: {answered:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_slow_endpoint_does_not_delay_another_organisation() {
    let mut app = app_with(Duration::from_secs(20), true).await;
    app.start_notifier(quick(&[1000], 10, Duration::from_secs(15)))
        .await;
    let slow = Receiver::start(vec![Answer::SlowOk(Duration::from_secs(8))]).await;
    let fast = Receiver::start(vec![Answer::Status(200)]).await;
    register(&app, "slowco", &slow.url(), &["approval-requested"]).await;
    register(&app, "fastco", &fast.url(), &["approval-requested"]).await;
    let slow_rt = app.runtime("slowco").await;
    let fast_rt = app.runtime("fastco").await;
    for _ in 0..3 {
        open_approval(&slow_rt).await;
    }
    arrivals(&slow, 1, "the slow endpoint's first request").await;
    let started = Instant::now();
    let (_, effect) = open_approval(&fast_rt).await;
    let got = arrivals(&fast, 1, "the fast endpoint's delivery").await;
    let took = started.elapsed();
    assert_eq!(got[0].event()["data"]["interactionId"], effect.as_str());
    assert!(
        took < Duration::from_secs(4),
        "the fast endpoint waited {took:?}"
    );
    assert!(
        slow.answered().is_empty(),
        "the slow endpoint was still busy"
    );
}

#[tokio::test]
async fn another_organisations_events_and_endpoints_stay_apart() {
    let mut app = app_with(Duration::from_secs(5), true).await;
    app.start_notifier(quick(&[200], 10, Duration::from_secs(5)))
        .await;
    let rx = Receiver::start(vec![Answer::Status(200)]).await;
    let (id, _) = register(&app, "acme", &rx.url(), &[]).await;
    let acme = app.runtime("acme").await;
    let globex = app.runtime("globex").await;
    open_approval(&globex).await;
    let (_, first) = open_approval(&acme).await;
    open_approval(&globex).await;
    let (_, second) = open_approval(&acme).await;
    wait_for(
        Duration::from_secs(30),
        "acme's second approval delivered",
        || {
            let got = rx.arrived();
            let second = second.clone();
            async move {
                got.iter()
                    .any(|g| g.event()["data"]["interactionId"] == second.as_str())
                    .then_some(())
            }
        },
    )
    .await;
    // The queue is in stream order: a globex event routed here would have come first.
    let got = rx.arrived();
    assert!(!got.is_empty());
    for g in &got {
        assert_eq!(g.event()["orgid"], "acme", "{}", g.body);
    }
    assert!(
        got.iter()
            .any(|g| g.event()["data"]["interactionId"] == first.as_str())
    );
    // globex can neither see nor touch acme's endpoint.
    let other = app.person("globex", "mallory");
    let list = other.get("/v1/webhooks").await;
    assert_eq!(list.body["items"], json!([]));
    for r in [
        other.get(&format!("/v1/webhooks/{id}")).await,
        other.get(&format!("/v1/webhooks/{id}/attempts")).await,
        other
            .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
            .await,
        other
            .post(&format!("/v1/webhooks/{id}/rotate"), &json!({}))
            .await,
        other
            .post(&format!("/v1/webhooks/{id}/enable"), &json!({}))
            .await,
        other.delete(&format!("/v1/webhooks/{id}")).await,
    ] {
        assert_eq!((r.status, r.code()), (404, "NRY-0004"), "{r:?}");
    }
    let mine = app
        .person("acme", "ops")
        .get(&format!("/v1/webhooks/{id}"))
        .await;
    assert_eq!(mine.status, 200);
    // Removing it stops deliveries.
    let r = app
        .person("acme", "ops")
        .delete(&format!("/v1/webhooks/{id}"))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = app
        .person("acme", "ops")
        .get(&format!("/v1/webhooks/{id}"))
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn registrations_are_checked() {
    let app = app_with(Duration::from_secs(5), false).await;
    let p = app.person("acme", "ops");
    for (body, code) in [
        (json!({"url": "http://127.0.0.1:9/hook"}), "NRY-0040"),
        (json!({"url": "http://hooks.example.com/hook"}), "NRY-0040"),
        (json!({"url": "https://10.0.0.7/hook"}), "NRY-0040"),
        (json!({"url": "https://169.254.169.254/latest"}), "NRY-0040"),
        (
            json!({"url": "https://user:pw@hooks.example.com/"}),
            "NRY-0040",
        ),
        (
            json!({"url": "https://hooks.example.com/", "eventTypes": ["nope"]}),
            "NRY-0041",
        ),
        (
            json!({"url": "https://hooks.example.com/", "extra": 1}),
            "NRY-0001",
        ),
        (json!({"eventTypes": []}), "NRY-0001"),
    ] {
        let r = p.post("/v1/webhooks", &body).await;
        assert_eq!((r.status, r.code()), (400, code), "{body} -> {r:?}");
    }
    assert_eq!(p.get("/v1/webhooks").await.body["items"], json!([]));
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_a_private_address_is_refused() {
    // Local mode: loopback receivers, redirects still never followed.
    let mut app = app_with(Duration::from_secs(5), true).await;
    app.start_notifier(quick(&[60_000], 10, Duration::from_secs(5)))
        .await;
    let target = Receiver::start(vec![Answer::Status(200)]).await;
    let redirecting = Receiver::start(vec![Answer::Redirect(target.url())]).await;
    let (id, _) = register(&app, "acme", &redirecting.url(), &[]).await;
    let t = app
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!(t.status, 202);
    let recorded = wait_for(Duration::from_secs(20), "the redirect attempt", || {
        let app = &app;
        let id = id.clone();
        async move {
            let a = attempts(app, "acme", &id).await;
            (!a.is_empty()).then_some(a)
        }
    })
    .await;
    assert_eq!(recorded[0]["status"], 302);
    assert_eq!(recorded[0]["result"], "failed");
    assert_eq!(recorded[0]["error"], "redirect not followed");
    assert!(target.arrived().is_empty(), "the redirect was followed");

    // Outside local mode: a host that resolves to loopback is refused before any
    // byte is sent.
    let mut strict = app_with(Duration::from_secs(5), false).await;
    strict
        .start_notifier(NotifierConfig {
            local_mode: false,
            ..quick(&[60_000], 10, Duration::from_secs(5))
        })
        .await;
    let victim = Receiver::start(vec![Answer::Status(200)]).await;
    let url = format!("https://localhost:{}/hook", victim.addr.port());
    let (id, _) = register(&strict, "acme", &url, &[]).await;
    let t = strict
        .person("acme", "ops")
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!(t.status, 202);
    let recorded = wait_for(Duration::from_secs(20), "the refused attempt", || {
        let app = &strict;
        let id = id.clone();
        async move {
            let a = attempts(app, "acme", &id).await;
            (!a.is_empty()).then_some(a)
        }
    })
    .await;
    assert_eq!(recorded[0]["result"], "refused", "{:?}", recorded[0]);
    assert!(recorded[0]["status"].is_null());
    assert!(
        recorded[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("loopback")),
        "{:?}",
        recorded[0]
    );
    assert!(victim.arrived().is_empty(), "a private address was called");
}

#[tokio::test]
async fn a_url_with_a_control_character_is_refused_and_the_url_shown_is_the_one_called() {
    let mut app = app_with(Duration::from_secs(5), true).await;
    app.start_notifier(quick(&[60_000], 10, Duration::from_secs(5)))
        .await;
    let rx = Receiver::start(vec![Answer::Status(200)]).await;
    let base = format!("http://127.0.0.1:{}", rx.addr.port());
    let ops = app.person("acme", "ops");
    for bad in [
        format!("{base}/a\0b"),
        format!("{base}/a\r\nX-Injected: 1"),
        format!("{base}/\u{1b}[31m"),
        format!("{base}/a\u{7f}"),
        format!("http://127.0.0.\t1:{}/hook", rx.addr.port()),
        format!("http://local%0ahost:{}/hook", rx.addr.port()),
        format!("{base}/a\tb"),
        String::new(),
    ] {
        let r = ops.post("/v1/webhooks", &json!({ "url": bad })).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0040"), "{bad:?}: {r:?}");
    }
    let r = ops.get("/v1/webhooks").await;
    assert_eq!(r.body["items"], json!([]), "nothing was written: {r:?}");

    // A URL the parser writes otherwise is kept as it will be called: the answer,
    // GET and the request the receiver gets all show the same URL.
    let sent = format!("http://LocalHost:{}/a b/%7e?q=1 2", rx.addr.port());
    let called = format!("http://localhost:{}/a%20b/%7e?q=1%202", rx.addr.port());
    let r = ops.post("/v1/webhooks", &json!({ "url": sent })).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.body["url"], called.as_str());
    let id = r.body["id"].as_str().expect("id").to_owned();
    let shown = ops.get(&format!("/v1/webhooks/{id}")).await;
    assert_eq!(shown.body["url"], called.as_str(), "{shown:?}");
    let t = ops
        .post(&format!("/v1/webhooks/{id}/test"), &json!({}))
        .await;
    assert_eq!(t.status, 202, "{t:?}");
    let got = arrivals(&rx, 1, "the test delivery").await;
    assert_eq!(
        format!("http://localhost:{}{}", rx.addr.port(), got[0].target),
        called
    );
}

/// An endpoint that wants only `interaction-escalated` gets the escalation
/// (README "Escalation"), once, and nothing else of the interaction.
#[tokio::test]
async fn an_escalation_is_delivered_to_an_endpoint_that_wants_it() {
    let mut app = TestApp::start_with(AppOptions {
        deadlines: holdpoint_domain::Deadlines {
            warning: Some(Duration::from_secs(18)),
            ..Default::default()
        },
        webhooks_local: true,
        ..AppOptions::default()
    })
    .await;
    app.start_notifier(quick(&[100], 10, Duration::from_secs(5)))
        .await;
    let rx = Receiver::start(vec![Answer::Status(204)]).await;
    register(&app, "acme", &rx.url(), &["interaction-escalated"]).await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, holdpoint_domain::SessionMode::Blocking).await;
    let at = placement(&session)
        .assigned_to(holdpoint_domain::Assignees::of(&["ana"], &[]).expect("a"))
        .escalate_to(holdpoint_domain::Assignees::of(&[], &["oncall"]).expect("e"))
        .with_expiry(holdpoint_client::Expiry {
            expires_in: Some(20),
            ..Default::default()
        });
    let eff = hold_call(&rt, &at, "deploy", json!({}), None).await;
    let got = arrivals(&rx, 1, "the escalation's delivery").await;
    let event = got[0].event();
    assert_eq!(event["type"], "dev.holdpoint.interaction-escalated");
    assert_eq!(event["data"]["interactionId"], eff.as_str());
    assert_eq!(event["data"]["escalation"], json!({"groups": ["oncall"]}));
    assert_eq!(
        event["data"]["assignees"],
        json!({"people": ["ana"], "groups": ["oncall"]})
    );
    // Nothing else: the endpoint's filter leaves out every other event. An
    // endpoint wanting the resolution is the barrier: once it has it, the
    // notifier has routed every earlier event.
    let barrier = Receiver::start(vec![Answer::Status(204)]).await;
    register(&app, "acme", &barrier.url(), &["interaction-resolved"]).await;
    let r = app
        .person("acme", "olga")
        .with_groups("oncall")
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    arrivals(&barrier, 1, "the resolution's delivery").await;
    let got = rx.arrived();
    assert_eq!(got.len(), 1, "{got:?}");
}

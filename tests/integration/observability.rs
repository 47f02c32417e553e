//! Observability (README "Observability"): the admin listener's `/metrics`, `/healthz` and
//! `/readyz`, and the W3C trace context from an HTTP request through the command's
//! NATS headers to the events the worker publishes.
//!
//! Each test runs its own ingress, worker and admin listener in-process on one
//! [`Metrics`], so every count is this test's alone and can be compared exactly.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer;
use futures::StreamExt as _;
use holdpoint_bus::TRACEPARENT_HEADER;
use holdpoint_domain::{Command, CommandEnvelope, Event, OrgId, SessionId, SessionMode};
use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
use holdpoint_ingress::{AppState, IdentityMode, IngressConfig};
use holdpoint_telemetry::{Metrics, TraceContext};
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::jwt::{AUDIENCE, ISSUER, JwksServer, TestKey, claims};
use holdpoint_tests::nats::wait_for;
use holdpoint_worker::WorkerConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::*;

/// An ingress (API and admin listener) and a worker sharing one [`Metrics`].
struct Stack {
    base: String,
    admin: String,
    metrics: Arc<Metrics>,
    http: reqwest::Client,
    shutdown: CancellationToken,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Stack {
    async fn start(app: &TestApp, identity: IdentityMode) -> Stack {
        let metrics = Arc::new(Metrics::new());
        let shutdown = CancellationToken::new();
        let state = AppState::new(
            app.bus.clone(),
            IngressConfig {
                identity,
                metrics: metrics.clone(),
                ..IngressConfig::default()
            },
        )
        .await
        .expect("ingress state");
        let (base, admin_base) = holdpoint_tests::app::serve_ingress(state, &shutdown).await;
        tokio::spawn(holdpoint_worker::run(
            app.bus.clone(),
            WorkerConfig {
                metrics: metrics.clone(),
                ..WorkerConfig::default()
            },
            shutdown.clone(),
        ));
        Stack {
            base,
            admin: admin_base,
            metrics,
            http: reqwest::Client::new(),
            shutdown,
        }
    }

    /// POST with the development identity of ana@acme, an idempotency key and
    /// optional extra headers; returns the status.
    async fn post(
        &self,
        path: &str,
        key: &str,
        body: serde_json::Value,
        extra: &[(&str, &str)],
    ) -> u16 {
        let mut r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("X-Holdpoint-Org", "acme")
            .header("X-Holdpoint-Person", "ana")
            .header("Idempotency-Key", key)
            .json(&body);
        for (k, v) in extra {
            r = r.header(*k, *v);
        }
        r.send().await.expect("http").status().as_u16()
    }

    async fn scrape(&self) -> String {
        let resp = self
            .http
            .get(format!("{}/metrics", self.admin))
            .send()
            .await
            .expect("scrape");
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some(holdpoint_telemetry::metrics::CONTENT_TYPE)
        );
        resp.text().await.expect("body")
    }
}

/// The value of the sample line `name` (the whole series, labels included).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

#[tokio::test]
async fn metrics_count_requests_answers_commands_and_jwks_fetches() {
    let app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let key = TestKey::ed25519("k1");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let mut auth = AuthConfig::new(ISSUER, JwksSource::Url(jwks.url.clone()));
    auth.audience = Some(AUDIENCE.into());
    let verifier = Verifier::new(auth).await.expect("verifier");
    let stack = Stack::start(
        &app,
        IdentityMode {
            jwt: Some(verifier),
            insecure_dev_headers: true,
            ..IdentityMode::default()
        },
    )
    .await;
    let rt = app.runtime("acme").await;
    let (_, a) = open_approval(&rt).await;
    let (_, b) = open_approval(&rt).await;

    let yes = json!({"approved": true});
    let approve = |id: &str| format!("/v1/interactions/{id}/approve");
    assert_eq!(stack.post(&approve(&a), "k1", yes.clone(), &[]).await, 204);
    assert_eq!(stack.post(&approve(&a), "k2", yes.clone(), &[]).await, 409);
    let token = key.sign(&claims("acme", "bob"));
    let bearer = format!("Bearer {token}");
    let status = stack
        .http
        .post(format!("{}{}", stack.base, approve(&b)))
        .header("Authorization", &bearer)
        .json(&yes)
        .send()
        .await
        .expect("http")
        .status();
    assert_eq!(status.as_u16(), 204);
    let got = stack
        .http
        .get(format!("{}/v1/interactions/{a}", stack.base))
        .header("Authorization", &bearer)
        .send()
        .await
        .expect("http")
        .status();
    assert_eq!(got.as_u16(), 200);
    let missing = stack
        .http
        .get(format!("{}/v1/no-such-route", stack.base))
        .header("Authorization", &bearer)
        .send()
        .await
        .expect("http")
        .status();
    assert_eq!(missing.as_u16(), 404);

    // Every count below is complete once the answers above came back: the worker
    // counts a command before it replies, the ingress a request before it answers.
    let text = stack.scrape().await;
    let approve_route = "route=\"/v1/interactions/{id}/approve\"";
    for (series, want) in [
        (
            format!("holdpoint_http_requests_total{{{approve_route},method=\"POST\",status=\"204\"}}"),
            2.0,
        ),
        (
            format!("holdpoint_http_requests_total{{{approve_route},method=\"POST\",status=\"409\"}}"),
            1.0,
        ),
        (
            "holdpoint_http_requests_total{route=\"/v1/interactions/{id}\",method=\"GET\",status=\"200\"}".to_owned(),
            1.0,
        ),
        (format!("holdpoint_answer_duration_seconds_count{{{approve_route}}}"), 3.0),
        (
            "holdpoint_commands_total{verb=\"session-open\",outcome=\"ok\"}".to_owned(),
            2.0,
        ),
        ("holdpoint_commands_total{verb=\"open\",outcome=\"ok\"}".to_owned(), 2.0),
        ("holdpoint_commands_total{verb=\"answer\",outcome=\"ok\"}".to_owned(), 2.0),
        (
            "holdpoint_commands_total{verb=\"answer\",outcome=\"NRY-0009\"}".to_owned(),
            1.0,
        ),
        ("holdpoint_command_redeliveries_total".to_owned(), 0.0),
        ("holdpoint_revision_conflicts_total".to_owned(), 0.0),
        ("holdpoint_jwks_fetches_total".to_owned(), jwks.fetches() as f64),
    ] {
        assert_eq!(sample(&text, &series), Some(want), "{series} in\n{text}");
    }
    assert_eq!(
        jwks.fetches(),
        1,
        "one fetch at start, the token's kid was known"
    );
    // The latency histogram's buckets are cumulative and end with every request.
    let inf = format!("holdpoint_answer_duration_seconds_bucket{{le=\"+Inf\",{approve_route}}}");
    assert_eq!(sample(&text, &inf), Some(3.0), "{text}");
    // Unmatched paths are not counted (no unbounded label values).
    assert!(!text.contains("no-such-route"), "{text}");
    assert_eq!(
        stack.metrics.encode().lines().count(),
        stack.scrape().await.lines().count()
    );

    // The admin probes.
    for (path, want) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let r = stack
            .http
            .get(format!("{}{path}", stack.admin))
            .send()
            .await
            .expect("probe");
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.text().await.expect("body"), want, "{path}");
    }
}

#[tokio::test]
async fn consumer_backlog_is_polled_into_the_gauges() {
    let app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    // No worker runs: the partition consumers exist, and three commands wait in them.
    let mut consumers = Vec::new();
    for p in 0..app.bus.topo.partitions {
        consumers.push(app.bus.partition_consumer(p).await.expect("consumer"));
    }
    let org = OrgId::parse("acme").expect("org");
    for i in 0..3 {
        let env = CommandEnvelope {
            org: org.clone(),
            command: Command::SessionOpen {
                session: SessionId::parse(format!("backlog-{i}")).expect("id"),
                mode: SessionMode::Blocking,
                lane_capacity: None,
            },
        };
        app.bus
            .publish_command(&env, &env.command_id(), Default::default())
            .await
            .expect("publish");
    }
    let metrics = Arc::new(Metrics::new());
    let stop = CancellationToken::new();
    tokio::spawn(holdpoint_worker::poll_backlog(
        app.bus.clone(),
        metrics.clone(),
        Duration::from_millis(50),
        stop.clone(),
    ));
    let gauges = |m: &Metrics| {
        let t = m.encode();
        (
            sample(&t, "holdpoint_consumer_pending"),
            sample(&t, "holdpoint_consumer_ack_pending"),
        )
    };
    wait_for(Duration::from_secs(10), "pending 3, ack-pending 0", || {
        let m = metrics.clone();
        async move { (gauges(&m) == (Some(3.0), Some(0.0))).then_some(()) }
    })
    .await;
    // Take one command and hold it without acking: it is ack-pending now.
    let mut c = None;
    for consumer in &mut consumers {
        if consumer.info().await.expect("info").num_pending > 0 {
            c = Some(consumer.clone());
            break;
        }
    }
    let mut c: consumer::PullConsumer = c.expect("a partition holds a command");
    let mut pulled = c
        .stream()
        .group(app.bus.topo.priority_group())
        .max_messages_per_batch(1)
        .messages()
        .await
        .expect("pull");
    let held = pulled.next().await.expect("one message").expect("message");
    wait_for(Duration::from_secs(10), "pending 2, ack-pending 1", || {
        let m = metrics.clone();
        async move { (gauges(&m) == (Some(2.0), Some(1.0))).then_some(()) }
    })
    .await;
    assert_eq!(c.info().await.expect("info").num_ack_pending, 1);
    drop(held);
    stop.cancel();
}

/// Every event of `org` with its `traceparent` NATS header.
async fn events_with_trace(app: &TestApp, org: &str) -> Vec<(Event, Option<String>)> {
    let org = OrgId::parse(org).expect("org");
    let stream = app
        .bus
        .js
        .get_stream(app.bus.topo.events_stream())
        .await
        .expect("stream");
    let c: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: app.bus.topo.org_events_filter(&org),
            deliver_policy: consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut out = Vec::new();
    if c.cached_info().num_pending == 0 {
        return out;
    }
    let mut messages = c.messages().await.expect("messages");
    while let Some(m) = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("read timed out")
    {
        let m = m.expect("message");
        let trace = m
            .headers
            .as_ref()
            .and_then(|h| h.get(TRACEPARENT_HEADER))
            .map(|v| v.to_string());
        out.push((serde_json::from_slice(&m.payload).expect("event"), trace));
        if m.info().map(|i| i.pending).unwrap_or(0) == 0 {
            break;
        }
    }
    out
}

#[tokio::test]
async fn a_requests_traceparent_reaches_the_events_it_causes() {
    let app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let stack = Stack::start(&app, IdentityMode::insecure_dev_headers()).await;
    let rt = app.runtime("acme").await;
    let (_, traced) = open_approval(&rt).await;
    let (_, untraced) = open_approval(&rt).await;
    let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let theirs = TraceContext::parse(incoming).expect("valid");
    let yes = json!({"approved": true});
    assert_eq!(
        stack
            .post(
                &format!("/v1/interactions/{traced}/approve"),
                "t-1",
                yes.clone(),
                &[("traceparent", incoming)],
            )
            .await,
        204
    );
    assert_eq!(
        stack
            .post(
                &format!("/v1/interactions/{untraced}/approve"),
                "t-2",
                yes,
                &[]
            )
            .await,
        204
    );
    app.wait_idle().await;
    let events = events_with_trace(&app, "acme").await;
    let of = |id: &str, name: &str| -> Vec<TraceContext> {
        events
            .iter()
            .filter(|(e, _)| e.subject == id && e.name() == name)
            .map(|(e, t)| {
                let t = t
                    .as_deref()
                    .unwrap_or_else(|| panic!("{} has no traceparent", e.id));
                TraceContext::parse(t)
                    .unwrap_or_else(|| panic!("{} has a bad traceparent {t}", e.id))
            })
            .collect()
    };
    for name in ["interaction-resolved", "tool-call-released"] {
        let traced_ctx = of(&traced, name);
        assert_eq!(traced_ctx.len(), 1, "{name}");
        // The same trace, sent from the worker's span (not the caller's).
        assert_eq!(traced_ctx[0].trace_id, theirs.trace_id, "{name}");
        assert_ne!(traced_ctx[0].parent_id, theirs.parent_id, "{name}");
        // A request without one starts its own trace.
        let own = of(&untraced, name);
        assert_eq!(own.len(), 1, "{name}");
        assert_ne!(own[0].trace_id, theirs.trace_id, "{name}");
    }
    // The opening came from the runtime, not from the request: another trace.
    let opened = of(&traced, "approval-requested");
    assert_eq!(opened.len(), 1);
    assert_ne!(opened[0].trace_id, theirs.trace_id);
    // The resolution's task-status carries the request's trace too.
    assert!(
        events.iter().any(|(e, t)| e.name() == "task-status"
            && t.as_deref()
                .and_then(TraceContext::parse)
                .is_some_and(|c| c.trace_id == theirs.trace_id)),
        "no task-status in the request's trace"
    );
}

#[test]
fn the_grafana_dashboard_reads_only_metrics_that_exist() {
    let path = holdpoint_tests::nats::workspace_root().join("ops/grafana/holdpoint.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
    // Every family, with one sample each, as a scrape shows it.
    let m = Metrics::new();
    m.http_request("/v1/interactions", "GET", 200);
    m.answer_took("/v1/interactions/{id}/approve", 0.01);
    m.command("answer", "ok");
    let exposed = m.encode();
    let names: std::collections::BTreeSet<&str> = exposed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut used = std::collections::BTreeSet::new();
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("holdpoint_") {
                    assert!(
                        names.contains(word),
                        "{word} (panel {}) is not exposed: {names:?}",
                        p["title"]
                    );
                    used.insert(word.to_owned());
                }
            }
        }
    }
    // And every metric has a panel.
    for family in [
        "holdpoint_http_requests_total",
        "holdpoint_answer_duration_seconds_bucket",
        "holdpoint_commands_total",
        "holdpoint_command_redeliveries_total",
        "holdpoint_revision_conflicts_total",
        "holdpoint_consumer_pending",
        "holdpoint_consumer_ack_pending",
        "holdpoint_jwks_fetches_total",
    ] {
        assert!(used.contains(family), "no panel shows {family}");
    }
}

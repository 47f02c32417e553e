//! Holdpoint's Prometheus metrics.
//!
//! One [`Metrics`] per process (the CLI shares it between the ingress and the
//! worker of `holdpoint up`; each test makes its own, so values are exact). Label
//! values are `&'static str` and numbers, so counting a request allocates nothing;
//! counters are atomics. [`Metrics::encode`] renders the OpenMetrics text that the
//! admin listener's `/metrics` serves.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `holdpoint_http_requests_total` | counter | `route`, `method`, `status` | API requests by route template (`/v1/interactions/{id}/approve`) |
//! | `holdpoint_answer_duration_seconds` | histogram | `route` | time to answer an answer request (REST answer routes, `/a2a`) |
//! | `holdpoint_commands_total` | counter | `verb`, `outcome` | commands the worker finished: `ok`, the refusal's code (`NRY-0009`…), `retry` (NAKed), `dead_letter` |
//! | `holdpoint_command_redeliveries_total` | counter | | deliveries of a command after its first |
//! | `holdpoint_revision_conflicts_total` | counter | | KV compare-and-set writes lost to a concurrent writer (decided again) |
//! | `holdpoint_batch_commands` | histogram | | commands a worker decided together in one batch (group commit) |
//! | `holdpoint_commit_transitions` | histogram | | transitions stored by one atomic batch: a worker commits the groups its partition runners decided meanwhile together |
//! | `holdpoint_partitions_owned` | gauge | | command partitions this worker is pinned to |
//! | `holdpoint_consumer_pending` | gauge | | commands waiting in the partition consumers (polled) |
//! | `holdpoint_consumer_ack_pending` | gauge | | commands delivered and not yet acknowledged (polled) |
//! | `holdpoint_jwks_fetches_total` | counter | | JWKS fetches (or file reads) of the token verifier |
//! | `holdpoint_webhook_attempts_total` | counter | `org`, `webhook`, `result` | webhook delivery attempts: `delivered`, `failed`, `refused` (failures are the last two) |
//! | `holdpoint_webhook_latency_seconds` | histogram | `org`, `webhook` | time from sending a webhook request to the end of its (capped) response |
//! | `holdpoint_webhook_backlog` | gauge | `org`, `webhook` | deliveries waiting for an endpoint, queued or held for a retry (polled) |

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of `holdpoint_http_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route template (`/v1/interactions/{id}`), or `unmatched`.
    pub route: &'static str,
    /// The HTTP method (`GET`, `POST`, … or `other`).
    pub method: &'static str,
    /// The response status.
    pub status: u16,
}

/// Labels of `holdpoint_answer_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route template.
    pub route: &'static str,
}

/// Labels of `holdpoint_commands_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    /// The command's verb (`answer`, `open`, …).
    pub verb: &'static str,
    /// `ok`, the refusal's code (`NRY-0009`), `retry` or `dead_letter`.
    pub outcome: &'static str,
}

/// Labels of the per-endpoint webhook metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// The endpoint's organisation.
    pub org: String,
    /// The endpoint's id.
    pub webhook: String,
}

/// Labels of `holdpoint_webhook_attempts_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookAttemptLabels {
    /// The endpoint's organisation.
    pub org: String,
    /// The endpoint's id.
    pub webhook: String,
    /// `delivered`, `failed` or `refused`.
    pub result: &'static str,
}

/// Outcome label of a command that was NAKed to be redelivered.
pub const OUTCOME_RETRY: &str = "retry";
/// Outcome label of a command that was terminated with a `dead-letter` event.
pub const OUTCOME_DEAD_LETTER: &str = "dead_letter";
/// Outcome label of a command that succeeded.
pub const OUTCOME_OK: &str = "ok";

/// Something that counts its own JWKS fetches (the ingress's token verifier).
pub trait FetchCount: Send + Sync + 'static {
    /// Fetches so far.
    fn fetch_count(&self) -> u64;
}

/// Reads the JWKS fetch counts of the registered verifiers at scrape time.
#[derive(Default)]
struct JwksFetches {
    sources: Mutex<Vec<Box<dyn FetchCount>>>,
}

impl std::fmt::Debug for JwksFetches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksFetches").finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for JwksFetches {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let total: u64 = self
            .sources
            .lock()
            .map(|s| s.iter().map(|v| v.fetch_count()).sum())
            .unwrap_or(0);
        let counter = ConstCounter::new(total);
        let metric = encoder.encode_descriptor(
            "holdpoint_jwks_fetches",
            "JWKS fetches (or file reads) of the token verifier",
            None,
            counter.metric_type(),
        )?;
        counter.encode(metric)
    }
}

/// The metrics of one process; see the [module](self) for the list.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `holdpoint_http_requests_total`, counter by `route`, `method`, `status`: API requests by route template.
    pub http_requests: Family<HttpLabels, Counter>,
    /// `holdpoint_answer_duration_seconds`, histogram by `route`: time to answer a REST answer request, seconds (1 ms to 16 s buckets).
    pub answer_duration: Family<RouteLabels, Histogram>,
    /// `holdpoint_commands_total`, counter by `verb`, `outcome`: commands the worker finished (`ok`, the refusal's code, `retry`, `dead_letter`).
    pub commands: Family<CommandLabels, Counter>,
    /// `holdpoint_command_redeliveries_total`, counter: command deliveries after the first.
    pub redeliveries: Counter,
    /// `holdpoint_revision_conflicts_total`, counter: compare-and-set writes lost to a concurrent writer (decided again).
    pub revision_conflicts: Counter,
    /// `holdpoint_batch_commands`, histogram: commands per pulled batch.
    pub batch_commands: Histogram,
    /// `holdpoint_commit_transitions`, histogram: transitions per committed atomic batch (all of a worker's partitions).
    pub commit_transitions: Histogram,
    /// `holdpoint_partitions_owned`, gauge: command partitions this worker is pinned to.
    pub partitions_owned: Gauge,
    /// `holdpoint_consumer_pending`, gauge: commands waiting in the workers' consumers (polled).
    pub consumer_pending: Gauge,
    /// `holdpoint_consumer_ack_pending`, gauge: commands delivered and not yet acknowledged.
    pub consumer_ack_pending: Gauge,
    /// `holdpoint_webhook_attempts_total`, counter by `org`, `webhook`, `result`: webhook attempts (`delivered`, `failed`, `refused`).
    pub webhook_attempts: Family<WebhookAttemptLabels, Counter>,
    /// `holdpoint_webhook_latency_seconds`, histogram by `org`, `webhook`: seconds from sending a webhook request to the end of its (capped) answer.
    pub webhook_latency: Family<WebhookLabels, Histogram>,
    /// `holdpoint_webhook_backlog`, gauge by `org`, `webhook`: deliveries waiting for an endpoint, queued or held for a retry.
    pub webhook_backlog: Family<WebhookLabels, Gauge>,
    jwks: Arc<JwksFetches>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics in its own registry.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "holdpoint_http_requests",
            "API requests by route template, method and status",
            http_requests.clone(),
        );
        let answer_duration =
            Family::<RouteLabels, Histogram>::new_with_constructor(answer_histogram as fn() -> _);
        registry.register(
            "holdpoint_answer_duration_seconds",
            "Time to answer an answer request, in seconds",
            answer_duration.clone(),
        );
        let commands = Family::<CommandLabels, Counter>::default();
        registry.register(
            "holdpoint_commands",
            "Commands finished by the worker, by verb and outcome",
            commands.clone(),
        );
        let redeliveries = Counter::default();
        registry.register(
            "holdpoint_command_redeliveries",
            "Command deliveries after the first (crashes, lost acks, NAKs)",
            redeliveries.clone(),
        );
        let revision_conflicts = Counter::default();
        registry.register(
            "holdpoint_revision_conflicts",
            "KV compare-and-set writes lost to a concurrent writer, decided again",
            revision_conflicts.clone(),
        );
        let batch_commands = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        registry.register(
            "holdpoint_batch_commands",
            "Commands a worker decided together in one batch",
            batch_commands.clone(),
        );
        let commit_transitions = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        registry.register(
            "holdpoint_commit_transitions",
            "Transitions stored by one atomic batch of a worker",
            commit_transitions.clone(),
        );
        let partitions_owned = Gauge::default();
        registry.register(
            "holdpoint_partitions_owned",
            "Command partitions this worker is pinned to",
            partitions_owned.clone(),
        );
        let consumer_pending = Gauge::default();
        registry.register(
            "holdpoint_consumer_pending",
            "Commands waiting in the workers' consumer",
            consumer_pending.clone(),
        );
        let consumer_ack_pending = Gauge::default();
        registry.register(
            "holdpoint_consumer_ack_pending",
            "Commands delivered to workers and not yet acknowledged",
            consumer_ack_pending.clone(),
        );
        let webhook_attempts = Family::<WebhookAttemptLabels, Counter>::default();
        registry.register(
            "holdpoint_webhook_attempts",
            "Webhook delivery attempts by endpoint and result",
            webhook_attempts.clone(),
        );
        let webhook_latency =
            Family::<WebhookLabels, Histogram>::new_with_constructor(answer_histogram as fn() -> _);
        registry.register(
            "holdpoint_webhook_latency_seconds",
            "Time from sending a webhook request to the end of its response, in seconds",
            webhook_latency.clone(),
        );
        let webhook_backlog = Family::<WebhookLabels, Gauge>::default();
        registry.register(
            "holdpoint_webhook_backlog",
            "Webhook deliveries waiting for an endpoint (queued or held for a retry)",
            webhook_backlog.clone(),
        );
        let jwks = Arc::new(JwksFetches::default());
        registry.register_collector(Box::new(jwks.clone()));
        Metrics {
            registry,
            http_requests,
            answer_duration,
            commands,
            redeliveries,
            revision_conflicts,
            batch_commands,
            commit_transitions,
            partitions_owned,
            consumer_pending,
            consumer_ack_pending,
            webhook_attempts,
            webhook_latency,
            webhook_backlog,
            jwks,
        }
    }

    /// Counts an API request.
    pub fn http_request(&self, route: &'static str, method: &'static str, status: u16) {
        self.http_requests
            .get_or_create(&HttpLabels {
                route,
                method,
                status,
            })
            .inc();
    }

    /// Records how long an answer request took.
    pub fn answer_took(&self, route: &'static str, seconds: f64) {
        self.answer_duration
            .get_or_create(&RouteLabels { route })
            .observe(seconds);
    }

    /// Counts a command the worker finished with `outcome`.
    pub fn command(&self, verb: &'static str, outcome: &'static str) {
        self.commands
            .get_or_create(&CommandLabels { verb, outcome })
            .inc();
    }

    /// Adds a source of JWKS fetch counts (read at each scrape).
    pub fn watch_jwks(&self, source: impl FetchCount) {
        if let Ok(mut s) = self.jwks.sources.lock() {
            s.push(Box::new(source));
        }
    }

    /// Sets the consumer gauges (from a consumer info poll).
    pub fn consumer_info(&self, pending: u64, ack_pending: usize) {
        self.consumer_pending
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.consumer_ack_pending
            .set(i64::try_from(ack_pending).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text of every metric (serve with [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            // Writing to a String cannot fail; keep whatever was written.
            tracing::warn!("metrics encoding failed");
        }
        out
    }
}

/// Buckets of the answer latency: 1 ms to about 16 s, doubling.
fn answer_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(u64);
    impl FetchCount for Fixed {
        fn fetch_count(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn encodes_every_metric() {
        let m = Metrics::new();
        m.http_request("/v1/interactions/{id}/approve", "POST", 204);
        m.http_request("/v1/interactions/{id}/approve", "POST", 204);
        m.answer_took("/v1/interactions/{id}/approve", 0.003);
        m.command("answer", OUTCOME_OK);
        m.command("answer", "NRY-0009");
        m.redeliveries.inc();
        m.revision_conflicts.inc_by(2);
        m.consumer_info(7, 3);
        m.batch_commands.observe(3.0);
        m.partitions_owned.set(4);
        m.watch_jwks(Fixed(2));
        m.watch_jwks(Fixed(1));
        let text = m.encode();
        for line in [
            "holdpoint_http_requests_total{route=\"/v1/interactions/{id}/approve\",method=\"POST\",status=\"204\"} 2",
            "holdpoint_answer_duration_seconds_count{route=\"/v1/interactions/{id}/approve\"} 1",
            "holdpoint_answer_duration_seconds_bucket{le=\"0.004\",route=\"/v1/interactions/{id}/approve\"} 1",
            "holdpoint_commands_total{verb=\"answer\",outcome=\"ok\"} 1",
            "holdpoint_commands_total{verb=\"answer\",outcome=\"NRY-0009\"} 1",
            "holdpoint_command_redeliveries_total 1",
            "holdpoint_revision_conflicts_total 2",
            "holdpoint_consumer_pending 7",
            "holdpoint_batch_commands_count 1",
            "holdpoint_partitions_owned 4",
            "holdpoint_consumer_ack_pending 3",
            "holdpoint_jwks_fetches_total 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}

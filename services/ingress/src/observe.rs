//! Per-request observability of the API: the `traceparent` a request brings (or a
//! new trace), its span, and its metrics.
//!
//! [`layer`] is a route layer, so it sees the matched route template
//! (`/v1/interactions/{id}/approve`, never the id): requests are counted by
//! template, method and status, and the answer routes' latency goes to the
//! histogram. The request's [`TraceContext`](holdpoint_telemetry::TraceContext) (the ingress's own span in the
//! caller's trace) is put in the request's extensions, where the handlers find it
//! to carry it on the command ([`crate::extract::trace_of`]). The route templates
//! come from [`crate::routes`] as data ([`RouteLabels`]), so this module names no
//! route itself.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use holdpoint_telemetry::trace::TRACEPARENT;
use tracing::Instrument as _;

use std::sync::Arc;

use holdpoint_telemetry::Metrics;

/// The route templates the metrics label requests with: `&'static str`, so labels
/// need no allocation per request and their number is bounded.
#[derive(Debug, Clone, Copy)]
pub struct RouteLabels {
    /// Every route template; a matched route outside it is labelled `other`.
    pub all: &'static [&'static str],
    /// The answer routes, whose latency goes to the answer histogram.
    pub answers: &'static [&'static str],
}

impl RouteLabels {
    fn label(&self, matched: Option<&MatchedPath>) -> &'static str {
        let Some(m) = matched else {
            return "unmatched";
        };
        self.all
            .iter()
            .find(|r| **r == m.as_str())
            .copied()
            .unwrap_or("other")
    }
}

fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The route layer: trace context, span, request count and answer latency.
pub async fn layer(
    State((metrics, labels)): State<(Arc<Metrics>, RouteLabels)>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = labels.label(req.extensions().get::<MatchedPath>());
    let method = method_label(req.method());
    let span = tracing::info_span!("request", method, route, trace_id = tracing::field::Empty);
    let remote = req.headers().get(TRACEPARENT).and_then(|v| v.to_str().ok());
    let trace = holdpoint_telemetry::trace::link(&span, remote);
    req.extensions_mut().insert(trace);
    let resp = next.run(req).instrument(span).await;
    metrics.http_request(route, method, resp.status().as_u16());
    if labels.answers.contains(&route) {
        metrics.answer_took(route, started.elapsed().as_secs_f64());
    }
    resp
}

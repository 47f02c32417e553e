//! Per-request observability of the API: the `traceparent` a request brings (or a
//! new trace), its span, and its metrics.
//!
//! [`layer`] is a route layer, so it sees the matched route template
//! (`/v1/interactions/{id}/approve`, never the id): requests are counted by
//! template, method and status, and the answer routes' latency goes to the
//! histogram. The request's [`TraceContext`] (the ingress's own span in the
//! caller's trace) is put in the request's extensions, where the handlers find it
//! to carry it on the command ([`trace_of`]).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use holdpoint_telemetry::TraceContext;
use holdpoint_telemetry::trace::TRACEPARENT;
use tracing::Instrument as _;

use crate::AppState;

/// The answer routes: their latency is the answer latency histogram.
pub const ANSWER_ROUTES: [&str; 3] = [
    "/v1/questions/{question_id}/answer",
    "/v1/interactions/{id}/approve",
    "/v1/interactions/{id}/respond",
];

/// Every route template of the API, so labels are `&'static str` (no allocation
/// per request) and their number is bounded.
const ROUTES: [&str; 9] = [
    ANSWER_ROUTES[0],
    ANSWER_ROUTES[1],
    ANSWER_ROUTES[2],
    "/v1/interactions/{id}",
    "/v1/interactions",
    "/v1/sessions/{session_id}/messages",
    "/v1/events",
    crate::a2a::AGENT_CARD_PATH,
    crate::a2a::JSONRPC_PATH,
];

fn route_label(matched: Option<&MatchedPath>) -> &'static str {
    let Some(m) = matched else {
        return "unmatched";
    };
    ROUTES
        .iter()
        .find(|r| **r == m.as_str())
        .copied()
        .unwrap_or("other")
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

/// The trace context the [`layer`] gave this request, as the `traceparent` value
/// to send on.
pub fn trace_of(req: &Request) -> Option<String> {
    req.extensions()
        .get::<TraceContext>()
        .map(TraceContext::header_value)
}

/// The route layer: trace context, span, request count and answer latency.
pub async fn layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_label(req.extensions().get::<MatchedPath>());
    let method = method_label(req.method());
    let span = tracing::info_span!("request", method, route, trace_id = tracing::field::Empty);
    let remote = req.headers().get(TRACEPARENT).and_then(|v| v.to_str().ok());
    let trace = holdpoint_telemetry::trace::link(&span, remote);
    req.extensions_mut().insert(trace);
    let resp = next.run(req).instrument(span).await;
    let metrics = &state.cfg.metrics;
    metrics.http_request(route, method, resp.status().as_u16());
    if ANSWER_ROUTES.contains(&route) {
        metrics.answer_took(route, started.elapsed().as_secs_f64());
    }
    resp
}

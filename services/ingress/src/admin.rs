//! The admin listener: `/healthz` (the process is up), `/readyz` (NATS, the
//! streams and the buckets are reachable) and `/metrics` (Prometheus, OpenMetrics
//! text). The ingress serves it next to the API; `holdpoint worker` serves the same
//! router for its own metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use holdpoint_bus::Bus;
use holdpoint_telemetry::Metrics;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What the admin endpoints read; cheap to clone (axum clones it per request).
#[derive(Clone, Debug)]
pub struct Admin {
    /// The NATS handle `/readyz` checks.
    pub bus: Arc<Bus>,
    /// The metrics `/metrics` renders.
    pub metrics: Arc<Metrics>,
}

/// The admin router.
pub fn router(admin: Admin) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(admin)
}

/// Serves [`router`] on `listener` until `shutdown`.
///
/// # Errors
/// When serving fails.
pub async fn serve(
    admin: Admin,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    axum::serve(listener, router(admin))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

async fn readyz(State(admin): State<Admin>) -> Response {
    match admin.bus.check_ready(Duration::from_secs(2)).await {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e}")).into_response(),
    }
}

async fn metrics(State(admin): State<Admin>) -> Response {
    let mut resp = admin.metrics.encode().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(holdpoint_telemetry::metrics::CONTENT_TYPE),
    );
    resp
}

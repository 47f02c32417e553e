//! The Holdpoint ingress: a thin, stateless HTTP front.
//!
//! - [`router`] / [`run`]: the REST API (`/v1/...`) over TCP; [`admin_router`]:
//!   `/healthz`, `/readyz` and `/metrics` on a separate admin listener ([`admin`]).
//! - [`observe`]: per-request trace context (`traceparent`), span and metrics.
//! - [`identity`]: who is calling (the `Caller` extractor): a verified JWT, the
//!   local user on the Unix socket, or (development only) trusted headers.
//! - [`auth`]: JWT verification against the issuer's JWKS.
//! - [`socket`]: the Unix socket listener ([`run_unix`]).
//! - [`api`]: the handlers, request bodies and the error mapping.
//! - [`a2a`]: the A2A v1.0 server for paused tasks: the agent card at
//!   `/.well-known/agent-card.json` and the JSON-RPC binding at `/a2a`, with the
//!   interactions/v1 extension (seed 000).
//! - [`sse`]: server-sent event streams: `GET /v1/events` (an organisation's
//!   CloudEvents, resumable with `Last-Event-ID`) and the A2A task streams.
//! - [`inbox`]: the web inbox at `/inbox`, a page embedded in the binary that
//!   answers through the API like any client.
//!
//! The ingress never decides whether an answer fits an interaction: it turns a
//! request into a command, publishes it to `HP_COMMANDS` with its idempotency key as
//! `Nats-Msg-Id`, and maps the worker's outcome to the HTTP status (DESIGN "Flow").

pub mod a2a;
pub mod admin;
pub mod api;
pub mod auth;
pub mod identity;
pub mod inbox;
pub mod json_guard;
pub mod observe;
pub mod socket;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use holdpoint_bus::Bus;
use holdpoint_telemetry::Metrics;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use identity::{Caller, IdentityMode, LocalIdentity};

/// Ingress settings.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// How long a request waits for the worker's outcome before answering 503.
    pub outcome_timeout: Duration,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// How callers are identified.
    pub identity: IdentityMode,
    /// The public base URL (`https://holdpoint.example.com`) the agent card
    /// advertises; `None` derives it from each request's `Host` header.
    pub public_url: Option<String>,
    /// Where requests are counted (shared with the worker in `holdpoint up`).
    pub metrics: Arc<Metrics>,
}

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            outcome_timeout: Duration::from_secs(5),
            body_limit: 64 * 1024,
            identity: IdentityMode::default(),
            public_url: None,
            metrics: Arc::new(Metrics::new()),
        }
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// NATS handle.
    pub bus: Bus,
    /// Settings.
    pub cfg: Arc<IngressConfig>,
    /// Outcome waiter.
    pub outcomes: Arc<holdpoint_bus::outcome::Waiter>,
    /// Cancelled when the server shuts down: ends every open event stream, so the
    /// graceful shutdown does not wait for clients that never hang up.
    pub streams: CancellationToken,
}

impl AppState {
    /// Builds the state and starts the outcome listener.
    ///
    /// # Errors
    /// When the reply subscription cannot be made.
    pub async fn new(bus: Bus, cfg: IngressConfig) -> anyhow::Result<Self> {
        let outcomes = Arc::new(holdpoint_bus::outcome::Waiter::start(&bus.client).await?);
        if let Some(verifier) = &cfg.identity.jwt {
            cfg.metrics.watch_jwks(verifier.clone());
        }
        Ok(AppState {
            bus,
            cfg: Arc::new(cfg),
            outcomes,
            streams: CancellationToken::new(),
        })
    }
}

impl AppState {
    /// What the admin endpoints need: the bus and the metrics.
    pub fn admin(&self) -> admin::Admin {
        admin::Admin {
            bus: self.bus.clone(),
            metrics: self.cfg.metrics.clone(),
        }
    }
}

/// The API router, with the web inbox's files ([`inbox`]).
pub fn router(state: AppState) -> Router {
    api::routes(state).merge(inbox::router())
}

/// The admin router: `/healthz` (process up), `/readyz` (NATS, streams and buckets
/// reachable) and `/metrics` (Prometheus).
pub fn admin_router(state: AppState) -> Router {
    api::admin_routes(state)
}

/// Serves the API on `listener` until `shutdown`, then drains in-flight requests.
///
/// # Errors
/// When serving fails.
pub async fn run(
    state: AppState,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let streams = state.streams.clone();
    let app = router(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.cancelled().await;
            streams.cancel();
        })
        .await?;
    Ok(())
}

/// Serves the API on the Unix socket at `path` until `shutdown` (see [`socket`]).
/// Requests without a token are the machine's user only when they come from the
/// uid in [`IdentityMode::local`].
///
/// # Errors
/// When the socket cannot be set up or serving fails.
pub async fn run_unix(
    state: AppState,
    path: std::path::PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = socket::bind(&path)?;
    let streams = state.streams.clone();
    let app = router(state).into_make_service_with_connect_info::<identity::SocketPeer>();
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.cancelled().await;
            streams.cancel();
        })
        .await;
    let _ = std::fs::remove_file(&path);
    result?;
    Ok(())
}

/// Serves the admin endpoints on `listener` until `shutdown`.
///
/// # Errors
/// When serving fails.
pub async fn run_admin(
    state: AppState,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    admin::serve(state.admin(), listener, shutdown).await
}

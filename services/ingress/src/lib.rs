//! The Holdpoint ingress: a thin, stateless HTTP front.
//!
//! Leaves first; each module depends only on the ones above it in this list:
//!
//! - [`error`]: [`ApiError`](error::ApiError), the one API error type
//!   (`{code, title, message}` with the code's status).
//! - [`json_guard`]: structural limits on JSON bodies (repeated keys, depth,
//!   numbers out of range).
//! - [`conn`]: the connection under the API: `Connection: close` after an unread
//!   body, and error bodies on the answers hyper gives by itself.
//! - [`paths`]: every path of the API as a route template (the agent card reads
//!   the JSON-RPC path there).
//! - [`wire`]: the REST bodies and queries (`schemas/rest/` is generated from them).
//! - [`observe`]: per-request trace context (`traceparent`), span and metrics.
//! - [`identity`]: who is calling (the [`Caller`], found first for every request):
//!   a verified JWT ([`identity::jwt`]), the local user on the Unix socket
//!   ([`identity::socket`]), or (development only) trusted headers.
//! - [`extract`]: what handlers take from a request (JSON body, path ids,
//!   idempotency key, trace context).
//! - [`limits`]: per-caller limits (open event streams).
//! - [`admin`]: `/healthz`, `/readyz` and `/metrics` on a separate listener.
//! - [`state`]: [`IngressConfig`] and the handlers' shared [`AppState`].
//! - [`rest`]: the REST handlers, one file per resource.
//! - [`sse`]: server-sent event streams: `GET /v1/events` (an organisation's
//!   CloudEvents, resumable with `Last-Event-ID`) and what the A2A task streams use.
//! - [`a2a`]: the A2A v1.0 server for paused tasks: the agent card at
//!   `/.well-known/agent-card.json` and the JSON-RPC binding at `/a2a`, with the
//!   interactions/v1 extension.
//! - [`routes`]: the router ([`router`]) that serves every path.
//! - [`unix`]: the Unix socket listener (`Listeners::socket`).
//! - [`serve`]: the one way to run an ingress, used by `holdpoint up`,
//!   `holdpoint ingress` and the tests: the API, and with them the admin
//!   endpoints and the Unix socket, on the [`Listeners`] given.
//! - [`inbox`]: the web inbox at `/inbox`, a page embedded in the binary that
//!   answers through the API like any client.
//!
//! The ingress never decides whether an answer fits an interaction: it turns a
//! request into a command, publishes it to `HP_COMMANDS` with its idempotency key as
//! `Nats-Msg-Id`, and maps the worker's outcome to the HTTP status (ARCHITECTURE.md "The request flow").

pub mod a2a;
pub mod admin;
pub mod conn;
pub mod error;
pub mod extract;
pub mod identity;
pub mod inbox;
pub mod json_guard;
pub mod limits;
pub mod observe;
pub mod paths;
pub mod rest;
pub mod routes;
pub mod sse;
pub mod state;
pub mod unix;
pub mod wire;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use identity::{Caller, IdentityMode, LocalIdentity};
pub use state::{AppState, IngressConfig};

/// The API router, with the web inbox's files ([`inbox`]).
pub fn router(state: AppState) -> Router {
    routes::router(state)
}

/// The admin router: `/healthz` (process up), `/readyz` (NATS, streams and buckets
/// reachable) and `/metrics` (Prometheus).
pub fn admin_router(state: AppState) -> Router {
    routes::admin_router(state)
}

/// Serves the API on `listener` until `shutdown`, then drains in-flight requests.
///
/// # Errors
/// When serving fails.
pub(crate) async fn run(
    state: AppState,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let streams = state.streams.clone();
    let app = router(state);
    axum::serve(conn::Listener(listener), app)
        .with_graceful_shutdown(async move {
            shutdown.cancelled().await;
            streams.cancel();
        })
        .await?;
    Ok(())
}

/// Serves the API on the Unix socket at `path` until `shutdown` (see [`unix`]).
/// Requests without a token are the machine's user only when they come from the
/// uid in [`IdentityMode::local`].
///
/// # Errors
/// When the socket cannot be set up or serving fails.
pub(crate) async fn run_unix(
    state: AppState,
    path: std::path::PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = conn::Listener(unix::bind(&path)?);
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
pub(crate) async fn run_admin(
    state: AppState,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    admin::serve(state.admin(), listener, shutdown).await
}

/// What one ingress serves on: the API on a TCP listener, and optionally the admin
/// endpoints on another and the API on a Unix socket.
#[derive(Debug)]
pub struct Listeners {
    /// The API, drained of in-flight requests and event streams at shutdown.
    pub api: TcpListener,
    /// `/healthz`, `/readyz`, `/metrics` ([`admin_router`]); none when `None`.
    pub admin: Option<TcpListener>,
    /// The API on this Unix socket as well (see [`unix`]; removed at shutdown);
    /// none when `None`.
    pub socket: Option<std::path::PathBuf>,
}

impl Listeners {
    /// The API on `api` alone.
    pub fn api(api: TcpListener) -> Self {
        Listeners {
            api,
            admin: None,
            socket: None,
        }
    }
}

/// Serves an ingress on `listeners` until `shutdown`, then drains every listener's
/// in-flight requests and returns.
///
/// # Errors
/// The first listener's failure (the Unix socket cannot be bound, serving fails);
/// the others are stopped then.
pub async fn serve(
    state: AppState,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(path) = listeners.socket {
        tasks.spawn(run_unix(state.clone(), path, shutdown.clone()));
    }
    if let Some(admin) = listeners.admin {
        tasks.spawn(run_admin(state.clone(), admin, shutdown.clone()));
    }
    tasks.spawn(run(state, listeners.api, shutdown));
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

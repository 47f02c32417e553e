//! Every path of the API and the router that serves them. The handlers live in
//! [`crate::rest`], [`crate::sse`] and [`crate::a2a`]; this module is the only one
//! that names them all, so each handler module depends only on the leaves below
//! it ([`crate::error`], [`crate::extract`], [`crate::identity`], [`crate::wire`]).
//!
//! Every request but those to a [`PUBLIC`] path is identified first
//! ([`crate::identity::require`] on the routes, the same check in the answers for
//! an unknown path or method): anonymous, it is `401 NRY-0011` whatever else it
//! gets wrong. Each route is observed by [`crate::observe::layer`] (trace
//! context, request metrics by route template, the 401s included). Unknown paths answer
//! `404 NRY-0004`; a known path with another method `405 NRY-0005` with `Allow`; a
//! panic in a handler `500 NRY-0051`. A response sent before the request's body
//! was read says `Connection: close` ([`crate::conn::close_unread`]).
//!
//! At most [`IngressConfig::max_in_flight`](crate::IngressConfig::max_in_flight)
//! requests to the routes run at once (tower's global concurrency limit over the
//! state's one semaphore, with load shedding): one more is refused at once, before
//! its identity is checked, with `503 NRY-0050` and `Retry-After: 1` (on `/a2a`,
//! the JSON-RPC error for `NRY-0050`), and counted by the observation like any
//! answer. An event stream holds its permit only until its response starts; the
//! inbox's files, the unmatched paths and the admin listener are outside the limit.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::Uri;
use axum::response::{IntoResponse as _, Response};
use axum::routing::{get, post};
use holdpoint_domain::ErrorCode;

use crate::error::ApiError;
use crate::observe::RouteLabels;
use crate::paths as path;
use crate::state::AppState;
use crate::{a2a, rest, sse};

/// The paths that need no identity: the agent card (A2A discovery).
pub const PUBLIC: &[&str] = &[path::AGENT_CARD];

/// The API router over `state`.
pub fn router(state: AppState) -> Router {
    use path::*;
    let labels = RouteLabels {
        all: &ALL,
        answers: &ANSWER_ROUTES,
    };
    Router::new()
        .route(ANSWER_QUESTION, post(rest::answers::answer_question))
        .route(APPROVE, post(rest::answers::approve))
        .route(RESPOND, post(rest::answers::respond))
        .route(ANSWERS, post(rest::answers::answer_many))
        .route(INTERACTION, get(rest::interactions::get_interaction))
        .route(INTERACTIONS, get(rest::interactions::list_interactions))
        .route(SESSION_MESSAGES, post(rest::sessions::post_message))
        .route(RULES, get(rest::rules::list_rules))
        .route(
            RULE,
            get(rest::rules::get_rule).delete(rest::rules::revoke_rule),
        )
        .route(AUDIT, get(rest::audit::list_audit))
        .route(EVENTS, get(sse::events))
        .route(
            WEBHOOKS,
            post(rest::webhooks::create).get(rest::webhooks::list),
        )
        .route(
            WEBHOOK,
            get(rest::webhooks::get_one).delete(rest::webhooks::delete),
        )
        .route(WEBHOOK_ROTATE, post(rest::webhooks::rotate))
        .route(WEBHOOK_ENABLE, post(rest::webhooks::enable))
        .route(WEBHOOK_TEST, post(rest::webhooks::test_send))
        .route(WEBHOOK_ATTEMPTS, get(rest::webhooks::attempts))
        .route(AGENT_CARD, get(a2a::card::agent_card))
        .route(JSONRPC, post(a2a::dispatch::jsonrpc))
        // Identity first, inside the observation, so a 401 is counted by route.
        .route_layer(axum::middleware::from_fn_with_state(
            (state.cfg.identity.clone(), PUBLIC),
            crate::identity::require,
        ))
        // The bound on requests in flight, outside the identity (a refusal costs
        // nothing) and inside the observation (a refusal is counted by route).
        .route_layer(
            tower::ServiceBuilder::new()
                .layer(axum::error_handling::HandleErrorLayer::new(overloaded))
                .load_shed()
                .layer(tower::limit::GlobalConcurrencyLimitLayer::with_semaphore(
                    state.in_flight.clone(),
                )),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            (state.cfg.metrics.clone(), labels),
            crate::observe::layer,
        ))
        // The inbox's files are public: the page asks for a token itself.
        .merge(crate::inbox::router())
        // No route, or not this method: identity first there too.
        .fallback(|State(state): State<AppState>, req: Request| async move {
            identified(&state, req).await?;
            Err::<(), _>(ApiError::new(ErrorCode::NotFound, "no such route"))
        })
        .method_not_allowed_fallback(|State(state): State<AppState>, req: Request| async move {
            identified(&state, req).await?;
            Err::<(), _>(ApiError::new(
                ErrorCode::MethodNotAllowed,
                "this path does not take this method; `Allow` lists the ones it takes",
            ))
        })
        .layer(axum::middleware::from_fn(crate::conn::close_unread))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::new(ErrorCode::Internal, "internal error").into_response()
        }))
        .with_state(state)
}

/// The answer to a request refused because
/// [`IngressConfig::max_in_flight`](crate::IngressConfig::max_in_flight) are in
/// flight: `503 NRY-0050` with `Retry-After: 1`; on the JSON-RPC path, the A2A
/// error for it ([`a2a::dispatch::overloaded`]). Nothing of the request was read.
async fn overloaded(uri: Uri, _: tower::BoxError) -> Response {
    if uri.path() == path::JSONRPC {
        return a2a::dispatch::overloaded();
    }
    ApiError::new(
        ErrorCode::Unavailable,
        "Holdpoint is serving as many requests as it may at once and did not read this \
         one; retry after Retry-After (with the same idempotency key)",
    )
    .into_response()
}

/// `Ok` when `req` has a caller ([`crate::identity::resolve`]), for the answers
/// that no route gives.
async fn identified(state: &AppState, req: Request) -> Result<(), ApiError> {
    let (parts, _) = req.into_parts();
    crate::identity::resolve(&parts, &state.cfg.identity)
        .await
        .map(|_| ())
}

/// The admin router: `/healthz`, `/readyz`, `/metrics` (see [`crate::admin`]).
pub fn admin_router(state: AppState) -> Router {
    crate::admin::router(state.admin())
}

//! The REST handlers, one file per resource:
//!
//! | method | path | handler |
//! |---|---|---|
//! | POST | `/v1/questions/{questionId}/answer` | [`answers::answer_question`] |
//! | POST | `/v1/interactions/{id}/approve` | [`answers::approve`] |
//! | POST | `/v1/interactions/{id}/respond` | [`answers::respond`] |
//! | POST | `/v1/answers` | [`answers::answer_many`] (up to 100 of the three above) |
//! | GET | `/v1/interactions/{id}` | [`interactions::get_interaction`] |
//! | GET | `/v1/interactions?state=pending&limit=50&cursor=…` | [`interactions::list_interactions`] |
//! | POST | `/v1/sessions/{sessionId}/messages` | [`sessions::post_message`] |
//! | POST, GET, DELETE | `/v1/webhooks…` | [`webhooks`] (endpoints, rotation, test, attempts) |
//! | GET | `/v1/rules?limit=50&cursor=…` | [`rules::list_rules`] |
//! | GET | `/v1/rules/{id}` | [`rules::get_rule`] |
//! | DELETE | `/v1/rules/{id}` | [`rules::revoke_rule`] |
//! | GET | `/v1/audit?after=0&limit=50` | [`audit::list_audit`] |
//!
//! The bodies are in [`crate::wire`]; the routes in [`crate::routes`]. A handler
//! turns a request into a command, [`submit`]s it and maps the worker's outcome:
//! success to its status, a refusal to its code ([`crate::error`]).

pub mod answers;
pub mod audit;
pub mod interactions;
pub mod rules;
pub mod sessions;
pub mod webhooks;

use holdpoint_domain::{CommandEnvelope, Outcome};

use crate::error::ApiError;
use crate::state::AppState;

/// Publishes `env` and waits (at most the configured outcome timeout) for the
/// worker's outcome.
///
/// # Errors
/// `503 NRY-0050` when no outcome comes in time or NATS is away; the retry with
/// the same idempotency key gets the recorded outcome.
pub async fn submit(
    state: &AppState,
    env: CommandEnvelope,
    traceparent: Option<&str>,
) -> Result<Outcome, ApiError> {
    state
        .outcomes
        .submit_traced(&state.bus, &env, state.cfg.outcome_timeout, traceparent)
        .await
        .map_err(ApiError::unavailable)
}

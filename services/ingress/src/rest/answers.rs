//! The three answer operations: `POST /v1/questions/{questionId}/answer`, and the Runtime's `approve` and `respond` as
//! `POST /v1/interactions/{id}/approve|respond` (the reading rules: README "The HTTP API"). Each
//! reads its body ([`crate::wire`]), derives the idempotency key and submits one
//! `Answer` command; the worker reads the input against the interaction's kind.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use holdpoint_domain::{
    AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ErrorCode, InteractionId,
    Remember,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;
use crate::extract::{IdPath, idempotency_key, json_body, parse_id, trace_of};
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{AnswerBody, ApproveBody, RespondBody};

/// The shape of every answer operation: validates the path id (named `what`),
/// reads the body `B`, turns it into the input with `input`, derives the
/// idempotency key, submits one `Answer` command through `route`
/// and maps the outcome: 204 on success, the refusal's code otherwise.
async fn answer_with<B: DeserializeOwned>(
    state: &AppState,
    (what, raw_id): (&str, String),
    caller: Caller,
    req: Request,
    route: AnswerRoute,
    input: impl FnOnce(B) -> Result<(AnswerInput, Option<Remember>), ApiError>,
) -> Result<StatusCode, ApiError> {
    let interaction_id = parse_id(what, InteractionId::parse, raw_id)?;
    let headers = req.headers().clone();
    let trace = trace_of(&req);
    let (body, _): (B, Value) = json_body(state.cfg.body_limit, req).await?;
    let (input, remember) = input(body)?;
    if let Some(r) = &remember {
        r.check().map_err(ApiError::from)?;
    }
    let key = idempotency_key(&headers)?;
    let env = CommandEnvelope {
        org: caller.org,
        command: Command::Answer(Box::new(AnswerCommand {
            interaction_id,
            route,
            key,
            by: caller.person,
            task_id: None,
            context_id: None,
            input,
            remember,
        })),
    };
    let outcome = super::submit(state, env, trace.as_deref()).await?;
    match outcome.result {
        Ok(_) => Ok(StatusCode::NO_CONTENT),
        Err(r) => Err(r.into()),
    }
}

/// `POST /v1/questions/{questionId}/answer`: one entry per question, in order.
pub async fn answer_question(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let route = AnswerRoute::Question;
    answer_with(
        &state,
        ("questionId", id),
        caller,
        req,
        route,
        |b: AnswerBody| {
            if b.remember.is_some() {
                return Err(ApiError::new(
                    ErrorCode::NotRememberable,
                    "remember applies to approvals only: no rule can be written about a \
                     question, and nothing was written",
                ));
            }
            Ok((AnswerInput::Answers { answers: b.answers }, None))
        },
    )
    .await
}

/// Exactly one of `approved` and `value` (the reading rules read each as the
/// other where the kind allows): the input, or `400 NRY-0001` naming the two (`names`). An
/// `argumentsDigest` or `editedArguments` binds a decision, so it comes with `approved` or
/// a boolean `value` (read as `approved`); with any other `value` it is `400 NRY-0001`.
/// Whether an edit may be released is the worker's to decide (`NRY-0028`, `NRY-0029`).
fn one_of(
    (approved, value): (Option<bool>, Option<Value>),
    reason: Option<String>,
    (arguments_digest, edited_arguments): (Option<String>, Option<Value>),
    names: &str,
) -> Result<AnswerInput, ApiError> {
    let binds = arguments_digest.is_some() || edited_arguments.is_some();
    match (approved, value) {
        (Some(approved), None) => Ok(AnswerInput::Approved {
            approved,
            reason,
            arguments_digest,
            edited_arguments,
        }),
        (None, Some(Value::Bool(approved))) if binds => Ok(AnswerInput::Approved {
            approved,
            reason,
            arguments_digest,
            edited_arguments,
        }),
        (None, Some(_)) if binds => Err(ApiError::invalid(
            "argumentsDigest and editedArguments bind an approval decision: give them with \
             `approved` (or a boolean `value`)",
        )),
        (None, Some(value)) => Ok(AnswerInput::Value { value, reason }),
        _ => Err(ApiError::invalid(format!("give exactly one of {names}"))),
    }
}

/// `POST /v1/interactions/{id}/approve`: `approved` (or a boolean `value`).
pub async fn approve(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let route = AnswerRoute::Approve;
    answer_with(
        &state,
        ("interactionId", id),
        caller,
        req,
        route,
        |b: ApproveBody| {
            let names = "`approved` (boolean) or `value`";
            let binding = (b.arguments_digest, b.edited_arguments);
            let input = one_of((b.approved, b.value), b.reason, binding, names)?;
            Ok((input, b.remember))
        },
    )
    .await
}

/// `POST /v1/interactions/{id}/respond`: `value` (or `approved`, read as the value).
pub async fn respond(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let route = AnswerRoute::Respond;
    answer_with(
        &state,
        ("interactionId", id),
        caller,
        req,
        route,
        |b: RespondBody| {
            let input = one_of(
                (b.approved, b.value),
                b.reason,
                (None, None),
                "`value` or `approved`",
            )?;
            Ok((input, b.remember))
        },
    )
    .await
}

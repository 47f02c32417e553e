//! The answer operations: `POST /v1/questions/{questionId}/answer`, the Runtime's
//! `approve` and `respond` as `POST /v1/interactions/{id}/approve|respond` (the
//! reading rules: README "The HTTP API"), and `POST /v1/answers`, many of them at
//! once. Each reads its body ([`crate::wire`]), derives the idempotency key and
//! submits one `Answer` command; the worker reads the input against the
//! interaction's kind.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdpoint_domain::{
    Accepted, AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ErrorCode,
    IdempotencyKey, InteractionId, Remember,
};
use serde::Deserialize as _;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;

use crate::error::ApiError;
use crate::extract::{IdPath, idempotency_key, json_body, parse_id, trace_of};
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{
    AnswerBody, ApprovalCounted, ApprovalProgress, ApproveBody, BatchItem, BatchOperation,
    BatchResult, BatchResults, MAX_BATCH, RespondBody,
};

/// The shape of every single answer operation: validates the path id (named
/// `what`), reads the body as `route` reads it ([`input_of`]), derives the
/// idempotency key, submits one `Answer` command and maps the outcome: `204` when
/// answered, `202` with an [`ApprovalCounted`] body when an approval was counted
/// and the call waits for other people's, the refusal's code otherwise.
async fn answer_with(
    state: &AppState,
    (what, raw_id): (&str, String),
    caller: Caller,
    req: Request,
    route: AnswerRoute,
) -> Result<Response, ApiError> {
    let interaction_id = parse_id(what, InteractionId::parse, raw_id)?;
    let headers = req.headers().clone();
    let trace = trace_of(&req);
    let (_, body): (IgnoredAny, Value) = json_body(state.cfg.body_limit, req).await?;
    let answer = input_of(route, body)?;
    let key = idempotency_key(&headers)?;
    let target = (interaction_id.clone(), route, key);
    Ok(
        match decide(state, &caller, target, answer, trace.as_deref()).await? {
            None => StatusCode::NO_CONTENT.into_response(),
            Some(approvals) => (
                StatusCode::ACCEPTED,
                Json(ApprovalCounted {
                    interaction_id: interaction_id.as_str().to_owned(),
                    approvals,
                }),
            )
                .into_response(),
        },
    )
}

/// Submits one `Answer` command and waits for its outcome: `Ok(None)` when
/// answered, `Ok(Some(_))` when an approval was counted and the call waits for
/// more, the refusal (or `503 NRY-0050`) otherwise.
///
/// The command names the interaction's task, read from its record first, so
/// that it goes to the task's partition ([`CommandEnvelope::partition_key`]) and
/// is decided in order with the task's other commands. Without the task it would
/// go to the interaction's partition, and answers to many interactions of one task
/// would be decided on several partitions at once, each writing the task record:
/// all but one of each round lose the compare-and-set and are decided again (200
/// such answers took tens of seconds). When the record is missing or cannot be
/// read, the command names no task and the worker decides it as before (a missing
/// interaction is its `404`, from the same place as every other refusal). The read
/// waits at most a fifth of the outcome timeout (at most 1 s), so an answer sent
/// while NATS is away still gets its `503` within the outcome timeout and that.
async fn decide(
    state: &AppState,
    caller: &Caller,
    (interaction_id, route, key): (InteractionId, AnswerRoute, IdempotencyKey),
    (input, remember): (AnswerInput, Option<Remember>),
    trace: Option<&str>,
) -> Result<Option<ApprovalProgress>, ApiError> {
    let budget = (state.cfg.outcome_timeout / 5).min(std::time::Duration::from_secs(1));
    let read = state.bus.load_interaction(&caller.org, &interaction_id);
    let task_id = match tokio::time::timeout(budget, read).await {
        Ok(Ok(loaded)) => loaded
            .value
            .filter(|i| i.org == caller.org && i.id == interaction_id)
            .map(|i| i.task_id),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "interaction not read; the answer names no task");
            None
        }
        Err(_) => {
            tracing::debug!(
                ?budget,
                "interaction not read in time; the answer names no task"
            );
            None
        }
    };
    let env = CommandEnvelope {
        org: caller.org.clone(),
        command: Command::Answer(Box::new(AnswerCommand {
            interaction_id,
            route,
            key,
            by: caller.person.clone(),
            groups: caller.groups.clone(),
            task_id,
            context_id: None,
            input,
            remember,
        })),
    };
    let outcome = super::submit(state, env, trace).await?;
    match outcome.result {
        Ok(Accepted::ApprovalCounted { given, required }) => {
            Ok(Some(ApprovalProgress { given, required }))
        }
        Ok(_) => Ok(None),
        Err(r) => Err(r.into()),
    }
}

/// The body of the single operation `route`, read as that operation reads it: the
/// input and the `remember` (checked here).
///
/// # Errors
/// `400 NRY-0001` for a body of the wrong shape; `400 NRY-0025` for `remember` on a
/// question; a `remember` out of bounds.
fn input_of(route: AnswerRoute, body: Value) -> Result<(AnswerInput, Option<Remember>), ApiError> {
    let (input, remember) = match route {
        AnswerRoute::Question => {
            let b: AnswerBody = typed(body)?;
            if b.remember.is_some() {
                return Err(ApiError::new(
                    ErrorCode::NotRememberable,
                    "remember applies to approvals only: no rule can be written about a \
                     question, and nothing was written",
                ));
            }
            (AnswerInput::Answers { answers: b.answers }, None)
        }
        AnswerRoute::Approve => {
            let b: ApproveBody = typed(body)?;
            let names = "`approved` (boolean) or `value`";
            let binding = (b.arguments_digest, b.edited_arguments);
            let input = one_of((b.approved, b.value), b.reason, binding, names)?;
            (input, b.remember)
        }
        AnswerRoute::Respond | AnswerRoute::A2a => {
            let b: RespondBody = typed(body)?;
            let names = "`value` or `approved`";
            let input = one_of((b.approved, b.value), b.reason, (None, None), names)?;
            (input, b.remember)
        }
    };
    if let Some(r) = &remember {
        r.check().map_err(ApiError::from)?;
    }
    Ok((input, remember))
}

/// `body` typed as `B` (a struct that refuses unknown fields), with the message
/// [`json_body`] gives.
fn typed<B: DeserializeOwned>(body: Value) -> Result<B, ApiError> {
    B::deserialize(body).map_err(|e| ApiError::invalid(format!("invalid body: {e}")))
}

/// `POST /v1/questions/{questionId}/answer`: one entry per question, in order.
pub async fn answer_question(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<Response, ApiError> {
    let route = AnswerRoute::Question;
    answer_with(&state, ("questionId", id), caller, req, route).await
}

/// `POST /v1/interactions/{id}/approve`: `approved` (or a boolean `value`).
pub async fn approve(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<Response, ApiError> {
    let route = AnswerRoute::Approve;
    answer_with(&state, ("interactionId", id), caller, req, route).await
}

/// `POST /v1/interactions/{id}/respond`: `value` (or `approved`, read as the value).
pub async fn respond(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<Response, ApiError> {
    let route = AnswerRoute::Respond;
    answer_with(&state, ("interactionId", id), caller, req, route).await
}

/// `POST /v1/answers`: 1 to [`MAX_BATCH`] answers, each decided on its own as its
/// single operation decides it (its own idempotency key and outcome; not one
/// transaction), the results in the items' order. An item that cannot be read as
/// its operation's answer is that item's `400`; a body that cannot be read as a
/// batch is `400 NRY-0034` and decides nothing.
///
/// The items share round trips: every command is published at once, and the
/// PubAcks and outcomes are awaited concurrently over the one connection, so a
/// batch costs about one answer's latency rather than one per item.
pub async fn answer_many(
    State(state): State<AppState>,
    caller: Caller,
    req: Request,
) -> Result<Json<BatchResults>, ApiError> {
    let trace = trace_of(&req);
    let (_, body): (IgnoredAny, Value) = json_body(state.cfg.body_limit, req).await?;
    let items = read_batch(body)?;
    let (state, caller, trace) = (&state, &caller, trace.as_deref());
    let answers = items
        .into_iter()
        .map(|item| answer_item(state, caller, item, trace));
    let results = futures::future::join_all(answers).await;
    Ok(Json(BatchResults { results }))
}

/// Reads a batch body: an object of exactly `items`, 1 to [`MAX_BATCH`] of them,
/// each a [`BatchItem`].
///
/// # Errors
/// `400 NRY-0034` saying what is wrong (with the item's index).
fn read_batch(body: Value) -> Result<Vec<BatchItem>, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::BatchInvalid, m);
    let Value::Object(mut fields) = body else {
        return Err(bad("the body must be an object with `items`".into()));
    };
    let Some(Value::Array(items)) = fields.remove("items") else {
        return Err(bad("`items` must be an array of answers".into()));
    };
    if let Some(other) = fields.keys().next() {
        return Err(bad(format!(
            "unknown field `{other}`: the body takes `items` only"
        )));
    }
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(bad(format!(
            "`items` holds {} answers; a batch takes 1 to {MAX_BATCH}",
            items.len()
        )));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| BatchItem::deserialize(item).map_err(|e| bad(format!("items[{i}]: {e}"))))
        .collect()
}

/// One batch item, decided as its single operation would decide it.
async fn answer_item(
    state: &AppState,
    caller: &Caller,
    item: BatchItem,
    trace: Option<&str>,
) -> BatchResult {
    let BatchItem {
        interaction_id: raw_id,
        operation,
        body,
        idempotency_key: raw_key,
    } = item;
    let (route, what) = match operation {
        BatchOperation::Approve => (AnswerRoute::Approve, "interactionId"),
        BatchOperation::Respond => (AnswerRoute::Respond, "interactionId"),
        BatchOperation::Answer => (AnswerRoute::Question, "questionId"),
    };
    let result = async {
        let interaction_id = parse_id(what, InteractionId::parse, raw_id.clone())?;
        let key = IdempotencyKey::parse(raw_key).map_err(|_| {
            ApiError::invalid("idempotencyKey must be 1 to 128 printable ASCII characters")
        })?;
        let answer = input_of(route, body)?;
        decide(state, caller, (interaction_id, route, key), answer, trace).await
    }
    .await;
    BatchResult::of(raw_id, result.as_ref().map_err(|e| &e.0).copied())
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

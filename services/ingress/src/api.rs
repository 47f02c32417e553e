//! REST handlers, request bodies, and the mapping from outcomes and errors to HTTP.
//!
//! | method | path | body | success |
//! |---|---|---|---|
//! | POST | `/v1/questions/{questionId}/answer` | `{answers: [{options: [i…], text?}…]}` (seed 003) | 204 |
//! | POST | `/v1/interactions/{id}/approve` | `{approved: bool, reason?, argumentsDigest?}` or `{value: bool}` | 204 |
//! | POST | `/v1/interactions/{id}/respond` | `{value: any}` or `{approved: bool}` | 204 |
//! | GET | `/v1/interactions/{id}` | | 200 view |
//! | GET | `/v1/interactions?state=pending&limit=50&cursor=…` | | 200 page |
//! | POST | `/v1/sessions/{sessionId}/messages` | `{text, lane?, messageId?}` | 202 |
//! | GET | `/v1/events?task=…&type=…` | | 200, SSE ([`crate::sse`]) |
//! | GET | `/.well-known/agent-card.json` | | 200, public ([`crate::a2a`]) |
//! | POST | `/a2a` | JSON-RPC 2.0 (A2A v1.0) | 200 ([`crate::a2a`]) |
//!
//! Errors are `{code, title, message}` with the status of the code's row in
//! [`holdpoint_domain::ErrorCode::spec`]. The idempotency key of an answer is the
//! `Idempotency-Key` header, else a digest of (person, operation, body): the same
//! person retrying the same body gets the same outcome.

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use holdpoint_domain::{
    AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ErrorBody, ErrorCode,
    IdempotencyKey, InteractionId, InteractionView, LaneId, MessageId, OptionAnswer, Outcome,
    Rejection, SessionId, State as IState, digest, rules::canonical_json,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{error, warn};

use crate::AppState;
use crate::identity::Caller;
use holdpoint_bus::outcome::WaitError;

/// An error answered as `{code, title, message}` with the code's status.
#[derive(Debug)]
pub struct ApiError {
    /// The stable code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        ApiError {
            code: r.code,
            message: r.message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let spec = self.code.spec();
        let body = ErrorBody::from(&Rejection::new(self.code, self.message));
        let status = StatusCode::from_u16(spec.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, Json(body)).into_response();
        if self.code == ErrorCode::Unavailable {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.code == ErrorCode::Unauthenticated {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    warn!(error = %e, "answering 503");
    ApiError::new(
        ErrorCode::Unavailable,
        "Holdpoint could not confirm the outcome in time; retry with the same idempotency key",
    )
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    error!(error = %e, "internal error");
    ApiError::new(ErrorCode::Internal, "internal error")
}

/// The API routes, each observed by [`crate::observe::layer`] (trace context,
/// request metrics).
pub fn routes(state: AppState) -> Router {
    use crate::observe::ANSWER_ROUTES;
    Router::new()
        .route(ANSWER_ROUTES[0], post(answer_question))
        .route(ANSWER_ROUTES[1], post(approve))
        .route(ANSWER_ROUTES[2], post(respond))
        .route("/v1/interactions/{id}", get(get_interaction))
        .route("/v1/interactions", get(list_interactions))
        .route("/v1/sessions/{session_id}/messages", post(post_message))
        .merge(crate::a2a::routes())
        .merge(crate::sse::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::observe::layer,
        ))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::InvalidRequest,
                "method not allowed on this route",
            )
        })
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::new(ErrorCode::Internal, "internal error").into_response()
        }))
        .with_state(state)
}

/// The admin routes (`/healthz`, `/readyz`, `/metrics`; see [`crate::admin`]).
pub fn admin_routes(state: AppState) -> Router {
    crate::admin::router(state.admin())
}

/// Reads a JSON body: `application/json` only, at most the configured size, into a
/// typed struct that refuses unknown fields; repeated keys and deep nesting are
/// refused first by [`crate::json_guard`].
async fn json_body<T: DeserializeOwned>(
    state: &AppState,
    req: Request,
) -> Result<(T, Value), ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send the body as Content-Type: application/json",
        ));
    }
    let limit = state.cfg.body_limit;
    let bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the body is larger than {limit} bytes"),
            )
        })?;
    match crate::json_guard::check(&bytes) {
        Ok(()) | Err(crate::json_guard::Guard::Invalid) => {}
        Err(g) => return Err(ApiError::new(ErrorCode::InvalidRequest, g.to_string())),
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("the body is not valid JSON: {e}"),
        )
    })?;
    // The guard above already refused repeated keys and deep nesting, so the typed
    // body can come from the parsed value instead of a second parse of the bytes.
    let typed = T::deserialize(&value)
        .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, format!("invalid body: {e}")))?;
    Ok((typed, value))
}

fn idempotency_key(
    headers: &HeaderMap,
    caller: &Caller,
    op: &str,
    body: &Value,
) -> Result<IdempotencyKey, ApiError> {
    let mut given = headers.get_all("idempotency-key").iter();
    match (given.next(), given.next()) {
        (Some(_), Some(_)) => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "more than one Idempotency-Key header",
        )),
        (Some(v), None) => v
            .to_str()
            .ok()
            .and_then(|s| IdempotencyKey::parse(s).ok())
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "Idempotency-Key must be 1 to 128 printable ASCII characters",
                )
            }),
        (None, _) => {
            let d = digest(&[caller.person.as_str(), op, &canonical_json(body)]);
            IdempotencyKey::parse(format!("body-{}", &d[..40])).map_err(internal)
        }
    }
}

/// The `{id}` segment of a route, percent-decoded. Any extraction failure (e.g. bytes
/// that are not UTF-8) is a stable `400 NRY-0001`, like every other bad id.
#[derive(Debug)]
pub struct IdPath(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(IdPath(id)),
            Err(e) => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("invalid id in the path: {}", e.body_text()),
            )),
        }
    }
}

fn parse_id<T>(
    what: &str,
    parse: impl FnOnce(String) -> Result<T, holdpoint_domain::IdError>,
    raw: String,
) -> Result<T, ApiError> {
    parse(raw).map_err(|e| ApiError::new(ErrorCode::InvalidRequest, format!("invalid {what}: {e}")))
}

async fn submit(
    state: &AppState,
    env: CommandEnvelope,
    traceparent: Option<&str>,
) -> Result<Outcome, ApiError> {
    state
        .outcomes
        .submit_traced(&state.bus, &env, state.cfg.outcome_timeout, traceparent)
        .await
        .map_err(|e: WaitError| unavailable(e))
}

/// Submits a person's answer to `interaction_id` through `route` and maps the
/// outcome: 204 on success, the rejection's code otherwise.
async fn submit_answer(
    state: &AppState,
    caller: Caller,
    interaction_id: InteractionId,
    route: AnswerRoute,
    key: IdempotencyKey,
    input: AnswerInput,
    traceparent: Option<String>,
) -> Result<StatusCode, ApiError> {
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
        })),
    };
    let outcome = submit(state, env, traceparent.as_deref()).await?;
    match outcome.result {
        Ok(_) => Ok(StatusCode::NO_CONTENT),
        Err(r) => Err(r.into()),
    }
}

/// `POST /v1/questions/{questionId}/answer` body (seed 003).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// One entry per question, in the order asked (1 to 4): `options` are indices
    /// into the option list as `question-asked` sent it, `text` only where the
    /// question allows it.
    answers: Vec<OptionAnswer>,
}

async fn answer_question(
    State(state): State<AppState>,
    IdPath(question_id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("questionId", InteractionId::parse, question_id)?;
    let headers = req.headers().clone();
    let trace = crate::observe::trace_of(&req);
    let (body, raw): (AnswerBody, Value) = json_body(&state, req).await?;
    let key = idempotency_key(&headers, &caller, "answer", &raw)?;
    let input = AnswerInput::Answers {
        answers: body.answers,
    };
    submit_answer(&state, caller, id, AnswerRoute::Question, key, input, trace).await
}

/// `POST /v1/interactions/{id}/approve` body (seed 000: `approved`, or a boolean
/// `value`); exactly one of the two.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApproveBody {
    /// `true` releases the held call exactly as shown; `false` fails it as
    /// `tool.denied`.
    #[serde(default)]
    approved: Option<bool>,
    /// A boolean reads as `approved`; anything else is `NRY-0001`.
    #[serde(default)]
    value: Option<Value>,
    /// Travels with the decision.
    #[serde(default)]
    reason: Option<String>,
    /// `call.argumentsDigest` of `GET /v1/interactions/{id}`: when the held
    /// arguments are not those, the answer is `409 NRY-0010`.
    #[serde(default)]
    arguments_digest: Option<String>,
}

async fn approve(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("interactionId", InteractionId::parse, id)?;
    let headers = req.headers().clone();
    let trace = crate::observe::trace_of(&req);
    let (body, raw): (ApproveBody, Value) = json_body(&state, req).await?;
    let input = match (body.approved, body.value) {
        (Some(approved), None) => AnswerInput::Approved {
            approved,
            reason: body.reason,
            arguments_digest: body.arguments_digest,
        },
        (None, Some(value)) => AnswerInput::Value {
            value,
            reason: body.reason,
        },
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "give exactly one of `approved` (boolean) or `value`",
            ));
        }
    };
    let key = idempotency_key(&headers, &caller, "approve", &raw)?;
    submit_answer(&state, caller, id, AnswerRoute::Approve, key, input, trace).await
}

/// `POST /v1/interactions/{id}/respond` body (seed 000: `value`, or `approved`
/// read as the value); exactly one of the two.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RespondBody {
    /// Any JSON, read by the interaction's kind (`{"answers": [...]}` is checked
    /// like the answer body; `{"connected": true}` or `true` connects).
    #[serde(default)]
    value: Option<Value>,
    /// Read as the value.
    #[serde(default)]
    approved: Option<bool>,
    /// Travels with the answer.
    #[serde(default)]
    reason: Option<String>,
}

async fn respond(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("interactionId", InteractionId::parse, id)?;
    let headers = req.headers().clone();
    let trace = crate::observe::trace_of(&req);
    let (body, raw): (RespondBody, Value) = json_body(&state, req).await?;
    let input = match (body.value, body.approved) {
        (Some(value), None) => AnswerInput::Value {
            value,
            reason: body.reason,
        },
        (None, Some(approved)) => AnswerInput::Approved {
            approved,
            reason: body.reason,
            arguments_digest: None,
        },
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "give exactly one of `value` or `approved`",
            ));
        }
    };
    let key = idempotency_key(&headers, &caller, "respond", &raw)?;
    submit_answer(&state, caller, id, AnswerRoute::Respond, key, input, trace).await
}

async fn get_interaction(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<InteractionView>, ApiError> {
    let id = parse_id("interactionId", InteractionId::parse, id)?;
    let loaded = state
        .bus
        .load_interaction(&caller.org, &id)
        .await
        .map_err(unavailable)?;
    match loaded.value {
        Some(i) => Ok(Json(i.view())),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no interaction {id}"),
        )),
    }
}

/// Query of `GET /v1/interactions`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `pending` (default), `resolved`, `finished`, `closed` or `all`.
    #[serde(default)]
    state: Option<String>,
    /// Page size, 1 to 500 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_PAGE)))]
    limit: Option<usize>,
    /// The previous page's `nextCursor`.
    #[serde(default)]
    cursor: Option<String>,
}

/// A page of interactions, in the order of their last change (for pending ones:
/// the order they were opened).
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// The interactions.
    pub items: Vec<InteractionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Largest page.
pub const MAX_PAGE: usize = 500;

/// Most records one listing request reads; a page may come back short (even empty)
/// with a `nextCursor` to continue from.
pub const SCAN_CAP: usize = 10_000;

async fn list_interactions(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.body_text()))?;
    let wanted: Option<IState> = match q.state.as_deref().unwrap_or("pending") {
        "all" => None,
        s => Some(
            serde_json::from_value(Value::String(s.to_owned())).map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "state is one of pending, resolved, finished, closed, all",
                )
            })?,
        ),
    };
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("limit is 1 to {MAX_PAGE}"),
        ));
    }
    let after = match q.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::new(ErrorCode::InvalidRequest, "invalid cursor"))?,
    };
    let page = state
        .bus
        .list_page(
            holdpoint_bus::records::Bucket::Interactions,
            &caller.org,
            |i: &holdpoint_domain::Interaction| wanted.is_none_or(|w| i.state == w),
            after,
            limit,
            SCAN_CAP,
        )
        .await
        .map_err(unavailable)?;
    Ok(Json(Page {
        items: page.items.iter().map(|i| i.view()).collect(),
        next_cursor: page.next_after.map(|n| n.to_string()),
    }))
}

/// `POST /v1/sessions/{sessionId}/messages` body: a person's message on a
/// session's lane (the message road's createMessage).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MessageBody {
    /// What the person writes.
    text: String,
    /// The lane (default `main`).
    #[serde(default)]
    lane: Option<String>,
    /// The message id, the idempotency key on the lane (default: a new UUID).
    #[serde(default)]
    message_id: Option<String>,
}

/// Accepted message.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageAccepted {
    /// The message id.
    pub message_id: String,
    /// `admitted`: its turn started.
    pub admission: String,
}

async fn post_message(
    State(state): State<AppState>,
    IdPath(session_id): IdPath,
    caller: Caller,
    req: Request<Body>,
) -> Result<(StatusCode, Json<MessageAccepted>), ApiError> {
    let session = parse_id("sessionId", SessionId::parse, session_id)?;
    let trace = crate::observe::trace_of(&req);
    let (body, _raw): (MessageBody, Value) = json_body(&state, req).await?;
    let lane = parse_id(
        "lane",
        LaneId::parse,
        body.lane.unwrap_or_else(|| "main".into()),
    )?;
    let message_id = parse_id(
        "messageId",
        MessageId::parse,
        body.message_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
    )?;
    let env = CommandEnvelope {
        org: caller.org,
        command: Command::Message {
            session,
            lane,
            message_id: message_id.clone(),
            by: caller.person,
            text: body.text,
        },
    };
    let outcome = submit(&state, env, trace.as_deref()).await?;
    match outcome.result {
        Ok(_) => Ok((
            StatusCode::ACCEPTED,
            Json(MessageAccepted {
                message_id: message_id.to_string(),
                admission: "admitted".into(),
            }),
        )),
        Err(r) => Err(r.into()),
    }
}

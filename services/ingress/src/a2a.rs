//! Holdpoint as an A2A v1.0 server for paused tasks, with the interactions/v1
//! extension of seed 000.
//!
//! - `GET /.well-known/agent-card.json` (public): the agent card. One JSON-RPC
//!   interface at `<base>/a2a`, protocol version 1.0, streaming, the extension
//!   [`EXTENSION_URI`], and a bearer-JWT security scheme. `<base>` is
//!   [`IngressConfig::public_url`](crate::IngressConfig::public_url) when set, else
//!   derived from the request's `Host`.
//! - `POST /a2a` (JSON-RPC 2.0, same identity as the REST API): `SendMessage`,
//!   `SendStreamingMessage`, `GetTask`, `SubscribeToTask`, `ListTasks`,
//!   `CancelTask` (always `TaskNotCancelableError`: Holdpoint does not run
//!   tasks). Push notifications and the extended card are not offered.
//!
//! **The task view.** Holdpoint keeps no task store: a task is what its last
//! `task-status` event on `hp.evt.<org>.<task>.task-status` says, read from the
//! events stream ([`load_view`]). The subject is built from the caller's
//! organisation, so another organisation's task is simply not found. When that
//! event names an open interaction that the interactions bucket no longer holds
//! as pending (answered, or closed by the host), the view is `TASK_STATE_WORKING`.
//! A waiting task shows `TASK_STATE_AUTH_REQUIRED` or `TASK_STATE_INPUT_REQUIRED`
//! with an agent message whose text part is the prompt; when the caller activated
//! the extension, the message also lists [`EXTENSION_URI`] and carries
//! `metadata[URI] = {interactionId, kind, prompt, detail}` (never arguments).
//!
//! **Answers** ([`read_message`]): a message on the task (`taskId` required,
//! `contextId` must match) whose `messageId` is the idempotency key. With the
//! extension, `metadata[URI]` may name the `interactionId` and carry `approved`
//! or `value`; otherwise one part answers: a data part `{approved: bool}` is an
//! approval decision, any other data part a value, a text part text (which never
//! approves). The worker reads the input against the interaction's kind
//! ([`holdpoint_domain::rules::read_answer`]).
//!
//! **Errors** are JSON-RPC error objects with HTTP 200 (authentication aside:
//! 401 `NRY-0011` before any JSON-RPC is read). `error.data` is the list of
//! typed details the A2A SDKs read: one `google.rpc.ErrorInfo` whose `metadata`
//! carries the Holdpoint `code` (`NRY-xxxx`), its `title` and `retryable`.

use std::collections::{BTreeMap, HashMap};

use a2a_lf::{
    A2AError, AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill,
    CancelTaskRequest, GetTaskRequest, HttpAuthSecurityScheme, JsonRpcId, JsonRpcRequest,
    JsonRpcResponse, ListTasksRequest, ListTasksResponse, Message, Part, PartContent, Role,
    SecurityScheme, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskStatus, TaskStatusUpdateEvent, TypedDetail, error_code,
    errordetails, methods,
};
use async_nats::jetstream::consumer;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri, header};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use holdpoint_domain::event::{OpenInteractionRef, TaskStatusData};
use holdpoint_domain::{
    AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ContextId, EXTENSION_URI,
    ErrorCode, Event, EventData, IdempotencyKey, InteractionId, OrgId, Rejection, State as IState,
    TaskId, TaskState as DTaskState,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tracing::{error, warn};

use crate::AppState;
use crate::api::ApiError;
use crate::identity::Caller;
use crate::sse::{self, Start, Stored};

/// Path of the agent card (A2A discovery).
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
/// Path of the JSON-RPC endpoint.
pub const JSONRPC_PATH: &str = "/a2a";
/// Request header naming the A2A protocol version the client speaks.
pub const VERSION_HEADER: &str = "a2a-version";
/// Request header activating extensions (comma-separated URIs); echoed on responses
/// with the activated ones.
pub const EXTENSIONS_HEADER: &str = "a2a-extensions";
/// The older name of [`EXTENSIONS_HEADER`] (A2A 0.3), also accepted and echoed.
pub const LEGACY_EXTENSIONS_HEADER: &str = "x-a2a-extensions";
/// Largest `ListTasks` page.
pub const MAX_TASK_PAGE: usize = 100;
/// Default `ListTasks` page.
pub const DEFAULT_TASK_PAGE: usize = 50;

/// The routes of this module (added to the API router).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(AGENT_CARD_PATH, get(agent_card))
        .route(JSONRPC_PATH, post(jsonrpc))
}

// ───────────────────────────── agent card ─────────────────────────────

/// The base URL to advertise: the configured public URL, else the request's
/// `Host` (scheme from `X-Forwarded-Proto` when it says `https`).
fn base_url(state: &AppState, headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(url) = &state.cfg.public_url {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))?;
    let valid = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
    if !valid {
        return None;
    }
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
    {
        Some(p) if p.trim().eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    Some(format!("{scheme}://{host}"))
}

/// Holdpoint's agent card for the JSON-RPC endpoint at `base` + [`JSONRPC_PATH`].
pub fn card(base: &str) -> AgentCard {
    let modes = vec!["text/plain".to_owned(), "application/json".to_owned()];
    AgentCard {
        name: "Holdpoint".into(),
        description: "Answers for AI agents' paused tasks. A task waits here while a tool \
                      call is held for approval, the agent asked a question, or it asked \
                      for an app to be connected; answer it with a message on the same task."
            .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![AgentInterface::new(
            format!("{base}{JSONRPC_PATH}"),
            a2a_lf::TRANSPORT_PROTOCOL_JSONRPC,
        )],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Some(vec![AgentExtension {
                uri: EXTENSION_URI.into(),
                description: Some(
                    "interactions/v1: the status message of a waiting task carries the open \
                     interaction (interactionId, kind, prompt, detail) in its metadata; an \
                     answer names it and gives `approved` or `value`."
                        .into(),
                ),
                required: Some(false),
                params: None,
            }]),
            extended_agent_card: Some(false),
        },
        default_input_modes: modes.clone(),
        default_output_modes: modes.clone(),
        skills: vec![AgentSkill {
            id: "answer-interactions".into(),
            name: "Answer paused tool calls".into(),
            description: "Approve or deny a held tool call, answer an agent's question, or \
                          report whether an app was connected. Each answer resolves exactly once."
                .into(),
            tags: vec![
                "approval".into(),
                "question".into(),
                "connection".into(),
                "human-in-the-loop".into(),
            ],
            examples: None,
            input_modes: Some(modes.clone()),
            output_modes: Some(modes),
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: Some(HashMap::from([(
            "bearer".to_owned(),
            SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
                scheme: "Bearer".into(),
                description: Some(
                    "A JWT from the configured identity provider (subject = the person, an \
                     organisation claim)."
                        .into(),
                ),
                bearer_format: Some("JWT".into()),
            }),
        )])),
        security_requirements: Some(vec![HashMap::from([("bearer".to_owned(), Vec::new())])]),
        signatures: None,
    }
}

async fn agent_card(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    match base_url(&state, &headers, &uri) {
        Some(base) => {
            let mut resp = Json(card(&base)).into_response();
            resp.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            );
            // Without a configured public URL the card is built from the request's
            // host and scheme: caches must keep one copy per host and scheme.
            if state.cfg.public_url.is_none() {
                resp.headers_mut().insert(
                    header::VARY,
                    HeaderValue::from_static("Host, X-Forwarded-Host, X-Forwarded-Proto"),
                );
            }
            resp
        }
        None => ApiError::new(
            ErrorCode::InvalidRequest,
            "a valid Host header is required to describe this server",
        )
        .into_response(),
    }
}

// ───────────────────────────── protocol headers ─────────────────────────────

/// What the request's service parameters asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// The activated extensions (only ones Holdpoint supports).
    pub activated: Vec<String>,
    /// The request used the older `X-A2A-Extensions` header.
    pub legacy: bool,
}

impl Negotiated {
    /// Reads `A2A-Extensions` and `X-A2A-Extensions` (each possibly repeated, each a
    /// comma-separated list of URIs). Unknown URIs are ignored, as A2A asks.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut requested = Vec::new();
        let mut legacy = false;
        for (name, is_legacy) in [(EXTENSIONS_HEADER, false), (LEGACY_EXTENSIONS_HEADER, true)] {
            for value in headers.get_all(name) {
                let Ok(value) = value.to_str() else { continue };
                legacy |= is_legacy;
                requested.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        let activated = if requested.iter().any(|u| u == EXTENSION_URI) {
            vec![EXTENSION_URI.to_owned()]
        } else {
            Vec::new()
        };
        Negotiated { activated, legacy }
    }

    /// True when the interactions extension is active for this request.
    pub fn interactions(&self) -> bool {
        self.activated.iter().any(|u| u == EXTENSION_URI)
    }

    /// Adds the echo headers to `resp`.
    fn echo(&self, mut resp: Response) -> Response {
        if self.activated.is_empty() {
            return resp;
        }
        if let Ok(v) = HeaderValue::from_str(&self.activated.join(", ")) {
            resp.headers_mut()
                .insert(HeaderName::from_static(EXTENSIONS_HEADER), v.clone());
            if self.legacy {
                resp.headers_mut()
                    .insert(HeaderName::from_static(LEGACY_EXTENSIONS_HEADER), v);
            }
        }
        resp
    }
}

/// Checks `A2A-Version`: absent, `1`, `1.0` or `1.0.<patch>` are this server's
/// version; anything else is `VersionNotSupportedError`.
pub fn check_version(headers: &HeaderMap) -> Result<(), RpcError> {
    let mut values = headers.get_all(VERSION_HEADER).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Ok(()),
        (Some(v), None) => v.to_str().unwrap_or("").trim(),
        (Some(_), Some(_)) => {
            return Err(RpcError::new(
                error_code::VERSION_NOT_SUPPORTED,
                "send one A2A-Version header; this server speaks 1.0",
            ));
        }
    };
    let mut parts = value.split('.');
    let ok = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("1"), None, _, _) | (Some("1"), Some("0"), None, _) => true,
        (Some("1"), Some("0"), Some(patch), None) => {
            !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(RpcError::new(
            error_code::VERSION_NOT_SUPPORTED,
            format!("A2A version {value:?} is not supported; this server speaks 1.0"),
        ))
    }
}

// ───────────────────────────── errors ─────────────────────────────

/// A JSON-RPC error with the Holdpoint code behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// JSON-RPC / A2A error code (`-32001` ...).
    pub code: i32,
    /// Message for a person.
    pub message: String,
    /// The Holdpoint code carried in `error.data`.
    pub holdpoint: ErrorCode,
}

impl RpcError {
    /// An error whose Holdpoint code follows from `code`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        let holdpoint = match code {
            error_code::TASK_NOT_FOUND => ErrorCode::NotFound,
            error_code::UNSUPPORTED_OPERATION => ErrorCode::UnsupportedOperation,
            error_code::INTERNAL_ERROR => ErrorCode::Internal,
            _ => ErrorCode::InvalidRequest,
        };
        RpcError {
            code,
            message: message.into(),
            holdpoint,
        }
    }

    /// Sets the Holdpoint code.
    pub fn with_code(mut self, holdpoint: ErrorCode) -> Self {
        self.holdpoint = holdpoint;
        self
    }

    fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(error_code::INVALID_PARAMS, message)
    }

    fn task_not_found(task: &str) -> Self {
        RpcError::new(error_code::TASK_NOT_FOUND, format!("task {task} not found"))
    }

    fn unavailable(e: impl std::fmt::Display) -> Self {
        warn!(error = %e, "A2A: NATS unavailable");
        RpcError::new(
            error_code::INTERNAL_ERROR,
            "Holdpoint could not reach its store in time; retry (with the same messageId)",
        )
        .with_code(ErrorCode::Unavailable)
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        error!(error = %e, "A2A: internal error");
        RpcError::new(error_code::INTERNAL_ERROR, "internal error")
    }

    /// The worker's refusal, mapped: `NRY-0004` is `TaskNotFoundError`, `NRY-0020`
    /// `UnsupportedOperationError`, `NRY-0050`/`NRY-0051` internal errors, anything
    /// else invalid params; the Holdpoint code travels in `data`.
    pub fn from_rejection(r: Rejection) -> Self {
        let code = match r.code {
            ErrorCode::NotFound => error_code::TASK_NOT_FOUND,
            ErrorCode::UnsupportedOperation => error_code::UNSUPPORTED_OPERATION,
            ErrorCode::Unavailable | ErrorCode::Internal => error_code::INTERNAL_ERROR,
            _ => error_code::INVALID_PARAMS,
        };
        RpcError {
            code,
            message: r.message,
            holdpoint: r.code,
        }
    }

    /// The JSON-RPC error object: `data` is `[ErrorInfo]` with the A2A reason and
    /// `metadata {code, title, retryable, timestamp}`.
    pub fn to_jsonrpc(&self) -> a2a_lf::JsonRpcError {
        let spec = self.holdpoint.spec();
        let metadata = HashMap::from([
            ("code".to_owned(), spec.code.to_owned()),
            ("title".to_owned(), spec.title.to_owned()),
            (
                "retryable".to_owned(),
                self.holdpoint.retryable().to_string(),
            ),
        ]);
        A2AError::new(self.code, self.message.clone())
            .with_details(vec![TypedDetail::error_info(
                a2a_lf::error_reason(self.code),
                errordetails::PROTOCOL_DOMAIN,
                Some(metadata),
            )])
            .to_jsonrpc_error()
    }
}

// ───────────────────────────── dispatch ─────────────────────────────

/// One JSON-RPC call: who, what they activated, and the state.
struct Ctx {
    state: AppState,
    caller: Caller,
    negotiated: Negotiated,
    /// The request's `traceparent` (see [`crate::observe`]), carried on commands.
    traceparent: Option<String>,
}

fn rpc_error_response(neg: &Negotiated, id: JsonRpcId, e: &RpcError) -> Response {
    let mut resp = Json(JsonRpcResponse::error(id, e.to_jsonrpc())).into_response();
    if e.holdpoint == ErrorCode::Unavailable {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    neg.echo(resp)
}

fn rpc_ok_response(neg: &Negotiated, id: JsonRpcId, result: Value) -> Response {
    neg.echo(Json(JsonRpcResponse::success(id, result)).into_response())
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || v == "application/a2a+json")
}

async fn jsonrpc(State(state): State<AppState>, caller: Caller, req: Request) -> Response {
    let headers = req.headers().clone();
    let traceparent = crate::observe::trace_of(&req);
    let negotiated = Negotiated::from_headers(&headers);
    let fail = |id: JsonRpcId, e: RpcError| rpc_error_response(&negotiated, id, &e);
    if !is_json(&headers) {
        return fail(
            JsonRpcId::Null,
            RpcError::new(
                error_code::INVALID_REQUEST,
                "send the JSON-RPC request as Content-Type: application/json",
            )
            .with_code(ErrorCode::UnsupportedMediaType),
        );
    }
    let limit = state.cfg.body_limit;
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), limit).await else {
        return fail(
            JsonRpcId::Null,
            RpcError::new(
                error_code::INVALID_REQUEST,
                format!("the request is larger than {limit} bytes"),
            )
            .with_code(ErrorCode::PayloadTooLarge),
        );
    };
    let raw: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return fail(
                JsonRpcId::Null,
                RpcError::new(error_code::PARSE_ERROR, format!("invalid JSON: {e}")),
            );
        }
    };
    if let Err(guard) = crate::json_guard::check(&bytes) {
        let depth = guard.depth();
        // A repeated key would otherwise be read last-wins (a second `approved`
        // deciding, a second `messageId` keying): refuse, like the REST bodies do.
        let id = raw
            .get("id")
            .cloned()
            .and_then(|v| serde_json::from_value::<JsonRpcId>(v).ok())
            .unwrap_or(JsonRpcId::Null);
        let code = if depth == 0 {
            error_code::INVALID_REQUEST
        } else {
            error_code::INVALID_PARAMS
        };
        return fail(
            id,
            RpcError::new(code, "the request repeats a JSON key")
                .with_code(ErrorCode::InvalidRequest),
        );
    }
    if raw.is_array() {
        return fail(
            JsonRpcId::Null,
            RpcError::new(
                error_code::INVALID_REQUEST,
                "batch requests are not supported",
            ),
        );
    }
    let best_id = raw
        .get("id")
        .cloned()
        .and_then(|v| serde_json::from_value::<JsonRpcId>(v).ok())
        .unwrap_or(JsonRpcId::Null);
    let request: JsonRpcRequest = match serde_json::from_value(raw) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                best_id,
                RpcError::new(
                    error_code::INVALID_REQUEST,
                    format!("not a JSON-RPC 2.0 request: {e}"),
                ),
            );
        }
    };
    let id = request.id.clone();
    if request.jsonrpc != "2.0" {
        return fail(
            id,
            RpcError::new(error_code::INVALID_REQUEST, "jsonrpc must be \"2.0\""),
        );
    }
    if let Err(e) = check_version(&headers) {
        return fail(id, e);
    }
    let ctx = Ctx {
        state,
        caller,
        negotiated: negotiated.clone(),
        traceparent,
    };
    let params = request.params.unwrap_or(Value::Null);
    let result = match request.method.as_str() {
        methods::SEND_MESSAGE => send_message(&ctx, params).await,
        methods::GET_TASK => get_task(&ctx, params).await,
        methods::LIST_TASKS => list_tasks(&ctx, params).await,
        methods::CANCEL_TASK => cancel_task(&ctx, params).await,
        methods::SEND_STREAMING_MESSAGE => {
            return match send_streaming_message(&ctx, id.clone(), params).await {
                Ok(resp) => negotiated.echo(resp),
                Err(e) => fail(id, e),
            };
        }
        methods::SUBSCRIBE_TO_TASK => {
            return match subscribe_to_task(&ctx, id.clone(), params).await {
                Ok(resp) => negotiated.echo(resp),
                Err(e) => fail(id, e),
            };
        }
        methods::CREATE_PUSH_CONFIG
        | methods::GET_PUSH_CONFIG
        | methods::LIST_PUSH_CONFIGS
        | methods::DELETE_PUSH_CONFIG => Err(RpcError::new(
            error_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported; stream with SubscribeToTask or GET /v1/events",
        )),
        methods::GET_EXTENDED_AGENT_CARD => Err(RpcError::new(
            error_code::UNSUPPORTED_OPERATION,
            "there is no extended agent card",
        )),
        other => Err(RpcError::new(
            error_code::METHOD_NOT_FOUND,
            format!("method {other:?} not found"),
        )),
    };
    match result {
        Ok(value) => rpc_ok_response(&negotiated, id, value),
        Err(e) => fail(id, e),
    }
}

fn parse_params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { json!({}) } else { params };
    if !params.is_object() {
        return Err(RpcError::invalid_params("params must be an object"));
    }
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(RpcError::internal)
}

fn parse_task_id(raw: String) -> Result<TaskId, RpcError> {
    TaskId::parse(raw).map_err(|e| RpcError::invalid_params(format!("invalid task id: {e}")))
}

// ───────────────────────────── the task view ─────────────────────────────

/// What a task waits for, from its last `task-status` event.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// The task.
    pub task_id: TaskId,
    /// Its context.
    pub context_id: ContextId,
    /// Its state.
    pub state: DTaskState,
    /// The open interaction, while it waits.
    pub interaction: Option<OpenInteractionRef>,
    /// When the status was set.
    pub at: OffsetDateTime,
    /// The status event's sequence in the events stream (0 when derived).
    pub sequence: u64,
}

impl TaskView {
    fn from_status(data: TaskStatusData, at: OffsetDateTime, sequence: u64) -> Self {
        TaskView {
            task_id: data.task_id,
            context_id: data.context_id,
            state: data.state,
            interaction: data.interaction,
            at,
            sequence,
        }
    }

    /// True while the task waits for a person.
    pub fn waiting(&self) -> bool {
        self.state != DTaskState::Working && self.interaction.is_some()
    }

    fn key(&self) -> (DTaskState, Option<InteractionId>) {
        (
            self.state,
            self.interaction.as_ref().map(|i| i.interaction_id.clone()),
        )
    }
}

fn decode_status(payload: &[u8]) -> Option<(Event, TaskStatusData)> {
    let event: Event = serde_json::from_slice(payload).ok()?;
    match event.body.clone() {
        EventData::TaskStatus(data) => Some((event, data)),
        _ => None,
    }
}

/// The task `org/task` as its last `task-status` event shows it (see the module
/// docs); `None` when the organisation has no such task.
///
/// # Errors
/// [`RpcError`] (internal, retryable) when NATS does not answer.
pub async fn load_view(
    state: &AppState,
    org: &OrgId,
    task: &TaskId,
) -> Result<Option<TaskView>, RpcError> {
    let subject = sse::event_filter(&state.bus.topo, org, Some(task), Some("task-status"));
    let stream = state
        .bus
        .js
        .get_stream_no_info(state.bus.topo.events_stream())
        .await
        .map_err(RpcError::unavailable)?;
    let msg = match stream.get_last_raw_message_by_subject(&subject).await {
        Ok(m) => m,
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(e) => return Err(RpcError::unavailable(e)),
    };
    let Some((event, data)) = decode_status(&msg.payload) else {
        return Err(RpcError::internal(format!(
            "undecodable task-status event at sequence {}",
            msg.sequence
        )));
    };
    if &event.orgid != org || &data.task_id != task {
        return Ok(None);
    }
    let mut view = TaskView::from_status(data, event.time, msg.sequence);
    if let Some(open) = &view.interaction {
        let loaded = state
            .bus
            .load_interaction(org, &open.interaction_id)
            .await
            .map_err(RpcError::unavailable)?;
        if loaded.value.is_some_and(|i| i.state != IState::Pending) {
            // Answered or closed: the runtime carries on.
            view.state = DTaskState::Working;
            view.interaction = None;
        }
    }
    Ok(Some(view))
}

fn a2a_state(s: DTaskState) -> a2a_lf::TaskState {
    match s {
        DTaskState::AuthRequired => a2a_lf::TaskState::AuthRequired,
        DTaskState::InputRequired => a2a_lf::TaskState::InputRequired,
        DTaskState::Working => a2a_lf::TaskState::Working,
    }
}

fn timestamp(t: OffsetDateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

/// The agent's status message for a waiting task: the prompt as text; with the
/// extension, also `extensions: [URI]` and `metadata[URI]`.
pub fn status_message(
    task: &TaskId,
    context: &ContextId,
    open: &OpenInteractionRef,
    extension: bool,
) -> Message {
    let (extensions, metadata) = if extension {
        let body = json!({
            "interactionId": open.interaction_id,
            "kind": open.kind,
            "prompt": open.prompt,
            "detail": open.detail,
        });
        (
            Some(vec![EXTENSION_URI.to_owned()]),
            Some(HashMap::from([(EXTENSION_URI.to_owned(), body)])),
        )
    } else {
        (None, None)
    };
    Message {
        message_id: format!("status-{}", open.interaction_id),
        context_id: Some(context.to_string()),
        task_id: Some(task.to_string()),
        role: Role::Agent,
        parts: vec![Part::text(open.prompt.clone())],
        metadata,
        extensions,
        reference_task_ids: None,
    }
}

fn a2a_status(view: &TaskView, extension: bool) -> TaskStatus {
    TaskStatus {
        state: a2a_state(view.state),
        message: view
            .interaction
            .as_ref()
            .filter(|_| view.state != DTaskState::Working)
            .map(|open| status_message(&view.task_id, &view.context_id, open, extension)),
        timestamp: timestamp(view.at),
    }
}

/// The A2A task for `view`.
pub fn a2a_task(view: &TaskView, extension: bool) -> Task {
    Task {
        id: view.task_id.to_string(),
        context_id: view.context_id.to_string(),
        status: a2a_status(view, extension),
        artifacts: None,
        history: None,
        metadata: None,
    }
}

fn status_update(view: &TaskView, extension: bool) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: view.task_id.to_string(),
        context_id: view.context_id.to_string(),
        status: a2a_status(view, extension),
        metadata: None,
    })
}

// ───────────────────────────── GetTask, ListTasks, CancelTask ─────────────────────────────

async fn get_task(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: GetTaskRequest = parse_params(params)?;
    let task = parse_task_id(req.id)?;
    match load_view(&ctx.state, &ctx.caller.org, &task).await? {
        Some(view) => to_json(&a2a_task(&view, ctx.negotiated.interactions())),
        None => Err(RpcError::task_not_found(task.as_str())),
    }
}

async fn cancel_task(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: CancelTaskRequest = parse_params(params)?;
    let task = parse_task_id(req.id)?;
    match load_view(&ctx.state, &ctx.caller.org, &task).await? {
        Some(_) => Err(RpcError::new(
            error_code::TASK_NOT_CANCELABLE,
            format!(
                "task {task} runs in the agent runtime, not in Holdpoint: cancel it there \
                 (Holdpoint only holds what it waits for)"
            ),
        )),
        None => Err(RpcError::task_not_found(task.as_str())),
    }
}

fn page_cursor(at: OffsetDateTime, task: &TaskId) -> String {
    format!("{}~{}", at.unix_timestamp_nanos(), task)
}

fn parse_page_cursor(c: &str) -> Option<(i128, String)> {
    let (t, id) = c.split_once('~')?;
    Some((t.parse().ok()?, id.to_owned()))
}

/// `ListTasks`: the caller's organisation's tasks that wait for a person now (from
/// the pending interactions), most recently updated first.
async fn list_tasks(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: ListTasksRequest = parse_params(params)?;
    let size = match req.page_size {
        None | Some(0) => DEFAULT_TASK_PAGE,
        Some(n) if n > 0 && (n as usize) <= MAX_TASK_PAGE => n as usize,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "pageSize is 1 to {MAX_TASK_PAGE}"
            )));
        }
    };
    let after = match req.page_token.as_deref() {
        None | Some("") => None,
        Some(c) => Some(
            parse_page_cursor(c).ok_or_else(|| RpcError::invalid_params("invalid pageToken"))?,
        ),
    };
    let pending = ctx
        .state
        .bus
        .list_interactions(&ctx.caller.org)
        .await
        .map_err(RpcError::unavailable)?;
    // The newest pending interaction of each task is what the task waits for.
    let mut newest: BTreeMap<String, holdpoint_domain::Interaction> = BTreeMap::new();
    for i in pending.into_iter().filter(|i| i.state == IState::Pending) {
        let replace = newest
            .get(i.task_id.as_str())
            .is_none_or(|n| (n.opened_at, n.id.as_str()) < (i.opened_at, i.id.as_str()));
        if replace {
            newest.insert(i.task_id.to_string(), i);
        }
    }
    let mut views: Vec<TaskView> = newest
        .into_values()
        .map(|i| TaskView {
            task_id: i.task_id.clone(),
            context_id: i.context_id.clone(),
            state: i.kind().task_state(),
            interaction: Some(OpenInteractionRef {
                interaction_id: i.id.clone(),
                kind: i.kind(),
                prompt: i.prompt.clone(),
                detail: i.spec.detail(),
            }),
            at: i.opened_at,
            sequence: 0,
        })
        .filter(|v| {
            req.context_id
                .as_deref()
                .is_none_or(|c| v.context_id.as_str() == c)
                && req.status.as_ref().is_none_or(|s| {
                    *s == a2a_lf::TaskState::Unspecified || *s == a2a_state(v.state)
                })
                && req
                    .status_timestamp_after
                    .is_none_or(|t| timestamp(v.at).is_some_and(|at| at > t))
        })
        .collect();
    views.sort_by(|a, b| {
        (b.at.unix_timestamp_nanos(), b.task_id.as_str())
            .cmp(&(a.at.unix_timestamp_nanos(), a.task_id.as_str()))
    });
    let total = views.len();
    let start = match &after {
        Some((t, id)) => views
            .iter()
            .position(|v| (v.at.unix_timestamp_nanos(), v.task_id.as_str()) < (*t, id.as_str()))
            .unwrap_or(total),
        None => 0,
    };
    let page: Vec<&TaskView> = views.iter().skip(start).take(size).collect();
    let next_page_token = match page.last() {
        Some(last) if start + page.len() < total => page_cursor(last.at, &last.task_id),
        _ => String::new(),
    };
    let ext = ctx.negotiated.interactions();
    to_json(&ListTasksResponse {
        tasks: page.iter().map(|v| a2a_task(v, ext)).collect(),
        next_page_token,
        page_size: i32::try_from(size).unwrap_or(i32::MAX),
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
    })
}

// ───────────────────────────── answers ─────────────────────────────

/// How a message answers: the interaction it names (if any) and the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// `metadata[URI].interactionId`, when the message names one.
    pub interaction: Option<InteractionId>,
    /// What the person sent.
    pub input: AnswerInput,
}

const META_FIELDS: [&str; 4] = ["interactionId", "approved", "value", "reason"];

/// Reads an answer message (see the module docs). `extension` says whether the
/// interactions extension is active for it (activated by header, or listed in the
/// message's `extensions`). Pure: bad input is refused before anything is sent.
///
/// # Errors
/// Invalid params for a message that cannot answer; `ContentTypeNotSupportedError`
/// for file parts.
pub fn read_message(msg: &Message, extension: bool) -> Result<Reading, RpcError> {
    let meta = msg.metadata.as_ref().and_then(|m| m.get(EXTENSION_URI));
    let Some(meta) = meta else {
        return Ok(Reading {
            interaction: None,
            input: read_parts(&msg.parts)?,
        });
    };
    if !extension {
        return Err(RpcError::invalid_params(format!(
            "the message carries metadata under {EXTENSION_URI}: activate the extension \
             (A2A-Extensions header) or list it in the message's extensions"
        )));
    }
    let Some(obj) = meta.as_object() else {
        return Err(RpcError::invalid_params(format!(
            "metadata[{EXTENSION_URI}] must be an object"
        )));
    };
    if let Some(unknown) = obj.keys().find(|k| !META_FIELDS.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "metadata[{EXTENSION_URI}] has an unknown field {unknown:?}; it takes interactionId \
             and approved or value (and an optional reason)"
        )));
    }
    let interaction = match obj.get("interactionId") {
        None => None,
        Some(Value::String(s)) => Some(
            InteractionId::parse(s.clone())
                .map_err(|e| RpcError::invalid_params(format!("invalid interactionId: {e}")))?,
        ),
        Some(_) => return Err(RpcError::invalid_params("interactionId must be a string")),
    };
    let reason = match obj.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(RpcError::invalid_params("reason must be a string")),
    };
    let input = match (obj.get("approved"), obj.get("value")) {
        (Some(_), Some(_)) => {
            return Err(RpcError::invalid_params(
                "give either approved or value, not both",
            ));
        }
        (Some(Value::Bool(approved)), None) => AnswerInput::Approved {
            approved: *approved,
            reason,
            arguments_digest: None,
        },
        (Some(_), None) => return Err(RpcError::invalid_params("approved must be a boolean")),
        (None, Some(value)) => AnswerInput::Value {
            value: value.clone(),
            reason,
        },
        (None, None) => read_parts(&msg.parts)?,
    };
    Ok(Reading { interaction, input })
}

fn read_parts(parts: &[Part]) -> Result<AnswerInput, RpcError> {
    if parts
        .iter()
        .any(|p| matches!(p.content, PartContent::Raw(_) | PartContent::Url(_)))
    {
        return Err(RpcError::new(
            error_code::CONTENT_TYPE_NOT_SUPPORTED,
            "file parts cannot answer an interaction; send one text or data part",
        ));
    }
    let [part] = parts else {
        return Err(RpcError::invalid_params(format!(
            "send exactly one text or data part (got {})",
            parts.len()
        )));
    };
    Ok(match &part.content {
        PartContent::Text(text) => AnswerInput::Text { text: text.clone() },
        PartContent::Data(value) => match value.as_object() {
            Some(o)
                if o.get("approved").is_some_and(Value::is_boolean)
                    && o.keys().all(|k| k == "approved" || k == "reason")
                    && o.get("reason").is_none_or(Value::is_string) =>
            {
                AnswerInput::Approved {
                    approved: o.get("approved").and_then(Value::as_bool).unwrap_or(false),
                    reason: o.get("reason").and_then(Value::as_str).map(str::to_owned),
                    arguments_digest: None,
                }
            }
            _ => AnswerInput::Value {
                value: value.clone(),
                reason: None,
            },
        },
        PartContent::Raw(_) | PartContent::Url(_) => {
            return Err(RpcError::new(
                error_code::CONTENT_TYPE_NOT_SUPPORTED,
                "file parts cannot answer an interaction",
            ));
        }
    })
}

/// Reads every `interaction-resolved` event of the task and returns the
/// interaction the key `key` resolved, if any: a retry of an answer that did not
/// name its interaction goes back to the one it answered.
async fn resolved_by_key(
    state: &AppState,
    org: &OrgId,
    task: &TaskId,
    key: &IdempotencyKey,
) -> Result<Option<InteractionId>, RpcError> {
    let filter = sse::event_filter(
        &state.bus.topo,
        org,
        Some(task),
        Some("interaction-resolved"),
    );
    let stream = state
        .bus
        .js
        .get_stream_no_info(state.bus.topo.events_stream())
        .await
        .map_err(RpcError::unavailable)?;
    let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter,
            deliver_policy: consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(RpcError::unavailable)?;
    if consumer.cached_info().num_pending == 0 {
        return Ok(None);
    }
    let mut messages = consumer.messages().await.map_err(RpcError::unavailable)?;
    let mut found = None;
    loop {
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), messages.next())
            .await
            .map_err(|_| RpcError::unavailable("reading resolutions timed out"))?;
        let Some(msg) = next else { break };
        let msg = msg.map_err(RpcError::unavailable)?;
        if let Ok(Event {
            body:
                EventData::InteractionResolved {
                    interaction_id,
                    key: k,
                    ..
                },
            ..
        }) = serde_json::from_slice::<Event>(&msg.payload)
            && &k == key
        {
            found = Some(interaction_id);
        }
        if msg.info().map(|i| i.pending).unwrap_or(0) == 0 {
            break;
        }
    }
    Ok(found)
}

/// Answers the task with `msg`: validates, finds the interaction, submits the
/// answer and waits for the worker's outcome. Returns the task as it now is.
async fn answer(ctx: &Ctx, req: SendMessageRequest) -> Result<Task, RpcError> {
    let msg = req.message;
    if msg.role != Role::User {
        return Err(RpcError::invalid_params(
            "an answer comes from the person: role must be ROLE_USER",
        ));
    }
    let key = IdempotencyKey::parse(msg.message_id.clone()).map_err(|_| {
        RpcError::invalid_params("messageId must be 1 to 128 printable ASCII characters")
    })?;
    let Some(raw_task) = msg.task_id.clone() else {
        return Err(RpcError::invalid_params(
            "taskId is required: Holdpoint only answers tasks that wait for a person",
        ));
    };
    let task = parse_task_id(raw_task)?;
    let context = match msg.context_id.clone() {
        Some(c) => Some(
            ContextId::parse(c)
                .map_err(|e| RpcError::invalid_params(format!("invalid contextId: {e}")))?,
        ),
        None => None,
    };
    let listed = msg
        .extensions
        .as_ref()
        .is_some_and(|l| l.iter().any(|u| u == EXTENSION_URI));
    let reading = read_message(&msg, ctx.negotiated.interactions() || listed)?;

    let org = &ctx.caller.org;
    let Some(view) = load_view(&ctx.state, org, &task).await? else {
        return Err(RpcError::task_not_found(task.as_str()));
    };
    if context.as_ref().is_some_and(|c| c != &view.context_id) {
        return Err(RpcError::invalid_params(
            "contextId does not match the task's context",
        ));
    }
    let open = view
        .interaction
        .as_ref()
        .filter(|_| view.waiting())
        .map(|o| o.interaction_id.clone());
    let target = match reading.interaction {
        Some(named) if open.as_ref() == Some(&named) => named,
        Some(named) => {
            // Not the open one: an earlier interaction of this task (the worker
            // replays or refuses), else an error; never a new message.
            let loaded = ctx
                .state
                .bus
                .load_interaction(org, &named)
                .await
                .map_err(RpcError::unavailable)?;
            match loaded.value {
                Some(i) if i.task_id == task => named,
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "interaction {named} is not one of task {task}'s"
                    ))
                    .with_code(ErrorCode::NotFound));
                }
            }
        }
        None => match resolved_by_key(&ctx.state, org, &task, &key).await? {
            Some(previous) => previous,
            None => match open {
                Some(open) => open,
                None => {
                    return Err(RpcError::invalid_params(format!(
                        "task {task} waits for no answer now (it is working)"
                    ))
                    .with_code(ErrorCode::AlreadySettled));
                }
            },
        },
    };
    let env = CommandEnvelope {
        org: org.clone(),
        command: Command::Answer(Box::new(AnswerCommand {
            interaction_id: target,
            route: AnswerRoute::A2a,
            key,
            by: ctx.caller.person.clone(),
            task_id: Some(task.clone()),
            context_id: Some(context.unwrap_or_else(|| view.context_id.clone())),
            input: reading.input,
        })),
    };
    let outcome = ctx
        .state
        .outcomes
        .submit_traced(
            &ctx.state.bus,
            &env,
            ctx.state.cfg.outcome_timeout,
            ctx.traceparent.as_deref(),
        )
        .await
        .map_err(RpcError::unavailable)?;
    match outcome.result {
        Ok(_) => Ok(a2a_task(
            &TaskView {
                task_id: task,
                context_id: view.context_id,
                state: DTaskState::Working,
                interaction: None,
                at: OffsetDateTime::now_utc(),
                sequence: 0,
            },
            false,
        )),
        Err(r) => Err(RpcError::from_rejection(r)),
    }
}

async fn send_message(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: SendMessageRequest = parse_params(params)?;
    let task = answer(ctx, req).await?;
    to_json(&SendMessageResponse::Task(task))
}

// ───────────────────────────── streams ─────────────────────────────

/// Status updates of a task from `after` on, as A2A stream responses. Repeats of
/// the state last sent are skipped; with `until_waiting`, the stream ends after
/// the first update that waits for a person.
fn updates(
    stored: BoxStream<'static, Stored>,
    last: (DTaskState, Option<InteractionId>),
    extension: bool,
    until_waiting: bool,
) -> BoxStream<'static, StreamResponse> {
    futures::stream::unfold(
        (stored, last, false),
        move |(mut stored, mut last, done)| async move {
            if done {
                return None;
            }
            loop {
                let s = stored.next().await?;
                let Some((event, data)) = decode_status(&s.payload) else {
                    warn!(
                        sequence = s.sequence,
                        "skipping an undecodable task-status event"
                    );
                    continue;
                };
                let view = TaskView::from_status(data, event.time, s.sequence);
                if view.key() == last {
                    continue;
                }
                last = view.key();
                let end = until_waiting && view.waiting();
                return Some((status_update(&view, extension), (stored, last, end)));
            }
        },
    )
    .boxed()
}

fn sse_items(
    id: JsonRpcId,
    first: Vec<StreamResponse>,
    rest: BoxStream<'static, StreamResponse>,
) -> Response {
    let events = futures::stream::iter(first).chain(rest).map(move |item| {
        let body = match serde_json::to_value(&item) {
            Ok(result) => JsonRpcResponse::success(id.clone(), result),
            Err(e) => JsonRpcResponse::error(id.clone(), RpcError::internal(e).to_jsonrpc()),
        };
        let data = serde_json::to_string(&body).unwrap_or_default();
        SseEvent::default().data(data)
    });
    sse::sse_response(events)
}

async fn task_stream(
    ctx: &Ctx,
    task: &TaskId,
    after: u64,
) -> Result<BoxStream<'static, Stored>, RpcError> {
    let filter = sse::event_filter(
        &ctx.state.bus.topo,
        &ctx.caller.org,
        Some(task),
        Some("task-status"),
    );
    sse::follow(&ctx.state, filter, Start::At(after + 1))
        .await
        .map_err(RpcError::unavailable)
}

/// `SubscribeToTask`: the task as it is now, then its status updates.
async fn subscribe_to_task(ctx: &Ctx, id: JsonRpcId, params: Value) -> Result<Response, RpcError> {
    let req: SubscribeToTaskRequest = parse_params(params)?;
    let task = parse_task_id(req.id)?;
    let Some(view) = load_view(&ctx.state, &ctx.caller.org, &task).await? else {
        return Err(RpcError::task_not_found(task.as_str()));
    };
    let stored = task_stream(ctx, &task, view.sequence).await?;
    let ext = ctx.negotiated.interactions();
    let rest = updates(stored, view.key(), ext, false);
    Ok(sse_items(
        id,
        vec![StreamResponse::Task(a2a_task(&view, ext))],
        rest,
    ))
}

/// `SendStreamingMessage`: answers as `SendMessage`, then streams the task
/// (`TASK_STATE_WORKING` first) until it waits for a person again.
async fn send_streaming_message(
    ctx: &Ctx,
    id: JsonRpcId,
    params: Value,
) -> Result<Response, RpcError> {
    let req: SendMessageRequest = parse_params(params)?;
    let answered = answer(ctx, req).await?;
    let task = parse_task_id(answered.id.clone())?;
    let ext = ctx.negotiated.interactions();
    let now = load_view(&ctx.state, &ctx.caller.org, &task).await?;
    let after = now.as_ref().map_or(0, |v| v.sequence);
    let stored = task_stream(ctx, &task, after).await?;
    let mut first = vec![StreamResponse::Task(answered)];
    let mut last = (DTaskState::Working, None);
    if let Some(v) = now.filter(|v| v.key() != last) {
        last = v.key();
        let waiting = v.waiting();
        first.push(status_update(&v, ext));
        if waiting {
            return Ok(sse_items(id, first, futures::stream::empty().boxed()));
        }
    }
    Ok(sse_items(id, first, updates(stored, last, ext, true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(parts: Vec<Part>, meta: Option<Value>) -> Message {
        Message {
            message_id: "m-1".into(),
            context_id: None,
            task_id: Some("t1".into()),
            role: Role::User,
            parts,
            metadata: meta.map(|m| HashMap::from([(EXTENSION_URI.to_owned(), m)])),
            extensions: None,
            reference_task_ids: None,
        }
    }

    #[test]
    fn parts_are_read_as_the_seed_says() {
        let r = read_message(
            &msg(vec![Part::data(json!({"approved": true}))], None),
            false,
        )
        .expect("reads");
        assert!(matches!(
            r.input,
            AnswerInput::Approved { approved: true, .. }
        ));
        let r = read_message(
            &msg(vec![Part::data(json!({"connected": true}))], None),
            false,
        )
        .expect("reads");
        assert_eq!(
            r.input,
            AnswerInput::Value {
                value: json!({"connected": true}),
                reason: None
            }
        );
        let r = read_message(&msg(vec![Part::text("main")], None), false).expect("reads");
        assert_eq!(
            r.input,
            AnswerInput::Text {
                text: "main".into()
            }
        );
        assert!(read_message(&msg(vec![], None), false).is_err());
        assert!(read_message(&msg(vec![Part::text("a"), Part::text("b")], None), false).is_err());
        let e = read_message(&msg(vec![Part::url("https://x")], None), false).expect_err("file");
        assert_eq!(e.code, error_code::CONTENT_TYPE_NOT_SUPPORTED);
    }

    #[test]
    fn extension_metadata_names_the_interaction() {
        let m = msg(
            vec![Part::data(json!({"approved": false}))],
            Some(json!({"interactionId": "eff_1", "approved": true})),
        );
        let r = read_message(&m, true).expect("reads");
        assert_eq!(
            r.interaction.as_ref().map(InteractionId::as_str),
            Some("eff_1")
        );
        assert!(matches!(
            r.input,
            AnswerInput::Approved { approved: true, .. }
        ));
        // Not activated: refused, not silently read otherwise.
        assert!(read_message(&m, false).is_err());
        for bad in [
            json!({"interactionId": "eff_1", "approved": "yes"}),
            json!({"interactionId": "eff_1", "approved": true, "value": 1}),
            json!({"interactionId": 7, "approved": true}),
            json!({"interactionId": "eff_1", "approved": true, "extra": 1}),
            json!("eff_1"),
        ] {
            assert!(
                read_message(&msg(vec![], Some(bad.clone())), true).is_err(),
                "{bad}"
            );
        }
        let r = read_message(
            &msg(vec![Part::text("x")], Some(json!({"interactionId": "q1"}))),
            true,
        )
        .expect("reads");
        assert_eq!(r.input, AnswerInput::Text { text: "x".into() });
    }

    #[test]
    fn versions() {
        let mut h = HeaderMap::new();
        assert!(check_version(&h).is_ok());
        for ok in ["1", "1.0", "1.0.3", " 1.0 "] {
            h.insert(VERSION_HEADER, HeaderValue::from_str(ok).expect("value"));
            assert!(check_version(&h).is_ok(), "{ok}");
        }
        for bad in ["0.3", "2.0", "1.1", "1.0.x", "", "v1"] {
            h.insert(VERSION_HEADER, HeaderValue::from_str(bad).expect("value"));
            let e = check_version(&h).expect_err(bad);
            assert_eq!(e.code, error_code::VERSION_NOT_SUPPORTED);
        }
    }

    #[test]
    fn extension_headers() {
        let mut h = HeaderMap::new();
        assert!(!Negotiated::from_headers(&h).interactions());
        h.insert(
            EXTENSIONS_HEADER,
            HeaderValue::from_str(&format!("https://other.example/x, {EXTENSION_URI}"))
                .expect("value"),
        );
        let n = Negotiated::from_headers(&h);
        assert_eq!(n.activated, vec![EXTENSION_URI.to_owned()]);
        assert!(!n.legacy);
        let mut h = HeaderMap::new();
        h.insert(
            LEGACY_EXTENSIONS_HEADER,
            HeaderValue::from_static(EXTENSION_URI),
        );
        let n = Negotiated::from_headers(&h);
        assert!(n.interactions() && n.legacy);
    }

    #[test]
    fn errors_carry_the_holdpoint_code() {
        let e = RpcError::from_rejection(Rejection::new(ErrorCode::AlreadySettled, "answered"));
        assert_eq!(e.code, error_code::INVALID_PARAMS);
        let j = serde_json::to_value(e.to_jsonrpc()).expect("json");
        assert_eq!(j["data"][0]["metadata"]["code"], "NRY-0009");
        assert_eq!(j["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(
            RpcError::from_rejection(Rejection::new(ErrorCode::UnsupportedOperation, "text")).code,
            error_code::UNSUPPORTED_OPERATION
        );
        assert_eq!(
            RpcError::from_rejection(Rejection::new(ErrorCode::NotFound, "x")).code,
            error_code::TASK_NOT_FOUND
        );
    }

    #[test]
    fn the_card_declares_the_extension_and_streaming() {
        let c = serde_json::to_value(card("http://h:1")).expect("json");
        assert_eq!(c["supportedInterfaces"][0]["url"], "http://h:1/a2a");
        assert_eq!(c["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(c["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["capabilities"]["extensions"][0]["uri"], EXTENSION_URI);
    }
}

//! `schemas/openapi.json`: an OpenAPI 3.1 document for the HTTP API, the A2A
//! JSON-RPC endpoint and the SSE streams.
//!
//! Built from the schemars schemas (JSON Schema 2020-12, which OpenAPI 3.1 uses
//! as it is, under `#/components/schemas`) plus [`OPERATIONS`], a table of the
//! routes with what each one takes and answers. Error responses come from
//! [`ErrorCode::spec`]: each operation lists the codes it can answer, grouped by
//! status. The handlers read their bodies by hand (to refuse duplicate keys and
//! answer the catalog's codes), so no framework could infer the bodies from the
//! handler signatures; the table names the Rust types instead, and the `schemas`
//! integration test checks it against the router (every documented route exists,
//! every API route is documented).

use a2a_lf::methods;
use holdpoint_domain::webhook::{
    CreateWebhook, RotateWebhook, TestQueued, WebhookAttempts, WebhookList, WebhookView,
    WebhookWithSecret,
};
use holdpoint_domain::{
    ErrorBody, ErrorCode, Event, IdempotencyKey, InteractionId, InteractionView, Rule, RuleId,
    SessionId, State, event::EVENT_NAMES,
};
use holdpoint_ingress::a2a::{EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER, VERSION_HEADER};
use holdpoint_ingress::routes::path::{AGENT_CARD as AGENT_CARD_PATH, JSONRPC as JSONRPC_PATH};
use holdpoint_ingress::wire::{
    AnswerBody, ApproveBody, ListQuery, MessageAccepted, MessageBody, Page, RespondBody,
};
use holdpoint_ingress::wire::{AuditPage, AuditQuery, EventsQuery, RulePage, RulesQuery};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::json::{openapi_settings, plain};

/// How an operation answers when it succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    /// `204 No Content`.
    NoContent,
    /// `200` with a JSON body of the named schema.
    Json,
    /// `202` with a JSON body.
    Accepted,
    /// `201` with a JSON body.
    Created,
    /// `200` `text/event-stream`.
    EventStream,
    /// The A2A JSON-RPC endpoint: `200` JSON-RPC response or event stream.
    JsonRpc,
    /// The public agent card.
    AgentCard,
}

/// One route of the API.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// HTTP method, lower case.
    pub method: &'static str,
    /// Path in OpenAPI form (`/v1/interactions/{id}`).
    pub path: &'static str,
    /// `operationId`.
    pub id: &'static str,
    /// Tag.
    pub tag: &'static str,
    /// One line.
    pub summary: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The success response.
    pub success: Success,
    /// The catalog codes it can answer.
    pub errors: &'static [ErrorCode],
    /// Whether an identity is required.
    pub secured: bool,
}

use ErrorCode::{
    AlreadySettled, AnswerMismatch, AnswerNotDelivered, ArgumentsChanged, Internal, InvalidRequest,
    LaneBusy, LaneRefused, NotFound, NotRememberable, PayloadTooLarge, RuleNotFound,
    ScopeUnavailable, SessionNotFound, TooManyStreams, TooManyWebhooks, Unauthenticated,
    Unavailable, UnknownEventType, UnsupportedMediaType, WebhookDisabled, WebhookUrlRefused,
};

const WEBHOOK_CREATE_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    WebhookUrlRefused,
    UnknownEventType,
    Unauthenticated,
    TooManyWebhooks,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    Unavailable,
];

const WEBHOOK_CHANGE_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    Unauthenticated,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    Unavailable,
];

const WEBHOOK_TEST_ERRORS: &[ErrorCode] = &[
    Unauthenticated,
    NotFound,
    WebhookDisabled,
    Internal,
    Unavailable,
];

const ANSWER_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    NotRememberable,
    SessionNotFound,
    AnswerMismatch,
    Unauthenticated,
    NotFound,
    AlreadySettled,
    LaneBusy,
    AnswerNotDelivered,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    Unavailable,
];

const APPROVE_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    NotRememberable,
    ScopeUnavailable,
    SessionNotFound,
    AnswerMismatch,
    Unauthenticated,
    NotFound,
    AlreadySettled,
    ArgumentsChanged,
    LaneBusy,
    AnswerNotDelivered,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    Unavailable,
];

const READ_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    Unauthenticated,
    NotFound,
    Internal,
    Unavailable,
];

const LIST_ERRORS: &[ErrorCode] = &[InvalidRequest, Unauthenticated, Internal, Unavailable];
const RULE_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    Unauthenticated,
    RuleNotFound,
    Internal,
    Unavailable,
];

const STREAM_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    Unauthenticated,
    TooManyStreams,
    Internal,
    Unavailable,
];

const MESSAGE_ERRORS: &[ErrorCode] = &[
    InvalidRequest,
    SessionNotFound,
    Unauthenticated,
    LaneRefused,
    LaneBusy,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    Unavailable,
];

/// Every route of the API router (the admin listener's `/healthz` and `/readyz`
/// are not part of it).
pub const OPERATIONS: &[Operation] = &[
    Operation {
        method: "post",
        path: "/v1/questions/{questionId}/answer",
        id: "answerQuestion",
        tag: "interactions",
        summary: "Answer an agent's question (ask_user)",
        description: "One entry per question, in the order asked. On a blocking session the 204 means the blocked call runs again; on a product session the answer becomes the person's next message on the lane. The idempotency key is the `Idempotency-Key` header; without one, each request is a new press (a second answer on a blocking session is `409 NRY-0009`).",
        success: Success::NoContent,
        errors: ANSWER_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/interactions/{id}/approve",
        id: "approveInteraction",
        tag: "interactions",
        summary: "Approve or deny a held tool call",
        description: "`approved: true` releases the held call exactly as shown; `false` fails it as `tool.denied`. With `argumentsDigest`, arguments other than those shown answer `409 NRY-0010` and nothing is released.",
        success: Success::NoContent,
        errors: APPROVE_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/interactions/{id}/respond",
        id: "respondToInteraction",
        tag: "interactions",
        summary: "Answer an interaction with a value",
        description: "Any JSON `value`, read by the interaction's kind (the README's reading rules).",
        success: Success::NoContent,
        errors: ANSWER_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/interactions/{id}",
        id: "getInteraction",
        tag: "interactions",
        summary: "Read an interaction",
        description: "The caller's organisation's interaction; another organisation's answers exactly like a missing one. `detail` never holds a call's arguments; an approval's are under `call`.",
        success: Success::Json,
        errors: READ_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/interactions",
        id: "listInteractions",
        tag: "interactions",
        summary: "List interactions",
        description: "The caller's organisation's interactions in `state`, in the order of their last change. Each request reads at most 10,000 records, so a page may come back short (even empty) with a `nextCursor`: keep following it.",
        success: Success::Json,
        errors: LIST_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/sessions/{sessionId}/messages",
        id: "postSessionMessage",
        tag: "sessions",
        summary: "Write a message on a session's lane",
        description: "An idle lane starts the message's turn (202). A busy lane keeps it (`409 NRY-0031`); a full lane or a closed session keeps nothing (`409 NRY-0030`).",
        success: Success::Accepted,
        errors: MESSAGE_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/rules",
        id: "listRules",
        tag: "rules",
        summary: "List remembered approval rules",
        description: "The caller's organisation's rules (revoked and expired ones included), in the order of their last change, paged with `nextCursor`. A rule is written by an approval's answer that carried `remember`; while live it decides later holds of the same server and tool in its scope at once (session, then agent, then organisation: the most specific wins; a deny beats an allow at the same scope).",
        success: Success::Json,
        errors: LIST_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/rules/{id}",
        id: "getRule",
        tag: "rules",
        summary: "Read a remembered rule",
        description: "Another organisation's rule answers exactly like a missing one (`404 NRY-0027`).",
        success: Success::Json,
        errors: RULE_ERRORS,
        secured: true,
    },
    Operation {
        method: "delete",
        path: "/v1/rules/{id}",
        id: "revokeRule",
        tag: "rules",
        summary: "Revoke a remembered rule",
        description: "The rule stops deciding holds from the next one on; the revocation is recorded on the rule (`revoked`) and in the decision audit (`rule-revoked`). Revoking again returns the same revocation. Answers the rule as revoked.",
        success: Success::Json,
        errors: RULE_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/audit",
        id: "listAudit",
        tag: "audit",
        summary: "Page through the decision audit",
        description: "The caller's organisation's records on `hp.audit.<org>`, oldest first: every approval decision (by a person, a rule or an expiry: who, server, tool, arguments digest, outcome, reason, rule; never the arguments) and every rule written or revoked. Never a question. Pass the previous page's `nextAfter` as `after`; a page shorter than `limit` is the last so far. Records are kept for `nats.audit_retention_days`.",
        success: Success::Json,
        errors: LIST_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/events",
        id: "streamEvents",
        tag: "events",
        summary: "Stream the organisation's events (SSE)",
        description: "Server-sent events: `id:` is the event's sequence in HP_EVENTS, `event:` its short name, `data:` the CloudEvent JSON as stored. Without a resume point the stream starts with the next new event; `Last-Event-ID` (or `after`) resumes after that sequence with no repeats and no gaps. Idle streams get a `: keep-alive` comment every 15 s; a stream outlives a nats-server restart. One caller may hold `http.max_streams_per_caller` streams at once (this one, `SubscribeToTask` and `SendStreamingMessage` together); one more is `429 NRY-0017`.",
        success: Success::EventStream,
        errors: STREAM_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/webhooks",
        id: "createWebhook",
        tag: "webhooks",
        summary: "Register a webhook endpoint",
        description: "The caller's organisation's events of the listed types (all when none) are POSTed to `url` as CloudEvents (`application/cloudevents+json`), signed per Standard Webhooks: `webhook-id` is the CloudEvent's id (deduplicate on it), `webhook-timestamp` Unix seconds, `webhook-signature` `v1,<base64 HMAC-SHA256 of id.timestamp.body>` per live secret. The answer carries the secret, shown this once. The URL must be `https` (plain `http` only to loopback in local mode) and must not name a private, loopback or link-local address; the notifier checks every resolved address again before each request, follows no redirect and sends no credentials.",
        success: Success::Created,
        errors: WEBHOOK_CREATE_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/webhooks",
        id: "listWebhooks",
        tag: "webhooks",
        summary: "List webhook endpoints",
        description: "The caller's organisation's endpoints, oldest first; never a secret.",
        success: Success::Json,
        errors: LIST_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/webhooks/{id}",
        id: "getWebhook",
        tag: "webhooks",
        summary: "Read a webhook endpoint",
        description: "Another organisation's endpoint answers exactly like a missing one (`404 NRY-0004`).",
        success: Success::Json,
        errors: READ_ERRORS,
        secured: true,
    },
    Operation {
        method: "delete",
        path: "/v1/webhooks/{id}",
        id: "deleteWebhook",
        tag: "webhooks",
        summary: "Remove a webhook endpoint",
        description: "Removes the endpoint and drops its queued deliveries.",
        success: Success::NoContent,
        errors: READ_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/webhooks/{id}/rotate",
        id: "rotateWebhookSecret",
        tag: "webhooks",
        summary: "Make a new signing secret",
        description: "Answers the new secret (shown once). The previous secret keeps signing beside it for `overlapSecs` (default 86400; 0 stops it at once), so each delivery then carries two signatures and receivers can switch without losing one.",
        success: Success::Json,
        errors: WEBHOOK_CHANGE_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/webhooks/{id}/enable",
        id: "enableWebhook",
        tag: "webhooks",
        summary: "Enable a disabled webhook endpoint",
        description: "Resets its failure count; the deliveries kept while it was disabled are sent.",
        success: Success::Json,
        errors: READ_ERRORS,
        secured: true,
    },
    Operation {
        method: "post",
        path: "/v1/webhooks/{id}/test",
        id: "testWebhook",
        tag: "webhooks",
        summary: "Send a test message",
        description: "Queues a `dev.holdpoint.webhook-test` CloudEvent for this endpoint only, delivered and retried like any event; its attempts are listed under `/attempts`.",
        success: Success::Accepted,
        errors: WEBHOOK_TEST_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: "/v1/webhooks/{id}/attempts",
        id: "listWebhookAttempts",
        tag: "webhooks",
        summary: "List a webhook endpoint's delivery attempts",
        description: "The last 200 attempts (kept 7 days), oldest first: result, HTTP status, latency and the first 256 bytes of the response.",
        success: Success::Json,
        errors: READ_ERRORS,
        secured: true,
    },
    Operation {
        method: "get",
        path: AGENT_CARD_PATH,
        id: "getAgentCard",
        tag: "a2a",
        summary: "The A2A agent card",
        description: "Public. One JSON-RPC interface at `<base>/a2a` (protocol version 1.0), streaming, the interactions/v1 extension (not required) and a bearer-JWT security scheme. The body is an A2A v1.0 `AgentCard` (a2a-protocol.org). Cacheable: an `ETag` from its bytes, and `304` to a matching `If-None-Match`.",
        success: Success::AgentCard,
        errors: &[],
        secured: false,
    },
    Operation {
        method: "post",
        path: JSONRPC_PATH,
        id: "a2aJsonRpc",
        tag: "a2a",
        summary: "A2A v1.0 JSON-RPC",
        description: "JSON-RPC 2.0 with the A2A v1.0 methods. Errors are JSON-RPC error objects with HTTP 200; `error.data` holds one `google.rpc.ErrorInfo` whose `metadata` carries the Holdpoint `code`, `title` and `retryable`. `SendStreamingMessage` and `SubscribeToTask` answer `text/event-stream`, each `data:` a JSON-RPC response whose `result` is an A2A `StreamResponse`. No valid identity: `401 NRY-0011` before any JSON-RPC is read. Params are read as ProtoJSON (proto field names, enum numbers, integer strings); results are written in the canonical form. A stream over the caller's limit is HTTP `429 NRY-0017` before anything is answered.",
        success: Success::JsonRpc,
        errors: &[Unauthenticated, TooManyStreams],
        secured: true,
    },
];

fn schema_ref<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    plain(generator.subschema_for::<T>())
}

/// The string values of a unit-variant enum's schema (`State`: `pending`, ...).
fn enum_values<T: JsonSchema>() -> Vec<String> {
    let schema = openapi_settings()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let from_one_of = schema["oneOf"].as_array().map(|vs| {
        vs.iter()
            .filter_map(|v| v["const"].as_str())
            .map(str::to_owned)
            .collect()
    });
    let from_enum = schema["enum"].as_array().map(|vs| {
        vs.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    from_one_of.or(from_enum).unwrap_or_default()
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

/// The query parameters of a query struct: one per property.
fn query_params<T: JsonSchema>(generator: &mut SchemaGenerator) -> Vec<Value> {
    let schema = plain(T::json_schema(generator));
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    if let Some(props) = schema["properties"].as_object() {
        for (name, prop) in props {
            let mut prop = not_null(prop.clone());
            let description = prop
                .as_object_mut()
                .and_then(|p| p.remove("description"))
                .unwrap_or(Value::Null);
            out.push(json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "description": description,
                "schema": prop,
            }));
        }
    }
    out
}

/// An optional field's schema as a query parameter's: an absent parameter is the
/// field's `None`, so `null` is not a value it can take.
fn not_null(mut schema: Value) -> Value {
    if let Some(map) = schema.as_object_mut() {
        if map.get("default") == Some(&Value::Null) {
            map.remove("default");
        }
        if let Some(Value::Array(types)) = map.get_mut("type") {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                let only = types.remove(0);
                map.insert("type".into(), only);
            }
        }
    }
    schema
}

fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

fn header_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema})
}

/// The error responses of `codes`, one per status, each listing its codes.
fn error_responses(codes: &[ErrorCode]) -> Map<String, Value> {
    let mut by_status: Vec<(u16, Vec<ErrorCode>)> = Vec::new();
    for &code in codes {
        let status = code.spec().status;
        match by_status.iter_mut().find(|(s, _)| *s == status) {
            Some((_, list)) => list.push(code),
            None => by_status.push((status, vec![code])),
        }
    }
    by_status.sort_by_key(|(s, _)| *s);
    let mut out = Map::new();
    for (status, mut list) in by_status {
        list.sort_by_key(|c| c.spec().code);
        let description = list
            .iter()
            .map(|c| format!("`{}` {}", c.spec().code, c.spec().title))
            .collect::<Vec<_>>()
            .join("; ");
        let examples: Map<String, Value> = list
            .iter()
            .map(|c| {
                let s = c.spec();
                (
                    s.code.to_owned(),
                    json!({"value": {"code": s.code, "title": s.title, "message": "…"}}),
                )
            })
            .collect();
        let mut response = json!({
            "description": description,
            "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ErrorBody"},
                "examples": examples,
            }},
        });
        let mut headers = Map::new();
        if list.contains(&Unavailable) {
            headers.insert(
                "Retry-After".into(),
                json!({"description": "Seconds to wait before retrying with the same idempotency key.", "schema": {"type": "integer"}}),
            );
        }
        if list.contains(&Unauthenticated) {
            headers.insert(
                "WWW-Authenticate".into(),
                json!({"schema": {"type": "string", "const": "Bearer"}}),
            );
        }
        if !headers.is_empty() {
            response["headers"] = Value::Object(headers);
        }
        out.insert(status.to_string(), response);
    }
    out
}

fn webhook_param() -> Value {
    path_param(
        "id",
        "The webhook endpoint (`wh_<32 hex>`).",
        json!({"type": "string", "minLength": 1, "maxLength": 128}),
    )
}

fn idempotency_header(generator: &mut SchemaGenerator) -> Value {
    header_param(
        "Idempotency-Key",
        "The answer's idempotency key (1 to 128 printable ASCII): the same key replays the recorded outcome, so send one and retry a 503 with it. Without it each request is a new press: on a blocking session, an answer to an interaction already answered is `409 NRY-0009` (\"already answered at …\"), identical body or not; a product session replays the recorded answer.",
        schema_ref::<IdempotencyKey>(generator),
    )
}

fn interaction_param(generator: &mut SchemaGenerator, name: &str) -> Value {
    path_param(
        name,
        "The interaction: an approval's effect id, a question's UUID.",
        schema_ref::<InteractionId>(generator),
    )
}

fn jsonrpc_schemas() -> Map<String, Value> {
    let all_methods = [
        methods::SEND_MESSAGE,
        methods::SEND_STREAMING_MESSAGE,
        methods::GET_TASK,
        methods::LIST_TASKS,
        methods::CANCEL_TASK,
        methods::SUBSCRIBE_TO_TASK,
        methods::CREATE_PUSH_CONFIG,
        methods::GET_PUSH_CONFIG,
        methods::LIST_PUSH_CONFIGS,
        methods::DELETE_PUSH_CONFIG,
        methods::GET_EXTENDED_AGENT_CARD,
    ];
    let mut out = Map::new();
    out.insert(
        "JsonRpcRequest".into(),
        json!({
            "description": "A JSON-RPC 2.0 request with an A2A v1.0 method. `params` are the A2A request messages (`SendMessageRequest`, `GetTaskRequest`, `ListTasksRequest`, ...), described by the A2A specification. `CancelTask` answers `TaskNotCancelableError` (-32002); push-notification methods answer -32003; there is no extended card. Batches are refused.",
            "type": "object",
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["string", "integer", "null"]},
                "method": {"type": "string", "enum": all_methods},
                "params": {"type": "object"},
            },
            "required": ["jsonrpc", "method"],
        }),
    );
    out.insert(
        "JsonRpcError".into(),
        json!({
            "description": "A JSON-RPC error. `data` is a list of typed details; one `google.rpc.ErrorInfo` (`reason` such as `TASK_NOT_FOUND`, `domain` `a2a-protocol.org`) whose `metadata` holds the Holdpoint `code`, `title` and `retryable` as strings.",
            "type": "object",
            "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "data": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["code", "message"],
        }),
    );
    out.insert(
        "JsonRpcResponse".into(),
        json!({
            "description": "A JSON-RPC 2.0 response: `result` (an A2A response message: `{\"task\": …}`, a task, a task list) or `error`.",
            "type": "object",
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["string", "integer", "null"]},
                "result": {},
                "error": {"$ref": "#/components/schemas/JsonRpcError"},
            },
            "required": ["jsonrpc", "id"],
            "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
        }),
    );
    out.insert(
        "AgentCard".into(),
        json!({
            "description": "An A2A v1.0 `AgentCard` (a2a-protocol.org), with the types of the official `a2a-lf` crate.",
            "type": "object",
            "required": ["name", "supportedInterfaces", "capabilities"],
        }),
    );
    out
}

fn operation(op: &Operation, generator: &mut SchemaGenerator) -> Value {
    let mut parameters: Vec<Value> = Vec::new();
    let mut request_body = Value::Null;
    let mut responses = Map::new();
    match op.id {
        "answerQuestion" => {
            parameters.push(interaction_param(generator, "questionId"));
            parameters.push(idempotency_header(generator));
            request_body = json!({"required": true, "content": json_content(schema_ref::<AnswerBody>(generator))});
        }
        "approveInteraction" => {
            parameters.push(interaction_param(generator, "id"));
            parameters.push(idempotency_header(generator));
            request_body = json!({"required": true, "content": json_content(schema_ref::<ApproveBody>(generator))});
        }
        "respondToInteraction" => {
            parameters.push(interaction_param(generator, "id"));
            parameters.push(idempotency_header(generator));
            request_body = json!({"required": true, "content": json_content(schema_ref::<RespondBody>(generator))});
        }
        "getInteraction" => {
            parameters.push(interaction_param(generator, "id"));
            responses.insert(
                "200".into(),
                json!({"description": "The interaction.", "content": json_content(schema_ref::<InteractionView>(generator))}),
            );
        }
        "listInteractions" => {
            let mut query = query_params::<ListQuery>(generator);
            for p in &mut query {
                if p["name"] == "state" {
                    let mut states = enum_values::<State>();
                    states.push("all".into());
                    p["schema"] = json!({"type": "string", "enum": states, "default": "pending"});
                }
                if p["name"] == "sort" {
                    p["schema"] = json!({"type": "string", "enum": ["expiresAt"]});
                }
            }
            parameters.extend(query);
            responses.insert(
                "200".into(),
                json!({"description": "A page of interactions.", "content": json_content(schema_ref::<Page>(generator))}),
            );
        }
        "listRules" => {
            parameters.extend(query_params::<RulesQuery>(generator));
            responses.insert(
                "200".into(),
                json!({"description": "A page of rules.", "content": json_content(schema_ref::<RulePage>(generator))}),
            );
        }
        "getRule" | "revokeRule" => {
            parameters.push(path_param(
                "id",
                "The rule (`rul_…`).",
                schema_ref::<RuleId>(generator),
            ));
            let what = if op.id == "getRule" {
                "The rule."
            } else {
                "The rule, revoked."
            };
            responses.insert(
                "200".into(),
                json!({"description": what, "content": json_content(schema_ref::<Rule>(generator))}),
            );
        }
        "listAudit" => {
            parameters.extend(query_params::<AuditQuery>(generator));
            responses.insert(
                "200".into(),
                json!({"description": "A page of audit records.", "content": json_content(schema_ref::<AuditPage>(generator))}),
            );
        }
        "postSessionMessage" => {
            parameters.push(path_param(
                "sessionId",
                "The session.",
                schema_ref::<SessionId>(generator),
            ));
            request_body = json!({"required": true, "content": json_content(schema_ref::<MessageBody>(generator))});
            responses.insert(
                "202".into(),
                json!({"description": "Admitted: its turn started.", "content": json_content(schema_ref::<MessageAccepted>(generator))}),
            );
        }
        "streamEvents" => {
            let mut query = query_params::<EventsQuery>(generator);
            for p in &mut query {
                if p["name"] == "type" {
                    p["schema"] = json!({"type": "string", "enum": EVENT_NAMES});
                }
            }
            parameters.extend(query);
            parameters.push(header_param(
                "Last-Event-ID",
                "Resume after this sequence (what `EventSource` sends on reconnect); wins over `after`.",
                json!({"type": "string", "pattern": "^[0-9]+$"}),
            ));
            let event = schema_ref::<Event>(generator);
            responses.insert(
                "200".into(),
                json!({
                    "description": "A server-sent event stream; each event's `data:` is a CloudEvent (the `x-sse-data` schema).",
                    "content": {"text/event-stream": {
                        "schema": {"type": "string"},
                        "x-sse-data": event,
                    }},
                }),
            );
        }
        "getAgentCard" => {
            parameters.push(header_param(
                "If-None-Match",
                "Entity tags of cards the client holds; when one is the card's `ETag` (weak comparison) the answer is `304` without a body.",
                json!({"type": "string"}),
            ));
            let headers = json!({
                "Cache-Control": {"schema": {"type": "string"}},
                "ETag": {"description": "A strong tag from the card's bytes.", "schema": {"type": "string"}},
            });
            responses.insert(
                "200".into(),
                json!({
                    "description": "The agent card (cacheable for 300 s).",
                    "headers": headers.clone(),
                    "content": json_content(json!({"$ref": "#/components/schemas/AgentCard"})),
                }),
            );
            responses.insert(
                "304".into(),
                json!({
                    "description": "Not modified: `If-None-Match` named the card's `ETag`.",
                    "headers": headers,
                }),
            );
        }
        "a2aJsonRpc" => {
            parameters.push(header_param(
                VERSION_HEADER,
                "The A2A protocol version: `1`, `1.0` or `1.0.<patch>`. Absent or empty it is 0.3, refused like any other with `VersionNotSupportedError` (-32009), unless the server reads it as 1.0 (`http.a2a_missing_version_is_1_0`, off by default).",
                json!({"type": "string"}),
            ));
            parameters.push(header_param(
                EXTENSIONS_HEADER,
                "Extensions to activate, comma-separated URIs (interactions/v1: `https://docs.nylorun.com/a2a/interactions/v1`); echoed in the response with the activated ones.",
                json!({"type": "string"}),
            ));
            parameters.push(header_param(
                LEGACY_EXTENSIONS_HEADER,
                "The A2A 0.3 name of the extensions header; also accepted and echoed.",
                json!({"type": "string"}),
            ));
            let request = json!({"$ref": "#/components/schemas/JsonRpcRequest"});
            let response = json!({"$ref": "#/components/schemas/JsonRpcResponse"});
            request_body = json!({"required": true, "content": {
                "application/json": {"schema": request},
                "application/a2a+json": {"schema": request},
            }});
            responses.insert(
                "200".into(),
                json!({
                    "description": "A JSON-RPC response (errors included), or for `SendStreamingMessage` and `SubscribeToTask` an event stream of JSON-RPC responses. The one retryable error also carries `Retry-After: 1`.",
                    "headers": {
                        EXTENSIONS_HEADER: {"description": "The activated extensions.", "schema": {"type": "string"}},
                        "Retry-After": {"description": "With the retryable error (`NRY-0050`): retry with the same `messageId`.", "schema": {"type": "integer"}},
                    },
                    "content": {
                        "application/json": {"schema": response},
                        "text/event-stream": {"schema": {"type": "string"}, "x-sse-data": response},
                    },
                }),
            );
        }
        "createWebhook" => {
            request_body = json!({"required": true, "content": json_content(schema_ref::<CreateWebhook>(generator))});
            responses.insert(
                "201".into(),
                json!({"description": "Registered; `secret` is shown this once.", "content": json_content(schema_ref::<WebhookWithSecret>(generator))}),
            );
        }
        "listWebhooks" => {
            responses.insert(
                "200".into(),
                json!({"description": "The organisation's endpoints.", "content": json_content(schema_ref::<WebhookList>(generator))}),
            );
        }
        "getWebhook" | "enableWebhook" => {
            parameters.push(webhook_param());
            responses.insert(
                "200".into(),
                json!({"description": "The endpoint.", "content": json_content(schema_ref::<WebhookView>(generator))}),
            );
        }
        "deleteWebhook" => parameters.push(webhook_param()),
        "rotateWebhookSecret" => {
            parameters.push(webhook_param());
            request_body = json!({"required": false, "content": json_content(schema_ref::<RotateWebhook>(generator))});
            responses.insert(
                "200".into(),
                json!({"description": "The endpoint and its new secret, shown this once.", "content": json_content(schema_ref::<WebhookWithSecret>(generator))}),
            );
        }
        "testWebhook" => {
            parameters.push(webhook_param());
            responses.insert(
                "202".into(),
                json!({"description": "Queued.", "content": json_content(schema_ref::<TestQueued>(generator))}),
            );
        }
        "listWebhookAttempts" => {
            parameters.push(webhook_param());
            responses.insert(
                "200".into(),
                json!({"description": "The endpoint's attempts.", "content": json_content(schema_ref::<WebhookAttempts>(generator))}),
            );
        }
        other => unreachable!("operation {other} has no shape: add one"),
    }
    match op.success {
        Success::NoContent if op.tag == "webhooks" => {
            responses.insert("204".into(), json!({"description": "Removed."}));
        }
        Success::NoContent => {
            responses.insert(
                "204".into(),
                json!({"description": "Answered: the resolution is persisted in JetStream."}),
            );
        }
        Success::Json
        | Success::Created
        | Success::Accepted
        | Success::EventStream
        | Success::JsonRpc
        | Success::AgentCard => {}
    }
    responses.extend(error_responses(op.errors));
    let mut out = json!({
        "operationId": op.id,
        "tags": [op.tag],
        "summary": op.summary,
        "description": op.description,
        "responses": responses,
    });
    if !parameters.is_empty() {
        out["parameters"] = Value::Array(parameters);
    }
    if !request_body.is_null() {
        out["requestBody"] = request_body;
    }
    if !op.secured {
        out["security"] = json!([]);
    }
    out
}

/// The OpenAPI 3.1 document.
pub fn document() -> Value {
    let mut generator = openapi_settings().into_generator();
    generator.subschema_for::<ErrorBody>();
    let mut paths = Map::new();
    for op in OPERATIONS {
        let item = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        item[op.method] = operation(op, &mut generator);
    }
    let mut schemas = generator.take_definitions(true);
    schemas.extend(jsonrpc_schemas());
    json!({
        "openapi": "3.1.0",
        "x-generated": "Generated by holdpoint-contracts from the Rust wire types and its table of operations; do not edit.",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Holdpoint HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "summary": "Answer AI agents' paused tool calls: approvals, questions, connections.",
            "description": "Every operation but the agent card needs an identity: `Authorization: Bearer <JWT>` verified against the identity provider's key set, or the Unix socket's local user (no token). Without a valid one the answer is `401 NRY-0011`. Errors are `{code, title, message}`; `schemas/errors.json` lists every code. A 2xx answer means the resolution is persisted; a `503 NRY-0050` is retryable with the same idempotency key after `Retry-After`.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "http://127.0.0.1:8080", "description": "`holdpoint up` (`--listen`)."}],
        "security": [{"bearer": []}],
        "tags": [
            {"name": "interactions", "description": "Read and answer interactions."},
            {"name": "sessions", "description": "The message road: a person's messages on a session's lanes."},
            {"name": "events", "description": "Server-sent event streams of the organisation's CloudEvents."},
            {"name": "webhooks", "description": "Signed webhook endpoints: the organisation's CloudEvents POSTed per Standard Webhooks."},
            {"name": "a2a", "description": "A2A v1.0 server for paused tasks, with the interactions/v1 extension."},
        ],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A JWT from the configured identity provider: `sub` is the person, the organisation claim (default `org`) the organisation.",
                },
            },
        },
    })
}

/// Every documented (method, path) pair, method in upper case.
pub fn routes() -> Vec<(String, String)> {
    OPERATIONS
        .iter()
        .map(|op| (op.method.to_ascii_uppercase(), op.path.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_a_unique_id_and_route() {
        let mut ids = std::collections::HashSet::new();
        let mut routes = std::collections::HashSet::new();
        for op in OPERATIONS {
            assert!(ids.insert(op.id), "{} twice", op.id);
            assert!(
                routes.insert((op.method, op.path)),
                "{} {} twice",
                op.method,
                op.path
            );
        }
    }

    #[test]
    fn states_come_from_the_state_enum() {
        assert_eq!(
            enum_values::<State>(),
            ["pending", "resolved", "finished", "closed"]
        );
    }

    #[test]
    fn query_parameters_are_never_null() {
        let doc = document();
        let list = &doc["paths"]["/v1/interactions"]["get"]["parameters"];
        for p in list.as_array().expect("parameters") {
            assert!(!p["schema"].to_string().contains("null"), "{p}");
        }
        let limit = list
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
            .expect("limit");
        assert_eq!(limit["schema"]["minimum"], 1);
        assert_eq!(
            limit["schema"]["maximum"],
            holdpoint_ingress::wire::MAX_PAGE
        );
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("unexpected $ref {r}"));
            assert!(schemas.contains_key(name), "{r} does not resolve");
        }
    }

    fn collect_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(s)) => out.push(s.clone()),
                        _ => collect_refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }
}

//! One operation of the table as an OpenAPI operation object: parameters, request
//! body, responses and security.

use super::schema::{
    enum_values, error_responses, header_param, idempotency_header, interaction_param,
    json_content, path_param, query_params, schema_ref, webhook_param,
};
use super::{Operation, Success, constraints};
use holdpoint_domain::event::EVENT_NAMES;
use holdpoint_domain::webhook::{
    CreateWebhook, RotateWebhook, TestQueued, WebhookAttempts, WebhookList, WebhookView,
    WebhookWithSecret,
};
use holdpoint_domain::{Event, InteractionView, Rule, RuleId, SessionId, State, TaskId};
use holdpoint_ingress::a2a::{EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER, VERSION_HEADER};
use holdpoint_ingress::wire::{
    AnswerBody, ApprovalCounted, ApproveBody, AuditPage, AuditQuery, BatchBody, BatchResults,
    EventsQuery, ListQuery, MessageAccepted, MessageBody, Page, RespondBody, RulePage, RulesQuery,
};
use schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

/// The `202` of an approval counted toward a hold that needs several people.
fn approval_counted(generator: &mut SchemaGenerator) -> Value {
    json!({
        "description": "Counted: the hold needs approvals from several distinct people (`approvals`) and this one was recorded; the call waits for the rest (README \"Two-person approvals\"). The last approval needed answers `204`.",
        "content": json_content(schema_ref::<ApprovalCounted>(generator)),
    })
}

pub(super) fn operation(op: &Operation, generator: &mut SchemaGenerator) -> Value {
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
            responses.insert("202".into(), approval_counted(generator));
        }
        "respondToInteraction" => {
            parameters.push(interaction_param(generator, "id"));
            parameters.push(idempotency_header(generator));
            request_body = json!({"required": true, "content": json_content(schema_ref::<RespondBody>(generator))});
            responses.insert("202".into(), approval_counted(generator));
        }
        "answerMany" => {
            request_body = json!({"required": true, "content": json_content(schema_ref::<BatchBody>(generator))});
            responses.insert(
                "200".into(),
                json!({"description": "One result per item, in order; each item was decided on its own.", "content": json_content(schema_ref::<BatchResults>(generator))}),
            );
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
                if p["name"] == "assignee" {
                    p["schema"] = json!({"type": "string", "enum": ["me"]});
                }
                if p["name"] == "cursor" {
                    p["schema"]["pattern"] = json!(constraints::CURSOR_PATTERN);
                }
            }
            parameters.extend(query);
            responses.insert(
                "200".into(),
                json!({"description": "A page of interactions.", "content": json_content(schema_ref::<Page>(generator))}),
            );
        }
        "listRules" => {
            let mut query = query_params::<RulesQuery>(generator);
            for p in &mut query {
                if p["name"] == "cursor" {
                    p["schema"]["pattern"] = json!(constraints::CURSOR_PATTERN);
                }
            }
            parameters.extend(query);
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
                if p["name"] == "task" {
                    p["schema"] = schema_ref::<TaskId>(generator);
                }
            }
            parameters.extend(query);
            parameters.push(header_param(
                "Last-Event-ID",
                "Resume after this sequence (what `EventSource` sends on reconnect); wins over `after`.",
                json!({"type": "string", "pattern": constraints::SEQUENCE_PATTERN}),
            ));
            let event = schema_ref::<Event>(generator);
            responses.insert(
                "200".into(),
                json!({
                    "description": "A server-sent event stream; each event's `data:` is a CloudEvent (the `x-sse-data` schema).",
                    "content": {"text/event-stream": {
                        "schema": constraints::sse_event(&event, Some(EVENT_NAMES)),
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
                        "text/event-stream": {"schema": constraints::sse_event(&response, None), "x-sse-data": response},
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
    if let Some((status, links)) = constraints::links(op.id)
        && let Some(r) = responses.get_mut(status)
    {
        r["links"] = links;
    }
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

//! `POST /a2a`: reads one JSON-RPC 2.0 request (JSON only, the configured size,
//! no repeated keys), checks the service parameters ([`super::negotiate`]),
//! reads the params as ProtoJSON ([`super::protojson`]) and dispatches by method.
//! Errors are JSON-RPC error objects with HTTP 200; the one retryable error also
//! carries `Retry-After: 1`. Activated extensions are echoed.

use a2a_lf::{JsonRpcId, JsonRpcRequest, JsonRpcResponse, error_code, methods};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Json, Response};
use holdpoint_domain::ErrorCode;
use serde_json::Value;

use super::answer::send_message;
use super::call::Ctx;
use super::error::RpcError;
use super::negotiate::{MissingVersion, Negotiated, check_version};
use super::protojson;
use super::streams::{send_streaming_message, subscribe_to_task};
use super::tasks::{cancel_task, get_task, list_tasks};
use crate::identity::Caller;
use crate::state::AppState;

fn rpc_error_response(neg: &Negotiated, id: JsonRpcId, e: &RpcError) -> Response {
    let mut resp = Json(JsonRpcResponse::error(id, e.to_jsonrpc())).into_response();
    if e.holdpoint == ErrorCode::Unavailable {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    neg.echo(resp)
}

/// The JSON-RPC error (id `null`, HTTP 200, `Retry-After: 1`) for a request the
/// ingress refused unread because it has as many in flight as it may
/// ([`crate::routes`]): an internal error with `NRY-0050`, retryable.
pub fn overloaded() -> Response {
    let e = RpcError::new(
        error_code::INTERNAL_ERROR,
        "Holdpoint is serving as many requests as it may at once and did not read this \
         one; retry (with the same messageId)",
    )
    .with_code(ErrorCode::Unavailable);
    let mut resp = Json(JsonRpcResponse::error(JsonRpcId::Null, e.to_jsonrpc())).into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
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

/// `POST /a2a`: one JSON-RPC 2.0 request (no batches), dispatched by method.
pub async fn jsonrpc(State(state): State<AppState>, caller: Caller, req: Request) -> Response {
    let headers = req.headers().clone();
    let traceparent = crate::extract::trace_of(&req);
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
        let id = raw
            .get("id")
            .cloned()
            .and_then(|v| serde_json::from_value::<JsonRpcId>(v).ok())
            .unwrap_or(JsonRpcId::Null);
        let code = match guard {
            // A repeated key would otherwise be read last-wins (a second `approved`
            // deciding, a second `messageId` keying): refuse, like the REST bodies
            // do; at the top level the envelope is invalid, below it the params.
            crate::json_guard::Guard::DuplicateKey { depth: 0 } => error_code::INVALID_REQUEST,
            crate::json_guard::Guard::DuplicateKey { .. } => error_code::INVALID_PARAMS,
            // A number no JSON reader could read back (1e400), or what the parse
            // above already refuses: not JSON Holdpoint reads.
            _ => error_code::PARSE_ERROR,
        };
        return fail(
            id,
            RpcError::new(code, guard.to_string()).with_code(ErrorCode::InvalidRequest),
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
    let missing = if state.cfg.a2a_missing_version_is_1_0 {
        MissingVersion::Is1_0
    } else {
        MissingVersion::Is0_3
    };
    if let Err(e) = check_version(&headers, missing) {
        return fail(id, e);
    }
    let ctx = Ctx {
        state,
        caller,
        negotiated: negotiated.clone(),
        traceparent,
    };
    let params = match protojson::normalize(&request.method, request.params.unwrap_or(Value::Null))
    {
        Ok(p) => p,
        Err(e) => return fail(id, e),
    };
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

//! The A2A JSON-RPC envelopes (request, success, error) as components.

use a2a_lf::methods;
use serde_json::{Map, Value, json};

pub(super) fn jsonrpc_schemas() -> Map<String, Value> {
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

//! One JSON-RPC call's context ([`Ctx`]) and the helpers every method shares:
//! typed params, the result as JSON, task ids.

use holdpoint_domain::TaskId;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::RpcError;
use super::negotiate::Negotiated;
use crate::identity::Caller;
use crate::state::AppState;

/// One JSON-RPC call: who, what they activated, and the state.
pub struct Ctx {
    /// The shared state.
    pub state: AppState,
    /// Who calls.
    pub caller: Caller,
    /// What the request's headers activated.
    pub negotiated: Negotiated,
    /// The request's `traceparent` (see [`crate::observe`]), carried on commands.
    pub traceparent: Option<String>,
}

/// The method's params, typed: `null` reads as `{}`; anything but an object, or
/// an object that does not fit `T`, is invalid params.
pub fn parse_params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { json!({}) } else { params };
    if !params.is_object() {
        return Err(RpcError::invalid_params("params must be an object"));
    }
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

/// `v` as the JSON-RPC `result`, every task status's `timestamp` in Holdpoint's
/// one format ([`super::view::stamp`]).
pub fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, RpcError> {
    let mut value = serde_json::to_value(v).map_err(RpcError::internal)?;
    super::view::stamp(&mut value);
    Ok(value)
}

/// Checks a `historyLength` (GetTask, ListTasks, SendMessage's configuration):
/// absent or 0 and up. Holdpoint keeps no history, so any valid length gives none.
///
/// # Errors
/// Invalid params for a negative length, as for a negative `pageSize`.
pub fn check_history_length(length: Option<i32>) -> Result<(), RpcError> {
    match length {
        Some(n) if n < 0 => Err(RpcError::invalid_params(format!(
            "historyLength must be 0 or more (got {n})"
        ))),
        _ => Ok(()),
    }
}

/// A task id from params, validated.
pub fn parse_task_id(raw: String) -> Result<TaskId, RpcError> {
    TaskId::parse(raw).map_err(|e| RpcError::invalid_params(format!("invalid task id: {e}")))
}

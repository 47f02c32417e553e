//! A2A errors: JSON-RPC error objects (HTTP 200) whose `data` is the list of
//! typed details the A2A SDKs read, one `google.rpc.ErrorInfo` carrying the
//! Holdpoint code, its title and whether a retry may succeed.

use std::collections::HashMap;

use a2a_lf::{A2AError, TypedDetail, error_code, errordetails};
use holdpoint_domain::{ErrorCode, Rejection, timestamp};
use serde_json::Value;
use tracing::{error, warn};

/// A JSON-RPC error with the Holdpoint code behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// JSON-RPC / A2A error code (`-32001` ...).
    pub code: i32,
    /// Message for a person.
    pub message: String,
    /// The Holdpoint code carried in `error.data`.
    pub holdpoint: ErrorCode,
    /// `NRY-0036`: the JSON pointer of the first field of the answer's `value`
    /// that does not fit the form, carried as the ErrorInfo's `pointer` (as
    /// REST's error body carries it).
    pub pointer: Option<String>,
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
            pointer: None,
        }
    }

    /// Sets the Holdpoint code.
    pub fn with_code(mut self, holdpoint: ErrorCode) -> Self {
        self.holdpoint = holdpoint;
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(error_code::INVALID_PARAMS, message)
    }

    pub fn task_not_found(task: &str) -> Self {
        RpcError::new(error_code::TASK_NOT_FOUND, format!("task {task} not found"))
    }

    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        warn!(error = %e, "A2A: NATS unavailable");
        RpcError::new(
            error_code::INTERNAL_ERROR,
            "Holdpoint could not reach its store in time; retry (with the same messageId)",
        )
        .with_code(ErrorCode::Unavailable)
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
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
            pointer: r.pointer,
        }
    }

    /// The JSON-RPC error object: `data` is `[ErrorInfo]` with the A2A reason and
    /// `metadata {code, title, retryable, timestamp}` (and `pointer` for a form
    /// value that does not fit); the timestamp is in Holdpoint's one format
    /// ([`holdpoint_domain::timestamp`]).
    pub fn to_jsonrpc(&self) -> a2a_lf::JsonRpcError {
        let spec = self.holdpoint.spec();
        let mut metadata = HashMap::from([
            ("code".to_owned(), spec.code.to_owned()),
            ("title".to_owned(), spec.title.to_owned()),
            (
                "retryable".to_owned(),
                self.holdpoint.retryable().to_string(),
            ),
        ]);
        if let Some(pointer) = &self.pointer {
            metadata.insert("pointer".to_owned(), pointer.clone());
        }
        let mut error = A2AError::new(self.code, self.message.clone())
            .with_details(vec![TypedDetail::error_info(
                a2a_lf::error_reason(self.code),
                errordetails::PROTOCOL_DOMAIN,
                Some(metadata),
            )])
            .to_jsonrpc_error();
        // The A2A crate stamps its ErrorInfo with `+00:00` and nanoseconds.
        let now = timestamp::format(time::OffsetDateTime::now_utc());
        if let Some(Value::Array(details)) = error.data.as_mut() {
            for detail in details {
                if let Some(Value::Object(meta)) = detail.get_mut("metadata")
                    && meta.contains_key("timestamp")
                {
                    meta.insert("timestamp".into(), Value::String(now.clone()));
                }
            }
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_the_holdpoint_code() {
        let e = RpcError::from_rejection(Rejection::new(ErrorCode::AlreadySettled, "answered"));
        assert_eq!(e.code, error_code::INVALID_PARAMS);
        let j = serde_json::to_value(e.to_jsonrpc()).expect("json");
        assert_eq!(j["data"][0]["metadata"]["code"], "NRY-0009");
        let at = j["data"][0]["metadata"]["timestamp"]
            .as_str()
            .expect("timestamp");
        assert!(at.ends_with('Z') && at.len() == 24, "{at}");
        assert_eq!(j["data"][0]["reason"], "INVALID_PARAMS");
        assert!(j["data"][0]["metadata"].get("pointer").is_none(), "{j}");
        let misfit = RpcError::from_rejection(
            Rejection::new(ErrorCode::FormValueInvalid, "seats: below 1").at("/seats"),
        );
        let j = serde_json::to_value(misfit.to_jsonrpc()).expect("json");
        assert_eq!(j["data"][0]["metadata"]["pointer"], "/seats");
        assert_eq!(j["data"][0]["metadata"]["code"], "NRY-0036");
        assert_eq!(
            RpcError::from_rejection(Rejection::new(ErrorCode::UnsupportedOperation, "text")).code,
            error_code::UNSUPPORTED_OPERATION
        );
        assert_eq!(
            RpcError::from_rejection(Rejection::new(ErrorCode::NotFound, "x")).code,
            error_code::TASK_NOT_FOUND
        );
    }
}

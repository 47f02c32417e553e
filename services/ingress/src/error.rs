//! The one error type of the HTTP API: [`ApiError`] wraps a domain
//! [`Rejection`] (a stable `NRY-xxxx` code and a message) and answers it as the
//! `{code, title, message}` body ([`ErrorBody`]) with the status of the code's row
//! in [`ErrorCode::spec`] (`services/domain/src/error.rs`).
//!
//! A worker's refusal and an ingress's own refusal are the same value, so there is
//! one mapping from a code to a response. `503 NRY-0050` also carries
//! `Retry-After: 1`, `429 NRY-0017` `Retry-After: 5`, `401 NRY-0011`
//! `WWW-Authenticate: Bearer`. 5xx bodies carry no
//! internals: [`ApiError::unavailable`] and [`ApiError::internal`] log the cause
//! once and answer a fixed message.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdpoint_domain::{ErrorBody, ErrorCode, Rejection};
use tracing::{error, warn};

/// An error answered as `{code, title, message}` with the code's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(pub Rejection);

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError(Rejection::new(code, message))
    }

    /// `400 NRY-0001` with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::InvalidRequest, message)
    }

    /// `401 NRY-0011`: the same body whatever failed (the reason goes to the log).
    pub fn unauthenticated() -> Self {
        ApiError::new(ErrorCode::Unauthenticated, "a valid identity is required")
    }

    /// `503 NRY-0050` after logging `cause`: no outcome in time, or NATS away.
    pub fn unavailable(cause: impl std::fmt::Display) -> Self {
        warn!(error = %cause, "answering 503");
        ApiError::new(
            ErrorCode::Unavailable,
            "Holdpoint could not confirm the outcome in time; retry with the same idempotency key",
        )
    }

    /// `500 NRY-0051` after logging `cause`; the body says nothing more.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        error!(error = %cause, "internal error");
        ApiError::new(ErrorCode::Internal, "internal error")
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        ApiError(r)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.0.code;
        let status =
            StatusCode::from_u16(code.spec().status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, Json(ErrorBody::from(&self.0))).into_response();
        if code == ErrorCode::Unavailable {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if code == ErrorCode::TooManyStreams {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        if code == ErrorCode::Unauthenticated {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

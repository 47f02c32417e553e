//! What handlers take from a request, each refusal a stable [`ApiError`]:
//!
//! - [`json_body`]: an `application/json` body of at most
//!   [`IngressConfig::body_limit`](crate::IngressConfig::body_limit) bytes, checked
//!   by [`crate::json_guard`] (no repeated key, bounded nesting), then typed.
//! - [`IdPath`]: the `{id}` segment of a route, percent-decoded.
//! - [`parse_id`]: an id from the path or a body, validated by its domain type.
//! - [`idempotency_key`]: the `Idempotency-Key` header, else a digest of
//!   (person, operation, body).
//! - [`trace_of`]: the request's `traceparent` (set by [`crate::observe`]), carried
//!   on the command it becomes.

use axum::extract::{FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use holdpoint_domain::IdempotencyKey;
use holdpoint_telemetry::TraceContext;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;
use crate::json_guard;
use holdpoint_domain::ErrorCode;

/// True when `headers` say `Content-Type: application/json` (parameters such as
/// `charset` aside). `also` lists other accepted media types.
pub fn is_json(headers: &HeaderMap, also: &[&str]) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || also.contains(&v.as_str()))
}

/// Reads a JSON body: `application/json` only (else `415 NRY-0014`), at most
/// `limit` bytes (else `413 NRY-0013`), no repeated key and no nesting deeper than
/// [`json_guard::MAX_DEPTH`] (else `400 NRY-0001`), then typed as `T` (a struct
/// that refuses unknown fields; else `400 NRY-0001`). Returns the typed body and
/// the parsed value.
///
/// # Errors
/// As listed.
pub async fn json_body<T: DeserializeOwned>(
    limit: usize,
    req: Request,
) -> Result<(T, Value), ApiError> {
    if !is_json(req.headers(), &[]) {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send the body as Content-Type: application/json",
        ));
    }
    let bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the body is larger than {limit} bytes"),
            )
        })?;
    match json_guard::check(&bytes) {
        Ok(()) | Err(json_guard::Guard::Invalid) => {}
        Err(g) => return Err(ApiError::invalid(g.to_string())),
    }
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON: {e}")))?;
    // The guard above already refused repeated keys and deep nesting, so the typed
    // body can come from the parsed value instead of a second parse of the bytes.
    let typed =
        T::deserialize(&value).map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?;
    Ok((typed, value))
}

/// The idempotency key of an answer: the `Idempotency-Key` header (exactly one,
/// 1 to 128 printable ASCII characters), else a fresh `auto-<uuid>` for this request
/// alone (README "Idempotency keys").
///
/// Without a key of the client's, every request is a new press: on a blocking
/// session a second answer to an interaction already answered is `409 NRY-0009`
/// ("already answered at …"), identical body or not, because the blocked call no
/// longer waits; only the same explicit key replays the recorded outcome.
/// A product session still replays the recorded answer to any second press.
///
/// # Errors
/// `400 NRY-0001` for several headers or a malformed key.
pub fn idempotency_key(headers: &HeaderMap) -> Result<IdempotencyKey, ApiError> {
    let mut given = headers.get_all("idempotency-key").iter();
    match (given.next(), given.next()) {
        (Some(_), Some(_)) => Err(ApiError::invalid("more than one Idempotency-Key header")),
        (Some(v), None) => v
            .to_str()
            .ok()
            .and_then(|s| IdempotencyKey::parse(s).ok())
            .ok_or_else(|| {
                ApiError::invalid("Idempotency-Key must be 1 to 128 printable ASCII characters")
            }),
        (None, _) => IdempotencyKey::parse(format!("auto-{}", uuid::Uuid::new_v4().simple()))
            .map_err(ApiError::internal),
    }
}

/// The `{id}` segment of a route, percent-decoded. Any extraction failure (e.g. bytes
/// that are not UTF-8) is a stable `400 NRY-0001`, like every other bad id.
#[derive(Debug)]
pub struct IdPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(IdPath(id)),
            Err(e) => Err(ApiError::invalid(format!(
                "invalid id in the path: {}",
                e.body_text()
            ))),
        }
    }
}

/// Validates `raw` as the id `what` with `parse` (a domain id's parser).
///
/// # Errors
/// `400 NRY-0001` naming `what`.
pub fn parse_id<T>(
    what: &str,
    parse: impl FnOnce(String) -> Result<T, holdpoint_domain::IdError>,
    raw: String,
) -> Result<T, ApiError> {
    parse(raw).map_err(|e| ApiError::invalid(format!("invalid {what}: {e}")))
}

/// The request's trace context as the `traceparent` value to send on: the
/// ingress's own span in the caller's trace, put in the request's extensions by
/// [`crate::observe::layer`]; `None` outside that layer.
pub fn trace_of(req: &Request) -> Option<String> {
    req.extensions()
        .get::<TraceContext>()
        .map(TraceContext::header_value)
}

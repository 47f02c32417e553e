//! The decision audit: `GET /v1/audit?after=…&limit=…` pages through the caller's
//! organisation's records on `hp.audit.<org>` (approval decisions by a person, a
//! rule or an expiry; rules written and revoked; never a question), oldest first.

use axum::Json;
use axum::extract::{Query, State};
use holdpoint_domain::Event;
use tracing::warn;

use crate::error::ApiError;
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{AuditEntry, AuditPage, AuditQuery, DEFAULT_PAGE, MAX_RULE_PAGE};

/// `GET /v1/audit?after=…&limit=…`.
pub async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_RULE_PAGE {
        return Err(ApiError::invalid(format!("limit is 1 to {MAX_RULE_PAGE}")));
    }
    let after = q.after.unwrap_or(0);
    let stored = state
        .bus
        .read_audit(&caller.org, after, limit)
        .await
        .map_err(ApiError::unavailable)?;
    let next_after = stored.last().map_or(after, |s| s.sequence);
    let mut items = Vec::with_capacity(stored.len());
    for s in stored {
        match serde_json::from_slice::<Event>(&s.payload) {
            Ok(record) => items.push(AuditEntry {
                sequence: s.sequence,
                record,
            }),
            Err(e) => {
                warn!(sequence = s.sequence, error = %e, "audit record does not decode; skipped")
            }
        }
    }
    Ok(Json(AuditPage { items, next_after }))
}

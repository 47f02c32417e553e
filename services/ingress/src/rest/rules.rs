//! Remembered approval rules: `GET /v1/rules` (a page of the caller's
//! organisation's live rules, or of all its stored ones with `state=all`), `GET /v1/rules/{id}` and `DELETE /v1/rules/{id}` (revoke,
//! recorded in the decision audit). Another organisation's rule is not found
//! (`404 NRY-0027`), exactly like a rule that does not exist.

use axum::Json;
use axum::extract::{Query, State};
use holdpoint_domain::{ErrorCode, Rule, RuleId};
use time::OffsetDateTime;

use crate::error::ApiError;
use crate::extract::{IdPath, parse_id};
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{DEFAULT_PAGE, MAX_RULE_PAGE, RulePage, RuleStateFilter, RulesQuery};

fn not_found(id: &RuleId) -> ApiError {
    ApiError::new(ErrorCode::RuleNotFound, format!("no rule {id}"))
}

/// `GET /v1/rules?state=live|all&limit=…&cursor=…`: live rules unless `state=all`.
pub async fn list_rules(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<RulesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RulePage>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_RULE_PAGE {
        return Err(ApiError::invalid(format!("limit is 1 to {MAX_RULE_PAGE}")));
    }
    let after = match q.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::invalid("invalid cursor"))?,
    };
    let page = state
        .bus
        .list_rules(
            &caller.org,
            after,
            limit,
            match q.state.unwrap_or_default() {
                RuleStateFilter::Live => Some(OffsetDateTime::now_utc()),
                RuleStateFilter::All => None,
            },
        )
        .await
        .map_err(ApiError::unavailable)?;
    Ok(Json(RulePage {
        items: page.items,
        next_cursor: page.next_after.map(|n| n.to_string()),
    }))
}

/// `GET /v1/rules/{id}`.
pub async fn get_rule(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<Rule>, ApiError> {
    let id = parse_id("ruleId", RuleId::parse, id)?;
    let loaded = state
        .bus
        .load_rule(&caller.org, &id)
        .await
        .map_err(ApiError::unavailable)?;
    match loaded.value.filter(|r| r.org == caller.org) {
        Some(r) => Ok(Json(r)),
        None => Err(not_found(&id)),
    }
}

/// `DELETE /v1/rules/{id}`: revokes the rule (it stops matching on the next hold)
/// and returns it as revoked. Revoking it again returns the same revocation.
pub async fn revoke_rule(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<Rule>, ApiError> {
    let id = parse_id("ruleId", RuleId::parse, id)?;
    let revoked = state
        .bus
        .revoke_rule(&caller.org, &id, &caller.person, OffsetDateTime::now_utc())
        .await
        .map_err(ApiError::unavailable)?;
    match revoked {
        Some(r) => Ok(Json(r)),
        None => Err(not_found(&id)),
    }
}

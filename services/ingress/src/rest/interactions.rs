//! Reading interactions: `GET /v1/interactions/{id}` (the public view, arguments
//! only under `call`) and `GET /v1/interactions` (a page of the caller's
//! organisation's interactions in one state, in the order of their last change, or
//! with `sort=expiresAt` those with a deadline, soonest first; with `assignee=me`
//! only those assigned to the caller). Each view says `forYou` when the
//! interaction names assignees.

use axum::Json;
use axum::extract::{Query, State};
use holdpoint_domain::{ErrorCode, InteractionId, InteractionView, State as IState};
use serde_json::Value;

use crate::error::ApiError;
use crate::extract::{IdPath, parse_id};
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{DEFAULT_PAGE, ListQuery, MAX_PAGE, Page, SCAN_CAP};

/// `GET /v1/interactions/{id}`: another organisation's interaction is not found.
pub async fn get_interaction(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<InteractionView>, ApiError> {
    let id = parse_id("interactionId", InteractionId::parse, id)?;
    let loaded = state
        .bus
        .load_interaction(&caller.org, &id)
        .await
        .map_err(ApiError::unavailable)?;
    match loaded.value {
        Some(i) => Ok(Json(i.view_for(&caller.person, &caller.groups))),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no interaction {id}"),
        )),
    }
}

/// `GET /v1/interactions?state=…&limit=…&cursor=…` (README "Listing").
pub async fn list_interactions(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let wanted: Option<IState> = match q.state.as_deref().unwrap_or("pending") {
        "all" => None,
        s => Some(
            serde_json::from_value(Value::String(s.to_owned())).map_err(|_| {
                ApiError::invalid("state is one of pending, resolved, finished, closed, all")
            })?,
        ),
    };
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::invalid(format!("limit is 1 to {MAX_PAGE}")));
    }
    let by_deadline = match q.sort.as_deref() {
        None => false,
        Some("expiresAt") => true,
        Some(_) => return Err(ApiError::invalid("sort is expiresAt")),
    };
    let mine = match q.assignee.as_deref() {
        None => false,
        Some("me") => true,
        Some(_) => return Err(ApiError::invalid("assignee is me")),
    };
    let after = match q.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::invalid("invalid cursor"))?,
    };
    let page = state
        .bus
        .list_page(
            holdpoint_bus::records::Bucket::Interactions,
            &caller.org,
            |i: &holdpoint_domain::Interaction| {
                wanted.is_none_or(|w| i.state == w)
                    && (!by_deadline || i.expires_at.is_some())
                    && (!mine
                        || i.assignees
                            .as_ref()
                            .is_some_and(|a| a.admits(&caller.person, &caller.groups)))
            },
            after,
            if by_deadline { SCAN_CAP } else { limit },
            SCAN_CAP,
        )
        .await
        .map_err(ApiError::unavailable)?;
    if by_deadline {
        // The `limit` soonest deadlines among the records this request read (after
        // `cursor`, when given); `nextCursor` continues the scan past them.
        let mut items = page.items;
        items.sort_by_key(|i| (i.expires_at, i.opened_at));
        items.truncate(limit);
        return Ok(Json(Page {
            items: items
                .iter()
                .map(|i| i.view_for(&caller.person, &caller.groups))
                .collect(),
            next_cursor: page.next_after.map(|n| n.to_string()),
        }));
    }
    Ok(Json(Page {
        items: page
            .items
            .iter()
            .map(|i| i.view_for(&caller.person, &caller.groups))
            .collect(),
        next_cursor: page.next_after.map(|n| n.to_string()),
    }))
}

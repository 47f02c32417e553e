//! Webhook endpoints of the caller's organisation (README "Webhooks"):
//!
//! | method | path | answer |
//! |---|---|---|
//! | POST | `/v1/webhooks` | `201` [`WebhookWithSecret`]: the secret, shown once |
//! | GET | `/v1/webhooks` | [`WebhookList`] |
//! | GET | `/v1/webhooks/{id}` | [`WebhookView`] |
//! | DELETE | `/v1/webhooks/{id}` | `204`; its queued deliveries are dropped |
//! | POST | `/v1/webhooks/{id}/rotate` | [`WebhookWithSecret`]: a new secret; the old one signs until `previousSecretExpiresAt` |
//! | POST | `/v1/webhooks/{id}/enable` | [`WebhookView`]: enabled again, failures reset |
//! | POST | `/v1/webhooks/{id}/test` | `202` [`TestQueued`]: a `webhook-test` CloudEvent queued for this endpoint |
//! | GET | `/v1/webhooks/{id}/attempts` | [`WebhookAttempts`] |
//!
//! The organisation is the caller's; another organisation's endpoint is
//! `404 NRY-0004`, exactly like one that does not exist. The records are in the
//! `HP_WEBHOOKS` bucket (`holdpoint_bus::webhooks`); the notifier delivers.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use holdpoint_bus::Cas;
use holdpoint_domain::webhook::{
    self, CreateWebhook, DEFAULT_ROTATION_OVERLAP_SECS, MAX_ROTATION_OVERLAP_SECS, RotateWebhook,
    TestQueued, WebhookAttempts, WebhookEndpoint, WebhookList, WebhookSecret, WebhookView,
    WebhookWithSecret,
};
use holdpoint_domain::{ErrorCode, Event, EventData, OrgId, WebhookId};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::ApiError;
use crate::extract::{IdPath, json_body};
use crate::identity::Caller;
use crate::state::AppState;

fn new_secret() -> Result<String, ApiError> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| ApiError::internal("no randomness for a webhook secret"))?;
    Ok(webhook::secret_from_bytes(&bytes))
}

fn not_found(id: &str) -> ApiError {
    let shown: String = id.chars().take(64).collect();
    ApiError::new(ErrorCode::NotFound, format!("no webhook {shown}"))
}

async fn load(
    state: &AppState,
    org: &OrgId,
    raw: String,
) -> Result<(WebhookEndpoint, u64), ApiError> {
    let id = WebhookId::parse(raw.clone()).map_err(|_| not_found(&raw))?;
    let loaded = state
        .bus
        .load_webhook(org, &id)
        .await
        .map_err(ApiError::unavailable)?;
    match loaded.value {
        Some(e) if &e.org == org => Ok((e, loaded.revision)),
        _ => Err(not_found(&raw)),
    }
}

/// Reads, changes and writes an endpoint (a few tries when another writer, such
/// as the notifier counting a failure, wrote first).
async fn modify(
    state: &AppState,
    org: &OrgId,
    raw: String,
    change: impl Fn(&mut WebhookEndpoint) -> Result<(), ApiError>,
) -> Result<WebhookEndpoint, ApiError> {
    for _ in 0..5 {
        let (mut e, revision) = load(state, org, raw.clone()).await?;
        change(&mut e)?;
        match state
            .bus
            .write_webhook(&e, revision)
            .await
            .map_err(ApiError::unavailable)?
        {
            Cas::Written(_) => return Ok(e),
            Cas::Conflict => continue,
        }
    }
    Err(ApiError::unavailable("webhook record kept changing"))
}

/// `POST /v1/webhooks`.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    req: Request<Body>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), ApiError> {
    let (body, _): (CreateWebhook, Value) = json_body(state.cfg.body_limit, req).await?;
    // The URL is kept as the notifier will call it (the parsed URL, serialised), so
    // what `GET` shows is exactly what is called.
    let url = webhook::check_url(&body.url, state.cfg.webhooks_local_mode)?;
    webhook::check_registration(&body)?;
    let existing = state
        .bus
        .list_webhooks(&caller.org)
        .await
        .map_err(ApiError::unavailable)?;
    if existing.len() >= webhook::MAX_WEBHOOKS_PER_ORG {
        return Err(ApiError::new(
            ErrorCode::TooManyWebhooks,
            format!(
                "an organisation keeps at most {} webhooks",
                webhook::MAX_WEBHOOKS_PER_ORG
            ),
        ));
    }
    // The notifier's consumer exists before the endpoint does: every event stored
    // from now on is routed, whenever a notifier reads it.
    state
        .bus
        .notifier_consumer()
        .await
        .map_err(ApiError::unavailable)?;
    let secret = new_secret()?;
    let id = WebhookId::parse(format!("wh_{}", uuid::Uuid::new_v4().simple()))
        .map_err(ApiError::internal)?;
    let mut event_types = body.event_types.clone();
    event_types.sort();
    event_types.dedup();
    let e = WebhookEndpoint {
        id,
        org: caller.org.clone(),
        url: url.to_string(),
        event_types,
        description: body.description,
        secrets: vec![WebhookSecret {
            secret: secret.clone(),
            expires_at: None,
        }],
        created_at: OffsetDateTime::now_utc(),
        disabled_at: None,
        consecutive_failures: 0,
    };
    match state
        .bus
        .write_webhook(&e, 0)
        .await
        .map_err(ApiError::unavailable)?
    {
        Cas::Written(_) => Ok((
            StatusCode::CREATED,
            Json(WebhookWithSecret {
                webhook: e.view(),
                secret,
            }),
        )),
        Cas::Conflict => Err(ApiError::internal("webhook id collision")),
    }
}

/// `GET /v1/webhooks`.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<WebhookList>, ApiError> {
    let mut items: Vec<WebhookView> = state
        .bus
        .list_webhooks(&caller.org)
        .await
        .map_err(ApiError::unavailable)?
        .iter()
        .map(WebhookEndpoint::view)
        .collect();
    items.sort_by_key(|w| w.created_at);
    Ok(Json(WebhookList { items }))
}

/// `GET /v1/webhooks/{id}`.
pub async fn get_one(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<WebhookView>, ApiError> {
    Ok(Json(load(&state, &caller.org, id).await?.0.view()))
}

/// `DELETE /v1/webhooks/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    let (e, _) = load(&state, &caller.org, id.clone()).await?;
    let removed = state
        .bus
        .delete_webhook(&caller.org, &e.id)
        .await
        .map_err(ApiError::unavailable)?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(&id))
    }
}

/// `POST /v1/webhooks/{id}/rotate` (body optional: `{"overlapSecs": 3600}`).
pub async fn rotate(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
    req: Request<Body>,
) -> Result<Json<WebhookWithSecret>, ApiError> {
    let empty = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() == b"0");
    let body = if empty {
        RotateWebhook::default()
    } else {
        json_body::<RotateWebhook>(state.cfg.body_limit, req)
            .await?
            .0
    };
    let overlap = body.overlap_secs.unwrap_or(DEFAULT_ROTATION_OVERLAP_SECS);
    if overlap > MAX_ROTATION_OVERLAP_SECS {
        return Err(ApiError::invalid(format!(
            "overlapSecs is at most {MAX_ROTATION_OVERLAP_SECS}"
        )));
    }
    let secret = new_secret()?;
    let e = modify(&state, &caller.org, id, |e| {
        let now = OffsetDateTime::now_utc();
        let until = now + time::Duration::seconds(i64::try_from(overlap).unwrap_or(i64::MAX));
        let mut kept: Vec<WebhookSecret> = Vec::new();
        kept.push(WebhookSecret {
            secret: secret.clone(),
            expires_at: None,
        });
        if let Some(current) = e.secrets.first()
            && overlap > 0
        {
            kept.push(WebhookSecret {
                secret: current.secret.clone(),
                expires_at: Some(until),
            });
        }
        e.secrets = kept;
        Ok(())
    })
    .await?;
    Ok(Json(WebhookWithSecret {
        webhook: e.view(),
        secret,
    }))
}

/// `POST /v1/webhooks/{id}/enable`.
pub async fn enable(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<WebhookView>, ApiError> {
    let e = modify(&state, &caller.org, id, |e| {
        e.disabled_at = None;
        e.consecutive_failures = 0;
        Ok(())
    })
    .await?;
    Ok(Json(e.view()))
}

/// `POST /v1/webhooks/{id}/test`: queues a `webhook-test` CloudEvent for this
/// endpoint only (never stored in the events stream).
pub async fn test_send(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<(StatusCode, Json<TestQueued>), ApiError> {
    let (e, _) = load(&state, &caller.org, id).await?;
    if e.disabled_at.is_some() {
        return Err(ApiError::new(
            ErrorCode::WebhookDisabled,
            "this webhook is disabled; enable it first",
        ));
    }
    let event = Event::new(
        &caller.org,
        None,
        e.id.as_str(),
        &format!("test-{}", uuid::Uuid::new_v4()),
        OffsetDateTime::now_utc(),
        EventData::WebhookTest {
            webhook_id: e.id.clone(),
        },
    );
    let payload = serde_json::to_vec(&event).map_err(ApiError::internal)?;
    state
        .bus
        .enqueue_delivery(&e, &event.id, payload.into())
        .await
        .map_err(ApiError::unavailable)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TestQueued { event_id: event.id }),
    ))
}

/// `GET /v1/webhooks/{id}/attempts`.
pub async fn attempts(
    State(state): State<AppState>,
    IdPath(id): IdPath,
    caller: Caller,
) -> Result<Json<WebhookAttempts>, ApiError> {
    let (e, _) = load(&state, &caller.org, id).await?;
    let items = state
        .bus
        .attempts(&caller.org, &e.id)
        .await
        .map_err(ApiError::unavailable)?;
    Ok(Json(WebhookAttempts { items }))
}

//! `POST /v1/sessions/{sessionId}/messages`: a person's message on a session's
//! lane (the message road's createMessage); the lane's admission rules are the
//! worker's (README "Sessions, lanes and the message road"). The text is a
//! person's: [`rules::check_text`] refuses control characters other than TAB, LF
//! and CR before anything is sent.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use holdpoint_domain::{Command, CommandEnvelope, LaneId, MessageId, SessionId, rules};
use serde_json::Value;

use crate::error::ApiError;
use crate::extract::{IdPath, json_body, parse_id, trace_of};
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::{MessageAccepted, MessageBody};

/// `202` with the message id when its turn started; the lane's refusals otherwise.
pub async fn post_message(
    State(state): State<AppState>,
    IdPath(session_id): IdPath,
    caller: Caller,
    req: Request<Body>,
) -> Result<(StatusCode, Json<MessageAccepted>), ApiError> {
    let session = parse_id("sessionId", SessionId::parse, session_id)?;
    let trace = trace_of(&req);
    let (body, _raw): (MessageBody, Value) = json_body(state.cfg.body_limit, req).await?;
    // A person's text: no control character but TAB, LF and CR (`NRY-0001`, the
    // code a NUL always had).
    rules::check_text("text", &body.text, rules::MAX_TEXT_CHARS)?;
    // Refused here, before the message id could replay an earlier message's outcome
    // for a body that is not a message at all (the worker refuses it too).
    if body.text.trim().is_empty() {
        return Err(ApiError::invalid(format!(
            "text must hold 1 to {} characters",
            rules::MAX_TEXT_CHARS
        )));
    }
    let lane = parse_id(
        "lane",
        LaneId::parse,
        body.lane.unwrap_or_else(|| "main".into()),
    )?;
    let message_id = parse_id(
        "messageId",
        MessageId::parse,
        body.message_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
    )?;
    let env = CommandEnvelope {
        org: caller.org,
        command: Command::Message {
            session,
            lane,
            message_id: message_id.clone(),
            by: caller.person,
            text: body.text,
        },
    };
    let outcome = super::submit(&state, env, trace.as_deref()).await?;
    match outcome.result {
        Ok(_) => Ok((
            StatusCode::ACCEPTED,
            Json(MessageAccepted {
                message_id: message_id.to_string(),
                admission: "admitted".into(),
            }),
        )),
        Err(r) => Err(r.into()),
    }
}

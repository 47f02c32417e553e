//! Server-sent event streams fed from the events stream (`HP_EVENTS`).
//!
//! `GET /v1/events?task=<taskId>&type=<name>` streams the caller's organisation's
//! CloudEvents as they are stored, oldest first, through an ordered consumer whose
//! filter subject is `hp.evt.<org>.<task|*>.<type|*>`. The organisation comes from
//! the caller's identity and is part of the filter subject, so another
//! organisation's events can never match.
//!
//! Each SSE event carries `id:` = the event's sequence in the events stream,
//! `event:` = its short name (`task-status`, `tool-call-finished`, ...), and
//! `data:` = the CloudEvent JSON exactly as stored. Without a resume point the
//! stream starts with the next new event. A client resumes with the
//! `Last-Event-ID` header (what `EventSource` sends on reconnect) or `?after=<seq>`:
//! delivery starts at sequence + 1, so nothing repeats and nothing is skipped
//! (`after=0` replays everything the stream still keeps). Idle streams get a
//! comment line every [`KEEP_ALIVE`].
//!
//! The A2A task streams (`SendStreamingMessage`, `SubscribeToTask`) use
//! [`follow`] on one task's `task-status` subject; see [`crate::a2a`]. The query
//! type is [`crate::wire::EventsQuery`].

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use holdpoint_domain::{ErrorCode, TaskId, event::EVENT_NAMES};
use tracing::warn;

use crate::error::ApiError;
use crate::identity::Caller;
use crate::limits::StreamPermit;
use crate::state::AppState;
use crate::wire::EventsQuery;

/// How often an idle stream sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The resume header a reconnecting `EventSource` sends.
pub const LAST_EVENT_ID: &str = "last-event-id";

pub use holdpoint_bus::events::{Start, Stored};

/// Follows `filter` (built by [`holdpoint_bus::Topology::event_filter`] from the
/// caller's organisation: the tenant boundary) from `start` with
/// [`holdpoint_bus::Bus::follow`], which survives NATS restarts without repeats or
/// gaps; the stream ends when the ingress shuts down.
///
/// # Errors
/// Transient when the stream or the first consumer cannot be had.
pub async fn follow(
    state: &AppState,
    filter: String,
    start: Start,
) -> Result<BoxStream<'static, Stored>, holdpoint_bus::BusError> {
    let stored = state.bus.follow(filter, start).await?;
    Ok(stored
        .take_until(state.streams.clone().cancelled_owned())
        .boxed())
}

/// Wraps SSE events in axum's [`Sse`] with keep-alive comments; `permit` is held
/// as long as the stream lives.
pub fn sse_response<S>(events: S, permit: StreamPermit) -> Response
where
    S: Stream<Item = SseEvent> + Send + 'static,
{
    let events = events.map(move |e| {
        let _held = &permit;
        Ok::<_, Infallible>(e)
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// The resume point: `Last-Event-ID` (exactly one, a sequence number), else
/// `?after=`, else new events only.
fn start_from(headers: &HeaderMap, after: Option<u64>) -> Result<Start, ApiError> {
    let mut given = headers.get_all(LAST_EVENT_ID).iter();
    let header = match (given.next(), given.next()) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("more than one Last-Event-ID header")),
        (Some(v), None) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::invalid("Last-Event-ID must be the sequence number of an event (`id:` of the stream)")
                })?,
        ),
        (None, _) => None,
    };
    match header.or(after) {
        Some(seq) => seq
            .checked_add(1)
            .map(Start::At)
            .ok_or_else(|| ApiError::invalid("Last-Event-ID is out of range")),
        None => Ok(Start::New),
    }
}

/// `GET /v1/events?task=…&type=…&after=…` (see the module docs).
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let task = match q.task {
        Some(t) => {
            Some(TaskId::parse(t).map_err(|e| ApiError::invalid(format!("invalid task: {e}")))?)
        }
        None => None,
    };
    let name = match q.name {
        Some(n) if EVENT_NAMES.contains(&n.as_str()) => Some(n),
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "type is one of {}",
                EVENT_NAMES.join(", ")
            )));
        }
        None => None,
    };
    let start = start_from(&headers, q.after)?;
    let permit = state
        .stream_counts
        .acquire(&caller, state.cfg.max_streams_per_caller)?;
    let filter = state
        .bus
        .topo
        .event_filter(&caller.org, task.as_ref(), name.as_deref());
    let stored = follow(&state, filter, start).await.map_err(|e| {
        warn!(error = %e, "answering 503");
        ApiError::new(
            ErrorCode::Unavailable,
            "the event stream is not reachable right now; retry",
        )
    })?;
    let events = stored.filter_map(|s| {
        let name = s.subject.rsplit('.').next().unwrap_or_default().to_owned();
        let event = match std::str::from_utf8(&s.payload) {
            Ok(data) => Some(
                SseEvent::default()
                    .id(s.sequence.to_string())
                    .event(name)
                    .data(data),
            ),
            Err(_) => {
                warn!(sequence = s.sequence, "skipping an event that is not UTF-8");
                None
            }
        };
        futures::future::ready(event)
    });
    Ok(sse_response(events, permit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_points() {
        let mut h = HeaderMap::new();
        assert_eq!(start_from(&h, None).expect("ok"), Start::New);
        assert_eq!(start_from(&h, Some(0)).expect("ok"), Start::At(1));
        h.insert(LAST_EVENT_ID, "41".parse().expect("value"));
        assert_eq!(start_from(&h, Some(3)).expect("ok"), Start::At(42));
        h.insert(LAST_EVENT_ID, "x".parse().expect("value"));
        assert!(start_from(&h, None).is_err());
        h.insert(LAST_EVENT_ID, u64::MAX.to_string().parse().expect("value"));
        assert!(start_from(&h, None).is_err());
    }
}

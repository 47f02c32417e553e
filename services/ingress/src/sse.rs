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

use async_nats::jetstream::consumer;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use holdpoint_bus::Topology;
use holdpoint_domain::{ErrorCode, OrgId, TaskId, event::EVENT_NAMES};
use tracing::warn;

use crate::error::ApiError;
use crate::identity::Caller;
use crate::state::AppState;
use crate::wire::EventsQuery;

/// How often an idle stream sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The resume header a reconnecting `EventSource` sends.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// The filter subject for an organisation's events: `hp.evt.<org>.<task>.<name>`,
/// with `*` for "any task" or "any name". Every token is a validated id passed
/// through [`holdpoint_domain::subject_token`], or a known event name.
pub fn event_filter(
    topo: &Topology,
    org: &OrgId,
    task: Option<&TaskId>,
    name: Option<&str>,
) -> String {
    let task = task.map_or_else(|| "*".to_owned(), |t| t.token().into_owned());
    format!(
        "{}.evt.{}.{}.{}",
        topo.subject_prefix,
        org.token(),
        task,
        name.unwrap_or("*")
    )
}

/// Where a followed stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Only events stored from now on.
    New,
    /// From this events-stream sequence on (inclusive).
    At(u64),
}

/// One stored event: its sequence in the events stream, subject and payload.
#[derive(Debug, Clone)]
pub struct Stored {
    /// Sequence in `HP_EVENTS`.
    pub sequence: u64,
    /// The NATS subject (`hp.evt.<org>.<task>.<name>`).
    pub subject: String,
    /// The CloudEvent JSON as stored.
    pub payload: bytes::Bytes,
}

/// Why a stream could not be followed.
#[derive(Debug, thiserror::Error)]
#[error("cannot follow {filter}: {message}")]
pub struct FollowError {
    /// The filter subject.
    pub filter: String,
    /// What NATS said.
    pub message: String,
}

/// Follows the events stream through an ordered consumer filtered to `filter`,
/// from `start`. The consumer is created before this returns, so a caller that
/// got `Ok` sees every event stored from then on. The stream ends on the first
/// consumer error (the client resumes from the last sequence it saw).
///
/// # Errors
/// [`FollowError`] when the stream or the consumer cannot be had.
pub async fn follow(
    state: &AppState,
    filter: String,
    start: Start,
) -> Result<BoxStream<'static, Stored>, FollowError> {
    let fail = |e: &dyn std::fmt::Display| FollowError {
        filter: filter.clone(),
        message: e.to_string(),
    };
    let stream = state
        .bus
        .js
        .get_stream_no_info(state.bus.topo.events_stream())
        .await
        .map_err(|e| fail(&e))?;
    let deliver_policy = match start {
        Start::New => consumer::DeliverPolicy::New,
        Start::At(sequence) => consumer::DeliverPolicy::ByStartSequence {
            start_sequence: sequence.max(1),
        },
    };
    let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter.clone(),
            deliver_policy,
            ..Default::default()
        })
        .await
        .map_err(|e| fail(&e))?;
    let messages = consumer.messages().await.map_err(|e| fail(&e))?;
    let shown = filter.clone();
    let items = messages
        .take_while(move |m| {
            let go = match m {
                Ok(_) => true,
                Err(e) => {
                    warn!(filter = %shown, error = %e, "event stream ended by a consumer error");
                    false
                }
            };
            futures::future::ready(go)
        })
        .filter_map(|m| {
            let stored = m.ok().and_then(|m| {
                let sequence = m.info().ok()?.stream_sequence;
                Some(Stored {
                    sequence,
                    subject: m.subject.to_string(),
                    payload: m.payload.clone(),
                })
            });
            futures::future::ready(stored)
        })
        .take_until(state.streams.clone().cancelled_owned());
    Ok(items.boxed())
}

/// Wraps SSE events in axum's [`Sse`] with keep-alive comments.
pub fn sse_response<S>(events: S) -> Response
where
    S: Stream<Item = SseEvent> + Send + 'static,
{
    Sse::new(events.map(Ok::<_, Infallible>))
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
    let filter = event_filter(&state.bus.topo, &caller.org, task.as_ref(), name.as_deref());
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
    Ok(sse_response(events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_scoped_and_encoded() {
        let topo = Topology::default();
        let org = OrgId::parse("acme").expect("org");
        assert_eq!(event_filter(&topo, &org, None, None), "hp.evt.acme.*.*");
        let task = TaskId::parse("t1.x").expect("task");
        let f = event_filter(&topo, &org, Some(&task), Some("task-status"));
        assert!(f.starts_with("hp.evt.acme._"), "{f}");
        assert!(f.ends_with(".task-status"));
        assert_eq!(f.split('.').count(), 5);
    }

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

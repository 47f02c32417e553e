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
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::error::ApiError;
use crate::identity::Caller;
use crate::limits::StreamPermit;
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

/// How often a followed stream checks whether the NATS connection was re-made.
const RECONNECT_CHECK: Duration = Duration::from_millis(500);

/// Longest wait between two attempts to re-create a follower's consumer.
const REOPEN_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Creates an ordered consumer on the events stream, filtered to `filter`, that
/// delivers from sequence `from` on.
async fn open_consumer(
    bus: &holdpoint_bus::Bus,
    filter: &str,
    from: u64,
) -> Result<consumer::pull::Ordered, String> {
    let stream = bus
        .js
        .get_stream_no_info(bus.topo.events_stream())
        .await
        .map_err(|e| e.to_string())?;
    let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter.to_owned(),
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: from.max(1),
            },
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    consumer.messages().await.map_err(|e| e.to_string())
}

/// One follower: where it is, and the consumer it reads (none while it re-makes
/// one).
struct Follower {
    bus: holdpoint_bus::Bus,
    filter: String,
    /// The next sequence to deliver: nothing below it is delivered again.
    next: u64,
    messages: Option<consumer::pull::Ordered>,
    /// The NATS client's connection count when `messages` was made.
    connects: u64,
    check: tokio::time::Interval,
    backoff: Duration,
    stop: CancellationToken,
}

impl Follower {
    fn connects(&self) -> u64 {
        self.bus
            .client
            .statistics()
            .connects
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The next stored event, or `None` once the ingress shuts down.
    async fn next_event(&mut self) -> Option<Stored> {
        loop {
            let Some(messages) = self.messages.as_mut() else {
                let connects = self.connects();
                let opened = tokio::select! {
                    () = self.stop.cancelled() => return None,
                    opened = open_consumer(&self.bus, &self.filter, self.next) => opened,
                };
                match opened {
                    Ok(m) => {
                        self.messages = Some(m);
                        self.connects = connects;
                        self.backoff = RECONNECT_CHECK / 2;
                    }
                    Err(e) => {
                        warn!(filter = %self.filter, error = %e, "event stream: cannot re-create the consumer yet");
                        tokio::select! {
                            () = self.stop.cancelled() => return None,
                            () = tokio::time::sleep(self.backoff) => {}
                        }
                        self.backoff = (self.backoff * 2).min(REOPEN_BACKOFF_MAX);
                    }
                }
                continue;
            };
            tokio::select! {
                () = self.stop.cancelled() => return None,
                _ = self.check.tick() => {
                    // A re-made connection may be to a restarted server that lost the
                    // (in-memory) consumer: make a new one from where we are, rather
                    // than wait for missed heartbeats to tell.
                    if self.connects() != self.connects {
                        debug!(filter = %self.filter, next = self.next, "event stream: NATS reconnected; re-creating the consumer");
                        self.messages = None;
                    }
                }
                m = messages.next() => match m {
                    Some(Ok(m)) => {
                        let Ok(info) = m.info() else { continue };
                        let sequence = info.stream_sequence;
                        if sequence < self.next {
                            continue;
                        }
                        self.next = sequence + 1;
                        return Some(Stored {
                            sequence,
                            subject: m.subject.to_string(),
                            payload: m.payload.clone(),
                        });
                    }
                    Some(Err(e)) => {
                        warn!(filter = %self.filter, error = %e, next = self.next, "event stream: consumer error; re-creating it");
                        self.messages = None;
                    }
                    None => self.messages = None,
                },
            }
        }
    }
}

/// Follows the events stream through an ordered consumer filtered to `filter`,
/// from `start`. The first consumer is created before this returns, so a caller
/// that got `Ok` sees every event stored from then on. The follower survives a
/// lost NATS connection, a restarted nats-server and consumer errors: it re-creates
/// its consumer from the next sequence it has not delivered (checking the
/// connection every half second), so nothing is skipped and nothing repeats. It
/// ends only when the ingress shuts down (or the client hangs up).
///
/// # Errors
/// [`FollowError`] when the stream or the first consumer cannot be had.
pub async fn follow(
    state: &AppState,
    filter: String,
    start: Start,
) -> Result<BoxStream<'static, Stored>, FollowError> {
    let fail = |e: &dyn std::fmt::Display| FollowError {
        filter: filter.clone(),
        message: e.to_string(),
    };
    let bus = state.bus.clone();
    let next = match start {
        Start::At(sequence) => sequence.max(1),
        Start::New => {
            let stream = bus
                .js
                .get_stream(bus.topo.events_stream())
                .await
                .map_err(|e| fail(&e))?;
            stream.cached_info().state.last_sequence + 1
        }
    };
    let mut follower = Follower {
        connects: 0,
        messages: None,
        bus,
        filter: filter.clone(),
        next,
        check: tokio::time::interval(RECONNECT_CHECK),
        backoff: RECONNECT_CHECK / 2,
        stop: state.streams.clone(),
    };
    follower
        .check
        .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    follower.connects = follower.connects();
    follower.messages = Some(
        open_consumer(&follower.bus, &filter, next)
            .await
            .map_err(|e| fail(&e))?,
    );
    Ok(futures::stream::unfold(follower, |mut f| async move {
        let stored = f.next_event().await?;
        Some((stored, f))
    })
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
    Ok(sse_response(events, permit))
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

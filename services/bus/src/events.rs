//! Reading the events stream (`HP_EVENTS`) within one organisation: following it
//! from a sequence (SSE, A2A task streams, the client library) and reading the last
//! event on a subject.
//!
//! The filter subject is built by [`Topology::event_filter`] from the caller's
//! organisation: it is the tenant boundary, and every reader goes through it.

use std::time::Duration;

use async_nats::jetstream::consumer;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tracing::{debug, warn};

use crate::{Bus, BusError};

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
    /// Sequence in `HP_EVENTS` (the resume point).
    pub sequence: u64,
    /// The NATS subject (`hp.evt.<org>.<task>.<name>`).
    pub subject: String,
    /// The CloudEvent JSON as stored.
    pub payload: Bytes,
}

/// How long a follower waits before resuming after the server went away, at most.
const RESUME_PAUSE_MAX: Duration = Duration::from_secs(2);

impl Bus {
    async fn ordered(
        &self,
        filter: &str,
        start: Start,
    ) -> Result<consumer::pull::Ordered, BusError> {
        let stream = self
            .js
            .get_stream_no_info(self.topo.events_stream())
            .await
            .map_err(|e| BusError::transient("follow events", e))?;
        let deliver_policy = match start {
            Start::New => consumer::DeliverPolicy::New,
            Start::At(sequence) => consumer::DeliverPolicy::ByStartSequence {
                start_sequence: sequence.max(1),
            },
        };
        let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: filter.to_owned(),
                deliver_policy,
                ..Default::default()
            })
            .await
            .map_err(|e| BusError::transient("follow events", e))?;
        consumer
            .messages()
            .await
            .map_err(|e| BusError::transient("follow events", e))
    }

    /// Follows the events stream through an ordered consumer filtered to `filter`,
    /// from `start`, for as long as the caller reads. The first consumer is created
    /// before this returns, so a caller that got `Ok` sees every event stored from
    /// then on. When the server goes away (a restart, a leader change), the follower
    /// resumes after the last sequence it yielded, with a growing pause (at most
    /// 2 s): nothing repeats, nothing is skipped.
    ///
    /// # Errors
    /// Transient when the first consumer cannot be created.
    pub async fn follow(
        &self,
        filter: String,
        start: Start,
    ) -> Result<BoxStream<'static, Stored>, BusError> {
        let first = self.ordered(&filter, start).await?;
        let bus = self.clone();
        let resume_from = match start {
            Start::At(s) => Some(s),
            Start::New => None,
        };
        let state = (
            bus,
            filter,
            Some(first),
            resume_from,
            Duration::from_millis(50),
        );
        let s = futures::stream::unfold(
            state,
            |(bus, filter, mut current, mut next, mut pause)| async move {
                loop {
                    let messages = match current.as_mut() {
                        Some(m) => m,
                        None => {
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(RESUME_PAUSE_MAX);
                            // Resume after the last yielded sequence; a follower that saw
                            // nothing yet resumes with new events only.
                            let start = next.map_or(Start::New, Start::At);
                            match bus.ordered(&filter, start).await {
                                Ok(m) => {
                                    debug!(filter = %filter, "event follower resumed");
                                    current = Some(m);
                                    continue;
                                }
                                Err(e) => {
                                    debug!(filter = %filter, error = %e, "event follower cannot resume yet");
                                    continue;
                                }
                            }
                        }
                    };
                    match messages.next().await {
                        Some(Ok(m)) => {
                            let Ok(info) = m.info() else { continue };
                            let sequence = info.stream_sequence;
                            next = Some(sequence + 1);
                            pause = Duration::from_millis(50);
                            let stored = Stored {
                                sequence,
                                subject: m.subject.to_string(),
                                payload: m.payload.clone(),
                            };
                            return Some((stored, (bus, filter, current, next, pause)));
                        }
                        Some(Err(e)) => {
                            warn!(filter = %filter, error = %e, "event follower lost its consumer; resuming");
                            current = None;
                        }
                        None => current = None,
                    }
                }
            },
        );
        Ok(s.boxed())
    }

    /// The last event stored on exactly `subject` (no wildcards), with its sequence.
    ///
    /// # Errors
    /// Transient when NATS does not answer.
    pub async fn last_event(&self, subject: &str) -> Result<Option<Stored>, BusError> {
        let stream = self
            .js
            .get_stream_no_info(self.topo.events_stream())
            .await
            .map_err(|e| BusError::transient("last event", e))?;
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => Ok(Some(Stored {
                sequence: m.sequence,
                subject: m.subject.to_string(),
                payload: m.payload,
            })),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(BusError::transient("last event", e)),
        }
    }
}

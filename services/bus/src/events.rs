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

use crate::backoff::Backoff;
use crate::{Bus, BusError};

/// Where a followed stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Only events stored from now on.
    New,
    /// From this events-stream sequence on (inclusive).
    At(u64),
}

/// One stored message: its sequence in its stream, subject and payload (an event
/// of `HP_EVENTS`, an audit record, a webhook attempt).
#[derive(Debug, Clone)]
pub struct Stored {
    /// Sequence in its stream (for events, the resume point).
    pub sequence: u64,
    /// The NATS subject (`hp.evt.<org>.<task>.<name>` for an event).
    pub subject: String,
    /// The CloudEvent JSON as stored.
    pub payload: Bytes,
}

/// How often a follower checks whether the NATS connection was re-made.
const RECONNECT_CHECK: Duration = Duration::from_millis(500);

/// One follower: where it is, and the consumer it reads (none while it re-makes
/// one).
struct Follower {
    bus: Bus,
    filter: String,
    /// The next sequence to deliver (`None`: new events only, nothing seen yet):
    /// nothing below it is delivered again.
    next: Option<u64>,
    messages: Option<consumer::pull::Ordered>,
    /// The NATS client's connection count when `messages` was made.
    connects: u64,
    check: tokio::time::Interval,
    attempt: i64,
}

impl Follower {
    fn connects(&self) -> u64 {
        self.bus
            .client
            .statistics()
            .connects
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn start(&self) -> Start {
        self.next.map_or(Start::New, Start::At)
    }

    /// The next stored event. Never ends by itself: it re-creates its consumer
    /// until the server answers again.
    async fn next_event(&mut self) -> Stored {
        loop {
            let Some(messages) = self.messages.as_mut() else {
                let connects = self.connects();
                match self.bus.ordered(&self.filter, self.start()).await {
                    Ok(m) => {
                        self.messages = Some(m);
                        self.connects = connects;
                        self.attempt = 0;
                        debug!(filter = %self.filter, "event follower resumed");
                    }
                    Err(e) => {
                        self.attempt += 1;
                        debug!(filter = %self.filter, error = %e, "event follower cannot resume yet");
                        tokio::time::sleep(Backoff::RECONNECT.delay(self.attempt)).await;
                    }
                }
                continue;
            };
            tokio::select! {
                _ = self.check.tick() => {
                    // A re-made connection may be to a restarted server that lost the
                    // (in-memory) consumer: make a new one from where we are, rather
                    // than wait for missed heartbeats to tell.
                    if self.connects() != self.connects {
                        debug!(filter = %self.filter, next = ?self.next, "NATS reconnected; re-creating the event consumer");
                        self.messages = None;
                    }
                }
                m = messages.next() => match m {
                    Some(Ok(m)) => {
                        let Ok(info) = m.info() else { continue };
                        let sequence = info.stream_sequence;
                        if self.next.is_some_and(|n| sequence < n) {
                            continue;
                        }
                        self.next = Some(sequence + 1);
                        return Stored {
                            sequence,
                            subject: m.subject.to_string(),
                            payload: m.payload.clone(),
                        };
                    }
                    Some(Err(e)) => {
                        warn!(filter = %self.filter, error = %e, next = ?self.next, "event follower lost its consumer; re-creating it");
                        self.messages = None;
                    }
                    None => self.messages = None,
                },
            }
        }
    }
}

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
        // Named, so the create request carries the filter in its subject
        // (`CONSUMER.CREATE.<stream>.<name>.<filter>`): an organisation's own users
        // may create consumers only in that form, with their filter. The name is
        // random (the last token of a fresh inbox: a nuid), so nobody can guess it.
        let inbox = self.client.new_inbox();
        let name = inbox.rsplit('.').next().unwrap_or(&inbox).to_owned();
        let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                name: Some(name),
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

    /// Follows the events stream through an ordered consumer filtered to `filter`
    /// (build it with [`Topology::event_filter`](crate::Topology::event_filter): the
    /// tenant boundary), from `start`, for as long as the caller reads. The first
    /// consumer is created before this returns, so a caller that got `Ok` sees every
    /// event stored from then on.
    ///
    /// The follower survives a lost connection, a restarted nats-server and consumer
    /// errors: it re-creates its consumer from the next sequence it has not yielded
    /// (checking the connection every 500 ms, pausing as [`Backoff::RECONNECT`] while
    /// the server does not answer), so nothing is skipped and nothing repeats. The
    /// stream never ends by itself; stop reading it (or wrap it in `take_until`).
    ///
    /// # Errors
    /// Transient when the first consumer cannot be created.
    pub async fn follow(
        &self,
        filter: String,
        start: Start,
    ) -> Result<BoxStream<'static, Stored>, BusError> {
        // "New" is pinned to a sequence now, so a resume after an outage also
        // delivers what was stored while the follower had no consumer.
        let start = match start {
            Start::New => Start::At(self.events_last_sequence().await? + 1),
            at => at,
        };
        let first = self.ordered(&filter, start).await?;
        let mut check = tokio::time::interval(RECONNECT_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut follower = Follower {
            bus: self.clone(),
            filter,
            next: match start {
                Start::At(s) => Some(s.max(1)),
                Start::New => None,
            },
            messages: Some(first),
            connects: 0,
            check,
            attempt: 0,
        };
        follower.connects = follower.connects();
        Ok(futures::stream::unfold(follower, |mut f| async move {
            let stored = f.next_event().await;
            Some((stored, f))
        })
        .boxed())
    }

    /// Every event of `org`'s task `task` named `name`: those the events stream holds
    /// and those committed so recently that it has not sourced them yet (read from
    /// the state stream, which keeps each for [`crate::Topology::effect_ttl`]), each
    /// once, in the order they were committed. For a read that must see the
    /// decision it follows (an A2A retry finding the answer its key gave), which a
    /// read of the events stream alone can miss by the sourcing's few milliseconds.
    /// The payloads only; sequences are the events stream's where it has them.
    ///
    /// # Errors
    /// Transient when NATS does not answer in time.
    pub async fn task_events(
        &self,
        org: &holdpoint_domain::OrgId,
        task: &holdpoint_domain::TaskId,
        name: &str,
    ) -> Result<Vec<Stored>, BusError> {
        let public = self
            .stored_events(&self.topo.event_filter(org, Some(task), Some(name)))
            .await?;
        let recent = self
            .read_stored(
                self.topo.state_stream(),
                self.topo.event_state_filter(org, task, name),
                consumer::DeliverPolicy::All,
                usize::MAX,
                "read recent events",
            )
            .await?;
        #[derive(serde::Deserialize)]
        struct IdOnly {
            id: String,
        }
        let id = |s: &Stored| {
            serde_json::from_slice::<IdOnly>(&s.payload)
                .ok()
                .map(|e| e.id)
        };
        let mut seen: std::collections::HashSet<String> = public.iter().filter_map(id).collect();
        let mut all = public;
        for s in recent {
            if let Some(i) = id(&s)
                && seen.insert(i)
            {
                all.push(s);
            }
        }
        Ok(all)
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

    /// The last event of `org`'s task `task` named `name` as the events stream holds
    /// it, once the stream has sourced the last one committed: a decision's events
    /// reach the events stream a few milliseconds after its 2xx (the state stream
    /// stores them, the events stream sources them), so a plain read right after a
    /// decision can find the event before it. This one reads the state stream's last
    /// such effect (`hp.fx.evt.<org>.<task>.*.<name>`, kept for
    /// [`crate::Topology::effect_ttl`]) and waits, at most `within`, until the
    /// events stream's last message on `hp.evt.<org>.<task>.<name>` was sourced from
    /// that state-stream sequence or a later one (its `Nats-Stream-Source` header).
    /// Past `within`, or when the state stream no longer keeps the effect, it
    /// answers what the events stream holds. For a follower that must start right
    /// after the newest status (an A2A stream picking up a task), not for history.
    ///
    /// # Errors
    /// Transient when NATS does not answer.
    pub async fn last_task_event(
        &self,
        org: &holdpoint_domain::OrgId,
        task: &holdpoint_domain::TaskId,
        name: &str,
        within: Duration,
    ) -> Result<Option<Stored>, BusError> {
        let state = self
            .js
            .get_stream_no_info(self.topo.state_stream())
            .await
            .map_err(|e| BusError::transient("last task event", e))?;
        let committed = match state
            .get_last_raw_message_by_subject(&self.topo.event_state_filter(org, task, name))
            .await
        {
            Ok(m) => Some(m.sequence),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
            Err(e) => return Err(BusError::transient("last task event", e)),
        };
        let events = self
            .js
            .get_stream_no_info(self.topo.events_stream())
            .await
            .map_err(|e| BusError::transient("last task event", e))?;
        let subject = self.topo.event_filter(org, Some(task), Some(name));
        let deadline = tokio::time::Instant::now() + within;
        let mut pause = Duration::from_millis(2);
        loop {
            let last = match events.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => Some(m),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
                Err(e) => return Err(BusError::transient("last task event", e)),
            };
            let sourced_from = last.as_ref().map_or(0, |m| {
                m.headers
                    .get("Nats-Stream-Source")
                    .and_then(|v| v.as_str().split(' ').nth(1))
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0)
            });
            let caught_up = committed.is_none_or(|c| sourced_from >= c);
            if caught_up || tokio::time::Instant::now() >= deadline {
                if !caught_up {
                    debug!(%subject, ?committed, sourced_from, "events stream has not sourced the last status yet");
                }
                return Ok(last.map(|m| Stored {
                    sequence: m.sequence,
                    subject: m.subject.to_string(),
                    payload: m.payload,
                }));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// The events stream's last sequence (0 when empty): a follower started at the
    /// next one sees only events stored after this call.
    ///
    /// # Errors
    /// Transient when NATS does not answer.
    pub async fn events_last_sequence(&self) -> Result<u64, BusError> {
        let stream = self
            .js
            .get_stream(self.topo.events_stream())
            .await
            .map_err(|e| BusError::transient("events stream info", e))?;
        Ok(stream.cached_info().state.last_sequence)
    }

    /// Every event stored on `filter` (wildcards allowed) up to now, oldest first:
    /// for small per-task subjects (a task's resolutions), not for an organisation's
    /// whole history. Each read waits at most 5 s.
    ///
    /// # Errors
    /// Transient when NATS does not answer in time.
    pub async fn stored_events(&self, filter: &str) -> Result<Vec<Stored>, BusError> {
        self.read_stored(
            self.topo.events_stream(),
            filter.to_owned(),
            consumer::DeliverPolicy::All,
            usize::MAX,
            "read events",
        )
        .await
    }

    /// Up to `limit` messages of `stream` on `filter` as stored now, from
    /// `deliver` on, oldest first, through an ordered consumer: the one way the bus
    /// reads a bounded slice of a stream (a task's events, an organisation's audit
    /// page, an endpoint's webhook attempts). Each read waits at most 5 s once it
    /// has one of the process's [`crate::STORED_READERS`] permits.
    ///
    /// # Errors
    /// Transient (named `what`) when NATS does not answer in time.
    pub(crate) async fn read_stored(
        &self,
        stream: String,
        filter: String,
        deliver: consumer::DeliverPolicy,
        limit: usize,
        what: &'static str,
    ) -> Result<Vec<Stored>, BusError> {
        // Held until the consumer is deleted: the bound on consumers at once.
        let _permit = self
            .readers
            .acquire()
            .await
            .map_err(|e| BusError::transient(what, e))?;
        let stream = self
            .js
            .get_stream_no_info(&stream)
            .await
            .map_err(|e| BusError::transient(what, e))?;
        let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: filter,
                deliver_policy: deliver,
                ..Default::default()
            })
            .await
            .map_err(|e| BusError::transient(what, e))?;
        // The consumer is removed once read (best effort), not left to its inactive
        // threshold: relay probes and audit pages make many, and the server caps
        // how many a stream may have.
        let name = consumer.cached_info().name.clone();
        let out = read_ordered(consumer, limit, what).await;
        let _ = stream.delete_consumer(&name).await;
        out
    }
}

/// At most `limit` messages of an ordered consumer (see [`Bus::read_stored`]).
async fn read_ordered(
    consumer: consumer::Consumer<consumer::pull::OrderedConfig>,
    limit: usize,
    what: &'static str,
) -> Result<Vec<Stored>, BusError> {
    let mut out = Vec::new();
    if consumer.cached_info().num_pending == 0 || limit == 0 {
        return Ok(out);
    }
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| BusError::transient(what, e))?;
    while let Some(msg) = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .map_err(|_| BusError::transient(what, "timed out"))?
    {
        let msg = msg.map_err(|e| BusError::transient(what, e))?;
        let Ok(info) = msg.info() else { continue };
        let (sequence, pending) = (info.stream_sequence, info.pending);
        out.push(Stored {
            sequence,
            subject: msg.subject.to_string(),
            payload: msg.payload.clone(),
        });
        if pending == 0 || out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

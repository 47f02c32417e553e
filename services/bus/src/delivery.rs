//! The commands a partition delivers, as the worker sees them: a pull of partition
//! `p` ([`Bus::pull_partition`]) yields [`Delivery`]s, each a command message with
//! what the worker needs of it already read (subject, payload, command id, reply
//! subject, trace context, the server's pin id and delivery count), and the three
//! ways to settle it. The worker builds no pull, reads no `Nats-*` header, sends no
//! raw progress ack and formats no reply subject itself: all of that is here.
//!
//! A [`Delivery`] that is dropped without being settled (a panic, a batch
//! abandoned at shutdown, a pull torn down) NAKs its message at once, so the command
//! is delivered again right away instead of waiting out `ack_wait`. The choice
//! between NAK and term is made from the [`ErrorKind`] of what went wrong, never
//! from a message string ([`Delivery::fail`]).

use std::time::Duration;

use async_nats::jetstream::consumer::pull::{MessagesErrorKind, Stream};
use async_nats::jetstream::{self, AckKind};
use bytes::Bytes;
use futures::{FutureExt as _, StreamExt as _};
use time::OffsetDateTime;
use tracing::debug;

use crate::backoff::Backoff;
use crate::{Bus, BusError, ErrorKind, REPLY_HEADER, TRACEPARENT_HEADER};

/// The header the server sets on a message of a pinned priority group: the pin id
/// of the client it is pinned to (ADR-42).
const PIN_ID_HEADER: &str = "Nats-Pin-Id";
/// A JetStream progress ack ("work in progress"): sent to a message's reply
/// subject, it restarts the message's `ack_wait`.
const PROGRESS: &[u8] = b"+WPI";

/// A delivered command message that NAKs itself unless settled.
#[derive(Debug)]
pub struct Delivery {
    msg: Option<jetstream::Message>,
    /// The stored subject (`hp.cmd.<p>.<org>.<key>.<verb>`).
    pub subject: String,
    /// The command's JSON.
    pub payload: Bytes,
    /// `Nats-Msg-Id` as published (the command id, or it with a `-r<n>` suffix;
    /// see [`crate::outcome`]).
    pub msg_id: Option<String>,
    /// Where the publisher waits for the outcome (`Hp-Reply-To`), unchecked: the
    /// worker replies only to the organisation's own inboxes
    /// ([`crate::permissions::reply_allowed`]).
    pub reply: Option<String>,
    /// The W3C trace context the publisher sent, if any.
    pub traceparent: Option<String>,
    /// The pin id the server delivered it under, if the consumer pins.
    pub pin: Option<String>,
    /// How many times the server delivered it (1 the first time).
    pub delivered: i64,
    /// Its sequence in the commands stream (0 when the server sent no metadata).
    pub stream_sequence: u64,
    /// When the server stored it, by the server's clock.
    pub published: Option<OffsetDateTime>,
}

impl Delivery {
    /// Reads what the worker needs out of a delivered message.
    pub fn new(msg: jetstream::Message) -> Self {
        let header = |name: &str| {
            msg.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.to_string())
        };
        let (delivered, stream_sequence, published) = msg.info().map_or((1, 0, None), |i| {
            (i.delivered, i.stream_sequence, Some(i.published))
        });
        Delivery {
            subject: msg.subject.to_string(),
            payload: msg.payload.clone(),
            msg_id: header("Nats-Msg-Id"),
            reply: header(REPLY_HEADER),
            traceparent: header(TRACEPARENT_HEADER),
            pin: header(PIN_ID_HEADER),
            delivered,
            stream_sequence,
            published,
            msg: Some(msg),
        }
    }

    /// Something that keeps this message ours while long work goes on: each
    /// [`Progress::send`] restarts its `ack_wait`. `None` once settled, or for a
    /// message the server sent without an ack subject.
    pub fn progress(&self, bus: &Bus) -> Option<Progress> {
        let subject = self.msg.as_ref()?.reply.as_ref()?.to_string();
        Some(Progress {
            client: bus.client.clone(),
            subject,
        })
    }

    /// Acknowledges: the command is done and will not come back (unless the ack is
    /// lost, when its redelivery replays the recorded transition).
    pub async fn ack(mut self) {
        if let Some(m) = self.msg.take()
            && let Err(e) = m.ack().await
        {
            debug!(error = %e, "ack not sent; the command will be redelivered and replayed");
        }
    }

    /// Settles a command that could not be finished, by the kind of error:
    /// transient → NAK after a growing delay; conflict → NAK at once (decided again
    /// on fresh records); permanent → term (the caller leaves a `dead-letter` event).
    pub async fn fail(mut self, kind: ErrorKind, backoff: &Backoff) {
        let Some(m) = self.msg.take() else { return };
        let ack = match kind {
            ErrorKind::Transient => AckKind::Nak(Some(backoff.delay(self.delivered))),
            ErrorKind::Conflict => AckKind::Nak(Some(Duration::ZERO)),
            ErrorKind::Permanent => AckKind::Term,
        };
        if let Err(e) = m.ack_with(ack).await {
            debug!(error = %e, "nak not sent; the command will come back after ack_wait");
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        let Some(m) = self.msg.take() else { return };
        // Not settled: give it back now. Drop cannot wait, so the NAK is sent from a
        // task when a runtime is there (it always is in the worker).
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = m.ack_with(AckKind::Nak(None)).await;
            });
        }
    }
}

/// A progress ack for one delivered message, sendable while the message itself is
/// owned elsewhere ([`Delivery::progress`]).
#[derive(Debug, Clone)]
pub struct Progress {
    client: async_nats::Client,
    subject: String,
}

impl Progress {
    /// Restarts the message's `ack_wait`; a failure to send is left to `ack_wait`.
    pub async fn send(&self) {
        let _ = self
            .client
            .publish(self.subject.clone(), Bytes::from_static(PROGRESS))
            .await;
    }
}

/// Why a pull of a partition yielded no command.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// An idle heartbeat was late: a busy machine, or the server away. The pull
    /// goes on by itself after a reconnect, keeping the runner's pin id, which a new
    /// pull would not have.
    #[error("missed idle heartbeat")]
    MissedHeartbeat,
    /// The consumer was deleted or a pull failed: pull anew.
    #[error("{0}")]
    Broken(String),
}

/// The commands of one partition, as the server delivers them to this worker.
pub struct Deliveries {
    messages: Stream,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries").finish_non_exhaustive()
    }
}

impl Deliveries {
    /// The next delivered command; `None` when the pull ended.
    pub async fn next(&mut self) -> Option<Result<Delivery, PullError>> {
        Some(match self.messages.next().await? {
            Ok(m) => Ok(Delivery::new(m)),
            Err(e) if e.kind() == MessagesErrorKind::MissingHeartbeat => {
                Err(PullError::MissedHeartbeat)
            }
            Err(e) => Err(PullError::Broken(e.to_string())),
        })
    }

    /// The commands already delivered, up to `max`, without waiting.
    pub fn ready(&mut self, max: usize) -> Vec<Delivery> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.messages.next().now_or_never() {
                Some(Some(Ok(m))) => out.push(Delivery::new(m)),
                _ => break,
            }
        }
        out
    }
}

impl Bus {
    /// Pulls partition `p`'s commands in the priority group, up to `batch` per pull
    /// request.
    ///
    /// Pull requests expire well before the pin does (0.4 of
    /// [`crate::Topology::priority_timeout`], at least 200 ms), so the pinned worker
    /// keeps it: every pull with its pin id restarts the server's timer; the server
    /// sends an idle heartbeat four times per expiry ([`Bus::pull_heartbeat`]).
    ///
    /// # Errors
    /// Transient when the consumer cannot be created or bound.
    pub async fn pull_partition(&self, p: u32, batch: usize) -> Result<Deliveries, BusError> {
        let consumer = self.partition_consumer(p).await?;
        let expires = self.pull_expiry();
        let messages = consumer
            .stream()
            .max_messages_per_batch(batch.max(1))
            .expires(expires)
            .heartbeat(self.pull_heartbeat())
            .group(self.topo.priority_group())
            .messages()
            .await
            .map_err(|e| BusError::transient("pull partition", e))?;
        Ok(Deliveries { messages })
    }

    fn pull_expiry(&self) -> Duration {
        self.topo
            .priority_timeout
            .mul_f64(0.4)
            .max(Duration::from_millis(200))
    }

    /// The idle heartbeat of a partition pull: a quarter of its expiry. A worker
    /// that hears nothing for several of these pulls anew.
    pub fn pull_heartbeat(&self) -> Duration {
        self.pull_expiry() / 4
    }

    /// Sends a command's outcome to the subject its publisher waits on. Best
    /// effort: a lost reply makes the publisher look the outcome up
    /// ([`crate::outcome`]).
    pub async fn reply(&self, subject: &str, outcome: Bytes) {
        let _ = self.client.publish(subject.to_owned(), outcome).await;
    }
}

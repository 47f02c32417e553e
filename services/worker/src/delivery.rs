//! One delivered command, and what becomes of it: ack, NAK with a delay, or term.
//!
//! A [`Delivery`] that is dropped without being settled (a panic, a batch abandoned
//! at shutdown, a pull stream torn down) NAKs its message at once, so the command is
//! delivered again right away instead of waiting out `ack_wait`. The choice between
//! NAK and term is made from the [`ErrorKind`] of what went wrong, never from a
//! message string ([`Delivery::fail`]).

use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use holdpoint_bus::ErrorKind;
use tracing::debug;

use holdpoint_bus::backoff::Backoff;

/// A delivered command message that NAKs itself unless settled.
#[derive(Debug)]
pub struct Delivery {
    msg: Option<jetstream::Message>,
    /// How many times the server delivered it (1 the first time).
    pub delivered: i64,
    /// Its sequence in the commands stream.
    pub stream_sequence: u64,
}

impl Delivery {
    /// Wraps a delivered message.
    pub fn new(msg: jetstream::Message) -> Self {
        let (delivered, stream_sequence) = msg
            .info()
            .map(|i| (i.delivered, i.stream_sequence))
            .unwrap_or((1, 0));
        Delivery {
            msg: Some(msg),
            delivered,
            stream_sequence,
        }
    }

    /// The message (until settled).
    pub fn message(&self) -> Option<&jetstream::Message> {
        self.msg.as_ref()
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

    /// Keeps the message ours for another `ack_wait` while work goes on.
    pub async fn progress(&self) {
        if let Some(m) = &self.msg {
            let _ = m.ack_with(AckKind::Progress).await;
        }
    }

    /// Settles a command that could not be finished, by the kind of error:
    /// transient → NAK after a growing delay; conflict → NAK at once (decided again on
    /// fresh records); permanent → term (the caller leaves a `dead-letter` event).
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

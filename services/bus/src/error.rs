//! Errors of the NATS boundary, typed by what the caller should do with them.
//!
//! Every [`BusError`] has an [`ErrorKind`], decided here from async-nats's typed
//! error kinds (never from a message string):
//!
//! - [`ErrorKind::Transient`]: NATS is away, slow, or electing a leader (timeouts, no
//!   responders, a stream not found during an election, a broken connection). Retry
//!   after a short delay; a worker NAKs the command with a growing delay and never
//!   dead-letters it.
//! - [`ErrorKind::Conflict`]: a compare-and-set lost to a concurrent writer. Reload
//!   and decide again.
//! - [`ErrorKind::Permanent`]: retrying cannot help (a record that does not decode, a
//!   message over the server's payload limit, a server too old). A worker
//!   terminates the command and leaves a `dead-letter` event.

use async_nats::jetstream::{context, kv};

/// What the caller should do with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Retry after a short, growing delay.
    Transient,
    /// Reload the records and decide again.
    Conflict,
    /// Give up: the input or the deployment is wrong.
    Permanent,
}

/// Errors of the NATS boundary.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The server is older than [`crate::MIN_SERVER`].
    #[error(
        "nats-server {found} is too old: Holdpoint needs {}.{}.{} or newer (run ops/setup.sh for a current one)",
        crate::MIN_SERVER.0, crate::MIN_SERVER.1, crate::MIN_SERVER.2
    )]
    ServerTooOld {
        /// The version the server reported.
        found: String,
    },
    /// The store was written by store format `found`, older than this release's
    /// [`crate::STORE_FORMAT`]: `holdpoint migrate` brings it up.
    #[error(
        "the store has format {found}; this release writes format {}: stop every \
         Holdpoint process and run `holdpoint migrate` (README.md, \"Upgrades and version skew\")",
        crate::STORE_FORMAT
    )]
    StoreFormat {
        /// The format the store has.
        found: u32,
    },
    /// Connecting failed.
    #[error("cannot connect to NATS at {url}: {source}")]
    Connect {
        /// The URL, password hidden.
        url: String,
        /// Why.
        source: async_nats::ConnectError,
    },
    /// A JetStream or KV operation failed.
    #[error("{op}: {message}")]
    Nats {
        /// What was attempted.
        op: &'static str,
        /// What to do about it.
        kind: ErrorKind,
        /// The error text.
        message: String,
    },
    /// A stored record could not be decoded.
    #[error("stored record {key} is not valid: {message}")]
    Corrupt {
        /// The KV key or subject.
        key: String,
        /// Human-readable text for the model or a person; no internals.
        message: String,
    },
}

impl BusError {
    /// What the caller should do with this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            BusError::Connect { .. } => ErrorKind::Transient,
            BusError::Nats { kind, .. } => *kind,
            BusError::ServerTooOld { .. }
            | BusError::StoreFormat { .. }
            | BusError::Corrupt { .. } => ErrorKind::Permanent,
        }
    }

    /// A transient failure of `op`.
    pub fn transient(op: &'static str, e: impl std::fmt::Display) -> Self {
        BusError::Nats {
            op,
            kind: ErrorKind::Transient,
            message: e.to_string(),
        }
    }

    /// A permanent failure of `op`.
    pub fn permanent(op: &'static str, e: impl std::fmt::Display) -> Self {
        BusError::Nats {
            op,
            kind: ErrorKind::Permanent,
            message: e.to_string(),
        }
    }

    /// A lost compare-and-set of `op`.
    pub fn conflict(op: &'static str) -> Self {
        BusError::Nats {
            op,
            kind: ErrorKind::Conflict,
            message: "the record changed since it was read".into(),
        }
    }

    /// A JetStream publish (or its PubAck) that failed.
    pub fn publish(op: &'static str, e: &context::PublishError) -> Self {
        use context::PublishErrorKind as K;
        let kind = match e.kind() {
            K::WrongLastSequence => ErrorKind::Conflict,
            K::MaxPayloadExceeded => ErrorKind::Permanent,
            K::StreamNotFound
            | K::TimedOut
            | K::BrokenPipe
            | K::MaxAckPending
            | K::WrongLastMessageId
            | K::Other => ErrorKind::Transient,
        };
        BusError::Nats {
            op,
            kind,
            message: e.to_string(),
        }
    }

    /// A KV read that failed.
    pub fn entry(op: &'static str, e: &kv::EntryError) -> Self {
        let kind = match e.kind() {
            kv::EntryErrorKind::InvalidKey => ErrorKind::Permanent,
            _ => ErrorKind::Transient,
        };
        BusError::Nats {
            op,
            kind,
            message: e.to_string(),
        }
    }
}

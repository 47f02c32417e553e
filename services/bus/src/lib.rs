//! Holdpoint's NATS boundary: every subject, stream, consumer, bucket and publish
//! lives here; the worker, the ingress and the client ask this crate.
//!
//! - [`topology`]: names, subjects, settings, and what the server can do.
//! - [`error`]: [`BusError`], typed as transient, conflict or permanent.
//! - [`Bus`] ([`setup`](Bus::setup)): creates or binds every stream and bucket.
//! - [`records`]: typed reads of the state stream's records, paged listing.
//! - [`backoff`]: the one retry pacing policy.
//! - [`batch`]: atomic batch publish (ADR-50): messages to one stream stored
//!   together or not at all, and what to do after each failure.
//! - [`delivery`]: pulling a partition's commands, each a [`delivery::Delivery`]
//!   to ack, NAK or term, with progress acks and outcome replies.
//! - [`commit`]: a decision's records and effects as one atomic batch to the state
//!   stream, and storing outcomes.
//! - [`migrate`]: bringing a store of format 1 (KV buckets with outboxes) to the
//!   state stream (`holdpoint migrate`).
//! - [`events`]: following the events stream (SSE, A2A streams, clients) within an
//!   organisation.
//! - [`partitions`]: the partition consumers and worker presence.
//! - [`outcome`]: publishing a command and waiting, bounded, for its outcome.
//! - [`webhooks`]: webhook endpoints, their delivery queues, attempts and the
//!   notifier's consumer of the events stream.
//! - [`permissions`]: the NATS permissions of an organisation's own users (its
//!   runtime, its events reader), from the topology's names.
//! - [`connect`]: connects and refuses a nats-server older than [`MIN_SERVER`].
//!
//! Every subject token is a validated id passed through
//! [`holdpoint_domain::subject_token`].

pub mod backoff;
pub mod batch;
pub mod commit;
pub mod delivery;
pub mod error;
pub mod events;
pub mod migrate;
pub mod outcome;
pub mod partitions;
pub mod permissions;
pub mod records;
pub mod rules;
mod setup;
pub mod topology;
pub mod webhooks;

use std::time::Duration;

use async_nats::jetstream::{self, kv};

pub use error::{BusError, ErrorKind};
pub use records::{Cas, Loaded, Page};
pub use setup::{STORE_FORMAT, STORE_FORMAT_KEY, store_format_of};
pub use topology::Topology;

/// Oldest nats-server Holdpoint runs against: 2.15.1, the release `ops/setup.sh`
/// pins. Everything Holdpoint builds on is there (stream subject transforms and
/// `partition()` mappings since 2.10, priority groups with pinned clients since
/// 2.11, message schedules and atomic batch publish since 2.12, with the atomic
/// batch fixes up to 2.15); there is one code path, and an older server is refused
/// at connect and at setup ([`BusError::ServerTooOld`], naming both versions).
/// README.md, "Setup".
pub const MIN_SERVER: (u64, u64, u64) = (2, 15, 1);
/// Header carrying the subject the worker replies the outcome to.
pub const REPLY_HEADER: &str = "Hp-Reply-To";
/// Header carrying the W3C trace context.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Connects to NATS and checks the server version.
///
/// `url` is one URL or several separated by commas (a cluster). A user and password
/// in a URL (`nats://user:password@host:4222`, percent-encoded) authenticate the
/// connection to every server, discovered ones included; a user without a password
/// is sent as a token. async-nats itself ignores credentials in URLs. Errors and
/// logs show URLs with the password replaced by `***` ([`redact_url`]).
///
/// # Errors
/// [`BusError::Connect`] when unreachable (after the client's own retries are
/// exhausted), [`BusError::ServerTooOld`] for a server older than [`MIN_SERVER`],
/// [`BusError::Nats`] for a URL that does not parse.
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, BusError> {
    connect_with_inbox(url, name, None).await
}

/// [`connect`], with the client's inboxes under `inbox_prefix` when given (an
/// organisation's own users may subscribe only to their prefix:
/// [`permissions::org_inbox_prefix`]).
///
/// # Errors
/// As [`connect`].
pub async fn connect_with_inbox(
    url: &str,
    name: &str,
    inbox_prefix: Option<&str>,
) -> Result<async_nats::Client, BusError> {
    let shown = redact_url(url);
    let mut servers = Vec::new();
    let mut auth = None;
    for part in url.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let addr: async_nats::ServerAddr = part.parse().map_err(|e| {
            BusError::permanent("connect", format!("bad NATS URL {}: {e}", redact_url(part)))
        })?;
        if auth.is_none()
            && let Some(user) = addr.username()
        {
            auth = Some((percent_decode(user), addr.password().map(percent_decode)));
        }
        servers.push(addr);
    }
    let mut options = async_nats::ConnectOptions::new();
    match auth {
        Some((user, Some(password))) => options = options.user_and_password(user, password),
        Some((token, None)) => options = options.token(token),
        None => {}
    }
    if let Some(prefix) = inbox_prefix {
        options = options.custom_inbox_prefix(prefix);
    }
    let client = options
        .name(name)
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(5)))
        .max_reconnects(None)
        .connect(servers)
        .await
        .map_err(|source| BusError::Connect {
            url: shown.clone(),
            source,
        })?;
    // With retry_on_initial_connect the first server INFO may not be there yet.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let version = client.server_info().version;
        if !version.is_empty() {
            check_version(&version)?;
            return Ok(client);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(BusError::transient(
                "connect",
                format!("no answer from NATS at {shown}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `url` (one or comma-separated) with every password (or token) replaced by
/// `***`, for errors and logs.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(|part| {
            let Some((scheme, rest)) = part.split_once("://") else {
                return part.to_owned();
            };
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..authority_end].rsplit_once('@') {
                Some((userinfo, host)) => {
                    // `user:password` keeps the user; a lone token is all secret.
                    let shown = userinfo
                        .split_once(':')
                        .map_or_else(|| "***".to_owned(), |(user, _)| format!("{user}:***"));
                    format!("{scheme}://{shown}@{host}{}", &rest[authority_end..])
                }
                None => part.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Decodes `%XX` escapes (URL user info); anything else is kept as it is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// `major.minor.patch` of a `[v]major.minor.patch[-suffix]` version.
pub fn parse_version(version: &str) -> Option<(u64, u64, u64)> {
    let core = version
        .trim_start_matches('v')
        .split(['-', '+'])
        .next()
        .unwrap_or("");
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Checks a `major.minor.patch[-suffix]` version against [`MIN_SERVER`].
///
/// # Errors
/// [`BusError::ServerTooOld`] when older or unparsable.
pub fn check_version(version: &str) -> Result<(), BusError> {
    match parse_version(version) {
        Some(v) if v >= MIN_SERVER => Ok(()),
        _ => Err(BusError::ServerTooOld {
            found: version.to_owned(),
        }),
    }
}

/// A connected handle to every stream and bucket.
#[derive(Clone)]
pub struct Bus {
    /// The core client.
    pub client: async_nats::Client,
    /// The JetStream context every stream, bucket and publish goes through.
    pub js: jetstream::Context,
    /// Names and settings.
    pub topo: Topology,
    /// `HP_STATE`: every record (interactions, tasks, sessions and lanes, rules;
    /// keys in [`topology`]) and, on the effect subjects of its stream, the
    /// effects the public streams source. Written by atomic batches ([`commit`]).
    pub state: kv::Store,
    /// `HP_OUTCOMES`: outcomes of decisions that wrote nothing, key `<Nats-Msg-Id>`
    /// (kept [`Topology::outcome_ttl`], 24 h by default).
    pub outcomes: kv::Store,
    /// Webhook endpoints bucket.
    pub webhooks: kv::Store,
    /// Webhook deliveries already made (expiring markers).
    pub webhook_delivered: kv::Store,
    /// Permits for the consumers that bounded reads of a stream make (audit pages,
    /// a task's events, webhook attempts: `read_stored` in `events.rs`), shared by
    /// every clone of this bus: at most [`STORED_READERS`] such consumers exist at
    /// once per process, however many requests read at the same time.
    readers: std::sync::Arc<tokio::sync::Semaphore>,
}

/// How many consumers a process's bounded stream reads may hold open at once
/// (see [`Bus`]'s `readers`). Each lives for one read, a few milliseconds; a read
/// beyond the bound waits for a permit. nats-server counts consumers per stream
/// against its limits, and a burst of 200 audit pages would otherwise make 200.
pub const STORED_READERS: usize = 16;

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("topo", &self.topo)
            .finish_non_exhaustive()
    }
}

impl Bus {
    /// Whether NATS, the streams and the buckets Holdpoint needs are reachable (the
    /// admin listener's `/readyz`), within `timeout`.
    ///
    /// # Errors
    /// What is not reachable, as text for the probe's body.
    pub async fn check_ready(&self, timeout: Duration) -> Result<(), String> {
        let checks = async {
            self.js.query_account().await.map_err(|e| e.to_string())?;
            for name in [self.topo.commands_stream(), self.topo.events_stream()] {
                self.js
                    .get_stream(&name)
                    .await
                    .map_err(|e| format!("stream {name}: {e}"))?;
            }
            for bucket in [self.topo.state_bucket(), self.topo.outcomes_bucket()] {
                self.js
                    .get_key_value(&bucket)
                    .await
                    .map_err(|e| format!("bucket {bucket}: {e}"))?;
            }
            Ok::<(), String>(())
        };
        match tokio::time::timeout(timeout, checks).await {
            Ok(r) => r,
            Err(_) => Err("NATS timed out".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_check() {
        assert!(check_version("2.15.1").is_ok());
        assert!(check_version("v2.16.0-RC.1").is_ok());
        assert!(check_version("3.0.0").is_ok());
        assert!(check_version("2.15.0").is_err());
        assert!(check_version("2.14.9").is_err());
        assert!(check_version("v2.11.0-RC.1").is_err());
        assert!(check_version("2.9.10").is_err());
        assert!(check_version("garbage").is_err());
        assert!(check_version("").is_err());
    }

    #[test]
    fn urls_are_shown_without_secrets() {
        assert_eq!(
            redact_url("nats://worker:s3cr%40t@127.0.0.1:4222"),
            "nats://worker:***@127.0.0.1:4222"
        );
        assert_eq!(
            redact_url("nats://a:b@h1:1, nats://h2:2,tls://tok@h3:3/x"),
            "nats://a:***@h1:1, nats://h2:2,tls://***@h3:3/x"
        );
        assert_eq!(redact_url("127.0.0.1:4222"), "127.0.0.1:4222");
    }

    #[test]
    fn user_info_is_percent_decoded() {
        assert_eq!(percent_decode("s3cr%40t%3A%2f"), "s3cr@t:/");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}

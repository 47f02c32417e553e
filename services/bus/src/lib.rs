//! Holdpoint's NATS topology, shared by the ingress, the worker and the client.
//!
//! - [`Topology`]: the names (prefix configurable), stream and bucket settings.
//! - [`Bus`]: a connected handle that creates or binds every stream, bucket and the
//!   workers' durable consumer, and offers typed reads and publishes.
//! - [`connect`]: connects and refuses a nats-server older than [`MIN_SERVER`].
//! - [`outcome`]: publish a command and wait, bounded, for the worker's outcome.
//!
//! Subjects (DESIGN "NATS topology"): commands `hp.cmd.<org>.<verb>`, events
//! `hp.evt.<org>.<task>.<name>` (`_` for events without a task), lane messages
//! `hp.lane.<org>.<session>.<lane>`, audit `hp.audit.<org>`. Every token is a
//! validated id passed through [`holdpoint_domain::subject_token`].

pub mod outcome;

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use futures::StreamExt as _;
use holdpoint_domain::{
    CommandEnvelope, Event, Interaction, InteractionId, LaneMessage, OrgId, Outcome, Session,
    SessionId,
};
use serde::de::DeserializeOwned;

/// Oldest nats-server Holdpoint runs against (DESIGN: 2.9, what Debian ships).
pub const MIN_SERVER: (u64, u64, u64) = (2, 9, 0);
/// Header carrying the subject the worker replies the outcome to.
pub const REPLY_HEADER: &str = "Hp-Reply-To";
/// Header carrying the W3C trace context.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Errors of the NATS boundary.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The server is older than [`MIN_SERVER`].
    #[error(
        "nats-server {found} is too old: Holdpoint needs {}.{}.{} or newer (run ops/setup.sh for a current one)",
        MIN_SERVER.0, MIN_SERVER.1, MIN_SERVER.2
    )]
    ServerTooOld {
        /// The version the server reported.
        found: String,
    },
    /// Connecting failed.
    #[error("cannot connect to NATS at {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        source: async_nats::ConnectError,
    },
    /// A JetStream or KV operation failed (retryable unless the message says otherwise).
    #[error("{op}: {message}")]
    Nats {
        /// What was attempted.
        op: &'static str,
        /// The error text.
        message: String,
    },
    /// A stored record could not be decoded.
    #[error("stored record {key} is not valid: {message}")]
    Corrupt {
        /// The KV key.
        key: String,
        /// Why.
        message: String,
    },
}

impl BusError {
    fn nats(op: &'static str, e: impl std::fmt::Display) -> Self {
        BusError::Nats {
            op,
            message: e.to_string(),
        }
    }
}

/// Names and settings of everything Holdpoint keeps in NATS.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Prefix of stream and bucket names (`HP` gives `HP_COMMANDS`).
    pub name_prefix: String,
    /// Prefix of subjects (`hp` gives `hp.cmd.…`).
    pub subject_prefix: String,
    /// Replicas of every stream and bucket (1, or 3 in a cluster).
    pub replicas: usize,
    /// JetStream duplicate window of the commands and events streams.
    pub duplicate_window: Duration,
    /// The workers' consumer `ack_wait`; redeliveries back off from it.
    pub ack_wait: Duration,
    /// The workers' consumer `max_deliver`.
    pub max_deliver: i64,
    /// How long stored outcomes (for duplicate requests) are kept.
    pub outcome_ttl: Duration,
    /// How long events are kept in the events stream.
    pub event_max_age: Duration,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            name_prefix: "HP".into(),
            subject_prefix: "hp".into(),
            replicas: 1,
            duplicate_window: Duration::from_secs(120),
            ack_wait: Duration::from_secs(30),
            max_deliver: 20,
            outcome_ttl: Duration::from_secs(24 * 3600),
            event_max_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl Topology {
    /// The commands stream (`HP_COMMANDS`).
    pub fn commands_stream(&self) -> String {
        format!("{}_COMMANDS", self.name_prefix)
    }
    /// The events stream (`HP_EVENTS`).
    pub fn events_stream(&self) -> String {
        format!("{}_EVENTS", self.name_prefix)
    }
    /// The lanes stream (`HP_LANES`).
    pub fn lanes_stream(&self) -> String {
        format!("{}_LANES", self.name_prefix)
    }
    /// The audit stream (`HP_AUDIT`).
    pub fn audit_stream(&self) -> String {
        format!("{}_AUDIT", self.name_prefix)
    }
    /// The interactions bucket (`HP_INTERACTIONS`).
    pub fn interactions_bucket(&self) -> String {
        format!("{}_INTERACTIONS", self.name_prefix)
    }
    /// The sessions bucket (`HP_SESSIONS`).
    pub fn sessions_bucket(&self) -> String {
        format!("{}_SESSIONS", self.name_prefix)
    }
    /// The outcomes bucket (`HP_OUTCOMES`).
    pub fn outcomes_bucket(&self) -> String {
        format!("{}_OUTCOMES", self.name_prefix)
    }
    /// The workers' durable consumer.
    pub fn worker_consumer(&self) -> String {
        format!("{}_WORKERS", self.name_prefix)
    }

    /// `hp.cmd.<org>.<verb>`.
    pub fn command_subject(&self, env: &CommandEnvelope) -> String {
        format!(
            "{}.cmd.{}.{}",
            self.subject_prefix,
            env.org.token(),
            env.verb()
        )
    }
    /// `hp.evt.<org>.<task>.<name>`; `_` stands for "no task".
    pub fn event_subject(&self, e: &Event) -> String {
        let task = e
            .taskid
            .as_ref()
            .map_or_else(|| "_".to_owned(), |t| t.token().into_owned());
        format!(
            "{}.evt.{}.{}.{}",
            self.subject_prefix,
            e.orgid.token(),
            task,
            e.name()
        )
    }
    /// Filter for an organisation's events: `hp.evt.<org>.>`.
    pub fn org_events_filter(&self, org: &OrgId) -> String {
        format!("{}.evt.{}.>", self.subject_prefix, org.token())
    }
    /// `hp.audit.<org>`.
    pub fn audit_subject(&self, org: &OrgId) -> String {
        format!("{}.audit.{}", self.subject_prefix, org.token())
    }
    /// `hp.lane.<org>.<session>.<lane>`.
    pub fn lane_subject(&self, m: &LaneMessage) -> String {
        format!(
            "{}.lane.{}.{}.{}",
            self.subject_prefix,
            m.org.token(),
            m.session.token(),
            m.lane.token()
        )
    }
    /// KV key `<org>.<interactionId>`.
    pub fn interaction_key(org: &OrgId, id: &InteractionId) -> String {
        format!("{}.{}", org.token(), id.token())
    }
    /// KV key `<org>.<sessionId>`.
    pub fn session_key(org: &OrgId, id: &SessionId) -> String {
        format!("{}.{}", org.token(), id.token())
    }
}

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
    let shown = redact_url(url);
    let mut servers = Vec::new();
    let mut auth = None;
    for part in url.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let addr: async_nats::ServerAddr = part.parse().map_err(|e| {
            BusError::nats("connect", format!("bad NATS URL {}: {e}", redact_url(part)))
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
            return Err(BusError::nats(
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
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Checks a `major.minor.patch[-suffix]` version against [`MIN_SERVER`].
///
/// # Errors
/// [`BusError::ServerTooOld`] when older or unparsable.
pub fn check_version(version: &str) -> Result<(), BusError> {
    let core = version
        .trim_start_matches('v')
        .split(['-', '+'])
        .next()
        .unwrap_or("");
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let parsed = (
        parts.next().flatten(),
        parts.next().flatten(),
        parts.next().flatten(),
    );
    match parsed {
        (Some(a), Some(b), Some(c)) if (a, b, c) >= MIN_SERVER => Ok(()),
        _ => Err(BusError::ServerTooOld {
            found: version.to_owned(),
        }),
    }
}

/// A record loaded from KV with its revision (0 when absent).
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// The record, if present.
    pub value: Option<T>,
    /// Its KV revision; the compare-and-set writes against it.
    pub revision: u64,
}

/// A page of interactions and where the next one starts.
#[derive(Debug, Clone)]
pub struct Page {
    /// The interactions, in the order of their last write.
    pub items: Vec<Interaction>,
    /// The stream sequence to continue after; `None` on the last page.
    pub next_after: Option<u64>,
}

/// Result of a compare-and-set write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cas {
    /// Written at this revision.
    Written(u64),
    /// Somebody wrote first: reload and decide again.
    Conflict,
}

/// A connected handle to every stream and bucket.
#[derive(Clone)]
pub struct Bus {
    /// The core client.
    pub client: async_nats::Client,
    /// JetStream context.
    pub js: jetstream::Context,
    /// Names and settings.
    pub topo: Topology,
    /// Interactions bucket.
    pub interactions: kv::Store,
    /// Sessions bucket.
    pub sessions: kv::Store,
    /// Outcomes bucket.
    pub outcomes: kv::Store,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("topo", &self.topo)
            .finish_non_exhaustive()
    }
}

impl Bus {
    /// Creates (or updates) every stream, bucket and the workers' consumer, and
    /// returns a handle. Idempotent: every process may call it at start.
    ///
    /// # Errors
    /// [`BusError::Nats`] when JetStream refuses.
    pub async fn setup(client: async_nats::Client, topo: Topology) -> Result<Self, BusError> {
        Self::setup_with(client, topo, true).await
    }

    /// Like [`Bus::setup`], but never changes a stream that exists: for clients (a
    /// runtime's default topology must not reset the duplicate window or replicas an
    /// operator configured). Streams and buckets that do not exist yet are created.
    ///
    /// # Errors
    /// [`BusError::Nats`] when JetStream refuses.
    pub async fn attach(client: async_nats::Client, topo: Topology) -> Result<Self, BusError> {
        Self::setup_with(client, topo, false).await
    }

    async fn setup_with(
        client: async_nats::Client,
        topo: Topology,
        update: bool,
    ) -> Result<Self, BusError> {
        let js = jetstream::new(client.clone());
        let sp = &topo.subject_prefix;
        let file = |name: String, subjects: Vec<String>| stream::Config {
            name,
            subjects,
            storage: stream::StorageType::File,
            num_replicas: topo.replicas,
            duplicate_window: topo.duplicate_window,
            ..Default::default()
        };
        let streams = [
            stream::Config {
                retention: stream::RetentionPolicy::WorkQueue,
                ..file(topo.commands_stream(), vec![format!("{sp}.cmd.>")])
            },
            stream::Config {
                max_age: topo.event_max_age,
                ..file(topo.events_stream(), vec![format!("{sp}.evt.>")])
            },
            file(topo.lanes_stream(), vec![format!("{sp}.lane.>")]),
            file(topo.audit_stream(), vec![format!("{sp}.audit.>")]),
        ];
        for cfg in streams {
            ensure_stream(&js, cfg, update).await?;
        }
        let bucket = |bucket: String, max_age: Duration| kv::Config {
            bucket,
            history: 1,
            storage: stream::StorageType::File,
            num_replicas: topo.replicas,
            max_age,
            ..Default::default()
        };
        let interactions =
            ensure_bucket(&js, bucket(topo.interactions_bucket(), Duration::ZERO)).await?;
        let sessions = ensure_bucket(&js, bucket(topo.sessions_bucket(), Duration::ZERO)).await?;
        let outcomes = ensure_bucket(&js, bucket(topo.outcomes_bucket(), topo.outcome_ttl)).await?;
        Ok(Bus {
            client,
            js,
            topo,
            interactions,
            sessions,
            outcomes,
        })
    }

    /// The workers' durable pull consumer on the commands stream (created if absent).
    ///
    /// # Errors
    /// [`BusError::Nats`] when JetStream refuses.
    pub async fn worker_consumer(&self) -> Result<consumer::PullConsumer, BusError> {
        let stream = self
            .js
            .get_stream(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::nats("get commands stream", e))?;
        let a = self.topo.ack_wait;
        let backoff = vec![a, a * 2, a * 4, a * 4];
        let cfg = consumer::pull::Config {
            durable_name: Some(self.topo.worker_consumer()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: a,
            max_deliver: self.topo.max_deliver.max(backoff.len() as i64 + 1),
            backoff,
            max_ack_pending: 10_000,
            ..Default::default()
        };
        stream
            .get_or_create_consumer(&self.topo.worker_consumer(), cfg)
            .await
            .map_err(|e| BusError::nats("create worker consumer", e))
    }

    /// Loads the interaction `org/id`.
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure, [`BusError::Corrupt`] on a bad record.
    pub async fn load_interaction(
        &self,
        org: &OrgId,
        id: &InteractionId,
    ) -> Result<Loaded<Interaction>, BusError> {
        load(&self.interactions, Topology::interaction_key(org, id)).await
    }

    /// Loads the session `org/id`.
    ///
    /// # Errors
    /// As [`Bus::load_interaction`].
    pub async fn load_session(
        &self,
        org: &OrgId,
        id: &SessionId,
    ) -> Result<Loaded<Session>, BusError> {
        load(&self.sessions, Topology::session_key(org, id)).await
    }

    /// Every interaction of `org` (latest value of each key). Reads the bucket's
    /// stream with an ordered consumer filtered to the organisation, so another
    /// organisation's records are never read.
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure.
    pub async fn list_interactions(&self, org: &OrgId) -> Result<Vec<Interaction>, BusError> {
        // The bucket keeps one revision per key, so reading it all from the start is
        // the latest value of each key: one unbounded page.
        Ok(self
            .list_page(org, |_| true, 0, usize::MAX, usize::MAX)
            .await?
            .items)
    }

    /// One page of `org`'s interactions that satisfy `keep`, in the order of their
    /// last write (for pending ones: the order they were opened), starting after
    /// the stream sequence `after` (0: from the start).
    ///
    /// The bucket keeps one revision per key, so reading its stream from a sequence
    /// on, filtered to the organisation, yields each current record once. Only the
    /// page is held in memory; at most `scan_cap` records are read per call, so a
    /// page may come back short with a cursor to continue from.
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure.
    pub async fn list_page(
        &self,
        org: &OrgId,
        keep: impl Fn(&Interaction) -> bool,
        after: u64,
        limit: usize,
        scan_cap: usize,
    ) -> Result<Page, BusError> {
        let stream_name = format!("KV_{}", self.topo.interactions_bucket());
        let stream = self
            .js
            .get_stream(&stream_name)
            .await
            .map_err(|e| BusError::nats("get interactions stream", e))?;
        let filter = format!("$KV.{}.{}.>", self.topo.interactions_bucket(), org.token());
        let deliver_policy = if after == 0 {
            consumer::DeliverPolicy::All
        } else {
            consumer::DeliverPolicy::ByStartSequence {
                start_sequence: after.saturating_add(1),
            }
        };
        let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: filter,
                deliver_policy,
                ..Default::default()
            })
            .await
            .map_err(|e| BusError::nats("list interactions", e))?;
        let mut page = Page {
            items: Vec::new(),
            next_after: None,
        };
        if consumer.cached_info().num_pending == 0 {
            return Ok(page);
        }
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| BusError::nats("list interactions", e))?;
        let mut scanned = 0usize;
        while let Some(msg) = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .map_err(|_| BusError::nats("list interactions", "timed out"))?
        {
            let msg = msg.map_err(|e| BusError::nats("list interactions", e))?;
            let (seq, remaining) = msg
                .info()
                .map(|i| (i.stream_sequence, i.pending))
                .unwrap_or((0, 0));
            scanned += 1;
            let deleted = msg
                .headers
                .as_ref()
                .and_then(|h| h.get("KV-Operation"))
                .is_some();
            if !deleted
                && let Ok(i) = serde_json::from_slice::<Interaction>(&msg.payload)
                && keep(&i)
            {
                page.items.push(i);
            }
            if remaining == 0 {
                break;
            }
            if page.items.len() >= limit || scanned >= scan_cap {
                page.next_after = Some(seq);
                break;
            }
        }
        Ok(page)
    }

    /// Writes `value` at `key` if the key is still at `revision` (0: must not exist).
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure (a lost race is [`Cas::Conflict`], not an error).
    pub async fn cas(
        store: &kv::Store,
        key: &str,
        revision: u64,
        value: Bytes,
    ) -> Result<Cas, BusError> {
        if revision == 0 {
            match store.create(key, value).await {
                Ok(rev) => Ok(Cas::Written(rev)),
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(Cas::Conflict),
                Err(e) => Err(BusError::nats("kv create", e)),
            }
        } else {
            match store.update(key, value, revision).await {
                Ok(rev) => Ok(Cas::Written(rev)),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(Cas::Conflict),
                Err(e) => Err(BusError::nats("kv update", e)),
            }
        }
    }

    /// Publishes a command with `Nats-Msg-Id` = `msg_id` (its command id unless a
    /// retry after a refusal needs a fresh one), and optional headers. Returns the
    /// PubAck (its `duplicate` says JetStream dropped it as a duplicate).
    ///
    /// # Errors
    /// [`BusError::Nats`] when the publish or its ack fails.
    pub async fn publish_command(
        &self,
        env: &CommandEnvelope,
        msg_id: &str,
        mut headers: HeaderMap,
    ) -> Result<jetstream::publish::PublishAck, BusError> {
        let body = serde_json::to_vec(env).map_err(|e| BusError::nats("encode command", e))?;
        headers.insert("Nats-Msg-Id", msg_id);
        self.js
            .publish_with_headers(self.topo.command_subject(env), headers, body.into())
            .await
            .map_err(|e| BusError::nats("publish command", e))?
            .await
            .map_err(|e| BusError::nats("publish command ack", e))
    }

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
            for bucket in [
                self.topo.interactions_bucket(),
                self.topo.sessions_bucket(),
                self.topo.outcomes_bucket(),
            ] {
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

    /// The workers' consumer's `(pending, ack_pending)`: commands waiting, and
    /// commands delivered and not yet acknowledged.
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure.
    pub async fn worker_consumer_backlog(&self) -> Result<(u64, usize), BusError> {
        let stream = self
            .js
            .get_stream(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::nats("get commands stream", e))?;
        let info = stream
            .consumer_info(self.topo.worker_consumer())
            .await
            .map_err(|e| BusError::nats("worker consumer info", e))?;
        Ok((info.num_pending, info.num_ack_pending))
    }

    /// The stored outcome of a command publish (keyed by its `Nats-Msg-Id`), if a
    /// worker recorded one.
    ///
    /// # Errors
    /// [`BusError::Nats`] on NATS failure.
    pub async fn stored_outcome(&self, command_id: &str) -> Result<Option<Outcome>, BusError> {
        let loaded: Loaded<Outcome> = load(&self.outcomes, command_id.to_owned()).await?;
        Ok(loaded.value)
    }
}

/// Creates the stream, or brings an existing one in step with `cfg`. An existing
/// stream whose managed settings already match is left alone, so a process whose
/// NATS user may not update streams (ops/nats/holdpoint.conf: only `setup` may)
/// binds to it without asking. If they differ and the update gets no answer (what
/// a denied publish looks like to the client), the process binds to the stream as
/// it is and warns; an update JetStream refuses is still an error.
async fn ensure_stream(
    js: &jetstream::Context,
    cfg: stream::Config,
    update: bool,
) -> Result<(), BusError> {
    match js.get_stream(&cfg.name).await {
        Ok(existing) => {
            if !update || same_managed_settings(&existing.cached_info().config, &cfg) {
                return Ok(());
            }
            match js.update_stream(&cfg).await {
                Ok(_) => {}
                Err(e) if e.kind() == jetstream::context::CreateStreamErrorKind::TimedOut => {
                    tracing::warn!(
                        stream = %cfg.name,
                        "stream settings differ from the configured ones and the update got no \
                         answer (is this NATS user allowed to update streams?); using the stream \
                         as it is: run the setup role to apply them"
                    );
                }
                Err(e) => return Err(BusError::nats("update stream", e)),
            }
        }
        Err(_) => {
            js.get_or_create_stream(cfg)
                .await
                .map_err(|e| BusError::nats("create stream", e))?;
        }
    }
    Ok(())
}

/// Whether `have` already has every setting Holdpoint sets in `want`.
fn same_managed_settings(have: &stream::Config, want: &stream::Config) -> bool {
    have.subjects == want.subjects
        && have.retention == want.retention
        && have.storage == want.storage
        && have.num_replicas == want.num_replicas
        && have.max_age == want.max_age
        && have.duplicate_window == want.duplicate_window
}

/// Creates the bucket's backing stream as the KV specification (ADR-8) lays it out,
/// then binds the bucket. The stream is created directly rather than through
/// `create_key_value`, whose account-limits lookup does not parse a 2.9 server's
/// account info; the resulting bucket is the same.
async fn ensure_bucket(js: &jetstream::Context, cfg: kv::Config) -> Result<kv::Store, BusError> {
    if let Ok(store) = js.get_key_value(&cfg.bucket).await {
        return Ok(store);
    }
    let stream = stream::Config {
        name: format!("KV_{}", cfg.bucket),
        subjects: vec![format!("$KV.{}.>", cfg.bucket)],
        max_messages_per_subject: cfg.history,
        max_age: cfg.max_age,
        storage: cfg.storage,
        num_replicas: cfg.num_replicas,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        duplicate_window: if cfg.max_age.is_zero() {
            Duration::from_secs(120)
        } else {
            cfg.max_age.min(Duration::from_secs(120))
        },
        ..Default::default()
    };
    // Another process may create it at the same time; then bind to theirs.
    let created = js.get_or_create_stream(stream).await;
    js.get_key_value(&cfg.bucket)
        .await
        .map_err(|bind| match created {
            Err(create) => BusError::nats("create bucket", create),
            Ok(_) => BusError::nats("bind bucket", bind),
        })
}

async fn load<T: DeserializeOwned>(store: &kv::Store, key: String) -> Result<Loaded<T>, BusError> {
    match store.entry(key.clone()).await {
        Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
            let value = serde_json::from_slice(&entry.value).map_err(|e| BusError::Corrupt {
                key,
                message: e.to_string(),
            })?;
            Ok(Loaded {
                value: Some(value),
                revision: entry.revision,
            })
        }
        Ok(Some(entry)) => Ok(Loaded {
            value: None,
            revision: entry.revision,
        }),
        Ok(None) => Ok(Loaded {
            value: None,
            revision: 0,
        }),
        Err(e) => Err(BusError::nats("kv get", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_check() {
        assert!(check_version("2.9.10").is_ok());
        assert!(check_version("2.15.1").is_ok());
        assert!(check_version("v2.11.0-RC.1").is_ok());
        assert!(check_version("2.8.4").is_err());
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

//! The services' configuration: one validated struct, [`Config`].
//!
//! It is loaded in layers, each overriding the one before
//! ([`Config::load`], with figment):
//!
//! 1. the defaults ([`Config::default`]);
//! 2. a TOML file, if one is named (`--config FILE` or `HOLDPOINT_CONFIG`; see
//!    `ops/holdpoint.example.toml`);
//! 3. `HOLDPOINT_*` environment variables;
//! 4. command-line flags.
//!
//! Every setting has a flag and an environment variable (clap reads both, the flag
//! winning, and only what was actually given becomes a layer), and a key in the
//! file: `--replicas` / `HOLDPOINT_REPLICAS` / `[nats] replicas`. Then
//! [`Config::validate`] checks the whole, so a bad value fails at start with a
//! message that names the key (`nats.replicas must be 1, 3 or 5 (got 2)`).
//! [`Config::redacted`] is what may be shown: `holdpoint config` prints it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format as _, Serialized, Toml};
use holdpoint_bus::{Topology, redact_url};
use holdpoint_telemetry::LogFormat;
use serde::{Deserialize, Serialize};

/// The admin listener of `up` and `ingress` when `admin.listen` is not set.
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:8081";

/// Which service a configuration is for; some settings apply to some only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `holdpoint up`: everything in one process, a local nats-server unless
    /// `nats.url` is set.
    Up,
    /// `holdpoint ingress`.
    Ingress,
    /// `holdpoint worker`.
    Worker,
    /// `holdpoint notifier`.
    Notifier,
}

/// A configuration that cannot be used; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value is out of range or malformed.
    #[error("{field} {message}")]
    Invalid {
        /// The key (`nats.replicas`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// Two settings that cannot be given together.
    #[error("{0} and {1} are exclusive")]
    Exclusive(&'static str, &'static str),
    /// The file is missing, unreadable, not TOML, or holds an unknown key or a
    /// value of the wrong type.
    #[error("configuration: {0}")]
    Load(String),
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

/// Every setting of `holdpoint up | ingress | worker`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// NATS connection and topology.
    pub nats: NatsConfig,
    /// The API listener.
    pub http: HttpConfig,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`).
    pub admin: AdminConfig,
    /// Caller identity: JWT verification, development shortcuts.
    pub auth: AuthConfig,
    /// The API on a Unix socket.
    pub socket: SocketConfig,
    /// The worker.
    pub worker: WorkerSection,
    /// Interaction deadlines (the worker applies them).
    pub deadlines: DeadlinesSection,
    /// Logs.
    pub log: LogConfig,
    /// Trace export.
    pub telemetry: TelemetryConfig,
    /// `holdpoint up`'s own nats-server.
    pub local: LocalConfig,
    /// Webhooks: registration policy and the notifier's delivery.
    pub webhooks: WebhooksSection,
}

/// `[webhooks]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksSection {
    /// Local mode: webhook URLs may be plain `http` to a loopback host, and
    /// deliveries may go to loopback and private addresses. Unset: on for `up`,
    /// off for `ingress` and `notifier`. Never on for a deployment others reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_mode: Option<bool>,
    /// Timeout of one delivery request, connection included, in seconds (1 to 60).
    pub timeout_secs: u64,
    /// Delays before each retry after a failed attempt, in seconds; after the last
    /// one's attempt fails the event is given up for that endpoint.
    pub retry_schedule_secs: Vec<u64>,
    /// Failed attempts in a row after which an endpoint is disabled (with a
    /// `webhook-disabled` event).
    pub disable_after: u32,
    /// Most bytes of a response body the notifier reads.
    pub body_cap_bytes: usize,
}

impl Default for WebhooksSection {
    fn default() -> Self {
        let d = holdpoint_notifier::NotifierConfig::default();
        WebhooksSection {
            local_mode: None,
            timeout_secs: d.timeout.as_secs(),
            retry_schedule_secs: d.schedule.iter().map(Duration::as_secs).collect(),
            disable_after: d.disable_after,
            body_cap_bytes: d.body_cap,
        }
    }
}

/// `[nats]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    /// NATS URL, comma-separated for a cluster; a password in it is never shown.
    /// Required by `ingress` and `worker`; `up` starts a local server without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Replicas of every stream and bucket: 1, 3 or 5.
    pub replicas: usize,
    /// JetStream duplicate window of the commands and events streams, in seconds.
    pub duplicate_window_secs: u64,
    /// The partition consumers' `ack_wait`, in milliseconds (at least 100): how long
    /// a command held by a worker that died waits before it is delivered again.
    pub ack_wait_ms: u64,
    /// Command partitions (1 to 1024), fixed once the commands stream exists.
    pub partitions: u32,
    /// How long a worker keeps a partition without pulling before the server pins
    /// another, in milliseconds (at least 200).
    pub priority_timeout_ms: u64,
    /// How long the decision audit (`HP_AUDIT`) keeps a record, in days (0: forever).
    pub audit_retention_days: u64,
}

impl Default for NatsConfig {
    fn default() -> Self {
        let t = Topology::default();
        NatsConfig {
            url: None,
            replicas: 1,
            duplicate_window_secs: 120,
            ack_wait_ms: 3_000,
            partitions: t.partitions,
            priority_timeout_ms: 1_000,
            audit_retention_days: t.audit_max_age.as_secs() / 86_400,
        }
    }
}

/// `[http]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// API listen address.
    pub listen: SocketAddr,
    /// How long a request waits for the worker's outcome before 503, in milliseconds.
    pub outcome_timeout_ms: u64,
    /// The public base URL the agent card advertises (`https://holdpoint.example.com`);
    /// unset: derived from each request's `Host`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Most event streams (`GET /v1/events`, A2A `SubscribeToTask` and
    /// `SendStreamingMessage`) one caller may have open at once; one more is
    /// `429 NRY-0017`.
    pub max_streams_per_caller: usize,
    /// Compatibility switch, off by default: read an A2A request without
    /// `A2A-Version` as 1.0 instead of 0.3 (refused with -32009, as the A2A v1.0
    /// specification asks).
    pub a2a_missing_version_is_1_0: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            outcome_timeout_ms: 5_000,
            public_url: None,
            max_streams_per_caller: holdpoint_ingress::state::DEFAULT_MAX_STREAMS_PER_CALLER,
            a2a_missing_version_is_1_0: false,
        }
    }
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Admin listen address. Unset: [`DEFAULT_ADMIN_LISTEN`] for `up` and
    /// `ingress`, none for `worker` (so several workers run on one host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
}

/// `[auth]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The identity provider's issuer (`iss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_issuer: Option<String>,
    /// The issuer's JWKS URL (exclusive with `jwks_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// A JWKS file instead of a URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<PathBuf>,
    /// The expected audience (`aud`); not checked when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_audience: Option<String>,
    /// The claim holding the organisation.
    pub org_claim: String,
    /// Accepted algorithms (HMAC never is).
    pub jwt_algorithms: Vec<String>,
    /// Clock leeway for `exp` / `nbf`, in seconds.
    pub jwt_leeway_secs: u64,
    /// How long a fetched JWKS is used, in seconds.
    pub jwks_ttl_secs: u64,
    /// Least time between refetches caused by unknown `kid`s, in seconds.
    pub jwks_cooldown_secs: u64,
    /// Development: verify `holdpoint dev-token` tokens (the JWKS in `.holdpoint/dev-jwt`).
    pub dev_jwt: bool,
    /// INSECURE, local development only: trust `X-Holdpoint-Org` / `X-Holdpoint-Person`.
    pub insecure_dev_identity: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            jwt_issuer: None,
            jwks_url: None,
            jwks_file: None,
            jwt_audience: None,
            org_claim: "org".into(),
            jwt_algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
            jwt_leeway_secs: 30,
            jwks_ttl_secs: 300,
            jwks_cooldown_secs: 30,
            dev_jwt: false,
            insecure_dev_identity: false,
        }
    }
}

/// `[socket]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SocketConfig {
    /// Also serve the API on this Unix socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Organisation of tokenless requests from this machine's user on the socket.
    pub org: String,
    /// Whether tokenless requests from this machine's user are that user
    /// (`--socket-no-local-user` switches it off; tokens still work).
    pub local_user: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            path: None,
            org: "local".into(),
            local_user: true,
        }
    }
}

/// `[worker]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSection {
    /// Pull loops sharing the durable consumer when commands are not partitioned
    /// (nats-server 2.9); partitioned, each partition has one.
    pub concurrency: usize,
    /// Most commands decided together in one batch (group commit).
    pub batch: usize,
    /// Memory for records kept between batches, in MiB.
    pub cache_mb: u64,
    /// This worker's id in the presence bucket (`[A-Za-z0-9_-]`, at most 64);
    /// random when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// How often the consumers' pending and ack-pending counts are read for the
    /// metrics, in milliseconds.
    pub consumer_poll_ms: u64,
}

impl Default for WorkerSection {
    fn default() -> Self {
        WorkerSection {
            concurrency: 4,
            batch: 128,
            cache_mb: 32,
            id: None,
            consumer_poll_ms: 5_000,
        }
    }
}

/// `[deadlines]`: deadlines of interactions, for every organisation. None by
/// default: an interaction then waits until answered or closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlinesSection {
    /// The deadline, in seconds after opening, of an interaction whose runtime names
    /// none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_secs: Option<u64>,
    /// The farthest deadline a runtime may ask for, in seconds after the opening (or
    /// the change); a farther one is refused with `NRY-0023`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_secs: Option<u64>,
    /// How long before a deadline `interaction-expiring` goes out, in seconds
    /// (none when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning_secs: Option<u64>,
}

impl DeadlinesSection {
    /// The worker's view of these settings (`supported` is the server's to say).
    pub fn policy(&self) -> holdpoint_domain::Deadlines {
        holdpoint_domain::Deadlines {
            supported: false,
            default: self.default_secs.map(Duration::from_secs),
            max: self.max_secs.map(Duration::from_secs),
            warning: self.warning_secs.map(Duration::from_secs),
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: LogFormat,
    /// Filter directives (`info`, `holdpoint_worker=debug,info`); `RUST_LOG` overrides.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP/HTTP endpoint to export spans to (`http://127.0.0.1:4318`); needs a
    /// `holdpoint` built with `--features otlp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
}

/// `[local]`: `holdpoint up`'s own nats-server (when `nats.url` is not set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalConfig {
    /// The local nats-server's JetStream store directory.
    pub store: PathBuf,
    /// Port (0: any free port).
    pub nats_port: u16,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            store: PathBuf::from(".holdpoint/nats"),
            nats_port: 4290,
        }
    }
}

/// The layers above the file: settings given as flags or environment variables.
/// Only what was given is set, so an absent flag never hides the file's value.
#[derive(Debug)]
pub struct Layers(Figment);

impl Layers {
    /// Sets `key` (a dotted path, `nats.replicas`) when `value` was given.
    #[must_use]
    pub fn set<T: Serialize>(self, key: &str, value: Option<T>) -> Self {
        match value {
            Some(v) => Layers(self.0.merge(Serialized::default(key, v))),
            None => self,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` (if any), then what `given` sets (the
    /// environment and flags), then validates for `service`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load(
        file: Option<&Path>,
        given: impl FnOnce(Layers) -> Layers,
        service: Service,
    ) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::Load(format!(
                    "config file {} does not exist or is not a file",
                    path.display()
                )));
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        let Layers(figment) = given(Layers(figment));
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Load(describe(e)))?;
        config.validate(service)?;
        Ok(config)
    }

    /// Checks the whole configuration for `service`.
    ///
    /// # Errors
    /// The first problem, naming the key.
    pub fn validate(&self, service: Service) -> Result<(), ConfigError> {
        let n = &self.nats;
        match &n.url {
            Some(url) => check_nats_url(url)?,
            None if service != Service::Up => {
                return Err(invalid(
                    "nats.url",
                    "is required (--nats-url, HOLDPOINT_NATS_URL or [nats] url)",
                ));
            }
            None => {}
        }
        if ![1, 3, 5].contains(&n.replicas) {
            return Err(invalid(
                "nats.replicas",
                format!("must be 1, 3 or 5 (got {})", n.replicas),
            ));
        }
        if n.duplicate_window_secs == 0 {
            return Err(invalid("nats.duplicate_window_secs", "must be positive"));
        }
        if !(1..=1024).contains(&n.partitions) {
            return Err(invalid(
                "nats.partitions",
                format!("must be 1 to 1024 (got {})", n.partitions),
            ));
        }
        if n.priority_timeout_ms < 200 {
            return Err(invalid(
                "nats.priority_timeout_ms",
                format!("must be at least 200 (got {})", n.priority_timeout_ms),
            ));
        }
        if n.ack_wait_ms < 100 {
            return Err(invalid(
                "nats.ack_wait_ms",
                format!("must be at least 100 (got {})", n.ack_wait_ms),
            ));
        }
        if self.http.outcome_timeout_ms == 0 {
            return Err(invalid("http.outcome_timeout_ms", "must be positive"));
        }
        if self.http.max_streams_per_caller == 0 {
            return Err(invalid("http.max_streams_per_caller", "must be at least 1"));
        }
        if let Some(u) = &self.http.public_url {
            check_http_url("http.public_url", u)?;
        }
        if service != Service::Worker
            && self.http.listen.port() != 0
            && self.admin_listen(service) == Some(self.http.listen)
        {
            return Err(invalid(
                "admin.listen",
                format!("must differ from http.listen ({})", self.http.listen),
            ));
        }
        self.validate_auth()?;
        if let Some(path) = &self.socket.path
            && path.as_os_str().is_empty()
        {
            return Err(invalid("socket.path", "must not be empty"));
        }
        holdpoint_domain::OrgId::parse(self.socket.org.clone())
            .map_err(|e| invalid("socket.org", format!("is not a valid organisation id: {e}")))?;
        if self.worker.concurrency == 0 {
            return Err(invalid("worker.concurrency", "must be positive"));
        }
        if !(1..=4096).contains(&self.worker.batch) {
            return Err(invalid(
                "worker.batch",
                format!("must be 1 to 4096 (got {})", self.worker.batch),
            ));
        }
        if let Some(id) = &self.worker.id
            && !holdpoint_bus::partitions::is_worker_id(id)
        {
            return Err(invalid("worker.id", "must be 1 to 64 of [A-Za-z0-9_-]"));
        }
        if self.worker.consumer_poll_ms < 100 {
            return Err(invalid(
                "worker.consumer_poll_ms",
                format!(
                    "must be at least 100 (got {})",
                    self.worker.consumer_poll_ms
                ),
            ));
        }
        let d = &self.deadlines;
        let max = holdpoint_domain::MAX_EXPIRES_IN_SECS;
        for (field, v) in [
            ("deadlines.default_secs", d.default_secs),
            ("deadlines.max_secs", d.max_secs),
            ("deadlines.warning_secs", d.warning_secs),
        ] {
            if let Some(v) = v
                && !(1..=max).contains(&v)
            {
                return Err(invalid(field, format!("must be 1 to {max} (got {v})")));
            }
        }
        if let (Some(default), Some(limit)) = (d.default_secs, d.max_secs)
            && default > limit
        {
            return Err(invalid(
                "deadlines.default_secs",
                format!("must not exceed deadlines.max_secs ({default} > {limit})"),
            ));
        }
        let w = &self.webhooks;
        if !(1..=60).contains(&w.timeout_secs) {
            return Err(invalid(
                "webhooks.timeout_secs",
                format!("must be 1 to 60 (got {})", w.timeout_secs),
            ));
        }
        if w.retry_schedule_secs.len() > 32 {
            return Err(invalid(
                "webhooks.retry_schedule_secs",
                "lists at most 32 delays",
            ));
        }
        if w.retry_schedule_secs.iter().any(|d| *d > 7 * 24 * 3600) {
            return Err(invalid(
                "webhooks.retry_schedule_secs",
                "delays are at most 604800 (7 days)",
            ));
        }
        if w.disable_after == 0 {
            return Err(invalid("webhooks.disable_after", "must be at least 1"));
        }
        if !(256..=16 * 1024 * 1024).contains(&w.body_cap_bytes) {
            return Err(invalid(
                "webhooks.body_cap_bytes",
                format!("must be 256 to 16777216 (got {})", w.body_cap_bytes),
            ));
        }
        holdpoint_telemetry::logs::check_level(&self.log.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            check_http_url("telemetry.otlp_endpoint", endpoint)?;
            if !holdpoint_telemetry::otlp::AVAILABLE {
                return Err(invalid(
                    "telemetry.otlp_endpoint",
                    "needs a holdpoint built with `--features otlp`",
                ));
            }
        }
        Ok(())
    }

    fn validate_auth(&self) -> Result<(), ConfigError> {
        let a = &self.auth;
        if a.jwks_url.is_some() && a.jwks_file.is_some() {
            return Err(ConfigError::Exclusive("auth.jwks_url", "auth.jwks_file"));
        }
        if a.dev_jwt {
            if a.jwt_issuer.is_some() {
                return Err(ConfigError::Exclusive("auth.dev_jwt", "auth.jwt_issuer"));
            }
            if a.jwks_url.is_some() || a.jwks_file.is_some() {
                let other = if a.jwks_url.is_some() {
                    "auth.jwks_url"
                } else {
                    "auth.jwks_file"
                };
                return Err(ConfigError::Exclusive("auth.dev_jwt", other));
            }
        }
        let source = a.jwks_url.is_some() || a.jwks_file.is_some();
        match (&a.jwt_issuer, source) {
            (Some(issuer), true) if issuer.trim().is_empty() => {
                return Err(invalid("auth.jwt_issuer", "must not be empty"));
            }
            (Some(_), false) => {
                return Err(invalid(
                    "auth.jwt_issuer",
                    "needs auth.jwks_url or auth.jwks_file",
                ));
            }
            (None, true) => {
                return Err(invalid(
                    "auth.jwks_url",
                    "(or auth.jwks_file) needs auth.jwt_issuer",
                ));
            }
            _ => {}
        }
        if let Some(u) = &a.jwks_url {
            check_http_url("auth.jwks_url", u)?;
        }
        if a.org_claim.trim().is_empty() {
            return Err(invalid("auth.org_claim", "must not be empty"));
        }
        if a.jwt_algorithms.is_empty() {
            return Err(invalid("auth.jwt_algorithms", "must name at least one"));
        }
        for alg in &a.jwt_algorithms {
            holdpoint_ingress::identity::jwt::parse_algorithm(alg.trim())
                .map_err(|e| invalid("auth.jwt_algorithms", e))?;
        }
        if a.jwks_ttl_secs == 0 {
            return Err(invalid("auth.jwks_ttl_secs", "must be positive"));
        }
        Ok(())
    }

    /// The admin listener of `service`: `admin.listen`, else
    /// [`DEFAULT_ADMIN_LISTEN`] for `up` and `ingress` and none for `worker`.
    pub fn admin_listen(&self, service: Service) -> Option<SocketAddr> {
        match (self.admin.listen, service) {
            (Some(a), _) => Some(a),
            (None, Service::Worker | Service::Notifier) => None,
            (None, _) => DEFAULT_ADMIN_LISTEN.parse().ok(),
        }
    }

    /// The NATS topology.
    pub fn topology(&self) -> Topology {
        Topology {
            replicas: self.nats.replicas,
            duplicate_window: Duration::from_secs(self.nats.duplicate_window_secs),
            ack_wait: Duration::from_millis(self.nats.ack_wait_ms),
            partitions: self.nats.partitions,
            priority_timeout: Duration::from_millis(self.nats.priority_timeout_ms),
            webhook_ack_wait: Duration::from_secs(self.webhooks.timeout_secs + 2),
            audit_max_age: Duration::from_secs(
                self.nats.audit_retention_days.saturating_mul(86_400),
            ),
            ..Topology::default()
        }
    }

    /// Whether webhooks run in local mode for `service` (`webhooks.local_mode`,
    /// else on for `up` only).
    pub fn webhooks_local(&self, service: Service) -> bool {
        self.webhooks.local_mode.unwrap_or(service == Service::Up)
    }

    /// The notifier's settings for `service`, counting into `metrics`.
    pub fn notifier_config(
        &self,
        service: Service,
        metrics: std::sync::Arc<holdpoint_telemetry::Metrics>,
    ) -> holdpoint_notifier::NotifierConfig {
        let w = &self.webhooks;
        holdpoint_notifier::NotifierConfig {
            local_mode: self.webhooks_local(service),
            timeout: Duration::from_secs(w.timeout_secs),
            schedule: w
                .retry_schedule_secs
                .iter()
                .copied()
                .map(Duration::from_secs)
                .collect(),
            disable_after: w.disable_after,
            body_cap: w.body_cap_bytes,
            metrics,
            ..holdpoint_notifier::NotifierConfig::default()
        }
    }

    /// The configuration as it may be shown: passwords and tokens in URLs
    /// replaced by `***`.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        c.nats.url = c.nats.url.as_deref().map(redact_url);
        c.auth.jwks_url = c.auth.jwks_url.as_deref().map(redact_http_url);
        c.telemetry.otlp_endpoint = c.telemetry.otlp_endpoint.as_deref().map(redact_http_url);
        c
    }

    /// [`Config::redacted`] as TOML, with a comment for the admin listener's
    /// per-service default when it is not set.
    ///
    /// # Errors
    /// Never in practice (every field is representable in TOML).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        let mut out = toml::to_string(&self.redacted())
            .map_err(|e| ConfigError::Load(format!("cannot render as TOML: {e}")))?;
        if self.admin.listen.is_none() {
            out = out.replacen(
                "[admin]\n",
                &format!(
                    "[admin]\n# listen is not set: {DEFAULT_ADMIN_LISTEN} for up and ingress, none for worker\n"
                ),
                1,
            );
        }
        Ok(out)
    }
}

/// figment's error, without its profile prefix (`default.`), which means nothing
/// here.
fn describe(e: figment::Error) -> String {
    e.into_iter()
        .map(|e| e.to_string().replace("key \"default.", "key \""))
        .collect::<Vec<_>>()
        .join("; ")
}

fn check_nats_url(url: &str) -> Result<(), ConfigError> {
    let parts: Vec<&str> = url
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(invalid("nats.url", "must not be empty"));
    }
    for part in parts {
        part.parse::<async_nats::ServerAddr>().map_err(|e| {
            invalid(
                "nats.url",
                format!("has an invalid server address {}: {e}", redact_url(part)),
            )
        })?;
    }
    Ok(())
}

fn check_http_url(field: &'static str, url: &str) -> Result<(), ConfigError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace) => {
            Ok(())
        }
        _ => Err(invalid(
            field,
            format!(
                "must be an http:// or https:// URL (got {:?})",
                redact_http_url(url)
            ),
        )),
    }
}

/// An HTTP URL with its user info's password and its query hidden (either may
/// hold a credential).
fn redact_http_url(url: &str) -> String {
    let shown = redact_url(url);
    match shown.split_once('?') {
        Some((base, _)) => format!("{base}?***"),
        None => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(given: impl FnOnce(Layers) -> Layers) -> Result<Config, ConfigError> {
        Config::load(None, given, Service::Up)
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new()
            .suffix(".toml")
            .tempfile()
            .expect("tmp");
        std::fs::write(f.path(), text).expect("write");
        f
    }

    #[test]
    fn defaults_are_valid_for_up_and_need_a_url_for_the_services() {
        let c = with(|l| l).expect("defaults");
        assert_eq!(c, Config::default());
        assert_eq!(
            c.admin_listen(Service::Up),
            DEFAULT_ADMIN_LISTEN.parse().ok()
        );
        assert_eq!(c.admin_listen(Service::Worker), None);
        let e = Config::load(None, |l| l, Service::Worker).expect_err("no url");
        assert!(e.to_string().starts_with("nats.url is required"), "{e}");
    }

    #[test]
    fn the_file_overrides_defaults_and_given_values_override_the_file() {
        let f = file(
            "[nats]\nurl = \"nats://a:4222\"\nreplicas = 3\n\n[http]\nlisten = \"0.0.0.0:9000\"\n\n[auth]\njwt_algorithms = [\"EdDSA\"]\n",
        );
        let c = Config::load(
            Some(f.path()),
            |l| {
                l.set("nats.replicas", Some(5))
                    .set::<u64>("nats.ack_wait_ms", None)
            },
            Service::Ingress,
        )
        .expect("valid");
        assert_eq!(c.nats.url.as_deref(), Some("nats://a:4222"));
        assert_eq!(c.nats.replicas, 5);
        assert_eq!(c.nats.ack_wait_ms, 3_000);
        assert_eq!(c.http.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(c.auth.jwt_algorithms, vec!["EdDSA".to_owned()]);
    }

    #[test]
    fn bad_values_name_their_key() {
        type Given = Box<dyn FnOnce(Layers) -> Layers>;
        let cases: Vec<(Given, &str)> = vec![
            (
                Box::new(|l| l.set("nats.replicas", Some(2))),
                "nats.replicas must be 1, 3 or 5 (got 2)",
            ),
            (
                Box::new(|l| {
                    l.set("auth.jwks_url", Some("https://idp/jwks"))
                        .set("auth.jwks_file", Some("/tmp/jwks.json"))
                        .set("auth.jwt_issuer", Some("idp"))
                }),
                "auth.jwks_url and auth.jwks_file are exclusive",
            ),
            (
                Box::new(|l| l.set("auth.jwt_issuer", Some("idp"))),
                "auth.jwt_issuer needs auth.jwks_url or auth.jwks_file",
            ),
            (
                Box::new(|l| l.set("nats.ack_wait_ms", Some(0))),
                "nats.ack_wait_ms must be at least 100 (got 0)",
            ),
            (
                Box::new(|l| l.set("http.outcome_timeout_ms", Some(0))),
                "http.outcome_timeout_ms must be positive",
            ),
            (
                Box::new(|l| l.set("http.max_streams_per_caller", Some(0))),
                "http.max_streams_per_caller must be at least 1",
            ),
            (
                Box::new(|l| l.set("nats.duplicate_window_secs", Some(0))),
                "nats.duplicate_window_secs must be positive",
            ),
            (
                Box::new(|l| l.set("worker.concurrency", Some(0))),
                "worker.concurrency must be positive",
            ),
            (
                Box::new(|l| l.set("auth.jwt_algorithms", Some(vec!["HS256"]))),
                "auth.jwt_algorithms HS256 is an HMAC algorithm",
            ),
            (
                Box::new(|l| l.set("nats.url", Some("nats://u:secret@h:4222, ::bad::"))),
                "nats.url has an invalid server address",
            ),
            (
                Box::new(|l| l.set("admin.listen", Some("127.0.0.1:8080"))),
                "admin.listen must differ from http.listen",
            ),
            (
                Box::new(|l| l.set("socket.org", Some("a b"))),
                "socket.org is not a valid organisation id",
            ),
            (
                Box::new(|l| {
                    l.set("auth.dev_jwt", Some(true))
                        .set("auth.jwt_issuer", Some("x"))
                }),
                "auth.dev_jwt and auth.jwt_issuer are exclusive",
            ),
            (Box::new(|l| l.set("log.level", Some("[[["))), "log.level"),
        ];
        for (given, want) in cases {
            let e = with(given).expect_err(want).to_string();
            assert!(e.starts_with(want), "{e:?} should start with {want:?}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn file_errors_name_the_key_and_the_file() {
        let f = file("[nats]\nreplica = 3\n");
        let e = Config::load(Some(f.path()), |l| l, Service::Up)
            .expect_err("unknown key")
            .to_string();
        assert!(e.contains("replica") && e.contains("nats"), "{e}");
        let f = file("[http]\nlisten = \"not an address\"\n");
        let e = Config::load(Some(f.path()), |l| l, Service::Up)
            .expect_err("bad address")
            .to_string();
        assert!(e.contains("http.listen"), "{e}");
        assert!(!e.contains("default."), "{e}");
        let e = Config::load(Some(Path::new("/nonexistent/h.toml")), |l| l, Service::Up)
            .expect_err("missing")
            .to_string();
        assert!(e.contains("/nonexistent/h.toml"), "{e}");
    }

    #[test]
    fn secrets_are_redacted() {
        let c = with(|l| {
            l.set(
                "nats.url",
                Some("nats://worker:s3cret@h1:4222,nats://tok3n@h2:4222"),
            )
            .set("auth.jwt_issuer", Some("idp"))
            .set("auth.jwks_url", Some("https://u:pw@idp/jwks?token=abc"))
        })
        .expect("valid");
        let shown = c.to_toml().expect("toml");
        for secret in ["s3cret", "tok3n", "pw@", "abc"] {
            assert!(!shown.contains(secret), "{secret} shown in\n{shown}");
        }
        assert!(
            shown.contains("nats://worker:***@h1:4222,nats://***@h2:4222"),
            "{shown}"
        );
        // What is printed reads back as the same configuration (redactions aside).
        let back: Config = toml::from_str(&shown).expect("parses");
        assert_eq!(back, c.redacted());
    }

    #[test]
    fn the_example_file_is_valid_and_complete() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/holdpoint.example.toml");
        let c = Config::load(Some(&path), |l| l, Service::Up).expect("example is valid");
        // Every section of the struct appears in the example.
        let text = std::fs::read_to_string(&path).expect("read");
        let table: toml::Table = toml::to_string(&Config::default())
            .expect("toml")
            .parse()
            .expect("table");
        for (section, keys) in &table {
            assert!(
                text.contains(&format!("[{section}]")),
                "[{section}] missing in the example"
            );
            // And every key with a default, set or commented out.
            for key in keys.as_table().map(|t| t.keys()).into_iter().flatten() {
                assert!(
                    text.lines().any(|l| {
                        let l = l.trim_start_matches(['#', ' ']);
                        l.starts_with(&format!("{key} ="))
                    }),
                    "{section}.{key} missing in the example"
                );
            }
        }
        // The example leaves the URL unset, as the default is: `up` starts its own server.
        assert_eq!(c.nats.url, None);
    }
}

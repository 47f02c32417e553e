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
//! winning, and only what was actually given becomes a layer: see
//! [`crate::args`]), and a key in the file: `--replicas` / `HOLDPOINT_REPLICAS` /
//! `[nats] replicas`. Then
//! [`Config::validate`] checks the whole, so a bad value fails at start with a
//! message that names the key (`nats.replicas must be 1, 3 or 5 (got 2)`).
//! [`Config::redacted`] is what may be shown: `holdpoint config` prints it.
//!
//! Here: the struct, its sections and their defaults, loading, and showing;
//! `validate` (in `config/validate.rs`): the checks; [`crate::compose`]: what the
//! services are given.

pub mod reference;
mod validate;

use validate::redact_http_url;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Format as _, Serialized, Toml};
use figment::{Figment, Provider};
use holdpoint_bus::{Topology, redact_url};
use holdpoint_telemetry::{LogFormat, LogOutput};
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
    /// Most API requests in flight at once (at least 1); one more is refused at
    /// once with `503 NRY-0050` and `Retry-After`. Each request waiting for an
    /// outcome holds about 50 KiB.
    pub max_in_flight: usize,
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
            max_in_flight: holdpoint_ingress::state::DEFAULT_MAX_IN_FLIGHT,
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
    /// The claim holding the person's groups (`groups`, `roles`, ...), matched by
    /// group assignees; unset: callers have no groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Accepted algorithms (HMAC never is).
    pub jwt_algorithms: Vec<String>,
    /// Clock leeway for `exp` / `nbf`, in seconds.
    pub jwt_leeway_secs: u64,
    /// How long a fetched JWKS is used, in seconds.
    pub jwks_ttl_secs: u64,
    /// Least time between refetches caused by unknown `kid`s, in seconds.
    pub jwks_cooldown_secs: u64,
    /// Development: verify `holdpoint dev-token` tokens (the JWKS in
    /// [`crate::devtoken::default_dir`]).
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
            groups_claim: None,
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
            batch: 128,
            cache_mb: 16,
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
    /// `stderr` or `stdout`.
    pub output: LogOutput,
    /// Filter directives (`info`, `holdpoint_worker=debug,info`); `RUST_LOG` overrides.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            output: LogOutput::Stderr,
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

impl Config {
    /// Loads defaults, then `file` (if any), then `given` (the environment and
    /// flags: [`crate::args`] serialized, holding only what was given), then
    /// validates for `service`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load(
        file: Option<&Path>,
        given: impl Provider,
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
        let config: Config = figment
            .merge(given)
            .extract()
            .map_err(|e| ConfigError::Load(describe(e)))?;
        config.validate(service)?;
        Ok(config)
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

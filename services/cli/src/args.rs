//! The services' command-line arguments (clap), which are also the configuration's
//! top layer.
//!
//! Every setting has a flag and an environment variable (clap reads both, the flag
//! winning). The argument groups are nested as the configuration is ([`Config`]):
//! each group serializes (serde) to the keys of its section, `--replicas` to
//! `nats.replicas`, `--socket-no-local-user` to `socket.local_user = false`, and an
//! option that was not given is skipped, so it never hides the file's value. That
//! tree is the layer [`Config::load`] merges over the defaults and the file; the
//! keys are those of `ops/holdpoint.example.toml` and README.md.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use clap::builder::BoolishValueParser;
use figment::providers::Serialized;
use holdpoint_telemetry::{LogFormat, LogOutput};
use holdpoint_worker::Failpoint;
use serde::{Serialize, Serializer};

use crate::config::{Config, ConfigError, Service};
use crate::devtoken;

/// `holdpoint up`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct UpArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    #[serde(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpArgs,
    /// Worker settings.
    #[command(flatten)]
    #[serde(flatten)]
    pub worker: WorkerSettings,
    /// The local nats-server.
    #[command(flatten)]
    pub local: LocalArgs,
    /// The web inbox link printed with `--dev-jwt`.
    #[command(flatten)]
    #[serde(skip)]
    pub inbox: InboxLinkArgs,
    /// Webhook settings.
    #[command(flatten)]
    pub webhooks: WebhookSettings,
}

impl UpArgs {
    /// The configuration these arguments (and the file and environment) make for
    /// `service` (`up` itself, or `config`, which prints what `up` would use).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self, service: Service) -> Result<Config, ConfigError> {
        Config::load(self.service.config.as_deref(), layer(self), service)
    }
}

/// `holdpoint ingress`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct IngressArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    #[serde(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpArgs,
    /// Webhook settings (the ingress reads `webhooks.local_mode`).
    #[command(flatten)]
    pub webhooks: WebhookSettings,
}

impl IngressArgs {
    /// The configuration these arguments (and the file and environment) make.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self) -> Result<Config, ConfigError> {
        Config::load(
            self.service.config.as_deref(),
            layer(self),
            Service::Ingress,
        )
    }
}

/// `holdpoint worker`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct WorkerArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    #[serde(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Worker settings.
    #[command(flatten)]
    #[serde(flatten)]
    pub worker: WorkerSettings,
}

impl WorkerArgs {
    /// The configuration these arguments (and the file and environment) make.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self) -> Result<Config, ConfigError> {
        Config::load(self.service.config.as_deref(), layer(self), Service::Worker)
    }
}

/// `holdpoint notifier`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct NotifierArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    #[serde(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Webhook settings.
    #[command(flatten)]
    pub webhooks: WebhookSettings,
}

impl NotifierArgs {
    /// The configuration these arguments (and the file and environment) make.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self) -> Result<Config, ConfigError> {
        Config::load(
            self.service.config.as_deref(),
            layer(self),
            Service::Notifier,
        )
    }
}

/// `holdpoint setup`: the NATS settings only.
#[derive(Debug, Clone, Args, Serialize)]
pub struct SetupArgs {
    /// Configuration file, logs.
    #[command(flatten)]
    #[serde(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
}

impl SetupArgs {
    /// The configuration these arguments (and the file and environment) make (as a
    /// worker's: `nats.url` is required).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self) -> Result<Config, ConfigError> {
        Config::load(self.service.config.as_deref(), layer(self), Service::Worker)
    }
}

/// The given arguments as a configuration layer (see the module docs).
fn layer<T: Serialize>(args: &T) -> Serialized<&T> {
    Serialized::defaults(args)
}

/// Settings every service takes: the configuration file, the admin listener, logs,
/// trace export (`[admin]`, `[log]`, `[telemetry]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct ServiceArgs {
    /// A TOML configuration file (see ops/holdpoint.example.toml). Environment
    /// variables and flags override it.
    #[arg(long, env = "HOLDPOINT_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// `[admin]`.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// `[log]`.
    #[command(flatten)]
    pub log: LogArgs,
    /// `[telemetry]`.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// `[admin]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct AdminArgs {
    /// Admin listen address: /healthz, /readyz, /metrics (default 127.0.0.1:8081
    /// for up and ingress; a worker serves none unless given).
    #[arg(long, env = "HOLDPOINT_ADMIN_LISTEN")]
    #[serde(rename = "listen", skip_serializing_if = "Option::is_none")]
    pub admin_listen: Option<SocketAddr>,
}

/// `[log]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct LogArgs {
    /// Log format: text or json (default text).
    #[arg(long, env = "HOLDPOINT_LOG_FORMAT", value_name = "text|json")]
    #[serde(rename = "format", skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    /// Where logs go: stderr or stdout (default stderr; the container image sets
    /// stdout).
    #[arg(long, env = "HOLDPOINT_LOG_OUTPUT", value_name = "stderr|stdout")]
    #[serde(rename = "output", skip_serializing_if = "Option::is_none")]
    pub log_output: Option<LogOutput>,
    /// Log filter, e.g. `info` or `holdpoint_worker=debug,info` (default info;
    /// RUST_LOG overrides).
    #[arg(long, env = "HOLDPOINT_LOG_LEVEL")]
    #[serde(rename = "level", skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
}

/// `[telemetry]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct TelemetryArgs {
    /// Export spans over OTLP/HTTP to this endpoint (builds with `--features otlp`).
    #[arg(long, env = "HOLDPOINT_OTLP_ENDPOINT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
}

/// NATS connection and topology (`[nats]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct NatsArgs {
    /// NATS URL (comma-separated for a cluster).
    #[arg(long, env = "HOLDPOINT_NATS_URL")]
    #[serde(rename = "url", skip_serializing_if = "Option::is_none")]
    pub nats_url: Option<String>,
    /// Replicas of every stream and bucket: 1, 3 or 5 (default 1; 3 in a cluster).
    #[arg(long, env = "HOLDPOINT_REPLICAS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<usize>,
    /// JetStream duplicate window of the commands and events streams, in seconds
    /// (default 120).
    #[arg(long, env = "HOLDPOINT_DUPLICATE_WINDOW_SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_window_secs: Option<u64>,
    /// Partition consumers' ack_wait, in milliseconds (default 3000): how long a
    /// command held by a worker that died waits before it is delivered again.
    #[arg(long, env = "HOLDPOINT_ACK_WAIT_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_wait_ms: Option<u64>,
    /// Command partitions, 1 to 1024 (default 8); fixed once the commands stream
    /// exists.
    #[arg(long, env = "HOLDPOINT_PARTITIONS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// How long a worker keeps a partition without pulling before another is
    /// pinned, in milliseconds (default 1000).
    #[arg(long, env = "HOLDPOINT_PRIORITY_TIMEOUT_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_timeout_ms: Option<u64>,
}

/// Ingress settings: `[http]`, and identity (`[auth]`, `[socket]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct HttpArgs {
    /// `[http]`.
    #[command(flatten)]
    pub http: HttpSettings,
    /// Identity settings.
    #[command(flatten)]
    #[serde(flatten)]
    pub auth: AuthArgs,
}

/// `[http]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct HttpSettings {
    /// API listen address (default 127.0.0.1:8080).
    #[arg(long, env = "HOLDPOINT_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// How long a request waits for the worker's outcome before 503, in
    /// milliseconds (default 5000).
    #[arg(long, env = "HOLDPOINT_OUTCOME_TIMEOUT_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome_timeout_ms: Option<u64>,
    /// The public base URL the agent card advertises (default: from each
    /// request's Host).
    #[arg(long, env = "HOLDPOINT_PUBLIC_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Most event streams one caller may have open at once (default 16).
    #[arg(long, env = "HOLDPOINT_MAX_STREAMS_PER_CALLER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_streams_per_caller: Option<usize>,
    /// Most API requests in flight at once; one more is refused at once with
    /// `503 NRY-0050` and `Retry-After` (default 256; at least 1).
    #[arg(long, env = "HOLDPOINT_MAX_IN_FLIGHT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<usize>,
    /// Compatibility: read an A2A request without `A2A-Version` as 1.0 (default
    /// off: it is read as 0.3 and refused with -32009, as A2A v1.0 asks).
    #[arg(long, env = "HOLDPOINT_A2A_MISSING_VERSION_IS_1_0", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a2a_missing_version_is_1_0: Option<bool>,
}

/// Identity settings: JWT verification and development shortcuts (`[auth]`), the
/// local socket (`[socket]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct AuthArgs {
    /// `[auth]`.
    #[command(flatten)]
    #[serde(rename = "auth")]
    pub jwt: JwtArgs,
    /// `[socket]`.
    #[command(flatten)]
    pub socket: SocketArgs,
}

/// `[auth]`: JWT verification, development shortcuts.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct JwtArgs {
    /// The identity provider's issuer (`iss`).
    #[arg(long, env = "HOLDPOINT_JWT_ISSUER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_issuer: Option<String>,
    /// The issuer's JWKS URL.
    #[arg(long, env = "HOLDPOINT_JWKS_URL", conflicts_with = "jwks_file")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// A JWKS file instead of a URL.
    #[arg(long, env = "HOLDPOINT_JWKS_FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<PathBuf>,
    /// The expected audience (`aud`); not checked when absent.
    #[arg(long, env = "HOLDPOINT_JWT_AUDIENCE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_audience: Option<String>,
    /// The claim holding the organisation (default org).
    #[arg(long, env = "HOLDPOINT_ORG_CLAIM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_claim: Option<String>,
    /// The claim holding the person's groups, e.g. groups or roles (default: none;
    /// group assignees then match nobody).
    #[arg(long, env = "HOLDPOINT_GROUPS_CLAIM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Accepted algorithms, comma-separated (default RS256,ES256,EdDSA; HMAC is
    /// never accepted).
    #[arg(long, env = "HOLDPOINT_JWT_ALGORITHMS")]
    #[serde(serialize_with = "comma_list", skip_serializing_if = "Option::is_none")]
    pub jwt_algorithms: Option<String>,
    /// Clock leeway for exp/nbf, in seconds (default 30).
    #[arg(long, env = "HOLDPOINT_JWT_LEEWAY_SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_leeway_secs: Option<u64>,
    /// How long a fetched JWKS is used, in seconds (default 300).
    #[arg(long, env = "HOLDPOINT_JWKS_TTL_SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_ttl_secs: Option<u64>,
    /// Least time between refetches caused by unknown `kid`s, in seconds (default 30).
    #[arg(long, env = "HOLDPOINT_JWKS_COOLDOWN_SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_cooldown_secs: Option<u64>,
    /// Development: verify tokens from `holdpoint dev-token` (its JWKS, in
    /// $HOLDPOINT_DEV_JWT_DIR or ~/.local/state/holdpoint/dev-jwt).
    #[arg(long, env = "HOLDPOINT_DEV_JWT", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_jwt: Option<bool>,
    /// INSECURE, local development only: take the caller's organisation and person
    /// from the X-Holdpoint-Org and X-Holdpoint-Person headers.
    #[arg(long, env = "HOLDPOINT_INSECURE_DEV_IDENTITY", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_dev_identity: Option<bool>,
}

/// `[socket]`: the API on a Unix socket.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct SocketArgs {
    /// Also serve the API on this Unix socket.
    #[arg(long, env = "HOLDPOINT_SOCKET")]
    #[serde(rename = "path", skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// Organisation of tokenless requests from this machine's user on the socket
    /// (default local).
    #[arg(long, env = "HOLDPOINT_SOCKET_ORG")]
    #[serde(rename = "org", skip_serializing_if = "Option::is_none")]
    pub socket_org: Option<String>,
    /// Switch the socket's tokenless local-user rule off (tokens still work).
    #[arg(long, env = "HOLDPOINT_SOCKET_NO_LOCAL_USER", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    #[serde(
        rename = "local_user",
        serialize_with = "negated",
        skip_serializing_if = "Option::is_none"
    )]
    pub socket_no_local_user: Option<bool>,
}

/// Worker settings: `[worker]` and `[deadlines]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct WorkerSettings {
    /// `[worker]`.
    #[command(flatten)]
    #[serde(rename = "worker")]
    pub pool: WorkerPoolArgs,
    /// `[deadlines]`.
    #[command(flatten)]
    pub deadlines: DeadlineArgs,
    /// Test only: abort at this point (after-write, before-ack).
    #[arg(long, env = "HOLDPOINT_FAILPOINT", hide = true)]
    #[serde(skip)]
    pub failpoint: Option<Failpoint>,
}

/// `[worker]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct WorkerPoolArgs {
    /// Most commands decided together in one batch (default 128).
    #[arg(long, env = "HOLDPOINT_WORKER_BATCH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Memory for records kept between batches, in MiB (default 16; records are
    /// weighed at about four times their JSON size, see BENCHMARKS.md "Memory").
    #[arg(long, env = "HOLDPOINT_WORKER_CACHE_MB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_mb: Option<u64>,
    /// This worker's id in the presence bucket (default: random).
    #[arg(long, env = "HOLDPOINT_WORKER_ID")]
    #[serde(rename = "id", skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// How often the consumer's backlog is read for /metrics, in milliseconds
    /// (default 5000).
    #[arg(long, env = "HOLDPOINT_CONSUMER_POLL_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_poll_ms: Option<u64>,
}

/// `[deadlines]`.
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct DeadlineArgs {
    /// Deadline of an interaction whose runtime names none, in seconds (default:
    /// none).
    #[arg(long, env = "HOLDPOINT_DEADLINE_DEFAULT_SECS")]
    #[serde(rename = "default_secs", skip_serializing_if = "Option::is_none")]
    pub deadline_default_secs: Option<u64>,
    /// Farthest deadline a runtime may ask for, in seconds (default: no limit).
    #[arg(long, env = "HOLDPOINT_DEADLINE_MAX_SECS")]
    #[serde(rename = "max_secs", skip_serializing_if = "Option::is_none")]
    pub deadline_max_secs: Option<u64>,
    /// Lead before a deadline at which `interaction-expiring` goes out, in seconds
    /// (default: none).
    #[arg(long, env = "HOLDPOINT_DEADLINE_WARNING_SECS")]
    #[serde(rename = "warning_secs", skip_serializing_if = "Option::is_none")]
    pub deadline_warning_secs: Option<u64>,
}

/// Webhook settings (`[webhooks]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct WebhookSettings {
    /// Local mode: webhook URLs may be plain http to loopback and deliveries may go
    /// to private addresses (default: on for up, off otherwise).
    #[arg(long, env = "HOLDPOINT_WEBHOOKS_LOCAL_MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    #[serde(rename = "local_mode", skip_serializing_if = "Option::is_none")]
    pub webhooks_local_mode: Option<bool>,
    /// Timeout of one webhook request, in seconds (default 10).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_TIMEOUT_SECS")]
    #[serde(rename = "timeout_secs", skip_serializing_if = "Option::is_none")]
    pub webhook_timeout_secs: Option<u64>,
    /// Retry delays after failed attempts, in seconds, comma-separated (default
    /// 5,300,1800,7200,18000,36000,36000).
    #[arg(
        long,
        env = "HOLDPOINT_WEBHOOK_RETRY_SCHEDULE_SECS",
        value_delimiter = ','
    )]
    #[serde(
        rename = "retry_schedule_secs",
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook_retry_schedule_secs: Option<Vec<u64>>,
    /// Failed attempts in a row after which an endpoint is disabled (default 40).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_DISABLE_AFTER")]
    #[serde(rename = "disable_after", skip_serializing_if = "Option::is_none")]
    pub webhook_disable_after: Option<u32>,
    /// Most bytes of a webhook response read (default 65536).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_BODY_CAP_BYTES")]
    #[serde(rename = "body_cap_bytes", skip_serializing_if = "Option::is_none")]
    pub webhook_body_cap_bytes: Option<usize>,
}

/// `holdpoint up`'s local nats-server (`[local]`).
#[derive(Debug, Clone, Args, Default, Serialize)]
pub struct LocalArgs {
    /// Store directory of the local nats-server, when no NATS URL is given
    /// (default .holdpoint/nats).
    #[arg(long, env = "HOLDPOINT_STORE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<PathBuf>,
    /// Port of the local nats-server (default 4290; 0: any free port).
    #[arg(long, env = "HOLDPOINT_NATS_PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_port: Option<u16>,
}

/// `--jwt-algorithms RS256, EdDSA` as the list `["RS256", "EdDSA"]` (trimmed,
/// empty parts dropped), as `auth.jwt_algorithms` holds it.
fn comma_list<S: Serializer>(given: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match given {
        Some(list) => s.collect_seq(list.split(',').map(str::trim).filter(|a| !a.is_empty())),
        None => s.serialize_none(),
    }
}

/// `--socket-no-local-user` as `socket.local_user`, its negation.
fn negated<S: Serializer>(given: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
    match given {
        Some(no) => s.serialize_bool(!no),
        None => s.serialize_none(),
    }
}

/// `holdpoint up --dev-jwt` prints a link to the web inbox (`/inbox`) with a
/// development token for this person in the URL fragment (`#token=…`): browsers
/// never send a fragment to a server, so the token reaches no URL query and no log.
#[derive(Debug, Clone, Args)]
pub struct InboxLinkArgs {
    /// With --dev-jwt: the organisation of the inbox link's token.
    #[arg(long, value_name = "ORG", default_value = "acme")]
    pub inbox_org: String,
    /// With --dev-jwt: the person (`sub`) of the inbox link's token.
    #[arg(long, value_name = "PERSON", default_value = "dev")]
    pub inbox_person: String,
}

impl InboxLinkArgs {
    /// The inbox URL for the API at `api`, with a 12-hour development token in
    /// its fragment (loopback when the API listens on every address).
    ///
    /// # Errors
    /// When the development key cannot be read or made, or signing fails.
    pub fn link(&self, api: SocketAddr, org_claim: &str) -> anyhow::Result<String> {
        let key = devtoken::DevKey::load_or_create(&devtoken::default_dir())?;
        let token = key.token(&self.inbox_org, &self.inbox_person, org_claim, 12 * 3600)?;
        let mut at = api;
        if at.ip().is_unspecified() {
            at.set_ip(match at {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Ok(format!("http://{at}/inbox#token={token}"))
    }
}

// Beside their verbs' code, as `status` and `backup` keep theirs.
pub use crate::demo::DemoArgs;
pub use crate::devtoken::DevTokenArgs;

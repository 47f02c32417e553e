//! The `holdpoint` command.
//!
//! - [`Cli`]: the verbs. `up` runs everything locally (a nats-server of its own unless
//!   `--nats-url` is given, the ingress and the worker in one process); `ingress` and
//!   `worker` run one service each against an existing NATS; `demo` is the main job:
//!   it brings everything up, plays a runtime and a person, and prints each event.
//! - [`config`]: the services' configuration ([`config::Config`]): defaults, a TOML
//!   file, `HOLDPOINT_*` environment variables, flags; validated at start;
//!   `holdpoint config` prints it with secrets redacted.
//! - [`localnats`]: finds and starts a local nats-server.
//! - [`demo`]: the demo script.
//! - [`devtoken`]: `holdpoint dev-token`, a local signing key and tokens for the
//!   quick start.
//! - [`runtime_cmd`]: `holdpoint runtime …`, the runtime's side from a shell.
//! - [`operator`]: `holdpoint pending | show | answer | approve | tail`, a person's
//!   and an operator's side over the HTTP API.
//! - [`webhooks_cmd`]: `holdpoint webhooks …`, an organisation's webhook endpoints
//!   over the HTTP API; `holdpoint notifier` runs the deliveries
//!   (`holdpoint_notifier`), and `up` runs them too.
//!
//! `main.rs` only parses arguments and calls [`run`].

pub mod config;
pub mod demo;
pub mod devtoken;
pub mod localnats;
pub mod operator;
pub mod runtime_cmd;
pub mod terminal;
pub mod webhooks_cmd;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use anyhow::Context as _;
use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand};
use holdpoint_bus::{Bus, Topology, redact_url};
use holdpoint_ingress::{AppState, IdentityMode, IngressConfig, LocalIdentity};
use holdpoint_telemetry::{LogFormat, Metrics};
use holdpoint_worker::{Failpoint, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::{Config, ConfigError, Layers, Service};

/// Holdpoint: people answer AI agents; each answer resolves exactly once.
#[derive(Debug, Parser)]
#[command(name = "holdpoint", version, about)]
pub struct Cli {
    /// The verb.
    #[command(subcommand)]
    pub command: Verb,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Run everything locally: nats-server (unless --nats-url), ingress and worker.
    Up(UpArgs),
    /// Run the HTTP ingress against an existing NATS.
    Ingress(IngressArgs),
    /// Run a worker against an existing NATS (run as many as you like).
    Worker(WorkerArgs),
    /// Run the webhook notifier against an existing NATS (deliver signed events to
    /// registered endpoints; run one or more).
    Notifier(NotifierArgs),
    /// Manage your organisation's webhook endpoints (HTTP, with --token).
    Webhooks(webhooks_cmd::WebhooksArgs),
    /// Print the effective configuration (defaults, file, environment, flags) as
    /// TOML, secrets redacted; fails like `up` would on an invalid one.
    Config(UpArgs),
    /// The main job: bring everything up, open an approval, a question and a
    /// connection, answer them over HTTP, and print every event.
    Demo(DemoArgs),
    /// Act as a runtime: open sessions and interactions, close them, report results.
    Runtime(runtime_cmd::RuntimeArgs),
    /// Local quick start only: create a development signing key and JWKS (once) and
    /// print a token for a person of an organisation.
    DevToken(DevTokenArgs),
    /// List the pending interactions you can answer (HTTP, with --token).
    Pending(operator::PendingArgs),
    /// Show one interaction: its questions and options, or the held call.
    Show(operator::ShowArgs),
    /// Answer a question: one --answer per question, e.g. --answer 0 --answer "2:text".
    Answer(operator::AnswerArgs),
    /// Approve a held call (or --deny it, with --reason).
    Approve(operator::ApproveArgs),
    /// List your organisation's remembered approval rules, or `rules revoke <id>`.
    Rules(operator::RulesArgs),
    /// Print your organisation's decision audit (approval decisions, rule changes).
    Audit(operator::AuditArgs),
    /// Follow your organisation's events as they happen (optionally one task or type).
    Tail(operator::TailArgs),
}

/// `holdpoint dev-token`.
#[derive(Debug, Clone, Args)]
pub struct DevTokenArgs {
    /// The organisation claim of the token (1 to 128 printable ASCII characters).
    #[arg(long)]
    pub org: String,
    /// The person, the token's `sub` (1 to 256 characters).
    #[arg(long)]
    pub person: String,
    /// Directory of the development key and JWKS.
    #[arg(long, default_value = devtoken::DEV_DIR)]
    pub dir: PathBuf,
    /// The organisation claim's name.
    #[arg(long, default_value = "org")]
    pub org_claim: String,
    /// Validity, in seconds.
    #[arg(long, default_value_t = 12 * 3600)]
    pub ttl_secs: u64,
}

/// Settings every service takes: the configuration file, the admin listener, logs.
#[derive(Debug, Clone, Args, Default)]
pub struct ServiceArgs {
    /// A TOML configuration file (see ops/holdpoint.example.toml). Environment
    /// variables and flags override it.
    #[arg(long, env = "HOLDPOINT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Admin listen address: /healthz, /readyz, /metrics (default 127.0.0.1:8081
    /// for up and ingress; a worker serves none unless given).
    #[arg(long, env = "HOLDPOINT_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,
    /// Log format: text or json (default text).
    #[arg(long, env = "HOLDPOINT_LOG_FORMAT", value_name = "text|json")]
    pub log_format: Option<LogFormat>,
    /// Log filter, e.g. `info` or `holdpoint_worker=debug,info` (default info;
    /// RUST_LOG overrides).
    #[arg(long, env = "HOLDPOINT_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Export spans over OTLP/HTTP to this endpoint (builds with `--features otlp`).
    #[arg(long, env = "HOLDPOINT_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

impl ServiceArgs {
    fn layers(&self, l: Layers) -> Layers {
        l.set("admin.listen", self.admin_listen)
            .set("log.format", self.log_format)
            .set("log.level", self.log_level.clone())
            .set("telemetry.otlp_endpoint", self.otlp_endpoint.clone())
    }
}

/// NATS connection and topology.
#[derive(Debug, Clone, Args, Default)]
pub struct NatsArgs {
    /// NATS URL (comma-separated for a cluster).
    #[arg(long, env = "HOLDPOINT_NATS_URL")]
    pub nats_url: Option<String>,
    /// Replicas of every stream and bucket: 1, 3 or 5 (default 1; 3 in a cluster).
    #[arg(long, env = "HOLDPOINT_REPLICAS")]
    pub replicas: Option<usize>,
    /// JetStream duplicate window of the commands and events streams, in seconds
    /// (default 120).
    #[arg(long, env = "HOLDPOINT_DUPLICATE_WINDOW_SECS")]
    pub duplicate_window_secs: Option<u64>,
    /// Partition consumers' ack_wait, in milliseconds (default 3000): how long a
    /// command held by a worker that died waits before it is delivered again.
    #[arg(long, env = "HOLDPOINT_ACK_WAIT_MS")]
    pub ack_wait_ms: Option<u64>,
    /// Command partitions, 1 to 1024 (default 8); fixed once the commands stream
    /// exists.
    #[arg(long, env = "HOLDPOINT_PARTITIONS")]
    pub partitions: Option<u32>,
    /// How long a worker keeps a partition without pulling before another is
    /// pinned, in milliseconds (default 1000).
    #[arg(long, env = "HOLDPOINT_PRIORITY_TIMEOUT_MS")]
    pub priority_timeout_ms: Option<u64>,
}

impl NatsArgs {
    fn layers(&self, l: Layers) -> Layers {
        l.set("nats.url", self.nats_url.clone())
            .set("nats.replicas", self.replicas)
            .set("nats.duplicate_window_secs", self.duplicate_window_secs)
            .set("nats.ack_wait_ms", self.ack_wait_ms)
            .set("nats.partitions", self.partitions)
            .set("nats.priority_timeout_ms", self.priority_timeout_ms)
    }
}

/// Ingress settings.
#[derive(Debug, Clone, Args, Default)]
pub struct HttpArgs {
    /// API listen address (default 127.0.0.1:8080).
    #[arg(long, env = "HOLDPOINT_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// How long a request waits for the worker's outcome before 503, in
    /// milliseconds (default 5000).
    #[arg(long, env = "HOLDPOINT_OUTCOME_TIMEOUT_MS")]
    pub outcome_timeout_ms: Option<u64>,
    /// The public base URL the agent card advertises (default: from each
    /// request's Host).
    #[arg(long, env = "HOLDPOINT_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Most event streams one caller may have open at once (default 16).
    #[arg(long, env = "HOLDPOINT_MAX_STREAMS_PER_CALLER")]
    pub max_streams_per_caller: Option<usize>,
    /// Compatibility: read an A2A request without `A2A-Version` as 1.0 (default
    /// off: it is read as 0.3 and refused with -32009, as A2A v1.0 asks).
    #[arg(long, env = "HOLDPOINT_A2A_MISSING_VERSION_IS_1_0", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub a2a_missing_version_is_1_0: Option<bool>,
    /// Identity settings.
    #[command(flatten)]
    pub auth: AuthArgs,
}

impl HttpArgs {
    fn layers(&self, l: Layers) -> Layers {
        let l = l
            .set("http.listen", self.listen)
            .set("http.outcome_timeout_ms", self.outcome_timeout_ms)
            .set("http.public_url", self.public_url.clone())
            .set("http.max_streams_per_caller", self.max_streams_per_caller)
            .set(
                "http.a2a_missing_version_is_1_0",
                self.a2a_missing_version_is_1_0,
            );
        self.auth.layers(l)
    }
}

/// Identity settings: JWT verification, the local socket, development shortcuts.
#[derive(Debug, Clone, Args, Default)]
pub struct AuthArgs {
    /// The identity provider's issuer (`iss`).
    #[arg(long, env = "HOLDPOINT_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// The issuer's JWKS URL.
    #[arg(long, env = "HOLDPOINT_JWKS_URL", conflicts_with = "jwks_file")]
    pub jwks_url: Option<String>,
    /// A JWKS file instead of a URL.
    #[arg(long, env = "HOLDPOINT_JWKS_FILE")]
    pub jwks_file: Option<PathBuf>,
    /// The expected audience (`aud`); not checked when absent.
    #[arg(long, env = "HOLDPOINT_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// The claim holding the organisation (default org).
    #[arg(long, env = "HOLDPOINT_ORG_CLAIM")]
    pub org_claim: Option<String>,
    /// Accepted algorithms, comma-separated (default RS256,ES256,EdDSA; HMAC is
    /// never accepted).
    #[arg(long, env = "HOLDPOINT_JWT_ALGORITHMS")]
    pub jwt_algorithms: Option<String>,
    /// Clock leeway for exp/nbf, in seconds (default 30).
    #[arg(long, env = "HOLDPOINT_JWT_LEEWAY_SECS")]
    pub jwt_leeway_secs: Option<u64>,
    /// How long a fetched JWKS is used, in seconds (default 300).
    #[arg(long, env = "HOLDPOINT_JWKS_TTL_SECS")]
    pub jwks_ttl_secs: Option<u64>,
    /// Least time between refetches caused by unknown `kid`s, in seconds (default 30).
    #[arg(long, env = "HOLDPOINT_JWKS_COOLDOWN_SECS")]
    pub jwks_cooldown_secs: Option<u64>,
    /// Development: verify tokens from `holdpoint dev-token` (the JWKS in .holdpoint/dev-jwt).
    #[arg(long, env = "HOLDPOINT_DEV_JWT", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub dev_jwt: Option<bool>,
    /// Also serve the API on this Unix socket.
    #[arg(long, env = "HOLDPOINT_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Organisation of tokenless requests from this machine's user on the socket
    /// (default local).
    #[arg(long, env = "HOLDPOINT_SOCKET_ORG")]
    pub socket_org: Option<String>,
    /// Switch the socket's tokenless local-user rule off (tokens still work).
    #[arg(long, env = "HOLDPOINT_SOCKET_NO_LOCAL_USER", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub socket_no_local_user: Option<bool>,
    /// INSECURE, local development only: take the caller's organisation and person
    /// from the X-Holdpoint-Org and X-Holdpoint-Person headers.
    #[arg(long, env = "HOLDPOINT_INSECURE_DEV_IDENTITY", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub insecure_dev_identity: Option<bool>,
}

impl AuthArgs {
    fn layers(&self, l: Layers) -> Layers {
        let algorithms = self.jwt_algorithms.as_ref().map(|a| {
            a.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        });
        l.set("auth.jwt_issuer", self.jwt_issuer.clone())
            .set("auth.jwks_url", self.jwks_url.clone())
            .set("auth.jwks_file", self.jwks_file.clone())
            .set("auth.jwt_audience", self.jwt_audience.clone())
            .set("auth.org_claim", self.org_claim.clone())
            .set("auth.jwt_algorithms", algorithms)
            .set("auth.jwt_leeway_secs", self.jwt_leeway_secs)
            .set("auth.jwks_ttl_secs", self.jwks_ttl_secs)
            .set("auth.jwks_cooldown_secs", self.jwks_cooldown_secs)
            .set("auth.dev_jwt", self.dev_jwt)
            .set("auth.insecure_dev_identity", self.insecure_dev_identity)
            .set("socket.path", self.socket.clone())
            .set("socket.org", self.socket_org.clone())
            .set("socket.local_user", self.socket_no_local_user.map(|no| !no))
    }
}

/// Worker settings.
#[derive(Debug, Clone, Args, Default)]
pub struct WorkerSettings {
    /// Pull loops on a shared consumer when commands are not partitioned
    /// (nats-server 2.9; default 4).
    #[arg(long, env = "HOLDPOINT_WORKER_CONCURRENCY")]
    pub concurrency: Option<usize>,
    /// Most commands decided together in one batch (default 128).
    #[arg(long, env = "HOLDPOINT_WORKER_BATCH")]
    pub batch: Option<usize>,
    /// Memory for records kept between batches, in MiB (default 32).
    #[arg(long, env = "HOLDPOINT_WORKER_CACHE_MB")]
    pub cache_mb: Option<u64>,
    /// This worker's id in the presence bucket (default: random).
    #[arg(long, env = "HOLDPOINT_WORKER_ID")]
    pub worker_id: Option<String>,
    /// How often the consumer's backlog is read for /metrics, in milliseconds
    /// (default 5000).
    #[arg(long, env = "HOLDPOINT_CONSUMER_POLL_MS")]
    pub consumer_poll_ms: Option<u64>,
    /// Deadline of an interaction whose runtime names none, in seconds (default:
    /// none).
    #[arg(long, env = "HOLDPOINT_DEADLINE_DEFAULT_SECS")]
    pub deadline_default_secs: Option<u64>,
    /// Farthest deadline a runtime may ask for, in seconds (default: no limit).
    #[arg(long, env = "HOLDPOINT_DEADLINE_MAX_SECS")]
    pub deadline_max_secs: Option<u64>,
    /// Lead before a deadline at which `interaction-expiring` goes out, in seconds
    /// (default: none).
    #[arg(long, env = "HOLDPOINT_DEADLINE_WARNING_SECS")]
    pub deadline_warning_secs: Option<u64>,
    /// Test only: abort at this point (after-write, before-ack).
    #[arg(long, env = "HOLDPOINT_FAILPOINT", hide = true)]
    pub failpoint: Option<Failpoint>,
}

impl WorkerSettings {
    fn layers(&self, l: Layers) -> Layers {
        l.set("worker.concurrency", self.concurrency)
            .set("worker.batch", self.batch)
            .set("worker.cache_mb", self.cache_mb)
            .set("worker.id", self.worker_id.clone())
            .set("worker.consumer_poll_ms", self.consumer_poll_ms)
            .set("deadlines.default_secs", self.deadline_default_secs)
            .set("deadlines.max_secs", self.deadline_max_secs)
            .set("deadlines.warning_secs", self.deadline_warning_secs)
    }
}

/// Webhook settings (`[webhooks]`).
#[derive(Debug, Clone, Args, Default)]
pub struct WebhookSettings {
    /// Local mode: webhook URLs may be plain http to loopback and deliveries may go
    /// to private addresses (default: on for up, off otherwise).
    #[arg(long, env = "HOLDPOINT_WEBHOOKS_LOCAL_MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub webhooks_local_mode: Option<bool>,
    /// Timeout of one webhook request, in seconds (default 10).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_TIMEOUT_SECS")]
    pub webhook_timeout_secs: Option<u64>,
    /// Retry delays after failed attempts, in seconds, comma-separated (default
    /// 5,300,1800,7200,18000,36000,36000).
    #[arg(
        long,
        env = "HOLDPOINT_WEBHOOK_RETRY_SCHEDULE_SECS",
        value_delimiter = ','
    )]
    pub webhook_retry_schedule_secs: Option<Vec<u64>>,
    /// Failed attempts in a row after which an endpoint is disabled (default 40).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_DISABLE_AFTER")]
    pub webhook_disable_after: Option<u32>,
    /// Most bytes of a webhook response read (default 65536).
    #[arg(long, env = "HOLDPOINT_WEBHOOK_BODY_CAP_BYTES")]
    pub webhook_body_cap_bytes: Option<usize>,
}

impl WebhookSettings {
    fn layers(&self, l: Layers) -> Layers {
        l.set("webhooks.local_mode", self.webhooks_local_mode)
            .set("webhooks.timeout_secs", self.webhook_timeout_secs)
            .set(
                "webhooks.retry_schedule_secs",
                self.webhook_retry_schedule_secs.clone(),
            )
            .set("webhooks.disable_after", self.webhook_disable_after)
            .set("webhooks.body_cap_bytes", self.webhook_body_cap_bytes)
    }
}

/// `holdpoint notifier`.
#[derive(Debug, Clone, Args)]
pub struct NotifierArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
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
            |l| {
                let l = self.service.layers(l);
                let l = self.nats.layers(l);
                self.webhooks.layers(l)
            },
            Service::Notifier,
        )
    }
}

/// `holdpoint up`'s local nats-server.
#[derive(Debug, Clone, Args, Default)]
pub struct LocalArgs {
    /// Store directory of the local nats-server, when no NATS URL is given
    /// (default .holdpoint/nats).
    #[arg(long, env = "HOLDPOINT_STORE")]
    pub store: Option<PathBuf>,
    /// Port of the local nats-server (default 4290; 0: any free port).
    #[arg(long, env = "HOLDPOINT_NATS_PORT")]
    pub nats_port: Option<u16>,
}

impl LocalArgs {
    fn layers(&self, l: Layers) -> Layers {
        l.set("local.store", self.store.clone())
            .set("local.nats_port", self.nats_port)
    }
}

/// `holdpoint up`.
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
    pub http: HttpArgs,
    /// Worker settings.
    #[command(flatten)]
    pub worker: WorkerSettings,
    /// The local nats-server.
    #[command(flatten)]
    pub local: LocalArgs,
    /// The web inbox link printed with `--dev-jwt`.
    #[command(flatten)]
    pub inbox: InboxLinkArgs,
    /// Webhook settings.
    #[command(flatten)]
    pub webhooks: WebhookSettings,
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
        let key = devtoken::DevKey::load_or_create(std::path::Path::new(devtoken::DEV_DIR))?;
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

impl UpArgs {
    /// The configuration these arguments (and the file and environment) make.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self, service: Service) -> Result<Config, ConfigError> {
        Config::load(
            self.service.config.as_deref(),
            |l| {
                let l = self.service.layers(l);
                let l = self.nats.layers(l);
                let l = self.http.layers(l);
                let l = self.worker.layers(l);
                let l = self.webhooks.layers(l);
                self.local.layers(l)
            },
            service,
        )
    }
}

/// `holdpoint ingress`.
#[derive(Debug, Clone, Args)]
pub struct IngressArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
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
            |l| {
                let l = self.service.layers(l);
                let l = self.nats.layers(l);
                let l = self.webhooks.layers(l);
                self.http.layers(l)
            },
            Service::Ingress,
        )
    }
}

/// `holdpoint worker`.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// Configuration file, admin listener, logs.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Worker settings.
    #[command(flatten)]
    pub worker: WorkerSettings,
}

impl WorkerArgs {
    /// The configuration these arguments (and the file and environment) make.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn config(&self) -> Result<Config, ConfigError> {
        Config::load(
            self.service.config.as_deref(),
            |l| {
                let l = self.service.layers(l);
                let l = self.nats.layers(l);
                self.worker.layers(l)
            },
            Service::Worker,
        )
    }
}

/// `holdpoint demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Use this NATS instead of starting a private one.
    #[arg(long, env = "HOLDPOINT_NATS_URL")]
    pub nats_url: Option<String>,
    /// Print the full JSON of each event.
    #[arg(long)]
    pub verbose: bool,
}

/// Installs the tracing subscriber for the verbs that are not services: text,
/// `RUST_LOG` overriding `default`.
pub fn init_tracing(default: &str) {
    let _ = holdpoint_telemetry::logs::init(LogFormat::Text, default, None);
}

/// Installs the tracing subscriber a service's configuration asks for.
///
/// # Errors
/// When the log level does not parse or OTLP export cannot start.
pub fn init_service_tracing(cfg: &Config, service_name: &str) -> anyhow::Result<()> {
    let export = cfg.telemetry.otlp_endpoint.as_deref().map(|otlp_endpoint| {
        holdpoint_telemetry::logs::Export {
            otlp_endpoint,
            service_name,
        }
    });
    holdpoint_telemetry::logs::init(cfg.log.format, &cfg.log.level, export)?;
    Ok(())
}

/// A shutdown token cancelled on SIGINT or SIGTERM. The handlers are installed
/// before this returns, so a signal that comes right after start is not lost.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let streams = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        tokio::spawn(async move {
            match streams {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => info!("SIGTERM: shutting down"),
                        _ = int.recv() => info!("SIGINT: shutting down"),
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            t.cancel();
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        t.cancel();
    });
    token
}

/// Connects and sets the topology up.
///
/// # Errors
/// When NATS is unreachable or too old.
pub async fn connect_bus(url: &str, name: &str, topo: Topology) -> anyhow::Result<Bus> {
    let client = holdpoint_bus::connect(url, name).await?;
    Ok(Bus::setup(client, topo).await?)
}

impl Config {
    /// Builds the identity mode (loads the JWKS once).
    ///
    /// # Errors
    /// When the key set cannot be set up or the local user has no usable name.
    pub async fn identity(&self) -> anyhow::Result<IdentityMode> {
        use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier, parse_algorithm};
        let a = &self.auth;
        let mut mode = IdentityMode {
            insecure_dev_headers: a.insecure_dev_identity,
            ..IdentityMode::default()
        };
        let (issuer, source, audience) = if a.dev_jwt {
            let key = devtoken::DevKey::load_or_create(std::path::Path::new(devtoken::DEV_DIR))?;
            (
                Some(devtoken::DEV_ISSUER.to_owned()),
                Some(JwksSource::File(key.jwks)),
                Some(devtoken::DEV_AUDIENCE.to_owned()),
            )
        } else {
            let source = match (&a.jwks_url, &a.jwks_file) {
                (Some(u), _) => Some(JwksSource::Url(u.clone())),
                (None, Some(f)) => Some(JwksSource::File(f.clone())),
                (None, None) => None,
            };
            (a.jwt_issuer.clone(), source, a.jwt_audience.clone())
        };
        if let (Some(issuer), Some(source)) = (issuer, source) {
            let mut cfg = AuthConfig::new(issuer, source);
            cfg.audience = audience;
            cfg.org_claim = a.org_claim.clone();
            cfg.algorithms = a
                .jwt_algorithms
                .iter()
                .map(|a| parse_algorithm(a.trim()))
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow::anyhow!("auth.jwt_algorithms: {e}"))?;
            cfg.leeway_secs = a.jwt_leeway_secs;
            cfg.jwks_ttl = Duration::from_secs(a.jwks_ttl_secs.max(1));
            cfg.refetch_cooldown = Duration::from_secs(a.jwks_cooldown_secs);
            mode.jwt = Some(
                Verifier::new(cfg)
                    .await
                    .map_err(|e| anyhow::anyhow!("auth: {e}"))?,
            );
        }
        if self.socket.path.is_some() && self.socket.local_user {
            let org = holdpoint_domain::OrgId::parse(self.socket.org.clone())
                .map_err(|e| anyhow::anyhow!("socket.org: {e}"))?;
            mode.local =
                Some(LocalIdentity::current(org).map_err(|e| anyhow::anyhow!("local user: {e}"))?);
        }
        Ok(mode)
    }

    /// The ingress's settings, counting into `metrics`.
    ///
    /// # Errors
    /// As [`Config::identity`].
    pub async fn ingress_config(
        &self,
        service: Service,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<IngressConfig> {
        Ok(IngressConfig {
            webhooks_local_mode: self.webhooks_local(service),
            outcome_timeout: Duration::from_millis(self.http.outcome_timeout_ms),
            identity: self.identity().await?,
            public_url: self.http.public_url.clone(),
            metrics,
            max_streams_per_caller: self.http.max_streams_per_caller,
            a2a_missing_version_is_1_0: self.http.a2a_missing_version_is_1_0,
            ..IngressConfig::default()
        })
    }

    /// The worker's settings, counting into `metrics`.
    pub fn worker_config(
        &self,
        metrics: Arc<Metrics>,
        failpoint: Option<Failpoint>,
    ) -> WorkerConfig {
        WorkerConfig {
            concurrency: self.worker.concurrency,
            batch: self.worker.batch,
            cache_bytes: self.worker.cache_mb.saturating_mul(1024 * 1024),
            worker_id: self.worker.id.clone(),
            failpoint,
            metrics,
            consumer_poll: Duration::from_millis(self.worker.consumer_poll_ms),
            deadlines: self.deadlines.policy(),
            ..WorkerConfig::default()
        }
    }
}

/// Handles of the services started by [`start_services`].
#[derive(Debug)]
pub struct Services {
    /// Where the API listens.
    pub api: SocketAddr,
    /// Where the admin endpoints listen.
    pub admin: SocketAddr,
    tasks: tokio::task::JoinSet<anyhow::Result<()>>,
}

impl Services {
    /// Waits for every service to end (after shutdown).
    ///
    /// # Errors
    /// The first service error.
    pub async fn wait(mut self) -> anyhow::Result<()> {
        while let Some(r) = self.tasks.join_next().await {
            r??;
        }
        Ok(())
    }
}

/// Starts `workers` workers, the webhook notifier and the ingress in this process,
/// sharing one set of metrics (served on the admin listener).
///
/// # Errors
/// When a listener cannot be bound or NATS refuses.
pub async fn start_services(
    bus: Bus,
    cfg: &Config,
    failpoint: Option<Failpoint>,
    workers: usize,
    shutdown: CancellationToken,
) -> anyhow::Result<Services> {
    let metrics = Arc::new(Metrics::new());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (bus, wcfg, token) = (
            bus.clone(),
            cfg.worker_config(metrics.clone(), failpoint),
            shutdown.clone(),
        );
        tasks.spawn(async move { holdpoint_worker::run(bus, wcfg, token).await });
    }
    {
        let (bus, ncfg, token) = (
            bus.clone(),
            cfg.notifier_config(Service::Up, metrics.clone()),
            shutdown.clone(),
        );
        tasks.spawn(async move { holdpoint_notifier::run(bus, ncfg, token).await });
    }
    let state = AppState::new(bus, cfg.ingress_config(Service::Up, metrics).await?).await?;
    if let Some(path) = &cfg.socket.path {
        tasks.spawn(holdpoint_ingress::run_unix(
            state.clone(),
            path.clone(),
            shutdown.clone(),
        ));
    }
    let api = TcpListener::bind(cfg.http.listen)
        .await
        .with_context(|| format!("http.listen: binding {}", cfg.http.listen))?;
    let admin_addr = cfg
        .admin_listen(Service::Up)
        .context("admin.listen is not set")?;
    let admin = TcpListener::bind(admin_addr)
        .await
        .with_context(|| format!("admin.listen: binding {admin_addr}"))?;
    let (api_addr, admin_addr) = (api.local_addr()?, admin.local_addr()?);
    tasks.spawn(holdpoint_ingress::run(state.clone(), api, shutdown.clone()));
    tasks.spawn(holdpoint_ingress::run_admin(state, admin, shutdown));
    Ok(Services {
        api: api_addr,
        admin: admin_addr,
        tasks,
    })
}

/// Runs the parsed command line.
///
/// # Errors
/// Whatever the verb fails with.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Verb::Up(args) => up(args).await,
        Verb::Ingress(args) => ingress(args.config()?).await,
        Verb::Worker(args) => {
            let failpoint = args.worker.failpoint;
            worker(args.config()?, failpoint).await
        }
        Verb::Notifier(args) => notifier(args.config()?).await,
        Verb::Webhooks(args) => webhooks_cmd::run(args).await,
        Verb::Config(args) => {
            print!("{}", args.config(Service::Up)?.to_toml()?);
            Ok(())
        }
        Verb::DevToken(args) => {
            let key = devtoken::DevKey::load_or_create(&args.dir)?;
            println!(
                "{}",
                key.token(&args.org, &args.person, &args.org_claim, args.ttl_secs)?
            );
            eprintln!(
                "dev-token: signed with {} (JWKS {}); `holdpoint up --dev-jwt` verifies it",
                args.dir.join("signing-key.pk8").display(),
                key.jwks.display()
            );
            Ok(())
        }
        Verb::Pending(args) => operator::pending(args).await,
        Verb::Show(args) => operator::show(args).await,
        Verb::Answer(args) => operator::answer(args).await,
        Verb::Approve(args) => operator::approve(args).await,
        Verb::Tail(args) => operator::tail(args).await,
        Verb::Rules(args) => operator::rules(args).await,
        Verb::Audit(args) => operator::audit(args).await,
        Verb::Runtime(args) => {
            init_tracing("warn");
            runtime_cmd::run(args).await
        }
        Verb::Demo(args) => {
            init_tracing("warn");
            demo::run(args).await
        }
    }
}

/// `holdpoint ingress`: serves the API (TCP, and the Unix socket if configured)
/// and the admin listener until SIGTERM/SIGINT, then stops accepting, finishes the
/// requests in flight, and returns.
async fn ingress(cfg: Config) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-ingress")?;
    let shutdown = shutdown_on_signals();
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let bus = connect_bus(&url, "holdpoint-ingress", cfg.topology()).await?;
    let metrics = Arc::new(Metrics::new());
    let state = AppState::new(
        bus.clone(),
        cfg.ingress_config(Service::Ingress, metrics).await?,
    )
    .await?;
    let api = TcpListener::bind(cfg.http.listen)
        .await
        .with_context(|| format!("http.listen: binding {}", cfg.http.listen))?;
    let admin_addr = cfg
        .admin_listen(Service::Ingress)
        .context("admin.listen is not set")?;
    let admin = TcpListener::bind(admin_addr)
        .await
        .with_context(|| format!("admin.listen: binding {admin_addr}"))?;
    let socket_task = cfg.socket.path.clone().map(|path| {
        tokio::spawn(holdpoint_ingress::run_unix(
            state.clone(),
            path,
            shutdown.clone(),
        ))
    });
    println!(
        "holdpoint ingress: api http://{} admin http://{} (NATS {})",
        api.local_addr()?,
        admin.local_addr()?,
        redact_url(&url)
    );
    let admin_task = tokio::spawn(holdpoint_ingress::run_admin(
        state.clone(),
        admin,
        shutdown.clone(),
    ));
    holdpoint_ingress::run(state, api, shutdown).await?;
    admin_task.await??;
    if let Some(t) = socket_task {
        t.await??;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), bus.client.flush()).await;
    info!("ingress stopped");
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

/// `holdpoint worker`: pulls commands until SIGTERM/SIGINT, then stops pulling,
/// finishes and acks the commands in flight, and returns. Serves the admin
/// endpoints when `admin.listen` is set.
async fn worker(cfg: Config, failpoint: Option<Failpoint>) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-worker")?;
    let shutdown = shutdown_on_signals();
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let bus = connect_bus(&url, "holdpoint-worker", cfg.topology()).await?;
    let metrics = Arc::new(Metrics::new());
    let admin_task = match cfg.admin_listen(Service::Worker) {
        Some(addr) => {
            let admin = TcpListener::bind(addr)
                .await
                .with_context(|| format!("admin.listen: binding {addr}"))?;
            println!("holdpoint worker: admin http://{}", admin.local_addr()?);
            let admin_state = holdpoint_ingress::admin::Admin {
                bus: bus.clone(),
                metrics: metrics.clone(),
            };
            Some(tokio::spawn(holdpoint_ingress::admin::serve(
                admin_state,
                admin,
                shutdown.clone(),
            )))
        }
        None => None,
    };
    println!(
        "holdpoint worker: pulling commands from {}",
        redact_url(&url)
    );
    holdpoint_worker::run(bus, cfg.worker_config(metrics, failpoint), shutdown).await?;
    if let Some(t) = admin_task {
        t.await??;
    }
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

/// `holdpoint notifier`: delivers webhooks until SIGTERM/SIGINT, then lets the
/// attempts in flight finish (bounded by the request timeout) and returns. Serves
/// the admin endpoints (`/metrics` with the per-endpoint webhook metrics) when
/// `admin.listen` is set.
async fn notifier(cfg: Config) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-notifier")?;
    let shutdown = shutdown_on_signals();
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let bus = connect_bus(&url, "holdpoint-notifier", cfg.topology()).await?;
    let metrics = Arc::new(Metrics::new());
    let admin_task = match cfg.admin_listen(Service::Notifier) {
        Some(addr) => {
            let admin = TcpListener::bind(addr)
                .await
                .with_context(|| format!("admin.listen: binding {addr}"))?;
            println!("holdpoint notifier: admin http://{}", admin.local_addr()?);
            let admin_state = holdpoint_ingress::admin::Admin {
                bus: bus.clone(),
                metrics: metrics.clone(),
            };
            Some(tokio::spawn(holdpoint_ingress::admin::serve(
                admin_state,
                admin,
                shutdown.clone(),
            )))
        }
        None => None,
    };
    println!(
        "holdpoint notifier: delivering webhooks from {}",
        redact_url(&url)
    );
    holdpoint_notifier::run(
        bus,
        cfg.notifier_config(Service::Notifier, metrics),
        shutdown,
    )
    .await?;
    if let Some(t) = admin_task {
        t.await??;
    }
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    let cfg = args.config(Service::Up)?;
    init_service_tracing(&cfg, "holdpoint")?;
    let shutdown = shutdown_on_signals();
    let (url, local) = match &cfg.nats.url {
        Some(url) => (url.clone(), None),
        None => {
            let nats = localnats::LocalNats::start(&cfg.local.store, cfg.local.nats_port).await?;
            println!("nats-server: {} (store {})", nats.url, nats.store.display());
            (nats.url.clone(), Some(nats))
        }
    };
    let bus = connect_bus(&url, "holdpoint-up", cfg.topology()).await?;
    let services = start_services(bus, &cfg, args.worker.failpoint, 1, shutdown.clone()).await?;
    println!("holdpoint nats:  {}", redact_url(&url));
    println!("holdpoint api:   http://{}", services.api);
    println!("holdpoint admin: http://{}/readyz", services.admin);
    if let Some(p) = &cfg.socket.path {
        println!("holdpoint socket: {}", p.display());
    }
    if cfg.auth.dev_jwt {
        println!("identity: development JWTs (holdpoint dev-token --org ORG --person NAME)");
        // Printed for the person at the terminal only, never logged: the token is in
        // the fragment, which the browser keeps to itself.
        println!(
            "inbox: {} ({} of {})",
            args.inbox.link(services.api, &cfg.auth.org_claim)?,
            args.inbox.inbox_person,
            args.inbox.inbox_org
        );
    }
    if cfg.auth.insecure_dev_identity {
        println!("identity: INSECURE development headers X-Holdpoint-Org / X-Holdpoint-Person");
    }
    println!("press Ctrl-C to stop");
    info!("up");
    let result = services.wait().await;
    if let Some(nats) = local {
        nats.stop().await;
    }
    holdpoint_telemetry::otlp::shutdown();
    result
}

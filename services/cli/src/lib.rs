//! The `holdpoint` command.
//!
//! - [`Cli`]: the verbs. `up` runs everything locally (a nats-server of its own unless
//!   `--nats-url` is given, the ingress and the worker in one process); `ingress` and
//!   `worker` run one service each against an existing NATS; `demo` is the main job:
//!   it brings everything up, plays a runtime and a person, and prints each event.
//! - [`localnats`]: finds and starts a local nats-server.
//! - [`demo`]: the demo script.
//! - [`devtoken`]: `holdpoint dev-token`, a local signing key and tokens for the
//!   quick start.
//! - [`runtime_cmd`]: `holdpoint runtime …`, the runtime's side from a shell.
//!
//! `main.rs` only parses arguments and calls [`run`].

pub mod demo;
pub mod devtoken;
pub mod localnats;
pub mod runtime_cmd;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use holdpoint_bus::{Bus, Topology};
use holdpoint_ingress::{AppState, IdentityMode, IngressConfig, LocalIdentity};
use holdpoint_worker::{Failpoint, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

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
    /// The main job: bring everything up, open an approval, a question and a
    /// connection, answer them over HTTP, and print every event.
    Demo(DemoArgs),
    /// Act as a runtime: open sessions and interactions, close them, report results.
    Runtime(runtime_cmd::RuntimeArgs),
    /// Local quick start only: create a development signing key and JWKS (once) and
    /// print a token for a person of an organisation.
    DevToken(DevTokenArgs),
}

/// `holdpoint dev-token`.
#[derive(Debug, Clone, Args)]
pub struct DevTokenArgs {
    /// Organisation.
    #[arg(long)]
    pub org: String,
    /// Person (`sub`).
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

/// NATS connection and topology.
#[derive(Debug, Clone, Args)]
pub struct NatsArgs {
    /// NATS URL (comma-separated for a cluster).
    #[arg(long, env = "HOLDPOINT_NATS_URL")]
    pub nats_url: Option<String>,
    /// Replicas of every stream and bucket (3 in a cluster).
    #[arg(long, env = "HOLDPOINT_REPLICAS", default_value_t = 1)]
    pub replicas: usize,
    /// JetStream duplicate window of the commands and events streams, in seconds.
    #[arg(long, env = "HOLDPOINT_DUPLICATE_WINDOW_SECS", default_value_t = 120)]
    pub duplicate_window_secs: u64,
    /// Workers' consumer ack_wait, in milliseconds.
    #[arg(long, env = "HOLDPOINT_ACK_WAIT_MS", default_value_t = 30_000)]
    pub ack_wait_ms: u64,
}

impl NatsArgs {
    /// The topology these arguments describe.
    pub fn topology(&self) -> Topology {
        Topology {
            replicas: self.replicas,
            duplicate_window: Duration::from_secs(self.duplicate_window_secs.max(1)),
            ack_wait: Duration::from_millis(self.ack_wait_ms.max(100)),
            ..Topology::default()
        }
    }
}

/// Ingress settings.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// API listen address.
    #[arg(long, env = "HOLDPOINT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Admin listen address (/healthz, /readyz).
    #[arg(long, env = "HOLDPOINT_ADMIN_LISTEN", default_value = "127.0.0.1:8081")]
    pub admin_listen: SocketAddr,
    /// How long a request waits for the worker's outcome before 503, in milliseconds.
    #[arg(long, env = "HOLDPOINT_OUTCOME_TIMEOUT_MS", default_value_t = 5_000)]
    pub outcome_timeout_ms: u64,
    /// Identity settings.
    #[command(flatten)]
    pub auth: AuthArgs,
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
    /// The claim holding the organisation.
    #[arg(long, env = "HOLDPOINT_ORG_CLAIM", default_value = "org")]
    pub org_claim: String,
    /// Accepted algorithms, comma-separated (HMAC is never accepted).
    #[arg(
        long,
        env = "HOLDPOINT_JWT_ALGORITHMS",
        default_value = "RS256,ES256,EdDSA"
    )]
    pub jwt_algorithms: String,
    /// Clock leeway for exp/nbf, in seconds.
    #[arg(long, env = "HOLDPOINT_JWT_LEEWAY_SECS", default_value_t = 30)]
    pub jwt_leeway_secs: u64,
    /// How long a fetched JWKS is used, in seconds.
    #[arg(long, env = "HOLDPOINT_JWKS_TTL_SECS", default_value_t = 300)]
    pub jwks_ttl_secs: u64,
    /// Least time between refetches caused by unknown `kid`s, in seconds.
    #[arg(long, env = "HOLDPOINT_JWKS_COOLDOWN_SECS", default_value_t = 30)]
    pub jwks_cooldown_secs: u64,
    /// Development: verify tokens from `holdpoint dev-token` (the JWKS in .holdpoint/dev-jwt).
    #[arg(long, env = "HOLDPOINT_DEV_JWT")]
    pub dev_jwt: bool,
    /// Also serve the API on this Unix socket.
    #[arg(long, env = "HOLDPOINT_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Organisation of tokenless requests from this machine's user on the socket.
    #[arg(long, env = "HOLDPOINT_SOCKET_ORG", default_value = "local")]
    pub socket_org: String,
    /// Switch the socket's tokenless local-user rule off (tokens still work).
    #[arg(long, env = "HOLDPOINT_SOCKET_NO_LOCAL_USER")]
    pub socket_no_local_user: bool,
    /// INSECURE, local development only: take the caller's organisation and person
    /// from the X-Holdpoint-Org and X-Holdpoint-Person headers.
    #[arg(long, env = "HOLDPOINT_INSECURE_DEV_IDENTITY")]
    pub insecure_dev_identity: bool,
}

impl AuthArgs {
    /// Builds the identity mode (loads the JWKS once).
    ///
    /// # Errors
    /// When the settings are incomplete or invalid; the message names the flag.
    pub async fn identity(&self) -> anyhow::Result<IdentityMode> {
        use holdpoint_ingress::auth::{AuthConfig, JwksSource, Verifier, parse_algorithm};
        let mut mode = IdentityMode {
            insecure_dev_headers: self.insecure_dev_identity,
            ..IdentityMode::default()
        };
        let (issuer, source, audience) = if self.dev_jwt {
            let key = devtoken::DevKey::load_or_create(std::path::Path::new(devtoken::DEV_DIR))?;
            (
                Some(devtoken::DEV_ISSUER.to_owned()),
                Some(JwksSource::File(key.jwks)),
                Some(devtoken::DEV_AUDIENCE.to_owned()),
            )
        } else {
            let source = match (&self.jwks_url, &self.jwks_file) {
                (Some(u), _) => Some(JwksSource::Url(u.clone())),
                (None, Some(f)) => Some(JwksSource::File(f.clone())),
                (None, None) => None,
            };
            (self.jwt_issuer.clone(), source, self.jwt_audience.clone())
        };
        match (issuer, source) {
            (Some(issuer), Some(source)) => {
                let mut cfg = AuthConfig::new(issuer, source);
                cfg.audience = audience;
                cfg.org_claim = self.org_claim.clone();
                cfg.algorithms = self
                    .jwt_algorithms
                    .split(',')
                    .map(|a| parse_algorithm(a.trim()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| anyhow::anyhow!("--jwt-algorithms: {e}"))?;
                cfg.leeway_secs = self.jwt_leeway_secs;
                cfg.jwks_ttl = Duration::from_secs(self.jwks_ttl_secs.max(1));
                cfg.refetch_cooldown = Duration::from_secs(self.jwks_cooldown_secs);
                mode.jwt = Some(
                    Verifier::new(cfg)
                        .await
                        .map_err(|e| anyhow::anyhow!("JWT settings: {e}"))?,
                );
            }
            (None, None) => {}
            (Some(_), None) => anyhow::bail!("--jwt-issuer needs --jwks-url or --jwks-file"),
            (None, Some(_)) => anyhow::bail!("--jwks-url/--jwks-file need --jwt-issuer"),
        }
        if self.socket.is_some() && !self.socket_no_local_user {
            let org = holdpoint_domain::OrgId::parse(self.socket_org.clone())
                .map_err(|e| anyhow::anyhow!("--socket-org: {e}"))?;
            mode.local =
                Some(LocalIdentity::current(org).map_err(|e| anyhow::anyhow!("local user: {e}"))?);
        }
        Ok(mode)
    }
}

impl HttpArgs {
    async fn config(&self) -> anyhow::Result<IngressConfig> {
        Ok(IngressConfig {
            outcome_timeout: Duration::from_millis(self.outcome_timeout_ms.max(1)),
            identity: self.auth.identity().await?,
            ..IngressConfig::default()
        })
    }
}

/// Worker settings.
#[derive(Debug, Clone, Args)]
pub struct WorkerSettings {
    /// Commands handled at once per worker.
    #[arg(long, env = "HOLDPOINT_WORKER_CONCURRENCY", default_value_t = 64)]
    pub concurrency: usize,
    /// Test only: abort at this point (after-write, before-ack).
    #[arg(long, env = "HOLDPOINT_FAILPOINT", hide = true)]
    pub failpoint: Option<Failpoint>,
}

impl WorkerSettings {
    fn config(&self) -> WorkerConfig {
        WorkerConfig {
            concurrency: self.concurrency,
            failpoint: self.failpoint,
            ..WorkerConfig::default()
        }
    }
}

/// `holdpoint up`.
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
    pub http: HttpArgs,
    /// Worker settings.
    #[command(flatten)]
    pub worker: WorkerSettings,
    /// Store directory of the local nats-server (when no --nats-url).
    #[arg(long, env = "HOLDPOINT_STORE", default_value = ".holdpoint/nats")]
    pub store: PathBuf,
    /// Port of the local nats-server (0: any free port).
    #[arg(long, env = "HOLDPOINT_NATS_PORT", default_value_t = 4290)]
    pub nats_port: u16,
}

/// `holdpoint ingress`.
#[derive(Debug, Clone, Args)]
pub struct IngressArgs {
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// HTTP settings.
    #[command(flatten)]
    pub http: HttpArgs,
}

/// `holdpoint worker`.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// NATS settings.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Worker settings.
    #[command(flatten)]
    pub worker: WorkerSettings,
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

/// Installs the tracing subscriber (`RUST_LOG` overrides `default`).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// A shutdown token cancelled on SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            if let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            } else {
                let _ = ctrl_c.await;
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
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

/// Starts `workers` workers and the ingress in this process.
///
/// # Errors
/// When a listener cannot be bound or NATS refuses.
pub async fn start_services(
    bus: Bus,
    http: &HttpArgs,
    worker: &WorkerSettings,
    workers: usize,
    shutdown: CancellationToken,
) -> anyhow::Result<Services> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (bus, cfg, token) = (bus.clone(), worker.config(), shutdown.clone());
        tasks.spawn(async move { holdpoint_worker::run(bus, cfg, token).await });
    }
    let state = AppState::new(bus, http.config().await?).await?;
    if let Some(path) = &http.auth.socket {
        // Bind now so a bad socket path fails the start, not later.
        let listener_check = path.clone();
        tasks.spawn(holdpoint_ingress::run_unix(
            state.clone(),
            listener_check,
            shutdown.clone(),
        ));
    }
    let api = TcpListener::bind(http.listen)
        .await
        .with_context(|| format!("binding {}", http.listen))?;
    let admin = TcpListener::bind(http.admin_listen)
        .await
        .with_context(|| format!("binding {}", http.admin_listen))?;
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
        Verb::Ingress(args) => {
            init_tracing("info");
            let url = args
                .nats
                .nats_url
                .clone()
                .context("--nats-url (or HOLDPOINT_NATS_URL) is required")?;
            let bus = connect_bus(&url, "holdpoint-ingress", args.nats.topology()).await?;
            let shutdown = shutdown_on_signals();
            let state = AppState::new(bus, args.http.config().await?).await?;
            let api = TcpListener::bind(args.http.listen).await?;
            let socket_task = args.http.auth.socket.clone().map(|path| {
                tokio::spawn(holdpoint_ingress::run_unix(
                    state.clone(),
                    path,
                    shutdown.clone(),
                ))
            });
            let admin = TcpListener::bind(args.http.admin_listen).await?;
            println!(
                "holdpoint ingress: api http://{} admin http://{}",
                api.local_addr()?,
                admin.local_addr()?
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
            Ok(())
        }
        Verb::Worker(args) => {
            init_tracing("info");
            let url = args
                .nats
                .nats_url
                .clone()
                .context("--nats-url (or HOLDPOINT_NATS_URL) is required")?;
            let bus = connect_bus(&url, "holdpoint-worker", args.nats.topology()).await?;
            println!("holdpoint worker: pulling commands from {url}");
            holdpoint_worker::run(bus, args.worker.config(), shutdown_on_signals()).await
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

async fn up(args: UpArgs) -> anyhow::Result<()> {
    init_tracing("info");
    let shutdown = shutdown_on_signals();
    let (url, local) = match &args.nats.nats_url {
        Some(url) => (url.clone(), None),
        None => {
            let nats = localnats::LocalNats::start(&args.store, args.nats_port).await?;
            println!("nats-server: {} (store {})", nats.url, nats.store.display());
            (nats.url.clone(), Some(nats))
        }
    };
    let bus = connect_bus(&url, "holdpoint-up", args.nats.topology()).await?;
    let services = start_services(bus, &args.http, &args.worker, 1, shutdown.clone()).await?;
    println!("holdpoint api:   http://{}", services.api);
    println!("holdpoint admin: http://{}/readyz", services.admin);
    if let Some(p) = &args.http.auth.socket {
        println!("holdpoint socket: {}", p.display());
    }
    if args.http.auth.dev_jwt {
        println!("identity: development JWTs (holdpoint dev-token --org ORG --person NAME)");
    }
    if args.http.auth.insecure_dev_identity {
        println!("identity: INSECURE development headers X-Holdpoint-Org / X-Holdpoint-Person");
    }
    println!("press Ctrl-C to stop");
    info!("up");
    let result = services.wait().await;
    if let Some(nats) = local {
        nats.stop().await;
    }
    result
}

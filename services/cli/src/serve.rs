//! Serving: the long-running verbs and what they share.
//!
//! - [`up`]: everything in one process ([`start_services`]: workers, the webhook
//!   notifier and the ingress), on a local nats-server unless `nats.url` is set.
//! - [`ingress`], [`worker`], [`notifier`]: one service each against an existing
//!   NATS.
//! - The ingress, in `up` and in `ingress` alike, runs through
//!   [`holdpoint_ingress::serve`] on the [`Listeners`] [`bind`] opens, the same
//!   function the integration tests (`tests/src/app.rs`) start in-process.
//! - [`shutdown_on_signals`]: the one shutdown token, cancelled on SIGINT or
//!   SIGTERM; every service stops accepting, finishes what is in flight, and
//!   returns.
//! - [`init_service_tracing`], [`connect_bus`]: logs and the NATS connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use holdpoint_bus::{Bus, Topology, redact_url};
use holdpoint_ingress::{AppState, Listeners};
use holdpoint_telemetry::{LogFormat, LogOutput, Metrics};
use holdpoint_worker::Failpoint;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::args::UpArgs;
use crate::config::{Config, Service};
use crate::localnats;

/// Installs the tracing subscriber for the verbs that are not services: text,
/// `RUST_LOG` overriding `default`.
pub fn init_tracing(default: &str) {
    let _ = holdpoint_telemetry::logs::init(LogFormat::Text, LogOutput::Stderr, default, None);
}

/// A service's start-up line (where it listens): on stdout for the person who
/// started it, or, when the logs go to stdout themselves (`log.output = stdout`,
/// the container image), as an `info` log event, so stdout stays one log format
/// (JSON lines with `log.format = json`).
pub fn announce(cfg: &Config, line: &str) {
    if cfg.log.output == LogOutput::Stdout {
        info!("{line}");
    } else {
        println!("{line}");
    }
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
    holdpoint_telemetry::logs::init(cfg.log.format, cfg.log.output, &cfg.log.level, export)?;
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

/// Connects and sets the topology up. A transient failure of the setup (no
/// JetStream answer in time while a cluster elects its leaders, a node out of
/// reach) is logged and tried again ([`SETUP_BACKOFF`]) until it succeeds: a service
/// started during an election waits for the cluster instead of exiting.
///
/// # Errors
/// When the URL is bad or NATS is too old (permanent failures).
pub async fn connect_bus(url: &str, name: &str, topo: Topology) -> anyhow::Result<Bus> {
    let client = holdpoint_bus::connect(url, name).await?;
    let mut attempt = 0;
    loop {
        match Bus::setup(client.clone(), topo.clone()).await {
            Ok(bus) => return Ok(bus),
            Err(e) if e.kind() == holdpoint_bus::ErrorKind::Transient => {
                attempt += 1;
                let pause = SETUP_BACKOFF.delay(attempt);
                tracing::warn!(error = %e, attempt, ?pause, "NATS setup failed; trying again");
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The pause between setup attempts in [`connect_bus`]: 500 ms, doubling, at most 5 s.
pub const SETUP_BACKOFF: holdpoint_bus::backoff::Backoff = holdpoint_bus::backoff::Backoff {
    first: Duration::from_millis(500),
    max: Duration::from_secs(5),
};

/// Binds the ingress's listeners for `service`: `http.listen`, the admin listener
/// ([`Config::admin_listen`]) and the Unix socket's path (`socket.path`, bound when
/// served).
///
/// # Errors
/// When an address cannot be bound; the message names the key.
pub async fn bind(cfg: &Config, service: Service) -> anyhow::Result<Listeners> {
    let api = TcpListener::bind(cfg.http.listen)
        .await
        .with_context(|| format!("http.listen: binding {}", cfg.http.listen))?;
    let admin_addr = cfg
        .admin_listen(service)
        .context("admin.listen is not set")?;
    let admin = TcpListener::bind(admin_addr)
        .await
        .with_context(|| format!("admin.listen: binding {admin_addr}"))?;
    Ok(Listeners {
        api,
        admin: Some(admin),
        socket: cfg.socket.path.clone(),
    })
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
/// sharing one set of metrics (served on the admin listener): `holdpoint up` and
/// `holdpoint demo`.
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
    let listeners = bind(cfg, Service::Up).await?;
    let (api, admin) = addresses(&listeners)?;
    tasks.spawn(holdpoint_ingress::serve(state, listeners, shutdown));
    Ok(Services { api, admin, tasks })
}

/// The API's and the admin listener's bound addresses.
fn addresses(l: &Listeners) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let admin = l.admin.as_ref().context("admin.listen is not set")?;
    Ok((l.api.local_addr()?, admin.local_addr()?))
}

/// `holdpoint up` (see the module docs): prints where everything listens and
/// serves until SIGTERM/SIGINT, then stops its own nats-server, if any.
///
/// # Errors
/// An invalid configuration, or a service's failure.
pub async fn up(args: UpArgs) -> anyhow::Result<()> {
    let cfg = args.config(Service::Up)?;
    init_service_tracing(&cfg, "holdpoint")?;
    let shutdown = shutdown_on_signals();
    let (url, local) = match &cfg.nats.url {
        Some(url) => (url.clone(), None),
        None => {
            let nats = localnats::LocalNats::start(&cfg.local.store, cfg.local.nats_port).await?;
            announce(
                &cfg,
                &format!("nats-server: {} (store {})", nats.url, nats.store.display()),
            );
            (nats.url.clone(), Some(nats))
        }
    };
    let bus = connect_bus(&url, "holdpoint-up", cfg.topology()).await?;
    let services = start_services(bus, &cfg, args.worker.failpoint, 1, shutdown.clone()).await?;
    announce(&cfg, &format!("holdpoint nats:  {}", redact_url(&url)));
    announce(&cfg, &format!("holdpoint api:   http://{}", services.api));
    announce(
        &cfg,
        &format!("holdpoint admin: http://{}/readyz", services.admin),
    );
    if let Some(p) = &cfg.socket.path {
        announce(&cfg, &format!("holdpoint socket: {}", p.display()));
    }
    if cfg.auth.dev_jwt {
        announce(
            &cfg,
            "identity: development JWTs (holdpoint dev-token --org ORG --person NAME)",
        );
        // Printed for the person at the terminal only, never logged: the token is in
        // the fragment, which the browser keeps to itself. On stderr when stdout
        // carries the logs.
        let link = format!(
            "inbox: {} ({} of {})",
            args.inbox.link(services.api, &cfg.auth.org_claim)?,
            args.inbox.inbox_person,
            args.inbox.inbox_org
        );
        if cfg.log.output == LogOutput::Stdout {
            eprintln!("{link}");
        } else {
            println!("{link}");
        }
    }
    if cfg.auth.insecure_dev_identity {
        announce(
            &cfg,
            "identity: INSECURE development headers X-Holdpoint-Org / X-Holdpoint-Person",
        );
    }
    announce(&cfg, "press Ctrl-C to stop");
    info!("up");
    let mut local = local;
    let wait = services.wait();
    tokio::pin!(wait);
    // `up` owns its nats-server: when it exits by itself, nothing can answer any
    // more, so `up` stops too (with an error a supervisor sees) rather than serve
    // 503s and a /readyz that never recovers.
    let nats_exited = async {
        match local.as_mut() {
            Some(nats) => Some((nats.exited().await, nats.log())),
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        r = &mut wait => r,
        Some((status, log)) = nats_exited => {
            tracing::error!(%status, log = %log.display(), "the local nats-server exited; stopping");
            shutdown.cancel();
            let _ = wait.await;
            Err(anyhow::anyhow!(
                "the local nats-server exited ({status}); see {}",
                log.display()
            ))
        }
    };
    if let Some(nats) = local {
        nats.stop().await;
    }
    holdpoint_telemetry::otlp::shutdown();
    result
}

/// `holdpoint ingress`: serves the API (TCP, and the Unix socket if configured)
/// and the admin listener until SIGTERM/SIGINT, then stops accepting, finishes the
/// requests in flight, and returns.
///
/// # Errors
/// When NATS or a listener cannot be set up, or serving fails.
pub async fn ingress(cfg: Config) -> anyhow::Result<()> {
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
    let listeners = bind(&cfg, Service::Ingress).await?;
    let (api, admin) = addresses(&listeners)?;
    announce(
        &cfg,
        &format!(
            "holdpoint ingress: api http://{api} admin http://{admin} (NATS {})",
            redact_url(&url)
        ),
    );
    holdpoint_ingress::serve(state, listeners, shutdown).await?;
    let _ = tokio::time::timeout(Duration::from_secs(5), bus.client.flush()).await;
    info!("ingress stopped");
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

/// `holdpoint worker`: pulls commands until SIGTERM/SIGINT, then stops pulling,
/// finishes and acks the commands in flight, and returns. Serves the admin
/// endpoints when `admin.listen` is set.
///
/// # Errors
/// When NATS or the admin listener cannot be set up, or the worker fails.
pub async fn worker(cfg: Config, failpoint: Option<Failpoint>) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-worker")?;
    let shutdown = shutdown_on_signals();
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let bus = connect_bus(&url, "holdpoint-worker", cfg.topology()).await?;
    let metrics = Arc::new(Metrics::new());
    let admin = serve_admin(&cfg, Service::Worker, &bus, &metrics, &shutdown).await?;
    announce(
        &cfg,
        &format!(
            "holdpoint worker: pulling commands from {}",
            redact_url(&url)
        ),
    );
    holdpoint_worker::run(bus, cfg.worker_config(metrics, failpoint), shutdown).await?;
    if let Some(t) = admin {
        t.await??;
    }
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

/// `holdpoint setup`: creates or updates every stream and bucket of the configured
/// topology (`Bus::setup`), and the notifier's durable consumer, then returns.
///
/// # Errors
/// When NATS is unreachable or refuses (a user without the JetStream API).
pub async fn setup(cfg: Config) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-setup")?;
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let topo = cfg.topology();
    let bus = connect_bus(&url, "holdpoint-setup", topo.clone()).await?;
    bus.notifier_consumer().await?;
    let _ = tokio::time::timeout(Duration::from_secs(5), bus.client.flush()).await;
    println!(
        "holdpoint setup: {} streams at {} replica(s), {} partitions, on {}",
        topo.stream_names().len(),
        topo.replicas,
        topo.partitions,
        redact_url(&url)
    );
    Ok(())
}

/// `holdpoint notifier`: delivers webhooks until SIGTERM/SIGINT, then lets the
/// attempts in flight finish (bounded by the request timeout) and returns. Serves
/// the admin endpoints (`/metrics` with the per-endpoint webhook metrics) when
/// `admin.listen` is set.
///
/// # Errors
/// When NATS or the admin listener cannot be set up, or the notifier fails.
pub async fn notifier(cfg: Config) -> anyhow::Result<()> {
    init_service_tracing(&cfg, "holdpoint-notifier")?;
    let shutdown = shutdown_on_signals();
    let url = cfg.nats.url.clone().context("nats.url is required")?;
    let bus = connect_bus(&url, "holdpoint-notifier", cfg.topology()).await?;
    let metrics = Arc::new(Metrics::new());
    let admin = serve_admin(&cfg, Service::Notifier, &bus, &metrics, &shutdown).await?;
    announce(
        &cfg,
        &format!(
            "holdpoint notifier: delivering webhooks from {}",
            redact_url(&url)
        ),
    );
    holdpoint_notifier::run(
        bus,
        cfg.notifier_config(Service::Notifier, metrics),
        shutdown,
    )
    .await?;
    if let Some(t) = admin {
        t.await??;
    }
    holdpoint_telemetry::otlp::shutdown();
    Ok(())
}

/// The admin endpoints of a worker or notifier, when `admin.listen` is set
/// (announced as `holdpoint <service>: admin http://…`).
async fn serve_admin(
    cfg: &Config,
    service: Service,
    bus: &Bus,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<JoinHandle<anyhow::Result<()>>>> {
    let Some(addr) = cfg.admin_listen(service) else {
        return Ok(None);
    };
    let admin = TcpListener::bind(addr)
        .await
        .with_context(|| format!("admin.listen: binding {addr}"))?;
    let name = match service {
        Service::Notifier => "notifier",
        _ => "worker",
    };
    announce(
        cfg,
        &format!("holdpoint {name}: admin http://{}", admin.local_addr()?),
    );
    let admin_state = holdpoint_ingress::admin::Admin {
        bus: Arc::new(bus.clone()),
        metrics: metrics.clone(),
    };
    Ok(Some(tokio::spawn(holdpoint_ingress::admin::serve(
        admin_state,
        admin,
        shutdown.clone(),
    ))))
}

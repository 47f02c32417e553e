//! The ingress's settings ([`IngressConfig`]) and the state every handler shares
//! ([`AppState`]): the bus, the metrics, how callers are identified and the
//! per-caller limits, nothing about routes or handlers.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_telemetry::Metrics;
use tokio_util::sync::CancellationToken;

use crate::identity::IdentityMode;

/// The ingress's settings: listeners' limits, timeouts and identity (built from
/// the `holdpoint` configuration, `services/cli/src/config.rs`).
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// How long a request waits for the worker's outcome before answering 503.
    pub outcome_timeout: Duration,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// How callers are identified.
    pub identity: IdentityMode,
    /// The public base URL (`https://holdpoint.example.com`) the agent card
    /// advertises; `None` derives it from each request's `Host` header.
    pub public_url: Option<String>,
    /// Where requests are counted (shared with the worker in `holdpoint up`).
    pub metrics: Arc<Metrics>,
    /// Most event streams one caller (organisation and person) may have open at
    /// once: `GET /v1/events`, `SubscribeToTask` and `SendStreamingMessage`
    /// together; one more is `429 NRY-0017` (see [`crate::limits::StreamCounts`]).
    pub max_streams_per_caller: usize,
    /// Most API requests in flight at once (the API on TCP and on the Unix socket
    /// together); one more is refused at once with `503 NRY-0050` and
    /// `Retry-After: 1` (see [`crate::routes`]). Bounds the memory of requests
    /// waiting for outcomes (about 50 KiB each). At least 1.
    pub max_in_flight: usize,
    /// Compatibility switch, off by default: read an A2A request without
    /// `A2A-Version` as 1.0. Off, it is read as 0.3, as the A2A v1.0 specification
    /// asks, and refused with `VersionNotSupportedError` (-32009); see
    /// [`crate::a2a::negotiate`].
    pub a2a_missing_version_is_1_0: bool,
    /// Local mode (`holdpoint up` on one machine): webhook URLs may be plain `http`
    /// to a loopback host and name private addresses
    /// (`holdpoint_domain::webhook::check_url`). Off by default.
    pub webhooks_local_mode: bool,
}

/// Default of [`IngressConfig::max_streams_per_caller`].
pub const DEFAULT_MAX_STREAMS_PER_CALLER: usize = 16;

/// Default of [`IngressConfig::max_in_flight`]: 256 requests waiting take about
/// 12 MiB over an idle ingress's 20-25 MiB (BENCHMARKS.md).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            outcome_timeout: Duration::from_secs(5),
            body_limit: 64 * 1024,
            identity: IdentityMode::default(),
            public_url: None,
            metrics: Arc::new(Metrics::new()),
            max_streams_per_caller: DEFAULT_MAX_STREAMS_PER_CALLER,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            a2a_missing_version_is_1_0: false,
            webhooks_local_mode: false,
        }
    }
}

/// Shared state of the handlers.
///
/// Cheap to clone (a few reference counts, no allocation), and it must stay so:
/// axum clones a route's service, state included, for every request, at every
/// `from_fn` layer, and each clone lives as long as the request. With the [`Bus`]
/// held by value (seven bucket handles, each with its stream's configuration:
/// about 11 KiB and hundreds of small allocations) that cost about 1 MiB of heap
/// per request waiting for its outcome (BENCHMARKS.md "the ingress per waiting
/// request").
#[derive(Clone)]
pub struct AppState {
    /// The NATS boundary (streams, buckets, subjects).
    pub bus: Arc<Bus>,
    /// The ingress's settings.
    pub cfg: Arc<IngressConfig>,
    /// Publishes commands and waits, bounded, for the worker's outcomes.
    pub outcomes: Arc<holdpoint_bus::outcome::Waiter>,
    /// Cancelled when the server shuts down: ends every open event stream, so the
    /// graceful shutdown does not wait for clients that never hang up.
    pub streams: CancellationToken,
    /// The event streams open now, per caller.
    pub stream_counts: Arc<crate::limits::StreamCounts>,
    /// The permits of the requests in flight: [`IngressConfig::max_in_flight`] of
    /// them, shared by every router built from this state (TCP and Unix socket).
    pub in_flight: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// Builds the state and starts the outcome listener.
    ///
    /// # Errors
    /// When the reply subscription cannot be made.
    pub async fn new(bus: Bus, cfg: IngressConfig) -> anyhow::Result<Self> {
        let outcomes = Arc::new(holdpoint_bus::outcome::Waiter::start(&bus.client).await?);
        if let Some(verifier) = &cfg.identity.jwt {
            cfg.metrics.watch_jwks(verifier.clone());
        }
        let in_flight = Arc::new(tokio::sync::Semaphore::new(cfg.max_in_flight.max(1)));
        Ok(AppState {
            bus: Arc::new(bus),
            cfg: Arc::new(cfg),
            outcomes,
            streams: CancellationToken::new(),
            stream_counts: Arc::default(),
            in_flight,
        })
    }

    /// What the admin endpoints need: the bus and the metrics.
    pub fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin {
            bus: self.bus.clone(),
            metrics: self.cfg.metrics.clone(),
        }
    }
}

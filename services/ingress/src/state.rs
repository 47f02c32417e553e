//! The ingress's settings ([`IngressConfig`]) and the state every handler shares
//! ([`AppState`]). A leaf: it knows the bus, the metrics and how callers are
//! identified, nothing about routes or handlers.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_telemetry::Metrics;
use tokio_util::sync::CancellationToken;

use crate::identity::IdentityMode;

/// Ingress settings.
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
}

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            outcome_timeout: Duration::from_secs(5),
            body_limit: 64 * 1024,
            identity: IdentityMode::default(),
            public_url: None,
            metrics: Arc::new(Metrics::new()),
        }
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// NATS handle.
    pub bus: Bus,
    /// Settings.
    pub cfg: Arc<IngressConfig>,
    /// Outcome waiter.
    pub outcomes: Arc<holdpoint_bus::outcome::Waiter>,
    /// Cancelled when the server shuts down: ends every open event stream, so the
    /// graceful shutdown does not wait for clients that never hang up.
    pub streams: CancellationToken,
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
        Ok(AppState {
            bus,
            cfg: Arc::new(cfg),
            outcomes,
            streams: CancellationToken::new(),
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

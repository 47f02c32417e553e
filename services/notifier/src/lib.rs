//! The webhook notifier (`holdpoint notifier`, and part of `holdpoint up`).
//!
//! - [`run`]: the process: the [`router`] and one [`endpoint`] loop per enabled
//!   endpoint, kept in step with the `HP_WEBHOOKS` bucket every
//!   [`NotifierConfig::reconcile`].
//! - [`router`]: reads `HP_EVENTS` through the durable `HP_NOTIFIER` and queues each
//!   event for every endpoint of its organisation that wants it.
//! - [`endpoint`]: one endpoint's queue: send, record the attempt, ack, or NAK with
//!   the retry schedule's delay; disables the endpoint after too many failures.
//! - [`send`]: the HTTP request: Standard Webhooks signature, no redirects, no
//!   proxy, no credentials, addresses checked after DNS resolution, a timeout and a
//!   response cap.
//!
//! Every NATS step goes through `holdpoint_bus::webhooks`, which describes how a
//! delivery survives a notifier crash.

pub mod endpoint;
pub mod router;
pub mod send;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_domain::WebhookId;
use holdpoint_telemetry::Metrics;
use holdpoint_telemetry::metrics::WebhookLabels;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The notifier's settings.
#[derive(Debug, Clone)]
pub struct NotifierConfig {
    /// Local mode (`holdpoint up`): loopback and private addresses may be called.
    /// Off, a host that resolves to any such address is refused.
    pub local_mode: bool,
    /// Timeout of one request, connection included.
    pub timeout: Duration,
    /// Delay before attempt `n + 1` after failed attempt `n` (the `n`-th entry).
    /// After the last entry's attempt fails, the event is given up for that
    /// endpoint.
    pub schedule: Vec<Duration>,
    /// Failed attempts in a row (across events) after which the endpoint is
    /// disabled and a `webhook-disabled` event is published.
    pub disable_after: u32,
    /// Most bytes of a response body read; the rest is not read.
    pub body_cap: usize,
    /// How often the endpoint loops are brought in step with the bucket.
    pub reconcile: Duration,
    /// Where attempts, latency and backlog are counted.
    pub metrics: Arc<Metrics>,
}

/// The default retry schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about
/// 27.5 hours over 8 attempts).
pub fn default_schedule() -> Vec<Duration> {
    [5, 300, 1800, 7200, 18000, 36000, 36000]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

impl Default for NotifierConfig {
    fn default() -> Self {
        NotifierConfig {
            local_mode: false,
            timeout: Duration::from_secs(10),
            schedule: default_schedule(),
            disable_after: 40,
            body_cap: 64 * 1024,
            reconcile: Duration::from_millis(500),
            metrics: Arc::new(Metrics::new()),
        }
    }
}

/// Runs the notifier until `shutdown`: the router and one loop per enabled
/// endpoint. In-flight attempts finish (bounded by the timeout) before it returns.
///
/// # Errors
/// When the HTTP client cannot be built or the router's consumer cannot be made.
pub async fn run(bus: Bus, cfg: NotifierConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let cfg = Arc::new(cfg);
    let client = send::client(&cfg)?;
    let mut tasks = JoinSet::new();
    tasks.spawn(router::run(bus.clone(), shutdown.clone()));
    let mut loops: HashMap<WebhookId, CancellationToken> = HashMap::new();
    let mut tick = tokio::time::interval(cfg.reconcile);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backlog_at = tokio::time::Instant::now();
    info!("notifier running");
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let endpoints = match bus.all_webhooks().await {
            Ok((e, _)) => e,
            Err(e) => {
                warn!(error = %e, "cannot read the webhook endpoints; retrying");
                continue;
            }
        };
        let enabled: HashMap<WebhookId, _> = endpoints
            .into_iter()
            .filter(|e| e.disabled_at.is_none())
            .map(|e| (e.id.clone(), e))
            .collect();
        loops.retain(|id, token| {
            let keep = enabled.contains_key(id);
            if !keep {
                token.cancel();
            }
            keep
        });
        for (id, e) in &enabled {
            if !loops.contains_key(id) {
                let token = shutdown.child_token();
                loops.insert(id.clone(), token.clone());
                tasks.spawn(endpoint::run(
                    bus.clone(),
                    cfg.clone(),
                    client.clone(),
                    e.clone(),
                    token,
                ));
            }
        }
        if backlog_at.elapsed() >= Duration::from_secs(2) {
            backlog_at = tokio::time::Instant::now();
            for e in enabled.values() {
                if let Ok(n) = bus.webhook_backlog(e).await {
                    cfg.metrics
                        .webhook_backlog
                        .get_or_create(&WebhookLabels {
                            org: e.org.as_str().to_owned(),
                            webhook: e.id.as_str().to_owned(),
                        })
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                }
            }
        }
        // Reap loops that ended by themselves (endpoint gone).
        while let Some(r) = tasks.try_join_next() {
            if let Err(e) = r {
                warn!(error = %e, "a notifier task failed");
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    info!("notifier stopped");
    Ok(())
}

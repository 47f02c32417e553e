//! From the events stream to the endpoints' queues.
//!
//! Reads `HP_EVENTS` through the durable `HP_NOTIFIER` (shared by every notifier)
//! and, for each event, queues it for every enabled endpoint of the event's own
//! organisation that wants its type ([`holdpoint_bus::Bus::enqueue_delivery`]);
//! then acks the event. An endpoint registered before an event was stored sees
//! that event: the router reloads the endpoints whenever the bucket moved on since
//! it last read it, before routing, and in any case once its view is
//! [`MAX_VIEW_AGE`] old, so no one read lasts (the endpoints are read from the
//! bucket's leader, [`Bus::all_webhooks`]; a view read from a replica still catching
//! up after a partition once stopped every delivery for good: RELIABILITY.md,
//! "Partitions").

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use holdpoint_bus::Bus;
use holdpoint_bus::backoff::Backoff;
use holdpoint_bus::webhooks::AckKind;
use holdpoint_domain::webhook::WebhookEndpoint;
use holdpoint_domain::{Event, OrgId};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How long the router routes on one read of the endpoints when the bucket did
/// not move on.
pub const MAX_VIEW_AGE: Duration = Duration::from_secs(5);

/// The endpoints as last read, by organisation, the bucket sequence read at, and
/// when.
#[derive(Default)]
struct Endpoints {
    by_org: HashMap<OrgId, Vec<WebhookEndpoint>>,
    sequence: Option<u64>,
    read_at: Option<tokio::time::Instant>,
}

impl Endpoints {
    /// Reloads when the bucket moved on since the last read, or that read is
    /// [`MAX_VIEW_AGE`] old.
    async fn refresh(&mut self, bus: &Bus) -> Result<(), holdpoint_bus::BusError> {
        let fresh = self.read_at.is_some_and(|t| t.elapsed() < MAX_VIEW_AGE);
        if fresh && self.sequence == Some(bus.webhooks_sequence().await?) {
            return Ok(());
        }
        let (all, sequence) = bus.all_webhooks().await?;
        self.by_org.clear();
        for e in all {
            self.by_org.entry(e.org.clone()).or_default().push(e);
        }
        self.sequence = Some(sequence);
        self.read_at = Some(tokio::time::Instant::now());
        Ok(())
    }
}

/// Routes events until `shutdown`; re-makes its consumer after errors.
pub async fn run(bus: Bus, shutdown: CancellationToken) {
    let mut endpoints = Endpoints::default();
    while !shutdown.is_cancelled() {
        let mut messages = match bus.notifier_events().await {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, "notifier cannot read the events stream yet");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(Backoff::CONSUMER_NOT_READY.delay(1)) => continue,
                }
            }
        };
        pull(&bus, &mut endpoints, &mut messages, &shutdown).await;
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Backoff::CONSUMER_ENDED.delay(1)) => {}
        }
    }
}

/// Most events routed together: the ones already pulled when the router looks,
/// up to this many, share one read of the endpoints and have their queue
/// publishes and acks in flight together (one event at a time, each with its own
/// PubAck and ack round trips, fell behind the load on a loaded machine:
/// RELIABILITY.md, "Partitions").
pub const MAX_ROUTED_TOGETHER: usize = 64;

/// Routes what `messages` yields until it errs or ends (or `shutdown`).
async fn pull(
    bus: &Bus,
    endpoints: &mut Endpoints,
    messages: &mut holdpoint_bus::webhooks::PullStream,
    shutdown: &CancellationToken,
) {
    let mut chunks = messages.ready_chunks(MAX_ROUTED_TOGETHER);
    loop {
        let chunk = tokio::select! {
            () = shutdown.cancelled() => return,
            c = chunks.next() => c,
        };
        let Some(chunk) = chunk else { break };
        let mut pulled = Vec::with_capacity(chunk.len());
        let mut failed = false;
        for m in chunk {
            match m {
                Ok(m) => pulled.push(m),
                Err(e) => {
                    // A missed heartbeat (the pull request lost with a leader or a
                    // link), no responders, a deleted consumer: pull afresh from a
                    // re-made consumer rather than wait on this stream (what was
                    // pulled before the error is still routed).
                    warn!(error = %e, "events consumer error; pulling afresh");
                    failed = true;
                }
            }
        }
        route_all(bus, endpoints, pulled).await;
        if failed {
            break;
        }
    }
}

/// Routes `pulled` (events in stream order): one read of the endpoints, then every
/// event's queue publishes in flight together; each event is acked once all of
/// its own publishes are confirmed, or NAKed to come again.
async fn route_all(
    bus: &Bus,
    endpoints: &mut Endpoints,
    pulled: Vec<holdpoint_bus::webhooks::Message>,
) {
    if pulled.is_empty() {
        return;
    }
    if let Err(e) = endpoints.refresh(bus).await {
        warn!(error = %e, "cannot read the webhook endpoints; the events come again");
        futures::future::join_all(pulled.iter().map(nak)).await;
        return;
    }
    let endpoints = &*endpoints;
    let outcomes = futures::future::join_all(pulled.iter().map(|msg| async move {
        let event: Event = match serde_json::from_slice(&msg.payload) {
            Ok(e) => e,
            Err(e) => {
                warn!(subject = %msg.subject, error = %e, "an event that does not decode is not delivered to webhooks");
                let _ = msg.ack_with(AckKind::Term).await;
                return;
            }
        };
        match route(bus, endpoints, &event, &msg.payload).await {
            Ok(()) => {
                if let Err(e) = msg.double_ack().await {
                    debug!(error = %e, "event ack lost; it will be routed again (deduplicated)");
                }
            }
            Err(e) => {
                warn!(event = %event.id, error = %e, "cannot queue an event for webhooks; retrying");
                nak(msg).await;
            }
        }
    }));
    outcomes.await;
}

async fn nak(msg: &holdpoint_bus::webhooks::Message) {
    let _ = msg
        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
        .await;
}

/// Queues `event` for every endpoint of its organisation that wants it, the
/// publishes in flight together.
async fn route(
    bus: &Bus,
    endpoints: &Endpoints,
    event: &Event,
    payload: &bytes::Bytes,
) -> Result<(), holdpoint_bus::BusError> {
    let Some(list) = endpoints.by_org.get(&event.orgid) else {
        return Ok(());
    };
    let queued = list
        .iter()
        // The tenant boundary: an endpoint only ever gets its own organisation's events.
        .filter(|e| e.org == event.orgid && e.disabled_at.is_none() && e.wants(event.name()))
        .map(|e| bus.enqueue_delivery(e, &event.id, payload.clone()));
    for r in futures::future::join_all(queued).await {
        r?;
    }
    Ok(())
}

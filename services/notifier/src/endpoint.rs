//! One endpoint's queue (`HP_WHK_<webhookId>`, one message in flight).
//!
//! For each queued CloudEvent: skip it when it was already delivered (a marker
//! from an earlier attempt whose ack was lost), else send it ([`crate::send`]),
//! record the attempt, and then
//!
//! - on a 2xx: write the delivered marker, then ack (double ack);
//! - on anything else: count a failure on the endpoint (disabling it with a
//!   `webhook-disabled` event at [`NotifierConfig::disable_after`] in a row), and NAK
//!   with the schedule's delay for this attempt, or terminate the message when the
//!   schedule is exhausted (the event is given up for this endpoint).
//!
//! The delay is JetStream's (`NAK` with delay), not a timer here: a notifier that
//! stops loses no retry.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use holdpoint_bus::backoff::Backoff;
use holdpoint_bus::webhooks::{AckKind, Message};
use holdpoint_bus::{Bus, BusError, Cas};
use holdpoint_domain::webhook::{AttemptResult, WebhookAttempt, WebhookEndpoint};
use holdpoint_domain::{Event, EventData};
use holdpoint_telemetry::metrics::{WebhookAttemptLabels, WebhookLabels};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::NotifierConfig;
use crate::send;

/// Delivers endpoint `e`'s queue until `token` is cancelled (the endpoint was
/// removed or disabled, or the notifier stops). An attempt in flight finishes.
pub async fn run(
    bus: Bus,
    cfg: Arc<NotifierConfig>,
    client: reqwest::Client,
    e: WebhookEndpoint,
    token: CancellationToken,
) {
    while !token.is_cancelled() {
        let consumer = match bus.webhook_consumer(&e).await {
            Ok(c) => c,
            Err(err) => {
                debug!(webhook = %e.id.as_str(), error = %err, "endpoint consumer not ready");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(Backoff::CONSUMER_NOT_READY.delay(1)) => continue,
                }
            }
        };
        let mut messages = match holdpoint_bus::webhooks::pull_messages(&consumer).await {
            Ok(m) => m,
            Err(err) => {
                debug!(webhook = %e.id.as_str(), error = %err, "endpoint consumer not ready");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(Backoff::CONSUMER_NOT_READY.delay(1)) => continue,
                }
            }
        };
        loop {
            let msg = tokio::select! {
                () = token.cancelled() => return,
                m = messages.next() => m,
            };
            match msg {
                Some(Ok(m)) => handle(&bus, &cfg, &client, &e, m).await,
                Some(Err(err)) => {
                    // A lost connection, a missed heartbeat, or the consumer deleted
                    // with its endpoint: make it again after a pause (or stop).
                    debug!(webhook = %e.id.as_str(), error = %err, "endpoint consumer error");
                    break;
                }
                None => break,
            }
        }
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(Backoff::CONSUMER_ENDED.delay(1)) => {}
        }
    }
}

async fn nak(msg: &Message, delay: Duration) {
    if let Err(e) = msg.ack_with(AckKind::Nak(Some(delay))).await {
        debug!(error = %e, "nak lost; redelivered after ack_wait");
    }
}

async fn handle(
    bus: &Bus,
    cfg: &NotifierConfig,
    client: &reqwest::Client,
    e: &WebhookEndpoint,
    msg: Message,
) {
    let attempt = msg
        .info()
        .map(|i| u32::try_from(i.delivered).unwrap_or(u32::MAX))
        .unwrap_or(1)
        .max(1);
    let event: Event = match serde_json::from_slice(&msg.payload) {
        Ok(ev) => ev,
        Err(err) => {
            warn!(webhook = %e.id.as_str(), error = %err, "a queued delivery does not decode; dropped");
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    // The endpoint as it is now and the delivered marker, read together (each a
    // round trip; one delivery at a time per endpoint makes every trip count).
    let (current, delivered) = tokio::join!(
        bus.load_webhook(&e.org, &e.id),
        bus.delivered(&e.org, &e.id, &event.id)
    );
    let current = match current {
        Ok(l) => l,
        Err(err) => {
            debug!(error = %err, "cannot load the endpoint; retrying");
            return nak(&msg, Duration::from_secs(1)).await;
        }
    };
    let Some(current) = current.value else {
        // Removed (its queue is purged and its consumer deleted with it), or read
        // from a replica that does not have it yet: kept, never dropped on one read.
        return nak(&msg, Duration::from_secs(5)).await;
    };
    if current.disabled_at.is_some() || event.orgid != current.org {
        // Disabled: kept queued for when it is enabled again.
        return nak(&msg, Duration::from_secs(5)).await;
    }
    match delivered {
        Ok(true) => {
            let _ = msg.double_ack().await;
            return;
        }
        Ok(false) => {}
        Err(err) => {
            debug!(error = %err, "cannot read the delivered marker; retrying");
            return nak(&msg, Duration::from_secs(1)).await;
        }
    }
    let at = OffsetDateTime::now_utc();
    let sent = send::send(client, cfg, &current, &event.id, msg.payload.clone()).await;
    let labels = WebhookLabels {
        org: e.org.as_str().to_owned(),
        webhook: e.id.as_str().to_owned(),
    };
    let result_label = match sent.result {
        AttemptResult::Delivered => "delivered",
        AttemptResult::Failed => "failed",
        AttemptResult::Refused => "refused",
    };
    cfg.metrics
        .webhook_attempts
        .get_or_create(&WebhookAttemptLabels {
            org: labels.org.clone(),
            webhook: labels.webhook.clone(),
            result: result_label,
        })
        .inc();
    #[allow(clippy::cast_precision_loss)]
    cfg.metrics
        .webhook_latency
        .get_or_create(&labels)
        .observe(sent.latency_ms as f64 / 1000.0);
    let record = WebhookAttempt {
        webhook_id: e.id.clone(),
        event_id: event.id.clone(),
        event_type: format!("dev.holdpoint.{}", event.name()),
        attempt,
        at,
        result: sent.result,
        status: sent.status,
        latency_ms: sent.latency_ms,
        error: sent.error.clone(),
        response_start: sent.response_start.clone(),
    };
    let delivered = sent.result == AttemptResult::Delivered;
    // The attempt and (after a 2xx) the delivered marker are written together; the
    // ack below waits for both, so a redelivery after a lost ack finds the marker.
    let (recorded, marked) = tokio::join!(bus.record_attempt(&e.org, &record), async {
        if delivered {
            bus.mark_delivered(&e.org, &e.id, &event.id).await
        } else {
            Ok(())
        }
    });
    if let Err(err) = recorded {
        warn!(webhook = %e.id.as_str(), error = %err, "attempt not recorded");
    }
    if delivered {
        if let Err(err) = marked {
            // Without the marker a redelivery would send it again: retry soon.
            warn!(error = %err, "delivered marker not written; the event may be sent again");
        }
        if let Err(err) = msg.double_ack().await {
            debug!(error = %err, "delivery ack lost; the marker stops a second send");
        }
        if current.consecutive_failures > 0 {
            update(bus, e, |w| {
                w.consecutive_failures = 0;
                true
            })
            .await;
        }
        return;
    }
    debug!(webhook = %e.id.as_str(), event = %event.id, attempt, status = ?sent.status, error = ?sent.error, "attempt failed");
    note_failure(bus, cfg, e).await;
    match cfg.schedule.get(attempt as usize - 1) {
        Some(delay) => nak(&msg, *delay).await,
        None => {
            info!(webhook = %e.id.as_str(), event = %event.id, attempt, "retries exhausted; event given up for this endpoint");
            let _ = msg.ack_with(AckKind::Term).await;
        }
    }
}

/// Counts a failed attempt; disables the endpoint (and publishes
/// `webhook-disabled`) when it reaches the limit.
async fn note_failure(bus: &Bus, cfg: &NotifierConfig, e: &WebhookEndpoint) {
    let limit = cfg.disable_after.max(1);
    let written = update(bus, e, |w| {
        w.consecutive_failures = w.consecutive_failures.saturating_add(1);
        if w.disabled_at.is_none() && w.consecutive_failures >= limit {
            w.disabled_at = Some(OffsetDateTime::now_utc());
        }
        true
    })
    .await;
    let Some((w, revision)) = written else { return };
    // Only the write that crossed the limit publishes; the event id is derived from
    // the record's revision, so a repeat of this publish is deduplicated.
    if w.disabled_at.is_some() && w.consecutive_failures == limit {
        let event = Event::new(
            &w.org,
            None,
            w.id.as_str(),
            &format!("disabled-{revision}"),
            OffsetDateTime::now_utc(),
            EventData::WebhookDisabled {
                webhook_id: w.id.clone(),
                url: w.url.clone(),
                consecutive_failures: w.consecutive_failures,
            },
        );
        let traceparent = format!(
            "00-{}-{}-01",
            uuid::Uuid::new_v4().simple(),
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        );
        let published: Result<(), BusError> =
            async { bus.store_event(&event, &traceparent).await }.await;
        match published {
            Ok(()) => {
                warn!(webhook = %w.id.as_str(), failures = w.consecutive_failures, "webhook endpoint disabled")
            }
            Err(err) => warn!(error = %err, "webhook disabled; its event was not published"),
        }
    }
}

/// Reads, changes and compare-and-sets endpoint `e` (a few tries on conflict).
/// Returns the written record and revision, or `None` when it is gone or NATS
/// failed.
async fn update(
    bus: &Bus,
    e: &WebhookEndpoint,
    change: impl Fn(&mut WebhookEndpoint) -> bool,
) -> Option<(WebhookEndpoint, u64)> {
    for _ in 0..5 {
        let loaded = bus.load_webhook(&e.org, &e.id).await.ok()?;
        let mut w = loaded.value?;
        if !change(&mut w) {
            return None;
        }
        match bus.write_webhook(&w, loaded.revision).await {
            Ok(Cas::Written(rev)) => return Some((w, rev)),
            Ok(Cas::Conflict) => continue,
            Err(err) => {
                debug!(error = %err, "endpoint update failed");
                return None;
            }
        }
    }
    None
}

//! Webhooks in NATS: endpoints (KV `HP_WEBHOOKS`), the per-endpoint delivery queues
//! (stream `HP_WEBHOOK_QUEUE`), the deliveries already made (KV
//! `HP_WEBHOOK_DELIVERED`), the attempts (stream `HP_WEBHOOK_ATTEMPTS`) and the
//! notifier's durable consumer of the events stream (`HP_NOTIFIER`).
//!
//! How an event reaches an endpoint, with nothing held only in a process:
//!
//! 1. The notifier reads `HP_EVENTS` through the durable `HP_NOTIFIER`; for each
//!    endpoint of the event's organisation that wants it, it publishes the
//!    CloudEvent to `hp.whk.<org>.<webhookId>` with `Nats-Msg-Id`
//!    `<webhookId>:<eventId>` ([`Bus::enqueue_delivery`]) and acks the event only
//!    after every PubAck. A crash before the ack re-reads the event; the duplicate
//!    window drops the second copy.
//! 2. Each endpoint has its own durable consumer `HP_WHK_<webhookId>` on its own
//!    subject, with one message in flight ([`Bus::webhook_consumer`]): a slow or
//!    failing endpoint holds only its own queue. A failed attempt is NAKed with the
//!    retry schedule's delay (JetStream redelivers it then); a notifier that dies
//!    mid-attempt leaves the message unacked and it is delivered again after
//!    [`Topology::webhook_ack_wait`](crate::Topology::webhook_ack_wait).
//! 3. After a 2xx the notifier writes a marker `<org>.<webhookId>.<digest of event
//!    id>` ([`Bus::mark_delivered`]) and then acks; a redelivered message whose
//!    marker exists is acked without sending, so an event counts as delivered once.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer;
use bytes::Bytes;
use futures::StreamExt as _;
use holdpoint_domain::webhook::{WebhookAttempt, WebhookEndpoint};
use holdpoint_domain::{OrgId, WebhookId};

use crate::records::{Bucket, Cas, Loaded};
use crate::{Bus, BusError, Topology};

/// How long a delivered marker is kept (longer than any retry schedule).
pub const DELIVERED_TTL: Duration = Duration::from_secs(8 * 24 * 3600);
/// How long attempts are kept.
pub const ATTEMPTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Attempts kept per endpoint (the oldest are dropped).
pub const ATTEMPTS_PER_ENDPOINT: i64 = 200;

/// A notifier's stream of pulled messages.
pub type PullStream = consumer::pull::Stream;

/// How often a notifier's pull request must show signs of life (a message or an
/// idle heartbeat) from the consumer's leader; two missed make the stream yield
/// a `missed idle heartbeat` error, and the notifier then pulls afresh.
pub const PULL_HEARTBEAT: Duration = Duration::from_secs(5);

/// The messages of `consumer`, pulled with [`PULL_HEARTBEAT`] and 30 s pull
/// requests: a pull request lost in a partition or a leader change shows as an
/// error within seconds instead of silence.
///
/// # Errors
/// Transient when JetStream does not answer.
pub async fn pull_messages(
    consumer: &consumer::PullConsumer,
) -> Result<consumer::pull::Stream, BusError> {
    consumer
        .stream()
        .expires(Duration::from_secs(30))
        .heartbeat(PULL_HEARTBEAT)
        .messages()
        .await
        .map_err(|e| BusError::transient("pull", e))
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Bytes, BusError> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| BusError::permanent("encode", e))
}

impl Bus {
    /// Loads endpoint `org/id`.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_webhook(
        &self,
        org: &OrgId,
        id: &WebhookId,
    ) -> Result<Loaded<WebhookEndpoint>, BusError> {
        self.load(Bucket::Webhooks, Topology::webhook_key(org, id))
            .await
    }

    /// Writes `e` if its key is still at `revision` (0: a new endpoint).
    ///
    /// # Errors
    /// Transient or permanent failures; a lost race is [`Cas::Conflict`].
    pub async fn write_webhook(&self, e: &WebhookEndpoint, revision: u64) -> Result<Cas, BusError> {
        self.cas(
            Bucket::Webhooks,
            &Topology::webhook_key(&e.org, &e.id),
            revision,
            encode(e)?,
        )
        .await
    }

    /// Every endpoint of `org`, oldest write first (reads only that organisation's
    /// keys).
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn list_webhooks(&self, org: &OrgId) -> Result<Vec<WebhookEndpoint>, BusError> {
        Ok(self
            .list_page(
                Bucket::Webhooks,
                org,
                |w: &WebhookEndpoint| &w.org == org,
                0,
                usize::MAX,
                usize::MAX,
            )
            .await?
            .items)
    }

    /// Every endpoint of every organisation (for the notifier) and the bucket
    /// stream's last sequence when read: a later write has a higher one.
    ///
    /// Read from the bucket stream's leader only: its stream info with the keys'
    /// subjects (and the last sequence, from the same answer), then each key's last
    /// message by `STREAM.MSG.GET`. A direct get, or the ordered consumer behind a KV
    /// key listing, may be answered by a replica still catching up after a
    /// partition, which can know fewer endpoints than there are; the notifier's
    /// router would then queue an organisation's events for nobody.
    ///
    /// # Errors
    /// Transient on NATS failure (no leader, a timeout); corrupt when a record does
    /// not decode.
    pub async fn all_webhooks(&self) -> Result<(Vec<WebhookEndpoint>, u64), BusError> {
        let bucket = self.topo.webhooks_bucket();
        let stream = self
            .js
            .get_stream_no_info(format!("KV_{bucket}"))
            .await
            .map_err(|e| BusError::transient("list webhooks", e))?;
        let prefix = format!("$KV.{bucket}.");
        let mut subjects = stream
            .info_with_subjects(format!("{prefix}>"))
            .await
            .map_err(|e| BusError::transient("list webhooks", e))?;
        let seq = subjects.info.state.last_sequence;
        let mut names = Vec::new();
        while let Some(s) = tokio::time::timeout(Duration::from_secs(5), subjects.next())
            .await
            .map_err(|_| BusError::transient("list webhooks", "timed out"))?
        {
            names.push(s.map_err(|e| BusError::transient("list webhooks", e))?.0);
        }
        let mut out = Vec::new();
        for subject in names {
            let msg = match stream.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => m,
                // Gone since the listing (its last message removed).
                Err(e)
                    if e.kind()
                        == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
                {
                    continue;
                }
                Err(e) => return Err(BusError::transient("list webhooks", e)),
            };
            let op = msg
                .headers
                .get("KV-Operation")
                .map(|v| v.as_str().to_owned());
            if matches!(op.as_deref(), Some("DEL" | "PURGE")) {
                continue;
            }
            let key = subject.strip_prefix(&prefix).unwrap_or(&subject).to_owned();
            let e: WebhookEndpoint =
                serde_json::from_slice(&msg.payload).map_err(|err| BusError::Corrupt {
                    key,
                    message: err.to_string(),
                })?;
            out.push(e);
        }
        Ok((out, seq))
    }

    /// The webhooks bucket stream's last sequence (changes with every write).
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn webhooks_sequence(&self) -> Result<u64, BusError> {
        // One round trip: `get_stream` would fetch the info once more.
        let s = self
            .js
            .get_stream_no_info(format!("KV_{}", self.topo.webhooks_bucket()))
            .await
            .map_err(|e| BusError::transient("webhooks info", e))?;
        let info = s
            .get_info()
            .await
            .map_err(|e| BusError::transient("webhooks info", e))?;
        Ok(info.state.last_sequence)
    }

    /// Removes endpoint `org/id`: its record, its queue (undelivered messages are
    /// dropped) and its consumer. Returns false when there was no such endpoint.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn delete_webhook(&self, org: &OrgId, id: &WebhookId) -> Result<bool, BusError> {
        let loaded = self.load_webhook(org, id).await?;
        if loaded.value.is_none() {
            return Ok(false);
        }
        self.webhooks
            .delete(Topology::webhook_key(org, id))
            .await
            .map_err(|e| BusError::transient("delete webhook", e))?;
        let queue = self
            .js
            .get_stream_no_info(self.topo.webhook_queue_stream())
            .await
            .map_err(|e| BusError::transient("delete webhook", e))?;
        // The consumer may not exist (no notifier ran since it was made).
        let _ = queue.delete_consumer(&self.topo.webhook_consumer(id)).await;
        queue
            .purge()
            .filter(self.topo.webhook_queue_subject(org, id))
            .await
            .map_err(|e| BusError::transient("delete webhook", e))?;
        Ok(true)
    }

    /// The notifier's durable consumer of the events stream (`HP_NOTIFIER`): every
    /// organisation's events, explicit ack, shared by every notifier; created (to
    /// start with the events stored from then on) by the first notifier, or by the
    /// first registration, before its endpoint is written, so every event stored
    /// after a registration reaches the endpoint even when no notifier runs yet.
    ///
    /// # Errors
    /// Transient when JetStream does not answer.
    pub async fn notifier_consumer(&self) -> Result<consumer::PullConsumer, BusError> {
        let events = self
            .js
            .get_stream_no_info(self.topo.events_stream())
            .await
            .map_err(|e| BusError::transient("notifier consumer", e))?;
        events
            .get_or_create_consumer(
                &self.topo.notifier_consumer(),
                consumer::pull::Config {
                    durable_name: Some(self.topo.notifier_consumer()),
                    filter_subject: format!("{}.evt.>", self.topo.subject_prefix),
                    deliver_policy: consumer::DeliverPolicy::New,
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: Duration::from_secs(10),
                    max_deliver: -1,
                    max_ack_pending: 256,
                    num_replicas: self.topo.replicas,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| BusError::transient("notifier consumer", e))
    }

    /// The messages of [`Bus::notifier_consumer`], pulled as [`pull_messages`]
    /// does.
    ///
    /// # Errors
    /// Transient when JetStream does not answer.
    pub async fn notifier_events(&self) -> Result<consumer::pull::Stream, BusError> {
        pull_messages(&self.notifier_consumer().await?).await
    }

    /// Queues `payload` (a CloudEvent) for endpoint `e`, once per `(endpoint,
    /// event_id)` within the duplicate window, and waits for the PubAck.
    ///
    /// # Errors
    /// Transient when the queue does not confirm.
    pub async fn enqueue_delivery(
        &self,
        e: &WebhookEndpoint,
        event_id: &str,
        payload: Bytes,
    ) -> Result<(), BusError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Msg-Id",
            format!("{}:{event_id}", e.id.as_str()).as_str(),
        );
        self.js
            .publish_with_headers(
                self.topo.webhook_queue_subject(&e.org, &e.id),
                headers,
                payload,
            )
            .await
            .map_err(|err| BusError::publish("queue delivery", &err))?
            .await
            .map_err(|err| BusError::publish("queue delivery", &err))?;
        Ok(())
    }

    /// Endpoint `e`'s durable consumer of its queue (`HP_WHK_<id>`): one message in
    /// flight, explicit ack, redelivered after [`Topology::webhook_ack_wait`] when a
    /// notifier dies holding it; NAKs carry the retry delay.
    ///
    /// # Errors
    /// Transient when JetStream does not answer.
    pub async fn webhook_consumer(
        &self,
        e: &WebhookEndpoint,
    ) -> Result<consumer::PullConsumer, BusError> {
        let queue = self
            .js
            .get_stream_no_info(self.topo.webhook_queue_stream())
            .await
            .map_err(|err| BusError::transient("webhook consumer", err))?;
        let name = self.topo.webhook_consumer(&e.id);
        queue
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: self.topo.webhook_queue_subject(&e.org, &e.id),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.topo.webhook_ack_wait,
                    max_deliver: -1,
                    max_ack_pending: 1,
                    num_replicas: self.topo.replicas,
                    ..Default::default()
                },
            )
            .await
            .map_err(|err| BusError::transient("webhook consumer", err))
    }

    /// Messages waiting for endpoint `e` (queued, or held for a retry).
    ///
    /// # Errors
    /// Transient when JetStream does not answer.
    pub async fn webhook_backlog(&self, e: &WebhookEndpoint) -> Result<u64, BusError> {
        let mut c = self.webhook_consumer(e).await?;
        let info = c
            .info()
            .await
            .map_err(|err| BusError::transient("webhook backlog", err))?;
        Ok(info.num_pending + info.num_ack_pending as u64)
    }

    fn delivered_key(org: &OrgId, id: &WebhookId, event_id: &str) -> String {
        let d = holdpoint_domain::digest(&[event_id]);
        format!("{}.{}.{}", org.token(), id.token(), &d[..40])
    }

    /// Whether `event_id` was already delivered to endpoint `org/id`.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn delivered(
        &self,
        org: &OrgId,
        id: &WebhookId,
        event_id: &str,
    ) -> Result<bool, BusError> {
        match self
            .webhook_delivered
            .entry(Self::delivered_key(org, id, event_id))
            .await
        {
            Ok(Some(e)) => Ok(e.operation == async_nats::jetstream::kv::Operation::Put),
            Ok(None) => Ok(false),
            Err(e) => Err(BusError::entry("delivered marker", &e)),
        }
    }

    /// Records that `event_id` was delivered to endpoint `org/id`.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn mark_delivered(
        &self,
        org: &OrgId,
        id: &WebhookId,
        event_id: &str,
    ) -> Result<(), BusError> {
        self.webhook_delivered
            .put(
                Self::delivered_key(org, id, event_id),
                Bytes::from_static(b"1"),
            )
            .await
            .map_err(|e| BusError::transient("delivered marker", e))?;
        Ok(())
    }

    /// Appends an attempt to endpoint `org/…`'s attempts.
    ///
    /// # Errors
    /// Transient when the stream does not confirm.
    pub async fn record_attempt(&self, org: &OrgId, a: &WebhookAttempt) -> Result<(), BusError> {
        self.js
            .publish(
                self.topo.webhook_attempts_subject(org, &a.webhook_id),
                encode(a)?,
            )
            .await
            .map_err(|e| BusError::publish("record attempt", &e))?
            .await
            .map_err(|e| BusError::publish("record attempt", &e))?;
        Ok(())
    }

    /// Endpoint `org/id`'s kept attempts, oldest first.
    ///
    /// # Errors
    /// Transient when the stream cannot be read in time.
    pub async fn attempts(
        &self,
        org: &OrgId,
        id: &WebhookId,
    ) -> Result<Vec<WebhookAttempt>, BusError> {
        let stored = self
            .read_stored(
                self.topo.webhook_attempts_stream(),
                self.topo.webhook_attempts_subject(org, id),
                consumer::DeliverPolicy::All,
                usize::MAX,
                "read attempts",
            )
            .await?;
        Ok(stored
            .iter()
            .filter_map(|m| serde_json::from_slice::<WebhookAttempt>(&m.payload).ok())
            .collect())
    }
}

/// Re-exported for the notifier's acks.
pub use async_nats::jetstream::AckKind;
/// A message of a webhook queue or of the notifier's events consumer.
pub type Message = async_nats::jetstream::Message;

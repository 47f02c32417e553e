//! The records: typed reads of the state stream's keys (interactions, tasks,
//! sessions and lanes, rules: one KV bucket, `HP_STATE`) and of the other buckets,
//! compare-and-set writes of the buckets outside the commit path (webhooks), and
//! paged listing.
//!
//! A record's revision is its subject's last sequence in the state stream: a
//! decision's batch ([`crate::commit`]) writes it only if it is still at the
//! revision read, else the whole batch is refused as a conflict (reload and decide
//! again). Keys are built by [`Topology`]'s `*_key` functions from validated ids.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{consumer, kv};
use bytes::Bytes;
use futures::StreamExt as _;
use holdpoint_domain::{
    Interaction, InteractionId, Lane, LaneId, OrgId, Outcome, Session, SessionId, Task, TaskId,
};
use serde::de::DeserializeOwned;

use crate::{Bus, BusError, ErrorKind, Topology};

/// A record loaded from KV with its revision (0 when absent).
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// The record, if present.
    pub value: Option<T>,
    /// Its KV revision; a compare-and-set writes against it.
    pub revision: u64,
}

impl<T> Default for Loaded<T> {
    fn default() -> Self {
        Loaded {
            value: None,
            revision: 0,
        }
    }
}

/// A page of records and where the next one starts.
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// The records, in the order of their last write.
    pub items: Vec<T>,
    /// The bucket stream's sequence to continue after; `None` on the last page.
    pub next_after: Option<u64>,
}

/// Result of a compare-and-set write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cas {
    /// Written at this revision.
    Written(u64),
    /// Somebody wrote first: reload and decide again.
    Conflict,
}

/// Which kind of record, and so which bucket and key prefix, a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Interaction records (`HP_STATE`, `int.<org>.<interactionId>`).
    Interactions,
    /// Task records (`HP_STATE`, `task.<org>.<taskId>`).
    Tasks,
    /// Session headers and lanes (`HP_STATE`, `ses.<org>.…`).
    Sessions,
    /// `HP_OUTCOMES`: stored outcomes for duplicate requests.
    Outcomes,
    /// `HP_WEBHOOKS` (webhook endpoints, secrets included).
    Webhooks,
    /// Remembered approval rules (`HP_STATE`, `rule.<org>.<ruleId>`).
    Rules,
}

impl Bucket {
    /// The prefix of this kind's keys in the state bucket (`int.`, `task.`, `ses.`,
    /// `rule.`); empty for the buckets of their own.
    pub fn key_prefix(self) -> &'static str {
        match self {
            Bucket::Interactions => "int.",
            Bucket::Tasks => "task.",
            Bucket::Sessions => "ses.",
            Bucket::Rules => "rule.",
            Bucket::Outcomes | Bucket::Webhooks => "",
        }
    }
}

impl Bus {
    fn bucket_name(&self, b: Bucket) -> String {
        match b {
            Bucket::Interactions | Bucket::Tasks | Bucket::Sessions | Bucket::Rules => {
                self.topo.state_bucket()
            }
            Bucket::Outcomes => self.topo.outcomes_bucket(),
            Bucket::Webhooks => self.topo.webhooks_bucket(),
        }
    }

    fn store(&self, b: Bucket) -> &kv::Store {
        match b {
            Bucket::Interactions | Bucket::Tasks | Bucket::Sessions | Bucket::Rules => &self.state,
            Bucket::Outcomes => &self.outcomes,
            Bucket::Webhooks => &self.webhooks,
        }
    }

    /// Reads `key` of bucket `b`.
    ///
    /// # Errors
    /// Transient on NATS failure, [`BusError::Corrupt`] on a record that does not
    /// decode.
    pub async fn load<T: DeserializeOwned>(
        &self,
        b: Bucket,
        key: String,
    ) -> Result<Loaded<T>, BusError> {
        match self.store(b).entry(key.clone()).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                let value =
                    serde_json::from_slice(&entry.value).map_err(|e| BusError::Corrupt {
                        key,
                        message: e.to_string(),
                    })?;
                Ok(Loaded {
                    value: Some(value),
                    revision: entry.revision,
                })
            }
            Ok(Some(entry)) => Ok(Loaded {
                value: None,
                revision: entry.revision,
            }),
            Ok(None) => Ok(Loaded::default()),
            Err(e) => Err(BusError::entry("kv get", &e)),
        }
    }

    /// Loads the interaction `org/id`.
    ///
    /// # Errors
    /// As [`Bus::load`].
    ///
    /// An interaction read as absent is read again from the bucket's stream leader
    /// before it is believed: a direct get may be answered by any replica, and one
    /// cut off by a partition answered "absent" for interactions that existed, so
    /// answers to them were refused `404 NRY-0004` (the partition schedule found
    /// three). The leader read costs a round trip on that path only.
    pub async fn load_interaction(
        &self,
        org: &OrgId,
        id: &InteractionId,
    ) -> Result<Loaded<Interaction>, BusError> {
        let key = Topology::interaction_key(org, id);
        let loaded = self.load(Bucket::Interactions, key.clone()).await?;
        if loaded.value.is_some() || loaded.revision != 0 {
            return Ok(loaded);
        }
        self.load_from_leader(Bucket::Interactions, key).await
    }

    /// Reads `key` of bucket `b` with a stream message get, which the stream's
    /// leader answers (never a lagging replica): for a read a decision that writes
    /// nothing rests on, which no compare-and-set would catch if it were stale.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_from_leader<T: DeserializeOwned>(
        &self,
        b: Bucket,
        key: String,
    ) -> Result<Loaded<T>, BusError> {
        let bucket = self.bucket_name(b);
        let stream = self
            .js
            .get_stream_no_info(format!("KV_{bucket}"))
            .await
            .map_err(|e| BusError::transient("kv leader get", e))?;
        match stream
            .get_last_raw_message_by_subject(&format!("$KV.{bucket}.{key}"))
            .await
        {
            Ok(m) => {
                let removed = m
                    .headers
                    .get("KV-Operation")
                    .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"));
                if removed {
                    return Ok(Loaded {
                        value: None,
                        revision: m.sequence,
                    });
                }
                let value = serde_json::from_slice(&m.payload).map_err(|e| BusError::Corrupt {
                    key,
                    message: e.to_string(),
                })?;
                Ok(Loaded {
                    value: Some(value),
                    revision: m.sequence,
                })
            }
            Err(e)
                if e.kind()
                    == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
            {
                Ok(Loaded::default())
            }
            Err(e) => Err(BusError::transient("kv leader get", e)),
        }
    }

    /// Loads the task record `org/id`.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_task(&self, org: &OrgId, id: &TaskId) -> Result<Loaded<Task>, BusError> {
        self.load(Bucket::Tasks, Topology::task_key(org, id)).await
    }

    /// Loads the session header `org/id`.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_session(
        &self,
        org: &OrgId,
        id: &SessionId,
    ) -> Result<Loaded<Session>, BusError> {
        self.load(Bucket::Sessions, Topology::session_key(org, id))
            .await
    }

    /// Loads the lane record `org/session/lane`.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_lane(
        &self,
        org: &OrgId,
        session: &SessionId,
        lane: &LaneId,
    ) -> Result<Loaded<Lane>, BusError> {
        self.load(Bucket::Sessions, Topology::lane_key(org, session, lane))
            .await
    }

    /// Writes `value` at `key` of bucket `b` if the key is still at `revision` (0:
    /// it must not exist). For the buckets outside the commit path (webhook
    /// endpoints); a decision's records are written by its batch.
    ///
    /// # Errors
    /// Transient or permanent failures; a lost race is [`Cas::Conflict`], not an error.
    pub async fn cas(
        &self,
        b: Bucket,
        key: &str,
        revision: u64,
        value: Bytes,
    ) -> Result<Cas, BusError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            revision.to_string().as_str(),
        );
        let subject = format!("$KV.{}.{key}", self.bucket_name(b));
        let ack = self
            .js
            .publish_with_headers(subject, headers, value)
            .await
            .map_err(|e| BusError::publish("kv write", &e))?
            .await
            .map_err(|e| BusError::publish("kv write", &e));
        match ack {
            Ok(ack) => Ok(Cas::Written(ack.sequence)),
            Err(e) if e.kind() == ErrorKind::Conflict => Ok(Cas::Conflict),
            Err(e) => Err(e),
        }
    }

    /// The stored outcome of a command publish (keyed by its `Nats-Msg-Id`), if a
    /// worker stored one (it does for decisions that wrote no record).
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn stored_outcome(&self, msg_id: &str) -> Result<Option<Outcome>, BusError> {
        let loaded: Loaded<Outcome> = self.load(Bucket::Outcomes, msg_id.to_owned()).await?;
        Ok(loaded.value)
    }

    /// Every interaction of `org` (latest value of each key), read from the bucket's
    /// stream filtered to the organisation, so another organisation's records are
    /// never read.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn list_interactions(&self, org: &OrgId) -> Result<Vec<Interaction>, BusError> {
        Ok(self
            .list_page(
                Bucket::Interactions,
                org,
                |_: &Interaction| true,
                0,
                usize::MAX,
                usize::MAX,
            )
            .await?
            .items)
    }

    /// One page of `org`'s records in bucket `b` that satisfy `keep`, in the order of
    /// their last write, starting after the bucket stream's sequence `after` (0: from
    /// the start).
    ///
    /// The bucket keeps one revision per key, so reading its stream from a sequence
    /// on, filtered to the organisation's keys, yields each current record once. Only
    /// the page is held in memory; at most `scan_cap` records are read per call, so a
    /// page may come back short with a cursor to continue from. Records of another
    /// shape in the same bucket (lanes beside session headers) are skipped.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn list_page<T: DeserializeOwned>(
        &self,
        b: Bucket,
        org: &OrgId,
        keep: impl Fn(&T) -> bool,
        after: u64,
        limit: usize,
        scan_cap: usize,
    ) -> Result<Page<T>, BusError> {
        let bucket = self.bucket_name(b);
        let stream = self
            .js
            .get_stream(format!("KV_{bucket}"))
            .await
            .map_err(|e| BusError::transient("list records", e))?;
        let deliver_policy = if after == 0 {
            consumer::DeliverPolicy::All
        } else {
            consumer::DeliverPolicy::ByStartSequence {
                start_sequence: after.saturating_add(1),
            }
        };
        let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: format!("$KV.{bucket}.{}{}.>", b.key_prefix(), org.token()),
                deliver_policy,
                ..Default::default()
            })
            .await
            .map_err(|e| BusError::transient("list records", e))?;
        let mut page = Page {
            items: Vec::new(),
            next_after: None,
        };
        if consumer.cached_info().num_pending == 0 {
            return Ok(page);
        }
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| BusError::transient("list records", e))?;
        let mut scanned = 0usize;
        while let Some(msg) = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .map_err(|_| BusError::transient("list records", "timed out"))?
        {
            let msg = msg.map_err(|e| BusError::transient("list records", e))?;
            let (seq, remaining) = msg
                .info()
                .map(|i| (i.stream_sequence, i.pending))
                .unwrap_or((0, 0));
            scanned += 1;
            let deleted = msg
                .headers
                .as_ref()
                .and_then(|h| h.get("KV-Operation"))
                .is_some();
            if !deleted
                && let Ok(item) = serde_json::from_slice::<T>(&msg.payload)
                && keep(&item)
            {
                page.items.push(item);
            }
            if remaining == 0 {
                break;
            }
            if page.items.len() >= limit || scanned >= scan_cap {
                page.next_after = Some(seq);
                break;
            }
        }
        Ok(page)
    }
}

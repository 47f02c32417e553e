//! Who decides which commands: the partition consumers and worker presence.
//!
//! **Ownership.** Each partition `p` has a durable pull consumer `HP_WORKERS_<p>`
//! (filter `hp.cmd.<p>.>`) with a priority group in the server's `pinned_client`
//! policy: every worker pulls every partition, and the server delivers a partition's
//! commands to one pinned worker at a time. When the pinned worker stops pulling (it
//! died, or lost NATS) for [`Topology::priority_timeout`], the server pins another;
//! commands it had in flight come back after [`Topology::ack_wait`]. So one task's
//! commands are decided in order by one worker, while the compare-and-set revisions
//! still guard the records if two workers ever overlap (the server does not promise
//! exclusivity during a switch).
//!
//! [`Topology::priority_timeout`]: crate::Topology::priority_timeout
//! [`Topology::ack_wait`]: crate::Topology::ack_wait
//! [`Topology::presence_ttl`]: crate::Topology::presence_ttl
//!
//! **Balance.** Workers announce themselves in the presence bucket (a key per worker
//! that expires after [`Topology::presence_ttl`] unless refreshed). Each partition
//! has a preferred worker among the live ones (rendezvous hashing, [`preferred`]); a
//! worker pinned to a partition it does not prefer hands it over ([`Bus::unpin`]) once
//! the preferred one is pulling.

use async_nats::jetstream::consumer::{self, AckPolicy, PriorityPolicy, PullConsumer};
use async_nats::jetstream::kv;
use futures::StreamExt as _;
use holdpoint_domain::digest;
use time::OffsetDateTime;

use crate::{Bus, BusError};

/// The worker that prefers partition `p` among `workers` (rendezvous hashing: each
/// partition goes to the worker with the highest digest of (worker, partition), so a
/// worker joining or leaving moves only its own share).
pub fn preferred(p: u32, workers: &[String]) -> Option<&str> {
    workers
        .iter()
        .max_by_key(|w| digest(&[w.as_str(), &p.to_string()]))
        .map(String::as_str)
}

impl Bus {
    /// Partition `p`'s consumer (created or brought in step with the topology).
    ///
    /// # Errors
    /// Transient when JetStream refuses.
    pub async fn partition_consumer(&self, p: u32) -> Result<PullConsumer, BusError> {
        let stream = self
            .js
            .get_stream(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::transient("get commands stream", e))?;
        let name = self.topo.partition_consumer(p);
        let cfg = consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: self.topo.partition_filter(p),
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.topo.ack_wait,
            max_deliver: self.topo.max_deliver,
            max_ack_pending: 4096,
            priority_policy: PriorityPolicy::PinnedClient,
            priority_groups: vec![self.topo.priority_group().to_owned()],
            priority_timeout: self.topo.priority_timeout,
            ..Default::default()
        };
        stream
            .create_consumer(cfg)
            .await
            .map_err(|e| BusError::transient("create partition consumer", e))
    }

    /// Releases this worker's pin on partition `p`, so the server pins another
    /// worker that pulls it (a handover to the preferred worker).
    ///
    /// # Errors
    /// Transient when JetStream refuses.
    pub async fn unpin(&self, p: u32) -> Result<(), BusError> {
        let stream = self
            .js
            .get_stream_no_info(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::transient("get commands stream", e))?;
        stream
            .unpin_consumer(&self.topo.partition_consumer(p), self.topo.priority_group())
            .await
            .map_err(|e| BusError::transient("unpin partition", e))
    }

    /// The id the server pinned partition `p`'s consumer to (its priority group's
    /// `pinned_client_id`), if any: a worker compares it with the `Nats-Pin-Id` of
    /// the messages it got to know it still owns the partition.
    ///
    /// # Errors
    /// Transient when the consumer's info cannot be read.
    pub async fn pinned_client(&self, p: u32) -> Result<Option<String>, BusError> {
        let stream = self
            .js
            .get_stream_no_info(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::transient("consumer info", e))?;
        let info = stream
            .consumer_info(self.topo.partition_consumer(p))
            .await
            .map_err(|e| BusError::transient("consumer info", e))?;
        Ok(info
            .priority_groups
            .iter()
            .find_map(|g| g.pinned_client_id.clone()))
    }

    /// Commands waiting and commands delivered but not yet acknowledged, over every
    /// partition.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn consumer_backlog(&self) -> Result<(u64, usize), BusError> {
        let stream = self
            .js
            .get_stream(self.topo.commands_stream())
            .await
            .map_err(|e| BusError::transient("get commands stream", e))?;
        let names: Vec<String> = (0..self.topo.partitions)
            .map(|p| self.topo.partition_consumer(p))
            .collect();
        let (mut pending, mut ack_pending) = (0, 0);
        for name in names {
            match stream.consumer_info(&name).await {
                Ok(info) => {
                    pending += info.num_pending;
                    ack_pending += info.num_ack_pending;
                }
                // Not created yet: nothing is waiting on it.
                Err(e) if e.to_string().contains("not found") => {}
                Err(e) => return Err(BusError::transient("consumer info", e)),
            }
        }
        Ok((pending, ack_pending))
    }

    async fn bucket(&self, name: String) -> Result<kv::Store, BusError> {
        self.js
            .get_key_value(name)
            .await
            .map_err(|e| BusError::transient("bind bucket", e))
    }

    /// Refreshes this worker's presence entry, which holds when it started (RFC
    /// 3339); it expires after [`Topology::presence_ttl`] unless refreshed.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn announce(&self, worker: &str, since: OffsetDateTime) -> Result<(), BusError> {
        let since = since
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| BusError::permanent("format presence", e))?;
        self.bucket(self.topo.presence_bucket())
            .await?
            .put(worker, since.into())
            .await
            .map(|_| ())
            .map_err(|e| BusError::transient("announce worker", e))
    }

    /// Withdraws this worker's presence entry (at shutdown).
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn withdraw(&self, worker: &str) -> Result<(), BusError> {
        self.bucket(self.topo.presence_bucket())
            .await?
            .purge(worker)
            .await
            .map_err(|e| BusError::transient("withdraw worker", e))
    }

    /// The workers whose presence entry is live, with when each started, sorted by
    /// id (an entry that does not decode reads as started now).
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn live_workers(&self) -> Result<Vec<(String, OffsetDateTime)>, BusError> {
        let store = self.bucket(self.topo.presence_bucket()).await?;
        let mut keys = store
            .keys()
            .await
            .map_err(|e| BusError::transient("list workers", e))?;
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            ids.push(k.map_err(|e| BusError::transient("list workers", e))?);
        }
        let mut out = Vec::new();
        for id in ids {
            let value = store
                .get(&id)
                .await
                .map_err(|e| BusError::transient("list workers", e))?;
            let Some(value) = value else { continue };
            let since = std::str::from_utf8(&value)
                .ok()
                .and_then(|t| {
                    OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
                })
                .unwrap_or_else(OffsetDateTime::now_utc);
            out.push((id, since));
        }
        out.sort();
        Ok(out)
    }
}

/// The presence key of a worker id (validated: `[A-Za-z0-9_-]`, at most 64).
pub fn is_worker_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_moves_only_the_leavers_share() {
        let three: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let two: Vec<String> = ["a", "b"].map(String::from).to_vec();
        for p in 0..64 {
            let before = preferred(p, &three);
            let after = preferred(p, &two);
            if before != Some("c") {
                assert_eq!(before, after, "partition {p} moved without cause");
            }
        }
        let spread: std::collections::BTreeSet<_> =
            (0..64).filter_map(|p| preferred(p, &three)).collect();
        assert_eq!(spread.len(), 3, "every worker gets a share");
        assert_eq!(preferred(0, &[]), None);
    }

    #[test]
    fn worker_ids_are_plain_tokens() {
        assert!(is_worker_id("w-1_a"));
        assert!(!is_worker_id("a.b"));
        assert!(!is_worker_id(""));
    }
}

//! What a worker keeps of the records between batches.
//!
//! - [`RecordCache`]: per partition runner, the interactions, tasks and lanes its
//!   commands touched, with their KV revisions, bounded in bytes (least recently
//!   used first out). The partition's owner is normally their only writer; every
//!   write still names the cached revision, so a stale entry only costs a conflict
//!   (the entry is dropped and the command decided again on a fresh read).
//! - [`SessionCache`]: per worker, session headers, kept fresh by a KV watch on the
//!   state bucket (`ses.<org>.<session>` keys): headers change rarely (open, close,
//!   end) and are read by almost every command, so the hot path reads none.

use std::ops::ControlFlow;
use std::sync::Arc;

use holdpoint_bus::Bus;
use holdpoint_domain::{Interaction, Lane, Session, Task};
use quick_cache::Weighter;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// A record of any of the cached kinds. Records live behind an `Arc`, so the size
/// of the largest variant does not matter.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Record {
    /// `HP_INTERACTIONS`.
    Interaction(Interaction),
    /// `HP_TASKS`.
    Task(Task),
    /// A session header (`ses.<org>.<session>`).
    Session(Session),
    /// A lane (`ses.<org>.<session>.<lane>`).
    Lane(Lane),
}

/// A cached record with its KV revision and its size (the cache's weight).
#[derive(Debug, Clone)]
pub struct Cached {
    /// The record (shared: batches clone the `Arc`, not the record).
    pub record: Arc<Record>,
    /// Its KV revision.
    pub revision: u64,
    /// Its encoded size in bytes.
    pub bytes: u64,
}

/// Heap bytes a decoded record takes per byte of its JSON encoding, about: its
/// strings, vectors and maps each carry their own allocation and capacity slack.
/// Measured with the benchmark (BENCHMARKS.md, "Memory"): a 32 MiB cache weighed by
/// encoded size alone took the worker from 30 to 153 MiB resident.
const HEAP_PER_ENCODED_BYTE: u64 = 4;

#[derive(Debug, Clone, Copy)]
struct BySize;

impl Weighter<String, Cached> for BySize {
    fn weight(&self, key: &String, val: &Cached) -> u64 {
        key.len() as u64 + val.bytes * HEAP_PER_ENCODED_BYTE + 64
    }
}

/// Records by key (`i:`, `t:`, `l:` + the KV key), bounded in bytes.
pub struct RecordCache(quick_cache::unsync::Cache<String, Cached, BySize>);

impl std::fmt::Debug for RecordCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCache")
            .field("len", &self.0.len())
            .field("weight", &self.0.weight())
            .finish()
    }
}

impl RecordCache {
    /// A cache of records taking about `bytes` of memory at most (each weighed at
    /// [`HEAP_PER_ENCODED_BYTE`] times its encoded size).
    pub fn new(bytes: u64) -> Self {
        let items = usize::try_from(bytes / 8192).unwrap_or(1024).max(16);
        RecordCache(quick_cache::unsync::Cache::with_weighter(
            items,
            bytes.max(1),
            BySize,
        ))
    }

    /// The cached record `key`.
    pub fn get(&self, key: &str) -> Option<&Cached> {
        self.0.get(key)
    }

    /// Caches `record` at `revision`.
    pub fn put(&mut self, key: String, record: Arc<Record>, revision: u64, bytes: u64) {
        self.0.insert(
            key,
            Cached {
                record,
                revision,
                bytes,
            },
        );
    }

    /// Forgets `key` (its write lost a race, or failed).
    pub fn forget(&mut self, key: &str) {
        self.0.remove(key);
    }

    /// Forgets everything (the partition changed hands).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Session headers by KV key, shared by a worker's partition runners and kept fresh
/// by a KV watch ([`SessionCache::watch`]).
#[derive(Clone)]
pub struct SessionCache(Arc<quick_cache::sync::Cache<String, (Arc<Session>, u64)>>);

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache")
            .field("len", &self.0.len())
            .finish()
    }
}

impl SessionCache {
    /// A cache of at most `items` session headers.
    pub fn new(items: usize) -> Self {
        SessionCache(Arc::new(quick_cache::sync::Cache::new(items.max(16))))
    }

    /// The cached header `key` with its revision.
    pub fn get(&self, key: &str) -> Option<(Arc<Session>, u64)> {
        self.0.get(key)
    }

    /// Caches `session` at `revision` unless a newer revision is cached already.
    pub fn offer(&self, key: &str, session: Arc<Session>, revision: u64) {
        if self.0.get(key).is_some_and(|(_, r)| r >= revision) {
            return;
        }
        self.0.insert(key.to_owned(), (session, revision));
    }

    /// Forgets `key`.
    pub fn forget(&self, key: &str) {
        self.0.remove(key);
    }

    /// Keeps the cache fresh from the state bucket's session keys until `shutdown`: every header
    /// written anywhere replaces an older cached revision. When the watch breaks the
    /// cache is emptied (headers are read again) and the watch restarts.
    pub async fn watch(self, bus: Bus, shutdown: CancellationToken) {
        crate::watch::watch(
            "session watch",
            &shutdown,
            || bus.state.watch("ses.*.*"),
            |next| match next {
                Ok(entry) => {
                    self.apply(&entry);
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    warn!(error = %e, "session watch broke; re-reading headers");
                    ControlFlow::Break(())
                }
            },
            || self.0.clear(),
        )
        .await;
    }

    fn apply(&self, entry: &async_nats::jetstream::kv::Entry) {
        if entry.operation != async_nats::jetstream::kv::Operation::Put {
            self.forget(&entry.key);
            return;
        }
        match serde_json::from_slice::<Session>(&entry.value) {
            Ok(s) => self.offer(&entry.key, Arc::new(s), entry.revision),
            Err(_) => self.forget(&entry.key),
        }
    }
}

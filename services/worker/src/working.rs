//! The records a batch works on: loaded once (from the cache, or from KV with every
//! miss read at once), changed in memory by each decision in turn, and written at
//! the end with the revision they were loaded at.
//!
//! Two commands on the same record in one batch are decided in order, the second on
//! the state the first left; their changes reach KV as one write.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use holdpoint_bus::records::Bucket;
use holdpoint_bus::{Bus, BusError, Topology};
use holdpoint_domain::{
    CommandEnvelope, Decision, Interaction, Lane, Needs, Session, Snapshot, Task, Transition, needs,
};

use crate::cache::{Record, RecordCache, SessionCache};

/// A record's identity: its kind and state key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// An interaction (`int.<org>.<id>`).
    Interaction(String),
    /// A task (`task.<org>.<id>`).
    Task(String),
    /// A session header (`ses.<org>.<id>`).
    Session(String),
    /// A lane (`ses.<org>.<session>.<lane>`).
    Lane(String),
}

impl Key {
    /// The bucket it lives in.
    pub fn bucket(&self) -> Bucket {
        match self {
            Key::Interaction(_) => Bucket::Interactions,
            Key::Task(_) => Bucket::Tasks,
            Key::Session(_) | Key::Lane(_) => Bucket::Sessions,
        }
    }

    /// The KV key.
    pub fn kv(&self) -> &str {
        match self {
            Key::Interaction(k) | Key::Task(k) | Key::Session(k) | Key::Lane(k) => k,
        }
    }

    /// The record cache's key.
    pub fn cache_key(&self) -> String {
        let tag = match self {
            Key::Interaction(_) => "i",
            Key::Task(_) => "t",
            Key::Session(_) => "s",
            Key::Lane(_) => "l",
        };
        format!("{tag}:{}", self.kv())
    }
}

/// One record in the working set.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The record (as loaded, or as the batch changed it); `None` when absent.
    pub record: Option<Arc<Record>>,
    /// The revision it was loaded at (0: absent); the write expects it.
    pub revision: u64,
    /// Changed by this batch.
    pub dirty: bool,
    /// Read from the state stream in this batch (so worth keeping in the cache).
    pub from_kv: bool,
}

impl Slot {
    /// A record as read from KV at `revision` (`None`: absent), unchanged.
    fn read_from_kv(record: Option<Record>, revision: u64) -> Slot {
        Slot {
            record: record.map(Arc::new),
            revision,
            dirty: false,
            from_kv: true,
        }
    }
}

/// The records of one batch.
#[derive(Debug, Default)]
pub struct WorkingSet {
    slots: HashMap<Key, Slot>,
}

/// The keys one command's decision needs.
#[derive(Debug, Clone, Default)]
pub struct KeysOf {
    /// The interaction it names.
    pub interaction: Option<Key>,
    /// The task, session header and lane [`needs`] asks for.
    pub task: Option<Key>,
    /// The session header.
    pub session: Option<Key>,
    /// The lane.
    pub lane: Option<Key>,
}

impl KeysOf {
    /// Every key, in write order.
    pub fn all(&self) -> impl Iterator<Item = &Key> {
        [&self.session, &self.lane, &self.task, &self.interaction]
            .into_iter()
            .flatten()
    }
}

fn interaction_key(env: &CommandEnvelope) -> Option<Key> {
    env.interaction_id()
        .map(|id| Key::Interaction(Topology::interaction_key(&env.org, id)))
}

impl WorkingSet {
    /// The record at `key`, if loaded and present.
    pub fn record(&self, key: &Key) -> Option<&Record> {
        self.slots.get(key)?.record.as_deref()
    }

    /// Every slot.
    pub fn slots(&self) -> impl Iterator<Item = (&Key, &Slot)> {
        self.slots.iter()
    }

    /// True when `key` is loaded (present or known absent).
    pub fn has(&self, key: &Key) -> bool {
        self.slots.contains_key(key)
    }

    /// The keys `env` needs, given what is loaded now (the interaction first: its
    /// task, session and lane come from it).
    pub fn keys_of(&self, env: &CommandEnvelope) -> KeysOf {
        let interaction = interaction_key(env);
        let i = interaction.as_ref().and_then(|k| match self.record(k) {
            Some(Record::Interaction(i)) => Some(i),
            _ => None,
        });
        let mode = env.session_id().and_then(|s| {
            match self.record(&Key::Session(Topology::session_key(&env.org, s))) {
                Some(Record::Session(s)) => Some(s.mode),
                _ => None,
            }
        });
        let Needs {
            task,
            session,
            lane,
        } = needs(env, i, mode);
        // A command that names its task is loaded with it at once.
        let task = task.or_else(|| env.task_id().cloned());
        KeysOf {
            interaction,
            task: task.map(|t| Key::Task(Topology::task_key(&env.org, &t))),
            session: session
                .or_else(|| env.session_id().cloned())
                .map(|s| Key::Session(Topology::session_key(&env.org, &s))),
            lane: lane.map(|(s, l)| Key::Lane(Topology::lane_key(&env.org, &s, &l))),
        }
    }

    /// Loads every key of `wanted` not loaded yet: from the caches, else from KV,
    /// with every KV read in flight at once. Returns the keys read from KV.
    ///
    /// # Errors
    /// The first failed read, typed.
    pub async fn load(
        &mut self,
        bus: &Bus,
        cache: &RecordCache,
        sessions: &SessionCache,
        wanted: impl IntoIterator<Item = Key>,
    ) -> Result<Vec<Key>, (Key, BusError)> {
        let mut misses = Vec::new();
        let mut seen = HashSet::new();
        for key in wanted {
            if self.slots.contains_key(&key) || !seen.insert(key.clone()) {
                continue;
            }
            let hit = match &key {
                Key::Session(k) => sessions
                    .get(k)
                    .map(|(s, rev)| (Arc::new(Record::Session((*s).clone())), rev)),
                other => cache
                    .get(&other.cache_key())
                    .map(|c| (c.record.clone(), c.revision)),
            };
            match hit {
                Some((record, revision)) => {
                    self.slots.insert(
                        key,
                        Slot {
                            record: Some(record),
                            revision,
                            dirty: false,
                            from_kv: false,
                        },
                    );
                }
                None => misses.push(key),
            }
        }
        let reads = misses.iter().map(|k| read(bus, k));
        let results = futures::future::join_all(reads).await;
        let mut from_kv = Vec::new();
        for (key, result) in misses.into_iter().zip(results) {
            let (record, revision) = result.map_err(|e| (key.clone(), e))?;
            if let (Key::Session(k), Some(Record::Session(s))) = (&key, record.as_ref()) {
                sessions.offer(k, Arc::new(s.clone()), revision);
            }
            self.slots
                .insert(key.clone(), Slot::read_from_kv(record, revision));
            from_kv.push(key);
        }
        Ok(from_kv)
    }

    /// Reads every unchanged slot of `keys` again from its bucket's stream leader and
    /// replaces those the leader holds at another revision (a cache behind another
    /// partition's writes, or a direct get answered by a lagging replica: either
    /// can show an interaction as absent or open when it is not). Returns the keys
    /// replaced; their slots count as read from KV.
    ///
    /// # Errors
    /// The first failed read, typed.
    pub async fn reload_from_leader(
        &mut self,
        bus: &Bus,
        keys: &KeysOf,
    ) -> Result<Vec<Key>, (Key, BusError)> {
        let stale: Vec<Key> = keys
            .all()
            .filter(|k| self.slots.get(*k).is_some_and(|s| !s.dirty))
            .cloned()
            .collect::<HashSet<Key>>()
            .into_iter()
            .collect();
        let reads = stale.iter().map(|k| read_as(bus, k, true));
        let results = futures::future::join_all(reads).await;
        let mut replaced = Vec::new();
        for (key, result) in stale.into_iter().zip(results) {
            let (record, revision) = result.map_err(|e| (key.clone(), e))?;
            if self.slots.get(&key).is_some_and(|s| s.revision == revision) {
                continue;
            }
            self.slots
                .insert(key.clone(), Slot::read_from_kv(record, revision));
            replaced.push(key);
        }
        Ok(replaced)
    }

    /// The snapshot `keys` name, from the working set.
    pub fn snapshot(&self, keys: &KeysOf) -> Snapshot<'_> {
        let get = |k: &Option<Key>| k.as_ref().and_then(|k| self.record(k));
        Snapshot {
            interaction: match get(&keys.interaction) {
                Some(Record::Interaction(i)) => Some(i),
                _ => None,
            },
            task: match get(&keys.task) {
                Some(Record::Task(t)) => Some(t),
                _ => None,
            },
            session: match get(&keys.session) {
                Some(Record::Session(s)) => Some(s),
                _ => None,
            },
            lane: match get(&keys.lane) {
                Some(Record::Lane(l)) => Some(l),
                _ => None,
            },
            rules: &[],
        }
    }

    /// Applies a decision's writes; returns the keys written. Every transition of a
    /// written record is kept without its effects (confirmed): the effects go into
    /// the same commit as the record, so a record never owes any.
    pub fn apply(&mut self, env: &CommandEnvelope, d: &Decision) -> Vec<Key> {
        let confirmed = |_: &Transition| true;
        let org = &env.org;
        let mut written = Vec::new();
        if let Some(s) = &d.session {
            let mut s = s.clone();
            s.outbox.confirm(confirmed);
            let key = Key::Session(Topology::session_key(org, &s.id));
            self.put(key.clone(), Record::Session(s));
            written.push(key);
        }
        if let Some(l) = &d.lane {
            let mut l = l.clone();
            l.outbox.confirm(confirmed);
            let key = Key::Lane(Topology::lane_key(org, &l.session, &l.lane));
            self.put(key.clone(), Record::Lane(l));
            written.push(key);
        }
        if let Some(t) = &d.task {
            let key = Key::Task(Topology::task_key(org, &t.id));
            self.put(key.clone(), Record::Task(t.clone()));
            written.push(key);
        }
        if let Some(i) = &d.interaction {
            let mut i = i.clone();
            i.outbox.confirm(confirmed);
            let key = Key::Interaction(Topology::interaction_key(org, &i.id));
            self.put(key.clone(), Record::Interaction(i));
            written.push(key);
        }
        written
    }

    fn put(&mut self, key: Key, record: Record) {
        let slot = self.slots.entry(key).or_insert(Slot {
            record: None,
            revision: 0,
            dirty: false,
            from_kv: false,
        });
        slot.record = Some(Arc::new(record));
        slot.dirty = true;
    }
}

async fn read(bus: &Bus, key: &Key) -> Result<(Option<Record>, u64), BusError> {
    read_as(bus, key, false).await
}

/// Reads `key` from KV: by direct get (any replica may answer), or, with
/// `from_leader`, from its bucket's stream leader.
async fn read_as(
    bus: &Bus,
    key: &Key,
    from_leader: bool,
) -> Result<(Option<Record>, u64), BusError> {
    async fn one<T: serde::de::DeserializeOwned>(
        bus: &Bus,
        b: holdpoint_bus::records::Bucket,
        k: String,
        from_leader: bool,
    ) -> Result<holdpoint_bus::Loaded<T>, BusError> {
        if from_leader {
            bus.load_from_leader(b, k).await
        } else {
            bus.load(b, k).await
        }
    }
    let k = key.kv().to_owned();
    let b = key.bucket();
    Ok(match key {
        Key::Interaction(_) => {
            let l = one::<Interaction>(bus, b, k, from_leader).await?;
            (l.value.map(Record::Interaction), l.revision)
        }
        Key::Task(_) => {
            let l = one::<Task>(bus, b, k, from_leader).await?;
            (l.value.map(Record::Task), l.revision)
        }
        Key::Session(_) => {
            let l = one::<Session>(bus, b, k, from_leader).await?;
            (l.value.map(Record::Session), l.revision)
        }
        Key::Lane(_) => {
            let l = one::<Lane>(bus, b, k, from_leader).await?;
            (l.value.map(Record::Lane), l.revision)
        }
    })
}

/// The JSON of a record, for its write.
///
/// # Errors
/// Permanent when it cannot be encoded.
pub fn encode(r: &Record) -> Result<bytes::Bytes, BusError> {
    let bytes = match r {
        Record::Interaction(i) => serde_json::to_vec(i),
        Record::Task(t) => serde_json::to_vec(t),
        Record::Session(s) => serde_json::to_vec(s),
        Record::Lane(l) => serde_json::to_vec(l),
    };
    bytes
        .map(Into::into)
        .map_err(|e| BusError::permanent("encode record", e))
}

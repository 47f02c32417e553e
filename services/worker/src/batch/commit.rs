//! Step 4 of a batch: commit every changed record and every effect as one atomic
//! batch, store the outcomes no record answers, and keep what landed in the caches.

use std::collections::BTreeMap;
use std::sync::Arc;

use holdpoint_bus::ErrorKind;
use holdpoint_bus::batch::BatchError;
use holdpoint_bus::commit::{Commit, as_bus_error};
use tracing::{debug, warn};

use super::{Cmd, Runner};
use crate::cache::Record;
use crate::working::{Key, WorkingSet, encode};

impl Runner {
    /// Commits every changed record of `ws` (each at the revision it was read at)
    /// and the effects of every command that wrote, in one batch. Returns each
    /// written key's new revision; `None` when nothing was stored, after failing
    /// every command of the round with the failure's kind (a conflict: decide
    /// again; a refusal of a group: decide again one command at a time; else
    /// transient, or permanent for one command the server refuses for good).
    pub(super) async fn commit(
        &self,
        ws: &WorkingSet,
        cmds: &mut [Cmd],
    ) -> Option<BTreeMap<Key, u64>> {
        let topo = &self.bus.topo;
        let mut commit = Commit::new();
        let mut keys: Vec<Key> = Vec::new();
        let built: Result<(), holdpoint_bus::BusError> = (|| {
            for (key, slot) in ws.slots().filter(|(_, s)| s.dirty) {
                let Some(record) = slot.record.as_deref() else {
                    continue;
                };
                commit
                    .record(topo, key.bucket(), key.kv(), slot.revision, encode(record)?)
                    .map_err(|e| holdpoint_bus::BusError::permanent("commit", e))?;
                keys.push(key.clone());
            }
            for c in cmds.iter().filter(|c| c.failure.is_none()) {
                if let Some(d) = c.decision.as_ref().filter(|d| d.writes()) {
                    commit.transition(topo, &d.effects, &c.traceparent)?;
                }
            }
            Ok(())
        })();
        if let Err(e) = built {
            warn!(error = %e, "the batch cannot be built");
            fail_all(cmds, e.kind(), &e.to_string());
            return None;
        }
        if commit.is_empty() {
            return Some(BTreeMap::new());
        }
        let transitions = commit.transitions();
        match self.committer.commit(commit).await {
            Ok(done) => Some(
                keys.into_iter()
                    .enumerate()
                    .filter_map(|(i, k)| done.sequence_of(i).map(|seq| (k, seq)))
                    .collect(),
            ),
            Err(e) => {
                let kind = match &e {
                    // A group the server will not take whole (too many messages,
                    // say) is committed one command at a time.
                    BatchError::Refused { .. } if transitions > 1 => ErrorKind::Conflict,
                    e => as_bus_error(e).kind(),
                };
                debug!(partition = self.partition, error = %e, ?kind, "commit failed; nothing was stored");
                fail_all(cmds, kind, &e.to_string());
                None
            }
        }
    }

    /// Stores the outcome of each decision no record answers (one that wrote
    /// nothing), and of every decision published under a retry's fresh id, all in
    /// flight at once; fails the commands whose outcome was not stored.
    ///
    /// Provisional refusals (`Outcome::is_decision` false: not found yet, a lane
    /// full, unavailable) are stored too, on purpose: inside the duplicate window a
    /// retry with the same key never reaches a worker, so the ingress must read
    /// *something* to know it should publish again under a fresh id.
    pub(super) async fn store_outcomes(&self, cmds: &mut [Cmd]) {
        let mut stores = Vec::new();
        for (i, c) in cmds.iter().enumerate() {
            let (None, Some(d)) = (&c.failure, &c.decision) else {
                continue;
            };
            if (d.writes() || d.replay) && c.ctx.command_id == c.outcome_key.as_str() {
                continue;
            }
            match serde_json::to_vec(&d.outcome) {
                Ok(body) => stores.push((i, self.bus.store_outcome(&c.outcome_key, body.into()))),
                Err(e) => warn!(error = %e, "outcome not encoded"),
            }
        }
        let (index, futures): (Vec<usize>, Vec<_>) = stores.into_iter().unzip();
        let results = futures::future::join_all(futures).await;
        for (i, r) in index.into_iter().zip(results) {
            let Err(e) = r else { continue };
            // A decision the records answer (one that wrote, or a replay) needs
            // its stored outcome only for a duplicate of this very retry id, which
            // the ingress publishes again under a fresh one when it finds none: it
            // is replied to anyway. A refusal has no other record: it is retried.
            let recorded = cmds[i]
                .decision
                .as_ref()
                .is_some_and(|d| d.writes() || d.replay);
            if recorded {
                warn!(command_id = %cmds[i].ctx.command_id, error = %e, "outcome of a retry not stored; replying anyway");
            } else {
                cmds[i].fail(e.kind(), e.to_string());
            }
        }
    }

    /// Keeps what landed in the caches; forgets what did not. After a failed
    /// commit (`landed` is `None`) every record the round read is forgotten: one of
    /// them is stale, and which one the server does not say.
    pub(super) fn remember(&mut self, ws: &WorkingSet, landed: Option<&BTreeMap<Key, u64>>) {
        let Some(landed) = landed else {
            for (key, _) in ws.slots() {
                self.forget(key);
            }
            return;
        };
        for (key, slot) in ws.slots() {
            let Some(record) = &slot.record else { continue };
            let revision = match (slot.dirty, landed.get(key)) {
                // Clean and from a cache: nothing new to keep.
                (false, _) if !slot.from_kv => continue,
                (false, _) => slot.revision,
                // Landed, even for a command that failed after the commit (its
                // outcome not stored): the record is at its new revision.
                (true, Some(rev)) => *rev,
                _ => {
                    self.forget(key);
                    continue;
                }
            };
            match (key, record.as_ref()) {
                (Key::Session(k), Record::Session(s)) => {
                    self.sessions.offer(k, Arc::new(s.clone()), revision);
                }
                _ => {
                    let bytes = encode(record).map_or(4096, |b| b.len() as u64);
                    self.cache
                        .put(key.cache_key(), record.clone(), revision, bytes);
                }
            }
        }
    }

    pub(super) fn forget(&mut self, key: &Key) {
        match key {
            Key::Session(k) => self.sessions.forget(k),
            other => self.cache.forget(&other.cache_key()),
        }
    }
}

/// Fails every command of the round not failed yet.
fn fail_all(cmds: &mut [Cmd], kind: ErrorKind, why: &str) {
    for c in cmds.iter_mut() {
        c.fail(kind, why);
    }
}

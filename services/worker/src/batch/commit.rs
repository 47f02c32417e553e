//! Steps 4 and 5 of a batch: write every changed record, then publish every
//! effect, all in flight at once; and what the runner keeps of what landed.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use holdpoint_bus::effects::Inflight;
use holdpoint_bus::records::PendingWrite;
use holdpoint_bus::{BusError, ErrorKind};
use holdpoint_domain::{CommandId, Decision};
use tracing::{debug, warn};

use super::{Cmd, Runner};
use crate::cache::Record;
use crate::relay::Owed;
use crate::working::{Key, WorkingSet, encode, outbox_of};

impl Runner {
    /// Writes every changed record (secondary ones, then interactions) and fails the
    /// commands a failed write concerns. Returns the new revision of each key that
    /// landed.
    pub(super) async fn write(&self, ws: &WorkingSet, cmds: &mut [Cmd]) -> BTreeMap<Key, u64> {
        let mut landed = BTreeMap::new();
        let mut tainted: HashSet<Key> = HashSet::new();
        for secondary in [true, false] {
            let dirty: Vec<(&Key, &crate::working::Slot)> = ws
                .slots()
                .filter(|(k, s)| s.dirty && k.is_secondary() == secondary && !tainted.contains(*k))
                .collect();
            let mut inflight: Vec<(Key, Result<PendingWrite, BusError>)> = Vec::new();
            for (key, slot) in dirty {
                let Some(record) = slot.record.as_deref() else {
                    continue;
                };
                let marker = outbox_of(record).and_then(|o| o.unconfirmed_marker());
                let started = match encode(record) {
                    Ok(body) => {
                        self.bus
                            .cas_start(
                                key.bucket(),
                                key.kv(),
                                slot.revision,
                                body,
                                marker.as_deref(),
                            )
                            .await
                    }
                    Err(e) => Err(e),
                };
                inflight.push((key.clone(), started));
            }
            for (key, started) in inflight {
                let result = match started {
                    Ok(w) => w.landed().await,
                    Err(e) => Err(e),
                };
                match result {
                    Ok(rev) => {
                        landed.insert(key, rev);
                    }
                    Err(e) => {
                        debug!(key = ?key, error = %e, "record write failed");
                        for c in cmds.iter_mut().filter(|c| c.writes.contains(&key)) {
                            c.fail(e.kind(), e.to_string());
                        }
                        tainted.insert(key);
                    }
                }
            }
            spread_failures(cmds, &mut tainted);
        }
        landed
    }

    /// Publishes the relayed effects and each surviving command's effects (and
    /// stored outcome); fails the commands whose PubAcks did not all come back.
    /// Returns the command ids of the relayed transitions that were confirmed.
    pub(super) async fn publish(
        &mut self,
        cmds: &mut [Cmd],
        relay: &BTreeMap<CommandId, Owed>,
    ) -> HashSet<CommandId> {
        let tp = holdpoint_telemetry::trace::TraceContext::new_root().header_value();
        let mut relayed: Vec<(CommandId, Result<Inflight, BusError>)> = Vec::new();
        for (id, o) in relay {
            relayed.push((
                id.clone(),
                self.bus.publish_owed(&o.effects, o.at, &tp).await,
            ));
        }
        let mut mine: Vec<Option<Result<Inflight, BusError>>> = Vec::with_capacity(cmds.len());
        for c in cmds.iter() {
            mine.push(match (&c.failure, &c.decision) {
                (None, Some(d)) => Some(self.publish_one(c, d).await),
                _ => None,
            });
        }
        let mut confirmed = HashSet::new();
        for (id, r) in relayed {
            let ok = match r {
                Ok(f) => f.confirmed().await.is_ok(),
                Err(_) => false,
            };
            if ok {
                self.confirmed.insert(id.as_str());
                confirmed.insert(id);
            }
        }
        for (c, r) in cmds.iter_mut().zip(mine) {
            let Some(r) = r else { continue };
            let result = match r {
                Ok(f) => f.confirmed().await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                warn!(command_id = %c.ctx.command_id, error = %e, "effects not confirmed; they stay owed");
                if let Some(d) = &c.decision
                    && d.writes()
                    && !d.effects.is_empty()
                {
                    self.owed.insert(
                        c.ctx.command_id.clone(),
                        Owed {
                            command_id: c.ctx.command_id.clone(),
                            at: c.ctx.now,
                            effects: d.effects.clone(),
                        },
                    );
                }
                c.fail(e.kind(), e.to_string());
            } else {
                self.owed.remove(&c.ctx.command_id);
                if c.decision.as_ref().is_some_and(|d| d.writes()) {
                    self.confirmed.insert(c.ctx.command_id.as_str());
                }
            }
        }
        confirmed
    }

    pub(super) async fn publish_one(&self, c: &Cmd, d: &Decision) -> Result<Inflight, BusError> {
        let mut out = self.bus.publish_effects(&d.effects, &c.traceparent).await?;
        // The outcome is stored where no record answers a repeated request: for a
        // decision that wrote nothing, or a retry under a fresh message id.
        // Provisional refusals (`Outcome::is_decision` false: not found yet, a lane
        // full, unavailable) are stored too, on purpose: inside the duplicate window
        // a retry with the same key never reaches a worker, so the ingress must read
        // *something* to know it should publish again under a fresh id, which is
        // a longer-lived key: what they say stops being true.
        if (!d.writes() && !d.replay) || c.ctx.command_id != c.outcome_key.as_str() {
            let body = serde_json::to_vec(&d.outcome)
                .map_err(|e| BusError::permanent("encode outcome", e))?;
            out.extend(self.bus.store_outcome(&c.outcome_key, body.into()).await?);
        }
        Ok(out)
    }

    /// Keeps what landed in the caches; forgets what did not.
    pub(super) fn remember(&mut self, ws: &WorkingSet, landed: &BTreeMap<Key, u64>, cmds: &[Cmd]) {
        let failed: HashSet<&Key> = cmds
            .iter()
            .filter(|c| c.failure.is_some())
            .flat_map(|c| c.writes.iter())
            .collect();
        for (key, slot) in ws.slots() {
            let Some(record) = &slot.record else { continue };
            let revision = match (slot.dirty, landed.get(key)) {
                // Clean and from a cache: nothing new to keep.
                (false, _) if !slot.from_kv => continue,
                (false, _) => slot.revision,
                (true, Some(rev)) if !failed.contains(key) => *rev,
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

/// Fails, to a fixed point, every command that touched a tainted record, and taints
/// every record such a command changed.
fn spread_failures(cmds: &mut [Cmd], tainted: &mut HashSet<Key>) {
    loop {
        let mut changed = false;
        for c in cmds.iter_mut() {
            let doomed = c.failure.is_some() || c.touches(tainted);
            if !doomed {
                continue;
            }
            if c.failure.is_none() {
                c.fail(
                    ErrorKind::Conflict,
                    "a record it depends on was not written",
                );
            }
            for k in &c.writes {
                if tainted.insert(k.clone()) {
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

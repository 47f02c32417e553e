//! What a runner owes and what it vouches for: effects it could not confirm, and
//! the checkpoint it may save.

use holdpoint_domain::Effects;
use time::OffsetDateTime;
use tracing::debug;

use super::Runner;

impl Runner {
    /// Publishes again the transitions whose effects this runner could not confirm.
    /// Returns true when none is owed any more.
    pub async fn retry_owed(&mut self) -> bool {
        if self.owed.is_empty() {
            return true;
        }
        let tp = holdpoint_telemetry::trace::TraceContext::new_root().header_value();
        let mut confirmed = Vec::new();
        for (id, o) in &self.owed {
            let r = match self.bus.publish_owed(&o.effects, o.at, &tp).await {
                Ok(f) => f.confirmed().await,
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => confirmed.push(id.clone()),
                Err(e) => {
                    debug!(command_id = %id, error = %e, "owed effects still not confirmed");
                    break;
                }
            }
        }
        for id in confirmed {
            self.confirmed.insert(id.as_str());
            self.owed.remove(&id);
            self.cfg.metrics.relayed.inc();
        }
        self.owed.is_empty()
    }

    /// The checkpoint this runner can vouch for now: every transition it committed
    /// before it is confirmed.
    pub fn vouched(&self, now: OffsetDateTime) -> OffsetDateTime {
        self.owed
            .values()
            .map(|o| o.at)
            .min()
            .unwrap_or(now)
            .min(now)
    }

    /// The checkpoint to save for the partition's next owners: [`Runner::vouched`],
    /// but no later than the takeover until the fence sweep ran (what a previous
    /// owner committed late is not this runner's to vouch for before that).
    pub fn checkpoint_to_save(&self, now: OffsetDateTime) -> OffsetDateTime {
        let own = self.vouched(now);
        self.fence.map_or(own, |taken| own.min(taken))
    }

    /// The effects owed, for tests and metrics.
    pub fn owed_effects(&self) -> impl Iterator<Item = &Effects> {
        self.owed.values().map(|o| &o.effects)
    }
}

//! The remembered approval rules a worker decides openings with ([`RuleBook`]):
//! every rule of `HP_RULES`, kept fresh by a KV watch, handed to the pure
//! `decide` as data for each approval's opening.
//!
//! **A new rule applies to the next hold.** A rule is stored (its PubAck awaited)
//! before the answer that wrote it is replied to, and a revocation before
//! `DELETE /v1/rules/{id}` returns; before deciding a batch that opens approvals, a
//! runner reads the bucket's last revision and waits (at most
//! [`RuleBook::FRESH_WAIT`]) until the watch has seen it ([`RuleBook::fresh`]). So a
//! hold opened after the answer (or the revoke) returned is decided with it.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use holdpoint_bus::Bus;
use holdpoint_bus::rules::RuleUpdate;
use holdpoint_domain::{OrgId, Rule};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

#[derive(Debug, Default)]
struct Book {
    /// Rules by organisation, then by KV key.
    by_org: HashMap<OrgId, BTreeMap<String, Rule>>,
    /// The organisation of each key (to forget a deleted key).
    org_of: HashMap<String, OrgId>,
}

#[derive(Debug, Default)]
struct Inner {
    book: RwLock<Book>,
    /// The highest bucket revision the watch delivered (0: none yet).
    seen: AtomicU64,
    /// Woken on every update.
    changed: Notify,
}

/// Every remembered rule, shared by a worker's partition runners.
#[derive(Debug, Clone, Default)]
pub struct RuleBook(Arc<Inner>);

impl RuleBook {
    /// How long [`RuleBook::fresh`] waits for the watch to catch up.
    pub const FRESH_WAIT: Duration = Duration::from_secs(2);

    /// An empty book (fill it with [`RuleBook::watch`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The rules of `org` (live or not; matching is the domain's).
    pub fn for_org(&self, org: &OrgId) -> Vec<Rule> {
        let book = self.0.book.read().unwrap_or_else(|p| p.into_inner());
        book.by_org
            .get(org)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    fn apply(&self, u: RuleUpdate) {
        {
            let mut book = self.0.book.write().unwrap_or_else(|p| p.into_inner());
            if let Some(old) = book.org_of.remove(&u.key)
                && let Some(m) = book.by_org.get_mut(&old)
            {
                m.remove(&u.key);
            }
            if let Some(rule) = u.rule {
                book.org_of.insert(u.key.clone(), rule.org.clone());
                book.by_org
                    .entry(rule.org.clone())
                    .or_default()
                    .insert(u.key, rule);
            }
        }
        self.0.seen.fetch_max(u.revision, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }

    /// Waits until the watch has delivered every rule written before this call (the
    /// bucket's last revision), at most [`RuleBook::FRESH_WAIT`]. False when it did
    /// not get there (the runner then decides with what it has, and says so).
    pub async fn fresh(&self, bus: &Bus) -> bool {
        let target = match bus.rules_revision().await {
            Ok(t) => t,
            Err(e) => {
                debug!(error = %e, "cannot read the rules bucket's revision");
                return false;
            }
        };
        let deadline = tokio::time::Instant::now() + Self::FRESH_WAIT;
        loop {
            let notified = self.0.changed.notified();
            if self.0.seen.load(Ordering::SeqCst) >= target {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.0.seen.load(Ordering::SeqCst) >= target;
            }
        }
    }

    /// Keeps the book fresh from `HP_RULES` until `shutdown`. When the watch breaks,
    /// it starts again (with the bucket's history, so nothing is missed).
    pub async fn watch(self, bus: Bus, shutdown: CancellationToken) {
        crate::watch::watch(
            "rule watch",
            &shutdown,
            || bus.watch_rules(),
            |update| {
                self.apply(update);
                ControlFlow::Continue(())
            },
            || warn!("rule watch broke; watching again"),
        )
        .await;
    }
}

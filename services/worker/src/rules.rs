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

    /// The rules of `org` that are live at `now` (not revoked, not expired). Rules
    /// of `org` that have expired by `now` leave the book here, the first time
    /// they are asked for after their expiry: nothing brings an expired rule back
    /// (its record is never rewritten but to revoke it), so a worker holds in
    /// memory only rules that may still decide. Matching, scope and digest
    /// included, stays the domain's.
    pub fn for_org(&self, org: &OrgId, now: time::OffsetDateTime) -> Vec<Rule> {
        {
            let book = self.0.book.read().unwrap_or_else(|p| p.into_inner());
            match book.by_org.get(org) {
                None => return Vec::new(),
                Some(m) if m.values().all(|r| r.live(now)) => {
                    return m.values().cloned().collect();
                }
                Some(_) => {}
            }
        }
        let mut book = self.0.book.write().unwrap_or_else(|p| p.into_inner());
        let Book { by_org, org_of } = &mut *book;
        let Some(m) = by_org.get_mut(org) else {
            return Vec::new();
        };
        m.retain(|key, r| {
            let keep = r.live(now);
            if !keep {
                org_of.remove(key);
            }
            keep
        });
        let live = m.values().cloned().collect();
        if m.is_empty() {
            by_org.remove(org);
        }
        live
    }

    /// How many rules the book holds, every organisation's (what a worker keeps in
    /// memory).
    pub fn len(&self) -> usize {
        let book = self.0.book.read().unwrap_or_else(|p| p.into_inner());
        book.org_of.len()
    }

    /// Whether the book holds no rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn apply(&self, u: RuleUpdate) {
        {
            let mut book = self.0.book.write().unwrap_or_else(|p| p.into_inner());
            if let Some(old) = book.org_of.remove(&u.key)
                && let Some(m) = book.by_org.get_mut(&old)
            {
                m.remove(&u.key);
            }
            // A revoked rule never matches again (a rule is stored as a create, so
            // nothing brings it back): the book keeps only the others.
            if let Some(rule) = u.rule.filter(|r| r.revoked.is_none()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, revoked: bool) -> Rule {
        let mut v = serde_json::json!({
            "id": id, "org": "acme", "effect": "allow", "server": "github",
            "tool": "merge", "scope": "organisation", "createdBy": "ana",
            "createdAt": "2026-01-01T00:00:00.000Z", "fromInteraction": "eff_1",
        });
        if revoked {
            v["revoked"] = serde_json::json!({"by": "ana", "at": "2026-01-02T00:00:00.000Z"});
        }
        serde_json::from_value(v).expect("a rule")
    }

    fn update(revision: u64, r: &Rule) -> RuleUpdate {
        RuleUpdate {
            key: format!("acme.{}", r.id),
            revision,
            rule: Some(r.clone()),
        }
    }

    #[test]
    fn a_revoked_rule_leaves_the_book() {
        let book = RuleBook::new();
        let org = OrgId::parse("acme").expect("org");
        let (a, b) = (
            rule("rul_0123456789abcdef0123456789abcdef", false),
            rule("rul_fedcba9876543210fedcba9876543210", false),
        );
        book.apply(update(1, &a));
        book.apply(update(2, &b));
        let now = time::OffsetDateTime::now_utc();
        assert_eq!(book.for_org(&org, now).len(), 2);
        let revoked = rule(a.id.as_str(), true);
        book.apply(update(3, &revoked));
        assert_eq!(book.for_org(&org, now), vec![b]);
        assert_eq!(book.len(), 1);
        assert_eq!(book.0.seen.load(Ordering::SeqCst), 3);
        let other = OrgId::parse("globex").expect("org");
        assert!(book.for_org(&other, now).is_empty());
    }

    #[test]
    fn an_expired_rule_leaves_the_book_when_it_is_next_asked_for() {
        let book = RuleBook::new();
        let org = OrgId::parse("acme").expect("org");
        let expires = time::macros::datetime!(2026-06-01 12:00 UTC);
        let mut short = rule("rul_0123456789abcdef0123456789abcdef", false);
        short.expires_at = Some(expires);
        let long = rule("rul_fedcba9876543210fedcba9876543210", false);
        book.apply(update(1, &short));
        book.apply(update(2, &long));
        let before = expires - time::Duration::seconds(1);
        assert_eq!(book.for_org(&org, before).len(), 2);
        assert_eq!(book.len(), 2, "a live rule stays");
        assert_eq!(book.for_org(&org, expires), vec![long.clone()]);
        assert_eq!(book.len(), 1, "the expired rule is gone from memory");
        // Asking with an earlier clock afterwards does not bring it back.
        assert_eq!(book.for_org(&org, before), vec![long]);
    }
}

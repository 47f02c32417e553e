//! Remembered approval rules (KV `HP_RULES`, key `<org>.<ruleId>`) and the decision
//! audit (`HP_AUDIT`, subject `hp.audit.<org>`).
//!
//! A rule is written by the worker as an effect of the answer that remembered it
//! ([`rule_subject`]: a KV put with `Nats-Msg-Id` `rule-<ruleId>`, so a relayed
//! effect is stored once), revoked here by a compare-and-set on its revision, and
//! watched by every worker ([`Bus::watch_rules`]). Every read is filtered to one
//! organisation's keys or subject, so another organisation's rules and audit records
//! are never read.

use async_nats::jetstream::{consumer, kv};
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use holdpoint_domain::{OrgId, PersonId, Rule, RuleId, rulebook};

use crate::events::Stored;
use crate::records::{Bucket, Cas, Loaded, Page};
use crate::{Bus, BusError, Topology};

/// Most rules scanned for one page of `GET /v1/rules`.
const RULE_SCAN_CAP: usize = 10_000;

/// Most audit records [`Bus::audit_holds`] reads to find one.
pub const AUDIT_PROBE: usize = 1_000;

/// A stored CloudEvent's id, all a probe reads of it.
#[derive(serde::Deserialize)]
struct IdOnly {
    id: String,
}

/// The KV key of rule `id` of `org`: `<org>.<ruleId>`.
pub fn rule_key(org: &OrgId, id: &RuleId) -> String {
    format!("{}.{}", org.token(), id.token())
}

/// The subject a rule is stored on (a KV put): `$KV.HP_RULES.<org>.<ruleId>`.
pub fn rule_subject(topo: &Topology, r: &Rule) -> String {
    format!("$KV.{}.{}", topo.rules_bucket(), rule_key(&r.org, &r.id))
}

/// One change seen by [`Bus::watch_rules`].
#[derive(Debug, Clone)]
pub struct RuleUpdate {
    /// The KV key (`<org>.<ruleId>`).
    pub key: String,
    /// The KV revision (the bucket stream's sequence) of the change.
    pub revision: u64,
    /// The rule as written; `None` for a deleted key or a value that does not decode.
    pub rule: Option<Rule>,
}

impl Bus {
    /// Reads rule `id` of `org` with its revision.
    ///
    /// # Errors
    /// As [`Bus::load`].
    pub async fn load_rule(&self, org: &OrgId, id: &RuleId) -> Result<Loaded<Rule>, BusError> {
        self.load(Bucket::Rules, rule_key(org, id)).await
    }

    /// One page of `org`'s rules (revoked and expired ones included), in the order of
    /// their last write, after the bucket stream's sequence `after` (0: from the start).
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn list_rules(
        &self,
        org: &OrgId,
        after: u64,
        limit: usize,
    ) -> Result<Page<Rule>, BusError> {
        self.list_page(
            Bucket::Rules,
            org,
            |r: &Rule| &r.org == org,
            after,
            limit,
            RULE_SCAN_CAP,
        )
        .await
    }

    /// Revokes rule `id` of `org` as `by` at `now` (compare-and-set on its revision,
    /// retried on a lost race) and stores the `rule-revoked` audit record. `None` when
    /// there is no such rule.
    ///
    /// Revoking a revoked rule writes nothing. Its audit record is stored again only
    /// when the audit does not hold it ([`Bus::audit_holds`]): a call that died
    /// between the compare-and-set and the audit record is completed by the next
    /// one, and a repeat at any later time adds no second record.
    ///
    /// # Errors
    /// Transient on NATS failure (retrying is safe).
    pub async fn revoke_rule(
        &self,
        org: &OrgId,
        id: &RuleId,
        by: &PersonId,
        now: time::OffsetDateTime,
    ) -> Result<Option<Rule>, BusError> {
        let key = rule_key(org, id);
        for _ in 0..8 {
            let loaded = self.load_rule(org, id).await?;
            let Some(rule) = loaded.value.filter(|r| &r.org == org) else {
                return Ok(None);
            };
            let (next, event) = rulebook::revoke(&rule, by, now);
            if let Some(earlier) = &rule.revoked {
                if self.audit_holds(org, &event.id, earlier.at).await? {
                    return Ok(Some(next));
                }
            } else {
                let body: Bytes = serde_json::to_vec(&next)
                    .map_err(|e| BusError::permanent("encode rule", e))?
                    .into();
                if self
                    .cas(Bucket::Rules, &key, loaded.revision, body, None)
                    .await?
                    == Cas::Conflict
                {
                    continue;
                }
            }
            let body: Bytes = serde_json::to_vec(&event)
                .map_err(|e| BusError::permanent("encode audit record", e))?
                .into();
            let (op, ack) = self
                .publish_keyed(
                    "publish audit record",
                    self.topo.audit_publish_subject(org),
                    &event.id,
                    Some("application/cloudevents+json"),
                    "",
                    body,
                )
                .await?;
            ack.await.map_err(|e| BusError::publish(op, &e))?;
            return Ok(Some(next));
        }
        Err(BusError::conflict("revoke rule"))
    }

    /// Whether `org`'s audit holds the record `id`, written at `at` or in the few
    /// seconds after it: scans at most [`AUDIT_PROBE`] records stored on
    /// `hp.audit.<org>` from 5 s before `at`. A record past the scan is missed, so
    /// the caller stores it again: for a revocation, that takes an organisation
    /// writing over [`AUDIT_PROBE`] audit records within seconds of it.
    ///
    /// # Errors
    /// Transient when NATS does not answer in time.
    pub async fn audit_holds(
        &self,
        org: &OrgId,
        id: &str,
        at: time::OffsetDateTime,
    ) -> Result<bool, BusError> {
        let from = at - time::Duration::seconds(5);
        let stored = self
            .read_stored(
                self.topo.audit_stream(),
                self.topo.audit_subject(org),
                consumer::DeliverPolicy::ByStartTime { start_time: from },
                AUDIT_PROBE,
                "probe audit",
            )
            .await?;
        Ok(stored
            .iter()
            .any(|s| serde_json::from_slice::<IdOnly>(&s.payload).is_ok_and(|e| e.id == id)))
    }

    /// The rules bucket's last revision (its stream's last sequence; 0 when empty): a
    /// watcher that has seen this revision has seen every rule written before the call.
    ///
    /// # Errors
    /// Transient when NATS does not answer.
    pub async fn rules_revision(&self) -> Result<u64, BusError> {
        let stream = self
            .js
            .get_stream(format!("KV_{}", self.topo.rules_bucket()))
            .await
            .map_err(|e| BusError::transient("rules bucket info", e))?;
        Ok(stream.cached_info().state.last_sequence)
    }

    /// Every rule of every organisation (the current value of each key), then every
    /// change from then on: a KV watch with history of the whole bucket. The stream
    /// ends when the watch breaks; watch again (the history comes again).
    ///
    /// # Errors
    /// Transient when the watch cannot be started.
    pub async fn watch_rules(&self) -> Result<BoxStream<'static, RuleUpdate>, BusError> {
        let watch = self
            .rules
            .watch_with_history("*.*")
            .await
            .map_err(|e| BusError::transient("watch rules", e))?;
        Ok(watch
            .take_while(|e| futures::future::ready(e.is_ok()))
            .filter_map(|e| async move {
                let e = e.ok()?;
                let rule = (e.operation == kv::Operation::Put)
                    .then(|| serde_json::from_slice::<Rule>(&e.value).ok())
                    .flatten();
                Some(RuleUpdate {
                    key: e.key,
                    revision: e.revision,
                    rule,
                })
            })
            .boxed())
    }

    /// One page of `org`'s decision audit: at most `limit` records stored on
    /// `hp.audit.<org>` after the audit stream's sequence `after` (0: from the oldest
    /// kept), oldest first. Each read waits at most 5 s.
    ///
    /// # Errors
    /// Transient when NATS does not answer in time.
    pub async fn read_audit(
        &self,
        org: &OrgId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Stored>, BusError> {
        self.read_stored(
            self.topo.audit_stream(),
            self.topo.audit_subject(org),
            consumer::DeliverPolicy::ByStartSequence {
                start_sequence: after.saturating_add(1),
            },
            limit,
            "read audit",
        )
        .await
    }
}

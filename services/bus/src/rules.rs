//! Remembered approval rules (state bucket `HP_STATE`, key `rule.<org>.<ruleId>`)
//! and the decision audit (`HP_AUDIT`, subject `hp.audit.<org>`).
//!
//! A rule is written by the worker in the batch of the answer that remembered it
//! (a new key: see [`crate::commit`]), revoked here by one batch that writes the
//! revoked rule at the revision read and its `rule-revoked` audit record, and
//! watched by every worker ([`Bus::watch_rules`]). Every read is filtered to one
//! organisation's keys or subject, so another organisation's rules and audit records
//! are never read.

use async_nats::jetstream::{consumer, kv};
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use holdpoint_domain::{OrgId, PersonId, Rule, RuleId, rulebook};

use crate::batch::BatchError;
use crate::commit::Commit;
use crate::events::Stored;
use crate::records::{Bucket, Loaded, Page};
use crate::{Bus, BusError};

/// Most rules scanned for one page of `GET /v1/rules`.
const RULE_SCAN_CAP: usize = 10_000;

/// Most audit records [`Bus::audit_holds`] reads to find one.
pub const AUDIT_PROBE: usize = 1_000;

/// A stored CloudEvent's id, all a probe reads of it.
#[derive(serde::Deserialize)]
struct IdOnly {
    id: String,
}

/// The state key of rule `id` of `org`: `rule.<org>.<ruleId>`.
pub fn rule_key(org: &OrgId, id: &RuleId) -> String {
    format!("rule.{}.{}", org.token(), id.token())
}

/// One change seen by [`Bus::watch_rules`].
#[derive(Debug, Clone)]
pub struct RuleUpdate {
    /// The state key (`rule.<org>.<ruleId>`).
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

    /// One page of `org`'s rules, in the order of their last write, after the
    /// bucket stream's sequence `after` (0: from the start): with `live_at`, only
    /// those live at that moment ([`Rule::live`]: not revoked, not expired), else
    /// every stored one.
    ///
    /// # Errors
    /// Transient on NATS failure.
    pub async fn list_rules(
        &self,
        org: &OrgId,
        after: u64,
        limit: usize,
        live_at: Option<time::OffsetDateTime>,
    ) -> Result<Page<Rule>, BusError> {
        self.list_page(
            Bucket::Rules,
            org,
            |r: &Rule| &r.org == org && live_at.is_none_or(|now| r.live(now)),
            after,
            limit,
            RULE_SCAN_CAP,
        )
        .await
    }

    /// Revokes rule `id` of `org` as `by` at `now` and stores its `rule-revoked`
    /// audit record, both in one batch written at the rule's revision (retried on
    /// a lost race). `None` when there is no such rule. Revoking a revoked rule
    /// writes nothing: its audit record was stored with the revocation.
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
        for attempt in 0..8u32 {
            let loaded = self.load_rule(org, id).await?;
            let Some(rule) = loaded.value.filter(|r| &r.org == org) else {
                return Ok(None);
            };
            if rule.revoked.is_some() {
                return Ok(Some(rule));
            }
            let (next, event) = rulebook::revoke(&rule, by, now);
            let body: Bytes = serde_json::to_vec(&next)
                .map_err(|e| BusError::permanent("encode rule", e))?
                .into();
            let mut c = Commit::new();
            c.record(&self.topo, Bucket::Rules, &key, loaded.revision, body)
                .map_err(|e| BusError::permanent("revoke rule", e))?;
            c.transition(
                &self.topo,
                &holdpoint_domain::Effects {
                    audit: vec![event],
                    ..Default::default()
                },
                "",
            )?;
            let batch_id = format!(
                "revoke-{}-{attempt}",
                &holdpoint_domain::digest(&[&key, &loaded.revision.to_string()])[..32]
            );
            match self.commit(&batch_id, &c).await {
                Ok(_) => return Ok(Some(next)),
                Err(BatchError::Conflict(_) | BatchError::Duplicate(_)) => continue,
                Err(e) => return Err(crate::commit::as_bus_error(&e)),
            }
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

    /// The last revision of any rule (the state stream's sequence of the last rule
    /// write; 0 when there is none): a watcher that has seen this revision has seen
    /// every rule written before the call.
    ///
    /// # Errors
    /// Transient when NATS does not answer.
    pub async fn rules_revision(&self) -> Result<u64, BusError> {
        let stream = self
            .js
            .get_stream_no_info(self.topo.state_stream())
            .await
            .map_err(|e| BusError::transient("rules revision", e))?;
        match stream
            .get_last_raw_message_by_subject(&format!("$KV.{}.rule.>", self.topo.state_bucket()))
            .await
        {
            Ok(m) => Ok(m.sequence),
            Err(e)
                if e.kind()
                    == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
            {
                Ok(0)
            }
            Err(e) => Err(BusError::transient("rules revision", e)),
        }
    }

    /// Every rule of every organisation (the current value of each key), then every
    /// change from then on: a KV watch with history of the whole bucket. The stream
    /// ends when the watch breaks; watch again (the history comes again).
    ///
    /// # Errors
    /// Transient when the watch cannot be started.
    pub async fn watch_rules(&self) -> Result<BoxStream<'static, RuleUpdate>, BusError> {
        let watch = self
            .state
            .watch_with_history("rule.*.*")
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

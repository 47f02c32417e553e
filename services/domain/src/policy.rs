//! Remembered approval rules, as data: a person who approves or denies a held call
//! may ask Holdpoint to remember the decision ([`Remember`]); the answer then writes
//! a [`Rule`] to the KV bucket `HP_RULES` (key `<org>.<ruleId>`). Matching, writing
//! and revoking are in [`crate::rulebook`].

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::digest::digest;
use crate::error::{ErrorCode, Rejection};
use crate::ids::{AgentId, CommandId, InteractionId, OrgId, PersonId, RuleId, SessionId};

/// Longest lifetime a remembered rule may be given, in seconds (366 days).
pub const MAX_EXPIRES_IN: u64 = 366 * 24 * 3600;

/// How widely a remembered rule applies, from the most specific to the widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum RuleScope {
    /// Calls held in the same runtime session as the remembered one.
    Session,
    /// Calls held for the same agent (the `agent` the runtime named when it opened
    /// the approval), in any session.
    Agent,
    /// Every call of the organisation.
    Organisation,
}

impl RuleScope {
    /// Higher is more specific: session 3, agent 2, organisation 1.
    pub fn specificity(self) -> u8 {
        match self {
            RuleScope::Session => 3,
            RuleScope::Agent => 2,
            RuleScope::Organisation => 1,
        }
    }

    /// The wire word (`session`, `agent`, `organisation`).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScope::Session => "session",
            RuleScope::Agent => "agent",
            RuleScope::Organisation => "organisation",
        }
    }
}

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum RuleEffect {
    /// The held call is released (`approvedBy` names the rule and its author).
    Allow,
    /// The held call finishes with the error `tool.denied`.
    Deny,
}

/// The narrowing of a remembered rule to the call's exact arguments: `true` narrows
/// to the digest of the call being answered, `false` (or leaving it out) does not
/// narrow, and a string must equal that digest (hex SHA-256 of the canonical JSON
/// of the arguments, as shown with the approval), else the answer is `409 NRY-0010`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Narrowing {
    /// `true`: narrow to this call's digest; `false`: match any arguments.
    This(bool),
    /// The digest the person saw; must be the call's.
    Digest(String),
}

/// `remember` on an approval's answer (REST body or the A2A extension metadata):
/// write a rule from this decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Remember {
    /// Where the rule applies: `session`, `agent` or `organisation`.
    pub scope: RuleScope,
    /// Seconds the rule stays live after the answer (1 to 31622400, 366 days); never
    /// expires when left out.
    #[serde(
        default,
        deserialize_with = "crate::integral::opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_in: Option<u64>,
    /// Narrow the rule to the call's exact arguments (see [`Narrowing`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_digest: Option<Narrowing>,
}

impl Remember {
    /// Checks what can be checked without the interaction: the lifetime's bounds.
    ///
    /// # Errors
    /// `NRY-0001` when `expiresIn` is 0 or above [`MAX_EXPIRES_IN`].
    pub fn check(&self) -> Result<(), Rejection> {
        match self.expires_in {
            Some(s) if s == 0 || s > MAX_EXPIRES_IN => Err(Rejection::new(
                ErrorCode::InvalidRequest,
                format!("remember.expiresIn must be 1 to {MAX_EXPIRES_IN} seconds"),
            )),
            _ => Ok(()),
        }
    }
}

/// A rule's revocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Revocation {
    /// The person who revoked it.
    pub by: PersonId,
    /// When, RFC 3339.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
}

/// A remembered approval rule (KV `HP_RULES`, key `<org>.<ruleId>`; the body of
/// `GET /v1/rules/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The rule's id (`rul_` and 32 hex digits, derived from the answer that wrote it).
    pub id: RuleId,
    /// The owning organisation; a rule never matches nor shows in another.
    pub org: OrgId,
    /// `allow` or `deny`.
    pub effect: RuleEffect,
    /// The MCP-style server of the calls it decides.
    pub server: String,
    /// The tool of the calls it decides.
    pub tool: String,
    /// Where it applies.
    pub scope: RuleScope,
    /// The session it applies in (scope `session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// The agent it applies to (scope `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// When narrowed: the only arguments digest it matches (hex SHA-256 of the
    /// canonical JSON of the arguments). The arguments themselves are never kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_digest: Option<String>,
    /// The person whose answer wrote it.
    pub created_by: PersonId,
    /// When it was written, RFC 3339.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub created_at: OffsetDateTime,
    /// When it stops matching, RFC 3339; never when absent.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<OffsetDateTime>,
    /// The approval whose answer wrote it.
    pub from_interaction: InteractionId,
    /// Set once it is revoked; a revoked rule never matches again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Revocation>,
}

impl Rule {
    /// True when the rule may still decide at `now`: not revoked, not expired.
    pub fn live(&self, now: OffsetDateTime) -> bool {
        self.revoked.is_none() && self.expires_at.is_none_or(|e| now < e)
    }

    /// What `approvedBy` says for a call this rule decided: the author and the rule
    /// (`alice (rule rul_…)`), the author cut so that it fits a person id.
    pub fn approved_by(&self) -> PersonId {
        let suffix = format!(" (rule {})", self.id);
        let room = crate::ids::MAX_PERSON_LEN.saturating_sub(suffix.chars().count());
        let author: String = self.created_by.as_str().chars().take(room).collect();
        PersonId::parse(format!("{author}{suffix}")).unwrap_or_else(|_| self.created_by.clone())
    }

    /// The `Nats-Msg-Id` of its KV put: `rule-<ruleId>`. A dedup key: changing it
    /// would break exactly-once across an upgrade.
    pub fn msg_id(&self) -> String {
        format!("rule-{}", self.id)
    }
}

/// The id of the rule written by the answer whose command id is `command_id`: the
/// same answer, decided again, writes the same rule.
pub fn rule_id(command_id: &CommandId) -> RuleId {
    let d = digest(&["rule", command_id.as_str()]);
    RuleId::parse(format!("rul_{}", &d[..32])).unwrap_or_else(|_| unreachable_id())
}

fn unreachable_id() -> RuleId {
    // `rul_` + 32 hex digits always parses; this keeps the function total.
    RuleId::parse("rul_0").unwrap_or_else(|_| unreachable_id())
}

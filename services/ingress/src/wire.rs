//! The REST API's request bodies, queries and response bodies: the Rust types the
//! handlers read and write, and that `holdpoint-contracts` turns into
//! `schemas/rest/*.json` and the OpenAPI document (feature `schema`). Every
//! request type refuses unknown fields.
//!
//! | type | where |
//! |---|---|
//! | [`AnswerBody`] | `POST /v1/questions/{questionId}/answer` |
//! | [`ApproveBody`] | `POST /v1/interactions/{id}/approve` |
//! | [`RespondBody`] | `POST /v1/interactions/{id}/respond` |
//! | [`BatchBody`], [`BatchResults`] | `POST /v1/answers` |
//! | [`ListQuery`], [`Page`] | `GET /v1/interactions` |
//! | [`MessageBody`], [`MessageAccepted`] | `POST /v1/sessions/{sessionId}/messages` |
//! | [`EventsQuery`] | `GET /v1/events` |
//! | [`RulesQuery`], [`RulePage`] | `GET /v1/rules` (a rule itself is `holdpoint_domain::Rule`) |
//! | [`AuditQuery`], [`AuditPage`] | `GET /v1/audit` |

use holdpoint_domain::{ErrorBody, Event, InteractionView, OptionAnswer, Remember, Rule};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest page of `GET /v1/interactions`.
pub const MAX_PAGE: usize = 500;

/// Default page of `GET /v1/interactions`.
pub const DEFAULT_PAGE: usize = 50;

/// Most records one listing request reads; a page may come back short (even empty)
/// with a `nextCursor` to continue from.
pub const SCAN_CAP: usize = 10_000;

/// `POST /v1/questions/{questionId}/answer` body: one entry per question asked, in
/// order (1 to 4).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// One entry per question, in the order asked (1 to 4): `options` are indices
    /// into the option list as `question-asked` sent it, `text` only where the
    /// question allows it.
    pub answers: Vec<OptionAnswer>,
    /// Never accepted here: no rule can be written about a question, so any
    /// `remember` is `400 NRY-0025` and nothing is written.
    #[serde(default)]
    pub remember: Option<Value>,
}

/// `POST /v1/interactions/{id}/approve` body: `approved`, or a boolean
/// `value`; exactly one of the two.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApproveBody {
    /// `true` releases the held call exactly as shown (or as edited, with
    /// `editedArguments`); `false` fails it as `tool.denied`.
    #[serde(default)]
    pub approved: Option<bool>,
    /// A boolean reads as `approved`; anything else is `NRY-0001`. A JSON `null`
    /// is a value (`Some(Value::Null)`), distinct from an absent field (`None`).
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Value>,
    /// Travels with the decision.
    #[serde(default)]
    pub reason: Option<String>,
    /// `call.argumentsDigest` of `GET /v1/interactions/{id}`: when the held
    /// arguments are not those, the answer is `409 NRY-0010`. Required with
    /// `editedArguments` (the digest of the arguments the person edited).
    #[serde(default)]
    pub arguments_digest: Option<String>,
    /// Edit, then approve: the arguments to release instead of the held ones, a JSON
    /// object of at most 262,144 bytes of canonical JSON and 32 levels, with
    /// `approved: true` and `argumentsDigest`. A hold without `editable` refuses it
    /// (`409 NRY-0028`); not an object, too large, or without `approved: true` or
    /// the digest is `400 NRY-0029`; with `remember` `400 NRY-0033`. Nothing changes
    /// on a refusal. JSON `null` is an edit that is not an object.
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("type" = "object", "additionalProperties" = true))
    )]
    pub edited_arguments: Option<Value>,
    /// Remember this decision as a rule (`scope`, optional `expiresIn` seconds,
    /// optional `argumentsDigest` narrowing): later holds of the same server and tool
    /// in that scope are decided by the rule at once. Approvals only: on a question
    /// or a connection it is `400 NRY-0025` and nothing is written.
    #[serde(default)]
    pub remember: Option<Remember>,
}

/// `POST /v1/interactions/{id}/respond` body: `value`, or `approved`
/// read as the value; exactly one of the two.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RespondBody {
    /// Any JSON, read by the interaction's kind (`{"answers": [...]}` is checked
    /// like the answer body; `{"connected": true}` or `true` connects). JSON `null`
    /// is a value like any other (`Some(Value::Null)`); only an absent field is
    /// `None`.
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Value>,
    /// Read as the value.
    #[serde(default)]
    pub approved: Option<bool>,
    /// Travels with the answer.
    #[serde(default)]
    pub reason: Option<String>,
    /// As on `approve`: approvals only (`400 NRY-0025` on a question or a
    /// connection, nothing written).
    #[serde(default)]
    pub remember: Option<Remember>,
}

/// Most items in one `POST /v1/answers`.
pub const MAX_BATCH: usize = 100;

/// `POST /v1/answers` body: 1 to 100 answers, each decided on its own as its
/// single operation would decide it (not one transaction).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// The answers, 1 to 100; the results come back in this order.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_BATCH)))]
    pub items: Vec<BatchItem>,
}

/// Which single operation a batch item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum BatchOperation {
    /// `POST /v1/interactions/{id}/approve`: `body` is an [`ApproveBody`].
    Approve,
    /// `POST /v1/interactions/{id}/respond`: `body` is a [`RespondBody`].
    Respond,
    /// `POST /v1/questions/{questionId}/answer`: `body` is an [`AnswerBody`].
    Answer,
}

/// One answer of a batch: what its single operation takes in its path, its body
/// and its `Idempotency-Key` header.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BatchItem {
    /// The interaction (for `answer`, the question's id).
    #[cfg_attr(feature = "schema", schemars(with = "holdpoint_domain::InteractionId"))]
    pub interaction_id: String,
    /// `approve`, `respond` or `answer`.
    pub operation: BatchOperation,
    /// The single operation's body, read exactly as that operation reads it.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("type" = "object", "additionalProperties" = true))
    )]
    pub body: Value,
    /// This item's idempotency key (1 to 128 printable ASCII characters): the same
    /// key again, in this batch or another request, replays this item's outcome.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "holdpoint_domain::IdempotencyKey")
    )]
    pub idempotency_key: String,
}

/// `200` body of `POST /v1/answers`: one result per item, in the items' order.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BatchResults {
    /// One per item, in order.
    pub results: Vec<BatchResult>,
}

/// How far an approval that needs several distinct people has come (README
/// "Two-person approvals"): the `202` body of an approval counted while the call
/// still waits, and a batch item's `approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalProgress {
    /// Distinct approvals counted so far, the caller's included (1 to 4: the last
    /// one needed releases the call and answers `204`).
    pub given: u8,
    /// How many distinct people the hold needs (2 to 5).
    pub required: u8,
}

/// `202` body of `approve` (or `respond`) when the caller's approval was counted
/// and the held call waits for approvals from other people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalCounted {
    /// The interaction (1 to 128 printable ASCII characters, no spaces).
    pub interaction_id: String,
    /// Approvals counted so far and approvals needed.
    pub approvals: ApprovalProgress,
}

/// What one batch item's single operation would have answered.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    /// The item's `interactionId`, as sent.
    pub interaction_id: String,
    /// The HTTP status the single operation would have answered: `204` when
    /// answered, `202` when an approval was counted and the call waits for other
    /// people's (then `approvals`), else the error's status.
    pub status: u16,
    /// With `202`: the approvals counted so far and needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalProgress>,
    /// The stable error code when `status` is not `204` (see `schemas/errors.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<holdpoint_domain::ErrorCode>")
    )]
    pub code: Option<String>,
    /// The code's title, with `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What went wrong, with `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl BatchResult {
    /// The result of the item about `interaction_id`: `204` on `Ok(None)`, `202`
    /// with the progress on `Ok(Some(_))`, the error's status and body otherwise.
    pub fn of(
        interaction_id: String,
        outcome: Result<Option<ApprovalProgress>, &holdpoint_domain::Rejection>,
    ) -> Self {
        match outcome {
            Ok(approvals) => BatchResult {
                interaction_id,
                status: if approvals.is_some() { 202 } else { 204 },
                approvals,
                code: None,
                title: None,
                message: None,
            },
            Err(r) => {
                let body = ErrorBody::from(r);
                BatchResult {
                    interaction_id,
                    status: r.code.spec().status,
                    approvals: None,
                    code: Some(body.code),
                    title: Some(body.title),
                    message: Some(body.message),
                }
            }
        }
    }
}

/// Reads a field that is present as `Some`, whatever its JSON value: `null`
/// included. With `#[serde(default)]` an absent field stays `None`, so a body can
/// tell `{"value": null}` (an answer of JSON `null`) from `{}` (no value).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Query of `GET /v1/interactions`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `pending` (default), `resolved`, `finished`, `closed` or `all`.
    #[serde(default)]
    pub state: Option<String>,
    /// Page size, 1 to 500 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_PAGE)))]
    pub limit: Option<usize>,
    /// The previous page's `nextCursor`.
    #[serde(default)]
    pub cursor: Option<String>,
    /// `expiresAt`: only interactions with a deadline, soonest first. The page is the
    /// `limit` soonest among the records one request reads (10,000, after `cursor`
    /// when given); `nextCursor`, when present, continues the scan past them.
    #[serde(default)]
    pub sort: Option<String>,
    /// `me`: only interactions that name the caller among their assignees, by
    /// person or by one of the caller's groups (not those open to the whole
    /// organisation). Any other value is `NRY-0001`.
    #[serde(default)]
    pub assignee: Option<String>,
}

/// A page of interactions, in the order of their last change (for pending ones:
/// the order they were opened).
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// The interactions of this page, in the order of their last change (at most `limit`).
    pub items: Vec<InteractionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST /v1/sessions/{sessionId}/messages` body: a person's message on a
/// session's lane (the message road's createMessage).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MessageBody {
    /// What the person writes.
    pub text: String,
    /// The lane (default `main`).
    #[serde(default)]
    pub lane: Option<String>,
    /// The message id, the idempotency key on the lane (default: a new UUID).
    #[serde(default)]
    pub message_id: Option<String>,
}

/// `202` body of `POST /v1/sessions/{sessionId}/messages`: the message was taken by
/// the lane.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageAccepted {
    /// The message's id: the body's `messageId`, or one Holdpoint made (1 to 128
    /// printable ASCII characters).
    pub message_id: String,
    /// `admitted`: its turn started.
    pub admission: String,
}

/// Query of `GET /v1/events`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only this task's events.
    #[serde(default)]
    pub task: Option<String>,
    /// Only events of this short name.
    #[serde(default, rename = "type")]
    pub name: Option<String>,
    /// Resume after this sequence (as `Last-Event-ID`).
    #[serde(default)]
    pub after: Option<u64>,
}

/// Largest page of `GET /v1/rules` and `GET /v1/audit`.
pub const MAX_RULE_PAGE: usize = 500;

/// Query of `GET /v1/rules`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RulesQuery {
    /// Which rules: `live` (the default: neither revoked nor past `expiresAt`,
    /// the ones that may still decide a hold) or `all` (revoked and expired ones
    /// too). Any other value is `400 NRY-0001`.
    #[serde(default)]
    pub state: Option<RuleStateFilter>,
    /// Page size, 1 to 500 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_RULE_PAGE)))]
    pub limit: Option<usize>,
    /// The previous page's `nextCursor`.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Which rules `GET /v1/rules` lists ([`RulesQuery::state`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum RuleStateFilter {
    /// Rules that may still decide a hold: not revoked, not past `expiresAt`.
    #[default]
    Live,
    /// Every stored rule, revoked and expired ones included.
    All,
}

/// A page of the organisation's remembered rules (only live ones unless the
/// query asks for `state=all`), in the order of their last change.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RulePage {
    /// The remembered rules of this page (at most `limit`).
    pub items: Vec<Rule>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Query of `GET /v1/audit`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only records stored after this audit-stream sequence (default 0: from the
    /// oldest kept); pass the previous page's `nextAfter`.
    #[serde(default)]
    pub after: Option<u64>,
    /// Page size, 1 to 500 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_RULE_PAGE)))]
    pub limit: Option<usize>,
}

/// One decision-audit record with its place in the audit stream.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its sequence in `HP_AUDIT` (the cursor).
    pub sequence: u64,
    /// The record: a CloudEvent `approval-decided`, `rule-written` or
    /// `rule-revoked` (never about a question).
    pub record: Event,
}

/// A page of the organisation's decision audit, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// The audit records of this page (at most `limit`).
    pub items: Vec<AuditEntry>,
    /// Pass as `after` for the next page (the last record's sequence, or the `after`
    /// given when the page is empty); a page shorter than `limit` was the last so far.
    pub next_after: u64,
}

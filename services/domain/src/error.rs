//! The error catalog: every stable code Holdpoint answers with, its HTTP status and
//! title, in one exhaustive table ([`ErrorCode::spec`]).
//!
//! `NRY-0002`, `NRY-0011` and `NRY-0032` are fixed by the REST API Holdpoint
//! implements (their meaning must never change); the other codes are Holdpoint's
//! own, in the same family. The README's error table lists them all; a
//! test keeps it in step with [`ErrorCode::ALL`].

use serde::{Deserialize, Serialize};

/// A stable error code. Serialized as its `NRY-xxxx` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::VariantArray)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ErrorCode {
    /// The request is malformed: bad JSON, a missing or wrongly typed field, a bad id.
    #[serde(rename = "NRY-0001")]
    InvalidRequest,
    /// The interaction's session does not exist.
    #[serde(rename = "NRY-0002")]
    SessionNotFound,
    /// The answer does not fit the interaction: wrong number of answers, an option
    /// index out of range, several options where one is allowed, text where none is.
    #[serde(rename = "NRY-0003")]
    AnswerMismatch,
    /// No such interaction, question or task for this caller. Another organisation's
    /// interaction answers exactly like this.
    #[serde(rename = "NRY-0004")]
    NotFound,
    /// The path exists but not with this method; the response's `Allow` lists the
    /// methods it takes.
    #[serde(rename = "NRY-0005")]
    MethodNotAllowed,
    /// The interaction is no longer waiting: already resolved by another answer, or
    /// closed by the host: a conflict (409).
    #[serde(rename = "NRY-0009")]
    AlreadySettled,
    /// The approval's arguments digest does not match what the person was shown.
    #[serde(rename = "NRY-0010")]
    ArgumentsChanged,
    /// No valid credentials (README "Identity").
    #[serde(rename = "NRY-0011")]
    Unauthenticated,
    /// The request body is larger than the limit.
    #[serde(rename = "NRY-0013")]
    PayloadTooLarge,
    /// The request body is not `application/json`.
    #[serde(rename = "NRY-0014")]
    UnsupportedMediaType,
    /// The request's header section is larger than the server reads.
    #[serde(rename = "NRY-0015")]
    HeadersTooLarge,
    /// The request's target (path and query) is longer than the server reads.
    #[serde(rename = "NRY-0016")]
    UriTooLong,
    /// The caller already has as many event streams open as the ingress allows; one
    /// must end before another starts.
    #[serde(rename = "NRY-0017")]
    TooManyStreams,
    /// The operation does not apply: e.g. text may never approve, a tool
    /// result for an interaction that released nothing.
    #[serde(rename = "NRY-0020")]
    UnsupportedOperation,
    /// A runtime command conflicts with what is recorded (e.g. the same interaction id
    /// opened with different content).
    #[serde(rename = "NRY-0021")]
    CommandConflict,
    /// Deadlines cannot be kept (`Deadlines::supported` false): an opening or a
    /// deadline change that asks for one is refused and changes nothing. Reserved:
    /// every worker runs on a nats-server at the version floor (2.15.1), which keeps
    /// message schedules, and decides with deadlines supported.
    #[serde(rename = "NRY-0022")]
    DeadlineUnsupported,
    /// The deadline cannot be kept: both `expiresAt` and `expiresIn`, a time already
    /// past, `expiresIn` of 0 or too large, beyond the configured maximum, or a change
    /// to an interaction that no longer waits.
    #[serde(rename = "NRY-0023")]
    DeadlineInvalid,
    /// An answer that decides an approval or a connection did not name what it
    /// decides: an A2A message without `metadata[URI].interactionId` (and, for an
    /// approval, without an `argumentsDigest` to bind it to the held call). Only a
    /// question may be answered by a plain reply to whatever the task waits for; an
    /// approval or a connection a person never saw is never decided. Nothing changes.
    #[serde(rename = "NRY-0024")]
    InteractionNotNamed,
    /// `remember` was sent with an answer to a question or a connection: only an
    /// approval's decision can be remembered as a rule. Nothing is written.
    #[serde(rename = "NRY-0025")]
    NotRememberable,
    /// `remember` asks for a scope the held call cannot have: `agent` when the runtime
    /// named no agent for the call. Nothing is written.
    #[serde(rename = "NRY-0026")]
    ScopeUnavailable,
    /// The remembered rule named in the path does not exist in the caller's
    /// organisation (another organisation's rule looks the same).
    #[serde(rename = "NRY-0027")]
    RuleNotFound,
    /// `editedArguments` was sent for a held call whose hold does not allow edits
    /// (its `editable` is `false`, the default): nothing is decided, the call still
    /// waits for an answer as held.
    #[serde(rename = "NRY-0028")]
    NotEditable,
    /// `editedArguments` that cannot be released: not a JSON object, larger or deeper
    /// than held arguments may be (256 KiB of canonical JSON, 32 levels), sent
    /// without `approved: true`, or without the `argumentsDigest` of the arguments
    /// the person edited. Nothing is decided.
    #[serde(rename = "NRY-0029")]
    EditInvalid,
    /// The lane refused the message and kept nothing: session closed or lane full.
    #[serde(rename = "NRY-0030")]
    LaneRefused,
    /// The lane is busy with a running turn: the message is kept and its turn starts
    /// when the lane frees.
    #[serde(rename = "NRY-0031")]
    LaneBusy,
    /// A product-session answer was refused with no message left behind: not
    /// delivered, and the question is pending again.
    #[serde(rename = "NRY-0032")]
    AnswerNotDelivered,
    /// `remember` was sent with `editedArguments`: a rule about arguments the agent
    /// never proposed is not written. Nothing is decided or written.
    #[serde(rename = "NRY-0033")]
    EditNotRememberable,
    /// A batch of answers (`POST /v1/answers`) that cannot be read as one: no
    /// `items` array, none or more than 100 items, or an item that is not an object
    /// with `interactionId`, `operation` (`approve`, `respond` or `answer`), `body`
    /// and `idempotencyKey`. Nothing of the batch is decided.
    #[serde(rename = "NRY-0034")]
    BatchInvalid,
    /// An `ask_user` question's `schema` outside the form subset (MCP elicitation's
    /// form mode: a flat object of string, number, integer, boolean and enum
    /// properties; `holdpoint_domain::form`), or on a call of more than one
    /// question. Nothing is opened.
    #[serde(rename = "NRY-0035")]
    FormSchemaUnsupported,
    /// A `value` that does not fit the question's form: `pointer` names the first
    /// field that does not. Nothing is decided.
    #[serde(rename = "NRY-0036")]
    FormValueInvalid,
    /// The interaction names who may answer it (its `assignees`) and the caller is
    /// not one of them, neither by person nor by group. Nothing is decided. Another
    /// organisation's interaction is `NRY-0004`, as a missing one.
    #[serde(rename = "NRY-0037")]
    NotAssignee,
    /// The interaction needs approvals from several distinct people and the caller's
    /// approval is already counted: it counts once. Nothing changes; the caller may
    /// still deny, which decides at once.
    #[serde(rename = "NRY-0038")]
    AlreadyApproved,
    /// A webhook URL Holdpoint will not call: not `https` (plain `http` only to a
    /// loopback host in local mode), credentials, a fragment or a control character
    /// in it (in the host also percent-encoded), or a literal
    /// private, loopback or link-local address outside local mode
    /// (`holdpoint_domain::webhook::check_url`).
    #[serde(rename = "NRY-0040")]
    WebhookUrlRefused,
    /// A webhook's event types name a type Holdpoint does not emit
    /// (`holdpoint_domain::event::EVENT_NAMES`).
    #[serde(rename = "NRY-0041")]
    UnknownEventType,
    /// The organisation already has as many webhook endpoints as Holdpoint keeps
    /// (`holdpoint_domain::webhook::MAX_WEBHOOKS_PER_ORG`); remove one first.
    #[serde(rename = "NRY-0042")]
    TooManyWebhooks,
    /// The webhook endpoint is disabled (too many failed deliveries): it sends
    /// nothing, test messages included, until it is enabled again.
    #[serde(rename = "NRY-0043")]
    WebhookDisabled,
    /// Holdpoint could not get an outcome in time or NATS is unreachable; retry with
    /// the same idempotency key after `Retry-After` seconds.
    #[serde(rename = "NRY-0050")]
    Unavailable,
    /// An unexpected internal error; the body carries no internals.
    #[serde(rename = "NRY-0051")]
    Internal,
}

/// What a code means on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeSpec {
    /// The HTTP status the code answers with (400 to 503).
    pub status: u16,
    /// The `NRY-xxxx` string.
    pub code: &'static str,
    /// Short human title (the body's `title`).
    pub title: &'static str,
}

impl ErrorCode {
    /// Every code, in catalog (declaration) order; derived from the enum's variants.
    pub const ALL: &'static [ErrorCode] = <ErrorCode as strum::VariantArray>::VARIANTS;

    /// The one table from code to HTTP status, code string and title.
    pub const fn spec(self) -> CodeSpec {
        let (status, code, title) = match self {
            ErrorCode::InvalidRequest => (400, "NRY-0001", "Invalid request"),
            ErrorCode::SessionNotFound => (400, "NRY-0002", "Session not found"),
            ErrorCode::AnswerMismatch => (400, "NRY-0003", "Answer does not fit"),
            ErrorCode::NotFound => (404, "NRY-0004", "Not found"),
            ErrorCode::MethodNotAllowed => (405, "NRY-0005", "Method not allowed"),
            ErrorCode::AlreadySettled => (409, "NRY-0009", "No longer waiting"),
            ErrorCode::ArgumentsChanged => (409, "NRY-0010", "Arguments changed"),
            ErrorCode::Unauthenticated => (401, "NRY-0011", "Unauthenticated"),
            ErrorCode::PayloadTooLarge => (413, "NRY-0013", "Payload too large"),
            ErrorCode::UnsupportedMediaType => (415, "NRY-0014", "Unsupported media type"),
            ErrorCode::HeadersTooLarge => (431, "NRY-0015", "Headers too large"),
            ErrorCode::UriTooLong => (414, "NRY-0016", "URI too long"),
            ErrorCode::TooManyStreams => (429, "NRY-0017", "Too many streams"),
            ErrorCode::UnsupportedOperation => (400, "NRY-0020", "Unsupported operation"),
            ErrorCode::CommandConflict => (409, "NRY-0021", "Command conflicts with record"),
            ErrorCode::DeadlineUnsupported => (400, "NRY-0022", "Deadlines not available"),
            ErrorCode::DeadlineInvalid => (400, "NRY-0023", "Deadline not valid"),
            ErrorCode::InteractionNotNamed => (400, "NRY-0024", "Interaction not named"),
            ErrorCode::NotRememberable => (400, "NRY-0025", "Nothing to remember"),
            ErrorCode::ScopeUnavailable => (400, "NRY-0026", "Rule scope unavailable"),
            ErrorCode::RuleNotFound => (404, "NRY-0027", "Rule not found"),
            ErrorCode::NotEditable => (409, "NRY-0028", "Call not editable"),
            ErrorCode::EditInvalid => (400, "NRY-0029", "Edit not valid"),
            ErrorCode::LaneRefused => (409, "NRY-0030", "Lane refused the message"),
            ErrorCode::LaneBusy => (409, "NRY-0031", "Lane busy; message queued"),
            ErrorCode::AnswerNotDelivered => (409, "NRY-0032", "Answer not delivered"),
            ErrorCode::EditNotRememberable => (400, "NRY-0033", "Edit not rememberable"),
            ErrorCode::BatchInvalid => (400, "NRY-0034", "Batch not valid"),
            ErrorCode::FormSchemaUnsupported => (400, "NRY-0035", "Form schema not supported"),
            ErrorCode::FormValueInvalid => (400, "NRY-0036", "Value does not fit the form"),
            ErrorCode::NotAssignee => (403, "NRY-0037", "Not an assignee"),
            ErrorCode::AlreadyApproved => (409, "NRY-0038", "Already approved by you"),
            ErrorCode::WebhookUrlRefused => (400, "NRY-0040", "Webhook URL refused"),
            ErrorCode::UnknownEventType => (400, "NRY-0041", "Unknown event type"),
            ErrorCode::TooManyWebhooks => (409, "NRY-0042", "Too many webhooks"),
            ErrorCode::WebhookDisabled => (409, "NRY-0043", "Webhook disabled"),
            ErrorCode::Unavailable => (503, "NRY-0050", "Temporarily unavailable"),
            ErrorCode::Internal => (500, "NRY-0051", "Internal error"),
        };
        CodeSpec {
            status,
            code,
            title,
        }
    }

    /// True for a refusal that changed nothing and is not the idempotency key's
    /// answer, so the same key may still decide something. Two kinds:
    ///
    /// - it says only what was true at the moment of deciding: the target was not
    ///   there yet (`NRY-0004` no such interaction, `NRY-0002` no such session: an
    ///   answer sent just before the runtime's opening landed, a hold sent before
    ///   its session), a lane could not take the message and kept nothing
    ///   (`NRY-0030`, `NRY-0032`: the lane may free), or Holdpoint could not decide
    ///   (`NRY-0050`, `NRY-0051`);
    /// - it refuses the request *as sent*: the body does not fit the interaction,
    ///   its form, its arguments or the rules (`NRY-0001`, `NRY-0003`, `NRY-0010`,
    ///   `NRY-0020`, `NRY-0022` to `NRY-0026`, `NRY-0028`, `NRY-0029`, `NRY-0033`
    ///   to `NRY-0036`, `NRY-0040`, `NRY-0041`), or the caller may not answer it
    ///   (`NRY-0037`: a reassignment may make the same request valid). A person who mistyped a form
    ///   value, or approved arguments that changed, corrects the request and sends
    ///   it again; a client that keeps one key per interaction (A2A's
    ///   `answer:<interactionId>` message ids) must then get the corrected request
    ///   decided, not the first refusal back.
    ///
    /// Such an outcome is stored, but the same request sent again with the same
    /// key is decided afresh (`holdpoint_bus::outcome` publishes it under a fresh
    /// message id, since inside JetStream's duplicate window the command id itself
    /// would be dropped as a duplicate). Every other outcome is a *decision*,
    /// replayed to every retry with the key: a success, a conflict with the record
    /// (`NRY-0009` already answered, `NRY-0021`), or a message kept (`NRY-0031`).
    /// Deciding a request again is safe because a decision that wrote is recorded
    /// in its records (an interaction's resolution keeps its key, a record's
    /// outbox its command id), so a key that decided something always gets that
    /// decision back.
    pub const fn is_provisional(self) -> bool {
        matches!(
            self,
            ErrorCode::NotFound
                | ErrorCode::SessionNotFound
                | ErrorCode::LaneRefused
                | ErrorCode::AnswerNotDelivered
                | ErrorCode::Unavailable
                | ErrorCode::Internal
                | ErrorCode::InvalidRequest
                | ErrorCode::AnswerMismatch
                | ErrorCode::ArgumentsChanged
                | ErrorCode::UnsupportedOperation
                | ErrorCode::DeadlineUnsupported
                | ErrorCode::DeadlineInvalid
                | ErrorCode::InteractionNotNamed
                | ErrorCode::NotRememberable
                | ErrorCode::ScopeUnavailable
                | ErrorCode::NotEditable
                | ErrorCode::EditInvalid
                | ErrorCode::EditNotRememberable
                | ErrorCode::BatchInvalid
                | ErrorCode::FormSchemaUnsupported
                | ErrorCode::FormValueInvalid
                | ErrorCode::NotAssignee
                | ErrorCode::AlreadyApproved
                | ErrorCode::WebhookUrlRefused
                | ErrorCode::UnknownEventType
        )
    }

    /// True when the same request may succeed later (for an answer: with the same
    /// idempotency key).
    pub const fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::Unavailable | ErrorCode::Internal | ErrorCode::TooManyStreams
        )
    }
}

/// A refusal: a stable code and a message for the person. Changes nothing, except
/// [`ErrorCode::LaneBusy`], which reports that the message was kept. Displayed as
/// `NRY-0009 No longer waiting: <message>` (code, title, message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[error("{} {}: {message}", code.spec().code, code.spec().title)]
pub struct Rejection {
    /// The stable code.
    pub code: ErrorCode,
    /// What went wrong, for a person; never internals.
    pub message: String,
    /// The JSON pointer of the first field that does not fit, into the answer's
    /// `value` (`NRY-0036`); absent on other refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
}

impl Rejection {
    /// A rejection with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            pointer: None,
        }
    }

    /// This rejection, naming the JSON pointer of the field it is about.
    pub fn at(mut self, pointer: impl Into<String>) -> Self {
        self.pointer = Some(pointer.into());
        self
    }
}

/// The JSON error body every API answers with: `{code, title, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    /// The stable error code, `NRY-` and four digits (see `schemas/errors.json`).
    #[cfg_attr(feature = "schema", schemars(with = "ErrorCode"))]
    pub code: String,
    /// The code's title.
    pub title: String,
    /// What went wrong.
    pub message: String,
    /// `NRY-0036`: the JSON pointer of the first field of the answer's `value`
    /// that does not fit the form (`/age`; `""` for the value itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
}

impl From<&Rejection> for ErrorBody {
    fn from(r: &Rejection) -> Self {
        let spec = r.code.spec();
        ErrorBody {
            code: spec.code.to_owned(),
            title: spec.title.to_owned(),
            message: r.message.clone(),
            pointer: r.pointer.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_name_matches_table() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).expect("serializes");
            assert_eq!(json, format!("\"{}\"", code.spec().code));
        }
    }

    #[test]
    fn decisions_are_replayed_and_provisional_refusals_are_not() {
        // A refusal that is the key's answer: the record decided it (already
        // answered, a conflicting command, a message kept), or the request never
        // reached a decision (the HTTP layer's own refusals, webhooks and rules
        // administration, which no idempotency key covers).
        let decisions: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|c| !c.is_provisional())
            .map(|c| c.spec().code)
            .collect();
        assert_eq!(
            decisions,
            [
                "NRY-0005", "NRY-0009", "NRY-0011", "NRY-0013", "NRY-0014", "NRY-0015", "NRY-0016",
                "NRY-0017", "NRY-0021", "NRY-0027", "NRY-0031", "NRY-0042", "NRY-0043"
            ]
        );
        // Every refusal of the input the answer path can give leaves its key free.
        for code in [
            ErrorCode::InvalidRequest,
            ErrorCode::AnswerMismatch,
            ErrorCode::ArgumentsChanged,
            ErrorCode::NotEditable,
            ErrorCode::EditInvalid,
            ErrorCode::FormValueInvalid,
        ] {
            assert!(code.is_provisional(), "{code:?}");
        }
    }

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.spec().code), "{:?}", code);
        }
    }

    #[test]
    fn a_rejection_reads_as_code_title_and_message() {
        let r = Rejection::new(
            ErrorCode::CommandConflict,
            "eff_1 was opened with other content",
        );
        assert_eq!(
            r.to_string(),
            "NRY-0021 Command conflicts with record: eff_1 was opened with other content"
        );
    }

    #[test]
    fn rest_api_codes_keep_their_meaning() {
        assert_eq!(ErrorCode::SessionNotFound.spec().status, 400);
        assert_eq!(ErrorCode::SessionNotFound.spec().code, "NRY-0002");
        assert_eq!(ErrorCode::Unauthenticated.spec().status, 401);
        assert_eq!(ErrorCode::Unauthenticated.spec().code, "NRY-0011");
        assert_eq!(ErrorCode::AnswerNotDelivered.spec().status, 409);
        assert_eq!(ErrorCode::AnswerNotDelivered.spec().code, "NRY-0032");
    }
}

//! The shared vocabulary every layer above speaks: session modes, interaction
//! kinds and states, what an interaction asks (specs) and how it was answered,
//! close reasons, call results, lane messages and admissions.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::{InteractionId, LaneId, MessageId, OrgId, PersonId, SessionId};

/// The two ways a session runs: `blocking` (an answer unblocks a waiting call) or
/// `product` (answers become lane messages; README "Sessions, lanes and the message road").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum SessionMode {
    /// The tool call blocks; resolving releases it and its close arrives as
    /// `tool-call-finished`.
    Blocking,
    /// Nothing blocks; an answer becomes the person's next message on the lane.
    Product,
}

impl SessionMode {
    /// The lower-case name used on the wire (`blocking`, `product`; derived, the same
    /// as serde's).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The kind of an interaction: `approval` (a held tool call), `question`
/// (`ask_user`) or `connection` (`request_connection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Kind {
    /// A held tool call waiting for `approved: true/false`.
    Approval,
    /// `ask_user`: 1 to 4 questions with ordered options.
    Question,
    /// `request_connection`: an app the agent wants connected.
    Connection,
}

impl Kind {
    /// The A2A task state a waiting task of this kind shows (README "A2A").
    pub fn task_state(self) -> TaskState {
        match self {
            Kind::Approval | Kind::Connection => TaskState::AuthRequired,
            Kind::Question => TaskState::InputRequired,
        }
    }

    /// The lower-case name used on the wire (`approval`, `question`, `connection`;
    /// derived, the same as serde's).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A2A v1.0 task states Holdpoint reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum TaskState {
    /// Waiting for an approval or a connection.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
    /// Waiting for an answer to a question.
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// Running again after an answer.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
}

/// One question of an `ask_user` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuestionSpec {
    /// The question shown to the person (1 to 2000 characters).
    pub text: String,
    /// The options in the order the engine sent them; answers index into this list.
    #[serde(default)]
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multiple: bool,
    /// Whether free text may accompany (or replace) the chosen options.
    #[serde(default)]
    pub allow_text: bool,
    /// A form the answer's `value` must fit: the restricted JSON Schema of MCP
    /// elicitation's form mode (a flat object of string, number, integer, boolean
    /// and enum properties with `title`, `description`, `required`,
    /// `minLength`/`maxLength`, `minimum`/`maximum`, `format` email, uri, date or
    /// date-time, `default`; `holdpoint_domain::form`). Only on a call of one
    /// question; outside the subset the call is refused (`NRY-0035`), a value that
    /// does not fit is `NRY-0036` with the field's `pointer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("type" = ["object", "null"], "additionalProperties" = true))
    )]
    pub schema: Option<Value>,
}

/// What an interaction is about, by kind. Stored; `arguments` never leave through
/// `detail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Spec {
    /// A held tool call.
    Approval {
        /// MCP-style server name.
        server: String,
        /// The tool of the held call: a one-line name of at most 200 characters.
        tool: String,
        /// The call's arguments exactly as held; released as they are.
        arguments: Value,
        /// Hex SHA-256 of the canonical JSON of `arguments`; the approval binds to it.
        #[serde(rename = "argumentsDigest")]
        arguments_digest: String,
        /// Why the policy held the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Whether a person may edit the arguments before approving
        /// (`editedArguments`); `false` (the default) refuses an edit with `NRY-0028`.
        #[serde(default, skip_serializing_if = "crate::vocab::is_false")]
        editable: bool,
        /// How many distinct people must approve before the call is released: 1
        /// (the default, left out) or 2 to [`MAX_APPROVALS`](crate::MAX_APPROVALS)
        /// (README "Two-person approvals").
        #[serde(
            default = "crate::vocab::one",
            skip_serializing_if = "crate::vocab::is_one"
        )]
        #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 5)))]
        approvals: u8,
    },
    /// An `ask_user` call.
    Question {
        /// 1 to 4 questions.
        questions: Vec<QuestionSpec>,
    },
    /// A `request_connection` call.
    Connection {
        /// The app, cut at 80 characters.
        app: String,
        /// The reason, cut at 280 characters.
        reason: String,
    },
}

impl Spec {
    /// This spec's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Approval { .. } => Kind::Approval,
            Spec::Question { .. } => Kind::Question,
            Spec::Connection { .. } => Kind::Connection,
        }
    }

    /// The text to show a person (the status message's `prompt`).
    pub fn prompt(&self) -> String {
        match self {
            Spec::Approval { server, tool, .. } => format!("Approve {server} / {tool}?"),
            Spec::Question { questions } => match questions.as_slice() {
                [one] => one.text.clone(),
                many => many
                    .iter()
                    .enumerate()
                    .map(|(i, q)| format!("{}. {}", i + 1, q.text))
                    .collect::<Vec<_>>()
                    .join("\n"),
            },
            Spec::Connection { app, reason } => format!("Connect {app}: {reason}"),
        }
    }

    /// The `detail` a status message and the API show: server/tool/reason, the
    /// questions, or app/reason. Never the
    /// call's arguments.
    pub fn detail(&self) -> Value {
        match self {
            Spec::Approval {
                server,
                tool,
                reason,
                ..
            } => {
                let mut d = serde_json::json!({ "server": server, "tool": tool });
                if let (Some(r), Some(obj)) = (reason, d.as_object_mut()) {
                    obj.insert("reason".into(), Value::String(r.clone()));
                }
                d
            }
            Spec::Question { questions } => serde_json::json!({ "questions": questions }),
            Spec::Connection { app, reason } => serde_json::json!({ "app": app, "reason": reason }),
        }
    }
}

/// One answer to one question: an entry of the `answers` array of
/// `POST /v1/questions/{questionId}/answer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OptionAnswer {
    /// Indices into the option list as the engine sent it.
    #[serde(deserialize_with = "crate::integral::u32s")]
    pub options: Vec<u32>,
    /// Free text, when the question allows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A recorded answer, read by the interaction's kind (README "The HTTP API", reading
/// rules).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Answer {
    /// `approved: true` releases the held call; `false` fails it as `tool.denied`.
    Approval {
        /// The decision: `true` releases the held call, `false` fails it as `tool.denied`.
        approved: bool,
        /// Optional reason travelling with the decision.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The arguments the person released instead of the held ones (a JSON
        /// object), when they edited the call before approving.
        #[serde(
            default,
            rename = "editedArguments",
            skip_serializing_if = "Option::is_none"
        )]
        edited_arguments: Option<Value>,
    },
    /// The per-question answers of `POST /v1/questions/{questionId}/answer`, one per
    /// question in the order asked.
    Question {
        /// One entry per question, in order.
        answers: Vec<OptionAnswer>,
    },
    /// Any JSON value answering a question (the answer's `value`), e.g. an A2A text part.
    Value {
        /// Any JSON value, read by the interaction's kind; at most 256 KiB serialized
        /// and 32 levels deep.
        value: Value,
    },
    /// A connection answer.
    Connection {
        /// `{connected: true}` or `true` (or `approved: true`) means connected.
        connected: bool,
    },
}

/// Where an interaction is in its lifecycle: `pending -> resolved -> finished`, or
/// `pending -> closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Waiting for a person.
    Pending,
    /// Answered; for an approved call, released and waiting for its result.
    Resolved,
    /// The blocked call has its `tool-call-finished`.
    Finished,
    /// Closed without an answer (interrupted, superseded, expired, canceled).
    Closed,
}

/// Why an interaction was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum CloseReason {
    /// The host interrupted the turn.
    Interrupted,
    /// The person wrote on the lane instead of answering (product sessions).
    Superseded,
    /// The host let it expire.
    Expired,
    /// The host canceled it.
    Canceled,
}

impl CloseReason {
    /// The lower-case name used on the wire (`interrupted`, `superseded`, `expired`,
    /// `canceled`; derived, the same as serde's).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// How the reason reads in a message to a person or a model (`superseded by a
    /// message`; the others as [`CloseReason::as_str`]).
    pub fn message_word(self) -> &'static str {
        match self {
            CloseReason::Superseded => "superseded by a message",
            other => other.as_str(),
        }
    }
}

/// How a blocked call ends (`tool-call-finished` payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum CallResult {
    /// The call produced an output.
    Ok {
        /// The output given to the model.
        output: Value,
    },
    /// The call failed; `code` is e.g. `tool.denied` or `interaction.closed`.
    Error {
        /// Stable error code for the model.
        code: String,
        /// Human-readable text explaining the error, given to the model.
        message: String,
    },
}

/// A message on a lane (stream subject `hp.lane.<org>.<sessionId>.<lane>`); its
/// `Nats-Msg-Id` ([`LaneMessage::msg_id`]) derives from the message id and its lane,
/// so a second delivery is a no-op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LaneMessage {
    /// The organisation (tenant), from the caller's verified identity (1 to 128
    /// printable ASCII characters, no spaces).
    pub org: OrgId,
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session: SessionId,
    /// The session's lane (1 to 128 printable ASCII characters, no spaces).
    pub lane: LaneId,
    /// The message id (question id for answers).
    pub message_id: MessageId,
    /// Who wrote it.
    pub by: PersonId,
    /// What it says.
    pub content: LaneContent,
    /// When, RFC 3339 in UTC with milliseconds (`2026-04-01T10:00:03.520Z`).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
}

/// How a lane message's `Nats-Msg-Id` is made ([`LaneMessage::msg_id`]), in words:
/// the AsyncAPI document states it from here, so the two cannot drift.
pub const LANE_MESSAGE_MSG_ID: &str = "`lane-` + the first 40 hex digits of the SHA-256 of (organisation, session, lane, message id), each followed by a NUL byte; the lane is part of it, so the same message id on two lanes is two messages";

impl LaneMessage {
    /// Its `Nats-Msg-Id` ([`LANE_MESSAGE_MSG_ID`]): `lane-<40 hex>`. The lane is part
    /// of it: a message that reuses a question's id on another lane must not swallow
    /// that question's answer. A dedup key: changing it would break exactly-once
    /// across an upgrade.
    pub fn msg_id(&self) -> String {
        let d = crate::digest::digest(&[
            self.org.as_str(),
            self.session.as_str(),
            self.lane.as_str(),
            self.message_id.as_str(),
        ]);
        format!("lane-{}", &d[..40])
    }
}

/// A lane message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LaneContent {
    /// Text the person wrote.
    Text {
        /// The person's text: free text of at most 8,000 characters; no control
        /// character but TAB, LF and CR.
        text: String,
    },
    /// The person's answer to a product question.
    Answer {
        /// The product question this message answers (1 to 128 printable ASCII
        /// characters, no spaces).
        #[serde(rename = "questionId")]
        question_id: InteractionId,
        /// The recorded answer, by kind: a decision, per-question answers, or a JSON value.
        answer: Answer,
    },
}

/// How the lane took a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Admission {
    /// Its turn started.
    Admitted,
    /// Kept; its turn starts when the running one ends.
    Queued,
}

/// What an interaction's deadline decides when nobody answered in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum OnExpiry {
    /// The kind's default (`decide/expire.rs`): an approval is denied (the call fails
    /// as `tool.denied` with reason `expired`; never approved), a question is closed
    /// as `expired`, a connection finishes as `Not connected: <app>`.
    #[default]
    Decide,
    /// Close the interaction as `expired`, whatever its kind; a blocked call
    /// finishes as `interaction.closed`.
    Close,
}

impl OnExpiry {
    /// True for the default, which the wire leaves out.
    pub fn is_default(&self) -> bool {
        *self == OnExpiry::Decide
    }
}

/// Who settled an interaction: a person's answer or the interaction's deadline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Resolver {
    /// A person answered (`by` names them).
    #[default]
    Person,
    /// A remembered rule decided when the call was held; `rule` names it and `by`
    /// its author with the rule id.
    Rule,
    /// The deadline passed with no answer; `by` is [`EXPIRY_ACTOR`].
    Expiry,
}

impl Resolver {
    /// True for [`Resolver::Person`], which records leave out.
    pub fn is_person(&self) -> bool {
        *self == Resolver::Person
    }
}

/// The `by` (`approvedBy`) an expiry's decision records: not a person (a person id
/// comes from a verified `sub`; `resolvedBy: expiry` tells the two apart).
pub const EXPIRY_ACTOR: &str = "holdpoint:expiry";

/// Which of a deadline's two moments a scheduled command marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DeadlineStage {
    /// The warning lead before the deadline: `interaction-expiring` goes out.
    Warn,
    /// The deadline: the expiry decides.
    Expire,
}

/// `skip_serializing_if` for a flag whose absence means `false`.
pub(crate) fn one() -> u8 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
pub(crate) fn is_one(n: &u8) -> bool {
    *n == 1
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived names are serde's: one spelling per word.
    #[test]
    fn derived_names_are_the_wire_names() {
        fn wire<T: Serialize>(v: T) -> String {
            serde_json::to_value(v)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        }
        for r in [
            CloseReason::Interrupted,
            CloseReason::Superseded,
            CloseReason::Expired,
            CloseReason::Canceled,
        ] {
            assert_eq!(r.as_str(), wire(r));
        }
        for k in [Kind::Approval, Kind::Question, Kind::Connection] {
            assert_eq!(k.as_str(), wire(k));
        }
        for m in [SessionMode::Blocking, SessionMode::Product] {
            assert_eq!(m.as_str(), wire(m));
        }
        assert_eq!(
            CloseReason::Superseded.message_word(),
            "superseded by a message"
        );
    }
}

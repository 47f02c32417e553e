//! Commands: what the runtime and the ingress ask the worker to do, published on
//! `hp.cmd.<org>.<verb>` with `Nats-Msg-Id` = [`CommandEnvelope::command_id`], and
//! the [`Outcome`] the worker replies.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::canonical_json;
use crate::digest::digest;
use crate::ids::{
    AgentId, CallId, CommandId, ContextId, GroupName, IdempotencyKey, InteractionId, LaneId,
    MessageId, OrgId, PersonId, SessionId, TaskId,
};
use crate::interaction::Assignees;
use crate::policy::Remember;
use crate::vocab::{
    CallResult, CloseReason, DeadlineStage, OnExpiry, OptionAnswer, QuestionSpec, SessionMode,
};

/// Most seconds `expiresIn` may ask for (a year); the configured maximum may be lower.
pub const MAX_EXPIRES_IN_SECS: u64 = 366 * 24 * 3600;

/// The most distinct people an approval may require (`approvals`, README
/// "Two-person approvals"); the fewest, besides the default of one, is 2.
pub const MAX_APPROVALS: u8 = 5;

/// Default number of messages a busy lane keeps before it refuses (lane full).
pub const DEFAULT_LANE_CAPACITY: u32 = 8;

/// A command with the organisation it acts in. The org comes from the caller's
/// verified identity (ingress) or the runtime's configuration (client), never from
/// a person's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandEnvelope {
    /// The organisation (tenant), from the caller's verified identity (1 to 128
    /// printable ASCII characters, no spaces).
    pub org: OrgId,
    /// What to do: one of the verbs, tagged by `type`.
    pub command: Command,
}

/// Every command Holdpoint takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Command {
    /// Runtime: a session starts.
    SessionOpen {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's mode: `blocking` (the call waits) or `product` (answers become
        /// lane messages).
        mode: SessionMode,
        /// Messages a busy lane keeps before refusing; default [`DEFAULT_LANE_CAPACITY`].
        #[serde(
            default,
            rename = "laneCapacity",
            skip_serializing_if = "Option::is_none"
        )]
        lane_capacity: Option<u32>,
    },
    /// Runtime: the session refuses new messages from now on.
    SessionClose {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
    },
    /// Runtime: the session is gone; its interactions answer `NRY-0002`.
    SessionEnd {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
    },
    /// Runtime: open an interaction.
    Open(Box<OpenInteraction>),
    /// Runtime (host): close a pending interaction without an answer.
    Close {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        #[serde(rename = "interactionId")]
        interaction_id: InteractionId,
        /// Why it closed: `interrupted`, `superseded`, `expired` or `canceled`.
        reason: CloseReason,
        /// The lane message that superseded it (product sessions).
        #[serde(default, rename = "byMessage", skip_serializing_if = "Option::is_none")]
        by_message: Option<MessageId>,
        /// The interaction's A2A task, when the sender knows it: the command is then
        /// routed to that task's partition (see [`CommandEnvelope::partition_key`]).
        #[serde(default, rename = "taskId", skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    /// Person (through the ingress): answer an interaction.
    Answer(Box<AnswerCommand>),
    /// Runtime: set, move or clear a pending interaction's deadline. With neither
    /// `expiresAt` nor `expiresIn` the deadline is cleared. Only a runtime may send
    /// it: a person never extends a deadline (see the README, "Deadlines").
    Deadline {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        #[serde(rename = "interactionId")]
        interaction_id: InteractionId,
        /// The interaction's A2A task, when the sender knows it (routing, as for
        /// `close`).
        #[serde(default, rename = "taskId", skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
        /// The new deadline, RFC 3339.
        #[serde(
            default,
            rename = "expiresAt",
            with = "crate::timestamp::option",
            skip_serializing_if = "Option::is_none"
        )]
        #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
        expires_at: Option<time::OffsetDateTime>,
        /// The new deadline as whole seconds from when the worker decides the command
        /// (1 to [`MAX_EXPIRES_IN_SECS`]).
        #[serde(default, rename = "expiresIn", skip_serializing_if = "Option::is_none")]
        expires_in: Option<u64>,
        /// Names this change (1 to 128 printable ASCII characters, no spaces; the
        /// clients make a new one per call): it is part of the command id, so a
        /// retry is a replay while setting a deadline back to one it had before is
        /// a change of its own. Without it the id derives from the deadline alone,
        /// and a deadline set again inside the duplicate window (or while the
        /// record still lists the first setting) is taken for the first setting.
        #[serde(default, rename = "changeId", skip_serializing_if = "Option::is_none")]
        change_id: Option<MessageId>,
    },
    /// Runtime: change who may answer a pending interaction (README "Assignees").
    /// `assignees` absent opens it to anyone of the organisation again. Each
    /// change is an `interaction-reassigned` event and an audit record.
    Reassign {
        /// The interaction (1 to 128 printable ASCII characters, no spaces).
        #[serde(rename = "interactionId")]
        interaction_id: InteractionId,
        /// The interaction's A2A task, when the sender knows it (routing, as for
        /// `close`).
        #[serde(default, rename = "taskId", skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
        /// This change's id (1 to 128 printable ASCII characters, no spaces), made
        /// by the runtime once per change: the same id again is a replay, so a
        /// retry never applies a change twice and changing back later is a new
        /// change.
        #[serde(rename = "changeId")]
        change_id: MessageId,
        /// The new assignees (bounds as at the opening); absent: anyone of the
        /// organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignees: Option<Assignees>,
    },
    /// Server (a JetStream message schedule fires it): a deadline's warning lead or
    /// the deadline itself was reached. Runtimes and people never send it; its
    /// `expiresAt` must be the interaction's current deadline, or it does nothing.
    Expire {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        #[serde(rename = "interactionId")]
        interaction_id: InteractionId,
        /// The interaction's A2A task (its commands' partition).
        #[serde(rename = "taskId")]
        task_id: TaskId,
        /// The deadline this schedule was made for, RFC 3339.
        #[serde(rename = "expiresAt", with = "crate::timestamp")]
        #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
        expires_at: time::OffsetDateTime,
        /// The warning (`interaction-expiring`) or the expiry.
        stage: DeadlineStage,
    },
    /// Runtime (tool executor): the released call's result.
    ToolResult {
        /// The approval (effect id).
        #[serde(rename = "interactionId")]
        interaction_id: InteractionId,
        /// How the call ended.
        result: CallResult,
        /// The approval's A2A task, when the sender knows it (routing, as for `close`).
        #[serde(default, rename = "taskId", skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    /// Person: a message on a lane (the message road's createMessage).
    Message {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// Message id (idempotency key on the lane).
        #[serde(rename = "messageId")]
        message_id: MessageId,
        /// The person who acted: a verified JWT `sub` or the local OS user (1 to 256
        /// characters, no control characters).
        by: PersonId,
        /// The person's text: free text of at most 8,000 characters; no control
        /// character but TAB, LF and CR.
        text: String,
    },
    /// Runtime: a turn started on a lane without a person's message.
    TurnStart {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The turn's id.
        #[serde(rename = "turnId")]
        turn_id: MessageId,
    },
    /// Runtime: the running turn on a lane ended; the next queued message's turn starts.
    TurnFinish {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The turn that ended (the message id that started it).
        #[serde(rename = "turnId")]
        turn_id: MessageId,
    },
}

/// Opening an interaction: where it waits, what it asks, and its deadline; checked
/// by [`crate::rules`] before anything is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OpenInteraction {
    /// The interaction id: the effect id for an approval, a UUID for a question.
    pub interaction_id: InteractionId,
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session: SessionId,
    /// The session's lane (1 to 128 printable ASCII characters, no spaces).
    pub lane: LaneId,
    /// The A2A task (1 to 128 printable ASCII characters, no spaces).
    pub task_id: TaskId,
    /// The A2A context (1 to 128 printable ASCII characters, no spaces).
    pub context_id: ContextId,
    /// The tool call it blocks.
    pub call_id: CallId,
    /// The agent the runtime holds the call for (optional): an `agent`-scoped
    /// remembered rule matches calls of the same agent in any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// What it asks.
    pub request: OpenRequest,
    /// The deadline, RFC 3339; at most one of `expiresAt` and `expiresIn`. Without
    /// either the configured default applies (none unless configured).
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<time::OffsetDateTime>,
    /// The deadline as whole seconds from when the worker decides the opening (1 to
    /// [`MAX_EXPIRES_IN_SECS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
    /// What the deadline decides: the kind's default (`decide`) or `close`.
    #[serde(default, skip_serializing_if = "OnExpiry::is_default")]
    pub on_expiry: OnExpiry,
    /// Who may answer it (README "Assignees"): at least one person or group, at
    /// most 32 of each, none twice (`NRY-0001` otherwise); absent: anyone of the
    /// organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignees: Option<Assignees>,
    /// Who is added to the assignees when the deadline's warning stage comes
    /// (`[deadlines] warning_secs` before `expiresAt`) and it still waits; one
    /// `interaction-escalated` event then (README "Escalation"). Same bounds as
    /// `assignees`, and `assignees` with the escalation together name at most 32
    /// people and 32 groups; it needs a deadline whose warning stage is still
    /// ahead (`NRY-0001` otherwise). Absent: no escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Assignees>,
}

/// What an opening asks, by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OpenRequest {
    /// The tool policy holds a call.
    Approval {
        /// The MCP server of the held call: a one-line name of at most 200 characters.
        server: String,
        /// The tool of the held call: a one-line name of at most 200 characters.
        tool: String,
        /// The call's arguments.
        arguments: Value,
        /// Why it is held.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Whether the person may edit the arguments before approving (README
        /// "Edit, then approve"). Default `false`: a runtime opts in when it runs
        /// the arguments `tool-call-released` carries rather than the ones it held.
        #[serde(default, skip_serializing_if = "crate::vocab::is_false")]
        editable: bool,
        /// How many distinct people must approve before the call is released
        /// (README "Two-person approvals"): 2 to [`MAX_APPROVALS`](crate::MAX_APPROVALS);
        /// absent or 1, one person decides. One denial decides at once; remembered
        /// allow rules do not count; not with `editable` (`NRY-0001`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 5)))]
        approvals: Option<u8>,
    },
    /// `ask_user`: questions for a person, each with ordered options.
    Question {
        /// The questions, 1 to 4, in the order asked; each text at most 2,000
        /// characters, at most 64 options of at most 500 characters.
        questions: Vec<QuestionSpec>,
    },
    /// `request_connection {app, reason}`.
    Connection {
        /// The app the agent wants connected: a one-line name, cut at 80 characters.
        app: String,
        /// Why the agent wants it, free text cut at 280 characters.
        reason: String,
    },
}

/// Which operation the answer came through; decides which kinds it may address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AnswerRoute {
    /// `POST /v1/questions/{id}/answer` (questions only; others are not found).
    Question,
    /// The Runtime's `approve` command.
    Approve,
    /// The Runtime's `respond` command.
    Respond,
    /// An A2A message on the task.
    A2a,
}

/// What the person sent, before it is read against the interaction's kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AnswerInput {
    /// The body of `POST /v1/questions/{questionId}/answer`: one entry per question,
    /// in the order asked.
    Answers {
        /// One entry per question asked, in order (1 to 4).
        answers: Vec<OptionAnswer>,
    },
    /// `approved`: the person's decision (an approval's; a question or a connection
    /// reads it as its value).
    Approved {
        /// The decision: `true` releases the held call, `false` fails it as `tool.denied`.
        approved: bool,
        /// The person's reason, optional: free text of at most 8,000 characters; no
        /// control character but TAB, LF and CR.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The arguments digest the person saw; must match when given (required
        /// with `editedArguments`).
        #[serde(
            default,
            rename = "argumentsDigest",
            skip_serializing_if = "Option::is_none"
        )]
        arguments_digest: Option<String>,
        /// Edit, then approve: the arguments to release instead of the held ones. A
        /// JSON object of at most 256 KiB canonical JSON and 32 levels, only with
        /// `approved: true` and `argumentsDigest`, only on an `editable` hold. A JSON
        /// `null` stays `Some(Value::Null)` (an edit that is not an object), distinct
        /// from an absent field.
        #[serde(
            default,
            rename = "editedArguments",
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        edited_arguments: Option<Value>,
    },
    /// `value`: any JSON, read by the interaction's kind (README "The HTTP API",
    /// reading rules).
    Value {
        /// Any JSON value, read by the interaction's kind; at most 256 KiB serialized
        /// and 32 levels deep.
        value: Value,
        /// The person's reason, optional: free text of at most 8,000 characters; no
        /// control character but TAB, LF and CR.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A plain text reply (an A2A text part). Never approves.
    Text {
        /// The person's text: free text of at most 8,000 characters; no control
        /// character but TAB, LF and CR.
        text: String,
    },
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AnswerCommand {
    /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect id
    /// of an approval, a UUID for a question.
    pub interaction_id: InteractionId,
    /// Which operation it came through.
    pub route: AnswerRoute,
    /// The idempotency key (A2A `messageId`, `Idempotency-Key`, or a body digest).
    pub key: IdempotencyKey,
    /// The person who acted: a verified JWT `sub` or the local OS user (1 to 256
    /// characters, no control characters).
    pub by: PersonId,
    /// The caller's groups, from the configured groups claim of their token (none
    /// for the local user or the development headers without
    /// `X-Holdpoint-Groups`): what an interaction's group assignees match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupName>,
    /// When given (A2A), must match the interaction's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// When given (A2A), must match the interaction's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<ContextId>,
    /// What the person sent, read against the interaction's kind by the worker.
    pub input: AnswerInput,
    /// Approvals only: write a remembered rule from this decision (a question or a
    /// connection refuses it with `NRY-0025` and writes nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<Remember>,
}

impl CommandEnvelope {
    /// The subject verb: `hp.cmd.<org>.<verb>`.
    pub fn verb(&self) -> &'static str {
        match &self.command {
            Command::SessionOpen { .. } => "session-open",
            Command::SessionClose { .. } => "session-close",
            Command::SessionEnd { .. } => "session-end",
            Command::Open(_) => "open",
            Command::Close { .. } => "close",
            Command::Answer(_) => "answer",
            Command::ToolResult { .. } => "tool-result",
            Command::Deadline { .. } => "deadline",
            Command::Reassign { .. } => "reassign",
            Command::Expire { .. } => "expire",
            Command::Message { .. } => "message",
            Command::TurnStart { .. } => "turn-start",
            Command::TurnFinish { .. } => "turn-finish",
        }
    }

    /// The deterministic command id, used as `Nats-Msg-Id`: the same logical command
    /// (same org, target and key) always maps to the same id, and ids are scoped by
    /// organisation and task, so two tenants using the same `messageId` never collide
    /// (RELIABILITY.md guarantee 2). A session's opening includes its mode and an
    /// interaction's opening its content, so reopening with other content is another
    /// command (decided as a conflict), not a replay of the first.
    ///
    /// Longer than the other functions on purpose: one flat match, one arm per
    /// command, each arm the whole recipe of that command's id. The recipes are
    /// dedup keys that must never change across an upgrade, and reading them side
    /// by side is what keeps them checkable; helpers per arm would only scatter them.
    pub fn command_id(&self) -> CommandId {
        let org = self.org.as_str();
        let d = match &self.command {
            Command::SessionOpen { session, mode, .. } => {
                let mode = mode.as_str();
                digest(&[org, "session-open", session.as_str(), mode])
            }
            Command::SessionClose { session } => digest(&[org, "session-close", session.as_str()]),
            Command::SessionEnd { session } => digest(&[org, "session-end", session.as_str()]),
            Command::Open(o) => {
                let content = serde_json::to_value(o)
                    .map(|v| canonical_json(&v))
                    .unwrap_or_default();
                digest(&[org, "open", o.interaction_id.as_str(), &content])
            }
            Command::Close {
                interaction_id,
                reason,
                ..
            } => digest(&[org, "close", interaction_id.as_str(), reason.as_str()]),
            // The person is part of the id: another person reusing a key is another
            // answer (a conflict), never a replay of the first.
            Command::Answer(a) => digest(&[
                org,
                "answer",
                a.task_id.as_ref().map_or("", TaskId::as_str),
                a.interaction_id.as_str(),
                a.key.as_str(),
                a.by.as_str(),
            ]),
            // The result is part of the id: the same result again is a replay; another
            // one reaches the worker, which refuses it (`NRY-0021`) rather than have
            // JetStream drop it as a duplicate and the runtime read "finished".
            Command::ToolResult {
                interaction_id,
                result,
                ..
            } => {
                let result = serde_json::to_value(result)
                    .map(|v| canonical_json(&v))
                    .unwrap_or_default();
                digest(&[org, "tool-result", interaction_id.as_str(), &result])
            }
            // The same deadline request again is a replay; another one is a new command.
            Command::Deadline {
                interaction_id,
                expires_at,
                expires_in,
                change_id,
                ..
            } => {
                let at = expires_at.map(crate::timestamp::format).unwrap_or_default();
                let secs = expires_in.map(|s| s.to_string()).unwrap_or_default();
                let mut parts = vec![org, "deadline", interaction_id.as_str(), &at, &secs];
                // Appended only when given, so the ids of commands without one
                // stay what they were.
                if let Some(c) = change_id {
                    parts.push(c.as_str());
                }
                digest(&parts)
            }
            // One id per change: the runtime's retry is a replay, a later change back
            // to the same assignees is another command.
            Command::Reassign {
                interaction_id,
                change_id,
                ..
            } => digest(&[org, "reassign", interaction_id.as_str(), change_id.as_str()]),
            // One id per (interaction, deadline, stage): a schedule that fires twice
            // is decided once.
            Command::Expire {
                interaction_id,
                expires_at,
                stage,
                ..
            } => digest(&[
                org,
                match stage {
                    DeadlineStage::Warn => "expiring",
                    DeadlineStage::Expire => "expire",
                },
                interaction_id.as_str(),
                &crate::timestamp::format(*expires_at),
            ]),
            // Message ids are keys of their lane: the same id on two lanes is two
            // messages.
            Command::Message {
                session,
                lane,
                message_id,
                ..
            } => digest(&[
                org,
                "message",
                session.as_str(),
                lane.as_str(),
                message_id.as_str(),
            ]),
            Command::TurnStart {
                session,
                lane,
                turn_id,
            } => digest(&[
                org,
                "turn-start",
                session.as_str(),
                lane.as_str(),
                turn_id.as_str(),
            ]),
            Command::TurnFinish {
                session,
                lane,
                turn_id,
            } => digest(&[
                org,
                "turn-finish",
                session.as_str(),
                lane.as_str(),
                turn_id.as_str(),
            ]),
        };
        CommandId::from_digest(&d)
    }

    /// The interaction this command addresses, if any.
    pub fn interaction_id(&self) -> Option<&InteractionId> {
        match &self.command {
            Command::Open(o) => Some(&o.interaction_id),
            Command::Close { interaction_id, .. }
            | Command::ToolResult { interaction_id, .. }
            | Command::Deadline { interaction_id, .. }
            | Command::Reassign { interaction_id, .. }
            | Command::Expire { interaction_id, .. } => Some(interaction_id),
            Command::Answer(a) => Some(&a.interaction_id),
            _ => None,
        }
    }

    /// The A2A task this command names directly, if any.
    pub fn task_id(&self) -> Option<&TaskId> {
        match &self.command {
            Command::Open(o) => Some(&o.task_id),
            Command::Answer(a) => a.task_id.as_ref(),
            Command::Close { task_id, .. }
            | Command::ToolResult { task_id, .. }
            | Command::Deadline { task_id, .. }
            | Command::Reassign { task_id, .. } => task_id.as_ref(),
            Command::Expire { task_id, .. } => Some(task_id),
            _ => None,
        }
    }

    /// The subject token that picks this command's partition, with the organisation
    /// (`hp.cmd.<org>.<key>.<verb>`): the task for interaction commands (so one
    /// task's commands are decided in order by one worker), the interaction when the
    /// sender did not name the task, the session for session and lane commands.
    pub fn partition_key(&self) -> std::borrow::Cow<'_, str> {
        if let Some(task) = self.task_id() {
            return task.token();
        }
        if let Some(id) = self.interaction_id() {
            return id.token();
        }
        match self.session_id() {
            Some(session) => session.token(),
            None => std::borrow::Cow::Borrowed("_"),
        }
    }

    /// The lane this command names directly, if any.
    pub fn lane_id(&self) -> Option<&LaneId> {
        match &self.command {
            Command::Message { lane, .. }
            | Command::TurnStart { lane, .. }
            | Command::TurnFinish { lane, .. } => Some(lane),
            Command::Open(o) => Some(&o.lane),
            _ => None,
        }
    }

    /// The session this command names directly, if any (an answer's session is read
    /// from its interaction).
    pub fn session_id(&self) -> Option<&SessionId> {
        match &self.command {
            Command::SessionOpen { session, .. }
            | Command::SessionClose { session }
            | Command::SessionEnd { session }
            | Command::Message { session, .. }
            | Command::TurnStart { session, .. }
            | Command::TurnFinish { session, .. } => Some(session),
            Command::Open(o) => Some(&o.session),
            _ => None,
        }
    }
}

/// Reads a field that is present as `Some`, whatever its JSON value (`null`
/// included); with `#[serde(default)]` an absent field stays `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

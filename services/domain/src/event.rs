//! Events: CloudEvents 1.0 in structured JSON mode, published on
//! `hp.evt.<org>.<taskId>.<name>` (audit records on `hp.audit.<org>`), each with a
//! deterministic `id` derived from the interaction and the transition, used as
//! `Nats-Msg-Id`, so re-emitting after a crash is a no-op (README "NATS topology").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::digest::digest;
use crate::ids::{
    CallId, ContextId, IdempotencyKey, InteractionId, LaneId, MessageId, OrgId, PersonId, RuleId,
    SessionId, TaskId,
};
use crate::interaction::Assignees;
use crate::policy::Rule;
use crate::vocab::{
    Admission, Answer, CallResult, CloseReason, Kind, LaneContent, Resolver, SessionMode, TaskState,
};

/// The interactions/v1 A2A extension URI, under which status messages carry the open
/// interaction.
pub const EXTENSION_URI: &str = "https://docs.nylorun.com/a2a/interactions/v1";

/// A CloudEvents 1.0 event (structured mode). `type` and `data` come from [`EventData`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// The CloudEvents version, always `"1.0"`.
    pub specversion: String,
    /// Deterministic id (`evt-<40 hex>`), also the `Nats-Msg-Id`.
    pub id: String,
    /// The CloudEvents source, `/holdpoint/orgs/<org token>`.
    pub source: String,
    /// The interaction or session the event is about.
    pub subject: String,
    /// When the transition happened: RFC 3339 in UTC with milliseconds
    /// (`2026-04-01T10:00:03.520Z`), the one format of `holdpoint_domain::timestamp`.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub time: OffsetDateTime,
    /// The media type of `data`, always `application/json`.
    pub datacontenttype: String,
    /// Extension attribute: the organisation.
    pub orgid: OrgId,
    /// Extension attribute: the A2A task, when the event belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskid: Option<TaskId>,
    /// `type` + `data`.
    #[serde(flatten)]
    pub body: EventData,
}

/// The open interaction as the interactions/v1 extension puts it on a status message
/// (README "A2A").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OpenInteractionRef {
    /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect id
    /// of an approval, a UUID for a question.
    pub interaction_id: InteractionId,
    /// The interaction's kind: `approval`, `question` or `connection`.
    pub kind: Kind,
    /// The text shown to a person (free text; no control character but TAB, LF and CR).
    pub prompt: String,
    /// Detail (never arguments).
    pub detail: Value,
    /// The interaction's deadline (RFC 3339 with milliseconds), when it has one: a
    /// Holdpoint field beside the extension's own.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<OffsetDateTime>,
    /// Who may answer it (README "Assignees"), when it names anyone: a Holdpoint
    /// field beside the extension's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignees: Option<Assignees>,
    /// Who its deadline's warning stage adds to the assignees (README
    /// "Escalation"), when it names an escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Assignees>,
    /// When it was escalated (RFC 3339 with milliseconds); absent until then.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub escalated_at: Option<OffsetDateTime>,
}

/// A2A `TaskStatus` as carried on a status event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusData {
    /// The A2A task (1 to 128 printable ASCII characters, no spaces).
    pub task_id: TaskId,
    /// The A2A context (1 to 128 printable ASCII characters, no spaces).
    pub context_id: ContextId,
    /// The new state.
    pub state: TaskState,
    /// For interrupted states: the open interaction (becomes the status message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<OpenInteractionRef>,
}

/// Every event type. The CloudEvents `type` is `dev.holdpoint.<name>`; the subject's
/// last token is `<name>` ([`EventData::name`]), the variant's name in kebab case
/// (derived; a test checks each serde `type` is `dev.holdpoint.` + that name).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantNames,
    strum::EnumDiscriminants,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", content = "data")]
#[strum(serialize_all = "kebab-case")]
#[strum_discriminants(
    name(EventKind),
    derive(strum::IntoStaticStr, strum::VariantArray),
    strum(serialize_all = "kebab-case"),
    doc = "An event type without its data, for naming one in a subject filter ([`EventKind::name`] is [`EventData::name`])."
)]
pub enum EventData {
    /// A session started.
    #[serde(rename = "dev.holdpoint.session-opened")]
    SessionOpened {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's mode: `blocking` (the call waits) or `product` (answers become
        /// lane messages).
        mode: SessionMode,
    },
    /// A session closed or ended.
    #[serde(rename = "dev.holdpoint.session-closed")]
    SessionClosed {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// True when ended (gone), false when only closed to new messages.
        ended: bool,
    },
    /// The tool policy held a call for approval.
    #[serde(rename = "dev.holdpoint.approval-requested", rename_all = "camelCase")]
    ApprovalRequested {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        interaction_id: InteractionId,
        /// The blocked tool call (1 to 128 printable ASCII characters, no spaces); its
        /// one `tool-call-finished` names it.
        call_id: CallId,
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The text shown to a person (free text; no control character but TAB, LF and CR).
        prompt: String,
        /// Detail (server, tool, reason).
        detail: Value,
        /// Digest of the held arguments.
        arguments_digest: String,
    },
    /// `ask_user` asked; the options are in engine order (answers index into them).
    #[serde(rename = "dev.holdpoint.question-asked", rename_all = "camelCase")]
    QuestionAsked {
        /// The question id (UUID).
        question_id: InteractionId,
        /// The `ask_user` call.
        call_id: CallId,
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's mode: `blocking` (the call waits) or `product` (answers become
        /// lane messages).
        mode: SessionMode,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The text shown to a person (free text; no control character but TAB, LF and CR).
        prompt: String,
        /// The questions with their options, in engine order.
        questions: Value,
    },
    /// `request_connection` asked for an app.
    #[serde(
        rename = "dev.holdpoint.connection-requested",
        rename_all = "camelCase"
    )]
    ConnectionRequested {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        interaction_id: InteractionId,
        /// The blocked tool call (1 to 128 printable ASCII characters, no spaces); its
        /// one `tool-call-finished` names it.
        call_id: CallId,
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// `Connect <app>: <reason>`.
        prompt: String,
        /// `{app, reason}`: the app the agent wants connected (at most 80 characters) and
        /// why (at most 280 characters).
        detail: Value,
    },
    /// A task's A2A status changed.
    #[serde(rename = "dev.holdpoint.task-status")]
    TaskStatus(TaskStatusData),
    /// A person's answer, or a remembered rule (`rule`), resolved an interaction.
    #[serde(
        rename = "dev.holdpoint.interaction-resolved",
        rename_all = "camelCase"
    )]
    InteractionResolved {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// The recorded answer, by kind: a decision, per-question answers, or a JSON value.
        answer: Answer,
        /// Who answered (`approvedBy` for approvals); `holdpoint:expiry` when the
        /// deadline decided.
        by: PersonId,
        /// The resolving key (for a rule's decision, the rule id).
        key: IdempotencyKey,
        /// `person`; `rule` when a remembered rule decided at the hold; `expiry` when
        /// the deadline decided (the answer is then the kind's expiry default).
        #[serde(default)]
        resolved_by: Resolver,
        /// The remembered rule that decided, when no person did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleId>,
    },
    /// A pending interaction's deadline is near: it expires at `expiresAt` unless
    /// answered (sent once per deadline, the configured lead before it).
    #[serde(
        rename = "dev.holdpoint.interaction-expiring",
        rename_all = "camelCase"
    )]
    InteractionExpiring {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// When it expires, RFC 3339 with milliseconds.
        #[serde(with = "crate::timestamp")]
        #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
        expires_at: OffsetDateTime,
    },
    /// The runtime changed who may answer a pending interaction (its `reassign`
    /// command); the audit records the same change as `assignees-changed`.
    #[serde(
        rename = "dev.holdpoint.interaction-reassigned",
        rename_all = "camelCase"
    )]
    InteractionReassigned {
        /// The interaction (1 to 128 printable ASCII characters, no spaces).
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// Who may answer it now; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignees: Option<Assignees>,
        /// Who could answer it before; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<Assignees>,
        /// The people whose counted approvals (of a hold that needs several) no
        /// longer count: the new assignees do not admit them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        withdrawn_approvals: Vec<PersonId>,
    },
    /// Nobody answered a pending interaction by its deadline's warning stage, so
    /// its escalation was applied (README "Escalation"): the escalation's people
    /// and groups were added to the assignees. Once per interaction; the audit
    /// records it as `escalated`.
    #[serde(
        rename = "dev.holdpoint.interaction-escalated",
        rename_all = "camelCase"
    )]
    InteractionEscalated {
        /// The interaction (1 to 128 printable ASCII characters, no spaces).
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// The escalation the opening named: the people and groups added.
        escalation: Assignees,
        /// Who may answer it now (the assignees before, then the escalation's names
        /// they lacked); absent: anyone of the organisation, as before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignees: Option<Assignees>,
        /// Who could answer it before; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<Assignees>,
        /// The deadline whose warning stage escalated it, RFC 3339 with milliseconds.
        #[serde(with = "crate::timestamp")]
        #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
        expires_at: OffsetDateTime,
    },
    /// An interaction closed without an answer.
    #[serde(rename = "dev.holdpoint.interaction-closed", rename_all = "camelCase")]
    InteractionClosed {
        /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect
        /// id of an approval, a UUID for a question.
        interaction_id: InteractionId,
        /// Why it closed: `interrupted`, `superseded`, `expired` or `canceled`.
        reason: CloseReason,
    },
    /// An approved call is released for execution: as the person saw it, or as they
    /// edited it (`edited`).
    #[serde(rename = "dev.holdpoint.tool-call-released", rename_all = "camelCase")]
    ToolCallReleased {
        /// Effect id (the executor's idempotency key).
        effect_id: InteractionId,
        /// The blocked tool call (1 to 128 printable ASCII characters, no spaces); its
        /// one `tool-call-finished` names it.
        call_id: CallId,
        /// The MCP server of the held call: a one-line name of at most 200 characters.
        server: String,
        /// The tool of the held call: a one-line name of at most 200 characters.
        tool: String,
        /// The arguments to run: the held ones, or the person's edit when `edited`.
        arguments: Value,
        /// SHA-256 of the canonical JSON of the held (original) arguments, 64
        /// lower-case hex digits (`argumentsDigest`, as the hold and the audit name it).
        arguments_digest: String,
        /// True when the person edited the arguments before approving: `arguments`
        /// are then the edit, not the held call's.
        #[serde(default)]
        edited: bool,
        /// With `edited`: SHA-256 of the canonical JSON of the released (edited)
        /// `arguments`, 64 lower-case hex digits.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edited_arguments_digest: Option<String>,
        /// The approver: the person, or for a remembered rule its author and id
        /// (`alice (rule rul_…)`).
        approved_by: PersonId,
        /// The remembered rule that approved, when no person did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleId>,
        /// For a hold that needed several approvals: every person whose approval
        /// counted, in order (`approvedBy` is the last).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approvals: Vec<PersonId>,
    },
    /// One person's approval of a hold that needs several was counted
    /// (README "Two-person approvals"); the audit records it as `approval-recorded`.
    /// When `given` reaches `required` the call is released in the same decision.
    #[serde(rename = "dev.holdpoint.approval-counted", rename_all = "camelCase")]
    ApprovalCounted {
        /// The approval's interaction, the effect id of the held call.
        interaction_id: InteractionId,
        /// The person whose approval counted.
        by: PersonId,
        /// Distinct approvals counted so far, this one included (1 to 5).
        given: u8,
        /// How many the hold needs (2 to 5).
        required: u8,
    },
    /// A blocked call finished; exactly one per blocked call.
    #[serde(rename = "dev.holdpoint.tool-call-finished", rename_all = "camelCase")]
    ToolCallFinished {
        /// The blocked tool call (1 to 128 printable ASCII characters, no spaces); its
        /// one `tool-call-finished` names it.
        call_id: CallId,
        /// The interaction that blocked it.
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// How the blocked call ends: `{"status": "ok", "output"}` or `{"status":
        /// "error", "code", "message"}`.
        result: CallResult,
    },
    /// A lane took a person's message.
    #[serde(rename = "dev.holdpoint.lane-message", rename_all = "camelCase")]
    LaneMessage {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The message's id (1 to 128 printable ASCII characters, no spaces); the
        /// question id when the message is an answer.
        message_id: MessageId,
        /// Admitted (its turn started) or queued.
        admission: Admission,
        /// The person who acted: a verified JWT `sub` or the local OS user (1 to 256
        /// characters, no control characters).
        by: PersonId,
        /// What the message carries: the person's text, or the answer to a product
        /// question.
        content: LaneContent,
    },
    /// A lane's turn changed: `running` started (or none runs).
    #[serde(rename = "dev.holdpoint.turn-started", rename_all = "camelCase")]
    TurnStarted {
        /// The runtime session (1 to 128 printable ASCII characters, no spaces).
        session: SessionId,
        /// The session's lane (1 to 128 printable ASCII characters, no spaces).
        lane: LaneId,
        /// The message (or turn id) whose turn started.
        turn_id: MessageId,
    },
    /// Audit (`hp.audit.<org>`): an approval decided. Never a question.
    #[serde(rename = "dev.holdpoint.approval-decided", rename_all = "camelCase")]
    ApprovalDecided {
        /// The approval's interaction, the effect id of the held call (1 to 128
        /// printable ASCII characters, no spaces).
        effect_id: InteractionId,
        /// The MCP server of the held call: a one-line name of at most 200 characters.
        server: String,
        /// The tool of the held call: a one-line name of at most 200 characters.
        tool: String,
        /// The held call's arguments digest (hex SHA-256 of their canonical JSON); the
        /// held arguments themselves are never audited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments_digest: Option<String>,
        /// When the person edited the call before approving: the arguments they
        /// released (a JSON object; the editor is `approvedBy`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edited_arguments: Option<Value>,
        /// With `editedArguments`: their digest (hex SHA-256 of the canonical JSON).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edited_arguments_digest: Option<String>,
        /// The decision: true when the call was released.
        approved: bool,
        /// `allowed`, `denied`, or `expired` (the approval's deadline passed first).
        #[serde(default)]
        outcome: AuditOutcome,
        /// What decided: a `person`, a remembered `rule`, or `expiry`.
        #[serde(default)]
        decided_by: Decider,
        /// Who decided: the person, or for a rule its author and id
        /// (`alice (rule rul_…)`); absent for an expiry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approved_by: Option<PersonId>,
        /// The rule that decided, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleId>,
        /// Why: the person's reason, or which rule decided, or that the deadline passed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// For a hold that needs several approvals: the people whose approvals had
        /// counted when it was decided, in order (all of them for a release; the
        /// partial ones for a denial or an expiry).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approvals: Vec<PersonId>,
    },
    /// Audit (`hp.audit.<org>`): one person's approval of a hold that needs several
    /// was counted (with `approval-counted` on the events stream).
    #[serde(rename = "dev.holdpoint.approval-recorded", rename_all = "camelCase")]
    ApprovalRecorded {
        /// The approval's interaction, the effect id of the held call.
        effect_id: InteractionId,
        /// The MCP server of the held call: a one-line name of at most 200 characters.
        server: String,
        /// The tool of the held call: a one-line name of at most 200 characters.
        tool: String,
        /// The held call's arguments digest: the approval binds to it.
        arguments_digest: String,
        /// The person whose approval counted.
        approved_by: PersonId,
        /// Their reason, when they gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Distinct approvals counted so far, this one included (1 to 5).
        given: u8,
        /// How many the hold needs (2 to 5).
        required: u8,
    },
    /// Audit (`hp.audit.<org>`): a person's answer wrote a remembered rule.
    #[serde(rename = "dev.holdpoint.rule-written", rename_all = "camelCase")]
    RuleWritten {
        /// The rule as written (who, server, tool, scope, digest; never arguments).
        rule: Rule,
    },
    /// Audit (`hp.audit.<org>`): a person revoked a remembered rule.
    #[serde(rename = "dev.holdpoint.rule-revoked", rename_all = "camelCase")]
    RuleRevoked {
        /// The rule as revoked (`revoked` names who and when).
        rule: Rule,
    },
    /// Audit (`hp.audit.<org>`): the runtime changed who may answer an
    /// interaction (each change once, with `interaction-reassigned` on the events
    /// stream).
    #[serde(rename = "dev.holdpoint.assignees-changed", rename_all = "camelCase")]
    AssigneesChanged {
        /// The interaction (1 to 128 printable ASCII characters, no spaces).
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// Who may answer it now; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignees: Option<Assignees>,
        /// Who could answer it before; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<Assignees>,
        /// The people whose counted approvals (of a hold that needs several) no
        /// longer count: the new assignees do not admit them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        withdrawn_approvals: Vec<PersonId>,
    },
    /// Audit (`hp.audit.<org>`): an interaction's escalation was applied at its
    /// deadline's warning stage (once, with `interaction-escalated` on the events
    /// stream).
    #[serde(rename = "dev.holdpoint.escalated", rename_all = "camelCase")]
    Escalated {
        /// The interaction (1 to 128 printable ASCII characters, no spaces).
        interaction_id: InteractionId,
        /// The interaction's kind: `approval`, `question` or `connection`.
        kind: Kind,
        /// The escalation the opening named: the people and groups added.
        escalation: Assignees,
        /// Who may answer it now (the assignees before, then the escalation's names
        /// they lacked); absent: anyone of the organisation, as before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignees: Option<Assignees>,
        /// Who could answer it before; absent: anyone of the organisation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<Assignees>,
        /// The deadline whose warning stage escalated it, RFC 3339 with milliseconds.
        #[serde(with = "crate::timestamp")]
        #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
        expires_at: OffsetDateTime,
    },
    /// A command could not be decoded and was terminated.
    #[serde(rename = "dev.holdpoint.dead-letter", rename_all = "camelCase")]
    DeadLetter {
        /// The subject the command was stored under (`hp.cmd.…`).
        subject: String,
        /// The command's sequence in the commands stream (`HP_COMMANDS`).
        stream_sequence: u64,
        /// Why it could not be decided: the decode error, or a subject that does not
        /// match the command.
        reason: String,
    },
    /// A webhook endpoint was disabled after too many failed delivery attempts in a
    /// row (published by the notifier on `hp.evt.<org>._.webhook-disabled`).
    #[serde(rename = "dev.holdpoint.webhook-disabled", rename_all = "camelCase")]
    WebhookDisabled {
        /// The webhook endpoint (`wh_` and 32 hex digits).
        webhook_id: crate::ids::WebhookId,
        /// The endpoint's URL: `https` (plain `http` only to a loopback host in local
        /// mode), no credentials or fragment.
        url: String,
        /// Failed attempts in a row when it was disabled.
        consecutive_failures: u32,
    },
    /// A test message asked for with `POST /v1/webhooks/{id}/test`: sent to that
    /// endpoint only, never stored in the events stream.
    #[serde(rename = "dev.holdpoint.webhook-test", rename_all = "camelCase")]
    WebhookTest {
        /// The webhook endpoint (`wh_` and 32 hex digits).
        webhook_id: crate::ids::WebhookId,
    },
}

impl EventData {
    /// The short name: the subject's last token and the `type` without its prefix.
    pub fn name(&self) -> &'static str {
        self.into()
    }
}

impl EventKind {
    /// Every event type, in declaration order (derived from [`EventData`]'s variants).
    pub const ALL: &'static [EventKind] = <EventKind as strum::VariantArray>::VARIANTS;

    /// The short name (`task-status`): the subject's last token.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// True for the decision-audit records, published on `hp.audit.<org>` (stream
    /// `HP_AUDIT`) instead of `hp.evt.<org>.<task>.<name>`.
    pub fn is_audit(self) -> bool {
        matches!(
            self,
            EventKind::ApprovalDecided
                | EventKind::ApprovalRecorded
                | EventKind::RuleWritten
                | EventKind::RuleRevoked
                | EventKind::AssigneesChanged
                | EventKind::Escalated
        )
    }
}

/// Every short event name, in declaration order, for documentation and subject
/// filters (derived from [`EventData`]'s variants).
pub const EVENT_NAMES: &[&str] = <EventData as strum::VariantNames>::VARIANTS;

impl Event {
    /// Builds an event whose id is derived from `(org, subject, transition)`: the same
    /// transition always gets the same id.
    pub fn new(
        org: &OrgId,
        task: Option<&TaskId>,
        subject: &str,
        transition: &str,
        time: OffsetDateTime,
        body: EventData,
    ) -> Self {
        let d = digest(&[org.as_str(), subject, transition, body.name()]);
        Event {
            specversion: "1.0".into(),
            id: format!("evt-{}", &d[..40]),
            source: format!("/holdpoint/orgs/{}", org.token()),
            subject: subject.to_owned(),
            time,
            datacontenttype: "application/json".into(),
            orgid: org.clone(),
            taskid: task.cloned(),
            body,
        }
    }

    /// The short name of this event's type.
    pub fn name(&self) -> &'static str {
        self.body.name()
    }
}

/// How an approval's decision came out, for the audit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AuditOutcome {
    /// The call was released.
    #[default]
    Allowed,
    /// The call finished as `tool.denied`.
    Denied,
    /// The approval's deadline passed before anyone decided.
    Expired,
}

/// What decided an approval, for the audit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Decider {
    /// A person answered.
    #[default]
    Person,
    /// A remembered rule matched the held call.
    Rule,
    /// The deadline passed.
    Expiry,
}

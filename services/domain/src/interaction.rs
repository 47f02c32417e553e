//! The interaction record, the source of truth for one interaction (KV
//! `HP_INTERACTIONS`, key `<org>.<interactionId>`), and the views the APIs show of it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::{
    AgentId, CallId, CommandId, ContextId, GroupName, IdempotencyKey, InteractionId, LaneId,
    MessageId, OrgId, PersonId, SessionId, TaskId,
};
use crate::outcome::Outcome;
use crate::transition::{Outbox, Transition};
use crate::vocab::{
    Answer, CallResult, CloseReason, Kind, OnExpiry, Resolver, SessionMode, Spec, State,
};

/// The resolving answer, kept forever on the record (RELIABILITY.md guarantee 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The idempotency key that resolved it.
    pub key: IdempotencyKey,
    /// The command id that resolved it.
    pub command_id: CommandId,
    /// Who answered (`approvedBy` for approvals).
    pub by: PersonId,
    /// When, RFC 3339.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The recorded answer; a later body never changes it.
    pub answer: Answer,
    /// A person's answer (left out) or the deadline (`expiry`).
    #[serde(default, skip_serializing_if = "Resolver::is_person")]
    pub resolved_by: Resolver,
    /// What the answer returned, replayed to every retry with the same key.
    pub outcome: Outcome,
}

/// The closing of an interaction without an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Closure {
    /// Why it closed: `interrupted`, `superseded`, `expired` or `canceled`.
    pub reason: CloseReason,
    /// When, RFC 3339 in UTC with milliseconds (`2026-04-01T10:00:03.520Z`).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The lane message that superseded it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_message: Option<MessageId>,
}

/// One person's approval of an approval that needs several (README "Two-person
/// approvals"), kept on the record in the order given. The call is released when
/// the record holds as many as the hold's `approvals`; a person is counted once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GivenApproval {
    /// Who approved (the token's `sub`).
    pub by: PersonId,
    /// The idempotency key of their answer: the same key again replays `outcome`.
    pub key: IdempotencyKey,
    /// The command that counted it.
    pub command_id: CommandId,
    /// When, RFC 3339 in UTC with milliseconds.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The person's reason, when they gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The assigned groups the person answered as a member of (at most 32); a
    /// reassignment keeps the approval only while the person, or one of these
    /// groups, is still assigned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<GroupName>,
    /// What their answer replied (`approval-counted`, or resolved for the last).
    pub outcome: Outcome,
}

/// How many withdrawn approvals an interaction record keeps for their keys'
/// replays ([`Interaction::withdrawn_approvals`]).
pub const WITHDRAWN_KEEP: usize = 16;

/// How far an approval that needs several people has come, as the views show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsView {
    /// How many distinct people must approve (2 to 5).
    pub required: u8,
    /// Who approved so far, oldest first (each person once).
    pub given: Vec<ApprovalGiven>,
    /// In a person's view: `true` when they already approved (approving again is
    /// `409 NRY-0038`; denying still decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_you: Option<bool>,
}

/// One approval counted so far: who and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalGiven {
    /// The person (the token's `sub`).
    pub by: PersonId,
    /// When, RFC 3339 in UTC with milliseconds.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
}

/// The most people, and separately the most groups, one interaction's
/// [`Assignees`] may name.
pub const MAX_ASSIGNEES: usize = 32;

/// Who may answer an interaction: people (a token's `sub`) and groups (the
/// configured groups claim of a token, README "Assignees"). A caller may answer
/// when their person is listed or one of their groups is. Names are compared byte
/// for byte: no case folding, no trimming, no Unicode normalisation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Assignees {
    /// People, by `sub` (each 1 to 256 characters, no control characters; at most
    /// [`MAX_ASSIGNEES`], no repeats).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub people: Vec<PersonId>,
    /// Groups (each 1 to 128 printable ASCII characters, no spaces; at most
    /// [`MAX_ASSIGNEES`], no repeats).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupName>,
}

impl Assignees {
    /// Assignees from names (not yet [checked](Assignees::check) for bounds).
    ///
    /// # Errors
    /// [`crate::IdError`] for a name that is not a person id or a group name.
    pub fn of(people: &[&str], groups: &[&str]) -> Result<Self, crate::IdError> {
        Ok(Assignees {
            people: people
                .iter()
                .map(|p| PersonId::parse(*p))
                .collect::<Result<_, _>>()?,
            groups: groups
                .iter()
                .map(|g| GroupName::parse(*g))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Checks the bounds: at least one person or group, at most [`MAX_ASSIGNEES`]
    /// of each, none named twice.
    ///
    /// # Errors
    /// A message for the person who sent them (the caller answers `NRY-0001`).
    pub fn check(&self) -> Result<(), String> {
        if self.people.is_empty() && self.groups.is_empty() {
            return Err(
                "assignees names nobody: name at least one person or group, or leave \
                        assignees out to let anyone of the organisation answer"
                    .into(),
            );
        }
        for (what, len) in [("people", self.people.len()), ("groups", self.groups.len())] {
            if len > MAX_ASSIGNEES {
                return Err(format!(
                    "assignees.{what} names {len}; at most {MAX_ASSIGNEES} are allowed"
                ));
            }
        }
        if let Some(p) = first_repeat(&self.people) {
            return Err(format!("assignees.people names {p:?} twice"));
        }
        if let Some(g) = first_repeat(&self.groups) {
            return Err(format!("assignees.groups names {g:?} twice"));
        }
        Ok(())
    }

    /// True when `person`, or one of `groups`, is assigned.
    pub fn admits(&self, person: &PersonId, groups: &[GroupName]) -> bool {
        self.people.contains(person) || groups.iter().any(|g| self.groups.contains(g))
    }

    /// These assignees and then those of `more` that are not among them yet, each
    /// list in order (README "Escalation"). The result may name more than
    /// [`MAX_ASSIGNEES`]; [`Assignees::check`] says so.
    pub fn union(&self, more: &Assignees) -> Assignees {
        fn join<T: PartialEq + Clone>(a: &[T], b: &[T]) -> Vec<T> {
            let mut out = a.to_vec();
            for x in b {
                if !out.contains(x) {
                    out.push(x.clone());
                }
            }
            out
        }
        Assignees {
            people: join(&self.people, &more.people),
            groups: join(&self.groups, &more.groups),
        }
    }
}

fn first_repeat<T: PartialEq + std::fmt::Display>(items: &[T]) -> Option<String> {
    items
        .iter()
        .enumerate()
        .find(|(n, x)| items[..*n].contains(x))
        .map(|(_, x)| x.to_string())
}

/// The interaction record (KV `<org>.<interactionId>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Interaction {
    /// The id (effect id for approvals, UUID for questions).
    pub id: InteractionId,
    /// The owning organisation.
    pub org: OrgId,
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session: SessionId,
    /// The session's mode when opened.
    pub mode: SessionMode,
    /// The session's lane (1 to 128 printable ASCII characters, no spaces).
    pub lane: LaneId,
    /// The A2A task.
    pub task_id: TaskId,
    /// The A2A context.
    pub context_id: ContextId,
    /// The tool call it blocks.
    pub call_id: CallId,
    /// The agent the call was held for, when the runtime named one (what an
    /// `agent`-scoped remembered rule matches on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// What it is about.
    pub spec: Spec,
    /// Who may answer it; absent: anyone of the organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignees: Option<Assignees>,
    /// The approvals counted so far, when the hold needs several (`approvals` of
    /// its spec); each person once, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub given_approvals: Vec<GivenApproval>,
    /// Approvals a reassignment withdrew (their givers were no longer assigned),
    /// oldest first, at most [`WITHDRAWN_KEEP`]: kept so that their keys still
    /// replay what they answered; they count for nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withdrawn_approvals: Vec<GivenApproval>,
    /// Who is added to the assignees at the deadline's warning stage, if it still
    /// waits then (README "Escalation"); absent: no escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Assignees>,
    /// When the escalation was applied, RFC 3339; absent until then. An
    /// interaction escalates at most once.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub escalated_at: Option<OffsetDateTime>,
    /// The prompt shown to the person.
    pub prompt: String,
    /// Where it is in its lifecycle: `pending`, `resolved`, `finished` or `closed`.
    pub state: State,
    /// When it opened.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub opened_at: OffsetDateTime,
    /// Digest of the open command's content: reopening with the same content is a
    /// no-op, with other content a conflict.
    pub open_digest: String,
    /// The deadline, RFC 3339, while one is set (see `decide/expire.rs`).
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<OffsetDateTime>,
    /// What the deadline decides.
    #[serde(default, skip_serializing_if = "OnExpiry::is_default")]
    pub on_expiry: OnExpiry,
    /// The answer that resolved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// How it closed without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure: Option<Closure>,
    /// How the blocked call finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
    /// Recent transitions, newest last (see [`crate::transition`]).
    #[serde(default)]
    pub outbox: Outbox,
}

impl Interaction {
    /// This interaction's kind.
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    /// How many distinct people must approve it: the hold's `approvals` (1 for a
    /// question, a connection, or a hold that left it out).
    pub fn approvals_required(&self) -> u8 {
        match &self.spec {
            Spec::Approval { approvals, .. } => (*approvals).max(1),
            _ => 1,
        }
    }

    /// The counted or withdrawn approval `key` of `person` answered with, if any:
    /// the same key again replays its outcome.
    pub fn approval_by_key(
        &self,
        person: &PersonId,
        key: &IdempotencyKey,
    ) -> Option<&GivenApproval> {
        self.given_approvals
            .iter()
            .chain(&self.withdrawn_approvals)
            .find(|g| &g.key == key && &g.by == person)
    }

    /// True when `person` already approved it (an approval that needs several).
    pub fn approved_by(&self, person: &PersonId) -> bool {
        self.given_approvals.iter().any(|g| &g.by == person)
    }

    /// The approvals so far, when it needs several; `viewer` sets `byYou`.
    pub fn approvals_view(&self, viewer: Option<&PersonId>) -> Option<ApprovalsView> {
        let required = self.approvals_required();
        (required > 1).then(|| ApprovalsView {
            required,
            given: self
                .given_approvals
                .iter()
                .map(|g| ApprovalGiven {
                    by: g.by.clone(),
                    at: g.at,
                })
                .collect(),
            by_you: viewer.map(|p| self.approved_by(p)),
        })
    }

    /// The `detail` the views, events and A2A status messages show: the spec's
    /// ([`Spec::detail`]), with `approvals` (`{required, given: [{by, at}]}`) for an
    /// approval that needs several people.
    pub fn detail(&self) -> Value {
        let mut d = self.spec.detail();
        if let (Some(a), Some(obj)) = (self.approvals_view(None), d.as_object_mut())
            && let Ok(v) = serde_json::to_value(a)
        {
            obj.insert("approvals".into(), v);
        }
        d
    }

    /// True when `person` with `groups` may answer it: it names no assignees, or
    /// names the person or one of the groups.
    pub fn admits(&self, person: &PersonId, groups: &[GroupName]) -> bool {
        self.assignees
            .as_ref()
            .is_none_or(|a| a.admits(person, groups))
    }

    /// The public view as `person` with `groups` sees it: [`Interaction::view`]
    /// with `forYou` set when the interaction names assignees.
    pub fn view_for(&self, person: &PersonId, groups: &[GroupName]) -> InteractionView {
        let mut v = self.view();
        v.for_you = self.assignees.as_ref().map(|a| a.admits(person, groups));
        v.approvals = self.approvals_view(Some(person));
        v
    }

    /// The public view (no outbox; arguments only under `call`).
    pub fn view(&self) -> InteractionView {
        let call = match &self.spec {
            Spec::Approval {
                server,
                tool,
                arguments,
                arguments_digest,
                editable,
                ..
            } => Some(HeldCall {
                server: server.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                arguments_digest: arguments_digest.clone(),
                editable: *editable,
            }),
            _ => None,
        };
        InteractionView {
            interaction_id: self.id.clone(),
            kind: self.kind(),
            state: self.state,
            prompt: self.prompt.clone(),
            detail: self.detail(),
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            session_id: self.session.clone(),
            mode: self.mode,
            lane: self.lane.clone(),
            call_id: self.call_id.clone(),
            agent: self.agent.clone(),
            assignees: self.assignees.clone(),
            for_you: None,
            approvals: self.approvals_view(None),
            escalation: self.escalation.clone(),
            escalated_at: self.escalated_at,
            opened_at: self.opened_at,
            expires_at: self.expires_at,
            on_expiry: self.on_expiry,
            call,
            resolution: self.resolution.as_ref().map(|r| ResolutionView {
                by: r.by.clone(),
                resolved_by: r.resolved_by,
                at: r.at,
                answer: r.answer.clone(),
            }),
            closure: self.closure.clone(),
            result: self.result.clone(),
        }
    }

    pub(crate) fn push_outbox(&mut self, t: Transition) {
        self.outbox.push(t);
    }
}

/// The held call as the person sees it before approving.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeldCall {
    /// The MCP server of the held call: a one-line name of at most 200 characters.
    pub server: String,
    /// The tool of the held call: a one-line name of at most 200 characters.
    pub tool: String,
    /// The exact arguments that approval releases (unless the person edits them).
    pub arguments: Value,
    /// Their digest; send it back as `argumentsDigest` to bind the approval to it
    /// (required with `editedArguments`).
    pub arguments_digest: String,
    /// Whether the hold allows editing the arguments before approving
    /// (`editedArguments`; `false` refuses an edit with `NRY-0028`).
    #[serde(default)]
    pub editable: bool,
}

/// Who answered what, when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResolutionView {
    /// The person (`approvedBy` for approvals); `holdpoint:expiry` when the
    /// deadline decided.
    pub by: PersonId,
    /// `person`, or `expiry` when the deadline passed with no answer.
    pub resolved_by: Resolver,
    /// When, RFC 3339 in UTC with milliseconds (`2026-04-01T10:00:03.520Z`).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// The recorded answer.
    pub answer: Answer,
}

/// `GET /v1/interactions/{id}` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InteractionView {
    /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect id
    /// of an approval, a UUID for a question.
    pub interaction_id: InteractionId,
    /// The interaction's kind: `approval`, `question` or `connection`.
    pub kind: Kind,
    /// Where it is in its lifecycle: `pending`, `resolved`, `finished` or `closed`.
    pub state: State,
    /// The text shown to a person.
    pub prompt: String,
    /// What it is about, as a JSON object by kind (an approval's server, tool and
    /// reason; a question's questions; a connection's app and reason); never a call's
    /// arguments.
    pub detail: Value,
    /// The A2A task (1 to 128 printable ASCII characters, no spaces).
    pub task_id: TaskId,
    /// The A2A context (1 to 128 printable ASCII characters, no spaces).
    pub context_id: ContextId,
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session_id: SessionId,
    /// The session's mode: `blocking` (the call waits) or `product` (answers become
    /// lane messages).
    pub mode: SessionMode,
    /// The session's lane (1 to 128 printable ASCII characters, no spaces).
    pub lane: LaneId,
    /// The blocked call.
    pub call_id: CallId,
    /// The agent the runtime named for the call, when it named one (printable
    /// ASCII, no spaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// Who may answer it (people and groups); absent: anyone of the organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignees: Option<Assignees>,
    /// Present only when it names assignees: `true` when the caller may answer it
    /// (their person or one of their groups is assigned), `false` when an answer
    /// from them is refused with `NRY-0037`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_you: Option<bool>,
    /// Present only for an approval that needs several people: how many, who
    /// approved so far, and (in a person's view) whether they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalsView>,
    /// Who the deadline's warning stage adds to the assignees while it still waits
    /// (README "Escalation"); absent: no escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Assignees>,
    /// When it was escalated, RFC 3339 with milliseconds; absent until then.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub escalated_at: Option<OffsetDateTime>,
    /// When it opened.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub opened_at: OffsetDateTime,
    /// The deadline, RFC 3339 with milliseconds, while one is set; absent when the
    /// interaction waits without one.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<OffsetDateTime>,
    /// What the deadline decides: `decide` (the kind's default: an approval is
    /// denied, a question closed, a connection not connected) or `close`.
    pub on_expiry: OnExpiry,
    /// For approvals: the held call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<HeldCall>,
    /// How it was resolved (who, when, the answer); set once resolved, none while
    /// pending or when closed without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<ResolutionView>,
    /// Why and when it closed without an answer; set only when `state` is `closed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure: Option<Closure>,
    /// The blocked call's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
}

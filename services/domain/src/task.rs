//! The task record (KV bucket `HP_TASKS`, key `<org>.<taskId>`): what an A2A task
//! waits for, and which tool calls it has held.
//!
//! A task may wait on several interactions at once (a runtime holding parallel tool
//! calls, or several questions). Every view of the task (A2A `GetTask`,
//! `ListTasks`, the status streams, the `task-status` events) names the same one:
//! the oldest pending interaction ([`Task::waiting_on`]). The task shows
//! `TASK_STATE_WORKING` only when nothing is pending.
//!
//! The record also maps each call id held on the task to the interaction that holds
//! it, so one call can be held, released and finished only once: holding the same
//! call under another interaction id is refused (`NRY-0021`) for as long as the
//! task's record lives. At most [`MAX_TASK_CALLS`] calls per task.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::event::{OpenInteractionRef, TaskStatusData};
use crate::ids::{CallId, CommandId, ContextId, InteractionId, OrgId, TaskId};
use crate::interaction::Assignees;
use crate::vocab::{Kind, TaskState};

/// How many tool calls one task may hold over its life.
pub const MAX_TASK_CALLS: usize = 1024;
/// How many recent departures from the pending list a task remembers (see
/// [`Task::restore`]).
pub const LEFT_KEEP: usize = 16;

/// One pending interaction of a task, with what its status message shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The interaction (an effect id for an approval).
    pub interaction_id: InteractionId,
    /// `approval`, `question` or `connection`.
    pub kind: Kind,
    /// The text shown to a person.
    pub prompt: String,
    /// What it is about, as a JSON object by kind (an approval's server, tool and
    /// reason; a question's questions; a connection's app and reason); never a call's
    /// arguments.
    pub detail: Value,
    /// When it was opened, RFC 3339; the oldest is named first.
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub opened_at: OffsetDateTime,
    /// The command that listed it (its opening).
    pub listed_by: CommandId,
    /// Its deadline, RFC 3339, while one is set.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub expires_at: Option<OffsetDateTime>,
    /// Who may answer it; absent: anyone of the organisation (README "Assignees").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignees: Option<Assignees>,
    /// Who its deadline's warning stage adds to the assignees (README
    /// "Escalation"); absent: no escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Assignees>,
    /// When it was escalated, RFC 3339; absent until then.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub escalated_at: Option<OffsetDateTime>,
}

/// An interaction that stopped waiting, and the command that took it off the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Left {
    /// The interaction (1 to 128 printable ASCII characters, no spaces): the effect id
    /// of an approval, a UUID for a question.
    pub interaction_id: InteractionId,
    /// The command (`cmd-<40 hex>`) whose decision removed it.
    pub command_id: CommandId,
}

impl Waiting {
    /// The entry for interaction `i`, listed by `command_id`.
    pub fn of(i: &crate::interaction::Interaction, command_id: &CommandId) -> Self {
        Waiting {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            prompt: i.prompt.clone(),
            detail: i.detail(),
            opened_at: i.opened_at,
            listed_by: command_id.clone(),
            expires_at: i.expires_at,
            assignees: i.assignees.clone(),
            escalation: i.escalation.clone(),
            escalated_at: i.escalated_at,
        }
    }

    /// The interactions/v1 open-interaction reference a status message carries.
    pub fn reference(&self) -> OpenInteractionRef {
        OpenInteractionRef {
            interaction_id: self.interaction_id.clone(),
            kind: self.kind,
            prompt: self.prompt.clone(),
            detail: self.detail.clone(),
            expires_at: self.expires_at,
            assignees: self.assignees.clone(),
            escalation: self.escalation.clone(),
            escalated_at: self.escalated_at,
        }
    }
}

/// The task record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The owning organisation.
    pub org: OrgId,
    /// The A2A task id.
    pub id: TaskId,
    /// The A2A context the task belongs to (fixed by its first interaction).
    pub context_id: ContextId,
    /// Pending interactions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Waiting>,
    /// Every call id held on this task, with the interaction that holds it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, InteractionId>,
    /// The last [`LEFT_KEEP`] departures from `pending`, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub left: VecDeque<Left>,
    /// When the task's status last changed, RFC 3339 (A2A `status.timestamp`).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub updated_at: OffsetDateTime,
}

impl Task {
    /// A task with nothing pending.
    pub fn new(org: &OrgId, id: &TaskId, context_id: &ContextId, now: OffsetDateTime) -> Self {
        Task {
            org: org.clone(),
            id: id.clone(),
            context_id: context_id.clone(),
            pending: Vec::new(),
            calls: BTreeMap::new(),
            left: VecDeque::new(),
            updated_at: now,
        }
    }

    /// The interaction every view names: the oldest pending one.
    pub fn waiting_on(&self) -> Option<&Waiting> {
        self.pending.first()
    }

    /// The A2A state: the oldest pending interaction's, else working.
    pub fn state(&self) -> TaskState {
        self.waiting_on()
            .map_or(TaskState::Working, |w| w.kind.task_state())
    }

    /// The status a `task-status` event carries.
    pub fn status(&self) -> TaskStatusData {
        TaskStatusData {
            task_id: self.id.clone(),
            context_id: self.context_id.clone(),
            state: self.state(),
            interaction: self.waiting_on().map(Waiting::reference),
        }
    }

    /// The interaction that holds `call`, if any.
    pub fn holder_of(&self, call: &CallId) -> Option<&InteractionId> {
        self.calls.get(call.as_str())
    }

    /// True when `id` is pending on this task.
    pub fn is_pending(&self, id: &InteractionId) -> bool {
        self.pending.iter().any(|w| &w.interaction_id == id)
    }

    /// Adds `w` to the pending list in opening order (idempotent).
    pub(crate) fn add_pending(&mut self, w: Waiting) {
        if self.is_pending(&w.interaction_id) {
            return;
        }
        let at = self
            .pending
            .iter()
            .position(|p| (p.opened_at, &p.interaction_id) > (w.opened_at, &w.interaction_id))
            .unwrap_or(self.pending.len());
        self.pending.insert(at, w);
    }

    /// Shows `i` as it now is in its pending entry: its
    /// [`detail`](crate::Interaction::detail) (an approval that needs several
    /// people shows who approved so far), who may answer it, its escalation and
    /// when it escalated, so the status message shows them. Returns whether the
    /// entry changed; a no-op when `i` is not pending here.
    pub(crate) fn refresh(&mut self, i: &crate::interaction::Interaction) -> bool {
        let detail = i.detail();
        let mut changed = false;
        for w in self.pending.iter_mut().filter(|w| w.interaction_id == i.id) {
            let before = w.clone();
            w.detail = detail.clone();
            w.assignees = i.assignees.clone();
            w.escalation = i.escalation.clone();
            w.escalated_at = i.escalated_at;
            changed |= *w != before;
        }
        changed
    }

    /// Removes `id` from the pending list (idempotent), noting that `command_id` did.
    pub(crate) fn remove_pending(&mut self, id: &InteractionId, command_id: &CommandId) {
        if !self.is_pending(id) {
            return;
        }
        self.pending.retain(|w| &w.interaction_id != id);
        self.left.push_back(Left {
            interaction_id: id.clone(),
            command_id: command_id.clone(),
        });
        while self.left.len() > LEFT_KEEP {
            self.left.pop_front();
        }
    }

    /// Lists the pending interaction `i` again when `command_id` took it off the
    /// list and its decision was not committed (the worker died between the task's
    /// write and the interaction's, and the redelivered command was refused). Returns
    /// whether it did.
    pub(crate) fn restore(
        &mut self,
        i: &crate::interaction::Interaction,
        command_id: &CommandId,
    ) -> bool {
        let Some(at) = self
            .left
            .iter()
            .position(|l| l.interaction_id == i.id && &l.command_id == command_id)
        else {
            return false;
        };
        self.left.remove(at);
        if self.is_pending(&i.id) {
            return false;
        }
        self.add_pending(Waiting::of(i, command_id));
        true
    }

    /// Forgets the listing of `id` (and the call it held) when `command_id` listed it
    /// and its opening was not committed, then refused when redelivered. Returns
    /// whether it did.
    pub(crate) fn forget_opening(&mut self, id: &InteractionId, command_id: &CommandId) -> bool {
        let before = self.pending.len();
        self.pending
            .retain(|w| !(&w.interaction_id == id && &w.listed_by == command_id));
        if self.pending.len() == before {
            return false;
        }
        self.calls.retain(|_, holder| holder != id);
        true
    }
}

//! The task view. A task is what its record in `HP_TASKS` says ([`load_view`]):
//! while any of its interactions is pending it waits, naming the oldest pending one
//! (the same one its `task-status` events name, and the one an answer without
//! `interactionId` goes to); it shows `TASK_STATE_WORKING` only when none is
//! pending. Status streams follow the task's `task-status` events from the last one.
//! The key is built from the caller's organisation, so another organisation's task
//! is simply not found. A waiting task's status message is the prompt as text;
//! with the extension, it also lists the URI and carries
//! `metadata[URI] = {interactionId, kind, prompt, detail}` (never arguments), plus
//! `expiresAt` when the interaction has a deadline, `assignees` and `escalation`
//! (`{people, groups}`) when it names them, and `escalatedAt` once it escalated.

use std::collections::HashMap;

use a2a_lf::{Message, Part, Role, StreamResponse, Task, TaskStatus, TaskStatusUpdateEvent};
use holdpoint_domain::event::{OpenInteractionRef, TaskStatusData};
use holdpoint_domain::timestamp;
use holdpoint_domain::{
    ContextId, EXTENSION_URI, Event, EventData, EventKind, InteractionId, OrgId, TaskId,
    TaskState as DTaskState,
};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::error::RpcError;
use crate::state::AppState;

/// What a task waits for, from its last `task-status` event.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// The A2A task (1 to 128 printable ASCII characters, no spaces).
    pub task_id: TaskId,
    /// The A2A context (1 to 128 printable ASCII characters, no spaces).
    pub context_id: ContextId,
    /// Its state.
    pub state: DTaskState,
    /// The open interaction, while it waits.
    pub interaction: Option<OpenInteractionRef>,
    /// When the status was set.
    pub at: OffsetDateTime,
    /// The status event's sequence in the events stream (0 when derived).
    pub sequence: u64,
}

impl TaskView {
    pub fn from_status(data: TaskStatusData, at: OffsetDateTime, sequence: u64) -> Self {
        TaskView {
            task_id: data.task_id,
            context_id: data.context_id,
            state: data.state,
            interaction: data.interaction,
            at,
            sequence,
        }
    }

    /// The view of a task record: its oldest pending interaction, else working.
    pub fn of_record(t: &holdpoint_domain::Task, sequence: u64) -> Self {
        TaskView {
            task_id: t.id.clone(),
            context_id: t.context_id.clone(),
            state: t.state(),
            interaction: t.waiting_on().map(holdpoint_domain::Waiting::reference),
            at: t.updated_at,
            sequence,
        }
    }

    /// True while the task waits for a person.
    pub fn waiting(&self) -> bool {
        self.state != DTaskState::Working && self.interaction.is_some()
    }

    pub fn key(&self) -> (DTaskState, Option<InteractionId>) {
        (
            self.state,
            self.interaction.as_ref().map(|i| i.interaction_id.clone()),
        )
    }
}

pub fn decode_status(payload: &[u8]) -> Option<(Event, TaskStatusData)> {
    let event: Event = serde_json::from_slice(payload).ok()?;
    match event.body.clone() {
        EventData::TaskStatus(data) => Some((event, data)),
        _ => None,
    }
}

/// The task `org/task` as its record (`HP_TASKS`) shows it: waiting on its oldest
/// pending interaction, else working (see the module docs); `None` when the
/// organisation has no such task. `sequence` is the events-stream sequence of the
/// task's last `task-status` event (or of the stream's end when it has none), where
/// a status stream picks up.
///
/// # Errors
/// [`RpcError`] (unavailable, retryable) when NATS does not answer.
pub async fn load_view(
    state: &AppState,
    org: &OrgId,
    task: &TaskId,
) -> Result<Option<TaskView>, RpcError> {
    let loaded = state
        .bus
        .load_task(org, task)
        .await
        .map_err(RpcError::unavailable)?;
    let Some(record) = loaded.value.filter(|t| &t.org == org && &t.id == task) else {
        return Ok(None);
    };
    let sequence = last_status_sequence(state, org, task).await?;
    Ok(Some(TaskView::of_record(&record, sequence)))
}

/// The sequence of the last `task-status` event of `org/task`, else the events
/// stream's last sequence (a stream from there on misses nothing newer).
async fn last_status_sequence(
    state: &AppState,
    org: &OrgId,
    task: &TaskId,
) -> Result<u64, RpcError> {
    // Waits (bounded) for the events stream to source the status the last
    // decision committed, so that a stream started here does not replay it.
    match state
        .bus
        .last_task_event(
            org,
            task,
            EventKind::TaskStatus.name(),
            std::time::Duration::from_secs(2),
        )
        .await
    {
        Ok(Some(last)) => Ok(last.sequence),
        Ok(None) => state
            .bus
            .events_last_sequence()
            .await
            .map_err(RpcError::unavailable),
        Err(e) => Err(RpcError::unavailable(e)),
    }
}

pub fn a2a_state(s: DTaskState) -> a2a_lf::TaskState {
    match s {
        DTaskState::AuthRequired => a2a_lf::TaskState::AuthRequired,
        DTaskState::InputRequired => a2a_lf::TaskState::InputRequired,
        DTaskState::Working => a2a_lf::TaskState::Working,
    }
}

pub fn timestamp(t: OffsetDateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

/// The agent's status message for a waiting task: the prompt as text; with the
/// extension, also `extensions: [URI]` and `metadata[URI]`.
pub fn status_message(
    task: &TaskId,
    context: &ContextId,
    open: &OpenInteractionRef,
    extension: bool,
) -> Message {
    let (extensions, metadata) = if extension {
        let mut body = json!({
            "interactionId": open.interaction_id,
            "kind": open.kind,
            "prompt": open.prompt,
            "detail": open.detail,
        });
        // Holdpoint's fields beside the extension's: the deadline, who may answer and
        // the escalation, each when there is one.
        if let Some(obj) = body.as_object_mut() {
            if let Some(at) = open.expires_at {
                obj.insert("expiresAt".into(), timestamp::format(at).into());
            }
            for (name, who) in [
                ("assignees", &open.assignees),
                ("escalation", &open.escalation),
            ] {
                if let Some(v) = who.as_ref().and_then(|a| serde_json::to_value(a).ok()) {
                    obj.insert(name.into(), v);
                }
            }
            if let Some(at) = open.escalated_at {
                obj.insert("escalatedAt".into(), timestamp::format(at).into());
            }
        }
        (
            Some(vec![EXTENSION_URI.to_owned()]),
            Some(HashMap::from([(EXTENSION_URI.to_owned(), body)])),
        )
    } else {
        (None, None)
    };
    Message {
        message_id: format!("status-{}", open.interaction_id),
        context_id: Some(context.to_string()),
        task_id: Some(task.to_string()),
        role: Role::Agent,
        parts: vec![Part::text(open.prompt.clone())],
        metadata,
        extensions,
        reference_task_ids: None,
    }
}

fn a2a_status(view: &TaskView, extension: bool) -> TaskStatus {
    TaskStatus {
        state: a2a_state(view.state),
        message: view
            .interaction
            .as_ref()
            .filter(|_| view.state != DTaskState::Working)
            .map(|open| status_message(&view.task_id, &view.context_id, open, extension)),
        timestamp: timestamp(view.at),
    }
}

/// Rewrites the `status.timestamp` of a task, a stream response (`task`,
/// `statusUpdate`) or a task list (`tasks[]`) in Holdpoint's one timestamp format
/// ([`holdpoint_domain::timestamp`]: UTC, milliseconds, `Z`), whatever format the
/// A2A types wrote it in.
pub fn stamp(value: &mut Value) {
    fn restamp(status: Option<&mut Value>) {
        if let Some(ts) = status.and_then(|s| s.get_mut("timestamp"))
            && let Some(t) = ts.as_str().and_then(|s| timestamp::parse(s).ok())
        {
            *ts = Value::String(timestamp::format(t));
        }
    }
    restamp(value.get_mut("status"));
    for key in ["task", "statusUpdate"] {
        restamp(value.get_mut(key).and_then(|t| t.get_mut("status")));
    }
    if let Some(Value::Array(tasks)) = value.get_mut("tasks") {
        for t in tasks {
            restamp(t.get_mut("status"));
        }
    }
}

/// The A2A task for `view`.
pub fn a2a_task(view: &TaskView, extension: bool) -> Task {
    Task {
        id: view.task_id.to_string(),
        context_id: view.context_id.to_string(),
        status: a2a_status(view, extension),
        artifacts: None,
        history: None,
        metadata: None,
    }
}

pub fn status_update(view: &TaskView, extension: bool) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: view.task_id.to_string(),
        context_id: view.context_id.to_string(),
        status: a2a_status(view, extension),
        metadata: None,
    })
}

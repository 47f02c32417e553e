//! The Holdpoint client library for agent runtimes.
//!
//! - [`Runtime`]: one organisation's handle. Opens sessions and interactions
//!   ([`Runtime::hold_for_approval`], [`Runtime::ask_user`],
//!   [`Runtime::request_connection`]), closes them, reports a released call's result
//!   ([`Runtime::report_tool_result`]), reports turns, and follows the events
//!   ([`Runtime::follow`]). Every call is a JetStream command with a deterministic
//!   `Nats-Msg-Id`, so retrying any of them is safe; each waits for the worker's
//!   outcome.
//! - [`manifest`]: reads an agent's `AGENT.md` front matter; `request_connection` is
//!   off unless it says `loop.connections: true` (README "For runtimes: the client library").
//!
//! ```no_run
//! # async fn demo() -> Result<(), holdpoint_client::ClientError> {
//! use holdpoint_client::{Runtime, HoldCall, Placement};
//! let rt = Runtime::connect("nats://127.0.0.1:4222", "acme").await?;
//! let at = Placement::new("session-1", "main", "task-1", "ctx-1")?;
//! let effect = rt
//!     .hold_for_approval(&at, HoldCall {
//!         effect_id: "eff_1".into(),
//!         call_id: "call_1".into(),
//!         server: "github".into(),
//!         tool: "create_pull_request".into(),
//!         arguments: serde_json::json!({"title": "Fix"}),
//!         reason: Some("writes to a repository".into()),
//!     })
//!     .await?;
//! # let _ = effect; Ok(()) }
//! ```

pub mod manifest;

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use holdpoint_bus::events::Start;
use holdpoint_bus::outcome::Waiter;
use holdpoint_bus::{Bus, BusError, Topology};
use holdpoint_domain::{
    Accepted, AgentId, Assignees, CallId, CallResult, CloseReason, Command, CommandEnvelope,
    ContextId, Event, IdError, InteractionId, LaneId, MessageId, OnExpiry, OpenInteraction,
    OpenRequest, OrgId, QuestionSpec, Rejection, SessionId, SessionMode, TaskId,
};
pub use manifest::AgentManifest;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A NATS step failed (connection, publish, KV read); transient ones may be
    /// retried with the same call.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// An id did not validate.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The worker refused the command; displayed as `refused: NRY-0021 Command
    /// conflicts with record: <message>` (the code, its title, the message).
    #[error("refused: {0}")]
    Rejected(Rejection),
    /// No outcome within the timeout; retrying the same call is safe.
    #[error("no outcome in time: {0}")]
    Timeout(String),
    /// `request_connection` is off for this agent (off unless the agent's `AGENT.md` turns it on).
    #[error(
        "request_connection is off for agent {agent:?}: set `loop.connections: true` in its AGENT.md"
    )]
    ConnectionsDisabled {
        /// The agent's name.
        agent: String,
    },
    /// The manifest could not be read.
    #[error("AGENT.md: {0}")]
    Manifest(String),
}

/// Where an interaction lives: session, lane, A2A task and context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The runtime session (1 to 128 printable ASCII characters, no spaces).
    pub session: SessionId,
    /// The session's lane (1 to 128 printable ASCII characters, no spaces).
    pub lane: LaneId,
    /// The A2A task (1 to 128 printable ASCII characters, no spaces).
    pub task_id: TaskId,
    /// The A2A context (1 to 128 printable ASCII characters, no spaces).
    pub context_id: ContextId,
    /// The agent the runtime holds calls for (optional; see
    /// [`Placement::for_agent`]): `agent`-scoped remembered rules match on it.
    pub agent: Option<AgentId>,
    /// The deadline of what is opened here (none unless set; the worker's
    /// configured default then applies).
    pub expiry: Expiry,
    /// Who may answer what is opened here (see [`Placement::assigned_to`]); none:
    /// anyone of the organisation.
    pub assignees: Option<Assignees>,
    /// Who is added to the assignees at the deadline's warning stage (see
    /// [`Placement::escalate_to`]); none: no escalation.
    pub escalation: Option<Assignees>,
}

/// An interaction's deadline as a runtime asks for it: at most one of `expires_at`
/// and `expires_in`, and what expiry decides. Refused with `NRY-0023` when past
/// or beyond the configured maximum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expiry {
    /// The deadline as an instant (sent as RFC 3339 in UTC); must lie ahead when the worker decides the opening.
    pub expires_at: Option<time::OffsetDateTime>,
    /// The deadline in whole seconds from when the worker decides the opening.
    pub expires_in: Option<u64>,
    /// What the deadline decides: the kind's default, or closing.
    pub on_expiry: OnExpiry,
}

impl Placement {
    /// This placement, opening interactions with `expiry`.
    pub fn with_expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    /// Validates and builds a placement.
    ///
    /// # Errors
    /// [`ClientError::Id`] when an id does not validate.
    pub fn new(session: &str, lane: &str, task: &str, context: &str) -> Result<Self, ClientError> {
        Ok(Placement {
            session: SessionId::parse(session)?,
            lane: LaneId::parse(lane)?,
            task_id: TaskId::parse(task)?,
            context_id: ContextId::parse(context)?,
            expiry: Expiry::default(),
            agent: None,
            assignees: None,
            escalation: None,
        })
    }

    /// The same placement, opening interactions only the `assignees` may answer
    /// (people by `sub`, groups by the configured groups claim); anyone else of the
    /// organisation is refused with `NRY-0037`. The worker refuses assignees
    /// naming nobody, more than 32 people or 32 groups, or one name twice
    /// (`NRY-0001`).
    pub fn assigned_to(mut self, assignees: Assignees) -> Self {
        self.assignees = Some(assignees);
        self
    }

    /// The same placement, escalating what it opens to `escalation` (README
    /// "Escalation"): when the deadline's warning stage comes (`[deadlines]
    /// warning_secs` before it) and the interaction still waits, these people and
    /// groups are added to its assignees and an `interaction-escalated` event goes
    /// out. The worker refuses an escalation (`NRY-0001`, nothing opened) without
    /// a deadline, without a configured warning lead, with a deadline closer than
    /// that lead, or when it and the assignees together name more than 32 people
    /// or 32 groups; its own bounds are those of [`Placement::assigned_to`].
    pub fn escalate_to(mut self, escalation: Assignees) -> Self {
        self.escalation = Some(escalation);
        self
    }

    /// The same placement, naming the agent its calls are held for: a rule
    /// remembered with scope `agent` then matches this agent's calls in any session.
    ///
    /// # Errors
    /// [`ClientError::Id`] when `agent` is not a valid id.
    pub fn for_agent(mut self, agent: &str) -> Result<Self, ClientError> {
        self.agent = Some(AgentId::parse(agent)?);
        Ok(self)
    }
}

/// A tool call the policy holds for approval.
#[derive(Debug, Clone)]
pub struct HoldCall {
    /// The effect id (becomes the interaction id and the executor's idempotency key).
    pub effect_id: String,
    /// The blocked call.
    pub call_id: String,
    /// The MCP server of the held call: a one-line name of at most 200 characters.
    pub server: String,
    /// The tool of the held call: a one-line name of at most 200 characters.
    pub tool: String,
    /// Arguments, released exactly as held unless the hold is `editable` and the
    /// person edits them (then `tool-call-released` carries the edit, `edited: true`).
    pub arguments: serde_json::Value,
    /// Why it is held.
    pub reason: Option<String>,
    /// Let the person edit the arguments before approving. Set it only when the
    /// executor runs the `arguments` of `tool-call-released` (README "Edit, then
    /// approve").
    pub editable: bool,
    /// How many distinct people must approve before the call is released: 2 to 5
    /// (README "Two-person approvals"); `None`, one person decides. Not with
    /// `editable`.
    pub approvals: Option<u8>,
}

/// Which events to follow.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Only this task's events.
    pub task: Option<TaskId>,
    /// Only this event name (e.g. `tool-call-finished`).
    pub name: Option<String>,
    /// Start from the stream's first retained event instead of new ones only.
    pub from_start: bool,
}

/// A followed event with its position in the events stream.
#[derive(Debug, Clone)]
pub struct Followed {
    /// Stream sequence (resume point).
    pub sequence: u64,
    /// The CloudEvents event as stored (`id`, `type`, `data`, ...).
    pub event: Event,
}

/// A stream of events.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Followed, ClientError>> + Send>>;

/// One organisation's runtime handle.
#[derive(Debug, Clone)]
pub struct Runtime {
    bus: Bus,
    org: OrgId,
    waiter: std::sync::Arc<Waiter>,
    timeout: Duration,
}

impl Runtime {
    /// Connects to NATS at `url` for organisation `org`, with the default topology.
    ///
    /// # Errors
    /// [`ClientError`] when NATS is unreachable, too old, or `org` is not a valid id.
    pub async fn connect(url: &str, org: &str) -> Result<Self, ClientError> {
        let org_id = OrgId::parse(org)?;
        // The organisation's own inbox prefix: a NATS user made for this
        // organisation alone (`holdpoint nats-config --role runtime`) may subscribe
        // to nothing else; the shared `runtime` user may subscribe to every inbox.
        let prefix = holdpoint_bus::permissions::org_inbox_prefix(&org_id);
        let client =
            holdpoint_bus::connect_with_inbox(url, "holdpoint-runtime", Some(&prefix)).await?;
        // Attach, never update: the operator's settings (duplicate window, replicas)
        // are the services' to set, not a runtime's defaults.
        let bus = Bus::attach(client, Topology::default()).await?;
        Self::with_bus(bus, org).await
    }

    /// Builds a handle on an existing [`Bus`].
    ///
    /// # Errors
    /// As [`Runtime::connect`].
    pub async fn with_bus(bus: Bus, org: &str) -> Result<Self, ClientError> {
        let waiter = Waiter::start(&bus.client).await?;
        Ok(Runtime {
            org: OrgId::parse(org)?,
            bus,
            waiter: std::sync::Arc::new(waiter),
            timeout: Duration::from_secs(10),
        })
    }

    /// Sets how long each call waits for the worker's outcome (default 10 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The organisation every call of this handle acts in.
    pub fn org(&self) -> &OrgId {
        &self.org
    }

    /// The underlying bus.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Sends `command` and waits for its outcome.
    ///
    /// # Errors
    /// [`ClientError::Rejected`] with the worker's rejection, or
    /// [`ClientError::Timeout`] (safe to retry).
    pub async fn send(&self, command: Command) -> Result<Accepted, ClientError> {
        let env = CommandEnvelope {
            org: self.org.clone(),
            command,
        };
        let outcome = self
            .waiter
            .submit(&self.bus, &env, self.timeout)
            .await
            .map_err(|e| ClientError::Timeout(e.to_string()))?;
        outcome.result.map_err(ClientError::Rejected)
    }

    /// Opens a session in `mode`.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn open_session(
        &self,
        session: &str,
        mode: SessionMode,
    ) -> Result<Accepted, ClientError> {
        self.send(Command::SessionOpen {
            session: SessionId::parse(session)?,
            mode,
            lane_capacity: None,
        })
        .await
    }

    /// Closes a session to new messages.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn close_session(&self, session: &str) -> Result<Accepted, ClientError> {
        self.send(Command::SessionClose {
            session: SessionId::parse(session)?,
        })
        .await
    }

    /// Ends a session: its interactions then answer `NRY-0002`.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn end_session(&self, session: &str) -> Result<Accepted, ClientError> {
        self.send(Command::SessionEnd {
            session: SessionId::parse(session)?,
        })
        .await
    }

    async fn open(
        &self,
        at: &Placement,
        id: InteractionId,
        call_id: &str,
        request: OpenRequest,
    ) -> Result<InteractionId, ClientError> {
        self.send(Command::Open(Box::new(OpenInteraction {
            interaction_id: id.clone(),
            session: at.session.clone(),
            lane: at.lane.clone(),
            task_id: at.task_id.clone(),
            context_id: at.context_id.clone(),
            call_id: CallId::parse(call_id)?,
            agent: at.agent.clone(),
            request,
            expires_at: at.expiry.expires_at,
            expires_in: at.expiry.expires_in,
            on_expiry: at.expiry.on_expiry,
            assignees: at.assignees.clone(),
            escalation: at.escalation.clone(),
        })))
        .await?;
        Ok(id)
    }

    /// The tool policy holds a call: opens an approval whose id is the effect id.
    /// The approval binds to a digest of `arguments`; `detail` never shows them.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn hold_for_approval(
        &self,
        at: &Placement,
        call: HoldCall,
    ) -> Result<InteractionId, ClientError> {
        let id = InteractionId::parse(call.effect_id)?;
        self.open(
            at,
            id,
            &call.call_id,
            OpenRequest::Approval {
                server: call.server,
                tool: call.tool,
                arguments: call.arguments,
                reason: call.reason,
                editable: call.editable,
                approvals: call.approvals,
            },
        )
        .await
    }

    /// `ask_user`: opens a question with 1 to 4 questions. The question id is a new
    /// UUID unless `question_id` is given (give it to make a retry idempotent); the
    /// `question-asked` event announces it with the options in this order.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn ask_user(
        &self,
        at: &Placement,
        call_id: &str,
        questions: Vec<QuestionSpec>,
        question_id: Option<uuid::Uuid>,
    ) -> Result<InteractionId, ClientError> {
        let id = InteractionId::parse(question_id.unwrap_or_else(uuid::Uuid::new_v4).to_string())?;
        self.open(at, id, call_id, OpenRequest::Question { questions })
            .await
    }

    /// `ask_user` with a form: one question whose answer is a JSON object that fits
    /// `schema`, the restricted JSON Schema of MCP elicitation's form mode (README
    /// "Questions with a form"). A schema outside that subset is refused when the
    /// question is opened (`NRY-0035`); a person's `value` that does not fit is
    /// refused with the pointer of its first misfit (`NRY-0036`) and the question
    /// keeps waiting.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn ask_user_form(
        &self,
        at: &Placement,
        call_id: &str,
        text: &str,
        schema: serde_json::Value,
        question_id: Option<uuid::Uuid>,
    ) -> Result<InteractionId, ClientError> {
        let question = QuestionSpec {
            text: text.to_owned(),
            options: Vec::new(),
            multiple: false,
            allow_text: false,
            schema: Some(schema),
        };
        self.ask_user(at, call_id, vec![question], question_id)
            .await
    }

    /// `request_connection {app, reason}` for `agent`: refused unless the agent's
    /// manifest turns connections on. App and reason are cut at 80 and 280
    /// characters by the worker.
    ///
    /// # Errors
    /// [`ClientError::ConnectionsDisabled`], or as [`Runtime::send`].
    pub async fn request_connection(
        &self,
        agent: &AgentManifest,
        at: &Placement,
        call_id: &str,
        app: &str,
        reason: &str,
        interaction_id: Option<&str>,
    ) -> Result<InteractionId, ClientError> {
        if !agent.connections_enabled() {
            return Err(ClientError::ConnectionsDisabled {
                agent: agent.name.clone().unwrap_or_default(),
            });
        }
        let id = match interaction_id {
            Some(id) => InteractionId::parse(id)?,
            None => InteractionId::parse(format!("con_{}", uuid::Uuid::new_v4().simple()))?,
        };
        self.open(
            at,
            id,
            call_id,
            OpenRequest::Connection {
                app: app.to_owned(),
                reason: reason.to_owned(),
            },
        )
        .await
    }

    /// The host closes a pending interaction (its turn was interrupted, or it expired
    /// or was canceled). A blocked call then finishes with `interaction.closed`.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn close_interaction(
        &self,
        id: &str,
        reason: CloseReason,
    ) -> Result<Accepted, ClientError> {
        let interaction_id = InteractionId::parse(id)?;
        let task_id = self.task_of(&interaction_id).await?;
        self.send(Command::Close {
            interaction_id,
            reason,
            by_message: None,
            task_id,
        })
        .await
    }

    /// Sets, moves or clears (`expiry` with neither time) a pending interaction's
    /// deadline. A person cannot do this; only the runtime that opened it.
    ///
    /// # Errors
    /// As [`Runtime::send`]; `NRY-0023` when the interaction no longer waits or the
    /// deadline is past or too far, `NRY-0022` on a server without schedules.
    pub async fn set_deadline(&self, id: &str, expiry: Expiry) -> Result<Accepted, ClientError> {
        let interaction_id = InteractionId::parse(id)?;
        let task_id = self.task_of(&interaction_id).await?;
        // Each call is one change: a retry is a replay, a deadline set back to an
        // earlier one is a change of its own.
        let change_id = MessageId::parse(format!("chg-{}", uuid::Uuid::new_v4().simple()))?;
        self.send(Command::Deadline {
            interaction_id,
            task_id,
            expires_at: expiry.expires_at,
            expires_in: expiry.expires_in,
            change_id: Some(change_id),
        })
        .await
    }

    /// Changes who may answer pending interaction `id`: `Some` names the new
    /// assignees, `None` lets anyone of the organisation answer again. Each call is
    /// one change (its own change id; [`Runtime::send`] retries it as a replay): an
    /// `interaction-reassigned` event and an `assignees-changed` audit record.
    /// The same assignees as now is `Unchanged` and publishes nothing.
    ///
    /// # Errors
    /// As [`Runtime::send`]; `NRY-0004` for no such interaction, `NRY-0021` when it
    /// no longer waits, `NRY-0001` for assignees out of bounds.
    pub async fn reassign(
        &self,
        id: &str,
        assignees: Option<Assignees>,
    ) -> Result<Accepted, ClientError> {
        let interaction_id = InteractionId::parse(id)?;
        let task_id = self.task_of(&interaction_id).await?;
        let change_id = MessageId::parse(format!("chg-{}", uuid::Uuid::new_v4().simple()))?;
        self.send(Command::Reassign {
            interaction_id,
            task_id,
            change_id,
            assignees,
        })
        .await
    }

    /// The tool executor reports a released call's result; it becomes that call's
    /// `tool-call-finished`.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn report_tool_result(
        &self,
        effect_id: &str,
        result: CallResult,
    ) -> Result<Accepted, ClientError> {
        let interaction_id = InteractionId::parse(effect_id)?;
        let task_id = self.task_of(&interaction_id).await?;
        self.send(Command::ToolResult {
            interaction_id,
            result,
            task_id,
        })
        .await
    }

    /// A turn started on a lane without a person's message (the lane is busy).
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn start_turn(
        &self,
        session: &str,
        lane: &str,
        turn_id: &str,
    ) -> Result<Accepted, ClientError> {
        self.send(Command::TurnStart {
            session: SessionId::parse(session)?,
            lane: LaneId::parse(lane)?,
            turn_id: MessageId::parse(turn_id)?,
        })
        .await
    }

    /// The running turn on a lane ended; the next queued message's turn starts.
    ///
    /// # Errors
    /// As [`Runtime::send`].
    pub async fn finish_turn(
        &self,
        session: &str,
        lane: &str,
        turn_id: &str,
    ) -> Result<Accepted, ClientError> {
        self.send(Command::TurnFinish {
            session: SessionId::parse(session)?,
            lane: LaneId::parse(lane)?,
            turn_id: MessageId::parse(turn_id)?,
        })
        .await
    }

    /// The task of interaction `id` (commands about an interaction are routed to its
    /// task's partition); `None` when there is no such interaction (the worker then
    /// answers not found).
    async fn task_of(&self, id: &InteractionId) -> Result<Option<TaskId>, ClientError> {
        let loaded = self.bus.load_interaction(&self.org, id).await?;
        Ok(loaded.value.map(|i| i.task_id))
    }

    /// Follows this organisation's events (an ordered consumer on `HP_EVENTS`
    /// filtered to `hp.evt.<org>.<task|*>.<name|*>`), new ones only unless
    /// `from_start`. The follower resumes by itself after NATS comes back, without
    /// repeats or gaps.
    ///
    /// # Errors
    /// [`ClientError::Bus`] when the consumer cannot be made.
    pub async fn follow(&self, filter: EventFilter) -> Result<EventStream, ClientError> {
        let subject =
            self.bus
                .topo
                .event_filter(&self.org, filter.task.as_ref(), filter.name.as_deref());
        let start = if filter.from_start {
            Start::At(1)
        } else {
            Start::New
        };
        let stored = self.bus.follow(subject, start).await?;
        Ok(Box::pin(stored.map(|m| {
            let event = serde_json::from_slice(&m.payload).map_err(|e| BusError::Corrupt {
                key: m.subject.clone(),
                message: e.to_string(),
            })?;
            Ok(Followed {
                sequence: m.sequence,
                event,
            })
        })))
    }
}

//! Shared helpers for the domain's integration tests: builders for command
//! envelopes, and a tiny in-memory store that applies a [`Decision`] the way the
//! worker does (load, decide, write the session then the interaction by
//! compare-and-set on their revisions, publish, reply). A lost compare-and-set
//! means deciding again from the current records.
//!
//! The store also checks, on every write, that an interaction's resolution never
//! changes once set and that its state never goes back.

#![allow(dead_code)]

use std::collections::BTreeMap;

use holdpoint_domain::event::TaskStatusData;
use holdpoint_domain::{
    Accepted, AnswerCommand, AnswerInput, AnswerRoute, CallId, CallResult, CloseReason, Command,
    CommandEnvelope, ContextId, Ctx, Decision, Effects, ErrorCode, Event, EventData,
    IdempotencyKey, Interaction, InteractionId, Lane, LaneId, LaneMessage, MessageId,
    OpenInteraction, OpenRequest, OptionAnswer, OrgId, Outbox, PersonId, QuestionSpec, Session,
    SessionId, SessionMode, Snapshot, State, Task, TaskId, decide, needs,
};
use serde_json::Value;
use time::OffsetDateTime;
use time::macros::datetime;

pub const ORG: &str = "acme";
pub const LANE: &str = "main";
pub const TASK: &str = "task-1";
pub const CONTEXT: &str = "ticket-4821";
pub const PERSON: &str = "ana@example.com";

// ---------------------------------------------------------------- ids

pub fn org() -> OrgId {
    OrgId::parse(ORG).expect("fixture org id")
}
pub fn sid(s: &str) -> SessionId {
    SessionId::parse(s).expect("fixture session id")
}
pub fn iid(s: &str) -> InteractionId {
    InteractionId::parse(s).expect("fixture interaction id")
}
pub fn lane(s: &str) -> LaneId {
    LaneId::parse(s).expect("fixture lane id")
}
pub fn mid(s: &str) -> MessageId {
    MessageId::parse(s).expect("fixture message id")
}
pub fn key(s: &str) -> IdempotencyKey {
    IdempotencyKey::parse(s).expect("fixture idempotency key")
}
pub fn person(s: &str) -> PersonId {
    PersonId::parse(s).expect("fixture person")
}
pub fn task(s: &str) -> TaskId {
    TaskId::parse(s).expect("fixture task id")
}
pub fn ctx(s: &str) -> ContextId {
    ContextId::parse(s).expect("fixture context id")
}
pub fn call_of(interaction: &str) -> CallId {
    CallId::parse(format!("call-{interaction}")).expect("fixture call id")
}

pub fn t0() -> OffsetDateTime {
    datetime!(2025-06-01 12:00 UTC)
}

// ---------------------------------------------------------------- envelopes

pub fn env(command: Command) -> CommandEnvelope {
    CommandEnvelope {
        org: org(),
        command,
    }
}

pub fn session_open(session: &str, mode: SessionMode) -> CommandEnvelope {
    env(Command::SessionOpen {
        session: sid(session),
        mode,
        lane_capacity: None,
    })
}

pub fn session_open_cap(session: &str, mode: SessionMode, cap: u32) -> CommandEnvelope {
    env(Command::SessionOpen {
        session: sid(session),
        mode,
        lane_capacity: Some(cap),
    })
}

pub fn session_close(session: &str) -> CommandEnvelope {
    env(Command::SessionClose {
        session: sid(session),
    })
}

pub fn session_end(session: &str) -> CommandEnvelope {
    env(Command::SessionEnd {
        session: sid(session),
    })
}

/// Opens `interaction` on `session`, lane [`LANE`], task [`TASK`], context
/// [`CONTEXT`], blocking call `call-<interaction>`.
pub fn open(interaction: &str, session: &str, request: OpenRequest) -> CommandEnvelope {
    open_on(interaction, session, LANE, request)
}

pub fn open_on(
    interaction: &str,
    session: &str,
    lane_name: &str,
    request: OpenRequest,
) -> CommandEnvelope {
    env(Command::Open(Box::new(OpenInteraction {
        interaction_id: iid(interaction),
        session: sid(session),
        lane: lane(lane_name),
        task_id: task(TASK),
        context_id: ctx(CONTEXT),
        call_id: call_of(interaction),
        agent: None,
        request,
        expires_at: None,
        expires_in: None,
        on_expiry: Default::default(),
        assignees: None,
        escalation: None,
    })))
}

pub fn approval_req(server: &str, tool: &str, arguments: Value) -> OpenRequest {
    OpenRequest::Approval {
        server: server.into(),
        tool: tool.into(),
        arguments,
        reason: Some("writes to a repository".into()),
        editable: false,
        approvals: None,
    }
}

/// The held call of the tests: `github / create_pull_request` with a secret in the
/// arguments, so a test can check the arguments never leave through `detail`.
pub fn pr_arguments() -> Value {
    serde_json::json!({
        "repo": "acme/api",
        "title": "Fix the flaky test",
        "token": "s3cr3t-arg-value"
    })
}

pub fn pr_approval() -> OpenRequest {
    approval_req("github", "create_pull_request", pr_arguments())
}

pub fn question(text: &str, options: &[&str], multiple: bool, allow_text: bool) -> QuestionSpec {
    QuestionSpec {
        text: text.into(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
        multiple,
        allow_text,
        schema: None,
    }
}

/// Two questions shaped for the README's example answer body: the first single-choice, the
/// second with three options, several allowed, text allowed.
pub fn example_questions() -> Vec<QuestionSpec> {
    vec![
        question(
            "Which database should the service use?",
            &["Postgres", "SQLite", "MySQL"],
            false,
            false,
        ),
        question(
            "How should conflicting rows be handled?",
            &["Overwrite", "Skip", "Keep both"],
            true,
            true,
        ),
    ]
}

pub fn example_question_req() -> OpenRequest {
    OpenRequest::Question {
        questions: example_questions(),
    }
}

pub fn connection_req(app: &str, reason: &str) -> OpenRequest {
    OpenRequest::Connection {
        app: app.into(),
        reason: reason.into(),
    }
}

pub fn close(interaction: &str, reason: CloseReason) -> CommandEnvelope {
    env(Command::Close {
        interaction_id: iid(interaction),
        reason,
        by_message: None,
        task_id: None,
    })
}

pub fn tool_result(interaction: &str, result: CallResult) -> CommandEnvelope {
    env(Command::ToolResult {
        interaction_id: iid(interaction),
        result,
        task_id: None,
    })
}

pub fn ok_output(v: Value) -> CallResult {
    CallResult::Ok { output: v }
}

pub fn message(session: &str, lane_name: &str, message_id: &str, text: &str) -> CommandEnvelope {
    env(Command::Message {
        session: sid(session),
        lane: lane(lane_name),
        message_id: mid(message_id),
        by: person(PERSON),
        text: text.into(),
    })
}

pub fn turn_start(session: &str, lane_name: &str, turn: &str) -> CommandEnvelope {
    env(Command::TurnStart {
        session: sid(session),
        lane: lane(lane_name),
        turn_id: mid(turn),
    })
}

pub fn turn_finish(session: &str, lane_name: &str, turn: &str) -> CommandEnvelope {
    env(Command::TurnFinish {
        session: sid(session),
        lane: lane(lane_name),
        turn_id: mid(turn),
    })
}

// ---------------------------------------------------------------- answers

/// A person's answer through `respond` (no task or context given).
pub fn answer_cmd(interaction: &str, k: &str, input: AnswerInput) -> AnswerCommand {
    AnswerCommand {
        interaction_id: iid(interaction),
        route: AnswerRoute::Respond,
        key: key(k),
        groups: Vec::new(),
        by: person(PERSON),
        task_id: None,
        context_id: None,
        input,
        remember: None,
    }
}

pub fn answer(interaction: &str, k: &str, input: AnswerInput) -> CommandEnvelope {
    answer_env(answer_cmd(interaction, k, input))
}

pub fn answer_env(a: AnswerCommand) -> CommandEnvelope {
    env(Command::Answer(Box::new(a)))
}

/// The same answer through a given route.
pub fn answer_via(
    route: AnswerRoute,
    interaction: &str,
    k: &str,
    input: AnswerInput,
) -> CommandEnvelope {
    let mut a = answer_cmd(interaction, k, input);
    a.route = route;
    answer_env(a)
}

/// The answer as an A2A message on the task and context it names.
pub fn answer_a2a(
    interaction: &str,
    k: &str,
    task_id: &str,
    context_id: &str,
    input: AnswerInput,
) -> CommandEnvelope {
    let mut a = answer_cmd(interaction, k, input);
    a.route = AnswerRoute::A2a;
    a.task_id = Some(task(task_id));
    a.context_id = Some(ctx(context_id));
    answer_env(a)
}

pub fn approved(approved: bool) -> AnswerInput {
    AnswerInput::Approved {
        approved,
        reason: None,
        arguments_digest: None,
        edited_arguments: None,
    }
}

pub fn approved_because(approved: bool, reason: &str) -> AnswerInput {
    AnswerInput::Approved {
        approved,
        reason: Some(reason.into()),
        arguments_digest: None,
        edited_arguments: None,
    }
}

pub fn approved_digest(approved: bool, digest: &str) -> AnswerInput {
    AnswerInput::Approved {
        approved,
        reason: None,
        arguments_digest: Some(digest.into()),
        edited_arguments: None,
    }
}

pub fn value(v: Value) -> AnswerInput {
    AnswerInput::Value {
        value: v,
        reason: None,
    }
}

pub fn text(t: &str) -> AnswerInput {
    AnswerInput::Text { text: t.into() }
}

pub fn answers(entries: Vec<OptionAnswer>) -> AnswerInput {
    AnswerInput::Answers { answers: entries }
}

pub fn oa(options: &[u32]) -> OptionAnswer {
    OptionAnswer {
        options: options.to_vec(),
        text: None,
    }
}

pub fn oa_text(options: &[u32], t: &str) -> OptionAnswer {
    OptionAnswer {
        options: options.to_vec(),
        text: Some(t.into()),
    }
}

/// The README's example answer body for [`example_questions`].
pub fn example_answers() -> AnswerInput {
    answers(vec![
        oa(&[0]),
        oa_text(&[2], "Keep both and reconcile nightly."),
    ])
}

// ---------------------------------------------------------------- inspection

pub fn names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::name).collect()
}

pub fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

// ---------------------------------------------------------------- assertions

/// The outcome of a decision that must have succeeded.
#[track_caller]
pub fn accepted_of(d: &Decision) -> Accepted {
    match &d.outcome.result {
        Ok(a) => *a,
        Err(r) => panic!("expected success, got {r:?}"),
    }
}

/// The error code of a decision that must have been refused.
#[track_caller]
pub fn code_of(d: &Decision) -> ErrorCode {
    match &d.outcome.result {
        Ok(a) => panic!("expected a refusal, got {a:?}"),
        Err(r) => r.code,
    }
}

/// Runs `env` and checks it succeeds as `want`, emitting exactly `events`.
#[track_caller]
pub fn accept(
    store: &mut Store,
    env: &CommandEnvelope,
    want: Accepted,
    events: &[&str],
) -> Decision {
    let d = store.run(env);
    assert_eq!(accepted_of(&d), want, "outcome of {}", env.verb());
    assert!(
        !d.replay,
        "{} is a new transition, not a replay",
        env.verb()
    );
    assert_eq!(names(&d.effects.events), events, "events of {}", env.verb());
    assert_eq!(d.outcome.command_id, env.command_id());
    d
}

/// Runs `env` and checks it is refused with `code` and changes nothing: no record
/// to write, nothing to publish, the store untouched.
#[track_caller]
pub fn refuse(store: &mut Store, env: &CommandEnvelope, code: ErrorCode) -> Decision {
    let before = store.revisions();
    let published = store.published.events.len();
    let d = store.run(env);
    assert_eq!(
        code_of(&d),
        code,
        "outcome of {}: {:?}",
        env.verb(),
        d.outcome
    );
    assert!(d.session.is_none(), "a refusal writes no session");
    assert!(d.interaction.is_none(), "a refusal writes no interaction");
    assert_eq!(d.effects, Effects::default(), "a refusal publishes nothing");
    assert!(!d.replay);
    assert_eq!(store.revisions(), before, "a refusal changes no record");
    assert_eq!(store.published.events.len(), published);
    d
}

/// Runs `env` and checks it succeeds as `want` without writing or emitting anything
/// (and is not a replay of a recorded transition).
#[track_caller]
pub fn noop(store: &mut Store, env: &CommandEnvelope, want: Accepted) -> Decision {
    let before = store.revisions();
    let d = store.run(env);
    assert_eq!(accepted_of(&d), want, "outcome of {}", env.verb());
    assert!(d.session.is_none() && d.interaction.is_none(), "no write");
    assert_eq!(d.effects, Effects::default(), "nothing published");
    assert!(!d.replay);
    assert_eq!(store.revisions(), before);
    d
}

/// Decides `env` again on the current records, as a redelivery would, and checks it
/// is a replay of `first`: same outcome, same effects, nothing to write.
#[track_caller]
pub fn assert_replays(store: &mut Store, env: &CommandEnvelope, first: &Decision) {
    let loaded = store.load(env);
    let again = store.decide_on(&loaded, env);
    assert!(
        again.replay,
        "{} decided again instead of replaying",
        env.verb()
    );
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(again.effects, first.effects);
    assert_eq!(ids(&again.effects.events), ids(&first.effects.events));
    assert!(again.session.is_none() && again.interaction.is_none());
}

/// The body of the first `name` event of `events`.
pub fn data<'a>(events: &'a [Event], name: &str) -> &'a EventData {
    &events
        .iter()
        .find(|e| e.name() == name)
        .unwrap_or_else(|| panic!("no {name} event"))
        .body
}

/// The first task-status event of `events`.
pub fn task_status(events: &[Event]) -> &TaskStatusData {
    match data(events, "task-status") {
        EventData::TaskStatus(t) => t,
        other => panic!("not a task status: {other:?}"),
    }
}

/// The call result of the first tool-call-finished event of `events`.
pub fn finished_result(events: &[Event]) -> &CallResult {
    match data(events, "tool-call-finished") {
        EventData::ToolCallFinished { result, .. } => result,
        other => panic!("not tool-call-finished: {other:?}"),
    }
}

/// The `turn-started` body of turn `turn` on lane [`LANE`] of session [`P`].
pub fn turn_started(turn: &str) -> EventData {
    EventData::TurnStarted {
        session: sid(P),
        lane: lane(LANE),
        turn_id: mid(turn),
    }
}

/// A call that returned the string `s`.
pub fn output(s: &str) -> CallResult {
    CallResult::Ok {
        output: Value::String(s.into()),
    }
}

// ---------------------------------------------------------------- fixtures

/// The blocking session of the fixtures.
pub const S: &str = "s1";
/// The product session of the fixtures.
pub const P: &str = "p1";
/// The approval [`Fixture::approval`] opens by default in the tests.
pub const APPROVAL: &str = "eff-01J9";
/// The question the tests open (the README's example question id).
pub const QUESTION: &str = "6b9f6d2e-1c3a-4f5b-9d7e-2a8c4e6f0b1d";
/// The connection the tests open.
pub const CONNECTION: &str = "conn-1";

/// The events a fixture step must emit; `None`: the step is not checked.
type Expect = Option<&'static [&'static str]>;

/// A store made ready for a test, step by step, e.g.
/// `Fixture::new().blocking(S).approval(APPROVAL, S).store()`.
///
/// [`store`](Self::store) delivers every step once, in order, as a first delivery.
/// The typed steps (`blocking`, `product`, `approval`, `question`, `connection`)
/// are checked: the command succeeds as `Opened`, is not a replay, and emits
/// exactly its events. [`then`](Self::then) adds any command, unchecked.
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    deadlines: holdpoint_domain::Deadlines,
    steps: Vec<(CommandEnvelope, Expect)>,
}

impl Fixture {
    /// No session, no interaction, no deadline support.
    pub fn new() -> Self {
        Self::default()
    }

    /// How the store's decisions keep deadlines.
    pub fn deadlines(mut self, deadlines: holdpoint_domain::Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    fn step(mut self, env: CommandEnvelope, expect: Expect) -> Self {
        self.steps.push((env, expect));
        self
    }

    /// Opens a session in `mode` with the default lane capacity.
    pub fn session(self, session: &str, mode: SessionMode) -> Self {
        self.step(session_open(session, mode), Some(&["session-opened"]))
    }

    /// Opens a blocking session.
    pub fn blocking(self, session: &str) -> Self {
        self.session(session, SessionMode::Blocking)
    }

    /// Opens a product session whose lanes hold `capacity` queued messages.
    pub fn product(self, session: &str, capacity: u32) -> Self {
        self.step(
            session_open_cap(session, SessionMode::Product, capacity),
            Some(&["session-opened"]),
        )
    }

    /// Opens approval `id` on `session` for the held call of [`pr_approval`].
    pub fn approval(self, id: &str, session: &str) -> Self {
        self.step(
            open(id, session, pr_approval()),
            Some(&["approval-requested", "task-status"]),
        )
    }

    /// Opens question `id` on `session` with [`example_questions`].
    pub fn question(self, id: &str, session: &str) -> Self {
        self.step(
            open(id, session, example_question_req()),
            Some(&["question-asked", "task-status"]),
        )
    }

    /// Opens connection `id` on `session`: app `Linear`, reason `to file the bug`.
    pub fn connection(self, id: &str, session: &str) -> Self {
        self.step(
            open(id, session, connection_req("Linear", "to file the bug")),
            Some(&["connection-requested", "task-status"]),
        )
    }

    /// Any command, delivered unchecked.
    pub fn then(self, env: CommandEnvelope) -> Self {
        self.step(env, None)
    }

    /// The steps' commands, in order (for a harness that delivers them itself).
    pub fn envelopes(&self) -> Vec<CommandEnvelope> {
        self.steps.iter().map(|(env, _)| env.clone()).collect()
    }

    /// A fresh store with every step delivered once.
    #[track_caller]
    pub fn store(self) -> Store {
        let mut s = Store::new();
        s.deadlines = self.deadlines;
        for (env, expect) in &self.steps {
            match expect {
                Some(events) => {
                    accept(&mut s, env, Accepted::Opened, events);
                }
                None => {
                    s.run(env);
                }
            }
        }
        s
    }
}

// ---------------------------------------------------------------- the store

/// A KV record with its revision (0 means "absent": a write expecting 0 creates).
#[derive(Debug, Clone, PartialEq)]
pub struct Rec<T> {
    pub rev: u64,
    pub value: T,
}

/// One bucket: records by key, with revisions.
pub type Bucket<T> = BTreeMap<String, Rec<T>>;

fn get<T: Clone>(b: &Bucket<T>, k: &str) -> (Option<T>, u64) {
    b.get(k)
        .map_or((None, 0), |r| (Some(r.value.clone()), r.rev))
}

/// What a worker loaded for one command: the records and their revisions.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub interaction: Option<Interaction>,
    pub interaction_rev: u64,
    pub task: Option<Task>,
    pub task_rev: u64,
    pub session: Option<Session>,
    pub session_rev: u64,
    pub lane: Option<Lane>,
    pub lane_rev: u64,
    /// The remembered rules the worker would pass in (every organisation's: matching
    /// must keep them apart).
    pub rules: Vec<holdpoint_domain::Rule>,
}

impl Loaded {
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            interaction: self.interaction.as_ref(),
            task: self.task.as_ref(),
            session: self.session.as_ref(),
            lane: self.lane.as_ref(),
            rules: &self.rules,
        }
    }
}

/// A lost compare-and-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict;

/// Everything published, in publish order (re-publishes included).
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub events: Vec<Event>,
    pub audit: Vec<Event>,
    pub lane_messages: Vec<LaneMessage>,
    pub follow_ups: Vec<CommandEnvelope>,
}

/// The in-memory KV buckets, a clock, and what was published.
#[derive(Debug, Clone)]
pub struct Store {
    pub interactions: Bucket<Interaction>,
    pub tasks: Bucket<Task>,
    pub sessions: Bucket<Session>,
    pub lanes: Bucket<Lane>,
    pub published: Published,
    /// The remembered rules stored so far (what `HP_RULES` would hold).
    pub rules: Vec<holdpoint_domain::Rule>,
    /// The clock the next decision reads; every decision advances it by one second,
    /// so a re-decision at another time would show in the event contents.
    pub now: OffsetDateTime,
    /// How many records were written (every bucket), to check "no write".
    pub writes: u64,
    /// How many session headers and lane records were written.
    pub session_writes: u64,
    /// How decisions keep deadlines (none supported unless a test sets it).
    pub deadlines: holdpoint_domain::Deadlines,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn ikey(org: &str, id: &str) -> String {
    format!("{org}.{id}")
}

fn lkey(org: &str, session: &str, lane: &str) -> String {
    format!("{org}.{session}.{lane}")
}

impl Store {
    pub fn new() -> Self {
        Store {
            interactions: BTreeMap::new(),
            tasks: BTreeMap::new(),
            sessions: BTreeMap::new(),
            lanes: BTreeMap::new(),
            published: Published::default(),
            rules: Vec::new(),
            now: t0(),
            writes: 0,
            session_writes: 0,
            deadlines: holdpoint_domain::Deadlines::default(),
        }
    }

    pub fn tick(&mut self) -> OffsetDateTime {
        let now = self.now;
        self.now += time::Duration::seconds(1);
        now
    }

    /// Loads what the worker loads for `env`: the interaction it names, then the
    /// records [`needs`] asks for.
    pub fn load(&self, env: &CommandEnvelope) -> Loaded {
        let org = env.org.as_str();
        let mut l = Loaded {
            rules: self.rules.clone(),
            ..Loaded::default()
        };
        if let Some(id) = env.interaction_id() {
            (l.interaction, l.interaction_rev) = get(&self.interactions, &ikey(org, id.as_str()));
        }
        let mode = env
            .session_id()
            .and_then(|s| self.sessions.get(&ikey(org, s.as_str())))
            .map(|r| r.value.mode);
        let n = needs(env, l.interaction.as_ref(), mode);
        if let Some(t) = &n.task {
            (l.task, l.task_rev) = get(&self.tasks, &ikey(org, t.as_str()));
        }
        if let Some(s) = &n.session {
            (l.session, l.session_rev) = get(&self.sessions, &ikey(org, s.as_str()));
        }
        if let Some((s, lane)) = &n.lane {
            (l.lane, l.lane_rev) = get(&self.lanes, &lkey(org, s.as_str(), lane.as_str()));
        }
        l
    }

    /// Decides `env` on what `loaded` holds, at the store's clock.
    pub fn decide_on(&mut self, loaded: &Loaded, env: &CommandEnvelope) -> Decision {
        let now = self.tick();
        decide(
            loaded.snapshot(),
            env,
            &Ctx::new(env, now, None).with_deadlines(self.deadlines),
        )
    }

    fn cas<T: Clone>(
        bucket: &mut Bucket<T>,
        key: String,
        expected: u64,
        value: &T,
    ) -> Result<(), Conflict> {
        let current = bucket.get(&key).map_or(0, |r| r.rev);
        if current != expected {
            return Err(Conflict);
        }
        bucket.insert(
            key,
            Rec {
                rev: current + 1,
                value: value.clone(),
            },
        );
        Ok(())
    }

    /// Writes the decision's session header by compare-and-set on the loaded revision.
    pub fn write_session(
        &mut self,
        env: &CommandEnvelope,
        loaded: &Loaded,
        decision: &Decision,
    ) -> Result<(), Conflict> {
        if let Some(s) = &decision.session {
            let k = ikey(env.org.as_str(), s.id.as_str());
            Self::cas(&mut self.sessions, k, loaded.session_rev, s)?;
            self.writes += 1;
            self.session_writes += 1;
        }
        Ok(())
    }

    /// Writes the decision's lane record by compare-and-set on the loaded revision.
    pub fn write_lane(
        &mut self,
        env: &CommandEnvelope,
        loaded: &Loaded,
        decision: &Decision,
    ) -> Result<(), Conflict> {
        if let Some(l) = &decision.lane {
            let k = lkey(env.org.as_str(), l.session.as_str(), l.lane.as_str());
            Self::cas(&mut self.lanes, k, loaded.lane_rev, l)?;
            self.writes += 1;
            self.session_writes += 1;
        }
        Ok(())
    }

    /// Writes the decision's task record by compare-and-set on the loaded revision.
    pub fn write_task(
        &mut self,
        env: &CommandEnvelope,
        loaded: &Loaded,
        decision: &Decision,
    ) -> Result<(), Conflict> {
        if let Some(t) = &decision.task {
            let k = ikey(env.org.as_str(), t.id.as_str());
            Self::cas(&mut self.tasks, k, loaded.task_rev, t)?;
            self.writes += 1;
        }
        Ok(())
    }

    /// Writes the decision's interaction by compare-and-set on the loaded revision,
    /// checking that a resolution never changes and a state never goes back.
    pub fn write_interaction(
        &mut self,
        env: &CommandEnvelope,
        loaded: &Loaded,
        decision: &Decision,
    ) -> Result<(), Conflict> {
        if let Some(i) = &decision.interaction {
            let k = ikey(env.org.as_str(), i.id.as_str());
            let old = self.interactions.get(&k);
            if old.map_or(0, |r| r.rev) != loaded.interaction_rev {
                return Err(Conflict);
            }
            if let Some(old) = old {
                check_interaction_step(&old.value, i);
            }
            Self::cas(&mut self.interactions, k, loaded.interaction_rev, i)?;
            self.writes += 1;
        }
        Ok(())
    }

    /// Writes the decision's records in the worker's order: session, lane, task,
    /// interaction (the primary record last).
    pub fn apply(
        &mut self,
        env: &CommandEnvelope,
        loaded: &Loaded,
        decision: &Decision,
    ) -> Result<(), Conflict> {
        self.write_session(env, loaded, decision)?;
        self.write_lane(env, loaded, decision)?;
        self.write_task(env, loaded, decision)?;
        self.write_interaction(env, loaded, decision)
    }

    pub fn publish(&mut self, decision: &Decision) {
        let e = &decision.effects;
        self.published.events.extend(e.events.iter().cloned());
        self.published.audit.extend(e.audit.iter().cloned());
        for r in &e.rules {
            // A rule is stored once under its id (a re-publish is a no-op).
            if !self.rules.iter().any(|have| have.id == r.id) {
                self.rules.push(r.clone());
            }
        }
        self.published
            .lane_messages
            .extend(e.lane_messages.iter().cloned());
        self.published
            .follow_ups
            .extend(e.follow_ups.iter().cloned());
    }

    /// One delivery of `env` through the worker loop: load, decide, write (a lost
    /// compare-and-set decides again), publish (a replay publishes only when
    /// `redelivered`), and return the decision that was applied.
    pub fn deliver(&mut self, env: &CommandEnvelope, redelivered: bool) -> Decision {
        for _ in 0..64 {
            let loaded = self.load(env);
            let decision = self.decide_on(&loaded, env);
            if self.apply(env, &loaded, &decision).is_err() {
                continue;
            }
            if !decision.replay || redelivered {
                self.publish(&decision);
            }
            return decision;
        }
        panic!("too many revision conflicts for {}", env.verb());
    }

    /// A first delivery.
    pub fn run(&mut self, env: &CommandEnvelope) -> Decision {
        self.deliver(env, false)
    }

    pub fn interaction(&self, id: &str) -> &Interaction {
        &self
            .interactions
            .get(&ikey(ORG, id))
            .unwrap_or_else(|| panic!("interaction {id} is stored"))
            .value
    }

    pub fn has_interaction(&self, id: &str) -> bool {
        self.interactions.contains_key(&ikey(ORG, id))
    }

    pub fn session(&self, id: &str) -> &Session {
        &self
            .sessions
            .get(&ikey(ORG, id))
            .unwrap_or_else(|| panic!("session {id} is stored"))
            .value
    }

    pub fn has_session(&self, id: &str) -> bool {
        self.sessions.contains_key(&ikey(ORG, id))
    }

    /// The lane record `session`/`lane` (an empty lane when none is stored).
    pub fn lane(&self, session: &str, lane_name: &str) -> Lane {
        self.lanes
            .get(&lkey(ORG, session, lane_name))
            .map(|r| r.value.clone())
            .unwrap_or_else(|| Lane::new(&org(), &sid(session), &lane(lane_name)))
    }

    /// True when a lane record `session`/`lane` is stored.
    pub fn has_lane(&self, session: &str, lane_name: &str) -> bool {
        self.lanes.contains_key(&lkey(ORG, session, lane_name))
    }

    /// The task record `id`.
    pub fn task(&self, id: &str) -> &Task {
        &self
            .tasks
            .get(&ikey(ORG, id))
            .unwrap_or_else(|| panic!("task {id} is stored"))
            .value
    }

    /// Empties every record's outbox, as if enough later transitions had pushed the
    /// recorded ones out ([`holdpoint_domain::OUTBOX_KEEP`]): a repeated command is
    /// then decided again instead of replayed.
    pub fn forget_outboxes(&mut self) {
        for r in self.interactions.values_mut() {
            r.value.outbox = Outbox::default();
            r.rev += 1;
        }
        for r in self.sessions.values_mut() {
            r.value.outbox = Outbox::default();
            r.rev += 1;
        }
        for r in self.lanes.values_mut() {
            r.value.outbox = Outbox::default();
            r.rev += 1;
        }
    }

    /// Every record with its revision, to compare before and after.
    pub fn revisions(&self) -> Vec<(String, u64)> {
        fn tagged<T>(t: &str, b: &Bucket<T>) -> impl Iterator<Item = (String, u64)> {
            b.iter().map(move |(k, r)| (format!("{t}:{k}"), r.rev))
        }
        tagged("s", &self.sessions)
            .chain(tagged("l", &self.lanes))
            .chain(tagged("t", &self.tasks))
            .chain(tagged("i", &self.interactions))
            .collect()
    }
}

/// The ids of the questions open on `l`, oldest first.
pub fn open_ids(l: &Lane) -> Vec<InteractionId> {
    l.open_questions.iter().map(|q| q.id.clone()).collect()
}

/// One interaction write, old to new: a set resolution never changes (answer, key,
/// person, outcome), and the lifecycle only goes forward.
pub fn check_interaction_step(old: &Interaction, new: &Interaction) {
    if let Some(r) = &old.resolution {
        assert_eq!(
            new.resolution.as_ref(),
            Some(r),
            "the resolution of {} changed once set",
            old.id
        );
    }
    if let Some(c) = &old.closure {
        assert_eq!(
            new.closure.as_ref(),
            Some(c),
            "the closure of {} changed",
            old.id
        );
    }
    if let Some(res) = &old.result {
        assert_eq!(
            new.result.as_ref(),
            Some(res),
            "the call result of {} changed",
            old.id
        );
    }
    let allowed = match old.state {
        State::Pending => true,
        State::Resolved => matches!(new.state, State::Resolved | State::Finished),
        State::Finished => new.state == State::Finished,
        State::Closed => new.state == State::Closed,
    };
    assert!(
        allowed,
        "interaction {} went from {:?} to {:?}",
        old.id, old.state, new.state
    );
    assert_eq!(old.spec, new.spec, "the spec of {} changed", old.id);
}

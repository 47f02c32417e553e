//! Property tests of the state machine under retries, duplicates, races and crashes.
//!
//! Each case runs a random sequence of commands against one session and four
//! interactions (an approval, two questions, a connection) through the worker's
//! loop as modelled by `common::Store`: load, decide, write the session then the
//! interaction by compare-and-set, publish, ack. Commands may be delivered to two
//! workers at once (both decide on the same records; the loser of a
//! compare-and-set decides again), a worker may die at any point (the command is
//! then redelivered later, and its effects published again even when it replays),
//! earlier commands are sent again, and follow-up commands are delivered late.
//! Every publish is collected; at the end every pending delivery is run and the
//! guarantees are checked on what was published and what is stored.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use holdpoint_domain::rules::canonical_json;
use holdpoint_domain::{
    Answer, AnswerInput, AnswerRoute, CallResult, CloseReason, Command, CommandEnvelope, CommandId,
    Decision, ErrorCode, Event, EventData, Interaction, Kind, OpenRequest, SessionMode, Spec,
    State, digest,
};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::json;

const SESSION: &str = "s";
/// How many session writes may happen between a worker's death and the redelivery
/// of its command (one op writes the session at most twice; the outbox keeps 8).
const REDELIVERY_WINDOW: u64 = 3;
const LANES: [&str; 2] = ["main", "side"];
/// The interactions every case works with (an approval, a question, a connection, a
/// question on the side lane).
const INTERACTIONS: [&str; 4] = ["eff-1", "q-1", "conn-1", "q-2"];

fn interaction_lane(i: usize) -> &'static str {
    if i == 3 { "side" } else { "main" }
}

fn request(i: usize) -> OpenRequest {
    match i {
        0 => pr_approval(),
        1 => example_question_req(),
        2 => connection_req("Linear", "to file the bug"),
        _ => OpenRequest::Question {
            questions: vec![question("Proceed?", &["Yes", "No"], false, true)],
        },
    }
}

/// The bodies a person may send, read differently by each kind.
fn body(n: usize) -> AnswerInput {
    match n % 10 {
        0 => approved(true),
        1 => approved_because(false, "no"),
        2 => value(json!(true)),
        3 => value(json!({"connected": true})),
        4 => text("hello"),
        5 => example_answers(),
        6 => answers(vec![oa(&[1]), oa(&[0, 1])]),
        7 => answers(vec![oa(&[1])]),
        8 => approved_digest(true, "00"),
        _ => value(json!("free")),
    }
}

fn route(n: usize) -> AnswerRoute {
    match n % 4 {
        0 => AnswerRoute::Respond,
        1 => AnswerRoute::Question,
        2 => AnswerRoute::A2a,
        _ => AnswerRoute::Approve,
    }
}

fn reason(n: usize) -> CloseReason {
    match n % 4 {
        0 => CloseReason::Interrupted,
        1 => CloseReason::Expired,
        2 => CloseReason::Canceled,
        _ => CloseReason::Superseded,
    }
}

// ---------------------------------------------------------------- generated commands

#[derive(Debug, Clone)]
enum Cmd {
    SessionOpen,
    /// The session opened again in the other mode (a runtime mistake).
    SessionOpenOtherMode,
    SessionClose,
    SessionEnd,
    Open {
        i: usize,
        alt: bool,
    },
    Answer {
        i: usize,
        key: usize,
        body: usize,
        route: usize,
    },
    Close {
        i: usize,
        reason: usize,
    },
    ToolResult {
        i: usize,
        variant: usize,
    },
    Message {
        lane: usize,
        m: usize,
    },
    TurnStart {
        lane: usize,
        t: usize,
    },
    /// Finish whatever turn runs on the lane (the runtime's normal behaviour).
    FinishRunning {
        lane: usize,
    },
    TurnFinish {
        lane: usize,
        t: usize,
    },
    /// Deliver one of the published follow-up commands not yet delivered.
    FollowUp {
        pick: usize,
    },
}

#[derive(Debug, Clone, Copy)]
enum Crash {
    None,
    /// Dies after deciding: nothing written.
    BeforeWrite,
    /// Dies after the session header's write, before the lane's.
    AfterSession,
    /// Dies after the lane's write, before the task's.
    AfterLane,
    /// Dies after the task's write, before the interaction's (the primary).
    AfterTask,
    /// Dies after writing, before publishing.
    AfterInteraction,
    /// Dies after publishing, before the ack: redelivered all the same.
    AfterPublish,
}

#[derive(Debug, Clone)]
enum Second {
    /// The same command delivered to two workers at once.
    Same,
    /// Another answer to the same interaction (another key and body).
    OtherAnswer { key: usize, body: usize },
    /// The host closes the interaction the first command answers.
    CloseIt { reason: usize },
    /// A person writes on the lane of the interaction the first command answers.
    WriteOnItsLane { m: usize },
    /// Any other command.
    Other(Cmd),
}

#[derive(Debug, Clone)]
enum Op {
    Fresh(Cmd, Crash),
    Race(Cmd, Second, Vec<bool>),
    Redeliver(usize, Crash),
    Duplicate(usize),
    /// An earlier command sent again long after: every record's outbox has moved on.
    LateDuplicate(usize),
}

fn cmd_strategy() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        1 => Just(Cmd::SessionOpen),
        1 => Just(Cmd::SessionOpenOtherMode),
        2 => Just(Cmd::SessionClose),
        1 => Just(Cmd::SessionEnd),
        8 => (0..4usize, prop::bool::weighted(0.1)).prop_map(|(i, alt)| Cmd::Open { i, alt }),
        24 => (0..4usize, 0..3usize, 0..10usize, 0..4usize)
            .prop_map(|(i, key, body, route)| Cmd::Answer { i, key, body, route }),
        5 => (0..4usize, 0..4usize).prop_map(|(i, reason)| Cmd::Close { i, reason }),
        5 => (0..3usize, 0..2usize).prop_map(|(i, variant)| Cmd::ToolResult {
            i: if i == 2 { 1 } else { 0 },
            variant
        }),
        6 => (0..2usize, 0..4usize).prop_map(|(lane, m)| Cmd::Message { lane, m }),
        4 => (0..2usize, 0..3usize).prop_map(|(lane, t)| Cmd::TurnStart { lane, t }),
        5 => (0..2usize).prop_map(|lane| Cmd::FinishRunning { lane }),
        1 => (0..2usize, 0..3usize).prop_map(|(lane, t)| Cmd::TurnFinish { lane, t }),
        4 => any::<usize>().prop_map(|pick| Cmd::FollowUp { pick }),
    ]
}

fn crash_strategy() -> impl Strategy<Value = Crash> {
    prop_oneof![
        12 => Just(Crash::None),
        1 => Just(Crash::BeforeWrite),
        1 => Just(Crash::AfterSession),
        1 => Just(Crash::AfterLane),
        1 => Just(Crash::AfterTask),
        1 => Just(Crash::AfterInteraction),
        1 => Just(Crash::AfterPublish),
    ]
}

fn second_strategy() -> impl Strategy<Value = Second> {
    prop_oneof![
        2 => Just(Second::Same),
        3 => (0..3usize, 0..10usize).prop_map(|(key, body)| Second::OtherAnswer { key, body }),
        2 => (0..4usize).prop_map(|reason| Second::CloseIt { reason }),
        2 => (0..4usize).prop_map(|m| Second::WriteOnItsLane { m }),
        3 => cmd_strategy().prop_map(Second::Other),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (cmd_strategy(), crash_strategy()).prop_map(|(c, k)| Op::Fresh(c, k)),
        6 => (cmd_strategy(), second_strategy(), prop::collection::vec(any::<bool>(), 0..10))
            .prop_map(|(a, b, s)| Op::Race(a, b, s)),
        3 => (any::<usize>(), crash_strategy()).prop_map(|(p, k)| Op::Redeliver(p, k)),
        2 => any::<usize>().prop_map(Op::Duplicate),
        2 => any::<usize>().prop_map(Op::LateDuplicate),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    mode: SessionMode,
    capacity: u32,
    /// Which interactions are opened up front.
    preopen: [bool; 4],
    ops: Vec<Op>,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(SessionMode::Blocking), Just(SessionMode::Product)],
        0..3u32,
        any::<[bool; 4]>(),
        prop::collection::vec(op_strategy(), 1..40),
    )
        .prop_map(|(mode, capacity, preopen, ops)| Case {
            mode,
            capacity,
            preopen,
            ops,
        })
}

// ---------------------------------------------------------------- the world

/// The commands and deliveries in flight around the store.
#[derive(Clone)]
struct World {
    store: Store,
    mode: SessionMode,
    capacity: u32,
    /// Commands whose worker died, with the session write count when it died:
    /// JetStream redelivers them.
    pending: Vec<(CommandEnvelope, u64)>,
    /// Follow-ups published and not yet delivered.
    follow_ups: Vec<CommandEnvelope>,
    follow_ups_seen: usize,
    /// Every command delivered so far, for duplicates.
    history: Vec<CommandEnvelope>,
    /// The command ids whose decision was written in full (session and interaction).
    applied: BTreeSet<CommandId>,
}

impl World {
    fn new(mode: SessionMode, capacity: u32) -> Self {
        World {
            store: Store::new(),
            mode,
            capacity,
            pending: Vec::new(),
            follow_ups: Vec::new(),
            follow_ups_seen: 0,
            history: Vec::new(),
            applied: BTreeSet::new(),
        }
    }

    /// Turns a generated command into an envelope, reading the store where the
    /// runtime would know (the running turn); `None` when there is nothing to send.
    fn envelope(&mut self, c: &Cmd) -> Option<CommandEnvelope> {
        self.collect_follow_ups();
        Some(match c {
            Cmd::SessionOpen => session_open_cap(SESSION, self.mode, self.capacity),
            Cmd::SessionOpenOtherMode => {
                let other = match self.mode {
                    SessionMode::Blocking => SessionMode::Product,
                    SessionMode::Product => SessionMode::Blocking,
                };
                session_open_cap(SESSION, other, self.capacity)
            }
            Cmd::SessionClose => session_close(SESSION),
            Cmd::SessionEnd => session_end(SESSION),
            Cmd::Open { i, alt } => {
                let lane_name = if *alt {
                    if interaction_lane(*i) == "main" {
                        "side"
                    } else {
                        "main"
                    }
                } else {
                    interaction_lane(*i)
                };
                open_on(INTERACTIONS[*i], SESSION, lane_name, request(*i))
            }
            Cmd::Answer {
                i,
                key: k,
                body: b,
                route: r,
            } => {
                let id = INTERACTIONS[*i];
                let k = format!("k{k}");
                match route(*r) {
                    AnswerRoute::A2a => answer_a2a(id, &k, TASK, CONTEXT, body(*b)),
                    other => answer_via(other, id, &k, body(*b)),
                }
            }
            Cmd::Close { i, reason: r } => close(INTERACTIONS[*i], reason(*r)),
            Cmd::ToolResult { i, variant } => tool_result(
                INTERACTIONS[*i],
                ok_output(json!(if *variant == 0 { "done" } else { "other" })),
            ),
            Cmd::Message { lane: l, m } => {
                message(SESSION, LANES[*l], &format!("m{m}"), &format!("text {m}"))
            }
            Cmd::TurnStart { lane: l, t } => turn_start(SESSION, LANES[*l], &format!("t{t}")),
            Cmd::FinishRunning { lane: l } => {
                if !self.store.has_session(SESSION) {
                    return None;
                }
                let running = self.store.lane(SESSION, LANES[*l]).running?;
                turn_finish(SESSION, LANES[*l], running.as_str())
            }
            Cmd::TurnFinish { lane: l, t } => turn_finish(SESSION, LANES[*l], &format!("t{t}")),
            Cmd::FollowUp { pick } => {
                if self.follow_ups.is_empty() {
                    return None;
                }
                let n = pick % self.follow_ups.len();
                self.follow_ups.remove(n)
            }
        })
    }

    fn collect_follow_ups(&mut self) {
        let all = &self.store.published.follow_ups;
        self.follow_ups
            .extend(all[self.follow_ups_seen..].iter().cloned());
        self.follow_ups_seen = all.len();
    }

    /// Delivers a fixture's commands once each, in order, to the end.
    fn set_up(&mut self, fixture: &Fixture) {
        for env in fixture.envelopes() {
            self.deliver(env, false, Crash::None);
        }
    }

    /// Runs one delivery to the crash point; a dead worker's command is redelivered
    /// later.
    fn deliver(&mut self, env: CommandEnvelope, redelivered: bool, crash: Crash) {
        let mut w = Worker::new(env.clone(), redelivered);
        let stop = match crash {
            Crash::None | Crash::AfterPublish => Stage::Done,
            Crash::BeforeWrite => Stage::Decided,
            Crash::AfterSession => Stage::SessionWritten,
            Crash::AfterLane => Stage::LaneWritten,
            Crash::AfterTask => Stage::TaskWritten,
            Crash::AfterInteraction => Stage::Written,
        };
        w.run_until(&mut self.store, &mut self.applied, stop);
        if !matches!(crash, Crash::None) {
            self.pending.push((env, self.store.session_writes));
        }
        self.collect_follow_ups();
    }

    /// Two workers, one command each, both deciding on the same records first; then
    /// `schedule` says which steps next (`true`: the first), alternating once it runs
    /// out. Returns how many entries of `schedule` were used to choose.
    fn race(&mut self, a: CommandEnvelope, b: CommandEnvelope, schedule: &[bool]) -> usize {
        let mut wa = Worker::new(a, false);
        let mut wb = Worker::new(b, false);
        wa.step(&mut self.store, &mut self.applied);
        wb.step(&mut self.store, &mut self.applied);
        let mut used = 0;
        let mut toggle = false;
        while !(wa.done() && wb.done()) {
            let pick_a = if wa.done() {
                false
            } else if wb.done() {
                true
            } else {
                used += 1;
                schedule.get(used - 1).copied().unwrap_or_else(|| {
                    toggle = !toggle;
                    toggle
                })
            };
            if pick_a {
                wa.step(&mut self.store, &mut self.applied);
            } else {
                wb.step(&mut self.store, &mut self.applied);
            }
        }
        self.collect_follow_ups();
        used
    }

    /// A dead worker's command comes back within the ack wait. Modelled in session
    /// writes: before the session has taken [`REDELIVERY_WINDOW`] more writes, so
    /// before the transition it recorded has left the session's outbox
    /// (`OUTBOX_KEEP` entries). Past that, a session-only transition's effects are no
    /// longer replayable (see the report on the domain's outbox bound).
    fn redeliver_overdue(&mut self) {
        while let Some(n) = self
            .pending
            .iter()
            .position(|(_, at)| self.store.session_writes - at >= REDELIVERY_WINDOW)
        {
            let (env, _) = self.pending.remove(n);
            self.deliver(env, true, Crash::None);
        }
    }

    fn apply(&mut self, op: &Op) {
        self.redeliver_overdue();
        match op {
            Op::Fresh(c, crash) => {
                if let Some(env) = self.envelope(c) {
                    self.history.push(env.clone());
                    self.deliver(env, false, *crash);
                }
            }
            Op::Race(c, second, schedule) => {
                let Some(a) = self.envelope(c) else { return };
                let b = match (second, &a.command) {
                    (Second::OtherAnswer { key: k, body: b }, Command::Answer(ans)) => {
                        let mut other = (**ans).clone();
                        other.key = key(&format!("k{}", (k + 1) % 3));
                        other.input = body(*b);
                        if other.key == ans.key {
                            other.key = key("k9");
                        }
                        answer_env(other)
                    }
                    (Second::CloseIt { reason: r }, Command::Answer(ans)) => {
                        close(ans.interaction_id.as_str(), reason(*r))
                    }
                    (Second::WriteOnItsLane { m }, Command::Answer(ans)) => {
                        let i = INTERACTIONS
                            .iter()
                            .position(|x| *x == ans.interaction_id.as_str())
                            .unwrap_or(0);
                        message(
                            SESSION,
                            interaction_lane(i),
                            &format!("m{m}"),
                            &format!("text {m}"),
                        )
                    }
                    (Second::Other(c2), _) => match self.envelope(c2) {
                        Some(b) => b,
                        None => a.clone(),
                    },
                    _ => a.clone(),
                };
                self.history.push(a.clone());
                self.history.push(b.clone());
                self.race(a, b, schedule);
            }
            Op::Redeliver(pick, crash) => {
                if self.pending.is_empty() {
                    return;
                }
                let (env, _) = self.pending.remove(pick % self.pending.len());
                self.deliver(env, true, *crash);
            }
            Op::LateDuplicate(pick) => {
                if self.history.is_empty() {
                    return;
                }
                // Whatever was in flight is delivered first (within the ack wait).
                while let Some((env, _)) = self.pending.pop() {
                    self.deliver(env, true, Crash::None);
                }
                self.store.forget_outboxes();
                let env = self.history[pick % self.history.len()].clone();
                self.deliver(env, true, Crash::None);
            }
            Op::Duplicate(pick) => {
                if self.history.is_empty() {
                    return;
                }
                let env = self.history[pick % self.history.len()].clone();
                self.deliver(env, true, Crash::None);
            }
        }
    }

    /// Every dead worker's command is redelivered and every follow-up delivered.
    fn drain(&mut self) {
        for _ in 0..1000 {
            self.collect_follow_ups();
            if let Some((env, _)) = self.pending.pop() {
                self.deliver(env, true, Crash::None);
            } else if let Some(env) = self.follow_ups.pop() {
                self.deliver(env, false, Crash::None);
            } else {
                return;
            }
        }
        panic!("deliveries did not settle");
    }
}

// ---------------------------------------------------------------- a worker, step by step

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Start,
    Decided,
    SessionWritten,
    LaneWritten,
    TaskWritten,
    Written,
    Done,
}

struct Worker {
    env: CommandEnvelope,
    redelivered: bool,
    stage: Stage,
    loaded: Option<Loaded>,
    decision: Option<Decision>,
    attempts: u32,
}

impl Worker {
    fn new(env: CommandEnvelope, redelivered: bool) -> Self {
        Worker {
            env,
            redelivered,
            stage: Stage::Start,
            loaded: None,
            decision: None,
            attempts: 0,
        }
    }

    fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    fn restart(&mut self) {
        self.attempts += 1;
        assert!(
            self.attempts < 64,
            "too many conflicts for {}",
            self.env.verb()
        );
        self.stage = Stage::Start;
    }

    fn step(&mut self, store: &mut Store, applied: &mut BTreeSet<CommandId>) {
        match self.stage {
            Stage::Start => {
                let loaded = store.load(&self.env);
                let decision = store.decide_on(&loaded, &self.env);
                check_decision(&loaded, &self.env, &decision);
                // A command written in full is idempotent for ever: decided again, it
                // replays or writes and publishes nothing.
                if applied.contains(&self.env.command_id()) && !decision.replay {
                    assert!(
                        decision.interaction.is_none()
                            && decision.lane.is_none()
                            && decision.session.is_none(),
                        "{} applied again: {:?}",
                        self.env.verb(),
                        decision.outcome
                    );
                    assert_eq!(
                        decision.effects,
                        holdpoint_domain::Effects::default(),
                        "{} applied again published",
                        self.env.verb()
                    );
                }
                self.loaded = Some(loaded);
                self.decision = Some(decision);
                self.stage = Stage::Decided;
            }
            Stage::Decided => {
                let (loaded, decision) = self.current();
                match store.write_session(&self.env, loaded, decision) {
                    Ok(()) => self.stage = Stage::SessionWritten,
                    Err(Conflict) => self.restart(),
                }
            }
            Stage::SessionWritten => {
                let (loaded, decision) = self.current();
                match store.write_lane(&self.env, loaded, decision) {
                    Ok(()) => self.stage = Stage::LaneWritten,
                    Err(Conflict) => self.restart(),
                }
            }
            Stage::LaneWritten => {
                let (loaded, decision) = self.current();
                match store.write_task(&self.env, loaded, decision) {
                    Ok(()) => self.stage = Stage::TaskWritten,
                    Err(Conflict) => self.restart(),
                }
            }
            Stage::TaskWritten => {
                let (loaded, decision) = self.current();
                match store.write_interaction(&self.env, loaded, decision) {
                    Ok(()) => self.stage = Stage::Written,
                    Err(Conflict) => self.restart(),
                }
            }
            Stage::Written => {
                let (_, decision) = self.current();
                // Committed: its primary record (interaction, lane or session) was
                // written; a task-only write undoes a crashed attempt's step.
                if decision.interaction.is_some()
                    || decision.lane.is_some()
                    || decision.session.is_some()
                {
                    applied.insert(self.env.command_id());
                }
                if !decision.replay || self.redelivered {
                    store.publish(decision);
                }
                self.stage = Stage::Done;
            }
            Stage::Done => {}
        }
    }

    fn current(&self) -> (&Loaded, &Decision) {
        (
            self.loaded.as_ref().expect("decided before writing"),
            self.decision.as_ref().expect("decided before writing"),
        )
    }

    fn run_until(&mut self, store: &mut Store, applied: &mut BTreeSet<CommandId>, stop: Stage) {
        while self.stage < stop {
            self.step(store, applied);
        }
    }
}

fn is_product_question(i: &Interaction) -> bool {
    i.mode == SessionMode::Product && i.kind() == Kind::Question
}

/// Checked on every decision: an opening never succeeds with other content than
/// what is recorded (nor a session in another mode), and an answer that reaches a
/// resolved interaction with the resolving key (or any key, on a product question)
/// gets the recorded outcome.
fn check_decision(loaded: &Loaded, env: &CommandEnvelope, d: &Decision) {
    match (&env.command, &loaded.interaction, &loaded.session) {
        (Command::Open(o), Some(i), _) => {
            let content = serde_json::to_value(o).expect("an opening serializes");
            let same = i.open_digest == digest(&[&canonical_json(&content)]);
            if !same {
                assert_eq!(
                    d.outcome.result.as_ref().map_err(|r| r.code),
                    Err(ErrorCode::CommandConflict),
                    "{} reopened with other content",
                    i.id
                );
            }
            return;
        }
        (Command::SessionOpen { mode, .. }, _, Some(s)) => {
            if s.mode != *mode {
                assert_eq!(
                    d.outcome.result.as_ref().map_err(|r| r.code),
                    Err(ErrorCode::CommandConflict),
                    "session reopened in another mode"
                );
            }
            return;
        }
        _ => {}
    }
    let (Command::Answer(a), Some(i)) = (&env.command, &loaded.interaction) else {
        return;
    };
    let Some(r) = &i.resolution else { return };
    let routed = (a.route != AnswerRoute::Question || i.kind() == Kind::Question)
        && a.task_id.as_ref().is_none_or(|t| t == &i.task_id)
        && a.context_id.as_ref().is_none_or(|c| c == &i.context_id);
    if routed && (r.key == a.key || is_product_question(i)) {
        assert_eq!(
            d.outcome.result, r.outcome.result,
            "{} answered again with key {} got another outcome",
            i.id, a.key
        );
        assert!(d.interaction.is_none() && d.session.is_none());
    }
}

// ---------------------------------------------------------------- the guarantees

fn interaction_of(e: &Event) -> Option<String> {
    match &e.body {
        EventData::SessionOpened { .. }
        | EventData::SessionClosed { .. }
        | EventData::LaneMessage { .. }
        | EventData::TurnStarted { .. }
        | EventData::DeadLetter { .. }
        | EventData::WebhookDisabled { .. }
        | EventData::WebhookTest { .. } => None,
        _ => Some(e.subject.clone()),
    }
}

fn check_world(w: &World) {
    let store = &w.store;
    let all: Vec<&Event> = store
        .published
        .events
        .iter()
        .chain(store.published.audit.iter())
        .collect();

    // The same event id always carries the same content.
    let mut by_id: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in &all {
        if let Some(first) = by_id.insert(e.id.as_str(), e) {
            assert_eq!(first, *e, "event id {} published with other content", e.id);
        }
    }

    // Per interaction and event name, one id; task-status: one for the open, one for
    // the resolve.
    let mut per: BTreeMap<(String, &str), BTreeSet<&str>> = BTreeMap::new();
    for e in by_id.values() {
        if let Some(i) = interaction_of(e) {
            per.entry((i, e.name())).or_default().insert(e.id.as_str());
        }
    }
    for ((i, name), idset) in &per {
        if *name == "task-status" {
            // One when the interaction opened, one when it stopped waiting.
            assert!(idset.len() <= 2, "{i}: task-status ids {idset:?}");
        } else {
            assert_eq!(idset.len(), 1, "{i}: several {name} ids: {idset:?}");
        }
    }

    // The task record lists exactly the pending interactions, oldest first, and
    // names the oldest.
    for t in store.tasks.values().map(|r| &r.value) {
        let listed: Vec<&str> = t
            .pending
            .iter()
            .map(|w| w.interaction_id.as_str())
            .collect();
        let mut waiting: Vec<&Interaction> = INTERACTIONS
            .iter()
            .filter(|id| store.has_interaction(id))
            .map(|id| store.interaction(id))
            .filter(|i| i.task_id == t.id && i.state == State::Pending)
            .collect();
        waiting.sort_by(|a, b| (a.opened_at, &a.id).cmp(&(b.opened_at, &b.id)));
        let waiting: Vec<&str> = waiting.iter().map(|i| i.id.as_str()).collect();
        // A pending interaction whose opening died after the task write lists it
        // before its own record exists; every recorded pending one is listed.
        for id in &waiting {
            assert!(
                listed.contains(id),
                "{id} waits but task {} does not list it",
                t.id
            );
        }
        for id in &listed {
            if store.has_interaction(id) {
                assert!(
                    waiting.contains(id),
                    "task {} lists {id}, which no longer waits",
                    t.id
                );
            }
        }
    }

    // Each blocked call gets at most one tool-call-finished id.
    let mut finished_per_call: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for e in by_id.values() {
        if let EventData::ToolCallFinished { call_id, .. } = &e.body {
            finished_per_call
                .entry(call_id.to_string())
                .or_default()
                .insert(e.id.as_str());
        }
    }
    for (call, idset) in &finished_per_call {
        assert_eq!(idset.len(), 1, "call {call} finished under {idset:?}");
    }

    let events_of = |id: &str, name: &str| -> Vec<&Event> {
        by_id
            .values()
            .filter(|e| e.subject == id && e.name() == name)
            .copied()
            .collect()
    };

    for id in INTERACTIONS {
        let resolved = events_of(id, "interaction-resolved");
        let closed = events_of(id, "interaction-closed");
        let released = events_of(id, "tool-call-released");
        let finished = events_of(id, "tool-call-finished");
        if !store.has_interaction(id) {
            assert!(
                resolved.is_empty() && released.is_empty() && finished.is_empty(),
                "{id} never recorded but answered"
            );
            continue;
        }
        let rec = store.interaction(id);
        assert!(
            resolved.is_empty() || closed.is_empty(),
            "{id} both resolved and closed"
        );
        // What was announced is what is recorded.
        match (&rec.resolution, resolved.first()) {
            (None, None) => {}
            (
                Some(r),
                Some(Event {
                    body:
                        EventData::InteractionResolved {
                            answer, by, key, ..
                        },
                    ..
                }),
            ) => {
                assert_eq!(answer, &r.answer, "{id}: announced answer");
                assert_eq!(by, &r.by);
                assert_eq!(key, &r.key);
            }
            (r, e) => panic!("{id}: resolution {r:?} but resolved event {e:?}"),
        }
        // A call is released only when approved, as held, under one id.
        let approved = matches!(
            rec.resolution.as_ref().map(|r| &r.answer),
            Some(Answer::Approval { approved: true, .. })
        );
        assert_eq!(released.len(), usize::from(approved), "{id}: released");
        if let (
            Some(Event {
                body:
                    EventData::ToolCallReleased {
                        arguments,
                        approved_by,
                        ..
                    },
                ..
            }),
            Spec::Approval {
                arguments: held, ..
            },
        ) = (released.first(), &rec.spec)
        {
            assert_eq!(arguments, held, "{id}: released other arguments");
            assert_eq!(
                Some(approved_by),
                rec.resolution.as_ref().map(|r| &r.by),
                "{id}: approver"
            );
        }
        // Once everything in flight is delivered, the finish announced is the one
        // recorded, and every blocked call that ended has it.
        let blocking = !is_product_question(rec);
        match rec.state {
            State::Pending => {
                assert!(
                    resolved.is_empty() && closed.is_empty() && finished.is_empty(),
                    "{id}: pending but announced settled"
                );
            }
            State::Resolved => {
                assert!(finished.is_empty(), "{id}: resolved but finished announced");
                assert!(!resolved.is_empty(), "{id}: resolution never announced");
            }
            State::Finished | State::Closed => {
                if blocking {
                    assert_eq!(finished.len(), 1, "{id}: blocked call never finished");
                    match &finished[0].body {
                        EventData::ToolCallFinished { result, .. } => {
                            assert_eq!(Some(result), rec.result.as_ref(), "{id}: result");
                        }
                        other => panic!("{other:?}"),
                    }
                } else {
                    assert!(
                        finished.is_empty(),
                        "{id}: product question finished a call"
                    );
                }
                if rec.state == State::Closed {
                    assert_eq!(closed.len(), 1, "{id}: closure never announced");
                }
            }
        }
        if let (Some(CallResult::Error { code, .. }), Some(Answer::Approval { approved, .. })) =
            (&rec.result, rec.resolution.as_ref().map(|r| &r.answer))
        {
            assert!(
                !approved || code != "tool.denied",
                "{id}: approved but denied"
            );
        }
    }

    // The lanes agree with the interactions: an answer taken to a lane resolved its
    // question with that answer; a listed question is pending; a message the lane
    // took was announced. (An ended session is gone: its lanes no longer matter, and
    // an answer taken just before the end is refused with NRY-0002 when redelivered.)
    let live = store.has_session(SESSION)
        && store.session(SESSION).status != holdpoint_domain::SessionStatus::Ended;
    if live {
        let session = store.session(SESSION);
        let announced: BTreeSet<String> = by_id
            .values()
            .filter_map(|e| match &e.body {
                EventData::LaneMessage { message_id, .. } => Some(message_id.to_string()),
                _ => None,
            })
            .collect();
        for l in store.lanes.values().map(|r| &r.value) {
            let name = l.lane.as_str();
            for d in &l.delivered {
                if let Some(a) = &d.answer {
                    let q = store.interaction(d.message_id.as_str());
                    assert_eq!(q.state, State::Resolved, "{}: taken but not resolved", q.id);
                    assert_eq!(
                        q.resolution.as_ref().map(|r| &r.answer),
                        a.answer
                            .as_ref()
                            .or(q.resolution.as_ref().map(|r| &r.answer)),
                        "{}: the lane carries another answer",
                        q.id
                    );
                }
                let is_turn = d.message_id.as_str().starts_with('t');
                if !is_turn {
                    assert!(
                        announced.contains(d.message_id.as_str()),
                        "lane {name} took {} without announcing it",
                        d.message_id
                    );
                }
            }
            for q in l.open_questions.iter().map(|q| &q.id) {
                if store.has_interaction(q.as_str()) {
                    let rec = store.interaction(q.as_str());
                    // A listing on another lane is left by an opening of the same id
                    // with other content (refused as a conflict after its session
                    // write): a runtime that reuses ids; not checked.
                    if rec.lane.as_str() == name {
                        assert_eq!(
                            rec.state,
                            State::Pending,
                            "lane {name} lists {q} which no longer waits"
                        );
                    }
                } else {
                    // Its opening listed it, died, and was refused when redelivered:
                    // only a session that no longer takes openings does that.
                    assert_ne!(
                        session.status,
                        holdpoint_domain::SessionStatus::Open,
                        "lane {name} lists {q}, which was never recorded"
                    );
                }
            }
        }
        for id in INTERACTIONS {
            if store.has_interaction(id) {
                let rec = store.interaction(id);
                if is_product_question(rec) && rec.state == State::Pending {
                    let listed = store.lane(SESSION, rec.lane.as_str()).lists(&rec.id);
                    assert!(listed, "{id} waits but its lane does not list it");
                }
            }
        }
    }
}

fn run_case(case: &Case) -> World {
    let mut w = World::new(case.mode, case.capacity);
    let open_env = session_open_cap(SESSION, case.mode, case.capacity);
    w.history.push(open_env.clone());
    w.deliver(open_env, false, Crash::None);
    for (i, pre) in case.preopen.iter().enumerate() {
        if *pre {
            let env = open_on(INTERACTIONS[i], SESSION, interaction_lane(i), request(i));
            w.history.push(env.clone());
            w.deliver(env, false, Crash::None);
        }
    }
    for op in &case.ops {
        w.apply(op);
    }
    w.drain();
    w
}

proptest! {
    #![proptest_config(Config {
        cases: 512,
        max_shrink_iters: 4096,
        ..Config::default()
    })]

    #[test]
    fn exactly_once_under_retries_races_and_crashes(case in case_strategy()) {
        let w = run_case(&case);
        check_world(&w);
    }
}

/// The model itself must be able to see a double resolution: a store that lets a
/// stale decision overwrite a resolved record trips the resolution check.
#[test]
#[should_panic(expected = "resolution")]
fn the_store_catches_a_changed_resolution() {
    let mut s = Fixture::new()
        .blocking(SESSION)
        .then(open(INTERACTIONS[0], SESSION, request(0)))
        .store();
    let first = answer(INTERACTIONS[0], "k0", approved(true));
    let second = answer(INTERACTIONS[0], "k1", approved(false));
    let l1 = s.load(&first);
    let l2 = s.load(&second);
    let d1 = s.decide_on(&l1, &first);
    let d2 = s.decide_on(&l2, &second);
    s.apply(&first, &l1, &d1).expect("first write wins");
    // Ignore the revision, as a broken worker would.
    let mut stale = l2.clone();
    stale.interaction_rev = s.interactions.values().map(|r| r.rev).max().unwrap_or(0);
    stale.task_rev = s.tasks.values().map(|r| r.rev).max().unwrap_or(0);
    let _ = s.apply(&second, &stale, &d2);
}

/// The same event id published with other content is caught.
#[test]
#[should_panic(expected = "other content")]
fn the_checks_catch_an_event_id_with_other_content() {
    let mut w = World::new(SessionMode::Blocking, 8);
    w.set_up(
        &Fixture::new()
            .then(session_open(SESSION, SessionMode::Blocking))
            .then(open(INTERACTIONS[0], SESSION, request(0))),
    );
    let mut forged = w.store.published.events[1].clone();
    forged.time += time::Duration::seconds(5);
    w.store.published.events.push(forged);
    check_world(&w);
}

/// A race between two answers with different keys: exactly one wins, the other is
/// told the interaction is settled, and one finish is announced.
#[test]
fn two_workers_answering_at_once_resolve_once() {
    for schedule in [
        vec![true, true, true, false, false, false],
        vec![false, false, false, true, true, true],
        vec![true, false, true, false, true, false],
    ] {
        let mut w = World::new(SessionMode::Blocking, 8);
        w.set_up(
            &Fixture::new()
                .then(session_open(SESSION, SessionMode::Blocking))
                .then(open(INTERACTIONS[1], SESSION, request(1))),
        );
        let a = answer(INTERACTIONS[1], "k0", example_answers());
        let b = answer(INTERACTIONS[1], "k1", answers(vec![oa(&[1]), oa(&[0])]));
        w.race(a, b, &schedule);
        check_world(&w);
        let finished: Vec<_> = w
            .store
            .published
            .events
            .iter()
            .filter(|e| e.name() == "tool-call-finished")
            .collect();
        assert_eq!(finished.len(), 1, "{schedule:?}");
    }
}

// ---------------------------------------------------------------- exhaustive pairs

/// A session with all four interactions open; `busy`: a turn runs on the main lane
/// (capacity 1, so one message can queue); `approved`: the approval was approved.
fn scenario(mode: SessionMode, busy: bool, approved_first: bool) -> World {
    let mut w = World::new(mode, 1);
    let mut setup = Fixture::new().then(session_open_cap(SESSION, mode, 1));
    for (i, id) in INTERACTIONS.iter().enumerate() {
        setup = setup.then(open_on(id, SESSION, interaction_lane(i), request(i)));
    }
    if busy {
        setup = setup.then(turn_start(SESSION, "main", "t0"));
    }
    if approved_first {
        setup = setup.then(answer(INTERACTIONS[0], "k0", approved(true)));
    }
    for env in setup.envelopes() {
        w.history.push(env.clone());
        w.deliver(env, false, Crash::None);
    }
    w
}

fn scenarios() -> Vec<World> {
    let mut out = Vec::new();
    for mode in [SessionMode::Blocking, SessionMode::Product] {
        for (busy, approved_first) in [(false, false), (true, false), (false, true)] {
            out.push(scenario(mode, busy, approved_first));
        }
    }
    out
}

/// Commands that touch the same records: answers with two keys, closes, a message
/// on the questions' lane, a tool result, turns, the session's close.
fn contenders() -> Vec<CommandEnvelope> {
    vec![
        answer("q-1", "k0", example_answers()),
        answer_via(
            AnswerRoute::Question,
            "q-1",
            "k1",
            answers(vec![oa(&[1]), oa(&[0, 1])]),
        ),
        close("q-1", CloseReason::Interrupted),
        message(SESSION, "main", "m0", "text 0"),
        answer("eff-1", "k0", approved(true)),
        answer("eff-1", "k1", approved_because(false, "no")),
        close("eff-1", CloseReason::Canceled),
        tool_result("eff-1", ok_output(json!("done"))),
        answer("conn-1", "k0", value(json!(true))),
        turn_start(SESSION, "main", "t1"),
        turn_finish(SESSION, "main", "t0"),
        session_close(SESSION),
    ]
}

/// How many of the two workers' steps an exhaustive schedule chooses.
const SCHEDULE_BITS: usize = 5;

/// Two workers take two commands (or the same one twice) on the same records, in
/// every interleaving of their steps (up to [`SCHEDULE_BITS`] choices, alternating
/// after).
#[test]
fn every_interleaving_of_two_commands_keeps_the_guarantees() {
    let cmds = contenders();
    for base in scenarios() {
        for a in &cmds {
            for b in &cmds {
                // Schedules that agree on every choice a run made are the same run.
                let mut runs: Vec<(u32, usize)> = Vec::new();
                for bits in 0u32..(1 << SCHEDULE_BITS) {
                    if runs
                        .iter()
                        .any(|(seen, used)| (bits ^ seen) & ((1 << used) - 1) == 0)
                    {
                        continue;
                    }
                    let schedule: Vec<bool> =
                        (0..SCHEDULE_BITS).map(|k| bits & (1 << k) != 0).collect();
                    let mut w = base.clone();
                    w.history.push(a.clone());
                    w.history.push(b.clone());
                    let used = w.race(a.clone(), b.clone(), &schedule);
                    if used < SCHEDULE_BITS {
                        runs.push((bits, used));
                    }
                    w.drain();
                    check_world(&w);
                }
            }
        }
    }
}

/// A worker dies at every point of one command; another command runs before the
/// redelivery; then a late duplicate of each.
#[test]
fn every_crash_point_then_any_command_keeps_the_guarantees() {
    let cmds = contenders();
    for base in scenarios() {
        for a in &cmds {
            for crash in [
                Crash::BeforeWrite,
                Crash::AfterSession,
                Crash::AfterInteraction,
                Crash::AfterPublish,
            ] {
                for b in &cmds {
                    let mut w = base.clone();
                    w.history.push(a.clone());
                    w.deliver(a.clone(), false, crash);
                    w.history.push(b.clone());
                    w.deliver(b.clone(), false, Crash::None);
                    w.drain();
                    check_world(&w);
                    w.apply(&Op::LateDuplicate(w.history.len() - 2));
                    w.apply(&Op::LateDuplicate(w.history.len() - 1));
                    w.drain();
                    check_world(&w);
                }
            }
        }
    }
}

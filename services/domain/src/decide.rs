//! The interaction state machine: [`decide`] is a pure function of the records a
//! command touches, the command, and the clock. It returns the records to write
//! (by compare-and-set, session first, interaction last), the effects to publish,
//! and the outcome to reply. The worker does the IO (STYLE "A pure core").
//!
//! Exactly-once rests on three facts the tests check: a command whose id is in the
//! last-written record's outbox is a replay (same outcome, same effects, no write);
//! an answer whose key resolved the interaction replays the recorded outcome; and
//! every event id is derived from the transition, so re-emitting is a no-op.

use serde_json::Value;
use time::OffsetDateTime;

use crate::command::{
    Accepted, AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope,
    DEFAULT_LANE_CAPACITY, OpenInteraction, Outcome,
};
use crate::error::ErrorCode;
use crate::event::{Event, EventData, OpenInteractionRef, TaskStatusData};
use crate::ids::{InteractionId, LaneId, MessageId, OrgId, PersonId, SessionId, digest};
use crate::model::{
    Admission, Answer, CallResult, CloseReason, Closure, DeliveredAnswer, Delivery, Interaction,
    Kind, LaneContent, LaneMessage, OutboxEntry, Resolution, Session, SessionMode, SessionStatus,
    Spec, State, TaskState,
};
use crate::rules::{canonical_json, question_output, read_answer, spec_from_request};

/// The records a command touches, as loaded (revisions are the worker's business).
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot<'a> {
    /// The interaction the command names, if it exists.
    pub interaction: Option<&'a Interaction>,
    /// The session the command (or its interaction) names, if it exists.
    pub session: Option<&'a Session>,
}

/// What to do for one command.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The new session record to write first (CAS on the loaded revision, or create).
    pub session: Option<Session>,
    /// The new interaction record to write last (CAS on the loaded revision, or create).
    pub interaction: Option<Interaction>,
    /// The effects to publish after the writes.
    pub effects: Effects,
    /// What to reply.
    pub outcome: Outcome,
    /// True when this repeats a recorded transition: nothing is written, and the
    /// effects are the recorded ones (publish them again only for a redelivery).
    pub replay: bool,
}

/// Everything a transition publishes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effects {
    /// Events for `hp.evt.<org>.<task>.<name>`.
    pub events: Vec<Event>,
    /// Audit records for `hp.audit.<org>`.
    pub audit: Vec<Event>,
    /// Lane messages for `hp.lane.<org>.<session>.<lane>`.
    pub lane_messages: Vec<LaneMessage>,
    /// Commands to publish next.
    pub follow_ups: Vec<CommandEnvelope>,
}

impl Effects {
    fn from_entry(e: &OutboxEntry) -> Self {
        Effects {
            events: e.events.clone(),
            audit: e.audit.clone(),
            lane_messages: e.lane_messages.clone(),
            follow_ups: e.follow_ups.clone(),
        }
    }

    fn entry(&self, outcome: &Outcome) -> OutboxEntry {
        OutboxEntry {
            command_id: outcome.command_id.clone(),
            outcome: outcome.clone(),
            events: self.events.clone(),
            audit: self.audit.clone(),
            lane_messages: self.lane_messages.clone(),
            follow_ups: self.follow_ups.clone(),
        }
    }
}

impl Decision {
    fn reply(outcome: Outcome) -> Self {
        Decision {
            session: None,
            interaction: None,
            effects: Effects::default(),
            outcome,
            replay: false,
        }
    }

    fn reject(cmd: &str, code: ErrorCode, msg: impl Into<String>) -> Self {
        Self::reply(Outcome::err(cmd, code, msg))
    }

    fn replay(entry: &OutboxEntry) -> Self {
        Decision {
            session: None,
            interaction: None,
            effects: Effects::from_entry(entry),
            outcome: entry.outcome.clone(),
            replay: true,
        }
    }

    /// Seals the decision: the outbox entry goes on the record written last.
    fn commit(
        mut session: Option<Session>,
        mut interaction: Option<Interaction>,
        effects: Effects,
        outcome: Outcome,
    ) -> Self {
        let entry = effects.entry(&outcome);
        if let Some(i) = interaction.as_mut() {
            i.push_outbox(entry);
        } else if let Some(s) = session.as_mut() {
            s.push_outbox(entry);
        }
        Decision {
            session,
            interaction,
            effects,
            outcome,
            replay: false,
        }
    }
}

/// Decides `env` against `snap` at `now`. `command_id` is
/// [`CommandEnvelope::command_id`] of `env`.
pub fn decide(
    snap: Snapshot<'_>,
    env: &CommandEnvelope,
    command_id: &str,
    now: OffsetDateTime,
) -> Decision {
    // A command already applied (its id is in the outbox of the record it wrote last)
    // is a replay, whatever the records say now.
    if let Some(entry) = snap
        .interaction
        .and_then(|i| i.outbox.iter().find(|e| e.command_id == command_id))
        .or_else(|| {
            snap.session
                .and_then(|s| s.outbox.iter().find(|e| e.command_id == command_id))
        })
    {
        return Decision::replay(entry);
    }
    let org = &env.org;
    let cmd = command_id;
    match &env.command {
        Command::SessionOpen {
            session,
            mode,
            lane_capacity,
        } => session_open(org, cmd, snap.session, session, *mode, *lane_capacity, now),
        Command::SessionClose { session } => {
            session_close(org, cmd, snap.session, session, false, now)
        }
        Command::SessionEnd { session } => {
            session_close(org, cmd, snap.session, session, true, now)
        }
        Command::Open(open) => open_interaction(org, cmd, snap, open, now),
        Command::Close {
            interaction_id,
            reason,
            by_message,
        } => close(
            org,
            cmd,
            snap,
            interaction_id,
            *reason,
            by_message.as_ref(),
            now,
        ),
        Command::Answer(a) => answer(cmd, snap, a, now),
        Command::ToolResult {
            interaction_id,
            result,
        } => tool_result(cmd, snap, interaction_id, result, now),
        Command::Message {
            session,
            lane,
            message_id,
            by,
            text,
        } => message(
            org,
            cmd,
            snap.session,
            session,
            lane,
            message_id,
            by,
            text,
            now,
        ),
        Command::TurnStart {
            session,
            lane,
            turn_id,
        } => turn_start(org, cmd, snap.session, session, lane, turn_id, now),
        Command::TurnFinish {
            session,
            lane,
            turn_id,
        } => turn_finish(org, cmd, snap.session, session, lane, turn_id, now),
    }
}

fn session_missing(cmd: &str, id: &SessionId) -> Decision {
    Decision::reject(
        cmd,
        ErrorCode::SessionNotFound,
        format!("No session with id {id} exists on this host."),
    )
}

fn live_session(s: Option<&Session>) -> Option<&Session> {
    s.filter(|s| s.status != SessionStatus::Ended)
}

fn session_open(
    org: &OrgId,
    cmd: &str,
    existing: Option<&Session>,
    id: &SessionId,
    mode: SessionMode,
    cap: Option<u32>,
    now: OffsetDateTime,
) -> Decision {
    if let Some(s) = existing {
        if s.status == SessionStatus::Ended {
            return Decision::reject(
                cmd,
                ErrorCode::CommandConflict,
                format!("session {id} has ended"),
            );
        }
        if s.mode != mode {
            return Decision::reject(
                cmd,
                ErrorCode::CommandConflict,
                format!("session {id} is already open in another mode"),
            );
        }
        return Decision::reply(Outcome::ok(cmd, Accepted::Opened));
    }
    let session = Session {
        org: org.clone(),
        id: id.clone(),
        mode,
        status: SessionStatus::Open,
        lane_capacity: cap.unwrap_or(DEFAULT_LANE_CAPACITY),
        lanes: Default::default(),
        outbox: Default::default(),
    };
    let effects = Effects {
        events: vec![Event::new(
            org,
            None,
            id.as_str(),
            "open",
            now,
            EventData::SessionOpened {
                session: id.clone(),
                mode,
            },
        )],
        ..Effects::default()
    };
    Decision::commit(
        Some(session),
        None,
        effects,
        Outcome::ok(cmd, Accepted::Opened),
    )
}

fn session_close(
    org: &OrgId,
    cmd: &str,
    existing: Option<&Session>,
    id: &SessionId,
    end: bool,
    now: OffsetDateTime,
) -> Decision {
    let Some(s) = live_session(existing) else {
        return session_missing(cmd, id);
    };
    let target = if end {
        SessionStatus::Ended
    } else {
        SessionStatus::Closed
    };
    if s.status == target {
        return Decision::reply(Outcome::ok(cmd, Accepted::Closed));
    }
    let mut next = s.clone();
    next.status = target;
    let effects = Effects {
        events: vec![Event::new(
            org,
            None,
            id.as_str(),
            if end { "end" } else { "close" },
            now,
            EventData::SessionClosed {
                session: id.clone(),
                ended: end,
            },
        )],
        ..Effects::default()
    };
    Decision::commit(
        Some(next),
        None,
        effects,
        Outcome::ok(cmd, Accepted::Closed),
    )
}

/// True when answering releases or finishes a blocked call (everything except a
/// question on a product session).
fn blocks(i: &Interaction) -> bool {
    !(i.mode == SessionMode::Product && i.kind() == Kind::Question)
}

fn open_interaction(
    org: &OrgId,
    cmd: &str,
    snap: Snapshot<'_>,
    open: &OpenInteraction,
    now: OffsetDateTime,
) -> Decision {
    let spec = match spec_from_request(&open.request) {
        Ok(s) => s,
        Err(r) => {
            return Decision::reply(Outcome {
                command_id: cmd.into(),
                result: Err(r),
            });
        }
    };
    let open_digest = match serde_json::to_value(open) {
        Ok(v) => digest(&[&canonical_json(&v)]),
        Err(e) => return Decision::reject(cmd, ErrorCode::Internal, format!("encode: {e}")),
    };
    if let Some(existing) = snap.interaction {
        if existing.open_digest == open_digest {
            return Decision::reply(Outcome::ok(cmd, Accepted::Opened));
        }
        return Decision::reject(
            cmd,
            ErrorCode::CommandConflict,
            format!(
                "interaction {} is already open with other content",
                open.interaction_id
            ),
        );
    }
    let Some(session) = live_session(snap.session) else {
        return session_missing(cmd, &open.session);
    };
    if session.status == SessionStatus::Closed {
        return Decision::reject(
            cmd,
            ErrorCode::CommandConflict,
            format!("session {} is closed", session.id),
        );
    }
    let kind = spec.kind();
    let mut interaction = Interaction {
        id: open.interaction_id.clone(),
        org: org.clone(),
        session: open.session.clone(),
        mode: session.mode,
        lane: open.lane.clone(),
        task_id: open.task_id.clone(),
        context_id: open.context_id.clone(),
        call_id: open.call_id.clone(),
        prompt: spec.prompt(),
        spec,
        state: State::Pending,
        opened_at: now,
        open_digest,
        resolution: None,
        closure: None,
        result: None,
        outbox: Default::default(),
    };
    let mut session_write = None;
    let mut superseded = false;
    if !blocks(&interaction) {
        let lane = session.lane(&open.lane);
        superseded = lane.is_some_and(|l| l.superseded(&open.interaction_id));
        let listed = lane.is_some_and(|l| l.open_questions.contains(&open.interaction_id));
        if !superseded && !listed {
            let mut s = session.clone();
            s.lane_mut(&open.lane)
                .open_questions
                .push(open.interaction_id.clone());
            session_write = Some(s);
        }
    }
    let task = Some(&interaction.task_id);
    let subject = interaction.id.as_str().to_owned();
    let opened = match &interaction.spec {
        Spec::Approval {
            arguments_digest, ..
        } => EventData::ApprovalRequested {
            interaction_id: interaction.id.clone(),
            call_id: interaction.call_id.clone(),
            session: interaction.session.clone(),
            lane: interaction.lane.clone(),
            prompt: interaction.prompt.clone(),
            detail: interaction.spec.detail(),
            arguments_digest: arguments_digest.clone(),
        },
        Spec::Question { questions } => EventData::QuestionAsked {
            question_id: interaction.id.clone(),
            call_id: interaction.call_id.clone(),
            session: interaction.session.clone(),
            mode: interaction.mode,
            lane: interaction.lane.clone(),
            prompt: interaction.prompt.clone(),
            questions: serde_json::to_value(questions).unwrap_or(Value::Null),
        },
        Spec::Connection { .. } => EventData::ConnectionRequested {
            interaction_id: interaction.id.clone(),
            call_id: interaction.call_id.clone(),
            session: interaction.session.clone(),
            lane: interaction.lane.clone(),
            prompt: interaction.prompt.clone(),
            detail: interaction.spec.detail(),
        },
    };
    let mut events = vec![
        Event::new(org, task, &subject, "open", now, opened),
        Event::new(
            org,
            task,
            &subject,
            "open",
            now,
            EventData::TaskStatus(TaskStatusData {
                task_id: interaction.task_id.clone(),
                context_id: interaction.context_id.clone(),
                state: kind.task_state(),
                interaction: Some(OpenInteractionRef {
                    interaction_id: interaction.id.clone(),
                    kind,
                    prompt: interaction.prompt.clone(),
                    detail: interaction.spec.detail(),
                }),
            }),
        ),
    ];
    if superseded {
        interaction.state = State::Closed;
        interaction.closure = Some(Closure {
            reason: CloseReason::Superseded,
            at: now,
            by_message: None,
        });
        events.push(Event::new(
            org,
            task,
            &subject,
            "close",
            now,
            EventData::InteractionClosed {
                interaction_id: interaction.id.clone(),
                reason: CloseReason::Superseded,
            },
        ));
    }
    let effects = Effects {
        events,
        ..Effects::default()
    };
    Decision::commit(
        session_write,
        Some(interaction),
        effects,
        Outcome::ok(cmd, Accepted::Opened),
    )
}

#[allow(clippy::too_many_arguments)]
fn close(
    org: &OrgId,
    cmd: &str,
    snap: Snapshot<'_>,
    id: &InteractionId,
    reason: CloseReason,
    by_message: Option<&MessageId>,
    now: OffsetDateTime,
) -> Decision {
    let Some(i) = snap.interaction else {
        return Decision::reject(cmd, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    match i.state {
        State::Closed => return Decision::reply(Outcome::ok(cmd, Accepted::Closed)),
        State::Resolved | State::Finished => {
            return Decision::reject(
                cmd,
                ErrorCode::AlreadySettled,
                format!("interaction {id} was already answered"),
            );
        }
        State::Pending => {}
    }
    // A product answer is taken once its message is on the lane (the session is
    // written before the interaction): a close arriving between those two writes is
    // too late, or the lane would run a message that was never announced.
    let taken = !blocks(i)
        && MessageId::parse(i.id.as_str()).is_ok_and(|m| {
            snap.session
                .and_then(|s| s.lane(&i.lane))
                .and_then(|l| l.delivery(&m))
                .is_some_and(|d| d.answer.is_some())
        });
    if taken {
        return Decision::reject(
            cmd,
            ErrorCode::AlreadySettled,
            format!("interaction {id} was already answered"),
        );
    }
    let mut next = i.clone();
    next.state = State::Closed;
    next.closure = Some(Closure {
        reason,
        at: now,
        by_message: by_message.cloned(),
    });
    let task = Some(&i.task_id);
    let mut events = vec![Event::new(
        org,
        task,
        i.id.as_str(),
        "close",
        now,
        EventData::InteractionClosed {
            interaction_id: i.id.clone(),
            reason,
        },
    )];
    if blocks(i) {
        let result = CallResult::Error {
            code: "interaction.closed".into(),
            message: format!("The interaction was closed ({}).", close_word(reason)),
        };
        next.result = Some(result.clone());
        events.push(finished_event(i, result, now));
    }
    let mut session_write = None;
    if !blocks(i)
        && let Some(s) = snap.session
        && s.lane(&i.lane)
            .is_some_and(|l| l.open_questions.contains(&i.id))
    {
        let mut s = s.clone();
        s.lane_mut(&i.lane).open_questions.retain(|q| q != &i.id);
        session_write = Some(s);
    }
    let effects = Effects {
        events,
        ..Effects::default()
    };
    Decision::commit(
        session_write,
        Some(next),
        effects,
        Outcome::ok(cmd, Accepted::Closed),
    )
}

fn close_word(r: CloseReason) -> &'static str {
    match r {
        CloseReason::Interrupted => "interrupted",
        CloseReason::Superseded => "superseded by a message",
        CloseReason::Expired => "expired",
        CloseReason::Canceled => "canceled",
    }
}

fn finished_event(i: &Interaction, result: CallResult, now: OffsetDateTime) -> Event {
    Event::new(
        &i.org,
        Some(&i.task_id),
        i.id.as_str(),
        "finish",
        now,
        EventData::ToolCallFinished {
            call_id: i.call_id.clone(),
            interaction_id: i.id.clone(),
            kind: i.kind(),
            result,
        },
    )
}

fn working_event(i: &Interaction, now: OffsetDateTime) -> Event {
    Event::new(
        &i.org,
        Some(&i.task_id),
        i.id.as_str(),
        "resolve",
        now,
        EventData::TaskStatus(TaskStatusData {
            task_id: i.task_id.clone(),
            context_id: i.context_id.clone(),
            state: TaskState::Working,
            interaction: None,
        }),
    )
}

fn answer(cmd: &str, snap: Snapshot<'_>, a: &AnswerCommand, now: OffsetDateTime) -> Decision {
    let not_found = || {
        let what = if a.route == AnswerRoute::Question {
            "question"
        } else {
            "interaction"
        };
        Decision::reject(
            cmd,
            ErrorCode::NotFound,
            format!("no {what} {}", a.interaction_id),
        )
    };
    // Existence (scoped by organisation through the key) comes before every other
    // check, so nothing about another tenant's interaction can leak.
    let Some(i) = snap.interaction else {
        return not_found();
    };
    if a.route == AnswerRoute::Question && i.kind() != Kind::Question {
        return not_found();
    }
    if a.task_id.as_ref().is_some_and(|t| t != &i.task_id) {
        return not_found();
    }
    if a.context_id.as_ref().is_some_and(|c| c != &i.context_id) {
        return Decision::reject(
            cmd,
            ErrorCode::InvalidRequest,
            "contextId does not match the task's context",
        );
    }
    if let Some(r) = &i.resolution
        && ((r.key == a.key && r.by == a.by) || !blocks(i))
    {
        // The same key, or a second press on a product question: the recorded
        // outcome, once more, with nothing new.
        return Decision::reply(Outcome {
            command_id: cmd.into(),
            result: r.outcome.result.clone(),
        });
    }
    match i.state {
        State::Pending => {}
        State::Closed => {
            return Decision::reject(
                cmd,
                ErrorCode::AlreadySettled,
                format!(
                    "interaction {} was closed and no longer waits for an answer",
                    i.id
                ),
            );
        }
        State::Resolved | State::Finished => {
            return Decision::reject(
                cmd,
                ErrorCode::AlreadySettled,
                format!("interaction {} was already answered", i.id),
            );
        }
    }
    let reading = match read_answer(&i.spec, &a.input) {
        Ok(r) => r,
        Err(r) => {
            return Decision::reply(Outcome {
                command_id: cmd.into(),
                result: Err(r),
            });
        }
    };
    if let (
        Spec::Approval {
            arguments_digest, ..
        },
        AnswerInput::Approved {
            arguments_digest: Some(seen),
            ..
        },
    ) = (&i.spec, &a.input)
        && seen != arguments_digest
    {
        return Decision::reject(
            cmd,
            ErrorCode::ArgumentsChanged,
            "the call's arguments are not the ones you were shown",
        );
    }
    let Some(session) = live_session(snap.session) else {
        return session_missing(cmd, &i.session);
    };
    if blocks(i) {
        resolve_blocking(cmd, i, a, reading, now)
    } else {
        resolve_product(cmd, i, session, a, reading, now)
    }
}

fn resolve_blocking(
    cmd: &str,
    i: &Interaction,
    a: &AnswerCommand,
    answer: Answer,
    now: OffsetDateTime,
) -> Decision {
    let outcome = Outcome::ok(cmd, Accepted::Resolved);
    let mut next = i.clone();
    next.resolution = Some(Resolution {
        key: a.key.clone(),
        command_id: cmd.into(),
        by: a.by.clone(),
        at: now,
        answer: answer.clone(),
        outcome: outcome.clone(),
    });
    let task = Some(&i.task_id);
    let mut effects = Effects {
        events: vec![Event::new(
            &i.org,
            task,
            i.id.as_str(),
            "resolve",
            now,
            EventData::InteractionResolved {
                interaction_id: i.id.clone(),
                kind: i.kind(),
                answer: answer.clone(),
                by: a.by.clone(),
                key: a.key.clone(),
            },
        )],
        ..Effects::default()
    };
    let result = match (&i.spec, &answer) {
        (
            Spec::Approval {
                server,
                tool,
                arguments,
                arguments_digest,
                ..
            },
            Answer::Approval { approved, reason },
        ) => {
            effects.audit.push(Event::new(
                &i.org,
                task,
                i.id.as_str(),
                "decide",
                now,
                EventData::ApprovalDecided {
                    effect_id: i.id.clone(),
                    server: server.clone(),
                    tool: tool.clone(),
                    approved: *approved,
                    approved_by: a.by.clone(),
                    reason: reason.clone(),
                },
            ));
            if *approved {
                effects.events.push(Event::new(
                    &i.org,
                    task,
                    i.id.as_str(),
                    "resolve",
                    now,
                    EventData::ToolCallReleased {
                        effect_id: i.id.clone(),
                        call_id: i.call_id.clone(),
                        server: server.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        arguments_digest: arguments_digest.clone(),
                        approved_by: a.by.clone(),
                    },
                ));
                None
            } else {
                Some(CallResult::Error {
                    code: "tool.denied".into(),
                    message: reason
                        .clone()
                        .unwrap_or_else(|| "The person denied this call.".into()),
                })
            }
        }
        (Spec::Connection { app, .. }, Answer::Connection { connected }) => Some(CallResult::Ok {
            output: Value::String(if *connected {
                format!("Connected: {app}")
            } else {
                format!("Not connected: {app}")
            }),
        }),
        (Spec::Question { questions }, other) => Some(CallResult::Ok {
            output: question_output(questions, other),
        }),
        _ => {
            return Decision::reject(
                cmd,
                ErrorCode::Internal,
                "answer does not match the interaction kind",
            );
        }
    };
    match result {
        Some(r) => {
            next.state = State::Finished;
            next.result = Some(r.clone());
            effects.events.push(finished_event(i, r, now));
        }
        None => next.state = State::Resolved,
    }
    effects.events.push(working_event(i, now));
    Decision::commit(None, Some(next), effects, outcome)
}

fn resolve_product(
    cmd: &str,
    i: &Interaction,
    session: &Session,
    a: &AnswerCommand,
    answer: Answer,
    now: OffsetDateTime,
) -> Decision {
    let Ok(message_id) = MessageId::parse(i.id.as_str()) else {
        return Decision::reject(cmd, ErrorCode::Internal, "question id is not a message id");
    };
    let lane = session.lane(&i.lane).cloned().unwrap_or_default();
    let (delivery, session_write) = match lane.delivery(&message_id) {
        // A worker already took the message to the lane: finish what it started with
        // the answer it recorded there.
        Some(d) => (d.clone(), None),
        None => {
            // The lane lists the question until something takes it: a message on the
            // lane (which closes it; its follow-up close may not have run yet), or a
            // host close whose session write landed before its interaction write.
            // Either way the question no longer waits, and the answer must not become
            // a message on the lane.
            if !lane.open_questions.contains(&i.id) {
                let why = if lane.superseded(&i.id) {
                    "was closed by a message on its lane"
                } else {
                    "is being closed"
                };
                return Decision::reject(
                    cmd,
                    ErrorCode::AlreadySettled,
                    format!("question {} {why} and no longer waits for an answer", i.id),
                );
            }
            if session.status != SessionStatus::Open {
                return Decision::reject(
                    cmd,
                    ErrorCode::AnswerNotDelivered,
                    format!(
                        "session {} is closed: the answer was not delivered and question {} is pending again",
                        session.id, i.id
                    ),
                );
            }
            let busy = lane.running.is_some();
            if busy && lane.queue.len() >= session.lane_capacity as usize {
                return Decision::reject(
                    cmd,
                    ErrorCode::AnswerNotDelivered,
                    format!(
                        "lane {} is full: the answer was not delivered and question {} is pending again",
                        i.lane, i.id
                    ),
                );
            }
            let mut s = session.clone();
            let l = s.lane_mut(&i.lane);
            let admission = if busy {
                l.queue.push_back(message_id.clone());
                Admission::Queued
            } else {
                l.running = Some(message_id.clone());
                Admission::Admitted
            };
            l.open_questions.retain(|q| q != &i.id);
            let d = Delivery {
                message_id: message_id.clone(),
                admission,
                closes: Vec::new(),
                answer: Some(DeliveredAnswer {
                    answer,
                    by: a.by.clone(),
                    key: a.key.clone(),
                }),
            };
            l.remember(d.clone());
            (d, Some(s))
        }
    };
    let Some(delivered) = delivery.answer.clone() else {
        return Decision::reject(
            cmd,
            ErrorCode::AlreadySettled,
            format!("a message with id {message_id} is already on the lane"),
        );
    };
    let outcome = match delivery.admission {
        Admission::Admitted => Outcome::ok(cmd, Accepted::Resolved),
        Admission::Queued => Outcome::err(
            cmd,
            ErrorCode::LaneBusy,
            format!(
                "lane {} is busy: the answer is queued as the person's next message and its turn starts when the lane frees",
                i.lane
            ),
        ),
    };
    let mut next = i.clone();
    next.state = State::Resolved;
    next.resolution = Some(Resolution {
        key: delivered.key.clone(),
        command_id: cmd.into(),
        by: delivered.by.clone(),
        at: now,
        answer: delivered.answer.clone(),
        outcome: outcome.clone(),
    });
    let content = LaneContent::Answer {
        question_id: i.id.clone(),
        answer: delivered.answer.clone(),
    };
    let task = Some(&i.task_id);
    let mut effects = Effects {
        events: vec![
            Event::new(
                &i.org,
                task,
                i.id.as_str(),
                "resolve",
                now,
                EventData::InteractionResolved {
                    interaction_id: i.id.clone(),
                    kind: i.kind(),
                    answer: delivered.answer.clone(),
                    by: delivered.by.clone(),
                    key: delivered.key.clone(),
                },
            ),
            lane_event(
                &i.org,
                &i.session,
                &i.lane,
                &message_id,
                delivery.admission,
                &delivered.by,
                &content,
                now,
            ),
        ],
        lane_messages: vec![LaneMessage {
            org: i.org.clone(),
            session: i.session.clone(),
            lane: i.lane.clone(),
            message_id: message_id.clone(),
            by: delivered.by.clone(),
            content,
            at: now,
        }],
        ..Effects::default()
    };
    if delivery.admission == Admission::Admitted {
        effects
            .events
            .push(turn_event(&i.org, &i.session, &i.lane, &message_id, now));
        effects.events.push(working_event(i, now));
    }
    Decision::commit(session_write, Some(next), effects, outcome)
}

#[allow(clippy::too_many_arguments)]
fn lane_event(
    org: &OrgId,
    session: &SessionId,
    lane: &LaneId,
    message_id: &MessageId,
    admission: Admission,
    by: &PersonId,
    content: &LaneContent,
    now: OffsetDateTime,
) -> Event {
    Event::new(
        org,
        None,
        session.as_str(),
        &format!("{lane}\u{0}{message_id}"),
        now,
        EventData::LaneMessage {
            session: session.clone(),
            lane: lane.clone(),
            message_id: message_id.clone(),
            admission,
            by: by.clone(),
            content: content.clone(),
        },
    )
}

fn turn_event(
    org: &OrgId,
    session: &SessionId,
    lane: &LaneId,
    turn: &MessageId,
    now: OffsetDateTime,
) -> Event {
    Event::new(
        org,
        None,
        session.as_str(),
        &format!("{lane}\u{0}{turn}\u{0}start"),
        now,
        EventData::TurnStarted {
            session: session.clone(),
            lane: lane.clone(),
            turn_id: turn.clone(),
        },
    )
}

fn tool_result(
    cmd: &str,
    snap: Snapshot<'_>,
    id: &InteractionId,
    result: &CallResult,
    now: OffsetDateTime,
) -> Decision {
    let Some(i) = snap.interaction else {
        return Decision::reject(cmd, ErrorCode::NotFound, format!("no interaction {id}"));
    };
    let released = matches!(
        (&i.spec, i.resolution.as_ref().map(|r| &r.answer)),
        (
            Spec::Approval { .. },
            Some(Answer::Approval { approved: true, .. })
        )
    );
    match i.state {
        State::Resolved if released => {}
        State::Finished if released && i.result.as_ref() == Some(result) => {
            return Decision::reply(Outcome::ok(cmd, Accepted::Finished));
        }
        State::Finished if released => {
            return Decision::reject(
                cmd,
                ErrorCode::CommandConflict,
                format!("call for {id} already finished with another result"),
            );
        }
        _ => {
            return Decision::reject(
                cmd,
                ErrorCode::UnsupportedOperation,
                format!("interaction {id} released no call that waits for a result"),
            );
        }
    }
    let mut next = i.clone();
    next.state = State::Finished;
    next.result = Some(result.clone());
    let effects = Effects {
        events: vec![finished_event(i, result.clone(), now)],
        ..Effects::default()
    };
    Decision::commit(
        None,
        Some(next),
        effects,
        Outcome::ok(cmd, Accepted::Finished),
    )
}

#[allow(clippy::too_many_arguments)]
fn message(
    org: &OrgId,
    cmd: &str,
    existing: Option<&Session>,
    id: &SessionId,
    lane_id: &LaneId,
    message_id: &MessageId,
    by: &PersonId,
    text: &str,
    now: OffsetDateTime,
) -> Decision {
    let Some(session) = live_session(existing) else {
        return session_missing(cmd, id);
    };
    if text.trim().is_empty()
        || text.chars().count() > crate::rules::MAX_TEXT_CHARS
        || text.contains('\0')
    {
        return Decision::reject(
            cmd,
            ErrorCode::InvalidRequest,
            "text must hold 1 to 8000 characters and no NUL",
        );
    }
    // A message id is an idempotency key of the session (the command id and the lane
    // message's Nats-Msg-Id are scoped by session, not lane): the same id on another
    // lane is the same message, not a second one.
    let taken = session.lanes.iter().find_map(|(name, l)| {
        l.delivery(message_id)
            .map(|d| (LaneId::parse(name.as_str()).ok(), d.admission))
    });
    if let Some((on, admission)) = taken {
        return Decision::reply(admission_outcome(
            cmd,
            on.as_ref().unwrap_or(lane_id),
            admission,
        ));
    }
    let lane = session.lane(lane_id).cloned().unwrap_or_default();
    if session.status != SessionStatus::Open {
        return Decision::reject(
            cmd,
            ErrorCode::LaneRefused,
            format!("session {id} is closed"),
        );
    }
    let busy = lane.running.is_some();
    if busy && lane.queue.len() >= session.lane_capacity as usize {
        return Decision::reject(
            cmd,
            ErrorCode::LaneRefused,
            format!("lane {lane_id} is full"),
        );
    }
    let mut s = session.clone();
    let l = s.lane_mut(lane_id);
    let admission = if busy {
        l.queue.push_back(message_id.clone());
        Admission::Queued
    } else {
        l.running = Some(message_id.clone());
        Admission::Admitted
    };
    let closes: Vec<InteractionId> = if session.mode == SessionMode::Product {
        std::mem::take(&mut l.open_questions)
    } else {
        Vec::new()
    };
    l.remember(Delivery {
        message_id: message_id.clone(),
        admission,
        closes: closes.clone(),
        answer: None,
    });
    let content = LaneContent::Text {
        text: text.to_owned(),
    };
    let mut effects = Effects {
        events: vec![lane_event(
            org, id, lane_id, message_id, admission, by, &content, now,
        )],
        lane_messages: vec![LaneMessage {
            org: org.clone(),
            session: id.clone(),
            lane: lane_id.clone(),
            message_id: message_id.clone(),
            by: by.clone(),
            content,
            at: now,
        }],
        follow_ups: closes
            .into_iter()
            .map(|q| CommandEnvelope {
                org: org.clone(),
                command: Command::Close {
                    interaction_id: q,
                    reason: CloseReason::Superseded,
                    by_message: Some(message_id.clone()),
                },
            })
            .collect(),
        ..Effects::default()
    };
    if admission == Admission::Admitted {
        effects
            .events
            .push(turn_event(org, id, lane_id, message_id, now));
    }
    let outcome = admission_outcome(cmd, lane_id, admission);
    Decision::commit(Some(s), None, effects, outcome)
}

fn admission_outcome(cmd: &str, lane: &LaneId, a: Admission) -> Outcome {
    match a {
        Admission::Admitted => Outcome::ok(cmd, Accepted::Admitted),
        Admission::Queued => Outcome::err(
            cmd,
            ErrorCode::LaneBusy,
            format!(
                "lane {lane} is busy: the message is queued and its turn starts when the lane frees"
            ),
        ),
    }
}

fn turn_start(
    org: &OrgId,
    cmd: &str,
    existing: Option<&Session>,
    id: &SessionId,
    lane_id: &LaneId,
    turn: &MessageId,
    now: OffsetDateTime,
) -> Decision {
    let Some(session) = live_session(existing) else {
        return session_missing(cmd, id);
    };
    let lane = session.lane(lane_id).cloned().unwrap_or_default();
    match &lane.running {
        Some(r) if r == turn => return Decision::reply(Outcome::ok(cmd, Accepted::Unchanged)),
        Some(r) => {
            return Decision::reject(
                cmd,
                ErrorCode::CommandConflict,
                format!("turn {r} is running on lane {lane_id}"),
            );
        }
        None => {}
    }
    // A turn that already ran (its start redelivered after it finished and left the
    // outbox) does not run again.
    if lane.delivery(turn).is_some() {
        return Decision::reply(Outcome::ok(cmd, Accepted::Unchanged));
    }
    let mut s = session.clone();
    let l = s.lane_mut(lane_id);
    l.running = Some(turn.clone());
    l.remember(Delivery {
        message_id: turn.clone(),
        admission: Admission::Admitted,
        closes: Vec::new(),
        answer: None,
    });
    let effects = Effects {
        events: vec![turn_event(org, id, lane_id, turn, now)],
        ..Effects::default()
    };
    Decision::commit(Some(s), None, effects, Outcome::ok(cmd, Accepted::Admitted))
}

fn turn_finish(
    org: &OrgId,
    cmd: &str,
    existing: Option<&Session>,
    id: &SessionId,
    lane_id: &LaneId,
    turn: &MessageId,
    now: OffsetDateTime,
) -> Decision {
    let Some(session) = live_session(existing) else {
        return session_missing(cmd, id);
    };
    let lane = session.lane(lane_id).cloned().unwrap_or_default();
    if lane.running.as_ref() != Some(turn) {
        return Decision::reply(Outcome::ok(cmd, Accepted::Unchanged));
    }
    let mut s = session.clone();
    let l = s.lane_mut(lane_id);
    l.running = l.queue.pop_front();
    let mut effects = Effects::default();
    if let Some(next) = l.running.clone() {
        effects
            .events
            .push(turn_event(org, id, lane_id, &next, now));
    }
    Decision::commit(
        Some(s),
        None,
        effects,
        Outcome::ok(cmd, Accepted::Unchanged),
    )
}

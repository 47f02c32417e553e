//! The events the transitions build. Every id derives from the organisation, the
//! subject (interaction or session), the transition's name and the event's type
//! (see [`Event::new`]), so deciding the same transition again builds the same ids.

use serde_json::Value;
use time::OffsetDateTime;

use crate::event::{AuditOutcome, Decider, Event, EventData};
use crate::ids::{IdempotencyKey, LaneId, MessageId, OrgId, PersonId, RuleId, SessionId};
use crate::task::Task;
use crate::{Admission, Answer, Resolver};
use crate::{CallResult, GivenApproval, Interaction, LaneContent, LaneMessage, Spec};

/// The event announcing a new interaction (`approval-requested`,
/// `question-asked` or `connection-requested`).
pub(super) fn opened(i: &Interaction, now: OffsetDateTime) -> Event {
    let data = match &i.spec {
        Spec::Approval {
            arguments_digest, ..
        } => EventData::ApprovalRequested {
            interaction_id: i.id.clone(),
            call_id: i.call_id.clone(),
            session: i.session.clone(),
            lane: i.lane.clone(),
            prompt: i.prompt.clone(),
            detail: i.detail(),
            arguments_digest: arguments_digest.clone(),
        },
        Spec::Question { questions } => EventData::QuestionAsked {
            question_id: i.id.clone(),
            call_id: i.call_id.clone(),
            session: i.session.clone(),
            mode: i.mode,
            lane: i.lane.clone(),
            prompt: i.prompt.clone(),
            questions: serde_json::to_value(questions).unwrap_or(Value::Null),
        },
        Spec::Connection { .. } => EventData::ConnectionRequested {
            interaction_id: i.id.clone(),
            call_id: i.call_id.clone(),
            session: i.session.clone(),
            lane: i.lane.clone(),
            prompt: i.prompt.clone(),
            detail: i.detail(),
        },
    };
    on_interaction(i, "open", now, data)
}

/// An event about interaction `i`, named after `transition`.
pub(super) fn on_interaction(
    i: &Interaction,
    transition: &str,
    now: OffsetDateTime,
    data: EventData,
) -> Event {
    Event::new(
        &i.org,
        Some(&i.task_id),
        i.id.as_str(),
        transition,
        now,
        data,
    )
}

/// The task's status after `transition` of interaction `i`: the oldest pending
/// interaction of `task`, or working when none is pending.
pub(super) fn task_status(
    i: &Interaction,
    task: &Task,
    transition: &str,
    now: OffsetDateTime,
) -> Event {
    on_interaction(i, transition, now, EventData::TaskStatus(task.status()))
}

/// `interaction-resolved` for `i`: `answer` settled it, given by `by` under `key`
/// (for a rule's decision, the rule id), decided by `resolved_by` (and `rule`, when
/// a remembered rule decided).
pub(super) fn resolved(
    i: &Interaction,
    answer: &Answer,
    by: &PersonId,
    key: &IdempotencyKey,
    resolved_by: Resolver,
    rule: Option<&RuleId>,
    now: OffsetDateTime,
) -> Event {
    on_interaction(
        i,
        "resolve",
        now,
        EventData::InteractionResolved {
            interaction_id: i.id.clone(),
            kind: i.kind(),
            answer: answer.clone(),
            by: by.clone(),
            key: key.clone(),
            resolved_by,
            rule: rule.cloned(),
        },
    )
}

/// Who or what decided an approval, as its `approval-decided` audit event says.
pub(super) struct Verdict<'a> {
    /// Released (`true`) or not.
    pub approved: bool,
    /// `allowed`, `denied` or `expired`.
    pub outcome: AuditOutcome,
    /// A person, a remembered rule, or expiry.
    pub decided_by: Decider,
    /// The person, or the rule's author line; `None` for an expiry.
    pub approved_by: Option<&'a PersonId>,
    /// The remembered rule that decided, when one did.
    pub rule: Option<&'a RuleId>,
    /// Why, in words.
    pub reason: Option<String>,
    /// The arguments the person released instead of the held ones, when edited.
    pub edited: Option<&'a serde_json::Value>,
    /// For a hold that needs several approvals, whose had counted.
    pub approvals: Vec<PersonId>,
}

impl Verdict<'_> {
    /// The deadline passed before enough people decided: not approved, `expired`, by
    /// expiry; `approvals` are the partial ones (README "Two-person approvals").
    pub fn expired(reason: Option<String>, approvals: Vec<PersonId>) -> Self {
        Verdict {
            approved: false,
            outcome: AuditOutcome::Expired,
            decided_by: Decider::Expiry,
            approved_by: None,
            rule: None,
            reason,
            edited: None,
            approvals,
        }
    }
}

/// The people whose approvals of `i` have counted, in order.
pub(super) fn approvers(i: &Interaction) -> Vec<PersonId> {
    i.given_approvals.iter().map(|g| g.by.clone()).collect()
}

/// `approval-counted` (events) and `approval-recorded` (audit) for the approval
/// `g`, the `given`-th of approval `i` (both named after the person, who is counted
/// once); `None` when `i` is not an approval.
pub(super) fn approval_counted(
    i: &Interaction,
    g: &GivenApproval,
    given: u8,
    now: OffsetDateTime,
) -> Option<(Event, Event)> {
    let Spec::Approval {
        server,
        tool,
        arguments_digest,
        approvals: required,
        ..
    } = &i.spec
    else {
        return None;
    };
    let transition = format!("approval\u{0}{}", g.by);
    let event = on_interaction(
        i,
        &transition,
        now,
        EventData::ApprovalCounted {
            interaction_id: i.id.clone(),
            by: g.by.clone(),
            given,
            required: *required,
        },
    );
    let audit = on_interaction(
        i,
        &transition,
        now,
        EventData::ApprovalRecorded {
            effect_id: i.id.clone(),
            server: server.clone(),
            tool: tool.clone(),
            arguments_digest: arguments_digest.clone(),
            approved_by: g.by.clone(),
            reason: g.reason.clone(),
            given,
            required: *required,
        },
    );
    Some((event, audit))
}

/// `approval-decided` (audit) for approval `i` (its server, tool and arguments
/// digest, never its arguments); `None` when `i` is not an approval.
pub(super) fn approval_decided(
    i: &Interaction,
    v: Verdict<'_>,
    now: OffsetDateTime,
) -> Option<Event> {
    let Spec::Approval {
        server,
        tool,
        arguments_digest,
        ..
    } = &i.spec
    else {
        return None;
    };
    Some(on_interaction(
        i,
        "decide",
        now,
        EventData::ApprovalDecided {
            effect_id: i.id.clone(),
            server: server.clone(),
            tool: tool.clone(),
            arguments_digest: Some(arguments_digest.clone()),
            approved: v.approved,
            outcome: v.outcome,
            decided_by: v.decided_by,
            approved_by: v.approved_by.cloned(),
            rule: v.rule.cloned(),
            reason: v.reason,
            edited_arguments: v.edited.cloned(),
            edited_arguments_digest: v.edited.map(crate::digest::arguments_digest),
            approvals: v.approvals,
        },
    ))
}

/// `tool-call-finished` for the call `i` blocks.
pub(super) fn finished(i: &Interaction, result: CallResult, now: OffsetDateTime) -> Event {
    on_interaction(
        i,
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

/// What a lane message event says.
pub(super) struct LaneNote<'a> {
    pub org: &'a OrgId,
    pub session: &'a SessionId,
    pub lane: &'a LaneId,
    pub message_id: &'a MessageId,
    pub admission: Admission,
    pub by: &'a PersonId,
    pub content: &'a LaneContent,
}

/// `lane-message`: the lane took a person's message.
pub(super) fn lane_message(n: &LaneNote<'_>, now: OffsetDateTime) -> Event {
    Event::new(
        n.org,
        None,
        n.session.as_str(),
        &format!("{}\u{0}{}", n.lane, n.message_id),
        now,
        EventData::LaneMessage {
            session: n.session.clone(),
            lane: n.lane.clone(),
            message_id: n.message_id.clone(),
            admission: n.admission,
            by: n.by.clone(),
            content: n.content.clone(),
        },
    )
}

/// The events of a message the lane took: `lane-message`, then `turn-started`
/// when the lane admitted it (its turn starts at once; a queued one's starts when
/// the lane frees).
pub(super) fn delivered(n: &LaneNote<'_>, now: OffsetDateTime) -> Vec<Event> {
    let mut events = vec![lane_message(n, now)];
    if n.admission == Admission::Admitted {
        events.push(turn_started(n.org, n.session, n.lane, n.message_id, now));
    }
    events
}

impl LaneNote<'_> {
    /// The message the runtime reads on the lane (the effect published next to
    /// the events), taken at `at`.
    pub fn message(&self, at: OffsetDateTime) -> LaneMessage {
        LaneMessage {
            org: self.org.clone(),
            session: self.session.clone(),
            lane: self.lane.clone(),
            message_id: self.message_id.clone(),
            by: self.by.clone(),
            content: self.content.clone(),
            at,
        }
    }
}

/// `turn-started`: the turn of `turn` started on the lane.
pub(super) fn turn_started(
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

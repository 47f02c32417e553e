//! Names, subjects and settings of everything Holdpoint keeps in NATS (on
//! nats-server [`crate::MIN_SERVER`] or newer; there is no other layout).
//!
//! | what | name | subjects / keys |
//! |---|---|---|
//! | state stream (a KV bucket) | `HP_STATE` (stream `KV_HP_STATE`) | records `$KV.HP_STATE.<kind>.<org>.…` (below); effects `hp.fx.…` (below) |
//! | commands stream | `HP_COMMANDS` | published `hp.cmd.<org>.<key>.<verb>`, stored `hp.cmd.<p>.<org>.<key>.<verb>`; sources the state stream's `hp.fx.cmd.>` |
//! | partition consumers | `HP_WORKERS_<p>` | filter `hp.cmd.<p>.>`, priority group `workers`, pinned client |
//! | events stream | `HP_EVENTS` | sources `hp.fx.evt.<org>.<task>.<eventId>.<name>`, stored and republished `hp.evt.<org>.<task>.<name>` |
//! | lanes stream | `HP_LANES` | sources `hp.fx.lane.<org>.<session>.<lane>.<msgId>`, stored and republished `hp.lane.<org>.<session>.<lane>` |
//! | audit stream | `HP_AUDIT` | sources `hp.fx.audit.<org>.<eventId>`, stored and republished `hp.audit.<org>` |
//! | outcomes | `HP_OUTCOMES` | `<Nats-Msg-Id>` |
//! | worker presence | `HP_PRESENCE` | `<worker id>` (expires) |
//! | webhook endpoints | `HP_WEBHOOKS` | `<org>.<webhookId>` |
//! | webhook deliveries done | `HP_WEBHOOK_DELIVERED` | `<org>.<webhookId>.<event digest>` (expires after 7 days) |
//! | webhook queue stream | `HP_WEBHOOK_QUEUE` | `hp.whk.<org>.<webhookId>` (work queue; one durable `HP_WHK_<webhookId>` per endpoint) |
//! | webhook attempts stream | `HP_WEBHOOK_ATTEMPTS` | `hp.wha.<org>.<webhookId>` (last 200 per endpoint, 7 days) |
//! | notifier's events consumer | `HP_NOTIFIER` | durable on `HP_EVENTS`, filter `hp.evt.>` |
//!
//! **The state stream** holds every record as the last message of its subject
//! (`$KV.HP_STATE.<key>`, one message per subject, read like any KV key) and every
//! effect of a decision on a subject of its own, so that a decision and its effects
//! are written in one atomic batch (see [`crate::batch`] and [`crate::commit`]):
//!
//! | record | key |
//! |---|---|
//! | interaction | `int.<org>.<interactionId>` |
//! | task | `task.<org>.<taskId>` |
//! | session header | `ses.<org>.<sessionId>` |
//! | lane | `ses.<org>.<sessionId>.<lane>` |
//! | remembered rule | `rule.<org>.<ruleId>` |
//!
//! An effect's subject ends with its own id, so no two effects share a subject and
//! the one-message-per-subject limit never removes one before the public streams
//! have sourced it; each public stream's source transform drops that token. Effects
//! carry a per-message TTL (`Nats-TTL`, [`Topology::effect_ttl`]): the state stream
//! keeps them only for the public streams to source.
//!
//! `<key>` is the task for interaction commands and the session for session and lane
//! commands ([`CommandEnvelope::partition_key`]); the stream maps `(org, key)` to a
//! partition with the server's `partition()` subject transform, so producers never
//! need to know the number of partitions.
//!
//! **Sourced and republished.** Each public stream sources its effects from the
//! state stream and republishes exactly what it stored (stream RePublish): a
//! message JetStream drops as a duplicate (by its `Nats-Msg-Id`, which sourcing
//! keeps) is never seen by a live reader.
//!
//! **Deadlines** are JetStream message schedules in the state stream (stream
//! setting `allow_msg_schedules`): a message on
//! `hp.fx.sched.<org>.<interactionId>.<warn|expire>` with `Nats-Schedule: @at <RFC
//! 3339>` and `Nats-Schedule-Target: hp.fx.cmd.<org>.<task>.expire.<scheduleId>`,
//! written in the batch of the decision that set the deadline. The server keeps
//! one schedule per subject (a newer one replaces it), stores its body on the
//! target at that time, and `HP_COMMANDS` sources it as a command like any other.
//! No consumer reads `hp.fx.sched.>`. A store of format 1 kept its schedules in
//! `HP_COMMANDS` on `hp.sched.>`: `holdpoint migrate` moves them.

use std::time::Duration;

use holdpoint_domain::{
    CommandEnvelope, Event, InteractionId, LaneId, LaneMessage, OrgId, SessionId, TaskId, WebhookId,
};

/// Names and settings of everything Holdpoint keeps in NATS.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Prefix of stream and bucket names (`HP` gives `HP_COMMANDS`).
    pub name_prefix: String,
    /// Prefix of subjects (`hp` gives `hp.cmd.…`).
    pub subject_prefix: String,
    /// Replicas of every stream and bucket (1, or 3 in a cluster).
    pub replicas: usize,
    /// JetStream duplicate window of the commands and effects streams.
    pub duplicate_window: Duration,
    /// The partition consumers' `ack_wait`: how long a command delivered to a worker
    /// that died waits before it is delivered again. Workers send progress acks
    /// while they work, so this can be short.
    pub ack_wait: Duration,
    /// The partition consumers' `max_deliver` (-1: unlimited). Transient errors never
    /// count against a command; only commands that cannot be decoded are terminated.
    pub max_deliver: i64,
    /// How many command partitions (1 to 1024). Fixed once the commands stream exists:
    /// changing it needs the stream drained (see the README).
    pub partitions: u32,
    /// How long a pinned worker keeps a partition without pulling before the server
    /// pins another (priority group timeout).
    pub priority_timeout: Duration,
    /// How long a worker's presence entry lives unless refreshed.
    pub presence_ttl: Duration,
    /// How long stored outcomes (for duplicate requests) are kept.
    pub outcome_ttl: Duration,
    /// How long events are kept in the events stream.
    pub event_max_age: Duration,
    /// How long a webhook delivery may be held by a notifier before it is delivered
    /// again (the per-endpoint consumers' `ack_wait`; the notifier's request timeout
    /// must be shorter).
    pub webhook_ack_wait: Duration,
    /// How long decision-audit records are kept in the audit stream (zero: forever).
    pub audit_max_age: Duration,
    /// How long the state stream keeps an effect (its `Nats-TTL`) for the public
    /// streams to source. A public stream that cannot source for longer (no leader,
    /// full) loses what expired meanwhile: keep it well above any outage you plan
    /// for. At least 1 s (the TTL is written in whole seconds).
    pub effect_ttl: Duration,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            name_prefix: "HP".into(),
            subject_prefix: "hp".into(),
            replicas: 1,
            duplicate_window: Duration::from_secs(120),
            ack_wait: Duration::from_secs(3),
            max_deliver: -1,
            partitions: 8,
            priority_timeout: Duration::from_secs(1),
            presence_ttl: Duration::from_secs(3),
            outcome_ttl: Duration::from_secs(24 * 3600),
            event_max_age: Duration::from_secs(7 * 24 * 3600),
            webhook_ack_wait: Duration::from_secs(30),
            audit_max_age: Duration::from_secs(365 * 24 * 3600),
            effect_ttl: Duration::from_secs(24 * 3600),
        }
    }
}

impl Topology {
    fn name(&self, what: &str) -> String {
        format!("{}_{what}", self.name_prefix)
    }
    /// The commands stream (`HP_COMMANDS`).
    pub fn commands_stream(&self) -> String {
        self.name("COMMANDS")
    }
    /// The events stream (`HP_EVENTS`).
    pub fn events_stream(&self) -> String {
        self.name("EVENTS")
    }
    /// The lanes stream (`HP_LANES`).
    pub fn lanes_stream(&self) -> String {
        self.name("LANES")
    }
    /// The audit stream (`HP_AUDIT`).
    pub fn audit_stream(&self) -> String {
        self.name("AUDIT")
    }
    /// The state bucket (`HP_STATE`, stream `KV_HP_STATE`): every record, and
    /// every effect until the public streams sourced it.
    pub fn state_bucket(&self) -> String {
        self.name("STATE")
    }
    /// The state bucket's stream (`KV_HP_STATE`), which atomic batches write.
    pub fn state_stream(&self) -> String {
        format!("KV_{}", self.state_bucket())
    }
    /// The record buckets of store format 1 (`HP_INTERACTIONS`, `HP_TASKS`,
    /// `HP_SESSIONS`, `HP_RULES`) and its relay checkpoints (`HP_CHECKPOINTS`), in
    /// that order: read by `holdpoint migrate` only.
    pub fn format1_buckets(&self) -> [String; 5] {
        ["INTERACTIONS", "TASKS", "SESSIONS", "RULES", "CHECKPOINTS"].map(|b| self.name(b))
    }

    /// The outcomes bucket (`HP_OUTCOMES`).
    pub fn outcomes_bucket(&self) -> String {
        self.name("OUTCOMES")
    }
    /// The worker presence bucket (`HP_PRESENCE`).
    pub fn presence_bucket(&self) -> String {
        self.name("PRESENCE")
    }
    /// The webhook endpoints bucket (`HP_WEBHOOKS`).
    pub fn webhooks_bucket(&self) -> String {
        self.name("WEBHOOKS")
    }
    /// The bucket of webhook deliveries already made (`HP_WEBHOOK_DELIVERED`).
    pub fn webhook_delivered_bucket(&self) -> String {
        self.name("WEBHOOK_DELIVERED")
    }
    /// The per-endpoint delivery queue stream (`HP_WEBHOOK_QUEUE`).
    pub fn webhook_queue_stream(&self) -> String {
        self.name("WEBHOOK_QUEUE")
    }
    /// The delivery attempts stream (`HP_WEBHOOK_ATTEMPTS`).
    pub fn webhook_attempts_stream(&self) -> String {
        self.name("WEBHOOK_ATTEMPTS")
    }
    /// The notifier's durable consumer of the events stream (`HP_NOTIFIER`).
    pub fn notifier_consumer(&self) -> String {
        self.name("NOTIFIER")
    }
    /// Endpoint `id`'s durable consumer of the queue (`HP_WHK_<id token>`).
    pub fn webhook_consumer(&self, id: &WebhookId) -> String {
        format!("{}_{}", self.name("WHK"), id.token())
    }
    /// `hp.whk.<org>.<webhookId>`: endpoint `id`'s queue subject.
    pub fn webhook_queue_subject(&self, org: &OrgId, id: &WebhookId) -> String {
        format!("{}.whk.{}.{}", self.subject_prefix, org.token(), id.token())
    }
    /// `hp.wha.<org>.<webhookId>`: endpoint `id`'s attempts subject.
    pub fn webhook_attempts_subject(&self, org: &OrgId, id: &WebhookId) -> String {
        format!("{}.wha.{}.{}", self.subject_prefix, org.token(), id.token())
    }
    /// KV key `<org>.<webhookId>`.
    pub fn webhook_key(org: &OrgId, id: &WebhookId) -> String {
        format!("{}.{}", org.token(), id.token())
    }

    /// The prefix of the partition consumers' names (`HP_WORKERS`).
    pub fn worker_consumer_prefix(&self) -> String {
        self.name("WORKERS")
    }
    /// Partition `p`'s consumer (`HP_WORKERS_<p>`).
    pub fn partition_consumer(&self, p: u32) -> String {
        format!("{}_{p}", self.worker_consumer_prefix())
    }
    /// The priority group every partition consumer pins one worker in.
    pub fn priority_group(&self) -> &'static str {
        "workers"
    }

    /// The state stream's effect subjects: `hp.fx.>`.
    pub fn effects_subjects(&self) -> String {
        format!("{}.fx.>", self.subject_prefix)
    }
    /// `hp.sched.>`: where store format 1 kept deadline schedules (in
    /// `HP_COMMANDS`); `holdpoint migrate` moves them to the state stream.
    pub fn format1_schedules_subjects(&self) -> String {
        format!("{}.sched.>", self.subject_prefix)
    }
    /// `hp.fx.sched.<org>.<interactionId>.<warn|expire>`: the state-stream subject
    /// holding one deadline schedule of an interaction (the scheduled `expire`
    /// command's stage).
    pub fn schedule_subject(&self, env: &CommandEnvelope) -> String {
        let id = env
            .interaction_id()
            .map_or(std::borrow::Cow::Borrowed("_"), |i| i.token());
        let stage = match &env.command {
            holdpoint_domain::Command::Expire {
                stage: holdpoint_domain::DeadlineStage::Warn,
                ..
            } => "warn",
            _ => "expire",
        };
        format!(
            "{}.fx.sched.{}.{id}.{stage}",
            self.subject_prefix,
            env.org.token(),
        )
    }

    /// `hp.cmd.<org>.<key>.<verb>`, as producers publish it.
    pub fn command_subject(&self, env: &CommandEnvelope) -> String {
        format!(
            "{}.cmd.{}.{}.{}",
            self.subject_prefix,
            env.org.token(),
            env.partition_key(),
            env.verb()
        )
    }
    /// `hp.fx.cmd.<org>.<key>.<verb>.<id>`: where a decision's follow-up command (or
    /// a fired schedule, `id` its schedule's id) is stored in the state stream;
    /// `HP_COMMANDS` sources it as `hp.cmd.<org>.<key>.<verb>`.
    pub fn command_state_subject(&self, env: &CommandEnvelope, id: &str) -> String {
        format!(
            "{}.fx.cmd.{}.{}.{}.{}",
            self.subject_prefix,
            env.org.token(),
            env.partition_key(),
            env.verb(),
            holdpoint_domain::subject_token(id)
        )
    }
    /// The commands stream's subjects and, partitioned, its transform to
    /// `hp.cmd.<p>.<org>.<key>.<verb>`.
    pub fn command_transform(&self) -> (String, String) {
        let sp = &self.subject_prefix;
        (
            format!("{sp}.cmd.*.*.*"),
            format!(
                "{sp}.cmd.{{{{partition({},1,2)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}.{{{{wildcard(3)}}}}",
                self.partitions
            ),
        )
    }
    /// Partition `p`'s filter: `hp.cmd.<p>.>`.
    pub fn partition_filter(&self, p: u32) -> String {
        format!("{}.cmd.{p}.>", self.subject_prefix)
    }
    /// The partition a stored command subject (`hp.cmd.<p>.…`) belongs to.
    pub fn partition_of(&self, stored_subject: &str) -> Option<u32> {
        stored_subject
            .strip_prefix(&self.subject_prefix)?
            .strip_prefix(".cmd.")?
            .split('.')
            .next()?
            .parse()
            .ok()
    }
    /// The published form of a stored command subject: `hp.cmd.<p>.<rest>` gives
    /// `hp.cmd.<rest>`; a subject without a partition token is returned as it is.
    pub fn published_command_subject(&self, stored_subject: &str) -> String {
        let head = format!("{}.cmd.", self.subject_prefix);
        match stored_subject
            .strip_prefix(&head)
            .and_then(|rest| rest.split_once('.'))
        {
            Some((_, rest)) => format!("{head}{rest}"),
            None => stored_subject.to_owned(),
        }
    }

    /// `hp.evt.<org>.<task>.<name>` (`_` = no task), where readers read it.
    pub fn event_subject(&self, e: &Event) -> String {
        format!(
            "{}.evt.{}.{}.{}",
            self.subject_prefix,
            e.orgid.token(),
            task_token(e),
            e.name()
        )
    }
    /// `hp.fx.evt.<org>.<task>.<eventId>.<name>`: where a decision stores `e` in the
    /// state stream.
    pub fn event_state_subject(&self, e: &Event) -> String {
        format!(
            "{}.fx.evt.{}.{}.{}.{}",
            self.subject_prefix,
            e.orgid.token(),
            task_token(e),
            holdpoint_domain::subject_token(&e.id),
            e.name()
        )
    }
    /// `hp.fx.evt.<org>.<task>.*.<name>`: a task's events of one name in the state
    /// stream.
    pub fn event_state_filter(&self, org: &OrgId, task: &TaskId, name: &str) -> String {
        format!(
            "{}.fx.evt.{}.{}.*.{name}",
            self.subject_prefix,
            org.token(),
            task.token()
        )
    }
    /// `hp.audit.<org>`, where readers read it.
    pub fn audit_subject(&self, org: &OrgId) -> String {
        format!("{}.audit.{}", self.subject_prefix, org.token())
    }
    /// `hp.fx.audit.<org>.<eventId>`: where an audit record is stored in the state
    /// stream.
    pub fn audit_state_subject(&self, e: &Event) -> String {
        format!(
            "{}.fx.audit.{}.{}",
            self.subject_prefix,
            e.orgid.token(),
            holdpoint_domain::subject_token(&e.id)
        )
    }
    /// `hp.lane.<org>.<session>.<lane>`, where runtimes read it.
    pub fn lane_subject(&self, m: &LaneMessage) -> String {
        format!(
            "{}.lane.{}.{}.{}",
            self.subject_prefix,
            m.org.token(),
            m.session.token(),
            m.lane.token()
        )
    }
    /// `hp.fx.lane.<org>.<session>.<lane>.<msgId>`: where a lane message is stored
    /// in the state stream.
    pub fn lane_state_subject(&self, m: &LaneMessage) -> String {
        format!(
            "{}.fx.lane.{}.{}.{}.{}",
            self.subject_prefix,
            m.org.token(),
            m.session.token(),
            m.lane.token(),
            holdpoint_domain::subject_token(&m.msg_id())
        )
    }
    /// The durable consumer on the state stream through which `public` (a public
    /// stream or `HP_COMMANDS`) sources its effects: `HP_SRC_EVENTS` for
    /// `HP_EVENTS` (ADR-58 durable sourcing; [`crate::setup`] makes it).
    pub fn source_consumer(&self, public: &str) -> String {
        let what = public
            .strip_prefix(&format!("{}_", self.name_prefix))
            .unwrap_or(public);
        self.name(&format!("SRC_{what}"))
    }
    /// The core subject that [`Topology::source_consumer`] delivers to and only
    /// nats-server itself listens on: `_HP_SRC.HP_EVENTS`. It lies outside the
    /// `hp.>` tree, so no permission written for Holdpoint's public subjects lets
    /// a client read every organisation's effects on it (ops/nats/holdpoint.conf
    /// grants it to nobody).
    pub fn source_deliver_subject(&self, public: &str) -> String {
        format!("_{}_SRC.{public}", self.name_prefix)
    }
    /// The source transforms of the public streams, from the state stream's
    /// effect subjects to the public ones (each drops the effect's id token):
    /// `(events, lanes, audit, commands)`.
    pub fn effect_transforms(&self) -> [(String, String); 4] {
        let sp = &self.subject_prefix;
        let w = |n: u8| format!("{{{{wildcard({n})}}}}");
        [
            (
                format!("{sp}.fx.evt.*.*.*.*"),
                format!("{sp}.evt.{}.{}.{}", w(1), w(2), w(4)),
            ),
            (
                format!("{sp}.fx.lane.*.*.*.*"),
                format!("{sp}.lane.{}.{}.{}", w(1), w(2), w(3)),
            ),
            (format!("{sp}.fx.audit.*.*"), format!("{sp}.audit.{}", w(1))),
            (
                format!("{sp}.fx.cmd.*.*.*.*"),
                format!("{sp}.cmd.{}.{}.{}", w(1), w(2), w(3)),
            ),
        ]
    }
    /// The filter of an organisation's events, `hp.evt.<org>.<task|*>.<name|*>`: the
    /// tenant boundary of every event reader (SSE, A2A streams, clients). The
    /// organisation comes from a verified identity; every token is a validated id
    /// passed through [`holdpoint_domain::subject_token`] or a known event name.
    pub fn event_filter(&self, org: &OrgId, task: Option<&TaskId>, name: Option<&str>) -> String {
        let task = task.map_or_else(|| "*".to_owned(), |t| t.token().into_owned());
        format!(
            "{}.evt.{}.{task}.{}",
            self.subject_prefix,
            org.token(),
            name.unwrap_or("*")
        )
    }
    /// Filter for all of an organisation's events: `hp.evt.<org>.>`.
    pub fn org_events_filter(&self, org: &OrgId) -> String {
        format!("{}.evt.{}.>", self.subject_prefix, org.token())
    }

    /// State key `int.<org>.<interactionId>`.
    pub fn interaction_key(org: &OrgId, id: &InteractionId) -> String {
        format!("int.{}.{}", org.token(), id.token())
    }
    /// State key `task.<org>.<taskId>`.
    pub fn task_key(org: &OrgId, id: &TaskId) -> String {
        format!("task.{}.{}", org.token(), id.token())
    }
    /// State key `ses.<org>.<sessionId>`.
    pub fn session_key(org: &OrgId, id: &SessionId) -> String {
        format!("ses.{}.{}", org.token(), id.token())
    }
    /// State key `ses.<org>.<sessionId>.<lane>`.
    pub fn lane_key(org: &OrgId, session: &SessionId, lane: &LaneId) -> String {
        format!("ses.{}.{}.{}", org.token(), session.token(), lane.token())
    }
}

fn task_token(e: &Event) -> String {
    e.taskid
        .as_ref()
        .map_or_else(|| "_".to_owned(), |t| t.token().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_scoped_and_encoded() {
        let topo = Topology::default();
        let org = holdpoint_domain::OrgId::parse("acme").expect("org");
        assert_eq!(topo.event_filter(&org, None, None), "hp.evt.acme.*.*");
        let task = holdpoint_domain::TaskId::parse("t1.x").expect("task");
        let f = topo.event_filter(&org, Some(&task), Some("task-status"));
        assert!(f.starts_with("hp.evt.acme._"), "{f}");
        assert!(f.ends_with(".task-status"));
        assert_eq!(f.split('.').count(), 5);
    }

    #[test]
    fn partitioned_subjects_round_trip() {
        let t = Topology::default();
        let (src, dest) = t.command_transform();
        assert_eq!(src, "hp.cmd.*.*.*");
        assert_eq!(
            dest,
            "hp.cmd.{{partition(8,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}"
        );
        assert_eq!(t.partition_of("hp.cmd.5.acme.t1.answer"), Some(5));
        assert_eq!(t.partition_of("hp.cmd.acme.t1.answer"), None);
        assert_eq!(
            t.published_command_subject("hp.cmd.5.acme.t1.answer"),
            "hp.cmd.acme.t1.answer"
        );
        assert_eq!(t.partition_filter(3), "hp.cmd.3.>");
    }
}

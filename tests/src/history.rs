//! The history of a partition run ([`crate::partition`]) and the checker that
//! reads it afterwards.
//!
//! The load records every opening, every answer with each of its HTTP attempts
//! (sent, answered, status, code), every tool result it reported, every fault
//! window (when it began, when it healed, when the first 2xx came after), and every
//! event each reader received, with when. After the run it adds what is stored: the
//! events of `HP_EVENTS` (stream sequence and CloudEvent) and each interaction's REST
//! view (`GET /v1/interactions/{id}`). Nothing here reads Holdpoint's internal
//! records: the checker judges by the public surfaces alone.
//!
//! [`check`] verifies:
//!
//! - **lost**: every 2xx answer is the interaction's resolution (its key is the one
//!   `interaction-resolved` carries);
//! - **duplicated**: at most one `interaction-resolved`, `tool-call-released` and
//!   `tool-call-finished` per interaction, and no CloudEvents id stored at two stream
//!   sequences;
//! - **missing effects**: a resolved interaction's blocked call finished once (a
//!   question at once, a denial at once, an approved call once its result was
//!   reported);
//! - **pending after a 2xx**: no interaction answered with a 2xx is still pending;
//! - **unanswered**: every answer ends with a 2xx, or as a race's loser with
//!   `409 NRY-0009` (not with `503`s until the client gave up after 150 s);
//! - **misattributed**: the resolution names the person who sent the resolving key,
//!   and that key was sent for that interaction;
//! - **deadlines**: an interaction left unanswered with a deadline is decided by the
//!   deadline, never before `expiresIn` seconds after its opening was sent; how late
//!   it came is a figure;
//! - **readers**: the durable consumer got every stored event; the core subscriber,
//!   after the sequence rule of README ("What a reader of the events gets": drop a
//!   `Nats-Sequence` already received), got none twice (it may miss what was published while it was disconnected: core NATS); each
//!   SSE stream (`GET /v1/events`, resumed with `Last-Event-ID`) got every event of its
//!   organisation once; the webhook receiver got every event (a second delivery
//!   under the same `webhook-id` is counted, as README allows it).
//!
//! It prints the figures per fault kind: answers, 2xx, lost, duplicated, longest
//! unavailability (the longest stretch without any 2xx that overlaps the fault),
//! longest effect delay after the heal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use holdpoint_domain::{CloseReason, Event, EventData, Resolver};
use serde_json::Value;

use crate::load::{AttemptLog, TargetKind};
use crate::readers::Seen;

/// An interaction the load opened.
#[derive(Debug, Clone)]
pub struct Opened {
    /// Organisation.
    pub org: String,
    /// Interaction id.
    pub id: String,
    /// Question or approval.
    pub kind: TargetKind,
    /// When the opening was sent (its first attempt).
    pub sent: Instant,
    /// When the worker's acceptance came back.
    pub done: Instant,
    /// The deadline asked for, in seconds from the opening (left unanswered).
    pub expires_in: Option<u64>,
}

/// One answer (one `Idempotency-Key`) and every HTTP attempt of it.
#[derive(Debug, Clone)]
pub struct Answered {
    /// Index into [`History::opened`].
    pub target: usize,
    /// The person (`X-Holdpoint-Person`) who sent it.
    pub person: String,
    /// Its `Idempotency-Key`.
    pub key: String,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptLog>,
}

impl Answered {
    /// The first 2xx attempt.
    pub fn ok(&self) -> Option<&AttemptLog> {
        self.attempts
            .iter()
            .find(|a| (200..300).contains(&a.status))
    }

    /// When it was first sent.
    pub fn sent(&self) -> Option<Instant> {
        self.attempts.first().map(|a| a.sent)
    }
}

/// A fault as it happened.
#[derive(Debug, Clone)]
pub struct Window {
    /// Its kind's name.
    pub kind: String,
    /// Which hosts, which leader, which skew.
    pub detail: String,
    /// When it was applied.
    pub start: Instant,
    /// When it was healed.
    pub healed: Instant,
    /// The first 2xx completed after the heal.
    pub recovered: Option<Instant>,
}

impl Window {
    /// The end of the window answers are attributed to: the first 2xx after the
    /// heal, else the heal.
    pub fn end(&self) -> Instant {
        self.recovered.unwrap_or(self.healed).max(self.healed)
    }
}

/// Which reader saw an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reader {
    /// A core NATS subscriber on `hp.evt.>`.
    Core,
    /// A durable consumer on `HP_EVENTS`.
    Durable,
    /// `GET /v1/events` per organisation, resumed with `Last-Event-ID`.
    Sse,
    /// The webhook receiver (one endpoint per organisation).
    Webhook,
}

impl fmt::Display for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reader::Core => "core subscriber",
            Reader::Durable => "durable consumer",
            Reader::Sse => "SSE",
            Reader::Webhook => "webhook receiver",
        })
    }
}

/// Everything a run recorded.
#[derive(Debug, Default)]
pub struct History {
    /// The openings.
    pub opened: Vec<Opened>,
    /// The answers.
    pub answered: Vec<Answered>,
    /// Tool results reported for approved calls: (target, accepted).
    pub reported: Vec<(usize, bool)>,
    /// The faults.
    pub windows: Vec<Window>,
    /// What each reader received (for SSE and webhooks `sequence` is the
    /// `HP_EVENTS` sequence when the surface gives it, else 0), with the reader's
    /// organisation (`""` for the readers of every organisation).
    pub received: Vec<(Reader, String, Seen)>,
    /// What `HP_EVENTS` holds from `first_sequence` on: (sequence, event).
    pub stored: Vec<(u64, Event)>,
    /// The first `HP_EVENTS` sequence of the run.
    pub first_sequence: u64,
    /// Each target's final REST view (`None` if it could not be read).
    pub views: Vec<Option<Value>>,
    /// Readers that could not start or keep up (e.g. the durable consumer's
    /// position at the end), for the report.
    pub notes: Vec<String>,
    /// Work left undone when the run settled (commands never decided): violations.
    pub stuck: Vec<String>,
}

/// The figures of one fault kind.
#[derive(Debug, Clone, Default)]
pub struct KindFigures {
    /// Faults of this kind.
    pub faults: u32,
    /// Answers first sent during one.
    pub answers: u64,
    /// Of which ended with a 2xx.
    pub ok: u64,
    /// 2xx answers that are not the resolution.
    pub lost: u64,
    /// Interactions with an effect twice.
    pub duplicated: u64,
    /// The longest stretch without any 2xx that overlaps a fault of this kind.
    pub max_unavailable: Duration,
    /// The longest time from the heal (or the 2xx, if later) to the first reader
    /// seeing an answer's effect.
    pub max_effect_delay: Duration,
}

/// What one reader got.
#[derive(Debug, Clone, Default)]
pub struct ReaderCount {
    /// Messages received.
    pub received: u64,
    /// Stored events it should have had.
    pub expected: u64,
    /// Of those, not received.
    pub missing: u64,
    /// Events received more than once (after the sequence rule, for the core
    /// subscriber).
    pub duplicates: u64,
    /// Copies dropped by the sequence rule (core subscriber only).
    pub repeats: u64,
    /// First copies that came after a higher sequence (core subscriber only).
    pub late_first_copies: u64,
}

/// The checker's findings.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Figures per fault kind (and `calm` for answers outside every fault).
    pub per_kind: BTreeMap<String, KindFigures>,
    /// Interactions opened.
    pub interactions: u64,
    /// Answers and 2xx in all.
    pub answers: u64,
    /// 2xx answers.
    pub ok: u64,
    /// Lost 2xx answers.
    pub lost: u64,
    /// Interactions with a duplicated effect.
    pub duplicated: u64,
    /// Events stored at two sequences.
    pub stored_twice: u64,
    /// Resolved interactions whose blocked call did not finish.
    pub missing_effects: u64,
    /// Interactions pending after a 2xx.
    pub pending_after_ok: u64,
    /// Answers that ended neither with a 2xx nor as a race's loser (gave up on
    /// `503`s, or another status).
    pub unanswered: u64,
    /// Resolutions naming another person or key.
    pub misattributed: u64,
    /// Deadlines decided (of those asked for).
    pub deadlines: (u64, u64),
    /// Deadlines decided before `expiresIn` had passed since the opening was sent.
    pub deadlines_early: u64,
    /// The latest a deadline's decision was seen after `expiresIn` had passed.
    pub max_deadline_late: Duration,
    /// Per reader.
    pub readers: BTreeMap<Reader, ReaderCount>,
    /// Every violation, one line each.
    pub violations: Vec<String>,
    /// What the run noted besides (not violations).
    pub notes: Vec<String>,
}

fn ms(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<26} {:>6} {:>7} {:>6} {:>5} {:>10} {:>18} {:>22}",
            "fault",
            "faults",
            "answers",
            "2xx",
            "lost",
            "duplicated",
            "longest unavail.",
            "longest effect delay"
        )?;
        for (kind, k) in &self.per_kind {
            writeln!(
                f,
                "{:<26} {:>6} {:>7} {:>6} {:>5} {:>10} {:>18} {:>22}",
                kind,
                k.faults,
                k.answers,
                k.ok,
                k.lost,
                k.duplicated,
                ms(k.max_unavailable),
                ms(k.max_effect_delay)
            )?;
        }
        writeln!(
            f,
            "interactions {}, answers {}, 2xx {}, lost {}, duplicated {}, stored twice {}, \
             missing effects {}, pending after a 2xx {}, unanswered {}, misattributed {}, deadlines decided {} \
             of {} (early {}, latest {} after expiresIn)",
            self.interactions,
            self.answers,
            self.ok,
            self.lost,
            self.duplicated,
            self.stored_twice,
            self.missing_effects,
            self.pending_after_ok,
            self.unanswered,
            self.misattributed,
            self.deadlines.0,
            self.deadlines.1,
            self.deadlines_early,
            ms(self.max_deadline_late)
        )?;
        for (r, c) in &self.readers {
            writeln!(
                f,
                "{r}: received {}, expected {}, missing {}, duplicates {}{}",
                c.received,
                c.expected,
                c.missing,
                c.duplicates,
                if *r == Reader::Core {
                    format!(
                        ", copies dropped by the sequence rule {}, first copies after a higher \
                         sequence {}",
                        c.repeats, c.late_first_copies
                    )
                } else {
                    String::new()
                }
            )?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        write!(f, "violations {}", self.violations.len())
    }
}

impl Report {
    /// Panics with every violation if there is one.
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violation(s):\n{}\n{self}",
            self.violations.len(),
            self.violations
                .iter()
                .take(60)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// What the stored events say about one interaction.
#[derive(Debug, Default)]
struct Effects<'a> {
    resolved: Vec<&'a Event>,
    closed_expired: Vec<&'a Event>,
    released: usize,
    finished: usize,
}

/// Checks `h`; see the module documentation.
pub fn check(h: &History) -> Report {
    let mut r = Report {
        interactions: h.opened.len() as u64,
        notes: h.notes.clone(),
        violations: h.stuck.clone(),
        ..Report::default()
    };
    let v = &mut r.violations;

    // Stored truth: ids at one sequence each; effects per interaction.
    let mut seqs_of: HashMap<&str, Vec<u64>> = HashMap::new();
    let mut what: HashMap<&str, (&str, &str, String)> = HashMap::new();
    for (seq, e) in &h.stored {
        seqs_of.entry(e.id.as_str()).or_default().push(*seq);
        what.entry(e.id.as_str()).or_insert((
            e.name(),
            e.subject.as_str(),
            holdpoint_domain::timestamp::format(e.time),
        ));
    }
    // When the durable consumer received each sequence: how far apart two copies were.
    let durable_at: HashMap<u64, Instant> = h
        .received
        .iter()
        .filter(|(reader, _, _)| *reader == Reader::Durable)
        .map(|(_, _, s)| (s.sequence, s.at))
        .collect();
    for (id, seqs) in &seqs_of {
        if seqs.len() > 1 {
            r.stored_twice += 1;
            let (name, subject, time) = &what[id];
            let apart = match (
                seqs.iter().filter_map(|q| durable_at.get(q)).min(),
                seqs.iter().filter_map(|q| durable_at.get(q)).max(),
            ) {
                (Some(a), Some(b)) => format!(", received {:.1} s apart", (*b - *a).as_secs_f64()),
                _ => String::new(),
            };
            v.push(format!(
                "event {id} ({name} of {subject}, time {time}) is stored at sequences {seqs:?}{apart}"
            ));
        }
    }
    let mut effects: HashMap<(&str, &str), Effects> = HashMap::new();
    let mut counted: HashSet<&str> = HashSet::new();
    for (_, e) in &h.stored {
        if !counted.insert(e.id.as_str()) {
            continue; // a second copy is judged above
        }
        let org = e.orgid.as_str();
        match &e.body {
            EventData::InteractionResolved { interaction_id, .. } => effects
                .entry((org, interaction_id.as_str()))
                .or_default()
                .resolved
                .push(e),
            EventData::InteractionClosed {
                interaction_id,
                reason: CloseReason::Expired,
            } => effects
                .entry((org, interaction_id.as_str()))
                .or_default()
                .closed_expired
                .push(e),
            EventData::ToolCallReleased { effect_id, .. } => {
                effects
                    .entry((org, effect_id.as_str()))
                    .or_default()
                    .released += 1;
            }
            EventData::ToolCallFinished { interaction_id, .. } => {
                effects
                    .entry((org, interaction_id.as_str()))
                    .or_default()
                    .finished += 1;
            }
            _ => {}
        }
    }
    let none = Effects::default();

    // The first time any reader saw each (interaction, event name).
    let mut first_seen: HashMap<(&str, &str), Instant> = HashMap::new();
    for (_, _, s) in &h.received {
        let at = first_seen
            .entry((s.subject.as_str(), s.name))
            .or_insert(s.at);
        if s.at < *at {
            *at = s.at;
        }
    }

    let mut answers_of: HashMap<usize, Vec<&Answered>> = HashMap::new();
    for a in &h.answered {
        answers_of.entry(a.target).or_default().push(a);
    }
    let reported: HashSet<usize> = h
        .reported
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(t, _)| *t)
        .collect();
    // Per target: lost / duplicated, for the per-kind figures.
    let mut target_lost: HashMap<usize, u64> = HashMap::new();
    let mut target_dup: HashSet<usize> = HashSet::new();

    // Every answer ends with a 2xx or as the loser of a race (409 NRY-0009).
    for a in &h.answered {
        let last = a.attempts.last();
        let fine =
            a.ok().is_some() || last.is_some_and(|l| l.status == 409 && l.code == "NRY-0009");
        if !fine {
            r.unanswered += 1;
            v.push(format!(
                "{}: key {} ended with {:?} after {} attempts",
                h.opened[a.target].id,
                a.key,
                last.map(|l| (l.status, l.code.clone())),
                a.attempts.len()
            ));
        }
    }
    for (i, o) in h.opened.iter().enumerate() {
        let fx = effects
            .get(&(o.org.as_str(), o.id.as_str()))
            .unwrap_or(&none);
        let answers = answers_of.get(&i).cloned().unwrap_or_default();
        let oks: Vec<&&Answered> = answers.iter().filter(|a| a.ok().is_some()).collect();
        let view = h.views.get(i).cloned().flatten();
        let state = view
            .as_ref()
            .and_then(|v| v["state"].as_str().map(str::to_owned))
            .unwrap_or_default();

        if fx.resolved.len() > 1 || fx.finished > 1 || fx.released > 1 {
            target_dup.insert(i);
            v.push(format!(
                "{}: {} interaction-resolved, {} tool-call-released, {} tool-call-finished stored",
                o.id,
                fx.resolved.len(),
                fx.released,
                fx.finished
            ));
        }
        let winner = fx.resolved.first().and_then(|e| match &e.body {
            EventData::InteractionResolved {
                key,
                by,
                resolved_by,
                answer,
                ..
            } => Some((key.as_str(), by.as_str(), *resolved_by, answer)),
            _ => None,
        });
        for a in &oks {
            match winner {
                None => {
                    *target_lost.entry(i).or_default() += 1;
                    v.push(format!(
                        "{}: key {} got a 2xx but no interaction-resolved is stored (state {state:?})",
                        o.id, a.key
                    ));
                }
                Some((key, by, _, _)) if key != a.key => {
                    *target_lost.entry(i).or_default() += 1;
                    v.push(format!(
                        "{}: key {} got a 2xx but the resolution is key {key} by {by}",
                        o.id, a.key
                    ));
                }
                Some((_, by, _, _)) if by != a.person => {
                    r.misattributed += 1;
                    v.push(format!(
                        "{}: key {} was sent by {} but the resolution names {by}",
                        o.id, a.key, a.person
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some((key, by, Resolver::Person, _)) = winner
            && !answers.iter().any(|a| a.key == key && a.person == by)
        {
            r.misattributed += 1;
            v.push(format!(
                "{}: resolved with key {key} by {by}, which no client sent for it",
                o.id
            ));
        }
        if !oks.is_empty() && state == "pending" {
            r.pending_after_ok += 1;
            v.push(format!("{}: answered with a 2xx, still pending", o.id));
        }
        // The blocked call's end.
        let denied = matches!(
            winner,
            Some((
                _,
                _,
                _,
                holdpoint_domain::Answer::Approval {
                    approved: false,
                    ..
                }
            ))
        );
        let want_finished =
            winner.is_some() && (o.kind == TargetKind::Question || denied || reported.contains(&i));
        if want_finished && fx.finished == 0 {
            r.missing_effects += 1;
            v.push(format!(
                "{}: resolved but no tool-call-finished is stored (state {state:?})",
                o.id
            ));
        }
        // Deadlines.
        if let Some(secs) = o.expires_in {
            r.deadlines.1 += 1;
            let by_expiry = fx
                .resolved
                .iter()
                .filter(|e| {
                    matches!(&e.body, EventData::InteractionResolved { resolved_by, .. }
                        if *resolved_by == Resolver::Expiry)
                })
                .count()
                + fx.closed_expired.len();
            let name = if o.kind == TargetKind::Approval {
                "interaction-resolved"
            } else {
                "interaction-closed"
            };
            match (by_expiry, first_seen.get(&(o.id.as_str(), name))) {
                (0, _) => v.push(format!(
                    "{}: its deadline ({secs} s) was not decided by the end (state {state:?})",
                    o.id
                )),
                (_, Some(at)) => {
                    r.deadlines.0 += 1;
                    let due = o.sent + Duration::from_secs(secs);
                    if *at < due {
                        r.deadlines_early += 1;
                        v.push(format!(
                            "{}: its deadline of {secs} s fired {:?} early (seen {:?} after the \
                             opening was sent)",
                            o.id,
                            due - *at,
                            *at - o.sent
                        ));
                    } else {
                        let late = at.saturating_duration_since(o.done + Duration::from_secs(secs));
                        r.max_deadline_late = r.max_deadline_late.max(late);
                    }
                }
                (_, None) => {
                    r.deadlines.0 += 1;
                    r.notes.push(format!(
                        "{}: decided by its deadline, but no reader saw the event",
                        o.id
                    ));
                }
            }
        }
    }
    r.lost = target_lost.values().sum();
    r.duplicated = target_dup.len() as u64;

    // Readers.
    judge_readers(h, &mut r);

    // Per fault kind.
    let mut ok_times: Vec<Instant> = h
        .answered
        .iter()
        .filter_map(|a| a.ok().map(|x| x.done))
        .collect();
    ok_times.sort();
    for a in &h.answered {
        r.answers += 1;
        let ok = a.ok();
        if ok.is_some() {
            r.ok += 1;
        }
        let sent = a.sent();
        let window = sent.and_then(|s| h.windows.iter().find(|w| s >= w.start && s <= w.end()));
        let kind = window.map_or("calm".to_owned(), |w| w.kind.clone());
        let k = r.per_kind.entry(kind).or_default();
        k.answers += 1;
        if let Some(ok) = ok {
            k.ok += 1;
            if let Some(w) = window {
                let o = &h.opened[a.target];
                let fx_name = effect_name(h, a.target);
                if let Some(seen) = first_seen.get(&(o.id.as_str(), fx_name)) {
                    let from = ok.done.max(w.healed);
                    k.max_effect_delay =
                        k.max_effect_delay.max(seen.saturating_duration_since(from));
                }
            }
        }
    }
    for (i, n) in &target_lost {
        let kind = kind_of_target(h, *i);
        r.per_kind.entry(kind).or_default().lost += n;
    }
    for i in &target_dup {
        let kind = kind_of_target(h, *i);
        r.per_kind.entry(kind).or_default().duplicated += 1;
    }
    for w in &h.windows {
        let k = r.per_kind.entry(w.kind.clone()).or_default();
        k.faults += 1;
        let end = w.end();
        let mut longest = Duration::ZERO;
        let mut prev: Option<Instant> = None;
        for t in ok_times.iter().copied() {
            if let Some(p) = prev
                && t > w.start
                && p < end
            {
                longest = longest.max(t - p);
            }
            prev = Some(t);
        }
        if let Some(p) = prev
            && p < end
        {
            // Nothing succeeded after the window began: unavailable to its end.
            longest = longest.max(end - p.max(w.start));
        }
        k.max_unavailable = k.max_unavailable.max(longest);
    }
    r
}

/// The effect an answer's reader waits for: `tool-call-released` for an approved
/// call, else `tool-call-finished`.
fn effect_name(h: &History, target: usize) -> &'static str {
    let o = &h.opened[target];
    let approved = h
        .stored
        .iter()
        .any(|(_, e)| matches!(&e.body, EventData::ToolCallReleased { effect_id, .. } if effect_id.as_str() == o.id));
    if o.kind == TargetKind::Approval && approved {
        "tool-call-released"
    } else {
        "tool-call-finished"
    }
}

/// The fault kind the first answer of `target` was sent in.
fn kind_of_target(h: &History, target: usize) -> String {
    let sent = h
        .answered
        .iter()
        .filter(|a| a.target == target)
        .filter_map(Answered::sent)
        .min();
    sent.and_then(|s| h.windows.iter().find(|w| s >= w.start && s <= w.end()))
        .map_or("calm".to_owned(), |w| w.kind.clone())
}

fn judge_readers(h: &History, r: &mut Report) {
    let stored_ids: HashMap<&str, (u64, &str)> = h
        .stored
        .iter()
        .map(|(seq, e)| (e.id.as_str(), (*seq, e.orgid.as_str())))
        .collect();
    let mut by_reader: BTreeMap<(Reader, &str), Vec<&Seen>> = BTreeMap::new();
    for (reader, org, s) in &h.received {
        by_reader
            .entry((*reader, org.as_str()))
            .or_default()
            .push(s);
    }
    for reader in [Reader::Core, Reader::Durable, Reader::Sse, Reader::Webhook] {
        r.readers.entry(reader).or_default();
    }
    let orgs: HashSet<&str> = h.opened.iter().map(|o| o.org.as_str()).collect();
    for ((reader, org), seen) in &by_reader {
        let c = r.readers.entry(*reader).or_default();
        c.received += seen.len() as u64;
        // What it should have had: every stored event of its organisation(s).
        let expected: HashSet<&str> = stored_ids
            .iter()
            .filter(|(_, (_, o))| org.is_empty() || o == org)
            .map(|(id, _)| *id)
            .collect();
        let mut counts: HashMap<&str, u32> = HashMap::new();
        match reader {
            Reader::Core => {
                // README's rule: drop a `Nats-Sequence` already received. Count the
                // first copies that came after a higher sequence (a rule dropping
                // everything not above the highest seen would lose them).
                let mut received: HashSet<u64> = HashSet::new();
                let mut highest = 0u64;
                for s in seen {
                    if s.sequence != 0 && !received.insert(s.sequence) {
                        c.repeats += 1;
                        continue;
                    }
                    if s.sequence != 0 && s.sequence < highest {
                        c.late_first_copies += 1;
                    }
                    highest = highest.max(s.sequence);
                    *counts.entry(s.id.as_str()).or_default() += 1;
                }
            }
            Reader::Durable => {
                // Redeliveries of one stored message are the consumer's contract.
                let mut seqs: HashMap<&str, HashSet<u64>> = HashMap::new();
                for s in seen {
                    seqs.entry(s.id.as_str()).or_default().insert(s.sequence);
                }
                for (id, s) in seqs {
                    counts.insert(id, s.len() as u32);
                }
            }
            Reader::Sse | Reader::Webhook => {
                for s in seen {
                    *counts.entry(s.id.as_str()).or_default() += 1;
                }
            }
        }
        for (id, n) in &counts {
            if *n > 1 {
                c.duplicates += 1;
                // README ("Webhooks"): a delivery whose marker was not written (a
                // crash, or the notifier cut off from NATS) comes again under the
                // same `webhook-id`, which receivers deduplicate on. Counted, allowed.
                if *reader != Reader::Webhook {
                    r.violations
                        .push(format!("{reader} ({org:?}) received event {id} {n} times"));
                }
            }
        }
        if *reader == Reader::Core {
            // Core NATS delivers nothing while the subscriber is disconnected.
            c.expected += expected.len() as u64;
            c.missing += expected
                .iter()
                .filter(|id| !counts.contains_key(*id))
                .count() as u64;
            continue;
        }
        c.expected += expected.len() as u64;
        let missing: Vec<&&str> = expected
            .iter()
            .filter(|id| !counts.contains_key(**id))
            .collect();
        c.missing += missing.len() as u64;
        let mut missing_seqs: Vec<u64> = missing.iter().map(|id| stored_ids[**id].0).collect();
        missing_seqs.sort_unstable();
        for id in missing.iter().take(10) {
            r.violations.push(format!(
                "{reader} ({org:?}) never received event {id} (sequence {})",
                stored_ids[**id].0
            ));
        }
        if let (Some(first), Some(last)) = (missing_seqs.first(), missing_seqs.last()) {
            r.notes.push(format!(
                "{reader} ({org:?}): {} events never received, sequences {first} to {last}",
                missing_seqs.len()
            ));
        }
        if missing.len() > 10 {
            r.violations.push(format!(
                "{reader} ({org:?}): {} more events never received",
                missing.len() - 10
            ));
        }
    }
    for org in orgs {
        for reader in [Reader::Sse, Reader::Webhook] {
            if !by_reader.contains_key(&(reader, org)) {
                let expected = stored_ids.values().filter(|(_, o)| *o == org).count();
                if expected > 0 {
                    let c = r.readers.entry(reader).or_default();
                    c.expected += expected as u64;
                    c.missing += expected as u64;
                    r.violations.push(format!(
                        "{reader} ({org:?}) received nothing of {expected} events"
                    ));
                }
            }
        }
    }
}

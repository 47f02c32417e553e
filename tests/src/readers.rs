//! Live readers of the events during a chaos run, the two kinds a platform runs:
//!
//! - a **core subscriber** on `hp.evt.>` (what `HP_EVENTS` republishes as it stores
//!   each event). A stream leader change can make nats-server republish a stored
//!   event again, with the same `Nats-Sequence` header (README, "What a reader of the
//!   events gets"); the reader drops a sequence it already received, and must then
//!   see every stored event at most once;
//! - a **durable consumer** on `HP_EVENTS` (explicit acks, resumes across server
//!   restarts): it must find every event stored once (one stream sequence per
//!   CloudEvents id), redeliveries of the same stored message aside.
//!
//! [`Readers::finish`] stops them and returns what they saw, with when; [`judge_around`]
//! turns that into figures: duplicates per event id for each reader, and the
//! **effect delay** of each answer (from its 2xx to the first reader seeing its
//! effect: `tool-call-finished`, or `tool-call-released` for an approved call).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt as _;
use holdpoint_domain::Event;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::load::{JobResult, Target, TargetKind};

/// An event a reader received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its CloudEvents id.
    pub id: String,
    /// Its stream sequence: the delivery's for the durable consumer, the
    /// `Nats-Sequence` header RePublish sets for the core subscriber (0 if absent).
    pub sequence: u64,
    /// The interaction it is about (`subject` attribute).
    pub subject: String,
    /// Its short name.
    pub name: &'static str,
    /// When it came.
    pub at: Instant,
}

/// Both readers, running.
#[derive(Debug)]
pub struct Readers {
    stop: CancellationToken,
    js: jetstream::Context,
    durable_name: String,
    core: JoinHandle<Vec<Seen>>,
    durable: JoinHandle<Vec<Seen>>,
}

/// What the readers saw, and what it means.
#[derive(Debug, Clone, Default)]
pub struct ReaderFigures {
    /// Events the core subscriber received.
    pub core_events: u64,
    /// Copies of a stored event the core subscriber received again with the same
    /// `Nats-Sequence` (a stream leader change), dropped by the sequence rule.
    pub core_repeats: u64,
    /// Event ids the core subscriber still received more than once after that rule.
    pub core_duplicates: u64,
    /// Events the durable consumer received (redeliveries included).
    pub durable_events: u64,
    /// Event ids stored under more than one stream sequence.
    pub durable_duplicates: u64,
    /// Answers whose effect neither reader saw.
    pub unseen_effects: u64,
    /// The longest effect delay (2xx to the first reader seeing the effect).
    pub max_effect_delay: Duration,
    /// Where the durable consumer stood when the readers stopped.
    pub durable_at_finish: Option<DurableState>,
    /// Every violation.
    pub violations: Vec<String>,
}

/// The durable consumer's position when the readers stopped: whether it had
/// caught up with what `HP_EVENTS` stored.
#[derive(Debug, Clone, Copy, Default)]
pub struct DurableState {
    /// Matching messages not delivered yet.
    pub pending: u64,
    /// Messages delivered and not acked yet.
    pub ack_pending: u64,
    /// The last stream sequence delivered.
    pub delivered: u64,
}

impl ReaderFigures {
    /// Adds another run's figures to these (counts summed, the longest delay kept).
    pub fn add(&mut self, other: &ReaderFigures) {
        self.core_events += other.core_events;
        self.core_repeats += other.core_repeats;
        self.core_duplicates += other.core_duplicates;
        self.durable_events += other.durable_events;
        self.durable_duplicates += other.durable_duplicates;
        self.unseen_effects += other.unseen_effects;
        self.max_effect_delay = self.max_effect_delay.max(other.max_effect_delay);
        self.violations.extend(other.violations.iter().cloned());
    }
}

impl std::fmt::Display for ReaderFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "live readers: core subscriber {} events, {} republished again (same \
             Nats-Sequence), {} duplicate ids; durable consumer {} deliveries, {} ids stored \
             twice; effects unseen {}; longest effect delay {:?}",
            self.core_events,
            self.core_repeats,
            self.core_duplicates,
            self.durable_events,
            self.durable_duplicates,
            self.unseen_effects,
            self.max_effect_delay
        )?;
        if let Some(d) = self.durable_at_finish {
            write!(
                f,
                "; durable consumer at the end: delivered up to sequence {}, {} pending, {} \
                 unacked",
                d.delivered, d.pending, d.ack_pending
            )?;
        }
        Ok(())
    }
}

/// The `Nats-Sequence` header a stream's RePublish puts on a message, 0 if absent.
fn republished_sequence(m: &async_nats::Message) -> u64 {
    m.headers
        .as_ref()
        .and_then(|h| h.get("Nats-Sequence"))
        .and_then(|v| v.as_str().parse().ok())
        .unwrap_or(0)
}

fn seen(payload: &[u8], sequence: u64) -> Option<Seen> {
    let e: Event = serde_json::from_slice(payload).ok()?;
    Some(Seen {
        name: e.name(),
        id: e.id,
        sequence,
        subject: e.subject,
        at: Instant::now(),
    })
}

impl Readers {
    /// Starts both readers on NATS at `url` (one URL or a comma-separated cluster;
    /// a connection of their own), under the default topology's names.
    pub async fn start(url: &str) -> Readers {
        let client = holdpoint_bus::connect(url, "chaos-readers")
            .await
            .expect("readers connect");
        let stop = CancellationToken::new();
        let mut sub = client.subscribe("hp.evt.>").await.expect("subscribe");
        client.flush().await.expect("flush");
        let token = stop.clone();
        let core = tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                tokio::select! {
                    _ = token.cancelled() => return out,
                    m = sub.next() => match m {
                        Some(m) => out.extend(seen(&m.payload, republished_sequence(&m))),
                        None => return out,
                    },
                }
            }
        });
        let js = jetstream::new(client);
        let reader_js = js.clone();
        let name = format!("chaos-reader-{}", uuid::Uuid::new_v4().simple());
        // From the first event stored after the readers start: a consumer re-made
        // after a node loss (its leader gone with the node) starts there again, so it
        // misses nothing stored meanwhile; what it gets twice is the same sequence.
        let start = loop {
            if let Ok(mut stream) = js.get_stream("HP_EVENTS").await
                && let Ok(info) = stream.info().await
            {
                break info.state.last_sequence + 1;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let durable_consumer = make_durable(&js, &name, start).await;
        let durable_name = name.clone();
        let token = stop.clone();
        let durable = tokio::spawn(async move {
            let mut out = Vec::new();
            let mut consumer = durable_consumer;
            while !token.is_cancelled() {
                let messages = consumer.messages().await;
                let Ok(mut messages) = messages else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    consumer = make_durable(&js, &name, start).await;
                    continue;
                };
                loop {
                    let next = tokio::select! {
                        _ = token.cancelled() => return out,
                        n = messages.next() => n,
                    };
                    match next {
                        Some(Ok(m)) => {
                            let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
                            out.extend(seen(&m.payload, seq));
                            let _ = m.ack().await;
                        }
                        _ => break,
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            out
        });
        Readers {
            stop,
            js: reader_js,
            durable_name,
            core,
            durable,
        }
    }

    /// The durable consumer's position, when NATS answers.
    async fn durable_state(&self) -> Option<DurableState> {
        let stream = self.js.get_stream("HP_EVENTS").await.ok()?;
        let mut consumer: consumer::PullConsumer =
            stream.get_consumer(&self.durable_name).await.ok()?;
        let info = consumer.info().await.ok()?;
        Some(DurableState {
            pending: info.num_pending,
            ack_pending: info.num_ack_pending as u64,
            delivered: info.delivered.stream_sequence,
        })
    }

    /// Waits until the durable consumer has been delivered and has acked everything
    /// stored (at most `catch_up`), then `quiet` for the core subscriber's
    /// stragglers; stops both readers and returns what each saw (core subscriber,
    /// durable consumer) and where the durable consumer stood.
    pub async fn finish(
        self,
        catch_up: Duration,
        quiet: Duration,
    ) -> (Vec<Seen>, Vec<Seen>, Option<DurableState>) {
        let deadline = Instant::now() + catch_up;
        let mut state = self.durable_state().await;
        while Instant::now() < deadline
            && !state.is_some_and(|d| d.pending == 0 && d.ack_pending == 0)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
            state = self.durable_state().await;
        }
        tokio::time::sleep(quiet).await;
        self.stop.cancel();
        (
            self.core.await.unwrap_or_default(),
            self.durable.await.unwrap_or_default(),
            state,
        )
    }
}

async fn make_durable(
    js: &jetstream::Context,
    name: &str,
    start_sequence: u64,
) -> consumer::PullConsumer {
    loop {
        let stream = js.get_stream("HP_EVENTS").await;
        if let Ok(stream) = stream
            && let Ok(c) = stream
                .get_or_create_consumer(
                    name,
                    consumer::pull::Config {
                        durable_name: Some(name.to_owned()),
                        filter_subject: "hp.evt.>".into(),
                        ack_policy: consumer::AckPolicy::Explicit,
                        // A delivery lost with a node (its pull went to the consumer
                        // leader that died) comes again after this, not after 30 s.
                        ack_wait: Duration::from_secs(2),
                        deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence },
                        ..Default::default()
                    },
                )
                .await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The figures of what the readers saw for `targets`, given the clients'
/// `results`: duplicates, unseen effects, and effect delays over `delay_bound`
/// (violations). Each of `outages` (`(down, back)`, none for a run without) is when
/// the nats-server went away and when it served again. An effect whose 2xx came before
/// `back` and which no reader saw before `down` is measured from `back`: the effect
/// delay counts the time after the system is back, not the outage itself.
///
/// A reader has its own failover: a durable consumer whose leader was on a killed
/// node delivers nothing until its new leader serves, and then delivers the
/// stored backlog. So an outage lasts, for the readers, until the later of `back`
/// and the durable reader's first delivery after `down`. This discounts only a
/// stall of the reader itself: an effect Holdpoint stored late still comes after
/// the events the resumed reader delivers first, and is still measured as late.
pub fn judge_around(
    core: &[Seen],
    durable: &[Seen],
    targets: &[Target],
    results: &[JobResult],
    approved: &HashMap<String, bool>,
    delay_bound: Duration,
    outages: &[(Instant, Instant)],
) -> ReaderFigures {
    let mut f = ReaderFigures {
        core_events: core.len() as u64,
        durable_events: durable.len() as u64,
        ..ReaderFigures::default()
    };
    let outages: Vec<(Instant, Instant)> = outages
        .iter()
        .map(|(down, back)| {
            let resumed = durable.iter().map(|s| s.at).filter(|at| at > down).min();
            (*down, resumed.map_or(*back, |r| r.max(*back)))
        })
        .collect();
    // The rule README gives a core subscriber: drop a message whose `Nats-Sequence`
    // it already received. Then each id must come once.
    let mut received: HashSet<u64> = HashSet::new();
    let mut counts: HashMap<&str, u32> = HashMap::new();
    for s in core {
        if s.sequence != 0 && !received.insert(s.sequence) {
            f.core_repeats += 1;
            continue;
        }
        *counts.entry(s.id.as_str()).or_default() += 1;
    }
    for (id, n) in &counts {
        if *n > 1 {
            f.core_duplicates += 1;
            f.violations
                .push(format!("the core subscriber received event {id} {n} times"));
        }
    }
    let mut sequences: HashMap<&str, HashSet<u64>> = HashMap::new();
    for s in durable {
        sequences
            .entry(s.id.as_str())
            .or_default()
            .insert(s.sequence);
    }
    for (id, seqs) in &sequences {
        if seqs.len() > 1 {
            f.durable_duplicates += 1;
            f.violations
                .push(format!("event {id} is stored at sequences {seqs:?}"));
        }
    }
    // The first time either reader saw each (interaction, event name).
    let mut first: HashMap<(&str, &str), Instant> = HashMap::new();
    for s in core.iter().chain(durable) {
        let at = first.entry((s.subject.as_str(), s.name)).or_insert(s.at);
        if s.at < *at {
            *at = s.at;
        }
    }
    for r in results {
        let Some(ok) = r.attempts.iter().find(|a| (200..300).contains(&a.status)) else {
            continue;
        };
        let t = &targets[r.job.target];
        let effect = match (t.kind, approved.get(&t.id)) {
            (TargetKind::Approval, Some(true)) => "tool-call-released",
            _ => "tool-call-finished",
        };
        match first.get(&(t.id.as_str(), effect)) {
            Some(at) => {
                let from = outages
                    .iter()
                    .filter(|(down, back)| ok.done < *back && *at > *down)
                    .fold(ok.done, |from, (_, back)| from.max(*back));
                let delay = at.saturating_duration_since(from);
                f.max_effect_delay = f.max_effect_delay.max(delay);
                if delay > delay_bound {
                    f.violations.push(format!(
                        "{}: its {effect} came {delay:?} after the 2xx (bound {delay_bound:?})",
                        t.id
                    ));
                }
            }
            None => {
                f.unseen_effects += 1;
                f.violations
                    .push(format!("{}: no reader saw its {effect}", t.id));
            }
        }
    }
    f
}

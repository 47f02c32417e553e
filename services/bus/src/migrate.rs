//! `holdpoint migrate`: brings a store of format 1 to format 2 ([`crate::STORE_FORMAT`]).
//!
//! Format 1 kept the records in four KV buckets (`HP_INTERACTIONS`, `HP_TASKS`,
//! `HP_SESSIONS`, `HP_RULES`, keys `<org>.<id>`), each record's recent transitions
//! in an outbox whose unconfirmed entries still carried their effects (a worker
//! confirmed them on the record's next write, so most records end with one), the
//! deadline schedules in `HP_COMMANDS` on `hp.sched.>`, and public streams that
//! took the workers' publishes on ingest subjects (`hp.in.…`). Format 2 keeps the
//! records and the effects in the state stream (see [`crate::topology`]).
//!
//! [`migrate`], with every Holdpoint process stopped:
//!
//! 1. refuses while a worker announces itself in `HP_PRESENCE`;
//! 2. creates the state stream;
//! 3. reads which event, audit record and lane message ids the public streams
//!    hold since the oldest unconfirmed transition (less 5 s for clocks that
//!    disagree);
//! 4. writes every record (rules first, then tasks, sessions and lanes,
//!    interactions) to its state key as a new key, its outbox confirmed, in one
//!    atomic batch with the effects its unconfirmed transitions owe and the
//!    public streams do not hold: events, audit records and lane messages missing
//!    by id, follow-up commands (a command decided twice is a replay), rules not
//!    stored, and deadline schedules of interactions still pending that step 5
//!    does not move. A record already in the state stream is left as it is: a
//!    migration that stopped half-way is run again;
//! 5. moves each deadline schedule from `HP_COMMANDS` to the state stream (same
//!    time, target `hp.fx.cmd.…`) and purges `hp.sched.>`;
//! 6. copies every command still waiting in `HP_COMMANDS` to the state stream
//!    (`hp.fx.cmd.…`, same `Nats-Msg-Id`), removes `HP_COMMANDS` (a stream that
//!    had message schedules can neither turn them off nor source: nats-server
//!    error 10052, 10187) and sets the store up again ([`Bus::setup`]): the new
//!    commands stream, of format 2, sources the copied commands, and the public
//!    streams change from ingest subjects to sourcing. The partition consumers
//!    are made anew by the workers; a command decided before is a replay.
//!
//! The format-1 buckets are left as they were (nothing reads them any more);
//! delete them once the migrated store has been checked.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer, kv};
use bytes::Bytes;
use futures::StreamExt as _;
use holdpoint_domain::{
    CommandEnvelope, Effects, Interaction, Lane, Outbox, Rule, Session, State, Task,
};
use time::OffsetDateTime;

use crate::batch::BatchError;
use crate::commit::{Commit, as_bus_error};
use crate::records::Bucket;
use crate::{Bus, BusError, STORE_FORMAT, Topology};

/// What [`migrate`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Records written to the state stream.
    pub records: usize,
    /// Records the state stream held already (an earlier, interrupted run).
    pub already: usize,
    /// Owed effects committed with their records.
    pub effects: usize,
    /// Owed events, audit records and lane messages left out: the public streams
    /// held them already.
    pub already_stored: usize,
    /// Deadline schedules moved from `HP_COMMANDS`.
    pub schedules: usize,
    /// Commands that were waiting in `HP_COMMANDS`, moved to the new one.
    pub commands: usize,
}

/// The result of [`migrate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    /// No store: there is nothing to migrate (the services create format 2).
    NoStore,
    /// The store has the current format already.
    Current,
    /// Migrated from format 1.
    Migrated(Report),
}

/// How far before the oldest unconfirmed transition the public streams are read.
const MARGIN: time::Duration = time::Duration::seconds(5);

/// One record of a format-1 bucket, decoded.
enum Old {
    Interaction(Box<Interaction>),
    Task(Task),
    Session(Box<Session>),
    Lane(Box<Lane>),
    Rule(Rule),
}

impl Old {
    fn outbox(&mut self) -> Option<&mut Outbox> {
        match self {
            Old::Interaction(i) => Some(&mut i.outbox),
            Old::Session(s) => Some(&mut s.outbox),
            Old::Lane(l) => Some(&mut l.outbox),
            Old::Task(_) | Old::Rule(_) => None,
        }
    }

    fn encode(&self) -> Result<Bytes, BusError> {
        let v = match self {
            Old::Interaction(i) => serde_json::to_vec(i),
            Old::Task(t) => serde_json::to_vec(t),
            Old::Session(s) => serde_json::to_vec(s),
            Old::Lane(l) => serde_json::to_vec(l),
            Old::Rule(r) => serde_json::to_vec(r),
        };
        v.map(Into::into)
            .map_err(|e| BusError::permanent("encode record", e))
    }
}

/// Brings the store behind `client` from format 1 to the current format (see the
/// module docs). Safe to run again after it stopped half-way, and on a current
/// store (it does nothing).
///
/// # Errors
/// [`BusError::ServerTooOld`] below the version floor; permanent when a worker is
/// running, the store is newer, or a record does not decode (nothing of that
/// record was written); transient on NATS failures (run it again).
pub async fn migrate(client: async_nats::Client, topo: Topology) -> Result<Migration, BusError> {
    crate::check_version(&client.server_info().version)?;
    let js = jetstream::new(client.clone());
    let Ok(commands) = js.get_stream(topo.commands_stream()).await else {
        // A migration that stopped after it removed the old commands stream
        // finishes here; without a state stream there is no store at all.
        if js.get_stream(topo.state_stream()).await.is_ok() {
            Bus::setup(client, topo).await?;
            return Ok(Migration::Migrated(Report::default()));
        }
        return Ok(Migration::NoStore);
    };
    let found = crate::store_format_of(&commands.cached_info().config.metadata)?;
    if found == STORE_FORMAT {
        return Ok(Migration::Current);
    }
    if found > STORE_FORMAT {
        return Err(BusError::permanent(
            "migrate",
            format!("the store has format {found}, newer than this release's {STORE_FORMAT}"),
        ));
    }
    refuse_live_workers(&js, &topo).await?;
    crate::setup::ensure_state(&js, &topo).await?;
    let [interactions, tasks, sessions, rules, _] = topo.format1_buckets();
    let mut buckets = Vec::new();
    for (name, kind) in [
        (rules, Bucket::Rules),
        (tasks, Bucket::Tasks),
        (sessions, Bucket::Sessions),
        (interactions, Bucket::Interactions),
    ] {
        if let Ok(store) = js.get_key_value(&name).await {
            buckets.push((store, kind));
        }
    }

    // Pass 1: the oldest unconfirmed transition, the rules and the pending
    // interactions (whose schedules may be owed).
    let mut oldest: Option<OffsetDateTime> = None;
    let mut rule_keys = HashSet::new();
    for (store, kind) in &buckets {
        for key in keys(store).await? {
            let Some(mut old) = read(store, *kind, &key).await? else {
                continue;
            };
            if let Old::Rule(r) = &old {
                rule_keys.insert(crate::rules::rule_key(&r.org, &r.id));
            }
            if let Some(outbox) = old.outbox() {
                for t in outbox
                    .iter()
                    .filter(|t| !t.confirmed && !t.effects.is_empty())
                {
                    oldest = Some(oldest.map_or(t.at, |o| o.min(t.at)));
                }
            }
        }
    }
    let stored = match oldest {
        Some(at) => stored_ids(&js, &topo, at - MARGIN).await?,
        None => HashSet::new(),
    };
    let moved = schedule_subjects(&js, &topo).await?;

    // Pass 2: every record, with what it owes.
    let mut report = Report::default();
    for (store, kind) in &buckets {
        for key in keys(store).await? {
            let Some(mut old) = read(store, *kind, &key).await? else {
                continue;
            };
            let pending = matches!(&old, Old::Interaction(i) if i.state == State::Pending);
            let mut owed = Effects::default();
            if let Some(outbox) = old.outbox() {
                for t in outbox.iter().filter(|t| !t.confirmed) {
                    let e = &t.effects;
                    let before = owed.events.len() + owed.audit.len() + owed.lane_messages.len();
                    owed.events
                        .extend(e.events.iter().filter(|x| !stored.contains(&x.id)).cloned());
                    owed.audit
                        .extend(e.audit.iter().filter(|x| !stored.contains(&x.id)).cloned());
                    owed.lane_messages.extend(
                        e.lane_messages
                            .iter()
                            .filter(|m| !stored.contains(&m.msg_id()))
                            .cloned(),
                    );
                    let kept =
                        owed.events.len() + owed.audit.len() + owed.lane_messages.len() - before;
                    report.already_stored +=
                        e.events.len() + e.audit.len() + e.lane_messages.len() - kept;
                    owed.follow_ups.extend(e.follow_ups.iter().cloned());
                    owed.rules.extend(
                        e.rules
                            .iter()
                            .filter(|r| !rule_keys.contains(&crate::rules::rule_key(&r.org, &r.id)))
                            .cloned(),
                    );
                    if pending {
                        owed.schedules.extend(
                            e.schedules
                                .iter()
                                .filter(|s| !moved.contains(&topo.schedule_subject(&s.command)))
                                .cloned(),
                        );
                    }
                }
                outbox.confirm(|_| true);
            }
            let new_key = format!("{}{key}", kind.key_prefix());
            let mut c = Commit::new();
            c.record(&topo, *kind, &new_key, 0, old.encode()?)
                .map_err(|e| BusError::permanent("migrate", e))?;
            let n = owed.len();
            for r in &owed.rules {
                rule_keys.insert(crate::rules::rule_key(&r.org, &r.id));
            }
            if !owed.is_empty() {
                c.transition(&topo, &owed, "")?;
            }
            let id = format!(
                "mig-{}",
                &holdpoint_domain::digest(&[topo.state_bucket().as_str(), &new_key])[..40]
            );
            match crate::batch::commit_resending(&client, &id, c.batch(), 1).await {
                Ok(_) => {
                    report.records += 1;
                    report.effects += n;
                }
                Err(BatchError::Conflict(_)) => report.already += 1,
                Err(e) => return Err(as_bus_error(&e)),
            }
        }
    }

    report.schedules = move_schedules(&js, &topo).await?;
    report.commands = move_commands(&js, &topo).await?;
    // The commands stream last: it is made anew (a stream that had message
    // schedules can neither turn them off nor source), sourcing the commands just
    // moved, and its format says the migration is done.
    js.delete_stream(topo.commands_stream())
        .await
        .map_err(|e| BusError::transient("delete commands stream", e))?;
    Bus::setup(client, topo).await?;
    Ok(Migration::Migrated(report))
}

/// Copies every command waiting in `HP_COMMANDS` (decided or not: a decided one is
/// a replay) into the state stream as `hp.fx.cmd.…`, with its `Nats-Msg-Id`, for the
/// new commands stream to source. Returns how many.
async fn move_commands(js: &jetstream::Context, topo: &Topology) -> Result<usize, BusError> {
    let mut stream = js
        .get_stream(topo.commands_stream())
        .await
        .map_err(|e| BusError::transient("read commands", e))?;
    let info = stream
        .info()
        .await
        .map_err(|e| BusError::transient("read commands", e))?
        .clone();
    if info.state.messages == 0 {
        return Ok(0);
    }
    let mut moved = 0;
    for seq in info.state.first_sequence..=info.state.last_sequence {
        let Ok(m) = stream.get_raw_message(seq).await else {
            continue; // acked and removed
        };
        if topo.partition_of(&m.subject).is_none() {
            continue; // a schedule: moved already
        }
        let Ok(env) = serde_json::from_slice::<CommandEnvelope>(&m.payload) else {
            tracing::warn!(seq, "a command that does not decode is left out");
            continue;
        };
        let id = m
            .headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_owned())
            .unwrap_or_else(|| env.command_id().to_string());
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        headers.insert(
            "Nats-TTL",
            topo.effect_ttl.as_secs().max(1).to_string().as_str(),
        );
        js.publish_with_headers(
            topo.command_state_subject(&env, &id),
            headers,
            m.payload.clone(),
        )
        .await
        .map_err(|e| BusError::publish("move command", &e))?
        .await
        .map_err(|e| BusError::publish("move command", &e))?;
        moved += 1;
    }
    Ok(moved)
}

async fn refuse_live_workers(js: &jetstream::Context, topo: &Topology) -> Result<(), BusError> {
    let Ok(presence) = js.get_key_value(topo.presence_bucket()).await else {
        return Ok(());
    };
    let live = keys(&presence).await?;
    if live.is_empty() {
        return Ok(());
    }
    Err(BusError::permanent(
        "migrate",
        format!(
            "workers are running ({}): stop every Holdpoint process, then migrate",
            live.join(", ")
        ),
    ))
}

async fn keys(store: &kv::Store) -> Result<Vec<String>, BusError> {
    let mut out = Vec::new();
    let mut keys = match store.keys().await {
        Ok(k) => k.boxed(),
        Err(e) => return Err(BusError::transient("list keys", e)),
    };
    while let Some(k) = tokio::time::timeout(Duration::from_secs(10), keys.next())
        .await
        .map_err(|_| BusError::transient("list keys", "timed out"))?
    {
        out.push(k.map_err(|e| BusError::transient("list keys", e))?);
    }
    Ok(out)
}

async fn read(store: &kv::Store, kind: Bucket, key: &str) -> Result<Option<Old>, BusError> {
    let entry = store
        .entry(key)
        .await
        .map_err(|e| BusError::transient("read record", e))?;
    let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
        return Ok(None);
    };
    let corrupt = |e: serde_json::Error| BusError::Corrupt {
        key: key.to_owned(),
        message: e.to_string(),
    };
    let v = &entry.value;
    Ok(Some(match kind {
        Bucket::Interactions => {
            Old::Interaction(Box::new(serde_json::from_slice(v).map_err(corrupt)?))
        }
        Bucket::Tasks => Old::Task(serde_json::from_slice(v).map_err(corrupt)?),
        // `<org>.<session>` is a header, `<org>.<session>.<lane>` a lane.
        Bucket::Sessions if key.split('.').count() == 2 => {
            Old::Session(Box::new(serde_json::from_slice(v).map_err(corrupt)?))
        }
        Bucket::Sessions => Old::Lane(Box::new(serde_json::from_slice(v).map_err(corrupt)?)),
        Bucket::Rules => Old::Rule(serde_json::from_slice(v).map_err(corrupt)?),
        Bucket::Outcomes | Bucket::Webhooks => return Ok(None),
    }))
}

/// The `Nats-Msg-Id`s the events, audit and lanes streams hold from `since`.
async fn stored_ids(
    js: &jetstream::Context,
    topo: &Topology,
    since: OffsetDateTime,
) -> Result<HashSet<String>, BusError> {
    let mut ids = HashSet::new();
    for name in [
        topo.events_stream(),
        topo.audit_stream(),
        topo.lanes_stream(),
    ] {
        let Ok(stream) = js.get_stream(&name).await else {
            continue;
        };
        if stream.cached_info().state.messages == 0 {
            continue;
        }
        let c = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartTime { start_time: since },
                headers_only: true,
                ..Default::default()
            })
            .await
            .map_err(|e| BusError::transient("read stored ids", e))?;
        if c.cached_info().num_pending == 0 {
            continue;
        }
        let mut messages = c
            .messages()
            .await
            .map_err(|e| BusError::transient("read stored ids", e))?;
        while let Some(m) = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .map_err(|_| BusError::transient("read stored ids", "timed out"))?
        {
            let m = m.map_err(|e| BusError::transient("read stored ids", e))?;
            if let Some(id) = m.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")) {
                ids.insert(id.as_str().to_owned());
            }
            if m.info().map(|i| i.pending).unwrap_or(0) == 0 {
                break;
            }
        }
    }
    Ok(ids)
}

/// Each format-1 schedule in `HP_COMMANDS` (the last message of each `hp.sched.…`
/// subject, found by the stream's subject list: the work queue takes no ordered
/// consumer) with its state-stream subject.
async fn schedules(
    js: &jetstream::Context,
    topo: &Topology,
) -> Result<Vec<(String, async_nats::jetstream::message::StreamMessage)>, BusError> {
    let stream = js
        .get_stream(topo.commands_stream())
        .await
        .map_err(|e| BusError::transient("read schedules", e))?;
    let mut subjects = Vec::new();
    let mut listed = stream
        .info_with_subjects(topo.format1_schedules_subjects())
        .await
        .map_err(|e| BusError::transient("read schedules", e))?;
    while let Some(next) = listed.next().await {
        let (subject, _) = next.map_err(|e| BusError::transient("read schedules", e))?;
        subjects.push(subject);
    }
    let head = format!("{}.sched.", topo.subject_prefix);
    let mut out = Vec::new();
    for subject in subjects {
        let Some(rest) = subject.strip_prefix(&head) else {
            continue;
        };
        let m = stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .map_err(|e| BusError::transient("read schedules", e))?;
        out.push((format!("{}.fx.sched.{rest}", topo.subject_prefix), m));
    }
    Ok(out)
}

async fn schedule_subjects(
    js: &jetstream::Context,
    topo: &Topology,
) -> Result<HashSet<String>, BusError> {
    Ok(schedules(js, topo)
        .await?
        .into_iter()
        .map(|(s, _)| s)
        .collect())
}

/// Moves every format-1 schedule to the state stream and purges `hp.sched.>`.
async fn move_schedules(js: &jetstream::Context, topo: &Topology) -> Result<usize, BusError> {
    let found = schedules(js, topo).await?;
    let mut ids: HashMap<String, usize> = HashMap::new();
    for (subject, m) in &found {
        let Ok(env) = serde_json::from_slice::<CommandEnvelope>(&m.payload) else {
            tracing::warn!(%subject, "a schedule whose command does not decode is left out");
            continue;
        };
        let Some(at) = m.headers.get("Nats-Schedule") else {
            continue;
        };
        let n = ids.entry(subject.clone()).or_default();
        *n += 1;
        let id = format!(
            "sched-{}",
            &holdpoint_domain::digest(&[subject.as_str(), &n.to_string()])[..40]
        );
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Schedule", at.as_str());
        headers.insert(
            "Nats-Schedule-Target",
            topo.command_state_subject(&env, &id).as_str(),
        );
        js.publish_with_headers(subject.clone(), headers, m.payload.clone())
            .await
            .map_err(|e| BusError::publish("move schedule", &e))?
            .await
            .map_err(|e| BusError::publish("move schedule", &e))?;
    }
    let stream = js
        .get_stream(topo.commands_stream())
        .await
        .map_err(|e| BusError::transient("purge schedules", e))?;
    stream
        .purge()
        .filter(topo.format1_schedules_subjects())
        .await
        .map_err(|e| BusError::transient("purge schedules", e))?;
    Ok(found.len())
}

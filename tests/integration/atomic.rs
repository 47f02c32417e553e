//! Atomic batch publish on the pinned nats-server, through `holdpoint_bus::batch`:
//! the behaviours the one-write-per-decision commit path (ARCHITECTURE.md, "Where
//! the commit path goes next") stands on, each checked against a real server, so
//! that an upgrade that changes one of them fails here first.
//!
//! The layout mirrors the planned state stream: records on `hps.rec.…` (last per
//! subject, written with an expectation and a rollup), effects on `hps.fx.…`, and
//! the public streams sourcing the effects under their public subjects.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use futures::StreamExt as _;
use holdpoint_bus::Topology;
use holdpoint_bus::batch::{self, AtomicBatch, BatchError};
use holdpoint_tests::nats::{NatsServer, wait_for};

const STATE: &str = "T_STATE";
const EVENTS: &str = "T_EVENTS";
const COMMANDS: &str = "T_COMMANDS";

async fn state_stream(js: &jetstream::Context) -> stream::Stream {
    js.create_stream(stream::Config {
        name: STATE.into(),
        subjects: vec!["hps.>".into()],
        storage: stream::StorageType::File,
        allow_atomic_publish: true,
        allow_rollup: true,
        allow_direct: true,
        allow_message_ttl: true,
        allow_message_schedules: true,
        ..Default::default()
    })
    .await
    .expect("state stream")
}

/// A stream sourcing `hps.fx.evt.>` from the state stream as `hp.evt.>`.
async fn events_stream(js: &jetstream::Context) -> stream::Stream {
    js.create_stream(stream::Config {
        name: EVENTS.into(),
        storage: stream::StorageType::File,
        sources: Some(vec![stream::Source {
            name: STATE.into(),
            subject_transforms: vec![stream::SubjectTransform {
                source: "hps.fx.evt.>".into(),
                destination: "hp.evt.>".into(),
            }],
            ..Default::default()
        }]),
        ..Default::default()
    })
    .await
    .expect("events stream")
}

/// A fresh server, a client, its JetStream context and the state stream.
async fn fresh() -> (
    NatsServer,
    async_nats::Client,
    jetstream::Context,
    stream::Stream,
) {
    let nats = NatsServer::start().await;
    let client = nats.connect().await;
    let js = jetstream::new(client.clone());
    let state = state_stream(&js).await;
    (nats, client, js, state)
}

fn record(n: u64) -> Bytes {
    Bytes::from(format!("{{\"version\":{n}}}"))
}

fn msg_id(id: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("Nats-Msg-Id", id);
    h
}

/// One transition: the record at `expected`, then three events of task `t1`.
fn transition(expected: u64, version: u64) -> AtomicBatch {
    let mut b = AtomicBatch::new();
    b.record(
        "hps.rec.int.acme.i1",
        expected,
        HeaderMap::new(),
        record(version),
    )
    .expect("one write of the record");
    for name in ["interaction-resolved", "tool-call-finished", "task-status"] {
        b.effect(
            format!("hps.fx.evt.acme.t1.{name}"),
            msg_id(&format!("v{version}-{name}")),
            Bytes::from(format!("{{\"event\":\"{name}\",\"version\":{version}}}")),
        );
    }
    b
}

async fn messages(s: &mut stream::Stream) -> u64 {
    s.info().await.expect("stream info").state.messages
}

async fn last_record(s: &stream::Stream) -> (u64, Bytes) {
    let m = s
        .direct_get_last_for_subject("hps.rec.int.acme.i1")
        .await
        .expect("the record");
    (m.sequence, m.payload)
}

#[tokio::test]
async fn a_batch_stores_all_of_a_transition_or_none_of_it() {
    let (_nats, client, _js, mut state) = fresh().await;

    let first = batch::commit(&client, "t-1", &transition(0, 1))
        .await
        .expect("a record created with its events");
    assert_eq!((first.stream.as_str(), first.count), (STATE, 4));
    let (rec_seq, payload) = last_record(&state).await;
    assert_eq!(
        Some(rec_seq),
        first.sequence_of(0),
        "the batch is contiguous"
    );
    assert_eq!(payload, record(1));

    // A second writer that read the record before the first wrote it: its whole
    // batch is refused, events included.
    let stale = batch::commit(&client, "t-2", &transition(0, 2)).await;
    assert!(
        matches!(stale, Err(BatchError::Conflict(_))),
        "a stale expectation is a conflict: {stale:?}"
    );
    assert_eq!(
        messages(&mut state).await,
        4,
        "the refused batch stored nothing"
    );

    // The writer that holds the current sequence commits; the rollup keeps one
    // version of the record.
    let second = batch::commit(&client, "t-3", &transition(rec_seq, 2))
        .await
        .expect("the next version");
    assert_eq!(second.sequence_of(0), Some(first.last + 1));
    assert_eq!(last_record(&state).await.1, record(2));
    assert_eq!(
        messages(&mut state).await,
        7,
        "one record version and six events"
    );
}

#[tokio::test]
async fn a_retried_commit_stores_nothing_twice() {
    let (_nats, client, _js, mut state) = fresh().await;

    let t = transition(0, 1);
    batch::commit(&client, "r-1", &t)
        .await
        .expect("the first attempt");
    // The PubAck was lost, say, and the writer sends the same messages under a new
    // id: the record's expectation refuses it before any event id is looked at.
    let again = batch::commit(&client, "r-2", &t).await;
    assert!(
        matches!(again, Err(BatchError::Conflict(_))),
        "a committed batch sent again conflicts: {again:?}"
    );

    // Events alone (no record to guard them) are refused whole by their ids.
    let mut events_only = AtomicBatch::new();
    events_only
        .effect("hps.fx.evt.acme.t1.new", msg_id("fresh"), Bytes::from("{}"))
        .effect(
            "hps.fx.evt.acme.t1.task-status",
            msg_id("v1-task-status"),
            Bytes::from("{}"),
        );
    let dup = batch::commit(&client, "r-3", &events_only).await;
    assert!(
        matches!(dup, Err(BatchError::Duplicate(_))),
        "a known id refuses the whole batch: {dup:?}"
    );
    assert_eq!(
        messages(&mut state).await,
        4,
        "neither retry stored a message, not even the fresh event"
    );
}

#[tokio::test]
async fn a_batch_split_over_two_streams_stores_nothing() {
    let (_nats, client, js, mut state) = fresh().await;
    let mut other = js
        .create_stream(stream::Config {
            name: "T_OTHER".into(),
            subjects: vec!["other.>".into()],
            allow_atomic_publish: true,
            ..Default::default()
        })
        .await
        .expect("a second stream");

    let mut split = AtomicBatch::new();
    split
        .effect("hps.fx.evt.acme.t1.a", HeaderMap::new(), Bytes::from("{}"))
        .effect("other.b", HeaderMap::new(), Bytes::from("{}"));
    let err = batch::commit(&client, "s-1", &split).await;
    assert!(
        matches!(err, Err(BatchError::Abandoned(_))),
        "a commit without its start is incomplete: {err:?}"
    );
    assert_eq!(messages(&mut state).await, 0);
    assert_eq!(messages(&mut other).await, 0);

    // A batch no stream takes is abandoned too: nothing answered its commit.
    let mut nowhere = AtomicBatch::new();
    nowhere.effect("nowhere.a", HeaderMap::new(), Bytes::from("{}"));
    let err = batch::commit(&client, "s-2", &nowhere).await;
    assert!(
        matches!(err, Err(BatchError::Abandoned(_))),
        "no responder is abandoned: {err:?}"
    );
}

#[tokio::test]
async fn a_stream_without_atomic_publish_refuses_for_good() {
    let (_nats, client, js, _state) = fresh().await;
    js.create_stream(stream::Config {
        name: "T_PLAIN".into(),
        subjects: vec!["plain.>".into()],
        ..Default::default()
    })
    .await
    .expect("a plain stream");
    let mut b = AtomicBatch::new();
    b.effect("plain.a", HeaderMap::new(), Bytes::from("{}"));
    let err = batch::commit(&client, "p-1", &b)
        .await
        .expect_err("atomic publish is off");
    assert!(
        matches!(err, BatchError::Refused { code: 10174, .. }),
        "disabled is a refusal: {err:?}"
    );
    assert_eq!(
        batch::next_step(&err, 1, 1),
        batch::Step::GiveUp,
        "and retrying cannot help"
    );
}

/// Effects reach the public streams by sourcing, under their public subjects,
/// without the batch headers, and only once their batch committed; the stream's
/// own `partition()` transform places a sourced command as it places a published
/// one.
#[tokio::test]
async fn sourced_streams_get_committed_effects_only() {
    let (_nats, client, js, state) = fresh().await;
    let events = events_stream(&js).await;
    let topo = Topology::default();
    let (cmd_in, cmd_out) = topo.command_transform();
    let commands = js
        .create_stream(stream::Config {
            name: COMMANDS.into(),
            storage: stream::StorageType::File,
            subject_transform: Some(stream::SubjectTransform {
                source: cmd_in,
                destination: cmd_out,
            }),
            sources: Some(vec![stream::Source {
                name: STATE.into(),
                subject_transforms: vec![stream::SubjectTransform {
                    source: "hps.fx.cmd.>".into(),
                    destination: format!("{}.cmd.>", topo.subject_prefix),
                }],
                ..Default::default()
            }]),
            ..Default::default()
        })
        .await
        .expect("commands stream");

    let mut t = transition(0, 1);
    t.effect(
        "hps.fx.cmd.acme.t1.expire",
        HeaderMap::new(),
        Bytes::from("{}"),
    );
    batch::commit(&client, "src-1", &t)
        .await
        .expect("the transition");
    // A zombie's batch, refused on its expectation, must leave no trace downstream.
    let zombie = batch::commit(&client, "src-2", &transition(0, 9)).await;
    assert!(matches!(zombie, Err(BatchError::Conflict(_))));

    wait_for(Duration::from_secs(10), "the three events sourced", || {
        let mut events = events.clone();
        async move { (messages(&mut events).await == 3).then_some(()) }
    })
    .await;
    let consumer = events
        .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
        .await
        .expect("reader");
    let mut read = consumer.messages().await.expect("messages");
    for name in ["interaction-resolved", "tool-call-finished", "task-status"] {
        let m = tokio::time::timeout(Duration::from_secs(5), read.next())
            .await
            .expect("an event within 5 s")
            .expect("a message")
            .expect("no error");
        assert_eq!(m.subject.as_str(), format!("hp.evt.acme.t1.{name}"));
        let headers = m.headers.clone().unwrap_or_default();
        for h in [
            batch::BATCH_ID,
            batch::BATCH_SEQUENCE,
            batch::BATCH_COMMIT,
            batch::EXPECTED_LAST_SUBJECT_SEQUENCE,
        ] {
            assert!(headers.get(h).is_none(), "sourcing strips {h}");
        }
        assert!(
            !String::from_utf8_lossy(&m.payload).contains("\"version\":9"),
            "nothing of the zombie's batch"
        );
    }

    wait_for(Duration::from_secs(10), "the command sourced", || {
        let mut commands = commands.clone();
        async move { (messages(&mut commands).await == 1).then_some(()) }
    })
    .await;
    let stored = commands
        .get_raw_message(1)
        .await
        .expect("the sourced command");
    let p = topo
        .partition_of(stored.subject.as_str())
        .expect("the stored command subject carries a partition");
    assert_eq!(
        stored.subject.as_str(),
        format!("{}.cmd.{p}.acme.t1.expire", topo.subject_prefix)
    );
    drop(state);
}

/// A deadline written in the same batch as its record: a message schedule whose
/// target is a command subject of the state stream fires once, at its time, and
/// the per-message TTL of an effect is accepted inside a batch.
#[tokio::test]
async fn a_schedule_in_a_batch_fires_into_the_stream() {
    let (_nats, client, _js, state) = fresh().await;

    let at = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
    let at = at
        .replace_nanosecond(0)
        .expect("whole seconds")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339");
    let mut t = transition(0, 1);
    let mut sched = HeaderMap::new();
    sched.insert("Nats-Schedule", format!("@at {at}").as_str());
    sched.insert("Nats-Schedule-Target", "hps.fx.cmd.acme.t1.expire");
    t.effect(
        "hps.sched.acme.i1.expire",
        sched,
        Bytes::from("{\"expire\":true}"),
    );
    let mut ttl = HeaderMap::new();
    ttl.insert("Nats-TTL", "1h");
    t.effect("hps.fx.audit.acme", ttl, Bytes::from("{}"));
    batch::commit(&client, "sch-1", &t)
        .await
        .expect("a transition with its schedule");
    assert!(
        state
            .direct_get_last_for_subject("hps.fx.cmd.acme.t1.expire")
            .await
            .is_err(),
        "the schedule has not fired before its time"
    );

    let fired = wait_for(Duration::from_secs(15), "the scheduled command", || {
        let state = state.clone();
        async move {
            state
                .direct_get_last_for_subject("hps.fx.cmd.acme.t1.expire")
                .await
                .ok()
        }
    })
    .await;
    assert_eq!(fired.payload, Bytes::from("{\"expire\":true}"));
}

/// The stream's limit of open batches (50 by default): a batch started beyond it
/// is refused at its first message, which asks for no reply, so its commit comes
/// back as abandoned, and a resend after the open ones end commits.
#[tokio::test]
async fn a_batch_beyond_the_open_batch_limit_is_abandoned_and_a_resend_commits() {
    let (_nats, client, _js, mut state) = fresh().await;

    // Fifty batches started and left open.
    for i in 0..50 {
        let mut h = HeaderMap::new();
        h.insert(batch::BATCH_ID, format!("open-{i}").as_str());
        h.insert(batch::BATCH_SEQUENCE, "1");
        client
            .publish_with_headers(format!("hps.fx.evt.acme.t{i}.x"), h, Bytes::from("{}"))
            .await
            .expect("a first message");
    }
    client.flush().await.expect("flushed");
    let t = transition(0, 1);
    let err = batch::commit(&client, "over", &t)
        .await
        .expect_err("the fifty-first open batch");
    assert!(
        matches!(err, BatchError::Abandoned(_)),
        "a batch refused at its start is incomplete at its commit: {err:?}"
    );
    assert_eq!(batch::next_step(&err, 1, 1), batch::Step::Resend);
    assert_eq!(messages(&mut state).await, 0, "nothing of it was stored");

    // Committing the open ones frees the slots.
    for i in 0..50 {
        let mut h = HeaderMap::new();
        h.insert(batch::BATCH_ID, format!("open-{i}").as_str());
        h.insert(batch::BATCH_SEQUENCE, "2");
        h.insert(batch::BATCH_COMMIT, "1");
        client
            .request_with_headers(format!("hps.fx.evt.acme.t{i}.y"), h, Bytes::from("{}"))
            .await
            .expect("a commit");
    }
    let done = batch::commit(&client, "over-2", &t)
        .await
        .expect("the resend commits");
    assert_eq!(done.count, 4);
}

/// On a replicated stream, a leader change between a batch's messages abandons the
/// batch (nothing stored), and the whole batch resent under a new id commits once
/// on the new leader.
#[tokio::test]
async fn on_r3_a_leader_change_abandons_a_batch_and_a_resend_commits() {
    use holdpoint_tests::nats::NatsCluster;
    let cluster = NatsCluster::start().await;
    let client = cluster.connect().await;
    let js = jetstream::new(client.clone());
    let mut state = js
        .create_stream(stream::Config {
            name: STATE.into(),
            subjects: vec!["hps.>".into()],
            storage: stream::StorageType::File,
            num_replicas: 3,
            allow_atomic_publish: true,
            allow_rollup: true,
            allow_direct: true,
            ..Default::default()
        })
        .await
        .expect("an R3 state stream");
    // A new R3 stream takes a moment to elect its leader; until then a commit
    // finds no responder and is resent.
    let first = batch::commit_resending(&client, "r3-1", &transition(0, 1), 1)
        .await
        .expect("a commit on R3");
    let rec = first.sequence_of(0).expect("the record's sequence");

    // A batch half sent, then the leader steps down.
    let t = transition(rec, 2);
    let (head, _) = t.messages().split_at(2);
    for (i, m) in head.iter().enumerate() {
        let mut h = m.headers.clone();
        h.insert(batch::BATCH_ID, "r3-half");
        h.insert(batch::BATCH_SEQUENCE, (i + 1).to_string().as_str());
        client
            .publish_with_headers(m.subject.clone(), h, m.payload.clone())
            .await
            .expect("a staged message");
    }
    client.flush().await.expect("flushed");
    let leader = |s: stream::Info| s.cluster.and_then(|c| c.leader);
    let before = leader(state.info().await.expect("info").clone());
    let down: serde_json::Value = js
        .request(format!("STREAM.LEADER.STEPDOWN.{STATE}"), &())
        .await
        .expect("a stepdown");
    assert_eq!(down["success"], serde_json::json!(true), "{down}");
    wait_for(Duration::from_secs(20), "a new stream leader", || {
        let mut state = state.clone();
        let before = before.clone();
        async move {
            let now = state.info().await.ok().and_then(|i| leader(i.clone()))?;
            (Some(&now) != before.as_ref()).then_some(())
        }
    })
    .await;
    let mut h = t.messages()[2].headers.clone();
    h.insert(batch::BATCH_ID, "r3-half");
    h.insert(batch::BATCH_SEQUENCE, "3");
    h.insert(batch::BATCH_COMMIT, "1");
    // The late commit finds either the new leader, which never saw the batch
    // start (10176), or, while the new leader settles, no responder at all.
    match client
        .request_with_headers(t.messages()[2].subject.clone(), h, Bytes::new())
        .await
    {
        Ok(reply) => {
            let answer: serde_json::Value =
                serde_json::from_slice(&reply.payload).expect("a JSON reply");
            assert_eq!(
                answer["error"]["err_code"],
                serde_json::json!(10176),
                "the staged half died with the old leader: {answer}"
            );
        }
        Err(e) => assert_eq!(
            e.kind(),
            async_nats::RequestErrorKind::NoResponders,
            "the late commit: {e}"
        ),
    }
    let stored = wait_for(Duration::from_secs(10), "the stream's state", || {
        let mut state = state.clone();
        async move { state.info().await.ok().map(|i| i.state.messages) }
    })
    .await;
    assert_eq!(stored, 4, "nothing of it was stored");

    let done = batch::commit_resending(&client, "r3-2", &t, 1)
        .await
        .expect("the whole batch resent commits on the new leader");
    assert_eq!(done.count, 4);
    // A direct get may be answered by a replica that has not applied the commit
    // yet; the leader's answer is the committed state.
    let on_leader = state
        .get_last_raw_message_by_subject("hps.rec.int.acme.i1")
        .await
        .expect("the record, from the leader");
    assert_eq!(on_leader.payload, record(2));
    assert_eq!(Some(on_leader.sequence), done.sequence_of(0));
}

/// Effects on subjects of their own (the event id a token of the subject), so the
/// state stream's per-subject limit, there for the records, never removes an
/// effect a sourcing stream has not read yet; the sourcing stream's transform
/// drops the id token to give the public subject.
#[tokio::test]
async fn a_sourcing_transform_drops_the_effect_id_token() {
    let nats = NatsServer::start().await;
    let client = nats.connect().await;
    let js = jetstream::new(client.clone());
    js.create_stream(stream::Config {
        name: STATE.into(),
        subjects: vec!["hps.>".into()],
        storage: stream::StorageType::File,
        allow_atomic_publish: true,
        allow_rollup: true,
        allow_direct: true,
        // One message per subject: a record's last write is all the stream keeps.
        max_messages_per_subject: 1,
        ..Default::default()
    })
    .await
    .expect("state stream");
    let events = js
        .create_stream(stream::Config {
            name: EVENTS.into(),
            storage: stream::StorageType::File,
            sources: Some(vec![stream::Source {
                name: STATE.into(),
                subject_transforms: vec![stream::SubjectTransform {
                    source: "hps.fx.evt.*.*.*.*".into(),
                    destination: "hp.evt.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(4)}}".into(),
                }],
                ..Default::default()
            }]),
            ..Default::default()
        })
        .await
        .expect("a sourcing stream whose transform drops a token");

    // Two transitions of the record, each with an `interaction-resolved` of its own
    // id: both effects stay (their subjects differ), the record keeps its last.
    // The record is the first message of each batch: 1, then 4.
    for (version, expected) in [(1u64, 0u64), (2, 1)] {
        let mut b = AtomicBatch::new();
        b.record(
            "hps.rec.int.acme.i1",
            expected,
            HeaderMap::new(),
            record(version),
        )
        .expect("one write of the record");
        for name in ["interaction-resolved", "task-status"] {
            b.effect(
                format!("hps.fx.evt.acme.t1.e{version}x.{name}"),
                msg_id(&format!("e{version}-{name}")),
                Bytes::from(format!("{{\"event\":\"{name}\",\"version\":{version}}}")),
            );
        }
        let c = batch::commit(&client, &format!("drop-{version}"), &b)
            .await
            .expect("the transition");
        assert_eq!(c.count, 3);
    }
    let mut state = js.get_stream(STATE).await.expect("state");
    assert_eq!(
        messages(&mut state).await,
        5,
        "the record's last write and all four effects"
    );
    wait_for(Duration::from_secs(10), "the four events sourced", || {
        let mut events = events.clone();
        async move { (messages(&mut events).await == 4).then_some(()) }
    })
    .await;
    let mut subjects = Vec::new();
    for seq in 1..=4 {
        let m = events.get_raw_message(seq).await.expect("a sourced event");
        subjects.push(m.subject.to_string());
    }
    assert_eq!(
        subjects,
        [
            "hp.evt.acme.t1.interaction-resolved",
            "hp.evt.acme.t1.task-status",
            "hp.evt.acme.t1.interaction-resolved",
            "hp.evt.acme.t1.task-status",
        ]
    );
}

/// What `holdpoint migrate` needs to know about an effect the relay already
/// published: a stream that sources from the state stream and also takes direct
/// publishes (as the public streams do during the cutover), and that stored a
/// `Nats-Msg-Id` inside its duplicate window, drops a sourced copy under the same
/// id, as it drops a published one.
#[tokio::test]
async fn a_sourced_copy_of_an_id_already_stored_is_dropped_inside_the_window() {
    let (_nats, client, js, _state) = fresh().await;
    let events = js
        .create_stream(stream::Config {
            name: EVENTS.into(),
            subjects: vec!["hp.evt.>".into()],
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            sources: Some(vec![stream::Source {
                name: STATE.into(),
                subject_transforms: vec![stream::SubjectTransform {
                    source: "hps.fx.evt.>".into(),
                    destination: "hp.evt.>".into(),
                }],
                ..Default::default()
            }]),
            ..Default::default()
        })
        .await
        .expect("events stream with subjects and a source");
    // The relay's copy, published directly.
    js.publish_with_headers(
        "hp.evt.acme.t1.interaction-resolved",
        msg_id("v1-interaction-resolved"),
        Bytes::from_static(b"{\"relay\":true}"),
    )
    .await
    .expect("publish")
    .await
    .expect("the relay's copy stored");
    // A direct publish under the same id inside the window is dropped, as always.
    let again = js
        .publish_with_headers(
            "hp.evt.acme.t1.interaction-resolved",
            msg_id("v1-interaction-resolved"),
            Bytes::from_static(b"{\"relay\":true}"),
        )
        .await
        .expect("publish")
        .await
        .expect("PubAck");
    assert!(
        again.duplicate,
        "a direct copy inside the window is a duplicate"
    );
    // The same effect committed in the state stream and sourced.
    batch::commit(&client, "migrate-1", &transition(0, 1))
        .await
        .expect("the transition");
    wait_for(Duration::from_secs(10), "the sourced events", || {
        let mut events = events.clone();
        async move { (messages(&mut events).await >= 3).then_some(()) }
    })
    .await;
    // Then until the source has nothing left to deliver, so the count is final
    // whichever way the server decides.
    wait_for(Duration::from_secs(10), "every sourced effect", || {
        let events = events.clone();
        async move {
            let info = events.get_info().await.ok()?;
            let sourced = info
                .sources
                .iter()
                .find(|s| s.name == STATE)
                .map(|s| s.lag)?;
            (sourced == 0).then_some(info.state.messages)
        }
    })
    .await;
    let mut subjects = Vec::new();
    for seq in 1..=4 {
        match events.get_raw_message(seq).await {
            Ok(m) => subjects.push((m.subject.to_string(), m.payload)),
            Err(_) => continue,
        }
    }
    assert_eq!(
        subjects.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        [
            "hp.evt.acme.t1.interaction-resolved",
            "hp.evt.acme.t1.tool-call-finished",
            "hp.evt.acme.t1.task-status",
        ],
        "the sourced copy of the relay's id is not stored"
    );
    assert_eq!(subjects[0].1, Bytes::from_static(b"{\"relay\":true}"));
}

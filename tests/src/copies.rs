//! Counting copies: every effect Holdpoint stores in a public stream (an event in
//! `HP_EVENTS`, an audit record in `HP_AUDIT`, a lane message in `HP_LANES`) must
//! be there once, whatever happened on the way (kills, server restarts, idle
//! periods past the duplicate window, node loss). Each effect carries its own
//! `Nats-Msg-Id` (the event's id, the audit record's id, the lane message's
//! `lane-…` id), which sourcing keeps; [`count`] reads every message of the three
//! streams and counts them per id.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream::consumer;
use futures::StreamExt as _;
use holdpoint_bus::Bus;

/// Copies per `Nats-Msg-Id` in each public stream, and the messages without one.
#[derive(Debug, Default)]
pub struct Copies {
    /// Per stream name: id → sequences it is stored at.
    pub streams: BTreeMap<String, BTreeMap<String, Vec<u64>>>,
    /// Per stream name: sequences of messages that carry no `Nats-Msg-Id`.
    pub without_id: BTreeMap<String, Vec<u64>>,
}

impl Copies {
    /// Messages counted in `stream`.
    pub fn messages(&self, stream: &str) -> usize {
        self.streams
            .get(stream)
            .map_or(0, |ids| ids.values().map(Vec::len).sum())
            + self.without_id.get(stream).map_or(0, Vec::len)
    }

    /// Every id stored more than once, as `stream id [sequences]`.
    pub fn twice(&self) -> Vec<String> {
        self.streams
            .iter()
            .flat_map(|(stream, ids)| {
                ids.iter()
                    .filter(|(_, seqs)| seqs.len() > 1)
                    .map(move |(id, seqs)| format!("{stream} {id} {seqs:?}"))
            })
            .collect()
    }

    /// Panics naming every id stored twice and every message without an id.
    ///
    /// # Panics
    ///
    /// When any stream holds a copy too many, or a message without `Nats-Msg-Id`.
    pub fn assert_each_once(&self) {
        let twice = self.twice();
        assert!(
            twice.is_empty(),
            "stored more than once ({}):\n{}",
            twice.len(),
            twice.join("\n")
        );
        let bare: Vec<String> = self
            .without_id
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|(stream, s)| format!("{stream} {s:?}"))
            .collect();
        assert!(bare.is_empty(), "messages without Nats-Msg-Id: {bare:?}");
    }
}

impl std::fmt::Display for Copies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self
            .streams
            .iter()
            .map(|(s, ids)| format!("{s}: {} messages, {} ids", self.messages(s), ids.len()))
            .collect();
        write!(f, "copies: {}", each.join("; "))
    }
}

/// Reads every message of the events, audit and lanes streams once the public
/// streams have sourced everything committed (at most 30 s), and counts them per
/// `Nats-Msg-Id`.
///
/// # Panics
///
/// When the streams cannot be read, or sourcing does not catch up in 30 s.
pub async fn count(bus: &Bus) -> Copies {
    crate::nats::wait_bus_sourced(bus, Duration::from_secs(30)).await;
    let mut copies = Copies::default();
    for name in [
        bus.topo.events_stream(),
        bus.topo.audit_stream(),
        bus.topo.lanes_stream(),
    ] {
        let ids = copies.streams.entry(name.clone()).or_default();
        let bare = copies.without_id.entry(name.clone()).or_default();
        let stream = bus.js.get_stream(&name).await.expect("stream");
        let c: consumer::Consumer<consumer::pull::OrderedConfig> = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .expect("consumer");
        if c.cached_info().num_pending == 0 {
            continue;
        }
        let mut messages = c.messages().await.expect("messages");
        while let Some(m) = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .expect("read timed out")
        {
            let m = m.expect("message");
            let info = m.info().expect("a JetStream message");
            let (seq, pending) = (info.stream_sequence, info.pending);
            match m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|v| v.as_str().to_owned())
            {
                Some(id) => ids.entry(id).or_default().push(seq),
                None => bare.push(seq),
            }
            if pending == 0 {
                break;
            }
        }
    }
    copies
}

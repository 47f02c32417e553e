//! How long nats-server's stream sourcing takes to pick up again after the
//! source stream's leader is SIGKILLed, with no Holdpoint involved: a minimal
//! reproduction for RELIABILITY.md ("Effect delay per fault").
//!
//! Two R3 streams on a 3-node cluster: `SRC` takes publishes, `DST` sources it.
//! `DST`'s leader is kept off `SRC`'s leader, so the kill takes away only the
//! node the sourcing consumer lives on. A publisher stores a message every 20 ms
//! (retrying through the election). The test checks that `DST` holds each message
//! once and prints the longest delay from a message's PubAck to its storing in
//! `DST` (the stored timestamp), once with the server's own (ephemeral) source consumer and once with a
//! durable one (ADR-58: an R3 push consumer with `AckPolicy::FlowControl`, which
//! fails over with the source stream instead of being made again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use holdpoint_tests::nats::{NatsCluster, NatsClusterOptions, wait_for};

async fn leader(js: &jetstream::Context, name: &str) -> Option<String> {
    let mut s = js.get_stream(name).await.ok()?;
    s.info().await.ok()?.cluster.as_ref()?.leader.clone()
}

async fn step_down(client: &async_nats::Client, name: &str) {
    let _ = client
        .request(
            format!("$JS.API.STREAM.LEADER.STEPDOWN.{name}"),
            Vec::new().into(),
        )
        .await;
}

/// The longest PubAck-to-arrival delay across a kill of `SRC`'s leader.
async fn longest_delay_across_a_source_leader_kill(durable: bool) -> Duration {
    let mut nats = NatsCluster::start_with(NatsClusterOptions { sync_always: true }).await;
    let client = async_nats::connect(nats.urls()).await.expect("connect");
    let js = jetstream::new(client.clone());
    js.create_stream(stream::Config {
        name: "SRC".into(),
        subjects: vec!["src.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("SRC");
    let source = if durable {
        let src = js.get_stream("SRC").await.expect("SRC");
        src.create_consumer(consumer::push::Config {
            durable_name: Some("TO_DST".into()),
            name: Some("TO_DST".into()),
            deliver_subject: "_sourcing.dst".into(),
            ack_policy: consumer::AckPolicy::FlowControl,
            flow_control: true,
            idle_heartbeat: Duration::from_secs(1),
            max_deliver: -1,
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .expect("durable source consumer");
        stream::Source {
            name: "SRC".into(),
            consumer: Some(stream::StreamConsumerSource::new("TO_DST", "_sourcing.dst")),
            ..Default::default()
        }
    } else {
        stream::Source {
            name: "SRC".into(),
            ..Default::default()
        }
    };
    js.create_stream(stream::Config {
        name: "DST".into(),
        num_replicas: 3,
        sources: Some(vec![source]),
        ..Default::default()
    })
    .await
    .expect("DST");
    // Keep the two leaders apart.
    wait_for(
        Duration::from_secs(60),
        "SRC and DST led by different nodes",
        || {
            let (js, client) = (js.clone(), client.clone());
            async move {
                let (s, d) = (leader(&js, "SRC").await?, leader(&js, "DST").await?);
                if s == d {
                    step_down(&client, "SRC").await;
                    return None;
                }
                Some(())
            }
        },
    )
    .await;

    // When each publish was acknowledged (wall clock: the servers stamp what they
    // store with the same machine's clock).
    let acked: Arc<Mutex<HashMap<u64, time::OffsetDateTime>>> = Arc::default();
    let publisher = {
        let acked = acked.clone();
        let js = js.clone();
        tokio::spawn(async move {
            for n in 0u64.. {
                loop {
                    // The id makes a retry after a lost PubAck a duplicate.
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert("Nats-Msg-Id", n.to_string().as_str());
                    let sent = js
                        .publish_with_headers("src.x", headers, n.to_string().into())
                        .await;
                    if let Ok(ack) = sent
                        && ack.await.is_ok()
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let now = time::OffsetDateTime::now_utc();
                acked.lock().expect("lock").insert(n, now);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = leader(&js, "SRC").await.expect("SRC leader");
    let i = nats.index_of(&victim).expect("victim index");
    nats.kill(i).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    publisher.abort();
    let acked = acked.lock().expect("lock").clone();
    let last = acked.keys().copied().max().expect("some acked");
    let src_last = {
        let mut src = js.get_stream("SRC").await.expect("SRC");
        src.info().await.expect("SRC info").state.last_sequence
    };
    let mut dst = js.get_stream("DST").await.expect("DST");
    wait_for(Duration::from_secs(120), "DST to source all of SRC", || {
        let mut dst = dst.clone();
        async move {
            let stored = dst.info().await.ok()?.state.messages;
            (stored >= src_last).then_some(())
        }
    })
    .await;
    let stored = dst.info().await.expect("DST info").state.last_sequence;
    let mut seen: HashMap<u64, time::OffsetDateTime> = HashMap::new();
    for seq in 1..=stored {
        let m = dst.get_raw_message(seq).await.expect("a DST message");
        let n: u64 = std::str::from_utf8(&m.payload)
            .expect("utf-8")
            .parse()
            .expect("a number");
        assert!(seen.insert(n, m.time).is_none(), "DST stored {n} twice");
    }
    (0..=last)
        .map(|n| {
            let at = seen.get(&n).unwrap_or_else(|| panic!("DST lacks {n}"));
            Duration::try_from(*at - acked[&n]).unwrap_or_default()
        })
        .max()
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "a measurement of nats-server, not of Holdpoint"]
async fn sourcing_resumes_after_the_source_leader_is_killed() {
    for durable in [false, true] {
        let d = longest_delay_across_a_source_leader_kill(durable).await;
        println!(
            "{} source consumer: longest PubAck-to-DST delay {d:?}",
            if durable { "durable" } else { "ephemeral" }
        );
    }
}

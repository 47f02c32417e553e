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
//!
//! A second measurement takes the delay from PubAck to a sourced copy on one
//! nats-server at steady rates, with and without `sync_interval: always`: it is
//! what BENCHMARKS.md ("The tool-call-finished tail, explained") compares
//! Holdpoint's own event delay with.

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

/// Delay percentiles, in milliseconds, from sending each message to `SRC` to its
/// storing in each of `dsts` sourcing streams, with `SRC` taking `rate`
/// messages/s for `seconds` (open loop) on one nats-server.
async fn sourcing_delay_at_a_rate(
    sync_always: bool,
    durable: bool,
    dsts: usize,
    rate: u64,
    seconds: u64,
) -> [f64; 4] {
    use holdpoint_tests::nats::{NatsServer, NatsServerOptions};
    let nats = NatsServer::start_with(NatsServerOptions::default().sync_always(sync_always)).await;
    let client = nats.connect().await;
    let js = jetstream::new(client.clone());
    let src = js
        .create_stream(stream::Config {
            name: "SRC".into(),
            subjects: vec!["src.>".into()],
            ..Default::default()
        })
        .await
        .expect("SRC");
    for d in 0..dsts {
        let filter = format!("src.{d}");
        let source = if durable {
            let name = format!("TO_DST{d}");
            let deliver = format!("_sourcing.dst{d}");
            src.create_consumer(consumer::push::Config {
                durable_name: Some(name.clone()),
                name: Some(name.clone()),
                deliver_subject: deliver.clone(),
                ack_policy: consumer::AckPolicy::FlowControl,
                flow_control: true,
                idle_heartbeat: Duration::from_secs(1),
                max_deliver: -1,
                filter_subject: filter,
                ..Default::default()
            })
            .await
            .expect("durable source consumer");
            stream::Source {
                name: "SRC".into(),
                consumer: Some(stream::StreamConsumerSource::new(&name, &deliver)),
                ..Default::default()
            }
        } else {
            stream::Source {
                name: "SRC".into(),
                filter_subject: Some(filter),
                ..Default::default()
            }
        };
        js.create_stream(stream::Config {
            name: format!("DST{d}"),
            sources: Some(vec![source]),
            ..Default::default()
        })
        .await
        .expect("DST");
    }
    let total = rate * seconds;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let start = tokio::time::Instant::now();
    // When each message was sent (wall clock: the server stamps what it stores
    // with the same machine's clock), and every PubAck checked.
    let mut sent = Vec::with_capacity(total as usize);
    let mut acks = Vec::with_capacity(total as usize);
    for n in 0..total {
        tokio::time::sleep_until(start + period * n as u32).await;
        let subject = format!("src.{}", n % dsts as u64);
        sent.push(time::OffsetDateTime::now_utc());
        let ack = js
            .publish(subject, n.to_string().into())
            .await
            .expect("publish");
        acks.push(tokio::spawn(async move { ack.await.map(|_| ()) }));
    }
    for ack in acks {
        ack.await.expect("ack task").expect("PubAck");
    }
    let mut delays = Vec::new();
    for d in 0..dsts {
        let mut dst = js.get_stream(format!("DST{d}")).await.expect("DST");
        let want = total / dsts as u64 + u64::from(total % dsts as u64 > d as u64);
        wait_for(Duration::from_secs(120), "DST to source all of SRC", || {
            let mut dst = dst.clone();
            async move { (dst.info().await.ok()?.state.messages >= want).then_some(()) }
        })
        .await;
        for seq in 1..=want {
            let m = dst.get_raw_message(seq).await.expect("a DST message");
            let n: usize = std::str::from_utf8(&m.payload)
                .expect("utf-8")
                .parse()
                .expect("a number");
            // The first second's messages may come before the source is set up.
            if n as u64 >= rate {
                delays.push((m.time - sent[n]).as_seconds_f64() * 1000.0);
            }
        }
        let _ = dst.info().await;
    }
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q) as usize];
    [at(0.5), at(0.9), at(0.99), at(1.0)]
}

#[tokio::test]
#[ignore = "a measurement of nats-server, not of Holdpoint"]
async fn sourcing_delay_by_rate_with_sync_always() {
    for (sync, durable, dsts) in [(true, true, 4), (true, false, 4), (false, true, 4)] {
        for rate in [50, 250, 1000] {
            let [p50, p90, p99, max] = sourcing_delay_at_a_rate(sync, durable, dsts, rate, 6).await;
            println!(
                "sync_always={sync} durable={durable} sourcing streams={dsts} rate={rate}/s: \
                 publish->sourced copy stored p50 {p50:.1} p90 {p90:.1} p99 {p99:.1} max {max:.1} ms"
            );
        }
    }
}

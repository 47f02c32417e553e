//! The raw JetStream baseline: asynchronous publish with `Nats-Msg-Id`, then
//! synchronous publish, on a stream configured like `HP_COMMANDS`.

#[allow(unused_imports)]
use super::*;

#[derive(Debug, Default, Clone)]
pub(crate) struct Raw {
    pub(crate) async_rate: f64,
    pub(crate) sync_rate: f64,
    pub(crate) sync_p50: u64,
    pub(crate) sync_p99: u64,
}

pub(crate) async fn raw_baseline(url: &str, plan: &Plan, replicas: usize) -> anyhow::Result<Raw> {
    let client = async_nats::ConnectOptions::new()
        .connect(url.split(',').map(str::trim).collect::<Vec<_>>())
        .await?;
    let js = jetstream::new(client);
    js.create_stream(stream::Config {
        name: "BENCH_RAW".into(),
        subjects: vec!["bench.raw.>".into()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: Duration::from_secs(120),
        num_replicas: replicas,
        ..Default::default()
    })
    .await?;
    let payload = bytes::Bytes::from(vec![b'x'; 128]);
    let pb = bar(
        plan.raw_async as u64,
        "raw JetStream async publish + Nats-Msg-Id",
    );
    let started = Instant::now();
    let mut inflight = FuturesUnordered::new();
    for i in 0..plan.raw_async {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("a-{i}").as_str());
        let ack = js
            .publish_with_headers(format!("bench.raw.{}", i % 16), h, payload.clone())
            .await?;
        inflight.push(ack.into_future());
        while inflight.len() >= 4096 {
            if let Some(r) = inflight.next().await {
                r?;
                pb.inc(1);
            }
        }
    }
    while let Some(r) = inflight.next().await {
        r?;
        pb.inc(1);
    }
    let async_rate = plan.raw_async as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let pb = bar(plan.raw_sync as u64, "raw JetStream sync publish");
    let mut h = hist();
    let started = Instant::now();
    for i in 0..plan.raw_sync {
        let mut hd = async_nats::HeaderMap::new();
        hd.insert("Nats-Msg-Id", format!("s-{i}").as_str());
        let t = Instant::now();
        js.publish_with_headers("bench.raw.sync", hd, payload.clone())
            .await?
            .await?;
        h.record(t.elapsed().as_micros() as u64).ok();
        pb.inc(1);
    }
    let sync_rate = plan.raw_sync as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(Raw {
        async_rate,
        sync_rate,
        sync_p50: h.value_at_quantile(0.5),
        sync_p99: h.value_at_quantile(0.99),
    })
}

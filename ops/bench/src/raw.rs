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

/// The commit path's own ceiling, measured on the same server as the raw baseline:
/// a transition is one record written by compare-and-set (`Nats-Expected-Last-
/// Subject-Sequence`, rollup) plus three 350-byte events, on one stream that
/// allows atomic publish.
#[derive(Debug, Default, Clone)]
pub(crate) struct Commits {
    /// Transitions/s as four separate publishes each (four PubAcks).
    pub(crate) separate: f64,
    /// Transitions/s as atomic batches of [`GROUP`] transitions (one PubAck per
    /// batch, `holdpoint_bus::batch`).
    pub(crate) grouped: f64,
}

/// Transitions per atomic batch in [`commit_baseline`].
pub(crate) const GROUP: usize = 32;
/// Records written in turn; a round writes each once.
const RECORDS: usize = 256;

pub(crate) async fn commit_baseline(
    url: &str,
    plan: &Plan,
    replicas: usize,
) -> anyhow::Result<Commits> {
    use holdpoint_bus::batch::{self, AtomicBatch};
    let client = async_nats::ConnectOptions::new()
        .connect(url.split(',').map(str::trim).collect::<Vec<_>>())
        .await?;
    let js = jetstream::new(client.clone());
    js.create_stream(stream::Config {
        name: "BENCH_STATE".into(),
        subjects: vec!["bench.st.>".into()],
        storage: stream::StorageType::File,
        allow_atomic_publish: true,
        allow_rollup: true,
        allow_direct: true,
        num_replicas: replicas,
        ..Default::default()
    })
    .await?;
    let record = bytes::Bytes::from(vec![b'r'; 700]);
    let event = bytes::Bytes::from(vec![b'e'; 350]);
    let rounds = (plan.raw_sync * 2).div_ceil(RECORDS).max(2);
    let mut seqs = vec![0u64; RECORDS];

    let pb = bar(
        (rounds * RECORDS) as u64,
        "commits: 4 separate publishes each",
    );
    let started = Instant::now();
    for round in 0..rounds {
        let mut acks = Vec::with_capacity(RECORDS);
        let mut event_acks = Vec::with_capacity(RECORDS * 3);
        for (r, seq) in seqs.iter().enumerate() {
            let mut h = async_nats::HeaderMap::new();
            h.insert(
                batch::EXPECTED_LAST_SUBJECT_SEQUENCE,
                seq.to_string().as_str(),
            );
            h.insert(batch::ROLLUP, "sub");
            acks.push(
                js.publish_with_headers(format!("bench.st.rec.{r}"), h, record.clone())
                    .await?,
            );
            for e in 0..3 {
                let mut h = async_nats::HeaderMap::new();
                h.insert("Nats-Msg-Id", format!("s-{round}-{r}-{e}").as_str());
                event_acks.push(
                    js.publish_with_headers(format!("bench.st.evt.{r}.{e}"), h, event.clone())
                        .await?,
                );
            }
        }
        for (r, ack) in acks.into_iter().enumerate() {
            seqs[r] = ack.await?.sequence;
            pb.inc(1);
        }
        for ack in event_acks {
            ack.await?;
        }
    }
    let separate = (rounds * RECORDS) as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();

    let pb = bar(
        (rounds * RECORDS) as u64,
        "commits: atomic batches of 32 transitions",
    );
    let started = Instant::now();
    for round in 0..rounds {
        let mut batches = Vec::with_capacity(RECORDS / GROUP);
        for g in 0..RECORDS / GROUP {
            let mut b = AtomicBatch::new();
            for (r, seq) in seqs.iter().enumerate().skip(g * GROUP).take(GROUP) {
                b.record(
                    format!("bench.st.rec.{r}"),
                    *seq,
                    async_nats::HeaderMap::new(),
                    record.clone(),
                )?;
                for e in 0..3 {
                    let mut h = async_nats::HeaderMap::new();
                    h.insert("Nats-Msg-Id", format!("b-{round}-{r}-{e}").as_str());
                    b.effect(format!("bench.st.evt.{r}.{e}"), h, event.clone());
                }
            }
            batches.push(b);
        }
        let commits = batches.iter().enumerate().map(|(g, b)| {
            let client = &client;
            async move { batch::commit(client, &format!("bench-{round}-{g}"), b).await }
        });
        for (g, done) in futures::future::join_all(commits)
            .await
            .into_iter()
            .enumerate()
        {
            let done = done?;
            for i in 0..GROUP {
                // The record is the first of each transition's four messages.
                seqs[g * GROUP + i] = done
                    .sequence_of(i * 4)
                    .context("a committed batch holds every message")?;
            }
            pb.inc(GROUP as u64);
        }
    }
    let grouped = (rounds * RECORDS) as f64 / started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(Commits { separate, grouped })
}

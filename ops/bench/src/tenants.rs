//! `--only tenants` (issue 30, BENCHMARKS.md "Cost per tenant"): what one
//! person's listing costs as everyone else's backlog grows. For each size
//! (1,000, 100,000 and, in full mode, 1,000,000 pending interactions spread over
//! 1,000 organisations) a fresh nats-server and ingress; the pending records are
//! written straight into the state bucket (the listing reads only them, and the
//! worker would take minutes to open a million), the measured organisation holding
//! 100 of them among the rest. Then a person of that organisation lists a page of
//! 50 pending, then the page after it, 200 times each: p50 and p99 per size, the
//! ingress's and nats-server's peak memory, and the curve against the 5 ms p99
//! target; beside it, raw JetStream reading the same 50 records two ways.

use std::future::IntoFuture as _;

#[allow(unused_imports)]
use super::*;

/// The organisation whose person lists, and how many of the pending are its own.
const MEASURED_ORG: &str = "org-0000";
const MEASURED_PENDING: usize = 100;
const ORGS: usize = 1_000;
const ROUNDS: usize = 200;

/// One size's figures.
struct Size {
    pending: usize,
    seeded_per_sec: f64,
    first_page: (u64, u64),
    second_page: (u64, u64),
    rss_ingress_mib: f64,
    rss_nats_mib: f64,
    /// Raw JetStream on the same server, p50 / p99 µs of 50 records of the
    /// organisation: an ordered consumer filtered to its keys (what the listing
    /// does), and 50 direct gets, each the next message for the same filter.
    raw_consumer: (u64, u64),
    raw_direct: (u64, u64),
}

/// The pending approval `n` of `org`, as the worker stores it (`int.<org>.<id>`).
fn record(org: &str, n: usize, opened_at: &str) -> (String, Vec<u8>) {
    let id = format!("eff_{org}_{n:07}");
    let body = json!({
        "id": id,
        "org": org,
        "session": "s1",
        "mode": "blocking",
        "lane": "main",
        "taskId": format!("task-{n}"),
        "contextId": format!("ctx-{n}"),
        "callId": format!("call-{n}"),
        "spec": {
            "kind": "approval",
            "server": "github",
            "tool": "create_pull_request",
            "arguments": {"repo": "acme/app", "title": format!("change {n}")},
            "argumentsDigest": "0".repeat(64),
        },
        "prompt": "Approve github / create_pull_request?",
        "state": "pending",
        "openedAt": opened_at,
        "openDigest": "0".repeat(64),
    });
    (
        format!("int.{org}.{id}"),
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

/// Writes `pending` records: the measured organisation's 100 spread evenly
/// among the other organisations' records. Returns records per second.
async fn seed(url: &str, bucket: &str, pending: usize) -> anyhow::Result<f64> {
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client);
    let every = (pending / MEASURED_PENDING).max(1);
    let opened_at = "2026-12-01T00:00:00.000Z";
    let bar = bar(pending as u64, "seeding pending interactions");
    let started = Instant::now();
    let mut acks = FuturesUnordered::new();
    let mut mine = 0usize;
    for n in 0..pending {
        let org = if n % every == 0 && mine < MEASURED_PENDING {
            mine += 1;
            MEASURED_ORG.to_owned()
        } else {
            format!("org-{:04}", 1 + n % (ORGS - 1))
        };
        let (key, body) = record(&org, n, opened_at);
        acks.push(
            js.publish(format!("$KV.{bucket}.{key}"), body.into())
                .await?
                .into_future(),
        );
        while acks.len() >= 4096 {
            if let Some(a) = acks.next().await {
                a?;
                bar.inc(1);
            }
        }
    }
    while let Some(a) = acks.next().await {
        a?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(pending as f64 / started.elapsed().as_secs_f64())
}

/// p50 and p99 (µs) of reading the measured organisation's first 50 records
/// straight from the state stream, `ROUNDS` times each way.
async fn raw_reads(url: &str, bucket: &str) -> anyhow::Result<((u64, u64), (u64, u64))> {
    let js = jetstream::new(async_nats::connect(url).await?);
    let stream = js.get_stream(format!("KV_{bucket}")).await?;
    let filter = format!("$KV.{bucket}.int.{MEASURED_ORG}.>");
    let (mut consumer_h, mut direct_h) = (hist(), hist());
    for round in 0..ROUNDS + 5 {
        let s = Instant::now();
        let consumer = stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig {
                filter_subject: filter.clone(),
                ..Default::default()
            })
            .await?;
        let mut messages = consumer.messages().await?.take(50);
        let mut got = 0;
        while let Some(m) = messages.next().await {
            m?;
            got += 1;
        }
        let took = s.elapsed().as_micros() as u64;
        if got != 50 {
            bail!("the ordered consumer read {got} records, not 50");
        }
        let s = Instant::now();
        let mut seq = 0;
        for _ in 0..50 {
            let m = stream
                .direct_get_next_for_subject(filter.as_str(), Some(seq + 1))
                .await?;
            seq = m.sequence;
        }
        let direct = s.elapsed().as_micros() as u64;
        if round >= 5 {
            consumer_h.record(took).ok();
            direct_h.record(direct).ok();
        }
    }
    let q = |h: &Histogram<u64>| (h.value_at_quantile(0.5), h.value_at_quantile(0.99));
    Ok((q(&consumer_h), q(&direct_h)))
}

/// p50 and p99 (µs) of `ROUNDS` listings of `path`, checking each page holds 50.
async fn listing(t: &Target, path: &str) -> anyhow::Result<(u64, u64)> {
    let mut h = hist();
    for round in 0..ROUNDS + 5 {
        let s = Instant::now();
        let r = t
            .http
            .get(format!("{}{path}", t.base))
            .bearer_auth(&t.token)
            .send()
            .await?;
        let status = r.status();
        let page: Value = r.json().await?;
        let took = s.elapsed().as_micros() as u64;
        let items = page["items"].as_array().map_or(0, Vec::len);
        if !status.is_success() || items != 50 {
            bail!("{path} answered {status} with {items} items: {page}");
        }
        if round >= 5 {
            h.record(took).ok();
        }
    }
    Ok((h.value_at_quantile(0.5), h.value_at_quantile(0.99)))
}

async fn one_size(args: &Args, pending: usize) -> anyhow::Result<Size> {
    let dir = tempfile::tempdir()?;
    let (nats, url, _, _) = start_nats(&args.nats_server, dir.path(), Setting::Default).await?;
    let key = holdpoint_cli::devtoken::DevKey::load_or_create(&dir.path().join("jwt"))?;
    let token = key.token(MEASURED_ORG, "lister", "org", 3600)?;
    let (api, admin) = (free_port()?, free_port()?);
    let ingress = Proc {
        child: Command::new(&args.holdpoint_bin)
            .args(ingress_args(&url, (api, admin), &key, 1))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    };
    localnats::wait_listening(api, WAIT_LISTENING).await?;
    let bucket = holdpoint_bus::Topology::default().state_bucket();
    let seeded_per_sec = seed(&url, &bucket, pending).await?;
    let t = Target {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{api}"),
        token,
    };
    let first = "/v1/interactions?state=pending&limit=50";
    let first_page = listing(&t, first).await?;
    let r: Value = t
        .http
        .get(format!("{}{first}", t.base))
        .bearer_auth(&t.token)
        .send()
        .await?
        .json()
        .await?;
    let cursor = r["nextCursor"]
        .as_str()
        .context("the first page has no nextCursor")?;
    let second_page = listing(&t, &format!("{first}&cursor={cursor}")).await?;
    let (raw_consumer, raw_direct) = raw_reads(&url, &bucket).await?;
    let rss_ingress_mib = memory(ingress.pid()).0;
    let rss_nats_mib = nats.pids().first().map_or(0.0, |p| memory(*p).0);
    drop(ingress);
    drop(nats);
    Ok(Size {
        pending,
        seeded_per_sec,
        first_page,
        second_page,
        rss_ingress_mib,
        rss_nats_mib,
        raw_consumer,
        raw_direct,
    })
}

/// Runs the tenants figures and prints them.
pub(crate) async fn tenants_run(args: &Args) -> anyhow::Result<()> {
    let sizes: &[usize] = if args.mode == "full" {
        &[1_000, 100_000, 1_000_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let mut out = Vec::new();
    for &pending in sizes {
        println!("── tenants: {pending} pending over {ORGS} organisations");
        out.push(one_size(args, pending).await?);
    }
    println!(
        "\n### Listing a page of 50 pending for one person (target: p99 ≤ 5 ms at 1,000,000)\n"
    );
    println!(
        "| pending (all organisations) | first page p50 / p99 | next page p50 / p99 | ingress peak RSS | nats-server peak RSS | records seeded/s |"
    );
    println!("|---|---|---|---|---|---|");
    for s in &out {
        println!(
            "| {} | {} / {} | {} / {} | {:.0} MiB | {:.0} MiB | {:.0} |",
            s.pending,
            ms(s.first_page.0),
            ms(s.first_page.1),
            ms(s.second_page.0),
            ms(s.second_page.1),
            s.rss_ingress_mib,
            s.rss_nats_mib,
            s.seeded_per_sec
        );
    }
    println!("\n### The same 50 records from raw JetStream, same server and run\n");
    println!(
        "| pending | ordered consumer, filtered (the listing's read) p50 / p99 | 50 direct gets, next for the filter p50 / p99 |"
    );
    println!("|---|---|---|");
    for s in &out {
        println!(
            "| {} | {} / {} | {} / {} |",
            s.pending,
            ms(s.raw_consumer.0),
            ms(s.raw_consumer.1),
            ms(s.raw_direct.0),
            ms(s.raw_direct.1)
        );
    }
    if let (Some(a), Some(b)) = (out.first(), out.last()) {
        println!(
            "\nfirst page p99 at {} against {}: {:.2}×; target {}",
            b.pending,
            a.pending,
            b.first_page.1 as f64 / a.first_page.1.max(1) as f64,
            if b.first_page.1 <= 5_000 {
                "met"
            } else {
                "missed"
            }
        );
    }
    Ok(())
}

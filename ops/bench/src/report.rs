//! Histograms, progress bars and the Markdown tables a run prints.

#[allow(unused_imports)]
use super::*;

pub(crate) fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

pub(crate) fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("  {msg:<44} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_owned());
    pb
}

pub(crate) fn print(r: &Report) {
    println!("\n### fsync: {} ({})\n", r.fsync, r.version);
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| raw async publish + Nats-Msg-Id | {:.0} msg/s |",
        r.raw.async_rate
    );
    println!(
        "| raw sync publish | {:.0} msg/s, RTT p50 {} ms, p99 {} ms |",
        r.raw.sync_rate,
        ms(r.raw.sync_p50),
        ms(r.raw.sync_p99)
    );
    println!(
        "| commit path ceiling: record CAS + 3 events as 4 publishes | {:.0} transitions/s ({:.2}x raw sync) |",
        r.commits.separate,
        r.commits.separate / r.raw.sync_rate
    );
    println!(
        "| commit path ceiling: atomic batches of {GROUP} transitions | {:.0} transitions/s ({:.2}x raw sync, {:.2}x 4 publishes) |",
        r.commits.grouped,
        r.commits.grouped / r.raw.sync_rate,
        r.commits.grouped / r.commits.separate
    );
    println!(
        "| open {} interactions | {:.1} s ({:.0}/s) |",
        r.open.0,
        r.open.1.as_secs_f64(),
        r.open.0 as f64 / r.open.1.as_secs_f64()
    );
    println!(
        "| GET one, {} pending | p50 {} ms, p99 {} ms |",
        r.open.0,
        ms(r.get_one[0]),
        ms(r.get_one[1])
    );
    println!(
        "| list a page of 50, {} pending | p50 {} ms, p99 {} ms |",
        r.open.0,
        ms(r.list_page[0]),
        ms(r.list_page[1])
    );
    for (w, sat, errs, l25, l50) in &r.runs {
        println!("| {w} worker(s): saturation | {sat:.0} answers/s ({errs} errors) |");
        for (name, l) in [("25%", l25), ("50%", l50)] {
            println!(
                "| {w} worker(s) at {name} ({:.0}/s, {} sent) answer→204 | p50 {} / p90 {} / p99 {} / max {} ms |",
                l.rate,
                l.sent,
                ms(l.to_204[0]),
                ms(l.to_204[1]),
                ms(l.to_204[2]),
                ms(l.to_204[3])
            );
            println!(
                "| {w} worker(s) at {name} answer→tool-call-finished | p50 {} / p90 {} / p99 {} / max {} ms ({} missing or failed) |",
                ms(l.to_finished[0]),
                ms(l.to_finished[1]),
                ms(l.to_finished[2]),
                ms(l.to_finished[3]),
                l.errors
            );
        }
    }
    for (w, behind, drained) in &r.backlogs {
        let sat = r.runs.iter().find(|x| x.0 == *w).map_or(0.0, |x| x.1);
        let behind = behind.map_or("unknown".to_owned(), |b| b.to_string());
        match drained {
            Some(d) => println!(
                "| {w} worker(s): effects not yet in the public streams when saturation ended / drained in | {behind} / {:.2} s (answers/s counted to the drain: {:.0}) |",
                d.as_secs_f64(),
                sat * r.saturation.as_secs_f64() / (r.saturation + *d).as_secs_f64()
            ),
            None => println!(
                "| {w} worker(s): effects not yet in the public streams when saturation ended / drained in | {behind} / not within {DRAIN_DEADLINE:?} |"
            ),
        }
    }
    println!(
        "| peak RSS ingress / worker | {:.0} / {:.0} MiB |",
        r.rss[0].0, r.rss[1].0
    );
    println!(
        "| CPU per answer at saturation, 1 worker: nats-server(s) / ingress / worker / load generator | {:.0} / {:.0} / {:.0} / {:.0} µs |",
        r.cpu[0] * 1e6,
        r.cpu[1] * 1e6,
        r.cpu[2] * 1e6,
        r.cpu[3] * 1e6
    );
    if r.cpu_nodes.len() > 1 {
        let each: Vec<String> = r
            .cpu_nodes
            .iter()
            .map(|c| format!("{:.0}", c * 1e6))
            .collect();
        println!(
            "| CPU per answer of each nats-server (start order) | {} µs |",
            each.join(" / ")
        );
    }
    if !r.leaders.is_empty() {
        let each: Vec<String> = r
            .leaders
            .iter()
            .map(|(s, l)| match l {
                Some(i) => format!("{s} node {i}"),
                None => format!("{s} unknown"),
            })
            .collect();
        println!(
            "| stream leaders (node by start order) | {} |",
            each.join(", ")
        );
    }
    if let Some(ops) = r.ops {
        println!(
            "| messages clients sent to nats-server per answer (publishes, acks, API requests; /varz in_msgs) | {ops:.1} |"
        );
    }
    if let Some(stored) = r.stored {
        println!(
            "| messages stored per answer, sourced copies included (streams' last sequences, /jsz) | {stored:.1} |"
        );
    }
    match r.per_batch {
        Some(n) => println!(
            "| transitions per atomic batch, 1 worker at saturation (holdpoint_commit_transitions) | {n:.1} |"
        ),
        None => println!(
            "| transitions per atomic batch, 1 worker at saturation | not reported by this worker |"
        ),
    }
    let b = &r.batch;
    let per_s = |us: u64| BATCH as f64 / (us.max(1) as f64 / 1e6);
    println!(
        "| 1 worker: {BATCH} approvals as one POST /v1/answers ({} rounds) | p50 {} ms, max {} ms ({:.0} answers/s) |",
        b.rounds,
        ms(b.batch[0]),
        ms(b.batch[1]),
        per_s(b.batch[0])
    );
    println!(
        "| 1 worker: {BATCH} single approve requests one after another | p50 {} ms, max {} ms ({:.0} answers/s; their time ÷ the batch's {:.2}) |",
        ms(b.sequential[0]),
        ms(b.sequential[1]),
        per_s(b.sequential[0]),
        b.sequential[0] as f64 / b.batch[0].max(1) as f64
    );
    println!(
        "| 1 worker: {BATCH} single approve requests all at once | p50 {} ms, max {} ms ({:.0} answers/s; their time ÷ the batch's {:.2}; {} answers not 204 in all) |",
        ms(b.concurrent[0]),
        ms(b.concurrent[1]),
        per_s(b.concurrent[0]),
        b.concurrent[0] as f64 / b.batch[0].max(1) as f64,
        b.errors
    );
    let best = r.runs.iter().map(|x| x.1).fold(0.0, f64::max);
    let p50_25 = r.runs.first().map_or(0, |x| x.3.to_204[0]);
    println!(
        "| **ratio** e2e answers/s ÷ raw async msg/s | {:.3} (1/{:.1}) |",
        best / r.raw.async_rate,
        r.raw.async_rate / best.max(1.0)
    );
    println!(
        "| **ratio** answer→204 p50 @25% ÷ raw sync RTT p50 | {:.1} |",
        p50_25 as f64 / r.raw.sync_p50.max(1) as f64
    );
    println!(
        "| **ratio** e2e answers/s ÷ raw sync msg/s | {:.2} |",
        best / r.raw.sync_rate
    );
}

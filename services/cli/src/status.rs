//! `holdpoint status`: what an operator would otherwise ask the `nats` CLI, from
//! Holdpoint's own topology names ([`holdpoint_bus::Topology`]): each stream's
//! messages, bytes, replicas and leader; each command partition's consumer with
//! its backlog, the worker it is pinned to and the worker that should own it;
//! the live workers; the notifier's backlog; and the dead letters per
//! organisation. Read only: it creates nothing (a user with the JetStream API's
//! read calls, e.g. `setup`, is enough).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self, stream};
use clap::Args;
use holdpoint_bus::Topology;
use serde_json::{Value, json};

/// The store an operator verb reads (`status`, `backup`): where NATS is and how
/// many command partitions its topology has.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The NATS URL (comma-separated for a cluster; credentials in it).
    #[arg(
        long,
        env = "HOLDPOINT_NATS_URL",
        default_value = "nats://127.0.0.1:4290"
    )]
    pub nats_url: String,
    /// Command partitions the topology has (as `nats.partitions`).
    #[arg(long, env = "HOLDPOINT_PARTITIONS", default_value_t = Topology::default().partitions)]
    pub partitions: u32,
}

impl StoreArgs {
    /// The default topology with these partitions.
    pub fn topology(&self) -> Topology {
        Topology {
            partitions: self.partitions,
            ..Topology::default()
        }
    }
}

/// `holdpoint status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Where the store is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Reads the status and prints it.
///
/// # Errors
/// When NATS is unreachable or the JetStream API refuses.
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let status = read(&args).await?;
    if args.json {
        println!("{}", crate::terminal::json_pretty(&status));
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

/// The status as JSON: `server`, `storeFormat` (the commands stream's recorded
/// store format, null when it cannot be read), `streams`, `partitions`, `workers`,
/// `notifier`, `deadLetters`.
///
/// # Errors
/// As [`run`].
pub async fn read(args: &StatusArgs) -> anyhow::Result<Value> {
    let topo = args.store.topology();
    let client = holdpoint_bus::connect(&args.store.nats_url, "holdpoint-status").await?;
    let info = client.server_info();
    let js = jetstream::new(client.clone());
    let mut streams = Vec::new();
    for name in topo.stream_names() {
        streams.push(
            match tokio::time::timeout(Duration::from_secs(5), js.get_stream(&name)).await {
                Ok(Ok(s)) => stream_json(&name, s.cached_info().clone()),
                Ok(Err(e)) => json!({"name": name, "error": e.to_string()}),
                Err(_) => json!({"name": name, "error": "no answer in 5 s"}),
            },
        );
    }
    let workers = live_workers(&js, &topo).await;
    let commands = js
        .get_stream_no_info(topo.commands_stream())
        .await
        .context("the commands stream")?;
    let mut partitions = Vec::new();
    for p in 0..topo.partitions {
        let name = topo.partition_consumer(p);
        let preferred = holdpoint_bus::partitions::preferred(p, &workers);
        partitions.push(match commands.consumer_info(&name).await {
            Ok(c) => json!({
                "partition": p,
                "consumer": name,
                "pending": c.num_pending,
                "ackPending": c.num_ack_pending,
                "redelivered": c.num_redelivered,
                "pinned": c.priority_groups.iter().find_map(|g| g.pinned_client_id.clone()),
                "preferredWorker": preferred,
            }),
            Err(e) => json!({"partition": p, "consumer": name, "error": e.to_string(),
                             "preferredWorker": preferred}),
        });
    }
    let events = js
        .get_stream_no_info(topo.events_stream())
        .await
        .context("the events stream")?;
    let notifier = match events.consumer_info(topo.notifier_consumer()).await {
        Ok(c) => json!({"consumer": c.name, "pending": c.num_pending,
                        "ackPending": c.num_ack_pending, "redelivered": c.num_redelivered}),
        Err(e) => json!({"consumer": topo.notifier_consumer(), "error": e.to_string()}),
    };
    let mut dead = BTreeMap::<String, u64>::new();
    let filter = format!("{}.evt.*.*.dead-letter", topo.subject_prefix);
    if let Ok(s) = js.get_stream_no_info(topo.events_stream()).await
        && let Ok(mut subjects) = s.info_with_subjects(&filter).await
    {
        use futures::TryStreamExt as _;
        while let Ok(Some((subject, count))) = subjects.try_next().await {
            let org = subject.split('.').nth(2).unwrap_or("?").to_owned();
            *dead.entry(org).or_default() += count as u64;
        }
    }
    let store_format = commands
        .get_info()
        .await
        .ok()
        .and_then(|i| holdpoint_bus::store_format_of(&i.config.metadata).ok());
    Ok(json!({
        "server": {"name": info.server_name, "version": info.version,
                   "cluster": info.cluster},
        "storeFormat": store_format,
        "streams": streams,
        "workers": workers,
        "partitions": partitions,
        "notifier": notifier,
        "deadLetters": dead,
    }))
}

/// The ids in the presence bucket (live workers: entries expire unless refreshed).
async fn live_workers(js: &jetstream::Context, topo: &Topology) -> Vec<String> {
    use futures::StreamExt as _;
    let Ok(store) = js.get_key_value(topo.presence_bucket()).await else {
        return Vec::new();
    };
    let Ok(mut keys) = store.keys().await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Some(Ok(k)) = keys.next().await {
        out.push(k);
    }
    out.sort();
    out
}

fn stream_json(name: &str, i: stream::Info) -> Value {
    let cluster = i.cluster.as_ref();
    json!({
        "name": name,
        "messages": i.state.messages,
        "bytes": i.state.bytes,
        "firstSequence": i.state.first_sequence,
        "lastSequence": i.state.last_sequence,
        "consumers": i.state.consumer_count,
        "replicas": i.config.num_replicas,
        "leader": cluster.and_then(|c| c.leader.clone()),
        "peers": cluster.map(|c| c.replicas.iter().map(|p| json!({
            "name": p.name, "current": p.current, "offline": p.offline, "lag": p.lag,
        })).collect::<Vec<_>>()).unwrap_or_default(),
    })
}

/// The status as tables for a terminal (every text escaped).
pub fn render(s: &Value) -> String {
    use std::fmt::Write as _;
    let t = |v: &Value| match v {
        Value::String(s) => crate::terminal::line(s).into_owned(),
        Value::Null => "-".to_owned(),
        other => crate::terminal::line(&other.to_string()).into_owned(),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "server {} (nats-server {}, cluster {}), store format {} (this holdpoint reads {})\n",
        t(&s["server"]["name"]),
        t(&s["server"]["version"]),
        t(&s["server"]["cluster"]),
        t(&s["storeFormat"]),
        holdpoint_bus::STORE_FORMAT
    );
    let _ = writeln!(
        out,
        "{:<24} {:>9} {:>12} {:>9} {:>3} {:<12} replicas",
        "stream", "messages", "bytes", "consumers", "R", "leader"
    );
    for st in s["streams"].as_array().into_iter().flatten() {
        if !st["error"].is_null() {
            let _ = writeln!(out, "{:<24} {}", t(&st["name"]), t(&st["error"]));
            continue;
        }
        let peers: Vec<String> = st["peers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let state = if p["offline"].as_bool() == Some(true) {
                    "offline".to_owned()
                } else if p["current"].as_bool() == Some(true) {
                    "current".to_owned()
                } else {
                    format!("behind {}", t(&p["lag"]))
                };
                format!("{} {state}", t(&p["name"]))
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<24} {:>9} {:>12} {:>9} {:>3} {:<12} {}",
            t(&st["name"]),
            t(&st["messages"]),
            t(&st["bytes"]),
            t(&st["consumers"]),
            t(&st["replicas"]),
            t(&st["leader"]),
            peers.join(", ")
        );
    }
    let workers: Vec<String> = s["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(t)
        .collect();
    let _ = writeln!(out, "\nlive workers: {}", workers.join(", "));
    let _ = writeln!(
        out,
        "\n{:<18} {:>8} {:>11} {:>11} {:<24} preferred worker",
        "partition", "pending", "ack pending", "redelivered", "pinned (Nats-Pin-Id)"
    );
    for p in s["partitions"].as_array().into_iter().flatten() {
        if !p["error"].is_null() {
            let _ = writeln!(out, "{:<18} {}", t(&p["consumer"]), t(&p["error"]));
            continue;
        }
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>11} {:>11} {:<24} {}",
            t(&p["consumer"]),
            t(&p["pending"]),
            t(&p["ackPending"]),
            t(&p["redelivered"]),
            t(&p["pinned"]),
            t(&p["preferredWorker"])
        );
    }
    let n = &s["notifier"];
    if n["error"].is_null() {
        let _ = writeln!(
            out,
            "\nnotifier {}: {} pending, {} ack pending",
            t(&n["consumer"]),
            t(&n["pending"]),
            t(&n["ackPending"])
        );
    } else {
        let _ = writeln!(out, "\nnotifier {}: {}", t(&n["consumer"]), t(&n["error"]));
    }
    let dead = s["deadLetters"].as_object();
    match dead {
        Some(d) if !d.is_empty() => {
            let list: Vec<String> = d
                .iter()
                .map(|(org, n)| format!("{} {}", t(&Value::String(org.clone())), t(n)))
                .collect();
            let _ = writeln!(out, "dead letters: {}", list.join(", "));
        }
        _ => {
            let _ = writeln!(out, "dead letters: none");
        }
    }
    out
}

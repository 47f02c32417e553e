//! `holdpoint backup` and `holdpoint restore`: every stream and bucket of the
//! topology ([`holdpoint_bus::Topology::stream_names`]) saved through JetStream's
//! own snapshot API and put back through its restore API, so a backup holds what
//! the servers hold: messages, sequences, message schedules (the deadlines),
//! consumers with their acknowledgement floors, and the duplicate windows'
//! message ids. Holdpoint adds a manifest with checksums and refuses to restore
//! over streams that exist.
//!
//! The wire (nats-server's `jetstream_api.go`, 2.10 and later):
//! - snapshot: a request on `$JS.API.STREAM.SNAPSHOT.<stream>` with
//!   `{"deliver_subject", "jsck"}` answers `{"config", "state"}`; the server then
//!   sends the archive in chunks to the deliver subject, each with a reply
//!   subject under `$JS.SNAPSHOT.ACK.<stream>.…` that must be answered (the flow
//!   control window; the last chunk may come without one), and ends with an
//!   empty message, whose status line is `204` when there is one (any other
//!   status is a failure: `408` no interest or no flow response, `500` a store
//!   error);
//! - restore: a request on `$JS.API.STREAM.RESTORE.<stream>` with
//!   `{"config", "state"}` answers `{"deliver_subject"}`; each chunk is a
//!   request to it (an empty reply acknowledges it, a JSON reply is an error),
//!   and an empty request ends the transfer and is answered with the stream's
//!   create response.
//!
//! A backup directory holds `holdpoint-backup.json` (the [`Manifest`]) and, per
//! stream, `<stream>.json` (its configuration and state as the snapshot answered
//! them) and `<stream>.snapshot` (the archive, as nats-server wrote it).
//!
//! nats-server (2.15.1, measured by tests/integration/backup.rs) rebuilds a
//! restored stream's duplicate window from its stored `Nats-Msg-Id`s only when
//! it starts, so the servers are restarted after a restore and before the
//! services.
//!
//! Before the first snapshot a backup waits until the public streams have sourced
//! every effect of the state stream and their source consumers have it
//! acknowledged (`wait_sourcing_settled`): snapshots taken while an effect was
//! between the two could hold it in one and not the other.
//!
//! A consistent backup is taken with the ingresses, workers and notifiers
//! stopped (the nats-servers running): streams are snapshotted one after the
//! other, not at one instant. README.md, "Backups and restore", says what a
//! restore means for idempotency keys and deadlines in flight.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use clap::Args;
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The manifest file's name in a backup directory.
pub const MANIFEST: &str = "holdpoint-backup.json";

/// The manifest format this build writes and reads.
pub const FORMAT: u32 = 1;

/// Chunk size asked of the server and used for restore requests (bytes). The
/// server clamps it to 1 KiB-1 MiB; 128 KiB is its default.
const CHUNK: usize = 128 * 1024;

/// How long a snapshot may go without a chunk before the backup gives up.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);

/// `holdpoint backup`.
#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// Where the store is. The NATS user needs the JetStream API and
    /// `$JS.SNAPSHOT.>` (`setup` in ops/nats/holdpoint.conf has both).
    #[command(flatten)]
    pub store: crate::status::StoreArgs,
    /// The directory to write; created, and refused when it holds a manifest.
    #[arg(long)]
    pub out: PathBuf,
}

/// `holdpoint restore`.
#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// The NATS URL of the JetStream to restore into (none of the backup's
    /// streams may exist there). The user needs what `backup` needs.
    #[arg(
        long,
        env = "HOLDPOINT_NATS_URL",
        default_value = "nats://127.0.0.1:4290"
    )]
    pub nats_url: String,
    /// The backup directory (`holdpoint backup --out`).
    #[arg(long)]
    pub from: PathBuf,
    /// Restore every stream with this many replicas instead of the backup's
    /// (restoring an R3 cluster's backup into one server takes `--replicas 1`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=5))]
    pub replicas: Option<u32>,
}

/// What a backup directory holds (`holdpoint-backup.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`] of the writer; a reader refuses a newer one.
    pub format: u32,
    /// The `holdpoint` version that wrote it (Cargo's package version).
    pub holdpoint_version: String,
    /// When the backup finished, RFC 3339 UTC.
    pub created_at: String,
    /// The topology's command partitions.
    pub partitions: u32,
    /// The streams, in the order they were saved (and are restored).
    pub streams: Vec<SavedStream>,
}

/// One stream of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedStream {
    /// The stream's name, e.g. `HP_COMMANDS` or `KV_HP_INTERACTIONS`.
    pub name: String,
    /// Messages in the stream when it was saved.
    pub messages: u64,
    /// Its last sequence when it was saved.
    pub last_seq: u64,
    /// Size of `<name>.snapshot` in bytes.
    pub archive_bytes: u64,
    /// SHA-256 of `<name>.snapshot`, lowercase hex.
    pub sha256: String,
}

/// Runs `holdpoint backup`: prints one line per stream and the directory.
///
/// # Errors
/// When the directory already holds a backup or cannot be written, NATS is
/// unreachable, a stream of the topology is missing, or a snapshot fails.
pub async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let manifest_path = args.out.join(MANIFEST);
    if manifest_path.exists() {
        bail!(
            "{} already holds a backup; choose an empty directory",
            args.out.display()
        );
    }
    tokio::fs::create_dir_all(&args.out)
        .await
        .with_context(|| format!("create {}", args.out.display()))?;
    let topo = args.store.topology();
    let client = holdpoint_bus::connect(&args.store.nats_url, "holdpoint-backup").await?;
    wait_sourcing_settled(&client, &topo).await?;
    let mut streams = Vec::new();
    for name in topo.stream_names() {
        let saved = snapshot(&client, &name, &args.out)
            .await
            .with_context(|| format!("back up stream {name}"))?;
        println!(
            "backup: {name}: {} messages (last sequence {}), {} bytes",
            saved.messages, saved.last_seq, saved.archive_bytes
        );
        streams.push(saved);
    }
    let manifest = Manifest {
        format: FORMAT,
        holdpoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        created_at: holdpoint_domain::timestamp::format(time::OffsetDateTime::now_utc()),
        partitions: topo.partitions,
        streams,
    };
    let text = serde_json::to_string_pretty(&manifest)?;
    tokio::fs::write(&manifest_path, text + "\n")
        .await
        .with_context(|| format!("write {}", manifest_path.display()))?;
    println!("backup: written to {}", args.out.display());
    Ok(())
}

/// How long a backup waits for the sourcing to settle before it gives up.
const SETTLE_DEADLINE: Duration = Duration::from_secs(30);

/// Waits until the streams that source the state stream have stored, and their
/// durable source consumers have had acknowledged, every effect it holds: each
/// consumer with nothing pending and nothing unacknowledged, each source with no
/// lag. The streams are snapshotted one after the other, so without this an
/// effect in flight between the state stream and a public stream could be saved
/// in one and not yet in the other (stored twice, or not at all, after a
/// restore). With the services stopped it settles within a heartbeat (1 s).
///
/// # Errors
/// When it has not settled within [`SETTLE_DEADLINE`] (services still running,
/// or a source that cannot reach the state stream) or the servers do not answer.
async fn wait_sourcing_settled(
    client: &async_nats::Client,
    topo: &holdpoint_bus::Topology,
) -> anyhow::Result<()> {
    let js = async_nats::jetstream::new(client.clone());
    let sourcing = [
        topo.events_stream(),
        topo.lanes_stream(),
        topo.audit_stream(),
        topo.commands_stream(),
    ];
    let deadline = tokio::time::Instant::now() + SETTLE_DEADLINE;
    let last = loop {
        let mut unsettled = Vec::new();
        let state = js
            .get_stream(topo.state_stream())
            .await
            .context("read the state stream")?;
        for name in &sourcing {
            let Ok(mut stream) = js.get_stream(name).await else {
                continue; // not made yet: it sources nothing to save
            };
            let info = stream
                .info()
                .await
                .with_context(|| format!("read {name}"))?;
            let lag: u64 = info.sources.iter().map(|s| s.lag).sum();
            let pending = match state.consumer_info(topo.source_consumer(name)).await {
                Ok(c) => c.num_pending + c.num_ack_pending as u64,
                Err(_) => 0, // an ephemeral source: its lag says it all
            };
            if lag > 0 || pending > 0 {
                unsettled.push(format!("{name} (lag {lag}, pending {pending})"));
            }
        }
        if unsettled.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            break unsettled.join(", ");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    bail!(
        "the streams that source the state stream have not caught up within {SETTLE_DEADLINE:?}: \
         {last}; stop the ingresses, workers and notifiers before a backup"
    )
}

/// Saves one stream into `dir` and returns its manifest entry.
async fn snapshot(
    client: &async_nats::Client,
    name: &str,
    dir: &Path,
) -> anyhow::Result<SavedStream> {
    let inbox = client.new_inbox();
    let mut chunks = client.subscribe(inbox.clone()).await?;
    let request = json!({"deliver_subject": inbox, "chunk_size": CHUNK, "jsck": true});
    let reply = client
        .request(
            format!("$JS.API.STREAM.SNAPSHOT.{name}"),
            Bytes::from(serde_json::to_vec(&request)?),
        )
        .await
        .context("the snapshot request")?;
    let answer: Value = serde_json::from_slice(&reply.payload).context("the snapshot answer")?;
    api_error(&answer)?;
    let (Some(config), Some(state)) = (answer.get("config"), answer.get("state")) else {
        bail!("the snapshot answer has no config and state: {answer}");
    };
    let mut archive = Vec::new();
    loop {
        let chunk = tokio::time::timeout(CHUNK_TIMEOUT, chunks.next())
            .await
            .map_err(|_| anyhow::anyhow!("no chunk in {} s", CHUNK_TIMEOUT.as_secs()))?
            .context("the subscription ended")?;
        // The end is an empty message: with a `204` status line after acknowledged
        // chunks, without one when the archive fitted in one unacknowledged chunk.
        match chunk.status {
            Some(status) if status.as_u16() != 204 => bail!(
                "the server ended the snapshot with {status} {}",
                chunk.description.as_deref().unwrap_or("")
            ),
            _ if chunk.payload.is_empty() => break,
            _ => {}
        }
        archive.extend_from_slice(&chunk.payload);
        if let Some(ack) = chunk.reply {
            client.publish(ack, Bytes::new()).await?;
        }
    }
    let meta = json!({"config": config, "state": state});
    tokio::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_vec_pretty(&meta)?,
    )
    .await?;
    tokio::fs::write(dir.join(format!("{name}.snapshot")), &archive).await?;
    Ok(SavedStream {
        name: name.to_owned(),
        messages: state.get("messages").and_then(Value::as_u64).unwrap_or(0),
        last_seq: state.get("last_seq").and_then(Value::as_u64).unwrap_or(0),
        archive_bytes: archive.len() as u64,
        sha256: hex::encode(Sha256::digest(&archive)),
    })
}

/// Runs `holdpoint restore`: checks the manifest and every archive's checksum,
/// refuses when any of the streams exists in the target, then restores them in
/// the manifest's order and checks each one's message count and last sequence.
///
/// # Errors
/// A missing or newer manifest, a checksum mismatch, an existing stream, NATS
/// unreachable, or the server refusing a restore.
pub async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let manifest = read_manifest(&args.from).await?;
    let mut archives = Vec::new();
    for s in &manifest.streams {
        let archive = tokio::fs::read(args.from.join(format!("{}.snapshot", s.name)))
            .await
            .with_context(|| format!("read the archive of {}", s.name))?;
        if hex::encode(Sha256::digest(&archive)) != s.sha256 {
            bail!(
                "the archive of {} does not match the manifest's checksum",
                s.name
            );
        }
        let meta: Value = serde_json::from_slice(
            &tokio::fs::read(args.from.join(format!("{}.json", s.name))).await?,
        )
        .with_context(|| format!("the configuration of {}", s.name))?;
        archives.push((s, meta, archive));
    }
    let client = holdpoint_bus::connect(&args.nats_url, "holdpoint-restore").await?;
    for (s, _, _) in &archives {
        let info = client
            .request(format!("$JS.API.STREAM.INFO.{}", s.name), Bytes::new())
            .await
            .context("ask whether the stream exists")?;
        let info: Value = serde_json::from_slice(&info.payload)?;
        if info.get("error").is_none() {
            bail!(
                "stream {} exists in the target; restore writes only into a JetStream \
                 without Holdpoint's streams (nothing was restored)",
                s.name
            );
        }
    }
    for (s, mut meta, archive) in archives {
        if let Some(r) = args.replicas {
            meta["config"]["num_replicas"] = json!(r);
        }
        let created = put_back(&client, &s.name, &meta, &archive)
            .await
            .with_context(|| format!("restore stream {}", s.name))?;
        let state = &created["state"];
        let (messages, last_seq) = (
            state["messages"].as_u64().unwrap_or(0),
            state["last_seq"].as_u64().unwrap_or(0),
        );
        if (messages, last_seq) != (s.messages, s.last_seq) {
            bail!(
                "stream {} came back with {messages} messages (last sequence {last_seq}); \
                 the backup had {} (last sequence {})",
                s.name,
                s.messages,
                s.last_seq
            );
        }
        println!(
            "restore: {}: {messages} messages (last sequence {last_seq})",
            s.name
        );
    }
    println!(
        "restore: {} streams from {} (written by holdpoint {} at {})",
        manifest.streams.len(),
        args.from.display(),
        manifest.holdpoint_version,
        manifest.created_at
    );
    println!(
        "restore: now restart the nats-servers, then start Holdpoint's services: a \
         restored stream rebuilds its duplicate window only when its server starts"
    );
    Ok(())
}

/// Reads and checks a backup's manifest.
///
/// # Errors
/// Missing, unreadable, or of a format newer than [`FORMAT`].
pub async fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = tokio::fs::read(&path)
        .await
        .with_context(|| format!("read {} (is this a backup directory?)", path.display()))?;
    let probe: Value = serde_json::from_slice(&text).context("the manifest is not JSON")?;
    let format = probe.get("format").and_then(Value::as_u64).unwrap_or(0);
    if format > u64::from(FORMAT) {
        bail!(
            "the backup's format is {format}; this holdpoint reads up to {FORMAT} (use a newer holdpoint)"
        );
    }
    serde_json::from_value(probe).context("the manifest")
}

/// Restores one stream; returns the server's create response.
async fn put_back(
    client: &async_nats::Client,
    name: &str,
    meta: &Value,
    archive: &[u8],
) -> anyhow::Result<Value> {
    let reply = client
        .request(
            format!("$JS.API.STREAM.RESTORE.{name}"),
            Bytes::from(serde_json::to_vec(meta)?),
        )
        .await
        .context("the restore request")?;
    let answer: Value = serde_json::from_slice(&reply.payload).context("the restore answer")?;
    api_error(&answer)?;
    let Some(deliver) = answer["deliver_subject"].as_str() else {
        bail!("the restore answer names no deliver subject: {answer}");
    };
    for chunk in archive.chunks(CHUNK) {
        let ack = client
            .request(deliver.to_owned(), Bytes::copy_from_slice(chunk))
            .await
            .context("send a chunk")?;
        if !ack.payload.is_empty() {
            let error: Value = serde_json::from_slice(&ack.payload).unwrap_or(Value::Null);
            api_error(&error)?;
            bail!("the server answered a chunk with {error}");
        }
    }
    let done = client
        .request(deliver.to_owned(), Bytes::new())
        .await
        .context("end the transfer")?;
    let created: Value = serde_json::from_slice(&done.payload).context("the restore's end")?;
    api_error(&created)?;
    Ok(created)
}

/// A JetStream API answer's `error`, as an error.
fn api_error(answer: &Value) -> anyhow::Result<()> {
    match answer.get("error") {
        Some(e) => bail!(
            "the JetStream API refused: {} (code {}, err_code {})",
            e["description"].as_str().unwrap_or("no description"),
            e["code"],
            e["err_code"]
        ),
        None => Ok(()),
    }
}

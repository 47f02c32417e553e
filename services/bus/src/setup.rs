//! Creating or binding every stream and bucket ([`Bus::setup`], [`Bus::attach`]).
//!
//! One layout, for every server at or above [`crate::MIN_SERVER`]: the state
//! stream (`KV_HP_STATE`) holds the records and the effects, written by atomic
//! batches; the public streams source the effects under their public subjects and
//! republish what they stored; the commands stream is partitioned with a
//! `partition()` subject transform (see [`crate::topology`]). An older server is
//! refused before anything is created, and so is a store of an older format
//! (`holdpoint migrate` brings it up).

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};

use crate::{Bus, BusError, Topology};

/// The store format this build writes and reads: the layout of the records,
/// events, subjects and streams that Holdpoint keeps in JetStream. It changes only
/// when a release cannot read what the previous format wrote, or writes what that
/// format cannot read; releases of one format run side by side (README.md,
/// "Upgrades and version skew").
///
/// Format 1 kept the records in four KV buckets with outboxes of effects relayed
/// by the workers; format 2 keeps them, and every effect, in the state stream.
pub const STORE_FORMAT: u32 = 2;

/// The commands stream's metadata key holding the [`STORE_FORMAT`] the store was
/// set up with, as a decimal string. A store set up before the key existed reads
/// as format 1.
pub const STORE_FORMAT_KEY: &str = "holdpoint.store-format";

/// The store format recorded in the commands stream's `metadata`: 1 when absent.
///
/// # Errors
/// [`BusError::Corrupt`] when the value is not a decimal number.
pub fn store_format_of(
    metadata: &std::collections::HashMap<String, String>,
) -> Result<u32, BusError> {
    match metadata.get(STORE_FORMAT_KEY) {
        None => Ok(1),
        Some(v) => v.parse().map_err(|_| BusError::Corrupt {
            key: STORE_FORMAT_KEY.to_owned(),
            message: format!("the store format {v:?} is not a number"),
        }),
    }
}

/// Refuses a store whose commands stream says it was set up by another format: a
/// newer one (run that release), or format 1 (run `holdpoint migrate`).
async fn check_store_format(js: &jetstream::Context, topo: &Topology) -> Result<(), BusError> {
    let Ok(existing) = js.get_stream(topo.commands_stream()).await else {
        return Ok(());
    };
    let found = store_format_of(&existing.cached_info().config.metadata)?;
    if found > STORE_FORMAT {
        return Err(BusError::permanent(
            "setup",
            format!(
                "the store has format {found}, set up by a newer Holdpoint; this one ({}) \
                 reads format {STORE_FORMAT} only: run a release of format {found}, or \
                 restore a backup taken before the upgrade (README.md, \"Upgrades and \
                 version skew\")",
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    if found < STORE_FORMAT {
        return Err(BusError::StoreFormat { found });
    }
    Ok(())
}

impl Bus {
    /// Creates (or updates) every stream and bucket and returns a handle. Idempotent:
    /// every process may call it at start.
    ///
    /// # Errors
    /// [`BusError`] when JetStream refuses.
    pub async fn setup(client: async_nats::Client, topo: Topology) -> Result<Self, BusError> {
        Self::setup_with(client, topo, true).await
    }

    /// Like [`Bus::setup`], but never changes a stream that exists: for clients (a
    /// runtime's default topology must not reset the duplicate window or replicas an
    /// operator configured). Streams and buckets that do not exist yet are created.
    ///
    /// # Errors
    /// [`BusError`] when JetStream refuses.
    pub async fn attach(client: async_nats::Client, topo: Topology) -> Result<Self, BusError> {
        Self::setup_with(client, topo, false).await
    }

    async fn setup_with(
        client: async_nats::Client,
        topo: Topology,
        update: bool,
    ) -> Result<Self, BusError> {
        if !(1..=1024).contains(&topo.partitions) {
            return Err(BusError::permanent(
                "setup",
                format!("partitions must be 1 to 1024 (got {})", topo.partitions),
            ));
        }
        crate::check_version(&client.server_info().version)?;
        let js = jetstream::new(client.clone());
        check_store_format(&js, &topo).await?;
        let bucket = |bucket: String, max_age: Duration| kv::Config {
            bucket,
            history: 1,
            storage: stream::StorageType::File,
            num_replicas: topo.replicas,
            max_age,
            ..Default::default()
        };
        let forever = Duration::ZERO;
        let state = ensure_state(&js, &topo).await?;
        for cfg in stream_configs(&topo) {
            ensure_stream(&js, &topo, cfg, update).await?;
        }
        let outcomes = ensure_bucket(&js, bucket(topo.outcomes_bucket(), topo.outcome_ttl)).await?;
        let webhooks = ensure_bucket(&js, bucket(topo.webhooks_bucket(), forever)).await?;
        let webhook_delivered = ensure_bucket(
            &js,
            bucket(
                topo.webhook_delivered_bucket(),
                crate::webhooks::DELIVERED_TTL,
            ),
        )
        .await?;
        ensure_bucket(&js, bucket(topo.presence_bucket(), topo.presence_ttl)).await?;
        Ok(Bus {
            client,
            js,
            topo,
            state,
            outcomes,
            webhooks,
            webhook_delivered,
            readers: std::sync::Arc::new(tokio::sync::Semaphore::new(crate::STORED_READERS)),
        })
    }
}

/// The state stream's configuration: a KV bucket's stream (ADR-8: one message per
/// subject, rollups, direct gets) that also takes the effect subjects, allows
/// atomic batches, per-message TTLs and message schedules, and has a short
/// duplicate window: a batch's records are guarded by their expectations, and its
/// effects' `Nats-Msg-Id`s are for the public streams (a second commit of one
/// decision is refused on the expectations, never on an id).
pub fn state_config(topo: &Topology) -> stream::Config {
    let bucket = topo.state_bucket();
    stream::Config {
        name: topo.state_stream(),
        subjects: vec![format!("$KV.{bucket}.>"), topo.effects_subjects()],
        max_messages_per_subject: 1,
        storage: stream::StorageType::File,
        num_replicas: topo.replicas,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        // No limit discards anything (message schedules refuse discard-new).
        discard: stream::DiscardPolicy::Old,
        duplicate_window: STATE_DUPLICATE_WINDOW,
        allow_atomic_publish: true,
        allow_message_ttl: true,
        allow_message_schedules: true,
        ..Default::default()
    }
}

/// The state stream's duplicate window (see [`state_config`]).
pub const STATE_DUPLICATE_WINDOW: Duration = Duration::from_secs(1);

pub(crate) async fn ensure_state(
    js: &jetstream::Context,
    topo: &Topology,
) -> Result<kv::Store, BusError> {
    let cfg = state_config(topo);
    if js.get_stream(&cfg.name).await.is_err() {
        // Another process may create it at the same time; then bind to theirs.
        let created = js.get_or_create_stream(cfg).await;
        return js
            .get_key_value(topo.state_bucket())
            .await
            .map_err(|bind| match created {
                Err(create) => BusError::transient("create state stream", create),
                Ok(_) => BusError::transient("bind state bucket", bind),
            });
    }
    js.get_key_value(topo.state_bucket())
        .await
        .map_err(|e| BusError::transient("bind state bucket", e))
}

/// The commands, events, lanes, audit and webhook streams' configurations.
fn stream_configs(topo: &Topology) -> Vec<stream::Config> {
    let sp = &topo.subject_prefix;
    let file = |name: String, subjects: Vec<String>| stream::Config {
        name,
        subjects,
        storage: stream::StorageType::File,
        num_replicas: topo.replicas,
        duplicate_window: topo.duplicate_window,
        ..Default::default()
    };
    let (src, dest) = topo.command_transform();
    let [events_tf, lanes_tf, audit_tf, commands_tf] = topo.effect_transforms();
    let from_state = |public: &str, (source, destination): (String, String)| {
        Some(vec![stream::Source {
            name: topo.state_stream(),
            filter_subject: None,
            subject_transforms: vec![stream::SubjectTransform {
                source,
                destination,
            }],
            consumer: Some(stream::StreamConsumerSource::new(
                topo.source_consumer(public),
                topo.source_deliver_subject(public),
            )),
            ..Default::default()
        }])
    };
    // Follow-up commands and fired deadlines come from the state stream; the
    // stream's own transform partitions a sourced command as a published one.
    let commands = stream::Config {
        retention: stream::RetentionPolicy::WorkQueue,
        subject_transform: Some(stream::SubjectTransform {
            source: src.clone(),
            destination: dest,
        }),
        sources: from_state(&topo.commands_stream(), commands_tf),
        metadata: [(STORE_FORMAT_KEY.to_owned(), STORE_FORMAT.to_string())].into(),
        ..file(topo.commands_stream(), vec![src])
    };
    // A public stream: sources `hp.fx.<what>.…` from the state stream as
    // `hp.<what>.…`, and republishes what it stored.
    let effects = |name: String, what: &str, tf: (String, String)| {
        let public = format!("{sp}.{what}.>");
        stream::Config {
            republish: Some(stream::Republish {
                source: public.clone(),
                destination: public,
                headers_only: false,
            }),
            sources: from_state(&name, tf),
            ..file(name, Vec::new())
        }
    };
    vec![
        commands,
        stream::Config {
            max_age: topo.event_max_age,
            ..effects(topo.events_stream(), "evt", events_tf)
        },
        effects(topo.lanes_stream(), "lane", lanes_tf),
        stream::Config {
            max_age: topo.audit_max_age,
            ..effects(topo.audit_stream(), "audit", audit_tf)
        },
        stream::Config {
            retention: stream::RetentionPolicy::WorkQueue,
            ..file(topo.webhook_queue_stream(), vec![format!("{sp}.whk.>")])
        },
        stream::Config {
            max_age: crate::webhooks::ATTEMPTS_MAX_AGE,
            max_messages_per_subject: crate::webhooks::ATTEMPTS_PER_ENDPOINT,
            ..file(topo.webhook_attempts_stream(), vec![format!("{sp}.wha.>")])
        },
    ]
}

/// Creates the stream, or brings an existing one in step with `cfg`. An existing
/// stream whose managed settings already match is left alone, so a process whose
/// NATS user may not update streams (ops/nats/holdpoint.conf: only `setup` may)
/// binds to it without asking. If they differ and the update gets no answer (what
/// a denied publish looks like to the client), the process binds to the stream as
/// it is and warns; an update JetStream refuses is still an error.
async fn ensure_stream(
    js: &jetstream::Context,
    topo: &Topology,
    cfg: stream::Config,
    update: bool,
) -> Result<(), BusError> {
    match js.get_stream(&cfg.name).await {
        Ok(existing) => {
            let info = existing.cached_info();
            let have = &info.config;
            if !update {
                return Ok(());
            }
            if same_managed_settings(have, &cfg) {
                // A source that has heard nothing for a while (its durable consumer
                // deleted, say) gets its consumer made again. One that has not
                // reported yet (`active` absent: a stream just made) is left alone.
                let silent = info
                    .sources
                    .iter()
                    .any(|s| s.active.is_some_and(|a| a > SOURCE_SILENT));
                if silent {
                    ensure_source_consumers(js, topo, &cfg, SourceStart::All).await?;
                }
                return Ok(());
            }
            let start = match have.sources.as_deref().unwrap_or_default() {
                // Sourcing the state stream through an ephemeral consumer (the
                // first releases of format 2): go on from where it is.
                [s] if s.name == topo.state_stream() && s.consumer.is_none() => {
                    SourceStart::Since(caught_up_moment(js, topo, &cfg.name).await?)
                }
                _ => SourceStart::All,
            };
            ensure_source_consumers(js, topo, &cfg, start).await?;
            match js.update_stream(&cfg).await {
                Ok(_) => {}
                Err(e) if e.kind() == jetstream::context::CreateStreamErrorKind::TimedOut => {
                    tracing::warn!(
                        stream = %cfg.name,
                        "stream settings differ from the configured ones and the update got no \
                         answer (is this NATS user allowed to update streams?); using the stream \
                         as it is: run the setup role to apply them"
                    );
                }
                Err(e) => return Err(BusError::transient("update stream", e)),
            }
        }
        Err(_) => {
            ensure_source_consumers(js, topo, &cfg, SourceStart::All).await?;
            js.get_or_create_stream(cfg)
                .await
                .map_err(|e| BusError::transient("create stream", e))?;
        }
    }
    Ok(())
}

/// Where a new durable source consumer starts in the state stream.
#[derive(Debug, Clone, Copy)]
enum SourceStart {
    /// At the first effect the state stream still holds: for a stream that has
    /// sourced nothing from it yet.
    All,
    /// At the first effect stored at or after this moment: for a stream whose
    /// ephemeral source had sourced everything before it. What both sources then
    /// deliver is dropped the second time by its `Nats-Msg-Id` (the moment is
    /// within the public stream's duplicate window, see [`caught_up_moment`]).
    Since(time::OffsetDateTime),
}

/// The durable push consumers on the state stream that `cfg`'s sources name
/// (ADR-58 durable sourcing), created when missing. Each takes one public
/// stream's effect subjects (its source transform's filter) with the settings
/// nats-server requires of a sourcing consumer: `AckPolicy::FlowControl`, flow
/// control, a heartbeat, no delivery limit, and the stream's replicas, so that it
/// moves with the state stream's leader instead of being made again.
///
/// # Errors
/// Transient when JetStream refuses the consumer. An unanswered create (a NATS
/// user that may not create consumers) only warns: the stream is then created or
/// updated and the server reports the missing consumer in its source's `error`.
async fn ensure_source_consumers(
    js: &jetstream::Context,
    topo: &Topology,
    cfg: &stream::Config,
    start: SourceStart,
) -> Result<(), BusError> {
    let sources = cfg.sources.as_deref().unwrap_or_default();
    for (source, consumer) in sources
        .iter()
        .filter_map(|s| s.consumer.as_ref().map(|c| (s, c)))
    {
        let state = js
            .get_stream_no_info(&source.name)
            .await
            .map_err(|e| BusError::transient("bind state stream", e))?;
        if state.consumer_info(&consumer.name).await.is_ok() {
            continue;
        }
        let filter = source
            .subject_transforms
            .first()
            .map(|t| t.source.clone())
            .unwrap_or_default();
        let deliver_policy = match start {
            SourceStart::All => jetstream::consumer::DeliverPolicy::All,
            SourceStart::Since(start_time) => {
                jetstream::consumer::DeliverPolicy::ByStartTime { start_time }
            }
        };
        let config = jetstream::consumer::push::Config {
            durable_name: Some(consumer.name.clone()),
            name: Some(consumer.name.clone()),
            description: Some(format!(
                "Holdpoint: {} sources {filter} through it",
                cfg.name
            )),
            deliver_subject: consumer.deliver_subject.clone(),
            filter_subject: filter,
            deliver_policy,
            ack_policy: jetstream::consumer::AckPolicy::FlowControl,
            flow_control: true,
            idle_heartbeat: SOURCE_HEARTBEAT,
            max_deliver: -1,
            num_replicas: topo.replicas,
            ..Default::default()
        };
        match state.create_consumer(config).await {
            Ok(_) => {}
            Err(e) if e.kind() == jetstream::stream::ConsumerErrorKind::TimedOut => {
                tracing::warn!(
                    consumer = %consumer.name,
                    "the state stream's source consumer is missing and creating it got no \
                     answer (is this NATS user allowed to?): run the setup role"
                );
            }
            Err(e) => return Err(BusError::transient("create source consumer", e)),
        }
    }
    Ok(())
}

/// How long a source may hear nothing (not even a heartbeat) before a setup
/// checks that its durable consumer exists.
const SOURCE_SILENT: Duration = Duration::from_secs(30);

/// How often a source consumer sends a heartbeat when it has nothing to deliver:
/// an idle source's flow-control acknowledgements ride on it (ADR-58).
const SOURCE_HEARTBEAT: Duration = Duration::from_secs(1);

/// A moment before which `stream`'s ephemeral source has sourced every effect:
/// half the duplicate window ago, once its source reports no lag. Waits up to
/// 10 s for the lag to reach 0.
///
/// # Errors
/// Transient when the stream cannot be read or its source still lags: switching
/// then could skip effects, so the setup is refused and can be run again.
async fn caught_up_moment(
    js: &jetstream::Context,
    topo: &Topology,
    stream: &str,
) -> Result<time::OffsetDateTime, BusError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let moment = time::OffsetDateTime::now_utc() - topo.duplicate_window / 2;
        let mut s = js
            .get_stream(stream)
            .await
            .map_err(|e| BusError::transient("read stream", e))?;
        let info = s
            .info()
            .await
            .map_err(|e| BusError::transient("read stream", e))?;
        if info.sources.iter().all(|s| s.lag == 0) {
            return Ok(moment);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(BusError::transient(
                "switch to durable sourcing",
                format!(
                    "{stream} still lags behind the state stream after 10 s; run the setup again \
                     once it has caught up"
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether `have` already has every setting Holdpoint sets in `want`.
fn same_managed_settings(have: &stream::Config, want: &stream::Config) -> bool {
    have.subjects == want.subjects
        && have.retention == want.retention
        && have.storage == want.storage
        && have.num_replicas == want.num_replicas
        && have.max_age == want.max_age
        && have.duplicate_window == want.duplicate_window
        && have.subject_transform == want.subject_transform
        && have.republish == want.republish
        && same_sources(have.sources.as_deref(), want.sources.as_deref())
        && (!want.allow_message_schedules || have.allow_message_schedules)
        && (!want.allow_rollup || have.allow_rollup)
        && want
            .metadata
            .get(STORE_FORMAT_KEY)
            .is_none_or(|f| have.metadata.get(STORE_FORMAT_KEY) == Some(f))
}

/// Whether two streams source the same streams with the same transforms.
fn same_sources(have: Option<&[stream::Source]>, want: Option<&[stream::Source]>) -> bool {
    let key = |s: &[stream::Source]| {
        s.iter()
            .map(|x| {
                let tf: Vec<(String, String)> = x
                    .subject_transforms
                    .iter()
                    .map(|t| (t.source.clone(), t.destination.clone()))
                    .collect();
                let consumer = x.consumer.as_ref().map(|c| c.name.clone());
                (x.name.clone(), tf, consumer)
            })
            .collect::<Vec<_>>()
    };
    key(have.unwrap_or_default()) == key(want.unwrap_or_default())
}

/// Creates the bucket's backing stream as the KV specification (ADR-8) lays it out,
/// then binds the bucket. The stream is created directly rather than through
/// `create_key_value`, whose account-limits lookup does not parse a 2.9 server's
/// account info; the resulting bucket is the same.
async fn ensure_bucket(js: &jetstream::Context, cfg: kv::Config) -> Result<kv::Store, BusError> {
    let window = if cfg.max_age.is_zero() {
        Duration::from_secs(120)
    } else {
        cfg.max_age.min(Duration::from_secs(120))
    };
    ensure_bucket_within(js, cfg, window).await
}

/// [`ensure_bucket`] with the backing stream's duplicate window `window` (a bucket
/// that exists keeps its own).
async fn ensure_bucket_within(
    js: &jetstream::Context,
    cfg: kv::Config,
    window: Duration,
) -> Result<kv::Store, BusError> {
    if let Ok(store) = js.get_key_value(&cfg.bucket).await {
        return Ok(store);
    }
    let stream = stream::Config {
        name: format!("KV_{}", cfg.bucket),
        subjects: vec![format!("$KV.{}.>", cfg.bucket)],
        max_messages_per_subject: cfg.history,
        max_age: cfg.max_age,
        storage: cfg.storage,
        num_replicas: cfg.num_replicas,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        duplicate_window: window,
        ..Default::default()
    };
    // Another process may create it at the same time; then bind to theirs.
    let created = js.get_or_create_stream(stream).await;
    js.get_key_value(&cfg.bucket)
        .await
        .map_err(|bind| match created {
            Err(create) => BusError::transient("create bucket", create),
            Ok(_) => BusError::transient("bind bucket", bind),
        })
}

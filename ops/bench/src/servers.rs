//! The nats-server(s) and Holdpoint processes a run starts, and what the bench
//! reads of them: CPU time, peak memory, partition ownership, client messages.

#[allow(unused_imports)]
use super::*;

/// How long a started nats-server or ingress may take to listen.
pub(crate) const WAIT_LISTENING: Duration = Duration::from_secs(15);

/// Where Holdpoint and the raw baseline run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// One nats-server, default fsync (every two minutes).
    Default,
    /// One nats-server, `sync_interval: always`.
    Always,
    /// Three nats-servers on this machine, R3 streams and buckets, fsync always.
    Cluster,
}

impl Setting {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Setting::Default => "default",
            Setting::Always => "always",
            Setting::Cluster => "cluster",
        }
    }

    pub(crate) fn replicas(self) -> usize {
        if self == Setting::Cluster { 3 } else { 1 }
    }
}

/// The nats-server(s) a run uses.
pub(crate) enum Nats {
    Single(Proc),
    Cluster(holdpoint_tests::nats::NatsCluster),
}

impl Nats {
    pub(crate) fn pids(&self) -> Vec<u32> {
        match self {
            Nats::Single(p) => vec![p.pid()],
            Nats::Cluster(c) => (0..c.len()).filter_map(|i| c.pid(i)).collect(),
        }
    }
}

/// The node (start order) leading each stream an answer writes, in a cluster;
/// empty for one server.
pub(crate) async fn stream_leaders(nats: &Nats, url: &str) -> Vec<(&'static str, Option<usize>)> {
    let Nats::Cluster(c) = nats else {
        return Vec::new();
    };
    // A cluster's URL is the nodes' URLs joined with commas, which one address
    // does not parse: connect to the list.
    let urls: Vec<String> = url.split(',').map(str::to_owned).collect();
    let Ok(client) = async_nats::connect(urls).await else {
        return Vec::new();
    };
    let js = async_nats::jetstream::new(client);
    let mut leaders = Vec::new();
    for name in [
        "KV_HP_STATE",
        "HP_COMMANDS",
        "HP_EVENTS",
        "HP_AUDIT",
        "KV_HP_OUTCOMES",
    ] {
        let leader = match js.get_stream(name).await {
            Ok(mut s) => s
                .info()
                .await
                .ok()
                .and_then(|i| i.cluster.as_ref().and_then(|c| c.leader.clone()))
                .and_then(|l| c.index_of(&l)),
            Err(_) => None,
        };
        leaders.push((name, leader));
    }
    leaders
}

pub(crate) struct Proc {
    pub(crate) child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// CPU seconds (user + system) a process has used so far.
pub(crate) fn cpu_secs(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after the name.
    (tick(11) + tick(12)) / 100.0
}

/// `VmHWM` (peak RSS) and `VmRSS` of a process, in MiB.
pub(crate) fn memory(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Partitions of the commands stream (the worker's default).
pub(crate) const PARTITIONS: u64 = 8;

/// Waits until every worker (by admin port) owns a share of the partitions and
/// together they own all of them: a worker that joins is handed its share once it
/// has been alive for a while (the worker's `SETTLED`), and the bench measures the
/// settled state. The server pins a partition to a worker when it delivers a
/// command, so a trickle of interactions is opened meanwhile (they stay pending,
/// outside the pool). Returns how long that took.
pub(crate) async fn balanced(
    http: &reqwest::Client,
    admins: &[u16],
    rt: &Runtime,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let mut round = 0;
    loop {
        round += 1;
        open_pool(rt, 16, 10_000_000 * admins.len() + round * 16).await?;
        let mut owned = Vec::new();
        for port in admins {
            let text = match http
                .get(format!("http://127.0.0.1:{port}/metrics"))
                .send()
                .await
            {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            let n = text
                .lines()
                .find_map(|l| l.strip_prefix("holdpoint_partitions_owned "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0) as u64;
            owned.push(n);
        }
        if owned.iter().all(|&n| n > 0) && owned.iter().sum::<u64>() == PARTITIONS {
            return Ok(start.elapsed());
        }
        if Instant::now() > deadline {
            bail!("workers did not share the {PARTITIONS} partitions within 60 s: {owned:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts the nats-server(s) of `setting`: (servers, client URL, version, the
/// single server's monitoring port).
pub(crate) async fn start_nats(
    bin: &Path,
    dir: &Path,
    setting: Setting,
) -> anyhow::Result<(Nats, String, String, Option<u16>)> {
    let version = String::from_utf8_lossy(&Command::new(bin).arg("--version").output()?.stdout)
        .trim()
        .to_owned();
    if setting == Setting::Cluster {
        let cluster = holdpoint_tests::nats::NatsCluster::try_start_with(
            holdpoint_tests::nats::NatsClusterOptions { sync_always: true },
        )
        .await?;
        let url = cluster.urls_csv();
        return Ok((Nats::Cluster(cluster), url, version, None));
    }
    let sync_always = setting == Setting::Always;
    let (port, monitor) = (free_port()?, free_port()?);
    let store = dir.join("store");
    let conf = dir.join("nats.conf");
    let sync = if sync_always {
        "\n  sync_interval: always"
    } else {
        ""
    };
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\nhttp: 127.0.0.1:{monitor}\njetstream {{\n  store_dir: \"{}\"{sync}\n}}\n",
            store.display()
        ),
    )?;
    let child = localnats::spawn(bin, [OsStr::new("-c"), conf.as_os_str()], None)?;
    let p = Proc { child };
    localnats::wait_listening(port, WAIT_LISTENING).await?;
    Ok((
        Nats::Single(p),
        format!("nats://127.0.0.1:{port}"),
        version,
        Some(monitor),
    ))
}

/// The JSON of monitoring endpoint `path` (for example `/varz`) of the server whose
/// monitoring port is `monitor`; `None` without one or when it does not answer.
async fn monitor_json(http: &reqwest::Client, monitor: Option<u16>, path: &str) -> Option<Value> {
    let port = monitor?;
    http.get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// Messages clients have sent to the server so far (`in_msgs` of its `/varz`):
/// publishes, acks and JetStream API requests alike.
pub(crate) async fn messages_in(http: &reqwest::Client, monitor: Option<u16>) -> Option<u64> {
    monitor_json(http, monitor, "/varz").await?["in_msgs"].as_u64()
}

/// The sum and count of a worker's `holdpoint_commit_transitions` histogram (by
/// its admin port); `None` when the worker does not report it.
pub(crate) async fn commit_histogram(http: &reqwest::Client, admin: u16) -> Option<(f64, f64)> {
    let text = http
        .get(format!("http://127.0.0.1:{admin}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    Some((
        value("holdpoint_commit_transitions_sum ")?,
        value("holdpoint_commit_transitions_count ")?,
    ))
}

/// Messages stored in every stream so far (the sum of their last sequences, from
/// `/jsz?streams=true`): the state stream's atomic batches and what the public
/// streams source from it alike, KV writes included.
pub(crate) async fn messages_stored(http: &reqwest::Client, monitor: Option<u16>) -> Option<u64> {
    let v = monitor_json(http, monitor, "/jsz?streams=true").await?;
    let mut total = 0u64;
    for account in v["account_details"].as_array()? {
        for stream in account["stream_detail"].as_array().into_iter().flatten() {
            total += stream["state"]["last_seq"].as_u64().unwrap_or(0);
        }
    }
    Some(total)
}

/// What the state stream holds that its sourcing streams have not stored yet: for
/// every stream that sources `KV_HP_STATE`, the larger of its source's `lag` (as
/// the sourcing stream last saw it) and the `num_pending` of the durable source
/// consumer it reads (`HP_SRC_<what>`), summed. `None` when the servers do not
/// answer.
pub(crate) async fn effects_backlog(js: &async_nats::jetstream::Context) -> Option<u64> {
    use futures::TryStreamExt as _;
    let infos: Vec<async_nats::jetstream::stream::Info> = js
        .stream_names()
        .try_collect::<Vec<String>>()
        .await
        .ok()
        .map(|names| {
            futures::future::join_all(names.into_iter().map(|n| {
                let js = js.clone();
                async move { js.get_stream(n).await.ok()?.info().await.ok().cloned() }
            }))
        })?
        .await
        .into_iter()
        .flatten()
        .collect();
    let state = js.get_stream("KV_HP_STATE").await.ok()?;
    let mut total = 0;
    for info in infos {
        let lag: u64 = info
            .sources
            .iter()
            .filter(|s| s.name == "KV_HP_STATE")
            .map(|s| s.lag)
            .sum();
        let mut pending = 0;
        for source in info.config.sources.iter().flatten() {
            if let (true, Some(c)) = (source.name == "KV_HP_STATE", &source.consumer)
                && let Ok(ci) = state.consumer_info(&c.name).await
            {
                pending += ci.num_pending;
            }
        }
        total += lag.max(pending);
    }
    Some(total)
}

/// The arguments of `holdpoint ingress` on `url`, serving the API on `api` and
/// its admin listener on `admin`, people authenticated with EdDSA JWTs the
/// development key `key` signs (its JWKS file), streams with `replicas`.
pub(crate) fn ingress_args(
    url: &str,
    (api, admin): (u16, u16),
    key: &holdpoint_cli::devtoken::DevKey,
    replicas: usize,
) -> Vec<String> {
    vec![
        "ingress".into(),
        "--nats-url".into(),
        url.to_owned(),
        "--listen".into(),
        format!("127.0.0.1:{api}"),
        "--admin-listen".into(),
        format!("127.0.0.1:{admin}"),
        "--jwt-issuer".into(),
        holdpoint_cli::devtoken::DEV_ISSUER.into(),
        "--jwt-audience".into(),
        holdpoint_cli::devtoken::DEV_AUDIENCE.into(),
        "--jwks-file".into(),
        key.jwks.display().to_string(),
        "--jwt-algorithms".into(),
        "EdDSA".into(),
        "--replicas".into(),
        replicas.to_string(),
    ]
}

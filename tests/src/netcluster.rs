//! A whole Holdpoint spread over a [`Lab`]'s namespaces, for the partition harness
//! ([`crate::partition`], `ops/partition.sh`):
//!
//! | host | address | runs | reaches |
//! |---|---|---|---|
//! | `n1` `n2` `n3` | `10.213.0.1-3` | `nats-server` (one 3-node cluster, JetStream with `sync_interval: always`, file store) | each other |
//! | `w1` `w2` | `.4` `.5` | `holdpoint worker` | the nodes |
//! | `ing` | `.6` | `holdpoint ingress` on `:8080` (development identity headers) | the nodes |
//! | `ntf` | `.7` | `holdpoint notifier` (local mode) and the test's webhook receiver on its loopback | the nodes |
//! | `ld` | `.8` | the load, the runtime side, the readers and the checker (threads of the test process) | the nodes, the ingress |
//!
//! Every stream and bucket is R3. Each process gets the addresses it needs on its
//! command line and the lab's allow list lets nothing else through. Processes are
//! started with `ip netns exec` (their pid is the program's), their output goes to
//! one log file each in a temporary directory, and they are SIGKILLed by pid when
//! the [`NetCluster`] is dropped (then the [`Lab`] kills whatever is left in its
//! namespaces and deletes them).
//!
//! The async methods talk to NATS and HTTP: call them on a thread inside the `ld`
//! namespace ([`in_namespace`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use async_nats::jetstream;

use crate::lab::Lab;

/// The nats-server hosts.
pub const NODES: [&str; 3] = ["n1", "n2", "n3"];
/// The worker hosts.
pub const WORKERS: [&str; 2] = ["w1", "w2"];
/// The ingress host.
pub const INGRESS: &str = "ing";
/// The notifier host (and the webhook receiver's).
pub const NOTIFIER: &str = "ntf";
/// The load's host.
pub const LOAD: &str = "ld";
/// Every host, in address order.
pub const HOSTS: [&str; 8] = ["n1", "n2", "n3", "w1", "w2", "ing", "ntf", "ld"];
/// Client port of every node.
pub const NATS_PORT: u16 = 4222;
/// Route port of every node.
pub const ROUTE_PORT: u16 = 6222;
/// The ingress's API port.
pub const HTTP_PORT: u16 = 8080;
/// Each node's monitoring port, on its own namespace's loopback only
/// (`ip netns exec <node's namespace> curl 127.0.0.1:8222/jsz?consumers=true`).
pub const MONITOR_PORT: u16 = 8222;
/// Where the libfaketime preload library is on Debian (package `faketime`).
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Settings of a [`NetCluster`].
#[derive(Debug, Clone)]
pub struct NetClusterOptions {
    /// Command partitions (`--partitions`).
    pub partitions: u32,
    /// The workers' `ack_wait`.
    pub ack_wait: Duration,
    /// The workers' pin lapse (`priority_timeout`).
    pub priority_timeout: Duration,
    /// The ingress's outcome timeout.
    pub outcome_timeout: Duration,
    /// Each node's store on a tmpfs of this many MiB of its own (for the full-disk
    /// fault), else on the temporary directory's filesystem.
    pub store_mib: Option<u64>,
}

impl Default for NetClusterOptions {
    fn default() -> Self {
        NetClusterOptions {
            partitions: 8,
            ack_wait: Duration::from_secs(3),
            priority_timeout: Duration::from_secs(1),
            outcome_timeout: Duration::from_secs(3),
            store_mib: None,
        }
    }
}

/// A wall clock set off by this many seconds (libfaketime, monotonic clocks left
/// alone); `0` is the machine's clock.
pub type SkewSecs = i64;

/// One process of the cluster: how to start it, and the running child.
#[derive(Debug)]
struct Service {
    host: String,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
    skew: SkewSecs,
    child: Option<Child>,
    started: u32,
}

impl Service {
    fn spawn(&mut self, lab: &Lab) -> Result<()> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut cmd = lab.command(&self.host, &self.program);
        cmd.args(&self.args)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .env("HOLDPOINT_LOG_LEVEL", "warn")
            .env(
                "RUST_LOG",
                std::env::var("HOLDPOINT_WORKER_LOG").unwrap_or_else(|_| "warn".into()),
            );
        if self.skew != 0 {
            cmd.env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME", format!("{:+}s", self.skew))
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        self.child = Some(
            cmd.spawn()
                .with_context(|| format!("starting {}", self.host))?,
        );
        self.started += 1;
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGTERM, then SIGKILL after `grace`.
    async fn stop(&mut self, grace: Duration) {
        let Some(pid) = self.pid() else { return };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Some(c) = self.child.as_mut()
                && !matches!(c.try_wait(), Ok(None))
            {
                self.child = None;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill();
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

/// Holdpoint on a [`Lab`]; see the module documentation.
#[derive(Debug)]
pub struct NetCluster {
    /// The lab (namespaces, cuts).
    pub lab: Arc<Lab>,
    /// The options it runs with.
    pub opts: NetClusterOptions,
    services: BTreeMap<String, Service>,
    mounts: Vec<PathBuf>,
    dir: tempfile::TempDir,
}

/// When set, a [`NetCluster`] copies every process's log into this directory when
/// it is dropped (`ops/partition.sh` sets it).
pub const KEEP_LOGS_ENV: &str = "HOLDPOINT_PARTITION_LOGS";

impl Drop for NetCluster {
    fn drop(&mut self) {
        for s in self.services.values_mut() {
            s.kill();
        }
        if let Some(keep) = std::env::var_os(KEEP_LOGS_ENV) {
            let keep = PathBuf::from(keep);
            if fs::create_dir_all(&keep).is_ok() {
                for s in self.services.values() {
                    let _ = fs::copy(&s.log, keep.join(format!("{}.log", s.host)));
                }
            }
        }
        for m in &self.mounts {
            let _ = crate::lab::run("umount", &["-l", &m.display().to_string()]);
        }
    }
}

/// Runs `f` on a new thread inside `host`'s namespace of `lab`, on a tokio runtime
/// of its own (sockets it opens live in that namespace), and returns its output.
///
/// # Errors
/// When the namespace cannot be entered, the runtime not built, or `f` panics.
pub fn in_namespace<F, Fut, T>(lab: &Lab, host: &str, f: F) -> Result<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
    T: Send + 'static,
{
    let ns = if host == crate::lab::SWITCH {
        lab.switch_ns().to_owned()
    } else {
        lab.host(host).ns.clone()
    };
    let file =
        fs::File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening {ns}"))?;
    let handle = std::thread::Builder::new()
        .name(format!("in-{host}"))
        .spawn(move || -> Result<T> {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("entering {ns}"))?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("building a runtime")?;
            Ok(rt.block_on(f()))
        })
        .context("spawning a thread")?;
    match handle.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Spawns `f` on a new thread inside `host`'s namespace with a runtime of its own,
/// and returns at once; the thread runs until `f` returns.
///
/// # Errors
/// When the thread cannot be spawned (entering the namespace is checked in the
/// thread: `f` is then not run and the join handle gives the error).
pub fn spawn_in_namespace<F, Fut, T>(
    lab: &Lab,
    host: &str,
    f: F,
) -> Result<std::thread::JoinHandle<Result<T>>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
    T: Send + 'static,
{
    let ns = lab.host(host).ns.clone();
    let file =
        fs::File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening {ns}"))?;
    std::thread::Builder::new()
        .name(format!("in-{host}"))
        .spawn(move || -> Result<T> {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("entering {ns}"))?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("building a runtime")?;
            Ok(rt.block_on(f()))
        })
        .context("spawning a thread")
}

impl NetCluster {
    /// Makes the lab's hosts reach what they need, starts the three nodes and waits
    /// (from the calling thread, which must be inside [`LOAD`]) until JetStream can
    /// create an R3 stream; then starts the workers, the ingress and the notifier and
    /// waits until the ingress answers.
    ///
    /// # Errors
    /// When a process does not start or the cluster is not ready within 90 s.
    pub async fn start(lab: Arc<Lab>, opts: NetClusterOptions) -> Result<NetCluster> {
        let mut pairs = Vec::new();
        for (i, a) in NODES.iter().enumerate() {
            for b in &NODES[i + 1..] {
                pairs.push((*a, *b));
            }
            for c in WORKERS.iter().chain(&[INGRESS, NOTIFIER, LOAD]) {
                pairs.push((*a, *c));
            }
        }
        pairs.push((LOAD, INGRESS));
        lab.allow(&pairs)?;
        let dir = tempfile::Builder::new()
            .prefix("holdpoint-netcluster-")
            .tempdir()?;
        let mut cluster = NetCluster {
            lab,
            opts,
            services: BTreeMap::new(),
            mounts: Vec::new(),
            dir,
        };
        let nats = crate::nats::nats_server_binary();
        for node in NODES {
            let store = cluster.dir.path().join(format!("{node}-store"));
            fs::create_dir_all(&store)?;
            if let Some(mib) = cluster.opts.store_mib {
                crate::lab::run(
                    "mount",
                    &[
                        "-t",
                        "tmpfs",
                        "-o",
                        &format!("size={mib}m"),
                        "hpl-store",
                        &store.display().to_string(),
                    ],
                )?;
                cluster.mounts.push(store.clone());
            }
            let config = cluster.dir.path().join(format!("{node}.conf"));
            fs::write(&config, cluster.node_config(node, &store))?;
            cluster.add(node, nats.clone(), vec!["-c".into(), config.into()], 0)?;
        }
        cluster.wait_jetstream(Duration::from_secs(90)).await?;
        let bin = crate::app::holdpoint_binary();
        for w in WORKERS {
            let args = cluster.worker_args(w);
            cluster.add(w, bin.clone(), args, 0)?;
        }
        let args = cluster.ingress_args();
        cluster.add(INGRESS, bin.clone(), args, 0)?;
        let args = cluster.notifier_args();
        cluster.add(NOTIFIER, bin, args, 0)?;
        cluster.wait_ingress(Duration::from_secs(90)).await?;
        Ok(cluster)
    }

    fn add(
        &mut self,
        host: &str,
        program: PathBuf,
        args: Vec<OsString>,
        skew: SkewSecs,
    ) -> Result<()> {
        let mut s = Service {
            host: host.to_owned(),
            program,
            args,
            log: self.dir.path().join(format!("{host}.log")),
            skew,
            child: None,
            started: 0,
        };
        s.spawn(&self.lab)?;
        self.services.insert(host.to_owned(), s);
        Ok(())
    }

    fn node_config(&self, node: &str, store: &Path) -> String {
        let me = self.lab.addr(node);
        let routes: Vec<String> = NODES
            .iter()
            .filter(|n| **n != node)
            .map(|n| format!("    nats-route://{}:{ROUTE_PORT}", self.lab.addr(n)))
            .collect();
        format!(
            "# generated by holdpoint-tests (netcluster)\n\
             server_name: {node}\n\
             listen: {me}:{NATS_PORT}\n\
             http: \"127.0.0.1:{MONITOR_PORT}\"\n\
             jetstream {{\n  store_dir: {store:?}\n  sync_interval: always\n}}\n\
             cluster {{\n  name: hplab\n  listen: {me}:{ROUTE_PORT}\n  routes: [\n{}\n  ]\n}}\n",
            routes.join("\n"),
            store = store.display().to_string(),
        )
    }

    /// The nodes' client URLs, comma-separated.
    pub fn nats_urls(&self) -> String {
        NODES
            .iter()
            .map(|n| format!("nats://{}:{NATS_PORT}", self.lab.addr(n)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The ingress's base URL (`http://10.213.0.6:8080`).
    pub fn base(&self) -> String {
        format!("http://{}:{HTTP_PORT}", self.lab.addr(INGRESS))
    }

    fn common_args(&self) -> Vec<OsString> {
        [
            "--nats-url".to_owned(),
            self.nats_urls(),
            "--replicas".into(),
            "3".into(),
            "--partitions".into(),
            self.opts.partitions.to_string(),
            "--ack-wait-ms".into(),
            self.opts.ack_wait.as_millis().to_string(),
            "--priority-timeout-ms".into(),
            self.opts.priority_timeout.as_millis().to_string(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect()
    }

    fn worker_args(&self, host: &str) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["worker".into()];
        a.extend(self.common_args());
        a.extend(["--worker-id".into(), host.into()]);
        a
    }

    fn ingress_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["ingress".into()];
        a.extend(self.common_args());
        a.extend(
            [
                "--listen".to_owned(),
                format!("{}:{HTTP_PORT}", self.lab.addr(INGRESS)),
                "--outcome-timeout-ms".into(),
                self.opts.outcome_timeout.as_millis().to_string(),
                "--insecure-dev-identity".into(),
                "--webhooks-local-mode".into(),
            ]
            .into_iter()
            .map(OsString::from),
        );
        a
    }

    fn notifier_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["notifier".into()];
        a.extend(self.common_args());
        // A failed attempt is tried again within seconds, not after 5 min (the
        // default schedule), so the receiver's figures are read at the end of a run.
        a.extend(
            [
                "--webhooks-local-mode",
                "--webhook-retry-schedule-secs",
                "1,1,2,2,2,2,2,2",
            ]
            .into_iter()
            .map(OsString::from),
        );
        a
    }

    async fn wait_jetstream(&self, within: Duration) -> Result<()> {
        let end = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < end {
            for node in NODES {
                if let Some(s) = self.services.get(node)
                    && s.child.is_none()
                {
                    bail!("{node} is not running");
                }
            }
            match tokio::time::timeout(Duration::from_secs(10), probe_r3(&self.nats_urls())).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last = format!("{e:#}"),
                Err(_) => last = "probe timed out".into(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!(
            "the cluster had no working JetStream in {within:?} (last: {last}); n1's log:\n{}",
            self.log_tail("n1", 30)
        )
    }

    async fn wait_ingress(&self, within: Duration) -> Result<()> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()?;
        let url = format!("{}/v1/interactions?limit=1", self.base());
        let end = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < end {
            match http
                .get(&url)
                .header("X-Holdpoint-Org", "probe")
                .header("X-Holdpoint-Person", "probe")
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => last = format!("status {}", r.status()),
                Err(e) => last = format!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!(
            "the ingress did not answer in {within:?} (last: {last}); its log:\n{}",
            self.log_tail(INGRESS, 30)
        )
    }

    /// The last `lines` lines of `host`'s log.
    pub fn log_tail(&self, host: &str, lines: usize) -> String {
        let Some(s) = self.services.get(host) else {
            return String::new();
        };
        let text = fs::read_to_string(&s.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The directory holding configs, stores and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Node `node`'s store directory.
    pub fn store_dir(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}-store"))
    }

    /// Stops `host`'s process (SIGTERM, SIGKILL after 10 s) and starts it again with
    /// its wall clock `skew` seconds off (`0`: the machine's clock).
    ///
    /// # Errors
    /// When it cannot be started again.
    pub async fn restart(&mut self, host: &str, skew: SkewSecs) -> Result<()> {
        let lab = self.lab.clone();
        let s = self
            .services
            .get_mut(host)
            .with_context(|| format!("no service on {host}"))?;
        s.stop(Duration::from_secs(10)).await;
        s.skew = skew;
        s.spawn(&lab)
    }

    /// SIGKILLs `host`'s process.
    pub fn kill(&mut self, host: &str) {
        if let Some(s) = self.services.get_mut(host) {
            s.kill();
        }
    }

    /// Starts `host`'s process again after [`NetCluster::kill`].
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn respawn(&mut self, host: &str) -> Result<()> {
        let lab = self.lab.clone();
        let s = self
            .services
            .get_mut(host)
            .with_context(|| format!("no service on {host}"))?;
        s.kill();
        s.spawn(&lab)
    }

    /// The hosts whose process died by itself (not killed by the harness).
    pub fn dead(&mut self) -> Vec<String> {
        self.services
            .iter_mut()
            .filter_map(|(h, s)| (s.child.is_some() && !s.running()).then(|| h.clone()))
            .collect()
    }

    /// `host`'s process id, while it runs.
    pub fn pid(&self, host: &str) -> Option<u32> {
        self.services.get(host).and_then(Service::pid)
    }

    /// How often `host`'s process was started.
    pub fn starts(&self, host: &str) -> u32 {
        self.services.get(host).map_or(0, |s| s.started)
    }
}

/// Creates and deletes an R3 memory stream through `urls`.
async fn probe_r3(urls: &str) -> Result<()> {
    let client = holdpoint_bus::connect(urls, "netcluster-probe").await?;
    let mut js = jetstream::new(client);
    js.set_timeout(Duration::from_secs(3));
    let name = format!("HP_PROBE_{}", uuid::Uuid::new_v4().simple());
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("hp.probe.{name}")],
        num_replicas: 3,
        storage: jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .context("creating an R3 stream")?;
    js.delete_stream(&name).await.context("deleting it")?;
    Ok(())
}

/// The node (`n1`..`n3`) leading `stream`, as JetStream reports it.
pub async fn stream_leader(js: &jetstream::Context, stream: &str) -> Option<String> {
    let mut s = js.get_stream(stream).await.ok()?;
    let info = s.info().await.ok()?;
    info.cluster.as_ref()?.leader.clone()
}

/// The nodes leading each of `stream`'s `consumers`, counted per node.
pub async fn consumer_leaders(
    js: &jetstream::Context,
    stream: &str,
    consumers: &[String],
) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(s) = js.get_stream(stream).await else {
        return out;
    };
    for c in consumers {
        let Ok(mut consumer) = s.get_consumer::<jetstream::consumer::pull::Config>(c).await else {
            continue;
        };
        if let Ok(info) = consumer.info().await
            && let Some(leader) = info.cluster.as_ref().and_then(|c| c.leader.clone())
        {
            *out.entry(leader).or_default() += 1;
        }
    }
    out
}

//! A whole Holdpoint on a private nats-server, for integration tests.
//!
//! [`TestApp`] starts a [`NatsServer`] (free port, temporary file store), sets the
//! topology up, runs the ingress in-process on a free port (development identity),
//! and runs workers either in-process ([`TestApp::start_worker`]) or as real
//! `holdpoint worker` child processes ([`TestApp::spawn_worker_process`]) that a test
//! can SIGKILL. [`Person`] talks HTTP as one person of one organisation;
//! [`TestApp::runtime`] is the runtime side. [`TestApp::wait_idle`] waits until the
//! workers' consumer has nothing pending or unacknowledged, so counting events
//! afterwards is exact, not hopeful.
//!
//! `TestApp` (the default, `TestApp<NatsServer>`) runs on one server;
//! [`TestApp::start_cluster`] gives a `TestApp<NatsCluster>` that runs the same
//! Holdpoint against every node of a 3-node cluster (set
//! [`Topology::replicas`] to 3 in its options for R3 streams and buckets).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream::consumer;
use futures::StreamExt as _;
use holdpoint_bus::{Bus, Topology};
use holdpoint_client::Runtime;
use holdpoint_domain::{Event, Interaction, InteractionId, OrgId};
use holdpoint_ingress::{AppState, IdentityMode, IngressConfig};
use holdpoint_worker::WorkerConfig;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::nats::{
    NatsCluster, NatsClusterOptions, NatsServer, NatsServerOptions, wait_for, workspace_root,
};

/// What a [`TestApp`] runs on: a single [`NatsServer`] or a [`NatsCluster`].
pub trait Broker: Send + Sync + 'static {
    /// The URL(s) services connect to (comma-separated for a cluster).
    fn url(&self) -> String;
}

impl Broker for NatsServer {
    fn url(&self) -> String {
        NatsServer::url(self)
    }
}

impl Broker for NatsCluster {
    fn url(&self) -> String {
        self.urls_csv()
    }
}

/// Settings of a [`TestApp`].
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// Topology (ack_wait, duplicate window...).
    pub topo: Topology,
    /// In-process workers started with the app.
    pub workers: usize,
    /// The ingress's outcome timeout.
    pub outcome_timeout: Duration,
    /// nats-server options.
    pub nats: NatsServerOptions,
    /// How the ingress identifies callers (default: the development headers).
    pub identity: IdentityMode,
    /// The ingress's limit of open event streams per caller.
    pub max_streams_per_caller: usize,
    /// The ingress's limit of API requests in flight.
    pub max_in_flight: usize,
    /// The ingress reads an A2A request without `A2A-Version` as 1.0 (off: 0.3).
    pub a2a_missing_version_is_1_0: bool,
    /// The workers' deadline settings (in-process and child processes).
    pub deadlines: holdpoint_domain::Deadlines,
    /// Webhooks in local mode (plain http to loopback receivers); default on.
    pub webhooks_local: bool,
}

impl Default for AppOptions {
    fn default() -> Self {
        AppOptions {
            topo: Topology {
                ack_wait: Duration::from_secs(2),
                ..Topology::default()
            },
            workers: 1,
            outcome_timeout: Duration::from_secs(5),
            nats: NatsServerOptions::default(),
            identity: IdentityMode::insecure_dev_headers(),
            max_streams_per_caller: IngressConfig::default().max_streams_per_caller,
            max_in_flight: IngressConfig::default().max_in_flight,
            a2a_missing_version_is_1_0: false,
            deadlines: holdpoint_domain::Deadlines::default(),
            webhooks_local: true,
        }
    }
}

struct InProcessWorker {
    token: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
}

/// A running Holdpoint.
pub struct TestApp<N: Broker = NatsServer> {
    /// The private nats-server (or cluster).
    pub nats: N,
    /// The options it was started with.
    pub opts: AppOptions,
    /// The bus (connected to [`TestApp::nats`]).
    pub bus: Bus,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    http: reqwest::Client,
    state: AppState,
    ingress: CancellationToken,
    workers: Vec<InProcessWorker>,
    notifiers: Vec<InProcessWorker>,
    processes: Vec<Child>,
}

impl<N: Broker> Drop for TestApp<N> {
    fn drop(&mut self) {
        self.ingress.cancel();
        for w in self.workers.iter().chain(&self.notifiers) {
            w.token.cancel();
        }
        for p in &mut self.processes {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

/// Cargo's target directory: `CARGO_TARGET_DIR`, else `target/` in the workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The `holdpoint` binary built by `cargo build --bins` (`HOLDPOINT_BIN` overrides).
pub fn holdpoint_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("HOLDPOINT_BIN") {
        return PathBuf::from(p);
    }
    let bin = target_dir().join("debug").join("holdpoint");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --bins` first (ops/test.sh does)",
        bin.display()
    );
    bin
}

impl TestApp {
    /// Starts with [`AppOptions::default`].
    pub async fn start() -> TestApp {
        Self::start_with(AppOptions::default()).await
    }

    /// Starts with `opts`.
    pub async fn start_with(opts: AppOptions) -> TestApp {
        let nats = NatsServer::start_with(opts.nats.clone()).await;
        TestApp::start_on(nats, opts).await
    }
}

impl TestApp<NatsCluster> {
    /// Starts a 3-node [`NatsCluster`] and a Holdpoint connected to every node
    /// (`opts.nats` is not used; set `opts.topo.replicas` to 3 for R3).
    pub async fn start_cluster(
        opts: AppOptions,
        cluster: NatsClusterOptions,
    ) -> TestApp<NatsCluster> {
        let nats = NatsCluster::start_with(cluster).await;
        TestApp::start_on(nats, opts).await
    }
}

impl<N: Broker> TestApp<N> {
    /// Starts a Holdpoint on `nats` (already running) with `opts`.
    pub async fn start_on(nats: N, opts: AppOptions) -> TestApp<N> {
        let bus = connect(&nats.url(), &opts.topo).await;
        let state = AppState::new(
            bus.clone(),
            IngressConfig {
                outcome_timeout: opts.outcome_timeout,
                identity: opts.identity.clone(),
                max_streams_per_caller: opts.max_streams_per_caller,
                max_in_flight: opts.max_in_flight,
                a2a_missing_version_is_1_0: opts.a2a_missing_version_is_1_0,
                webhooks_local_mode: opts.webhooks_local,
                ..IngressConfig::default()
            },
        )
        .await
        .expect("ingress state");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let ingress = CancellationToken::new();
        // The same `serve` as `holdpoint up` and `holdpoint ingress`, on the API
        // listener alone.
        tokio::spawn(holdpoint_ingress::serve(
            state.clone(),
            holdpoint_ingress::Listeners::api(listener),
            ingress.clone(),
        ));
        let mut app = TestApp {
            nats,
            opts: opts.clone(),
            bus,
            base,
            http: reqwest::Client::new(),
            state,
            ingress,
            workers: Vec::new(),
            notifiers: Vec::new(),
            processes: Vec::new(),
        };
        for _ in 0..opts.workers {
            app.start_worker().await;
        }
        app
    }

    /// The ingress's state: `holdpoint_ingress::router(app.ingress_state())` is the
    /// very router the app serves, for in-process requests (`tower::ServiceExt::oneshot`).
    pub fn ingress_state(&self) -> AppState {
        self.state.clone()
    }

    /// Starts a webhook notifier in this process with `cfg` (its own connection);
    /// it stops when the app is dropped or the returned token is cancelled.
    pub async fn start_notifier(
        &mut self,
        cfg: holdpoint_notifier::NotifierConfig,
    ) -> CancellationToken {
        let bus = connect(&self.nats.url(), &self.opts.topo).await;
        let token = CancellationToken::new();
        let handle = tokio::spawn(holdpoint_notifier::run(bus, cfg, token.clone()));
        self.notifiers.push(InProcessWorker {
            token: token.clone(),
            handle,
        });
        token
    }

    /// `holdpoint <verb>` on this app's NATS with its topology (duplicate window,
    /// replicas, partitions), logging at `$HOLDPOINT_WORKER_LOG` (default `warn`)
    /// to stderr.
    fn service_command(&self, verb: &str) -> Command {
        self.service_command_of(&holdpoint_binary(), verb)
    }

    fn service_command_of(&self, binary: &std::path::Path, verb: &str) -> Command {
        let mut cmd = Command::new(binary);
        cmd.arg(verb)
            .arg("--nats-url")
            .arg(self.nats.url())
            .arg("--duplicate-window-secs")
            .arg(self.opts.topo.duplicate_window.as_secs().max(1).to_string())
            .arg("--replicas")
            .arg(self.opts.topo.replicas.to_string())
            .arg("--partitions")
            .arg(self.opts.topo.partitions.to_string())
            .env(
                "RUST_LOG",
                std::env::var("HOLDPOINT_WORKER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd
    }

    /// Starts `holdpoint notifier` as a child process with `args` after the NATS URL
    /// (e.g. `--webhooks-local-mode`); returns its index for
    /// [`TestApp::kill_process`].
    pub fn spawn_notifier_process(&mut self, args: &[&str]) -> usize {
        let mut cmd = self.service_command("notifier");
        cmd.args(args);
        let child = cmd.spawn().expect("spawn holdpoint notifier");
        self.processes.push(child);
        self.processes.len() - 1
    }

    /// Starts one more in-process worker.
    pub async fn start_worker(&mut self) {
        let bus = connect(&self.nats.url(), &self.opts.topo).await;
        let token = CancellationToken::new();
        let handle = tokio::spawn(holdpoint_worker::run(
            bus,
            WorkerConfig {
                deadlines: self.opts.deadlines,
                ..WorkerConfig::default()
            },
            token.clone(),
        ));
        self.workers.push(InProcessWorker { token, handle });
    }

    /// Stops every in-process worker (they finish and ack what they hold).
    pub async fn stop_workers(&mut self) {
        for w in self.workers.drain(..) {
            w.token.cancel();
            let _ = w.handle.await;
        }
    }

    /// Starts `holdpoint worker` as a child process, with an optional failpoint
    /// (`after-write`, `before-ack`). Returns its index for [`TestApp::process`].
    pub fn spawn_worker_process(&mut self, failpoint: Option<&str>) -> usize {
        self.spawn_worker_process_with(failpoint, &[])
    }

    /// Like [`TestApp::spawn_worker_process`], with extra environment variables for
    /// the child (e.g. libfaketime's `LD_PRELOAD` and `FAKETIME` for a skewed clock).
    pub fn spawn_worker_process_with(
        &mut self,
        failpoint: Option<&str>,
        env: &[(&str, &str)],
    ) -> usize {
        self.spawn_worker_binary(&holdpoint_binary(), failpoint, env)
    }

    /// Like [`TestApp::spawn_worker_process_with`], running `binary` (another
    /// release's `holdpoint`, for the version-skew test) instead of this build's.
    pub fn spawn_worker_binary(
        &mut self,
        binary: &std::path::Path,
        failpoint: Option<&str>,
        env: &[(&str, &str)],
    ) -> usize {
        let mut cmd = self.service_command_of(binary, "worker");
        cmd.envs(env.iter().copied());
        cmd.arg("--ack-wait-ms")
            .arg(self.opts.topo.ack_wait.as_millis().to_string())
            .arg("--priority-timeout-ms")
            .arg(self.opts.topo.priority_timeout.as_millis().to_string());
        let d = self.opts.deadlines;
        for (flag, v) in [
            ("--deadline-default-secs", d.default),
            ("--deadline-max-secs", d.max),
            ("--deadline-warning-secs", d.warning),
        ] {
            if let Some(v) = v {
                cmd.arg(flag).arg(v.as_secs().max(1).to_string());
            }
        }
        match failpoint {
            Some(f) => cmd.env("HOLDPOINT_FAILPOINT", f),
            None => cmd.env_remove("HOLDPOINT_FAILPOINT"),
        };
        let child = cmd.spawn().expect("spawn holdpoint worker");
        self.processes.push(child);
        self.processes.len() - 1
    }

    /// A child process started by [`TestApp::spawn_worker_process`].
    pub fn process(&mut self, i: usize) -> &mut Child {
        &mut self.processes[i]
    }

    /// Sends `signal` to worker process `i` (e.g. `SIGKILL`, `SIGSTOP`, `SIGCONT`).
    /// A process that has already exited is not an error.
    pub fn signal_process(&mut self, i: usize, signal: nix::sys::signal::Signal) {
        let pid = i32::try_from(self.processes[i].id()).expect("pid fits i32");
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => panic!("cannot send {signal} to worker process {pid}: {e}"),
        }
    }

    /// SIGKILLs worker process `i` and reaps it (a crash: nothing is finished).
    pub fn kill_process(&mut self, i: usize) {
        let child = &mut self.processes[i];
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Whether worker process `i` is still running.
    pub fn process_running(&mut self, i: usize) -> bool {
        matches!(self.processes[i].try_wait(), Ok(None))
    }

    /// A runtime handle for `org`.
    pub async fn runtime(&self, org: &str) -> Runtime {
        let bus = connect(&self.nats.url(), &self.opts.topo).await;
        Runtime::with_bus(bus, org)
            .await
            .expect("runtime")
            .with_timeout(Duration::from_secs(10))
    }

    /// A person of `org` talking HTTP with the development identity headers.
    pub fn person(&self, org: &str, person: &str) -> Person {
        Person {
            http: self.http.clone(),
            base: self.base.clone(),
            org: org.to_owned(),
            person: person.to_owned(),
            token: None,
            groups: None,
        }
    }

    /// A caller presenting `Authorization: Bearer <token>` (and nothing else).
    pub fn bearer(&self, token: &str) -> Person {
        Person {
            http: self.http.clone(),
            base: self.base.clone(),
            org: String::new(),
            person: String::new(),
            token: Some(token.to_owned()),
            groups: None,
        }
    }

    /// Waits (deadline 20 s) until the commands stream is empty: it is a work queue,
    /// so every command sent so far was acknowledged, fully handled (a command stuck
    /// or dropped by a consumer would stay in it and keep this waiting).
    pub async fn wait_idle(&self) {
        self.wait_idle_within(Duration::from_secs(20)).await;
    }

    /// Waits (at most 20 s) until the public streams have sourced every effect
    /// committed so far: a decision's events reach them shortly after its 2xx.
    pub async fn wait_sourced(&self) {
        crate::nats::wait_bus_sourced(&self.bus, Duration::from_secs(20)).await;
    }

    /// Waits (at most 20 s) until the partition consumers have nothing pending or
    /// unacked and every effect is sourced: like [`TestApp::wait_idle`], but by the
    /// consumers, not by the commands stream's count. After a write error
    /// (ENOSPC) and a restart, nats-server 2.15.1 can keep messages in the work
    /// queue that its consumers acked (their ack floor is past them): they are
    /// never delivered again, and the stream's count never reaches 0.
    pub async fn wait_decided(&self) {
        let bus = self.bus.clone();
        wait_for(Duration::from_secs(20), "every command decided", || {
            let bus = bus.clone();
            async move {
                (bus.consumer_backlog().await.ok()? == (0, 0)
                    && bus.sourcing_lag().await.ok()? == 0
                    && bus.effects_sourced().await.ok()?)
                .then_some(())
            }
        })
        .await;
    }

    /// Like [`TestApp::wait_idle`], with another deadline.
    pub async fn wait_idle_within(&self, deadline: Duration) {
        let stream = self.bus.topo.commands_stream();
        let js = self.bus.js.clone();
        let bus = self.bus.clone();
        wait_for(deadline, "workers to be idle", || {
            let js = js.clone();
            let stream = stream.clone();
            let bus = bus.clone();
            async move {
                let mut s = js.get_stream(&stream).await.ok()?;
                let info = s.info().await.ok()?;
                // Every effect sourced (follow-up commands included), and every
                // command decided.
                (info.state.messages == 0
                    && bus.sourcing_lag().await.ok()? == 0
                    && bus.effects_sourced().await.ok()?)
                .then_some(())
            }
        })
        .await;
    }

    /// Every event of `org` in the events stream, in stream order.
    pub async fn events(&self, org: &str) -> Vec<Event> {
        let org = OrgId::parse(org).expect("org");
        self.wait_sourced().await;
        read_all(
            &self.bus,
            &self.bus.topo.events_stream(),
            &self.bus.topo.org_events_filter(&org),
        )
        .await
    }

    /// Every lane message of `org`.
    pub async fn lane_messages(&self, org: &str) -> Vec<holdpoint_domain::LaneMessage> {
        let org = OrgId::parse(org).expect("org");
        self.wait_sourced().await;
        let filter = format!("{}.lane.{}.>", self.bus.topo.subject_prefix, org.token());
        read_all(&self.bus, &self.bus.topo.lanes_stream(), &filter).await
    }

    /// The stored interaction.
    pub async fn interaction(&self, org: &str, id: &str) -> Option<Interaction> {
        let org = OrgId::parse(org).expect("org");
        let id = InteractionId::parse(id).expect("id");
        self.bus
            .load_interaction(&org, &id)
            .await
            .expect("load")
            .value
    }
}

async fn connect(url: &str, topo: &Topology) -> Bus {
    let client = holdpoint_bus::connect(url, "holdpoint-test")
        .await
        .expect("connect");
    Bus::setup(client, topo.clone()).await.expect("setup")
}

/// Reads every message of `stream` matching `filter`, decoded as `T`, in order.
///
/// In a cluster it first waits (at most 30 s) until every replica of the stream is
/// current: the ordered consumer it reads through is placed by the server on any
/// replica, and a node that was just restarted serves what it had on disk until it
/// caught up (RELIABILITY.md, "Node loss"), which would look like missing events.
pub async fn read_all<T: serde::de::DeserializeOwned>(
    bus: &Bus,
    stream: &str,
    filter: &str,
) -> Vec<T> {
    let name = stream.to_owned();
    crate::nats::wait_for(
        Duration::from_secs(30),
        &format!("every replica of {name} to be current"),
        || {
            let (js, name) = (bus.js.clone(), name.clone());
            async move {
                let mut s = js.get_stream(&name).await.ok()?;
                let info = s.info().await.ok()?;
                let caught_up = info.cluster.as_ref().is_none_or(|c| {
                    c.leader.is_some()
                        && c.replicas
                            .iter()
                            .all(|p| p.current && !p.offline && p.lag.unwrap_or(0) == 0)
                });
                caught_up.then_some(())
            }
        },
    )
    .await;
    let stream = bus.js.get_stream(stream).await.expect("stream");
    let consumer: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter.to_owned(),
            deliver_policy: consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let pending = consumer.cached_info().num_pending;
    let mut out = Vec::new();
    if pending == 0 {
        return out;
    }
    let mut messages = consumer.messages().await.expect("messages");
    while let Some(m) = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("read timed out")
    {
        let m = m.expect("message");
        out.push(serde_json::from_slice(&m.payload).expect("decodes"));
        if m.info().map(|i| i.pending).unwrap_or(0) == 0 {
            break;
        }
    }
    out
}

/// One person of one organisation, over HTTP with the development identity.
#[derive(Debug, Clone)]
pub struct Person {
    http: reqwest::Client,
    base: String,
    /// Organisation.
    pub org: String,
    /// Person.
    pub person: String,
    /// A bearer token sent instead of the development headers.
    pub token: Option<String>,
    /// `X-Holdpoint-Groups` sent with the development headers, when set.
    pub groups: Option<String>,
}

/// An HTTP answer: status, body (JSON or `Null`), and the `Retry-After` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Status.
    pub status: u16,
    /// Body.
    pub body: Value,
    /// `Retry-After`, if any.
    pub retry_after: Option<String>,
}

impl Reply {
    /// The error code of an error body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

impl Person {
    fn req(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => {
                let r = r
                    .header("X-Holdpoint-Org", &self.org)
                    .header("X-Holdpoint-Person", &self.person);
                match &self.groups {
                    Some(g) => r.header("X-Holdpoint-Groups", g),
                    None => r,
                }
            }
        }
    }

    /// The same person, naming `groups` (comma-separated) in `X-Holdpoint-Groups`.
    pub fn with_groups(mut self, groups: &str) -> Person {
        self.groups = Some(groups.to_owned());
        self
    }

    /// GET with extra raw headers (e.g. two `Authorization` headers).
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut r = self.http.get(format!("{}{path}", self.base));
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        Self::send(r).await
    }

    async fn send(r: reqwest::RequestBuilder) -> Reply {
        Self::try_send(r).await.expect("http")
    }

    async fn try_send(r: reqwest::RequestBuilder) -> Result<Reply, reqwest::Error> {
        let resp = r.send().await?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = resp.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            body,
            retry_after,
        })
    }

    /// POST JSON.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        Self::send(
            self.req(self.http.post(format!("{}{path}", self.base)))
                .json(body),
        )
        .await
    }

    /// POST JSON with an `Idempotency-Key`.
    pub async fn post_keyed(&self, path: &str, key: &str, body: &Value) -> Reply {
        Self::send(
            self.req(self.http.post(format!("{}{path}", self.base)))
                .header("Idempotency-Key", key)
                .json(body),
        )
        .await
    }

    /// Like [`Person::post_keyed`], returning transport errors instead of panicking.
    ///
    /// # Errors
    /// When the request cannot be sent or its answer read.
    pub async fn try_post_keyed(
        &self,
        path: &str,
        key: &str,
        body: &Value,
    ) -> Result<Reply, reqwest::Error> {
        Self::try_send(
            self.req(self.http.post(format!("{}{path}", self.base)))
                .header("Idempotency-Key", key)
                .json(body),
        )
        .await
    }

    /// POST JSON with extra headers, returning transport errors instead of
    /// panicking (the A2A endpoint's requests, `A2A-Version` and the rest).
    ///
    /// # Errors
    /// When the request cannot be sent or its answer read.
    pub async fn try_post_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Reply, reqwest::Error> {
        let mut r = self
            .req(self.http.post(format!("{}{path}", self.base)))
            .json(body);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        Self::try_send(r).await
    }

    /// POST raw bytes with a content type.
    pub async fn post_raw(&self, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        Self::send(
            self.req(self.http.post(format!("{}{path}", self.base)))
                .header("Content-Type", content_type)
                .body(body),
        )
        .await
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Reply {
        Self::send(self.req(self.http.get(format!("{}{path}", self.base)))).await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> Reply {
        Self::send(self.req(self.http.delete(format!("{}{path}", self.base)))).await
    }

    /// POST without any identity headers.
    pub async fn post_anonymous(&self, path: &str, body: &Value) -> Reply {
        Self::send(self.http.post(format!("{}{path}", self.base)).json(body)).await
    }
}

/// Serves `state`'s API and admin endpoints on fresh loopback ports until
/// `shutdown`; returns their base URLs (`http://127.0.0.1:<port>`), API first.
pub async fn serve_ingress(state: AppState, shutdown: &CancellationToken) -> (String, String) {
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", api.local_addr().expect("addr"));
    let admin_base = format!("http://{}", admin.local_addr().expect("addr"));
    // The same `serve` as `holdpoint up` and `holdpoint ingress`.
    tokio::spawn(holdpoint_ingress::serve(
        state,
        holdpoint_ingress::Listeners {
            api,
            admin: Some(admin),
            socket: None,
        },
        shutdown.clone(),
    ));
    (base, admin_base)
}

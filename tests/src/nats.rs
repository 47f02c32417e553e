//! Real `nats-server` processes for tests.
//!
//! [`NatsServer`] runs one JetStream-enabled server on a free loopback port
//! with its own temporary store directory; [`NatsCluster`] runs a 3-node
//! JetStream cluster on loopback. Both wait until JetStream answers before
//! they return, can kill (SIGKILL), stop (SIGTERM) and restart their
//! processes on the same ports and store directories, and kill everything they
//! started when dropped. The binary is found by [`nats_server_binary`].
//!
//! The servers' stdout and stderr go to a log file in their temporary
//! directory ([`NatsServer::log_contents`], [`NatsCluster::log_contents`]),
//! and the last lines of it are part of every start-up error.

use std::ffi::OsString;
use std::fs;
use std::future::Future;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use async_nats::jetstream;
use holdpoint_cli::localnats;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

/// Environment variable naming the `nats-server` binary to run.
pub const NATS_SERVER_ENV: &str = "HOLDPOINT_NATS_SERVER";

/// How long a single server may take to serve JetStream after it was spawned.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a cluster (or a restarted cluster node) may take to become usable.
pub const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Number of nodes in a [`NatsCluster`].
pub const CLUSTER_SIZE: usize = 3;

const POLL_INTERVAL: Duration = Duration::from_millis(20);
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
const LOG_FILE: &str = "nats-server.log";
const LOG_TAIL_LINES: usize = 40;
/// Attempts with fresh ports when a just-picked free port was taken meanwhile.
const FRESH_PORT_ATTEMPTS: usize = 5;

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// The workspace root (the directory holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the holdpoint-tests crate lives one level below the workspace root")
        .to_path_buf()
}

/// The `nats-server` binary to run: `$HOLDPOINT_NATS_SERVER` if set, else
/// `<workspace root>/.tools/bin/nats-server` as installed by `ops/setup.sh`.
///
/// # Panics
///
/// If neither exists; the message says to run `ops/setup.sh`.
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(NATS_SERVER_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{NATS_SERVER_ENV}={} does not exist; run ops/setup.sh and export \
             {NATS_SERVER_ENV}=$(cat .tools/nats-server.path), or unset it",
            path.display()
        );
        return path;
    }
    let local = workspace_root().join(".tools/bin/nats-server");
    assert!(
        local.is_file(),
        "no nats-server found: {NATS_SERVER_ENV} is not set and {} does not exist; \
         run ops/setup.sh (from the workspace root) to install one",
        local.display()
    );
    local
}

/// Ports come from the one launcher of the workspace (the CLI's `localnats`).
pub use holdpoint_cli::localnats::{free_port, free_ports};

/// Polls `f` every 20 ms until it returns `Some`, and returns that value.
///
/// # Panics
///
/// With "timed out waiting for {what}" once `deadline` has passed.
pub async fn wait_for<T, F, Fut>(deadline: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = Instant::now() + deadline;
    loop {
        if let Some(value) = f().await {
            return value;
        }
        if Instant::now() >= end {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits (at most `deadline`) until `bus`'s public streams have sourced every
/// effect committed so far (sourcing lag 0 and [`holdpoint_bus::Bus::effects_sourced`]):
/// a decision's events reach the events, lanes and audit streams a few
/// milliseconds after its 2xx, so a test that reads them right after one waits
/// here first.
///
/// # Panics
///
/// Once `deadline` has passed.
pub async fn wait_bus_sourced(bus: &holdpoint_bus::Bus, deadline: Duration) {
    wait_for(deadline, "the effects to be sourced", || {
        let bus = bus.clone();
        async move {
            (bus.sourcing_lag().await.ok()? == 0 && bus.effects_sourced().await.ok()?).then_some(())
        }
    })
    .await;
}

fn url_for(port: u16) -> String {
    format!("nats://127.0.0.1:{port}")
}

/// A user and password of a nats-server that requires authentication (e.g. one
/// started with `ops/nats/holdpoint.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsUser {
    /// The user name.
    pub user: String,
    /// The clear-text password.
    pub password: String,
}

impl NatsUser {
    /// A user with its password.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        NatsUser {
            user: user.into(),
            password: password.into(),
        }
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters (URL user info).
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Connects to `urls` without retrying the initial connect, as `user` if given.
async fn connect_client(urls: &[String], user: Option<&NatsUser>) -> Result<async_nats::Client> {
    let mut options = async_nats::ConnectOptions::new();
    if let Some(u) = user {
        options = options.user_and_password(u.user.clone(), u.password.clone());
    }
    options
        .connection_timeout(Duration::from_secs(2))
        .connect(urls)
        .await
        .with_context(|| format!("connecting to {}", urls.join(",")))
}

/// One TCP connect, one NATS connect (as `user` if given) and one JetStream
/// account info request.
async fn probe_jetstream(port: u16, user: Option<&NatsUser>) -> Result<()> {
    tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)),
    )
    .await
    .map_err(|_| anyhow!("TCP connect to 127.0.0.1:{port} timed out"))?
    .with_context(|| format!("TCP connect to 127.0.0.1:{port}"))?;
    let client = connect_client(&[url_for(port)], user).await?;
    // A raw `$JS.API.INFO` request rather than the typed account info call: the
    // typed response of current async-nats does not parse a 2.9 server's answer,
    // and the compatibility test runs against one.
    let reply = tokio::time::timeout(
        Duration::from_secs(2),
        client.request("$JS.API.INFO", Vec::new().into()),
    )
    .await
    .map_err(|_| anyhow!("JetStream account info request timed out"))?
    .context("JetStream account info request")?;
    let text = String::from_utf8_lossy(&reply.payload);
    if !text.contains("account_info_response") || text.contains("\"error\"") {
        bail!("JetStream not ready: {text}");
    }
    Ok(())
}

fn log_tail(path: &Path, from: u64) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = usize::try_from(from).unwrap_or(0).min(bytes.len());
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[skip..].join("\n")
}

/// Why a spawn did not become ready.
enum StartError {
    /// The server exited because one of its ports was taken.
    PortInUse(anyhow::Error),
    Failed(anyhow::Error),
}

impl StartError {
    fn into_error(self) -> anyhow::Error {
        match self {
            StartError::PortInUse(e) | StartError::Failed(e) => e,
        }
    }
}

/// What must answer before a spawned process counts as ready.
#[derive(Clone, Copy)]
enum Readiness {
    /// The client port accepts TCP connections.
    Listening,
    /// JetStream answers an account info request through this server.
    JetStream,
}

/// One `nats-server` process: how to start it, and the running child.
#[derive(Debug)]
struct Process {
    server_name: String,
    binary: PathBuf,
    args: Vec<OsString>,
    port: u16,
    log_path: PathBuf,
    child: Option<Child>,
    /// The user the readiness probe connects as (servers that require authentication).
    user: Option<NatsUser>,
}

impl Process {
    fn url(&self) -> String {
        url_for(self.port)
    }

    fn log_len(&self) -> u64 {
        fs::metadata(&self.log_path).map(|m| m.len()).unwrap_or(0)
    }

    fn spawn(&mut self) -> Result<()> {
        self.child = Some(localnats::spawn(
            &self.binary,
            &self.args,
            Some(&self.log_path),
        )?);
        Ok(())
    }

    /// The exit status if the process has exited (reaping it), else `None`.
    fn try_exit_status(&mut self) -> Result<Option<ExitStatus>> {
        let Some(child) = self.child.as_mut() else {
            return Ok(None);
        };
        let status = child.try_wait().context("waiting for nats-server")?;
        if status.is_some() {
            self.child = None;
        }
        Ok(status)
    }

    fn is_running(&mut self) -> bool {
        matches!(self.try_exit_status(), Ok(None)) && self.child.is_some()
    }

    fn signal(&self, sig: Signal) -> Result<()> {
        let Some(child) = self.child.as_ref() else {
            return Ok(());
        };
        let pid = i32::try_from(child.id()).context("pid out of range")?;
        match signal::kill(Pid::from_raw(pid), sig) {
            // Already exited but not reaped yet.
            Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("sending {sig} to nats-server {pid}")),
        }
    }

    /// Polls until the process has exited; false if `timeout` passed first.
    async fn wait_exit(&mut self, timeout: Duration) -> Result<bool> {
        let end = Instant::now() + timeout;
        loop {
            if self.child.is_none() || self.try_exit_status()?.is_some() {
                return Ok(true);
            }
            if Instant::now() >= end {
                return Ok(false);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    async fn kill(&mut self) -> Result<()> {
        self.signal(Signal::SIGKILL)?;
        if !self.wait_exit(EXIT_TIMEOUT).await? {
            bail!("{} did not exit after SIGKILL", self.server_name);
        }
        Ok(())
    }

    async fn stop(&mut self) -> Result<()> {
        self.signal(Signal::SIGTERM)?;
        if !self.wait_exit(EXIT_TIMEOUT).await? {
            eprintln!(
                "{} did not exit within {EXIT_TIMEOUT:?} of SIGTERM; killing it",
                self.server_name
            );
            self.kill().await?;
        }
        Ok(())
    }

    /// SIGKILL and reap, synchronously (for `Drop`).
    fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Errors mean it has already exited; wait() reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until the process is ready or `deadline`.
    async fn wait_ready(
        &mut self,
        readiness: Readiness,
        deadline: Instant,
        log_from: u64,
    ) -> Result<(), StartError> {
        let mut last = String::from("no attempt yet");
        loop {
            match self.try_exit_status() {
                Ok(Some(status)) => {
                    let log = log_tail(&self.log_path, log_from);
                    let err = anyhow!(
                        "nats-server {} exited during start-up ({status}); log:\n{log}",
                        self.server_name
                    );
                    return Err(if log.contains("address already in use") {
                        StartError::PortInUse(err)
                    } else {
                        StartError::Failed(err)
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(StartError::Failed(e)),
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StartError::Failed(anyhow!(
                    "nats-server {} on port {} was not ready in time (last check: {last}); log:\n{}",
                    self.server_name,
                    self.port,
                    log_tail(&self.log_path, log_from)
                )));
            }
            let remaining = deadline - now;
            let port = self.port;
            let user = self.user.clone();
            let probe = async move {
                match readiness {
                    Readiness::Listening => {
                        tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                            .await
                            .map(drop)
                            .context("TCP connect")
                    }
                    Readiness::JetStream => probe_jetstream(port, user.as_ref()).await,
                }
            };
            match tokio::time::timeout(remaining.min(Duration::from_secs(3)), probe).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last = format!("{e:#}"),
                Err(_) => last = "check timed out".to_owned(),
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Spawns and waits until ready; on failure the process is killed.
    async fn start(&mut self, readiness: Readiness, deadline: Instant) -> Result<(), StartError> {
        let log_from = self.log_len();
        self.spawn().map_err(StartError::Failed)?;
        let result = self.wait_ready(readiness, deadline, log_from).await;
        if result.is_err() {
            self.kill_now();
        }
        result
    }

    /// Starts again with the same arguments (same ports, same store), retrying
    /// while a port is still held, e.g. briefly after the previous process died.
    async fn restart(&mut self, readiness: Readiness, timeout: Duration) -> Result<()> {
        if self.child.is_some() {
            self.stop().await?;
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.start(readiness, deadline).await {
                Ok(()) => return Ok(()),
                Err(StartError::PortInUse(_)) if Instant::now() + POLL_INTERVAL * 5 < deadline => {
                    tokio::time::sleep(POLL_INTERVAL * 5).await;
                }
                Err(e) => {
                    return Err(e
                        .into_error()
                        .context(format!("restarting nats-server {}", self.server_name)));
                }
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Options for [`NatsServer::start_with`].
#[derive(Debug, Clone, Default)]
pub struct NatsServerOptions {
    /// A config file to pass with `-c`. Command-line flags set by the harness
    /// (`-js -a -p -sd --server_name`) take precedence over it.
    pub config_file: Option<PathBuf>,
    /// Extra command-line arguments, appended after the harness's own.
    pub extra_args: Vec<String>,
    /// Run JetStream with `sync_interval: always` (fsync after every write).
    /// This is a config-file option, so the harness writes a config file: with
    /// [`config_file`](Self::config_file) also set, that file's text is copied
    /// into it (relative `include`s in it then resolve against the temporary
    /// directory) and followed by a `jetstream { sync_interval: always }`
    /// block, which replaces any `jetstream` block of the given file.
    pub sync_always: bool,
    /// Run this nats-server binary instead of [`nats_server_binary`] (e.g. an older
    /// release, to check compatibility).
    pub binary: Option<PathBuf>,
    /// The user the harness connects as (readiness probe, [`NatsServer::connect`])
    /// when [`config_file`](Self::config_file) requires authentication. It needs
    /// publish `$JS.API.INFO` and subscribe `_INBOX.>`.
    pub user: Option<NatsUser>,
    /// The JetStream store directory (`-sd`) to use instead of one in the
    /// temporary directory (e.g. a small filesystem a test mounted there).
    pub store_dir: Option<PathBuf>,
}

impl NatsServerOptions {
    /// Sets [`config_file`](Self::config_file).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Appends one extra command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Appends extra command-line arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets [`sync_always`](Self::sync_always).
    pub fn sync_always(mut self, yes: bool) -> Self {
        self.sync_always = yes;
        self
    }

    /// Sets [`store_dir`](Self::store_dir).
    pub fn store_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.store_dir = Some(dir.into());
        self
    }

    /// Sets [`user`](Self::user).
    pub fn user(mut self, user: NatsUser) -> Self {
        self.user = Some(user);
        self
    }
}

/// A single JetStream-enabled `nats-server` on 127.0.0.1, with its store in a
/// temporary directory that lives as long as this value. Dropping it kills
/// the server.
#[derive(Debug)]
pub struct NatsServer {
    // Declared before `dir` so the process is killed before the store goes.
    process: Process,
    store_dir: PathBuf,
    dir: TempDir,
}

impl NatsServer {
    /// Starts a server with default options and waits until JetStream is ready.
    ///
    /// # Panics
    ///
    /// If the server does not start within [`READY_TIMEOUT`].
    pub async fn start() -> NatsServer {
        Self::start_with(NatsServerOptions::default()).await
    }

    /// Starts a server with `options` and waits until JetStream is ready.
    ///
    /// # Panics
    ///
    /// If the server does not start within [`READY_TIMEOUT`].
    pub async fn start_with(options: NatsServerOptions) -> NatsServer {
        match Self::try_start_with(options).await {
            Ok(server) => server,
            Err(e) => panic!("failed to start nats-server: {e:#}"),
        }
    }

    /// Like [`start_with`](Self::start_with), returning an error instead of panicking.
    pub async fn try_start_with(options: NatsServerOptions) -> Result<NatsServer> {
        let binary = options.binary.clone().unwrap_or_else(nats_server_binary);
        let dir = tempfile::Builder::new()
            .prefix("holdpoint-nats-")
            .tempdir()
            .context("creating a temporary directory for nats-server")?;
        let store_dir = options
            .store_dir
            .clone()
            .unwrap_or_else(|| dir.path().join("store"));
        fs::create_dir_all(&store_dir)
            .with_context(|| format!("creating {}", store_dir.display()))?;
        let config_file = if options.sync_always {
            let mut text = String::from("# generated by holdpoint-tests\n");
            if let Some(user) = &options.config_file {
                let user_text = fs::read_to_string(user)
                    .with_context(|| format!("reading {}", user.display()))?;
                text.push_str(&format!("# from {}\n{user_text}\n", user.display()));
            }
            text.push_str("jetstream {\n  sync_interval: always\n}\n");
            let path = dir.path().join("nats-server.conf");
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Some(path)
        } else {
            options.config_file.clone()
        };

        let server_name = format!("hp-{}", unique_suffix());
        let mut last_error = None;
        for _ in 0..FRESH_PORT_ATTEMPTS {
            let port = free_port().context("picking a port")?;
            let mut args: Vec<OsString> = vec![
                "-js".into(),
                "-a".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string().into(),
                "-sd".into(),
                store_dir.clone().into(),
                "--server_name".into(),
                server_name.clone().into(),
            ];
            if let Some(config) = &config_file {
                args.push("-c".into());
                args.push(config.clone().into());
            }
            args.extend(options.extra_args.iter().map(OsString::from));
            let mut process = Process {
                server_name: server_name.clone(),
                binary: binary.clone(),
                args,
                port,
                log_path: dir.path().join(LOG_FILE),
                child: None,
                user: options.user.clone(),
            };
            let deadline = Instant::now() + READY_TIMEOUT;
            match process.start(Readiness::JetStream, deadline).await {
                Ok(()) => {
                    return Ok(NatsServer {
                        process,
                        store_dir,
                        dir,
                    });
                }
                // Someone else took the port between free_port() and bind: pick another.
                Err(StartError::PortInUse(e)) => last_error = Some(e),
                Err(StartError::Failed(e)) => return Err(e),
            }
        }
        Err(last_error
            .unwrap_or_else(|| anyhow!("no attempt made"))
            .context(format!("no free port after {FRESH_PORT_ATTEMPTS} attempts")))
    }

    /// The client URL, e.g. `nats://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        self.process.url()
    }

    /// The client URL with `user`'s credentials in it (percent-encoded), e.g.
    /// `nats://worker:secret@127.0.0.1:40123`, as `holdpoint_bus::connect` takes it.
    pub fn url_as(&self, user: &NatsUser) -> String {
        format!(
            "nats://{}:{}@127.0.0.1:{}",
            url_encode(&user.user),
            url_encode(&user.password),
            self.process.port
        )
    }

    /// The client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// The JetStream store directory (`-sd`), kept across restarts.
    pub fn store_dir(&self) -> &Path {
        &self.store_dir
    }

    /// The temporary directory holding the store, log and generated config.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The unique `server_name` of this server.
    pub fn server_name(&self) -> &str {
        &self.process.server_name
    }

    /// The file receiving the server's stdout and stderr (across restarts).
    pub fn log_path(&self) -> &Path {
        &self.process.log_path
    }

    /// Everything the server printed so far, across restarts.
    pub fn log_contents(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.process.log_path).unwrap_or_default()).into_owned()
    }

    /// Whether the server process is alive.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The OS process id while the server runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.child.as_ref().map(Child::id)
    }

    /// A new client connected to this server (as [`NatsServerOptions::user`], if
    /// it was set).
    ///
    /// # Panics
    ///
    /// If the connection fails.
    pub async fn connect(&self) -> async_nats::Client {
        match connect_client(&[self.url()], self.process.user.as_ref()).await {
            Ok(client) => client,
            Err(e) => panic!("{e:#}"),
        }
    }

    /// A new client connected to this server as `user`.
    ///
    /// # Panics
    ///
    /// If the connection fails (e.g. the server refuses the user).
    pub async fn connect_as(&self, user: &NatsUser) -> async_nats::Client {
        match connect_client(&[self.url()], Some(user)).await {
            Ok(client) => client,
            Err(e) => panic!("{e:#}"),
        }
    }

    /// SIGKILLs the server (a crash: no graceful shutdown) and waits until it
    /// has exited. Does nothing if it is not running.
    ///
    /// # Panics
    ///
    /// If it does not exit.
    pub async fn kill(&mut self) {
        if let Err(e) = self.process.kill().await {
            panic!("{e:#}");
        }
    }

    /// SIGTERMs the server (graceful shutdown) and waits until it has exited,
    /// SIGKILLing it if that takes longer than 10 s. Does nothing if it is not
    /// running.
    pub async fn stop(&mut self) {
        if let Err(e) = self.process.stop().await {
            panic!("{e:#}");
        }
    }

    /// Starts the server again on the same port with the same store directory
    /// and waits until JetStream is ready. A still-running server is stopped
    /// (SIGTERM) first; call [`kill`](Self::kill) before for a crash restart.
    ///
    /// # Panics
    ///
    /// If it is not ready within [`READY_TIMEOUT`].
    pub async fn restart(&mut self) {
        if let Err(e) = self.try_restart().await {
            panic!("{e:#}");
        }
    }

    /// Like [`restart`](Self::restart), returning an error instead of panicking.
    pub async fn try_restart(&mut self) -> Result<()> {
        self.process
            .restart(Readiness::JetStream, READY_TIMEOUT)
            .await
    }
}

/// Options for [`NatsCluster::start_with`].
#[derive(Debug, Clone, Default)]
pub struct NatsClusterOptions {
    /// Run JetStream on every node with `sync_interval: always`.
    pub sync_always: bool,
}

/// A 3-node JetStream cluster on 127.0.0.1. Each node has its own client
/// port, cluster port, store directory and `server_name`, and a config file
/// with the shared `cluster { name, listen, routes }` block, all in one
/// temporary directory that lives as long as this value. Dropping it kills
/// every node.
#[derive(Debug)]
pub struct NatsCluster {
    name: String,
    // Declared before `dir` so the processes are killed before the stores go.
    nodes: Vec<Process>,
    store_dirs: Vec<PathBuf>,
    cluster_ports: Vec<u16>,
    dir: TempDir,
}

impl NatsCluster {
    /// Starts a 3-node cluster and waits until it has a JetStream meta leader
    /// and can create (and delete) an R3 stream.
    ///
    /// # Panics
    ///
    /// If that does not happen within [`CLUSTER_READY_TIMEOUT`].
    pub async fn start() -> NatsCluster {
        Self::start_with(NatsClusterOptions::default()).await
    }

    /// Like [`start`](Self::start), with options.
    ///
    /// # Panics
    ///
    /// If the cluster is not ready within [`CLUSTER_READY_TIMEOUT`].
    pub async fn start_with(options: NatsClusterOptions) -> NatsCluster {
        match Self::try_start_with(options).await {
            Ok(cluster) => cluster,
            Err(e) => panic!("failed to start a nats-server cluster: {e:#}"),
        }
    }

    /// Like [`start_with`](Self::start_with), returning an error instead of panicking.
    pub async fn try_start_with(options: NatsClusterOptions) -> Result<NatsCluster> {
        let binary = nats_server_binary();
        let mut dir = tempfile::Builder::new()
            .prefix("holdpoint-nats-cluster-")
            .tempdir()
            .context("creating a temporary directory for the nats-server cluster")?;
        let suffix = unique_suffix();
        let name = format!("hpc-{suffix}");
        let mut last_error = None;
        for _ in 0..FRESH_PORT_ATTEMPTS {
            let ports = free_ports(2 * CLUSTER_SIZE).context("picking ports")?;
            let (client_ports, cluster_ports) = ports.split_at(CLUSTER_SIZE);
            let mut cluster = NatsCluster {
                name: name.clone(),
                nodes: Vec::with_capacity(CLUSTER_SIZE),
                store_dirs: Vec::with_capacity(CLUSTER_SIZE),
                cluster_ports: cluster_ports.to_vec(),
                dir,
            };
            for (i, &client_port) in client_ports.iter().enumerate() {
                let node_dir = cluster.dir.path().join(format!("node-{i}"));
                let store_dir = node_dir.join("store");
                fs::create_dir_all(&store_dir)
                    .with_context(|| format!("creating {}", store_dir.display()))?;
                let server_name = format!("{name}-n{i}");
                let config = node_config(
                    &server_name,
                    client_port,
                    &store_dir,
                    &name,
                    cluster_ports,
                    i,
                    options.sync_always,
                );
                let config_path = node_dir.join("nats-server.conf");
                fs::write(&config_path, config)
                    .with_context(|| format!("writing {}", config_path.display()))?;
                cluster.store_dirs.push(store_dir);
                cluster.nodes.push(Process {
                    server_name,
                    binary: binary.clone(),
                    args: vec!["-c".into(), config_path.into()],
                    port: client_port,
                    log_path: node_dir.join(LOG_FILE),
                    child: None,
                    user: None,
                });
            }
            match cluster.start_all().await {
                Ok(()) => return Ok(cluster),
                Err(StartError::PortInUse(e)) => {
                    last_error = Some(e);
                    for node in &mut cluster.nodes {
                        node.kill_now();
                    }
                    // Take the directory back and start over with fresh ports.
                    let NatsCluster { dir: d, .. } = cluster;
                    dir = d;
                    for i in 0..CLUSTER_SIZE {
                        let node_dir = dir.path().join(format!("node-{i}"));
                        let _ = fs::remove_dir_all(&node_dir);
                    }
                }
                Err(StartError::Failed(e)) => return Err(e),
            }
        }
        Err(last_error
            .unwrap_or_else(|| anyhow!("no attempt made"))
            .context(format!(
                "no free ports after {FRESH_PORT_ATTEMPTS} attempts"
            )))
    }

    async fn start_all(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + CLUSTER_READY_TIMEOUT;
        let mut log_from = Vec::with_capacity(self.nodes.len());
        for node in &mut self.nodes {
            log_from.push(node.log_len());
            node.spawn().map_err(StartError::Failed)?;
        }
        for (node, from) in self.nodes.iter_mut().zip(&log_from) {
            node.wait_ready(Readiness::Listening, deadline, *from)
                .await?;
        }
        self.wait_jetstream_ready(deadline)
            .await
            .map_err(StartError::Failed)
    }

    /// Polls until an R3 stream can be created and deleted (there is a meta
    /// leader and every node is a current JetStream peer).
    async fn wait_jetstream_ready(&mut self, deadline: Instant) -> Result<()> {
        let urls = self.urls();
        let mut last = String::from("no attempt yet");
        let mut client = None;
        loop {
            for node in &mut self.nodes {
                if let Some(status) = node.try_exit_status()? {
                    bail!(
                        "nats-server {} exited ({status}); log:\n{}",
                        node.server_name,
                        log_tail(&node.log_path, 0)
                    );
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| format!("--- {}:\n{}", n.server_name, log_tail(&n.log_path, 0)))
                    .collect();
                bail!(
                    "cluster {} had no working JetStream in time (last check: {last}); logs:\n{}",
                    self.name,
                    logs.join("\n")
                );
            }
            let attempt = async {
                if client.is_none() {
                    client = Some(connect_client(&urls, None).await?);
                }
                let client = client.clone().context("client")?;
                probe_r3_stream(client).await
            };
            match tokio::time::timeout((deadline - now).min(Duration::from_secs(5)), attempt).await
            {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last = format!("{e:#}"),
                Err(_) => last = "check timed out".to_owned(),
            }
            tokio::time::sleep(POLL_INTERVAL * 5).await;
        }
    }

    /// Client URLs of all nodes, e.g. `nats://127.0.0.1:40123`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Process::url).collect()
    }

    /// Node `i`'s process id, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes
            .get(i)?
            .child
            .as_ref()
            .map(std::process::Child::id)
    }

    /// Client URLs of all nodes joined with commas (for flags and env vars).
    pub fn urls_csv(&self) -> String {
        self.urls().join(",")
    }

    /// Number of nodes ([`CLUSTER_SIZE`]).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has [`CLUSTER_SIZE`] nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The cluster's name (`cluster { name }`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Client URL of node `i`.
    pub fn url(&self, i: usize) -> String {
        self.node(i).url()
    }

    /// Client port of node `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.node(i).port
    }

    /// Cluster (route) port of node `i`.
    pub fn cluster_port(&self, i: usize) -> u16 {
        self.cluster_ports[i]
    }

    /// `server_name` of node `i` (what JetStream reports as leader or peer).
    pub fn server_name(&self, i: usize) -> &str {
        &self.node(i).server_name
    }

    /// The index of the node called `server_name`.
    pub fn index_of(&self, server_name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.server_name == server_name)
    }

    /// JetStream store directory of node `i`.
    pub fn store_dir(&self, i: usize) -> &Path {
        &self.store_dirs[i]
    }

    /// The temporary directory holding every node's config, store and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything node `i` printed so far, across restarts.
    pub fn log_contents(&self, i: usize) -> String {
        String::from_utf8_lossy(&fs::read(&self.node(i).log_path).unwrap_or_default()).into_owned()
    }

    /// Whether node `i` is alive.
    pub fn is_running(&mut self, i: usize) -> bool {
        self.node_mut(i).is_running()
    }

    /// A new client given every node's URL.
    ///
    /// # Panics
    ///
    /// If the connection fails.
    pub async fn connect(&self) -> async_nats::Client {
        match connect_client(&self.urls(), None).await {
            Ok(client) => client,
            Err(e) => panic!("{e:#}"),
        }
    }

    /// SIGKILLs node `i` and waits until it has exited.
    pub async fn kill(&mut self, i: usize) {
        if let Err(e) = self.node_mut(i).kill().await {
            panic!("{e:#}");
        }
    }

    /// SIGTERMs node `i` and waits until it has exited.
    pub async fn stop(&mut self, i: usize) {
        if let Err(e) = self.node_mut(i).stop().await {
            panic!("{e:#}");
        }
    }

    /// Starts node `i` again with the same ports and store directory and
    /// waits until JetStream answers through it. A still-running node is
    /// stopped (SIGTERM) first.
    ///
    /// # Panics
    ///
    /// If that takes longer than [`CLUSTER_READY_TIMEOUT`].
    pub async fn restart(&mut self, i: usize) {
        if let Err(e) = self
            .node_mut(i)
            .restart(Readiness::JetStream, CLUSTER_READY_TIMEOUT)
            .await
        {
            panic!("{e:#}");
        }
    }

    fn node(&self, i: usize) -> &Process {
        assert!(i < self.nodes.len(), "node index {i} out of range");
        &self.nodes[i]
    }

    fn node_mut(&mut self, i: usize) -> &mut Process {
        assert!(i < self.nodes.len(), "node index {i} out of range");
        &mut self.nodes[i]
    }
}

fn node_config(
    server_name: &str,
    client_port: u16,
    store_dir: &Path,
    cluster_name: &str,
    cluster_ports: &[u16],
    me: usize,
    sync_always: bool,
) -> String {
    let routes: Vec<String> = cluster_ports
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(_, p)| format!("    nats-route://127.0.0.1:{p}"))
        .collect();
    let sync = if sync_always {
        "  sync_interval: always\n"
    } else {
        ""
    };
    format!(
        "# generated by holdpoint-tests\n\
         server_name: {server_name}\n\
         listen: 127.0.0.1:{client_port}\n\
         jetstream {{\n  store_dir: {store_dir:?}\n{sync}}}\n\
         cluster {{\n  name: {cluster_name}\n  listen: 127.0.0.1:{cluster_port}\n  routes: [\n{routes}\n  ]\n}}\n",
        store_dir = store_dir.display().to_string(),
        cluster_port = cluster_ports[me],
        routes = routes.join("\n"),
    )
}

/// Creates and deletes an R3 memory stream.
async fn probe_r3_stream(client: async_nats::Client) -> Result<()> {
    let mut js = jetstream::new(client);
    js.set_timeout(Duration::from_secs(2));
    js.query_account()
        .await
        .context("JetStream account info request")?;
    let name = format!("HP_READY_{}", unique_suffix().replace('-', "_"));
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("hp.ready.{name}")],
        num_replicas: CLUSTER_SIZE,
        storage: jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .context("creating an R3 probe stream")?;
    js.delete_stream(&name)
        .await
        .context("deleting the R3 probe stream")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::message::PublishMessage;
    use async_nats::jetstream::stream::{Config, StorageType};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// GET `path` from the monitoring port and parse the JSON body.
    async fn monitor_json(port: u16, path: &str) -> Result<serde_json::Value> {
        let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let (_, body) = response
            .split_once("\r\n\r\n")
            .context("HTTP response without a body")?;
        Ok(serde_json::from_str(body)?)
    }

    #[tokio::test]
    async fn acked_message_survives_kill_9_and_restart() -> Result<()> {
        let mut server =
            NatsServer::start_with(NatsServerOptions::default().sync_always(true)).await;
        let port = server.port();
        assert_eq!(server.url(), format!("nats://127.0.0.1:{port}"));
        assert!(server.store_dir().starts_with(server.dir()));

        let js = jetstream::new(server.connect().await);
        js.create_stream(Config {
            name: "HARNESS".to_owned(),
            subjects: vec!["harness.>".to_owned()],
            storage: StorageType::File,
            ..Default::default()
        })
        .await?;
        let ack = js
            .publish("harness.one", "survives kill -9".into())
            .await?
            .await?;
        assert_eq!(ack.sequence, 1);
        drop(js);

        server.kill().await;
        assert!(!server.is_running());
        assert!(
            tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                .await
                .is_err(),
            "port {port} still accepts connections after kill"
        );

        server.restart().await;
        assert!(server.is_running());
        assert_eq!(server.port(), port);

        let js = jetstream::new(server.connect().await);
        let stream = js.get_stream("HARNESS").await?;
        let info = stream.get_info().await?;
        assert_eq!(info.state.messages, 1);
        let message = stream.get_raw_message(1).await?;
        assert_eq!(message.subject.as_str(), "harness.one");
        assert_eq!(&message.payload[..], b"survives kill -9");
        assert_eq!(server.log_contents().matches("Server is ready").count(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn config_file_extra_args_and_sync_always_are_applied() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("user.conf");
        fs::write(&config, "max_payload: 512KB\n")?;
        let monitor = free_port().expect("a free port on 127.0.0.1");
        let mut server = NatsServer::start_with(
            NatsServerOptions::default()
                .config_file(&config)
                .args(["-m", &monitor.to_string()])
                .sync_always(true),
        )
        .await;

        let varz = monitor_json(monitor, "/varz").await?;
        assert_eq!(varz["server_name"], server.server_name());
        assert_eq!(varz["max_payload"], 512 * 1024);
        assert_eq!(varz["jetstream"]["config"]["sync_always"], true);
        assert_eq!(
            varz["jetstream"]["config"]["store_dir"]
                .as_str()
                .map(PathBuf::from),
            Some(server.store_dir().join("jetstream"))
        );

        server.stop().await;
        assert!(!server.is_running());
        assert!(server.log_contents().contains("Server Exiting"));
        server.restart().await;
        let client = server.connect().await;
        assert_eq!(client.server_info().port, server.port());
        Ok(())
    }

    #[tokio::test]
    async fn wait_for_returns_the_first_some() {
        let mut calls = 0;
        let value = wait_for(Duration::from_secs(1), "the third call", || {
            calls += 1;
            let n = calls;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for nothing")]
    async fn wait_for_panics_at_the_deadline() {
        wait_for(Duration::from_millis(50), "nothing", || async {
            None::<()>
        })
        .await;
    }

    #[tokio::test]
    async fn r3_stream_keeps_accepting_writes_with_its_leader_down() -> Result<()> {
        let mut cluster = NatsCluster::start().await;
        assert_eq!(cluster.len(), CLUSTER_SIZE);
        assert_eq!(cluster.urls_csv().split(',').count(), CLUSTER_SIZE);

        let js = jetstream::new(cluster.connect().await);
        js.create_stream(Config {
            name: "HARNESS_R3".to_owned(),
            subjects: vec!["r3.>".to_owned()],
            storage: StorageType::File,
            num_replicas: 3,
            ..Default::default()
        })
        .await?;
        // A new R3 stream answers once its leader is elected (a loaded machine may
        // take a moment): until then a publish finds no stream.
        let ack = wait_for(Duration::from_secs(20), "the new stream's leader", || {
            let js = js.clone();
            async move {
                let publish = PublishMessage::build()
                    .payload("before".into())
                    .message_id("before-1");
                js.send_publish("r3.a", publish).await.ok()?.await.ok()
            }
        })
        .await;
        assert_eq!(ack.sequence, 1);

        // Kill the stream's leader so a new one has to be elected.
        let stream = js.get_stream("HARNESS_R3").await?;
        let leader = stream
            .get_info()
            .await?
            .cluster
            .and_then(|c| c.leader)
            .context("stream has no leader")?;
        let victim = cluster.index_of(&leader).context("leader is not a node")?;
        cluster.kill(victim).await;
        assert!(!cluster.is_running(victim));

        // Retries are deduplicated by the message id.
        let ack = wait_for(
            Duration::from_secs(20),
            "a publish with a node down",
            || {
                let js = js.clone();
                async move {
                    let publish = PublishMessage::build()
                        .payload("during".into())
                        .message_id("during-1");
                    js.send_publish("r3.a", publish).await.ok()?.await.ok()
                }
            },
        )
        .await;
        assert_eq!(ack.sequence, 2);

        cluster.restart(victim).await;
        let name = cluster.server_name(victim).to_owned();
        wait_for(
            Duration::from_secs(20),
            "the restarted node to catch up",
            || {
                let stream = stream.clone();
                let name = name.clone();
                async move {
                    let info = stream.get_info().await.ok()?;
                    let cluster = info.cluster?;
                    let caught_up = cluster.leader.as_deref() == Some(name.as_str())
                        || cluster
                            .replicas
                            .iter()
                            .any(|p| p.name == name && p.current && !p.offline);
                    (caught_up && info.state.messages == 2).then_some(())
                }
            },
        )
        .await;
        Ok(())
    }
}

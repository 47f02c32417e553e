//! A local nats-server for `holdpoint up` and `holdpoint demo`: the binary from
//! `HOLDPOINT_NATS_SERVER`, else the one `ops/setup.sh` installs under `.tools/`, else
//! `nats-server` on `PATH`; JetStream with file storage in a directory Holdpoint owns.
//!
//! The pieces under [`LocalNats`] are the one launcher every nats-server of the
//! workspace goes through: [`free_port`] / [`free_ports`] pick ports, [`spawn`]
//! starts the process with its output in a log file, [`wait_listening`] waits until
//! its client port accepts connections. The benchmark (`ops/bench`) and the test
//! harness (`tests/src/nats.rs`) use them too.

use std::ffi::OsStr;
use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::time::Instant;

/// How often [`wait_listening`] and [`LocalNats::stop`] look again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A running nats-server child process; killed on drop.
#[derive(Debug)]
pub struct LocalNats {
    child: Child,
    /// `nats://127.0.0.1:<port>`.
    pub url: String,
    /// The store directory.
    pub store: PathBuf,
}

/// Finds the nats-server binary.
pub fn find_binary() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("HOLDPOINT_NATS_SERVER") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("HOLDPOINT_NATS_SERVER={} is not a file", p.display());
    }
    let mut dir = std::env::current_dir().ok();
    while let Some(d) = dir {
        let candidate = d.join(".tools/bin/nats-server");
        if candidate.is_file() {
            return Ok(candidate);
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for p in std::env::split_paths(&paths) {
            let candidate = p.join("nats-server");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "no nats-server found: run ops/setup.sh (installs a pinned one under .tools/) or set HOLDPOINT_NATS_SERVER"
    )
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read the
/// port, drop the listener).
///
/// # Errors
/// When no port can be bound on 127.0.0.1.
pub fn free_port() -> std::io::Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `n` distinct ports on 127.0.0.1 that were free a moment ago (all `n` listeners
/// are held at once, so the ports differ).
///
/// # Errors
/// When no port can be bound on 127.0.0.1.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// Starts `bin` with `args`, stdin closed, stdout and stderr appended to `log`
/// (discarded when `None`). The child is not waited for: see [`wait_listening`].
///
/// # Errors
/// When the log file cannot be opened or the binary cannot be started.
pub fn spawn<I, S>(bin: &Path, args: I, log: Option<&Path>) -> anyhow::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let (stdout, stderr) = match log {
        Some(path) => {
            let file = File::options()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            let dup = file
                .try_clone()
                .context("duplicating the log file handle")?;
            (Stdio::from(file), Stdio::from(dup))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Polls every 20 ms until 127.0.0.1:`port` accepts a TCP connection.
///
/// # Errors
/// When `timeout` passes first ("nothing listens on {port}").
pub async fn wait_listening(port: u16, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("nothing listens on {port}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// How often [`LocalNats::exited`] looks at the child.
const EXIT_POLL: Duration = Duration::from_millis(500);

impl LocalNats {
    /// Starts nats-server with JetStream on `port` (0: a free one) storing in `store`,
    /// and waits until it accepts connections.
    ///
    /// # Errors
    /// When the binary is missing or the server does not come up in 10 s.
    pub async fn start(store: &Path, port: u16) -> anyhow::Result<Self> {
        let bin = find_binary()?;
        let port = if port == 0 { free_port()? } else { port };
        // A server already on the port (another checkout's, or one a killed
        // `holdpoint up` left running) would be used instead of ours, with its own
        // store: earlier answers would look lost and new ones land elsewhere.
        if let Err(e) = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            bail!(
                "127.0.0.1:{port} is already in use ({e}): another nats-server, perhaps one a \
                 killed `holdpoint up` left running (`ss -ltnp 'sport = :{port}'` names it); \
                 stop it, or choose another port (--nats-port)"
            );
        }
        std::fs::create_dir_all(store).with_context(|| format!("creating {}", store.display()))?;
        let log = store.join("nats-server.log");
        // The log is written anew for each start.
        File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let port_arg = port.to_string();
        let args = [
            OsStr::new("-js"),
            OsStr::new("-a"),
            OsStr::new("127.0.0.1"),
            OsStr::new("-p"),
            OsStr::new(&port_arg),
            OsStr::new("-sd"),
            store.as_os_str(),
        ];
        let child = spawn(&bin, args, Some(&log))?;
        // Killed on drop from here on.
        let mut nats = LocalNats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            store: store.to_path_buf(),
        };
        let listening = wait_listening(port, Duration::from_secs(10)).await;
        // Listening, but not ours: our server exited (it could not bind, or its
        // store is locked by another server) and something else took the port.
        let exited = !matches!(nats.child.try_wait(), Ok(None));
        if listening.is_err() || exited {
            bail!("nats-server did not start; see {}", log.display());
        }
        Ok(nats)
    }

    /// Waits until the server exits by itself (a crash, a kill, a full disk) and
    /// returns how it ended; pending forever while it runs.
    pub async fn exited(&mut self) -> std::process::ExitStatus {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// The server's log (written anew at each start).
    pub fn log(&self) -> PathBuf {
        self.store.join("nats-server.log")
    }

    /// Stops the server: SIGTERM (it flushes its store), SIGKILL after 5 s.
    pub async fn stop(mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
        // Drop kills and reaps it.
    }
}

impl Drop for LocalNats {
    fn drop(&mut self) {
        // Errors mean it has already exited; wait() reaps it either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! A local nats-server for `holdpoint up` and `holdpoint demo`: the binary from
//! `HOLDPOINT_NATS_SERVER`, else the one `ops/setup.sh` installs under `.tools/`, else
//! `nats-server` on `PATH`; JetStream with file storage in a directory Holdpoint owns.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

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

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl LocalNats {
    /// Starts nats-server with JetStream on `port` (0: a free one) storing in `store`,
    /// and waits until it accepts connections.
    ///
    /// # Errors
    /// When the binary is missing or the server does not come up in 10 s.
    pub async fn start(store: &Path, port: u16) -> anyhow::Result<Self> {
        let bin = find_binary()?;
        let port = if port == 0 { free_port()? } else { port };
        std::fs::create_dir_all(store).with_context(|| format!("creating {}", store.display()))?;
        let log = std::fs::File::create(store.join("nats-server.log"))?;
        let child = Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let url = format!("nats://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "nats-server did not start; see {}",
                    store.join("nats-server.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(LocalNats {
            child,
            url,
            store: store.to_path_buf(),
        })
    }

    /// Stops the server: SIGTERM (it flushes its store), SIGKILL after 5 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

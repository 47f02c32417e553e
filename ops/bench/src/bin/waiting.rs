//! `holdpoint-waiting`: the ingress's memory per request waiting for an outcome.
//!
//! Starts a private nats-server (free port) and a `holdpoint ingress` child process
//! against it with NO worker, so every answer request waits its outcome timeout and
//! then answers `503 NRY-0050`. For each N given it fires N concurrent answer
//! requests (each on its own connection, with a valid development JWT), samples the
//! ingress's `VmRSS` while they wait, and prints the RSS before, while waiting, the
//! peak (`VmHWM`), the answers' statuses and the bytes per waiting request.
//!
//! ```text
//! cargo build --release --bin holdpoint --bin holdpoint-waiting
//! HOLDPOINT_NATS_SERVER=.tools/bin/nats-server \
//!   target/release/holdpoint-waiting --holdpoint-bin target/release/holdpoint -n 100 -n 300
//! ```
//!
//! Extra arguments after `--` go to `holdpoint ingress` (e.g. `-- --max-in-flight 64`).
//! Answers refused at once (past the ingress's `--max-in-flight`) are counted apart
//! from those that waited. The ingress is stopped with SIGTERM at the end, so a
//! `holdpoint` built with `cargo build -p holdpoint-cli --bin holdpoint --features
//! dhat-heap` writes `dhat-heap.json` (in the working directory) with the heap at
//! its peak: the requests waiting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use holdpoint_cli::localnats::{free_port, wait_listening};
use holdpoint_tests::nats::NatsServer;

#[derive(Parser, Debug)]
#[command(about = "RSS of the ingress per request waiting for an outcome")]
struct Args {
    /// The `holdpoint` binary to run as the ingress.
    #[arg(long, default_value = "target/release/holdpoint")]
    holdpoint_bin: PathBuf,
    /// Concurrent waiting requests per round (repeat for several rounds).
    #[arg(short = 'n', long = "requests", default_values_t = [100usize, 300])]
    requests: Vec<usize>,
    /// The ingress's outcome timeout, in milliseconds: how long each request waits.
    #[arg(long, default_value_t = 5_000)]
    outcome_timeout_ms: u64,
    /// More arguments for `holdpoint ingress`.
    #[arg(last = true)]
    ingress_args: Vec<String>,
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

struct Child(std::process::Child);

impl Child {
    /// SIGTERM, so the ingress shuts down cleanly (a `dhat-heap` build writes its
    /// profile then); SIGKILL after `grace`.
    fn stop(mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let nats = NatsServer::start().await;
    let dir = tempfile::tempdir()?;
    let key = holdpoint_cli::devtoken::DevKey::load_or_create(&dir.path().join("jwt"))?;
    let token = key.token("bench", "bench-person", "org", 3600)?;
    let (api, admin) = (free_port()?, free_port()?);
    let mut cmd = Command::new(&args.holdpoint_bin);
    cmd.args(["ingress", "--nats-url", &nats.url()])
        .args(["--listen", &format!("127.0.0.1:{api}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .args(["--jwt-issuer", holdpoint_cli::devtoken::DEV_ISSUER])
        .args(["--jwt-audience", holdpoint_cli::devtoken::DEV_AUDIENCE])
        .args(["--jwks-file", &key.jwks.display().to_string()])
        .args(["--jwt-algorithms", "EdDSA"])
        .args(["--outcome-timeout-ms", &args.outcome_timeout_ms.to_string()])
        .args(&args.ingress_args)
        .env(
            "RUST_LOG",
            std::env::var("HOLDPOINT_BENCH_LOG").unwrap_or_else(|_| "error".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let ingress = Child(
        cmd.spawn()
            .with_context(|| format!("starting {}", args.holdpoint_bin.display()))?,
    );
    let pid = ingress.0.id();
    wait_listening(api, Duration::from_secs(30)).await?;
    let base = format!("http://127.0.0.1:{api}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_millis(args.outcome_timeout_ms) + Duration::from_secs(30))
        .build()?;
    // One request first, so what every request touches once is not counted per request.
    let warm = fire(&http, &base, &token, 0).await;
    let (rss0, hwm0) = memory_kib(pid);
    println!(
        "ingress pid {pid}; warm-up answered {warm}; RSS {:.1} MiB, HWM {:.1} MiB",
        mib(rss0),
        mib(hwm0)
    );
    let token = Arc::new(token);
    for (round, &n) in args.requests.iter().enumerate() {
        let (before, _) = memory_kib(pid);
        let started = Instant::now();
        let wait = Duration::from_millis(args.outcome_timeout_ms);
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let answer = fire(&http, &base, &token, (round + 1) * 100_000 + i).await;
                    // A refusal past `--max-in-flight` comes at once, a timeout after
                    // the outcome timeout.
                    if sent.elapsed() < wait / 2 {
                        format!("{answer} at once")
                    } else {
                        answer
                    }
                })
            })
            .collect();
        // Sample while they wait; the highest RSS is the one that counts.
        let mut peak = before;
        while started.elapsed() < wait.mul_f64(0.9) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            peak = peak.max(memory_kib(pid).0);
        }
        let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
        for t in tasks {
            *statuses.entry(t.await?).or_default() += 1;
        }
        let (after, hwm) = memory_kib(pid);
        let per = (peak.saturating_sub(before) * 1024) as f64 / n as f64;
        println!(
            "N={n}: RSS before {:.1} MiB, waiting {:.1} MiB, after {:.1} MiB, HWM {:.1} MiB; \
             {:.0} KiB per waiting request; answers {statuses:?} in {:.1}s",
            mib(before),
            mib(peak),
            mib(after),
            mib(hwm),
            per / 1024.0,
            started.elapsed().as_secs_f64()
        );
    }
    ingress.stop(Duration::from_secs(60));
    drop(nats);
    Ok(())
}

/// One answer to an interaction nobody decides: its status and code.
async fn fire(http: &reqwest::Client, base: &str, token: &str, i: usize) -> String {
    let sent = http
        .post(format!("{base}/v1/interactions/int-wait-{i}/approve"))
        .bearer_auth(token)
        .json(&serde_json::json!({"approved": true}))
        .send()
        .await;
    match sent {
        Ok(r) => {
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            match body["code"].as_str() {
                Some(code) => format!("{status} {code}"),
                None => status.to_string(),
            }
        }
        Err(e) if e.is_timeout() => "client timeout".into(),
        Err(e) if e.is_connect() => "connect error".into(),
        Err(_) => "transport error".into(),
    }
}

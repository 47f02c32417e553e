//! `holdpoint health`: asks a running service's admin listener whether it is ready
//! (`GET /readyz`) and exits 0 when it is, 1 otherwise. The container image's
//! `HEALTHCHECK` runs it, so the image needs no HTTP client of its own.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;

use crate::config::DEFAULT_ADMIN_LISTEN;

/// `holdpoint health`.
#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    /// The service's admin listener (the same variable the service reads; an
    /// unspecified address such as 0.0.0.0 is asked on loopback).
    #[arg(long, env = "HOLDPOINT_ADMIN_LISTEN", default_value = DEFAULT_ADMIN_LISTEN)]
    pub admin_listen: SocketAddr,
    /// `readyz` (NATS, streams and buckets reachable) or `healthz` (the process
    /// answers).
    #[arg(long, default_value = "readyz", value_parser = ["readyz", "healthz"])]
    pub probe: String,
    /// How long to wait for the answer, in milliseconds.
    #[arg(long, default_value_t = 3_000)]
    pub timeout_ms: u64,
}

/// The URL [`run`] asks: `http://<admin>/<probe>`, loopback for an unspecified
/// address.
pub fn probe_url(args: &HealthArgs) -> String {
    let mut at = args.admin_listen;
    if at.ip().is_unspecified() {
        at.set_ip(match at {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{at}/{}", args.probe)
}

/// Asks the probe; prints its answer on stdout.
///
/// # Errors
/// When the listener does not answer in time or answers anything but 200.
pub async fn run(args: HealthArgs) -> anyhow::Result<()> {
    let url = probe_url(&args);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(args.timeout_ms))
        .no_proxy()
        .build()
        .context("HTTP client")?;
    let resp = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("{url} did not answer"))?;
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    let body = crate::terminal::lines(body.trim());
    if status != reqwest::StatusCode::OK {
        bail!("{url}: {status}: {body}");
    }
    println!("{url}: {body}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_address_is_asked_on_loopback() {
        let args = HealthArgs {
            admin_listen: "0.0.0.0:9181".parse().expect("addr"),
            probe: "readyz".into(),
            timeout_ms: 10,
        };
        assert_eq!(probe_url(&args), "http://127.0.0.1:9181/readyz");
        let args = HealthArgs {
            admin_listen: "[::]:9181".parse().expect("addr"),
            probe: "healthz".into(),
            timeout_ms: 10,
        };
        assert_eq!(probe_url(&args), "http://[::1]:9181/healthz");
    }
}

//! One webhook request.
//!
//! The body is the CloudEvent exactly as stored (`application/cloudevents+json`);
//! the headers are Standard Webhooks': `webhook-id` (the CloudEvent's id),
//! `webhook-timestamp` (Unix seconds) and `webhook-signature` (`v1,<base64
//! HMAC-SHA256>` per live secret, space-separated), computed by the
//! `standardwebhooks` crate over `<id>.<timestamp>.<body>`.
//!
//! The client follows no redirect, uses no proxy, keeps no cookies and sends no
//! credentials. Every address a host resolves to is checked with
//! [`holdpoint_domain::webhook::address_allowed`] in the resolver itself, so the
//! connection goes only to an address that was checked; a literal address in the
//! URL is checked by [`holdpoint_domain::webhook::check_url`] before sending. At
//! most [`crate::NotifierConfig::body_cap`] bytes of the response are read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use holdpoint_domain::webhook::{
    AttemptResult, RESPONSE_START_BYTES, WebhookEndpoint, address_allowed, check_url,
};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use time::OffsetDateTime;

use crate::NotifierConfig;

/// A host resolved to an address a delivery may not use.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to {ip}, a private, loopback, link-local or reserved address")]
pub struct AddressRefused {
    host: String,
    ip: std::net::IpAddr,
}

/// Resolves with the system resolver and refuses a host if any of its addresses
/// is not allowed.
#[derive(Debug)]
struct GuardedResolver {
    local: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let local = self.local;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(bad) = addrs.iter().find(|a| !address_allowed(a.ip(), local)) {
                return Err(Box::new(AddressRefused { host, ip: bad.ip() })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The HTTP client every delivery uses.
///
/// # Errors
/// When the TLS backend cannot be set up.
pub fn client(cfg: &NotifierConfig) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout)
        .user_agent(concat!("Holdpoint-Webhooks/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(GuardedResolver {
            local: cfg.local_mode,
        }))
        .build()?)
}

/// What one attempt came to.
#[derive(Debug, Clone)]
pub struct Sent {
    /// How it ended.
    pub result: AttemptResult,
    /// The status, when one came.
    pub status: Option<u16>,
    /// From sending to the end of the capped response.
    pub latency_ms: u64,
    /// Why, when no status says it.
    pub error: Option<String>,
    /// The response's first bytes, as text.
    pub response_start: String,
}

/// The `webhook-signature` value for `payload`: one `v1,<sig>` per secret.
///
/// # Errors
/// When a stored secret is not a valid Standard Webhooks secret.
pub fn signature(
    secrets: &[&str],
    msg_id: &str,
    timestamp: i64,
    payload: &[u8],
) -> Result<String, String> {
    let mut out = Vec::with_capacity(secrets.len());
    for s in secrets {
        let wh = standardwebhooks::Webhook::new(s).map_err(|e| format!("bad secret: {e}"))?;
        out.push(
            wh.sign(msg_id, timestamp, payload)
                .map_err(|e| format!("cannot sign: {e}"))?,
        );
    }
    Ok(out.join(" "))
}

/// POSTs `payload` (the CloudEvent with id `event_id`) to `e`, signed with its live
/// secrets.
pub async fn send(
    client: &reqwest::Client,
    cfg: &NotifierConfig,
    e: &WebhookEndpoint,
    event_id: &str,
    payload: Bytes,
) -> Sent {
    let started = Instant::now();
    let failed = |result, error: String, started: Instant| Sent {
        result,
        status: None,
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        error: Some(error),
        response_start: String::new(),
    };
    let url = match check_url(&e.url, cfg.local_mode) {
        Ok(u) => u,
        Err(r) => return failed(AttemptResult::Refused, r.message, started),
    };
    let now = OffsetDateTime::now_utc();
    let timestamp = now.unix_timestamp();
    let sig = match signature(&e.signing_secrets(now), event_id, timestamp, &payload) {
        Ok(s) => s,
        Err(err) => return failed(AttemptResult::Failed, err, started),
    };
    let request = client
        .post(url)
        .header("content-type", "application/cloudevents+json")
        .header("webhook-id", event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", sig)
        .body(payload);
    let mut resp = match request.send().await {
        Ok(r) => r,
        Err(err) => {
            if let Some(refused) = find_refusal(&err) {
                return failed(AttemptResult::Refused, refused, started);
            }
            let why = if err.is_timeout() {
                format!("timed out after {} s", cfg.timeout.as_secs_f64())
            } else if err.is_connect() {
                format!("cannot connect: {}", chain(&err))
            } else {
                chain(&err)
            };
            return failed(AttemptResult::Failed, why, started);
        }
    };
    let status = resp.status();
    let mut body = Vec::new();
    let mut error = None;
    while body.len() < cfg.body_cap {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c[..c.len().min(cfg.body_cap - body.len())]),
            Ok(None) => break,
            Err(err) => {
                if err.is_timeout() {
                    error = Some(format!(
                        "response timed out after {} s",
                        cfg.timeout.as_secs_f64()
                    ));
                }
                break;
            }
        }
    }
    drop(resp);
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    body.truncate(RESPONSE_START_BYTES);
    Sent {
        result: if status.is_success() && error.is_none() {
            AttemptResult::Delivered
        } else {
            AttemptResult::Failed
        },
        status: Some(status.as_u16()),
        latency_ms,
        error: error.or_else(|| {
            status
                .is_redirection()
                .then(|| "redirect not followed".to_owned())
        }),
        response_start: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn find_refusal(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<AddressRefused>() {
            return Some(r.to_string());
        }
        source = s.source();
    }
    None
}

fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

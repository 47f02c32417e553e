//! `holdpoint webhooks list | add | remove | rotate | enable | test | attempts`: an
//! organisation's webhook endpoints over the HTTP API (`/v1/webhooks…`), with the
//! caller's bearer token. A new secret is printed once, as the API shows it once.
//! Every text that came from the API is escaped before it reaches the terminal.

use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::operator::{ApiArgs, json_or_error, segment};
use crate::terminal;

/// `holdpoint webhooks`.
#[derive(Debug, Clone, Args)]
pub struct WebhooksArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// What to do.
    #[command(subcommand)]
    pub action: WebhooksAction,
}

/// The `holdpoint webhooks` actions.
#[derive(Debug, Clone, Subcommand)]
pub enum WebhooksAction {
    /// List your organisation's endpoints.
    List,
    /// Register an endpoint; prints its signing secret (shown once).
    Add {
        /// The https URL (http only to loopback in local mode).
        url: String,
        /// An event type to deliver (repeat; none: every event).
        #[arg(long = "event")]
        events: Vec<String>,
        /// A description of the endpoint for people (free text).
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Remove an endpoint (its queued deliveries are dropped).
    Remove {
        /// The endpoint id.
        id: String,
    },
    /// Make a new secret; the old one keeps signing for --overlap-secs.
    Rotate {
        /// The endpoint id.
        id: String,
        /// Seconds the previous secret keeps signing (default 86400).
        #[arg(long)]
        overlap_secs: Option<u64>,
    },
    /// Enable a disabled endpoint again.
    Enable {
        /// The endpoint id.
        id: String,
    },
    /// Queue a `webhook-test` message to an endpoint.
    Test {
        /// The endpoint id.
        id: String,
    },
    /// Show an endpoint's latest delivery attempts.
    Attempts {
        /// The endpoint id.
        id: String,
    },
}

fn text(v: &Value, key: &str) -> String {
    terminal::line(v[key].as_str().unwrap_or("")).into_owned()
}

fn print_endpoint(v: &Value) {
    let types = v["eventTypes"]
        .as_array()
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| terminal::line(s).into_owned())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "all events".into());
    let state = if v["disabled"].as_bool() == Some(true) {
        "DISABLED"
    } else {
        "enabled"
    };
    println!(
        "{} {} {} [{}] {}",
        text(v, "id"),
        state,
        text(v, "url"),
        types,
        text(v, "description")
    );
}

/// Runs `holdpoint webhooks …`.
///
/// # Errors
/// When the API is unreachable or refuses (the error names the code).
pub async fn run(args: WebhooksArgs) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()?;
    let base = args.api.url.trim_end_matches('/').to_owned();
    let auth = |r: reqwest::RequestBuilder| match &args.api.token {
        Some(t) => r.bearer_auth(t),
        None => r,
    };
    let send = |r: reqwest::RequestBuilder| async {
        let resp = auth(r)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", terminal::line(&base)))?;
        if resp.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        json_or_error(resp).await
    };
    let out = match &args.action {
        WebhooksAction::List => send(http.get(format!("{base}/v1/webhooks"))).await?,
        WebhooksAction::Add {
            url,
            events,
            description,
        } => {
            send(http.post(format!("{base}/v1/webhooks")).json(&json!({
                "url": url, "eventTypes": events, "description": description,
            })))
            .await?
        }
        WebhooksAction::Remove { id } => {
            send(http.delete(format!("{base}/v1/webhooks/{}", segment(id)))).await?
        }
        WebhooksAction::Rotate { id, overlap_secs } => {
            let mut body = json!({});
            if let Some(o) = overlap_secs {
                body["overlapSecs"] = json!(o);
            }
            send(
                http.post(format!("{base}/v1/webhooks/{}/rotate", segment(id)))
                    .json(&body),
            )
            .await?
        }
        WebhooksAction::Enable { id } => {
            send(
                http.post(format!("{base}/v1/webhooks/{}/enable", segment(id)))
                    .json(&json!({})),
            )
            .await?
        }
        WebhooksAction::Test { id } => {
            send(
                http.post(format!("{base}/v1/webhooks/{}/test", segment(id)))
                    .json(&json!({})),
            )
            .await?
        }
        WebhooksAction::Attempts { id } => {
            send(http.get(format!("{base}/v1/webhooks/{}/attempts", segment(id)))).await?
        }
    };
    if args.api.json {
        if !out.is_null() {
            println!("{}", terminal::json_pretty(&out));
        }
        return Ok(());
    }
    match &args.action {
        WebhooksAction::List => {
            let items = out["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                println!("no webhooks");
            }
            for v in &items {
                print_endpoint(v);
            }
        }
        WebhooksAction::Add { .. } | WebhooksAction::Rotate { .. } => {
            print_endpoint(&out);
            println!("secret: {} (shown once: keep it now)", text(&out, "secret"));
        }
        WebhooksAction::Remove { id } => println!("removed {}", terminal::line(id)),
        WebhooksAction::Enable { .. } => print_endpoint(&out),
        WebhooksAction::Test { .. } => {
            println!("test queued: webhook-id {}", text(&out, "eventId"));
        }
        WebhooksAction::Attempts { .. } => {
            let items = out["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                println!("no attempts yet");
            }
            for a in &items {
                println!(
                    "{} #{} {} {} {} ms {} {}",
                    text(a, "at"),
                    a["attempt"].as_u64().unwrap_or(0),
                    text(a, "result"),
                    a["status"]
                        .as_u64()
                        .map_or_else(|| "-".into(), |s| s.to_string()),
                    a["latencyMs"].as_u64().unwrap_or(0),
                    text(a, "eventId"),
                    text(a, "error"),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_encoded_into_paths() {
        assert_eq!(super::segment("wh_1"), "wh_1");
        assert_eq!(super::segment("../x"), "%2E%2E%2Fx");
    }
}

//! Operator and person verbs over the HTTP API, authenticated with a bearer token:
//! `holdpoint pending`, `show <id>`, `answer <questionId> --answer …`,
//! `approve <id> [--deny --reason …]`, `rules`, `audit`, and
//! `tail [--task …] [--type …]`.
//!
//! - this module: the verbs' arguments (clap), the HTTP `Client` they share,
//!   and `json_or_error`, which turns a refusal into its status and stable code;
//! - `verbs`: `pending`, `show`, `answer`, `approve`, `rules`, `audit` and how
//!   they print;
//! - `tail`: [`tail()`], a Server-Sent Events reader that resumes with
//!   `Last-Event-ID` after a dropped connection.
//!
//! Output is readable (and coloured on a terminal) by default, JSON with `--json`;
//! every text from the server goes through [`crate::terminal`] first. While a
//! command waits for Holdpoint's outcome a progress line turns on a terminal.

mod answers;
mod tail;
mod verbs;

pub use answers::{answer, approve, respond};
pub use tail::tail;
pub use verbs::{audit, pending, rules, show, time_left};

use std::io::IsTerminal as _;
use std::time::Duration;

use anstyle::Style;
use anyhow::{Context as _, bail};
use clap::Args;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use holdpoint_bus::backoff::Backoff;

use crate::terminal;

/// The API's base URL when neither `--url` nor `HOLDPOINT_URL` says otherwise.
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Where the API is and who is calling.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// The API's base URL.
    #[arg(long, env = "HOLDPOINT_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// A bearer token (e.g. from `holdpoint dev-token`).
    #[arg(long, env = "HOLDPOINT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `holdpoint pending`.
#[derive(Debug, Clone, Args)]
pub struct PendingArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Which interactions: `pending` (what waits), `resolved` (answered),
    /// `finished` (answered and run), `closed` (closed without an answer) or `all`.
    #[arg(long, default_value = "pending",
          value_parser = ["pending", "resolved", "finished", "closed", "all"])]
    pub state: String,
    /// Most interactions to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Start at this page: the `nextCursor` of the page before (the "… more"
    /// line gives the whole command).
    #[arg(long)]
    pub cursor: Option<String>,
}

/// `holdpoint show`.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The interaction id.
    pub id: String,
}

/// `holdpoint answer`.
#[derive(Debug, Clone, Args)]
pub struct AnswerArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The question id.
    pub question_id: String,
    /// One per question, in order: chosen option indices, comma-separated, then
    /// optionally `:` and free text. E.g. `--answer 0 --answer "2:Keep both"`.
    #[arg(long = "answer", required = true)]
    pub answers: Vec<String>,
    /// Idempotency key (default: a fresh one for this invocation, printed when the
    /// outcome is unknown, so a retry with it answers once).
    #[arg(long)]
    pub key: Option<String>,
}

/// `holdpoint respond`.
#[derive(Debug, Clone, Args)]
pub struct RespondArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The interaction id (a question with a form, a connection, or any question
    /// answered with a free value).
    pub id: String,
    /// The answer as JSON: a form's fields (`'{"seats":5}'`), a connection's
    /// `'{"connected":true}'`, or any JSON a question without options takes.
    #[arg(long)]
    pub value: String,
    /// Idempotency key (default: a fresh one for this invocation, printed when the
    /// outcome is unknown, so a retry with it answers once).
    #[arg(long)]
    pub key: Option<String>,
}

/// `holdpoint approve`.
#[derive(Debug, Clone, Args)]
pub struct ApproveArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The interaction ids (approvals' effect ids). Several are answered together in
    /// one `POST /v1/answers`, each on its own, and each one's outcome is printed.
    #[arg(required = true, num_args = 1..=holdpoint_ingress::wire::MAX_BATCH)]
    pub ids: Vec<String>,
    /// Deny instead of approve.
    #[arg(long)]
    pub deny: bool,
    /// Why.
    #[arg(long)]
    pub reason: Option<String>,
    /// Idempotency key (default: a fresh one for this invocation, printed when the
    /// outcome is unknown, so a retry with it answers once). With several ids, the
    /// n-th id's key is `<key>-<n>` (from 1).
    #[arg(long)]
    pub key: Option<String>,
    /// Remember this decision as a rule for `session`, `agent` or `organisation`:
    /// later holds of the same server and tool there are decided at once.
    #[arg(long, value_parser = ["session", "agent", "organisation"])]
    pub remember: Option<String>,
    /// With --remember: the rule expires after this many seconds.
    #[arg(long, requires = "remember")]
    pub expires_in: Option<u64>,
    /// With --remember: the rule matches only these exact arguments (their digest).
    #[arg(long, requires = "remember")]
    pub exact_arguments: bool,
    /// Edit, then approve: release the call with these arguments (a JSON object)
    /// instead of the held ones. Sent with the digest of the arguments shown; the
    /// hold must be `editable` (else NRY-0028). Not with --deny or --remember, nor
    /// with several ids.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["deny", "remember"])]
    pub edit: Option<String>,
}

/// `holdpoint rules` (list) and `holdpoint rules revoke <id>`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RulesArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Most rules to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Start at this page: the `nextCursor` of the page before (the "… more"
    /// line gives the whole command).
    #[arg(long)]
    pub cursor: Option<String>,
    /// `revoke <id>`.
    #[command(subcommand)]
    pub cmd: Option<RulesCmd>,
}

/// What `holdpoint rules` does besides listing.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum RulesCmd {
    /// Revoke a rule: it stops deciding holds from the next one on.
    Revoke(RevokeArgs),
}

/// `holdpoint rules revoke`.
#[derive(Debug, Clone, Args)]
pub struct RevokeArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The rule id (`rul_…`).
    pub id: String,
}

/// `holdpoint audit`.
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Start after this audit sequence (0: the oldest record kept).
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// Most records to print.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
}

/// `holdpoint tail`.
#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Only this task's events.
    #[arg(long)]
    pub task: Option<String>,
    /// Only this event type (e.g. `tool-call-finished`).
    #[arg(long = "type")]
    pub event_type: Option<String>,
    /// Replay from the start of what the events stream keeps.
    #[arg(long)]
    pub from_start: bool,
    /// Stop (exit 0) once this many events are printed; without it, follow until
    /// interrupted.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// Parses one `--answer` value: `0,2` or `2:free text` or `:free text`.
///
/// # Errors
/// A message naming the bad part.
pub fn parse_answer(spec: &str) -> anyhow::Result<Value> {
    let (indices, text) = match spec.split_once(':') {
        Some((i, t)) => (i, Some(t)),
        None => (spec, None),
    };
    let options = indices
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .with_context(|| format!("{s:?} is not an option index"))
        })
        .collect::<anyhow::Result<Vec<u32>>>()?;
    let mut entry = json!({ "options": options });
    if let Some(t) = text {
        entry["text"] = json!(t);
    }
    Ok(entry)
}

/// An HTTP client for the API at `--url`, sending `--token` as a bearer token.
pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) args: ApiArgs,
}

impl Client {
    pub(crate) fn new(args: &ApiArgs) -> anyhow::Result<Self> {
        Ok(Client {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .build()?,
            args: args.clone(),
        })
    }

    pub(crate) fn req(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.args.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    pub(crate) async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        let resp = self
            .req(self.http.delete(format!("{}{path}", self.args.url)))
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.args.url))?;
        json_or_error(resp).await
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let resp = self
            .req(self.http.get(format!("{}{path}", self.args.url)))
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.args.url))?;
        json_or_error(resp).await
    }

    /// [`Client::get`] for a read an answer depends on (the arguments `approve`
    /// binds to): a connection that failed, or a `502`, `503` or `504`, is tried
    /// again with [`Backoff::ANSWER_RETRY`] for at most [`ANSWER_RETRY_FOR`], as the
    /// answer itself would be, so an ingress that restarts does not end the command
    /// before it sent anything.
    ///
    /// # Errors
    /// The API's refusal (such as `404`) at once; the last failure after the time.
    pub(crate) async fn get_retrying(&self, path: &str) -> anyhow::Result<Value> {
        let started = std::time::Instant::now();
        let mut attempt = 1i64;
        loop {
            let sent = self
                .req(self.http.get(format!("{}{path}", self.args.url)))
                .send()
                .await;
            let why = match sent {
                Ok(resp) if RETRY_STATUSES.contains(&resp.status().as_u16()) => {
                    let status = resp.status().as_u16();
                    json_or_error(resp)
                        .await
                        .err()
                        .unwrap_or_else(|| anyhow::anyhow!("HTTP {status}"))
                }
                Ok(resp) => return json_or_error(resp).await,
                Err(e) => anyhow::Error::new(e).context(format!("cannot reach {}", self.args.url)),
            };
            let pause = Backoff::ANSWER_RETRY.delay(attempt);
            if started.elapsed() + pause > ANSWER_RETRY_FOR {
                return Err(why);
            }
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// POSTs an answer with `Idempotency-Key: key` (or a fresh `cli-<uuid>`), and
    /// keeps sending it, with the same key, while nobody can say whether it was
    /// recorded: a `502`, `503` or `504` (the ingress out of time, or a proxy in
    /// front of it) or a connection that failed is retried after its `Retry-After`,
    /// else with [`Backoff::ANSWER_RETRY`], for at most [`ANSWER_RETRY_FOR`]. A
    /// recorded answer then ends with its 2xx (the same key replays it), never with
    /// a failure. Past that time the error names the key to retry with.
    pub(crate) async fn post(
        &self,
        path: &str,
        body: &Value,
        key: Option<&str>,
    ) -> anyhow::Result<u16> {
        self.post_answer(path, body, key).await.map(|(s, _)| s)
    }

    /// [`Client::post`], returning the success's JSON body (`Null` when it has none)
    /// with its status.
    ///
    /// # Errors
    /// As [`Client::post`].
    pub(crate) async fn post_answer(
        &self,
        path: &str,
        body: &Value,
        key: Option<&str>,
    ) -> anyhow::Result<(u16, Value)> {
        let key = key.map_or_else(
            || format!("cli-{}", uuid::Uuid::new_v4().simple()),
            str::to_owned,
        );
        let spinner = waiting(!self.args.json);
        let started = std::time::Instant::now();
        let mut attempt = 1i64;
        let result = loop {
            let sent = self
                .req(self.http.post(format!("{}{path}", self.args.url)))
                .header("Idempotency-Key", &key)
                .json(body)
                .send()
                .await;
            let (why, retry_after) = match sent {
                Ok(resp) if RETRY_STATUSES.contains(&resp.status().as_u16()) => {
                    let status = resp.status().as_u16();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|s| Duration::from_secs(s.max(1)));
                    let error = json_or_error(resp).await.err();
                    (
                        error.unwrap_or_else(|| anyhow::anyhow!("HTTP {status}")),
                        retry_after,
                    )
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    break if status >= 400 {
                        json_or_error(resp).await.map(|_| (status, Value::Null))
                    } else {
                        Ok((status, resp.json().await.unwrap_or(Value::Null)))
                    };
                }
                Err(e) => (
                    anyhow::Error::new(e).context(format!("cannot reach {}", self.args.url)),
                    None,
                ),
            };
            let pause = retry_after.unwrap_or_else(|| Backoff::ANSWER_RETRY.delay(attempt));
            if started.elapsed() + pause > ANSWER_RETRY_FOR {
                break Err(why.context(format!(
                    "not confirmed after {} s of trying; it may still be recorded: retry \
                     with --key {} (the same key answers once)",
                    ANSWER_RETRY_FOR.as_secs(),
                    terminal::line(&key)
                )));
            }
            if let Some(s) = &spinner {
                s.set_message(format!(
                    "sending… not confirmed yet ({}); trying again in {:.1} s with the same key",
                    terminal::line(&format!("{why:#}")),
                    pause.as_secs_f64()
                ));
            }
            tokio::time::sleep(pause).await;
            attempt += 1;
        };
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        result
    }
}

/// Statuses after which an answer is sent again with the same key: the ingress had
/// no outcome in time (`503 NRY-0050`), or a gateway in front of it gave up waiting
/// (`502`, `504`) while the answer may still be recorded.
const RETRY_STATUSES: [u16; 3] = [502, 503, 504];

/// How long `holdpoint approve`, `answer` and `respond` keep sending an answer that
/// is not confirmed yet.
pub(crate) const ANSWER_RETRY_FOR: Duration = Duration::from_secs(60);

fn waiting(enabled: bool) -> Option<indicatif::ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message("waiting for Holdpoint's outcome…");
    pb.enable_steady_tick(Duration::from_millis(80));
    Some(pb)
}

/// The JSON body of a successful response; for a refusal, an error that reads
/// `<status> <code> <title>: <message>` (`409 NRY-0009 …`), each part made safe
/// for a terminal, and for a 401 how to pass a token.
///
/// # Errors
/// When the status is not a success.
pub(crate) async fn json_or_error(resp: reqwest::Response) -> anyhow::Result<Value> {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    let code = body["code"].as_str().unwrap_or("?");
    let title = body["title"].as_str().unwrap_or("");
    let msg = body["message"].as_str().unwrap_or("");
    // The one refusal a person fixes on this side: say how.
    let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
        " (pass --token, or set HOLDPOINT_TOKEN; `holdpoint dev-token` makes one for development)"
    } else {
        ""
    };
    bail!(
        "{} {} {}: {}{hint}",
        status.as_u16(),
        terminal::line(code),
        terminal::line(title),
        terminal::line(msg)
    )
}

/// `text` in `style` when stdout is a terminal, plain otherwise.
pub(crate) fn paint(style: Style, text: &str) -> String {
    if std::io::stdout().is_terminal() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// What stays as it is in a path segment: letters, digits, `-` and `_`. Every
/// other byte is percent-encoded, `.` included, so that an id such as `..` can never
/// become a dot segment that a URL parser would resolve.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');

/// `s` as one percent-encoded path segment (`a.b/c d` → `a%2Eb%2Fc%20d`).
pub(crate) fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_specs() {
        assert_eq!(parse_answer("0").expect("ok"), json!({"options": [0]}));
        assert_eq!(parse_answer("0,2").expect("ok"), json!({"options": [0, 2]}));
        assert_eq!(
            parse_answer("2:Keep both: nightly").expect("ok"),
            json!({"options": [2], "text": "Keep both: nightly"})
        );
        assert_eq!(
            parse_answer(":just text").expect("ok"),
            json!({"options": [], "text": "just text"})
        );
        assert!(parse_answer("x").is_err());
        assert!(parse_answer("-1").is_err());
    }

    #[test]
    fn ids_are_encoded_in_paths() {
        assert_eq!(segment("a.b/c d"), "a%2Eb%2Fc%20d");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("int_01J-x"), "int_01J-x");
        assert_eq!(segment("é?#"), "%C3%A9%3F%23");
    }
}

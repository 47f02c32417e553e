//! Operator and person verbs over the HTTP API, authenticated with a bearer token:
//! `holdpoint pending`, `show <id>`, `answer <questionId> --answer …`,
//! `approve <id> [--deny --reason …]`, and `tail [--task …] [--type …]`.
//!
//! Output is readable (and coloured on a terminal) by default, JSON with `--json`.
//! While a command waits for Holdpoint's outcome a progress line turns on a terminal.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::terminal;

/// Where the API is and who is calling.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// The API's base URL.
    #[arg(long, env = "HOLDPOINT_URL", default_value = "http://127.0.0.1:8080")]
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
    /// Most interactions to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
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

/// `holdpoint approve`.
#[derive(Debug, Clone, Args)]
pub struct ApproveArgs {
    /// API and identity.
    #[command(flatten)]
    pub api: ApiArgs,
    /// The interaction id (an approval's effect id).
    pub id: String,
    /// Deny instead of approve.
    #[arg(long)]
    pub deny: bool,
    /// The person's reason, sent with the decision (free text, at most 8,000
    /// characters).
    #[arg(long)]
    pub reason: Option<String>,
    /// Idempotency key (default: a fresh one for this invocation, printed when the
    /// outcome is unknown, so a retry with it answers once).
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

struct Client {
    http: reqwest::Client,
    args: ApiArgs,
}

impl Client {
    fn new(args: &ApiArgs) -> anyhow::Result<Self> {
        Ok(Client {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .build()?,
            args: args.clone(),
        })
    }

    fn req(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.args.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        let resp = self
            .req(self.http.delete(format!("{}{path}", self.args.url)))
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.args.url))?;
        json_or_error(resp).await
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let resp = self
            .req(self.http.get(format!("{}{path}", self.args.url)))
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.args.url))?;
        json_or_error(resp).await
    }

    /// POSTs an answer with `Idempotency-Key: key` (or a fresh `cli-<uuid>`): a `503`
    /// names the key to retry with.
    async fn post(&self, path: &str, body: &Value, key: Option<&str>) -> anyhow::Result<u16> {
        let key = key.map_or_else(
            || format!("cli-{}", uuid::Uuid::new_v4().simple()),
            str::to_owned,
        );
        let r = self
            .req(self.http.post(format!("{}{path}", self.args.url)))
            .header("Idempotency-Key", &key)
            .json(body);
        let spinner = waiting(!self.args.json);
        let resp = r
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.args.url));
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        let resp = resp?;
        let status = resp.status().as_u16();
        if status >= 400 {
            json_or_error(resp).await.map_err(|e| match status {
                503 => anyhow::anyhow!("{e} (retry with --key {})", terminal::line(&key)),
                _ => e,
            })?;
        }
        Ok(status)
    }
}

fn waiting(enabled: bool) -> Option<indicatif::ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message("waiting for Holdpoint's outcome…");
    pb.enable_steady_tick(Duration::from_millis(80));
    Some(pb)
}

pub(crate) async fn json_or_error(resp: reqwest::Response) -> anyhow::Result<Value> {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    let code = body["code"].as_str().unwrap_or("?");
    let title = body["title"].as_str().unwrap_or("");
    let msg = body["message"].as_str().unwrap_or("");
    bail!(
        "{} {} {}: {}",
        status.as_u16(),
        terminal::line(code),
        terminal::line(title),
        terminal::line(msg)
    )
}

fn paint(style: Style, text: &str) -> String {
    if std::io::stdout().is_terminal() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

fn kind_style(kind: &str) -> Style {
    match kind {
        "approval" => AnsiColor::Yellow.on_default().bold(),
        "question" => AnsiColor::Cyan.on_default().bold(),
        _ => AnsiColor::Magenta.on_default().bold(),
    }
}

/// `v[key]` as a safe line of text (`?` when it is not a string).
fn text(v: &Value, key: &str) -> String {
    terminal::line(v[key].as_str().unwrap_or("?")).into_owned()
}

fn print_view(v: &Value) {
    let kind = text(v, "kind");
    let left = v["expiresAt"]
        .as_str()
        .and_then(|s| holdpoint_domain::timestamp::parse(s).ok())
        .map(|at| format!(" {}", time_left(at, time::OffsetDateTime::now_utc())))
        .unwrap_or_default();
    println!(
        "{} {} {}{} {}",
        paint(kind_style(&kind), &format!("{kind:<10}")),
        paint(Style::new().bold(), &text(v, "interactionId")),
        paint(AnsiColor::BrightBlack.on_default(), &text(v, "state")),
        paint(AnsiColor::Yellow.on_default(), &left),
        terminal::line(v["prompt"].as_str().unwrap_or(""))
    );
}

/// `expires in 4m 10s` (or `expired`) for a deadline `at` seen at `now`.
pub fn time_left(at: time::OffsetDateTime, now: time::OffsetDateTime) -> String {
    let secs = (at - now).whole_seconds();
    if secs <= 0 {
        return "expired".into();
    }
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let span = match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    };
    format!("expires in {span}")
}

/// `holdpoint pending`.
///
/// # Errors
/// When the API is unreachable or refuses.
pub async fn pending(args: PendingArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let page = c
        .get(&format!(
            "/v1/interactions?state=pending&limit={}",
            args.limit.clamp(1, 500)
        ))
        .await?;
    if args.api.json {
        println!("{}", terminal::json_pretty(&page));
        return Ok(());
    }
    let items = page["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        println!("nothing pending");
    }
    for v in &items {
        print_view(v);
    }
    if page["nextCursor"].is_string() {
        println!("… more: raise --limit or use the API's cursor");
    }
    Ok(())
}

/// `holdpoint show`.
///
/// # Errors
/// When the API is unreachable or refuses.
pub async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let v = c
        .get(&format!("/v1/interactions/{}", urlencode(&args.id)))
        .await?;
    if args.api.json {
        println!("{}", terminal::json_pretty(&v));
        return Ok(());
    }
    let j = terminal::json;
    print_view(&v);
    println!(
        "  task {}  context {}  session {} ({})",
        j(&v["taskId"]),
        j(&v["contextId"]),
        j(&v["sessionId"]),
        j(&v["mode"])
    );
    if let Some(qs) = v["detail"]["questions"].as_array() {
        for (i, q) in qs.iter().enumerate() {
            println!(
                "  question {i}: {}",
                terminal::line(q["text"].as_str().unwrap_or(""))
            );
            for (n, o) in q["options"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                println!("    [{n}] {}", terminal::line(o.as_str().unwrap_or("")));
            }
        }
    }
    if !v["call"].is_null() {
        println!(
            "  call {} / {} {}",
            j(&v["call"]["server"]),
            j(&v["call"]["tool"]),
            j(&v["call"]["arguments"])
        );
        println!("  argumentsDigest {}", j(&v["call"]["argumentsDigest"]));
    }
    if !v["resolution"].is_null() {
        println!(
            "  answered by {} at {}",
            j(&v["resolution"]["by"]),
            j(&v["resolution"]["at"])
        );
    }
    Ok(())
}

/// `holdpoint answer`.
///
/// # Errors
/// When an `--answer` does not parse, or the API refuses.
pub async fn answer(args: AnswerArgs) -> anyhow::Result<()> {
    let answers = args
        .answers
        .iter()
        .map(|a| parse_answer(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let c = Client::new(&args.api)?;
    let body = json!({ "answers": answers });
    let status = c
        .post(
            &format!("/v1/questions/{}/answer", urlencode(&args.question_id)),
            &body,
            args.key.as_deref(),
        )
        .await?;
    report(&args.api, status, "answered");
    Ok(())
}

/// `holdpoint approve`.
///
/// # Errors
/// When the API refuses.
pub async fn approve(args: ApproveArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    // Bind the decision to the arguments the operator is shown.
    let view = c
        .get(&format!("/v1/interactions/{}", urlencode(&args.id)))
        .await?;
    let mut body = json!({ "approved": !args.deny });
    if let Some(r) = &args.reason {
        body["reason"] = json!(r);
    }
    if let Some(scope) = &args.remember {
        let mut remember = json!({ "scope": scope });
        if let Some(s) = args.expires_in {
            remember["expiresIn"] = json!(s);
        }
        if args.exact_arguments {
            remember["argumentsDigest"] = json!(true);
        }
        body["remember"] = remember;
    }
    if let Some(d) = view["call"]["argumentsDigest"].as_str() {
        body["argumentsDigest"] = json!(d);
        if !args.api.json {
            println!(
                "{} / {} {}",
                terminal::json(&view["call"]["server"]),
                terminal::json(&view["call"]["tool"]),
                terminal::json(&view["call"]["arguments"])
            );
        }
    }
    let status = c
        .post(
            &format!("/v1/interactions/{}/approve", urlencode(&args.id)),
            &body,
            args.key.as_deref(),
        )
        .await?;
    report(
        &args.api,
        status,
        if args.deny { "denied" } else { "approved" },
    );
    Ok(())
}

fn report(api: &ApiArgs, status: u16, what: &str) {
    if api.json {
        println!("{}", json!({ "status": status }));
    } else {
        println!(
            "{} ({status})",
            paint(AnsiColor::Green.on_default().bold(), what)
        );
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `holdpoint tail`: follows `GET /v1/events` (SSE) and prints each event.
///
/// # Errors
/// When the API is unreachable or refuses.
pub async fn tail(args: TailArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let mut query = Vec::new();
    if let Some(t) = &args.task {
        query.push(format!("task={}", urlencode(t)));
    }
    if let Some(t) = &args.event_type {
        query.push(format!("type={}", urlencode(t)));
    }
    if args.from_start {
        query.push("after=0".to_owned());
    }
    let url = format!("{}/v1/events?{}", args.api.url, query.join("&"));
    let resp = c
        .req(c.http.get(&url).header("Accept", "text/event-stream"))
        .send()
        .await
        .with_context(|| format!("cannot reach {}", args.api.url))?;
    if !resp.status().is_success() {
        json_or_error(resp).await?;
        return Ok(());
    }
    let mut resp = resp;
    let mut buf = String::new();
    let mut data = String::new();
    let mut out = std::io::stdout();
    while let Some(chunk) = resp.chunk().await? {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(nl) = buf.find('\n') {
            let line = buf[..nl].trim_end_matches('\r').to_owned();
            buf.drain(..=nl);
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                let event: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                data.clear();
                if args.api.json {
                    writeln!(out, "{}", terminal::json(&event))?;
                } else {
                    let name = terminal::line(
                        event["type"]
                            .as_str()
                            .unwrap_or("?")
                            .trim_start_matches("dev.holdpoint."),
                    )
                    .into_owned();
                    let style = match name.as_str() {
                        "tool-call-finished" => AnsiColor::Green.on_default().bold(),
                        "task-status" => AnsiColor::Blue.on_default(),
                        "dead-letter" => AnsiColor::Red.on_default().bold(),
                        _ => Style::new().bold(),
                    };
                    writeln!(
                        out,
                        "{} {:<22} {} {}",
                        paint(
                            AnsiColor::BrightBlack.on_default(),
                            &terminal::line(event["time"].as_str().unwrap_or(""))
                        ),
                        paint(style, &name),
                        terminal::line(event["subject"].as_str().unwrap_or("")),
                        terminal::json(&event["data"])
                    )?;
                }
                out.flush()?;
            }
        }
    }
    Ok(())
}

/// A JSON value for a terminal: a string as its escaped text, anything else as JSON.
fn txt(v: &Value) -> String {
    match v.as_str() {
        Some(s) => terminal::line(s).into_owned(),
        None => terminal::json(v),
    }
}

fn print_rule(r: &Value) {
    let j = txt;
    let state = if r["revoked"].is_object() {
        format!(
            "revoked by {} at {}",
            j(&r["revoked"]["by"]),
            j(&r["revoked"]["at"])
        )
    } else if r["expiresAt"].is_string() {
        format!("expires {}", j(&r["expiresAt"]))
    } else {
        "live".to_owned()
    };
    let scope = match r["scope"].as_str() {
        Some("session") => format!("session {}", j(&r["session"])),
        Some("agent") => format!("agent {}", j(&r["agent"])),
        _ => "organisation".to_owned(),
    };
    println!(
        "{}  {} {} / {}  {}{}  by {} at {}  ({})",
        j(&r["id"]),
        j(&r["effect"]),
        j(&r["server"]),
        j(&r["tool"]),
        scope,
        if r["argumentsDigest"].is_string() {
            format!(", arguments {}", j(&r["argumentsDigest"]))
        } else {
            String::new()
        },
        j(&r["createdBy"]),
        j(&r["createdAt"]),
        state
    );
}

/// `holdpoint rules` and `holdpoint rules revoke <id>`.
///
/// # Errors
/// When the API is unreachable or refuses (`404 NRY-0027` for an unknown rule).
pub async fn rules(args: RulesArgs) -> anyhow::Result<()> {
    if let Some(RulesCmd::Revoke(r)) = &args.cmd {
        let c = Client::new(&r.api)?;
        let rule = c.delete(&format!("/v1/rules/{}", urlencode(&r.id))).await?;
        if r.api.json {
            println!("{}", terminal::json_pretty(&rule));
        } else {
            print_rule(&rule);
        }
        return Ok(());
    }
    let c = Client::new(&args.api)?;
    let page = c
        .get(&format!("/v1/rules?limit={}", args.limit.clamp(1, 500)))
        .await?;
    if args.api.json {
        println!("{}", terminal::json_pretty(&page));
        return Ok(());
    }
    let items = page["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        println!("no rules");
    }
    for r in &items {
        print_rule(r);
    }
    if page["nextCursor"].is_string() {
        println!("… more: raise --limit or use the API's cursor");
    }
    Ok(())
}

/// `holdpoint audit`: the decision audit, oldest first, from `--after`.
///
/// # Errors
/// When the API is unreachable or refuses.
pub async fn audit(args: AuditArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let mut after = args.after;
    let mut left = args.limit;
    let mut all = Vec::new();
    while left > 0 {
        let n = left.min(500);
        let page = c.get(&format!("/v1/audit?after={after}&limit={n}")).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        after = page["nextAfter"].as_u64().unwrap_or(after);
        left = left.saturating_sub(items.len());
        let short = items.len() < n;
        all.extend(items);
        if short {
            break;
        }
    }
    if args.api.json {
        println!(
            "{}",
            terminal::json_pretty(&json!({"items": all, "nextAfter": after}))
        );
        return Ok(());
    }
    if all.is_empty() {
        println!("no audit records");
    }
    let j = txt;
    for e in &all {
        let r = &e["record"];
        let d = &r["data"];
        let line = match r["type"].as_str() {
            Some("dev.holdpoint.approval-decided") => format!(
                "{} {} / {} ({})  {} by {}{}{}",
                j(&d["effectId"]),
                j(&d["server"]),
                j(&d["tool"]),
                j(&d["argumentsDigest"]),
                j(&d["outcome"]),
                j(&d["decidedBy"]),
                if d["approvedBy"].is_string() {
                    format!(" {}", j(&d["approvedBy"]))
                } else {
                    String::new()
                },
                if d["reason"].is_string() {
                    format!(": {}", j(&d["reason"]))
                } else {
                    String::new()
                }
            ),
            Some("dev.holdpoint.rule-written") => format!(
                "rule {} written by {}: {} {} / {} ({})",
                j(&d["rule"]["id"]),
                j(&d["rule"]["createdBy"]),
                j(&d["rule"]["effect"]),
                j(&d["rule"]["server"]),
                j(&d["rule"]["tool"]),
                j(&d["rule"]["scope"])
            ),
            Some("dev.holdpoint.rule-revoked") => format!(
                "rule {} revoked by {}",
                j(&d["rule"]["id"]),
                j(&d["rule"]["revoked"]["by"])
            ),
            _ => j(&r["type"]),
        };
        println!("{:>6}  {}  {}", j(&e["sequence"]), j(&r["time"]), line);
    }
    Ok(())
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
    fn time_left_reads_as_a_span() {
        let now = time::macros::datetime!(2026-05-01 12:00:00 UTC);
        let after = |secs: i64| time_left(now + time::Duration::seconds(secs), now);
        assert_eq!(after(-3), "expired");
        assert_eq!(after(0), "expired");
        assert_eq!(after(42), "expires in 42s");
        assert_eq!(after(250), "expires in 4m 10s");
        assert_eq!(after(2 * 3600 + 120), "expires in 2h 2m");
        assert_eq!(after(3 * 86_400 + 3600), "expires in 3d 1h");
    }

    #[test]
    fn ids_are_encoded_in_paths() {
        assert_eq!(urlencode("a.b/c d"), "a.b%2Fc%20d");
    }
}

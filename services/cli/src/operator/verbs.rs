//! `holdpoint pending | show | rules | audit`: the reading verbs, and how each
//! prints what the API returns (text through [`crate::terminal`], or `--json`).
//! The answering verbs are in [`super::answers`].

use anstyle::{AnsiColor, Style};
use serde_json::{Value, json};

use super::{
    ApiArgs, AuditArgs, Client, PendingArgs, RulesArgs, RulesCmd, ShowArgs, paint, segment,
};
use crate::terminal;

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
    // A deadline matters while the interaction waits; a settled one says who.
    let left = v["expiresAt"]
        .as_str()
        .filter(|_| v["state"] == "pending")
        .and_then(|s| holdpoint_domain::timestamp::parse(s).ok())
        .map(|at| format!(" {}", time_left(at, time::OffsetDateTime::now_utc())))
        .unwrap_or_default();
    let by = v["resolution"]["by"]
        .as_str()
        .map(|who| format!(" by {}", terminal::line(who)))
        .unwrap_or_default();
    println!(
        "{} {} {}{}{}{}{}{} {}",
        paint(kind_style(&kind), &format!("{kind:<10}")),
        paint(Style::new().bold(), &text(v, "interactionId")),
        paint(AnsiColor::BrightBlack.on_default(), &text(v, "state")),
        paint(AnsiColor::BrightBlack.on_default(), &by),
        paint(AnsiColor::Yellow.on_default(), &left),
        paint(AnsiColor::Cyan.on_default(), &for_whom(v)),
        paint(AnsiColor::Cyan.on_default(), &approvals(v)),
        paint(AnsiColor::Magenta.on_default(), &escalated(v)),
        terminal::line(v["prompt"].as_str().unwrap_or(""))
    );
}

/// ` for you` / ` for others` when the interaction names assignees (README
/// "Assignees"); nothing when anyone of the organisation may answer.
fn for_whom(v: &Value) -> String {
    match v["forYou"].as_bool() {
        Some(true) => " for you".into(),
        Some(false) => " for others".into(),
        None => String::new(),
    }
}

/// ` approvals 1/2 (ana)` for a hold that needs several people, with `, you
/// approved` when the caller did (README "Two-person approvals").
fn approvals(v: &Value) -> String {
    let a = &v["approvals"];
    let Some(required) = a["required"].as_u64() else {
        return String::new();
    };
    let given = a["given"].as_array().map(Vec::as_slice).unwrap_or_default();
    let names: Vec<String> = given
        .iter()
        .filter_map(|g| g["by"].as_str())
        .map(|by| terminal::line(by).into_owned())
        .collect();
    let who = if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    };
    let you = if a["byYou"] == true {
        ", you approved"
    } else {
        ""
    };
    format!(" approvals {}/{required}{who}{you}", given.len())
}

/// ` escalated` once the deadline's warning stage applied the interaction's
/// escalation (README "Escalation"); nothing before, or without one.
fn escalated(v: &Value) -> String {
    if v["escalatedAt"].is_string() {
        " escalated".into()
    } else {
        String::new()
    }
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
    let limit = args.limit.clamp(1, 500);
    let state = args.state.as_str();
    let page = c
        .get(&format!(
            "/v1/interactions?state={state}&limit={limit}{}",
            cursor_query(args.cursor.as_deref())
        ))
        .await?;
    let (verb, empty) = match state {
        "pending" => ("pending".to_owned(), "nothing pending".to_owned()),
        other => (
            format!("pending --state {other}"),
            format!("nothing {other}"),
        ),
    };
    print_page(&page, &args.api, &verb, limit, &empty, print_view);
    Ok(())
}

/// `&cursor=<cursor>` (percent-encoded), or nothing for the first page.
fn cursor_query(cursor: Option<&str>) -> String {
    cursor.map_or_else(String::new, |c| format!("&cursor={}", segment(c)))
}

/// Prints one page of a listing (`{"items": [...], "nextCursor"?: "..."}`): the
/// page as JSON with `--json`; else `empty` when it has no items, each item with
/// `item`, and, when there is a next page, the exact command that prints it
/// (`holdpoint <verb> [--url <url>] --limit <limit> --cursor <nextCursor>`; the
/// token is never echoed).
fn print_page(
    page: &Value,
    api: &ApiArgs,
    verb: &str,
    limit: usize,
    empty: &str,
    item: impl Fn(&Value),
) {
    if api.json {
        println!("{}", terminal::json_pretty(page));
        return;
    }
    let items = page["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if items.is_empty() {
        println!("{empty}");
    }
    for v in items {
        item(v);
    }
    if let Some(next) = page["nextCursor"].as_str() {
        println!("… more: {}", next_command(verb, api, limit, next));
    }
}

/// The command that shows the page after this one: the same verb, URL and limit,
/// and `--cursor next`. The URL is left out when it is the default one.
fn next_command(verb: &str, api: &ApiArgs, limit: usize, next: &str) -> String {
    let url = if api.url == super::DEFAULT_URL {
        String::new()
    } else {
        format!(" --url {}", shell_word(&api.url))
    };
    format!(
        "holdpoint {verb}{url} --limit {limit} --cursor {}",
        shell_word(next)
    )
}

/// `s` as one shell word, safe on a terminal: as is when it is made of letters,
/// digits and `-_.,:/=@%+`, else in single quotes (a `'` written `'\''`).
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | ',' | ':' | '/' | '=' | '@' | '%' | '+')
        });
    if plain {
        s.to_owned()
    } else {
        terminal::line(&format!("'{}'", s.replace('\'', "'\\''"))).into_owned()
    }
}

/// `holdpoint show`.
///
/// # Errors
/// When the API is unreachable or refuses.
pub async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let v = c
        .get(&format!("/v1/interactions/{}", segment(&args.id)))
        .await?;
    if args.api.json {
        println!("{}", terminal::json_pretty(&v));
        return Ok(());
    }
    // Strings as text (escaped for the terminal), anything else as JSON.
    let j = txt;
    print_view(&v);
    println!(
        "  task {}  context {}  session {} ({})",
        j(&v["taskId"]),
        j(&v["contextId"]),
        j(&v["sessionId"]),
        j(&v["mode"])
    );
    if let Some(qs) = v["detail"]["questions"].as_array() {
        // Numbered from 1, as the prompt numbers them; options by the index
        // `--answer` takes.
        for (i, q) in qs.iter().enumerate() {
            println!(
                "  question {}: {}  ({})",
                i + 1,
                terminal::line(q["text"].as_str().unwrap_or("")),
                takes(q)
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
    let questions = v["detail"]["questions"].as_array();
    if let Some(schema) = questions
        .and_then(|qs| qs.iter().find(|q| q["schema"].is_object()))
        .map(|q| &q["schema"])
    {
        println!("  form {}", terminal::json(schema));
        println!(
            "  answer: holdpoint respond {} --value '{{…the form's fields as JSON…}}'",
            terminal::line(&args.id)
        );
    } else if questions.is_some_and(|q| !q.is_empty()) {
        println!(
            "  answer: one --answer per question, in order: the option numbers in [ ], \
             comma-separated, then :text where text is allowed (--answer 0 --answer \"2:text\")"
        );
    }
    if !v["call"].is_null() {
        println!(
            "  call {} / {} {}",
            j(&v["call"]["server"]),
            j(&v["call"]["tool"]),
            terminal::json(&v["call"]["arguments"])
        );
        println!("  argumentsDigest {}", j(&v["call"]["argumentsDigest"]));
        if v["call"]["editable"] == json!(true) {
            println!("  editable: approve with --edit '{{…}}' to release other arguments");
        }
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

/// What a question takes, from its `options`, `multiple` and `allowText`: `one
/// option`, `one or more options`, `text`, each with `, or text` where text is
/// allowed beside the options.
pub fn takes(q: &serde_json::Value) -> &'static str {
    if q["schema"].is_object() {
        return "a form";
    }
    let options = q["options"].as_array().is_some_and(|o| !o.is_empty());
    let multiple = q["multiple"].as_bool().unwrap_or(false);
    let text = q["allowText"].as_bool().unwrap_or(false);
    match (options, multiple, text) {
        (false, _, _) => "text",
        (true, false, false) => "one option",
        (true, false, true) => "one option, or text",
        (true, true, false) => "one or more options",
        (true, true, true) => "one or more options, or text",
    }
}

/// A JSON value for a terminal: a string as its escaped text, anything else as JSON.
pub(super) fn txt(v: &Value) -> String {
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
        let rule = c.delete(&format!("/v1/rules/{}", segment(&r.id))).await?;
        if r.api.json {
            println!("{}", terminal::json_pretty(&rule));
        } else {
            print_rule(&rule);
        }
        return Ok(());
    }
    let c = Client::new(&args.api)?;
    let limit = args.limit.clamp(1, 500);
    let page = c
        .get(&format!(
            "/v1/rules?limit={limit}{}",
            cursor_query(args.cursor.as_deref())
        ))
        .await?;
    print_page(&page, &args.api, "rules", limit, "no rules", print_rule);
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
            Some("dev.holdpoint.escalated") => format!(
                "{} {} escalated to {}",
                j(&d["kind"]),
                j(&d["interactionId"]),
                names(&d["escalation"])
            ),
            _ => j(&r["type"]),
        };
        println!("{:>6}  {}  {}", j(&e["sequence"]), j(&r["time"]), line);
    }
    Ok(())
}

/// `ana, group oncall` for an assignees object (`?` when it names nobody).
fn names(a: &Value) -> String {
    let strings = |k: &str| -> Vec<String> {
        a[k].as_array()
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(|n| terminal::line(n).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let all: Vec<String> = strings("people")
        .into_iter()
        .chain(strings("groups").into_iter().map(|g| format!("group {g}")))
        .collect();
    if all.is_empty() {
        "?".into()
    } else {
        all.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_says_whom_an_interaction_is_for_and_that_it_escalated() {
        let w = |v: serde_json::Value| format!("{}{}", for_whom(&v), escalated(&v));
        assert_eq!(w(serde_json::json!({})), "");
        assert_eq!(w(serde_json::json!({"forYou": true})), " for you");
        assert_eq!(w(serde_json::json!({"forYou": false})), " for others");
        assert_eq!(
            w(serde_json::json!({"forYou": true, "escalatedAt": "2026-05-01T12:00:00.000Z"})),
            " for you escalated"
        );
        assert_eq!(
            names(&serde_json::json!({"people": ["ana"], "groups": ["oncall"]})),
            "ana, group oncall"
        );
        assert_eq!(names(&serde_json::json!({})), "?");
    }

    #[test]
    fn a_question_says_what_it_takes() {
        let q = |v: serde_json::Value| takes(&v);
        assert_eq!(q(serde_json::json!({"options": ["a", "b"]})), "one option");
        assert_eq!(
            q(serde_json::json!({"options": ["a"], "multiple": true, "allowText": true})),
            "one or more options, or text"
        );
        assert_eq!(
            q(serde_json::json!({"options": ["a"], "allowText": true})),
            "one option, or text"
        );
        assert_eq!(q(serde_json::json!({"text": "Why?"})), "text");
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

    fn api(url: &str) -> ApiArgs {
        ApiArgs {
            url: url.into(),
            token: Some("secret".into()),
            json: false,
        }
    }

    #[test]
    fn the_more_line_is_the_next_command() {
        let default = api(super::super::DEFAULT_URL);
        assert_eq!(
            next_command("rules", &default, 50, "17"),
            "holdpoint rules --limit 50 --cursor 17"
        );
        assert_eq!(
            next_command("pending", &api("http://h:9/x y"), 2, "a'b"),
            "holdpoint pending --url 'http://h:9/x y' --limit 2 --cursor 'a'\\''b'"
        );
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a\nb"), "'a | b'");
    }
}

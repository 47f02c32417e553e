//! `holdpoint answer | respond | approve`: the answering verbs. Each sends its
//! answer with an idempotency key and retries it as [`Client::post`] says; `approve`
//! first reads what it binds the decision to (the arguments' digest it prints).

use anstyle::AnsiColor;
use serde_json::{Value, json};

use super::verbs::txt;
use super::{AnswerArgs, ApiArgs, ApproveArgs, Client, RespondArgs, paint, parse_answer, segment};
use crate::terminal;

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
            &format!("/v1/questions/{}/answer", segment(&args.question_id)),
            &body,
            args.key.as_deref(),
        )
        .await?;
    report(&args.api, status, "answered");
    Ok(())
}

/// `holdpoint respond`: `POST /v1/interactions/{id}/respond` with `{"value": …}`.
///
/// # Errors
/// When `--value` is not JSON (nothing is sent), or the API refuses (a value that
/// does not fit a form: `NRY-0036` with the pointer of the first failing field).
pub async fn respond(args: RespondArgs) -> anyhow::Result<()> {
    let value: serde_json::Value = serde_json::from_str(&args.value)
        .map_err(|e| anyhow::anyhow!("--value is not valid JSON: {e}"))?;
    let c = Client::new(&args.api)?;
    let status = c
        .post(
            &format!("/v1/interactions/{}/respond", segment(&args.id)),
            &json!({ "value": value }),
            args.key.as_deref(),
        )
        .await?;
    report(&args.api, status, "answered");
    Ok(())
}

/// `holdpoint approve`: one id, or several answered together.
///
/// # Errors
/// When the API refuses (with several ids: when any of them was not answered).
pub async fn approve(args: ApproveArgs) -> anyhow::Result<()> {
    // An edit that cannot be sent is refused here, before anything is sent.
    let edit = match &args.edit {
        None => None,
        Some(raw) => {
            let v: serde_json::Value = serde_json::from_str(raw)
                .map_err(|e| anyhow::anyhow!("--edit is not valid JSON: {e}"))?;
            anyhow::ensure!(
                v.is_object(),
                "--edit must be a JSON object (a tool's arguments), not {}",
                terminal::json(&v)
            );
            Some(v)
        }
    };
    let c = Client::new(&args.api)?;
    let [id] = args.ids.as_slice() else {
        anyhow::ensure!(
            edit.is_none(),
            "--edit applies to one held call; give one id"
        );
        return approve_many(&c, &args).await;
    };
    let (mut body, view) = decision(&c, &args, id).await?;
    if body["argumentsDigest"].is_string() && !args.api.json {
        println!(
            "{} / {} {}",
            txt(&view["call"]["server"]),
            txt(&view["call"]["tool"]),
            terminal::json(&view["call"]["arguments"])
        );
    }
    if let Some(e) = edit {
        anyhow::ensure!(
            body["argumentsDigest"].is_string(),
            "--edit applies to a held tool call; {} is not one",
            terminal::line(id)
        );
        if !args.api.json {
            println!("  edited to {}", terminal::json(&e));
        }
        body["editedArguments"] = e;
    }
    let (status, reply) = c
        .post_answer(
            &format!("/v1/interactions/{}/approve", segment(id)),
            &body,
            args.key.as_deref(),
        )
        .await?;
    if status == 202 {
        counted(&args.api, &reply);
        return Ok(());
    }
    report(
        &args.api,
        status,
        if args.deny { "denied" } else { "approved" },
    );
    Ok(())
}

/// Reports a `202`: the approval counted toward a hold that needs several people
/// (README "Two-person approvals"), the call still waiting.
fn counted(api: &ApiArgs, reply: &Value) {
    if api.json {
        println!(
            "{}",
            json!({ "status": 202, "approvals": reply["approvals"] })
        );
        return;
    }
    let n = |k: &str| reply["approvals"][k].as_u64().unwrap_or(0);
    println!(
        "{} ({} of {} approvals; the call waits for the rest) (202)",
        paint(AnsiColor::Green.on_default().bold(), "counted"),
        n("given"),
        n("required")
    );
}

/// The `approve` body for `id` as `args` ask, bound to the arguments the operator
/// is shown (their digest, read from the interaction), and the interaction read.
async fn decision(c: &Client, args: &ApproveArgs, id: &str) -> anyhow::Result<(Value, Value)> {
    let view = c
        .get_retrying(&format!("/v1/interactions/{}", segment(id)))
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
    }
    Ok((body, view))
}

/// `holdpoint approve eff_1 eff_2 …`: every id read (for the digest of what is
/// printed), then all answered in one `POST /v1/answers`, each on its own; one line
/// per id with its outcome. Items answered `503` (no outcome in time) are sent
/// again with their keys, for at most [`super::ANSWER_RETRY_FOR`].
async fn approve_many(c: &Client, args: &ApproveArgs) -> anyhow::Result<()> {
    let reads = args.ids.iter().map(|id| decision(c, args, id));
    let mut items = Vec::with_capacity(args.ids.len());
    // Ids that could not be read (unknown, another organisation's, unreachable) are
    // not sent, since their decision would bind to nothing the person was shown;
    // each gets its own line, and the others are answered.
    let mut unread: Vec<(String, String)> = Vec::new();
    for (n, (id, read)) in args
        .ids
        .iter()
        .zip(futures::future::join_all(reads).await)
        .enumerate()
    {
        let (body, view) = match read {
            Ok(r) => r,
            Err(e) => {
                unread.push((id.clone(), format!("{e:#}")));
                continue;
            }
        };
        if !args.api.json && view["call"].is_object() {
            println!(
                "{}  {} / {} {}",
                terminal::line(id),
                txt(&view["call"]["server"]),
                txt(&view["call"]["tool"]),
                terminal::json(&view["call"]["arguments"])
            );
        }
        let key = match &args.key {
            Some(k) => format!("{k}-{}", n + 1),
            None => format!("cli-{}", uuid::Uuid::new_v4().simple()),
        };
        items.push(json!({
            "interactionId": id, "operation": "approve", "body": body, "idempotencyKey": key,
        }));
    }
    let mut results: Vec<Value> = vec![Value::Null; items.len()];
    let mut waiting: Vec<usize> = (0..items.len()).collect();
    let started = std::time::Instant::now();
    let mut attempt = 1i64;
    while !waiting.is_empty() {
        let batch: Vec<&Value> = waiting.iter().filter_map(|i| items.get(*i)).collect();
        let (_, reply) = c
            .post_answer("/v1/answers", &json!({ "items": batch }), None)
            .await?;
        let got = reply["results"].as_array().cloned().unwrap_or_default();
        anyhow::ensure!(
            got.len() == waiting.len(),
            "Holdpoint answered {} results for {} items",
            got.len(),
            waiting.len()
        );
        for (i, r) in waiting.iter().zip(got) {
            if let Some(slot) = results.get_mut(*i) {
                *slot = r;
            }
        }
        waiting.retain(|i| results.get(*i).is_some_and(|r| r["status"] == 503));
        let pause = holdpoint_bus::backoff::Backoff::ANSWER_RETRY.delay(attempt);
        if waiting.is_empty() || started.elapsed() + pause > super::ANSWER_RETRY_FOR {
            break;
        }
        tokio::time::sleep(pause).await;
        attempt += 1;
    }
    let what = if args.deny { "denied" } else { "approved" };
    let mut refused = 0;
    for (item, r) in items.iter().zip(&results) {
        let status = r["status"].as_u64().unwrap_or(0);
        if status != 204 && status != 202 {
            refused += 1;
        }
        if args.api.json {
            continue;
        }
        let id = txt(&item["interactionId"]);
        if status == 202 {
            println!(
                "{id}  {} ({} of {} approvals) ({status})",
                paint(AnsiColor::Green.on_default().bold(), "counted"),
                r["approvals"]["given"].as_u64().unwrap_or(0),
                r["approvals"]["required"].as_u64().unwrap_or(0)
            );
        } else if status == 204 {
            println!(
                "{id}  {} ({status})",
                paint(AnsiColor::Green.on_default().bold(), what)
            );
        } else {
            println!(
                "{id}  {} {}: {} ({status}; key {})",
                paint(AnsiColor::Red.on_default().bold(), &txt(&r["code"])),
                txt(&r["title"]),
                txt(&r["message"]),
                txt(&item["idempotencyKey"])
            );
        }
    }
    for (id, error) in &unread {
        refused += 1;
        if !args.api.json {
            println!(
                "{}  {}: {}",
                terminal::line(id),
                paint(AnsiColor::Red.on_default().bold(), "not sent"),
                terminal::line(error)
            );
        }
    }
    if args.api.json {
        let unread: Vec<Value> = unread
            .iter()
            .map(|(id, error)| json!({ "interactionId": id, "error": error }))
            .collect();
        println!("{}", json!({ "results": results, "notSent": unread }));
    }
    anyhow::ensure!(
        refused == 0,
        "{refused} of {} not {what}",
        results.len() + unread.len()
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

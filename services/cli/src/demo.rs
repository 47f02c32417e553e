//! `holdpoint demo`: the main job, end to end on a real nats-server.
//!
//! 1. Starts a private nats-server (temporary store, free port) unless `--nats-url`,
//!    then a worker and the ingress on free ports.
//! 2. Plays a runtime: opens a blocking session, holds `github / create_pull_request`
//!    for approval, asks two questions with `ask_user` (the second with three options),
//!    and requests a connection for an agent whose `AGENT.md` turns connections on.
//! 3. Plays a person over real HTTP: lists the pending interactions, approves the
//!    held call (bound to the arguments digest it was shown), answers the question
//!    with exactly the README's example answer body, and answers the connection.
//! 4. Plays the tool executor: runs the released call and reports its result.
//! 5. Prints each event as it arrives and exits 0 once each of the three blocked
//!    calls has its one `tool-call-finished`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use holdpoint_client::{AgentManifest, EventFilter, HoldCall, Placement, Runtime};
use holdpoint_domain::{CallResult, EventData, QuestionSpec, SessionMode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Service};
use crate::localnats;
use crate::serve::{connect_bus, start_services};
use crate::terminal;

const ORG: &str = "acme";
const PERSON: &str = "ana@acme.example";

/// The agent's manifest: `request_connection` is off unless `loop.connections: true`.
const AGENT_MD: &str = "---\nname: coder\ndescription: Writes and ships changes to the team's repositories.\nloop:\n  connections: true\n---\n";

/// One event as the demo prints it: its sequence, its name and a summary, safe on
/// a terminal whatever the event holds (see [`crate::terminal`]).
pub fn event_line(sequence: u64, e: &holdpoint_domain::Event) -> String {
    format!(
        "   #{:<3} {:<22} {}",
        sequence,
        e.name(),
        terminal::line(&summary(&e.body))
    )
}

fn summary(data: &EventData) -> String {
    match data {
        EventData::ApprovalRequested { prompt, .. }
        | EventData::QuestionAsked { prompt, .. }
        | EventData::ConnectionRequested { prompt, .. } => prompt.clone(),
        EventData::TaskStatus(s) => {
            let state = serde_json::to_value(s.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            match &s.interaction {
                Some(i) => format!(
                    "{state} (waits for {} {})",
                    i.kind.as_str(),
                    i.interaction_id
                ),
                None => state,
            }
        }
        EventData::InteractionResolved {
            interaction_id, by, ..
        } => format!("{interaction_id} answered by {by}"),
        EventData::ToolCallReleased {
            server,
            tool,
            approved_by,
            ..
        } => format!("{server} / {tool} released (approved by {approved_by})"),
        EventData::ToolCallFinished {
            call_id, result, ..
        } => match result {
            CallResult::Ok { output } => format!("{call_id}: {output}"),
            CallResult::Error { code, message } => format!("{call_id}: error {code}: {message}"),
        },
        EventData::InteractionClosed {
            interaction_id,
            reason,
        } => format!("{interaction_id} closed ({reason:?})"),
        EventData::SessionOpened { session, mode } => format!("{session} ({mode:?})"),
        other => terminal::json(&serde_json::to_value(other).unwrap_or_default()),
    }
}

/// Runs the demo.
///
/// # Errors
/// When any step fails or the expected events do not arrive within 30 s.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let store = tempfile::tempdir()?;
    let (url, local) = match &args.nats_url {
        Some(u) => (u.clone(), None),
        None => {
            let nats = localnats::LocalNats::start(store.path(), 0).await?;
            println!(
                "• nats-server {} (JetStream, file store in {})",
                nats.url,
                store.path().display()
            );
            (nats.url.clone(), Some(nats))
        }
    };
    // People authenticate with real JWTs, verified against a JWKS file, exactly as
    // against an identity provider's.
    let key = crate::devtoken::DevKey::load_or_create(&store.path().join("dev-jwt"))?;
    let token = key.token(ORG, PERSON, "org", 3600)?;
    let mut cfg = Config::default();
    cfg.nats.url = Some(url.clone());
    cfg.http.listen = ([127, 0, 0, 1], 0).into();
    cfg.admin.listen = Some(([127, 0, 0, 1], 0).into());
    cfg.auth.jwt_issuer = Some(crate::devtoken::DEV_ISSUER.into());
    cfg.auth.jwks_file = Some(key.jwks.clone());
    cfg.auth.jwt_audience = Some(crate::devtoken::DEV_AUDIENCE.into());
    cfg.auth.jwt_algorithms = vec!["EdDSA".into()];
    cfg.validate(Service::Up)?;
    let bus = connect_bus(&url, "holdpoint-demo", cfg.topology()).await?;
    let services = start_services(bus.clone(), &cfg, None, 1, shutdown.clone()).await?;
    let base = format!("http://{}", services.api);
    println!("• holdpoint ingress {base}, worker pulling HP_COMMANDS");

    println!(
        "• people authenticate with JWTs (EdDSA, issuer {}), verified against {}",
        crate::devtoken::DEV_ISSUER,
        key.jwks.display()
    );

    let result = script(&bus, &base, &token, args.verbose).await;

    shutdown.cancel();
    services.wait().await?;
    if let Some(n) = local {
        n.stop().await;
    }
    result
}

/// Prints events as they arrive until `done` says so; plays the tool executor for
/// released calls; refuses a second `tool-call-finished` for any call.
async fn follow_until(
    rt: &Runtime,
    events: &mut holdpoint_client::EventStream,
    finished: &mut BTreeMap<String, Value>,
    verbose: bool,
    mut done: impl FnMut(&EventData) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let next = tokio::time::timeout_at(deadline, events.next())
            .await
            .context("timed out waiting for events")?;
        let Some(next) = next else {
            bail!("event stream ended")
        };
        let followed = next?;
        let e = followed.event;
        println!("{}", event_line(followed.sequence, &e));
        if verbose {
            println!("{}", terminal::json_pretty(&e));
        }
        match &e.body {
            EventData::ToolCallReleased {
                effect_id,
                server,
                tool,
                arguments,
                ..
            } => {
                // The tool executor: run the released call once, keyed by the effect id.
                println!(
                    "         executor runs {} / {} with {}",
                    terminal::line(server),
                    terminal::line(tool),
                    terminal::json(arguments)
                );
                rt.report_tool_result(
                    effect_id.as_str(),
                    CallResult::Ok {
                        output: json!({"url": "https://github.com/acme/app/pull/42"}),
                    },
                )
                .await?;
            }
            EventData::ToolCallFinished {
                call_id, result, ..
            } if finished
                .insert(call_id.to_string(), serde_json::to_value(result)?)
                .is_some() =>
            {
                bail!("a second tool-call-finished for {call_id}");
            }
            _ => {}
        }
        if done(&e.body) {
            return Ok(());
        }
    }
}

fn finished_for(call: &'static str) -> impl FnMut(&EventData) -> bool {
    move |e| matches!(e, EventData::ToolCallFinished { call_id, .. } if call_id.as_str() == call)
}

fn waits(e: &EventData) -> bool {
    matches!(e, EventData::TaskStatus(s) if s.interaction.is_some())
}

async fn answer(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: Value,
) -> anyhow::Result<()> {
    let resp = http
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?;
    let status = resp.status();
    println!(
        "   person: POST {path} {} -> {}",
        terminal::json(&body),
        status.as_u16()
    );
    if status.as_u16() != 204 {
        bail!(
            "{path} answered {status}: {}",
            terminal::line(&resp.text().await.unwrap_or_default())
        );
    }
    Ok(())
}

async fn get(http: &reqwest::Client, base: &str, token: &str, path: &str) -> anyhow::Result<Value> {
    Ok(http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

async fn script(
    bus: &holdpoint_bus::Bus,
    base: &str,
    token: &str,
    verbose: bool,
) -> anyhow::Result<()> {
    let rt = Runtime::with_bus(bus.clone(), ORG).await?;
    let mut events = rt.follow(EventFilter::default()).await?;
    let mut finished = BTreeMap::new();
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let session = format!("demo-{}", &run_id[..8]);
    let at = Placement::new(
        &session,
        "main",
        &format!("task-{}", &run_id[..8]),
        "ticket-4821",
    )?;
    let http = reqwest::Client::new();
    rt.open_session(&session, SessionMode::Blocking).await?;

    println!("\n── 1. the tool policy holds github / create_pull_request");
    let effect_id = format!("eff_{}", &run_id[..12]);
    let approval = rt
        .hold_for_approval(
            &at,
            HoldCall {
                effect_id: effect_id.clone(),
                call_id: "call_pr".into(),
                server: "github".into(),
                tool: "create_pull_request".into(),
                arguments: json!({"repo": "acme/app", "title": "Fix duplicate invoices", "head": "fix/dupes", "base": "main"}),
                reason: Some("writes to a shared repository".into()),
                editable: false,
                approvals: None,
            },
        )
        .await?;
    follow_until(&rt, &mut events, &mut finished, verbose, waits).await?;
    let pending = get(&http, base, token, "/v1/interactions?state=pending").await?;
    println!(
        "   person: GET /v1/interactions -> {} pending",
        pending["items"].as_array().map_or(0, Vec::len)
    );
    let view = get(&http, base, token, &format!("/v1/interactions/{approval}")).await?;
    let digest = view["call"]["argumentsDigest"]
        .as_str()
        .context("approval view has no argumentsDigest")?
        .to_owned();
    println!(
        "   person: GET /v1/interactions/{approval} -> arguments {}",
        terminal::json(&view["call"]["arguments"])
    );
    answer(
        &http,
        base,
        token,
        &format!("/v1/interactions/{approval}/approve"),
        json!({"approved": true, "argumentsDigest": digest}),
    )
    .await?;
    follow_until(
        &rt,
        &mut events,
        &mut finished,
        verbose,
        finished_for("call_pr"),
    )
    .await?;

    println!("\n── 2. the agent asks two questions (ask_user)");
    let question = rt
        .ask_user(
            &at,
            "call_ask",
            vec![
                QuestionSpec {
                    text: "Which branch should the fix target?".into(),
                    options: vec!["main".into(), "release-2.3".into()],
                    multiple: false,
                    allow_text: false,
                    schema: None,
                },
                QuestionSpec {
                    text: "What should happen to the duplicate invoices?".into(),
                    options: vec![
                        "Delete the newer copy".into(),
                        "Merge them".into(),
                        "Keep both".into(),
                    ],
                    multiple: false,
                    allow_text: true,
                    schema: None,
                },
            ],
            None,
        )
        .await?;
    follow_until(&rt, &mut events, &mut finished, verbose, waits).await?;
    // Exactly the README's example answer body ("The HTTP API").
    answer(
        &http,
        base,
        token,
        &format!("/v1/questions/{question}/answer"),
        json!({"answers": [{"options": [0]}, {"options": [2], "text": "Keep both and reconcile nightly."}]}),
    )
    .await?;
    follow_until(
        &rt,
        &mut events,
        &mut finished,
        verbose,
        finished_for("call_ask"),
    )
    .await?;

    println!("\n── 3. the agent asks for Linear to be connected (request_connection)");
    let agent = AgentManifest::from_markdown(AGENT_MD)?;
    let connection = rt
        .request_connection(
            &agent,
            &at,
            "call_connect",
            "Linear",
            "to file the follow-up ticket",
            None,
        )
        .await?;
    follow_until(&rt, &mut events, &mut finished, verbose, waits).await?;
    answer(
        &http,
        base,
        token,
        &format!("/v1/interactions/{connection}/respond"),
        json!({"value": {"connected": true}}),
    )
    .await?;
    follow_until(
        &rt,
        &mut events,
        &mut finished,
        verbose,
        finished_for("call_connect"),
    )
    .await?;

    println!("\n✓ three blocked calls, three tool-call-finished events, each exactly once");
    Ok(())
}

/// `holdpoint demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Use this NATS instead of starting a private one.
    #[arg(long, env = "HOLDPOINT_NATS_URL")]
    pub nats_url: Option<String>,
    /// Print the full JSON of each event.
    #[arg(long)]
    pub verbose: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_domain::{Event, InteractionId, OrgId, TaskId};

    #[test]
    fn event_lines_never_hold_a_raw_control_character() {
        let org = OrgId::parse("acme").expect("org");
        let task = TaskId::parse("t1").expect("task");
        let hostile = "delete_repo\u{1b}[2K\rread_file\u{85}\u{9b}\u{7}";
        let id = InteractionId::parse("eff_1").expect("id");
        let bodies = vec![
            EventData::ApprovalRequested {
                interaction_id: id.clone(),
                call_id: holdpoint_domain::CallId::parse("call-1").expect("call"),
                session: holdpoint_domain::SessionId::parse("s1").expect("session"),
                lane: holdpoint_domain::LaneId::parse("main").expect("lane"),
                prompt: format!("Approve github / {hostile}?\nline two"),
                detail: json!({"tool": hostile}),
                arguments_digest: "d".into(),
            },
            EventData::ToolCallReleased {
                effect_id: id.clone(),
                call_id: holdpoint_domain::CallId::parse("call-1").expect("call"),
                server: hostile.into(),
                tool: hostile.into(),
                arguments: json!({"x": hostile}),
                arguments_digest: "d".into(),
                approved_by: holdpoint_domain::PersonId::parse("ana").expect("person"),
                rule: None,
                edited: false,
                edited_arguments_digest: None,
                approvals: Vec::new(),
            },
            EventData::ToolCallFinished {
                call_id: holdpoint_domain::CallId::parse("call-1").expect("call"),
                interaction_id: id.clone(),
                kind: holdpoint_domain::Kind::Approval,
                result: CallResult::Error {
                    code: hostile.into(),
                    message: hostile.into(),
                },
            },
            EventData::DeadLetter {
                subject: hostile.into(),
                stream_sequence: 1,
                reason: hostile.into(),
            },
        ];
        for body in bodies {
            let e = Event::new(
                &org,
                Some(&task),
                "eff_1",
                "t",
                time::OffsetDateTime::UNIX_EPOCH,
                body,
            );
            let line = event_line(7, &e);
            assert!(
                !line.chars().any(terminal::is_unsafe),
                "{}: {line:?}",
                e.name()
            );
            assert!(line.contains("delete_repo"), "{line}");
        }
    }
}

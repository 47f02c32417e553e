//! A runtime that holds a tool call for approval, waits for the person's decision,
//! executes the released call exactly as approved, reports its result, and waits for
//! the call's `tool-call-finished`.
//!
//! Run Holdpoint (`ops/up.sh --dev-jwt`), then:
//!
//! ```sh
//! cargo run -p holdpoint-client --example approval_runtime -- nats://127.0.0.1:4290 acme
//! # in another shell, as a person:
//! TOKEN=$(./target/debug/holdpoint dev-token --org acme --person ana)
//! ./target/debug/holdpoint approve <effect id printed below> --token "$TOKEN"
//! ```

use std::time::Duration;

use futures::StreamExt as _;
use holdpoint_client::{EventFilter, HoldCall, Placement, Runtime};
use holdpoint_domain::{CallResult, EventData, SessionMode};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "nats://127.0.0.1:4290".into());
    let org = args.next().unwrap_or_else(|| "acme".into());
    let rt = Runtime::connect(&url, &org).await?;

    let run = uuid::Uuid::new_v4().simple().to_string();
    let session = format!("example-{}", &run[..8]);
    rt.open_session(&session, SessionMode::Blocking).await?;
    let at = Placement::new(
        &session,
        "main",
        &format!("task-{}", &run[..8]),
        "ctx-example",
    )?;

    // Follow this task's events before opening, so nothing is missed.
    let mut events = rt
        .follow(EventFilter {
            task: Some(at.task_id.clone()),
            ..EventFilter::default()
        })
        .await?;

    // The tool policy holds the call; the effect id is the executor's idempotency key.
    let effect_id = format!("eff_{}", &run[..16]);
    rt.hold_for_approval(
        &at,
        HoldCall {
            effect_id: effect_id.clone(),
            call_id: "call-1".into(),
            server: "github".into(),
            tool: "create_pull_request".into(),
            arguments: json!({"repo": "acme/app", "title": "Fix duplicate invoices"}),
            reason: Some("writes to a shared repository".into()),
            editable: false,
            approvals: None,
        },
    )
    .await?;
    println!(
        "held github / create_pull_request as {effect_id}; waiting for a person (10 minutes at most)"
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while let Ok(Some(next)) = tokio::time::timeout_at(deadline, events.next()).await {
        let event = next?.event;
        match event.body {
            EventData::ToolCallReleased {
                effect_id: released,
                server,
                tool,
                arguments,
                approved_by,
                ..
            } => {
                // Execute exactly what was approved, once (keyed by the effect id).
                println!("approved by {approved_by}: running {server} / {tool} {arguments}");
                let output = json!({"url": "https://github.com/acme/app/pull/42"});
                rt.report_tool_result(released.as_str(), CallResult::Ok { output })
                    .await?;
            }
            EventData::ToolCallFinished {
                call_id, result, ..
            } => {
                println!("{call_id} finished: {}", serde_json::to_string(&result)?);
                return Ok(());
            }
            _ => println!("event {}", event.id),
        }
    }
    Err("no decision within 10 minutes".into())
}

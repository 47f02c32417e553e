//! Fixtures shared by the integration tests.

use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{Event, EventData, SessionMode};
use serde_json::{Value, json};

/// The README's example body of `POST /v1/questions/{questionId}/answer`: two
/// questions, the first single-choice, the second with option 2 and free text.
pub fn example_answer() -> Value {
    json!({"answers": [{"options": [0]}, {"options": [2], "text": "Keep both and reconcile nightly."}]})
}

/// Two questions, the second with three options and free text.
pub use holdpoint_tests::chaos::two_questions;

/// A placement with unique ids.
pub fn placement(session: &str) -> Placement {
    let t = uuid::Uuid::new_v4().simple().to_string();
    Placement::new(session, "main", &format!("task-{}", &t[..12]), "ctx-1").expect("ids")
}

/// Opens a session and a question on it; returns (placement, question id).
pub async fn open_question(rt: &Runtime, mode: SessionMode) -> (Placement, String) {
    let session = format!("s-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    rt.open_session(&session, mode).await.expect("session");
    let at = placement(&session);
    let q = rt
        .ask_user(
            &at,
            &format!("call-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
            two_questions(),
            None,
        )
        .await
        .expect("ask_user");
    (at, q.to_string())
}

/// Opens a blocking session and an approval; returns (placement, effect id).
pub async fn open_approval(rt: &Runtime) -> (Placement, String) {
    let session = format!("s-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    rt.open_session(&session, SessionMode::Blocking)
        .await
        .expect("session");
    let at = placement(&session);
    let effect = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    rt.hold_for_approval(
        &at,
        HoldCall {
            effect_id: effect.clone(),
            call_id: format!("call-{effect}"),
            server: "github".into(),
            tool: "create_pull_request".into(),
            arguments: json!({"repo": "acme/app", "title": "Fix"}),
            reason: Some("writes".into()),
        },
    )
    .await
    .expect("hold");
    (at, effect)
}

/// The events named `name` about interaction `id`.
pub fn named<'a>(events: &'a [Event], name: &str, id: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.name() == name && e.subject == id)
        .collect()
}

/// The `tool-call-finished` events of interaction `id`.
pub fn finished<'a>(events: &'a [Event], id: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| matches!(&e.body, EventData::ToolCallFinished { interaction_id, .. } if interaction_id.as_str() == id))
        .collect()
}

/// Asserts no event id appears twice with different content.
pub fn assert_ids_consistent(events: &[Event]) {
    let mut seen = std::collections::HashMap::new();
    for e in events {
        if let Some(prev) = seen.insert(e.id.clone(), e) {
            assert_eq!(prev, e, "event id {} appears with different content", e.id);
        }
    }
}

/// Debian's nats-server 2.9 (`HOLDPOINT_OLD_NATS_SERVER`, default
/// `/usr/sbin/nats-server`) when this machine has it: the compatibility tests run
/// on it, and are skipped (saying so) without it.
pub fn debian_nats() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var("HOLDPOINT_OLD_NATS_SERVER")
            .unwrap_or_else(|_| "/usr/sbin/nats-server".into()),
    );
    let out = std::process::Command::new(&p)
        .arg("--version")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .contains("v2.9.")
        .then_some(p)
}

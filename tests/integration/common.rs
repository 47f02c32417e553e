//! Fixtures shared by the integration tests.

use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{Event, EventData, SessionMode, State};
use holdpoint_tests::app::{Person, Reply, TestApp};
use serde_json::{Value, json};

/// The README's example body of `POST /v1/questions/{questionId}/answer`: two
/// questions, the first single-choice, the second with option 2 and free text.
pub fn example_answer() -> Value {
    json!({"answers": [{"options": [0]}, {"options": [2], "text": "Keep both and reconcile nightly."}]})
}

/// `person` answers question `q` with [`example_answer`] (no `Idempotency-Key`).
pub async fn answer_example(person: &Person, q: &str) -> Reply {
    person
        .post(&format!("/v1/questions/{q}/answer"), &example_answer())
        .await
}

/// Two questions, the second with three options and free text.
pub use holdpoint_tests::chaos::two_questions;

/// A placement with unique ids.
pub fn placement(session: &str) -> Placement {
    let t = uuid::Uuid::new_v4().simple().to_string();
    Placement::new(session, "main", &format!("task-{}", &t[..12]), "ctx-1").expect("ids")
}

/// Opens a session `s-<12 hex>` in `mode`; returns its name.
pub async fn open_session(rt: &Runtime, mode: SessionMode) -> String {
    let session = format!("s-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    rt.open_session(&session, mode).await.expect("session");
    session
}

/// Opens a session and a question on it; returns (placement, question id).
pub async fn open_question(rt: &Runtime, mode: SessionMode) -> (Placement, String) {
    let session = open_session(rt, mode).await;
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

/// Holds a call of `github` / `tool` with `arguments` at `at`, as effect
/// `eff_<16 hex>` with call id `call-<effect>`; returns the effect id.
pub async fn hold_call(
    rt: &Runtime,
    at: &Placement,
    tool: &str,
    arguments: Value,
    reason: Option<&str>,
) -> String {
    let effect = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    rt.hold_for_approval(
        at,
        HoldCall {
            effect_id: effect.clone(),
            call_id: format!("call-{effect}"),
            server: "github".into(),
            tool: tool.into(),
            arguments,
            reason: reason.map(Into::into),
            editable: false,
            approvals: None,
        },
    )
    .await
    .expect("hold");
    effect
}

/// Opens a blocking session and an approval; returns (placement, effect id).
pub async fn open_approval(rt: &Runtime) -> (Placement, String) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let effect = hold_call(
        rt,
        &at,
        "create_pull_request",
        json!({"repo": "acme/app", "title": "Fix"}),
        Some("writes"),
    )
    .await;
    (at, effect)
}

/// Moves the deadline of every one of `ids` to one instant `secs` from now (a
/// runtime's deadline change), all at once; returns that instant.
pub async fn move_deadlines(rt: &Runtime, ids: &[String], secs: i64) -> time::OffsetDateTime {
    let deadline = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs);
    let moved = futures::future::join_all(ids.iter().map(|id| {
        rt.set_deadline(
            id,
            holdpoint_client::Expiry {
                expires_at: Some(deadline),
                ..holdpoint_client::Expiry::default()
            },
        )
    }))
    .await;
    assert!(moved.iter().all(Result::is_ok), "{moved:?}");
    deadline
}

/// One answer of a burst: who sends it, to which path, with which
/// `Idempotency-Key` (`None`: none sent), and what.
pub struct Shot {
    pub person: Person,
    pub path: String,
    pub key: Option<String>,
    pub body: Value,
}

/// Sends every shot at once; the replies, in the shots' order.
pub async fn at_once(shots: impl IntoIterator<Item = Shot>) -> Vec<Reply> {
    futures::future::join_all(shots.into_iter().map(|s| async move {
        match &s.key {
            Some(key) => s.person.post_keyed(&s.path, key, &s.body).await,
            None => s.person.post(&s.path, &s.body).await,
        }
    }))
    .await
}

/// Two approvals in `acme` (each on its own task), and in `globex` one held under
/// the first one's effect id. Returns
/// `[("acme", a1), ("acme", a2), ("globex", a1)]`: an answer's key is scoped by
/// organisation and task, so the same key on each is a separate answer.
pub async fn one_effect_in_two_orgs_and_two_tasks(app: &TestApp) -> [(&'static str, String); 3] {
    let acme = app.runtime("acme").await;
    let globex = app.runtime("globex").await;
    let (_, a1) = open_approval(&acme).await;
    let (_, a2) = open_approval(&acme).await;
    globex
        .open_session("s-shared", SessionMode::Blocking)
        .await
        .expect("session");
    globex
        .hold_for_approval(
            &placement("s-shared"),
            HoldCall {
                effect_id: a1.clone(),
                call_id: "c".into(),
                server: "github".into(),
                tool: "merge".into(),
                arguments: json!({}),
                reason: None,
                editable: false,
                approvals: None,
            },
        )
        .await
        .expect("hold");
    [("acme", a1.clone()), ("acme", a2), ("globex", a1)]
}

/// The state of the stored interaction `id` of `org` (it must be stored).
pub async fn state_of(app: &TestApp, org: &str, id: &str) -> State {
    app.interaction(org, id).await.expect("stored").state
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

/// The audit records of type `dev.holdpoint.<kind>` whose `data.<field>` is `id`,
/// as `GET /v1/audit` shows them to `person` of `acme` (first page of 500), read
/// once every effect committed so far has reached the audit stream (records get
/// there by sourcing, shortly after each 2xx).
pub async fn audit_records(
    app: &TestApp,
    person: &str,
    kind: &str,
    field: &str,
    id: &str,
) -> Vec<Value> {
    app.wait_sourced().await;
    let r = app
        .person("acme", person)
        .get("/v1/audit?after=0&limit=500")
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let kind = format!("dev.holdpoint.{kind}");
    r.body["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|e| e["record"].clone())
        .filter(|e| e["type"] == kind.as_str() && e["data"][field] == id)
        .collect()
}

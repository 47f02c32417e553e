//! Approvals that need several distinct people (README "Two-person approvals"),
//! through a real server: each approval but the last answers `202` with the count,
//! the same person counts once (`409 NRY-0038`), the last releases the call once,
//! a race of more approvers than needed releases it once, one denial decides, the
//! views and the A2A status message show who approved, and each counted approval
//! is one `approval-counted` event and one `approval-recorded` audit record.

use holdpoint_client::{ClientError, HoldCall, Placement, Runtime};
use holdpoint_domain::{EventData, SessionMode, State};
use holdpoint_tests::app::{Reply, TestApp};
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, answer};

/// Holds a call at a new blocking session that needs `n` approvals; returns the
/// placement and the effect id.
async fn hold_needing(rt: &Runtime, n: u8) -> (Placement, String) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let effect = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    rt.hold_for_approval(&at, call(&effect, Some(n)))
        .await
        .expect("hold");
    (at, effect)
}

fn call(effect: &str, approvals: Option<u8>) -> HoldCall {
    HoldCall {
        effect_id: effect.to_owned(),
        call_id: format!("call-{effect}"),
        server: "payments".into(),
        tool: "send_payment".into(),
        arguments: json!({"amount": 125_000, "to": "acct-77"}),
        reason: Some("over the single-approver limit".into()),
        editable: false,
        approvals,
    }
}

fn approve_path(eff: &str) -> String {
    format!("/v1/interactions/{eff}/approve")
}

#[track_caller]
fn assert_counted(r: &Reply, eff: &str, given: u8, required: u8) {
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(
        r.body,
        json!({"interactionId": eff, "approvals": {"given": given, "required": required}}),
        "{r:?}"
    );
}

fn released(events: &[holdpoint_domain::Event], eff: &str) -> Vec<Vec<String>> {
    named(events, "tool-call-released", eff)
        .into_iter()
        .filter_map(|e| match &e.body {
            EventData::ToolCallReleased { approvals, .. } => Some(
                approvals
                    .iter()
                    .map(|p| p.as_str().to_owned())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn two_people_release_the_call_once_and_one_person_counts_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_needing(&rt, 2).await;
    let yes = json!({"approved": true, "reason": "checked the invoice"});
    let ana = app.person("acme", "ana");
    let bob = app.person("acme", "bob");

    let r = ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await;
    assert_counted(&r, &eff, 1, 2);
    // The same key replays; another key from the same person counts nothing.
    let r = ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await;
    assert_counted(&r, &eff, 1, 2);
    let r = ana.post_keyed(&approve_path(&eff), "k-ana-2", &yes).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0038"), "{r:?}");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);

    // The views: how far it has come, who approved, and whether you did.
    let view = ana.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(view.body["approvals"]["required"], 2);
    assert_eq!(view.body["approvals"]["given"][0]["by"], "ana");
    assert_eq!(view.body["approvals"]["byYou"], true);
    assert_eq!(view.body["detail"]["approvals"]["given"][0]["by"], "ana");
    let view = bob.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(view.body["approvals"]["byYou"], false);
    app.wait_idle().await;
    assert!(released(&app.events("acme").await, &eff).is_empty());

    let r = bob.post_keyed(&approve_path(&eff), "k-bob", &yes).await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = app
        .person("acme", "cy")
        .post(&approve_path(&eff), &yes)
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    // An earlier approver's key still replays what it answered then.
    let r = ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await;
    assert_counted(&r, &eff, 1, 2);

    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(released(&events, &eff), [vec!["ana", "bob"]]);
    let counted: Vec<(String, u8)> = named(&events, "approval-counted", &eff)
        .into_iter()
        .filter_map(|e| match &e.body {
            EventData::ApprovalCounted { by, given, .. } => Some((by.as_str().into(), *given)),
            _ => None,
        })
        .collect();
    assert_eq!(counted, [("ana".to_owned(), 1), ("bob".to_owned(), 2)]);
    let recorded = audit_records(&app, "ana", "approval-recorded", "effectId", &eff).await;
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert_eq!(recorded[0]["data"]["reason"], "checked the invoice");
    let decided = audit_records(&app, "ana", "approval-decided", "effectId", &eff).await;
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approvals"], json!(["ana", "bob"]));
    assert_eq!(decided[0]["data"]["approvedBy"], "bob");
}

#[tokio::test]
async fn a_race_of_more_approvers_than_needed_releases_the_call_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_needing(&rt, 3).await;
    let people: Vec<String> = (0..5).map(|n| format!("approver-{n}")).collect();
    let path = approve_path(&eff);
    let replies = futures::future::join_all(people.iter().map(|p| {
        let person = app.person("acme", p);
        let path = path.clone();
        async move {
            person
                .post_keyed(
                    &path,
                    &format!("k-{}", uuid::Uuid::new_v4()),
                    &json!({"approved": true}),
                )
                .await
        }
    }))
    .await;
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [202, 202, 204, 409, 409], "{replies:?}");
    for r in replies.iter().filter(|r| r.status == 409) {
        assert_eq!(r.code(), "NRY-0009", "{r:?}");
    }
    app.wait_idle().await;
    let events = app.events("acme").await;
    let released = released(&events, &eff);
    assert_eq!(released.len(), 1, "released once: {released:?}");
    assert_eq!(released[0].len(), 3, "{released:?}");
    assert_eq!(named(&events, "tool-call-finished", &eff).len(), 0);
    assert_eq!(named(&events, "approval-counted", &eff).len(), 3);
    let i = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(i.given_approvals.len(), 3);
    assert_eq!(i.state, State::Resolved);
}

#[tokio::test]
async fn one_denial_decides_and_the_audit_keeps_the_partial_approvals() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_needing(&rt, 3).await;
    let r = app
        .person("acme", "ana")
        .post(&approve_path(&eff), &json!({"approved": true}))
        .await;
    assert_counted(&r, &eff, 1, 3);
    let r = app
        .person("acme", "bob")
        .post(
            &approve_path(&eff),
            &json!({"approved": false, "reason": "wrong account"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = app
        .person("acme", "cy")
        .post(&approve_path(&eff), &json!({"approved": true}))
        .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0009"), "{r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert!(released(&events, &eff).is_empty());
    assert_eq!(named(&events, "tool-call-finished", &eff).len(), 1);
    let decided = audit_records(&app, "ana", "approval-decided", "effectId", &eff).await;
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], false);
    assert_eq!(decided[0]["data"]["approvals"], json!(["ana"]));
}

#[tokio::test]
async fn a2a_answers_count_and_the_status_message_shows_who_approved() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = hold_needing(&rt, 2).await;
    let meta = Some(json!({"interactionId": eff, "approved": true}));
    let parts = json!([{"data": {"approved": true}}]);
    let r = Rpc::new(&app, "acme", "ana")
        .send(answer(&at, "m-ana", parts.clone(), meta.clone()))
        .await;
    let task = r.result()["task"].clone();
    assert_ne!(task["status"]["state"], "TASK_STATE_WORKING", "{task}");
    let shown: Value = task["status"]["message"]["metadata"]
        .as_object()
        .and_then(|m| m.values().next().cloned())
        .unwrap_or(Value::Null);
    assert_eq!(shown["interactionId"], eff.as_str(), "{task}");
    assert_eq!(shown["detail"]["approvals"]["required"], 2, "{task}");
    assert_eq!(
        shown["detail"]["approvals"]["given"][0]["by"], "ana",
        "{task}"
    );
    // Her second approval, under another message id, is refused.
    let r = Rpc::new(&app, "acme", "ana")
        .send(answer(&at, "m-ana-2", parts.clone(), meta.clone()))
        .await;
    assert_eq!(r.holdpoint(), "NRY-0038");
    let r = Rpc::new(&app, "acme", "bob")
        .send(answer(&at, "m-bob", parts, meta))
        .await;
    r.assert_working();
    app.wait_idle().await;
    assert_eq!(
        released(&app.events("acme").await, &eff),
        [vec!["ana", "bob"]]
    );
}

#[tokio::test]
async fn batches_report_counted_items_and_bad_holds_open_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_needing(&rt, 2).await;
    let r = app
        .person("acme", "ana")
        .post(
            "/v1/answers",
            &json!({"items": [{
                "interactionId": eff,
                "operation": "approve",
                "body": {"approved": true},
                "idempotencyKey": "k-batch",
            }]}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["results"][0]["status"], 202, "{r:?}");
    assert_eq!(
        r.body["results"][0]["approvals"],
        json!({"given": 1, "required": 2})
    );
    // `remember` never applies to such a hold.
    let r = app
        .person("acme", "bob")
        .post(
            &approve_path(&eff),
            &json!({"approved": true, "remember": {"scope": "session"}}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0025"), "{r:?}");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);

    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session);
    for (n, (approvals, editable)) in [(0, false), (6, false), (2, true)].into_iter().enumerate() {
        let effect = format!("eff_bad{n}");
        let mut c = call(&effect, Some(approvals));
        c.editable = editable;
        match rt.hold_for_approval(&at, c).await {
            Err(ClientError::Rejected(rej)) => {
                assert_eq!(rej.code.spec().code, "NRY-0001", "{approvals} {editable}");
            }
            other => panic!("{approvals} {editable}: {other:?}"),
        }
        assert!(app.interaction("acme", &effect).await.is_none());
    }
}

#[tokio::test]
async fn people_approve_from_the_command_line_and_pending_shows_the_count() {
    use crate::operator::{cli_as, jwt_app};
    let (app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_needing(&rt, 2).await;
    let ana = key.sign(&holdpoint_tests::jwt::claims("acme", "ana"));
    let bob = key.sign(&holdpoint_tests::jwt::claims("acme", "bob"));
    let base = app.base.as_str();

    let (ok, out, err) = cli_as(base, &ana, &["approve", &eff]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("counted (1 of 2 approvals; the call waits for the rest) (202)"),
        "{out}"
    );
    let (ok, out, err) = cli_as(base, &ana, &["pending"]).await;
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.contains(&eff)).unwrap_or_default();
    assert!(line.contains("approvals 1/2 (ana), you approved"), "{out}");
    let (ok, _, err) = cli_as(base, &ana, &["approve", &eff]).await;
    assert!(!ok);
    assert!(err.contains("409 NRY-0038"), "{err}");
    let (ok, out, err) = cli_as(base, &bob, &["approve", &eff, "--json"]).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"{"status":204}"#);
    assert_eq!(state_of(&app, "acme", &eff).await, State::Resolved);
}

#[tokio::test]
async fn the_official_a2a_python_sdk_counts_two_approvals() {
    let Some(python) = crate::a2a::a2a_python() else {
        eprintln!("HOLDPOINT_SKIP_PYTHON=1: skipping the a2a-sdk two-person run");
        return;
    };
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = hold_needing(&rt, 2).await;
    let script = holdpoint_tests::nats::workspace_root().join("tests/python/two_person.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .args([
            "--base", &app.base, "--org", "acme", "--first", "ana", "--second", "bob",
        ])
        .arg("--hold")
        .arg(format!("{}:{}:{eff}", at.task_id, at.context_id))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("two_person.py timed out")
        .expect("python runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("two-person: ok"),
        "two_person.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let i = app.interaction("acme", &eff).await.expect("stored");
    let who: Vec<&str> = i.given_approvals.iter().map(|g| g.by.as_str()).collect();
    assert_eq!(who, ["ana", "bob"]);
    app.wait_idle().await;
    assert_eq!(
        released(&app.events("acme").await, &eff),
        [vec!["ana", "bob"]]
    );
}

#[tokio::test]
async fn a_counted_approval_replays_after_many_reassignments_and_withdrawn_ones_count_for_nothing()
{
    use holdpoint_domain::Assignees;
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session).assigned_to(Assignees::of(&["ana", "bob"], &[]).expect("a"));
    let eff = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    rt.hold_for_approval(&at, call(&eff, Some(2)))
        .await
        .expect("hold");
    let ana = app.person("acme", "ana");
    let yes = json!({"approved": true});
    assert_counted(
        &ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await,
        &eff,
        1,
        2,
    );
    // More changes than the record's recent transitions keep, inside the duplicate
    // window: the key still replays at once (never a 503 until the window passes).
    for n in 0..(holdpoint_domain::OUTBOX_KEEP + 2) {
        let people: &[&str] = if n % 2 == 0 {
            &["ana", "bob", "cy"]
        } else {
            &["ana", "bob"]
        };
        rt.reassign(&eff, Some(Assignees::of(people, &[]).expect("a")))
            .await
            .expect("reassign");
    }
    assert_counted(
        &ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await,
        &eff,
        1,
        2,
    );
    // Ana is taken off: her approval is withdrawn (the event says so), her key
    // still replays its answer, and two current assignees are needed.
    rt.reassign(&eff, Some(Assignees::of(&["bob", "cy"], &[]).expect("a")))
        .await
        .expect("reassign");
    assert_counted(
        &ana.post_keyed(&approve_path(&eff), "k-ana", &yes).await,
        &eff,
        1,
        2,
    );
    let r = ana.post_keyed(&approve_path(&eff), "k-ana-2", &yes).await;
    assert_eq!((r.status, r.code()), (403, "NRY-0037"), "{r:?}");
    let bob = app
        .person("acme", "bob")
        .post(&approve_path(&eff), &yes)
        .await;
    assert_counted(&bob, &eff, 1, 2);
    let cy = app
        .person("acme", "cy")
        .post(&approve_path(&eff), &yes)
        .await;
    assert_eq!(cy.status, 204, "{cy:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(released(&events, &eff), [vec!["bob", "cy"]]);
    let withdrawn: Vec<&EventData> = named(&events, "interaction-reassigned", &eff)
        .into_iter()
        .map(|e| &e.body)
        .filter(|b| {
            matches!(b, EventData::InteractionReassigned { withdrawn_approvals, .. }
                if withdrawn_approvals.iter().map(|p| p.as_str()).eq(["ana"]))
        })
        .collect();
    assert_eq!(withdrawn.len(), 1, "{withdrawn:?}");
}

//! Edit, then approve (README "Edit, then approve"): a person may release a held
//! call with arguments of their own, bound to the arguments they were shown.
//!
//! - an edit is released as the call's arguments, `tool-call-released` carries it
//!   with both digests and `edited: true`, the audit records both digests, the
//!   editor and the edit, and a replay with the key decides nothing new;
//! - an edit bound to arguments the person was not shown (`NRY-0010`), to a hold
//!   that forbids edits (`NRY-0028`), that is not an object, comes without
//!   `approved: true` or the digest (`NRY-0029`) or with `remember` (`NRY-0033`)
//!   changes nothing: no event, no audit record, the call still pending;
//! - A2A carries the edit in the extension's metadata;
//! - an edit-approve racing a plain approve and a host close resolves once, and
//!   the HTTP replies agree with the events.

use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::digest::arguments_digest;
use holdpoint_domain::{CloseReason, Event, EventData, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};
use std::time::Duration;

use crate::common::*;
use crate::rpc::{Rpc, answer};

/// The arguments every hold of this module holds.
fn held() -> Value {
    json!({"repo": "acme/app", "title": "Fix", "draft": false})
}

/// Holds `create_pull_request` with [`held`] arguments, `editable` as given; returns
/// the effect id.
async fn hold(rt: &Runtime, at: &Placement, editable: bool) -> String {
    let effect = format!("eff_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    rt.hold_for_approval(
        at,
        HoldCall {
            effect_id: effect.clone(),
            call_id: format!("call-{effect}"),
            server: "github".into(),
            tool: "create_pull_request".into(),
            arguments: held(),
            reason: Some("writes".into()),
            editable,
            approvals: None,
        },
    )
    .await
    .expect("hold");
    effect
}

/// A blocking session with one hold on it.
async fn held_call(rt: &Runtime, editable: bool) -> (Placement, String) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let effect = hold(rt, &at, editable).await;
    (at, effect)
}

/// The `tool-call-released` events of `effect`.
fn releases<'a>(events: &'a [Event], effect: &str) -> Vec<&'a EventData> {
    events
        .iter()
        .filter(|e| e.subject == effect)
        .filter(|e| matches!(e.body, EventData::ToolCallReleased { .. }))
        .map(|e| &e.body)
        .collect()
}

/// The `approval-decided` audit records of `effect` (as `GET /v1/audit` shows them).
async fn audited(app: &TestApp, effect: &str) -> Vec<Value> {
    audit_records(app, "auditor", "approval-decided", "effectId", effect).await
}

/// What `GET /v1/interactions/{id}` shows of the held call.
async fn shown(app: &TestApp, effect: &str) -> Value {
    let r = app
        .person("acme", "ana")
        .get(&format!("/v1/interactions/{effect}"))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.body["call"].clone()
}

fn approve_path(effect: &str) -> String {
    format!("/v1/interactions/{effect}/approve")
}

#[tokio::test]
async fn an_edit_is_released_with_both_digests_and_audited_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, effect) = held_call(&rt, true).await;
    let call = shown(&app, &effect).await;
    assert_eq!(call["editable"], true, "{call}");
    assert_eq!(call["arguments"], held());
    let digest = call["argumentsDigest"].as_str().expect("digest").to_owned();
    assert_eq!(digest, arguments_digest(&held()));

    let edit = json!({"repo": "acme/app", "title": "Fix the login bug", "draft": true});
    let body = json!({"approved": true, "argumentsDigest": digest, "editedArguments": edit});
    let ana = app.person("acme", "ana");
    let r = ana
        .post_keyed(&approve_path(&effect), "edit-1", &body)
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    // The same key again, even with another edit: the recorded outcome, nothing new.
    let other =
        json!({"approved": true, "argumentsDigest": digest, "editedArguments": {"repo": "x"}});
    for b in [&body, &other] {
        let r = ana.post_keyed(&approve_path(&effect), "edit-1", b).await;
        assert_eq!(r.status, 204, "{r:?}");
    }
    app.wait_idle().await;

    let events = app.events("acme").await;
    let released = releases(&events, &effect);
    assert_eq!(released.len(), 1, "{released:?}");
    let EventData::ToolCallReleased {
        arguments,
        arguments_digest: original,
        edited,
        edited_arguments_digest,
        approved_by,
        ..
    } = released[0]
    else {
        unreachable!("filtered on ToolCallReleased")
    };
    assert_eq!(arguments, &edit, "the edit is what runs");
    assert!(*edited);
    assert_eq!(original, &digest, "argumentsDigest names the held call");
    assert_eq!(
        edited_arguments_digest.as_deref(),
        Some(arguments_digest(&edit).as_str())
    );
    assert_eq!(approved_by.as_str(), "ana");

    let audit = audited(&app, &effect).await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    let d = &audit[0]["data"];
    assert_eq!(d["approved"], true);
    assert_eq!(d["approvedBy"], "ana", "the editor");
    assert_eq!(d["argumentsDigest"], digest.as_str());
    assert_eq!(d["editedArgumentsDigest"], arguments_digest(&edit).as_str());
    assert_eq!(d["editedArguments"], edit);

    // The interaction's view records the edit with the answer.
    let r = ana.get(&format!("/v1/interactions/{effect}")).await;
    assert_eq!(r.body["state"], "resolved", "{r:?}");
    assert_eq!(r.body["resolution"]["answer"]["editedArguments"], edit);
    assert_eq!(
        r.body["call"]["arguments"],
        held(),
        "the hold stays as held"
    );
}

#[tokio::test]
async fn a_plain_approve_of_an_editable_hold_releases_it_unedited() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, effect) = held_call(&rt, true).await;
    let digest = arguments_digest(&held());
    // The held arguments sent back as an "edit" are no edit.
    let same = json!({"approved": true, "argumentsDigest": digest, "editedArguments": held()});
    let r = app
        .person("acme", "ana")
        .post(&approve_path(&effect), &same)
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    let released = releases(&events, &effect);
    assert_eq!(released.len(), 1);
    assert!(matches!(
        released[0],
        EventData::ToolCallReleased { edited: false, edited_arguments_digest: None, arguments, .. }
            if *arguments == held()
    ));
    assert!(audited(&app, &effect).await[0]["data"]["editedArguments"].is_null());
}

#[tokio::test]
async fn an_edit_bound_to_other_arguments_or_not_releasable_changes_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, editable) = held_call(&rt, true).await;
    let (_, fixed) = held_call(&rt, false).await;
    let digest = arguments_digest(&held());
    let edit = json!({"repo": "acme/app", "title": "Other"});
    let stale = arguments_digest(&json!({"repo": "acme/app", "title": "Fix"}));
    let cases: Vec<(&str, &String, Value, u16, &str)> = vec![
        (
            "digest of other arguments",
            &editable,
            json!({"approved": true, "argumentsDigest": stale, "editedArguments": edit}),
            409,
            "NRY-0010",
        ),
        (
            "hold not editable",
            &fixed,
            json!({"approved": true, "argumentsDigest": digest, "editedArguments": edit}),
            409,
            "NRY-0028",
        ),
        (
            "an array",
            &editable,
            json!({"approved": true, "argumentsDigest": digest, "editedArguments": [1, 2]}),
            400,
            "NRY-0029",
        ),
        (
            "a string",
            &editable,
            json!({"approved": true, "argumentsDigest": digest, "editedArguments": "{\"repo\":1}"}),
            400,
            "NRY-0029",
        ),
        (
            "null",
            &editable,
            json!({"approved": true, "argumentsDigest": digest, "editedArguments": null}),
            400,
            "NRY-0029",
        ),
        (
            "no digest",
            &editable,
            json!({"approved": true, "editedArguments": edit}),
            400,
            "NRY-0029",
        ),
        (
            "a denial",
            &editable,
            json!({"approved": false, "argumentsDigest": digest, "editedArguments": edit}),
            400,
            "NRY-0029",
        ),
        (
            "with remember",
            &editable,
            json!({"approved": true, "argumentsDigest": digest, "editedArguments": edit,
                   "remember": {"scope": "session"}}),
            400,
            "NRY-0033",
        ),
        (
            "a non-boolean value",
            &editable,
            json!({"value": "yes", "argumentsDigest": digest, "editedArguments": edit}),
            400,
            "NRY-0001",
        ),
    ];
    app.wait_idle().await;
    let events = app.events("acme").await;
    let before: std::collections::HashMap<&str, Vec<&str>> = [&editable, &fixed]
        .into_iter()
        .map(|effect| {
            let names = events
                .iter()
                .filter(|e| &e.subject == effect)
                .map(|e| e.name())
                .collect();
            (effect.as_str(), names)
        })
        .collect();
    let ana = app.person("acme", "ana");
    for (what, effect, body, status, code) in &cases {
        let r = ana.post(&approve_path(effect), body).await;
        assert_eq!((r.status, r.code()), (*status, *code), "{what}: {r:?}");
    }
    app.wait_idle().await;
    for effect in [&editable, &fixed] {
        assert_eq!(state_of(&app, "acme", effect).await, State::Pending);
        assert!(audited(&app, effect).await.is_empty());
        let events = app.events("acme").await;
        let about: Vec<&str> = events
            .iter()
            .filter(|e| &e.subject == effect)
            .map(|e| e.name())
            .collect();
        assert_eq!(
            before[effect.as_str()],
            about,
            "{effect}: events after the refusals"
        );
        assert!(releases(&events, effect).is_empty());
        assert!(finished(&events, effect).is_empty());
    }
    // Still answerable as held: the refusals left it as it was.
    let r = ana
        .post(
            &approve_path(&editable),
            &json!({"approved": true, "argumentsDigest": digest, "editedArguments": edit}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = ana
        .post(&approve_path(&fixed), &json!({"approved": true}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
}

#[tokio::test]
async fn a2a_metadata_carries_an_edit() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, effect) = held_call(&rt, true).await;
    let digest = arguments_digest(&held());
    let edit = json!({"repo": "acme/app", "title": "Edited over A2A"});
    // The agent card says the extension takes an edit.
    let card = app
        .person("acme", "ana")
        .get("/.well-known/agent-card.json")
        .await;
    let said = card.body["capabilities"]["extensions"][0]["description"]
        .as_str()
        .unwrap_or("");
    assert!(
        said.contains("editedArguments") && said.contains("NRY-0028"),
        "{said}"
    );
    let ana = Rpc::new(&app, "acme", "ana");
    let meta = |d: &str, e: Value| {
        Some(
            json!({"interactionId": effect, "approved": true, "argumentsDigest": d,
                    "editedArguments": e}),
        )
    };
    // A stale digest, then a non-object: refused, nothing decided.
    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m1",
                json!([{"text": "ok"}]),
                meta(&"0".repeat(64), edit.clone()),
            ),
        )
        .await;
    r.assert_error(-32602, "NRY-0010");
    let r = ana
        .call(
            "SendMessage",
            answer(&at, "m2", json!([{"text": "ok"}]), meta(&digest, json!(7))),
        )
        .await;
    r.assert_error(-32602, "NRY-0029");
    assert_eq!(state_of(&app, "acme", &effect).await, State::Pending);

    let r = ana
        .call(
            "SendMessage",
            answer(
                &at,
                "m3",
                json!([{"text": "ok"}]),
                meta(&digest, edit.clone()),
            ),
        )
        .await;
    r.assert_working();
    app.wait_idle().await;
    let events = app.events("acme").await;
    let released = releases(&events, &effect);
    assert_eq!(released.len(), 1);
    assert!(matches!(
        released[0],
        EventData::ToolCallReleased { edited: true, arguments, .. } if *arguments == edit
    ));
}

/// One round of the race: an edit-approve (ana), a plain approve (bob) and the
/// host's close, all at once on one editable hold (the close, which skips HTTP,
/// sent `close_after` later, the edit `edit_after` later, so that each may win).
/// Returns which one won.
async fn race_once(
    app: &TestApp,
    rt: &Runtime,
    (close_after, edit_after): (Duration, Duration),
) -> &'static str {
    let (_, effect) = held_call(rt, true).await;
    let digest = arguments_digest(&held());
    let edit = json!({"repo": "acme/app", "title": "Raced edit"});
    let ana = app.person("acme", "ana");
    let bob = app.person("acme", "bob");
    let path = approve_path(&effect);
    let edit_body = json!({"approved": true, "argumentsDigest": digest, "editedArguments": edit});
    let plain_body = json!({"approved": true, "argumentsDigest": digest});
    let (edited, plain, closed) = tokio::join!(
        async {
            tokio::time::sleep(edit_after).await;
            ana.post_keyed(&path, "race-edit", &edit_body).await
        },
        bob.post_keyed(&path, "race-plain", &plain_body),
        async {
            tokio::time::sleep(close_after).await;
            rt.close_interaction(&effect, CloseReason::Interrupted)
                .await
        },
    );
    app.wait_idle().await;
    let events = app.events("acme").await;
    let released = releases(&events, &effect);
    let closes = named(&events, "interaction-closed", &effect);
    let fin = finished(&events, &effect);
    let wins = [edited.status == 204, plain.status == 204, closed.is_ok()];
    assert_eq!(
        wins.iter().filter(|w| **w).count(),
        1,
        "exactly one wins: {edited:?} {plain:?} {closed:?}"
    );
    for loser in [&edited, &plain].into_iter().filter(|r| r.status != 204) {
        assert_eq!((loser.status, loser.code()), (409, "NRY-0009"), "{loser:?}");
    }
    if let Err(e) = &closed {
        assert!(e.to_string().contains("NRY-0009"), "{e}");
    }
    let winner = match wins {
        [true, false, false] => "edit",
        [false, true, false] => "plain",
        _ => "close",
    };
    match winner {
        "edit" => {
            assert!(closes.is_empty() && fin.is_empty(), "{closes:?} {fin:?}");
            assert_eq!(released.len(), 1);
            assert!(matches!(released[0],
                EventData::ToolCallReleased { edited: true, arguments, approved_by, .. }
                    if *arguments == edit && approved_by.as_str() == "ana"));
        }
        "plain" => {
            assert!(closes.is_empty() && fin.is_empty(), "{closes:?} {fin:?}");
            assert_eq!(released.len(), 1);
            assert!(matches!(released[0],
                EventData::ToolCallReleased { edited: false, arguments, approved_by, .. }
                    if *arguments == held() && approved_by.as_str() == "bob"));
        }
        _ => {
            assert!(released.is_empty(), "{released:?}");
            assert_eq!(closes.len(), 1, "{closes:?}");
            assert_eq!(fin.len(), 1, "the closed call finishes once");
        }
    }
    let audit = audited(app, &effect).await;
    assert_eq!(audit.len(), usize::from(winner != "close"), "{audit:?}");
    let stored = app.interaction("acme", &effect).await.expect("stored");
    assert_eq!(
        stored.state,
        if winner == "close" {
            State::Closed
        } else {
            State::Resolved
        }
    );
    winner
}

#[tokio::test]
async fn an_edit_racing_an_approve_and_a_close_resolves_once() {
    let app = TestApp::start_with(holdpoint_tests::app::AppOptions {
        workers: 2,
        ..Default::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let mut winners = Vec::new();
    for i in 0..12u64 {
        let close_after = Duration::from_millis((i % 4) * 4);
        let edit_after = Duration::from_millis(if i % 3 == 2 { 3 } else { 0 });
        winners.push(race_once(&app, &rt, (close_after, edit_after)).await);
    }
    eprintln!("winners: {winners:?}");
}

#[tokio::test]
async fn the_cli_edits_then_approves_with_the_digest_it_showed() {
    let (app, key, _jwks) = crate::operator::jwt_app().await;
    let rt = app.runtime("acme").await;
    let (_, editable) = held_call(&rt, true).await;
    let (_, fixed) = held_call(&rt, false).await;
    let token = key.sign(&holdpoint_tests::jwt::claims("acme", "ana"));
    let run = |args: Vec<String>| {
        let mut args = args;
        args.extend([
            "--url".into(),
            app.base.clone(),
            "--token".into(),
            token.clone(),
        ]);
        async move { crate::operator::cli(&args).await }
    };
    let approve = |id: &str, edit: &str| {
        vec![
            "approve".to_owned(),
            id.to_owned(),
            "--edit".to_owned(),
            edit.to_owned(),
        ]
    };
    // Refused before anything is sent: not JSON, not an object.
    for bad in ["{repo: 1", "[1, 2]", "\"text\""] {
        let (ok, _, err) = run(approve(&editable, bad)).await;
        assert!(!ok && err.contains("--edit"), "{bad}: {err}");
    }
    // Refused by the server: the hold does not allow edits.
    let (ok, _, err) = run(approve(&fixed, r#"{"repo": "x"}"#)).await;
    assert!(!ok && err.contains("409 NRY-0028"), "{err}");
    app.wait_idle().await;
    for effect in [&editable, &fixed] {
        assert_eq!(state_of(&app, "acme", effect).await, State::Pending);
    }
    let (ok, _, err) = run(vec!["show".into(), editable.clone()]).await;
    assert!(ok && !err.contains("NRY"), "{err}");

    let edit = json!({"repo": "acme/app", "title": "From the CLI"});
    let (ok, out, err) = run(approve(&editable, &edit.to_string())).await;
    assert!(ok, "{err}");
    assert!(out.contains("edited to"), "{out}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    let released = releases(&events, &editable);
    assert_eq!(released.len(), 1);
    assert!(matches!(
        released[0],
        EventData::ToolCallReleased { edited: true, arguments, arguments_digest: d, .. }
            if *arguments == edit && *d == arguments_digest(&held())
    ));
}

//! Who may decide (README "Assignees"): an interaction that names people and
//! groups refuses everyone else of its organisation with 403 `NRY-0037` and
//! changes nothing, another organisation still gets the 404 of a missing
//! interaction, the listing filters `assignee=me`, groups come from the configured
//! claim of a verified token (look-alike names never match), and the runtime's
//! reassignment is one event and one audit record per change.

use std::time::Duration;

use holdpoint_client::{ClientError, Placement, Runtime};
use holdpoint_domain::{Assignees, EventData, SessionMode, State};
use holdpoint_ingress::IdentityMode;
use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
use holdpoint_tests::app::{AppOptions, Reply, TestApp};
use holdpoint_tests::jwt::{AUDIENCE, ISSUER, JwksServer, TestKey, claims};
use serde_json::{Value, json};

use crate::common::*;
use crate::rpc::{Rpc, answer};

/// Holds a call at a new blocking session's placement, assigned to `assignees`;
/// returns the placement and the effect id.
async fn hold_assigned(rt: &Runtime, assignees: Assignees) -> (Placement, String) {
    let session = open_session(rt, SessionMode::Blocking).await;
    let at = placement(&session).assigned_to(assignees);
    let eff = hold_call(rt, &at, "deploy", json!({"service": "api"}), Some("prod")).await;
    (at, eff)
}

fn approve_path(eff: &str) -> String {
    format!("/v1/interactions/{eff}/approve")
}

#[track_caller]
fn assert_refused(r: &Reply, what: &str) {
    assert_eq!((r.status, r.code()), (403, "NRY-0037"), "{what}: {r:?}");
}

/// Every `interaction-resolved` and `tool-call-released` of `eff`.
async fn decisions(app: &TestApp, eff: &str) -> usize {
    let events = app.events("acme").await;
    named(&events, "interaction-resolved", eff).len()
        + named(&events, "tool-call-released", eff).len()
}

#[tokio::test]
async fn only_assignees_may_answer_and_a_refusal_changes_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_assigned(
        &rt,
        Assignees::of(&["ana"], &["oncall"]).expect("assignees"),
    )
    .await;
    let yes = json!({"approved": true});

    // Not assigned: refused, whatever the body, with or without a key.
    let bob = app.person("acme", "bob");
    assert_refused(&bob.post(&approve_path(&eff), &yes).await, "bob");
    assert_refused(
        &bob.post_keyed(&approve_path(&eff), "k-bob", &json!({"approved": false}))
            .await,
        "bob denying",
    );
    // Look-alike groups and people: byte for byte, no folding or trimming; a name
    // that is not a group name (a space, Cyrillic `о`) is left out of the caller's
    // groups.
    for (person, groups) in [
        ("bob", "OnCall"),
        // (HTTP trims a header value's outer spaces; the token test covers
        // `"oncall "`.)
        ("bob", "on call"),
        ("bob", "\u{043e}ncall"),
        ("bob", "on-call,oncall2,ONCALL"),
        ("Ana", ""),
        ("an", ""),
        ("ana@acme", ""),
    ] {
        let p = app.person("acme", person).with_groups(groups);
        assert_refused(
            &p.post(&approve_path(&eff), &yes).await,
            &format!("{person:?} in {groups:?}"),
        );
    }
    // Another organisation: the 404 of a missing interaction, as ever.
    let r = app
        .person("globex", "ana")
        .with_groups("oncall")
        .post(&approve_path(&eff), &yes)
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"), "{r:?}");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    assert_eq!(decisions(&app, &eff).await, 0, "a refusal decides nothing");

    // The views say who it is for.
    let view = bob.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(
        view.body["assignees"],
        json!({"people": ["ana"], "groups": ["oncall"]})
    );
    assert_eq!(view.body["forYou"], false);
    let carol = app.person("acme", "carol").with_groups("dev,oncall");
    let view = carol.get(&format!("/v1/interactions/{eff}")).await;
    assert_eq!(view.body["forYou"], true);

    // A group member answers; the same key again replays.
    let r = carol.post_keyed(&approve_path(&eff), "k-carol", &yes).await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = carol.post_keyed(&approve_path(&eff), "k-carol", &yes).await;
    assert_eq!(r.status, 204, "the same key replays: {r:?}");
    let i = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(i.resolution.expect("resolved").by.as_str(), "carol");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &eff).len(), 1);
}

#[tokio::test]
async fn a2a_answers_from_non_assignees_are_refused() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = hold_assigned(&rt, Assignees::of(&["ana"], &[]).expect("assignees")).await;
    let meta = Some(json!({"interactionId": eff, "approved": true}));
    let parts = json!([{"data": {"approved": true}}]);
    let r = Rpc::new(&app, "acme", "bob")
        .send(answer(&at, "m-bob", parts.clone(), meta.clone()))
        .await;
    r.assert_error(-32602, "NRY-0037");
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    let r = Rpc::new(&app, "globex", "ana")
        .send(answer(&at, "m-globex", parts.clone(), meta.clone()))
        .await;
    r.assert_error(-32001, "NRY-0004");
    let r = Rpc::new(&app, "acme", "ana")
        .send(answer(&at, "m-ana", parts, meta))
        .await;
    assert_eq!(r.result()["task"]["status"]["state"], "TASK_STATE_WORKING");
    let i = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(i.resolution.expect("resolved").by.as_str(), "ana");
}

#[tokio::test]
async fn the_listing_filters_assignee_me() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, for_ana) = hold_assigned(&rt, Assignees::of(&["ana"], &[]).expect("a")).await;
    let (_, for_ops) = hold_assigned(&rt, Assignees::of(&[], &["ops"]).expect("a")).await;
    let (_, for_all) = open_approval(&rt).await;
    let ids = |p: &Reply| -> Vec<String> {
        p.body["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|v| v["interactionId"].as_str().expect("id").to_owned())
            .collect()
    };
    let ana = app.person("acme", "ana").with_groups("ops");
    let page = ana.get("/v1/interactions?assignee=me").await;
    assert_eq!(page.status, 200, "{page:?}");
    let mine = ids(&page);
    assert!(
        mine.contains(&for_ana) && mine.contains(&for_ops),
        "{mine:?}"
    );
    assert!(
        !mine.contains(&for_all),
        "open to all is not assigned: {mine:?}"
    );
    let bob = app.person("acme", "bob");
    let page = bob.get("/v1/interactions?assignee=me").await;
    assert_eq!(ids(&page), Vec::<String>::new());
    let all = ids(&bob.get("/v1/interactions").await);
    assert!(all.contains(&for_ana) && all.contains(&for_all), "{all:?}");
    let r = bob.get("/v1/interactions?assignee=bob").await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
}

#[tokio::test]
async fn assignees_out_of_bounds_open_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let names: Vec<String> = (0..33).map(|n| format!("p{n}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let at_bound: Vec<&str> = refs[..32].to_vec();
    let cases = [
        (Assignees::default(), "names nobody"),
        (Assignees::of(&refs, &[]).expect("a"), "at most 32"),
        (Assignees::of(&[], &refs).expect("a"), "at most 32"),
        (Assignees::of(&["ana", "ana"], &[]).expect("a"), "twice"),
        (Assignees::of(&[], &["ops", "ops"]).expect("a"), "twice"),
    ];
    for (n, (assignees, says)) in cases.into_iter().enumerate() {
        let at = placement(&session).assigned_to(assignees.clone());
        let r = rt
            .hold_for_approval(
                &at,
                holdpoint_client::HoldCall {
                    effect_id: format!("eff_bound{n}"),
                    call_id: format!("call-bound{n}"),
                    server: "github".into(),
                    tool: "deploy".into(),
                    arguments: json!({}),
                    reason: None,
                    editable: false,
                    approvals: None,
                },
            )
            .await;
        match r {
            Err(ClientError::Rejected(rej)) => {
                assert_eq!(rej.code.spec().code, "NRY-0001", "{assignees:?}");
                assert!(rej.message.contains(says), "{assignees:?}: {}", rej.message);
            }
            other => panic!("{assignees:?}: {other:?}"),
        }
        assert!(
            app.interaction("acme", &format!("eff_bound{n}"))
                .await
                .is_none()
        );
    }
    // At the bound: opened, and the 32nd person may answer.
    let (_, eff) = hold_assigned(&rt, Assignees::of(&at_bound, &at_bound).expect("a")).await;
    let r = app
        .person("acme", "p31")
        .post(&approve_path(&eff), &json!({"approved": true}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
}

/// The `assignees-changed` audit records of `eff`.
async fn audited(app: &TestApp, person: &str, eff: &str) -> Vec<Value> {
    audit_records(app, person, "assignees-changed", "interactionId", eff).await
}

#[tokio::test]
async fn the_runtime_reassigns_with_one_event_and_one_audit_record_per_change() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_assigned(&rt, Assignees::of(&["ana"], &[]).expect("a")).await;
    let bob = app.person("acme", "bob").with_groups("ops");
    assert_refused(
        &bob.post(&approve_path(&eff), &json!({"approved": true}))
            .await,
        "before",
    );

    let ops = Assignees::of(&[], &["ops"]).expect("a");
    let a = rt
        .reassign(&eff, Some(ops.clone()))
        .await
        .expect("reassign");
    assert_eq!(a, holdpoint_domain::Accepted::Reassigned);
    // The same assignees again: nothing changes, nothing is published.
    let a = rt.reassign(&eff, Some(ops.clone())).await.expect("again");
    assert_eq!(a, holdpoint_domain::Accepted::Unchanged);
    // Back to ana, then to everyone: two more changes.
    rt.reassign(&eff, Some(Assignees::of(&["ana"], &[]).expect("a")))
        .await
        .expect("back");
    rt.reassign(&eff, Some(ops.clone())).await.expect("ops");
    // Bounds hold for a reassignment too.
    match rt.reassign(&eff, Some(Assignees::default())).await {
        Err(ClientError::Rejected(r)) => assert_eq!(r.code.spec().code, "NRY-0001"),
        other => panic!("{other:?}"),
    }
    match rt.reassign("eff_missing", None).await {
        Err(ClientError::Rejected(r)) => assert_eq!(r.code.spec().code, "NRY-0004"),
        other => panic!("{other:?}"),
    }
    app.wait_idle().await;
    let events = app.events("acme").await;
    let changes: Vec<_> = named(&events, "interaction-reassigned", &eff)
        .into_iter()
        .map(|e| match &e.body {
            EventData::InteractionReassigned {
                assignees,
                previous,
                ..
            } => (previous.clone(), assignees.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let ana = Assignees::of(&["ana"], &[]).expect("a");
    assert_eq!(
        changes,
        vec![
            (Some(ana.clone()), Some(ops.clone())),
            (Some(ops.clone()), Some(ana.clone())),
            (Some(ana.clone()), Some(ops.clone())),
        ],
        "one event per change, in order"
    );
    let audit = audited(&app, "bob", &eff).await;
    assert_eq!(audit.len(), 3, "{audit:?}");
    assert_eq!(audit[0]["data"]["assignees"], json!({"groups": ["ops"]}));
    assert_eq!(audit[0]["data"]["previous"], json!({"people": ["ana"]}));

    // Now bob's group may answer; ana may not.
    assert_refused(
        &app.person("acme", "ana")
            .post(&approve_path(&eff), &json!({"approved": true}))
            .await,
        "ana after",
    );
    // Open to everyone again: anyone of the organisation answers.
    rt.reassign(&eff, None).await.expect("clear");
    let dan = app.person("acme", "dan");
    let r = dan
        .post(&approve_path(&eff), &json!({"approved": false}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    // A settled interaction's assignees no longer change.
    match rt.reassign(&eff, Some(ops)).await {
        Err(ClientError::Rejected(r)) => assert_eq!(r.code.spec().code, "NRY-0021"),
        other => panic!("{other:?}"),
    }
}

async fn jwt_app(groups_claim: &str) -> (TestApp, TestKey, JwksServer) {
    let key = TestKey::ed25519("ed-1");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let mut cfg = AuthConfig::new(ISSUER, JwksSource::Url(jwks.url.clone()));
    cfg.audience = Some(AUDIENCE.into());
    cfg.groups_claim = Some(groups_claim.into());
    cfg.refetch_cooldown = Duration::from_secs(30);
    let v = Verifier::new(cfg).await.expect("verifier");
    let app = TestApp::start_with(AppOptions {
        identity: IdentityMode {
            jwt: Some(v),
            ..IdentityMode::default()
        },
        ..AppOptions::default()
    })
    .await;
    (app, key, jwks)
}

#[tokio::test]
async fn groups_come_from_the_configured_claim_of_a_verified_token() {
    let (app, key, _jwks) = jwt_app("roles").await;
    let rt = app.runtime("acme").await;
    let (_, eff) = hold_assigned(&rt, Assignees::of(&[], &["oncall"]).expect("a")).await;
    let token = |roles: Value| {
        let mut c = claims("acme", "bob");
        c["roles"] = roles;
        c["groups"] = json!(["oncall"]); // not the configured claim: never read
        key.sign(&c)
    };
    let yes = json!({"approved": true});
    for roles in [
        json!([]),
        json!(["OnCall"]),
        json!(["oncall "]),
        json!(["\u{043e}ncall"]),
        json!([["oncall"]]),
        json!([{"name": "oncall"}]),
        json!("on-call"),
    ] {
        let r = app
            .bearer(&token(roles.clone()))
            .post(&approve_path(&eff), &yes)
            .await;
        assert_refused(&r, &roles.to_string());
    }
    // A claim that is not a string or an array, or names too many groups: the
    // token is refused (401), as any token Holdpoint cannot read.
    let many: Vec<String> = (0..257).map(|n| format!("g{n}")).collect();
    for roles in [json!(5), json!({"oncall": true}), json!(many)] {
        let r = app
            .bearer(&token(roles.clone()))
            .post(&approve_path(&eff), &yes)
            .await;
        assert_eq!((r.status, r.code()), (401, "NRY-0011"), "{roles}: {r:?}");
    }
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    // At the bound, among look-alikes, the real name matches.
    let mut at_bound: Vec<String> = (0..255).map(|n| format!("g{n}")).collect();
    at_bound.push("oncall".into());
    let r = app
        .bearer(&token(json!(at_bound)))
        .post(&approve_path(&eff), &yes)
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let i = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(i.resolution.expect("resolved").by.as_str(), "bob");
}

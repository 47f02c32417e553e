//! Questions with a form (README "Questions with a form"): an `ask_user` question
//! may carry the restricted JSON Schema of MCP elicitation's form mode.
//!
//! - a schema outside the subset is refused when the question is opened
//!   (`NRY-0035`) and nothing is opened;
//! - the schema reaches people: the interaction view's `detail` and
//!   `question-asked` carry it;
//! - a `value` that does not fit is `400 NRY-0036` with the JSON pointer of the
//!   first failing field and changes nothing; a fitting value resolves it once.

use holdpoint_client::ClientError;
use holdpoint_domain::{ErrorCode, EventData, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};

use crate::common::*;

fn form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "title": "Work email"},
            "seats": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
            "plan": {"type": "string", "enum": ["team", "business"]},
            "renew": {"type": "boolean"}
        },
        "required": ["email", "seats"]
    })
}

#[tokio::test]
async fn a_form_reaches_people_and_only_a_fitting_value_resolves_it() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;

    // Outside the subset: refused when opened, nothing opened.
    for bad in [
        json!({"type": "object", "properties": {"tags": {"type": "array"}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}),
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
    ] {
        let id = uuid::Uuid::new_v4();
        let r = rt
            .ask_user_form(
                &placement(&session),
                "call-bad",
                "Details?",
                bad.clone(),
                Some(id),
            )
            .await;
        match r {
            Err(ClientError::Rejected(rej)) => {
                assert_eq!(rej.code, ErrorCode::FormSchemaUnsupported, "{bad}: {rej:?}")
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert!(app.interaction("acme", &id.to_string()).await.is_none());
    }

    let q = rt
        .ask_user_form(
            &placement(&session),
            "call-form",
            "Who gets the licence?",
            form(),
            None,
        )
        .await
        .expect("form")
        .to_string();
    let ana = app.person("acme", "ana");
    let view = ana.get(&format!("/v1/interactions/{q}")).await;
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(view.body["detail"]["questions"][0]["schema"], form());
    app.wait_idle().await;
    let asked: Vec<Value> = app
        .events("acme")
        .await
        .into_iter()
        .filter(|e| e.subject == q)
        .filter_map(|e| match e.body {
            EventData::QuestionAsked { questions, .. } => serde_json::to_value(questions).ok(),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0][0]["schema"], form());

    let path = format!("/v1/interactions/{q}/respond");
    for (value, pointer) in [
        (json!({"seats": 5}), "/email"),
        (json!({"email": "ana", "seats": 5}), "/email"),
        (json!({"email": "ana@acme.example", "seats": 0}), "/seats"),
        (json!({"email": "ana@acme.example", "seats": 2.5}), "/seats"),
        (
            json!({"email": "ana@acme.example", "seats": 5, "plan": "gold"}),
            "/plan",
        ),
        (
            json!({"email": "ana@acme.example", "seats": 5, "other": 1}),
            "/other",
        ),
        (json!("ana@acme.example"), ""),
        // A field named like the question body is still a form field.
        (json!({"answers": [{"options": [0]}]}), "/answers"),
    ] {
        let r = ana.post(&path, &json!({"value": value})).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0036"), "{value}: {r:?}");
        assert_eq!(r.body["pointer"], pointer, "{value}: {r:?}");
    }
    let r = ana.post(&path, &json!({"approved": true})).await;
    assert_eq!((r.status, r.code()), (400, "NRY-0036"), "{r:?}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);

    let fits = json!({"email": "ana@acme.example", "seats": 12, "plan": "team", "renew": true});
    let r = ana
        .post_keyed(&path, "form-1", &json!({"value": fits}))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = ana
        .post_keyed(&path, "form-1", &json!({"value": fits}))
        .await;
    assert_eq!(r.status, 204, "the same key replays: {r:?}");
    app.wait_idle().await;
    let view = ana.get(&format!("/v1/interactions/{q}")).await;
    assert_ne!(view.body["state"], "pending", "{view:?}");
    assert_eq!(view.body["resolution"]["answer"]["value"], fits, "{view:?}");
    let resolved = app
        .events("acme")
        .await
        .into_iter()
        .filter(|e| e.subject == q)
        .filter(|e| matches!(e.body, EventData::InteractionResolved { .. }))
        .count();
    assert_eq!(resolved, 1);
}

#[tokio::test]
async fn over_a2a_the_status_carries_the_form_and_a_misfit_value_changes_nothing() {
    use crate::rpc::{Rpc, URI, answer, get};
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session);
    let q = rt
        .ask_user_form(&at, "call-a2a-form", "Who gets the licence?", form(), None)
        .await
        .expect("form")
        .to_string();
    let ana = Rpc::new(&app, "acme", "ana");
    let task = ana.call("GetTask", get(&at)).await;
    let detail = &task.result()["status"]["message"]["metadata"][URI]["detail"];
    assert_eq!(detail["questions"][0]["schema"], form(), "{:#}", task.body);

    let meta = |v: Value| Some(json!({"interactionId": q, "value": v}));
    // Each misfit names its first failing field, as REST's `pointer` does: the
    // ErrorInfo's metadata carries it (`pointer`), and nothing changes.
    for (n, (value, pointer)) in [
        (json!({"email": "ana"}), "/email"),
        (json!({"email": "ana@acme.example", "seats": 0}), "/seats"),
        (
            json!({"email": "ana@acme.example", "seats": 1, "x": 1}),
            "/x",
        ),
        (json!(["ana@acme.example"]), ""),
    ]
    .into_iter()
    .enumerate()
    {
        let r = ana
            .call(
                "SendMessage",
                answer(
                    &at,
                    &format!("m-misfit-{n}"),
                    json!([{"text": "x"}]),
                    meta(value.clone()),
                ),
            )
            .await;
        r.assert_error_for(&value.to_string(), -32602, "NRY-0036");
        assert_eq!(
            r.body["error"]["data"][0]["metadata"]["pointer"], pointer,
            "{value}: {:#}",
            r.body
        );
        assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
    }
    let fits = json!({"email": "ana@acme.example", "seats": 3});
    let r = ana
        .call(
            "SendMessage",
            answer(&at, "m2", json!([{"text": "x"}]), meta(fits.clone())),
        )
        .await;
    assert!(r.body.get("error").is_none(), "{:#}", r.body);
    app.wait_idle().await;
    let view = app
        .person("acme", "ana")
        .get(&format!("/v1/interactions/{q}"))
        .await;
    assert_eq!(view.body["resolution"]["answer"]["value"], fits, "{view:?}");
}

/// A refusal of the request as sent is not its key's answer (README "Only
/// decisions are replayed"): a person who mistyped a form value, or approved
/// arguments that had changed, sends the corrected request under the same key
/// (as an A2A client with its `answer:<interactionId>` message id does) and it
/// decides; from then on the key replays that decision, whatever body comes.
#[tokio::test]
async fn a_refused_request_leaves_its_key_free_for_the_corrected_one() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let q = rt
        .ask_user_form(
            &placement(&session),
            "call-form-key",
            "Who gets the licence?",
            form(),
            None,
        )
        .await
        .expect("form")
        .to_string();
    let ana = app.person("acme", "ana");
    let path = format!("/v1/interactions/{q}/respond");
    let misfit = json!({"value": {"email": "ana@acme.example", "seats": 51}});
    for _ in 0..2 {
        let r = ana.post_keyed(&path, "form-key", &misfit).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0036"), "{r:?}");
        assert_eq!(r.body["pointer"], "/seats", "{r:?}");
    }
    let fits = json!({"email": "ana@acme.example", "seats": 5});
    let r = ana
        .post_keyed(&path, "form-key", &json!({"value": fits}))
        .await;
    assert_eq!(
        r.status, 204,
        "the corrected value decides under the same key: {r:?}"
    );
    let r = ana.post_keyed(&path, "form-key", &misfit).await;
    assert_eq!(r.status, 204, "the key now replays its decision: {r:?}");
    app.wait_idle().await;
    let view = ana.get(&format!("/v1/interactions/{q}")).await;
    assert_eq!(view.body["resolution"]["answer"]["value"], fits, "{view:?}");

    // An approval of arguments the person did not see, then of the ones shown.
    let at = placement(&session);
    let effect = hold_call(&rt, &at, "merge", json!({"pr": 7}), None).await;
    let path = format!("/v1/interactions/{effect}/approve");
    let wrong = json!({"approved": true, "argumentsDigest": holdpoint_domain::digest::arguments_digest(&json!({"pr": 8}))});
    let r = ana.post_keyed(&path, "approve-key", &wrong).await;
    assert_eq!((r.status, r.code()), (409, "NRY-0010"), "{r:?}");
    let right = json!({"approved": true, "argumentsDigest": holdpoint_domain::digest::arguments_digest(&json!({"pr": 7}))});
    let r = ana.post_keyed(&path, "approve-key", &right).await;
    assert_eq!(r.status, 204, "the corrected approval decides: {r:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &effect).len(), 1);
    assert_eq!(named(&events, "interaction-resolved", &q).len(), 1);
}

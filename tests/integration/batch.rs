//! Answering many at once (README "Answering many at once"): `POST /v1/answers`.
//!
//! - each item is decided on its own, as its single operation decides it, and its
//!   result comes back in order (an item answered by someone else first, a
//!   missing one, another organisation's one, a malformed one);
//! - another organisation's interaction answers exactly like a missing one;
//! - the same request again with the same keys returns the same results and
//!   decides nothing twice;
//! - a body that is not a batch is `400 NRY-0034` and decides nothing;
//! - a batch of 100 decides all 100, each once.

use holdpoint_domain::{Event, EventData, SessionMode, State};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};

use crate::common::*;

/// One batch item.
fn item(id: &str, operation: &str, body: Value, key: &str) -> Value {
    json!({"interactionId": id, "operation": operation, "body": body, "idempotencyKey": key})
}

/// How many `interaction-resolved` events `id` has.
fn resolutions(events: &[Event], id: &str) -> usize {
    events
        .iter()
        .filter(|e| e.subject == id)
        .filter(|e| matches!(e.body, EventData::InteractionResolved { .. }))
        .count()
}

/// `(status, code)` of each result of a batch reply.
fn statuses(results: &Value) -> Vec<(u64, String)> {
    results
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    let status = r["status"].as_u64().unwrap_or(0);
                    let code = r["code"].as_str().unwrap_or("").to_owned();
                    (status, code)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn each_item_is_decided_on_its_own_in_order_and_a_retry_decides_nothing_twice() {
    let app = TestApp::start().await;
    let acme = app.runtime("acme").await;
    let beta = app.runtime("beta").await;
    let (_, a) = open_approval(&acme).await;
    let (_, b) = open_approval(&acme).await;
    let (_, c) = open_approval(&acme).await;
    let (_, q) = open_question(&acme, SessionMode::Blocking).await;
    let (_, theirs) = open_approval(&beta).await;
    let missing = "eff_0000000000000000";

    // Someone else answers `c` first.
    let bob = app.person("acme", "bob");
    let r = bob
        .post(
            &format!("/v1/interactions/{c}/approve"),
            &json!({"approved": false}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");

    let batch = json!({"items": [
        item(&a, "approve", json!({"approved": true}), "k-a"),
        item(&b, "approve", json!({"approved": false, "reason": "not now"}), "k-b"),
        item(&c, "approve", json!({"approved": true}), "k-c"),
        item(&theirs, "approve", json!({"approved": true}), "k-theirs"),
        item(missing, "approve", json!({"approved": true}), "k-missing"),
        item(&q, "answer", example_answer(), "k-q"),
        item(&a, "approve", json!({"approved": "yes"}), "k-a-bad"),
        item("not an id", "approve", json!({"approved": true}), "k-bad-id"),
        item(&b, "respond", json!({"value": true}), "k-b-again"),
    ]});
    let ana = app.person("acme", "ana");
    let first = ana.post("/v1/answers", &batch).await;
    assert_eq!(first.status, 200, "{first:?}");
    let results = &first.body["results"];
    let expected: Vec<(u64, String)> = [
        (204, ""),
        (204, ""),
        (409, "NRY-0009"),
        (404, "NRY-0004"),
        (404, "NRY-0004"),
        (204, ""),
        (400, "NRY-0001"),
        (400, "NRY-0001"),
        (409, "NRY-0009"),
    ]
    .iter()
    .map(|(s, c)| (*s, (*c).to_owned()))
    .collect();
    assert_eq!(statuses(results), expected, "{results:#}");
    let ids: Vec<&str> = results
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r["interactionId"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        ids,
        [&a, &b, &c, &theirs, missing, &q, &a, "not an id", &b],
        "in the items' order"
    );
    for r in results.as_array().into_iter().flatten() {
        if r["status"] == 204 {
            assert!(r.get("code").is_none(), "{r}");
        } else {
            assert!(r["title"].is_string() && r["message"].is_string(), "{r}");
        }
    }

    // Another organisation's interaction reads exactly as a missing one.
    let (t, m) = (&results[3], &results[4]);
    assert_eq!(t["title"], m["title"]);
    assert_eq!(
        t["message"]
            .as_str()
            .map(|s| s.replace(theirs.as_str(), "<id>")),
        m["message"].as_str().map(|s| s.replace(missing, "<id>")),
    );
    // And the same as the single operation says it.
    let single = ana
        .post(
            &format!("/v1/interactions/{theirs}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(single.status, 404);
    assert_eq!(single.body["message"], t["message"]);

    // The whole request again: the same results, nothing decided twice.
    let again = ana.post("/v1/answers", &batch).await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.body, first.body);
    app.wait_idle().await;

    let events = app.events("acme").await;
    for id in [&a, &b, &c, &q] {
        assert_eq!(resolutions(&events, id), 1, "{id}");
        assert_ne!(state_of(&app, "acme", id).await, State::Pending, "{id}");
    }
    let released: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.body, EventData::ToolCallReleased { .. }))
        .collect();
    assert_eq!(released.len(), 1, "only `a` was approved: {released:?}");
    assert_eq!(released[0].subject, a);
    // `b` was denied with its reason, `c` as bob decided it.
    let view = ana.get(&format!("/v1/interactions/{b}")).await;
    assert_eq!(
        view.body["resolution"]["answer"]["approved"], false,
        "{view:?}"
    );
    let view = ana.get(&format!("/v1/interactions/{c}")).await;
    assert_eq!(view.body["resolution"]["by"], "bob", "{view:?}");
    // Nothing reached the other organisation.
    assert_eq!(state_of(&app, "beta", &theirs).await, State::Pending);
    assert_eq!(resolutions(&app.events("beta").await, &theirs), 0);
}

#[tokio::test]
async fn a_body_that_is_not_a_batch_is_refused_whole_and_decides_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, a) = open_approval(&rt).await;
    let good = item(&a, "approve", json!({"approved": true}), "k-good");
    let too_many: Vec<Value> = (0..101)
        .map(|i| item(&a, "approve", json!({"approved": true}), &format!("k-{i}")))
        .collect();
    let mut no_key = good.clone();
    if let Some(o) = no_key.as_object_mut() {
        o.remove("idempotencyKey");
    }
    let mut extra = good.clone();
    extra["also"] = json!(1);
    let cases: Vec<(&str, Value)> = vec![
        ("not an object", json!([good])),
        ("no items", json!({})),
        ("items not an array", json!({"items": good})),
        ("no item", json!({"items": []})),
        ("101 items", json!({"items": too_many})),
        ("another field", json!({"items": [good], "dryRun": true})),
        ("an item without its key", json!({"items": [good, no_key]})),
        (
            "an item with another field",
            json!({"items": [good, extra]}),
        ),
        (
            "another operation",
            json!({"items": [good, item(&a, "close", json!({}), "k-x")]}),
        ),
        ("an item not an object", json!({"items": [good, 1]})),
    ];
    let ana = app.person("acme", "ana");
    for (what, body) in cases {
        let r = ana.post("/v1/answers", &body).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0034"), "{what}: {r:?}");
    }
    let r = ana
        .post_raw("/v1/answers", "text/plain", b"{}".to_vec())
        .await;
    assert_eq!(r.code(), "NRY-0014", "{r:?}");
    let r = ana
        .post_anonymous("/v1/answers", &json!({"items": [good]}))
        .await;
    assert_eq!(r.code(), "NRY-0011", "{r:?}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &a).await, State::Pending);
    assert_eq!(resolutions(&app.events("acme").await, &a), 0);
}

#[tokio::test]
async fn a_batch_of_a_hundred_decides_each_once() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let mut effects = Vec::new();
    for _ in 0..holdpoint_ingress::wire::MAX_BATCH {
        let at = placement(&session);
        effects.push(hold_call(&rt, &at, "merge", json!({"pr": 1}), None).await);
    }
    let items: Vec<Value> = effects
        .iter()
        .map(|e| item(e, "approve", json!({"approved": true}), &format!("k-{e}")))
        .collect();
    let r = app
        .person("acme", "ana")
        .post("/v1/answers", &json!({"items": items}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let got = statuses(&r.body["results"]);
    assert_eq!(got.len(), effects.len());
    assert!(got.iter().all(|(s, _)| *s == 204), "{got:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    for e in &effects {
        assert_eq!(resolutions(&events, e), 1, "{e}");
    }
}

#[tokio::test]
async fn the_cli_approves_several_ids_at_once_and_prints_each_outcome() {
    let (app, key, _jwks) = crate::operator::jwt_app().await;
    let rt = app.runtime("acme").await;
    let (_, a) = open_approval(&rt).await;
    let (_, b) = open_approval(&rt).await;
    let (_, c) = open_approval(&rt).await;
    // `c` is answered by someone else first.
    let bob = app.bearer(&key.sign(&holdpoint_tests::jwt::claims("acme", "bob")));
    let r = bob
        .post(
            &format!("/v1/interactions/{c}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let token = key.sign(&holdpoint_tests::jwt::claims("acme", "ana"));
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        v.extend([
            "--url".into(),
            app.base.clone(),
            "--token".into(),
            token.clone(),
        ]);
        v
    };
    let (ok, out, err) = crate::operator::cli(&args(&[
        "approve", &a, &b, &c, "--deny", "--reason", "batch", "--key", "run-1", "--json",
    ]))
    .await;
    assert!(!ok, "one of three was answered already: {out}");
    assert!(err.contains("1 of 3 not denied"), "{err}");
    let printed: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(
        statuses(&printed["results"]),
        [
            (204, String::new()),
            (204, String::new()),
            (409, "NRY-0009".to_owned())
        ],
        "{printed:#}"
    );
    // The same keys again: the same outcomes, nothing decided twice.
    let (_, again, _) = crate::operator::cli(&args(&[
        "approve", &a, &b, &c, "--deny", "--reason", "batch", "--key", "run-1", "--json",
    ]))
    .await;
    assert_eq!(again.trim(), out.trim());
    // The text form: one line per id.
    let (_, text, _) = crate::operator::cli(&args(&["approve", &a, &b])).await;
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("NRY-0009")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    // An id that cannot be read is not sent and gets its own line; the others are
    // answered.
    let (_, d) = open_approval(&rt).await;
    let (ok, text, err) = crate::operator::cli(&args(&["approve", &d, "eff_nope"])).await;
    assert!(!ok, "{text}");
    assert!(err.contains("1 of 2 not approved"), "{err}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("eff_nope") && l.contains("not sent") && l.contains("NRY-0004")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(d.as_str()) && l.contains("approved")),
        "{text}"
    );
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &d).await, State::Resolved);
    let events = app.events("acme").await;
    for id in [&a, &b, &c] {
        assert_eq!(resolutions(&events, id), 1, "{id}");
    }
    let view = bob.get(&format!("/v1/interactions/{a}")).await;
    assert_eq!(
        view.body["resolution"]["answer"]["approved"], false,
        "{view:?}"
    );
    assert_eq!(view.body["resolution"]["by"], "ana");
}

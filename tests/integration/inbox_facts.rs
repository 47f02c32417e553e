//! What a person deciding sees beside the request (issue 27, "What the inbox shows
//! a person deciding"): `GET /v1/interactions/{id}` names the agent the runtime
//! named, and `holdpoint pending --state resolved|all` lists what was decided, by
//! whom.

use holdpoint_domain::SessionMode;
use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn the_view_names_the_agent_and_pending_lists_resolved_ones_by_state() {
    let (app, key, _jwks) = crate::operator::jwt_app().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let at = placement(&session).for_agent("coder").expect("agent");
    let named = hold_call(&rt, &at, "merge", json!({"pr": 7}), None).await;
    let (_, plain) = open_approval(&rt).await;
    let token = key.sign(&holdpoint_tests::jwt::claims("acme", "ana"));
    let ana = app.bearer(&token);

    let view = ana.get(&format!("/v1/interactions/{named}")).await;
    assert_eq!(view.body["agent"], "coder", "{view:?}");
    assert_eq!(view.body["sessionId"], session.as_str());
    let view = ana.get(&format!("/v1/interactions/{plain}")).await;
    assert!(view.body.get("agent").is_none(), "{view:?}");

    let r = ana
        .post(
            &format!("/v1/interactions/{named}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;

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
    let ids = |out: &str| -> Vec<String> {
        let page: Value = serde_json::from_str(out).expect("json");
        page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["interactionId"].as_str().map(str::to_owned))
            .collect()
    };
    let (ok, out, err) = crate::operator::cli(&args(&["pending", "--json"])).await;
    assert!(ok, "{err}");
    assert_eq!(ids(&out), std::slice::from_ref(&plain));
    let (ok, out, err) =
        crate::operator::cli(&args(&["pending", "--state", "resolved", "--json"])).await;
    assert!(ok, "{err}");
    assert_eq!(ids(&out), std::slice::from_ref(&named));
    let (ok, out, err) =
        crate::operator::cli(&args(&["pending", "--state", "all", "--json"])).await;
    assert!(ok, "{err}");
    let all = ids(&out);
    assert!(all.contains(&named) && all.contains(&plain), "{all:?}");
    // The text form says who decided a settled one.
    let (ok, out, err) = crate::operator::cli(&args(&["pending", "--state", "resolved"])).await;
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(named.as_str()))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("resolved by ana"), "{line}");
    // A page past the first says its state in the command it prints.
    let (ok, out, err) =
        crate::operator::cli(&args(&["pending", "--state", "all", "--limit", "1"])).await;
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("… more: holdpoint pending --state all --url ")),
        "{out}"
    );
    let (ok, _, err) = crate::operator::cli(&args(&["pending", "--state", "someday"])).await;
    assert!(!ok && err.contains("someday"), "{err}");
}

//! Remembered approval rules and the decision audit, against real nats-server:
//!
//! - each scope (session, agent, organisation) matches where it should and nowhere
//!   else (another session, another agent, another organisation);
//! - the most specific scope wins, and a deny beats an allow at the same scope;
//! - an expired rule and a revoked rule stop matching on the next hold;
//! - a rule narrowed to an arguments digest does not match other arguments;
//! - `remember` on a question (or a connection) is refused and writes nothing;
//! - the audit holds exactly the approval decisions and rule changes, never a
//!   question, and pages with `after` and `limit`;
//! - a rule's decision under a worker that dies after its write (and under
//!   `kill -9`) is made once;
//! - an A2A answer remembers through the extension metadata (and is refused on a
//!   question), and a call held with `holdpoint runtime hold --agent` meets its
//!   agent's rules;
//! - a deny remembered through respond; a revocation audited once, however late it
//!   is repeated, and completed by the next DELETE when its call died before the
//!   record; a rule's write relayed after the duplicate window does not undo its
//!   revocation.

use std::time::Duration;

use holdpoint_client::{AgentManifest, HoldCall, Placement, Runtime};
use holdpoint_domain::{CallResult, Decider, Event, EventData, SessionMode, State};
use holdpoint_tests::app::{AppOptions, Person, TestApp};
use holdpoint_tests::nats::wait_for;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::common::*;

const SERVER: &str = "github";
const TOOL: &str = "create_pull_request";

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Opens a blocking session; returns a placement on it (for `agent`, if given).
async fn session(rt: &Runtime, agent: Option<&str>) -> Placement {
    let s = unique("s");
    rt.open_session(&s, SessionMode::Blocking)
        .await
        .expect("session");
    let at = placement(&s);
    match agent {
        Some(a) => at.for_agent(a).expect("agent"),
        None => at,
    }
}

/// Holds a call of `tool` with `arguments` on `at`; returns its effect id once the
/// worker decided the opening.
async fn hold(rt: &Runtime, at: &Placement, tool: &str, arguments: Value) -> String {
    let effect = unique("eff");
    rt.hold_for_approval(
        at,
        HoldCall {
            effect_id: effect.clone(),
            call_id: format!("call-{effect}"),
            server: SERVER.into(),
            tool: tool.into(),
            arguments,
            reason: None,
            editable: false,
            approvals: None,
        },
    )
    .await
    .expect("hold");
    effect
}

/// Opens a connection request on `at`; returns its id.
async fn connection(rt: &Runtime, at: &Placement) -> String {
    let agent =
        AgentManifest::from_markdown("---\nloop:\n  connections: true\n---\n").expect("manifest");
    rt.request_connection(&agent, at, &unique("call"), "Linear", "file tickets", None)
        .await
        .expect("connection")
        .to_string()
}

fn args(n: u32) -> Value {
    json!({"repo": "acme/app", "title": format!("Fix {n}")})
}

/// Approves (or denies) `eff` as `who` with `remember`; returns the reply.
async fn decide(
    who: &Person,
    eff: &str,
    approved: bool,
    remember: Value,
) -> holdpoint_tests::app::Reply {
    who.post(
        &format!("/v1/interactions/{eff}/approve"),
        &json!({"approved": approved, "remember": remember}),
    )
    .await
}

/// The live rules `who` sees (every page).
async fn rules(who: &Person) -> Vec<Value> {
    rules_in(who, "live").await
}

/// The rules `who` sees with `state` (`live` or `all`), every page.
async fn rules_in(who: &Person, state: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/rules?state={state}&limit=2&cursor={c}"),
            None => format!("/v1/rules?state={state}&limit=2"),
        };
        let r = who.get(&path).await;
        assert_eq!(r.status, 200, "{r:?}");
        out.extend(r.body["items"].as_array().cloned().unwrap_or_default());
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

/// The whole audit `who` sees, paged `limit` at a time.
async fn audit(who: &Person, limit: usize) -> Vec<(u64, Event)> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let r = who
            .get(&format!("/v1/audit?after={after}&limit={limit}"))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let items = r.body["items"].as_array().cloned().unwrap_or_default();
        for i in &items {
            let seq = i["sequence"].as_u64().expect("sequence");
            assert!(seq > after, "pages move forward");
            out.push((
                seq,
                serde_json::from_value(i["record"].clone()).expect("event"),
            ));
        }
        after = r.body["nextAfter"].as_u64().expect("nextAfter");
        if items.len() < limit {
            return out;
        }
    }
}

/// How `eff` stands: its state and, when a rule decided, that rule's id.
async fn state_of(app: &TestApp, org: &str, eff: &str) -> (State, Option<String>) {
    let i = app.interaction(org, eff).await.expect("stored");
    let by_rule = i
        .resolution
        .as_ref()
        .map(|r| r.key.as_str().to_owned())
        .filter(|k| k.starts_with("rul_"));
    (i.state, by_rule)
}

async fn assert_pending(app: &TestApp, org: &str, eff: &str, why: &str) {
    assert_eq!(
        state_of(app, org, eff).await,
        (State::Pending, None),
        "{why}"
    );
}

async fn assert_allowed_by(app: &TestApp, org: &str, eff: &str, rule: &str, why: &str) {
    assert_eq!(
        state_of(app, org, eff).await,
        (State::Resolved, Some(rule.to_owned())),
        "{why}"
    );
}

async fn assert_denied_by(app: &TestApp, org: &str, eff: &str, rule: &str, why: &str) {
    let i = app.interaction(org, eff).await.expect("stored");
    assert_eq!(i.state, State::Finished, "{why}");
    assert_eq!(
        i.resolution.as_ref().map(|r| r.key.as_str()),
        Some(rule),
        "{why}"
    );
    assert!(
        matches!(&i.result, Some(CallResult::Error { code, .. }) if code == "tool.denied"),
        "{why}: {:?}",
        i.result
    );
}

/// The id of the rule `who` wrote last (the newest rule `who` sees with that author).
async fn rule_written_from(who: &Person, eff: &str) -> String {
    rules(who)
        .await
        .into_iter()
        .find(|r| r["fromInteraction"] == eff)
        .and_then(|r| r["id"].as_str().map(str::to_owned))
        .expect("a rule written from the answer")
}

#[tokio::test]
async fn each_scope_matches_where_it_should_and_nowhere_else() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let other_org = app.runtime("globex").await;
    let ana = app.person("acme", "ana");

    // Session scope: the same session only.
    let s1 = session(&rt, Some("bot-a")).await;
    let first = hold(&rt, &s1, TOOL, args(1)).await;
    let r = decide(&ana, &first, true, json!({"scope": "session"})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let session_rule = rule_written_from(&ana, &first).await;
    let same_session = hold(&rt, &s1, TOOL, args(2)).await;
    assert_allowed_by(&app, "acme", &same_session, &session_rule, "same session").await;
    let s2 = session(&rt, Some("bot-a")).await;
    let other_session = hold(&rt, &s2, TOOL, args(2)).await;
    assert_pending(&app, "acme", &other_session, "another session").await;
    let other_tool = hold(&rt, &s1, "merge_pull_request", args(2)).await;
    assert_pending(&app, "acme", &other_tool, "another tool").await;

    // The rule's decision: released at once, approvedBy naming the rule and its
    // author, the same events as a person's decision, nothing pending.
    let events = app.events("acme").await;
    let released = named(&events, "tool-call-released", &same_session);
    assert_eq!(released.len(), 1, "{events:?}");
    match &released[0].body {
        EventData::ToolCallReleased {
            approved_by, rule, ..
        } => {
            assert_eq!(
                approved_by.as_str(),
                format!("ana (rule {session_rule})"),
                "approvedBy names the rule and its author"
            );
            assert_eq!(
                rule.as_ref().map(|r| r.as_str()),
                Some(session_rule.as_str())
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        named(&events, "interaction-resolved", &same_session).len(),
        1
    );
    assert!(
        named(&events, "approval-requested", &same_session).is_empty(),
        "no pending interaction is shown to anyone"
    );
    let pending = ana.get("/v1/interactions?state=pending").await;
    let pending_ids: Vec<&str> = pending.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["interactionId"].as_str().or(i["id"].as_str()))
        .collect();
    assert!(
        !pending_ids.contains(&same_session.as_str()),
        "{pending_ids:?}"
    );
    assert!(
        pending_ids.contains(&other_session.as_str()),
        "{pending_ids:?}"
    );

    // Agent scope: the same agent in any session, no other agent, no call without one.
    let r = decide(&ana, &other_session, true, json!({"scope": "agent"})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let agent_rule = rule_written_from(&ana, &other_session).await;
    let s3 = session(&rt, Some("bot-a")).await;
    let same_agent = hold(&rt, &s3, TOOL, args(3)).await;
    assert_allowed_by(
        &app,
        "acme",
        &same_agent,
        &agent_rule,
        "same agent, new session",
    )
    .await;
    let s4 = session(&rt, Some("bot-b")).await;
    let other_agent = hold(&rt, &s4, TOOL, args(3)).await;
    assert_pending(&app, "acme", &other_agent, "another agent").await;
    let s5 = session(&rt, None).await;
    let no_agent = hold(&rt, &s5, TOOL, args(3)).await;
    assert_pending(&app, "acme", &no_agent, "a call with no agent").await;
    // Scope agent needs an agent: refused, nothing written.
    let before = rules(&ana).await.len();
    let r = decide(&ana, &no_agent, true, json!({"scope": "agent"})).await;
    assert_eq!((r.status, r.code()), (400, "NRY-0026"), "{r:?}");
    assert_eq!(rules(&ana).await.len(), before);
    assert_pending(&app, "acme", &no_agent, "a refused answer changes nothing").await;

    // Organisation scope: every session of the organisation, no other organisation.
    let r = decide(&ana, &no_agent, true, json!({"scope": "organisation"})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let org_rule = rule_written_from(&ana, &no_agent).await;
    let s6 = session(&rt, Some("bot-c")).await;
    let anywhere = hold(&rt, &s6, TOOL, args(4)).await;
    assert_allowed_by(&app, "acme", &anywhere, &org_rule, "any session of acme").await;
    let g1 = session(&other_org, Some("bot-a")).await;
    let globex = hold(&other_org, &g1, TOOL, args(4)).await;
    assert_pending(&app, "globex", &globex, "another organisation").await;

    // Another organisation neither sees nor affects acme's rules.
    let gus = app.person("globex", "gus");
    assert!(rules(&gus).await.is_empty());
    for rule in [&session_rule, &agent_rule, &org_rule] {
        let r = gus.get(&format!("/v1/rules/{rule}")).await;
        assert_eq!((r.status, r.code()), (404, "NRY-0027"), "{r:?}");
        let r = gus.delete(&format!("/v1/rules/{rule}")).await;
        assert_eq!((r.status, r.code()), (404, "NRY-0027"), "{r:?}");
        let r = ana.get(&format!("/v1/rules/{rule}")).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body.get("revoked").is_none(), "{r:?}");
    }
    // The audit is read once every effect so far is in the public streams.
    app.wait_sourced().await;
    assert!(
        audit(&gus, 10).await.is_empty(),
        "globex's audit is its own"
    );
    assert_eq!(rules(&ana).await.len(), 3);
}

#[tokio::test]
async fn the_most_specific_scope_wins_and_deny_beats_allow_at_the_same_scope() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let tool = "delete_tag";

    // A session deny in s1, and an organisation allow written from s2.
    let s1 = session(&rt, None).await;
    let s2 = session(&rt, None).await;
    let a = hold(&rt, &s1, tool, args(1)).await;
    let b = hold(&rt, &s2, tool, args(1)).await;
    assert_eq!(
        decide(&ana, &a, false, json!({"scope": "session"}))
            .await
            .status,
        204
    );
    let session_deny = rule_written_from(&ana, &a).await;
    assert_pending(&app, "acme", &b, "held before any rule").await;
    assert_eq!(
        decide(&ana, &b, true, json!({"scope": "organisation"}))
            .await
            .status,
        204
    );
    let org_allow = rule_written_from(&ana, &b).await;
    // s1: the session deny is more specific than the organisation allow.
    let c = hold(&rt, &s1, tool, args(2)).await;
    assert_denied_by(
        &app,
        "acme",
        &c,
        &session_deny,
        "session deny beats organisation allow",
    )
    .await;
    let events = app.events("acme").await;
    assert_eq!(finished(&events, &c).len(), 1);
    assert!(named(&events, "tool-call-released", &c).is_empty());
    // Anywhere else: the organisation allow.
    let s3 = session(&rt, None).await;
    let d = hold(&rt, &s3, tool, args(2)).await;
    assert_allowed_by(&app, "acme", &d, &org_allow, "organisation allow elsewhere").await;

    // Same scope: an organisation allow and an organisation deny; and a session allow
    // in s6. Every hold is opened before any rule of this tool exists.
    let tool = "close_issue";
    let (s4, s5, s6) = (
        session(&rt, None).await,
        session(&rt, None).await,
        session(&rt, None).await,
    );
    let i = hold(&rt, &s4, tool, args(1)).await;
    let j = hold(&rt, &s4, tool, args(2)).await;
    let m = hold(&rt, &s6, tool, args(1)).await;
    assert_eq!(
        decide(&ana, &i, true, json!({"scope": "organisation"}))
            .await
            .status,
        204
    );
    let close_allow = rule_written_from(&ana, &i).await;
    assert_pending(&app, "acme", &j, "held before the rule").await;
    assert_eq!(
        decide(&ana, &j, false, json!({"scope": "organisation"}))
            .await
            .status,
        204
    );
    let close_deny = rule_written_from(&ana, &j).await;
    assert_pending(&app, "acme", &m, "held before the rules").await;
    assert_eq!(
        decide(&ana, &m, true, json!({"scope": "session"}))
            .await
            .status,
        204
    );
    let session_allow = rule_written_from(&ana, &m).await;
    let k = hold(&rt, &s5, tool, args(3)).await;
    assert_denied_by(
        &app,
        "acme",
        &k,
        &close_deny,
        "deny beats allow at the same scope",
    )
    .await;
    let n = hold(&rt, &s6, tool, args(3)).await;
    assert_allowed_by(
        &app,
        "acme",
        &n,
        &session_allow,
        "a session allow beats an organisation deny",
    )
    .await;
    // Revoking the deny lets the organisation allow decide again.
    let r = ana.delete(&format!("/v1/rules/{close_deny}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let l = hold(&rt, &s5, tool, args(4)).await;
    assert_allowed_by(
        &app,
        "acme",
        &l,
        &close_allow,
        "the allow once the deny is revoked",
    )
    .await;
}

#[tokio::test]
async fn expired_and_revoked_rules_stop_matching_on_the_next_hold() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");

    // Expiry: a rule that lives two seconds.
    let s1 = session(&rt, None).await;
    let a = hold(&rt, &s1, TOOL, args(1)).await;
    let r = decide(&ana, &a, true, json!({"scope": "session", "expiresIn": 2})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let short = rule_written_from(&ana, &a).await;
    let rule = ana.get(&format!("/v1/rules/{short}")).await;
    let expires_at = OffsetDateTime::parse(
        rule.body["expiresAt"].as_str().expect("expiresAt"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("rfc3339");
    let b = hold(&rt, &s1, TOOL, args(2)).await;
    assert_allowed_by(&app, "acme", &b, &short, "live rule").await;
    wait_for(
        Duration::from_secs(10),
        "the rule's expiry to pass",
        || async move { (OffsetDateTime::now_utc() > expires_at).then_some(()) },
    )
    .await;
    let c = hold(&rt, &s1, TOOL, args(3)).await;
    assert_pending(&app, "acme", &c, "expired rule").await;

    // Revocation: the next hold after DELETE returned is not decided by it.
    let r = decide(&ana, &c, true, json!({"scope": "session"})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let long = rule_written_from(&ana, &c).await;
    let d = hold(&rt, &s1, TOOL, args(4)).await;
    assert_allowed_by(&app, "acme", &d, &long, "live rule").await;
    let r = ana.delete(&format!("/v1/rules/{long}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["revoked"]["by"], "ana", "{r:?}");
    let e = hold(&rt, &s1, TOOL, args(5)).await;
    assert_pending(&app, "acme", &e, "revoked rule").await;
    // Revoking again returns the same revocation and records nothing new.
    let again = ana.delete(&format!("/v1/rules/{long}")).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["revoked"], r.body["revoked"]);
    app.wait_sourced().await;
    let revoked: Vec<_> = audit(&ana, 50)
        .await
        .into_iter()
        .filter(|(_, e)| e.name() == "rule-revoked")
        .collect();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    // The listing shows live rules by default; `state=all` shows the expired and
    // the revoked one too; any other state is refused.
    let ids = |rs: Vec<Value>| -> Vec<String> {
        rs.iter()
            .filter_map(|r| r["id"].as_str().map(str::to_owned))
            .collect()
    };
    let default = ana.get("/v1/rules").await;
    assert_eq!(default.status, 200, "{default:?}");
    let default = ids(default.body["items"]
        .as_array()
        .cloned()
        .unwrap_or_default());
    assert!(
        !default.contains(&short) && !default.contains(&long),
        "{default:?}"
    );
    assert_eq!(ids(rules(&ana).await), default);
    let all = ids(rules_in(&ana, "all").await);
    assert!(all.contains(&short) && all.contains(&long), "{all:?}");
    let r = ana.get("/v1/rules?state=revoked").await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
    // An unknown rule id, and a malformed one.
    let r = ana
        .delete("/v1/rules/rul_0123456789abcdef0123456789abcdef")
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0027"), "{r:?}");
    let r = ana.get("/v1/rules/bad%20id").await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
}

#[tokio::test]
async fn a_rule_narrowed_to_a_digest_does_not_match_other_arguments() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let s1 = session(&rt, None).await;
    let a = hold(&rt, &s1, TOOL, args(1)).await;
    // A digest that is not the call's: 409 NRY-0010, nothing written.
    let r = decide(
        &ana,
        &a,
        true,
        json!({"scope": "session", "argumentsDigest": "0".repeat(64)}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "NRY-0010"), "{r:?}");
    assert!(rules(&ana).await.is_empty());
    assert_pending(&app, "acme", &a, "refused answer").await;
    // The call's own digest (given as `true`).
    let r = decide(
        &ana,
        &a,
        true,
        json!({"scope": "session", "argumentsDigest": true}),
    )
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    let narrow = rule_written_from(&ana, &a).await;
    let rule = ana.get(&format!("/v1/rules/{narrow}")).await;
    let digest = holdpoint_domain::rules::arguments_digest(&args(1));
    assert_eq!(rule.body["argumentsDigest"], digest.as_str(), "{rule:?}");
    let same = hold(&rt, &s1, TOOL, args(1)).await;
    assert_allowed_by(&app, "acme", &same, &narrow, "same arguments").await;
    let other = hold(&rt, &s1, TOOL, args(2)).await;
    assert_pending(&app, "acme", &other, "other arguments").await;
    // Given as the digest string, on a deny.
    let other_digest = holdpoint_domain::rules::arguments_digest(&args(2));
    let r = decide(
        &ana,
        &other,
        false,
        json!({"scope": "session", "argumentsDigest": other_digest}),
    )
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    let deny = rule_written_from(&ana, &other).await;
    let again = hold(&rt, &s1, TOOL, args(2)).await;
    assert_denied_by(&app, "acme", &again, &deny, "same arguments, denied").await;
    let third = hold(&rt, &s1, TOOL, args(3)).await;
    assert_pending(&app, "acme", &third, "neither digest").await;
}

#[tokio::test]
async fn remember_on_a_question_or_a_connection_is_refused_and_writes_nothing() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let remember = json!({"scope": "organisation"});
    let mut body = example_answer();
    body["remember"] = remember.clone();
    let r = ana.post(&format!("/v1/questions/{q}/answer"), &body).await;
    assert_eq!((r.status, r.code()), (400, "NRY-0025"), "{r:?}");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("question"),
        "{r:?}"
    );
    let r = ana
        .post(
            &format!("/v1/interactions/{q}/respond"),
            &json!({"value": {"answers": [{"options": [0]}, {"options": [0]}]}, "remember": remember}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0025"), "{r:?}");
    let r = ana
        .post(
            &format!("/v1/interactions/{q}/approve"),
            &json!({"approved": true, "remember": remember}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0025"), "{r:?}");
    // A connection: the same.
    let s = session(&rt, None).await;
    let conn = connection(&rt, &s).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{conn}/respond"),
            &json!({"value": {"connected": true}, "remember": remember}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0025"), "{r:?}");
    // Bad remember shapes: 400 NRY-0001.
    let (_, eff) = open_approval(&rt).await;
    for bad in [
        json!({"scope": "galaxy"}),
        json!({"scope": "session", "expiresIn": 0}),
        json!({"scope": "session", "extra": 1}),
    ] {
        let r = decide(&ana, &eff, true, bad.clone()).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{bad}: {r:?}");
    }
    // Nothing was written or resolved.
    assert_eq!(
        app.interaction("acme", &q).await.expect("q").state,
        State::Pending
    );
    assert_eq!(
        app.interaction("acme", &conn).await.expect("c").state,
        State::Pending
    );
    assert_eq!(
        app.interaction("acme", &eff).await.expect("e").state,
        State::Pending
    );
    assert!(rules(&ana).await.is_empty());
    app.wait_sourced().await;
    assert!(audit(&ana, 10).await.is_empty());
}

#[tokio::test]
async fn the_audit_holds_exactly_the_approval_decisions_and_rule_changes() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    // A question and a connection answered: never audited.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    assert_eq!(answer_example(&ana, &q).await.status, 204);
    let s = session(&rt, None).await;
    let conn = connection(&rt, &s).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{conn}/respond"),
            &json!({"value": {"connected": true}}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    // A person denies; a person approves and remembers; the rule decides; the rule is
    // revoked; an approval expires.
    let a = hold(&rt, &s, TOOL, args(1)).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{a}/approve"),
            &json!({"approved": false, "reason": "not today"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let b = hold(&rt, &s, TOOL, args(2)).await;
    assert_eq!(
        decide(&ana, &b, true, json!({"scope": "session"}))
            .await
            .status,
        204
    );
    let rule = rule_written_from(&ana, &b).await;
    let c = hold(&rt, &s, TOOL, args(3)).await;
    assert_allowed_by(&app, "acme", &c, &rule, "rule").await;
    assert_eq!(ana.delete(&format!("/v1/rules/{rule}")).await.status, 200);
    let d = hold(&rt, &s, TOOL, args(4)).await;
    rt.close_interaction(&d, holdpoint_domain::CloseReason::Expired)
        .await
        .expect("expire");
    let e = hold(&rt, &s, TOOL, args(5)).await;
    rt.close_interaction(&e, holdpoint_domain::CloseReason::Interrupted)
        .await
        .expect("interrupt");

    // Audit records reach the audit stream by sourcing, shortly after each 2xx.
    app.wait_sourced().await;
    let all = audit(&ana, 2).await;
    let summary: Vec<(String, String, Option<String>, Option<String>)> = all
        .iter()
        .map(|(_, ev)| match &ev.body {
            EventData::ApprovalDecided {
                effect_id,
                outcome,
                decided_by,
                rule,
                ..
            } => (
                "approval-decided".to_owned(),
                effect_id.to_string(),
                Some(format!("{decided_by:?}/{outcome:?}")),
                rule.as_ref().map(ToString::to_string),
            ),
            EventData::RuleWritten { rule } | EventData::RuleRevoked { rule } => (
                ev.name().to_owned(),
                rule.from_interaction.to_string(),
                None,
                Some(rule.id.to_string()),
            ),
            other => panic!("not an audit record: {other:?}"),
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        summary,
        vec![
            (
                s("approval-decided"),
                a.clone(),
                Some(s("Person/Denied")),
                None
            ),
            (s("rule-written"), b.clone(), None, Some(rule.clone())),
            (
                s("approval-decided"),
                b.clone(),
                Some(s("Person/Allowed")),
                None
            ),
            (
                s("approval-decided"),
                c.clone(),
                Some(s("Rule/Allowed")),
                Some(rule.clone())
            ),
            (s("rule-revoked"), b.clone(), None, Some(rule.clone())),
            (
                s("approval-decided"),
                d.clone(),
                Some(s("Expiry/Expired")),
                None
            ),
        ],
        "exactly the approval decisions and rule changes, in order"
    );
    // Who, what (server, tool, digest; never the arguments), outcome, reason.
    for (_, ev) in &all {
        let json = serde_json::to_value(ev).expect("json");
        assert!(
            !json.to_string().contains("acme/app"),
            "arguments never reach the audit: {json}"
        );
        if let EventData::ApprovalDecided {
            server,
            tool,
            arguments_digest,
            reason,
            decided_by,
            effect_id,
            ..
        } = &ev.body
        {
            assert_eq!((server.as_str(), tool.as_str()), (SERVER, TOOL));
            assert!(arguments_digest.as_ref().is_some_and(|d| d.len() == 64));
            // The reason: the person's when given, else which rule or the expiry.
            match decided_by {
                Decider::Person if effect_id.as_str() == a => {
                    assert_eq!(reason.as_deref(), Some("not today"))
                }
                Decider::Person => assert_eq!(reason, &None),
                Decider::Rule => assert!(
                    reason
                        .as_ref()
                        .is_some_and(|r| r.contains(&rule) && r.contains("ana")),
                    "{ev:?}"
                ),
                Decider::Expiry => assert!(reason.is_some(), "{ev:?}"),
            }
        }
        assert_ne!(ev.subject, q, "never a question");
        assert_ne!(ev.subject, conn, "never a connection");
    }
    // Paging: after the last sequence, nothing.
    let last = all.last().map(|(s, _)| *s).expect("records");
    let r = ana.get(&format!("/v1/audit?after={last}&limit=5")).await;
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(0), "{r:?}");
    assert_eq!(r.body["nextAfter"].as_u64(), Some(last));
    for bad in [
        "/v1/audit?limit=0",
        "/v1/audit?limit=501",
        "/v1/audit?after=x",
    ] {
        let r = ana.get(bad).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{bad}: {r:?}");
    }
}

#[tokio::test]
async fn a_rule_decision_under_a_dying_worker_is_made_once() {
    let mut app = TestApp::start_with(AppOptions {
        topo: holdpoint_bus::Topology {
            ack_wait: Duration::from_secs(1),
            ..holdpoint_bus::Topology::default()
        },
        workers: 0,
        outcome_timeout: Duration::from_secs(2),
        ..AppOptions::default()
    })
    .await;
    let rt = app
        .runtime("acme")
        .await
        .with_timeout(Duration::from_secs(2));
    let ana = app.person("acme", "ana");
    app.start_worker().await;
    let s1 = session(&rt, None).await;
    let a = hold(&rt, &s1, TOOL, args(1)).await;
    assert_eq!(
        decide(&ana, &a, true, json!({"scope": "session"}))
            .await
            .status,
        204
    );
    let rule = rule_written_from(&ana, &a).await;
    app.stop_workers().await;

    // A worker that dies right after writing the rule's decision, before any event.
    let dying = app.spawn_worker_process(Some("after-write"));
    let call = HoldCall {
        effect_id: unique("eff"),
        call_id: unique("call"),
        server: SERVER.into(),
        tool: TOOL.into(),
        arguments: args(2),
        reason: None,
        editable: false,
        approvals: None,
    };
    let eff = call.effect_id.clone();
    let first = rt.hold_for_approval(&s1, call.clone()).await;
    assert!(first.is_err(), "the worker died before replying: {first:?}");
    wait_for(
        Duration::from_secs(20),
        "the worker to die at its failpoint",
        || {
            let running = app.process_running(dying);
            async move { (!running).then_some(()) }
        },
    )
    .await;
    assert_allowed_by(&app, "acme", &eff, &rule, "committed before the crash").await;
    // A live worker takes the redelivery; the runtime's retry replays.
    let live = app.spawn_worker_process(None);
    rt.with_timeout(Duration::from_secs(10))
        .hold_for_approval(&s1, call.clone())
        .await
        .expect("the retry gets the recorded outcome");

    // kill -9 while more rule-decided holds flow: each is decided once.
    let mut more = Vec::new();
    let rt10 = app.runtime("acme").await;
    for n in 0..6 {
        let c = HoldCall {
            effect_id: unique("eff"),
            call_id: unique("call"),
            server: SERVER.into(),
            tool: TOOL.into(),
            arguments: args(10 + n),
            reason: None,
            editable: false,
            approvals: None,
        };
        more.push(c.clone());
        let rt = rt10.clone();
        let at = s1.clone();
        tokio::spawn(async move {
            // Retried until decided: the command is redelivered to a live worker.
            for _ in 0..10 {
                if rt.hold_for_approval(&at, c.clone()).await.is_ok() {
                    return;
                }
            }
        });
        if n == 2 {
            app.kill_process(live);
            app.spawn_worker_process(None);
        }
    }
    let ids: Vec<String> = more
        .iter()
        .map(|c| c.effect_id.clone())
        .chain([eff.clone()])
        .collect();
    let events = wait_for(
        Duration::from_secs(30),
        "every rule decision's release",
        || {
            let app = &app;
            let ids = ids.clone();
            async move {
                let events = app.events("acme").await;
                ids.iter()
                    .all(|id| named(&events, "tool-call-released", id).len() == 1)
                    .then_some(events)
            }
        },
    )
    .await;
    app.wait_idle().await;
    let events_now = app.events("acme").await;
    assert_eq!(events.len(), events_now.len(), "nothing more arrives");
    assert_ids_consistent(&events_now);
    app.wait_sourced().await;
    let audit = audit(&ana, 100).await;
    for id in &ids {
        assert_allowed_by(&app, "acme", id, &rule, "decided by the rule").await;
        assert_eq!(
            named(&events_now, "tool-call-released", id).len(),
            1,
            "{id}"
        );
        assert_eq!(
            named(&events_now, "interaction-resolved", id).len(),
            1,
            "{id}"
        );
        assert_eq!(
            audit.iter().filter(|(_, e)| &e.subject == id).count(),
            1,
            "one audit record for {id}"
        );
    }
}

#[tokio::test]
async fn an_a2a_approval_remembers_through_the_extension_metadata() {
    // The A2A answer carries `remember` in the interactions extension's metadata,
    // as the REST approve body does: the rule it writes decides the next hold of the
    // same tool in the session at once, and names the person who answered. On a
    // question it is refused (invalid params, NRY-0025) and nothing is written.
    use crate::rpc::{Rpc, answer};
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let rpc = Rpc::new(&app, "acme", "ana");
    let at = session(&rt, None).await;
    let first = hold(&rt, &at, TOOL, args(1)).await;
    let r = rpc
        .send(answer(
            &at,
            "m-remember",
            json!([{"data": {"approved": true}}]),
            Some(json!({
                "interactionId": first,
                "approved": true,
                // As the Python SDK writes it: a Struct's numbers are doubles.
                "remember": {"scope": "session", "expiresIn": 3600.0},
            })),
        ))
        .await;
    r.result();
    let rule = rule_written_from(&ana, &first).await;
    let written = rules(&ana)
        .await
        .into_iter()
        .find(|r| r["id"] == rule.as_str())
        .expect("the rule");
    assert_eq!(written["scope"], "session", "{written}");
    assert_eq!(written["effect"], "allow", "{written}");
    assert_eq!(written["createdBy"], "ana", "{written}");
    assert!(
        written["expiresAt"].is_string(),
        "expiresIn 3600.0 read: {written}"
    );
    // The next hold of that tool in the session is allowed by the rule, with no person.
    let next = hold(&rt, &at, TOOL, args(2)).await;
    assert_allowed_by(&app, "acme", &next, &rule, "the rule remembered over A2A").await;
    // Another session: still asks a person.
    let elsewhere = session(&rt, None).await;
    let other = hold(&rt, &elsewhere, TOOL, args(1)).await;
    assert_pending(&app, "acme", &other, "a session rule in another session").await;

    // A question: no rule can be written about it.
    let (qat, q) = open_question(&rt, SessionMode::Blocking).await;
    let before = rules(&ana).await.len();
    let r = rpc
        .send(answer(
            &qat,
            "m-question",
            json!([{"data": {"answers": [{"options": [0]}, {"options": [0]}]}}]),
            Some(json!({"interactionId": q, "remember": {"scope": "organisation"}})),
        ))
        .await;
    assert_eq!(r.holdpoint(), "NRY-0025", "{}", r.body);
    assert_eq!(
        app.interaction("acme", &q).await.expect("q").state,
        State::Pending
    );
    assert_eq!(rules(&ana).await.len(), before);
}

#[tokio::test]
async fn a_call_held_from_the_command_line_for_an_agent_meets_its_agent_rules() {
    // `holdpoint runtime hold --agent` names the agent, so an `agent`-scoped rule
    // remembered in one session decides that agent's call held from a shell in
    // another session; an agent id that is not one is refused before anything is sent.
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let at = session(&rt, Some("reviewer")).await;
    let first = hold(&rt, &at, TOOL, args(1)).await;
    let r = decide(&ana, &first, true, json!({"scope": "agent"})).await;
    assert_eq!(r.status, 204, "{r:?}");
    let rule = rule_written_from(&ana, &first).await;

    let s2 = unique("s");
    rt.open_session(&s2, SessionMode::Blocking)
        .await
        .expect("session");
    let effect = unique("eff");
    let url = app.nats.url();
    let hold_from_shell = |agent: &'static str, effect: String| {
        let (url, s2) = (url.clone(), s2.clone());
        async move {
            crate::operator::cli(&[
                "runtime",
                "--nats-url",
                &url,
                "--org",
                "acme",
                "hold",
                "--session",
                &s2,
                "--task",
                "t-cli",
                "--call",
                &format!("call-{effect}"),
                "--effect",
                &effect,
                "--server",
                SERVER,
                "--tool",
                TOOL,
                "--arguments",
                r#"{"n":2}"#,
                "--agent",
                agent,
            ])
            .await
        }
    };
    let (ok, out, err) = hold_from_shell("reviewer", effect.clone()).await;
    assert!(ok, "stdout {out} stderr {err}");
    assert_allowed_by(
        &app,
        "acme",
        &effect,
        &rule,
        "the agent rule, from the shell",
    )
    .await;

    let (ok, _, err) = hold_from_shell("not an agent", unique("eff")).await;
    assert!(!ok);
    assert!(err.contains("--agent"), "{err}");
}

#[tokio::test]
async fn a_revocation_is_audited_once_and_a_late_copy_of_the_rule_does_not_undo_it() {
    // A one-second duplicate window, so that "later than the window" is testable.
    let window = Duration::from_secs(1);
    let app = TestApp::start_with(AppOptions {
        topo: holdpoint_bus::Topology {
            duplicate_window: window,
            ..holdpoint_bus::Topology::default()
        },
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let ana = app.person("acme", "ana");
    let s = session(&rt, None).await;
    let past_window = || {
        let until = OffsetDateTime::now_utc() + window * 2;
        wait_for(
            Duration::from_secs(10),
            "the duplicate window to pass",
            move || async move { (OffsetDateTime::now_utc() > until).then_some(()) },
        )
    };
    let revocations = |who: &Person| {
        let who = who.clone();
        async move {
            audit(&who, 50)
                .await
                .into_iter()
                .filter(|(_, e)| e.name() == "rule-revoked")
                .map(|(_, e)| e.id)
                .collect::<Vec<_>>()
        }
    };

    // A deny remembered through respond (a boolean value decides an approval).
    let a = hold(&rt, &s, TOOL, args(1)).await;
    let r = ana
        .post(
            &format!("/v1/interactions/{a}/respond"),
            &json!({"value": false, "remember": {"scope": "session"}}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let rule = rule_written_from(&ana, &a).await;
    let b = hold(&rt, &s, TOOL, args(2)).await;
    assert_denied_by(&app, "acme", &b, &rule, "the deny remembered by respond").await;
    // A person who answers it anyway is told the rule decided it.
    let late = decide(&ana, &b, true, Value::Null).await;
    assert_eq!((late.status, late.code()), (409, "NRY-0009"), "{late:?}");
    let said = late.body["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("by a remembered rule") && said.contains(&rule),
        "{said}"
    );

    // Revoked once; revoked again after the window: one audit record.
    let first = ana.delete(&format!("/v1/rules/{rule}")).await;
    assert_eq!(first.status, 200, "{first:?}");
    past_window().await;
    let again = ana.delete(&format!("/v1/rules/{rule}")).await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.body["revoked"], first.body["revoked"]);
    assert_eq!(revocations(&ana).await.len(), 1, "one rule-revoked record");

    // The revoked rule stays revoked, and holds are no longer decided by it.
    let now = ana.get(&format!("/v1/rules/{rule}")).await;
    assert_eq!(now.body["revoked"], first.body["revoked"], "{now:?}");
    let c = hold(&rt, &s, TOOL, args(3)).await;
    assert_pending(&app, "acme", &c, "after the revocation").await;
}

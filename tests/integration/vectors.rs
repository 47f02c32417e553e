//! `schemas/command-vectors.json`: the wire of the runtime commands as the Rust
//! domain computes it, for the SDKs in other languages to check themselves against.
//! Each vector is a command envelope in (as JSON text, so number spellings such as
//! `1.50` or `1e2` reach the domain as written), and out: the subject it is
//! published on, its `Nats-Msg-Id` (the command id), the canonical JSON of the
//! envelope as Rust serializes it, and, for an approval, the arguments digest.
//! The file also lists the error codes whose stored refusal is provisional (a
//! duplicate publish that reads one publishes again under a fresh id).
//!
//! This test regenerates the file and fails when it drifts from the code; run with
//! `HOLDPOINT_BLESS=1` to rewrite it. `sdks/python/tests/test_vectors.py` checks
//! every vector against the Python SDK.

use holdpoint_bus::Topology;
use holdpoint_domain::digest::{arguments_digest, canonical_json};
use holdpoint_domain::{Command, CommandEnvelope, ErrorCode, OpenRequest};
use holdpoint_tests::nats::workspace_root;
use serde_json::{Value, json};

/// The vectors' inputs: a name and the envelope's JSON text.
const INPUTS: &[(&str, &str)] = &[
    (
        "session-open blocking",
        r#"{"org":"acme","command":{"type":"session-open","session":"sess-1","mode":"blocking"}}"#,
    ),
    (
        "session-open product with a lane capacity (not part of the id)",
        r#"{"org":"acme","command":{"type":"session-open","session":"sess-1","mode":"product","laneCapacity":4}}"#,
    ),
    (
        "session-close",
        r#"{"org":"acme","command":{"type":"session-close","session":"sess-1"}}"#,
    ),
    (
        "session-end, ids that are not plain subject tokens",
        r#"{"org":"org.with.dots","command":{"type":"session-end","session":"s/1:+=~"}}"#,
    ),
    (
        "open approval, nested arguments, non-ASCII text, large numbers",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_1","session":"sess-1","lane":"main","taskId":"task-1","contextId":"ctx-1","callId":"call_1","request":{"kind":"approval","server":"github","tool":"create_pull_request","arguments":{"title":"Überprüfe „Zitate“ 🚀 \"quoted\"\n\ttab \u0001 \u007f \u2028","z":[1,-7,12345678901234567890123,-12345678901234567890123,18446744073709551615,-9223372036854775808,1.50,1e2,2.0,0.1,1e-7,1.5e300,-0.0,123456789012345680000.0,3.14159],"a":{"nested":{"deeper":[{"k":null,"b":true,"f":false}],"empty":{},"list":[]}},"B":"upper before lower"},"reason":"writes to a repository"}}}"#,
    ),
    (
        "open approval, numbers at the edges of serde_json's fixed notation",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_4","session":"sess-1","lane":"main","taskId":"task-1","contextId":"ctx-1","callId":"call_6","request":{"kind":"approval","server":"s","tool":"t","arguments":[1e-5,1e-6,0.000123,1e15,1e16,123456789012345.6,5e-324,1.7976931348623157e308,-1e-5,1E3,0.0,-0,9007199254740993,4.35,2.5e-3]}}}"#,
    ),
    (
        "open approval, object keys that are not ASCII (sorted by their UTF-8 bytes)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_5","session":"sess-1","lane":"main","taskId":"task-1","contextId":"ctx-1","callId":"call_7","request":{"kind":"approval","server":"s","tool":"t","arguments":{"z":1,"Z":2,"é":3,"e":4,"日本":5,"😀":6,"\uffff":7,"":8,"a\u0000b":9,"a":{"ß":[],"ss":{}}}}}}"#,
    ),
    (
        "open approval for an agent, expiresIn, onExpiry close",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_2","session":"sess-1","lane":"main","taskId":"task.2","contextId":"ctx-1","callId":"call_2","agent":"coder","request":{"kind":"approval","server":"fs","tool":"rm","arguments":[]},"expiresIn":600,"onExpiry":"close"}}"#,
    ),
    (
        "open approval with expiresAt (written with milliseconds, in UTC)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_3","session":"sess-1","lane":"main","taskId":"task-3","contextId":"ctx-3","callId":"call_3","request":{"kind":"approval","server":"s","tool":"t","arguments":{"n":0}},"expiresAt":"2031-12-31T23:59:59.123Z"}}"#,
    ),
    (
        "open approval, editable (written only when true)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_6","session":"sess-1","lane":"main","taskId":"task-6","contextId":"ctx-6","callId":"call_8","request":{"kind":"approval","server":"github","tool":"create_pull_request","arguments":{"title":"Fix the build"},"editable":true}}}"#,
    ),
    (
        "open a question with a form (its schema, with non-ASCII text, is part of the id)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"q_form_1","session":"sess-1","lane":"main","taskId":"task-7","contextId":"ctx-7","callId":"call_9","request":{"kind":"question","questions":[{"text":"Buchung für „Abendessen“?","schema":{"type":"object","properties":{"seats":{"type":"integer","minimum":1,"maximum":8,"title":"Plätze"},"area":{"type":"string","enum":["drinnen","Terrasse"]},"window":{"type":"boolean","default":false}},"required":["seats"]}}]}}}"#,
    ),
    (
        "open question, two questions, defaults written out",
        r#"{"org":"acme","command":{"type":"open","interactionId":"6f1c2b7e-8d3a-4f5e-9a1b-2c3d4e5f6a7b","session":"sess-1","lane":"main","taskId":"task-4","contextId":"ctx-4","callId":"call_4","request":{"kind":"question","questions":[{"text":"Which database?","options":["Postgres","SQLite — embedded"]},{"text":"Anything else?","options":[],"multiple":true,"allowText":true}]}}}"#,
    ),
    (
        "open connection, app and reason sent uncut (the worker cuts them at 80 and 280)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"con_0123456789abcdef0123456789abcdef","session":"sess-1","lane":"main","taskId":"task-5","contextId":"ctx-5","callId":"call_5","request":{"kind":"connection","app":"Google Calendar Google Calendar Google Calendar Google Calendar Google Calendar Google Calendar","reason":"to read the team's schedule"}}}"#,
    ),
    (
        "close interrupted, task named",
        r#"{"org":"acme","command":{"type":"close","interactionId":"eff_1","reason":"interrupted","taskId":"task-1"}}"#,
    ),
    (
        "close canceled, interaction not found (no task)",
        r#"{"org":"acme","command":{"type":"close","interactionId":"eff_404","reason":"canceled"}}"#,
    ),
    (
        "deadline in seconds",
        r#"{"org":"acme","command":{"type":"deadline","interactionId":"eff_1","taskId":"task-1","expiresIn":90}}"#,
    ),
    (
        "deadline at an instant given with an offset",
        r#"{"org":"acme","command":{"type":"deadline","interactionId":"eff_1","taskId":"task-1","expiresAt":"2031-06-01T12:00:00.5+02:00"}}"#,
    ),
    (
        "deadline moved, named by a change id",
        r#"{"org":"acme","command":{"type":"deadline","interactionId":"eff_1","taskId":"task-1","expiresIn":90,"changeId":"chg-2"}}"#,
    ),
    (
        "deadline cleared",
        r#"{"org":"acme","command":{"type":"deadline","interactionId":"eff_1","taskId":"task-1"}}"#,
    ),
    (
        "open approval with assignees and an escalation (a deadline and its escalation are part of the id)",
        r#"{"org":"acme","command":{"type":"open","interactionId":"eff_7","session":"sess-1","lane":"main","taskId":"task-8","contextId":"ctx-8","callId":"call_10","request":{"kind":"approval","server":"k8s","tool":"deploy","arguments":{"service":"api"}},"expiresIn":900,"assignees":{"people":["ana@acme.example"],"groups":["dev"]},"escalation":{"groups":["oncall","sre"]}}}"#,
    ),
    (
        "reassign to a person and a group (the change id names the change)",
        r#"{"org":"acme","command":{"type":"reassign","interactionId":"eff_7","taskId":"task-8","changeId":"chg-1","assignees":{"people":["bob@acme.example"],"groups":["oncall"]}}}"#,
    ),
    (
        "reassign to anyone of the organisation (no assignees), task unknown",
        r#"{"org":"acme","command":{"type":"reassign","interactionId":"eff_7","changeId":"chg-2"}}"#,
    ),
    (
        "tool-result ok with a nested output",
        r#"{"org":"acme","command":{"type":"tool-result","interactionId":"eff_1","result":{"status":"ok","output":{"url":"https://example.test/pr/1","n":[1,2.5]}},"taskId":"task-1"}}"#,
    ),
    (
        "tool-result error",
        r#"{"org":"acme","command":{"type":"tool-result","interactionId":"eff_2","result":{"status":"error","code":"tool.failed","message":"exit 1"},"taskId":"task.2"}}"#,
    ),
    (
        "turn-start",
        r#"{"org":"acme","command":{"type":"turn-start","session":"sess-1","lane":"main","turnId":"turn-1"}}"#,
    ),
    (
        "turn-finish",
        r#"{"org":"acme","command":{"type":"turn-finish","session":"sess-1","lane":"main","turnId":"turn-1"}}"#,
    ),
];

fn vectors() -> Value {
    let topo = Topology::default();
    let items: Vec<Value> = INPUTS
        .iter()
        .map(|(name, text)| {
            let env: CommandEnvelope = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("vector {name:?} is not a command: {e}"));
            let command = serde_json::to_value(&env).expect("serialize");
            let mut v = json!({
                "name": name,
                "input": text,
                "command": command,
                "subject": topo.command_subject(&env),
                "msgId": env.command_id().as_str(),
                "canonical": canonical_json(&command),
            });
            if let Command::Open(o) = &env.command
                && let OpenRequest::Approval { arguments, .. } = &o.request
            {
                v["argumentsDigest"] = json!(arguments_digest(arguments));
            }
            v
        })
        .collect();
    let provisional: Vec<&str> = ErrorCode::ALL
        .iter()
        .filter(|c| c.is_provisional())
        .map(|c| c.spec().code)
        .collect();
    json!({
        "$comment": "Generated from holdpoint_domain by tests/integration/vectors.rs; do not edit (HOLDPOINT_BLESS=1 regenerates it). Each vector: a command envelope in (`input`, JSON text), and what Rust computes: `command` (as serialized), `subject`, `msgId` (Nats-Msg-Id), `canonical` (canonical JSON of `command`) and, for approvals, `argumentsDigest`. `provisional`: codes whose stored refusal a duplicate publish does not replay.",
        "provisional": provisional,
        "vectors": items,
    })
}

#[test]
fn command_vectors_match_the_domain() {
    let path = workspace_root().join("schemas/command-vectors.json");
    let want = format!(
        "{}\n",
        serde_json::to_string_pretty(&vectors()).expect("json")
    );
    if std::env::var_os("HOLDPOINT_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "schemas/command-vectors.json is stale: rerun with HOLDPOINT_BLESS=1"
    );
}

//! Property tests over hostile bytes (RELIABILITY.md guarantee 5).
//!
//! `cargo fuzz` needs a nightly toolchain, which this project does not use (CI and
//! the development machines run stable only), so the fuzz targets are proptest
//! properties over raw bytes, over generated near-valid JSON (the bodies' own field
//! names, edge numbers and strings, nested), and over byte-level mutations of valid
//! bodies. They run in the normal test command:
//!
//! - every HTTP body (question answer, approve, respond, messages, A2A JSON-RPC at
//!   `/a2a`) through the real router in-process (`tower::ServiceExt::oneshot` on
//!   `holdpoint_ingress::router`) of a Holdpoint with a live worker on a real
//!   nats-server: no panic (the router turns one into a 500), no 5xx other than a
//!   retryable 503, every 4xx a catalog `NRY` code with the catalog's status,
//!   every JSON-RPC error a catalog code that is not `NRY-0051`;
//! - every decoder of wire and stored messages (`CommandEnvelope`, `Event`,
//!   `Interaction`, `Session`, `Outcome`): no panic.
//!
//! Each test prints how many executions it ran. `HOLDPOINT_FUZZ_CASES` sets the
//! cases per (target, strategy) (default 300 over HTTP, 3000 for decoders).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use holdpoint_domain::{
    AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ErrorCode, Event,
    IdempotencyKey, Interaction, InteractionId, OrgId, Outcome, PersonId, Session, SessionId,
    SessionMode,
};
use holdpoint_tests::app::{AppOptions, TestApp};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use tower::ServiceExt as _;

use crate::common::*;

const URI: &str = "https://docs.nylorun.com/a2a/interactions/v1";

fn cases(default: u32) -> u32 {
    std::env::var("HOLDPOINT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    })
}

const KEYS: &[&str] = &[
    "answers",
    "options",
    "text",
    "approved",
    "value",
    "reason",
    "argumentsDigest",
    "lane",
    "messageId",
    "connected",
    "jsonrpc",
    "method",
    "params",
    "id",
    "message",
    "role",
    "parts",
    "taskId",
    "contextId",
    "metadata",
    "data",
    "kind",
    "extensions",
    "interactionId",
    URI,
    "pageSize",
    "pageToken",
    "status",
    "historyLength",
    "file",
    "url",
    "mediaType",
    "org",
    "command",
    "type",
    "",
    "\u{0}",
    "é",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..70).prop_map(Value::from),
        prop_oneof![
            Just(json!(4294967295u64)),
            Just(json!(4294967296u64)),
            Just(json!(1099511627776u64)),
            Just(json!(i64::MIN)),
            Just(json!(u64::MAX)),
            Just(json!(0.5)),
            Just(json!(1.0)),
            Just(json!(-0.0)),
            Just(json!(1e308)),
        ],
        prop_oneof![
            Just(String::new()),
            Just("a".to_owned()),
            Just("\u{0}".to_owned()),
            Just("m-2".to_owned()),
            Just("ROLE_USER".to_owned()),
            Just("ROLE_AGENT".to_owned()),
            Just("2.0".to_owned()),
            Just("SendMessage".to_owned()),
            Just("GetTask".to_owned()),
            Just(URI.to_owned()),
            Just("é".repeat(300)),
            Just("a.b*>c".to_owned()),
            "[ -~]{0,12}",
            any::<String>(),
        ]
        .prop_map(Value::String),
    ]
}

/// Near-valid JSON: objects keyed by the bodies' own field names, nested.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| ((*k).to_owned(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// Serialized JSON, sometimes with a key repeated (serde_json maps cannot hold one).
fn json_bytes() -> impl Strategy<Value = Vec<u8>> {
    (json_value(), any::<bool>(), prop::sample::select(KEYS)).prop_map(|(v, dup, k)| {
        let mut s = v.to_string();
        if dup && s.starts_with('{') && s.len() > 2 {
            s.insert_str(1, &format!("{}:true,", Value::String(k.to_owned())));
        }
        s.into_bytes()
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Insert(usize, u8),
    Replace(usize, u8),
    Token(usize, &'static str),
    Repeat(usize, usize),
}

/// Byte-level mutations of `valid` bodies.
fn mutated(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        "\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "null",
        "-1",
        "1e999",
        "\\u0000",
        "\\ud800",
        "\u{0}",
        "\u{ff}",
        "true",
        "\"approved\":true,",
        "[[[[[[[[",
        "]]]]",
    ]);
    let mutation = prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Insert(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Replace(p, b)),
        (any::<usize>(), token).prop_map(|(p, t)| Mutation::Token(p, t)),
        (any::<usize>(), 1usize..40).prop_map(|(p, n)| Mutation::Repeat(p, n)),
    ];
    (
        prop::sample::select(valid),
        prop::collection::vec(mutation, 1..5),
    )
        .prop_map(|(mut b, ms)| {
            for m in ms {
                let len = b.len().max(1);
                match m {
                    Mutation::Delete(p) if !b.is_empty() => {
                        b.remove(p % b.len());
                    }
                    Mutation::Delete(_) => {}
                    Mutation::Insert(p, x) => b.insert(p % (b.len() + 1), x),
                    Mutation::Replace(p, x) => {
                        if !b.is_empty() {
                            let i = p % b.len();
                            b[i] = x;
                        }
                    }
                    Mutation::Token(p, t) => {
                        let i = p % (b.len() + 1);
                        b.splice(i..i, t.bytes());
                    }
                    Mutation::Repeat(p, n) => {
                        let i = p % len;
                        let end = (i + n).min(b.len());
                        let piece = b[i.min(b.len())..end].to_vec();
                        b.splice(end..end, piece);
                    }
                }
            }
            b
        })
}

/// A generated A2A request aimed at the tasks that wait: valid envelopes with
/// generated messages, parts and metadata.
fn a2a_request(tasks: Vec<String>, interactions: Vec<String>) -> impl Strategy<Value = Vec<u8>> {
    let task = prop_oneof![prop::sample::select(tasks), "[ -~]{0,10}"];
    let interaction = prop_oneof![prop::sample::select(interactions), "[ -~]{0,10}"];
    let part = prop_oneof![
        "[ -~]{0,20}".prop_map(|t| json!({"text": t})),
        json_value().prop_map(|d| json!({"data": d})),
        any::<bool>().prop_map(|b| json!({"data": {"approved": b}})),
        Just(json!({"url": "https://x.example/f", "mediaType": "text/plain"})),
        json_value(),
    ];
    let meta = prop_oneof![
        Just(Value::Null),
        (interaction, any::<bool>())
            .prop_map(|(i, a)| json!({URI: {"interactionId": i, "approved": a}})),
        json_value().prop_map(|v| json!({URI: {"value": v}})),
        json_value().prop_map(|v| json!({URI: v})),
        json_value(),
    ];
    let method = prop::sample::select(vec![
        "SendMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SendStreamingMessage",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetExtendedAgentCard",
        "message/send",
        "",
    ]);
    (
        method,
        task,
        "[ -~]{1,12}",
        prop::collection::vec(part, 0..3),
        meta,
        any::<bool>(),
        json_value(),
        0u8..4,
    )
        .prop_map(|(method, task, mid, parts, meta, ext, extra, shape)| {
            let mut message = json!({
                "role": "ROLE_USER", "messageId": mid, "taskId": task, "parts": parts,
            });
            if !meta.is_null() {
                message["metadata"] = meta;
            }
            if ext {
                message["extensions"] = json!([URI]);
            }
            let params = match shape {
                0 => json!({"message": message}),
                1 => json!({"id": task, "historyLength": extra}),
                2 => json!({"message": message, "configuration": extra}),
                _ => extra,
            };
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                .to_string()
                .into_bytes()
        })
}

fn catalog(code: &str) -> Option<ErrorCode> {
    ErrorCode::ALL
        .iter()
        .copied()
        .find(|c| c.spec().code == code)
}

/// What one answer must look like; `Err` is a property failure.
fn judge(path: &str, status: StatusCode, stream: bool, body: &[u8]) -> Result<(), String> {
    let s = status.as_u16();
    if s >= 500 && s != 503 {
        return Err(format!("{s} {}", String::from_utf8_lossy(body)));
    }
    if path == "/a2a" {
        if s != 200 {
            return Err(format!("JSON-RPC answered HTTP {s}"));
        }
        if stream {
            return Ok(());
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("not a JSON-RPC response: {v}"));
        }
        if let Some(e) = v.get("error") {
            let code = e["data"][0]["metadata"]["code"].as_str().unwrap_or("");
            match catalog(code) {
                Some(ErrorCode::Internal) | None => {
                    return Err(format!("error without a stable code: {e}"));
                }
                Some(_) => {}
            }
        }
        return Ok(());
    }
    if (400..500).contains(&s) || s == 503 {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| format!("{s} body not JSON: {e}"))?;
        let code = v["code"].as_str().unwrap_or("");
        let c = catalog(code).ok_or_else(|| format!("{s} without a catalog code: {v}"))?;
        if c.spec().status != s {
            return Err(format!("{code} answered with {s}"));
        }
    }
    Ok(())
}

#[test]
fn http_bodies_never_panic_and_every_refusal_has_a_stable_code() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (app, q, eff, session, tasks) = rt.block_on(async {
        let app = TestApp::start_with(AppOptions {
            outcome_timeout: Duration::from_secs(3),
            ..AppOptions::default()
        })
        .await;
        let runtime = app.runtime("acme").await;
        let (at, q) = open_question(&runtime, SessionMode::Blocking).await;
        let (ap, eff) = open_approval(&runtime).await;
        // Targets the fuzz may resolve, so later inputs meet answered ones too.
        let mut tasks = vec![at.task_id.to_string(), ap.task_id.to_string()];
        let mut ids = vec![q.clone(), eff.clone()];
        for _ in 0..4 {
            let (p, e) = open_approval(&runtime).await;
            tasks.push(p.task_id.to_string());
            ids.push(e);
        }
        (app, q, eff, at.session.to_string(), (tasks, ids))
    });
    let router = holdpoint_ingress::router(app.ingress_state());
    let (tasks, ids) = tasks;
    let seed = example_answer().to_string().into_bytes();
    let targets: Vec<(String, Vec<Vec<u8>>)> = vec![
        (format!("/v1/questions/{q}/answer"), vec![seed.clone()]),
        (
            "/v1/questions/no-such-question/answer".to_owned(),
            vec![seed],
        ),
        (
            format!("/v1/interactions/{eff}/approve"),
            vec![
                br#"{"approved":true}"#.to_vec(),
                br#"{"approved":false,"reason":"no"}"#.to_vec(),
                br#"{"value":true}"#.to_vec(),
            ],
        ),
        (
            format!("/v1/interactions/{}/respond", ids[2]),
            vec![
                br#"{"value":{"connected":true}}"#.to_vec(),
                br#"{"approved":true}"#.to_vec(),
            ],
        ),
        (
            format!("/v1/sessions/{session}/messages"),
            vec![br#"{"text":"hi","lane":"main","messageId":"m-1"}"#.to_vec()],
        ),
        (
            "/a2a".to_owned(),
            vec![
                json!({"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id": tasks[0]}})
                    .to_string()
                    .into_bytes(),
                json!({"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{
                    "role":"ROLE_USER","messageId":"m-2","taskId": tasks[1],
                    "parts":[{"data":{"approved":true}}],"extensions":[URI],
                    "metadata":{URI:{"interactionId": ids[1],"approved":true}}}}})
                .to_string()
                .into_bytes(),
            ],
        ),
    ];
    let executions = AtomicU64::new(0);
    let unavailable = AtomicU64::new(0);
    let mut per_target = Vec::new();
    let send = |path: &str, content_type: &str, body: Vec<u8>| -> Result<(), TestCaseError> {
        executions.fetch_add(1, Ordering::Relaxed);
        let req = Request::post(path)
            .header("content-type", content_type)
            .header("x-holdpoint-org", "acme")
            .header("x-holdpoint-person", "fuzz")
            .header("a2a-extensions", URI)
            .header("a2a-version", "1.0")
            .body(Body::from(body.clone()))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (status, stream, bytes) = rt.block_on(async {
            let resp = router.clone().oneshot(req).await.expect("infallible");
            let status = resp.status();
            let stream = resp
                .headers()
                .get("content-type")
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            // A stream stays open: its status and headers are the answer.
            let bytes = if stream {
                Default::default()
            } else {
                axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap_or_default()
            };
            (status, stream, bytes)
        });
        if status == StatusCode::SERVICE_UNAVAILABLE {
            unavailable.fetch_add(1, Ordering::Relaxed);
        }
        judge(path, status, stream, &bytes).map_err(|e| {
            TestCaseError::fail(format!(
                "POST {path} {:?}: {e}",
                String::from_utf8_lossy(&body[..body.len().min(400)])
            ))
        })
    };
    let n = cases(300);
    for (path, valid) in &targets {
        let before = executions.load(Ordering::Relaxed);
        let ct = "application/json";
        let raw = prop::collection::vec(any::<u8>(), 0..600);
        runner(n)
            .run(&raw, |b| send(path, ct, b))
            .unwrap_or_else(|e| panic!("raw bytes: {e}"));
        runner(n)
            .run(&json_bytes(), |b| send(path, ct, b))
            .unwrap_or_else(|e| panic!("near-valid JSON: {e}"));
        runner(n)
            .run(&mutated(valid.clone()), |b| send(path, ct, b))
            .unwrap_or_else(|e| panic!("mutated valid bodies: {e}"));
        if path == "/a2a" {
            runner(n * 2)
                .run(&a2a_request(tasks.clone(), ids.clone()), |b| {
                    send(path, ct, b)
                })
                .unwrap_or_else(|e| panic!("generated A2A requests: {e}"));
        }
        // Any content type with a valid body.
        let ct_strategy = (prop::sample::select(valid.clone()), "[ -~]{0,40}");
        runner(n / 4)
            .run(&ct_strategy, |(b, ct)| send(path, &ct, b))
            .unwrap_or_else(|e| panic!("content types: {e}"));
        per_target.push(format!(
            "{path}: {}",
            executions.load(Ordering::Relaxed) - before
        ));
    }
    rt.block_on(app.wait_idle());
    println!(
        "fuzz (HTTP through the router): {} executions, {} answered 503; {}",
        executions.load(Ordering::Relaxed),
        unavailable.load(Ordering::Relaxed),
        per_target.join(", ")
    );
    drop(app);
}

/// Valid samples of every stored and wire message, from a real run.
async fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Blocking).await;
    let (_, eff) = open_approval(&rt).await;
    let ana = app.person("acme", "ana");
    answer_example(&ana, &q).await;
    ana.post(
        &format!("/v1/interactions/{eff}/approve"),
        &json!({"approved": true}),
    )
    .await;
    app.wait_idle().await;
    let mut out = Vec::new();
    for id in [&q, &eff] {
        let i = app.interaction("acme", id).await.expect("stored");
        let outcome = i.resolution.as_ref().expect("resolved").outcome.clone();
        out.push(("outcome", serde_json::to_vec(&outcome).expect("json")));
        out.push(("interaction", serde_json::to_vec(&i).expect("json")));
    }
    let org = OrgId::parse("acme").expect("org");
    let session = app
        .bus
        .load_session(&org, &at.session)
        .await
        .expect("load")
        .value
        .expect("session");
    out.push(("session", serde_json::to_vec(&session).expect("json")));
    for e in app.events("acme").await {
        out.push(("event", serde_json::to_vec(&e).expect("json")));
    }
    let env = CommandEnvelope {
        org,
        command: Command::Answer(Box::new(AnswerCommand {
            interaction_id: InteractionId::parse(q).expect("id"),
            route: AnswerRoute::Question,
            key: IdempotencyKey::parse("k-1").expect("key"),
            groups: Vec::new(),
            by: PersonId::parse("ana").expect("person"),
            task_id: None,
            context_id: None,
            input: AnswerInput::Value {
                value: json!({"a": [1, 2]}),
                reason: None,
            },
            remember: None,
        })),
    };
    out.push(("command", serde_json::to_vec(&env).expect("json")));
    out.push((
        "command",
        serde_json::to_vec(&CommandEnvelope {
            org: OrgId::parse("acme").expect("org"),
            command: Command::SessionOpen {
                session: SessionId::parse("s-1").expect("id"),
                mode: SessionMode::Product,
                lane_capacity: Some(3),
            },
        })
        .expect("json"),
    ));
    out
}

fn decode_all(b: &[u8]) {
    let _ = serde_json::from_slice::<CommandEnvelope>(b);
    let _ = serde_json::from_slice::<Event>(b);
    let _ = serde_json::from_slice::<Interaction>(b);
    let _ = serde_json::from_slice::<Session>(b);
    let _ = serde_json::from_slice::<Outcome>(b);
}

#[test]
fn decoders_of_commands_events_and_records_never_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let samples = rt.block_on(samples());
    // Every sample decodes as what it is: the mutations start from valid input.
    for (what, b) in &samples {
        let ok = match *what {
            "command" => serde_json::from_slice::<CommandEnvelope>(b).is_ok(),
            "event" => serde_json::from_slice::<Event>(b).is_ok(),
            "interaction" => serde_json::from_slice::<Interaction>(b).is_ok(),
            "session" => serde_json::from_slice::<Session>(b).is_ok(),
            _ => serde_json::from_slice::<Outcome>(b).is_ok(),
        };
        assert!(
            ok,
            "{what} sample does not decode: {}",
            String::from_utf8_lossy(b)
        );
    }
    let valid: Vec<Vec<u8>> = samples.into_iter().map(|(_, b)| b).collect();
    let executions = AtomicU64::new(0);
    let n = cases(3000);
    let run = |b: Vec<u8>| {
        executions.fetch_add(1, Ordering::Relaxed);
        decode_all(&b);
        Ok(())
    };
    runner(n)
        .run(&prop::collection::vec(any::<u8>(), 0..2048), run)
        .unwrap_or_else(|e| panic!("raw bytes: {e}"));
    runner(n)
        .run(&json_bytes(), run)
        .unwrap_or_else(|e| panic!("near-valid JSON: {e}"));
    runner(n * 2)
        .run(&mutated(valid), run)
        .unwrap_or_else(|e| panic!("mutated valid messages: {e}"));
    // Depth: far past serde_json's recursion limit, inside and outside a record.
    for depth in [127usize, 128, 129, 10_000, 100_000] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        decode_all(deep.as_bytes());
        decode_all(
            format!(r#"{{"org":"acme","command":{{"type":"open","x":{deep}}}}}"#).as_bytes(),
        );
        executions.fetch_add(2, Ordering::Relaxed);
    }
    println!(
        "fuzz (decoders CommandEnvelope, Event, Interaction, Session, Outcome): {} inputs, \
         each through all five",
        executions.load(Ordering::Relaxed)
    );
}

//! Hostile input, one table (RELIABILITY.md guarantee 5: bad input gets a clear,
//! stable error code and changes nothing).
//!
//! Every case goes as raw bytes over a real TCP connection to the real ingress (so
//! paths like `/v1/questions/../answer`, invalid UTF-8 and missing headers arrive
//! exactly as written), with a worker running. Each must answer its stable 4xx
//! code (`{code}` from the catalog), and afterwards the interaction and session
//! records keep their KV revisions and no event was emitted. A 5xx is a bug.
//! The property tests over the same bodies are in `hostile_fuzz.rs`.

use std::time::Duration;

use holdpoint_domain::{QuestionSpec, SessionMode};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::common::*;

/// A raw HTTP/1.1 answer.
#[derive(Debug)]
pub struct RawReply {
    /// Status.
    pub status: u16,
    /// Headers, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl RawReply {
    /// The value of header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The `code` of an error body.
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or("").to_owned()
    }
}

fn decode_chunked(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        b = &b[end + 2..];
        if size == 0 || b.len() < size {
            break;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[(size + 2).min(b.len())..];
    }
    out
}

/// Sends one request as raw bytes (`path` as given, `headers` as given, plus
/// `Host`, `Connection: close` and `Content-Length`) and reads the answer.
pub async fn raw_request(
    base: &str,
    method: &str,
    path: &[u8],
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> RawReply {
    let addr = base.trim_start_matches("http://").to_owned();
    let mut head = Vec::new();
    head.extend_from_slice(method.as_bytes());
    head.push(b' ');
    head.extend_from_slice(path);
    head.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    head.extend_from_slice(addr.as_bytes());
    head.extend_from_slice(b"\r\nConnection: close\r\n");
    head.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    for (k, v) in headers {
        head.extend_from_slice(k.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect to the ingress");
    let (mut rd, mut wr) = stream.into_split();
    let body = body.to_vec();
    // Write while reading: the server may answer (413) before it read everything.
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&head).await;
        let _ = wr.write_all(&body).await;
        let _ = wr.flush().await;
        wr
    });
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match rd.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                // A reset after the answer (unread request body): keep what came.
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "no answer within 20 s to {method} {}",
        String::from_utf8_lossy(&path[..path.len().min(200)])
    );
    drop(writer.await);
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(&buf)));
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = buf[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        body = decode_chunked(&body);
    }
    RawReply {
        status,
        headers,
        body,
    }
}

/// One hostile request and the answer it must get.
struct Case {
    name: String,
    path: Vec<u8>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    want: (u16, &'static str),
}

fn case(
    name: impl Into<String>,
    path: &str,
    body: impl Into<Vec<u8>>,
    want: (u16, &'static str),
) -> Case {
    Case {
        name: name.into(),
        path: path.as_bytes().to_vec(),
        content_type: Some("application/json"),
        body: body.into(),
        want,
    }
}

const BAD: (u16, &str) = (400, "NRY-0001");
const MISFIT: (u16, &str) = (400, "NRY-0003");
const MISSING: (u16, &str) = (404, "NRY-0004");
const TOO_LARGE: (u16, &str) = (413, "NRY-0013");
const MEDIA: (u16, &str) = (415, "NRY-0014");

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// The table: questions `q` (two single-choice questions, text on the second),
/// `multi` (one multiple-choice question), approval `eff`, session `s`.
fn table(q: &str, multi: &str, eff: &str, s: &str) -> Vec<Case> {
    let answer = format!("/v1/questions/{q}/answer");
    let answer_multi = format!("/v1/questions/{multi}/answer");
    let approve = format!("/v1/interactions/{eff}/approve");
    let respond = format!("/v1/interactions/{eff}/respond");
    let messages = format!("/v1/sessions/{s}/messages");
    let second = r#"{"options":[2],"text":"ok"}"#;
    let with_first = |first: &str| format!(r#"{{"answers":[{first},{second}]}}"#);
    let mut t = vec![
        // Sizes and depth.
        case(
            "body over 64 KiB",
            &answer,
            format!(
                r#"{{"answers":[{{"options":[0]}},{{"options":[2],"text":"{}"}}]}}"#,
                "x".repeat(70 * 1024)
            ),
            TOO_LARGE,
        ),
        case(
            "200,000-element option array",
            &answer,
            with_first(&format!(r#"{{"options":[{}0]}}"#, "0,".repeat(199_999))),
            TOO_LARGE,
        ),
        case(
            "16,000-element option array (fits the limit)",
            &answer,
            with_first(&format!(r#"{{"options":[{}0]}}"#, "0,".repeat(15_999))),
            MISFIT,
        ),
        case("100,000 nested arrays", &answer, nested(100_000), TOO_LARGE),
        case(
            "30,000 nested arrays (fits the limit)",
            &answer,
            nested(30_000),
            BAD,
        ),
        case(
            "30,000 nested arrays as a respond value",
            &respond,
            format!(r#"{{"value":{}}}"#, nested(30_000)),
            BAD,
        ),
        case(
            "30,000 nested arrays as an approve value",
            &approve,
            format!(r#"{{"value":{}}}"#, nested(30_000)),
            BAD,
        ),
        // Indices.
        case(
            "negative index",
            &answer,
            with_first(r#"{"options":[-1]}"#),
            BAD,
        ),
        case(
            "index 2^40",
            &answer,
            with_first(r#"{"options":[1099511627776]}"#),
            BAD,
        ),
        case(
            "index u32::MAX",
            &answer,
            with_first(r#"{"options":[4294967295]}"#),
            MISFIT,
        ),
        case(
            "float index",
            &answer,
            with_first(r#"{"options":[0.5]}"#),
            BAD,
        ),
        // A whole number written as a double or with an exponent is that integer (as
        // JSON Schema reads it), so these are read as 2 and 100: out of range.
        case(
            "whole float index 2.0, out of range",
            &answer,
            with_first(r#"{"options":[2.0]}"#),
            MISFIT,
        ),
        case(
            "exponent index 1e2, out of range",
            &answer,
            with_first(r#"{"options":[1e2]}"#),
            MISFIT,
        ),
        case(
            "exponent index 1e400",
            &answer,
            with_first(r#"{"options":[1e400]}"#),
            BAD,
        ),
        case(
            "string index",
            &answer,
            with_first(r#"{"options":["0"]}"#),
            BAD,
        ),
        case(
            "null index",
            &answer,
            with_first(r#"{"options":[null]}"#),
            BAD,
        ),
        case(
            "index out of range",
            &answer,
            with_first(r#"{"options":[2]}"#),
            MISFIT,
        ),
        case(
            "repeated index on a multiple-choice question",
            &answer_multi,
            r#"{"answers":[{"options":[1,1]}]}"#,
            MISFIT,
        ),
        case(
            "two options on a single-choice question",
            &answer,
            with_first(r#"{"options":[0,1]}"#),
            MISFIT,
        ),
        case(
            "choosing nothing",
            &answer,
            with_first(r#"{"options":[]}"#),
            MISFIT,
        ),
        // Counts.
        case("no answers", &answer, r#"{"answers":[]}"#, MISFIT),
        case(
            "fewer answers than questions",
            &answer,
            r#"{"answers":[{"options":[0]}]}"#,
            MISFIT,
        ),
        case(
            "more answers than questions",
            &answer,
            r#"{"answers":[{"options":[0]},{"options":[0]},{"options":[0]}]}"#,
            MISFIT,
        ),
        case(
            "five answers",
            &answer,
            format!(r#"{{"answers":[{}]}}"#, [r#"{"options":[0]}"#; 5].join(",")),
            MISFIT,
        ),
        case(
            "answers is an object",
            &answer,
            r#"{"answers":{"options":[0]}}"#,
            BAD,
        ),
        case("answers is null", &answer, r#"{"answers":null}"#, BAD),
        case("body is an array", &answer, r#"[{"options":[0]}]"#, BAD),
        case("body is a string", &answer, r#""answers""#, BAD),
        case("empty body", &answer, "", BAD),
        case(
            "truncated JSON",
            &answer,
            r#"{"answers":[{"options":[0]"#,
            BAD,
        ),
        case(
            "trailing garbage",
            &answer,
            format!("{} x", with_first(r#"{"options":[0]}"#)),
            BAD,
        ),
        // Duplicate keys.
        case(
            "approved twice",
            &approve,
            r#"{"approved":false,"approved":true}"#,
            BAD,
        ),
        case(
            "approved and value",
            &approve,
            r#"{"approved":true,"value":true}"#,
            BAD,
        ),
        case("value twice", &respond, r#"{"value":1,"value":2}"#, BAD),
        case(
            "answers twice",
            &answer,
            r#"{"answers":[{"options":[0]}],"answers":[{"options":[0]},{"options":[0]}]}"#,
            BAD,
        ),
        case(
            "options twice in one answer",
            &answer,
            with_first(r#"{"options":[0],"options":[1]}"#),
            BAD,
        ),
        // Text.
        case(
            "escaped NUL in text",
            &answer,
            r#"{"answers":[{"options":[0]},{"options":[2],"text":"a\u0000b"}]}"#,
            MISFIT,
        ),
        case(
            "raw NUL byte in text",
            &answer,
            b"{\"answers\":[{\"options\":[0]},{\"options\":[2],\"text\":\"a\x00b\"}]}".to_vec(),
            BAD,
        ),
        case(
            "invalid UTF-8 in text",
            &answer,
            b"{\"answers\":[{\"options\":[0]},{\"options\":[2],\"text\":\"a\xff\xfeb\"}]}".to_vec(),
            BAD,
        ),
        case(
            "lone surrogate in text",
            &answer,
            r#"{"answers":[{"options":[0]},{"options":[2],"text":"\ud800"}]}"#,
            BAD,
        ),
        case(
            "text where none is allowed",
            &answer,
            with_first(r#"{"options":[0],"text":"no"}"#),
            MISFIT,
        ),
        case(
            "text over 8000 characters",
            &answer,
            format!(
                r#"{{"answers":[{{"options":[0]}},{{"options":[2],"text":"{}"}}]}}"#,
                "é".repeat(8001)
            ),
            MISFIT,
        ),
        case(
            "escaped NUL in a reason",
            &approve,
            r#"{"approved":true,"reason":"a\u0000"}"#,
            BAD,
        ),
        case(
            "invalid UTF-8 in a reason",
            &approve,
            b"{\"approved\":true,\"reason\":\"\xc3\x28\"}".to_vec(),
            BAD,
        ),
        case(
            "escaped NUL in a message",
            &messages,
            r#"{"text":"hi\u0000"}"#,
            BAD,
        ),
        // Unknown fields and wrong types.
        case(
            "unknown top-level field",
            &answer,
            format!(r#"{{"answers":[{{"options":[0]}},{second}],"extra":1}}"#),
            BAD,
        ),
        case(
            "unknown field in an answer",
            &answer,
            with_first(r#"{"options":[0],"colour":"red"}"#),
            BAD,
        ),
        case(
            "unknown approve field",
            &approve,
            r#"{"approved":true,"force":true}"#,
            BAD,
        ),
        case(
            "unknown respond field",
            &respond,
            r#"{"value":true,"force":true}"#,
            BAD,
        ),
        case(
            "unknown message field",
            &messages,
            r#"{"text":"hi","priority":1}"#,
            BAD,
        ),
        case(
            "approved is a string",
            &approve,
            r#"{"approved":"true"}"#,
            BAD,
        ),
        case("approved is a number", &approve, r#"{"approved":1}"#, BAD),
        case(
            "approve value is not a boolean",
            &approve,
            r#"{"value":{"approved":true}}"#,
            BAD,
        ),
        case("empty approve", &approve, "{}", BAD),
        case("message text is a number", &messages, r#"{"text":1}"#, BAD),
        case(
            "message id with a dot",
            &messages,
            r#"{"text":"hi","messageId":"a.b c"}"#,
            BAD,
        ),
        case(
            "lane with whitespace",
            &messages,
            r#"{"text":"hi","lane":"a b"}"#,
            BAD,
        ),
    ];
    // Content types.
    let valid = with_first(r#"{"options":[0]}"#);
    for (name, ct) in [
        ("missing content type", None),
        ("text/plain", Some("text/plain")),
        ("form", Some("application/x-www-form-urlencoded")),
        ("multipart", Some("multipart/form-data; boundary=x")),
        ("application/jsonx", Some("application/jsonx")),
        ("application/json-seq", Some("application/json-seq")),
        ("empty content type", Some("")),
    ] {
        t.push(Case {
            name: format!("content type: {name}"),
            path: answer.as_bytes().to_vec(),
            content_type: ct,
            body: valid.clone().into_bytes(),
            want: MEDIA,
        });
    }
    // Ids in the path, on both routes that take one.
    let long = "a".repeat(10 * 1024);
    let ids: Vec<(String, String, (u16, &str))> = vec![
        ("dot".into(), "a.b".into(), MISSING),
        ("star".into(), "a*b".into(), MISSING),
        ("encoded gt".into(), "a%3Eb".into(), MISSING),
        ("encoded >".into(), "%3E".into(), MISSING),
        ("encoded dot".into(), "a%2Eb".into(), MISSING),
        ("encoded slash".into(), "a%2Fb".into(), MISSING),
        ("encoded slash, lower case".into(), "a%2fb".into(), MISSING),
        ("dot dot".into(), "..".into(), MISSING),
        ("encoded dot dot".into(), "%2E%2E".into(), MISSING),
        ("slash".into(), "a/b".into(), MISSING),
        ("encoded space".into(), "a%20b".into(), BAD),
        ("encoded tab".into(), "a%09b".into(), BAD),
        ("encoded newline".into(), "a%0Ab".into(), BAD),
        ("encoded NUL".into(), "a%00b".into(), BAD),
        ("encoded non-ASCII".into(), "%C3%A9".into(), BAD),
        ("10 kB".into(), long.clone(), BAD),
        (
            "another organisation's wildcard".into(),
            "%2A".into(),
            MISSING,
        ),
    ];
    for (name, id, want) in ids {
        t.push(case(
            format!("question id: {name}"),
            &format!("/v1/questions/{id}/answer"),
            valid.clone(),
            want,
        ));
        t.push(case(
            format!("interaction id: {name}"),
            &format!("/v1/interactions/{id}/approve"),
            r#"{"approved":true}"#,
            want,
        ));
    }
    t.push(case(
        "empty question id",
        "/v1/questions//answer",
        valid.clone(),
        BAD,
    ));
    t.push(case(
        "empty interaction id",
        "/v1/interactions//approve",
        r#"{"approved":true}"#,
        BAD,
    ));
    // Characters an HTTP/1.1 request-target may not hold raw: hyper refuses the
    // request line itself before any Holdpoint code runs; the connection layer
    // (`holdpoint_ingress::conn`) gives its answer the error body.
    for raw in ["a>b", ">", "a b", "a<b"] {
        t.push(case(
            format!("raw {raw:?} in the path"),
            &format!("/v1/interactions/{raw}/approve"),
            r#"{"approved":true}"#,
            BAD,
        ));
    }
    // hyper lets these through raw; they are ids like any other.
    for raw in ["a\"b", "a{b}", "a|b"] {
        t.push(case(
            format!("raw {raw:?} in the path"),
            &format!("/v1/interactions/{raw}/approve"),
            r#"{"approved":true}"#,
            MISSING,
        ));
    }
    t.push(case(
        "session id with a dot",
        "/v1/sessions/a.b/messages",
        r#"{"text":"hi"}"#,
        (400, "NRY-0002"),
    ));
    t.push(case(
        "session id of 10 kB",
        &format!("/v1/sessions/{long}/messages"),
        r#"{"text":"hi"}"#,
        BAD,
    ));
    t
}

async fn snapshot(app: &TestApp, q: &str, multi: &str, eff: &str, s: &str) -> (Vec<u64>, usize) {
    let org = holdpoint_domain::OrgId::parse("acme").expect("org");
    let mut revisions = Vec::new();
    for id in [q, multi, eff] {
        let id = holdpoint_domain::InteractionId::parse(id).expect("id");
        revisions.push(
            app.bus
                .load_interaction(&org, &id)
                .await
                .expect("load")
                .revision,
        );
    }
    let sid = holdpoint_domain::SessionId::parse(s).expect("id");
    revisions.push(
        app.bus
            .load_session(&org, &sid)
            .await
            .expect("load")
            .revision,
    );
    (revisions, app.events("acme").await.len())
}

/// The fixtures of the REST table: (app, q, multi, eff, session).
async fn rest_fixtures() -> (TestApp, String, String, String, String) {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, q) = open_question(&rt, SessionMode::Blocking).await;
    let multi = rt
        .ask_user(
            &placement(at.session.as_str()),
            "call-multi",
            vec![QuestionSpec {
                text: "Which ones?".into(),
                options: vec!["a".into(), "b".into(), "c".into()],
                multiple: true,
                allow_text: false,
                schema: None,
            }],
            None,
        )
        .await
        .expect("ask")
        .to_string();
    let (_, eff) = open_approval(&rt).await;
    let s = at.session.to_string();
    app.wait_idle().await;
    (app, q, multi, eff, s)
}

/// Runs `cases`; returns the failures.
async fn run_rest_cases(
    app: &TestApp,
    (q, multi, eff, s): (&str, &str, &str, &str),
    cases: Vec<Case>,
) -> Vec<String> {
    let before = snapshot(app, q, multi, eff, s).await;
    let mut failures = Vec::new();
    for c in cases {
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("X-Holdpoint-Org", b"acme"),
            ("X-Holdpoint-Person", b"mallory"),
        ];
        if let Some(ct) = c.content_type {
            headers.push(("Content-Type", ct.as_bytes()));
        }
        let r = raw_request(&app.base, "POST", &c.path, &headers, &c.body).await;
        let got = (r.status, r.code());
        if r.status >= 500 {
            failures.push(format!(
                "BUG {}: {} {:?}",
                c.name,
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        } else if (got.0, got.1.as_str()) != c.want {
            failures.push(format!(
                "{}: got {got:?} {:?}, want {:?}",
                c.name,
                String::from_utf8_lossy(&r.body[..r.body.len().min(300)]),
                c.want
            ));
        } else if r.status >= 400
            && !c.want.1.is_empty()
            && r.header("content-type") != Some("application/json")
        {
            failures.push(format!("{}: error body is not application/json", c.name));
        }
        app.wait_idle().await;
        let now = snapshot(app, q, multi, eff, s).await;
        if now != before {
            failures.push(format!(
                "{}: changed something: {before:?} -> {now:?}",
                c.name
            ));
        }
    }
    failures
}

#[tokio::test]
async fn hostile_inputs_get_a_stable_4xx_and_change_nothing() {
    let (app, q, multi, eff, s) = rest_fixtures().await;
    let cases = table(&q, &multi, &eff, &s);
    let n = cases.len();
    let failures = run_rest_cases(&app, (&q, &multi, &eff, &s), cases).await;
    println!("{n} hostile cases");
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // And the interactions still take a good answer.
    let ana = app.person("acme", "ana");
    assert_eq!(answer_example(&ana, &q).await.status, 204);
    assert_eq!(
        ana.post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true})
        )
        .await
        .status,
        204
    );
}

/// A path id that percent-decodes to invalid UTF-8 gets the stable `400 NRY-0001`
/// (it used to get axum's own text/plain 400: the id routes now extract through
/// `extract::IdPath`, which maps the rejection).
#[tokio::test]
async fn invalid_utf8_in_a_path_id_gets_a_stable_code() {
    let (app, q, multi, eff, s) = rest_fixtures().await;
    let valid = example_answer().to_string();
    let cases = vec![
        case("question id: %FF", "/v1/questions/a%FFb/answer", valid, BAD),
        case(
            "interaction id: %FF",
            "/v1/interactions/a%FFb/approve",
            r#"{"approved":true}"#,
            BAD,
        ),
        case(
            "interaction id: %C3%28",
            "/v1/interactions/%C3%28/respond",
            r#"{"value":1}"#,
            BAD,
        ),
        case(
            "session id: %FF",
            "/v1/sessions/%FF/messages",
            r#"{"text":"hi"}"#,
            BAD,
        ),
    ];
    let failures = run_rest_cases(&app, (&q, &multi, &eff, &s), cases).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const URI: &str = "https://docs.nylorun.com/a2a/interactions/v1";

/// One hostile JSON-RPC request: its body (placeholders `{task}`, `{eff}`, `{uri}`,
/// `{long}`), content type, and the JSON-RPC and NRY codes it must get.
struct RpcCase {
    name: &'static str,
    body: Vec<u8>,
    content_type: &'static str,
    want: (i64, &'static str),
}

fn rpc(name: &'static str, body: impl Into<Vec<u8>>, want: (i64, &'static str)) -> RpcCase {
    RpcCase {
        name,
        body: body.into(),
        content_type: "application/json",
        want,
    }
}

fn send_message(message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{message}}}}}"#)
}

/// Runs each case against a fresh approval (a case that wrongly answers one cannot
/// hide the next) and returns the failures. A2A refusals are HTTP 200 with
/// `error.code` and the Holdpoint code in `error.data[0].metadata.code`.
async fn run_rpc_cases(cases: Vec<RpcCase>) -> Vec<String> {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let org = holdpoint_domain::OrgId::parse("acme").expect("org");
    let mut failures = Vec::new();
    for c in cases {
        let (at, eff) = open_approval(&rt).await;
        app.wait_idle().await;
        let id = holdpoint_domain::InteractionId::parse(eff.as_str()).expect("id");
        let rev = app
            .bus
            .load_interaction(&org, &id)
            .await
            .expect("load")
            .revision;
        let events = app.events("acme").await.len();
        let long = "t".repeat(10 * 1024);
        let mut body = Vec::with_capacity(c.body.len());
        let mut rest = &c.body[..];
        // Placeholders are replaced byte-wise so invalid UTF-8 in a body survives.
        while !rest.is_empty() {
            let hit = [
                (&b"{task}"[..], at.task_id.as_str().as_bytes()),
                (b"{eff}", eff.as_bytes()),
                (b"{uri}", URI.as_bytes()),
                (b"{long}", long.as_bytes()),
            ]
            .into_iter()
            .find(|(p, _)| rest.starts_with(p));
            match hit {
                Some((p, v)) => {
                    body.extend_from_slice(v);
                    rest = &rest[p.len()..];
                }
                None => {
                    body.push(rest[0]);
                    rest = &rest[1..];
                }
            }
        }
        let headers: Vec<(&str, &[u8])> = vec![
            ("X-Holdpoint-Org", b"acme"),
            ("X-Holdpoint-Person", b"mallory"),
            ("A2A-Extensions", URI.as_bytes()),
            ("A2A-Version", b"1.0"),
            ("Content-Type", c.content_type.as_bytes()),
        ];
        let r = raw_request(&app.base, "POST", b"/a2a", &headers, &body).await;
        let v = r.json();
        let got = (
            r.status,
            v["error"]["code"].as_i64().unwrap_or(0),
            v["error"]["data"][0]["metadata"]["code"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
        if got != (200, c.want.0, c.want.1.to_owned()) {
            failures.push(format!(
                "{}: got {got:?}, want {:?}: {}",
                c.name,
                (200, c.want.0, c.want.1),
                String::from_utf8_lossy(&r.body[..r.body.len().min(300)])
            ));
        }
        app.wait_idle().await;
        let now = app
            .bus
            .load_interaction(&org, &id)
            .await
            .expect("load")
            .revision;
        let now_events = app.events("acme").await.len();
        if (now, now_events) != (rev, events) {
            failures.push(format!(
                "{}: changed something: revision {rev} -> {now}, events {events} -> {now_events}",
                c.name
            ));
        }
    }
    failures
}

#[tokio::test]
async fn hostile_a2a_requests_get_a_stable_error_and_change_nothing() {
    let big = "x".repeat(70 * 1024);
    let deep = nested(30_000);
    let mut invalid_utf8 = send_message(
        r#"{"role":"ROLE_USER","messageId":"m-u","taskId":"{task}","parts":[{"text":"a?b"}]}"#,
    )
    .into_bytes();
    if let Some(i) = invalid_utf8.iter().position(|&b| b == b'?') {
        invalid_utf8[i] = 0xff;
    }
    let mut text_plain = rpc(
        "text/plain",
        send_message(
            r#"{"role":"ROLE_USER","messageId":"m-c","taskId":"{task}","parts":[{"data":{"approved":true}}]}"#,
        ),
        (-32600, "NRY-0014"),
    );
    text_plain.content_type = "text/plain";
    let cases = vec![
        rpc(
            "body over 64 KiB",
            send_message(&format!(
                r#"{{"role":"ROLE_USER","messageId":"m-b","taskId":"{{task}}","parts":[{{"text":"{big}"}}]}}"#
            )),
            (-32600, "NRY-0013"),
        ),
        rpc(
            "30,000 nested arrays in a data part",
            send_message(&format!(
                r#"{{"role":"ROLE_USER","messageId":"m-n","taskId":"{{task}}","parts":[{{"data":{deep}}}]}}"#
            )),
            (-32700, "NRY-0001"),
        ),
        rpc(
            "invalid UTF-8 in a text part",
            invalid_utf8,
            (-32700, "NRY-0001"),
        ),
        rpc("not JSON", "{\"jsonrpc\":", (-32700, "NRY-0001")),
        rpc("a batch", "[]", (-32600, "NRY-0001")),
        text_plain,
        rpc(
            "text on an approval",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-t","taskId":"{task}","parts":[{"text":"yes, approve"}]}"#,
            ),
            (-32004, "NRY-0020"),
        ),
        rpc(
            "unknown field in the extension metadata",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-x","taskId":"{task}","parts":[{"text":"ok"}],"extensions":["{uri}"],"metadata":{"{uri}":{"interactionId":"{eff}","approved":true,"force":true}}}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "approved is a number",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-a","taskId":"{task}","parts":[{"text":"ok"}],"extensions":["{uri}"],"metadata":{"{uri}":{"interactionId":"{eff}","approved":1}}}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "interactionId with a wildcard",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-w","taskId":"{task}","parts":[{"text":"ok"}],"extensions":["{uri}"],"metadata":{"{uri}":{"interactionId":"eff_*","approved":true}}}"#,
            ),
            (-32602, "NRY-0004"),
        ),
        rpc(
            "taskId of 10 kB",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-l","taskId":"{long}","parts":[{"data":{"approved":true}}]}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "messageId with whitespace",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m 1","taskId":"{task}","parts":[{"data":{"approved":true}}]}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "taskId with a subject wildcard",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-s","taskId":">","parts":[{"data":{"approved":true}}]}"#,
            ),
            (-32001, "NRY-0004"),
        ),
    ];
    let n = cases.len();
    let failures = run_rpc_cases(cases).await;
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Duplicate keys in an A2A request are refused (they used to be read last-wins:
/// `{"approved": false, "approved": true}` approved and released the call): a
/// repeated top-level key is -32600, a repeated key inside params -32602, both
/// with `NRY-0001`, as REST refuses them.
#[tokio::test]
async fn a2a_duplicate_keys_are_refused() {
    let cases = vec![
        rpc(
            "approved twice in the data part",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-d1","taskId":"{task}","parts":[{"data":{"approved":false,"approved":true}}]}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "approved twice in the extension metadata",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-d2","taskId":"{task}","parts":[{"text":"ok"}],"extensions":["{uri}"],"metadata":{"{uri}":{"interactionId":"{eff}","approved":false,"approved":true}}}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "messageId twice",
            send_message(
                r#"{"role":"ROLE_USER","messageId":"m-d3","messageId":"m-d4","taskId":"{task}","parts":[{"data":{"approved":true}}]}"#,
            ),
            (-32602, "NRY-0001"),
        ),
        rpc(
            "method twice",
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m-d5","taskId":"{task}","parts":[{"data":{"approved":true}}]}}}"#,
            (-32600, "NRY-0001"),
        ),
    ];
    let failures = run_rpc_cases(cases).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

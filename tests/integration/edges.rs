//! The HTTP edges (README "The HTTP API"): identity first on every route, the
//! `{code, title, message}` body on every error (those hyper answers by itself
//! included), `405` with `Allow`, and connections that stay usable after an answer
//! sent before the request's body was read.

use std::time::Duration;

use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::hostile::{RawReply, raw_request};

const DEV: [(&str, &[u8]); 2] = [("X-Holdpoint-Org", b"acme"), ("X-Holdpoint-Person", b"ana")];

fn assert_error_body(r: &RawReply, status: u16, code: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{what}: {r:?}"
    );
    let body = r.json();
    assert_eq!(body["code"], code, "{what}: {body}");
    assert!(
        body["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{what}: {body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|t| !t.is_empty()),
        "{what}: {body}"
    );
}

#[tokio::test]
async fn identity_comes_first_on_every_route() {
    let app = TestApp::start().await;
    let approve = br#"{"approved":true}"#;
    let cases: [(&str, &[u8], &[u8]); 9] = [
        ("POST", b"/v1/questions/a%FFb/answer", approve),
        ("POST", b"/v1/interactions/a%FFb/approve", approve),
        ("POST", b"/v1/interactions/%C3%28/respond", approve),
        ("GET", b"/v1/interactions/%FF", b""),
        ("POST", b"/v1/sessions/%FF/messages", br#"{"text":"hi"}"#),
        ("DELETE", b"/v1/interactions/eff_1", b""),
        ("GET", b"/a2a", b""),
        ("GET", b"/v1/nothing-here", b""),
        ("POST", b"/v1/events", b"{}"),
    ];
    for (method, path, body) in cases {
        let what = format!("{method} {}", String::from_utf8_lossy(path));
        let ct: Vec<(&str, &[u8])> = vec![("Content-Type", b"application/json")];
        let anonymous = raw_request(&app.base, method, path, &ct, body).await;
        assert_error_body(&anonymous, 401, "NRY-0011", &what);
        assert_eq!(
            anonymous.header("www-authenticate"),
            Some("Bearer"),
            "{what}"
        );
    }
    // The agent card stays public.
    let card = raw_request(&app.base, "GET", b"/.well-known/agent-card.json", &[], b"").await;
    assert_eq!(card.status, 200, "{card:?}");

    // With an identity, each gets what is wrong with it.
    let with = |extra: &[(&'static str, &'static [u8])]| {
        let mut h: Vec<(&str, &[u8])> = DEV.to_vec();
        h.extend_from_slice(extra);
        h
    };
    let json_ct = with(&[("Content-Type", b"application/json")]);
    let r = raw_request(
        &app.base,
        "POST",
        b"/v1/interactions/a%FFb/approve",
        &json_ct,
        approve,
    )
    .await;
    assert_error_body(&r, 400, "NRY-0001", "%FF with an identity");
    let r = raw_request(&app.base, "GET", b"/v1/nothing-here", &with(&[]), b"").await;
    assert_error_body(&r, 404, "NRY-0004", "unknown path");
    for (method, path, allow) in [
        ("DELETE", &b"/v1/interactions/eff_1"[..], "GET"),
        ("PUT", b"/v1/interactions/eff_1/approve", "POST"),
        ("GET", b"/a2a", "POST"),
        ("POST", b"/v1/events", "GET"),
        ("POST", b"/.well-known/agent-card.json", "GET"),
    ] {
        let what = format!("{method} {}", String::from_utf8_lossy(path));
        let r = raw_request(&app.base, method, path, &json_ct, b"{}").await;
        assert_error_body(&r, 405, "NRY-0005", &what);
        let allowed = r.header("allow").unwrap_or_default();
        assert!(
            allowed.split(',').any(|m| m.trim() == allow),
            "{what}: Allow {allowed:?}"
        );
    }
}

#[tokio::test]
async fn errors_hyper_answers_by_itself_carry_the_error_body() {
    let app = TestApp::start().await;
    let dev = DEV.to_vec();
    for raw in ["a>b", ">", "a b", "a<b"] {
        let path = format!("/v1/interactions/{raw}/approve");
        let r = raw_request(&app.base, "POST", path.as_bytes(), &dev, b"{}").await;
        assert_error_body(&r, 400, "NRY-0001", &format!("raw {raw:?} in the path"));
    }
    let mut headers = dev.clone();
    headers.push(("X-Note", b"a\x01b"));
    let r = raw_request(&app.base, "GET", b"/v1/interactions", &headers, b"").await;
    assert_error_body(&r, 400, "NRY-0001", "a control byte in a header value");
    let big = vec![b'a'; 1024 * 1024];
    let mut headers = dev.clone();
    headers.push(("X-Big", &big));
    let r = raw_request(&app.base, "GET", b"/v1/interactions", &headers, b"").await;
    assert_error_body(&r, 431, "NRY-0015", "a 1 MB header");
    let long = format!("/v1/interactions/{}", "a".repeat(70 * 1024));
    let r = raw_request(&app.base, "GET", long.as_bytes(), &dev, b"").await;
    assert_error_body(&r, 414, "NRY-0016", "a 70 kB path");
}

/// Reads one HTTP/1.1 response (head and `Content-Length` body) from `stream`.
async fn read_response(stream: &mut tokio::net::TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .expect("read");
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed inside the body");
        buf.extend_from_slice(&chunk[..n]);
    }
    (head, buf[head_end..head_end + len].to_vec())
}

#[tokio::test]
async fn a_connection_stays_usable_after_an_answer_sent_before_the_body_was_read() {
    let app = TestApp::start().await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let body = vec![b' '; 40_000];
    // Raw: the early 401 says `Connection: close`, and the server then closes. (It
    // used to close without saying so: a client's next request on that connection
    // met a broken pipe.)
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/interactions/eff_1/approve HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let _ = stream.write_all(&body).await;
    let (head, answer) = read_response(&mut stream).await;
    assert!(head.starts_with("http/1.1 401"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let answer: Value = serde_json::from_slice(&answer).expect("json");
    assert_eq!(answer["code"], "NRY-0011");
    let mut rest = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut rest))
        .await
        .expect("the server closes the connection it said it would close")
        .unwrap_or(0);
    assert_eq!(n, 0, "more after the answer: {:?}", &rest[..n]);

    // A keep-alive client goes on working: each next request gets its answer.
    let http = reqwest::Client::new();
    for round in 0..3 {
        let r = http
            .post(format!("{}/v1/interactions/eff_1/approve", app.base))
            .header("Content-Type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("anonymous POST");
        assert_eq!(r.status().as_u16(), 401, "round {round}");
        let r = http
            .get(format!("{}/v1/interactions", app.base))
            .header("X-Holdpoint-Org", "acme")
            .header("X-Holdpoint-Person", "ana")
            .send()
            .await
            .unwrap_or_else(|e| panic!("round {round}: the next request failed: {e}"));
        assert_eq!(r.status().as_u16(), 200, "round {round}");
    }
    // A body that was read to its end keeps the connection open.
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    for _ in 0..2 {
        let req = format!(
            "POST /v1/interactions/eff_1/approve HTTP/1.1\r\nHost: {addr}\r\n\
             X-Holdpoint-Org: acme\r\nX-Holdpoint-Person: ana\r\n\
             Content-Type: application/json\r\nContent-Length: 17\r\n\r\n{}",
            json!({"approved":true})
        );
        stream.write_all(req.as_bytes()).await.expect("write");
        let (head, _) = read_response(&mut stream).await;
        assert!(head.starts_with("http/1.1 404"), "{head}");
        assert!(!head.contains("connection: close"), "{head}");
    }
}

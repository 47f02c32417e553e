//! The HTTP edges (README "The HTTP API"): identity first on every route, the
//! `{code, title, message}` body on every error (those hyper answers by itself
//! included), `405` with `Allow`, and connections that stay usable after an answer
//! sent before the request's body was read.

use std::time::Duration;

use holdpoint_domain::State;
use holdpoint_tests::app::{AppOptions, TestApp};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::common::*;
use crate::hostile::{RawReply, raw_request};
use crate::rpc::Rpc;
use crate::streams::{Next, SseReader, WAIT};

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
    // Counted by route like any other answer.
    let metrics = app.ingress_state().cfg.metrics.encode();
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "holdpoint_http_requests_total{route=\"/v1/interactions/{id}/approve\",method=\"POST\",status=\"401\"}"
        )),
        "{metrics}"
    );
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

/// A `GET /v1/events` stream of `person` (any event of the organisation).
async fn events_of(app: &TestApp, person: &str, query: &str) -> SseReader {
    SseReader::open(
        reqwest::Client::new()
            .get(format!("{}/v1/events{query}", app.base))
            .header("X-Holdpoint-Org", "acme")
            .header("X-Holdpoint-Person", person),
    )
    .await
}

/// Each caller may hold `max_streams_per_caller` event streams at once, counted
/// over `GET /v1/events`, `SubscribeToTask` and `SendStreamingMessage`; one more
/// is `429 NRY-0017` with the error body, and changes nothing. A stream that ends
/// frees its place.
#[tokio::test]
async fn each_caller_has_a_limit_of_open_streams() {
    let app = TestApp::start_with(AppOptions {
        max_streams_per_caller: 2,
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    app.wait_idle().await;
    let first = events_of(&app, "ana", "").await;
    assert!(first.status == 200 && first.is_stream());
    let rpc = Rpc::new(&app, "acme", "ana");
    let second = rpc
        .stream("SubscribeToTask", json!({"id": at.task_id.as_str()}))
        .await;
    assert!(second.status == 200 && second.is_stream());

    let refused = |what: &str, r: SseReader| {
        assert_eq!(r.status, 429, "{what}");
        assert!(!r.is_stream(), "{what}");
        assert_eq!(
            r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("5"),
            "{what}"
        );
        r
    };
    let third = refused("events", events_of(&app, "ana", "").await);
    assert_eq!(third.body_json().await["code"], "NRY-0017");
    let sub = refused(
        "SubscribeToTask",
        rpc.stream("SubscribeToTask", json!({"id": at.task_id.as_str()}))
            .await,
    );
    assert_eq!(sub.body_json().await["code"], "NRY-0017");
    let answer = crate::rpc::answer(&at, "m-limit", json!([{"data": {"approved": true}}]), None);
    let streaming = refused(
        "SendStreamingMessage",
        rpc.stream("SendStreamingMessage", answer.clone()).await,
    );
    let body = streaming.body_json().await;
    assert_eq!(
        (body["code"].as_str(), body["title"].as_str()),
        (Some("NRY-0017"), Some("Too many streams")),
        "{body}"
    );
    app.wait_idle().await;
    assert_eq!(
        state_of(&app, "acme", &eff).await,
        State::Pending,
        "a refused SendStreamingMessage answers nothing"
    );
    // Another person has places of their own.
    let bo = events_of(&app, "bo", "").await;
    assert!(bo.status == 200 && bo.is_stream());

    // Ana hangs up one stream: the server sees the connection close, and the place
    // is free again.
    drop(first);
    let again = holdpoint_tests::nats::wait_for(Duration::from_secs(10), "a freed place", || {
        let app = &app;
        async move {
            let r = events_of(app, "ana", "").await;
            (r.status == 200).then_some(r)
        }
    })
    .await;
    assert!(again.is_stream());
    drop(second);
}

/// At most `max_in_flight` API requests run at once: with two answers waiting for
/// an outcome (no worker), a third request is refused at once, unread, with
/// `503 NRY-0050` and `Retry-After: 1` (on `/a2a`, the JSON-RPC error carrying
/// `NRY-0050`); once the two have their outcome the places are free again and the
/// refused answer's retry with the same key succeeds.
#[tokio::test]
async fn requests_in_flight_are_bounded() {
    let mut app = TestApp::start_with(AppOptions {
        max_in_flight: 2,
        outcome_timeout: Duration::from_secs(20),
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    app.wait_idle().await;
    app.stop_workers().await;

    // Two answers with the same key: the first waits for its reply, the second (a
    // duplicate publish) for the recorded outcome. Neither comes without a worker.
    let ana = app.person("acme", "ana");
    let path = format!("/v1/interactions/{eff}/approve");
    let body = json!({"approved": true});
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (ana, path, body) = (ana.clone(), path.clone(), body.clone());
            tokio::spawn(async move { ana.post_keyed(&path, "k-limit", &body).await })
        })
        .collect();
    let permits = app.ingress_state().in_flight;
    holdpoint_tests::nats::wait_for(Duration::from_secs(10), "two answers in flight", || {
        let permits = permits.clone();
        async move { (permits.available_permits() == 0).then_some(()) }
    })
    .await;

    let started = std::time::Instant::now();
    let third = ana.post_keyed(&path, "k-limit", &body).await;
    assert_eq!((third.status, third.code()), (503, "NRY-0050"), "{third:?}");
    assert_eq!(third.retry_after.as_deref(), Some("1"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not after waiting: {:?}",
        started.elapsed()
    );
    let rpc = Rpc::new(&app, "acme", "ana")
        .call("GetTask", json!({"id": at.task_id.as_str()}))
        .await;
    assert_eq!(rpc.status, 200, "{}", rpc.body);
    assert_eq!(rpc.holdpoint(), "NRY-0050", "{}", rpc.body);
    assert_eq!(rpc.body["id"], Value::Null, "{}", rpc.body);
    assert_eq!(
        rpc.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );

    // A worker decides the answer; both waiting requests have its outcome.
    app.start_worker().await;
    for w in waiting {
        let r = w.await.expect("request task");
        assert_eq!(r.status, 204, "{r:?}");
    }
    assert_eq!(permits.available_permits(), 2, "every permit is back");
    let retry = ana.post_keyed(&path, "k-limit", &body).await;
    assert_eq!(retry.status, 204, "{retry:?}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &eff).await, State::Resolved);
}

/// Open event streams survive a nats-server restart: they neither end nor go
/// silent (they used to be silent for about 17 s, then end). Each re-creates its
/// consumer from the next sequence it has not delivered, so what was stored while
/// the server was away, and after, arrives once.
#[tokio::test]
async fn open_streams_survive_a_nats_server_restart() {
    let mut app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (at, eff) = open_approval(&rt).await;
    app.wait_idle().await;
    let mut events = events_of(&app, "ana", "?type=interaction-resolved").await;
    assert!(events.is_stream());
    let rpc = Rpc::new(&app, "acme", "ana");
    let mut sub = rpc
        .stream("SubscribeToTask", json!({"id": at.task_id.as_str()}))
        .await;
    let Next::Frame(task) = sub.next(WAIT).await else {
        panic!("no task first");
    };
    assert_eq!(
        task.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_AUTH_REQUIRED"
    );

    app.nats.restart().await;
    let ana = app.person("acme", "ana");
    let path = format!("/v1/interactions/{eff}/approve");
    holdpoint_tests::nats::wait_for(
        Duration::from_secs(30),
        "an answer after the restart",
        || {
            let (ana, path) = (&ana, &path);
            async move {
                let r = ana
                    .try_post_keyed(path, "k-restart", &json!({"approved": true}))
                    .await
                    .ok()?;
                (r.status == 204).then_some(())
            }
        },
    )
    .await;
    let answered = tokio::time::Instant::now();
    // Within a few seconds of the answer, not after heartbeats time out.
    let within = Duration::from_secs(8);
    let Next::Frame(resolved) = events.next(within).await else {
        panic!("/v1/events went silent or ended after the restart");
    };
    assert_eq!(resolved.event.as_deref(), Some("interaction-resolved"));
    assert_eq!(resolved.json()["data"]["interactionId"], eff.as_str());
    let Next::Frame(update) = sub.next(within).await else {
        panic!("SubscribeToTask went silent or ended after the restart");
    };
    assert_eq!(
        update.json()["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert!(answered.elapsed() < within, "took {:?}", answered.elapsed());
    // Once each, and the streams stay open.
    assert!(matches!(
        events.next(Duration::from_secs(1)).await,
        Next::Quiet
    ));
    assert!(matches!(
        sub.next(Duration::from_secs(1)).await,
        Next::Quiet
    ));
}

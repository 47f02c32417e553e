//! The operator verbs (`holdpoint pending | show | answer | approve | tail`, and
//! `approve --remember`, `rules`, `rules revoke`, `audit`) as a person would run
//! them, with a bearer token, and the runtime example in
//! `services/client/examples/approval_runtime.rs` run end to end.

use std::process::Stdio;
use std::time::Duration;

use holdpoint_domain::{SessionMode, State};
use holdpoint_ingress::IdentityMode;
use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
use holdpoint_tests::app::{AppOptions, TestApp, holdpoint_binary};
use holdpoint_tests::jwt::{AUDIENCE, ISSUER, JwksServer, TestKey, claims};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::common::*;

pub(crate) async fn jwt_app() -> (TestApp, TestKey, JwksServer) {
    let key = TestKey::ed25519("op");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let mut cfg = AuthConfig::new(ISSUER, JwksSource::Url(jwks.url.clone()));
    cfg.audience = Some(AUDIENCE.into());
    let app = TestApp::start_with(AppOptions {
        identity: IdentityMode {
            jwt: Some(Verifier::new(cfg).await.expect("verifier")),
            ..IdentityMode::default()
        },
        ..AppOptions::default()
    })
    .await;
    (app, key, jwks)
}

/// Runs the built `holdpoint` with `args`: (success, stdout, stderr).
pub(crate) async fn cli<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (bool, String, String) {
    let out = tokio::process::Command::new(holdpoint_binary())
        .args(args)
        .output()
        .await
        .expect("holdpoint");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`cli`] as a person: `args`, then `--url base --token token`.
pub(crate) async fn cli_as(base: &str, token: &str, args: &[&str]) -> (bool, String, String) {
    let mut v: Vec<&str> = args.to_vec();
    v.extend(["--url", base, "--token", token]);
    cli(&v).await
}

#[tokio::test]
async fn a_person_works_from_the_command_line() {
    let (app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let (_, eff) = open_approval(&rt).await;
    let token = key.sign(&claims("acme", "ana"));
    let base = app.base.clone();
    let with = |extra: &[&str]| {
        let mut v: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        v.extend([
            "--url".into(),
            base.clone(),
            "--token".into(),
            token.clone(),
        ]);
        v
    };
    let run = |v: Vec<String>| async move {
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        cli(&refs).await
    };

    let (ok, out, err) = run(with(&["pending", "--json"])).await;
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    let ids: Vec<&str> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["interactionId"].as_str())
        .collect();
    assert_eq!(ids, vec![q.as_str(), eff.as_str()]);

    // One at a time: the "… more" line is the command that prints the next page
    // (the token aside), and the last page has none.
    let (ok, out, err) = run(with(&["pending", "--limit", "1"])).await;
    assert!(ok, "{err}");
    assert!(
        out.contains(q.as_str()) && !out.contains(eff.as_str()),
        "{out}"
    );
    let next = out
        .lines()
        .find_map(|l| l.strip_prefix("… more: holdpoint "))
        .unwrap_or_else(|| panic!("no next command in {out:?}"));
    assert!(
        next.starts_with(&format!("pending --url {base} --limit 1 --cursor ")),
        "{next}"
    );
    let mut next: Vec<String> = next.split(' ').map(str::to_owned).collect();
    next.extend(["--token".into(), token.clone()]);
    let (ok, out, err) = run(next).await;
    assert!(ok, "{err}");
    assert!(
        out.contains(eff.as_str()) && !out.contains(q.as_str()),
        "{out}"
    );
    assert!(!out.contains("… more"), "{out}");

    let (ok, out, _) = run(with(&["show", &q])).await;
    assert!(ok);
    assert!(out.contains("[2] Keep both"), "{out}");
    // Ids and names print as text, not as JSON strings.
    let (ok, out, _) = run(with(&["show", &eff])).await;
    assert!(ok);
    assert!(out.contains("call github / create_pull_request {"), "{out}");
    assert!(!out.contains("\"github\""), "{out}");

    let (ok, out, err) = run(with(&[
        "answer",
        &q,
        "--answer",
        "0",
        "--answer",
        "2:Keep both and reconcile nightly.",
        "--json",
    ]))
    .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"{"status":204}"#);
    // A different answer afterwards: refused, with the code on stderr and exit 1.
    let (ok, _, err) = run(with(&["answer", &q, "--answer", "1", "--answer", "0"])).await;
    assert!(!ok);
    assert!(err.contains("409 NRY-0009"), "{err}");

    let (ok, out, err) = run(with(&[
        "approve", &eff, "--deny", "--reason", "not now", "--json",
    ]))
    .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"{"status":204}"#);
    // Without a token: 401.
    let (ok, _, err) = cli(&["pending", "--url", &app.base]).await;
    assert!(!ok);
    assert!(
        err.contains("401 NRY-0011") && err.contains("HOLDPOINT_TOKEN"),
        "{err}"
    );

    // tail: both tool-call-finished events, from the start of the stream.
    let mut child = tokio::process::Command::new(holdpoint_binary())
        .args(with(&[
            "tail",
            "--from-start",
            "--json",
            "--type",
            "tool-call-finished",
        ]))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("tail");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("tail timed out")
            .expect("read")
            .expect("tail ended");
        let e: Value = serde_json::from_str(&line).expect("event json");
        assert_eq!(e["type"], "dev.holdpoint.tool-call-finished");
        seen.push(e["data"]["interactionId"].as_str().expect("id").to_owned());
    }
    seen.sort();
    let mut want = vec![q.clone(), eff.clone()];
    want.sort();
    assert_eq!(seen, want);
    let _ = child.kill().await;
    assert_eq!(state_of(&app, "acme", &eff).await, State::Finished);
}

#[tokio::test]
async fn a_person_remembers_revokes_and_reads_the_audit_from_the_command_line() {
    let (app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let (at, first) = open_approval(&rt).await;
    let token = key.sign(&claims("acme", "ana"));
    let run = |extra: &[&str]| {
        let mut v: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        v.extend([
            "--url".into(),
            app.base.clone(),
            "--token".into(),
            token.clone(),
        ]);
        async move {
            let refs: Vec<&str> = v.iter().map(String::as_str).collect();
            cli(&refs).await
        }
    };

    // Approve and remember for this session, for an hour.
    let (ok, out, err) = run(&[
        "approve",
        &first,
        "--remember",
        "session",
        "--expires-in",
        "3600",
        "--json",
    ])
    .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"{"status":204}"#);
    let (ok, out, err) = run(&["rules", "--json"]).await;
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{page}");
    let rule = &items[0];
    assert_eq!(
        (
            &rule["effect"],
            &rule["scope"],
            &rule["fromInteraction"],
            &rule["createdBy"]
        ),
        (
            &json!("allow"),
            &json!("session"),
            &json!(first),
            &json!("ana")
        ),
        "{rule}"
    );
    assert!(rule["expiresAt"].is_string(), "{rule}");
    let id = rule["id"].as_str().expect("rule id").to_owned();
    let (ok, out, _) = run(&["rules"]).await;
    assert!(ok);
    assert!(
        out.contains(&id) && out.contains("allow github / create_pull_request"),
        "{out}"
    );

    // The next call held in the session is released by the rule, with nobody asked.
    let second = hold_call(&rt, &at, "create_pull_request", json!({"n": 2}), None).await;
    let decided = app.interaction("acme", &second).await.expect("stored");
    assert_eq!(decided.state, State::Resolved);
    assert_eq!(
        decided.resolution.as_ref().map(|r| r.key.as_str()),
        Some(id.as_str())
    );

    // Revoke: printed as revoked by ana; the next hold waits for a person.
    let (ok, out, err) = run(&["rules", "revoke", &id]).await;
    assert!(ok, "{err}");
    assert!(out.contains(&id) && out.contains("revoked by ana"), "{out}");
    let third = hold_call(&rt, &at, "create_pull_request", json!({"n": 3}), None).await;
    assert_eq!(state_of(&app, "acme", &third).await, State::Pending);
    let (ok, _, err) = run(&["rules", "revoke", "rul_0123456789abcdef0123456789abcdef"]).await;
    assert!(!ok);
    assert!(err.contains("404 NRY-0027"), "{err}");

    // A deny narrowed to these exact arguments, for the organisation.
    let (ok, _, err) = run(&[
        "approve",
        &third,
        "--deny",
        "--remember",
        "organisation",
        "--exact-arguments",
    ])
    .await;
    assert!(ok, "{err}");
    let (_, out, _) = run(&["rules", "--json"]).await;
    let page: Value = serde_json::from_str(&out).expect("json");
    let deny = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|r| r["fromInteraction"] == third.as_str())
        .cloned()
        .expect("the deny rule");
    assert_eq!(
        (&deny["effect"], &deny["scope"]),
        (&json!("deny"), &json!("organisation"))
    );
    assert!(deny["argumentsDigest"].is_string(), "{deny}");

    // The audit: the person's approval, the rule it wrote, the rule's decision, the
    // revocation, the person's deny and its rule; nothing else.
    let (ok, out, err) = run(&["audit", "--json"]).await;
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    let mut seen: Vec<(String, String)> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            let r = &i["record"];
            let name = r["type"].as_str().unwrap_or_default().to_owned();
            let who = r["data"]["decidedBy"]
                .as_str()
                .or_else(|| r["data"]["rule"]["id"].as_str())
                .unwrap_or_default()
                .to_owned();
            (name, who)
        })
        .collect();
    seen.sort();
    let deny_id = deny["id"].as_str().expect("id");
    let mut want: Vec<(String, String)> = [
        ("approval-decided", "person"),
        ("approval-decided", "person"),
        ("approval-decided", "rule"),
        ("rule-revoked", id.as_str()),
        ("rule-written", id.as_str()),
        ("rule-written", deny_id),
    ]
    .iter()
    .map(|(n, w)| (format!("dev.holdpoint.{n}"), (*w).to_owned()))
    .collect();
    want.sort();
    assert_eq!(seen, want, "{page}");
    let (ok, out, _) = run(&["audit"]).await;
    assert!(ok);
    assert!(
        out.contains(&format!("rule {id} written by ana"))
            && out.contains(&format!("rule {id} revoked by ana")),
        "{out}"
    );
}

/// The next line `tail --json` prints, as JSON.
async fn next_event(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("tail timed out")
        .expect("read")
        .expect("tail ended");
    serde_json::from_str(&line).expect("event json")
}

async fn next(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("example timed out")
        .expect("read")
        .expect("example ended early")
}

#[tokio::test]
async fn the_runtime_example_runs_a_released_call_once() {
    let (app, key, _jwks) = jwt_app().await;
    let example = holdpoint_tests::app::target_dir().join("debug/examples/approval_runtime");
    assert!(
        example.is_file(),
        "{} is missing: run `cargo build --examples` (ops/test.sh does)",
        example.display()
    );
    let mut child = tokio::process::Command::new(&example)
        .args([app.nats.url(), "acme".to_owned()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("example");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let held = next(&mut lines).await;
    let effect = held
        .split_whitespace()
        .find(|w| w.starts_with("eff_"))
        .expect("effect id")
        .trim_end_matches(';')
        .to_owned();
    let ana = app.bearer(&key.sign(&claims("acme", "ana")));
    let r = ana
        .post(
            &format!("/v1/interactions/{effect}/approve"),
            &serde_json::json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let mut rest = Vec::new();
    loop {
        let line = next(&mut lines).await;
        let done = line.contains("finished:");
        rest.push(line);
        if done {
            break;
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit")
        .expect("wait");
    assert!(status.success());
    assert!(
        rest.iter()
            .any(|l| l.starts_with("approved by ana: running github / create_pull_request")),
        "{rest:?}"
    );
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "tool-call-released", &effect).len(), 1);
    assert_eq!(finished(&events, &effect).len(), 1);
}

/// A TCP relay to the ingress that records each connection's request head and can
/// cut every open connection at once, as a restarting proxy or a lost network would.
struct CuttableProxy {
    url: String,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CuttableProxy {
    async fn start(upstream: &str) -> CuttableProxy {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let upstream = upstream
            .strip_prefix("http://")
            .expect("http base")
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (h, o) = (heads.clone(), open.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let (upstream, heads) = (upstream.clone(), h.clone());
                let task = tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    // A GET has no body: its head ends at the first blank line.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match client.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    heads
                        .lock()
                        .expect("heads")
                        .push(String::from_utf8_lossy(&head).to_lowercase());
                    if server.write_all(&head).await.is_err() {
                        return;
                    }
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                o.lock().expect("open").push(task.abort_handle());
            }
        });
        CuttableProxy {
            url,
            heads,
            open,
            accept,
        }
    }

    /// Drops every open connection (both sides see the socket close).
    fn cut(&self) {
        for t in self.open.lock().expect("open").drain(..) {
            t.abort();
        }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("heads").clone()
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

#[tokio::test]
async fn tail_resumes_after_a_dropped_connection_from_the_last_event() {
    let (app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let token = key.sign(&claims("acme", "ana"));
    let proxy = CuttableProxy::start(&app.base).await;
    let open = |name: &'static str| {
        let rt = &rt;
        async move {
            let session = format!("{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
            rt.open_session(&session, SessionMode::Blocking)
                .await
                .expect("session");
            session
        }
    };
    let first = open("first").await;
    let mut child = tokio::process::Command::new(holdpoint_binary())
        .args([
            "tail",
            "--url",
            &proxy.url,
            "--token",
            &token,
            "--json",
            "--from-start",
            "--type",
            "session-opened",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("tail");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut errors = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let a = next_event(&mut lines).await;
    assert_eq!(a["type"], "dev.holdpoint.session-opened");
    assert!(
        a["subject"].as_str().expect("subject").contains(&first),
        "{a}"
    );
    assert_eq!(proxy.heads().len(), 1);

    // The connection drops; tail says so and connects again by itself.
    proxy.cut();
    let said = tokio::time::timeout(Duration::from_secs(20), errors.next_line())
        .await
        .expect("no word of the drop")
        .expect("read")
        .expect("stderr open");
    assert!(said.starts_with("tail: "), "{said}");
    let second = open("second").await;
    let b = next_event(&mut lines).await;
    // The next line is the new event: the first is not printed again.
    assert!(
        b["subject"].as_str().expect("subject").contains(&second),
        "{b}"
    );
    let third = open("third").await;
    let c = next_event(&mut lines).await;
    assert!(
        c["subject"].as_str().expect("subject").contains(&third),
        "{c}"
    );

    // The server, not only the client, resumed: the connection after the drop
    // asked for what follows the first event's sequence.
    let heads = proxy.heads();
    assert!(heads.len() >= 2, "{heads:?}");
    assert!(!heads[0].contains("last-event-id"), "{}", heads[0]);
    let resumed = heads
        .iter()
        .skip(1)
        .all(|h| h.contains("last-event-id: ") && h.contains("after=0"));
    assert!(resumed, "{heads:?}");
    let _ = child.kill().await;
}

/// What an [`impatient_proxy`] answered: path, status, `Idempotency-Key`.
type Answered = std::sync::Arc<std::sync::Mutex<Vec<(String, u16, Option<String>)>>>;

/// A reverse proxy in front of `upstream` that waits at most `patience` for an
/// answer, as a gateway with a short read timeout does: it then answers `504`
/// while the request it passed on goes on to the end (its late answer dropped).
async fn impatient_proxy(upstream: String, patience: Duration) -> (String, Answered) {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::IntoResponse as _;
    let answered: Answered = Default::default();
    let log = answered.clone();
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (http, upstream, log) = (http.clone(), upstream.clone(), log.clone());
            async move {
                let path = uri
                    .path_and_query()
                    .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let mut req = http.request(method, format!("{upstream}{path}")).body(body);
                for (k, v) in &headers {
                    if k != "host" && k != "content-length" {
                        req = req.header(k, v);
                    }
                }
                // Passed on in a task of its own: it goes on after the proxy gives up.
                let call = tokio::spawn(async move {
                    let r = req.send().await.ok()?;
                    let status = r.status().as_u16();
                    let headers = r.headers().clone();
                    Some((status, headers, r.bytes().await.ok()?))
                });
                let (status, response) = match tokio::time::timeout(patience, call).await {
                    Ok(Ok(Some((status, headers, bytes)))) => {
                        let mut out = (
                            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                            bytes,
                        )
                            .into_response();
                        if let Some(ct) = headers.get("content-type") {
                            out.headers_mut().insert("content-type", ct.clone());
                        }
                        (status, out)
                    }
                    Ok(_) => (
                        502,
                        (StatusCode::BAD_GATEWAY, "bad gateway").into_response(),
                    ),
                    Err(_) => (
                        504,
                        (
                            StatusCode::GATEWAY_TIMEOUT,
                            [("content-type", "text/html")],
                            "<html><body><h1>504 Gateway Time-out</h1></body></html>",
                        )
                            .into_response(),
                    ),
                };
                log.lock().expect("log").push((path, status, key));
                response
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind proxy");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, answered)
}

/// `holdpoint approve` behind a proxy whose timeout (2 s) is shorter than the
/// ingress's outcome wait (5 s): the proxy answers `504` while the decision is
/// still being recorded; the CLI sends it again with the same key, and ends with
/// the recorded approval, not a failure.
#[tokio::test]
async fn approve_behind_a_proxy_that_times_out_first_ends_approved() {
    let (mut app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let (_, eff) = open_approval(&rt).await;
    let token = key.sign(&claims("acme", "ana"));
    let (proxy, answered) = impatient_proxy(app.base.clone(), Duration::from_secs(2)).await;
    app.stop_workers().await;
    let approve = {
        let (proxy, token, eff) = (proxy.clone(), token.clone(), eff.clone());
        tokio::spawn(async move {
            cli(&[
                "approve",
                &eff,
                "--url",
                &proxy,
                "--token",
                &token,
                "--key",
                "k-cli-504",
            ])
            .await
        })
    };
    let path = format!("/v1/interactions/{eff}/approve");
    holdpoint_tests::nats::wait_for(Duration::from_secs(20), "the proxy's 504", || {
        let seen = answered
            .lock()
            .expect("log")
            .iter()
            .any(|(p, s, _)| *p == path && *s == 504);
        async move { seen.then_some(()) }
    })
    .await;
    app.start_worker().await;
    let (ok, out, err) = approve.await.expect("cli task");
    assert!(ok, "the CLI failed for a recorded decision: {out}\n{err}");
    let record = app.interaction("acme", &eff).await.expect("stored");
    assert_eq!(record.state, State::Resolved);
    let resolution = record.resolution.expect("resolution");
    assert_eq!(resolution.key.as_str(), "k-cli-504");
    let posts: Vec<_> = answered
        .lock()
        .expect("log")
        .iter()
        .filter(|(p, _, _)| *p == path)
        .cloned()
        .collect();
    assert!(posts.len() >= 2, "retried: {posts:?}");
    assert!(
        posts
            .iter()
            .all(|(_, _, k)| k.as_deref() == Some("k-cli-504")),
        "{posts:?}"
    );
    assert_eq!(posts.last().map(|p| p.1), Some(204), "{posts:?}");
    app.wait_idle().await;
    let events = app.events("acme").await;
    assert_eq!(named(&events, "interaction-resolved", &eff).len(), 1);
}

/// `holdpoint up` in `dir` (its store in `dir/nats`), on loopback with free API
/// and admin ports, its NATS on `nats_port` (`0`: a free one), development JWTs.
pub(crate) fn up_command(dir: &std::path::Path, nats_port: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(holdpoint_binary());
    c.current_dir(dir)
        .env("NO_COLOR", "1")
        .args([
            "up",
            "--dev-jwt",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--nats-port",
            nats_port,
            "--store",
        ])
        .arg(dir.join("nats"));
    c
}

/// `holdpoint up` on a NATS port another server already holds refuses to start,
/// naming the port, instead of running on that server's store (where earlier
/// answers would look lost and new ones land in somebody else's data).
#[tokio::test]
async fn up_refuses_a_nats_port_another_server_holds() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("addr").port().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        up_command(dir.path(), &port).kill_on_drop(true).output(),
    )
    .await
    .expect("holdpoint up exits within 60 s")
    .expect("holdpoint up runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "up started on a taken port: {stderr}"
    );
    assert!(
        stderr.contains(&format!("127.0.0.1:{port} is already in use")),
        "{stderr}"
    );
    drop(taken);
}

/// `holdpoint respond` answers a question with a form from the command line: a
/// value that does not fit is refused with its code and pointer and changes
/// nothing; `show` says how to answer the form; the fitting value resolves it.
#[tokio::test]
async fn a_form_is_answered_from_the_command_line() {
    let (app, key, _jwks) = jwt_app().await;
    let rt = app.runtime("acme").await;
    let session = open_session(&rt, SessionMode::Blocking).await;
    let form = json!({
        "type": "object",
        "properties": {"seats": {"type": "integer", "minimum": 1, "maximum": 50}},
        "required": ["seats"]
    });
    let q = rt
        .ask_user_form(&placement(&session), "call-cli-form", "Seats?", form, None)
        .await
        .expect("form")
        .to_string();
    let token = key.sign(&claims("acme", "ana"));
    let (ok, out, err) = cli_as(&app.base, &token, &["show", &q]).await;
    assert!(ok, "{err}");
    assert!(out.contains("(a form)"), "{out}");
    assert!(
        out.contains(&format!("holdpoint respond {q} --value")),
        "{out}"
    );

    let (ok, _, err) = cli_as(
        &app.base,
        &token,
        &["respond", &q, "--value", "{\"seats\":51}", "--key", "k1"],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("NRY-0036") && err.contains("/seats"), "{err}");
    let (ok, _, err) = cli_as(&app.base, &token, &["respond", &q, "--value", "{seats:5}"]).await;
    assert!(!ok);
    assert!(err.contains("--value is not valid JSON"), "{err}");
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);

    // The same key, corrected: it decides (a refusal does not bind the key).
    let (ok, _, err) = cli_as(
        &app.base,
        &token,
        &["respond", &q, "--value", "{\"seats\":5}", "--key", "k1"],
    )
    .await;
    assert!(ok, "{err}");
    app.wait_idle().await;
    assert_ne!(state_of(&app, "acme", &q).await, State::Pending);
}

/// `holdpoint up` stops, with an error naming the log, when its own nats-server
/// exits under it (it served 503s and a /readyz that never recovered).
#[tokio::test]
async fn up_stops_when_its_nats_server_dies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut up = up_command(dir.path(), "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("holdpoint up");
    let mut lines = BufReader::new(up.stdout.take().expect("stdout")).lines();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read") {
            if line.starts_with("holdpoint api:") {
                return;
            }
        }
        panic!("up ended before it served");
    })
    .await
    .expect("up serves within 60 s");
    // Keep reading, so a full pipe never holds `up` up; stderr likewise.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let stderr_pipe = up.stderr.take().expect("stderr");
    let stderr_read = tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        let mut s = String::new();
        let mut e = stderr_pipe;
        let _ = e.read_to_string(&mut s).await;
        s
    });
    let up_pid = up.id().expect("pid");
    // Its nats-server: the child of `up` named nats-server.
    let nats_pid = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid …`: comm may hold spaces, so read after ')'.
            let comm = stat.split(['(', ')']).nth(1).unwrap_or("");
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            comm == "nats-server" && ppid == Some(up_pid)
        })
        .expect("up's nats-server");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(nats_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    let status = tokio::time::timeout(Duration::from_secs(60), up.wait())
        .await
        .expect("up stops within 60 s of its nats-server")
        .expect("wait");
    assert!(!status.success(), "up exited 0 after its nats-server died");
    let stderr = stderr_read.await.expect("stderr read");
    assert!(stderr.contains("the local nats-server exited"), "{stderr}");
}

//! Authentication on every transport (README "Identity"): JWTs verified against the issuer's
//! JWKS, the Unix socket's local-user rule, and tenant isolation with real tokens.
//! Every failure must answer the same 401 NRY-0011 body.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use holdpoint_domain::{SessionMode, State};
use holdpoint_ingress::IdentityMode;
use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
use holdpoint_tests::app::{AppOptions, Reply, TestApp};
use holdpoint_tests::jwt::{AUDIENCE, ISSUER, JwksServer, TestKey, claims, now};
use serde_json::{Value, json};

use crate::common::*;

async fn verifier(jwks_url: &str, cooldown: Duration) -> Verifier {
    let mut cfg = AuthConfig::new(ISSUER, JwksSource::Url(jwks_url.to_owned()));
    cfg.audience = Some(AUDIENCE.into());
    cfg.leeway_secs = 5;
    cfg.refetch_cooldown = cooldown;
    Verifier::new(cfg).await.expect("verifier")
}

async fn app_with(v: Verifier) -> TestApp {
    TestApp::start_with(AppOptions {
        identity: IdentityMode {
            jwt: Some(v),
            ..IdentityMode::default()
        },
        ..AppOptions::default()
    })
    .await
}

fn assert_401(r: &Reply, what: &str) {
    assert_eq!(r.status, 401, "{what}: {r:?}");
    assert_eq!(
        r.body,
        json!({"code": "NRY-0011", "title": "Unauthenticated", "message": "a valid identity is required"}),
        "{what}: the body must not say what failed"
    );
}

fn forge(header: &Value, claims: &Value, sig: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(sig)
    )
}

#[tokio::test]
async fn tokens_are_verified_and_every_failure_looks_the_same() {
    let (rsa, ec, ed) = (
        TestKey::rsa("rsa-1"),
        TestKey::p256("ec-1"),
        TestKey::ed25519("ed-1"),
    );
    let jwks = JwksServer::start(vec![
        rsa.jwk.clone(),
        ec.jwk.clone(),
        ed.jwk.clone(),
        // Skipped without breaking the set: an encryption key, an HMAC secret, an
        // unknown key type.
        json!({"kty": "RSA", "use": "enc", "kid": "enc-1", "n": rsa.jwk["n"], "e": "AQAB"}),
        json!({"kty": "oct", "kid": "hmac-1", "k": "c2VjcmV0"}),
        json!({"kty": "XYZ", "kid": "odd-1", "foo": "bar"}),
    ])
    .await;
    let app = app_with(verifier(&jwks.url, Duration::from_secs(30)).await).await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;

    for key in [&rsa, &ec, &ed] {
        let r = app
            .bearer(&key.sign(&claims("acme", "ana")))
            .get("/v1/interactions")
            .await;
        assert_eq!(r.status, 200, "{:?}: {r:?}", key.alg);
        assert_eq!(r.body["items"][0]["interactionId"], json!(q));
    }

    let base = claims("acme", "ana");
    let with = |k: &str, v: Value| {
        let mut c = base.clone();
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = base.clone();
        c.as_object_mut().expect("object").remove(k);
        c
    };
    let rsa_public = std::fs::read(
        holdpoint_tests::nats::workspace_root().join("tests/fixtures/rsa-test-pub.pem"),
    )
    .expect("pem");
    let hs256_with_public_key = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("rsa-1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &base,
        &jsonwebtoken::EncodingKey::from_secret(&rsa_public).expect("secret"),
    )
    .expect("hs256");
    let other_key = TestKey::ed25519("ed-1");
    let cases: Vec<(&str, String)> = vec![
        ("expired", ed.sign(&with("exp", json!(now() - 120)))),
        ("not yet valid", ed.sign(&with("nbf", json!(now() + 120)))),
        (
            "wrong issuer",
            ed.sign(&with("iss", json!("https://evil.test"))),
        ),
        (
            "wrong audience",
            ed.sign(&with("aud", json!("someone-else"))),
        ),
        ("no audience", ed.sign(&without("aud"))),
        ("no organisation claim", ed.sign(&without("org"))),
        (
            "organisation not a string",
            ed.sign(&with("org", json!(["acme"]))),
        ),
        (
            "organisation not an id",
            ed.sign(&with("org", json!("a b"))),
        ),
        ("array iss", ed.sign(&with("iss", json!([ISSUER])))),
        (
            "string exp",
            ed.sign(&with("exp", json!((now() + 600).to_string()))),
        ),
        ("no sub", ed.sign(&without("sub"))),
        ("no exp", ed.sign(&without("exp"))),
        (
            "alg none",
            forge(&json!({"alg": "none", "kid": "ed-1"}), &base, b""),
        ),
        (
            "alg none, no signature",
            format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
                URL_SAFE_NO_PAD.encode(base.to_string())
            ),
        ),
        ("HS256 keyed with the RSA public key", hs256_with_public_key),
        (
            "signed by another key with the same kid",
            other_key.sign(&base),
        ),
        (
            "ES256 header on the RSA key",
            forge(&json!({"alg": "ES256", "kid": "rsa-1"}), &base, b"x"),
        ),
        (
            "kid of the encryption key",
            forge(&json!({"alg": "RS256", "kid": "enc-1"}), &base, b"x"),
        ),
        (
            "kid of the HMAC key",
            forge(&json!({"alg": "HS256", "kid": "hmac-1"}), &base, b"x"),
        ),
        ("no kid with several keys", ed.sign_without_kid(&base)),
        ("garbage", "not.a.jwt".into()),
        ("empty segments", "..".into()),
    ];
    for (what, token) in &cases {
        assert_401(&app.bearer(token).get("/v1/interactions").await, what);
        assert_401(
            &app.bearer(token)
                .post(&format!("/v1/questions/{q}/answer"), &example_answer())
                .await,
            what,
        );
    }
    let good = ed.sign(&base);
    let anon = app.bearer("");
    for (what, headers) in [
        (
            "two Authorization headers",
            vec![
                ("authorization", format!("Bearer {good}")),
                ("authorization", format!("Bearer {good}")),
            ],
        ),
        (
            "Basic scheme",
            vec![("authorization", "Basic YW5hOnB3".to_owned())],
        ),
        ("no credentials", vec![]),
        (
            "development headers are off",
            vec![
                ("x-holdpoint-org", "acme".to_owned()),
                ("x-holdpoint-person", "ana".to_owned()),
            ],
        ),
    ] {
        let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_401(&anon.get_with("/v1/interactions", &hs).await, what);
    }
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
}

/// RFC 7519 NumericDates may be decimal: a correctly signed token whose `exp`,
/// `nbf` and `iat` have fractions is accepted (it used to be 401, "invalid type:
/// floating point, expected u64"); the times still bind, and a string `exp` stays
/// 401.
#[tokio::test]
async fn decimal_numeric_dates_are_accepted_and_still_checked() {
    let ed = TestKey::ed25519("ed-1");
    let jwks = JwksServer::start(vec![ed.jwk.clone()]).await;
    let app = app_with(verifier(&jwks.url, Duration::from_secs(30)).await).await;
    let t = now() as f64;
    let with = |pairs: &[(&str, Value)]| {
        let mut c = claims("acme", "ana");
        for (k, v) in pairs {
            c[*k] = v.clone();
        }
        c
    };
    let decimal = with(&[
        ("exp", json!(t + 3600.5)),
        ("nbf", json!(t - 10.25)),
        ("iat", json!(t - 10.75)),
    ]);
    let r = app.bearer(&ed.sign(&decimal)).get("/v1/interactions").await;
    assert_eq!(r.status, 200, "{r:?}");
    for (what, c) in [
        (
            "decimal exp in the past",
            with(&[("exp", json!(t - 120.5))]),
        ),
        (
            "decimal nbf in the future",
            with(&[("nbf", json!(t + 120.5))]),
        ),
        (
            "string exp",
            with(&[("exp", json!(format!("{}", t + 3600.0)))]),
        ),
        (
            "decimal string exp",
            with(&[("exp", json!(format!("{}.5", t + 3600.0)))]),
        ),
        ("string iat", with(&[("iat", json!(format!("{t}")))])),
    ] {
        assert_401(
            &app.bearer(&ed.sign(&c)).get("/v1/interactions").await,
            what,
        );
    }
}

#[tokio::test]
async fn unknown_kid_picks_up_a_rotation_without_restart() {
    let old = TestKey::ed25519("k-old");
    let jwks = JwksServer::start(vec![old.jwk.clone()]).await;
    let app = app_with(verifier(&jwks.url, Duration::from_millis(200)).await).await;
    assert_eq!(
        app.bearer(&old.sign(&claims("acme", "ana")))
            .get("/v1/interactions")
            .await
            .status,
        200
    );
    let new = TestKey::p256("k-new");
    jwks.set_keys(vec![new.jwk.clone()]).await;
    tokio::time::sleep(Duration::from_millis(250)).await; // past the refetch cooldown
    let r = app
        .bearer(&new.sign(&claims("acme", "ana")))
        .get("/v1/interactions")
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    // A token without kid works once the set holds exactly one key.
    assert_eq!(
        app.bearer(&new.sign_without_kid(&claims("acme", "ana")))
            .get("/v1/interactions")
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_flood_of_unknown_kids_fetches_at_most_once_per_cooldown() {
    let key = TestKey::ed25519("k1");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let v = verifier(&jwks.url, Duration::from_secs(60)).await;
    assert_eq!(jwks.fetches(), 1, "loaded once at start");
    let app = app_with(v.clone()).await;
    let callers: Vec<_> = (0..200)
        .map(|i| app.bearer(&TestKey::ed25519(&format!("random-{i}")).sign(&claims("acme", "ana"))))
        .collect();
    let replies =
        futures::future::join_all(callers.iter().map(|c| c.get("/v1/interactions"))).await;
    assert!(replies.iter().all(|r| r.status == 401));
    // All 200 unknown kids, at once and one after another: at most one refetch.
    assert!(jwks.fetches() <= 2, "fetched {} times", jwks.fetches());
    assert!(v.fetch_count() <= 2);
    // The known key still works throughout.
    assert_eq!(
        app.bearer(&key.sign(&claims("acme", "ana")))
            .get("/v1/interactions")
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn keys_are_kept_when_a_fetch_fails_or_yields_nothing() {
    let key = TestKey::rsa("r1");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let v = verifier(&jwks.url, Duration::from_millis(50)).await;
    let app = app_with(v.clone()).await;
    let ana = app.bearer(&key.sign(&claims("acme", "ana")));
    for broken in ["500", "empty set", "only an encryption key"] {
        match broken {
            "500" => jwks.set_failing(true),
            "empty set" => {
                jwks.set_failing(false);
                jwks.set_keys(vec![]).await;
            }
            _ => {
                jwks.set_keys(vec![
                    json!({"kty": "RSA", "use": "enc", "kid": "e", "n": key.jwk["n"], "e": "AQAB"}),
                ])
                .await
            }
        }
        tokio::time::sleep(Duration::from_millis(60)).await; // past the cooldown
        let before = jwks.fetches();
        // An unknown kid makes Holdpoint fetch; the fetch fails or yields no key.
        let stranger = TestKey::ed25519(&format!("new-{broken}")).sign(&claims("acme", "a"));
        assert_eq!(
            app.bearer(&stranger).get("/v1/interactions").await.status,
            401,
            "{broken}"
        );
        assert_eq!(jwks.fetches(), before + 1, "{broken}: one fetch");
        // The old key still verifies.
        assert_eq!(ana.get("/v1/interactions").await.status, 200, "{broken}");
    }
}

#[tokio::test]
async fn a_cached_token_still_expires() {
    let key = TestKey::ed25519("k");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let mut cfg = AuthConfig::new(ISSUER, JwksSource::Url(jwks.url.clone()));
    cfg.audience = Some(AUDIENCE.into());
    cfg.leeway_secs = 0;
    let v = Verifier::new(cfg).await.expect("verifier");
    let mut c = claims("acme", "ana");
    c["exp"] = json!(now() + 2);
    let token = key.sign(&c);
    assert!(v.verify(&token).await.is_ok());
    assert!(v.verify(&token).await.is_ok(), "served from the cache");
    // Wait out the token's lifetime (wall-clock expiry is the thing under test).
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert!(
        v.verify(&token).await.is_err(),
        "an expired token is refused even after a cache hit"
    );
}

#[tokio::test]
async fn another_organisation_sees_nothing_and_changes_nothing() {
    let key = TestKey::ed25519("k");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let app = app_with(verifier(&jwks.url, Duration::from_secs(30)).await).await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let (_, eff) = open_approval(&rt).await;
    let eve = app.bearer(&key.sign(&claims("globex", "eve")));
    let missing = uuid::Uuid::new_v4().to_string();
    let not_found_q = eve
        .post(
            &format!("/v1/questions/{missing}/answer"),
            &example_answer(),
        )
        .await;
    let r = answer_example(&eve, &q).await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"));
    assert_eq!(r.body["title"], not_found_q.body["title"]);
    // A wrong-shaped answer to the other tenant's question still says "not found":
    // no option-count check runs before the organisation's.
    let r = eve
        .post(
            &format!("/v1/questions/{q}/answer"),
            &json!({"answers": [{"options": [99]}]}),
        )
        .await;
    assert_eq!((r.status, r.code()), (404, "NRY-0004"));
    for path in [
        format!("/v1/interactions/{eff}"),
        format!("/v1/interactions/{q}"),
    ] {
        let r = eve.get(&path).await;
        assert_eq!((r.status, r.code()), (404, "NRY-0004"), "{path}");
    }
    for op in ["approve", "respond"] {
        let r = eve
            .post(
                &format!("/v1/interactions/{eff}/{op}"),
                &json!({"approved": true}),
            )
            .await;
        assert_eq!((r.status, r.code()), (404, "NRY-0004"), "{op}");
    }
    assert_eq!(
        eve.get("/v1/interactions?state=all").await.body["items"],
        json!([])
    );
    app.wait_idle().await;
    assert_eq!(state_of(&app, "acme", &q).await, State::Pending);
    assert_eq!(state_of(&app, "acme", &eff).await, State::Pending);
    // The owner can.
    let ana = app.bearer(&key.sign(&claims("acme", "ana")));
    assert_eq!(answer_example(&ana, &q).await.status, 204);
}

/// The socket rule: the service's own uid without a token is the machine's user;
/// another uid without a token and any bad token are 401.
#[tokio::test]
async fn unix_socket_local_user_rule() {
    let key = TestKey::ed25519("k");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let local_org = holdpoint_domain::OrgId::parse("acme").expect("org");
    let app = TestApp::start_with(AppOptions {
        identity: IdentityMode {
            jwt: Some(verifier(&jwks.url, Duration::from_secs(30)).await),
            local: Some(holdpoint_ingress::LocalIdentity::current(local_org).expect("local")),
            insecure_dev_headers: false,
        },
        ..AppOptions::default()
    })
    .await;
    let rt = app.runtime("acme").await;
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("run").join("holdpoint.sock");
    let state = holdpoint_ingress::AppState::new(
        app.bus.clone(),
        holdpoint_ingress::IngressConfig {
            identity: IdentityMode {
                jwt: Some(verifier(&jwks.url, Duration::from_secs(30)).await),
                local: Some(
                    holdpoint_ingress::LocalIdentity::current(
                        holdpoint_domain::OrgId::parse("acme").expect("org"),
                    )
                    .expect("local"),
                ),
                insecure_dev_headers: false,
            },
            ..holdpoint_ingress::IngressConfig::default()
        },
    )
    .await
    .expect("state");
    let token = tokio_util::sync::CancellationToken::new();
    // The same `serve` as `holdpoint up`; the test talks to the socket only.
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    tokio::spawn(holdpoint_ingress::serve(
        state,
        holdpoint_ingress::Listeners {
            api,
            admin: None,
            socket: Some(sock.clone()),
        },
        token.clone(),
    ));
    holdpoint_tests::nats::wait_for(Duration::from_secs(5), "socket", || {
        let sock = sock.clone();
        async move { sock.exists().then_some(()) }
    })
    .await;
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&sock).expect("meta").permissions().mode() & 0o777,
        0o600
    );

    // A minimal HTTP/1.0 client over the socket, in Python (which setup needs anyway),
    // so it can run as another uid.
    const CLIENT: &str = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nh=''.join(a+'\\r\\n' for a in sys.argv[2:])\ns.sendall(('GET /v1/interactions HTTP/1.0\\r\\nHost: holdpoint\\r\\n'+h+'\\r\\n').encode())\nd=b''\nwhile True:\n  c=s.recv(65536)\n  if not c: break\n  d+=c\nhead,_,body=d.decode().partition('\\r\\n\\r\\n')\nprint(head.split(' ')[1]);print(body)\n";
    let curl = |extra: Vec<String>, uid: Option<u32>| {
        let sock = sock.clone();
        async move {
            let mut cmd = tokio::process::Command::new("python3");
            cmd.arg("-c").arg(CLIENT).arg(&sock);
            for e in extra.iter().filter(|e| e.as_str() != "-H") {
                cmd.arg(e);
            }
            if let Some(uid) = uid {
                cmd.uid(uid).gid(uid);
            }
            let out = tokio::time::timeout(Duration::from_secs(10), cmd.output())
                .await
                .expect("client timed out")
                .expect("python3");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let (code, body) = text.split_once('\n').unwrap_or(("", ""));
            (code.to_owned(), body.trim_end().to_owned())
        }
    };
    // Same uid, no token: the machine's user, in the local organisation.
    let (code, body) = curl(vec![], None).await;
    assert_eq!(code, "200", "{body}");
    assert!(body.contains(&q), "{body}");
    // A good token on the socket: verified as on TCP.
    let good = format!(
        "Authorization: Bearer {}",
        key.sign(&claims("globex", "eve"))
    );
    let (code, body) = curl(vec!["-H".into(), good], None).await;
    assert_eq!((code.as_str(), body.as_str()), ("200", r#"{"items":[]}"#));
    // A bad token: 401, no fallback to the local user.
    let (code, _) = curl(
        vec!["-H".into(), "Authorization: Bearer not-a-token".into()],
        None,
    )
    .await;
    assert_eq!(code, "401");
    // Another uid without a token: 401 (the socket is opened up for this test only).
    if nix::unistd::geteuid().is_root() {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::fs::set_permissions(
            sock.parent().expect("dir"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let (code, body) = curl(vec![], Some(65534)).await;
        assert_eq!(code, "401", "{body}");
    } else {
        eprintln!("not root: cannot run the client as another uid here");
    }
    token.cancel();
}

/// The built binary (one crypto backend, selected explicitly) decodes a token made by
/// `holdpoint dev-token`: jsonwebtoken panics at the first decode when no backend or
/// both are compiled in, which would only show at run time.
#[tokio::test]
async fn the_built_binary_verifies_dev_tokens() {
    let app = TestApp::start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let bin = holdpoint_tests::app::holdpoint_binary();
    let out = std::process::Command::new(&bin)
        .args(["dev-token", "--org", "acme", "--person", "ana", "--dir"])
        .arg(dir.path())
        .output()
        .expect("dev-token");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let ports = holdpoint_tests::nats::free_ports(2).expect("free ports");
    let (port, admin) = (ports[0], ports[1]);
    let mut child = std::process::Command::new(&bin)
        .args([
            "ingress",
            "--nats-url",
            &app.nats.url(),
            "--jwt-issuer",
            "holdpoint-dev",
            "--jwt-audience",
            "holdpoint",
        ])
        .arg("--jwks-file")
        .arg(dir.path().join("jwks.json"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ingress");
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/v1/interactions");
    let status = holdpoint_tests::nats::wait_for(Duration::from_secs(20), "ingress up", || {
        let (http, url, token) = (http.clone(), url.clone(), token.clone());
        async move {
            http.get(&url)
                .bearer_auth(&token)
                .send()
                .await
                .ok()
                .map(|r| r.status().as_u16())
        }
    })
    .await;
    assert_eq!(status, 200);
    let tampered = format!("{}x", &token[..token.len() - 1]);
    let r = http
        .get(&url)
        .bearer_auth(&tampered)
        .send()
        .await
        .expect("http");
    assert_eq!(r.status().as_u16(), 401);
    let _ = child.kill();
    let _ = child.wait();
}

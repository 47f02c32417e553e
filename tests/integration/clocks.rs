//! Clocks that are off (RELIABILITY.md, "Clocks"): `holdpoint ingress` and
//! `holdpoint worker` processes whose wall clock libfaketime sets 30 s or 10 minutes
//! off, either way (monotonic clocks untouched, as with a wall clock NTP has not
//! corrected), against a nats-server with the machine's clock.
//!
//! - **Tokens.** The ingress refuses a token once its own clock, less the leeway
//!   (`auth.jwt_leeway_secs`, 30 s), is past `exp`, and while `nbf` is later than its
//!   clock plus the leeway. So an ingress off by no more than the leeway refuses no
//!   valid token; one 10 min ahead refuses tokens with less than 9.5 min left, one 10
//!   min behind refuses tokens issued in the last 9.5 min and takes expired ones for
//!   9.5 min more. Checked per skew, each token well away from the boundaries.
//! - **Deadlines.** A deadline given as `expiresAt` is an instant: the server's
//!   schedule fires it on the server's clock whatever the worker's. One given as
//!   `expiresIn` is counted from the server's time too (the worker estimates it from
//!   the commands' stored timestamps), so it fires on time whichever way the
//!   worker's clock is off. Before that fix a worker 30 s behind fired a 10 s
//!   `expiresIn` at once, and one 30 s ahead fired a 5 s one 30 s late.
//!
//! Needs Debian's `faketime`; fails with the reason where it is missing, unless
//! `HOLDPOINT_SKIP_LAB=1` (ops/test.sh then leaves these tests out and says so).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use holdpoint_client::{Expiry, HoldCall, Placement};
use holdpoint_domain::SessionMode;
use holdpoint_tests::app::{AppOptions, TestApp, holdpoint_binary};
use holdpoint_tests::jwt::{AUDIENCE, ISSUER, JwksServer, TestKey, now};
use holdpoint_tests::nats::{free_port, wait_for};
use holdpoint_tests::netcluster::FAKETIME_LIB;
use serde_json::json;

fn require_faketime() {
    assert!(
        std::path::Path::new(FAKETIME_LIB).is_file(),
        "NOT RUN: {FAKETIME_LIB} is missing (Debian package faketime; ops/lab-tools.sh \
         installs it). HOLDPOINT_SKIP_LAB=1 leaves these tests out"
    );
}

fn skewed(cmd: &mut Command, skew: i64) {
    cmd.env("LD_PRELOAD", FAKETIME_LIB)
        .env("FAKETIME", format!("{skew:+}s"))
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// Kills the child on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The clock-skew rule for one token: refused when `exp < clock - leeway` or
/// `nbf > clock + leeway`, with the ingress's clock `skew` seconds off.
fn refused(exp_in: i64, nbf_in: Option<i64>, skew: i64) -> bool {
    const LEEWAY: i64 = 30;
    exp_in < skew - LEEWAY || nbf_in.is_some_and(|n| n > skew + LEEWAY)
}

#[tokio::test]
async fn a_skewed_ingress_refuses_tokens_by_its_own_clock_within_the_documented_leeway() {
    require_faketime();
    let app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let key = TestKey::ed25519("k1");
    let jwks = JwksServer::start(vec![key.jwk.clone()]).await;
    let http = reqwest::Client::new();
    // (exp - now, nbf - now) in seconds; each at least 15 s from every boundary below.
    let tokens: [(i64, Option<i64>); 7] = [
        (-45, None),
        (15, None),
        (300, None),
        (900, None),
        (900, Some(-600)),
        (900, Some(-15)),
        (900, Some(45)),
    ];
    for skew in [-600i64, -30, 30, 600] {
        let port = free_port().expect("a port");
        let mut cmd = Command::new(holdpoint_binary());
        cmd.args([
            "ingress",
            "--nats-url",
            &app.nats.url(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin-listen",
            &format!("127.0.0.1:{}", free_port().expect("a port")),
            "--jwks-url",
            &jwks.url,
            "--jwt-issuer",
            ISSUER,
            "--jwt-audience",
            AUDIENCE,
        ])
        .env("HOLDPOINT_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
        skewed(&mut cmd, skew);
        let _ingress = Proc(cmd.spawn().expect("holdpoint ingress"));
        let base = format!("http://127.0.0.1:{port}");
        let get = |token: String| {
            let http = http.clone();
            let url = format!("{base}/v1/interactions?limit=1");
            async move {
                http.get(url)
                    .bearer_auth(token)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .ok()
                    .map(|r| r.status().as_u16())
            }
        };
        let fresh = || {
            key.sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "p", "org": "acme", "exp": now() + 3600}))
        };
        // Up: a token valid by every clock here answers 200.
        wait_for(
            Duration::from_secs(30),
            "the skewed ingress to answer",
            || {
                let token = fresh();
                let get = &get;
                async move { (get(token).await == Some(200)).then_some(()) }
            },
        )
        .await;
        for (exp_in, nbf_in) in tokens {
            let t = now() as i64;
            let mut claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "p", "org": "acme",
                                    "iat": t, "exp": t + exp_in});
            if let Some(n) = nbf_in {
                claims["nbf"] = json!(t + n);
            }
            let status = get(key.sign(&claims)).await;
            let want = if refused(exp_in, nbf_in, skew) {
                401
            } else {
                200
            };
            assert_eq!(
                status,
                Some(want),
                "ingress {skew:+} s off, token exp {exp_in:+} s, nbf {nbf_in:?}"
            );
            let valid = exp_in > 0 && nbf_in.is_none_or(|n| n <= 0);
            if skew.abs() <= 30 && valid {
                assert_eq!(status, Some(200), "a valid token refused within the leeway");
            }
        }
    }
}

/// Opens one approval in `org` with `expiry` through a worker process whose clock is
/// `skew` off, and returns how long after the opening was sent its deadline was
/// decided (the interaction-resolved event by `expiry` stored): `Err` when the
/// opening was refused, `Ok(None)` when the deadline had not fired within `within`.
async fn deadline_after(
    skew: i64,
    expiry: impl FnOnce() -> Expiry,
    within: Duration,
) -> Result<Option<Duration>, holdpoint_client::ClientError> {
    let mut app = TestApp::start_with(AppOptions {
        workers: 0,
        ..AppOptions::default()
    })
    .await;
    let faketime = format!("{skew:+}s");
    app.spawn_worker_process_with(
        None,
        &[
            ("LD_PRELOAD", FAKETIME_LIB),
            ("FAKETIME", faketime.as_str()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let rt = app.runtime("acme").await;
    wait_for(
        Duration::from_secs(30),
        "the worker to open a session",
        || {
            let rt = rt.clone();
            async move { rt.open_session("s-1", SessionMode::Blocking).await.ok() }
        },
    )
    .await;
    // The expiry is made now, right before the opening is sent (an `expiresAt` is
    // then that far from `sent`).
    let at = Placement::new("s-1", "main", "task-1", "ctx-1")
        .expect("placement")
        .with_expiry(expiry());
    let sent = Instant::now();
    rt.hold_for_approval(
        &at,
        HoldCall {
            effect_id: "eff_clock".into(),
            call_id: "call-clock".into(),
            server: "github".into(),
            tool: "merge".into(),
            arguments: json!({}),
            reason: None,
            editable: false,
            approvals: None,
        },
    )
    .await?;
    let end = sent + within;
    while Instant::now() < end {
        let expired = app.events("acme").await.iter().any(|e| {
            matches!(&e.body, holdpoint_domain::EventData::InteractionResolved { resolved_by, .. }
                if *resolved_by == holdpoint_domain::Resolver::Expiry)
        });
        if expired {
            return Ok(Some(sent.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(None)
}

#[tokio::test]
async fn an_expires_at_deadline_fires_on_the_servers_clock_whatever_the_workers() {
    require_faketime();
    // A worker ahead of the runtime's clock by more than the time left takes the
    // instant as still ahead too: it is checked on the server's time.
    for skew in [-600i64, 30] {
        let took = deadline_after(
            skew,
            || Expiry {
                expires_at: Some(time::OffsetDateTime::now_utc() + Duration::from_secs(8)),
                ..Expiry::default()
            },
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("worker {skew:+} s off: the opening was refused: {e:?}"))
        .unwrap_or_else(|| panic!("worker {skew:+} s off: the deadline never fired"));
        assert!(
            took >= Duration::from_secs(7) && took < Duration::from_secs(14),
            "worker {skew:+} s off: an 8 s expiresAt deadline fired after {took:?}"
        );
    }
}

/// An `expiresIn` is counted from the server's time, so a worker clock that is off
/// moves it neither way. `expires_in` seconds, the worker `skew` seconds off.
async fn expires_in_fires_on_time(skew: i64, expires_in: u64) {
    require_faketime();
    let took = deadline_after(
        skew,
        || Expiry {
            expires_in: Some(expires_in),
            ..Expiry::default()
        },
        Duration::from_secs(expires_in + 40),
    )
    .await
    .expect("opened")
    .unwrap_or_else(|| panic!("worker {skew:+} s off: the deadline never fired"));
    let want = Duration::from_secs(expires_in);
    assert!(
        took >= want && took < want + Duration::from_secs(6),
        "a {expires_in} s expiresIn decided by a worker {skew:+} s off fired after {took:?}"
    );
}

/// Found by the partition harness's skewed-worker fault: `expiresIn` was counted
/// from the deciding worker's wall clock, so a worker 30 s behind stored a schedule
/// that was already past and the deadline fired at once.
#[tokio::test]
async fn an_expires_in_deadline_fires_on_time_with_a_worker_clock_behind() {
    expires_in_fires_on_time(-30, 10).await;
}

/// The other way: a worker 30 s ahead fired a 5 s `expiresIn` 30 s late.
#[tokio::test]
async fn an_expires_in_deadline_fires_on_time_with_a_worker_clock_ahead() {
    expires_in_fires_on_time(30, 5).await;
}

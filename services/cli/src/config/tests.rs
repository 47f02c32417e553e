//! The configuration's layers, checks and redaction; and that every flag of
//! [`crate::args`] lands on its key.

use std::path::Path;

use clap::Parser as _;
use figment::Figment;
use figment::providers::{Format as _, Toml};

use super::*;
use crate::{Cli, Verb};

/// `up`'s configuration with `given` (TOML, dotted keys allowed) as the top layer.
fn with(given: &str) -> Result<Config, ConfigError> {
    Config::load(None, Toml::string(given), Service::Up)
}

/// Nothing given above the defaults and the file.
fn nothing() -> Figment {
    Figment::new()
}

/// The configuration `holdpoint <argv>` would run with.
fn parsed(argv: &[&str]) -> Result<Config, ConfigError> {
    let cli = Cli::try_parse_from(std::iter::once("holdpoint").chain(argv.iter().copied()))
        .expect("arguments parse");
    match cli.command {
        Verb::Up(a) => a.config(Service::Up),
        Verb::Ingress(a) => a.config(),
        Verb::Worker(a) => a.config(),
        Verb::Notifier(a) => a.config(),
        other => panic!("not a service: {other:?}"),
    }
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("tmp");
    std::fs::write(f.path(), text).expect("write");
    f
}

#[test]
fn defaults_are_valid_for_up_and_need_a_url_for_the_services() {
    let c = with("").expect("defaults");
    assert_eq!(c, Config::default());
    assert_eq!(
        c.admin_listen(Service::Up),
        DEFAULT_ADMIN_LISTEN.parse().ok()
    );
    assert_eq!(c.admin_listen(Service::Worker), None);
    let e = Config::load(None, nothing(), Service::Worker).expect_err("no url");
    assert!(e.to_string().starts_with("nats.url is required"), "{e}");
}

#[test]
fn the_file_overrides_defaults_and_given_values_override_the_file() {
    let f = file(
        "[nats]\nurl = \"nats://a:4222\"\nreplicas = 3\n\n[http]\nlisten = \"0.0.0.0:9000\"\n\n[auth]\njwt_algorithms = [\"EdDSA\"]\n",
    );
    let path = f.path().to_str().expect("utf-8 path");
    let c = parsed(&["ingress", "--config", path, "--replicas", "5"]).expect("valid");
    assert_eq!(c.nats.url.as_deref(), Some("nats://a:4222"));
    assert_eq!(c.nats.replicas, 5);
    // Flags not given hide nothing: the file's values and the defaults stay.
    assert_eq!(c.nats.ack_wait_ms, 3_000);
    assert_eq!(c.http.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(c.auth.jwt_algorithms, vec!["EdDSA".to_owned()]);
}

#[test]
fn every_flag_sets_its_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let jwks = dir.path().join("jwks.json");
    let jwks = jwks.to_str().expect("utf-8 path");
    let c = parsed(&[
        "up",
        "--admin-listen=127.0.0.1:9181",
        "--log-format=json",
        "--log-output=stdout",
        "--log-level=debug",
        "--nats-url=nats://n:4222",
        "--replicas=3",
        "--duplicate-window-secs=60",
        "--ack-wait-ms=500",
        "--partitions=4",
        "--priority-timeout-ms=300",
        "--listen=127.0.0.1:9180",
        "--outcome-timeout-ms=700",
        "--public-url=https://hp.example",
        "--max-streams-per-caller=3",
        "--max-in-flight=9",
        "--a2a-missing-version-is-1-0",
        "--jwt-issuer=idp",
        "--jwks-file",
        jwks,
        "--jwt-audience=aud",
        "--org-claim=tenant",
        "--jwt-algorithms=EdDSA, ES256,",
        "--jwt-leeway-secs=5",
        "--jwks-ttl-secs=60",
        "--jwks-cooldown-secs=7",
        "--insecure-dev-identity=false",
        "--socket=/tmp/hp.sock",
        "--socket-org=acme",
        "--socket-no-local-user",
        "--batch=16",
        "--cache-mb=8",
        "--worker-id=w-1",
        "--consumer-poll-ms=250",
        "--deadline-default-secs=60",
        "--deadline-max-secs=120",
        "--deadline-warning-secs=10",
        "--store=/tmp/hp-store",
        "--nats-port=0",
        "--webhooks-local-mode=false",
        "--webhook-timeout-secs=3",
        "--webhook-retry-schedule-secs=1,2,3",
        "--webhook-disable-after=4",
        "--webhook-body-cap-bytes=1024",
    ])
    .expect("valid");
    let want = Config {
        nats: NatsConfig {
            url: Some("nats://n:4222".into()),
            replicas: 3,
            duplicate_window_secs: 60,
            ack_wait_ms: 500,
            partitions: 4,
            priority_timeout_ms: 300,
            ..NatsConfig::default()
        },
        http: HttpConfig {
            listen: "127.0.0.1:9180".parse().expect("addr"),
            outcome_timeout_ms: 700,
            public_url: Some("https://hp.example".into()),
            max_streams_per_caller: 3,
            max_in_flight: 9,
            a2a_missing_version_is_1_0: true,
        },
        admin: AdminConfig {
            listen: "127.0.0.1:9181".parse().ok(),
        },
        auth: AuthConfig {
            jwt_issuer: Some("idp".into()),
            jwks_url: None,
            jwks_file: Some(jwks.into()),
            jwt_audience: Some("aud".into()),
            org_claim: "tenant".into(),
            groups_claim: None,
            jwt_algorithms: vec!["EdDSA".into(), "ES256".into()],
            jwt_leeway_secs: 5,
            jwks_ttl_secs: 60,
            jwks_cooldown_secs: 7,
            dev_jwt: false,
            insecure_dev_identity: false,
        },
        socket: SocketConfig {
            path: Some("/tmp/hp.sock".into()),
            org: "acme".into(),
            local_user: false,
        },
        worker: WorkerSection {
            batch: 16,
            cache_mb: 8,
            id: Some("w-1".into()),
            consumer_poll_ms: 250,
        },
        deadlines: DeadlinesSection {
            default_secs: Some(60),
            max_secs: Some(120),
            warning_secs: Some(10),
        },
        log: LogConfig {
            format: LogFormat::Json,
            output: holdpoint_telemetry::LogOutput::Stdout,
            level: "debug".into(),
        },
        telemetry: TelemetryConfig::default(),
        local: LocalConfig {
            store: "/tmp/hp-store".into(),
            nats_port: 0,
        },
        webhooks: WebhooksSection {
            local_mode: Some(false),
            timeout_secs: 3,
            retry_schedule_secs: vec![1, 2, 3],
            disable_after: 4,
            body_cap_bytes: 1024,
        },
    };
    assert_eq!(c, want);
    // The development switches, and the other services' argument groups.
    let c = parsed(&["up", "--dev-jwt", "--insecure-dev-identity"]).expect("valid");
    assert!(c.auth.dev_jwt && c.auth.insecure_dev_identity);
    let c = parsed(&[
        "worker",
        "--nats-url=nats://n:4222",
        "--batch=9",
        "--deadline-max-secs=5",
    ])
    .expect("valid");
    assert_eq!((c.worker.batch, c.deadlines.max_secs), (9, Some(5)));
    let c = parsed(&[
        "notifier",
        "--nats-url=nats://n:4222",
        "--webhook-disable-after=2",
    ])
    .expect("valid");
    assert_eq!(c.webhooks.disable_after, 2);
}

#[test]
fn bad_values_name_their_key() {
    let cases: &[(&str, &str)] = &[
        (
            "nats.replicas = 2",
            "nats.replicas must be 1, 3 or 5 (got 2)",
        ),
        (
            "auth.jwks_url = \"https://idp/jwks\"\nauth.jwks_file = \"/tmp/jwks.json\"\nauth.jwt_issuer = \"idp\"",
            "auth.jwks_url and auth.jwks_file are exclusive",
        ),
        (
            "auth.jwt_issuer = \"idp\"",
            "auth.jwt_issuer needs auth.jwks_url or auth.jwks_file",
        ),
        (
            "nats.ack_wait_ms = 0",
            "nats.ack_wait_ms must be at least 100 (got 0)",
        ),
        (
            "http.outcome_timeout_ms = 0",
            "http.outcome_timeout_ms must be positive",
        ),
        (
            "http.max_streams_per_caller = 0",
            "http.max_streams_per_caller must be at least 1",
        ),
        (
            "http.max_in_flight = 0",
            "http.max_in_flight must be at least 1",
        ),
        (
            "nats.duplicate_window_secs = 0",
            "nats.duplicate_window_secs must be positive",
        ),
        (
            "auth.jwt_algorithms = [\"HS256\"]",
            "auth.jwt_algorithms HS256 is an HMAC algorithm",
        ),
        (
            "nats.url = \"nats://u:secret@h:4222, ::bad::\"",
            "nats.url has an invalid server address",
        ),
        (
            "admin.listen = \"127.0.0.1:8080\"",
            "admin.listen must differ from http.listen",
        ),
        (
            "socket.org = \"a b\"",
            "socket.org is not a valid organisation id",
        ),
        (
            "auth.dev_jwt = true\nauth.jwt_issuer = \"x\"",
            "auth.dev_jwt and auth.jwt_issuer are exclusive",
        ),
        ("log.level = \"[[[\"", "log.level"),
    ];
    for (given, want) in cases {
        let e = with(given).expect_err(want).to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
        assert!(!e.contains("secret"), "{e}");
    }
}

#[test]
fn the_removed_concurrency_setting_is_refused_by_name() {
    // `worker.concurrency` served only unpartitioned nats-server 2.9 deployments,
    // which the version floor ended: a configuration that still sets it is told so.
    let e = with("worker.concurrency = 4")
        .expect_err("refused")
        .to_string();
    assert!(e.contains("unknown field"), "{e}");
    assert!(e.contains("worker.concurrency"), "{e}");
}

#[test]
fn file_errors_name_the_key_and_the_file() {
    let f = file("[nats]\nreplica = 3\n");
    let e = Config::load(Some(f.path()), nothing(), Service::Up)
        .expect_err("unknown key")
        .to_string();
    assert!(e.contains("replica") && e.contains("nats"), "{e}");
    let f = file("[http]\nlisten = \"not an address\"\n");
    let e = Config::load(Some(f.path()), nothing(), Service::Up)
        .expect_err("bad address")
        .to_string();
    assert!(e.contains("http.listen"), "{e}");
    assert!(!e.contains("default."), "{e}");
    let e = Config::load(
        Some(Path::new("/nonexistent/h.toml")),
        nothing(),
        Service::Up,
    )
    .expect_err("missing")
    .to_string();
    assert!(e.contains("/nonexistent/h.toml"), "{e}");
}

#[test]
fn secrets_are_redacted() {
    let c = with(
        "nats.url = \"nats://worker:s3cret@h1:4222,nats://tok3n@h2:4222\"\n\
         auth.jwt_issuer = \"idp\"\n\
         auth.jwks_url = \"https://u:pw@idp/jwks?token=abc\"",
    )
    .expect("valid");
    let shown = c.to_toml().expect("toml");
    for secret in ["s3cret", "tok3n", "pw@", "abc"] {
        assert!(!shown.contains(secret), "{secret} shown in\n{shown}");
    }
    assert!(
        shown.contains("nats://worker:***@h1:4222,nats://***@h2:4222"),
        "{shown}"
    );
    // What is printed reads back as the same configuration (redactions aside).
    let back: Config = toml::from_str(&shown).expect("parses");
    assert_eq!(back, c.redacted());
}

#[test]
fn the_example_file_is_valid_and_complete() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/holdpoint.example.toml");
    let c = Config::load(Some(&path), nothing(), Service::Up).expect("example is valid");
    // Every section of the struct appears in the example.
    let text = std::fs::read_to_string(&path).expect("read");
    let table: toml::Table = toml::to_string(&Config::default())
        .expect("toml")
        .parse()
        .expect("table");
    for (section, keys) in &table {
        assert!(
            text.contains(&format!("[{section}]")),
            "[{section}] missing in the example"
        );
        // And every key with a default, set or commented out.
        for key in keys.as_table().map(|t| t.keys()).into_iter().flatten() {
            assert!(
                text.lines().any(|l| {
                    let l = l.trim_start_matches(['#', ' ']);
                    l.starts_with(&format!("{key} ="))
                }),
                "{section}.{key} missing in the example"
            );
        }
    }
    // The example leaves the URL unset, as the default is: `up` starts its own server.
    assert_eq!(c.nats.url, None);
}

//! Text that reaches a person or a terminal (README "Text"): a person's control
//! characters are refused over REST and A2A alike, a runtime cannot open an
//! interaction whose display text holds them, and the CLI's `pending`, `show` and
//! `tail` never write a raw control character, even for records and events that
//! hold one (written before the rule, or by another producer).

use std::time::Duration;

use async_nats::jetstream::kv;
use holdpoint_client::{ClientError, HoldCall};
use holdpoint_domain::{
    ErrorCode, Event, EventData, InteractionId, OrgId, SessionMode, Spec, State, TaskId,
};
use holdpoint_tests::app::{TestApp, holdpoint_binary};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::common::*;
use crate::operator::cli;
use crate::rpc::{Rpc, answer as a2a_answer};

/// The control characters of the issue: ESC (with a colour sequence), BEL,
/// backspace, DEL and U+0085 (NEL, a C1 control).
const HOSTILE: [&str; 5] = [
    "x\u{1b}[31mred",
    "ring\u{7}",
    "back\u{8}space",
    "del\u{7f}ete",
    "next\u{85}line",
];

fn unsafe_char(c: char) -> bool {
    c.is_control() && c != '\n'
}

#[tokio::test]
async fn a_persons_control_characters_are_refused_over_rest_and_a2a() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (qat, q) = open_question(&rt, SessionMode::Blocking).await;
    let (eat, eff) = open_approval(&rt).await;
    let session = qat.session.to_string();
    app.wait_idle().await;
    let before = app.events("acme").await.len();
    let ana = app.person("acme", "ana");
    let rpc = Rpc::new(&app, "acme", "ana");
    for (n, s) in HOSTILE.iter().enumerate() {
        let r = ana
            .post(
                &format!("/v1/questions/{q}/answer"),
                &json!({"answers": [{"options": [0]}, {"options": [2], "text": s}]}),
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "NRY-0003"),
            "answer text {s:?}: {r:?}"
        );
        let r = ana
            .post(
                &format!("/v1/interactions/{eff}/approve"),
                &json!({"approved": true, "reason": s}),
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "NRY-0001"),
            "reason {s:?}: {r:?}"
        );
        let r = ana
            .post(
                &format!("/v1/sessions/{session}/messages"),
                &json!({"text": s}),
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "NRY-0001"),
            "message {s:?}: {r:?}"
        );
        // A2A: a text part answering the question, a reason with an approval.
        let r = rpc
            .send(a2a_answer(
                &qat,
                &format!("m-t{n}"),
                json!([{"text": s}]),
                None,
            ))
            .await;
        r.assert_error_for(&format!("text part {s:?}"), -32602, "NRY-0001");
        let r = rpc
            .send(a2a_answer(
                &eat,
                &format!("m-r{n}"),
                json!([{"data": {"approved": true, "reason": s}}]),
                Some(json!({"interactionId": eff})),
            ))
            .await;
        r.assert_error_for(&format!("A2A reason {s:?}"), -32602, "NRY-0001");
    }
    app.wait_idle().await;
    assert_eq!(
        app.events("acme").await.len(),
        before,
        "nothing was emitted"
    );
    for id in [&q, &eff] {
        assert_eq!(state_of(&app, "acme", id).await, State::Pending);
    }
    // TAB, LF and CR are a person's to use.
    let r = ana
        .post(
            &format!("/v1/questions/{q}/answer"),
            &json!({"answers": [{"options": [0]}, {"options": [2], "text": "keep\tboth\r\nnightly"}]}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = ana
        .post(
            &format!("/v1/interactions/{eff}/approve"),
            &json!({"approved": true, "reason": "fine\nby me"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
}

#[tokio::test]
async fn a_runtime_cannot_open_with_control_characters_and_reads_why() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    rt.open_session("s1", SessionMode::Blocking)
        .await
        .expect("session");
    let at = placement("s1");
    let hold = |effect: &str, tool: &str| HoldCall {
        effect_id: effect.into(),
        call_id: format!("call-{effect}"),
        server: "github".into(),
        tool: tool.into(),
        arguments: json!({}),
        reason: None,
        editable: false,
        approvals: None,
    };
    // The disguise of the issue: shows as `… read_file?` on a terminal.
    let err = rt
        .hold_for_approval(&at, hold("eff_a", "delete_repo\u{1b}[2K\rread_file"))
        .await
        .expect_err("refused");
    let ClientError::Rejected(r) = &err else {
        panic!("{err}");
    };
    assert_eq!(r.code, ErrorCode::InvalidRequest);
    assert!(r.message.contains("tool"), "{}", r.message);
    assert!(
        err.to_string()
            .starts_with("refused: NRY-0001 Invalid request: tool"),
        "{err}"
    );
    let ask = |option: &str| {
        vec![holdpoint_domain::QuestionSpec {
            text: "Which?".into(),
            options: vec!["main".into(), option.into()],
            multiple: false,
            allow_text: false,
            schema: None,
        }]
    };
    for option in ["release\u{1b}[8m", "a\rb", "x\u{9b}2K"] {
        let err = rt
            .ask_user(&at, "call-q", ask(option), None)
            .await
            .expect_err(option);
        assert!(
            matches!(&err, ClientError::Rejected(r) if r.code == ErrorCode::InvalidRequest),
            "{err}"
        );
    }
    app.wait_idle().await;
    assert!(app.interaction("acme", "eff_a").await.is_none());
    assert!(
        !app.events("acme").await.iter().any(|e| matches!(
            e.body,
            EventData::ApprovalRequested { .. } | EventData::QuestionAsked { .. }
        )),
        "nothing was opened"
    );

    // `holdpoint runtime` prints the code and title, never an internal name, and
    // never echoes the control characters it refuses.
    let base = |verb: &[&str]| {
        let mut v: Vec<String> = vec![
            "runtime".into(),
            "--nats-url".into(),
            app.nats.url(),
            "--org".into(),
            "acme".into(),
        ];
        v.extend(verb.iter().map(|s| (*s).to_owned()));
        v
    };
    let hold_args = |effect: &str, tool: &str| {
        base(&[
            "hold",
            "--session",
            "s1",
            "--task",
            "t-cli",
            "--call",
            "call-cli",
            "--effect",
            effect,
            "--server",
            "github",
            "--tool",
            tool,
        ])
    };
    let (ok, _, err) = cli(&hold_args("eff_cli", "delete_repo\u{1b}[2K\rread_file")).await;
    assert!(!ok);
    assert!(err.contains("NRY-0001 Invalid request"), "{err}");
    assert!(!err.chars().any(unsafe_char), "{err:?}");
    let (ok, out, err) = cli(&hold_args("eff_cli", "read_file")).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "eff_cli");
    // The same effect id with other content: a conflict, by its code and title.
    let (ok, _, err) = cli(&hold_args("eff_cli", "write_file")).await;
    assert!(!ok);
    assert!(
        err.contains("NRY-0021 Command conflicts with record"),
        "{err}"
    );
    assert!(!err.contains("CommandConflict"), "{err}");
}

/// Rewrites the stored record of `id` with hostile display text, as a record
/// written before today's rules (or by another writer) could hold.
async fn plant_record(app: &TestApp, id: &str, hostile: &str) {
    let org = OrgId::parse("acme").expect("org");
    let iid = InteractionId::parse(id).expect("id");
    let loaded = app.bus.load_interaction(&org, &iid).await.expect("load");
    let mut record = loaded.value.expect("stored");
    match &mut record.spec {
        Spec::Approval { tool, reason, .. } => {
            *tool = hostile.to_owned();
            *reason = Some(hostile.to_owned());
        }
        Spec::Question { questions } => {
            questions[0].text = hostile.to_owned();
            questions[0].options[0] = hostile.to_owned();
        }
        Spec::Connection { app, .. } => *app = hostile.to_owned(),
    }
    record.prompt = record.spec.prompt();
    let store: kv::Store = app
        .bus
        .js
        .get_key_value(app.bus.topo.state_bucket())
        .await
        .expect("bucket");
    store
        .put(
            holdpoint_bus::Topology::interaction_key(&org, &iid),
            serde_json::to_vec(&record).expect("json").into(),
        )
        .await
        .expect("put");
}

#[tokio::test]
async fn terminals_never_get_a_raw_control_character() {
    let (app, key, _jwks) = crate::operator::jwt_app().await;
    let rt = app.runtime("acme").await;
    let (qat, q) = open_question(&rt, SessionMode::Blocking).await;
    let (_, eff) = open_approval(&rt).await;
    let hostile = "delete_repo\u{1b}[2K\rread_file\u{7}\u{85}\u{9b}\u{202e}";
    plant_record(&app, &eff, hostile).await;
    plant_record(&app, &q, hostile).await;
    // An event another producer wrote on the organisation's subjects.
    let org = OrgId::parse("acme").expect("org");
    let event = Event::new(
        &org,
        Some(&TaskId::parse(qat.task_id.as_str()).expect("task")),
        &eff,
        "planted",
        time::OffsetDateTime::now_utc(),
        EventData::DeadLetter {
            subject: hostile.into(),
            stream_sequence: 1,
            reason: hostile.into(),
        },
    );
    app.bus
        .js
        .publish(
            app.bus.topo.event_state_subject(&event),
            serde_json::to_vec(&event).expect("json").into(),
        )
        .await
        .expect("publish")
        .await
        .expect("ack");
    let token = key.sign(&holdpoint_tests::jwt::claims("acme", "ana"));
    let with = |verb: &[&str]| {
        let mut v: Vec<String> = verb.iter().map(|s| (*s).to_owned()).collect();
        v.extend([
            "--url".into(),
            app.base.clone(),
            "--token".into(),
            token.clone(),
        ]);
        v
    };
    for args in [
        with(&["pending"]),
        with(&["pending", "--json"]),
        with(&["show", &q]),
        with(&["show", &eff]),
        with(&["show", &eff, "--json"]),
    ] {
        let (ok, out, err) = cli(&args).await;
        assert!(ok, "{args:?}: {err}");
        assert!(out.contains("delete_repo"), "{args:?}: {out}");
        assert!(
            !out.chars().any(unsafe_char),
            "{args:?} wrote a raw control character: {out:?}"
        );
    }
    for json_flag in [false, true] {
        let mut args = with(&["tail", "--from-start", "--type", "dead-letter"]);
        if json_flag {
            args.push("--json".into());
        }
        let mut child = tokio::process::Command::new(holdpoint_binary())
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("tail");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&out).contains('\n') {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, stdout.read(&mut chunk))
                .await
                .expect("tail printed nothing in 10 s")
                .expect("read");
            assert!(
                n > 0,
                "tail ended early: {:?}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&chunk[..n]);
        }
        let _ = child.kill().await;
        let out = String::from_utf8_lossy(&out).into_owned();
        assert!(out.contains("delete_repo"), "{out}");
        assert!(
            !out.chars().any(unsafe_char),
            "tail (json {json_flag}) wrote {out:?}"
        );
        if json_flag {
            let line: Value =
                serde_json::from_str(out.lines().next().expect("line")).expect("json");
            assert_eq!(
                line["data"]["reason"], hostile,
                "the JSON still says exactly what was stored"
            );
        }
    }
}

/// Integers beyond 64 bits keep their exact digits end to end: in the record, in
/// the events, over REST and over A2A (they used to become doubles:
/// 12345678901234567890123 was stored as 1.2345678901234568e22).
#[tokio::test]
async fn large_integers_keep_their_digits_end_to_end() {
    const BIG: &str = "12345678901234567890123";
    const NEG: &str = "-98765432109876543210987";
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_, q1) = open_question(&rt, SessionMode::Blocking).await;
    let (qat2, q2) = open_question(&rt, SessionMode::Blocking).await;
    let ana = app.person("acme", "ana");
    let body = format!(r#"{{"value":{{"n":{BIG},"neg":{NEG},"f":0.5}}}}"#);
    let r = ana
        .post_raw(
            &format!("/v1/interactions/{q1}/respond"),
            "application/json",
            body.into_bytes(),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let big: Value = serde_json::from_str(BIG).expect("big");
    let r = Rpc::new(&app, "acme", "ana")
        .send(a2a_answer(
            &qat2,
            "m-big",
            json!([{"data": {"n": big}}]),
            None,
        ))
        .await;
    r.result();
    app.wait_idle().await;

    let record = async |id: &str| {
        serde_json::to_string(&app.interaction("acme", id).await.expect("stored")).expect("json")
    };
    let r1 = record(&q1).await;
    assert!(r1.contains(BIG) && r1.contains(NEG), "record: {r1}");
    assert!(record(&q2).await.contains(BIG), "A2A record");
    // The events as stored in HP_EVENTS (resolution and tool-call-finished).
    let org = OrgId::parse("acme").expect("org");
    let raw: Vec<Value> = holdpoint_tests::app::read_all(
        &app.bus,
        &app.bus.topo.events_stream(),
        &app.bus.topo.org_events_filter(&org),
    )
    .await;
    for (id, name) in [
        (&q1, "dev.holdpoint.interaction-resolved"),
        (&q1, "dev.holdpoint.tool-call-finished"),
        (&q2, "dev.holdpoint.interaction-resolved"),
        (&q2, "dev.holdpoint.tool-call-finished"),
    ] {
        let e = raw
            .iter()
            .find(|e| e["type"] == name && e["data"]["interactionId"] == id.as_str())
            .unwrap_or_else(|| panic!("no {name} for {id}"));
        assert!(e.to_string().contains(BIG), "{name}: {e}");
    }
    // REST, as bytes on the wire.
    let text = reqwest::Client::new()
        .get(format!("{}/v1/interactions/{q1}", app.base))
        .header("X-Holdpoint-Org", "acme")
        .header("X-Holdpoint-Person", "ana")
        .send()
        .await
        .expect("http")
        .text()
        .await
        .expect("body");
    assert!(text.contains(BIG) && text.contains(NEG), "{text}");
    // A number no JSON reader could read back is refused, as it always was.
    let r = ana
        .post_raw(
            &format!("/v1/interactions/{q1}/respond"),
            "application/json",
            br#"{"value":1e400}"#.to_vec(),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
}

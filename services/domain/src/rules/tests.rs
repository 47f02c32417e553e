//! Table tests of the opening and reading rules.

use super::*;
use crate::command::{AnswerInput, OpenRequest};
use crate::vocab::{Answer, OptionAnswer, QuestionSpec, Spec};
use serde_json::Value;
use serde_json::json;

const HOSTILE: [&str; 7] = [
    "x\u{1b}[31mred",
    "bell\u{7}",
    "back\u{8}space",
    "del\u{7f}",
    "next line\u{85}",
    "csi\u{9b}2K",
    "nul\u{0}",
];

#[test]
fn control_characters_other_than_tab_lf_cr_are_refused() {
    for s in HOSTILE {
        assert!(forbidden_control(s).is_some(), "{s:?}");
        let e = check_text("text", s, 100).expect_err(s);
        assert_eq!(e.code, ErrorCode::InvalidRequest);
    }
    for s in [
        "plain",
        "tab\there",
        "two\nlines",
        "crlf\r\n",
        "é ü 漢字 🙂",
        "\u{a0}nbsp",
    ] {
        assert!(check_text("text", s, 100).is_ok(), "{s:?}");
    }
    // Names are one line: TAB, LF and CR are refused there too.
    for s in ["delete_repo\rread_file", "a\nb", "a\tb"] {
        assert!(check_name("tool", s, 100).is_err(), "{s:?}");
    }
    assert!(check_name("tool", "create_pull_request", 100).is_ok());
}

#[test]
fn a_persons_text_is_refused_with_the_code_nul_had() {
    let question = Spec::Question {
        questions: vec![QuestionSpec {
            text: "Which?".into(),
            options: vec!["a".into(), "b".into()],
            multiple: false,
            allow_text: true,
            schema: None,
        }],
    };
    let approval = Spec::Approval {
        server: "github".into(),
        tool: "merge".into(),
        arguments: json!({}),
        arguments_digest: arguments_digest(&json!({})),
        reason: None,
        editable: false,
        approvals: 1,
    };
    let connection = Spec::Connection {
        app: "Linear".into(),
        reason: "tickets".into(),
    };
    for s in HOSTILE {
        // A question body's answer text: NRY-0003, as NUL always was.
        let answers = AnswerInput::Answers {
            answers: vec![OptionAnswer {
                options: vec![0],
                text: Some(s.into()),
            }],
        };
        let e = read_answer(&question, &answers).expect_err(s);
        assert_eq!(e.code, ErrorCode::AnswerMismatch, "{s:?}");
        // A reason, on any kind: NRY-0001.
        let approved = AnswerInput::Approved {
            approved: true,
            reason: Some(s.into()),
            arguments_digest: None,
            edited_arguments: None,
        };
        for spec in [&approval, &question, &connection] {
            let e = read_answer(spec, &approved).expect_err(s);
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{s:?}");
        }
        // A text reply (an A2A text part): NRY-0001; on an approval NRY-0020.
        let text = AnswerInput::Text { text: s.into() };
        for spec in [&question, &connection] {
            let e = read_answer(spec, &text).expect_err(s);
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{s:?}");
        }
        let e = read_answer(&approval, &text).expect_err(s);
        assert_eq!(e.code, ErrorCode::UnsupportedOperation);
    }
    let fine = AnswerInput::Text {
        text: "line one\r\n\tline two".into(),
    };
    assert!(read_answer(&question, &fine).is_ok());
}

#[test]
fn a_runtime_cannot_open_with_control_characters() {
    let hold = |tool: &str| OpenRequest::Approval {
        server: "github".into(),
        tool: tool.into(),
        arguments: json!({}),
        reason: None,
        editable: false,
        approvals: None,
    };
    let e = spec_from_request(&hold("delete_repo\u{1b}[2K\rread_file")).expect_err("refused");
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(e.message.contains("tool"), "{}", e.message);
    assert!(spec_from_request(&hold("delete_repo\rread_file")).is_err());
    assert!(spec_from_request(&hold("read_file")).is_ok());
    let ask = |text: &str, option: &str| OpenRequest::Question {
        questions: vec![QuestionSpec {
            text: text.into(),
            options: vec![option.into()],
            multiple: false,
            allow_text: false,
            schema: None,
        }],
    };
    assert!(spec_from_request(&ask("Which?\u{85}", "a")).is_err());
    assert!(spec_from_request(&ask("Which?", "a\u{1b}[8m")).is_err());
    assert!(spec_from_request(&ask("Which?", "a\nb")).is_err());
    // A question may span lines.
    assert!(spec_from_request(&ask("Which one?\nPick wisely.", "a")).is_ok());
    let connect = |app: &str, reason: &str| OpenRequest::Connection {
        app: app.into(),
        reason: reason.into(),
    };
    assert!(spec_from_request(&connect("Lin\u{7}ear", "x")).is_err());
    assert!(spec_from_request(&connect("Linear", "x\u{9b}")).is_err());
    assert!(spec_from_request(&connect("Linear", "file tickets")).is_ok());
}

/// Digests of ordinary values are the ones Holdpoint always computed (these were
/// taken before numbers kept their digits): `argumentsDigest` and the command id
/// of an opening that carries them, whatever the spelling of the numbers.
#[test]
fn digests_of_ordinary_values_do_not_change() {
    use crate::ids::{CallId, ContextId, InteractionId, LaneId, OrgId, SessionId, TaskId};
    use crate::{Command, CommandEnvelope, OpenInteraction};
    let table: [(&str, &str, &str); 9] = [
        (
            r#"{"repo":"acme/app","title":"Fix"}"#,
            "81affbadac435b8ac70afbb32d2cbbdaea509ee9174f4a1af644cfe384fe51b5",
            "cmd-14e44bf2d662795cb83061c5024beab95506a411",
        ),
        (
            r#"{"n":1,"neg":-7,"big_u64":18446744073709551615,"min_i64":-9223372036854775808,"zero":0}"#,
            "e97b63754b1d0ff22e03e5fc1cead55e1442cb311725879025035e6a00d05c96",
            "cmd-ba4b62e0903fc09678f9bc3ac75683e568b9bf5e",
        ),
        (
            r#"{"f":1.5,"g":0.1,"h":-2.25,"i":3.0,"j":1.50,"k":1e2,"l":1E-3,"m":-0,"n":-0.0,"o":0.30000000000000004,"p":1.7976931348623157e308,"q":5e-324}"#,
            "a9102e07a6e5ce3a7d9f433bac7018332ec816f97def8c74c4ab0247376b0d11",
            "cmd-27d7b15965d1888f7f356638a4eb275d73993e3a",
        ),
        (
            r#"[1,2.0,3.25,{"z":[0.5,100]}]"#,
            "d4a23b66163c15a58d6f2434e90eaeaa93f9a6995d2eac6f77a2ccdc245e09b7",
            "cmd-748b932b06de62aaf12e56b72fe38540c0c1ed60",
        ),
        (
            r#"{"unicode":"é漢🙂","esc":"a\"b\\c\n\u0001","nested":{"b":2,"a":[true,false,null]}}"#,
            "a3fba38319d26991dbb25f0472d24b56161651e00c6e122117c92d397068ba6b",
            "cmd-9ea86327feb2b208e93f1fa02aeaab5ba6ffe4ab",
        ),
        (
            r#"123"#,
            "a787b6772e3e4df1b2a04d5eee56f8570ab38825eed1b6a9bda288429b7f29a1",
            "cmd-c94296f9a13341ed708152d09f8191c048abb533",
        ),
        (
            r#"-1"#,
            "fece4135c13c215cc29820614f9148c10ba37a255e9dd9e2b9f70fffa4d227f0",
            "cmd-d1cfc65cea2ea0736f2bfeb5ee1df733b299e3d2",
        ),
        (
            r#"12.5e1"#,
            "2274a8fb1f37c6f8a0a2c8705e8a0cd542e6a8fe40128353aa2f89ec2a41c9db",
            "cmd-ee2c593673061ba5bb7cf0eba897c0fa8c79a01d",
        ),
        (
            r#"{"x":0.1234567890123456789,"y":123456.789e-3,"z":-1.0e+2}"#,
            "ab88954feeaab870088499b5aa01b467ecd89965ab79b03a59ed2653138825a1",
            "cmd-6356d7787c1800d119c7e85b98f02e27fd4a22c0",
        ),
    ];
    for (text, arguments, command) in table {
        let v: Value = serde_json::from_str(text).expect(text);
        assert_eq!(arguments_digest(&v), arguments, "{text}");
        let open = CommandEnvelope {
            org: OrgId::parse("acme").expect("id"),
            command: Command::Open(Box::new(OpenInteraction {
                interaction_id: InteractionId::parse("eff_1").expect("id"),
                session: SessionId::parse("s1").expect("id"),
                lane: LaneId::parse("main").expect("id"),
                task_id: TaskId::parse("t1").expect("id"),
                context_id: ContextId::parse("c1").expect("id"),
                call_id: CallId::parse("call-1").expect("id"),
                agent: None,
                request: OpenRequest::Approval {
                    server: "github".into(),
                    tool: "t".into(),
                    arguments: v,
                    reason: None,
                    editable: false,
                    approvals: None,
                },
                expires_at: None,
                expires_in: None,
                on_expiry: Default::default(),
                assignees: None,
                escalation: None,
            })),
        };
        assert_eq!(open.command_id(), command, "{text}");
    }
    // Spellings of one number share a digest; big integers keep every digit.
    let d = |t: &str| arguments_digest(&serde_json::from_str(t).expect(t));
    assert_eq!(d("[1.5]"), d("[1.50]"));
    assert_eq!(d("[1.5]"), d("[15e-1]"));
    assert_eq!(d("[100.0]"), d("[1e2]"));
    assert_ne!(
        d("[12345678901234567890123]"),
        d("[12345678901234567890124]")
    );
    let big: Value = serde_json::from_str("[12345678901234567890123]").expect("big");
    assert_eq!(canonical_json(&big), "[12345678901234567890123]");
}

#[test]
fn an_edit_is_read_only_where_it_can_be_released() {
    let held = json!({"repo": "acme/app"});
    let spec = |editable: bool| Spec::Approval {
        server: "github".into(),
        tool: "merge".into(),
        arguments: held.clone(),
        arguments_digest: arguments_digest(&held),
        reason: None,
        editable,
        approvals: 1,
    };
    let input = |approved: bool, digest: bool, edit: Value| AnswerInput::Approved {
        approved,
        reason: None,
        arguments_digest: digest.then(|| arguments_digest(&held)),
        edited_arguments: Some(edit),
    };
    let edit = json!({"repo": "acme/other"});
    let deep = (0..40).fold(json!(1), |v, _| json!({ "a": v }));
    let large = json!({ "blob": "x".repeat(MAX_VALUE_BYTES) });
    let cases = [
        (
            "not editable",
            spec(false),
            input(true, true, edit.clone()),
            ErrorCode::NotEditable,
        ),
        (
            "a denial",
            spec(true),
            input(false, true, edit.clone()),
            ErrorCode::EditInvalid,
        ),
        (
            "no digest",
            spec(true),
            input(true, false, edit.clone()),
            ErrorCode::EditInvalid,
        ),
        (
            "an array",
            spec(true),
            input(true, true, json!([1])),
            ErrorCode::EditInvalid,
        ),
        (
            "null",
            spec(true),
            input(true, true, Value::Null),
            ErrorCode::EditInvalid,
        ),
        (
            "too deep",
            spec(true),
            input(true, true, deep),
            ErrorCode::EditInvalid,
        ),
        (
            "too large",
            spec(true),
            input(true, true, large),
            ErrorCode::EditInvalid,
        ),
    ];
    for (what, spec, input, code) in cases {
        let e = read_answer(&spec, &input).expect_err(what);
        assert_eq!(e.code, code, "{what}: {}", e.message);
    }
    let read = read_answer(&spec(true), &input(true, true, edit.clone())).expect("an edit");
    assert_eq!(
        read,
        Answer::Approval {
            approved: true,
            reason: None,
            edited_arguments: Some(edit)
        }
    );
    // The held arguments sent back are no edit.
    let read = read_answer(&spec(true), &input(true, true, held.clone())).expect("no edit");
    assert!(matches!(
        read,
        Answer::Approval {
            edited_arguments: None,
            ..
        }
    ));
    // A question or a connection takes no edit.
    let q = Spec::Connection {
        app: "Linear".into(),
        reason: "tickets".into(),
    };
    let e = read_answer(&q, &input(true, true, json!({}))).expect_err("connection");
    assert_eq!(e.code, ErrorCode::EditInvalid);
}

#[test]
fn a_value_holds_no_control_character_a_text_may_not() {
    let question = |schema: Option<Value>| Spec::Question {
        questions: vec![QuestionSpec {
            text: "Which?".into(),
            options: vec!["a".into()],
            multiple: false,
            allow_text: true,
            schema,
        }],
    };
    let value = |v: Value| AnswerInput::Value {
        value: v,
        reason: None,
    };
    for (what, v, at) in [
        ("a string", json!("\u{1b}]0;pwned\u{7}"), "\"\""),
        ("in an array", json!(["ok", "x\u{9b}y"]), "\"/1\""),
        (
            "in an object",
            json!({"a/b": {"c": "\u{0}"}}),
            "\"/a~1b/c\"",
        ),
        ("in a key", json!({"k\u{1b}": 1}), "\"\""),
    ] {
        let e = read_answer(&question(None), &value(v)).expect_err(what);
        assert_eq!(e.code, ErrorCode::InvalidRequest, "{what}: {}", e.message);
        assert!(e.message.contains(at), "{what}: {}", e.message);
    }
    // TAB, LF and CR are text.
    read_answer(&question(None), &value(json!({"note": "a\tb\r\nc"}))).expect("plain text");
    // A form string field likewise.
    let form = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let e = read_answer(
        &question(Some(form.clone())),
        &value(json!({"name": "\u{1b}[2J"})),
    )
    .expect_err("a control character in a form field");
    assert_eq!(e.code, ErrorCode::InvalidRequest, "{}", e.message);
    read_answer(&question(Some(form)), &value(json!({"name": "Ana"}))).expect("a fitting value");
}

#[test]
fn a_form_integer_may_be_written_with_a_zero_fraction() {
    let form =
        json!({"type": "object", "properties": {"seats": {"type": "integer", "maximum": 50}}});
    let spec = Spec::Question {
        questions: vec![QuestionSpec {
            text: "Seats?".into(),
            options: vec![],
            multiple: false,
            allow_text: false,
            schema: Some(form),
        }],
    };
    let value = |v: Value| AnswerInput::Value {
        value: v,
        reason: None,
    };
    read_answer(&spec, &value(json!({"seats": 5.0}))).expect("5.0 is an integer");
    for bad in [json!({"seats": 5.5}), json!({"seats": 51.0})] {
        let e = read_answer(&spec, &value(bad.clone())).expect_err("refused");
        assert_eq!(e.code, ErrorCode::FormValueInvalid, "{bad}: {}", e.message);
    }
}

//! Validation and reading rules: what an opening may ask and how an
//! answer is read against the interaction's kind (README "The HTTP API": the reading
//! rules and the question body).

use serde_json::Value;

use crate::command::{AnswerInput, OpenRequest};
pub use crate::digest::{arguments_digest, canonical_json, canonical_number};
use crate::error::{ErrorCode, Rejection};
use crate::vocab::{Answer, OptionAnswer, QuestionSpec, Spec};

/// Most questions one `ask_user` call may ask (1 to 4).
pub const MAX_QUESTIONS: usize = 4;
/// Most options one question may offer.
pub const MAX_OPTIONS: usize = 64;
/// Longest question text, in characters.
pub const MAX_QUESTION_CHARS: usize = 2000;
/// Longest option label, in characters.
pub const MAX_OPTION_CHARS: usize = 500;
/// Longest free-text answer or reason, in characters.
pub const MAX_TEXT_CHARS: usize = 8000;
/// `request_connection`: app cut at this many characters.
pub const APP_CHARS: usize = 80;
/// `request_connection`: reason cut at this many characters.
pub const REASON_CHARS: usize = 280;
/// Longest server or tool name, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Largest serialized arguments or answer value, in bytes.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
/// Deepest nesting of arguments or an answer value: records wrap them in a few more
/// levels and must stay readable under serde_json's recursion limit (128).
pub const MAX_VALUE_DEPTH: usize = 32;

/// Nesting depth of `v` (a scalar is 0), computed without recursion.
pub fn json_depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

fn invalid(msg: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidRequest, msg)
}

fn mismatch(msg: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::AnswerMismatch, msg)
}

/// Cuts `s` at `n` characters (not bytes), never inside a character.
pub fn cut_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// True for a control character that no text Holdpoint takes may hold: C0 other
/// than TAB, LF and CR (U+0000 to U+0008, U+000B, U+000C, U+000E to U+001F), DEL
/// (U+007F) and C1 (U+0080 to U+009F). They could move a terminal's cursor, erase
/// or recolour what a person reads, and they are never needed in a question, an
/// answer or a reason.
pub fn is_forbidden_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// The first character of `s` that [`is_forbidden_control`] refuses.
pub fn forbidden_control(s: &str) -> Option<char> {
    s.chars().find(|c| is_forbidden_control(*c))
}

/// Checks free text (a question, a reason, a person's text): at most `max`
/// characters and no forbidden control character (TAB, LF and CR are allowed).
///
/// # Errors
/// `NRY-0001` naming `what` and the character.
pub fn check_text(what: &str, s: &str, max: usize) -> Result<(), Rejection> {
    if s.chars().count() > max {
        return Err(invalid(format!("{what} is longer than {max} characters")));
    }
    if let Some(c) = forbidden_control(s) {
        return Err(invalid(format!(
            "{what} holds the control character U+{:04X}; only TAB, LF and CR are allowed",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Checks a one-line name a person reads (a server, a tool, an app, an option):
/// as [`check_text`], and no control character at all (no TAB, LF or CR either,
/// which could hide the start of the line).
///
/// # Errors
/// `NRY-0001` naming `what` and the character.
pub fn check_name(what: &str, s: &str, max: usize) -> Result<(), Rejection> {
    check_text(what, s, max)?;
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(invalid(format!(
            "{what} holds the control character U+{:04X}; it must be one line",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Validates an opening and turns it into the stored [`Spec`]: questions checked,
/// connection app and reason cut, approval arguments digested.
///
/// # Errors
/// `NRY-0001` naming the field that does not fit.
pub fn spec_from_request(req: &OpenRequest) -> Result<Spec, Rejection> {
    match req {
        OpenRequest::Approval {
            server,
            tool,
            arguments,
            reason,
        } => {
            for (what, s) in [("server", server), ("tool", tool)] {
                if s.trim().is_empty() {
                    return Err(invalid(format!("{what} is empty")));
                }
                check_name(what, s, MAX_NAME_CHARS)?;
            }
            if let Some(r) = reason {
                check_text("reason", r, MAX_TEXT_CHARS)?;
            }
            if json_depth(arguments) > MAX_VALUE_DEPTH {
                return Err(invalid(format!(
                    "arguments nest deeper than {MAX_VALUE_DEPTH} levels"
                )));
            }
            if canonical_json(arguments).len() > MAX_VALUE_BYTES {
                return Err(invalid("arguments are too large"));
            }
            Ok(Spec::Approval {
                server: server.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                arguments_digest: arguments_digest(arguments),
                reason: reason.clone(),
            })
        }
        OpenRequest::Question { questions } => {
            if questions.is_empty() || questions.len() > MAX_QUESTIONS {
                return Err(invalid(format!(
                    "ask_user takes 1 to {MAX_QUESTIONS} questions, got {}",
                    questions.len()
                )));
            }
            for (i, q) in questions.iter().enumerate() {
                check_question(i, q)?;
            }
            Ok(Spec::Question {
                questions: questions.clone(),
            })
        }
        OpenRequest::Connection { app, reason } => {
            let app = cut_chars(app.trim(), APP_CHARS);
            let reason = cut_chars(reason.trim(), REASON_CHARS);
            if app.is_empty() {
                return Err(invalid("app is empty"));
            }
            check_name("app", &app, APP_CHARS)?;
            check_text("reason", &reason, REASON_CHARS)?;
            Ok(Spec::Connection { app, reason })
        }
    }
}

fn check_question(i: usize, q: &QuestionSpec) -> Result<(), Rejection> {
    if q.text.trim().is_empty() {
        return Err(invalid(format!("questions[{i}].text is empty")));
    }
    check_text(&format!("questions[{i}].text"), &q.text, MAX_QUESTION_CHARS)?;
    if q.options.len() > MAX_OPTIONS {
        return Err(invalid(format!(
            "questions[{i}] has more than {MAX_OPTIONS} options"
        )));
    }
    if q.options.is_empty() && !q.allow_text {
        return Err(invalid(format!(
            "questions[{i}] has no options and does not allow text"
        )));
    }
    for (j, o) in q.options.iter().enumerate() {
        if o.trim().is_empty() {
            return Err(invalid(format!("questions[{i}].options[{j}] is empty")));
        }
        check_name(&format!("questions[{i}].options[{j}]"), o, MAX_OPTION_CHARS)?;
    }
    Ok(())
}

/// Checks the answers of `POST /v1/questions/{questionId}/answer` against the questions: one entry per question in order,
/// indices in range and distinct, one option unless `multiple`, text only when
/// allowed, and each entry chooses something.
///
/// # Errors
/// `NRY-0003` naming the entry that does not fit.
pub fn check_answers(
    questions: &[QuestionSpec],
    answers: &[OptionAnswer],
) -> Result<(), Rejection> {
    if answers.is_empty() || answers.len() > MAX_QUESTIONS {
        return Err(mismatch(format!(
            "answers takes 1 to {MAX_QUESTIONS} entries, got {}",
            answers.len()
        )));
    }
    if answers.len() != questions.len() {
        return Err(mismatch(format!(
            "{} questions were asked, {} answers given; give one per question, in order",
            questions.len(),
            answers.len()
        )));
    }
    for (i, (q, a)) in questions.iter().zip(answers).enumerate() {
        let mut seen = Vec::with_capacity(a.options.len());
        for &ix in &a.options {
            if ix as usize >= q.options.len() {
                return Err(mismatch(format!(
                    "answers[{i}] chooses option {ix}, but question {i} has {} options",
                    q.options.len()
                )));
            }
            if seen.contains(&ix) {
                return Err(mismatch(format!("answers[{i}] repeats option {ix}")));
            }
            seen.push(ix);
        }
        if a.options.len() > 1 && !q.multiple {
            return Err(mismatch(format!(
                "answers[{i}]: question {i} takes one option"
            )));
        }
        match &a.text {
            Some(t) => {
                if !q.allow_text {
                    return Err(mismatch(format!(
                        "answers[{i}]: question {i} does not take text"
                    )));
                }
                if t.chars().count() > MAX_TEXT_CHARS || forbidden_control(t).is_some() {
                    return Err(mismatch(format!(
                        "answers[{i}].text is longer than {MAX_TEXT_CHARS} characters or holds a \
                         control character other than TAB, LF and CR"
                    )));
                }
                if a.options.is_empty() && t.trim().is_empty() {
                    return Err(mismatch(format!("answers[{i}] chooses nothing")));
                }
            }
            None if a.options.is_empty() => {
                return Err(mismatch(format!("answers[{i}] chooses nothing")));
            }
            None => {}
        }
    }
    Ok(())
}

/// True for a connection answer that means "connected": `true` or an
/// object whose `connected` is `true`.
pub fn means_connected(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m.get("connected") == Some(&Value::Bool(true)),
        _ => false,
    }
}

/// Reads a person's input against the interaction (README "The HTTP API", reading rules):
///
/// | kind | `approved` | `value` | text | `answers` (question body) |
/// |---|---|---|---|---|
/// | approval | the decision | a boolean reads as `approved`, else `NRY-0001` | `NRY-0020` (text never approves) | not a question |
/// | question | read as the value | any JSON (`{answers:[…]}` is checked) | the value | checked |
/// | connection | read as the value | `true`/`{connected:true}` connect | not connected | `NRY-0001` |
///
/// # Errors
/// The rejection to return; nothing changes.
pub fn read_answer(spec: &Spec, input: &AnswerInput) -> Result<Answer, Rejection> {
    check_person_text(spec, input)?;
    match (spec, input) {
        (
            Spec::Approval { .. },
            AnswerInput::Approved {
                approved, reason, ..
            },
        ) => Ok(Answer::Approval {
            approved: *approved,
            reason: reason.clone(),
        }),
        (Spec::Approval { .. }, AnswerInput::Value { value, reason }) => match value {
            Value::Bool(b) => Ok(Answer::Approval {
                approved: *b,
                reason: reason.clone(),
            }),
            _ => Err(invalid("an approval is answered with a boolean `approved`")),
        },
        (Spec::Approval { .. }, AnswerInput::Text { .. }) => Err(Rejection::new(
            ErrorCode::UnsupportedOperation,
            "text never approves; answer an approval with `approved: true` or `false`",
        )),
        (Spec::Approval { .. }, AnswerInput::Answers { .. }) => Err(invalid(
            "an approval is answered with `approved`, not with question answers",
        )),
        (Spec::Question { questions }, AnswerInput::Answers { answers }) => {
            check_answers(questions, answers)?;
            Ok(Answer::Question {
                answers: answers.clone(),
            })
        }
        (Spec::Question { questions }, AnswerInput::Value { value, .. }) => {
            if let Some(raw) = value.as_object().and_then(|o| o.get("answers")) {
                let answers: Vec<OptionAnswer> = serde_json::from_value(raw.clone())
                    .map_err(|e| mismatch(format!("value.answers: {e}")))?;
                check_answers(questions, &answers)?;
                return Ok(Answer::Question { answers });
            }
            check_value(value)?;
            Ok(Answer::Value {
                value: value.clone(),
            })
        }
        (Spec::Question { .. }, AnswerInput::Approved { approved, .. }) => Ok(Answer::Value {
            value: Value::Bool(*approved),
        }),
        (Spec::Question { .. }, AnswerInput::Text { text }) => {
            if text.trim().is_empty() {
                return Err(mismatch("the text answer is empty"));
            }
            Ok(Answer::Value {
                value: Value::String(text.clone()),
            })
        }
        (Spec::Connection { .. }, AnswerInput::Value { value, .. }) => Ok(Answer::Connection {
            connected: means_connected(value),
        }),
        (Spec::Connection { .. }, AnswerInput::Approved { approved, .. }) => {
            Ok(Answer::Connection {
                connected: *approved,
            })
        }
        (Spec::Connection { .. }, AnswerInput::Text { .. }) => {
            Ok(Answer::Connection { connected: false })
        }
        (Spec::Connection { .. }, AnswerInput::Answers { .. }) => Err(invalid(
            "a connection is answered with `value: {\"connected\": true}` or `false`",
        )),
    }
}

/// The person's free text in `input`, whatever the kind: a `reason` and a text
/// reply are checked with [`check_text`] (`NRY-0001`); a text reply on an approval
/// is refused for what it is (`NRY-0020`, text never approves) before its
/// characters matter. Seed 003 answers' texts are checked by [`check_answers`].
fn check_person_text(spec: &Spec, input: &AnswerInput) -> Result<(), Rejection> {
    match input {
        AnswerInput::Approved {
            reason: Some(r), ..
        }
        | AnswerInput::Value {
            reason: Some(r), ..
        } => check_text("reason", r, MAX_TEXT_CHARS),
        AnswerInput::Text { .. } if matches!(spec, Spec::Approval { .. }) => Ok(()),
        AnswerInput::Text { text } => check_text("text", text, MAX_TEXT_CHARS),
        _ => Ok(()),
    }
}

fn check_value(v: &Value) -> Result<(), Rejection> {
    if json_depth(v) > MAX_VALUE_DEPTH {
        return Err(invalid(format!(
            "value nests deeper than {MAX_VALUE_DEPTH} levels"
        )));
    }
    if canonical_json(v).len() > MAX_VALUE_BYTES {
        return Err(invalid("value is too large"));
    }
    Ok(())
}

/// The output a blocking question's `tool-call-finished` gives the model: each answer
/// with the chosen option labels, or the free value.
pub fn question_output(questions: &[QuestionSpec], answer: &Answer) -> Value {
    match answer {
        Answer::Question { answers } => {
            let items: Vec<Value> = questions
                .iter()
                .zip(answers)
                .map(|(q, a)| {
                    let labels: Vec<&str> = a
                        .options
                        .iter()
                        .filter_map(|&i| q.options.get(i as usize).map(String::as_str))
                        .collect();
                    let mut item = serde_json::json!({
                        "question": q.text,
                        "options": a.options,
                        "labels": labels,
                    });
                    if let (Some(t), Some(obj)) = (&a.text, item.as_object_mut()) {
                        obj.insert("text".into(), Value::String(t.clone()));
                    }
                    item
                })
                .collect();
            serde_json::json!({ "answers": items })
        }
        Answer::Value { value } => serde_json::json!({ "value": value }),
        Answer::Approval { approved, .. } => serde_json::json!({ "value": approved }),
        Answer::Connection { connected } => serde_json::json!({ "value": connected }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            }],
        };
        let approval = Spec::Approval {
            server: "github".into(),
            tool: "merge".into(),
            arguments: json!({}),
            arguments_digest: arguments_digest(&json!({})),
            reason: None,
        };
        let connection = Spec::Connection {
            app: "Linear".into(),
            reason: "tickets".into(),
        };
        for s in HOSTILE {
            // Seed 003 answer text: NRY-0003, as NUL always was.
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
                    },
                    expires_at: None,
                    expires_in: None,
                    on_expiry: Default::default(),
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
}

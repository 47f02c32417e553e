//! Validation and reading rules: what an opening may ask (issue 2 §2) and how an
//! answer is read against the interaction's kind (seed 000 "The answer", seed 003).

use serde_json::Value;

use crate::command::{AnswerInput, OpenRequest};
use crate::error::{ErrorCode, Rejection};
use crate::ids::digest;
use crate::model::{Answer, OptionAnswer, QuestionSpec, Spec};

/// Most questions one `ask_user` call may ask (seed 003: 1 to 4).
pub const MAX_QUESTIONS: usize = 4;
/// Most options one question may offer.
pub const MAX_OPTIONS: usize = 64;
/// Longest question text, in characters.
pub const MAX_QUESTION_CHARS: usize = 2000;
/// Longest option label, in characters.
pub const MAX_OPTION_CHARS: usize = 500;
/// Longest free-text answer or reason, in characters.
pub const MAX_TEXT_CHARS: usize = 8000;
/// `request_connection`: app cut at this many characters (seed 000).
pub const APP_CHARS: usize = 80;
/// `request_connection`: reason cut at this many characters (seed 000).
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

fn check_text(what: &str, s: &str, max: usize) -> Result<(), Rejection> {
    if s.chars().count() > max {
        return Err(invalid(format!("{what} is longer than {max} characters")));
    }
    if s.contains('\0') {
        return Err(invalid(format!("{what} holds a NUL character")));
    }
    Ok(())
}

/// Serializes `v` with object keys sorted and no whitespace, so equal values give
/// equal bytes whatever their key order.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    if let Some(inner) = map.get(*k) {
                        write(inner, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// Hex SHA-256 of the canonical JSON of a call's arguments.
pub fn arguments_digest(arguments: &Value) -> String {
    digest(&[&canonical_json(arguments)])
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
                check_text(what, s, MAX_NAME_CHARS)?;
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
            check_text("app", &app, APP_CHARS)?;
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
        check_text(&format!("questions[{i}].options[{j}]"), o, MAX_OPTION_CHARS)?;
    }
    Ok(())
}

/// Checks seed 003 answers against the questions: one entry per question in order,
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
                if t.chars().count() > MAX_TEXT_CHARS || t.contains('\0') {
                    return Err(mismatch(format!(
                        "answers[{i}].text is too long or holds NUL"
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

/// True for a connection answer that means "connected" (seed 000): `true` or an
/// object whose `connected` is `true`.
pub fn means_connected(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m.get("connected") == Some(&Value::Bool(true)),
        _ => false,
    }
}

/// Reads a person's input against the interaction (seed 000 "The answer"):
///
/// | kind | `approved` | `value` | text | seed 003 answers |
/// |---|---|---|---|---|
/// | approval | the decision | a boolean reads as `approved`, else `NRY-0001` | `NRY-0020` (text never approves) | not a question |
/// | question | read as the value | any JSON (`{answers:[…]}` is checked) | the value | checked |
/// | connection | read as the value | `true`/`{connected:true}` connect | not connected | `NRY-0001` |
///
/// # Errors
/// The rejection to return; nothing changes.
pub fn read_answer(spec: &Spec, input: &AnswerInput) -> Result<Answer, Rejection> {
    match (spec, input) {
        (
            Spec::Approval { .. },
            AnswerInput::Approved {
                approved, reason, ..
            },
        ) => {
            check_reason(reason.as_deref())?;
            Ok(Answer::Approval {
                approved: *approved,
                reason: reason.clone(),
            })
        }
        (Spec::Approval { .. }, AnswerInput::Value { value, reason }) => match value {
            Value::Bool(b) => {
                check_reason(reason.as_deref())?;
                Ok(Answer::Approval {
                    approved: *b,
                    reason: reason.clone(),
                })
            }
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
            check_text("text", text, MAX_TEXT_CHARS)?;
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

fn check_reason(reason: Option<&str>) -> Result<(), Rejection> {
    match reason {
        Some(r) => check_text("reason", r, MAX_TEXT_CHARS),
        None => Ok(()),
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

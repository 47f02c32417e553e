//! How a person's input is read against the interaction's kind (the reading rules
//! of README "The HTTP API"), the question body checked against the questions, and
//! the output a blocking question gives the model.

use serde_json::Value;

use crate::command::AnswerInput;
use crate::digest::canonical_json;
use crate::error::{ErrorCode, Rejection};
use crate::vocab::{Answer, Kind, OptionAnswer, QuestionSpec, Spec};

use super::text::{check_text, forbidden_control, json_depth};
use super::{MAX_QUESTIONS, MAX_TEXT_CHARS, MAX_VALUE_BYTES, MAX_VALUE_DEPTH, invalid, mismatch};

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

/// Checks an answer that did not name its interaction: an A2A message without
/// `metadata[URI].interactionId`, sent to whatever interaction (of kind `kind`) the
/// task waits for. The interactions/v1 answer always carries `interactionId`; a
/// reply without it may only answer a question (a text or data reply answers the
/// question the task waits for). A decision on an approval or a connection must
/// name what it decides, or a retried message could land on a later call the
/// person never saw:
///
/// | kind | without `interactionId` |
/// |---|---|
/// | question | answers it |
/// | approval | only with `argumentsDigest` (the worker then checks it is the held call's, `NRY-0010`); text is left to the reading rules (`NRY-0020`, text never approves) |
/// | connection | refused |
///
/// # Errors
/// `NRY-0024` ([`ErrorCode::InteractionNotNamed`]) when the answer would decide an
/// approval or a connection it does not name.
pub fn check_unnamed(kind: Kind, input: &AnswerInput) -> Result<(), Rejection> {
    let named_by_digest = matches!(
        input,
        AnswerInput::Approved {
            arguments_digest: Some(_),
            ..
        }
    );
    match kind {
        Kind::Question => Ok(()),
        Kind::Approval if named_by_digest || matches!(input, AnswerInput::Text { .. }) => Ok(()),
        Kind::Approval => Err(Rejection::new(
            ErrorCode::InteractionNotNamed,
            "an approval decision must name the call it decides: give interactionId (or the \
             held call's argumentsDigest) in the interactions extension's metadata; nothing \
             was decided",
        )),
        Kind::Connection => Err(Rejection::new(
            ErrorCode::InteractionNotNamed,
            "a connection answer must name the request it answers: give interactionId in the \
             interactions extension's metadata; nothing was decided",
        )),
    }
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

/// The form of a call's question, when it carries one (only a call of one
/// question may).
fn form_of(questions: &[QuestionSpec]) -> Option<&Value> {
    questions.first().and_then(|q| q.schema.as_ref())
}

/// `value` against the call's form, when it has one: `NRY-0036` with the pointer of
/// the first field that does not fit.
fn check_form(questions: &[QuestionSpec], value: &Value) -> Result<(), Rejection> {
    let Some(schema) = form_of(questions) else {
        return Ok(());
    };
    crate::form::check_value(schema, value).map_err(|e| {
        let at = if e.pointer.is_empty() {
            "the value".to_owned()
        } else {
            e.pointer.clone()
        };
        Rejection::new(
            ErrorCode::FormValueInvalid,
            format!("{at}: {}; nothing was decided", e.message),
        )
        .at(e.pointer)
    })
}

/// Reads a person's input against the interaction (README "The HTTP API", reading rules):
///
/// | kind | `approved` | `value` | text | `answers` (question body) |
/// |---|---|---|---|---|
/// | approval | the decision | a boolean reads as `approved`, else `NRY-0001` | `NRY-0020` (text never approves) | not a question |
/// | question | read as the value | any JSON (`{answers:[…]}` is checked); with a form, an object that fits it (`NRY-0036`) | the value | checked |
/// | connection | read as the value | `true`/`{connected:true}` connect | not connected | `NRY-0001` |
///
/// # Errors
/// The rejection to return; nothing changes.
pub fn read_answer(spec: &Spec, input: &AnswerInput) -> Result<Answer, Rejection> {
    check_person_text(spec, input)?;
    if let AnswerInput::Approved {
        edited_arguments: Some(_),
        ..
    } = input
        && !matches!(spec, Spec::Approval { .. })
    {
        return Err(Rejection::new(
            ErrorCode::EditInvalid,
            "editedArguments apply to a held tool call only; nothing was decided",
        ));
    }
    match (spec, input) {
        (
            Spec::Approval { .. },
            AnswerInput::Approved {
                approved,
                reason,
                edited_arguments,
                arguments_digest,
            },
        ) => Ok(Answer::Approval {
            approved: *approved,
            reason: reason.clone(),
            edited_arguments: match edited_arguments {
                Some(edit) => check_edit(spec, *approved, arguments_digest.is_some(), edit)?,
                None => None,
            },
        }),
        (Spec::Approval { .. }, AnswerInput::Value { value, reason }) => match value {
            Value::Bool(b) => Ok(Answer::Approval {
                approved: *b,
                reason: reason.clone(),
                edited_arguments: None,
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
        (Spec::Question { questions }, AnswerInput::Value { value, .. })
            if form_of(questions).is_some() =>
        {
            check_form(questions, value)?;
            check_value(value)?;
            Ok(Answer::Value {
                value: value.clone(),
            })
        }
        (Spec::Question { questions }, AnswerInput::Approved { approved, .. })
            if form_of(questions).is_some() =>
        {
            let value = Value::Bool(*approved);
            check_form(questions, &value)?;
            Ok(Answer::Value { value })
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
/// characters matter. The question body's texts are checked by [`check_answers`].
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

/// Checks an edit of a held call's arguments (README "Edit, then approve") and
/// returns the arguments to release: the edit, or `None` when it is the held
/// arguments again (same canonical JSON: nothing was edited).
///
/// | refused when | code |
/// |---|---|
/// | the hold is not `editable` | `NRY-0028` |
/// | not with `approved: true`, or without the `argumentsDigest` the person was shown | `NRY-0029` |
/// | not a JSON object, deeper than 32 levels or over 256 KiB of canonical JSON (the held arguments' limits) | `NRY-0029` |
///
/// # Errors
/// The rejection; nothing changes.
pub fn check_edit(
    spec: &Spec,
    approved: bool,
    with_digest: bool,
    edit: &Value,
) -> Result<Option<Value>, Rejection> {
    let edit_invalid = |m: String| Rejection::new(ErrorCode::EditInvalid, m);
    let Spec::Approval {
        editable,
        arguments_digest: held,
        ..
    } = spec
    else {
        return Err(edit_invalid(
            "editedArguments applies to approvals only".into(),
        ));
    };
    if !*editable {
        return Err(Rejection::new(
            ErrorCode::NotEditable,
            "this hold does not allow edits (its runtime opened it without `editable`): approve or deny the call as held; nothing was decided",
        ));
    }
    if !approved {
        return Err(edit_invalid(
            "editedArguments come with `approved: true`: a denied call runs nothing to edit".into(),
        ));
    }
    if !with_digest {
        return Err(edit_invalid(
            "editedArguments need the argumentsDigest of the arguments you were shown and edited; nothing was decided"
                .into(),
        ));
    }
    if !edit.is_object() {
        return Err(edit_invalid(
            "editedArguments must be a JSON object, as a tool's arguments are".into(),
        ));
    }
    if json_depth(edit) > MAX_VALUE_DEPTH {
        return Err(edit_invalid(format!(
            "editedArguments nest deeper than {MAX_VALUE_DEPTH} levels"
        )));
    }
    if canonical_json(edit).len() > MAX_VALUE_BYTES {
        return Err(edit_invalid(format!(
            "editedArguments are larger than {MAX_VALUE_BYTES} bytes of canonical JSON"
        )));
    }
    if crate::digest::arguments_digest(edit) == *held {
        return Ok(None);
    }
    Ok(Some(edit.clone()))
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
    // A value reaches the agent's tool result and every reader of the events, as a
    // text answer does: it may hold no control character a text may not.
    let mut stack = vec![(v, String::new())];
    while let Some((v, at)) = stack.pop() {
        let found = match v {
            Value::String(s) => forbidden_control(s),
            Value::Array(items) => {
                stack.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (x, format!("{at}/{i}"))),
                );
                None
            }
            Value::Object(map) => {
                if let Some(c) = map.keys().find_map(|k| forbidden_control(k)) {
                    return Err(control_in_value(c, &at));
                }
                stack.extend(
                    map.iter()
                        .map(|(k, x)| (x, format!("{at}/{}", crate::form::token(k)))),
                );
                None
            }
            _ => None,
        };
        if let Some(c) = found {
            return Err(control_in_value(c, &at));
        }
    }
    Ok(())
}

fn control_in_value(c: char, at: &str) -> Rejection {
    invalid(format!(
        "value holds the control character U+{:04X} at \"{at}\"; only TAB, LF and CR are allowed; nothing was decided",
        u32::from(c)
    ))
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

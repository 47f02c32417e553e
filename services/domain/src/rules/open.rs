//! What an opening may ask: the checks of an `open` command's request, and the
//! stored [`Spec`] it becomes.

use crate::MAX_APPROVALS;
use crate::command::OpenRequest;
use crate::digest::{arguments_digest, canonical_json};
use crate::error::{ErrorCode, Rejection};
use crate::vocab::{QuestionSpec, Spec};

use super::text::{check_name, check_text, cut_chars, json_depth};
use super::{
    APP_CHARS, MAX_NAME_CHARS, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_QUESTION_CHARS, MAX_QUESTIONS,
    MAX_TEXT_CHARS, MAX_VALUE_BYTES, MAX_VALUE_DEPTH, REASON_CHARS, invalid,
};

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
            editable,
            approvals,
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
            let approvals = approvals.unwrap_or(1);
            if !(1..=MAX_APPROVALS).contains(&approvals) {
                return Err(invalid(format!(
                    "approvals must be 2 to {MAX_APPROVALS} distinct people (1, or leaving it \
                     out, lets one person decide); got {approvals}"
                )));
            }
            if approvals > 1 && *editable {
                return Err(invalid(
                    "a hold that needs several approvals cannot be editable: one approver's \
                     edit would release arguments the others never approved",
                ));
            }
            Ok(Spec::Approval {
                server: server.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                arguments_digest: arguments_digest(arguments),
                reason: reason.clone(),
                editable: *editable,
                approvals,
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
                if let Some(schema) = &q.schema {
                    let form = |m: String| Rejection::new(ErrorCode::FormSchemaUnsupported, m);
                    if questions.len() > 1 {
                        return Err(form(format!(
                            "questions[{i}].schema: a form is asked alone, in a call of one question"
                        )));
                    }
                    crate::form::check_schema(schema).map_err(|e| {
                        form(format!("questions[{i}].schema{}: {}", e.pointer, e.message))
                    })?;
                }
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
    if q.options.is_empty() && !q.allow_text && q.schema.is_none() {
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

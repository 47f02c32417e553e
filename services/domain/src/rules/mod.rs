//! Validation and reading rules: what an opening may ask and how an answer is read
//! against the interaction's kind (README "The HTTP API": the reading rules and the
//! question body).
//!
//! - the limits below (counts, characters, bytes, depth);
//! - `text`: free text and one-line names ([`check_text`], [`check_name`]), JSON
//!   depth, cutting at characters;
//! - `open`: an opening checked and turned into its stored [`Spec`]
//!   ([`spec_from_request`]);
//! - `answer`: a person's input read against the interaction's kind
//!   ([`read_answer`], [`check_answers`]) and the output a question gives the model
//!   ([`question_output`]).
//!
//! [`Spec`]: crate::vocab::Spec

use crate::error::{ErrorCode, Rejection};

mod answer;
mod open;
mod text;

pub use crate::digest::{arguments_digest, canonical_json, canonical_number};
pub use answer::{check_answers, check_unnamed, means_connected, question_output, read_answer};
pub use open::spec_from_request;
pub use text::{
    check_name, check_text, cut_chars, forbidden_control, is_forbidden_control, json_depth,
};

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

/// A `400 NRY-0001` rejection with `msg`.
fn invalid(msg: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidRequest, msg)
}

/// A `400 NRY-0003` rejection (the answer does not fit) with `msg`.
fn mismatch(msg: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::AnswerMismatch, msg)
}

#[cfg(test)]
mod tests;

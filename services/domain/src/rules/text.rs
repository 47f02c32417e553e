//! Free text and one-line names a person reads, JSON depth, and cutting text at
//! characters.

use serde_json::Value;

use crate::error::Rejection;

use super::invalid;

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

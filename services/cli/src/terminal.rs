//! What the CLI writes to a terminal never holds a raw control character.
//!
//! Texts a person reads in `holdpoint pending`, `show`, `tail` and `demo` come
//! from runtimes (server, tool, prompt, questions, options, app, reason), from
//! people (answers, reasons) and from records written before today's rules
//! (`services/domain/src/rules.rs` refuses control characters when an interaction
//! opens). A carriage return or an escape sequence in any of them could rewrite
//! the line a person is approving, so every one goes through these functions:
//!
//! - [`line`]: one line of text: line breaks become ` | `, every other control
//!   character (C0, DEL, C1) and every bidirectional override becomes a visible
//!   escape such as `\u{1b}` or `\r`.
//! - [`lines`]: text that may span lines (error messages): as [`line`], keeping
//!   `\n`.
//! - [`json`]: JSON for `--json` output: serde_json escapes C0 already; DEL, C1
//!   and bidirectional overrides become `\u00XX` escapes, which leave the JSON
//!   value unchanged.

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for a character that may change what a terminal shows rather than show
/// itself: a control character (C0, DEL, C1) or a bidirectional override.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn escape(s: &str, keep_newline: bool, json: bool) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| is_unsafe(c) && !(keep_newline && c == '\n'))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c) || (keep_newline && c == '\n') {
            out.push(c);
        } else if json {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.extend(c.escape_default());
        }
    }
    Cow::Owned(out)
}

/// `s` as one safe line: `\r\n` and `\n` become ` | `, every other unsafe
/// character ([`is_unsafe`]) a visible escape.
pub fn line(s: &str) -> Cow<'_, str> {
    if s.contains('\n') {
        let joined = s.replace("\r\n", " | ").replace('\n', " | ");
        Cow::Owned(escape(&joined, false, false).into_owned())
    } else {
        escape(s, false, false)
    }
}

/// `s` with line breaks kept and every other unsafe character escaped.
pub fn lines(s: &str) -> Cow<'_, str> {
    escape(s, true, false)
}

/// `value` as compact JSON that is safe on a terminal.
pub fn json(value: &serde_json::Value) -> String {
    json_text(&value.to_string())
}

/// `value` as indented JSON that is safe on a terminal.
pub fn json_pretty(value: &impl serde::Serialize) -> String {
    json_text(&serde_json::to_string_pretty(value).unwrap_or_default())
}

/// JSON text (as serde_json writes it: C0 already escaped) made safe: DEL, C1 and
/// bidirectional overrides, which can only occur inside strings, become `\uXXXX`.
fn json_text(text: &str) -> String {
    escape(text, true, true).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn clean(s: &str) -> bool {
        !s.chars().any(|c| is_unsafe(c) && c != '\n')
    }

    #[test]
    fn nothing_raw_reaches_the_terminal() {
        let hostile = "delete_repo\u{1b}[2K\rread_file\u{7}\u{8}\u{7f}\u{85}\u{9b}\u{202e}";
        let l = line(hostile);
        assert!(clean(&l) && !l.contains('\n'), "{l:?}");
        assert!(l.starts_with("delete_repo\\u{1b}[2K\\rread_file"), "{l}");
        assert_eq!(line("Which?\r\nPick one."), "Which? | Pick one.");
        assert_eq!(line("plain é 漢字"), "plain é 漢字");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(lines("a\nb\u{1b}"), "a\nb\\u{1b}");
        let v = json!({"tool": hostile, "n": 1});
        let out = super::json(&v);
        assert!(clean(&out) && !out.contains('\n'), "{out}");
        // Still the same JSON value.
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).expect("json"),
            v
        );
        let pretty = json_pretty(&v);
        assert!(clean(&pretty), "{pretty}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&pretty).expect("json"),
            v
        );
    }
}

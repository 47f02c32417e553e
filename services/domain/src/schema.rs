//! JSON Schema support for the wire types (feature `schema`).
//!
//! Every wire type derives [`schemars::JsonSchema`] when this feature is on; this
//! module holds what the derives cannot say by themselves: the validated ids
//! (`#[serde(try_from = "String")]`) are strings with a pattern and a length, and
//! timestamps (written by [`crate::timestamp`]) are `date-time` strings. The
//! documents under `schemas/` are generated from these impls by
//! `holdpoint-contracts`.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// Pattern of an ASCII id ([`crate::OrgId`], [`crate::TaskId`], ...): printable
/// ASCII, no spaces (bytes 0x21 to 0x7e).
pub const ASCII_ID_PATTERN: &str = "^[!-~]+$";

/// Pattern of a [`crate::PersonId`]: no control characters (Unicode `Cc`).
pub const PERSON_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$";

/// Joins doc-comment lines into one description: trimmed, blank lines kept as
/// paragraph breaks.
pub fn doc_text(doc: &str) -> String {
    let mut out = String::new();
    for line in doc.lines().map(str::trim) {
        if line.is_empty() {
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push_str("\n\n");
            }
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out.trim_end().to_owned()
}

/// The schema of an ASCII id: a string of 1 to `max_len` printable ASCII
/// characters without spaces, described by `doc`.
pub fn ascii_id_schema(doc: &str, max_len: usize) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": max_len,
        "pattern": ASCII_ID_PATTERN,
        "description": doc_text(doc),
    })
}

/// The schema of a person: 1 to `max_len` characters, no control characters.
pub fn person_schema(max_len: usize) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": max_len,
        "pattern": PERSON_PATTERN,
        "description": "The person who acts: a verified JWT `sub` or the local OS user \
            (1 to 256 characters, no control characters).",
    })
}

/// Stands for an `OffsetDateTime` written as RFC 3339 (see [`crate::timestamp`]), in
/// `#[schemars(with = "...")]`.
#[derive(Debug)]
pub struct Rfc3339;

impl JsonSchema for Rfc3339 {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Rfc3339".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_lines_join() {
        assert_eq!(
            doc_text(" An org.\n Second line.\n"),
            "An org. Second line."
        );
        assert_eq!(doc_text(" A.\n\n B.\n"), "A.\n\nB.");
    }
}

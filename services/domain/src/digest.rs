//! Digests and canonical JSON: the bottom layer. Command ids, event ids and
//! arguments digests are SHA-256 over stable text, so the same input always gives
//! the same id whoever computes it (ingress, worker, SDK).

use serde_json::Value;

/// Lower-case hex SHA-256 of the parts, each followed by a NUL separator.
///
/// Used for command ids and event ids, so the same inputs always give the same id.
pub fn digest(parts: &[&str]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

/// A number as [`canonical_json`] writes it, the same text whether numbers keep
/// their digits (serde_json's `arbitrary_precision`, which Holdpoint builds with)
/// or not, so digests never depend on how a client spelled a number:
///
/// - an integer that fits `u64` or `i64`: its decimal digits (`7`, `-7`);
/// - any other number that is finite as an `f64`: that `f64` in serde_json's
///   shortest form (`1.50`, `1.5` and `15e-1` all give `1.5`; `1e2` gives
///   `100.0`; `-0` gives `-0.0`);
/// - an integer beyond `u64`/`i64`: its exact digits (`12345678901234567890123`;
///   two such integers that differ in their last digits never share a digest).
pub fn canonical_number(n: &serde_json::Number) -> String {
    let text = n.to_string();
    let integer = !text.contains(['.', 'e', 'E']);
    if integer && text != "-0" {
        if let Some(u) = n.as_u64() {
            return u.to_string();
        }
        if let Some(i) = n.as_i64() {
            return i.to_string();
        }
        return text;
    }
    // serde_json's own float parser, so the value (and its shortest form) is the one
    // a parse into `f64` always gave.
    match serde_json::from_str::<f64>(&text)
        .ok()
        .and_then(serde_json::Number::from_f64)
    {
        Some(f) => f.to_string(),
        None => text,
    }
}

/// Serializes `v` with object keys sorted, numbers in [`canonical_number`]'s form
/// and no whitespace, so equal values give equal bytes whatever their key order or
/// number spelling.
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
            Value::Number(n) => out.push_str(&canonical_number(n)),
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

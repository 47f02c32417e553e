//! Questions with a form: the restricted JSON Schema of MCP elicitation's form
//! mode, and the check of an answer's `value` against it. Hand-written, because
//! the subset is the contract: [`check_schema`] refuses anything outside it when
//! the question is opened (`NRY-0035`), [`check_value`] names the first field that
//! does not fit (`NRY-0036`, with its JSON pointer).
//!
//! The subset: an object schema (`"type": "object"`) with `properties`, each a
//! flat property of type `string` (with `minLength`, `maxLength`, `format`
//! `email` / `uri` / `date` / `date-time`, or `enum` of strings with optional
//! `enumNames`), `number` or `integer` (`minimum`, `maximum`) or `boolean`; each
//! with optional `title`, `description` and `default`; and `required`, a list of
//! property names. Nothing else: no nesting, no arrays, no `$ref`, no other
//! keyword.

use serde_json::{Map, Value};

/// Most properties a form may have.
pub const MAX_PROPERTIES: usize = 64;

/// Why a schema is outside the subset, or where a value does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormError {
    /// The JSON pointer into the schema or the value (`/properties/age`, `/age`).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

fn err(pointer: impl Into<String>, message: impl Into<String>) -> FormError {
    FormError {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// `name` escaped as one JSON pointer token (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(crate) fn token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

const TOP_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "title",
    "description",
    "$schema",
];
const COMMON_KEYS: &[&str] = &["type", "title", "description", "default"];

/// Checks that `schema` is inside the subset (see the module docs).
///
/// # Errors
/// The first thing outside it, with its pointer into the schema.
pub fn check_schema(schema: &Value) -> Result<(), FormError> {
    let Some(top) = schema.as_object() else {
        return Err(err("", "a form schema is a JSON object"));
    };
    if let Some(k) = top.keys().find(|k| !TOP_KEYS.contains(&k.as_str())) {
        return Err(err(
            format!("/{}", token(k)),
            format!("`{k}` is not part of a form schema"),
        ));
    }
    if top.get("type") != Some(&Value::String("object".into())) {
        return Err(err("/type", "a form schema's type is \"object\""));
    }
    let Some(props) = top.get("properties").and_then(Value::as_object) else {
        return Err(err(
            "/properties",
            "a form schema has `properties`, an object",
        ));
    };
    if props.is_empty() || props.len() > MAX_PROPERTIES {
        return Err(err(
            "/properties",
            format!("a form has 1 to {MAX_PROPERTIES} properties"),
        ));
    }
    for (name, p) in props {
        check_property(&format!("/properties/{}", token(name)), p)?;
    }
    if let Some(required) = top.get("required") {
        let Some(list) = required.as_array() else {
            return Err(err("/required", "`required` is a list of property names"));
        };
        for (i, r) in list.iter().enumerate() {
            if !r.as_str().is_some_and(|r| props.contains_key(r)) {
                return Err(err(format!("/required/{i}"), "not one of the properties"));
            }
        }
    }
    Ok(())
}

fn check_property(at: &str, p: &Value) -> Result<(), FormError> {
    let Some(p) = p.as_object() else {
        return Err(err(at, "a property is a JSON object"));
    };
    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
    let own: &[&str] = match kind {
        "string" if p.contains_key("enum") => &["enum", "enumNames"],
        "string" => &["minLength", "maxLength", "format"],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        _ => {
            return Err(err(
                format!("{at}/type"),
                "a property's type is string, number, integer or boolean",
            ));
        }
    };
    if let Some(k) = p
        .keys()
        .find(|k| !COMMON_KEYS.contains(&k.as_str()) && !own.contains(&k.as_str()))
    {
        return Err(err(
            format!("{at}/{}", token(k)),
            format!("`{k}` is not part of a {kind} form property"),
        ));
    }
    for k in ["title", "description"] {
        if p.get(k).is_some_and(|v| !v.is_string()) {
            return Err(err(format!("{at}/{k}"), format!("`{k}` is a string")));
        }
    }
    for k in ["minLength", "maxLength"] {
        if p.get(k).is_some_and(|v| v.as_u64().is_none()) {
            return Err(err(format!("{at}/{k}"), format!("`{k}` is a whole number")));
        }
    }
    for k in ["minimum", "maximum"] {
        if p.get(k).is_some_and(|v| v.as_f64().is_none()) {
            return Err(err(format!("{at}/{k}"), format!("`{k}` is a number")));
        }
    }
    if let Some(f) = p.get("format")
        && !matches!(f.as_str(), Some("email" | "uri" | "date" | "date-time"))
    {
        return Err(err(
            format!("{at}/format"),
            "`format` is email, uri, date or date-time",
        ));
    }
    if let Some(e) = p.get("enum") {
        let ok = e
            .as_array()
            .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_string));
        if !ok {
            return Err(err(format!("{at}/enum"), "`enum` is a list of strings"));
        }
    }
    if let Some(names) = p.get("enumNames") {
        let same = names.as_array().is_some_and(|n| {
            n.iter().all(Value::is_string)
                && Some(n.len()) == p.get("enum").and_then(Value::as_array).map(Vec::len)
        });
        if !same {
            return Err(err(
                format!("{at}/enumNames"),
                "`enumNames` is one string per `enum` value",
            ));
        }
    }
    if let Some(d) = p.get("default")
        && let Err(e) = check_field("", p, d)
    {
        return Err(err(format!("{at}/default"), e.message));
    }
    Ok(())
}

/// Checks `value` against `schema` (already inside the subset): an object whose
/// every required property is present and every property present fits its own;
/// properties the schema does not name are refused.
///
/// # Errors
/// The first field that does not fit, with its JSON pointer into the value
/// (`""` for the value itself).
pub fn check_value(schema: &Value, value: &Value) -> Result<(), FormError> {
    let Some(obj) = value.as_object() else {
        return Err(err(
            "",
            "the answer to a form is a JSON object of its fields",
        ));
    };
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(k) = obj.keys().find(|k| !props.contains_key(k.as_str())) {
        return Err(err(format!("/{}", token(k)), "the form has no such field"));
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (name, p) in props {
        let at = format!("/{}", token(name));
        match obj.get(name) {
            Some(v) => check_field(&at, p.as_object().unwrap_or(&empty), v)?,
            None if required.iter().any(|r| r == name) => {
                return Err(err(at, "required"));
            }
            None => {}
        }
    }
    Ok(())
}

/// One field against its property.
fn check_field(at: &str, p: &Map<String, Value>, v: &Value) -> Result<(), FormError> {
    match p.get("type").and_then(Value::as_str).unwrap_or("") {
        "boolean" => v
            .is_boolean()
            .then_some(())
            .ok_or_else(|| err(at, "a boolean (true or false)")),
        "integer" => {
            let n = v
                .as_f64()
                // JSON Schema's integer is a number without a fractional part, so
                // `5.0` (as Python writes a float) is one.
                .filter(|n| n.is_finite() && n.fract() == 0.0)
                .ok_or_else(|| err(at, "a whole number"))?;
            bounds(at, p, n)
        }
        "number" => {
            let n = v.as_f64().ok_or_else(|| err(at, "a number"))?;
            bounds(at, p, n)
        }
        _ => {
            let s = v.as_str().ok_or_else(|| err(at, "a string"))?;
            if let Some(e) = p.get("enum").and_then(Value::as_array) {
                return e
                    .iter()
                    .any(|o| o == v)
                    .then_some(())
                    .ok_or_else(|| err(at, "one of the listed choices"));
            }
            let chars = s.chars().count() as u64;
            if let Some(min) = p.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                return Err(err(at, format!("at least {min} characters")));
            }
            if let Some(max) = p.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                return Err(err(at, format!("at most {max} characters")));
            }
            match p.get("format").and_then(Value::as_str) {
                Some("email") if !is_email(s) => Err(err(at, "an email address")),
                Some("uri") if !is_uri(s) => Err(err(at, "an absolute URI")),
                Some("date") if !is_date(s) => Err(err(at, "a date, YYYY-MM-DD")),
                Some("date-time") if crate::timestamp::parse(s).is_err() => {
                    Err(err(at, "a date and time, RFC 3339"))
                }
                _ => Ok(()),
            }
        }
    }
}

fn bounds(at: &str, p: &Map<String, Value>, n: f64) -> Result<(), FormError> {
    if let Some(min) = p.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        return Err(err(at, format!("at least {min}")));
    }
    if let Some(max) = p.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        return Err(err(at, format!("at most {max}")));
    }
    Ok(())
}

/// `local@domain.tld`: one `@`, something before it, a dot inside the domain, no
/// white space.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(char::is_whitespace)
}

/// An absolute URI: a scheme (a letter, then letters, digits, `+`, `-`, `.`), `:`,
/// and no white space.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut c = scheme.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && c.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !s.chars().any(char::is_whitespace)
}

/// A calendar date `YYYY-MM-DD` that exists.
fn is_date(s: &str) -> bool {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    s.len() == 10 && time::Date::parse(s, &format).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 5},
                "age": {"type": "integer", "minimum": 18, "maximum": 99},
                "ratio": {"type": "number", "maximum": 1.5},
                "ok": {"type": "boolean", "default": false},
                "colour": {"type": "string", "enum": ["red", "blue"], "enumNames": ["Red", "Blue"]},
                "mail": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "day": {"type": "string", "format": "date"},
                "at": {"type": "string", "format": "date-time"},
                "a/b": {"type": "string"}
            },
            "required": ["name", "age"]
        })
    }

    #[test]
    fn the_subset_is_accepted() {
        assert_eq!(check_schema(&form()), Ok(()));
    }

    #[test]
    fn a_schema_outside_the_subset_is_refused_where_it_leaves_it() {
        let cases = [
            (json!([]), ""),
            (json!({"type": "array", "properties": {}}), "/type"),
            (json!({"type": "object"}), "/properties"),
            (json!({"type": "object", "properties": {}}), "/properties"),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "$ref": "#"}),
                "/$ref",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "object"}}}),
                "/properties/a/type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array"}}}),
                "/properties/a/type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}),
                "/properties/a/pattern",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}),
                "/properties/a/format",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "integer", "minLength": 1}}}),
                "/properties/a/minLength",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}}),
                "/properties/a/enum",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "enumNames": []}}}),
                "/properties/a/enumNames",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}}),
                "/properties/a/default",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
                "/required/0",
            ),
            (
                json!({"type": "object", "properties": {"a/b": {"type": "nope"}}}),
                "/properties/a~1b/type",
            ),
        ];
        for (schema, pointer) in cases {
            let e = check_schema(&schema).expect_err("refused");
            assert_eq!(e.pointer, pointer, "{schema}: {e:?}");
        }
    }

    #[test]
    fn a_value_fits_or_names_its_first_misfit() {
        let f = form();
        assert_eq!(check_value(&f, &json!({"name": "Ana", "age": 30})), Ok(()));
        assert_eq!(
            check_value(
                &f,
                &json!({"name": "Ana", "age": 30, "ratio": 1.5, "ok": true, "colour": "red",
                        "mail": "a@b.example", "site": "https://x.example/p", "day": "2026-02-28",
                        "at": "2026-02-28T10:00:00Z", "a/b": ""})
            ),
            Ok(())
        );
        let cases = [
            (json!([]), ""),
            (json!({"age": 30}), "/name"),
            (json!({"name": "Ana"}), "/age"),
            (json!({"name": "A", "age": 30}), "/name"),
            (json!({"name": "Anabel", "age": 30}), "/name"),
            (json!({"name": "Ana", "age": 17}), "/age"),
            (json!({"name": "Ana", "age": 30.5}), "/age"),
            (json!({"name": "Ana", "age": "30"}), "/age"),
            (json!({"name": "Ana", "age": 30, "ratio": 2}), "/ratio"),
            (json!({"name": "Ana", "age": 30, "ok": "yes"}), "/ok"),
            (
                json!({"name": "Ana", "age": 30, "colour": "green"}),
                "/colour",
            ),
            (json!({"name": "Ana", "age": 30, "mail": "ana"}), "/mail"),
            (
                json!({"name": "Ana", "age": 30, "site": "not a uri"}),
                "/site",
            ),
            (
                json!({"name": "Ana", "age": 30, "day": "2026-02-30"}),
                "/day",
            ),
            (json!({"name": "Ana", "age": 30, "at": "yesterday"}), "/at"),
            (json!({"name": "Ana", "age": 30, "a/b": 1}), "/a~1b"),
            (json!({"name": "Ana", "age": 30, "extra": 1}), "/extra"),
        ];
        for (value, pointer) in cases {
            let e = check_value(&f, &value).expect_err("misfit");
            assert_eq!(e.pointer, pointer, "{value}: {e:?}");
        }
    }
}

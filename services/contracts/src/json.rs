//! The canonical text of every generated document, and the schemars settings the
//! documents share.

use schemars::Schema;
use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use serde_json::{Map, Value};

/// Pretty JSON with every object's keys sorted and a final newline, so the text
/// depends only on the content (not on whether some crate in the build turned on
/// `serde_json/preserve_order`).
pub fn render(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(&sorted(value)).unwrap_or_default();
    text.push('\n');
    text
}

/// `value` with the keys of every object in sorted order.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Turns rustdoc links in descriptions (``[`Event`]``, ``[`X`](path)``) into plain
/// code spans: readers of a schema have no rustdoc to follow.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainDocs;

impl Transform for PlainDocs {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(Value::String(d)) = schema.get_mut("description") {
            *d = plain_doc(d);
        }
        transform_subschemas(self, schema);
    }
}

/// ``[`X`]`` and ``[`X`](target)`` become `` `X` ``; other text is kept.
pub fn plain_doc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        let code = &rest[start + 1..start + 2 + len + 1];
        out.push_str(&rest[..start]);
        out.push_str(code);
        let mut after = &rest[start + 2 + len + 2..];
        if after.starts_with('(')
            && let Some(close) = after.find(')')
        {
            after = &after[close + 1..];
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// JSON Schema 2020-12 with `$defs`: the standalone files under `schemas/`.
pub fn standalone_settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().with_transform(PlainDocs)
}

/// JSON Schema 2020-12 with definitions under `#/components/schemas`: OpenAPI 3.1.
pub fn openapi_settings() -> SchemaSettings {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .with_transform(PlainDocs)
}

/// JSON Schema draft-07 with definitions under `#/components/schemas`: AsyncAPI
/// 3.0, whose default schema format is a superset of draft-07.
pub fn asyncapi_settings() -> SchemaSettings {
    SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .with_transform(PlainDocs)
}

/// Applies [`PlainDocs`] to a schema that did not pass through a generator's
/// transforms (an inline subschema).
pub fn plain(mut schema: Schema) -> Value {
    PlainDocs.transform(&mut schema);
    schema.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_links_become_code() {
        assert_eq!(plain_doc("from [`EventData`]."), "from `EventData`.");
        assert_eq!(
            plain_doc("see [`Cfg::x`](crate::Cfg::x) now"),
            "see `Cfg::x` now"
        );
        assert_eq!(plain_doc("`a` [b] [`c"), "`a` [b] [`c");
    }

    #[test]
    fn keys_are_sorted() {
        let v = serde_json::json!({"b": 1, "a": {"d": 2, "c": [ {"z": 0, "y": 1} ]}});
        assert_eq!(
            render(&v),
            "{\n  \"a\": {\n    \"c\": [\n      {\n        \"y\": 1,\n        \"z\": 0\n      }\n    ],\n    \"d\": 2\n  },\n  \"b\": 1\n}\n"
        );
    }
}

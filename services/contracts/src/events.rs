//! Every CloudEvents `type` Holdpoint emits, read from the `EventData` schema (so
//! the list is the enum's variants, their serde names and their doc comments), and
//! the README's table of them.

use holdpoint_domain::{EventData, EventKind};
use serde_json::Value;

use crate::json::{plain_doc, standalone_settings};

/// Prefix of every CloudEvents `type`.
pub const TYPE_PREFIX: &str = "dev.holdpoint.";

/// Marks the start of the generated event table in README.md.
pub const README_START: &str = "<!-- events:start -->";
/// Marks its end.
pub const README_END: &str = "<!-- events:end -->";

/// One event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    /// Short name: the subject's last token (`tool-call-finished`).
    pub name: String,
    /// CloudEvents `type` (`dev.holdpoint.tool-call-finished`).
    pub ce_type: String,
    /// The variant's doc comment.
    pub description: String,
    /// The `data` fields, in declaration order; optional ones end with `?`.
    pub fields: Vec<String>,
}

impl EventType {
    /// True when published on `hp.audit.<org>` (stream `HP_AUDIT`).
    pub fn audit(&self) -> bool {
        EventKind::ALL
            .iter()
            .any(|k| k.is_audit() && k.name() == self.name)
    }
}

/// Every event type, in the order of the `EventData` enum.
///
/// # Panics
/// When the `EventData` schema is not the adjacently tagged `oneOf` it is declared
/// as (a change the contracts must follow).
pub fn event_types() -> Vec<EventType> {
    let schema = standalone_settings()
        .into_generator()
        .into_root_schema_for::<EventData>()
        .to_value();
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let variants = schema["oneOf"]
        .as_array()
        .expect("EventData is a oneOf of its variants");
    variants
        .iter()
        .map(|v| {
            let ce_type = v["properties"]["type"]["const"]
                .as_str()
                .expect("each variant has a constant `type`")
                .to_owned();
            let name = ce_type
                .strip_prefix(TYPE_PREFIX)
                .expect("every type starts with dev.holdpoint.")
                .to_owned();
            let mut data = &v["properties"]["data"];
            if let Some(r) = data.get("$ref").and_then(Value::as_str) {
                let def = r.rsplit('/').next().unwrap_or_default();
                data = &defs[def];
            }
            EventType {
                name,
                ce_type,
                description: v["description"].as_str().unwrap_or_default().to_owned(),
                fields: fields(data),
            }
        })
        .collect()
}

/// The fields of an object schema: required ones in declaration order, then the
/// optional ones (sorted) with a trailing `?`.
fn fields(object: &Value) -> Vec<String> {
    let required: Vec<String> = object["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut optional: Vec<String> = object["properties"]
        .as_object()
        .map(|p| {
            p.keys()
                .filter(|k| !required.contains(k))
                .map(|k| format!("{k}?"))
                .collect()
        })
        .unwrap_or_default();
    optional.sort();
    required.into_iter().chain(optional).collect()
}

/// The README's event table, between [`README_START`] and [`README_END`]
/// (markers included).
pub fn readme_block() -> String {
    let mut out = String::new();
    out.push_str(README_START);
    out.push('\n');
    out.push_str("| name | CloudEvents `type` | subject | `data` | when |\n");
    out.push_str("|---|---|---|---|---|\n");
    for t in event_types() {
        let subject = if t.audit() {
            "`hp.audit.<org>`".to_owned()
        } else {
            format!("`hp.evt.<org>.<task>.{}`", t.name)
        };
        let fields = t
            .fields
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let when = plain_doc(&t.description).replace('\n', " ");
        out.push_str(&format!(
            "| `{}` | `{}` | {subject} | {fields} | {when} |\n",
            t.name, t.ce_type
        ));
    }
    out.push_str(README_END);
    out
}

/// `readme` with its event table replaced by [`readme_block`]; `None` when the
/// markers are missing.
pub fn with_readme_block(readme: &str) -> Option<String> {
    let start = readme.find(README_START)?;
    let end = readme[start..].find(README_END)? + start + README_END.len();
    Some(format!(
        "{}{}{}",
        &readme[..start],
        readme_block(),
        &readme[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_domain::event::EVENT_NAMES;

    #[test]
    fn the_schema_lists_every_event_name_in_order() {
        let names: Vec<String> = event_types().into_iter().map(|t| t.name).collect();
        assert_eq!(names, EVENT_NAMES);
    }

    #[test]
    fn every_type_is_prefixed_and_documented() {
        for t in event_types() {
            assert_eq!(t.ce_type, format!("{TYPE_PREFIX}{}", t.name));
            assert!(!t.description.is_empty(), "{} has no doc comment", t.name);
            assert!(!t.fields.is_empty(), "{} has no data fields", t.name);
        }
        let audit: Vec<_> = event_types().into_iter().filter(EventType::audit).collect();
        let kinds = EventKind::ALL;
        assert_eq!(audit.len(), kinds.iter().filter(|k| k.is_audit()).count());
    }

    #[test]
    fn task_status_data_is_resolved_through_its_ref() {
        let t = event_types()
            .into_iter()
            .find(|t| t.name == "task-status")
            .expect("task-status");
        assert_eq!(t.fields, ["taskId", "contextId", "state", "interaction?"]);
    }
}

//! Schema pieces the operations share: references, query and path parameters,
//! headers, and the error responses of a list of codes.

use holdpoint_domain::{ErrorCode, IdempotencyKey, InteractionId};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::json::{openapi_settings, plain};

pub(super) fn schema_ref<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    plain(generator.subschema_for::<T>())
}

/// The string values of a unit-variant enum's schema (`State`: `pending`, ...).
pub(super) fn enum_values<T: JsonSchema>() -> Vec<String> {
    let schema = openapi_settings()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let from_one_of = schema["oneOf"].as_array().map(|vs| {
        vs.iter()
            .filter_map(|v| v["const"].as_str())
            .map(str::to_owned)
            .collect()
    });
    let from_enum = schema["enum"].as_array().map(|vs| {
        vs.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    from_one_of.or(from_enum).unwrap_or_default()
}

pub(super) fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

/// The query parameters of a query struct: one per property.
pub(super) fn query_params<T: JsonSchema>(generator: &mut SchemaGenerator) -> Vec<Value> {
    let schema = plain(T::json_schema(generator));
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    if let Some(props) = schema["properties"].as_object() {
        for (name, prop) in props {
            let mut prop = not_null(prop.clone());
            let description = prop
                .as_object_mut()
                .and_then(|p| p.remove("description"))
                .unwrap_or(Value::Null);
            out.push(json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "description": description,
                "schema": prop,
            }));
        }
    }
    out
}

/// An optional field's schema as a query parameter's: an absent parameter is the
/// field's `None`, so `null` is not a value it can take.
pub(super) fn not_null(mut schema: Value) -> Value {
    if let Some(map) = schema.as_object_mut() {
        if map.get("default") == Some(&Value::Null) {
            map.remove("default");
        }
        if let Some(Value::Array(types)) = map.get_mut("type") {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                let only = types.remove(0);
                map.insert("type".into(), only);
            }
        }
    }
    schema
}

pub(super) fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

pub(super) fn header_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema})
}

/// The error responses of `codes`, one per status, each listing its codes.
pub(super) fn error_responses(codes: &[ErrorCode]) -> Map<String, Value> {
    let mut by_status: Vec<(u16, Vec<ErrorCode>)> = Vec::new();
    for &code in codes {
        let status = code.spec().status;
        match by_status.iter_mut().find(|(s, _)| *s == status) {
            Some((_, list)) => list.push(code),
            None => by_status.push((status, vec![code])),
        }
    }
    by_status.sort_by_key(|(s, _)| *s);
    let mut out = Map::new();
    for (status, mut list) in by_status {
        list.sort_by_key(|c| c.spec().code);
        let description = list
            .iter()
            .map(|c| format!("`{}` {}", c.spec().code, c.spec().title))
            .collect::<Vec<_>>()
            .join("; ");
        let examples: Map<String, Value> = list
            .iter()
            .map(|c| {
                let s = c.spec();
                (
                    s.code.to_owned(),
                    json!({"value": {"code": s.code, "title": s.title, "message": "…"}}),
                )
            })
            .collect();
        let mut response = json!({
            "description": description,
            "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ErrorBody"},
                "examples": examples,
            }},
        });
        let mut headers = Map::new();
        if list.contains(&ErrorCode::Unavailable) {
            headers.insert(
                "Retry-After".into(),
                json!({"description": "Seconds to wait before retrying with the same idempotency key.", "schema": {"type": "integer"}}),
            );
        }
        if list.contains(&ErrorCode::Unauthenticated) {
            headers.insert(
                "WWW-Authenticate".into(),
                json!({"schema": {"type": "string", "const": "Bearer"}}),
            );
        }
        if !headers.is_empty() {
            response["headers"] = Value::Object(headers);
        }
        out.insert(status.to_string(), response);
    }
    out
}

pub(super) fn webhook_param() -> Value {
    path_param(
        "id",
        "The webhook endpoint (`wh_<32 hex>`).",
        json!({"type": "string", "minLength": 1, "maxLength": 128, "pattern": holdpoint_domain::schema::ASCII_ID_PATTERN}),
    )
}

pub(super) fn idempotency_header(generator: &mut SchemaGenerator) -> Value {
    header_param(
        "Idempotency-Key",
        "The answer's idempotency key (1 to 128 printable ASCII): the same key replays the recorded outcome, so send one and retry a 503 with it. Without it each request is a new press: on a blocking session, an answer to an interaction already answered is `409 NRY-0009` (\"already answered at …\"), identical body or not; a product session replays the recorded answer.",
        schema_ref::<IdempotencyKey>(generator),
    )
}

pub(super) fn interaction_param(generator: &mut SchemaGenerator, name: &str) -> Value {
    path_param(
        name,
        "The interaction: an approval's effect id, a question's UUID.",
        schema_ref::<InteractionId>(generator),
    )
}

//! ProtoJSON input. The A2A v1.0 JSON binding is ProtoJSON, whose readers accept
//! more than its canonical form: the proto field names (`message_id`) beside the
//! lowerCamel ones (`messageId`), enum values as numbers (`"role": 1`), and
//! integers as strings (`"pageSize": "2"`). [`normalize`] turns a method's
//! params into the canonical form the A2A types read, so clients that write any
//! of these are understood; Holdpoint itself always writes the canonical form.
//!
//! Only the fields of the A2A messages are touched, from a table of them
//! (`specification/a2a.proto` of A2A v1.0, as the official SDKs carry it): the
//! contents of `metadata` (a `google.protobuf.Struct`) and of a data part (a
//! `google.protobuf.Value`) are the sender's own and stay as they are, so the
//! interactions extension keeps refusing fields it does not define
//! (`interaction_id` is not `interactionId` there). Their numbers are another
//! matter: a `Struct` holds every number as a double, so an SDK that builds one
//! (the Python SDK does) writes `3600.0` for `3600`; a whole number written that
//! way is read as the integer it is (up to 2^53). A field given under both of its
//! names, an enum number out of range, or an integer string that is not an
//! integer, is invalid params. An enum written as `UNRECOGNIZED` (what ts-proto,
//! under `@a2a-js/sdk`, writes for a value it has no name for, such as an unset
//! `ListTasks` status) is read as absent.

use a2a_lf::methods;
use serde_json::{Map, Number, Value};

use super::error::RpcError;

/// How a field's value is read.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Left as it is (strings, booleans, bytes, timestamps, `Struct`, `Value`).
    Plain,
    /// An integer: a JSON number, or a string of one.
    Int,
    /// An enum: its name, or its number (an index into the names).
    Enum(&'static [&'static str]),
    /// A message (an object read with its own table), or a repeated one.
    Message(&'static [Field]),
    /// A `google.protobuf.Struct` or `Value`: kept as written but for whole numbers
    /// written as doubles, which become integers.
    Struct,
}

/// One field: its proto name, its JSON (lowerCamel) name, its kind.
type Field = (&'static str, &'static str, Kind);

/// `lf.a2a.v1.Role`, by number.
const ROLE: &[&str] = &["ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT"];

/// `lf.a2a.v1.TaskState`, by number.
const TASK_STATE: &[&str] = &[
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];

const PART: &[Field] = &[
    ("text", "text", Kind::Plain),
    ("raw", "raw", Kind::Plain),
    ("url", "url", Kind::Plain),
    ("data", "data", Kind::Struct),
    ("metadata", "metadata", Kind::Struct),
    ("filename", "filename", Kind::Plain),
    ("media_type", "mediaType", Kind::Plain),
];

const MESSAGE: &[Field] = &[
    ("message_id", "messageId", Kind::Plain),
    ("context_id", "contextId", Kind::Plain),
    ("task_id", "taskId", Kind::Plain),
    ("role", "role", Kind::Enum(ROLE)),
    ("parts", "parts", Kind::Message(PART)),
    ("metadata", "metadata", Kind::Struct),
    ("extensions", "extensions", Kind::Plain),
    ("reference_task_ids", "referenceTaskIds", Kind::Plain),
];

const AUTHENTICATION_INFO: &[Field] = &[
    ("scheme", "scheme", Kind::Plain),
    ("credentials", "credentials", Kind::Plain),
];

const PUSH_CONFIG: &[Field] = &[
    ("tenant", "tenant", Kind::Plain),
    ("id", "id", Kind::Plain),
    ("task_id", "taskId", Kind::Plain),
    ("url", "url", Kind::Plain),
    ("token", "token", Kind::Plain),
    (
        "authentication",
        "authentication",
        Kind::Message(AUTHENTICATION_INFO),
    ),
];

const SEND_CONFIGURATION: &[Field] = &[
    ("accepted_output_modes", "acceptedOutputModes", Kind::Plain),
    (
        "task_push_notification_config",
        "taskPushNotificationConfig",
        Kind::Message(PUSH_CONFIG),
    ),
    ("history_length", "historyLength", Kind::Int),
    ("return_immediately", "returnImmediately", Kind::Plain),
];

const SEND_MESSAGE: &[Field] = &[
    ("tenant", "tenant", Kind::Plain),
    ("message", "message", Kind::Message(MESSAGE)),
    (
        "configuration",
        "configuration",
        Kind::Message(SEND_CONFIGURATION),
    ),
    ("metadata", "metadata", Kind::Struct),
];

const GET_TASK: &[Field] = &[
    ("tenant", "tenant", Kind::Plain),
    ("id", "id", Kind::Plain),
    ("history_length", "historyLength", Kind::Int),
];

const LIST_TASKS: &[Field] = &[
    ("tenant", "tenant", Kind::Plain),
    ("context_id", "contextId", Kind::Plain),
    ("status", "status", Kind::Enum(TASK_STATE)),
    ("page_size", "pageSize", Kind::Int),
    ("page_token", "pageToken", Kind::Plain),
    ("history_length", "historyLength", Kind::Int),
    (
        "status_timestamp_after",
        "statusTimestampAfter",
        Kind::Plain,
    ),
    ("include_artifacts", "includeArtifacts", Kind::Plain),
];

const CANCEL_TASK: &[Field] = &[
    ("tenant", "tenant", Kind::Plain),
    ("id", "id", Kind::Plain),
    ("metadata", "metadata", Kind::Plain),
];

const SUBSCRIBE_TO_TASK: &[Field] = &[("tenant", "tenant", Kind::Plain), ("id", "id", Kind::Plain)];

/// The table of `method`'s params, for the methods Holdpoint serves.
fn table(method: &str) -> Option<&'static [Field]> {
    Some(match method {
        methods::SEND_MESSAGE | methods::SEND_STREAMING_MESSAGE => SEND_MESSAGE,
        methods::GET_TASK => GET_TASK,
        methods::LIST_TASKS => LIST_TASKS,
        methods::CANCEL_TASK => CANCEL_TASK,
        methods::SUBSCRIBE_TO_TASK => SUBSCRIBE_TO_TASK,
        _ => return None,
    })
}

/// `params` of `method` in the canonical form (see the module docs). Anything that
/// is not an object, and the params of other methods, are returned as they are.
///
/// # Errors
/// Invalid params for a field named twice, an enum number out of range or an
/// integer string that is not an integer.
pub fn normalize(method: &str, params: Value) -> Result<Value, RpcError> {
    match (table(method), params) {
        (Some(fields), Value::Object(map)) => Ok(Value::Object(message(fields, map, "")?)),
        (_, params) => Ok(params),
    }
}

fn message(
    fields: &[Field],
    map: Map<String, Value>,
    at: &str,
) -> Result<Map<String, Value>, RpcError> {
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        let Some(&(proto, json, kind)) = fields.iter().find(|(p, j, _)| *p == key || *j == key)
        else {
            // Not an A2A field: the A2A types decide (they ignore unknown fields).
            out.insert(key, value);
            continue;
        };
        if out.contains_key(json) {
            return Err(RpcError::invalid_params(format!(
                "{at}{json} is given twice (as {json} and as {proto})"
            )));
        }
        let path = format!("{at}{json}");
        let value = match (kind, value) {
            (Kind::Int, Value::String(s)) => Value::Number(integer(&s).ok_or_else(|| {
                RpcError::invalid_params(format!("{path} must be an integer (got {s:?})"))
            })?),
            (Kind::Enum(_), Value::String(name)) if name == "UNRECOGNIZED" => continue,
            (Kind::Struct, value) => whole_numbers(value),
            (Kind::Enum(names), Value::Number(n)) => {
                let name = n
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| names.get(i));
                match name {
                    Some(name) => Value::String((*name).to_owned()),
                    None => {
                        return Err(RpcError::invalid_params(format!(
                            "{path}: {n} is not one of its values (0 to {})",
                            names.len() - 1
                        )));
                    }
                }
            }
            (Kind::Message(inner), Value::Object(m)) => {
                Value::Object(message(inner, m, &format!("{path}."))?)
            }
            (Kind::Message(inner), Value::Array(items)) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match item {
                        Value::Object(m) => {
                            message(inner, m, &format!("{path}[{i}].")).map(Value::Object)
                        }
                        other => Ok(other),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            (_, value) => value,
        };
        out.insert(json.to_owned(), value);
    }
    Ok(out)
}

/// `v` with every whole number written as a double (`3600.0`) as an integer, at
/// any depth; numbers beyond 2^53 or with a fraction stay as they are.
fn whole_numbers(v: Value) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() <= EXACT => {
                // In range and whole: the conversion is exact.
                #[allow(clippy::cast_possible_truncation)]
                let i = f as i64;
                Value::Number(Number::from(i))
            }
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect())
        }
        other => other,
    }
}

/// A ProtoJSON integer string (`"2"`, `"-3"`): decimal digits, an optional sign.
fn integer(s: &str) -> Option<Number> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().map(Number::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn struct_numbers_written_as_doubles_are_read_as_integers() {
        let given = json!({"message": {
            "messageId": "m-1", "taskId": "t1", "role": "ROLE_USER",
            "parts": [{"data": {"answers": [{"options": [1.0, 2.5]}], "big": 1e300}}],
            "metadata": {"https://x": {"remember": {"scope": "session", "expiresIn": 3600.0}}}
        }, "metadata": {"n": -2.0}});
        let got = normalize(methods::SEND_MESSAGE, given).expect("reads");
        assert_eq!(
            got,
            json!({"message": {
                "messageId": "m-1", "taskId": "t1", "role": "ROLE_USER",
                "parts": [{"data": {"answers": [{"options": [1, 2.5]}], "big": 1e300}}],
                "metadata": {"https://x": {"remember": {"scope": "session", "expiresIn": 3600}}}
            }, "metadata": {"n": -2}})
        );
        assert!(got["message"]["parts"][0]["data"]["answers"][0]["options"][0].is_i64());
    }

    #[test]
    fn an_unrecognized_enum_is_read_as_absent() {
        let got = normalize(
            methods::LIST_TASKS,
            json!({"status": "UNRECOGNIZED", "pageSize": 2}),
        )
        .expect("reads");
        assert_eq!(got, json!({"pageSize": 2}));
    }

    #[test]
    fn proto_names_enum_numbers_and_integer_strings_are_read() {
        let given = json!({"message": {
            "message_id": "m-1", "task_id": "t1", "context_id": "c1", "role": 1,
            "parts": [{"data": {"approved": true, "message_id": 1}, "media_type": "application/json"}],
            "reference_task_ids": ["t0"],
            "metadata": {"https://x": {"interaction_id": "kept as written"}}
        }, "configuration": {"history_length": "0", "return_immediately": true}});
        let got = normalize(methods::SEND_MESSAGE, given).expect("reads");
        assert_eq!(
            got,
            json!({"message": {
                "messageId": "m-1", "taskId": "t1", "contextId": "c1", "role": "ROLE_USER",
                "parts": [{"data": {"approved": true, "message_id": 1}, "mediaType": "application/json"}],
                "referenceTaskIds": ["t0"],
                "metadata": {"https://x": {"interaction_id": "kept as written"}}
            }, "configuration": {"historyLength": 0, "returnImmediately": true}})
        );
        let got = normalize(
            methods::LIST_TASKS,
            json!({"page_size": "2", "status": 8, "history_length": 1, "pageToken": "x"}),
        )
        .expect("reads");
        assert_eq!(
            got,
            json!({"pageSize": 2, "status": "TASK_STATE_AUTH_REQUIRED", "historyLength": 1, "pageToken": "x"})
        );
        // The canonical form is left as it is.
        let canonical = json!({"id": "t1", "historyLength": 3});
        assert_eq!(
            normalize(methods::GET_TASK, canonical.clone()).expect("reads"),
            canonical
        );
    }

    #[test]
    fn ambiguities_are_refused() {
        for (method, bad) in [
            (
                methods::GET_TASK,
                json!({"id": "t1", "history_length": "x"}),
            ),
            (
                methods::GET_TASK,
                json!({"id": "t1", "history_length": "1.5"}),
            ),
            (methods::LIST_TASKS, json!({"status": 9})),
            (methods::LIST_TASKS, json!({"status": -1})),
            (methods::LIST_TASKS, json!({"page_size": 1, "pageSize": 2})),
            (
                methods::SEND_MESSAGE,
                json!({"message": {"messageId": "a", "message_id": "b"}}),
            ),
            (methods::SEND_MESSAGE, json!({"message": {"role": 3}})),
        ] {
            let e = normalize(method, bad.clone()).expect_err(&bad.to_string());
            assert_eq!(e.code, a2a_lf::error_code::INVALID_PARAMS, "{bad}");
        }
    }
}

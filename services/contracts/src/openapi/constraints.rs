//! What the server enforces that the Rust types alone do not say, stated in the
//! OpenAPI document so that a client, an SDK generator or a fuzzer built from it
//! accepts exactly what the server accepts.
//!
//! Each rule names the code that enforces it and takes its bounds from the same
//! constants, so the document and the server cannot drift apart silently:
//!
//! - [`bound_unsigned`]: every `uint*` integer gets the `maximum` of its Rust
//!   type (serde refuses a larger number, `400 NRY-0001`);
//! - [`body_rules`]: the REST bodies' free text (`rules::check_text`: at most
//!   `MAX_TEXT_CHARS` characters, no control character but TAB, LF and CR), the
//!   question body's counts, `remember.expiresIn`, the webhook registration
//!   (`webhook::check_url`, `check_registration`), the rotation's overlap, and
//!   the `approve` / `respond` bodies' "exactly one of `approved` and `value`"
//!   (the ingress's `rest::answers::one_of`), and a batch item's body as its
//!   operation's body (`rest::answers::input_of`);
//! - [`CURSOR_PATTERN`], [`SEQUENCE_PATTERN`]: a page cursor and an event
//!   sequence are decimal `u64`s (19 digits always fit).

use holdpoint_domain::event::EVENT_NAMES;
use holdpoint_domain::policy::MAX_EXPIRES_IN;
use holdpoint_domain::rules::{MAX_OPTIONS, MAX_QUESTIONS, MAX_TEXT_CHARS};
use holdpoint_domain::webhook::{
    MAX_DESCRIPTION_LEN, MAX_EVENT_TYPES, MAX_ROTATION_OVERLAP_SECS, MAX_URL_LEN,
};
use serde_json::{Map, Value, json};

/// A page cursor (`nextCursor`): the decimal position the next page starts after.
pub(super) const CURSOR_PATTERN: &str = "^[0-9]{1,19}$";

/// An event's sequence in `HP_EVENTS` (`Last-Event-ID`), decimal.
pub(super) const SEQUENCE_PATTERN: &str = "^[0-9]{1,19}$";

/// A webhook URL the registration always accepts (see [`body_rules`]).
pub(super) const WEBHOOK_URL_PATTERN: &str =
    "^https://([a-z0-9]+\\.)*[a-z][a-z0-9]*(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]*)*$";

/// A person's free text (`rules::check_text`): any character but C0 controls other
/// than TAB, LF and CR, DEL and C1 controls.
pub(super) const FREE_TEXT_PATTERN: &str =
    "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$";

/// A person's free text field: at most [`MAX_TEXT_CHARS`] characters of
/// [`FREE_TEXT_PATTERN`].
fn free_text(description: &Value) -> Value {
    json!({
        "type": "string",
        "maxLength": MAX_TEXT_CHARS,
        "pattern": FREE_TEXT_PATTERN,
        "description": description,
    })
}

/// Sets `maximum` on every unsigned integer schema of `doc` (by its schemars
/// `format`) that has none.
pub(super) fn bound_unsigned(doc: &mut Value) {
    match doc {
        Value::Object(map) => {
            let max = match map.get("format").and_then(Value::as_str) {
                Some("uint8") => Some(u64::from(u8::MAX)),
                Some("uint16") => Some(u64::from(u16::MAX)),
                Some("uint32") => Some(u64::from(u32::MAX)),
                Some("uint64" | "uint") => Some(u64::MAX),
                _ => None,
            };
            if let Some(max) = max
                && !map.contains_key("maximum")
            {
                map.insert("maximum".into(), json!(max));
            }
            for v in map.values_mut() {
                bound_unsigned(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(bound_unsigned),
        _ => {}
    }
}

fn prop<'a>(schemas: &'a mut Map<String, Value>, schema: &str, field: &str) -> &'a mut Value {
    &mut schemas[schema]["properties"][field]
}

fn text_prop(schemas: &mut Map<String, Value>, schema: &str, field: &str, nullable: bool) {
    let p = prop(schemas, schema, field);
    let description = p["description"].clone();
    let mut text = free_text(&description);
    if nullable {
        text["type"] = json!(["string", "null"]);
    }
    *p = text;
}

/// Tightens the component schemas the REST bodies use (see the module docs).
pub(super) fn body_rules(schemas: &mut Map<String, Value>) {
    // approve / respond: free text, and exactly one of `approved` and `value`. A
    // field sent as `null` is the field left out, except `value`, whose `null` is
    // the JSON value null.
    text_prop(schemas, "ApproveBody", "reason", true);
    text_prop(schemas, "RespondBody", "reason", true);
    // `approve` answers an approval: a `value` reads as `approved` and must be a
    // boolean there (`rules::read_answer`, NRY-0001 otherwise).
    schemas["ApproveBody"]["properties"]["value"]["type"] = json!("boolean");
    schemas["ApproveBody"]["oneOf"] = json!([
        {
            "description": "A decision: `approved`, no `value`.",
            "required": ["approved"],
            "properties": {"approved": {"type": "boolean"}},
            "not": {"required": ["value"]},
        },
        {
            "description": "A boolean `value`, read as `approved`.",
            "required": ["value"],
            "properties": {"approved": {"type": "null"}},
        },
    ]);
    schemas["RespondBody"]["oneOf"] = json!([
        {
            "description": "`approved`, read as the value; no `value`.",
            "required": ["approved"],
            "properties": {"approved": {"type": "boolean"}},
            "not": {"required": ["value"]},
        },
        {
            "description": "Any JSON `value` (`null` included).",
            "required": ["value"],
            "properties": {"approved": {"type": "null"}},
        },
    ]);

    // A batch item's body is its operation's body (`rest::answers::input_of`), read
    // per item like its id and key (`rest::answers::answer_item`): one that does not
    // fit is that item's `400` in a `200`, and the other items are decided, so the
    // batch's document takes any JSON there, and any string for the id and the key.
    *prop(schemas, "BatchItem", "body") = json!({
        "description": "The single operation's body, read exactly as that operation reads it: an `ApproveBody` for `approve`, a `RespondBody` for `respond`, an `AnswerBody` for `answer`; any other JSON is this item's `400 NRY-0001`.",
    });
    for (field, what) in [
        (
            "interactionId",
            "The interaction (for `answer`, the question's id): 1 to 128 printable ASCII characters, else this item's `400 NRY-0001`.",
        ),
        (
            "idempotencyKey",
            "This item's idempotency key: 1 to 128 printable ASCII characters, else this item's `400 NRY-0001`; the same key again, in this batch or another request, replays this item's outcome.",
        ),
    ] {
        *prop(schemas, "BatchItem", field) = json!({"type": "string", "description": what});
    }

    // The question body: 1 to MAX_QUESTIONS entries (`rules::check_answers`), each
    // choosing among at most MAX_OPTIONS options; `remember` is never accepted.
    let answers = prop(schemas, "AnswerBody", "answers");
    answers["minItems"] = json!(1);
    answers["maxItems"] = json!(MAX_QUESTIONS);
    let remember = prop(schemas, "AnswerBody", "remember");
    remember["type"] = json!("null");
    let options = prop(schemas, "OptionAnswer", "options");
    options["maxItems"] = json!(MAX_OPTIONS);
    options["uniqueItems"] = json!(true);
    text_prop(schemas, "OptionAnswer", "text", true);

    // `remember.expiresIn` (`Remember::check`).
    let expires = prop(schemas, "Remember", "expiresIn");
    expires["minimum"] = json!(1);
    expires["maximum"] = json!(MAX_EXPIRES_IN);

    // A lane message's text (`rules::check_text`), and its lane and message ids
    // (`LaneId::parse`, `MessageId::parse`: 1 to 128 printable ASCII characters).
    text_prop(schemas, "MessageBody", "text", false);
    // Not blank: at least one character that is not white space (`decide::lane`).
    schemas["MessageBody"]["properties"]["text"]["minLength"] = json!(1);
    schemas["MessageBody"]["properties"]["text"]["pattern"] = json!(
        "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$"
    );
    for field in ["lane", "messageId"] {
        let p = prop(schemas, "MessageBody", field);
        let description = p["description"].clone();
        *p = json!({
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": holdpoint_domain::ids::MAX_ID_LEN,
            "pattern": holdpoint_domain::schema::ASCII_ID_PATTERN,
            "description": description,
        });
    }

    // A webhook registration (`webhook::check_url`, `webhook::check_registration`).
    let url = prop(schemas, "CreateWebhook", "url");
    // The pattern is a plain `https` URL the parser keeps as it is (lower-case host
    // whose last label starts with a letter, an optional port, a path): every URL
    // it matches is accepted. Others may be too (query strings, upper case, local
    // mode's `http` to loopback); the description says which.
    url["minLength"] = json!(1);
    url["maxLength"] = json!(MAX_URL_LEN);
    url["pattern"] = json!(WEBHOOK_URL_PATTERN);
    let types = prop(schemas, "CreateWebhook", "eventTypes");
    types["maxItems"] = json!(MAX_EVENT_TYPES);
    types["items"] = json!({"type": "string", "enum": EVENT_NAMES});
    let description = prop(schemas, "CreateWebhook", "description");
    description["maxLength"] = json!(MAX_DESCRIPTION_LEN);
    let overlap = prop(schemas, "RotateWebhook", "overlapSecs");
    overlap["maximum"] = json!(MAX_ROTATION_OVERLAP_SECS);
}

/// OpenAPI links: where a response names an id another operation takes, so a
/// client (and a stateful fuzzer) can follow real ids.
pub(super) fn links(op: &str) -> Option<(&'static str, Value)> {
    let to = |ops: &[&str], id: &str| {
        let mut m = Map::new();
        for o in ops {
            m.insert(
                (*o).to_owned(),
                json!({"operationId": o, "parameters": {"id": id}}),
            );
        }
        Value::Object(m)
    };
    const WEBHOOK_OPS: [&str; 6] = [
        "getWebhook",
        "deleteWebhook",
        "rotateWebhookSecret",
        "enableWebhook",
        "testWebhook",
        "listWebhookAttempts",
    ];
    match op {
        "createWebhook" => Some(("201", to(&WEBHOOK_OPS, "$response.body#/id"))),
        "listWebhooks" => Some(("200", to(&WEBHOOK_OPS, "$response.body#/items/0/id"))),
        "listRules" => Some((
            "200",
            to(&["getRule", "revokeRule"], "$response.body#/items/0/id"),
        )),
        "listInteractions" => Some((
            "200",
            to(
                &[
                    "getInteraction",
                    "approveInteraction",
                    "respondToInteraction",
                ],
                "$response.body#/items/0/interactionId",
            ),
        )),
        _ => None,
    }
}

/// A `text/event-stream` response's schema, read per event (OpenAPI 3.2's reading,
/// which tools apply to 3.1 too): `id:` and `event:` as strings, `data:` the JSON
/// of `data` (a schema reference).
pub(super) fn sse_event(data: &Value, names: Option<&[&str]>) -> Value {
    let mut event = json!({"type": "string"});
    if let Some(names) = names {
        event["enum"] = json!(names);
    }
    json!({
        "type": "object",
        "required": ["data"],
        "properties": {
            "id": {"type": "string", "pattern": SEQUENCE_PATTERN},
            "event": event,
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
            "retry": {"type": "integer", "minimum": 0},
        },
    })
}

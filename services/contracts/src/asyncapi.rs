//! `schemas/asyncapi.json`: an AsyncAPI 3.0 document for Holdpoint's NATS subjects,
//! from Holdpoint's side (it receives commands and sends outcomes, events, audit
//! records, lane messages and its KV records).
//!
//! Subjects and names come from [`Topology::default`], payloads from the
//! schemars schemas (draft-07, AsyncAPI's default schema format), the command
//! verbs from the `Command` schema and the event messages from
//! [`crate::events::event_types`].

use holdpoint_bus::{REPLY_HEADER, TRACEPARENT_HEADER, Topology};
use holdpoint_domain::{
    Command, CommandEnvelope, Event, Interaction, Lane, LaneMessage, Outcome, Session, Task,
};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::events::{EventType, event_types};
use crate::json::{asyncapi_settings, plain_doc};

/// Every command verb (`hp.cmd.<org>.<verb>`): the `type` tags of `Command`.
///
/// # Panics
/// When `Command` is not the internally tagged `oneOf` it is declared as.
pub fn command_verbs() -> Vec<String> {
    let schema = asyncapi_settings()
        .into_generator()
        .into_root_schema_for::<Command>()
        .to_value();
    schema["oneOf"]
        .as_array()
        .expect("Command is a oneOf of its variants")
        .iter()
        .map(|v| {
            v["properties"]["type"]["const"]
                .as_str()
                .expect("each command has a constant `type`")
                .to_owned()
        })
        .collect()
}

fn reference<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

const ORG_PARAM: &str = "The organisation, as a subject token: an id made of \
    `[A-Za-z0-9_-]` (not starting with `_`) as it is, any other id as `_` + its \
    unpadded base64url bytes.";

fn token_param(what: &str) -> Value {
    json!({"description": format!("The {what}, as a subject token (encoded like `org`).")})
}

fn msg_id_header(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what}; JetStream drops a repeat inside its duplicate window.")})
}

fn event_message(t: &EventType, event_ref: &Value) -> Value {
    json!({
        "name": t.name,
        "title": t.ce_type,
        "summary": plain_doc(&t.description),
        "contentType": "application/cloudevents+json",
        "headers": {
            "type": "object",
            "properties": {
                "Nats-Msg-Id": msg_id_header("The CloudEvents `id` (deterministic)"),
                "Content-Type": {"type": "string", "const": "application/cloudevents+json"},
            },
            "required": ["Nats-Msg-Id"],
        },
        "correlationId": {"location": "$message.header#/Nats-Msg-Id"},
        "payload": {
            "allOf": [
                event_ref,
                {"properties": {"type": {"const": t.ce_type}}},
            ],
        },
    })
}

/// The AsyncAPI 3.0 document.
pub fn document() -> Value {
    let topo = Topology::default();
    let sp = &topo.subject_prefix;
    let mut generator = asyncapi_settings().into_generator();
    let command = reference::<CommandEnvelope>(&mut generator);
    let outcome = reference::<Outcome>(&mut generator);
    let event = reference::<Event>(&mut generator);
    let lane_message = reference::<LaneMessage>(&mut generator);
    let interaction = reference::<Interaction>(&mut generator);
    let session = reference::<Session>(&mut generator);
    let lane = reference::<Lane>(&mut generator);
    let task = reference::<Task>(&mut generator);
    let rule = reference::<holdpoint_domain::Rule>(&mut generator);
    let attempt = reference::<holdpoint_domain::webhook::WebhookAttempt>(&mut generator);
    let schemas = Value::Object(generator.take_definitions(true));

    let types = event_types();
    let mut messages = Map::new();
    let mut event_refs = Map::new();
    let mut audit_refs = Map::new();
    let mut event_names = Vec::new();
    for t in &types {
        messages.insert(t.name.clone(), event_message(t, &event));
        let r = json!({"$ref": format!("#/components/messages/{}", t.name)});
        if t.audit() {
            audit_refs.insert(t.name.clone(), r);
        } else {
            event_refs.insert(t.name.clone(), r);
            event_names.push(t.name.clone());
        }
    }
    messages.insert(
        "command".into(),
        json!({
            "name": "command",
            "title": "Command",
            "summary": "A command for the worker, with the organisation it acts in.",
            "contentType": "application/json",
            "headers": {
                "type": "object",
                "properties": {
                    "Nats-Msg-Id": msg_id_header("The command id: a digest of (organisation, target, idempotency key)"),
                    REPLY_HEADER: {"type": "string", "description": "Where the worker replies the outcome (an `_INBOX.` subject); absent for fire-and-forget commands."},
                    TRACEPARENT_HEADER: {"type": "string", "description": "W3C trace context."},
                },
                "required": ["Nats-Msg-Id"],
            },
            "correlationId": {"location": "$message.header#/Nats-Msg-Id"},
            "payload": command,
        }),
    );
    messages.insert(
        "outcome".into(),
        json!({
            "name": "outcome",
            "title": "Outcome",
            "summary": "What a command achieved, or why it was refused (an NRY code).",
            "contentType": "application/json",
            "payload": outcome,
        }),
    );
    messages.insert(
        "webhook-delivery".into(),
        json!({
            "name": "webhook-delivery",
            "title": "Webhook delivery",
            "summary": "An event queued for one webhook endpoint: the CloudEvent as stored in the events stream (or a `webhook-test` one).",
            "contentType": "application/cloudevents+json",
            "headers": {
                "type": "object",
                "properties": {"Nats-Msg-Id": msg_id_header("`<webhookId>:<CloudEvents id>`: an event is queued once per endpoint")},
                "required": ["Nats-Msg-Id"],
            },
            "payload": event,
        }),
    );
    messages.insert(
        "webhook-attempt".into(),
        json!({
            "name": "webhook-attempt",
            "title": "Webhook attempt",
            "summary": "One delivery attempt to a webhook endpoint: result, status, latency and the answer's first bytes.",
            "contentType": "application/json",
            "payload": attempt,
        }),
    );
    messages.insert(
        "lane-message".into(),
        json!({
            "name": "lane-message",
            "title": "Lane message",
            "summary": "A person's message (or product answer) on a session's lane.",
            "contentType": "application/json",
            "headers": {
                "type": "object",
                "properties": {"Nats-Msg-Id": msg_id_header(holdpoint_domain::LANE_MESSAGE_MSG_ID)},
                "required": ["Nats-Msg-Id"],
            },
            "payload": lane_message,
        }),
    );
    for (name, title, summary, payload) in [
        (
            "interaction-record",
            "Interaction record",
            "The interaction record: the source of truth, written by compare-and-set on its revision.",
            &interaction,
        ),
        (
            "session-record",
            "Session header",
            "The session header: mode, status and lane capacity.",
            &session,
        ),
        (
            "lane-record",
            "Lane record",
            "A lane of a session: its running turn, queue, open product questions and recent deliveries.",
            &lane,
        ),
        (
            "task-record",
            "Task record",
            "A task's pending interactions (oldest first, the one every view names) and the calls it held.",
            &task,
        ),
        (
            "outcome-record",
            "Outcome record",
            "A command's stored outcome, read by duplicate requests.",
            &outcome,
        ),
        (
            "rule-record",
            "Remembered rule",
            "A remembered approval rule: created once by the answer that remembered it (`Nats-Msg-Id` `rule-<ruleId>`, `Nats-Expected-Last-Subject-Sequence: 0`), then changed only by its revocation (compare-and-set on its revision).",
            &rule,
        ),
    ] {
        messages.insert(
            name.into(),
            json!({"name": name, "title": title, "summary": summary, "contentType": "application/json", "payload": payload}),
        );
    }

    let channels = json!({
        "commands": {
            "address": format!("{sp}.cmd.{{org}}.{{key}}.{{verb}}"),
            "title": "Commands",
            "description": format!("Stream `{}` (file storage, work queue, duplicate window {} s). The stream stores each command as `{sp}.cmd.<p>.<org>.<key>.<verb>`, with `<p>` one of {} partitions picked from (org, key) by the server's `partition()` subject transform; each partition's consumer `{}_<p>` pins one worker at a time (priority group `{}`).", topo.commands_stream(), topo.duplicate_window.as_secs(), topo.partitions, topo.worker_consumer_prefix(), topo.priority_group()),
            "parameters": {
                "org": {"description": ORG_PARAM},
                "key": {"description": "The partition key as a subject token (encoded like `org`): the A2A task for interaction commands, the interaction when the sender does not name its task, the session for session and lane commands (holdpoint_domain::CommandEnvelope::partition_key)."},
                "verb": {"description": "The command's `type`.", "enum": command_verbs()},
            },
            "messages": {"command": {"$ref": "#/components/messages/command"}},
        },
        "schedules": {
            "address": format!("{sp}.fx.sched.{{org}}.{{interactionId}}.{{stage}}"),
            "title": "Deadline schedules",
            "description": format!("JetStream message schedules in the state stream `{}` (`allow_msg_schedules`), written in the atomic batch of the decision that set the deadline: one per interaction and stage, holding an `expire` command. Headers: `Nats-Schedule: @at <RFC 3339>` and `Nats-Schedule-Target: {sp}.fx.cmd.<org>.<task>.expire.<scheduleId>`. At that time the server stores the body on the target, the commands stream `{}` sources it as `{sp}.cmd.<org>.<task>.expire` (a command like any other), and the schedule is removed; a newer schedule on the same subject replaces the older one. No consumer reads these subjects.", topo.state_stream(), topo.commands_stream()),
            "parameters": {
                "org": {"description": ORG_PARAM},
                "interactionId": {"description": "The interaction, as a subject token (encoded like `org`)."},
                "stage": {"description": "`warn` (the `interaction-expiring` lead) or `expire` (the deadline).", "enum": ["warn", "expire"]},
            },
            "messages": {"command": {"$ref": "#/components/messages/command"}},
        },
        "outcomes": {
            "address": null,
            "title": "Outcomes",
            "description": format!("The worker's reply to a command, on the subject its `{REPLY_HEADER}` header names."),
            "messages": {"outcome": {"$ref": "#/components/messages/outcome"}},
        },
        "events": {
            "address": format!("{sp}.evt.{{org}}.{{task}}.{{name}}"),
            "title": "Events",
            "description": format!("Stream `{}` (file storage, kept {} days): CloudEvents 1.0 in structured JSON mode, with deterministic ids. Workers store each event in the state stream `{}` on `{sp}.fx.evt.<org>.<task>.<eventId>.<name>`, in the atomic batch of the decision it belongs to; this stream sources it under this subject (the source transform drops the id token) and republishes exactly what it stored, so a live subscriber sees every stored event once.", topo.events_stream(), topo.event_max_age.as_secs() / 86_400, topo.state_stream()),
            "parameters": {
                "org": {"description": ORG_PARAM},
                "task": {"description": "The A2A task, as a subject token (encoded like `org`); `_` for events without a task."},
                "name": {"description": "The event's short name: its CloudEvents `type` without `dev.holdpoint.`.", "enum": event_names},
            },
            "messages": event_refs,
        },
        "audit": {
            "address": format!("{sp}.audit.{{org}}"),
            "title": "Audit",
            "description": format!("Stream `{}`: the decision audit. Every approval decision (by a person, a remembered rule or an expiry) and every rule written or revoked; never a question or a connection. Stored with its decision in the state stream on `{sp}.fx.audit.<org>.<eventId>`, sourced, stored and republished here.", topo.audit_stream()),
            "parameters": {"org": {"description": ORG_PARAM}},
            "messages": audit_refs,
        },
        "lanes": {
            "address": format!("{sp}.lane.{{org}}.{{session}}.{{lane}}"),
            "title": "Lanes",
            "description": format!("Stream `{}`: the messages product sessions' lanes take. Stored with their decision in the state stream on `{sp}.fx.lane.<org>.<session>.<lane>.<msgId>`, sourced, stored and republished here.", topo.lanes_stream()),
            "parameters": {
                "org": {"description": ORG_PARAM},
                "session": token_param("session"),
                "lane": token_param("lane"),
            },
            "messages": {"lane-message": {"$ref": "#/components/messages/lane-message"}},
        },
        "interaction-records": {
            "address": format!("$KV.{}.int.{{org}}.{{interaction}}", topo.state_bucket()),
            "title": "Interaction records",
            "description": format!("The state bucket `{}` (one message per subject; written only by a decision's atomic batch), key `int.<org>.<interactionId>`.", topo.state_bucket()),
            "parameters": {"org": {"description": ORG_PARAM}, "interaction": token_param("interaction id")},
            "messages": {"interaction-record": {"$ref": "#/components/messages/interaction-record"}},
        },
        "session-records": {
            "address": format!("$KV.{}.ses.{{org}}.{{session}}", topo.state_bucket()),
            "title": "Session headers",
            "description": format!("The state bucket `{}`, key `ses.<org>.<sessionId>`; workers keep a watch on these keys.", topo.state_bucket()),
            "parameters": {"org": {"description": ORG_PARAM}, "session": token_param("session id")},
            "messages": {"session-record": {"$ref": "#/components/messages/session-record"}},
        },
        "lane-records": {
            "address": format!("$KV.{}.ses.{{org}}.{{session}}.{{lane}}", topo.state_bucket()),
            "title": "Lane records",
            "description": format!("The state bucket `{}`, key `ses.<org>.<sessionId>.<lane>`.", topo.state_bucket()),
            "parameters": {"org": {"description": ORG_PARAM}, "session": token_param("session id"), "lane": token_param("lane")},
            "messages": {"lane-record": {"$ref": "#/components/messages/lane-record"}},
        },
        "task-records": {
            "address": format!("$KV.{}.task.{{org}}.{{task}}", topo.state_bucket()),
            "title": "Task records",
            "description": format!("The state bucket `{}`, key `task.<org>.<taskId>`.", topo.state_bucket()),
            "parameters": {"org": {"description": ORG_PARAM}, "task": token_param("task id")},
            "messages": {"task-record": {"$ref": "#/components/messages/task-record"}},
        },
        "webhook-queue": {
            "address": format!("{sp}.whk.{{org}}.{{webhook}}"),
            "title": "Webhook queue",
            "description": format!("Stream `{}` (file storage, work queue): the events waiting for one webhook endpoint. The notifier queues them from its durable consumer `{}` of the events stream; each endpoint has its own durable consumer `{}_WHK_<webhookId>` with one message in flight; a failed attempt is NAKed with the retry schedule's delay.", topo.webhook_queue_stream(), topo.notifier_consumer(), topo.name_prefix),
            "parameters": {"org": {"description": ORG_PARAM}, "webhook": token_param("webhook id")},
            "messages": {"webhook-delivery": {"$ref": "#/components/messages/webhook-delivery"}},
        },
        "webhook-attempts": {
            "address": format!("{sp}.wha.{{org}}.{{webhook}}"),
            "title": "Webhook attempts",
            "description": format!("Stream `{}`: every delivery attempt, the last {} per endpoint, kept {} days; read by `GET /v1/webhooks/{{id}}/attempts`.", topo.webhook_attempts_stream(), holdpoint_bus::webhooks::ATTEMPTS_PER_ENDPOINT, holdpoint_bus::webhooks::ATTEMPTS_MAX_AGE.as_secs() / 86_400),
            "parameters": {"org": {"description": ORG_PARAM}, "webhook": token_param("webhook id")},
            "messages": {"webhook-attempt": {"$ref": "#/components/messages/webhook-attempt"}},
        },
        "rule-records": {
            "address": format!("$KV.{}.rule.{{org}}.{{rule}}", topo.state_bucket()),
            "title": "Remembered rules",
            "description": format!("The state bucket `{}` (kept until removed by an operator), key `rule.<org>.<ruleId>`; every worker keeps a watch with history on the `rule.>` keys and decides a held call by the live rules of its organisation.", topo.state_bucket()),
            "parameters": {"org": {"description": ORG_PARAM}, "rule": token_param("rule id")},
            "messages": {"rule-record": {"$ref": "#/components/messages/rule-record"}},
        },
        "outcome-records": {
            "address": format!("$KV.{}.{{command}}", topo.outcomes_bucket()),
            "title": "Outcome records",
            "description": format!("KV bucket `{}`, key the command id, kept {} h.", topo.outcomes_bucket(), topo.outcome_ttl.as_secs() / 3600),
            "parameters": {"command": {"description": "The command id (`cmd-` + 40 hex)."}},
            "messages": {"outcome-record": {"$ref": "#/components/messages/outcome-record"}},
        },
    });

    let channel_messages = |channel: &str, audit: bool| -> Vec<Value> {
        types
            .iter()
            .filter(|t| t.audit() == audit)
            .map(|t| json!({"$ref": format!("#/channels/{channel}/messages/{}", t.name)}))
            .collect()
    };
    let operations = json!({
        "receiveCommand": {
            "action": "receive",
            "channel": {"$ref": "#/channels/commands"},
            "title": "Take a command",
            "summary": "The worker pinned to the command's partition decides it (in a batch, in stream order; CAS on each record's revision), publishes its effects, stores the outcome of a decision that wrote nothing, replies, then acks.",
            "messages": [{"$ref": "#/channels/commands/messages/command"}],
            "reply": {
                "address": {"location": format!("$message.header#/{REPLY_HEADER}"), "description": "The requester's reply subject."},
                "channel": {"$ref": "#/channels/outcomes"},
                "messages": [{"$ref": "#/channels/outcomes/messages/outcome"}],
            },
        },
        "sendEvent": {
            "action": "send",
            "channel": {"$ref": "#/channels/events"},
            "title": "Emit an event",
            "summary": "Each transition's events, with Nats-Msg-Id = the CloudEvents id, so re-emitting after a crash is a no-op.",
            "messages": channel_messages("events", false),
        },
        "sendAudit": {
            "action": "send",
            "channel": {"$ref": "#/channels/audit"},
            "title": "Record an approval decision or a rule change",
            "messages": channel_messages("audit", true),
        },
        "sendLaneMessage": {
            "action": "send",
            "channel": {"$ref": "#/channels/lanes"},
            "title": "Deliver a message to a lane",
            "messages": [{"$ref": "#/channels/lanes/messages/lane-message"}],
        },
        "writeInteraction": {
            "action": "send",
            "channel": {"$ref": "#/channels/interaction-records"},
            "title": "Write an interaction record",
            "messages": [{"$ref": "#/channels/interaction-records/messages/interaction-record"}],
        },
        "writeSession": {
            "action": "send",
            "channel": {"$ref": "#/channels/session-records"},
            "title": "Write a session header",
            "messages": [{"$ref": "#/channels/session-records/messages/session-record"}],
        },
        "writeLane": {
            "action": "send",
            "channel": {"$ref": "#/channels/lane-records"},
            "title": "Write a lane record",
            "messages": [{"$ref": "#/channels/lane-records/messages/lane-record"}],
        },
        "writeTask": {
            "action": "send",
            "channel": {"$ref": "#/channels/task-records"},
            "title": "Write a task record",
            "messages": [{"$ref": "#/channels/task-records/messages/task-record"}],
        },
        "queueWebhookDelivery": {
            "action": "send",
            "channel": {"$ref": "#/channels/webhook-queue"},
            "title": "Queue an event for a webhook endpoint",
            "summary": "The notifier queues each event for every enabled endpoint of its organisation that wants its type, then acks the event.",
            "messages": [{"$ref": "#/channels/webhook-queue/messages/webhook-delivery"}],
        },
        "recordWebhookAttempt": {
            "action": "send",
            "channel": {"$ref": "#/channels/webhook-attempts"},
            "title": "Record a webhook attempt",
            "messages": [{"$ref": "#/channels/webhook-attempts/messages/webhook-attempt"}],
        },
        "writeRule": {
            "action": "send",
            "channel": {"$ref": "#/channels/rule-records"},
            "title": "Write or revoke a remembered rule",
            "summary": "The worker creates a rule as an effect of the answer that remembered it; the ingress revokes it for DELETE /v1/rules/{id}.",
            "messages": [{"$ref": "#/channels/rule-records/messages/rule-record"}],
        },
        "storeOutcome": {
            "action": "send",
            "channel": {"$ref": "#/channels/outcome-records"},
            "title": "Store a command's outcome",
            "messages": [{"$ref": "#/channels/outcome-records/messages/outcome-record"}],
        },
    });

    json!({
        "asyncapi": "3.0.0",
        "x-generated": "Generated by holdpoint-contracts from the Rust wire types and holdpoint_bus::Topology; do not edit.",
        "info": {
            "title": "Holdpoint NATS API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Holdpoint resolves each interaction (an approval, a question, a connection) exactly once through NATS JetStream. Runtimes publish commands; workers decide them, write the records by compare-and-set, emit CloudEvents and reply outcomes. Every subject token is a validated id: plain ids as they are, any other as `_` + base64url.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {
                "host": "127.0.0.1:4290",
                "protocol": "nats",
                "description": "The nats-server `holdpoint up` starts (`--nats-port`); any NATS 2.9+ with JetStream works.",
            },
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": schemas,
            "messages": messages,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_domain::OrgId;

    #[test]
    fn verbs_are_the_subject_verbs() {
        let org = OrgId::parse("acme").expect("org");
        for verb in command_verbs() {
            let env: CommandEnvelope = serde_json::from_value(sample_command(&verb))
                .unwrap_or_else(|e| panic!("sample {verb}: {e}"));
            assert_eq!(env.verb(), verb);
            assert_eq!(env.org, org);
        }
    }

    fn sample_command(verb: &str) -> Value {
        let command = match verb {
            "session-open" => json!({"type": verb, "session": "s", "mode": "blocking"}),
            "session-close" | "session-end" => json!({"type": verb, "session": "s"}),
            "open" => json!({"type": verb, "interactionId": "i", "session": "s", "lane": "main",
                "taskId": "t", "contextId": "c", "callId": "k",
                "request": {"kind": "connection", "app": "Linear", "reason": "r"}}),
            "close" => json!({"type": verb, "interactionId": "i", "reason": "canceled"}),
            "answer" => json!({"type": verb, "interactionId": "i", "route": "respond", "key": "k",
                "by": "ana", "input": {"type": "text", "text": "hi"}}),
            "tool-result" => json!({"type": verb, "interactionId": "i",
                "result": {"status": "ok", "output": 1}}),
            "deadline" => json!({"type": verb, "interactionId": "i", "expiresIn": 60}),
            "reassign" => json!({"type": verb, "interactionId": "i", "changeId": "c",
                "assignees": {"groups": ["oncall"]}}),
            "expire" => json!({"type": verb, "interactionId": "i", "taskId": "t",
                "expiresAt": "2026-05-01T12:00:00.000Z", "stage": "warn"}),
            "message" => json!({"type": verb, "session": "s", "lane": "main", "messageId": "m",
                "by": "ana", "text": "hi"}),
            "turn-start" | "turn-finish" => {
                json!({"type": verb, "session": "s", "lane": "main", "turnId": "m"})
            }
            other => panic!("no sample for verb {other}: add one"),
        };
        json!({"org": "acme", "command": command})
    }
}

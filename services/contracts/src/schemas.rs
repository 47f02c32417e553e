//! One JSON Schema (2020-12, self-contained with `$defs`) per top-level wire type.
//!
//! | file | Rust type | where it travels |
//! |---|---|---|
//! | `command.json` | `CommandEnvelope` | `hp.cmd.<org>.<key>.<verb>` |
//! | `outcome.json` | `Outcome` | the worker's reply; `HP_OUTCOMES` |
//! | `event.json` | `Event` | `hp.evt.<org>.<task>.<name>`, `hp.audit.<org>`, `GET /v1/events` |
//! | `lane-message.json` | `LaneMessage` | `hp.lane.<org>.<session>.<lane>` |
//! | `interaction.json` | `Interaction` | `HP_INTERACTIONS` record |
//! | `session.json` | `Session` | `HP_SESSIONS` record, key `<org>.<session>` |
//! | `lane.json` | `Lane` | `HP_SESSIONS` record, key `<org>.<session>.<lane>` |
//! | `task.json` | `Task` | `HP_TASKS` record |
//! | `interaction-view.json` | `InteractionView` | `GET /v1/interactions/{id}` |
//! | `error-body.json` | `ErrorBody` | every HTTP error |
//! | `rest/*.json` | the ingress's bodies and queries | the HTTP API |
//! | `webhooks/*.json` | `holdpoint_domain::webhook` types | `/v1/webhooks…` bodies and answers |
//!
//! The schemas describe what Holdpoint accepts (schemars' deserialize contract);
//! everything it emits validates against them (the `schemas` integration test
//! checks real traffic).

use holdpoint_domain::webhook::{
    CreateWebhook, RotateWebhook, TestQueued, WebhookAttempts, WebhookList, WebhookView,
    WebhookWithSecret,
};
use holdpoint_domain::{
    CommandEnvelope, ErrorBody, Event, Interaction, InteractionView, Lane, LaneMessage, Outcome,
    Rule, Session, Task,
};
use holdpoint_ingress::wire::{
    AnswerBody, ApproveBody, BatchBody, BatchResults, ListQuery, MessageAccepted, MessageBody,
    Page, RespondBody,
};
use holdpoint_ingress::wire::{AuditPage, AuditQuery, EventsQuery, RulePage, RulesQuery};
use schemars::JsonSchema;
use serde_json::Value;

use crate::json::standalone_settings;

/// The root schema of `T`, with a `$comment` naming its source.
pub fn root<T: JsonSchema>(rust: &str, travels: &str) -> Value {
    let schema = standalone_settings()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.insert(
            "$comment".into(),
            Value::String(format!(
                "Generated from {rust} by holdpoint-contracts; do not edit. {travels}"
            )),
        );
    }
    value
}

/// Every standalone schema file: (path under `schemas/`, schema).
pub fn files() -> Vec<(&'static str, Value)> {
    vec![
        (
            "command.json",
            root::<CommandEnvelope>(
                "holdpoint_domain::CommandEnvelope",
                "Payload of hp.cmd.<org>.<key>.<verb> (Nats-Msg-Id = the command id).",
            ),
        ),
        (
            "outcome.json",
            root::<Outcome>(
                "holdpoint_domain::Outcome",
                "The worker's reply to a command (to the Hp-Reply-To subject) and the HP_OUTCOMES record.",
            ),
        ),
        (
            "event.json",
            root::<Event>(
                "holdpoint_domain::Event",
                "A CloudEvents 1.0 event (structured JSON) on hp.evt.<org>.<task>.<name> and hp.audit.<org>, and the data of GET /v1/events.",
            ),
        ),
        (
            "lane-message.json",
            root::<LaneMessage>(
                "holdpoint_domain::LaneMessage",
                "Payload of hp.lane.<org>.<session>.<lane>.",
            ),
        ),
        (
            "interaction.json",
            root::<Interaction>(
                "holdpoint_domain::Interaction",
                "The HP_INTERACTIONS record, key <org>.<interactionId>.",
            ),
        ),
        (
            "session.json",
            root::<Session>(
                "holdpoint_domain::Session",
                "The HP_SESSIONS session header, key <org>.<sessionId>.",
            ),
        ),
        (
            "lane.json",
            root::<Lane>(
                "holdpoint_domain::Lane",
                "The HP_SESSIONS lane record, key <org>.<sessionId>.<lane>.",
            ),
        ),
        (
            "task.json",
            root::<Task>(
                "holdpoint_domain::Task",
                "The HP_TASKS record, key <org>.<taskId>.",
            ),
        ),
        (
            "interaction-view.json",
            root::<InteractionView>(
                "holdpoint_domain::InteractionView",
                "Body of GET /v1/interactions/{id}.",
            ),
        ),
        (
            "error-body.json",
            root::<ErrorBody>(
                "holdpoint_domain::ErrorBody",
                "Body of every HTTP error; the codes are in errors.json.",
            ),
        ),
        (
            "rest/answer-body.json",
            root::<AnswerBody>(
                "holdpoint_ingress::wire::AnswerBody",
                "Body of POST /v1/questions/{questionId}/answer.",
            ),
        ),
        (
            "rest/approve-body.json",
            root::<ApproveBody>(
                "holdpoint_ingress::wire::ApproveBody",
                "Body of POST /v1/interactions/{id}/approve.",
            ),
        ),
        (
            "rest/respond-body.json",
            root::<RespondBody>(
                "holdpoint_ingress::wire::RespondBody",
                "Body of POST /v1/interactions/{id}/respond.",
            ),
        ),
        (
            "rest/batch-body.json",
            root::<BatchBody>(
                "holdpoint_ingress::wire::BatchBody",
                "Body of POST /v1/answers.",
            ),
        ),
        (
            "rest/batch-results.json",
            root::<BatchResults>(
                "holdpoint_ingress::wire::BatchResults",
                "200 body of POST /v1/answers.",
            ),
        ),
        (
            "rest/message-body.json",
            root::<MessageBody>(
                "holdpoint_ingress::wire::MessageBody",
                "Body of POST /v1/sessions/{sessionId}/messages.",
            ),
        ),
        (
            "rest/message-accepted.json",
            root::<MessageAccepted>(
                "holdpoint_ingress::wire::MessageAccepted",
                "202 body of POST /v1/sessions/{sessionId}/messages.",
            ),
        ),
        (
            "rest/page.json",
            root::<Page>(
                "holdpoint_ingress::wire::Page",
                "Body of GET /v1/interactions.",
            ),
        ),
        (
            "rest/list-query.json",
            root::<ListQuery>(
                "holdpoint_ingress::wire::ListQuery",
                "Query of GET /v1/interactions.",
            ),
        ),
        (
            "rule.json",
            root::<Rule>(
                "holdpoint_domain::Rule",
                "A remembered approval rule: the HP_RULES record, key <org>.<ruleId>, and the body of GET /v1/rules/{id}.",
            ),
        ),
        (
            "rest/rule-page.json",
            root::<RulePage>(
                "holdpoint_ingress::wire::RulePage",
                "Body of GET /v1/rules.",
            ),
        ),
        (
            "rest/rules-query.json",
            root::<RulesQuery>(
                "holdpoint_ingress::wire::RulesQuery",
                "Query of GET /v1/rules.",
            ),
        ),
        (
            "rest/audit-page.json",
            root::<AuditPage>(
                "holdpoint_ingress::wire::AuditPage",
                "Body of GET /v1/audit.",
            ),
        ),
        (
            "rest/audit-query.json",
            root::<AuditQuery>(
                "holdpoint_ingress::wire::AuditQuery",
                "Query of GET /v1/audit.",
            ),
        ),
        (
            "rest/events-query.json",
            root::<EventsQuery>(
                "holdpoint_ingress::wire::EventsQuery",
                "Query of GET /v1/events.",
            ),
        ),
        (
            "webhooks/create-webhook.json",
            root::<CreateWebhook>(
                "holdpoint_domain::webhook::CreateWebhook",
                "Body of POST /v1/webhooks.",
            ),
        ),
        (
            "webhooks/webhook-with-secret.json",
            root::<WebhookWithSecret>(
                "holdpoint_domain::webhook::WebhookWithSecret",
                "201 body of POST /v1/webhooks and body of POST /v1/webhooks/{id}/rotate (the secret, shown once).",
            ),
        ),
        (
            "webhooks/webhook.json",
            root::<WebhookView>(
                "holdpoint_domain::webhook::WebhookView",
                "Body of GET /v1/webhooks/{id} and POST /v1/webhooks/{id}/enable.",
            ),
        ),
        (
            "webhooks/webhook-list.json",
            root::<WebhookList>(
                "holdpoint_domain::webhook::WebhookList",
                "Body of GET /v1/webhooks.",
            ),
        ),
        (
            "webhooks/rotate-webhook.json",
            root::<RotateWebhook>(
                "holdpoint_domain::webhook::RotateWebhook",
                "Body of POST /v1/webhooks/{id}/rotate (optional).",
            ),
        ),
        (
            "webhooks/test-queued.json",
            root::<TestQueued>(
                "holdpoint_domain::webhook::TestQueued",
                "202 body of POST /v1/webhooks/{id}/test.",
            ),
        ),
        (
            "webhooks/webhook-attempts.json",
            root::<WebhookAttempts>(
                "holdpoint_domain::webhook::WebhookAttempts",
                "Body of GET /v1/webhooks/{id}/attempts.",
            ),
        ),
    ]
}

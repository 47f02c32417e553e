//! Every path of the API, as route templates. A leaf: the router
//! ([`crate::routes`]) serves them, and handlers that need a path (the agent card
//! names the JSON-RPC endpoint) read it here, so no handler imports the router.

/// `POST`: answer a question (`ask_user`).
pub const ANSWER_QUESTION: &str = "/v1/questions/{question_id}/answer";
/// `POST`: the Runtime's `approve`.
pub const APPROVE: &str = "/v1/interactions/{id}/approve";
/// `POST`: the Runtime's `respond`.
pub const RESPOND: &str = "/v1/interactions/{id}/respond";
/// `POST`: many answers at once (approve, respond, answer), each decided on its own.
pub const ANSWERS: &str = "/v1/answers";
/// `GET`: one interaction.
pub const INTERACTION: &str = "/v1/interactions/{id}";
/// `GET`: a page of interactions.
pub const INTERACTIONS: &str = "/v1/interactions";
/// `POST`: a person's message on a lane.
pub const SESSION_MESSAGES: &str = "/v1/sessions/{session_id}/messages";
/// `GET`: a page of the organisation's remembered rules.
pub const RULES: &str = "/v1/rules";
/// `GET`: one remembered rule; `DELETE`: revoke it.
pub const RULE: &str = "/v1/rules/{id}";
/// `GET`: a page of the organisation's decision audit.
pub const AUDIT: &str = "/v1/audit";
/// `GET`: the organisation's events (SSE).
pub const EVENTS: &str = "/v1/events";
/// `POST`: register a webhook; `GET`: list them.
pub const WEBHOOKS: &str = "/v1/webhooks";
/// `GET`: one webhook; `DELETE`: remove it.
pub const WEBHOOK: &str = "/v1/webhooks/{id}";
/// `POST`: a new signing secret (the old one overlaps).
pub const WEBHOOK_ROTATE: &str = "/v1/webhooks/{id}/rotate";
/// `POST`: enable a disabled webhook.
pub const WEBHOOK_ENABLE: &str = "/v1/webhooks/{id}/enable";
/// `POST`: queue a test message.
pub const WEBHOOK_TEST: &str = "/v1/webhooks/{id}/test";
/// `GET`: a webhook's delivery attempts.
pub const WEBHOOK_ATTEMPTS: &str = "/v1/webhooks/{id}/attempts";
/// `GET`: the agent card (A2A discovery; public).
pub const AGENT_CARD: &str = "/.well-known/agent-card.json";
/// `POST`: the A2A JSON-RPC endpoint.
pub const JSONRPC: &str = "/a2a";

/// The answer routes: their latency is the answer latency histogram.
pub const ANSWER_ROUTES: [&str; 3] = [ANSWER_QUESTION, APPROVE, RESPOND];

/// Every route template of the API (the metrics' `route` label).
pub const ALL: [&str; 19] = [
    ANSWER_QUESTION,
    APPROVE,
    RESPOND,
    ANSWERS,
    INTERACTION,
    INTERACTIONS,
    SESSION_MESSAGES,
    RULES,
    RULE,
    AUDIT,
    EVENTS,
    WEBHOOKS,
    WEBHOOK,
    WEBHOOK_ROTATE,
    WEBHOOK_ENABLE,
    WEBHOOK_TEST,
    WEBHOOK_ATTEMPTS,
    AGENT_CARD,
    JSONRPC,
];

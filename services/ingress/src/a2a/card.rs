//! The agent card (A2A discovery): one JSON-RPC interface at `<base>/a2a`,
//! protocol version 1.0, streaming, the interactions/v1 extension (not required)
//! and a bearer-JWT security scheme. `<base>` is
//! [`IngressConfig::public_url`](crate::IngressConfig::public_url) when set, else
//! derived from the request's `Host` (`https` when `X-Forwarded-Proto: https`).

use std::collections::HashMap;

use a2a_lf::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill,
    HttpAuthSecurityScheme, SecurityScheme,
};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use holdpoint_domain::EXTENSION_URI;

use crate::error::ApiError;
use crate::routes::path;
use crate::state::AppState;

/// The base URL to advertise: the configured public URL, else the request's
/// `Host` (scheme from `X-Forwarded-Proto` when it says `https`).
fn base_url(state: &AppState, headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(url) = &state.cfg.public_url {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))?;
    let valid = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
    if !valid {
        return None;
    }
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
    {
        Some(p) if p.trim().eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    Some(format!("{scheme}://{host}"))
}

/// Holdpoint's agent card for the JSON-RPC endpoint at `base` + [`path::JSONRPC`].
pub fn card(base: &str) -> AgentCard {
    let modes = vec!["text/plain".to_owned(), "application/json".to_owned()];
    AgentCard {
        name: "Holdpoint".into(),
        description: "Answers for AI agents' paused tasks. A task waits here while a tool \
                      call is held for approval, the agent asked a question, or it asked \
                      for an app to be connected; answer it with a message on the same task."
            .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![AgentInterface::new(
            format!("{base}{}", path::JSONRPC),
            a2a_lf::TRANSPORT_PROTOCOL_JSONRPC,
        )],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Some(vec![AgentExtension {
                uri: EXTENSION_URI.into(),
                description: Some(
                    "interactions/v1: the status message of a waiting task carries the open \
                     interaction (interactionId, kind, prompt, detail) in its metadata; an \
                     answer names it and gives `approved` or `value`."
                        .into(),
                ),
                required: Some(false),
                params: None,
            }]),
            extended_agent_card: Some(false),
        },
        default_input_modes: modes.clone(),
        default_output_modes: modes.clone(),
        skills: vec![AgentSkill {
            id: "answer-interactions".into(),
            name: "Answer paused tool calls".into(),
            description: "Approve or deny a held tool call, answer an agent's question, or \
                          report whether an app was connected. Each answer resolves exactly once."
                .into(),
            tags: vec![
                "approval".into(),
                "question".into(),
                "connection".into(),
                "human-in-the-loop".into(),
            ],
            examples: None,
            input_modes: Some(modes.clone()),
            output_modes: Some(modes),
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: Some(HashMap::from([(
            "bearer".to_owned(),
            SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
                scheme: "Bearer".into(),
                description: Some(
                    "A JWT from the configured identity provider (subject = the person, an \
                     organisation claim)."
                        .into(),
                ),
                bearer_format: Some("JWT".into()),
            }),
        )])),
        security_requirements: Some(vec![HashMap::from([("bearer".to_owned(), Vec::new())])]),
        signatures: None,
    }
}

/// `GET /.well-known/agent-card.json`: public; `Cache-Control`, and `Vary` when
/// the card is built from the request's host.
pub async fn agent_card(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    match base_url(&state, &headers, &uri) {
        Some(base) => {
            let mut resp = Json(card(&base)).into_response();
            resp.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            );
            // Without a configured public URL the card is built from the request's
            // host and scheme: caches must keep one copy per host and scheme.
            if state.cfg.public_url.is_none() {
                resp.headers_mut().insert(
                    header::VARY,
                    HeaderValue::from_static("Host, X-Forwarded-Host, X-Forwarded-Proto"),
                );
            }
            resp
        }
        None => ApiError::invalid("a valid Host header is required to describe this server")
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_declares_the_extension_and_streaming() {
        let c = serde_json::to_value(card("http://h:1")).expect("json");
        assert_eq!(c["supportedInterfaces"][0]["url"], "http://h:1/a2a");
        assert_eq!(c["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(c["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["capabilities"]["extensions"][0]["uri"], EXTENSION_URI);
    }
}

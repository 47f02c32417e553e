//! The agent card (A2A discovery): one JSON-RPC interface at `<base>/a2a`,
//! protocol version 1.0, streaming, the interactions/v1 extension (not required)
//! and a bearer-JWT security scheme. `<base>` is
//! [`IngressConfig::public_url`](crate::IngressConfig::public_url) when set, else
//! derived from the request's `Host` (`https` when `X-Forwarded-Proto: https`).
//!
//! Caching: `Cache-Control: public, max-age=300`, an `ETag` from the card's bytes
//! ([`etag`]), and `304 Not Modified` (no body) to an `If-None-Match` that names it;
//! `Vary` on the host headers when the card is built from them.

use std::collections::HashMap;

use a2a_lf::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill,
    HttpAuthSecurityScheme, SecurityScheme,
};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use holdpoint_domain::EXTENSION_URI;

use crate::error::ApiError;
use crate::paths as path;
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
                     answer names it (`interactionId`) and gives `approved` or `value`, and an \
                     approval decision may carry `remember` (scope, expiresIn, \
                     argumentsDigest) to write a rule. With `approved: true` and the \
                     `argumentsDigest` of the arguments the person was shown, an approval may \
                     carry `editedArguments` (a JSON object) on a hold whose call shows \
                     `editable: true`: the call is released with them (NRY-0028 when the \
                     hold forbids edits, NRY-0029 for an edit that is not an object or too \
                     large, NRY-0033 with remember). An approval or connection answer that \
                     names no interactionId (and, for an approval, no argumentsDigest of the \
                     held call) is refused with invalid params, code NRY-0024, and decides \
                     nothing; a plain text or data reply still answers a question."
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
    let Some(base) = base_url(&state, &headers, &uri) else {
        return ApiError::invalid("a valid Host header is required to describe this server")
            .into_response();
    };
    let body = match serde_json::to_vec(&card(&base)) {
        Ok(b) => b,
        Err(e) => return ApiError::internal(e).into_response(),
    };
    let tag = etag(&body);
    let mut resp = if if_none_match(&headers, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    // Without a configured public URL the card is built from the request's host and
    // scheme: caches must keep one copy per host and scheme.
    if state.cfg.public_url.is_none() {
        h.insert(
            header::VARY,
            HeaderValue::from_static("Host, X-Forwarded-Host, X-Forwarded-Proto"),
        );
    }
    resp
}

/// The card's entity tag: a strong tag from the SHA-256 of its bytes, so it
/// changes exactly when the card does (another version, another base URL).
pub fn etag(body: &[u8]) -> String {
    let d: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(body).into();
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// True when `If-None-Match` names `tag` (weak comparison, as RFC 9110 asks for
/// this header: `W/"x"` matches `"x"`) or is `*`.
fn if_none_match(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_follow_the_bytes_and_match_weakly() {
        let a = etag(b"{\"name\":\"Holdpoint\"}");
        assert_eq!(a, etag(b"{\"name\":\"Holdpoint\"}"));
        assert_ne!(a, etag(b"{\"name\":\"Other\"}"));
        assert!(
            a.starts_with('"') && a.ends_with('"') && a.len() == 34,
            "{a}"
        );
        let mut h = HeaderMap::new();
        assert!(!if_none_match(&h, &a));
        for given in [
            a.clone(),
            format!("W/{a}"),
            format!("\"x\", {a}"),
            "*".into(),
        ] {
            h.insert(
                header::IF_NONE_MATCH,
                HeaderValue::from_str(&given).expect("value"),
            );
            assert!(if_none_match(&h, &a), "{given}");
        }
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        assert!(!if_none_match(&h, &a));
    }

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

//! Webhook endpoints: what an organisation registers, what Holdpoint stores, the
//! attempts it records, and the address policy every delivery obeys.
//!
//! - [`WebhookEndpoint`]: the stored record (KV bucket `HP_WEBHOOKS`, key
//!   `<org>.<webhookId>`), secrets included; [`WebhookView`] is what the API shows
//!   (never a secret). A secret is shown once, when made ([`WebhookWithSecret`]).
//! - Secrets are Standard Webhooks symmetric keys, `whsec_<base64 of 32 bytes>`.
//!   Rotating keeps the previous secret signing until its `expires_at`: every
//!   delivery then carries one `v1,<signature>` per live secret in
//!   `webhook-signature`, so a receiver holding either verifies.
//! - [`WebhookAttempt`]: one delivery attempt (status, latency, the first bytes of
//!   the response), kept per endpoint.
//! - [`check_url`] and [`address_allowed`]: `https` only (plain `http` only to a
//!   loopback host in local mode); no credentials; outside local mode no private,
//!   loopback, link-local or otherwise non-public address, checked on the literal
//!   here and on every resolved address at delivery time.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::{ErrorCode, Rejection};
use crate::event::EVENT_NAMES;
use crate::ids::{OrgId, WebhookId};

/// Most endpoints one organisation may register (`409 NRY-0042` past it).
pub const MAX_WEBHOOKS_PER_ORG: usize = 50;
/// Longest URL accepted, in bytes.
pub const MAX_URL_LEN: usize = 2048;
/// Longest description accepted, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 280;
/// Most event types one endpoint may list.
pub const MAX_EVENT_TYPES: usize = 32;
/// The Standard Webhooks prefix of a symmetric secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// How long a rotated-out secret keeps signing when the request names no overlap,
/// in seconds (24 hours).
pub const DEFAULT_ROTATION_OVERLAP_SECS: u64 = 24 * 3600;
/// Longest overlap a rotation may ask for, in seconds (7 days).
pub const MAX_ROTATION_OVERLAP_SECS: u64 = 7 * 24 * 3600;
/// How many bytes of a response body an attempt keeps.
pub const RESPONSE_START_BYTES: usize = 256;

/// One signing secret of an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecret {
    /// `whsec_<base64>`: the Standard Webhooks symmetric key.
    pub secret: String,
    /// When this secret stops signing (set on the old secret by a rotation);
    /// `None`: signs until rotated.
    #[serde(default, with = "crate::timestamp::option")]
    pub expires_at: Option<OffsetDateTime>,
}

/// A registered endpoint as stored in the `HP_WEBHOOKS` bucket (secrets included;
/// never served: see [`WebhookEndpoint::view`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEndpoint {
    /// The endpoint's id.
    pub id: WebhookId,
    /// The organisation that registered it; only its events are delivered.
    pub org: OrgId,
    /// Where events are POSTed (checked by [`check_url`]).
    pub url: String,
    /// The event names wanted (`approval-requested`, ...); empty: every event.
    pub event_types: Vec<String>,
    /// Free text for people.
    pub description: String,
    /// Newest first; the first never expires.
    pub secrets: Vec<WebhookSecret>,
    /// When it was registered.
    #[serde(with = "crate::timestamp")]
    pub created_at: OffsetDateTime,
    /// When it was disabled after too many failed attempts in a row; `None`: enabled.
    #[serde(default, with = "crate::timestamp::option")]
    pub disabled_at: Option<OffsetDateTime>,
    /// Failed attempts since the last successful one.
    #[serde(default)]
    pub consecutive_failures: u32,
}

impl WebhookEndpoint {
    /// Whether this endpoint wants events named `name`.
    pub fn wants(&self, name: &str) -> bool {
        self.event_types.is_empty() || self.event_types.iter().any(|t| t == name)
    }

    /// The secrets that sign at `now`: the current one and any rotated-out one whose
    /// overlap has not ended.
    pub fn signing_secrets(&self, now: OffsetDateTime) -> Vec<&str> {
        self.secrets
            .iter()
            .filter(|s| s.expires_at.is_none_or(|e| e > now))
            .map(|s| s.secret.as_str())
            .collect()
    }

    /// The public view (no secret).
    pub fn view(&self) -> WebhookView {
        WebhookView {
            id: self.id.clone(),
            url: self.url.clone(),
            event_types: self.event_types.clone(),
            description: self.description.clone(),
            created_at: self.created_at,
            disabled: self.disabled_at.is_some(),
            disabled_at: self.disabled_at,
            consecutive_failures: self.consecutive_failures,
            previous_secret_expires_at: self
                .secrets
                .iter()
                .skip(1)
                .filter_map(|s| s.expires_at)
                .max(),
        }
    }
}

/// A webhook endpoint as the API shows it: everything but the secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    /// The endpoint's id (`wh_<32 hex>`).
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub id: WebhookId,
    /// Where events are POSTed.
    pub url: String,
    /// Event names delivered (`approval-requested`, `question-asked`, ...); empty:
    /// every event of the organisation.
    pub event_types: Vec<String>,
    /// Free text for people.
    pub description: String,
    /// When it was registered (RFC 3339, UTC, milliseconds).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub created_at: OffsetDateTime,
    /// True once too many attempts in a row failed: nothing is sent until it is
    /// enabled again; its queued deliveries are kept.
    pub disabled: bool,
    /// When it was disabled.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub disabled_at: Option<OffsetDateTime>,
    /// Failed attempts since the last successful one.
    pub consecutive_failures: u32,
    /// After a rotation: when the previous secret stops signing.
    #[serde(
        default,
        with = "crate::timestamp::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Rfc3339>"))]
    pub previous_secret_expires_at: Option<OffsetDateTime>,
}

/// `POST /v1/webhooks`: register an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhook {
    /// `https://…` (plain `http://` only to a loopback host when Holdpoint runs in
    /// local mode); at most 2048 bytes; no user or password; no fragment.
    pub url: String,
    /// Event names to deliver (see the README's event list); absent or empty: all.
    #[serde(default)]
    pub event_types: Vec<String>,
    /// Free text for people, at most 280 characters.
    #[serde(default)]
    pub description: String,
}

/// `POST /v1/webhooks/{id}/rotate`: make a new secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RotateWebhook {
    /// How long the previous secret keeps signing beside the new one, in seconds
    /// (default 86400, at most 604800; 0: it stops at once).
    #[serde(default, deserialize_with = "crate::integral::opt_u64")]
    pub overlap_secs: Option<u64>,
}

/// An endpoint with its new secret: the answer to a registration or a rotation, the
/// only time the secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookWithSecret {
    /// The endpoint as `GET /v1/webhooks/{id}` shows it.
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// The Standard Webhooks signing secret (`whsec_<base64>`): verify each
    /// delivery's `webhook-signature` with it. Shown once.
    pub secret: String,
}

/// `GET /v1/webhooks`: the organisation's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookList {
    /// Every endpoint of the caller's organisation, oldest registration first.
    pub items: Vec<WebhookView>,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AttemptResult {
    /// The receiver answered 2xx: delivered, never sent again.
    Delivered,
    /// Another status (a redirect included: never followed), a timeout, or a
    /// connection failure: retried on the schedule.
    Failed,
    /// Refused before sending: the host resolved to an address that is not allowed.
    Refused,
}

/// One delivery attempt to an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookAttempt {
    /// The webhook endpoint (`wh_` and 32 hex digits).
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub webhook_id: WebhookId,
    /// The CloudEvent's id, sent as `webhook-id` (receivers deduplicate on it).
    pub event_id: String,
    /// The CloudEvent's `type` (`dev.holdpoint.<name>`).
    pub event_type: String,
    /// 1 for the first attempt at this event, then 2, 3...
    pub attempt: u32,
    /// When the attempt started (RFC 3339, UTC, milliseconds).
    #[serde(with = "crate::timestamp")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Rfc3339"))]
    pub at: OffsetDateTime,
    /// How it ended.
    pub result: AttemptResult,
    /// The HTTP status the receiver answered; absent when none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// From sending the request to the end of the (capped) response, in milliseconds.
    pub latency_ms: u64,
    /// Why it failed when no status says it (timeout, connection refused, address
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The first 256 bytes of the response body, as text (invalid UTF-8 replaced).
    pub response_start: String,
}

/// `GET /v1/webhooks/{id}/attempts`: the endpoint's latest attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookAttempts {
    /// Oldest first; Holdpoint keeps the last 200 per endpoint for 7 days.
    pub items: Vec<WebhookAttempt>,
}

/// `POST /v1/webhooks/{id}/test`: what was queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TestQueued {
    /// The test CloudEvent's id (`type` `dev.holdpoint.webhook-test`); its attempts
    /// appear under `/attempts` with this `eventId`.
    pub event_id: String,
}

/// A Standard Webhooks secret from 32 random bytes: `whsec_<standard base64>`.
pub fn secret_from_bytes(bytes: &[u8; 32]) -> String {
    use base64::Engine as _;
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn refused(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::WebhookUrlRefused, message)
}

/// Checks a webhook URL and returns it parsed.
///
/// `local` is Holdpoint's local mode (`holdpoint up` on one machine): there plain
/// `http` is allowed to a loopback host (`localhost`, `127.0.0.0/8`, `::1`) and
/// literal loopback or private addresses are accepted.
///
/// # Errors
/// `400 NRY-0040` when the URL does not parse, is longer than [`MAX_URL_LEN`], is
/// not `https` (or local `http` to loopback), carries a user, password or fragment,
/// or (outside local mode) names a literal address [`address_allowed`] refuses.
pub fn check_url(raw: &str, local: bool) -> Result<url::Url, Rejection> {
    if raw.len() > MAX_URL_LEN {
        return Err(refused(format!("url is longer than {MAX_URL_LEN} bytes")));
    }
    // A URL parser drops TAB, CR and LF and encodes the rest, so a URL holding a
    // control character would be stored as sent and called as something else (a
    // header split, a changed path). Refused outright, as in every other text field.
    if let Some(c) = raw.chars().find(|c| c.is_control()) {
        return Err(refused(format!(
            "url holds the control character U+{:04X}; percent-encode it or remove it",
            u32::from(c)
        )));
    }
    if raw.trim() != raw || raw.is_empty() {
        return Err(refused("url is empty or has leading or trailing spaces"));
    }
    let url = url::Url::parse(raw).map_err(|e| refused(format!("url does not parse: {e}")))?;
    // The host as the parser decoded it (`%0a` in a host is a line feed).
    if url
        .host_str()
        .is_some_and(|h| h.chars().any(|c| c.is_control() || c.is_whitespace()))
        || percent_decoded_host(raw).is_some_and(|h| h.iter().any(|b| b.is_ascii_control()))
    {
        return Err(refused("url's host holds a control character"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refused("url may not carry a user or password"));
    }
    if url.fragment().is_some() {
        return Err(refused("url may not carry a fragment"));
    }
    let host = url.host().ok_or_else(|| refused("url has no host"))?;
    let literal: Option<IpAddr> = match &host {
        url::Host::Ipv4(a) => Some(IpAddr::V4(*a)),
        url::Host::Ipv6(a) => Some(IpAddr::V6(*a)),
        url::Host::Domain(_) => None,
    };
    let loopback_host = match &host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        _ => literal.is_some_and(|ip| ip.is_loopback()),
    };
    match url.scheme() {
        "https" => {}
        "http" if local && loopback_host => {}
        "http" if local => {
            return Err(refused(
                "plain http is allowed only to a loopback host (localhost, 127.0.0.1, ::1)",
            ));
        }
        "http" => {
            return Err(refused(
                "url must be https (plain http only to loopback in local mode)",
            ));
        }
        other => return Err(refused(format!("url scheme {other} is not https"))),
    }
    if let Some(ip) = literal
        && !address_allowed(ip, local)
    {
        return Err(refused(format!(
            "{ip} is a private, loopback, link-local or reserved address"
        )));
    }
    Ok(url)
}

/// The host part of a raw URL (between `//` and the next `/`, `?` or `#`, after any
/// `user@`), percent-decoded; `None` when the URL has no authority.
fn percent_decoded_host(raw: &str) -> Option<Vec<u8>> {
    let (_, rest) = raw.split_once("//")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    Some(percent_encoding::percent_decode_str(host).collect())
}

/// Whether a delivery may connect to `ip`. Outside local mode only public unicast
/// addresses are: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7),
/// link-local (169.254/16, fe80::/10), shared (100.64/10), unspecified, multicast,
/// broadcast, documentation and benchmarking ranges are refused, and an IPv6 address
/// mapping an IPv4 one is judged as that IPv4 address. In local mode everything is.
pub fn address_allowed(ip: IpAddr, local: bool) -> bool {
    if local {
        return true;
    }
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            !(a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_multicast()
                || a.is_broadcast()
                || a.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || o[0] >= 240)
        }
        IpAddr::V6(a) => {
            if let Some(v4) = a.to_ipv4_mapped() {
                return address_allowed(IpAddr::V4(v4), false);
            }
            let s = a.segments();
            !(a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

/// Checks a registration's event types and description.
///
/// # Errors
/// `400 NRY-0041` for a name that is not an event Holdpoint emits, `400 NRY-0001`
/// for too many types or a description over [`MAX_DESCRIPTION_LEN`] characters.
pub fn check_registration(req: &CreateWebhook) -> Result<(), Rejection> {
    if req.event_types.len() > MAX_EVENT_TYPES {
        return Err(Rejection::new(
            ErrorCode::InvalidRequest,
            format!("eventTypes lists at most {MAX_EVENT_TYPES} names"),
        ));
    }
    if let Some(bad) = req
        .event_types
        .iter()
        .find(|t| !EVENT_NAMES.contains(&t.as_str()))
    {
        let shown: String = bad.chars().take(64).collect();
        return Err(Rejection::new(
            ErrorCode::UnknownEventType,
            format!(
                "{shown:?} is not an event type; the types are {}",
                EVENT_NAMES.join(", ")
            ),
        ));
    }
    if req.description.chars().count() > MAX_DESCRIPTION_LEN {
        return Err(Rejection::new(
            ErrorCode::InvalidRequest,
            format!("description is longer than {MAX_DESCRIPTION_LEN} characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(check_url("https://hooks.example.com/x", false).is_ok());
        assert!(check_url("http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url("http://localhost:9/x", true).is_ok());
        for (bad, local) in [
            ("http://127.0.0.1:9/x", false),
            ("http://hooks.example.com/x", true),
            ("https://10.1.2.3/x", false),
            ("https://[::1]/x", false),
            ("https://169.254.169.254/latest", false),
            ("https://[::ffff:192.168.0.1]/", false),
            ("https://u:p@hooks.example.com/", false),
            ("https://hooks.example.com/#f", false),
            ("ftp://hooks.example.com/", false),
            ("not a url", false),
            ("https://hooks.example.com/a\0b", false),
            ("https://hooks.example.com/a\r\nX-Injected: 1", false),
            ("https://hooks.example.com/\u{1b}[31m", false),
            ("https://hooks.example.com/\u{7f}", false),
            ("https://hooks.\texample.com/", false),
            ("https://hooks.example.com/\u{85}", false),
            ("https://hooks%0a.example.com/", false),
            ("https://hooks%00.example.com/", false),
            ("https://hooks%1b.example.com/", false),
            (" https://hooks.example.com/", false),
            ("", false),
        ] {
            let r = check_url(bad, local).expect_err(bad);
            assert_eq!(r.code, ErrorCode::WebhookUrlRefused, "{bad}");
        }
    }

    #[test]
    fn addresses() {
        for ok in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"] {
            assert!(address_allowed(ok.parse().expect("ip"), false), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!address_allowed(bad.parse().expect("ip"), false), "{bad}");
            assert!(address_allowed(bad.parse().expect("ip"), true), "{bad}");
        }
    }

    #[test]
    fn registrations() {
        let mut r = CreateWebhook {
            url: "https://x.example".into(),
            event_types: vec!["approval-requested".into()],
            description: String::new(),
        };
        assert!(check_registration(&r).is_ok());
        r.event_types.push("nope".into());
        assert_eq!(
            check_registration(&r).expect_err("unknown").code,
            ErrorCode::UnknownEventType
        );
    }

    #[test]
    fn secrets_rotate_with_overlap() {
        let now = OffsetDateTime::now_utc();
        let e = WebhookEndpoint {
            id: WebhookId::parse("wh_1").expect("id"),
            org: OrgId::parse("acme").expect("org"),
            url: "https://x.example".into(),
            event_types: vec![],
            description: String::new(),
            secrets: vec![
                WebhookSecret {
                    secret: "new".into(),
                    expires_at: None,
                },
                WebhookSecret {
                    secret: "old".into(),
                    expires_at: Some(now + time::Duration::seconds(60)),
                },
                WebhookSecret {
                    secret: "gone".into(),
                    expires_at: Some(now - time::Duration::seconds(1)),
                },
            ],
            created_at: now,
            disabled_at: None,
            consecutive_failures: 0,
        };
        assert_eq!(e.signing_secrets(now), vec!["new", "old"]);
        assert!(e.wants("anything"));
        assert!(secret_from_bytes(&[0; 32]).starts_with("whsec_"));
    }
}

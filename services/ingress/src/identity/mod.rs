//! Who is calling. Every API operation takes a [`Caller`]; without a valid one the
//! answer is 401 `NRY-0011`, with the same body whatever failed (README
//! "Identity": enforced on every transport, no exempt operation).
//!
//! In order:
//! 1. An `Authorization: Bearer <JWT>` header (exactly one) is verified by the
//!    [`Verifier`], on TCP and on the Unix socket alike. A bad
//!    token is 401, with no fallback to anything below.
//! 2. No token, on the Unix socket, from the OS user that runs Holdpoint: that
//!    machine's user. The person is the user's name, the organisation the configured
//!    local one ([`LocalIdentity`]). Another uid without a token is 401.
//! 3. No token, with the insecure development identity switched on: the
//!    `X-Holdpoint-Org` and `X-Holdpoint-Person` headers, and optionally
//!    `X-Holdpoint-Groups` (local development only).
//! 4. Otherwise 401.
//!
//! - [`caller`]: the [`Caller`] (a leaf).
//! - [`jwt`]: bearer token verification against the issuer's key set.
//! - [`socket`]: the Unix socket's local-user rule and the peer's credentials.

pub mod caller;
pub mod jwt;
pub mod socket;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use holdpoint_domain::{OrgId, PersonId};
use tracing::{debug, warn};

pub use caller::Caller;
pub use jwt::Verifier;
pub use socket::{LocalIdentity, SocketPeer};

use crate::error::ApiError;

/// Header naming the organisation in the development identity.
pub const DEV_ORG_HEADER: &str = "x-holdpoint-org";
/// Header naming the person in the development identity.
pub const DEV_PERSON_HEADER: &str = "x-holdpoint-person";
/// Header naming the person's groups in the development identity, separated by
/// commas (names that are not valid group names are left out).
pub const DEV_GROUPS_HEADER: &str = "x-holdpoint-groups";

/// How the ingress identifies callers.
#[derive(Debug, Clone, Default)]
pub struct IdentityMode {
    /// JWT verification (bearer tokens); without it every token is refused.
    pub jwt: Option<Verifier>,
    /// The Unix socket's local user rule; `None` switches it off.
    pub local: Option<LocalIdentity>,
    /// INSECURE, local development only: trust `X-Holdpoint-Org` / `X-Holdpoint-Person`.
    pub insecure_dev_headers: bool,
}

impl IdentityMode {
    /// Only the insecure development headers.
    pub fn insecure_dev_headers() -> Self {
        IdentityMode {
            insecure_dev_headers: true,
            ..IdentityMode::default()
        }
    }
}

fn single(headers: &HeaderMap, name: &str) -> Result<Option<String>, ()> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v.to_str().map(|s| Some(s.to_owned())).map_err(|_| ()),
        _ => Err(()),
    }
}

/// The token of `Authorization: Bearer <token>`; `Err` for anything else.
fn bearer(value: &str) -> Result<&str, ()> {
    let (scheme, token) = value.trim().split_once(' ').ok_or(())?;
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' ') {
        Ok(token)
    } else {
        Err(())
    }
}

/// Identity comes first: the layer every API route runs before its handler's
/// extractors, so an anonymous request is `401 NRY-0011` whatever else is wrong
/// with it (a bad path id, a bad body). Only `public` paths (the agent card) pass
/// without a caller. The caller found is put in the request's extensions, where
/// the [`Caller`] extractor takes it. (The router's answers for an unknown path or
/// method call [`resolve`] first as well.)
pub async fn require(
    State((mode, public)): State<(IdentityMode, &'static [&'static str])>,
    req: Request,
    next: Next,
) -> Response {
    if public.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    match resolve(&parts, &mode).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => e.into_response(),
    }
}

/// The caller [`require`] found. Outside that layer there is none: `401`.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(ApiError::unauthenticated)
    }
}

/// Who sent `parts` (see the module docs for the order of the rules).
///
/// # Errors
/// `401 NRY-0011`, the same body whatever failed; the reason goes to the log.
pub async fn resolve(parts: &Parts, mode: &IdentityMode) -> Result<Caller, ApiError> {
    let authorization = single(&parts.headers, header::AUTHORIZATION.as_str()).map_err(|()| {
        warn!(reason = "several or non-ASCII Authorization headers", "401");
        ApiError::unauthenticated()
    })?;
    if let Some(value) = authorization {
        let token = bearer(&value).map_err(|()| {
            warn!(reason = "Authorization is not a Bearer token", "401");
            ApiError::unauthenticated()
        })?;
        let Some(verifier) = &mode.jwt else {
            warn!(
                reason = "a token was sent but no issuer is configured",
                "401"
            );
            return Err(ApiError::unauthenticated());
        };
        return verifier.verify(token).await.map_err(|e| {
            warn!(reason = %e, "401");
            ApiError::unauthenticated()
        });
    }
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketPeer>>()
        .map(|c| c.0);
    if let Some(peer) = peer {
        // On the socket: only the machine's own user gets in without a token.
        return match (&mode.local, peer.uid) {
            (Some(local), Some(uid)) if uid == local.uid => {
                debug!(uid, "local socket user");
                Ok(Caller::new(local.org.clone(), local.person.clone()))
            }
            _ => {
                warn!(uid = ?peer.uid, reason = "socket peer without token is not the service user", "401");
                Err(ApiError::unauthenticated())
            }
        };
    }
    if mode.insecure_dev_headers {
        let org = single(&parts.headers, DEV_ORG_HEADER)
            .ok()
            .flatten()
            .and_then(|s| OrgId::parse(s).ok());
        let person = single(&parts.headers, DEV_PERSON_HEADER)
            .ok()
            .flatten()
            .and_then(|s| PersonId::parse(s).ok());
        if let (Some(org), Some(person)) = (org, person) {
            let groups = single(&parts.headers, DEV_GROUPS_HEADER)
                .ok()
                .flatten()
                .map(|v| jwt::groups_from(v.split(',').map(str::to_owned)))
                .unwrap_or_default();
            return Ok(Caller {
                org,
                person,
                groups,
            });
        }
    }
    warn!(reason = "no credentials", "401");
    Err(ApiError::unauthenticated())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer("Bearer abc"), Ok("abc"));
        assert_eq!(bearer("bearer abc"), Ok("abc"));
        assert_eq!(bearer("Basic abc"), Err(()));
        assert_eq!(bearer("Bearer"), Err(()));
        assert_eq!(bearer("Bearer a b"), Err(()));
        assert_eq!(bearer("Bearer  "), Err(()));
    }
}

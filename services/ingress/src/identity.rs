//! Who is calling. Every API operation takes a [`Caller`]; without a valid one the
//! answer is 401 `NRY-0011`, with the same body whatever failed (seed 003
//! "Authorization": enforced on every transport, no exempt operation).
//!
//! In order:
//! 1. An `Authorization: Bearer <JWT>` header (exactly one) is verified by the
//!    [`Verifier`](crate::auth::Verifier), on TCP and on the Unix socket alike. A bad
//!    token is 401, with no fallback to anything below.
//! 2. No token, on the Unix socket, from the OS user that runs Holdpoint: that
//!    machine's user. The person is the user's name, the organisation the configured
//!    local one ([`LocalIdentity`]). Another uid without a token is 401.
//! 3. No token, with the insecure development identity switched on: the
//!    `X-Holdpoint-Org` and `X-Holdpoint-Person` headers (local development only).
//! 4. Otherwise 401.

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::serve::IncomingStream;
use holdpoint_domain::{ErrorCode, OrgId, PersonId};
use tokio::net::UnixListener;
use tracing::{debug, warn};

use crate::AppState;
use crate::api::ApiError;
use crate::auth::Verifier;

/// Header naming the organisation in the development identity.
pub const DEV_ORG_HEADER: &str = "x-holdpoint-org";
/// Header naming the person in the development identity.
pub const DEV_PERSON_HEADER: &str = "x-holdpoint-person";

/// The machine's own user on the Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalIdentity {
    /// The uid that runs Holdpoint; only it gets in without a token.
    pub uid: u32,
    /// That user's name (the person).
    pub person: PersonId,
    /// The organisation local requests act in.
    pub org: OrgId,
}

impl LocalIdentity {
    /// The identity of the effective user running this process, in `org`.
    ///
    /// # Errors
    /// When the user has no name or it is not a valid person id.
    pub fn current(org: OrgId) -> Result<Self, String> {
        let uid = nix::unistd::geteuid();
        let name = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| format!("uid-{uid}"));
        Ok(LocalIdentity {
            uid: uid.as_raw(),
            person: PersonId::parse(name).map_err(|e| e.to_string())?,
            org,
        })
    }
}

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

/// The peer of a Unix socket connection, from the kernel (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketPeer {
    /// The peer's uid, if the kernel told it.
    pub uid: Option<u32>,
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, UnixListener>> for SocketPeer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        SocketPeer {
            uid: stream.io().peer_cred().ok().map(|c| c.uid()),
        }
    }
}

/// The authenticated caller: the person and the organisation every read and write
/// is scoped by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organisation (tenant).
    pub org: OrgId,
    /// The person.
    pub person: PersonId,
}

fn unauthenticated() -> ApiError {
    ApiError::new(ErrorCode::Unauthenticated, "a valid identity is required")
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

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let mode = &state.cfg.identity;
        let authorization =
            single(&parts.headers, header::AUTHORIZATION.as_str()).map_err(|()| {
                warn!(reason = "several or non-ASCII Authorization headers", "401");
                unauthenticated()
            })?;
        if let Some(value) = authorization {
            let token = bearer(&value).map_err(|()| {
                warn!(reason = "Authorization is not a Bearer token", "401");
                unauthenticated()
            })?;
            let Some(verifier) = &mode.jwt else {
                warn!(
                    reason = "a token was sent but no issuer is configured",
                    "401"
                );
                return Err(unauthenticated());
            };
            return verifier.verify(token).await.map_err(|e| {
                warn!(reason = %e, "401");
                unauthenticated()
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
                    Ok(Caller {
                        org: local.org.clone(),
                        person: local.person.clone(),
                    })
                }
                _ => {
                    warn!(uid = ?peer.uid, reason = "socket peer without token is not the service user", "401");
                    Err(unauthenticated())
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
                return Ok(Caller { org, person });
            }
        }
        warn!(reason = "no credentials", "401");
        Err(unauthenticated())
    }
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

//! Who is calling. Every API operation takes a [`Caller`]; without one the answer is
//! 401 `NRY-0011` (seed 003 "Authorization").
//!
//! Until JWT verification lands, the only way to get a caller is the development
//! identity: the `X-Holdpoint-Org` and `X-Holdpoint-Person` headers, honoured only
//! when the ingress runs with `--insecure-dev-identity`.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use holdpoint_domain::{ErrorCode, OrgId, PersonId};

use crate::AppState;
use crate::api::ApiError;

/// Header naming the organisation in the development identity.
pub const DEV_ORG_HEADER: &str = "x-holdpoint-org";
/// Header naming the person in the development identity.
pub const DEV_PERSON_HEADER: &str = "x-holdpoint-person";

/// How the ingress identifies callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityMode {
    /// Nobody is identified: every API call is 401.
    Refuse,
    /// Insecure, for local development only: trust the `X-Holdpoint-Org` and
    /// `X-Holdpoint-Person` headers.
    InsecureDevHeaders,
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

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let unauthenticated =
            || ApiError::new(ErrorCode::Unauthenticated, "a valid identity is required");
        match state.cfg.identity {
            IdentityMode::Refuse => Err(unauthenticated()),
            IdentityMode::InsecureDevHeaders => {
                let one = |name: &str| {
                    let mut values = parts.headers.get_all(name).iter();
                    match (values.next(), values.next()) {
                        (Some(v), None) => v.to_str().ok().map(str::to_owned),
                        _ => None,
                    }
                };
                let org = one(DEV_ORG_HEADER).and_then(|s| OrgId::parse(s).ok());
                let person = one(DEV_PERSON_HEADER).and_then(|s| PersonId::parse(s).ok());
                match (org, person) {
                    (Some(org), Some(person)) => Ok(Caller { org, person }),
                    _ => Err(unauthenticated()),
                }
            }
        }
    }
}

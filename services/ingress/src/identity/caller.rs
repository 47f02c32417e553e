//! The authenticated caller, a leaf both the verifiers and the extractor use.

use holdpoint_domain::{GroupName, OrgId, PersonId};

/// The authenticated caller: the person and the organisation every read and write
/// is scoped by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organisation (tenant).
    pub org: OrgId,
    /// The person: a verified JWT `sub`, the local OS user, or the development
    /// header (1 to 256 characters, no control characters).
    pub person: PersonId,
    /// The person's groups: the configured groups claim of a token
    /// ([`crate::identity::jwt::AuthConfig::groups_claim`]), or the development
    /// header `X-Holdpoint-Groups`; none for the local user. What an interaction's
    /// group assignees match (README "Assignees").
    pub groups: Vec<GroupName>,
}

impl Caller {
    /// A caller with no groups.
    pub fn new(org: OrgId, person: PersonId) -> Self {
        Caller {
            org,
            person,
            groups: Vec::new(),
        }
    }
}

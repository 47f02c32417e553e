//! The authenticated caller, a leaf both the verifiers and the extractor use.

use holdpoint_domain::{OrgId, PersonId};

/// The authenticated caller: the person and the organisation every read and write
/// is scoped by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organisation (tenant).
    pub org: OrgId,
    /// The person: a verified JWT `sub`, the local OS user, or the development
    /// header (1 to 256 characters, no control characters).
    pub person: PersonId,
}

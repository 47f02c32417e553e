//! Validated identifiers and their encoding into NATS subject tokens and KV keys.
//!
//! Every id that reaches a subject (`hp.cmd.<org>.…`, `hp.evt.<org>.<task>.…`) or a
//! KV key (`<org>.<interactionId>`) goes through [`subject_token`], so no input can
//! inject `.`, `*`, `>` or whitespace, or address another organisation
//! (README "NATS topology").

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;
/// Longest person (`sub`) accepted, in characters.
pub const MAX_PERSON_LEN: usize = 256;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is the empty string.
    #[error("{what} is empty")]
    Empty {
        /// Which id (`orgId`, `taskId`, ...).
        what: &'static str,
    },
    /// The id is longer than the limit.
    #[error("{what} is longer than {max} bytes")]
    TooLong {
        /// Which id (`orgId`, `taskId`, ...).
        what: &'static str,
        /// The limit in bytes.
        max: usize,
    },
    /// The id holds whitespace, a control character or non-ASCII.
    #[error("{what} may only hold printable ASCII without spaces")]
    BadChar {
        /// Which id (`orgId`, `taskId`, ...).
        what: &'static str,
    },
}

fn check_ascii_id(what: &'static str, s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { what });
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong {
            what,
            max: MAX_ID_LEN,
        });
    }
    if !s.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(IdError::BadChar { what });
    }
    Ok(())
}

/// True when `s` is already a safe subject token: `[A-Za-z0-9][A-Za-z0-9_-]*`.
fn is_plain_token(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Encodes an id as one NATS subject token (also a valid KV key segment).
///
/// Ids made only of `[A-Za-z0-9_-]` that start with a letter or digit are used as
/// they are, so subjects stay readable; any other id becomes `_` followed by its
/// unpadded base64url bytes. Plain ids never start with `_`, so the mapping is
/// injective: two different ids never share a token. The result never holds `.`,
/// `*`, `>` or whitespace.
pub fn subject_token(id: &str) -> Cow<'_, str> {
    if is_plain_token(id) {
        Cow::Borrowed(id)
    } else {
        let mut out = String::from("_");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(id.as_bytes(), &mut out);
        Cow::Owned(out)
    }
}

/// Reverses [`subject_token`]: the id a token stands for, or `None` when the token is
/// not one [`subject_token`] could have produced.
pub fn decode_subject_token(token: &str) -> Option<String> {
    if is_plain_token(token) {
        return Some(token.to_owned());
    }
    let rest = token.strip_prefix('_')?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(rest)
        .ok()?;
    let s = String::from_utf8(bytes).ok()?;
    (subject_token(&s) == token).then_some(s)
}

macro_rules! ascii_id {
    ($(#[doc = $doc:literal])* $name:ident, $what:literal) => {
        $(#[doc = $doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates `s`: 1 to [`MAX_ID_LEN`] bytes of printable ASCII, no spaces.
            ///
            /// # Errors
            /// [`IdError`] naming the field when `s` does not fit.
            pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                check_ascii_id($what, &s)?;
                Ok(Self(s))
            }

            /// The id as given.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as one subject token (see [`subject_token`]).
            pub fn token(&self) -> Cow<'_, str> {
                subject_token(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        /// A string of 1 to [`MAX_ID_LEN`] printable ASCII characters, no spaces.
        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn schema_id() -> Cow<'static, str> {
                concat!(module_path!(), "::", stringify!($name)).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                crate::schema::ascii_id_schema(concat!($($doc, "\n",)* ""), MAX_ID_LEN)
            }
        }
    };
}

ascii_id!(
    /// An organisation (tenant). Comes from the caller's verified identity, never from
    /// a body.
    OrgId,
    "orgId"
);
ascii_id!(
    /// A runtime session (`NRY-0002` when it does not exist).
    SessionId,
    "sessionId"
);
ascii_id!(
    /// A lane of a session: the road a person's messages travel on.
    LaneId,
    "lane"
);
ascii_id!(
    /// An A2A task id (over A2A the answer is a message on the same `taskId`).
    TaskId,
    "taskId"
);
ascii_id!(
    /// A webhook endpoint (`wh_<32 hex>`, made by Holdpoint when it is registered).
    WebhookId,
    "webhookId"
);
ascii_id!(
    /// An A2A context id.
    ContextId,
    "contextId"
);
ascii_id!(
    /// An interaction: the effect id for an approval, a UUID for a question.
    InteractionId,
    "interactionId"
);
ascii_id!(
    /// The tool call an interaction blocks (its `tool-call-finished` names it).
    CallId,
    "callId"
);
ascii_id!(
    /// A lane message id (the question id when the message is an answer).
    MessageId,
    "messageId"
);
ascii_id!(
    /// The agent a runtime holds a call for (what an `agent`-scoped remembered rule
    /// matches on); named by the runtime when it opens the interaction.
    AgentId,
    "agent"
);
ascii_id!(
    /// A remembered approval rule (`rul_` and 32 hex digits, derived from the answer
    /// that wrote it; see `crate::policy`).
    RuleId,
    "ruleId"
);
ascii_id!(
    /// A group of people named by the caller's token (the configured groups claim,
    /// README "Assignees"): compared byte for byte, so `Ops`, `ops` and `ops ` are
    /// three different groups, and a name outside printable ASCII never matches.
    GroupName,
    "group"
);
ascii_id!(
    /// An answer's idempotency key: an A2A `messageId`, an `Idempotency-Key` header,
    /// or a digest of the answer.
    IdempotencyKey,
    "idempotencyKey"
);

/// The person who acts: a verified JWT `sub` or the local OS user.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PersonId(String);

impl PersonId {
    /// Validates `s`: 1 to [`MAX_PERSON_LEN`] characters, no control characters.
    ///
    /// # Errors
    /// [`IdError`] when `s` does not fit.
    pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
        let s = s.into();
        if s.is_empty() {
            return Err(IdError::Empty { what: "person" });
        }
        if s.chars().count() > MAX_PERSON_LEN {
            return Err(IdError::TooLong {
                what: "person",
                max: MAX_PERSON_LEN,
            });
        }
        if s.chars().any(char::is_control) {
            return Err(IdError::BadChar { what: "person" });
        }
        Ok(Self(s))
    }

    /// The person as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PersonId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(s)
    }
}

impl From<PersonId> for String {
    fn from(id: PersonId) -> String {
        id.0
    }
}

impl fmt::Display for PersonId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PersonId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PersonId({:?})", self.0)
    }
}

/// 1 to [`MAX_PERSON_LEN`] characters, no control characters.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for PersonId {
    fn schema_name() -> Cow<'static, str> {
        "PersonId".into()
    }

    fn schema_id() -> Cow<'static, str> {
        concat!(module_path!(), "::PersonId").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::person_schema(MAX_PERSON_LEN)
    }
}

/// A command's id: `cmd-` and 40 lower-case hex digits, derived from the command
/// ([`CommandEnvelope::command_id`](crate::CommandEnvelope::command_id)); its
/// `Nats-Msg-Id`, and the key of its transition in a record's outbox.
///
/// On the wire and in stored records it is the plain string. Reading one back
/// checks nothing (records written by any version keep loading); only Holdpoint
/// makes them.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommandId(String);

/// Pattern of a [`CommandId`]: `cmd-` and 40 lower-case hex digits.
pub const COMMAND_ID_PATTERN: &str = "^cmd-[0-9a-f]{40}$";

impl CommandId {
    /// The id whose digest is `d` (lower-case hex, at least 40 digits): `cmd-` and
    /// its first 40 digits.
    pub(crate) fn from_digest(d: &str) -> Self {
        Self(format!("cmd-{}", &d[..40]))
    }

    /// An id as given, for ids read back from elsewhere (a header, a test). It is
    /// not checked, like an id read from a record.
    pub fn from_raw(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Read-only: code that handled command ids as strings (logs, trimmed displays)
/// reads it as one.
impl std::ops::Deref for CommandId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for CommandId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for CommandId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for CommandId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CommandId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<CommandId> for String {
    fn from(id: CommandId) -> String {
        id.0
    }
}

impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommandId({:?})", self.0)
    }
}

/// `cmd-` and 40 lower-case hex digits.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for CommandId {
    fn schema_name() -> Cow<'static, str> {
        "CommandId".into()
    }

    fn schema_id() -> Cow<'static, str> {
        concat!(module_path!(), "::CommandId").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": COMMAND_ID_PATTERN,
            "description": "A command's id: `cmd-` and 40 lower-case hex digits, derived from the command; its `Nats-Msg-Id`.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_stay_readable() {
        assert_eq!(subject_token("acme-1_x"), "acme-1_x");
        assert_eq!(
            subject_token("6b9f6d2e-1c3a-4f5b-9d7e-2a8c4e6f0b1d"),
            "6b9f6d2e-1c3a-4f5b-9d7e-2a8c4e6f0b1d"
        );
    }

    #[test]
    fn hostile_ids_are_encoded_without_subject_metacharacters() {
        for raw in [
            "a.b", "*", ">", "a b", "_x", "t1.x", "../etc", "a/b", "%2F", "é",
        ] {
            let t = subject_token(raw);
            assert!(t.starts_with('_'), "{raw} -> {t}");
            assert!(
                t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{raw} -> {t}"
            );
        }
    }

    #[test]
    fn encoding_is_injective_on_the_edge_cases() {
        // A plain id can never collide with an encoded one: plain never starts with `_`.
        let encoded = subject_token("a.b").into_owned();
        assert_ne!(subject_token(&encoded), encoded);
        assert_ne!(subject_token("a.b"), subject_token("a_b"));
    }

    #[test]
    fn tokens_decode_back() {
        for raw in ["acme", "a.b", "t1.x y", "_x"] {
            let t = subject_token(raw).into_owned();
            assert_eq!(decode_subject_token(&t).as_deref(), Some(raw));
        }
        assert_eq!(decode_subject_token("_!!"), None);
        assert_eq!(decode_subject_token("a.b"), None);
    }

    #[test]
    fn ids_reject_bad_input() {
        assert!(OrgId::parse("").is_err());
        assert!(OrgId::parse("a b").is_err());
        assert!(OrgId::parse("a\0b").is_err());
        assert!(OrgId::parse("x".repeat(MAX_ID_LEN + 1)).is_err());
        assert!(OrgId::parse("x".repeat(MAX_ID_LEN)).is_ok());
        assert!(TaskId::parse("t1.abc").is_ok());
        assert!(PersonId::parse("ana@example.com").is_ok());
        assert!(PersonId::parse("a\nb").is_err());
    }

    #[test]
    fn ids_deserialize_through_validation() {
        let bad: Result<OrgId, _> = serde_json::from_str("\"a b\"");
        assert!(bad.is_err());
        let good: OrgId = serde_json::from_str("\"acme\"").expect("valid");
        assert_eq!(good.as_str(), "acme");
    }

    #[test]
    fn command_ids_are_plain_strings_on_the_wire() {
        // Records written before `CommandId` existed hold the same string.
        let old = "\"cmd-14e44bf2d662795cb83061c5024beab95506a411\"";
        let id: CommandId = serde_json::from_str(old).expect("old record");
        assert_eq!(id, "cmd-14e44bf2d662795cb83061c5024beab95506a411");
        assert_eq!(serde_json::to_string(&id).expect("encode"), old);
        assert_eq!(
            CommandId::from_digest(&crate::digest::digest(&["x"])).len(),
            44
        );
    }

    #[cfg(feature = "schema")]
    #[test]
    fn ids_say_string_with_pattern_and_length() {
        let s = schemars::schema_for!(OrgId);
        let v = s.as_value();
        assert_eq!(v["type"], "string");
        assert_eq!(v["minLength"], 1);
        assert_eq!(v["maxLength"], MAX_ID_LEN);
        assert_eq!(v["pattern"], crate::schema::ASCII_ID_PATTERN);
        let p = schemars::schema_for!(PersonId);
        assert_eq!(p.as_value()["maxLength"], MAX_PERSON_LEN);
    }
}

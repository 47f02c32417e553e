//! What a command achieved: its [`Outcome`], success ([`Accepted`]) or a
//! [`Rejection`]. The worker replies with it, stores it with the transition, and the
//! ingress turns it into an HTTP status and body.

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Rejection};
use crate::ids::CommandId;

/// What a command achieved, when it succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Accepted {
    /// A session or interaction was opened (or already was, with the same content).
    Opened,
    /// An answer resolved the interaction (blocking) or its turn was admitted
    /// (product).
    Resolved,
    /// An interaction or session was closed.
    Closed,
    /// A released call's result was recorded.
    Finished,
    /// A lane message was admitted and its turn started.
    Admitted,
    /// Nothing to do (e.g. a turn that already ended, a deadline that was moved
    /// before its schedule fired).
    Unchanged,
    /// A pending interaction's deadline was set, moved or cleared.
    Rescheduled,
    /// The deadline passed with no answer and decided the interaction.
    Expired,
    /// A pending interaction's assignees were changed.
    Reassigned,
    /// A person's approval was counted toward an approval that needs several
    /// people, and the call still waits for the rest (README "Two-person
    /// approvals"; REST answers `202`).
    #[serde(rename_all = "camelCase")]
    ApprovalCounted {
        /// Distinct approvals counted so far, this one included.
        given: u8,
        /// How many the hold needs.
        required: u8,
    },
}

/// The worker's reply for one command: HTTP status and body derive from it. Stored
/// with the resolution, so a retry with the same key gets the same outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The id of the command this answers (its `Nats-Msg-Id`).
    pub command_id: CommandId,
    /// Success or a rejection.
    pub result: Result<Accepted, Rejection>,
}

impl Outcome {
    /// The outcome of command `command_id` when it was accepted with `a`.
    pub fn ok(command_id: &CommandId, a: Accepted) -> Self {
        Self {
            command_id: command_id.clone(),
            result: Ok(a),
        }
    }

    /// True when this outcome is a decision, the answer every retry with the same
    /// idempotency key gets back; false for a provisional refusal that changed
    /// nothing and may not hold later ([`ErrorCode::is_provisional`]), which a
    /// retry has decided afresh.
    pub fn is_decision(&self) -> bool {
        !matches!(&self.result, Err(r) if r.code.is_provisional())
    }

    /// The outcome of command `command_id` when it was refused with `code` and a
    /// human-readable `message`.
    pub fn err(command_id: &CommandId, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            command_id: command_id.clone(),
            result: Err(Rejection::new(code, message)),
        }
    }
}

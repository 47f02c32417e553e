//! What a chaos run answers and how each answer went: the [`Target`]s (an
//! interaction to answer, with its path and bodies), the [`Job`]s (one answer with
//! its `Idempotency-Key`) and their [`JobResult`]s (every HTTP attempt, with its
//! timing). A leaf: [`crate::chaos`] produces these, [`crate::readers`] judges the
//! events against them; `chaos` re-exports them.

use std::time::Instant;

use serde_json::{Value, json};

/// What a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// An `ask_user` question on a blocking session (two questions).
    Question,
    /// An approval (a held tool call).
    Approval,
}

/// One interaction to answer.
#[derive(Debug, Clone)]
pub struct Target {
    /// Organisation.
    pub org: String,
    /// Interaction id.
    pub id: String,
    /// Kind.
    pub kind: TargetKind,
}

impl Target {
    /// The REST path that answers it.
    pub fn path(&self) -> String {
        match self.kind {
            TargetKind::Question => format!("/v1/questions/{}/answer", self.id),
            TargetKind::Approval => format!("/v1/interactions/{}/approve", self.id),
        }
    }

    /// A valid body; `variant` changes the answer.
    pub fn body(&self, variant: u64) -> Value {
        match self.kind {
            TargetKind::Question => json!({"answers": [
                {"options": [variant % 2]},
                {"options": [variant % 3], "text": format!("answer {variant}")}
            ]}),
            // One in four denies (the call then finishes as tool.denied).
            TargetKind::Approval => json!({"approved": variant % 4 != 3}),
        }
    }
}

/// One answer: a target, a key, a body. Its client retries it on `503` with the
/// same key and body.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index into the targets.
    pub target: usize,
    /// `Idempotency-Key`.
    pub key: String,
    /// Body.
    pub body: Value,
}

/// One HTTP request of a job.
#[derive(Debug, Clone)]
pub struct AttemptLog {
    /// When it was sent.
    pub sent: Instant,
    /// When its answer came (or the client gave up on it).
    pub done: Instant,
    /// Status (`0` when the client-side bound passed without an answer).
    pub status: u16,
    /// The error code of an error body.
    pub code: String,
    /// `Retry-After`, if any.
    pub retry_after: Option<String>,
}

/// How a job went.
#[derive(Debug, Clone)]
pub struct JobResult {
    /// The job.
    pub job: Job,
    /// Every request, in order.
    pub attempts: Vec<AttemptLog>,
}

impl JobResult {
    /// The last answer's status, if the job got one that was not `503`.
    pub fn final_status(&self) -> Option<u16> {
        self.attempts
            .last()
            .map(|a| a.status)
            .filter(|s| *s != 503 && *s != 0)
    }

    /// True when the job ended with a 2xx.
    pub fn succeeded(&self) -> bool {
        self.final_status().is_some_and(|s| (200..300).contains(&s))
    }
}

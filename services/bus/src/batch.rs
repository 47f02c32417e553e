//! Atomic batch publish (JetStream ADR-50, nats-server 2.12+, fixes up to 2.15.1):
//! several messages to **one** stream stored together or not at all, with the
//! compare-and-set of each record checked at the commit under the stream's lock.
//!
//! async-nats 0.51 has the headers and the error codes but no batch API; this
//! module is that API, and the one place that knows the protocol:
//!
//! - every message carries `Nats-Batch-Id: <id>` (at most 64 characters) and
//!   `Nats-Batch-Sequence: <n>` counting from 1; all but the last go out as plain
//!   publishes (the server answers a first message with a zero-byte ack that is not
//!   a PubAck, so none is asked for: a first message the server refuses makes the
//!   commit fail as incomplete instead);
//! - the last carries `Nats-Batch-Commit: 1` and is sent as a request; its reply is
//!   the batch's one PubAck, `{"stream":…,"seq":N,"batch":<id>,"count":C}`, whose
//!   `seq` is the last message's sequence. The batch's messages are stored at
//!   contiguous sequences, so message `i` (from 0) is at `N - C + 1 + i`
//!   ([`Committed::sequence_of`]);
//! - a record message carries `Nats-Expected-Last-Subject-Sequence` (0: the subject
//!   must hold nothing) and `Nats-Rollup: sub`, so the subject keeps its last
//!   version only, like a KV key. The server allows one expectation per subject per
//!   batch and refuses an expectation on a subject an earlier message of the batch
//!   wrote (10164), so [`AtomicBatch::record`] refuses a subject twice before
//!   anything is sent.
//!
//! What a failure means, and what the committing side does next, is
//! [`BatchError`] and [`next_step`]: the batch is all or nothing, so every failure
//! stored nothing, and resending a whole batch under a new id is always safe, since
//! its expectations turn a batch that did commit into a conflict rather than a
//! second copy.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::publish::PublishAck;
use async_nats::jetstream::response::Response;
use bytes::Bytes;

/// `Nats-Batch-Id`.
pub const BATCH_ID: &str = "Nats-Batch-Id";
/// `Nats-Batch-Sequence`.
pub const BATCH_SEQUENCE: &str = "Nats-Batch-Sequence";
/// `Nats-Batch-Commit`.
pub const BATCH_COMMIT: &str = "Nats-Batch-Commit";
/// `Nats-Expected-Last-Subject-Sequence`.
pub const EXPECTED_LAST_SUBJECT_SEQUENCE: &str = "Nats-Expected-Last-Subject-Sequence";
/// `Nats-Rollup`.
pub const ROLLUP: &str = "Nats-Rollup";
/// The server's default limit of messages in one batch (`jetstream { limits {
/// batch { max_msgs } } }` raises it).
pub const DEFAULT_MAX_MESSAGES: usize = 1_000;
/// Longest batch id the server accepts (10179 beyond).
pub const MAX_ID_LEN: usize = 64;

/// One message of a batch.
#[derive(Debug, Clone)]
pub struct BatchMessage {
    /// The subject, in the batch's stream.
    pub subject: String,
    /// Headers of the caller's own (`Nats-Msg-Id`, `Nats-TTL`, `Nats-Schedule`…);
    /// the batch headers are added when sent.
    pub headers: HeaderMap,
    /// The payload.
    pub payload: Bytes,
}

/// A batch being built: records first (each subject once, each with its
/// expectation), then effects, in the order they are to be stored.
#[derive(Debug, Clone, Default)]
pub struct AtomicBatch {
    messages: Vec<BatchMessage>,
    records: std::collections::HashSet<String>,
}

/// A batch that cannot be built; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The batch already writes this record subject: merge the two writes into one
    /// (the server refuses a second expectation on a subject the batch wrote).
    #[error("the batch already writes record {0}")]
    SubjectTwice(String),
}

impl AtomicBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the write of a record: stored on `subject` only if the subject's last
    /// message is still at `expected` (0: the subject holds nothing), replacing it
    /// (`Nats-Rollup: sub`).
    ///
    /// # Errors
    /// [`BuildError::SubjectTwice`] when the batch already writes `subject`.
    pub fn record(
        &mut self,
        subject: impl Into<String>,
        expected: u64,
        mut headers: HeaderMap,
        payload: Bytes,
    ) -> Result<&mut Self, BuildError> {
        let subject = subject.into();
        if !self.records.insert(subject.clone()) {
            return Err(BuildError::SubjectTwice(subject));
        }
        headers.insert(
            EXPECTED_LAST_SUBJECT_SEQUENCE,
            expected.to_string().as_str(),
        );
        headers.insert(ROLLUP, "sub");
        self.messages.push(BatchMessage {
            subject,
            headers,
            payload,
        });
        Ok(self)
    }

    /// Adds an effect: a message stored with the batch, unconditionally.
    pub fn effect(
        &mut self,
        subject: impl Into<String>,
        headers: HeaderMap,
        payload: Bytes,
    ) -> &mut Self {
        self.messages.push(BatchMessage {
            subject: subject.into(),
            headers,
            payload,
        });
        self
    }

    /// Appends every message of `other` after this batch's, so that two writers'
    /// batches commit as one (group commit). Nothing changes when it fails.
    ///
    /// # Errors
    /// [`BuildError::SubjectTwice`] when both batches write the same record
    /// subject: they cannot share a commit (commit them one after the other).
    pub fn append(&mut self, other: &AtomicBatch) -> Result<&mut Self, BuildError> {
        if let Some(twice) = other.records.iter().find(|s| self.records.contains(*s)) {
            return Err(BuildError::SubjectTwice(twice.clone()));
        }
        self.records.extend(other.records.iter().cloned());
        self.messages.extend(other.messages.iter().cloned());
        Ok(self)
    }

    /// Messages in the batch.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// True when the batch holds no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages, in order.
    pub fn messages(&self) -> &[BatchMessage] {
        &self.messages
    }
}

/// The PubAck of a committed batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The stream that stored it.
    pub stream: String,
    /// Sequence of the batch's last message.
    pub last: u64,
    /// Messages stored.
    pub count: u64,
}

impl Committed {
    /// Sequence at which the batch's message `index` (from 0, in the order added)
    /// was stored; `None` past the batch's end. A record's new sequence is what its
    /// next write expects.
    pub fn sequence_of(&self, index: usize) -> Option<u64> {
        let index = u64::try_from(index).ok()?;
        (index < self.count).then(|| self.last + 1 - self.count + index)
    }

    /// The PubAck a batch appended at message `offset` of this one, with `count`
    /// messages, would have had alone ([`AtomicBatch::append`]); `None` when that
    /// part is not inside this batch.
    pub fn part(&self, offset: usize, count: usize) -> Option<Committed> {
        let count_u = u64::try_from(count).ok()?;
        if count == 0 {
            return None;
        }
        let last = self.sequence_of(offset.checked_add(count - 1)?)?;
        Some(Committed {
            stream: self.stream.clone(),
            last,
            count: count_u,
        })
    }
}

/// Why a batch was not stored. Every variant stored nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// A record's expectation failed (10071, or 10164 for a subject the batch
    /// wrote twice): somebody else wrote it, or this writer's own earlier commit
    /// whose PubAck was lost did. Reload and decide again.
    #[error("a record of the batch changed since it was read: {0}")]
    Conflict(String),
    /// A message's `Nats-Msg-Id` is in the stream's duplicate window or twice in the
    /// batch (10201); the whole batch was refused. As for a conflict, look at the
    /// records: is the transition already there?
    #[error("the batch holds a message id the stream already has: {0}")]
    Duplicate(String),
    /// The server dropped the batch before its commit (10176): a leader change, the
    /// 10 s inactivity timeout, a first message refused without a reply, messages
    /// for another stream. Resend the whole batch under a new id.
    #[error("the server abandoned the batch: {0}")]
    Abandoned(String),
    /// The stream holds too many open batches (10210, status 429). Back off.
    #[error("too many batches in flight: {0}")]
    TooManyInflight(String),
    /// The PubAck did not come, or the connection broke: the batch may or may not
    /// have been committed. Resend it under a new id; the expectations make a
    /// committed one come back as [`BatchError::Conflict`].
    #[error("no answer to the commit: {0}")]
    Unanswered(String),
    /// The server refused the batch for good (atomic publish disabled on the
    /// stream, too many messages, an unsupported header, a bad id): retrying the
    /// same batch cannot help.
    #[error("the server refused the batch ({code}): {description}")]
    Refused {
        /// The JetStream error code.
        code: u64,
        /// The server's text.
        description: String,
    },
}

impl BatchError {
    /// Classifies the error reply to a commit.
    fn from_api(error: &async_nats::jetstream::Error) -> Self {
        let description = error.to_string();
        match error.error_code() {
            ErrorCode::STREAM_WRONG_LAST_SEQUENCE | ErrorCode(10164) => {
                BatchError::Conflict(description)
            }
            ErrorCode::ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE => {
                BatchError::Duplicate(description)
            }
            ErrorCode::ATOMIC_PUBLISH_INCOMPLETE_BATCH => BatchError::Abandoned(description),
            ErrorCode::ATOMIC_PUBLISH_TOO_MANY_INFLIGHT => BatchError::TooManyInflight(description),
            ErrorCode(code) => BatchError::Refused { code, description },
        }
    }
}

/// Sends `batch` under `id` on `client` and waits for the commit's PubAck.
///
/// The messages go out in order on the one connection (async-nats sends every
/// publish through the connection's single command channel), the last as a request
/// bounded by the client's request timeout.
///
/// # Errors
/// [`BatchError`]: every variant means nothing of the batch was stored, except
/// [`BatchError::Unanswered`], where it is not known. An empty batch, or an id
/// that is empty or longer than [`MAX_ID_LEN`], is [`BatchError::Refused`] before
/// anything is sent.
pub async fn commit(
    client: &async_nats::Client,
    id: &str,
    batch: &AtomicBatch,
) -> Result<Committed, BatchError> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(BatchError::Refused {
            code: ErrorCode::ATOMIC_PUBLISH_INVALID_BATCH_ID.0,
            description: format!("a batch id has 1 to {MAX_ID_LEN} characters"),
        });
    }
    let Some((last, rest)) = batch.messages.split_last() else {
        return Err(BatchError::Refused {
            code: ErrorCode::ATOMIC_PUBLISH_MISSING_SEQ.0,
            description: "an empty batch commits nothing".into(),
        });
    };
    for (i, m) in rest.iter().enumerate() {
        let headers = batch_headers(&m.headers, id, i + 1, false);
        client
            .publish_with_headers(m.subject.clone(), headers, m.payload.clone())
            .await
            .map_err(|e| BatchError::Unanswered(e.to_string()))?;
    }
    let headers = batch_headers(&last.headers, id, batch.messages.len(), true);
    let reply = client
        .request_with_headers(last.subject.clone(), headers, last.payload.clone())
        .await
        .map_err(|e| match e.kind() {
            // Nobody took the commit: the stream has no leader yet (or none at
            // all), so nothing of the batch was stored.
            async_nats::RequestErrorKind::NoResponders => {
                BatchError::Abandoned(format!("no stream leader answered for {}", last.subject))
            }
            _ => BatchError::Unanswered(e.to_string()),
        })?;
    match serde_json::from_slice::<Response<PublishAck>>(&reply.payload) {
        Ok(Response::Ok(ack)) => Ok(Committed {
            stream: ack.stream,
            last: ack.sequence,
            // An ack without a count is not a batch commit: the stream stored the
            // last message alone, which cannot happen on a stream that allows
            // atomic publish (the server refuses batch headers elsewhere).
            count: ack.batch_size.unwrap_or(1),
        }),
        Ok(Response::Err { error }) => Err(BatchError::from_api(&error)),
        Err(e) => Err(BatchError::Unanswered(format!(
            "the commit's reply is not a PubAck: {e}"
        ))),
    }
}

/// [`commit`], sent again under a new id (`<id>.<attempt>`) for as long as
/// [`next_step`] says resend or back off; every other step returns the error for the
/// caller to act on (reload, isolate, give up). `transitions` is how many
/// transitions the batch carries.
///
/// # Errors
/// The [`BatchError`] whose step is not a resend; an id longer than
/// [`MAX_ID_LEN`] less four characters is [`BatchError::Refused`] before anything
/// is sent.
pub async fn commit_resending(
    client: &async_nats::Client,
    id: &str,
    batch: &AtomicBatch,
    transitions: usize,
) -> Result<Committed, BatchError> {
    if id.len() > MAX_ID_LEN - 4 {
        return Err(BatchError::Refused {
            code: ErrorCode::ATOMIC_PUBLISH_INVALID_BATCH_ID.0,
            description: format!("a resent batch's id has 1 to {} characters", MAX_ID_LEN - 4),
        });
    }
    let mut attempt = 1;
    loop {
        let this = if attempt == 1 {
            id.to_owned()
        } else {
            format!("{id}.{attempt}")
        };
        let err = match commit(client, &this, batch).await {
            Ok(done) => return Ok(done),
            Err(e) => e,
        };
        match next_step(&err, attempt, transitions) {
            Step::Resend => {}
            Step::Backoff(wait) => tokio::time::sleep(wait).await,
            Step::Reload | Step::Isolate | Step::GiveUp => return Err(err),
        }
        attempt += 1;
    }
}

fn batch_headers(own: &HeaderMap, id: &str, sequence: usize, commit: bool) -> HeaderMap {
    let mut headers = own.clone();
    headers.insert(BATCH_ID, id);
    headers.insert(BATCH_SEQUENCE, sequence.to_string().as_str());
    if commit {
        headers.insert(BATCH_COMMIT, "1");
    }
    headers
}

/// What a committing side does after a failed attempt: the commit path's state
/// machine, kept pure so that each arm is unit-tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Reload the records the batch wrote and decide its commands again. A command
    /// whose transition the reloaded record already holds was committed by this
    /// writer's earlier attempt: it is done, with nothing to send again.
    Reload,
    /// Send the same messages again under a new batch id.
    Resend,
    /// Wait, then send the same messages again under a new batch id.
    Backoff(Duration),
    /// A group of several transitions failed on a conflict: commit them one batch
    /// per transition, so that the one that conflicts does not hold back the rest.
    Isolate,
    /// Stop: terminate the commands (a dead-letter event) or fail the start-up.
    GiveUp,
}

/// Most attempts of one batch before [`Step::GiveUp`].
pub const MAX_ATTEMPTS: u32 = 8;

/// The step after `error` on attempt `attempt` (1 for the first) of a batch that
/// carries `transitions` transitions.
///
/// - a conflict or duplicate on a group isolates it, on a single transition reloads;
/// - an abandoned or unanswered batch is resent at once, twice, then with backoff;
/// - too many in flight backs off (100 ms doubling, at most 3.2 s);
/// - a refusal gives up, as does any error past [`MAX_ATTEMPTS`].
pub fn next_step(error: &BatchError, attempt: u32, transitions: usize) -> Step {
    if attempt >= MAX_ATTEMPTS {
        return Step::GiveUp;
    }
    let backoff = || {
        let exp = attempt.saturating_sub(1).min(5);
        Duration::from_millis(100 << exp)
    };
    match error {
        BatchError::Conflict(_) | BatchError::Duplicate(_) if transitions > 1 => Step::Isolate,
        BatchError::Conflict(_) | BatchError::Duplicate(_) => Step::Reload,
        BatchError::Abandoned(_) | BatchError::Unanswered(_) if attempt < 3 => Step::Resend,
        BatchError::Abandoned(_) | BatchError::Unanswered(_) | BatchError::TooManyInflight(_) => {
            Step::Backoff(backoff())
        }
        BatchError::Refused { .. } => Step::GiveUp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_subject_is_written_once_per_batch() {
        let mut b = AtomicBatch::new();
        b.record("hps.rec.a", 0, HeaderMap::new(), Bytes::new())
            .expect("first write");
        b.effect("hps.fx.e1", HeaderMap::new(), Bytes::new());
        let err = b
            .record("hps.rec.a", 7, HeaderMap::new(), Bytes::new())
            .expect_err("second write of one subject");
        assert_eq!(err, BuildError::SubjectTwice("hps.rec.a".into()));
        assert_eq!(b.len(), 2, "the refused write added nothing");
        let rec = &b.messages()[0];
        assert_eq!(
            rec.headers
                .get(EXPECTED_LAST_SUBJECT_SEQUENCE)
                .map(|v| v.as_str()),
            Some("0")
        );
        assert_eq!(rec.headers.get(ROLLUP).map(|v| v.as_str()), Some("sub"));
        assert!(b.messages()[1].headers.get(ROLLUP).is_none());
    }

    #[test]
    fn sequences_of_a_committed_batch_are_contiguous() {
        let c = Committed {
            stream: "S".into(),
            last: 14,
            count: 4,
        };
        assert_eq!(c.sequence_of(0), Some(11));
        assert_eq!(c.sequence_of(3), Some(14));
        assert_eq!(c.sequence_of(4), None);
    }

    #[test]
    fn appended_batches_keep_their_records_once_and_their_sequences() {
        let mut a = AtomicBatch::new();
        a.record("$KV.S.a", 3, HeaderMap::new(), Bytes::new())
            .expect("a new subject");
        a.effect("hp.fx.evt.1", HeaderMap::new(), Bytes::new());
        let mut b = AtomicBatch::new();
        b.record("$KV.S.b", 0, HeaderMap::new(), Bytes::new())
            .expect("a new subject");
        let mut c = AtomicBatch::new();
        c.record("$KV.S.a", 9, HeaderMap::new(), Bytes::new())
            .expect("a new subject");
        let mut all = a.clone();
        all.append(&b).expect("no record in common");
        assert_eq!(all.len(), 3);
        let subjects: Vec<_> = all.messages().iter().map(|m| m.subject.as_str()).collect();
        assert_eq!(subjects, ["$KV.S.a", "hp.fx.evt.1", "$KV.S.b"]);
        // A record both write cannot share the commit, and nothing changes.
        assert_eq!(
            all.append(&c).expect_err("a record in common"),
            BuildError::SubjectTwice("$KV.S.a".into())
        );
        assert_eq!(all.len(), 3);
        // The merged PubAck, split back: b's record is the third message.
        let done = Committed {
            stream: "S".into(),
            last: 12,
            count: 3,
        };
        let a_part = done.part(0, 2).expect("inside");
        let b_part = done.part(2, 1).expect("inside");
        assert_eq!((a_part.last, a_part.count), (11, 2));
        assert_eq!(a_part.sequence_of(0), Some(10));
        assert_eq!(b_part.sequence_of(0), Some(12));
        assert_eq!(done.part(2, 2), None);
        assert_eq!(done.part(1, 0), None);
    }

    #[test]
    fn batch_headers_number_from_one_and_commit_only_the_last() {
        let mut own = HeaderMap::new();
        own.insert("Nats-Msg-Id", "e1");
        let mid = batch_headers(&own, "b1", 2, false);
        assert_eq!(mid.get(BATCH_SEQUENCE).map(|v| v.as_str()), Some("2"));
        assert!(mid.get(BATCH_COMMIT).is_none());
        assert_eq!(mid.get("Nats-Msg-Id").map(|v| v.as_str()), Some("e1"));
        let last = batch_headers(&own, "b1", 3, true);
        assert_eq!(last.get(BATCH_COMMIT).map(|v| v.as_str()), Some("1"));
        assert_eq!(last.get(BATCH_ID).map(|v| v.as_str()), Some("b1"));
    }

    #[test]
    fn each_failure_has_its_step() {
        let conflict = BatchError::Conflict("wrong last sequence: 3".into());
        let dup = BatchError::Duplicate("dup".into());
        let gone = BatchError::Abandoned("incomplete".into());
        let silent = BatchError::Unanswered("timed out".into());
        let busy = BatchError::TooManyInflight("429".into());
        let refused = BatchError::Refused {
            code: 10174,
            description: "disabled".into(),
        };
        assert_eq!(next_step(&conflict, 1, 1), Step::Reload);
        assert_eq!(next_step(&conflict, 1, 32), Step::Isolate);
        assert_eq!(next_step(&dup, 1, 1), Step::Reload);
        assert_eq!(next_step(&dup, 2, 5), Step::Isolate);
        assert_eq!(next_step(&gone, 1, 32), Step::Resend);
        assert_eq!(next_step(&silent, 2, 1), Step::Resend);
        assert_eq!(
            next_step(&silent, 3, 1),
            Step::Backoff(Duration::from_millis(400))
        );
        assert_eq!(
            next_step(&busy, 1, 1),
            Step::Backoff(Duration::from_millis(100))
        );
        assert_eq!(
            next_step(&busy, 7, 1),
            Step::Backoff(Duration::from_millis(3_200))
        );
        assert_eq!(next_step(&refused, 1, 1), Step::GiveUp);
        assert_eq!(next_step(&busy, MAX_ATTEMPTS, 1), Step::GiveUp);
    }

    #[test]
    fn api_errors_are_classified_by_code() {
        let err = |code: u64| -> async_nats::jetstream::Error {
            serde_json::from_value(serde_json::json!({
                "code": 400, "err_code": code, "description": "d"
            }))
            .expect("an API error")
        };
        assert!(matches!(
            BatchError::from_api(&err(10071)),
            BatchError::Conflict(_)
        ));
        assert!(matches!(
            BatchError::from_api(&err(10164)),
            BatchError::Conflict(_)
        ));
        assert!(matches!(
            BatchError::from_api(&err(10201)),
            BatchError::Duplicate(_)
        ));
        assert!(matches!(
            BatchError::from_api(&err(10176)),
            BatchError::Abandoned(_)
        ));
        assert!(matches!(
            BatchError::from_api(&err(10210)),
            BatchError::TooManyInflight(_)
        ));
        assert_eq!(
            BatchError::from_api(&err(10199)),
            BatchError::Refused {
                code: 10199,
                description: err(10199).to_string()
            }
        );
    }
}

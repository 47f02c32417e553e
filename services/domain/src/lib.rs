//! Holdpoint's pure core. No IO, no async runtime, no NATS: a command and the
//! records it touches go in, the records to write, the events to publish and the
//! outcome to reply come out.
//!
//! - [`ids`]: validated ids and their encoding into subject tokens and KV keys.
//! - [`model`]: the interaction record kept in KV, kinds, specifications, answers.
//! - [`session`]: session headers and lane records (KV), admission, deliveries.
//! - [`task`]: the task record (KV): what a task waits for, the calls it held.
//! - [`transition`]: committed transitions and their effects (every record's outbox).
//! - [`command`]: commands (`hp.cmd.<org>.<verb>`), their deterministic ids, outcomes.
//! - [`event`]: CloudEvents emitted on `hp.evt.<org>.<task>.<name>` and `hp.audit.<org>`.
//! - [`rules`]: what an opening may ask and how an answer is read (seeds 000 and 003).
//! - [`decide`](mod@decide): the state machine.
//! - [`error`]: the error catalog (`NRY-xxxx` codes, HTTP statuses).
//! - [`timestamp`]: the one format of every timestamp Holdpoint writes.
//! - `schema` (feature `schema`): JSON Schema impls for the wire types; `schemas/` is
//!   generated from them by `holdpoint-contracts`.

pub mod command;
pub mod decide;
pub mod error;
pub mod event;
pub mod ids;
pub mod model;
pub mod rules;
#[cfg(feature = "schema")]
pub mod schema;
pub mod session;
pub mod task;
pub mod timestamp;
pub mod transition;

pub use command::{
    Accepted, AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, OpenInteraction,
    OpenRequest, Outcome,
};
pub use decide::{Ctx, Decision, Needs, Snapshot, decide, needs};
pub use error::{CodeSpec, ErrorBody, ErrorCode, Rejection};
pub use event::{EXTENSION_URI, Event, EventData};
pub use ids::*;
pub use model::*;
pub use session::{
    Admission, DeliveredAnswer, Delivery, Lane, OpenQuestion, Session, SessionStatus,
};
pub use task::{Task, Waiting};
pub use transition::{Effects, OUTBOX_KEEP, Outbox, Transition};

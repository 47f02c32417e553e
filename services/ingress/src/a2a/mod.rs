//! Holdpoint as an A2A v1.0 server for paused tasks, with the interactions/v1
//! extension (README "A2A: answering paused tasks from any A2A client").
//!
//! - `GET /.well-known/agent-card.json` (public): the agent card ([`card`](mod@card)). One JSON-RPC
//!   interface at `<base>/a2a`, protocol version 1.0, streaming, the extension
//!   [`EXTENSION_URI`](holdpoint_domain::EXTENSION_URI), and a bearer-JWT security scheme. `<base>` is
//!   [`IngressConfig::public_url`](crate::IngressConfig::public_url) when set, else
//!   derived from the request's `Host`.
//! - `POST /a2a` (JSON-RPC 2.0, same identity as the REST API): `SendMessage`,
//!   `SendStreamingMessage`, `GetTask`, `SubscribeToTask`, `ListTasks`,
//!   `CancelTask` (always `TaskNotCancelableError`: Holdpoint does not run
//!   tasks). Push notifications and the extended card are not offered.
//!
//! **The task view.** Holdpoint keeps no task store: a task is what its last
//! `task-status` event on `hp.evt.<org>.<task>.task-status` says, read from the
//! events stream ([`load_view`]). The subject is built from the caller's
//! organisation, so another organisation's task is simply not found. When that
//! event names an open interaction that the interactions bucket no longer holds
//! as pending (answered, or closed by the host), the view is `TASK_STATE_WORKING`.
//! A waiting task shows `TASK_STATE_AUTH_REQUIRED` or `TASK_STATE_INPUT_REQUIRED`
//! with an agent message whose text part is the prompt; when the caller activated
//! the extension, the message also lists [`EXTENSION_URI`](holdpoint_domain::EXTENSION_URI) and carries
//! `metadata[URI] = {interactionId, kind, prompt, detail}` (never arguments).
//!
//! **Answers** ([`read_message`]): a message on the task (`taskId` required,
//! `contextId` must match) whose `messageId` is the idempotency key. With the
//! extension, `metadata[URI]` may name the `interactionId` and carry `approved`
//! or `value`; otherwise one part answers: a data part `{approved: bool}` is an
//! approval decision, any other data part a value, a text part text (which never
//! approves). The worker reads the input against the interaction's kind
//! ([`holdpoint_domain::rules::read_answer`]).
//!
//! **Errors** are JSON-RPC error objects with HTTP 200 (authentication aside:
//! 401 `NRY-0011` before any JSON-RPC is read). `error.data` is the list of
//! typed details the A2A SDKs read: one `google.rpc.ErrorInfo` whose `metadata`
//! carries the Holdpoint `code` (`NRY-xxxx`), its `title` and `retryable`.

//!
//! | module | what |
//! |---|---|
//! | [`card`](mod@card) | the agent card |
//! | [`negotiate`] | `A2A-Version` and `A2A-Extensions` |
//! | [`error`] | JSON-RPC errors with the Holdpoint code |
//! | [`dispatch`] | `POST /a2a`: read, check, dispatch by method |
//! | [`protojson`] | ProtoJSON input: proto field names, enum numbers, integer strings |
//! | [`call`] | one call's context and the params helpers |
//! | [`view`] | the task view |
//! | [`tasks`] | `GetTask`, `ListTasks`, `CancelTask` |
//! | [`answer`] | `SendMessage`: reading and submitting an answer |
//! | [`streams`] | `SendStreamingMessage`, `SubscribeToTask` |

pub mod answer;
pub mod call;
pub mod card;
pub mod dispatch;
pub mod error;
pub mod negotiate;
pub mod protojson;
pub mod streams;
pub mod tasks;
pub mod view;

pub use answer::{Reading, read_message};
pub use card::card;
pub use error::RpcError;
pub use negotiate::{
    EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER, MissingVersion, Negotiated, VERSION_HEADER,
    check_version,
};
pub use tasks::{DEFAULT_TASK_PAGE, MAX_TASK_PAGE};
pub use view::{TaskView, a2a_task, load_view, status_message};

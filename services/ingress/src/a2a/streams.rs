//! The task streams (`text/event-stream`): each `data:` is a JSON-RPC response
//! whose `result` is a stream response, `{"task": …}` first, then
//! `{"statusUpdate": …}` fed by an ordered consumer on the task's `task-status`
//! subject that starts right after the status the first item showed. Each stream
//! counts against the caller's limit
//! ([`IngressConfig::max_streams_per_caller`](crate::IngressConfig::max_streams_per_caller)):
//! over it, the answer is HTTP `429 NRY-0017` with the REST error body, and
//! `SendStreamingMessage` submits nothing.

use a2a_lf::{
    JsonRpcId, JsonRpcResponse, SendMessageRequest, StreamResponse, SubscribeToTaskRequest,
};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use holdpoint_domain::{EventKind, InteractionId, TaskId, TaskState as DTaskState};
use serde_json::Value;
use tracing::warn;

use super::answer::answer;
use super::call::{Ctx, parse_params, parse_task_id, to_json};
use super::error::RpcError;
use super::view::{TaskView, a2a_task, decode_status, load_view, status_update};
use crate::error::ApiError;
use crate::limits::StreamPermit;
use crate::sse::{self, Start, Stored};

/// Status updates of a task from `after` on, as A2A stream responses. Repeats of
/// the state last sent are skipped; with `until_waiting`, the stream ends after
/// the first update that waits for a person.
fn updates(
    stored: BoxStream<'static, Stored>,
    last: (DTaskState, Option<InteractionId>),
    extension: bool,
    until_waiting: bool,
) -> BoxStream<'static, StreamResponse> {
    futures::stream::unfold(
        (stored, last, false),
        move |(mut stored, mut last, done)| async move {
            if done {
                return None;
            }
            loop {
                let s = stored.next().await?;
                let Some((event, data)) = decode_status(&s.payload) else {
                    warn!(
                        sequence = s.sequence,
                        "skipping an undecodable task-status event"
                    );
                    continue;
                };
                let view = TaskView::from_status(data, event.time, s.sequence);
                if view.key() == last {
                    continue;
                }
                last = view.key();
                let end = until_waiting && view.waiting();
                return Some((status_update(&view, extension), (stored, last, end)));
            }
        },
    )
    .boxed()
}

fn sse_items(
    id: JsonRpcId,
    first: Vec<StreamResponse>,
    rest: BoxStream<'static, StreamResponse>,
    permit: StreamPermit,
) -> Response {
    let events = futures::stream::iter(first).chain(rest).map(move |item| {
        let body = match to_json(&item) {
            Ok(result) => JsonRpcResponse::success(id.clone(), result),
            Err(e) => JsonRpcResponse::error(id.clone(), e.to_jsonrpc()),
        };
        let data = serde_json::to_string(&body).unwrap_or_default();
        SseEvent::default().data(data)
    });
    sse::sse_response(events, permit)
}

/// A permit for one more stream of this caller; refused, it is answered as HTTP
/// `429 NRY-0017` with the `{code, title, message}` body, before anything else
/// happens (no answer is submitted).
fn permit(ctx: &Ctx) -> Result<StreamPermit, ApiError> {
    ctx.state
        .stream_counts
        .acquire(&ctx.caller, ctx.state.cfg.max_streams_per_caller)
}

async fn task_stream(
    ctx: &Ctx,
    task: &TaskId,
    after: u64,
) -> Result<BoxStream<'static, Stored>, RpcError> {
    let filter = ctx.state.bus.topo.event_filter(
        &ctx.caller.org,
        Some(task),
        Some(EventKind::TaskStatus.name()),
    );
    sse::follow(&ctx.state, filter, Start::At(after + 1))
        .await
        .map_err(RpcError::unavailable)
}

/// `SubscribeToTask`: the task as it is now, then its status updates.
pub async fn subscribe_to_task(
    ctx: &Ctx,
    id: JsonRpcId,
    params: Value,
) -> Result<Response, RpcError> {
    let req: SubscribeToTaskRequest = parse_params(params)?;
    let task = parse_task_id(req.id)?;
    let permit = match permit(ctx) {
        Ok(p) => p,
        Err(refused) => return Ok(refused.into_response()),
    };
    let Some(view) = load_view(&ctx.state, &ctx.caller.org, &task).await? else {
        return Err(RpcError::task_not_found(task.as_str()));
    };
    let stored = task_stream(ctx, &task, view.sequence).await?;
    let ext = ctx.negotiated.interactions();
    let rest = updates(stored, view.key(), ext, false);
    Ok(sse_items(
        id,
        vec![StreamResponse::Task(a2a_task(&view, ext))],
        rest,
        permit,
    ))
}

/// `SendStreamingMessage`: answers as `SendMessage` and streams the task as it then
/// is; while it is working, its status updates follow until it waits for a person
/// again. When it still waits (another interaction pending) the stream ends at once.
pub async fn send_streaming_message(
    ctx: &Ctx,
    id: JsonRpcId,
    params: Value,
) -> Result<Response, RpcError> {
    let req: SendMessageRequest = parse_params(params)?;
    let permit = match permit(ctx) {
        Ok(p) => p,
        Err(refused) => return Ok(refused.into_response()),
    };
    let answered = answer(ctx, req).await?;
    let ext = ctx.negotiated.interactions();
    let first = vec![StreamResponse::Task(a2a_task(&answered, ext))];
    // Still waiting (on the task's next pending interaction): the stream ends there.
    if answered.waiting() {
        return Ok(sse_items(
            id,
            first,
            futures::stream::empty().boxed(),
            permit,
        ));
    }
    let stored = task_stream(ctx, &answered.task_id, answered.sequence).await?;
    let last = answered.key();
    Ok(sse_items(
        id,
        first,
        updates(stored, last, ext, true),
        permit,
    ))
}

//! `GetTask`, `ListTasks` and `CancelTask`.

use a2a_lf::{CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, error_code};
use holdpoint_bus::records::Bucket;
use holdpoint_domain::TaskId;
use serde_json::Value;
use time::OffsetDateTime;

use super::call::{Ctx, check_history_length, parse_params, parse_task_id, to_json};
use super::error::RpcError;
use super::view::{TaskView, a2a_state, a2a_task, load_view, timestamp};

/// Largest `ListTasks` page.
pub const MAX_TASK_PAGE: usize = 100;
/// Default `ListTasks` page.
pub const DEFAULT_TASK_PAGE: usize = 50;

/// `GetTask`: the task as it is now.
pub async fn get_task(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: GetTaskRequest = parse_params(params)?;
    check_history_length(req.history_length)?;
    let task = parse_task_id(req.id)?;
    match load_view(&ctx.state, &ctx.caller.org, &task).await? {
        Some(view) => to_json(&a2a_task(&view, ctx.negotiated.interactions())),
        None => Err(RpcError::task_not_found(task.as_str())),
    }
}

/// `CancelTask`: always `TaskNotCancelableError` for a known task (tasks run in
/// the agent runtime, not in Holdpoint).
pub async fn cancel_task(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: CancelTaskRequest = parse_params(params)?;
    let task = parse_task_id(req.id)?;
    match load_view(&ctx.state, &ctx.caller.org, &task).await? {
        Some(_) => Err(RpcError::new(
            error_code::TASK_NOT_CANCELABLE,
            format!(
                "task {task} runs in the agent runtime, not in Holdpoint: cancel it there \
                 (Holdpoint only holds what it waits for)"
            ),
        )),
        None => Err(RpcError::task_not_found(task.as_str())),
    }
}

fn page_cursor(at: OffsetDateTime, task: &TaskId) -> String {
    format!("{}~{}", at.unix_timestamp_nanos(), task)
}

fn parse_page_cursor(c: &str) -> Option<(i128, String)> {
    let (t, id) = c.split_once('~')?;
    Some((t.parse().ok()?, id.to_owned()))
}

/// `ListTasks`: the caller's organisation's tasks that wait for a person now (their
/// records in `HP_TASKS` with something pending), most recently updated first.
pub async fn list_tasks(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: ListTasksRequest = parse_params(params)?;
    check_history_length(req.history_length)?;
    // A2A v1.0: `pageSize` is optional with a minimum of 1, so an explicit 0 is
    // refused like any other size out of range (an unset field is the default).
    let size = match req.page_size {
        None => DEFAULT_TASK_PAGE,
        Some(n) if n > 0 && (n as usize) <= MAX_TASK_PAGE => n as usize,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "pageSize is 1 to {MAX_TASK_PAGE}"
            )));
        }
    };
    let after = match req.page_token.as_deref() {
        None | Some("") => None,
        Some(c) => Some(
            parse_page_cursor(c).ok_or_else(|| RpcError::invalid_params("invalid pageToken"))?,
        ),
    };
    let waiting = ctx
        .state
        .bus
        .list_page(
            Bucket::Tasks,
            &ctx.caller.org,
            |t: &holdpoint_domain::Task| !t.pending.is_empty(),
            0,
            usize::MAX,
            usize::MAX,
        )
        .await
        .map_err(RpcError::unavailable)?
        .items;
    // Each names its oldest pending interaction, as GetTask does.
    let mut views: Vec<TaskView> = waiting
        .iter()
        .map(|t| TaskView::of_record(t, 0))
        .filter(|v| {
            req.context_id
                .as_deref()
                .is_none_or(|c| v.context_id.as_str() == c)
                && req.status.as_ref().is_none_or(|s| {
                    *s == a2a_lf::TaskState::Unspecified || *s == a2a_state(v.state)
                })
                && req
                    .status_timestamp_after
                    .is_none_or(|t| timestamp(v.at).is_some_and(|at| at > t))
        })
        .collect();
    views.sort_by(|a, b| {
        (b.at.unix_timestamp_nanos(), b.task_id.as_str())
            .cmp(&(a.at.unix_timestamp_nanos(), a.task_id.as_str()))
    });
    let total = views.len();
    let start = match &after {
        Some((t, id)) => views
            .iter()
            .position(|v| (v.at.unix_timestamp_nanos(), v.task_id.as_str()) < (*t, id.as_str()))
            .unwrap_or(total),
        None => 0,
    };
    let page: Vec<&TaskView> = views.iter().skip(start).take(size).collect();
    let next_page_token = match page.last() {
        Some(last) if start + page.len() < total => page_cursor(last.at, &last.task_id),
        _ => String::new(),
    };
    let ext = ctx.negotiated.interactions();
    to_json(&ListTasksResponse {
        tasks: page.iter().map(|v| a2a_task(v, ext)).collect(),
        next_page_token,
        page_size: i32::try_from(size).unwrap_or(i32::MAX),
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
    })
}

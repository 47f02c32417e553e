//! The worker's KV watches kept alive: [`watch`] starts a watch, hands every
//! update to a handler, and when the watch breaks runs a hook and starts it again,
//! pausing as [`Backoff::RECONNECT`] between failed starts, until shutdown. The
//! session cache ([`crate::cache::SessionCache::watch`]) and the rule book
//! ([`crate::rules::RuleBook::watch`]) run on it.

use std::fmt::Display;
use std::future::Future;
use std::ops::ControlFlow;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use holdpoint_bus::backoff::Backoff;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// Sleeps `d` unless `shutdown` comes first; true when shutting down.
pub async fn pause(shutdown: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

/// Runs a watch until `shutdown`: `start` opens it (a failed start is logged at
/// debug as `<what> not started; retrying` and tried again after
/// `Backoff::RECONNECT.delay(attempt)`, the attempt counting failed starts in a
/// row); `item` takes each update and returns `Break` to drop the watch; when the
/// watch ends or is dropped, `on_break` runs and the watch starts again. Returns as
/// soon as `shutdown` is cancelled (without `on_break`).
pub(crate) async fn watch<S, E, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut start: impl FnMut() -> Fut,
    mut item: impl FnMut(S::Item) -> ControlFlow<()>,
    mut on_break: impl FnMut(),
) where
    Fut: Future<Output = Result<S, E>>,
    S: Stream + Unpin,
    E: Display,
{
    let mut attempt = 0;
    while !shutdown.is_cancelled() {
        let mut updates = match start().await {
            Ok(w) => w,
            Err(e) => {
                attempt += 1;
                debug!(error = %e, "{what} not started; retrying");
                if pause(shutdown, Backoff::RECONNECT.delay(attempt)).await {
                    return;
                }
                continue;
            }
        };
        attempt = 0;
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                n = updates.next() => n,
            };
            match next {
                Some(u) => {
                    if item(u).is_break() {
                        break;
                    }
                }
                None => break,
            }
        }
        on_break();
    }
}

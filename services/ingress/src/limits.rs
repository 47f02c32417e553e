//! Per-caller limits of the API: [`StreamCounts`] bounds the event streams
//! (`GET /v1/events`, A2A `SubscribeToTask` and `SendStreamingMessage`) one caller
//! may hold open at once. A leaf: the state holds the counts, the stream handlers
//! take permits.

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_domain::{ErrorCode, OrgId, PersonId};

use crate::error::ApiError;
use crate::identity::Caller;

/// The event streams open now, per caller (organisation and person), so that no
/// caller holds more than [`IngressConfig::max_streams_per_caller`](crate::IngressConfig::max_streams_per_caller)
/// consumers and connections at once.
#[derive(Debug, Default)]
pub struct StreamCounts {
    open: std::sync::Mutex<HashMap<(OrgId, PersonId), usize>>,
}

/// One open stream of one caller; the count goes down when it is dropped (the
/// stream ended, the client hung up, the ingress shut down).
#[derive(Debug)]
pub struct StreamPermit {
    counts: Arc<StreamCounts>,
    caller: (OrgId, PersonId),
}

impl StreamCounts {
    /// Counts one more stream for `caller`, if fewer than `max` are open.
    ///
    /// # Errors
    /// `429 NRY-0017` (with `Retry-After`) when `caller` has `max` open.
    pub fn acquire(
        self: &Arc<Self>,
        caller: &Caller,
        max: usize,
    ) -> Result<StreamPermit, ApiError> {
        let key = (caller.org.clone(), caller.person.clone());
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(key.clone()).or_insert(0);
        if *n >= max {
            return Err(ApiError::new(
                ErrorCode::TooManyStreams,
                format!(
                    "you have {max} event streams open, the most one caller may; close one first"
                ),
            ));
        }
        *n += 1;
        Ok(StreamPermit {
            counts: self.clone(),
            caller: key,
        })
    }

    /// How many streams `caller` has open.
    pub fn open(&self, caller: &Caller) -> usize {
        let open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.get(&(caller.org.clone(), caller.person.clone()))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self
            .counts
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.caller);
            }
        }
    }
}

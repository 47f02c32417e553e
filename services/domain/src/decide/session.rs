//! A session opens, closes (refuses new messages and interactions) or ends (answers
//! as not found from then on).

use crate::SessionMode;
use crate::error::ErrorCode;
use crate::event::{Event, EventData};
use crate::ids::SessionId;
use crate::session::{MAX_LANE_CAPACITY, Session, SessionStatus};
use crate::transition::Effects;
use crate::{Accepted, DEFAULT_LANE_CAPACITY};

use super::base::{Ctx, Decision, Writes, accept, live_session, reject, session_missing};

pub(super) fn open(
    ctx: &Ctx,
    existing: Option<&Session>,
    id: &SessionId,
    mode: SessionMode,
    capacity: Option<u32>,
) -> Decision {
    if let Some(s) = existing {
        if !s.is_live() {
            return reject(
                ctx,
                ErrorCode::CommandConflict,
                format!("session {id} has ended"),
            );
        }
        if s.mode != mode {
            return reject(
                ctx,
                ErrorCode::CommandConflict,
                format!("session {id} is already open in another mode"),
            );
        }
        return accept(ctx, Accepted::Opened);
    }
    let lane_capacity = capacity.unwrap_or(DEFAULT_LANE_CAPACITY);
    if lane_capacity > MAX_LANE_CAPACITY {
        return reject(
            ctx,
            ErrorCode::InvalidRequest,
            format!("laneCapacity must be at most {MAX_LANE_CAPACITY}"),
        );
    }
    let session = Session {
        org: ctx.org.clone(),
        id: id.clone(),
        mode,
        status: SessionStatus::Open,
        lane_capacity,
        outbox: Default::default(),
    };
    let effects = Effects {
        events: vec![Event::new(
            &ctx.org,
            None,
            id.as_str(),
            "open",
            ctx.now,
            EventData::SessionOpened {
                session: id.clone(),
                mode,
            },
        )],
        ..Effects::default()
    };
    Writes {
        session: Some(session),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Opened)))
}

pub(super) fn close(ctx: &Ctx, existing: Option<&Session>, id: &SessionId, end: bool) -> Decision {
    let Some(s) = live_session(existing) else {
        return session_missing(ctx, id);
    };
    let target = if end {
        SessionStatus::Ended
    } else {
        SessionStatus::Closed
    };
    if s.status == target {
        return accept(ctx, Accepted::Closed);
    }
    let mut next = s.clone();
    next.status = target;
    let effects = Effects {
        events: vec![Event::new(
            &ctx.org,
            None,
            id.as_str(),
            if end { "end" } else { "close" },
            ctx.now,
            EventData::SessionClosed {
                session: id.clone(),
                ended: end,
            },
        )],
        ..Effects::default()
    };
    Writes {
        session: Some(next),
        ..Writes::default()
    }
    .commit(ctx, effects, ctx.outcome(Ok(Accepted::Closed)))
}

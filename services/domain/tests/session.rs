//! Table tests of `decide` for the session commands: opening, closing and ending a
//! session, each checking the exact outcome, the records left behind and the exact
//! events emitted.

mod common;

use common::*;
use holdpoint_domain::{Accepted, ErrorCode, EventData, SessionMode, SessionStatus};

// ================================================================ sessions

#[test]
fn session_open_writes_an_open_session_and_announces_it() {
    let mut s = Store::new();
    let d = accept(
        &mut s,
        &session_open(S, SessionMode::Blocking),
        Accepted::Opened,
        &["session-opened"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionOpened {
            session: sid(S),
            mode: SessionMode::Blocking
        }
    );
    let rec = s.session(S);
    assert_eq!(rec.status, SessionStatus::Open);
    assert_eq!(rec.mode, SessionMode::Blocking);
    assert_eq!(rec.lane_capacity, 8, "default lane capacity");
    assert!(s.lanes.is_empty(), "no lane record");

    let mut p = Store::new();
    accept(
        &mut p,
        &session_open_cap(P, SessionMode::Product, 3),
        Accepted::Opened,
        &["session-opened"],
    );
    assert_eq!(p.session(P).lane_capacity, 3);
    assert_eq!(p.session(P).mode, SessionMode::Product);
}

#[test]
fn session_reopen_in_the_same_mode_is_idempotent() {
    let mut s = Store::new();
    let env = session_open(S, SessionMode::Blocking);
    let first = accept(&mut s, &env, Accepted::Opened, &["session-opened"]);
    // Redelivered while the transition is recorded: a replay.
    assert_replays(&mut s, &env, &first);
    // Long after: decided again, a no-op.
    s.forget_outboxes();
    noop(&mut s, &env, Accepted::Opened);
    assert_eq!(s.session(S).status, SessionStatus::Open);
}

#[test]
fn session_reopen_in_another_mode_conflicts() {
    let mut s = Fixture::new().blocking(S).store();
    refuse(
        &mut s,
        &session_open(S, SessionMode::Product),
        ErrorCode::CommandConflict,
    );
    s.forget_outboxes();
    refuse(
        &mut s,
        &session_open(S, SessionMode::Product),
        ErrorCode::CommandConflict,
    );
    assert_eq!(s.session(S).mode, SessionMode::Blocking);
}

#[test]
fn session_close_then_end() {
    let mut s = Fixture::new().blocking(S).store();
    let d = accept(
        &mut s,
        &session_close(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionClosed {
            session: sid(S),
            ended: false
        }
    );
    assert_eq!(s.session(S).status, SessionStatus::Closed);
    assert_replays(&mut s, &session_close(S), &d);
    s.forget_outboxes();
    noop(&mut s, &session_close(S), Accepted::Closed);

    let d = accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(
        d.effects.events[0].body,
        EventData::SessionClosed {
            session: sid(S),
            ended: true
        }
    );
    assert_eq!(s.session(S).status, SessionStatus::Ended);
    s.forget_outboxes();
    // An ended session answers as not found ...
    refuse(&mut s, &session_end(S), ErrorCode::SessionNotFound);
    refuse(&mut s, &session_close(S), ErrorCode::SessionNotFound);
    refuse(
        &mut s,
        &message(S, LANE, "m-1", "hello"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &turn_start(S, LANE, "t-1"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &turn_finish(S, LANE, "t-1"),
        ErrorCode::SessionNotFound,
    );
    refuse(
        &mut s,
        &open(APPROVAL, S, pr_approval()),
        ErrorCode::SessionNotFound,
    );
    // ... and cannot be opened again.
    refuse(
        &mut s,
        &session_open(S, SessionMode::Blocking),
        ErrorCode::CommandConflict,
    );
}

#[test]
fn session_end_of_an_open_session() {
    let mut s = Fixture::new().blocking(S).store();
    accept(
        &mut s,
        &session_end(S),
        Accepted::Closed,
        &["session-closed"],
    );
    assert_eq!(s.session(S).status, SessionStatus::Ended);
}

#[test]
fn closing_or_ending_a_missing_session_is_session_not_found() {
    let mut s = Store::new();
    let d = refuse(&mut s, &session_close("nope"), ErrorCode::SessionNotFound);
    assert_eq!(ErrorCode::SessionNotFound.spec().code, "NRY-0002");
    assert!(
        d.outcome
            .result
            .as_ref()
            .expect_err("refused")
            .message
            .contains("nope")
    );
    refuse(&mut s, &session_end("nope"), ErrorCode::SessionNotFound);
    refuse(
        &mut s,
        &message("nope", LANE, "m-1", "hi"),
        ErrorCode::SessionNotFound,
    );
    assert!(!s.has_session("nope"));
}

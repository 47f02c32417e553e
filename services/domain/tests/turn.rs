//! Table tests of `decide` for turns on a product lane: queued messages admitted in
//! order, a redelivered turn start never restarting a finished turn.

mod common;

use common::*;
use holdpoint_domain::{Accepted, ErrorCode};

// ================================================================ turns

#[test]
fn turns_admit_queued_messages_in_order() {
    let mut s = Fixture::new().product(P, 8).store();
    accept(
        &mut s,
        &turn_start(P, LANE, "turn-1"),
        Accepted::Admitted,
        &["turn-started"],
    );
    // The running turn again: unchanged; another turn while one runs: a conflict.
    s.forget_outboxes();
    noop(&mut s, &turn_start(P, LANE, "turn-1"), Accepted::Unchanged);
    refuse(
        &mut s,
        &turn_start(P, LANE, "turn-2"),
        ErrorCode::CommandConflict,
    );
    for m in ["m-1", "m-2"] {
        let d = s.run(&message(P, LANE, m, "queued"));
        assert_eq!(code_of(&d), ErrorCode::LaneBusy);
        assert_eq!(names(&d.effects.events), ["lane-message"]);
    }
    // Finishing a turn that is not running changes nothing.
    noop(&mut s, &turn_finish(P, LANE, "m-2"), Accepted::Unchanged);

    let d = accept(
        &mut s,
        &turn_finish(P, LANE, "turn-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    assert_eq!(d.effects.events[0].body, turn_started("m-1"));
    let l = s.lane(P, LANE);
    assert_eq!(l.running, Some(mid("m-1")));
    assert_eq!(l.queue, [mid("m-2")]);
    accept(
        &mut s,
        &turn_finish(P, LANE, "m-1"),
        Accepted::Unchanged,
        &["turn-started"],
    );
    accept(
        &mut s,
        &turn_finish(P, LANE, "m-2"),
        Accepted::Unchanged,
        &[],
    );
    let l = s.lane(P, LANE);
    assert_eq!(l.running, None);
    assert!(l.queue.is_empty());
}

#[test]
fn a_redelivered_turn_start_does_not_restart_a_finished_turn() {
    let mut s = Fixture::new().product(P, 8).store();
    let start = turn_start(P, LANE, "turn-1");
    s.run(&start);
    s.run(&turn_finish(P, LANE, "turn-1"));
    // Long after, the start is delivered again (its ack was lost).
    s.forget_outboxes();
    let before = s.revisions();
    let d = s.deliver(&start, true);
    assert!(d.effects.events.is_empty(), "no second turn-started");
    assert_eq!(s.revisions(), before);
    assert_eq!(s.lane(P, LANE).running, None);
}

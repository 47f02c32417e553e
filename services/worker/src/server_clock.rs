//! The server's clock as a worker sees it, for deadlines.
//!
//! A deadline is kept by the server: the expiry is a JetStream message schedule that
//! the commands stream's leader fires by its own clock. So a relative deadline
//! (`expiresIn`, a default deadline, `remember.expiresIn`) must be counted from the
//! server's time, not the deciding worker's: a worker whose wall clock is behind
//! would otherwise store an instant that is already past by the server's clock (the
//! deadline fires at once, early), and one ahead would store it late.
//!
//! Every delivered command carries the time the stream stored it (the
//! `published` field of its JetStream message info, on the stream leader's clock).
//! Each one bounds the offset between the server's clock and this worker's from
//! below: `stored - local receipt time = offset - transit`. [`ServerClock`] keeps the
//! greatest such bound over the last [`ServerClock::WINDOW`] (the command with the
//! shortest transit), so its estimate of the server's time is:
//!
//! - never before the stored time of any command just observed (the anchor of an
//!   `expiresIn` is at least the moment the opening was stored), and
//! - never after the server's real time, by more than the clock difference between
//!   the nodes that led the stream within the window.
//!
//! A redelivered command (stored long ago) only lowers a bound, so it never moves the
//! estimate. Samples older than the window are dropped, so a wall clock that NTP
//! steps is followed within a minute. With no sample yet the estimate is the
//! worker's own clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

/// The greatest of the recent lower bounds on (server clock − this worker's clock).
#[derive(Debug, Default)]
pub struct ServerClock {
    /// (when observed, bound), a sliding-window maximum: bounds strictly decrease
    /// from front to back, so the front is the greatest in the window.
    samples: VecDeque<(Instant, time::Duration)>,
}

impl ServerClock {
    /// How long one observation counts.
    pub const WINDOW: Duration = Duration::from_secs(60);
    /// At most this many observations are kept (the oldest go first).
    const CAP: usize = 1024;

    /// Records a command message stored by the server at `stored`, received now.
    pub fn observe(&mut self, stored: OffsetDateTime) {
        self.observe_at(stored, OffsetDateTime::now_utc(), Instant::now());
    }

    fn observe_at(&mut self, stored: OffsetDateTime, local: OffsetDateTime, at: Instant) {
        let bound = stored - local;
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| at.saturating_duration_since(*t) > Self::WINDOW)
        {
            self.samples.pop_front();
        }
        while self.samples.back().is_some_and(|(_, b)| *b <= bound) {
            self.samples.pop_back();
        }
        if self.samples.len() == Self::CAP {
            self.samples.pop_front();
        }
        self.samples.push_back((at, bound));
    }

    /// The estimated offset of the server's clock from this worker's (signed; zero
    /// with no observation).
    pub fn offset(&self) -> time::Duration {
        self.samples
            .front()
            .map_or(time::Duration::ZERO, |(_, b)| *b)
    }

    /// The server's time now, as estimated (see the module).
    pub fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + self.offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> time::Duration {
        time::Duration::seconds(s)
    }

    #[test]
    fn the_estimate_is_the_greatest_recent_bound_and_forgets_old_ones() {
        let mut c = ServerClock::default();
        assert_eq!(c.offset(), time::Duration::ZERO);
        let t0 = Instant::now();
        let local = OffsetDateTime::UNIX_EPOCH + secs(1_000_000);
        // The server is 30 s ahead; transits of 2 s, 50 ms, and a redelivery stored
        // 40 s before it was received.
        c.observe_at(local + secs(28), local, t0);
        assert_eq!(c.offset(), secs(28));
        c.observe_at(
            local + secs(30) - time::Duration::milliseconds(50),
            local,
            t0 + Duration::from_secs(1),
        );
        assert_eq!(c.offset(), secs(30) - time::Duration::milliseconds(50));
        c.observe_at(local - secs(10), local, t0 + Duration::from_secs(2));
        assert_eq!(c.offset(), secs(30) - time::Duration::milliseconds(50));
        // A minute later the earlier bounds are gone (the new one is above the
        // redelivery's).
        c.observe_at(
            local + secs(29),
            local,
            t0 + ServerClock::WINDOW + Duration::from_secs(2),
        );
        assert_eq!(c.offset(), secs(29));
        // A worker clock that is ahead gives negative bounds.
        let mut ahead = ServerClock::default();
        ahead.observe_at(local - secs(30), local, t0);
        assert_eq!(ahead.offset(), secs(-30));
    }

    #[test]
    fn the_window_keeps_at_most_its_cap() {
        let mut c = ServerClock::default();
        let t0 = Instant::now();
        let local = OffsetDateTime::UNIX_EPOCH + secs(1_000_000);
        // Strictly decreasing bounds are all kept, up to the cap.
        for i in 0..(ServerClock::CAP as i64 + 10) {
            c.observe_at(local - secs(i), local, t0);
        }
        assert_eq!(c.samples.len(), ServerClock::CAP);
        assert_eq!(c.offset(), secs(-10));
    }
}

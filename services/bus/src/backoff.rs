//! The one back-off policy: a first delay that doubles per attempt up to a cap
//! (a fixed pause when both are equal). Every retry loop of Holdpoint (worker,
//! bus readers, the ingress's outcome waiter, the notifier, `holdpoint tail`)
//! uses one of the named policies here, so their pacing is set in one place.

use std::time::Duration;

/// A delay that starts at `first` and doubles per attempt, up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the second attempt.
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// A command the worker could not finish for a transient reason (NATS away, a
    /// leader election): NAKed for 100 ms, then 200 ms, … at most 2 s. Never long
    /// enough to make a caller wait out `ack_wait`.
    pub const TRANSIENT: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(2),
    };

    /// Reading a recorded outcome while the worker decides: 5 ms, 10 ms, … 200 ms.
    pub const POLL: Backoff = Backoff {
        first: Duration::from_millis(5),
        max: Duration::from_millis(200),
    };

    /// Re-pulling commands or re-subscribing after NATS went away: 50 ms … 1 s.
    pub const RECONNECT: Backoff = Backoff {
        first: Duration::from_millis(50),
        max: Duration::from_secs(1),
    };

    /// Connecting again to an HTTP event stream after it dropped (`holdpoint
    /// tail`): 250 ms, 500 ms, … at most 5 s, so a restarting ingress is not
    /// hammered and a person sees events again within seconds of its return.
    pub const HTTP_STREAM: Backoff = Backoff {
        first: Duration::from_millis(250),
        max: Duration::from_secs(5),
    };

    /// Sending a person's answer again after a `502`, `503` or `504` or a lost
    /// connection, with the same idempotency key (`holdpoint approve`, `answer`):
    /// 250 ms, 500 ms, … at most 5 s, unless the answer named a `Retry-After`.
    pub const ANSWER_RETRY: Backoff = Backoff {
        first: Duration::from_millis(250),
        max: Duration::from_secs(5),
    };

    /// Making a consumer that is not ready yet (the notifier's events router, a
    /// webhook endpoint's consumer: NATS away, a stream not made): every 1 s.
    pub const CONSUMER_NOT_READY: Backoff = Backoff {
        first: Duration::from_secs(1),
        max: Duration::from_secs(1),
    };

    /// Making a webhook endpoint's consumer again after its message stream failed
    /// or ended (a lost connection, the consumer deleted with its endpoint): 500 ms.
    pub const CONSUMER_ENDED: Backoff = Backoff {
        first: Duration::from_millis(500),
        max: Duration::from_millis(500),
    };

    /// The delay before attempt `attempt + 1` (`attempt` 1 is the first try; 0 and
    /// negative values count as 1).
    pub fn delay(&self, attempt: i64) -> Duration {
        let doublings = u32::try_from(attempt.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
        self.first
            .saturating_mul(1u32 << doublings.min(20))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap() {
        let b = Backoff::TRANSIENT;
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(4), Duration::from_millis(800));
        assert_eq!(b.delay(5), Duration::from_millis(1600));
        assert_eq!(b.delay(6), Duration::from_secs(2));
        assert_eq!(b.delay(i64::MAX), Duration::from_secs(2));
    }
}

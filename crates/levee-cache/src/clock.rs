//! The clock every age, TTL and grace decision reads: the real clock, plus an offset
//! that only tests move.
//!
//! The cache's decisions are pure functions of a `now` they are given (see
//! [`lookup`](crate::lookup()), [`after_fetch`](crate::after_fetch())); the request path
//! takes that `now` from here. Integration tests start levee with `LEVEE_TEST_CLOCK=1`,
//! which lets the admin listener's `POST /clock?advance=…` move this clock forward, so a
//! test of a 1-second TTL advances the clock instead of sleeping through it.
//!
//! One clock per process (a static), like the real one: everything in a levee process
//! must agree on what time it is. Reading it costs one relaxed atomic load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Nanoseconds the clock runs ahead of the real one (0 in production).
static AHEAD_NANOS: AtomicU64 = AtomicU64::new(0);

/// Now, for ages and freshness.
#[inline]
pub fn now() -> Instant {
    Instant::now() + ahead()
}

/// Now as a date, for `Date` fields and RFC 9111 §4.2.3's request and response times.
#[inline]
pub fn system_now() -> SystemTime {
    SystemTime::now() + ahead()
}

#[inline]
fn ahead() -> Duration {
    Duration::from_nanos(AHEAD_NANOS.load(Ordering::Relaxed))
}

/// Moves the clock forward by `by` (tests only: the admin listener offers it when levee
/// runs with `LEVEE_TEST_CLOCK=1`). Returns how far ahead of the real clock it now is.
pub fn advance(by: Duration) -> Duration {
    let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
    let before = AHEAD_NANOS.fetch_add(nanos, Ordering::Relaxed);
    Duration::from_nanos(before.saturating_add(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_both_clocks_forward() {
        let (i, s) = (now(), system_now());
        let ahead = advance(Duration::from_secs(3600));
        assert!(ahead >= Duration::from_secs(3600));
        assert!(now() >= i + Duration::from_secs(3600));
        assert!(system_now() >= s + Duration::from_secs(3600));
    }
}

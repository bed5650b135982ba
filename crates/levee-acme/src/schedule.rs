//! When to order: at once for a name without a valid certificate, at two thirds of a
//! certificate's lifetime for renewal (Let's Encrypt's advice: 60 days into 90, so a
//! failing renewal has a month of retries before anything expires), and after a failure
//! with a delay that doubles up to a bound (a CA's rate limits count failed validations).
//! Pure functions of their inputs, unit-tested here.

use std::time::Duration;

/// The first retry after a failure.
pub(crate) const FIRST_RETRY: Duration = Duration::from_secs(60);
/// Retries never wait longer than this: a renewal that keeps failing still gets several
/// tries a day.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(6 * 60 * 60);

/// When a certificate valid from `not_before` to `not_after` (Unix seconds) is renewed.
pub(crate) fn renew_at(not_before: i64, not_after: i64) -> i64 {
    let lifetime = not_after.saturating_sub(not_before).max(0);
    not_before.saturating_add(lifetime / 3 * 2)
}

/// How long to wait after `failures` (1 or more) failures in a row.
pub(crate) fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << doublings).min(MAX_RETRY)
}

/// How long from `now` until `at` (both Unix seconds); zero when it has passed.
pub(crate) fn until(now: i64, at: i64) -> Duration {
    Duration::from_secs(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn renewal_comes_at_two_thirds_of_the_lifetime() {
        assert_eq!(renew_at(0, 90 * DAY), 60 * DAY);
        assert_eq!(renew_at(1_000, 1_000 + 3 * DAY), 1_000 + 2 * DAY);
        // A certificate that ends before it starts is renewed at once.
        assert_eq!(renew_at(100, 50), 100);
    }

    #[test]
    fn retries_double_up_to_a_bound() {
        assert_eq!(backoff(1), Duration::from_secs(60));
        assert_eq!(backoff(2), Duration::from_secs(120));
        assert_eq!(backoff(4), Duration::from_secs(480));
        assert_eq!(backoff(20), MAX_RETRY);
        assert_eq!(backoff(u32::MAX), MAX_RETRY);
    }

    #[test]
    fn a_moment_passed_is_now() {
        assert_eq!(until(100, 50), Duration::ZERO);
        assert_eq!(until(100, 160), Duration::from_secs(60));
    }
}

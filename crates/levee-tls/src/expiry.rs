//! When each certificate stops being valid, for a `/metrics` gauge and an "expires in N
//! days" warning. An expired certificate is still loaded and served: refusing it would
//! take the site down over what is a warning while a renewal is on its way.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

const DAY: i64 = 24 * 60 * 60;

/// One loaded certificate's names and notAfter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The certificate chain file it was read from.
    pub file: PathBuf,
    /// Its DNS names (subjectAltName), lowercase, wildcards as `*.example.com`.
    pub names: Vec<String>,
    /// Its notAfter, in seconds since the Unix epoch (what a gauge reports).
    pub not_after_unix: i64,
}

impl Expiry {
    /// Whole days from `now` to notAfter, rounded down: 0 on its last day, negative once
    /// it has expired.
    pub fn days_left(&self, now: SystemTime) -> i64 {
        (self.not_after_unix - unix(now)).div_euclid(DAY)
    }

    /// Whether it expires within `days` of `now` (or already has).
    pub fn expires_within(&self, now: SystemTime, days: u32) -> bool {
        self.not_after_unix - unix(now) <= i64::from(days) * DAY
    }
}

/// Seconds since the epoch, negative before it (a clock set wrong should not panic).
fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn expiring_at(not_after_unix: i64) -> Expiry {
        Expiry {
            file: PathBuf::from("a.pem"),
            names: vec!["a.example.com".into()],
            not_after_unix,
        }
    }

    #[test]
    fn days_left_round_down_and_go_negative_after_expiry() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000 * DAY as u64);
        let base = 1_000 * DAY;
        assert_eq!(expiring_at(base + 10 * DAY).days_left(now), 10);
        assert_eq!(expiring_at(base + 10 * DAY - 1).days_left(now), 9);
        assert_eq!(expiring_at(base + 1).days_left(now), 0);
        assert_eq!(expiring_at(base - 1).days_left(now), -1);
    }

    #[test]
    fn expires_within_counts_expired_certificates_in() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000 * DAY as u64);
        let base = 1_000 * DAY;
        assert!(expiring_at(base + 10 * DAY).expires_within(now, 10));
        assert!(!expiring_at(base + 10 * DAY + 1).expires_within(now, 10));
        assert!(expiring_at(base - 5 * DAY).expires_within(now, 0));
    }
}

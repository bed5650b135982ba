//! Placeholder transcription of the proxy's lookup decision (replaced by the unit-tested
//! version).

use std::time::{Duration, Instant};

use crate::{CacheControl, Entry};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Miss,
    Hit,
    StaleAccepted,
    StaleWhileRevalidate,
    Validate,
    OnlyIfCachedMiss,
}

pub fn lookup(req_cc: &CacheControl, stored: Option<&Entry>, now: Instant) -> Lookup {
    let Some(entry) = stored else {
        return if req_cc.only_if_cached {
            Lookup::OnlyIfCachedMiss
        } else {
            Lookup::Miss
        };
    };
    let age = entry.age(now);
    let young_enough = req_cc.max_age.is_none_or(|m| age <= Duration::from_secs(m));
    match entry.staleness(now) {
        Ok(remaining) => {
            let acceptable = !req_cc.no_cache
                && !entry.freshness.no_cache
                && young_enough
                && req_cc
                    .min_fresh
                    .is_none_or(|m| remaining >= Duration::from_secs(m));
            if acceptable {
                return Lookup::Hit;
            }
        }
        Err(stale_by) => {
            let f = &entry.freshness;
            let client_accepts = !f.no_cache
                && !f.must_revalidate
                && !req_cc.no_cache
                && young_enough
                && req_cc.min_fresh.is_none()
                && req_cc
                    .max_stale
                    .is_some_and(|m| stale_by <= Duration::from_secs(m));
            if client_accepts {
                return Lookup::StaleAccepted;
            }
            let client_allows_stale =
                !req_cc.no_cache && req_cc.max_age.is_none() && req_cc.min_fresh.is_none();
            if client_allows_stale && f.allows_stale_while_revalidate(stale_by) {
                return Lookup::StaleWhileRevalidate;
            }
        }
    }
    if req_cc.only_if_cached {
        Lookup::OnlyIfCachedMiss
    } else {
        Lookup::Validate
    }
}

pub fn stale_on_error(stale: &Entry, now: Instant) -> bool {
    match stale.staleness(now) {
        Ok(_) => false,
        Err(stale_by) => {
            stale.freshness.allows_stale_on_error(stale_by)
                && !matches!(stale.status.as_u16(), 500 | 502 | 503 | 504)
        }
    }
}

//! The lookup decision: what a GET or HEAD that may use the cache does with the stored
//! variant the store selected for it. This is the decision table of RFC 9111 §4.2-§4.3
//! and the request directives of §5.2.1, plus the stale rules of RFC 5861
//! (stale-while-revalidate, stale-if-error) and levee's grace. The proxy only carries
//! the answer out (levee-proxy's `request/lookup.rs`).
//!
//! It is pure, a function of (request directives, stored variant, now), so that every
//! row is unit-tested below with a clock the tests set, not by sleeping through a
//! server.

use std::time::{Duration, Instant};

use crate::{CacheControl, Entry};

/// What a GET/HEAD that may use the cache does, given the variant the store selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing stored: fetch from the backend (a fill).
    Miss,
    /// Fresh and acceptable to the request: serve it (`X-Cache: HIT`).
    Hit,
    /// Stale, but the request's `max-stale` accepts it: serve it as it is.
    StaleAccepted,
    /// Stale within `stale-while-revalidate`: serve it now and start one background
    /// revalidation.
    StaleWhileRevalidate,
    /// Stored, but not usable without the backend: fetch, validating the stored
    /// response, which stays the fallback if the backend fails.
    Validate,
    /// The request said `only-if-cached` and nothing stored may be used: 504.
    OnlyIfCachedMiss,
}

/// RFC 9111 §4 for a shared cache: what to do with a request whose `Cache-Control` is
/// `req_cc`, given the stored variant, at `now`.
pub fn lookup(req_cc: &CacheControl, stored: Option<&Entry>, now: Instant) -> Lookup {
    let Some(entry) = stored else {
        return if req_cc.only_if_cached {
            Lookup::OnlyIfCachedMiss
        } else {
            Lookup::Miss
        };
    };
    let age = entry.age(now);
    // §5.2.1.1: the client does not want a response older than this (in exact time, so
    // `max-age=0` always means "validate").
    let young_enough = req_cc.max_age.is_none_or(|m| age <= Duration::from_secs(m));
    match entry.staleness(now) {
        Ok(remaining) => {
            let acceptable = !req_cc.no_cache
                && !entry.freshness().no_cache
                && young_enough
                && req_cc
                    .min_fresh
                    .is_none_or(|m| remaining >= Duration::from_secs(m));
            if acceptable {
                return Lookup::Hit;
            }
        }
        // §4.4: an entry invalidated by an edit is validated before it is sent again,
        // even when its response allows stale-while-revalidate (a micro-cached page
        // does) or the client says max-stale.
        Err(_) if entry.invalidated() => {}
        Err(stale_by) => {
            let f = &entry.freshness();
            // §5.2.1.2: max-stale accepts this much staleness, but not past `no-cache`
            // (§5.2.1.4: validate first), a request max-age or min-fresh, nor the
            // response's must-revalidate (§5.2.2.2).
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
            // A request max-age or min-fresh asks for a response no stale one can be
            // (§5.2.1.1, §5.2.1.3): it waits for the validation. must-revalidate and
            // no-cache responses are never served stale (`allows_stale_while_revalidate`).
            let client_allows_stale =
                !req_cc.no_cache && req_cc.max_age.is_none() && req_cc.min_fresh.is_none();
            if client_allows_stale && f.allows_stale_while_revalidate(stale_by) {
                return Lookup::StaleWhileRevalidate;
            }
            // An operator's soft purge: the old copy once more while the new one is
            // fetched, unless the response forbids serving it stale.
            if client_allows_stale
                && entry.serve_stale_after_purge()
                && !f.must_revalidate
                && !f.no_cache
            {
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

/// May `stale` stand in for a backend that failed (connect error, timeout, overload, or
/// a 500/502/503/504): stale-if-error (RFC 5861 §4) or levee's grace. Never a fresh
/// entry (it is only being fetched because it needs validation, which the RFC forbids
/// skipping, also on error), never a stored error (no better than the new one). Vary
/// matching is the caller's business.
pub fn stale_on_error(stale: &Entry, now: Instant) -> bool {
    match stale.staleness(now) {
        Ok(_) => false,
        Err(stale_by) => {
            stale.freshness().allows_stale_on_error(stale_by)
                && !matches!(stale.status().as_u16(), 500 | 502 | 503 | 504)
        }
    }
}

/// Whether a stale copy may stand in at once while the backend is saturated (levee's
/// stale-while-busy), its revalidation made in the background: as for an error
/// ([`stale_on_error`]), and only a response that was fresh when it arrived. One that
/// arrived already stale (its `Age` beyond its lifetime) was never fresh here, and RFC
/// 9111 §4.2.4 does not let a cache generate a stale response from it on levee's own
/// say; its own `stale-while-revalidate` or `stale-if-error` still allow it.
pub fn stale_while_busy(stale: &Entry, now: Instant) -> bool {
    if !stale_on_error(stale, now) {
        return false;
    }
    let f = stale.freshness();
    if stale.initial_age() < f.lifetime {
        return true;
    }
    let own = f.stale_while_revalidate.max(f.stale_if_error);
    matches!(stale.staleness(now), Err(by) if !own.is_zero() && by <= own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheKey, EntryParts, Freshness, VaryKey};
    use http::StatusCode;

    const S: Duration = Duration::from_secs(1);

    /// The clock the tests set: the entry arrived at `T0`, the request comes at
    /// `T0 + secs`.
    struct Clock(Instant);

    impl Clock {
        fn at(&self, secs: u64) -> Instant {
            self.0 + Duration::from_secs(secs)
        }
    }

    fn freshness(lifetime: u64) -> Freshness {
        Freshness {
            lifetime: Duration::from_secs(lifetime),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::ZERO,
            retain: Duration::ZERO,
        }
    }

    fn stored(clock: &Clock, f: Freshness) -> Entry {
        stored_with(clock, f, 0, StatusCode::OK)
    }

    fn stored_with(clock: &Clock, f: Freshness, initial_age: u64, status: StatusCode) -> Entry {
        Entry::new(EntryParts {
            key: &CacheKey::stored("http://lookup.test/", 0),
            id: 1,
            status,
            headers: &http::HeaderMap::new(),
            body: bytes::Bytes::new(),
            coding: levee_compress::Coding::Identity,
            levee_coded: None,
            vary: VaryKey::default(),
            freshness: f,
            initial_age: Duration::from_secs(initial_age),
            response_time: clock.0,
            tags: Default::default(),
        })
    }

    fn cc(s: &str) -> CacheControl {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::CACHE_CONTROL, s.parse().unwrap());
        CacheControl::from_request_headers(&h)
    }

    fn clock() -> Clock {
        Clock(Instant::now())
    }

    // §4.2: fresh while age < freshness lifetime.
    #[test]
    fn fresh_is_a_hit_and_stale_at_its_lifetime() {
        let c = clock();
        let e = stored(&c, freshness(60));
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.at(0)), Lookup::Hit);
        assert_eq!(lookup(&none, Some(&e), c.at(59)), Lookup::Hit);
        assert_eq!(lookup(&none, Some(&e), c.at(60)), Lookup::Validate);
        assert_eq!(lookup(&none, Some(&e), c.at(3600)), Lookup::Validate);
    }

    #[test]
    fn nothing_stored_is_a_miss() {
        let c = clock();
        assert_eq!(
            lookup(&CacheControl::default(), None, c.at(0)),
            Lookup::Miss
        );
    }

    // §4.2.3: the age a response had when it arrived (Age, Date) counts.
    #[test]
    fn initial_age_counts_toward_freshness() {
        let c = clock();
        let e = stored_with(&c, freshness(60), 50, StatusCode::OK);
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.at(9)), Lookup::Hit);
        assert_eq!(lookup(&none, Some(&e), c.at(10)), Lookup::Validate);
    }

    // §5.2.1.1: request max-age: no older than that, fresh or not.
    #[test]
    fn request_max_age_validates_older_responses() {
        let c = clock();
        let e = stored(&c, freshness(3600));
        assert_eq!(lookup(&cc("max-age=10"), Some(&e), c.at(10)), Lookup::Hit);
        assert_eq!(
            lookup(&cc("max-age=10"), Some(&e), c.at(11)),
            Lookup::Validate
        );
        assert_eq!(lookup(&cc("max-age=0"), Some(&e), c.at(0)), Lookup::Hit);
        let aged = stored_with(&c, freshness(3600), 1, StatusCode::OK);
        assert_eq!(
            lookup(&cc("max-age=0"), Some(&aged), c.at(0)),
            Lookup::Validate
        );
    }

    // §5.2.1.3: min-fresh: fresh for at least that much longer.
    #[test]
    fn min_fresh_needs_that_much_freshness_left() {
        let c = clock();
        let e = stored(&c, freshness(60));
        assert_eq!(lookup(&cc("min-fresh=30"), Some(&e), c.at(30)), Lookup::Hit);
        assert_eq!(
            lookup(&cc("min-fresh=30"), Some(&e), c.at(31)),
            Lookup::Validate
        );
    }

    // §5.2.1.3 with §5.2.1.2: a stale response is never fresh enough for min-fresh.
    #[test]
    fn min_fresh_blocks_max_stale_and_stale_while_revalidate() {
        let c = clock();
        let mut f = freshness(60);
        f.stale_while_revalidate = Duration::from_secs(60);
        let e = stored(&c, f);
        assert_eq!(
            lookup(&cc("max-stale"), Some(&e), c.at(70)),
            Lookup::StaleAccepted
        );
        assert_eq!(
            lookup(&cc("max-stale, min-fresh=1"), Some(&e), c.at(70)),
            Lookup::Validate
        );
        assert_eq!(
            lookup(&CacheControl::default(), Some(&e), c.at(70)),
            Lookup::StaleWhileRevalidate
        );
        assert_eq!(
            lookup(&cc("min-fresh=1"), Some(&e), c.at(70)),
            Lookup::Validate
        );
    }

    // §5.2.1.2: max-stale=N accepts a response stale by at most N; bare, by any amount.
    #[test]
    fn max_stale_accepts_that_much_staleness() {
        let c = clock();
        let e = stored(&c, freshness(60));
        assert_eq!(
            lookup(&cc("max-stale=10"), Some(&e), c.at(70)),
            Lookup::StaleAccepted
        );
        assert_eq!(
            lookup(&cc("max-stale=10"), Some(&e), c.at(71)),
            Lookup::Validate
        );
        assert_eq!(
            lookup(&cc("max-stale"), Some(&e), c.at(1_000_000)),
            Lookup::StaleAccepted
        );
        // A fresh response is a plain hit with max-stale too.
        assert_eq!(lookup(&cc("max-stale=10"), Some(&e), c.at(1)), Lookup::Hit);
    }

    // §5.2.2.2, §5.2.1.4, §5.2.2.4, §5.2.1.1: max-stale never overrides must-revalidate,
    // a no-cache response, a no-cache request or a request max-age.
    #[test]
    fn max_stale_does_not_override_revalidation_requirements() {
        let c = clock();
        let mut mr = freshness(60);
        mr.must_revalidate = true;
        let e = stored(&c, mr);
        assert_eq!(
            lookup(&cc("max-stale"), Some(&e), c.at(70)),
            Lookup::Validate
        );
        let mut nc = freshness(60);
        nc.no_cache = true;
        let e = stored(&c, nc);
        assert_eq!(
            lookup(&cc("max-stale"), Some(&e), c.at(70)),
            Lookup::Validate
        );
        let e = stored(&c, freshness(60));
        assert_eq!(
            lookup(&cc("max-stale, no-cache"), Some(&e), c.at(70)),
            Lookup::Validate
        );
        assert_eq!(
            lookup(&cc("max-stale, max-age=65"), Some(&e), c.at(70)),
            Lookup::Validate
        );
        assert_eq!(
            lookup(&cc("max-stale, max-age=70"), Some(&e), c.at(70)),
            Lookup::StaleAccepted
        );
    }

    // §5.2.1.4: request no-cache: validate even a fresh response.
    #[test]
    fn request_no_cache_validates_fresh_responses() {
        let c = clock();
        let e = stored(&c, freshness(3600));
        assert_eq!(lookup(&cc("no-cache"), Some(&e), c.at(0)), Lookup::Validate);
    }

    // §5.2.2.4: response no-cache: never reused without validation, fresh or not.
    #[test]
    fn response_no_cache_always_validates() {
        let c = clock();
        let mut f = freshness(3600);
        f.no_cache = true;
        f.stale_while_revalidate = Duration::from_secs(3600);
        let e = stored(&c, f);
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.at(0)), Lookup::Validate);
        assert_eq!(lookup(&none, Some(&e), c.at(3700)), Lookup::Validate);
    }

    // §4.2.4 and §5.2.2.2: a stale must-revalidate response is never served unvalidated.
    #[test]
    fn must_revalidate_is_never_served_stale() {
        let c = clock();
        let mut f = freshness(60);
        f.must_revalidate = true;
        f.stale_while_revalidate = Duration::from_secs(60);
        let e = stored(&c, f);
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.at(59)), Lookup::Hit);
        assert_eq!(lookup(&none, Some(&e), c.at(60)), Lookup::Validate);
    }

    // RFC 5861 §3: stale-while-revalidate serves stale within its window while one
    // revalidation runs.
    #[test]
    fn stale_while_revalidate_within_its_window() {
        let c = clock();
        let mut f = freshness(60);
        f.stale_while_revalidate = Duration::from_secs(30);
        let e = stored(&c, f);
        let none = CacheControl::default();
        assert_eq!(
            lookup(&none, Some(&e), c.at(60)),
            Lookup::StaleWhileRevalidate
        );
        assert_eq!(
            lookup(&none, Some(&e), c.at(90)),
            Lookup::StaleWhileRevalidate
        );
        assert_eq!(lookup(&none, Some(&e), c.at(91)), Lookup::Validate);
    }

    // A request that asks for validation or for fresher content waits for it.
    #[test]
    fn stale_while_revalidate_yields_to_request_directives() {
        let c = clock();
        let mut f = freshness(60);
        f.stale_while_revalidate = Duration::from_secs(30);
        let e = stored(&c, f);
        for d in ["no-cache", "max-age=3600", "min-fresh=0"] {
            assert_eq!(lookup(&cc(d), Some(&e), c.at(70)), Lookup::Validate, "{d}");
        }
    }

    // §5.2.1.7: only-if-cached: a stored response the client may have, or 504.
    #[test]
    fn only_if_cached_never_reaches_the_backend() {
        let c = clock();
        let e = stored(&c, freshness(60));
        let oic = cc("only-if-cached");
        assert_eq!(lookup(&oic, None, c.at(0)), Lookup::OnlyIfCachedMiss);
        assert_eq!(lookup(&oic, Some(&e), c.at(0)), Lookup::Hit);
        assert_eq!(lookup(&oic, Some(&e), c.at(60)), Lookup::OnlyIfCachedMiss);
        assert_eq!(
            lookup(&cc("only-if-cached, max-stale"), Some(&e), c.at(60)),
            Lookup::StaleAccepted
        );
        assert_eq!(
            lookup(&cc("only-if-cached, no-cache"), Some(&e), c.at(0)),
            Lookup::OnlyIfCachedMiss
        );
    }

    #[test]
    fn stale_on_error_never_for_fresh_entries() {
        let c = clock();
        let mut f = freshness(60);
        f.grace = Duration::from_secs(3600);
        let e = stored(&c, f);
        assert!(!stale_on_error(&e, c.at(0)));
        assert!(stale_on_error(&e, c.at(60)));
    }

    // RFC 5861 §4: stale-if-error=N, and levee's grace, each allow that much staleness.
    #[test]
    fn stale_if_error_and_grace_windows() {
        let c = clock();
        let mut f = freshness(60);
        f.stale_if_error = Duration::from_secs(10);
        let e = stored(&c, f);
        assert!(stale_on_error(&e, c.at(70)));
        assert!(!stale_on_error(&e, c.at(71)));
        let mut f = freshness(60);
        f.grace = Duration::from_secs(100);
        let e = stored(&c, f);
        assert!(stale_on_error(&e, c.at(160)));
        assert!(!stale_on_error(&e, c.at(161)));
        // Without either, a stale response never stands in for an error.
        let e = stored(&c, freshness(60));
        assert!(!stale_on_error(&e, c.at(61)));
    }

    // §4.2.4: must-revalidate (also proxy-revalidate, s-maxage) forbids levee's grace;
    // an explicit stale-if-error from the origin still applies.
    #[test]
    fn must_revalidate_disables_grace_not_stale_if_error() {
        let c = clock();
        let mut f = freshness(60);
        f.must_revalidate = true;
        f.grace = Duration::from_secs(3600);
        let e = stored(&c, f);
        assert!(!stale_on_error(&e, c.at(61)));
        f.stale_if_error = Duration::from_secs(10);
        let e = stored(&c, f);
        assert!(stale_on_error(&e, c.at(61)));
        assert!(!stale_on_error(&e, c.at(71)));
    }

    #[test]
    fn no_cache_responses_never_stand_in_for_errors() {
        let c = clock();
        let mut f = freshness(60);
        f.no_cache = true;
        f.grace = Duration::from_secs(3600);
        f.stale_if_error = Duration::from_secs(3600);
        let e = stored(&c, f);
        assert!(!stale_on_error(&e, c.at(61)));
    }

    // A stored 5xx is no better than the backend's new error; a stored 404 is a page.
    #[test]
    fn only_a_copy_that_was_fresh_here_stands_in_while_busy() {
        let c = clock();
        let mut f = freshness(60);
        f.grace = Duration::from_secs(3600);
        let fresh_here = stored_with(&c, f, 0, StatusCode::OK);
        assert!(stale_while_busy(&fresh_here, c.at(61)));
        assert!(!stale_while_busy(&fresh_here, c.at(30)), "not stale yet");
        // Arrived with Age 120 for a lifetime of 60: never fresh here.
        let arrived_stale = stored_with(&c, f, 120, StatusCode::OK);
        assert!(
            stale_on_error(&arrived_stale, c.at(1)),
            "an error may still use it"
        );
        assert!(!stale_while_busy(&arrived_stale, c.at(1)));
        // Unless its own directive allows it.
        f.stale_while_revalidate = Duration::from_secs(600);
        let allowed = stored_with(&c, f, 120, StatusCode::OK);
        assert!(stale_while_busy(&allowed, c.at(1)));
        assert!(!stale_while_busy(&allowed, c.at(700)));
    }

    #[test]
    fn stored_errors_never_stand_in_for_errors() {
        let c = clock();
        let mut f = freshness(60);
        f.grace = Duration::from_secs(3600);
        for code in [500, 502, 503, 504] {
            let e = stored_with(&c, f, 0, StatusCode::from_u16(code).unwrap());
            assert!(!stale_on_error(&e, c.at(61)), "{code}");
        }
        let e = stored_with(&c, f, 0, StatusCode::NOT_FOUND);
        assert!(stale_on_error(&e, c.at(61)));
    }

    #[test]
    fn one_second_is_the_resolution() {
        // Freshness is compared in exact time: half a second before the end is fresh.
        let c = clock();
        let e = stored(&c, freshness(1));
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.0 + S / 2), Lookup::Hit);
        assert_eq!(lookup(&none, Some(&e), c.0 + S), Lookup::Validate);
    }

    // An edit elsewhere marked the page stale before its time (a soft purge).
    #[test]
    fn a_soft_purged_entry_is_validated_and_still_stands_in_for_errors() {
        let c = clock();
        let mut f = freshness(3600);
        f.grace = Duration::from_secs(60);
        let e = stored(&c, f);
        let none = CacheControl::default();
        assert_eq!(lookup(&none, Some(&e), c.at(10)), Lookup::Hit);
        assert!(!stale_on_error(&e, c.at(10)));
        e.mark_stale();
        assert_eq!(lookup(&none, Some(&e), c.at(10)), Lookup::Validate);
        // Invalidated (§4.4): validated first, whatever staleness the client accepts.
        assert_eq!(
            lookup(&cc("max-stale"), Some(&e), c.at(10)),
            Lookup::Validate
        );
        assert!(stale_on_error(&e, c.at(10)));
        // Nor does the response's stale-while-revalidate (a micro-cached page has one).
        let mut f = freshness(3600);
        f.stale_while_revalidate = Duration::from_secs(3600);
        let swr = stored(&c, f);
        assert_eq!(lookup(&none, Some(&swr), c.at(10)), Lookup::Hit);
        swr.mark_stale();
        assert_eq!(lookup(&none, Some(&swr), c.at(10)), Lookup::Validate);
    }

    // An operator's soft purge: served once more while one revalidation runs, unless
    // the response must not be served stale; an edit's mark is never weakened by it.
    #[test]
    fn an_operators_soft_purge_serves_the_old_copy_while_revalidating() {
        let c = clock();
        let e = stored(&c, freshness(3600));
        let none = CacheControl::default();
        e.mark_stale_serving();
        assert_eq!(
            lookup(&none, Some(&e), c.at(10)),
            Lookup::StaleWhileRevalidate
        );
        assert_eq!(
            lookup(&cc("no-cache"), Some(&e), c.at(10)),
            Lookup::Validate
        );
        e.mark_stale();
        e.mark_stale_serving();
        assert_eq!(lookup(&none, Some(&e), c.at(10)), Lookup::Validate);
        let mut f = freshness(3600);
        f.must_revalidate = true;
        let strict = stored(&c, f);
        strict.mark_stale_serving();
        assert_eq!(lookup(&none, Some(&strict), c.at(10)), Lookup::Validate);
    }
}

//! One test per branch of `after_fetch` and `refresh`, with a set clock: the stale entry
//! was received at `T0`, the backend answers at `T0 + secs`.

use super::*;
use crate::{EntryParts, VaryKey};

const NOW: u64 = 1_800_000_000;

struct Clock {
    instant: Instant,
    date: SystemTime,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            instant: Instant::now(),
            date: SystemTime::UNIX_EPOCH + Duration::from_secs(NOW),
        }
    }

    fn fetched<'a>(&self, secs: u64, status: u16, headers: &'a HeaderMap) -> Fetched<'a> {
        let later = Duration::from_secs(secs);
        Fetched {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            request_time: self.date + later,
            response_time: self.date + later,
            at: self.instant + later,
            validated: false,
        }
    }

    fn date(&self, secs: u64) -> String {
        httpdate::fmt_http_date(self.date + Duration::from_secs(secs))
    }
}

fn headers(fields: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in fields {
        h.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

/// A stored 200, fresh for `max_age` seconds from `T0`, within a grace of `grace`.
fn stale_entry(clock: &Clock, max_age: u64, grace: u64, fields: &[(&str, &str)]) -> Entry {
    stale_entry_for(clock, max_age, grace, fields, &HeaderMap::new())
}

/// [`stale_entry`], stored for a request with `req`'s header fields (its Vary key).
fn stale_entry_for(
    clock: &Clock,
    max_age: u64,
    grace: u64,
    fields: &[(&str, &str)],
    req: &HeaderMap,
) -> Entry {
    let h = headers(fields);
    Entry::new(EntryParts {
        key: &crate::CacheKey::stored("http://after-fetch.test/", 0),
        id: 7,
        status: StatusCode::OK,
        headers: &h,
        body: bytes::Bytes::from_static(b"old"),
        coding: levee_compress::Coding::Identity,
        levee_coded: None,
        vary: VaryKey::new(&h, req),
        freshness: Freshness {
            lifetime: Duration::from_secs(max_age),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::from_secs(grace),
            retain: Duration::from_secs(grace),
        },
        initial_age: Duration::ZERO,
        response_time: clock.instant,
        tags: Default::default(),
    })
}

fn decide_after(asked: &Asked<'_>, fetched: &Fetched<'_>) -> AfterFetch {
    let session = |n: &str| n == "PHPSESSID";
    after_fetch(asked, fetched, &PolicyConfig::default(), &session)
}

fn full(a: AfterFetch) -> Full {
    match a {
        AfterFetch::Full(f) => f,
        other => panic!("expected a full response, got {other:?}"),
    }
}

fn asked<'a>(cc: &'a CacheControl, req: &'a HeaderMap, stale: Option<&'a Entry>) -> Asked<'a> {
    Asked {
        request_cc: cc,
        request_headers: req,
        stale,
    }
}

#[test]
fn a_fresh_200_is_stored_and_clears_the_mark() {
    let c = Clock::new();
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = headers(&[("cache-control", "max-age=60"), ("date", &c.date(0))]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(0, 200, &h),
    ));
    let stored = f.storable.expect("storable");
    assert_eq!(stored.freshness.lifetime, Duration::from_secs(60));
    assert_eq!(f.mark, HitForPass::Clear);
    assert!(!f.remove_stale, "nothing stored to remove");
    assert_eq!(f.initial_age, Duration::ZERO);
}

#[test]
fn an_uncacheable_answer_marks_the_key_with_its_reason() {
    let c = Clock::new();
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    for (field, reason) in [
        ("no-store", NotStored::NoStore),
        ("private", NotStored::Private),
    ] {
        let h = headers(&[("cache-control", field)]);
        let f = full(decide_after(
            &asked(&cc, &req, None),
            &c.fetched(0, 200, &h),
        ));
        assert_eq!(f.storable, Err(reason));
        assert_eq!(f.mark, HitForPass::Set(reason));
    }
}

#[test]
fn the_requests_own_no_store_leaves_the_mark_alone() {
    let c = Clock::new();
    let req = headers(&[("cache-control", "no-store")]);
    let cc = CacheControl::from_request_headers(&req);
    let h = headers(&[("cache-control", "max-age=60")]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(0, 200, &h),
    ));
    assert_eq!(f.storable, Err(NotStored::RequestNoStore));
    assert_eq!(f.mark, HitForPass::Leave);
}

#[test]
fn a_session_cookie_is_stripped_and_any_other_cookie_forbids_storing() {
    let c = Clock::new();
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = headers(&[
        ("cache-control", "max-age=60"),
        ("set-cookie", "PHPSESSID=abc; path=/"),
    ]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(0, 200, &h),
    ));
    assert!(f.storable.expect("storable").strip_set_cookie);
    let h = headers(&[
        ("cache-control", "max-age=60"),
        ("set-cookie", "theme=dark"),
    ]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(0, 200, &h),
    ));
    assert_eq!(f.storable, Err(NotStored::SetCookie));
}

#[test]
fn a_5xx_with_a_stale_copy_within_grace_serves_the_copy() {
    let c = Clock::new();
    let stale = stale_entry(&c, 1, 10, &[]);
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = HeaderMap::new();
    for status in [500, 502, 503, 504] {
        let a = decide_after(&asked(&cc, &req, Some(&stale)), &c.fetched(5, status, &h));
        assert_eq!(a, AfterFetch::ServeStale, "{status}");
    }
}

#[test]
fn a_5xx_beyond_grace_is_passed_on_and_keeps_the_stored_copy() {
    let c = Clock::new();
    let stale = stale_entry(&c, 1, 10, &[]);
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = HeaderMap::new();
    let f = full(decide_after(
        &asked(&cc, &req, Some(&stale)),
        &c.fetched(30, 503, &h),
    ));
    assert!(f.storable.is_err());
    assert!(
        !f.remove_stale,
        "a failing backend is no new representation"
    );
    // 501 is not an error RFC 5861 lets stale stand in for, nor a failure: it replaces.
    let f = full(decide_after(
        &asked(&cc, &req, Some(&stale)),
        &c.fetched(5, 501, &h),
    ));
    assert!(!f.remove_stale);
}

#[test]
fn a_5xx_for_another_variant_does_not_serve_this_stale_copy() {
    let c = Clock::new();
    let stored_req = headers(&[("accept-language", "fr")]);
    let stale = stale_entry_for(&c, 1, 10, &[("vary", "accept-language")], &stored_req);
    let cc = CacheControl::default();
    let req = headers(&[("accept-language", "de")]);
    let h = HeaderMap::new();
    let a = decide_after(&asked(&cc, &req, Some(&stale)), &c.fetched(5, 503, &h));
    assert!(matches!(a, AfterFetch::Full(_)), "{a:?}");
}

#[test]
fn a_304_to_levees_validators_refreshes_and_one_it_did_not_ask_for_does_not() {
    let c = Clock::new();
    let stale = stale_entry(&c, 1, 10, &[("etag", "\"v1\"")]);
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = headers(&[("etag", "\"v1\"")]);
    let mut fetched = c.fetched(5, 304, &h);
    fetched.validated = true;
    let a = decide_after(&asked(&cc, &req, Some(&stale)), &fetched);
    assert_eq!(a, AfterFetch::Refresh);
    fetched.validated = false;
    let f = full(decide_after(&asked(&cc, &req, Some(&stale)), &fetched));
    assert_eq!(f.storable, Err(NotStored::Status));
    assert!(!f.remove_stale, "a 304 is never a replacement");
}

#[test]
fn a_full_answer_to_a_validation_replaces_the_stale_entry_even_if_unstorable() {
    let c = Clock::new();
    let stale = stale_entry(&c, 1, 10, &[("etag", "\"v1\"")]);
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    let h = headers(&[("cache-control", "no-store")]);
    let mut fetched = c.fetched(5, 200, &h);
    fetched.validated = true;
    let f = full(decide_after(&asked(&cc, &req, Some(&stale)), &fetched));
    assert!(f.remove_stale);
    assert_eq!(f.storable, Err(NotStored::NoStore));
}

#[test]
fn the_initial_age_is_the_apparent_age_or_the_age_field() {
    let c = Clock::new();
    let (cc, req) = (CacheControl::default(), HeaderMap::new());
    // Generated 4 s before it arrived.
    let h = headers(&[("cache-control", "max-age=60"), ("date", &c.date(6))]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(10, 200, &h),
    ));
    assert_eq!(f.initial_age, Duration::from_secs(4));
    let h = headers(&[("cache-control", "max-age=60"), ("age", "30")]);
    let f = full(decide_after(
        &asked(&cc, &req, None),
        &c.fetched(10, 200, &h),
    ));
    assert_eq!(f.initial_age, Duration::from_secs(30));
}

#[test]
fn refresh_takes_the_304s_fields_but_not_those_about_the_stored_bytes() {
    let c = Clock::new();
    let stale = stale_entry(
        &c,
        1,
        10,
        &[
            ("etag", "\"v1\""),
            ("cache-control", "max-age=1"),
            ("content-encoding", "gzip"),
            ("content-length", "3"),
            ("x-kept", "old"),
        ],
    );
    let new = headers(&[
        ("cache-control", "max-age=120"),
        ("content-encoding", "br"),
        ("content-length", "999"),
        ("set-cookie", "PHPSESSID=x"),
        ("age", "2"),
        ("x-multi", "a"),
        ("x-multi", "b"),
        ("date", &c.date(5)),
    ]);
    let cc = CacheControl::default();
    let session = |n: &str| n == "PHPSESSID";
    let r = refresh(
        &cc,
        &stale,
        new,
        (
            c.date + Duration::from_secs(5),
            c.date + Duration::from_secs(5),
        ),
        &PolicyConfig::default(),
        &session,
    );
    assert_eq!(r.headers["cache-control"], "max-age=120");
    assert_eq!(r.headers["content-encoding"], "gzip");
    assert_eq!(r.headers["content-length"], "3");
    assert_eq!(r.headers["x-kept"], "old");
    assert!(!r.headers.contains_key("set-cookie"));
    assert!(
        !r.headers.contains_key("age"),
        "Age is computed, never stored"
    );
    assert_eq!(r.headers.get_all("x-multi").iter().count(), 2);
    assert_eq!(r.freshness.lifetime, Duration::from_secs(120));
    assert_eq!(r.initial_age, Duration::from_secs(2));
    assert!(r.storable.is_ok());
}

#[test]
fn a_304_that_says_no_store_keeps_the_old_freshness_and_is_not_storable() {
    let c = Clock::new();
    let stale = stale_entry(
        &c,
        1,
        10,
        &[("etag", "\"v1\""), ("cache-control", "max-age=1")],
    );
    let cc = CacheControl::default();
    let session = |_: &str| false;
    let r = refresh(
        &cc,
        &stale,
        headers(&[("cache-control", "no-store"), ("date", &c.date(5))]),
        (c.date, c.date),
        &PolicyConfig::default(),
        &session,
    );
    assert_eq!(r.storable, Err(NotStored::NoStore));
    assert_eq!(r.freshness, stale.freshness());
}

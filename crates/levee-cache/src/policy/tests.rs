//! The storage and freshness rules, case by case (RFC 9111 §3, §4.2, §5.2.2).

use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

fn decide_with(
    h: &HeaderMap,
    anonymous: bool,
    config: &PolicyConfig,
) -> Result<Storable, NotStored> {
    let cc = CacheControl::default();
    let c = Candidate {
        method: &Method::GET,
        request_cc: &cc,
        anonymous,
        status: StatusCode::OK,
        headers: h,
        now: SystemTime::now(),
    };
    decide(&c, config, &|n| n == "PHPSESSID")
}

#[test]
fn s_maxage_beats_max_age_beats_expires() {
    let h = headers(&[("cache-control", "public, s-maxage=3, max-age=0")]);
    let s = decide_with(&h, true, &PolicyConfig::default()).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(3));
    assert!(
        s.freshness.must_revalidate,
        "s-maxage implies proxy-revalidate"
    );

    let now = SystemTime::now();
    let h = headers(&[
        ("date", &httpdate::fmt_http_date(now)),
        (
            "expires",
            &httpdate::fmt_http_date(now + Duration::from_secs(100)),
        ),
    ]);
    let s = decide_with(&h, true, &PolicyConfig::default()).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(100));
}

#[test]
fn private_no_store_and_cookies_are_not_stored() {
    let c = PolicyConfig::default();
    assert_eq!(
        decide_with(
            &headers(&[("cache-control", "private, max-age=60")]),
            true,
            &c
        ),
        Err(NotStored::Private)
    );
    assert_eq!(
        decide_with(&headers(&[("cache-control", "no-store")]), true, &c),
        Err(NotStored::NoStore)
    );
    let h = headers(&[("cache-control", "max-age=60"), ("set-cookie", "visits=3")]);
    assert_eq!(decide_with(&h, true, &c), Err(NotStored::SetCookie));
}

#[test]
fn session_start_cookie_is_stripped_only_for_anonymous_requests() {
    let c = PolicyConfig::default();
    let h = headers(&[
        ("cache-control", "max-age=60"),
        ("set-cookie", "PHPSESSID=abc; path=/"),
    ]);
    assert!(decide_with(&h, true, &c).unwrap().strip_set_cookie);
    assert_eq!(decide_with(&h, false, &c), Err(NotStored::SetCookie));
    let h = headers(&[
        ("cache-control", "max-age=60"),
        ("set-cookie", "PHPSESSID=abc; path=/"),
        ("set-cookie", "counter=1"),
    ]);
    assert_eq!(decide_with(&h, true, &c), Err(NotStored::SetCookie));
}

#[test]
fn micro_cache_applies_to_anonymous_html_without_explicit_freshness() {
    let c = PolicyConfig {
        micro_cache: Some(Duration::from_secs(3)),
        ..PolicyConfig::default()
    };
    let xe = headers(&[
        (
            "cache-control",
            "public, must-revalidate, post-check=0, pre-check=0",
        ),
        ("content-type", "text/html; charset=UTF-8"),
    ]);
    let s = decide_with(&xe, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(3));
    // A micro-cached page is served stale for one more TTL while it is refreshed, unless
    // the application said must-revalidate (XE does).
    assert!(!s
        .freshness
        .allows_stale_while_revalidate(Duration::from_secs(1)));
    let plain = headers(&[("content-type", "text/html; charset=UTF-8")]);
    let s = decide_with(&plain, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(3));
    assert!(s
        .freshness
        .allows_stale_while_revalidate(Duration::from_secs(3)));
    assert!(!s
        .freshness
        .allows_stale_while_revalidate(Duration::from_millis(3001)));
    assert_eq!(
        decide_with(&xe, true, &PolicyConfig::default()),
        Err(NotStored::NoFreshness)
    );
    let explicit = headers(&[
        ("cache-control", "max-age=0"),
        ("content-type", "text/html"),
    ]);
    assert_eq!(
        decide_with(&explicit, true, &c),
        Err(NotStored::NoFreshness)
    );
    // XE's header after PHP's session_start(): Expires in 1981 and Pragma.
    let php = headers(&[
        (
            "cache-control",
            "public, must-revalidate, post-check=0, pre-check=0",
        ),
        ("expires", "Thu, 19 Nov 1981 08:52:00 GMT"),
        ("pragma", "no-cache"),
        ("content-type", "text/html; charset=UTF-8"),
    ]);
    let s = decide_with(&php, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(3));
    // Not for a logged-in page, nor without micro-caching.
    assert!(decide_with(&php, false, &c).is_err());
    assert_eq!(
        decide_with(&php, true, &PolicyConfig::default()),
        Err(NotStored::NoFreshness)
    );
    // An Expires in the future is explicit freshness, micro-cache or not.
    let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
    let future = headers(&[("expires", later.as_str()), ("content-type", "text/html")]);
    let s = decide_with(&future, true, &c).unwrap();
    assert!(s.freshness.lifetime > Duration::from_secs(50));
    assert!(!s
        .freshness
        .allows_stale_while_revalidate(Duration::from_secs(1)));
}

#[test]
fn heuristic_freshness_needs_last_modified() {
    let now = SystemTime::now();
    let h = headers(&[
        ("date", &httpdate::fmt_http_date(now)),
        (
            "last-modified",
            &httpdate::fmt_http_date(now - Duration::from_secs(1000)),
        ),
    ]);
    let s = decide_with(&h, true, &PolicyConfig::default()).unwrap();
    assert_eq!(s.freshness.lifetime.as_secs(), 100);
    let off = PolicyConfig {
        heuristic: false,
        ..PolicyConfig::default()
    };
    assert_eq!(
        decide_with(&h, true, &off).unwrap().freshness.lifetime,
        Duration::ZERO
    );
}

#[test]
fn vary_star_and_big_bodies_are_not_stored() {
    let c = PolicyConfig {
        max_object_size: 10,
        ..PolicyConfig::default()
    };
    assert_eq!(
        decide_with(
            &headers(&[("cache-control", "max-age=9"), ("vary", "*")]),
            true,
            &c
        ),
        Err(NotStored::VaryStar)
    );
    assert_eq!(
        decide_with(
            &headers(&[("cache-control", "max-age=9"), ("content-length", "11")]),
            true,
            &c
        ),
        Err(NotStored::TooLarge)
    );
}

#[test]
fn grace_never_applies_to_must_revalidate() {
    let c = PolicyConfig::default();
    let s = decide_with(
        &headers(&[("cache-control", "max-age=1, must-revalidate")]),
        true,
        &c,
    )
    .unwrap();
    assert!(!s.freshness.allows_stale_on_error(Duration::from_secs(1)));
    let s = decide_with(&headers(&[("cache-control", "max-age=1")]), true, &c).unwrap();
    assert!(s.freshness.allows_stale_on_error(Duration::from_secs(100)));
    assert!(!s.freshness.allows_stale_on_error(Duration::from_secs(4000)));
    let s = decide_with(
        &headers(&[(
            "cache-control",
            "max-age=1, must-revalidate, stale-if-error=60",
        )]),
        true,
        &c,
    )
    .unwrap();
    assert!(s.freshness.allows_stale_on_error(Duration::from_secs(30)));
}

fn decide_status(code: u16, h: &HeaderMap) -> Result<Storable, NotStored> {
    let cc = CacheControl::default();
    let c = Candidate {
        method: &Method::GET,
        request_cc: &cc,
        anonymous: true,
        status: StatusCode::from_u16(code).unwrap(),
        headers: h,
        now: SystemTime::now(),
    };
    decide(&c, &PolicyConfig::default(), &|_| false)
}

#[test]
fn heuristic_freshness_only_for_heuristically_cacheable_statuses() {
    let now = SystemTime::now();
    let date = httpdate::fmt_http_date(now);
    let lm = httpdate::fmt_http_date(now - Duration::from_secs(86400));
    let h = headers(&[("date", &date), ("last-modified", &lm)]);
    // RFC 9110 §15.1 and RFC 7725 §3.
    for code in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 451, 501] {
        let s = decide_status(code, &h).unwrap();
        assert_eq!(s.freshness.lifetime.as_secs(), 8640, "{code}");
    }
    // RFC 9111 §3: others need explicit freshness or public; a validator is not enough.
    for code in [201, 202, 302, 303, 307, 400, 403, 500, 502, 503, 504, 599] {
        assert_eq!(decide_status(code, &h), Err(NotStored::Status), "{code}");
    }
    let public = headers(&[
        ("date", &date),
        ("last-modified", &lm),
        ("cache-control", "public"),
    ]);
    assert_eq!(
        decide_status(599, &public)
            .unwrap()
            .freshness
            .lifetime
            .as_secs(),
        8640
    );
}

#[test]
fn explicit_freshness_makes_any_final_status_storable() {
    let h = headers(&[("cache-control", "max-age=60")]);
    for code in [200, 201, 299, 302, 400, 403, 499, 500, 503, 599] {
        let s = decide_status(code, &h).unwrap();
        assert_eq!(s.freshness.lifetime.as_secs(), 60, "{code}");
    }
    // Never: interim, partial content (levee does not combine ranges), 304.
    for code in [100, 206, 304] {
        assert_eq!(decide_status(code, &h), Err(NotStored::Status), "{code}");
    }
}

#[test]
fn must_understand_ignores_no_store_for_understood_statuses_only() {
    // RFC 9111 §5.2.2.3 and §3.
    let h = headers(&[("cache-control", "max-age=60, must-understand, no-store")]);
    assert!(decide_status(200, &h).is_ok());
    assert!(decide_status(404, &h).is_ok());
    assert_eq!(decide_status(299, &h), Err(NotStored::Status));
    let h = headers(&[("cache-control", "max-age=60, must-understand")]);
    assert_eq!(decide_status(599, &h), Err(NotStored::Status));
    let h = headers(&[("cache-control", "max-age=60, no-store")]);
    assert_eq!(decide_status(200, &h), Err(NotStored::NoStore));
}

#[test]
fn expires_invalid_or_conflicting_is_stale() {
    let now = SystemTime::now();
    let date = httpdate::fmt_http_date(now);
    let later = httpdate::fmt_http_date(now + Duration::from_secs(100));
    let earlier = httpdate::fmt_http_date(now - Duration::from_secs(100));
    let lifetime = |pairs: &[(&str, &str)]| {
        let mut all = vec![("date", date.as_str()), ("etag", "\"v\"")];
        all.extend_from_slice(pairs);
        decide_with(&headers(&all), true, &PolicyConfig::default())
            .unwrap()
            .freshness
            .lifetime
            .as_secs()
    };
    assert_eq!(lifetime(&[("expires", &later)]), 100);
    assert_eq!(lifetime(&[("expires", &later), ("expires", &later)]), 100);
    // §4.2.1: the first occurrence, or stale; levee chooses stale.
    assert_eq!(lifetime(&[("expires", &later), ("expires", &earlier)]), 0);
    // §5.3: invalid means already expired.
    for bad in ["0", "-1", "soon", "Thu, 18 Aug 2050 02:01:18 UTC"] {
        assert_eq!(lifetime(&[("expires", bad)]), 0, "{bad}");
    }
    // Other HTTP-date formats (RFC 9110 §5.6.7).
    assert!(lifetime(&[("expires", "Thursday, 18-Aug-50 02:01:18 GMT")]) > 0);
    assert!(lifetime(&[("expires", "Thu Aug 18 02:01:18 2050")]) > 0);
    // Far future: capped at 2^31 seconds.
    assert_eq!(
        lifetime(&[("expires", "Fri, 31 Dec 9999 23:59:59 GMT")]),
        1 << 31
    );
    // max-age wins over any Expires (§5.3).
    assert_eq!(
        lifetime(&[("expires", "0"), ("cache-control", "max-age=9")]),
        9
    );
}

#[test]
fn stale_while_revalidate_never_with_must_revalidate() {
    let c = PolicyConfig::default();
    for cc in [
        "max-age=1, must-revalidate, stale-while-revalidate=60",
        "max-age=1, proxy-revalidate, stale-while-revalidate=60",
        "s-maxage=1, stale-while-revalidate=60",
    ] {
        let s = decide_with(&headers(&[("cache-control", cc)]), true, &c).unwrap();
        assert!(
            !s.freshness
                .allows_stale_while_revalidate(Duration::from_secs(1)),
            "{cc}"
        );
    }
    let s = decide_with(
        &headers(&[("cache-control", "max-age=1, stale-while-revalidate=60")]),
        true,
        &c,
    )
    .unwrap();
    assert!(s
        .freshness
        .allows_stale_while_revalidate(Duration::from_secs(1)));
    // Nothing to store then without freshness or a validator.
    assert_eq!(
        decide_with(
            &headers(&[(
                "cache-control",
                "max-age=0, must-revalidate, stale-while-revalidate=60"
            )]),
            true,
            &c
        ),
        Err(NotStored::NoFreshness)
    );
}

#[test]
fn age_field_is_read_per_section_5_1() {
    let t0 = SystemTime::now();
    let age = |values: &[&str]| {
        let mut pairs = vec![("date", httpdate::fmt_http_date(t0))];
        pairs.extend(values.iter().map(|v| ("age", v.to_string())));
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        initial_age(&headers(&pairs), t0, t0).as_secs()
    };
    assert_eq!(age(&["60"]), 60);
    assert_eq!(age(&["abc"]), 0);
    assert_eq!(age(&["-60"]), 0);
    assert_eq!(age(&["60.0"]), 0);
    assert_eq!(age(&["60,0"]), 60, "first member");
    assert_eq!(age(&["0, 60"]), 0, "first member");
    assert_eq!(age(&["60", "0"]), 60, "first member across lines");
    assert_eq!(age(&["99999999999999999999999"]), 1 << 31, "overflow");
    assert_eq!(
        age_header(Duration::from_secs(u64::MAX)),
        HeaderValue::from_static("2147483648")
    );
}

#[test]
fn a_missing_or_invalid_date_is_the_time_of_receipt() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(784111777);
    let mut h = HeaderMap::new();
    ensure_date(&mut h, t);
    assert_eq!(h[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
    let mut h = headers(&[("date", "yesterday")]);
    ensure_date(&mut h, t);
    assert_eq!(h[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
    let mut h = headers(&[("date", "Mon, 07 Nov 1994 08:49:37 GMT")]);
    ensure_date(&mut h, t);
    assert_eq!(h[DATE], "Mon, 07 Nov 1994 08:49:37 GMT");
}

#[test]
fn age_accounts_for_upstream_age_and_delay() {
    let t0 = SystemTime::now();
    let h = headers(&[("age", "10"), ("date", &httpdate::fmt_http_date(t0))]);
    let a = initial_age(&h, t0, t0 + Duration::from_secs(2));
    assert_eq!(a.as_secs(), 12);
}

fn anonymous_ttl(secs: u64) -> PolicyConfig {
    PolicyConfig {
        anonymous_ttl: Some(Duration::from_secs(secs)),
        ..PolicyConfig::default()
    }
}

/// What the real applications send anonymous visitors (issue 9's table).
#[test]
fn anonymous_ttl_stores_what_real_applications_send() {
    let c = anonymous_ttl(60);
    let apps = [
        // WordPress: no Cache-Control at all.
        headers(&[("content-type", "text/html; charset=UTF-8")]),
        // MediaWiki to anonymous readers without $wgUseCdn.
        headers(&[
            ("cache-control", "private, must-revalidate, max-age=0"),
            ("content-type", "text/html; charset=UTF-8"),
            ("vary", "Accept-Encoding, Cookie"),
            ("last-modified", "Mon, 23 Nov 2026 10:00:00 GMT"),
        ]),
        // DokuWiki, XE, gnuboard: PHP's session headers and a fresh session every page.
        headers(&[
            ("cache-control", "no-store, no-cache, must-revalidate"),
            ("expires", "Thu, 19 Nov 1981 08:52:00 GMT"),
            ("pragma", "no-cache"),
            ("set-cookie", "PHPSESSID=abc; path=/; HttpOnly"),
            ("content-type", "text/html; charset=utf-8"),
        ]),
    ];
    for h in &apps {
        assert!(
            decide_with(h, true, &PolicyConfig::default()).is_err(),
            "{h:?}"
        );
        let s = decide_with(h, true, &c).unwrap_or_else(|e| panic!("{h:?}: {e:?}"));
        assert_eq!(s.freshness.lifetime, Duration::from_secs(60));
        assert!(!s.freshness.no_cache && !s.freshness.must_revalidate);
        // Never for a request with a session.
        assert!(decide_with(h, false, &c).is_err(), "{h:?}");
    }
    let session = decide_with(&apps[2], true, &c).unwrap();
    assert!(
        session.strip_set_cookie,
        "the session-starting cookie is dropped"
    );
}

#[test]
fn anonymous_ttl_never_overrides_what_makes_a_page_personal() {
    let c = anonymous_ttl(60);
    for (h, why) in [
        (
            headers(&[
                ("content-type", "text/html"),
                ("set-cookie", "wp_lang=ko; path=/"),
            ]),
            "a cookie that is not a session's",
        ),
        (
            headers(&[("content-type", "text/html"), ("vary", "User-Agent")]),
            "a Vary other than Cookie and Accept-Encoding",
        ),
        (
            headers(&[("content-type", "text/html"), ("vary", "*")]),
            "Vary: *",
        ),
        (headers(&[("content-type", "application/json")]), "not HTML"),
    ] {
        assert!(decide_with(&h, true, &c).is_err(), "{why}");
    }
    // Not a 200.
    let cc = CacheControl::default();
    let h = headers(&[("content-type", "text/html"), ("cache-control", "private")]);
    let c404 = Candidate {
        method: &Method::GET,
        request_cc: &cc,
        anonymous: true,
        status: StatusCode::NOT_FOUND,
        headers: &h,
        now: SystemTime::now(),
    };
    assert!(decide(&c404, &c, &|_| false).is_err());
    // The request's no-store still wins.
    let no_store = CacheControl {
        no_store: true,
        ..CacheControl::default()
    };
    let c200 = Candidate {
        request_cc: &no_store,
        status: StatusCode::OK,
        ..c404
    };
    assert_eq!(
        decide(&c200, &c, &|_| false),
        Err(NotStored::RequestNoStore)
    );
}

#[test]
fn anonymous_ttl_keeps_explicit_freshness() {
    let h = headers(&[
        ("content-type", "text/html"),
        ("cache-control", "public, max-age=3600"),
    ]);
    let s = decide_with(&h, true, &anonymous_ttl(60)).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(3600));
    let short = headers(&[
        ("content-type", "text/html"),
        ("cache-control", "public, max-age=5"),
    ]);
    let s = decide_with(&short, true, &anonymous_ttl(60)).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(5));
}

#[test]
fn a_targeted_field_replaces_cache_control_and_expires() {
    // RFC 9213 §2.2 and §3.1's examples.
    let c = PolicyConfig::default();
    let h = headers(&[
        ("cache-control", "no-store"),
        ("cdn-cache-control", "max-age=600"),
    ]);
    let s = decide_with(&h, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(600));
    let h = headers(&[
        ("cache-control", "max-age=600"),
        ("cdn-cache-control", "no-store"),
    ]);
    assert_eq!(decide_with(&h, true, &c), Err(NotStored::NoStore));
    // Expires is ignored too: no explicit freshness, and no validator.
    let now = SystemTime::now();
    let h = headers(&[
        ("date", &httpdate::fmt_http_date(now)),
        (
            "expires",
            &httpdate::fmt_http_date(now + Duration::from_secs(100)),
        ),
        ("cdn-cache-control", "public"),
        ("content-type", "image/png"),
    ]);
    assert_eq!(decide_with(&h, true, &c), Err(NotStored::NoFreshness));
    // Levee-Cache-Control comes before CDN-Cache-Control.
    let h = headers(&[
        ("cdn-cache-control", "max-age=600"),
        ("levee-cache-control", "max-age=5"),
    ]);
    let s = decide_with(&h, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(5));
}

#[test]
fn an_invalid_targeted_field_leaves_cache_control_in_charge() {
    let c = PolicyConfig::default();
    let h = headers(&[
        ("cache-control", "max-age=60"),
        ("cdn-cache-control", "Max-Age=600"),
    ]);
    let s = decide_with(&h, true, &c).unwrap();
    assert_eq!(s.freshness.lifetime, Duration::from_secs(60));
}

#[test]
fn the_anonymous_ttl_never_overrides_a_targeted_field() {
    let h = headers(&[
        ("content-type", "text/html"),
        ("cache-control", "no-store"),
        ("cdn-cache-control", "no-store"),
    ]);
    assert_eq!(
        decide_with(&h, true, &anonymous_ttl(60)),
        Err(NotStored::NoStore)
    );
    let h = headers(&[("content-type", "text/html"), ("cache-control", "no-store")]);
    assert!(decide_with(&h, true, &anonymous_ttl(60)).is_ok());
}

#[test]
fn expires_in_the_obsolete_formats_and_in_any_case_is_read() {
    // RFC 9110 §5.6.7: a recipient parses all three formats. A date 2 hours after
    // 2026-11-25 00:00:00 GMT, the response's Date.
    let date = "Wed, 25 Nov 2026 00:00:00 GMT";
    for expires in [
        "Wed, 25 Nov 2026 02:00:00 GMT",
        "wed, 25 nov 2026 02:00:00 gmt",
        "Wednesday, 25-Nov-26 02:00:00 GMT",
        "Wed Nov 25 02:00:00 2026",
    ] {
        let h = headers(&[("date", date), ("expires", expires)]);
        let s = decide_with(&h, true, &PolicyConfig::default()).unwrap();
        assert_eq!(s.freshness.lifetime, Duration::from_secs(7200), "{expires}");
    }
}

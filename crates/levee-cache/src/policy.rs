//! RFC 9111 for a shared cache: may a response be stored, for how long is it fresh, and
//! may it be served stale.
//!
//! Written from the RFC rather than with `http-cache-semantics`: that crate builds a
//! serialisable policy object per response and has no place for the two rules levee
//! adds on top of the RFC (dropping a session-starting `Set-Cookie` for anonymous
//! requests, and micro-caching), and it would put allocations on the hit path.

use std::time::{Duration, SystemTime};

use http::header::{
    HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, DATE, ETAG, EXPIRES, LAST_MODIFIED,
    SET_COOKIE, VARY,
};
use http::{Method, StatusCode};

use crate::cache_control::CacheControl;

/// Knobs of the storage policy, taken from the settings.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    pub heuristic: bool,
    pub heuristic_fraction: f64,
    pub heuristic_max: Duration,
    pub micro_cache: Option<Duration>,
    pub grace: Duration,
    pub keep: Duration,
    pub max_object_size: u64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            heuristic: true,
            heuristic_fraction: 0.1,
            heuristic_max: Duration::from_secs(86400),
            micro_cache: None,
            grace: Duration::from_secs(3600),
            keep: Duration::from_secs(3600),
            max_object_size: 16 << 20,
        }
    }
}

/// Why a response was not stored. Shown in `X-Cache-Reason` with `--debug-headers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStored {
    Method,
    Status,
    RequestNoStore,
    NoStore,
    Private,
    SetCookie,
    VaryStar,
    NoFreshness,
    TooLarge,
    /// The request carried a session cookie or `Authorization`.
    Session,
    /// The path matched a never-cache rule.
    PassPath,
    /// The key recently produced an uncacheable response.
    HitForMiss,
}

impl NotStored {
    pub fn as_str(self) -> &'static str {
        match self {
            NotStored::Method => "method-not-cacheable",
            NotStored::Status => "status-not-cacheable",
            NotStored::RequestNoStore => "request-no-store",
            NotStored::NoStore => "no-store",
            NotStored::Private => "private",
            NotStored::SetCookie => "sets-non-session-cookie",
            NotStored::VaryStar => "vary-star",
            NotStored::NoFreshness => "no-freshness-no-validator",
            NotStored::TooLarge => "too-large",
            NotStored::Session => "session-or-authorization",
            NotStored::PassPath => "pass-path",
            NotStored::HitForMiss => "hit-for-miss",
        }
    }
}

/// How a stored response may be reused, fixed when it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    pub lifetime: Duration,
    pub stale_while_revalidate: Duration,
    pub stale_if_error: Duration,
    /// Never served stale without revalidation (must-revalidate, proxy-revalidate, s-maxage).
    pub must_revalidate: bool,
    /// Revalidate before every reuse.
    pub no_cache: bool,
    /// Serve stale on backend failure this long (grace), unless `must_revalidate`.
    pub grace: Duration,
    /// How long past freshness the entry is worth keeping at all.
    pub retain: Duration,
}

impl Freshness {
    /// May a response this stale be served while one revalidation runs in the background?
    pub fn allows_stale_while_revalidate(&self, staleness: Duration) -> bool {
        !self.no_cache && staleness <= self.stale_while_revalidate
    }

    /// May a response this stale be served because the backend failed or is overloaded?
    pub fn allows_stale_on_error(&self, staleness: Duration) -> bool {
        if self.no_cache {
            return false;
        }
        let grace = if self.must_revalidate {
            Duration::ZERO
        } else {
            self.grace
        };
        staleness <= self.stale_if_error.max(grace)
            && (self.stale_if_error > Duration::ZERO || grace > Duration::ZERO)
    }
}

/// Status codes whose responses may be stored, and whether they are heuristically
/// cacheable (RFC 9110 §15.1). Others (206, 304, most errors) are never stored.
fn status_class(status: StatusCode) -> Option<bool> {
    match status.as_u16() {
        200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501 => Some(true),
        302 | 303 | 307 | 451 => Some(false),
        _ => None,
    }
}

fn header_date(headers: &HeaderMap, name: http::header::HeaderName) -> Option<SystemTime> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| httpdate::parse_http_date(s).ok())
}

/// The inputs of a storage decision about one response.
pub struct Candidate<'a> {
    pub method: &'a Method,
    pub request_cc: &'a CacheControl,
    /// The request carried no session cookie (it is safe to drop a session-starting
    /// `Set-Cookie` from the response).
    pub anonymous: bool,
    pub status: StatusCode,
    pub headers: &'a HeaderMap,
    /// When the response was received.
    pub now: SystemTime,
}

/// What to do with a storable response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storable {
    pub freshness: Freshness,
    /// `Set-Cookie` lines that only start a session and must be removed before storing.
    pub strip_set_cookie: bool,
}

/// Decides whether a response may be stored (RFC 9111 §3) and for how long it is fresh
/// (§4.2.1), with levee's two additions (session-cookie stripping, micro-cache).
pub fn decide(
    c: &Candidate<'_>,
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Result<Storable, NotStored> {
    if c.method != Method::GET {
        return Err(NotStored::Method);
    }
    let heuristic_status = status_class(c.status).ok_or(NotStored::Status)?;
    if c.request_cc.no_store {
        return Err(NotStored::RequestNoStore);
    }
    let cc = CacheControl::from_headers(c.headers);
    if cc.no_store {
        return Err(NotStored::NoStore);
    }
    if cc.private {
        return Err(NotStored::Private);
    }
    for v in c.headers.get_all(VARY) {
        match v.to_str() {
            Ok(s) if s.split(',').any(|f| f.trim() == "*") => return Err(NotStored::VaryStar),
            Ok(_) => {}
            Err(_) => return Err(NotStored::VaryStar),
        }
    }
    if let Some(len) = c
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
    {
        if len > config.max_object_size {
            return Err(NotStored::TooLarge);
        }
    }

    // Set-Cookie: a shared cache must never hand one client's cookie to another. A
    // response that only starts a session for an anonymous client may be stored without
    // it; any other cookie makes the response personal.
    let mut strip_set_cookie = false;
    for v in c.headers.get_all(SET_COOKIE) {
        let name = v
            .to_str()
            .ok()
            .and_then(|s| s.split_once('='))
            .map(|(n, _)| n.trim())
            .unwrap_or("");
        if c.anonymous && !name.is_empty() && is_session_cookie(name) {
            strip_set_cookie = true;
        } else {
            return Err(NotStored::SetCookie);
        }
    }

    let date = header_date(c.headers, DATE).unwrap_or(c.now);
    let is_html = c
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|s| s.trim_start().to_ascii_lowercase().starts_with("text/html"));
    let micro = config
        .micro_cache
        .filter(|_| c.anonymous && c.status == StatusCode::OK && is_html);
    // PHP's session_start() adds `Expires: Thu, 19 Nov 1981 08:52:00 GMT` to every page
    // (session.cache_limiter): a date in the past, which says "do not cache", the very
    // thing the operator asked micro-caching to override. For an anonymous page only
    // (no cookie was sent, so nothing in it is personal), it counts as no freshness.
    let expired_marker = header_date(c.headers, EXPIRES).is_none_or(|e| e <= date);
    let explicit = if let Some(s) = cc.s_maxage {
        Some(Duration::from_secs(s))
    } else if let Some(m) = cc.max_age {
        Some(Duration::from_secs(m))
    } else if micro.is_some() && expired_marker {
        None
    } else if c.headers.contains_key(EXPIRES) {
        // An invalid Expires (e.g. "0") means already expired (RFC 9111 §5.3).
        Some(
            header_date(c.headers, EXPIRES)
                .and_then(|e| e.duration_since(date).ok())
                .unwrap_or(Duration::ZERO),
        )
    } else {
        None
    };

    let lifetime = match explicit {
        Some(l) => l,
        None => match micro {
            Some(ttl) => ttl,
            _ if config.heuristic && (heuristic_status || cc.public) => {
                match header_date(c.headers, LAST_MODIFIED)
                    .and_then(|lm| date.duration_since(lm).ok())
                {
                    Some(since) => since
                        .mul_f64(config.heuristic_fraction)
                        .min(config.heuristic_max),
                    None => Duration::ZERO,
                }
            }
            _ => Duration::ZERO,
        },
    };
    let has_validator = c.headers.contains_key(ETAG) || c.headers.contains_key(LAST_MODIFIED);
    let swr = Duration::from_secs(cc.stale_while_revalidate.unwrap_or(0));
    let sie = Duration::from_secs(cc.stale_if_error.unwrap_or(0));
    if (lifetime.is_zero() || cc.no_cache) && !has_validator && swr.is_zero() {
        return Err(NotStored::NoFreshness);
    }
    let must_revalidate = cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some();
    let grace = config.grace;
    let mut retain = swr.max(sie);
    if !must_revalidate {
        retain = retain.max(grace);
    }
    if has_validator {
        retain += config.keep;
    }
    Ok(Storable {
        freshness: Freshness {
            lifetime,
            stale_while_revalidate: swr,
            stale_if_error: sie,
            must_revalidate,
            no_cache: cc.no_cache,
            grace,
            retain,
        },
        strip_set_cookie,
    })
}

/// The `Age` a response had when it arrived (RFC 9111 §4.2.3 `corrected_initial_age`).
pub fn initial_age(
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let age_value = headers
        .get(http::header::AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or_default();
    let date = header_date(headers, DATE).unwrap_or(response_time);
    let apparent = response_time.duration_since(date).unwrap_or_default();
    let delay = response_time
        .duration_since(request_time)
        .unwrap_or_default();
    apparent.max(age_value + delay)
}

/// `HeaderValue` of whole seconds, as `Age` wants it.
pub fn age_header(age: Duration) -> HeaderValue {
    HeaderValue::from(age.as_secs())
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn age_accounts_for_upstream_age_and_delay() {
        let t0 = SystemTime::now();
        let h = headers(&[("age", "10"), ("date", &httpdate::fmt_http_date(t0))]);
        let a = initial_age(&h, t0, t0 + Duration::from_secs(2));
        assert_eq!(a.as_secs(), 12);
    }
}

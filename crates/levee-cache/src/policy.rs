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

use crate::cache_control::{CacheControl, DELTA_SECONDS_MAX};

/// Knobs of the storage policy, taken from the settings.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    pub heuristic: bool,
    pub heuristic_fraction: f64,
    pub heuristic_max: Duration,
    pub micro_cache: Option<Duration>,
    /// Store anonymous HTML pages this long whatever the application's headers say
    /// (see [`anonymous_page`]); off by default, on in presets.
    pub anonymous_ttl: Option<Duration>,
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
            anonymous_ttl: None,
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
    HitForPass,
    /// What is stored or being fetched is another variant (`Vary`) than this request's.
    OtherVariant,
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
            NotStored::HitForPass => "hit-for-pass",
            NotStored::OtherVariant => "another-variant",
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
    ///
    /// Never for must-revalidate, proxy-revalidate or s-maxage: RFC 9111 §4.2.4 forbids
    /// generating a stale response when such a directive applies, and when directives
    /// conflict the most restrictive one wins (§4.2.1).
    ///
    /// Without the directive, not even at the instant the response turns stale (the
    /// lookup's unit tests found that edge served stale).
    pub fn allows_stale_while_revalidate(&self, staleness: Duration) -> bool {
        !self.no_cache
            && !self.must_revalidate
            && !self.stale_while_revalidate.is_zero()
            && staleness <= self.stale_while_revalidate
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

/// Heuristically cacheable status codes (RFC 9111 §4.2.2): RFC 9110 §15.1's list, less
/// 206 (levee does not store partial content), plus 451 (RFC 7725 §3).
fn heuristically_cacheable(code: u16) -> bool {
    matches!(
        code,
        200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 451 | 501
    )
}

/// Final status codes whose caching requirements levee implements, for `must-understand`
/// (RFC 9111 §5.2.2.3): the codes RFC 9110 §15 defines (they have no requirements beyond
/// those of §3 and §4, save 206, which levee does not store), 429 and 451.
fn understood(code: u16) -> bool {
    matches!(
        code,
        200..=205
            | 300..=305
            | 307
            | 308
            | 400..=418
            | 421
            | 422
            | 426
            | 429
            | 451
            | 500..=505
    ) && code != 304
}

fn header_date(headers: &HeaderMap, name: http::header::HeaderName) -> Option<SystemTime> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::date::parse_http_date)
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
/// (§4.2.1), with levee's additions: session-cookie stripping, micro-cache, and the
/// opt-in anonymous TTL, which overrides what the application says about anonymous
/// pages.
pub fn decide(
    c: &Candidate<'_>,
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Result<Storable, NotStored> {
    // RFC 9213 §2.2: a targeted field, valid and non-empty, is levee's policy for this
    // response; Cache-Control and Expires are then ignored.
    let targeted = crate::targeted::targeted(c.headers);
    let directives = match &targeted {
        Some(cc) => Directives::Targeted(cc),
        None => Directives::CacheControl(CacheControl::from_headers(c.headers)),
    };
    let rfc = decide_rfc(c, &directives, config, is_session_cookie);
    // A targeted field is the application speaking to levee itself: the anonymous TTL,
    // which overrides what applications say to every cache, does not override it.
    let Some(ttl) = config
        .anonymous_ttl
        .filter(|_| c.anonymous && targeted.is_none())
    else {
        return rfc;
    };
    match &rfc {
        // The application gave shared caches a freshness of its own: it is respected.
        Ok(s) if !s.freshness.no_cache && !s.freshness.lifetime.is_zero() => rfc,
        // What no anonymous TTL overrides: the request's no-store, a cookie that is not
        // a session's, a body too large, or a response not meant for everyone alike.
        Err(
            NotStored::RequestNoStore
            | NotStored::SetCookie
            | NotStored::TooLarge
            | NotStored::VaryStar
            | NotStored::Method,
        ) => rfc,
        _ => anonymous_page(c, config, ttl, is_session_cookie).map_or(rfc, Ok),
    }
}

/// The anonymous TTL (the Varnish recipe of the seeds, made safe by levee's session
/// rules): a 200 HTML page for a request without a session is stored for `ttl` even if
/// the application says `private`, `no-store`, `no-cache`, `max-age=0` or sends a past
/// `Expires` (PHP's session headers), as long as its only `Set-Cookie` starts a session
/// (dropped) and it varies on nothing but `Cookie` and `Accept-Encoding`. Clients still
/// get the application's own `Cache-Control`: only levee reuses the page.
fn anonymous_page(
    c: &Candidate<'_>,
    config: &PolicyConfig,
    ttl: Duration,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Option<Storable> {
    if c.method != Method::GET || c.status != StatusCode::OK || c.request_cc.no_store {
        return None;
    }
    if !is_html(c.headers) {
        return None;
    }
    for v in c.headers.get_all(VARY) {
        let ok = v.to_str().ok()?.split(',').all(|f| {
            let f = f.trim();
            f.is_empty()
                || f.eq_ignore_ascii_case("cookie")
                || f.eq_ignore_ascii_case("accept-encoding")
        });
        if !ok {
            return None;
        }
    }
    let mut strip_set_cookie = false;
    for v in c.headers.get_all(SET_COOKIE) {
        let name = v.to_str().ok()?.split_once('=')?.0.trim();
        if name.is_empty() || !is_session_cookie(name) {
            return None;
        }
        strip_set_cookie = true;
    }
    let has_validator = c.headers.contains_key(ETAG) || c.headers.contains_key(LAST_MODIFIED);
    let mut retain = config.grace;
    if has_validator {
        retain += config.keep;
    }
    Some(Storable {
        freshness: Freshness {
            lifetime: ttl.min(Duration::from_secs(DELTA_SECONDS_MAX)),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: config.grace,
            retain,
        },
        strip_set_cookie,
    })
}

fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|s| s.trim_start().to_ascii_lowercase().starts_with("text/html"))
}

/// Where a response's directives come from.
enum Directives<'a> {
    /// `Cache-Control`, with `Expires`.
    CacheControl(CacheControl),
    /// A targeted field (RFC 9213): `Expires` does not count.
    Targeted(&'a CacheControl),
}

/// RFC 9111 §3 and §4.2.1, with session-cookie stripping and micro-caching.
fn decide_rfc(
    c: &Candidate<'_>,
    directives: &Directives<'_>,
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Result<Storable, NotStored> {
    if c.method != Method::GET {
        return Err(NotStored::Method);
    }
    // RFC 9111 §3: only final responses; 206 and 304 only by a cache that understands
    // them, and levee neither combines partial content nor stores a 304 on its own.
    let code = c.status.as_u16();
    if code < 200 || code == 206 || code == 304 {
        return Err(NotStored::Status);
    }
    if c.request_cc.no_store {
        return Err(NotStored::RequestNoStore);
    }
    let (cc, use_expires) = match directives {
        Directives::CacheControl(cc) => (cc, true),
        Directives::Targeted(cc) => (*cc, false),
    };
    // §3 and §5.2.2.3: with must-understand, only a status code levee understands may be
    // stored, and then no-store (which such responses carry for older caches) is ignored.
    if cc.must_understand && !understood(code) {
        return Err(NotStored::Status);
    }
    if cc.no_store && !cc.must_understand {
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
    let micro = config
        .micro_cache
        .filter(|_| c.anonymous && c.status == StatusCode::OK && is_html(c.headers));
    // PHP's session_start() adds `Expires: Thu, 19 Nov 1981 08:52:00 GMT` to every page
    // (session.cache_limiter): a date in the past, which says "do not cache", the very
    // thing the operator asked micro-caching to override. For an anonymous page only
    // (no cookie was sent, so nothing in it is personal), it counts as no freshness.
    let expired_marker = header_date(c.headers, EXPIRES).is_none_or(|e| e <= date);
    let explicit = if let Some(s) = cc.s_maxage {
        Some(Duration::from_secs(s))
    } else if let Some(m) = cc.max_age {
        Some(Duration::from_secs(m))
    } else if !use_expires || (micro.is_some() && expired_marker) {
        None
    } else {
        expires_lifetime(c.headers, date)
    };
    // §3: a response whose status is not heuristically cacheable needs explicit freshness
    // or `public` to be stored at all (a validator alone does not do).
    let heuristic_status = heuristically_cacheable(code);
    if explicit.is_none() && !heuristic_status && !cc.public {
        return Err(NotStored::Status);
    }

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
    }
    // An Expires in year 9999 is fresh long enough; capped like delta-seconds (§1.2.2).
    .min(Duration::from_secs(DELTA_SECONDS_MAX));
    let has_validator = c.headers.contains_key(ETAG) || c.headers.contains_key(LAST_MODIFIED);
    let must_revalidate = cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some();
    let mut swr = Duration::from_secs(cc.stale_while_revalidate.unwrap_or(0));
    // A micro-cached page's freshness is the operator's, not the application's: for as
    // long again, the old copy is served while one request refreshes it in the
    // background (nginx's `fastcgi_cache_use_stale updating`), so that no reader waits for
    // the page to be rendered every few seconds. Past that, a reader waits, behind
    // coalescing: a page is never more than twice the micro TTL old.
    if let (None, Some(ttl)) = (explicit, micro) {
        swr = swr.max(ttl);
    }
    let sie = Duration::from_secs(cc.stale_if_error.unwrap_or(0));
    // Without freshness or a validator, only stale-while-revalidate could make a stored
    // copy useful, and not when the response forbids serving it stale.
    let swr_usable = !swr.is_zero() && !must_revalidate && !cc.no_cache;
    if (lifetime.is_zero() || cc.no_cache) && !has_validator && !swr_usable {
        return Err(NotStored::NoFreshness);
    }
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

/// The lifetime an `Expires` gives relative to `date`, if there is one (RFC 9111 §4.2.1).
///
/// An invalid date, especially "0", means already expired (§5.3). Several field lines
/// that disagree make the response stale (§4.2.1: "either the first occurrence should be
/// used or the response should be considered stale").
fn expires_lifetime(headers: &HeaderMap, date: SystemTime) -> Option<Duration> {
    let mut lines = headers.get_all(EXPIRES).iter();
    let first = lines.next()?;
    if lines.any(|v| v != first) {
        return Some(Duration::ZERO);
    }
    Some(
        first
            .to_str()
            .ok()
            .and_then(crate::date::parse_http_date)
            .and_then(|e| e.duration_since(date).ok())
            .unwrap_or(Duration::ZERO),
    )
}

/// `age_value` of RFC 9111 §4.2.3: the `Age` field as §5.1 says to read it. Of a
/// list-based value (several members or field lines) the first member counts; an invalid
/// one (not a non-negative integer) is ignored; one too large counts as 2^31 (§1.2.2).
fn age_value(headers: &HeaderMap) -> Duration {
    let first = headers
        .get(http::header::AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.split(',').next())
        .map(str::trim)
        .unwrap_or("");
    if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Duration::ZERO;
    }
    let secs = first
        .parse::<u64>()
        .unwrap_or(DELTA_SECONDS_MAX)
        .min(DELTA_SECONDS_MAX);
    Duration::from_secs(secs)
}

/// The `Age` a response had when it arrived (RFC 9111 §4.2.3 `corrected_initial_age`).
pub fn initial_age(
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let date = header_date(headers, DATE).unwrap_or(response_time);
    let apparent = response_time.duration_since(date).unwrap_or_default();
    let delay = response_time
        .duration_since(request_time)
        .unwrap_or_default();
    apparent.max(age_value(headers) + delay)
}

/// `HeaderValue` of whole seconds, as `Age` wants it; at most 2^31 (RFC 9111 §5.1: an age
/// that overflows is sent as 2147483648).
pub fn age_header(age: Duration) -> HeaderValue {
    crate::headers::decimal(age.as_secs().min(DELTA_SECONDS_MAX))
}

/// Gives a response without a valid `Date` the time it was received: RFC 9110 §6.6.1
/// (a recipient with a clock MUST add one to a response it caches or forwards without
/// one, and MAY replace an invalid one), so that hits show when it was generated rather
/// than the time of each hit.
pub fn ensure_date(headers: &mut HeaderMap, received: SystemTime) {
    if header_date(headers, DATE).is_none() {
        if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(received)) {
            headers.insert(DATE, v);
        }
    }
}

#[cfg(test)]
mod tests;

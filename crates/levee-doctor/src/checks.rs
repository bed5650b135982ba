//! From the recorded exchanges of one URL to every reason a shared cache cannot (or
//! cannot well) serve it: pure, tested without a network. Whether it is storable at all
//! is levee-cache's RFC 9111 decision (`policy::decide`) as a plain shared cache makes
//! it: no levee additions, a `Set-Cookie` kept personal.

use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap};
use http::{Method, StatusCode};
use levee_cache::policy::{self, Candidate};
use levee_cache::{CacheControl, PolicyConfig};
use serde::Serialize;

use crate::fetch::Exchange;

/// The exchanges made for one URL: the same GET twice (two anonymous visitors), then a
/// conditional GET with the first's validators, then a GET without `Accept-Encoding`.
#[derive(Debug, Clone)]
pub struct Probe {
    pub first: Exchange,
    pub second: Option<Exchange>,
    pub conditional: Option<Exchange>,
    pub identity: Option<Exchange>,
}

/// One problem found, by a stable `id` (for `--json`) and what it means for this page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    pub id: &'static str,
    pub detail: String,
    /// levee makes up for it by itself (compression, keep-alive, 304s from its cache).
    pub levee_fixes: bool,
}

fn reason(id: &'static str, detail: impl Into<String>) -> Reason {
    Reason {
        id,
        detail: detail.into(),
        levee_fixes: matches!(id, "no-compression" | "no-keep-alive" | "no-304"),
    }
}

/// Storable by a shared cache that follows RFC 9111 and nothing more, and reusable
/// without asking the server (fresh for some time).
pub fn storable(ex: &Exchange) -> bool {
    let candidate = Candidate {
        method: &Method::GET,
        request_cc: &CacheControl::default(),
        anonymous: false,
        status: ex.status,
        headers: &ex.headers,
        now: ex.received,
    };
    let config = PolicyConfig {
        micro_cache: None,
        anonymous_ttl: None,
        ..PolicyConfig::default()
    };
    matches!(policy::decide(&candidate, &config, &|_| false),
        Ok(s) if !s.freshness.no_cache && !s.freshness.lifetime.is_zero())
}

/// Every reason found in `probe`; `is_session` names the cookies that mean a session.
pub fn reasons(probe: &Probe, is_session: &dyn Fn(&str) -> bool) -> Vec<Reason> {
    let ex = &probe.first;
    let h = &ex.headers;
    let cc = CacheControl::from_headers(h);
    let mut out = Vec::new();
    if ex.status != StatusCode::OK {
        out.push(reason(
            "status",
            format!("answers {} rather than 200", ex.status),
        ));
    }
    cookies(probe, is_session, &mut out);
    if cc.private {
        out.push(reason(
            "private",
            "Cache-Control: private: no shared cache may store it",
        ));
    }
    if cc.no_store {
        out.push(reason(
            "no-store",
            "Cache-Control: no-store: no cache may store it",
        ));
    }
    if cc.no_cache {
        out.push(reason(
            "no-cache",
            "Cache-Control: no-cache: every reuse must ask the server first",
        ));
    }
    if let Some(why) = no_freshness(&cc, h, ex.received) {
        out.push(reason("no-freshness", why));
    }
    vary(h, &mut out);
    let has_validator = h.contains_key(header::ETAG) || h.contains_key(header::LAST_MODIFIED);
    if !has_validator {
        out.push(reason(
            "no-validator",
            "no ETag nor Last-Modified: a stale copy cannot be revalidated, only fetched again",
        ));
    } else if let Some(c) = &probe.conditional {
        if c.status != StatusCode::NOT_MODIFIED {
            out.push(reason(
                "no-304",
                format!(
                    "a conditional request with its validators got {} instead of 304 Not Modified",
                    c.status
                ),
            ));
        }
    }
    age_and_date(h, ex.received, cc.s_maxage.or(cc.max_age), &mut out);
    compression(probe, &mut out);
    if [Some(&probe.first), probe.second.as_ref()]
        .into_iter()
        .flatten()
        .any(|e| e.closed)
    {
        out.push(reason(
            "no-keep-alive",
            "the server closes the connection after each response: every request pays a new connection",
        ));
    }
    out
}

/// Cookies set on an anonymous page: a session started (a name that means one, or a
/// value new for each visitor), or another cookie that is not everyone's alike.
fn cookies(probe: &Probe, is_session: &dyn Fn(&str) -> bool, out: &mut Vec<Reason>) {
    let first = probe.first.set_cookies();
    let second = probe.second.as_ref().map(Exchange::set_cookies);
    let mut sessions = Vec::new();
    let mut differing = Vec::new();
    let mut others = Vec::new();
    for (name, value) in &first {
        if value.is_empty() || value == "deleted" {
            continue;
        }
        let differs = second
            .as_ref()
            .is_some_and(|s| s.iter().any(|(n, v)| n == name && v != value));
        if is_session(name) {
            sessions.push(name.clone());
        } else if differs {
            differing.push(name.clone());
        } else {
            others.push(name.clone());
        }
    }
    if !sessions.is_empty() {
        out.push(reason(
            "session-cookie",
            format!(
                "starts a session for every anonymous visitor (Set-Cookie: {}): a page with a session is personal to most caches",
                sessions.join(", ")
            ),
        ));
    }
    if !differing.is_empty() {
        out.push(reason(
            "cookie-differs",
            format!(
                "sets a cookie whose value differs for each visitor (Set-Cookie: {}): a counter or tracking id makes every page personal",
                differing.join(", ")
            ),
        ));
    }
    if !others.is_empty() {
        out.push(reason(
            "set-cookie",
            format!(
                "sets a cookie on an anonymous page (Set-Cookie: {}): shared caches do not store such pages",
                others.join(", ")
            ),
        ));
    }
}

/// Why the response is not fresh for a shared cache, if it is not.
fn no_freshness(cc: &CacheControl, h: &HeaderMap, received: SystemTime) -> Option<String> {
    if cc.s_maxage.is_some_and(|s| s > 0) {
        return None;
    }
    if cc.s_maxage == Some(0) {
        return Some("s-maxage=0: shared caches must revalidate every time".into());
    }
    match cc.max_age {
        Some(0) => return Some("max-age=0 without s-maxage: stale at once".into()),
        Some(_) => return None,
        None => {}
    }
    let date = |name| {
        h.get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .and_then(|s| httpdate::parse_http_date(s).ok())
    };
    if h.contains_key(header::EXPIRES) {
        let now = date(header::DATE).unwrap_or(received);
        return match date(header::EXPIRES) {
            Some(e) if e > now => None,
            _ => Some(
                "Expires in the past (PHP's session cache limiter sends 1981): stale at once"
                    .into(),
            ),
        };
    }
    if h.contains_key(header::LAST_MODIFIED) {
        return None;
    }
    Some("no Cache-Control max-age, Expires or Last-Modified: a cache cannot tell how long the page stays fresh".into())
}

fn vary(h: &HeaderMap, out: &mut Vec<Reason>) {
    let fields: Vec<String> = h
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .map(|f| f.trim().to_ascii_lowercase())
        .collect();
    if fields.iter().any(|f| f == "*") {
        out.push(reason(
            "vary-star",
            "Vary: *: no stored copy can ever be reused",
        ));
    }
    if fields.iter().any(|f| f == "cookie") {
        out.push(reason(
            "vary-cookie",
            "Vary: Cookie: one copy per distinct Cookie header, so one per visitor with analytics cookies",
        ));
    }
}

/// `Date` missing or far from this machine's clock; `Age` invalid or beyond freshness.
fn age_and_date(h: &HeaderMap, received: SystemTime, lifetime: Option<u64>, out: &mut Vec<Reason>) {
    match h
        .get(header::DATE)
        .and_then(|v| v.to_str().ok())
        .map(httpdate::parse_http_date)
    {
        None => out.push(reason(
            "date",
            "no Date field: caches cannot compute the page's age",
        )),
        Some(Err(_)) => out.push(reason("date", "the Date field is not a valid HTTP date")),
        Some(Ok(d)) => {
            let skew = match received.duration_since(d) {
                Ok(s) => s,
                Err(e) => e.duration(),
            };
            if skew > Duration::from_secs(60) {
                out.push(reason(
                    "date",
                    format!(
                        "the server's clock is {} s off this machine's: ages and Expires will be wrong (run NTP)",
                        skew.as_secs()
                    ),
                ));
            }
        }
    }
    if let Some(age) = h.get(header::AGE).and_then(|v| v.to_str().ok()) {
        match age.trim().parse::<u64>() {
            Err(_) => out.push(reason(
                "age",
                format!("Age: {age} is not a number of seconds"),
            )),
            Ok(a) if lifetime.is_some_and(|l| a > l) => out.push(reason(
                "age",
                format!(
                    "Age: {a} is past the page's freshness: a cache in front serves stale pages"
                ),
            )),
            Ok(_) => {}
        }
    }
}

/// Text worth compressing, at least 1 KiB, sent without a content coding to a client that
/// accepts gzip and br.
fn compression(probe: &Probe, out: &mut Vec<Reason>) {
    let ex = &probe.first;
    if ex.headers.contains_key(header::CONTENT_ENCODING) {
        return;
    }
    let ty = ex
        .header(header::CONTENT_TYPE)
        .unwrap_or("")
        .to_ascii_lowercase();
    let text = ty.starts_with("text/")
        || ty.contains("json")
        || ty.contains("javascript")
        || ty.contains("xml");
    let len = probe
        .identity
        .as_ref()
        .map_or(ex.body.len(), |i| i.body.len().max(ex.body.len()));
    if text && len >= 1024 {
        out.push(reason(
            "no-compression",
            format!("{len} bytes of {ty} sent uncompressed to a browser that accepts gzip and br"),
        ));
    }
}

#[cfg(test)]
mod tests;

//! What a fill does with the backend's answer, decided without sockets: the pure half of
//! a fill, beside [`lookup`](crate::lookup()) (what to do before asking the backend).
//! The proxy's filler only carries the decision out (streams, stores, removes, marks).
//!
//! Time comes in as arguments (`Fetched`'s times, from [`crate::clock`] in levee), so
//! every branch is unit-tested with a set clock in `after_fetch/tests.rs`.

use std::time::{Duration, Instant, SystemTime};

use http::header::{self, HeaderMap, HeaderName};
use http::{Method, StatusCode};

use crate::policy::{self, Candidate, Freshness, NotStored, PolicyConfig, Storable};
use crate::{stale_on_error, CacheControl, Entry};

/// The backend's answer to a fill, and when it came (RFC 9111 §4.2.3).
pub struct Fetched<'a> {
    pub status: StatusCode,
    pub headers: &'a HeaderMap,
    /// When the request was sent and the response head received, as dates.
    pub request_time: SystemTime,
    pub response_time: SystemTime,
    /// When the head was received, on the clock ages are measured with.
    pub at: Instant,
    /// The request carried levee's validators of the stale entry and this answers them
    /// (a 304 about another representation was already retried without them).
    pub validated: bool,
}

/// What the fill asked for: its request's directives and fields (for the stale copy's
/// Vary), and the stored response it validates, if any.
pub struct Asked<'a> {
    pub request_cc: &'a CacheControl,
    pub request_headers: &'a HeaderMap,
    pub stale: Option<&'a Entry>,
}

/// What to do with the answer.
#[derive(Debug, PartialEq)]
pub enum AfterFetch {
    /// A 500, 502, 503 or 504 while the stale copy may stand in for it (RFC 5861 §4):
    /// waiters serve the copy; nothing is stored, removed or marked.
    ServeStale,
    /// A 304 confirming the stale entry (RFC 9111 §4.3.4): merge its fields into the
    /// entry with [`refresh`] and serve that.
    Refresh,
    /// A full response, streamed to the waiters.
    Full(Full),
}

/// The decision about a full response.
#[derive(Debug, PartialEq)]
pub struct Full {
    /// May it be stored, how fresh it is, whether its session `Set-Cookie` goes.
    pub storable: Result<Storable, NotStored>,
    /// RFC 9111 §4.3.3: a full response means the stored one it would replace is no
    /// longer suitable, even when the new one cannot take its place (uncacheable, too
    /// large, another Vary). A 5xx is no such answer: the backend failed.
    pub remove_stale: bool,
    /// What becomes of the key's hit-for-pass mark.
    pub mark: HitForPass,
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    pub initial_age: Duration,
}

/// The hit-for-pass mark of a key (Varnish's hit-for-pass): while set, requests for the
/// key go to the backend without waiting behind one fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitForPass {
    /// The response could not be stored: mark (or renew the mark) with this reason.
    Set(NotStored),
    /// The response could be stored: clear the mark.
    Clear,
    /// Nothing learnt about the URL (the request itself said no-store).
    Leave,
}

impl HitForPass {
    /// The mark a storage decision calls for.
    pub fn after(decision: &Result<Storable, NotStored>) -> HitForPass {
        match decision {
            Ok(_) => HitForPass::Clear,
            Err(NotStored::RequestNoStore) => HitForPass::Leave,
            Err(reason) => HitForPass::Set(*reason),
        }
    }
}

/// The decision after the backend answered a fill.
pub fn after_fetch(
    asked: &Asked<'_>,
    fetched: &Fetched<'_>,
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> AfterFetch {
    if let Some(stale) = asked.stale {
        if is_error_status(fetched.status)
            && stale_on_error(stale, fetched.at)
            && stale.vary().matches(asked.request_headers)
        {
            return AfterFetch::ServeStale;
        }
        if fetched.status == StatusCode::NOT_MODIFIED && fetched.validated {
            return AfterFetch::Refresh;
        }
    }
    let storable = decide(
        asked.request_cc,
        fetched.status,
        fetched.headers,
        fetched.response_time,
        config,
        is_session_cookie,
    );
    AfterFetch::Full(Full {
        remove_stale: asked.stale.is_some()
            && fetched.status != StatusCode::NOT_MODIFIED
            && !fetched.status.is_server_error(),
        mark: HitForPass::after(&storable),
        storable,
        initial_age: policy::initial_age(
            fetched.headers,
            fetched.request_time,
            fetched.response_time,
        ),
    })
}

/// RFC 9111 §3 and §4.2 for a fill's response: a fill's request is always anonymous (it
/// carries no cookies), so a `Set-Cookie` that only starts a session may be dropped.
pub fn decide(
    request_cc: &CacheControl,
    status: StatusCode,
    headers: &HeaderMap,
    received: SystemTime,
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Result<Storable, NotStored> {
    let candidate = Candidate {
        method: &Method::GET,
        request_cc,
        anonymous: true,
        status,
        headers,
        now: received,
    };
    policy::decide(&candidate, config, is_session_cookie)
}

/// A stale entry refreshed by a 304.
#[derive(Debug)]
pub struct Refreshed {
    /// The stored fields with the 304's merged in (RFC 9111 §3.2).
    pub headers: HeaderMap,
    /// Whether the refreshed response may still be stored (the 304 may say no-store).
    pub storable: Result<Storable, NotStored>,
    /// Its freshness: the new one, or the old one when it may not be stored (it is then
    /// served to the requests that waited, and removed).
    pub freshness: Freshness,
    /// The age of the 304 just received, not of the stored `Date`.
    pub initial_age: Duration,
}

/// Merges a 304 into the stale entry it confirmed (RFC 9111 §4.3.4) and decides again.
/// Every field of the 304 replaces the stored one, except `Content-Length`, the fields
/// that describe the stored bytes rather than the representation (`Content-Encoding`:
/// levee may have compressed them itself; `Content-Range`), and `Set-Cookie`, which a
/// shared entry never carries. `new_headers` must already have a `Date`
/// ([`policy::ensure_date`]).
pub fn refresh(
    request_cc: &CacheControl,
    stale: &Entry,
    new_headers: HeaderMap,
    fetched_times: (SystemTime, SystemTime),
    config: &PolicyConfig,
    is_session_cookie: &dyn Fn(&str) -> bool,
) -> Refreshed {
    let (request_time, response_time) = fetched_times;
    // A 304 without Date (FastCGI sends none) is as old as its Age says.
    let initial_age = policy::initial_age(&new_headers, request_time, response_time);
    let not_updated = |n: &HeaderName| {
        [
            header::CONTENT_LENGTH,
            header::CONTENT_ENCODING,
            header::CONTENT_RANGE,
            header::SET_COOKIE,
        ]
        .contains(n)
    };
    let mut headers = stale.headers.to_map();
    let mut last: Option<HeaderName> = None;
    for (name, value) in new_headers {
        // Iterating an owned HeaderMap yields the name once, then None for repeats.
        let name = match name {
            Some(n) => {
                last = Some(n.clone());
                if !not_updated(&n) {
                    headers.remove(&n);
                }
                n
            }
            None => match &last {
                Some(n) => n.clone(),
                None => continue,
            },
        };
        if !not_updated(&name) {
            headers.append(name, value);
        }
    }
    headers.remove(header::AGE);
    crate::tags::strip(&mut headers);
    let storable = decide(
        request_cc,
        stale.status(),
        &headers,
        response_time,
        config,
        is_session_cookie,
    );
    let freshness = match &storable {
        Ok(s) => s.freshness,
        Err(_) => stale.freshness(),
    };
    Refreshed {
        headers,
        storable,
        freshness,
        initial_age,
    }
}

/// RFC 5861 §4: an error is any situation that would result in a 500, 502, 503 or 504.
fn is_error_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests;

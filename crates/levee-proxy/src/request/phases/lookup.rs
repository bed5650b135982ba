//! A GET or HEAD that may use the cache. The store selects the variant, and
//! [`levee_cache::lookup`] (pure, unit-tested against RFC 9111 §4 with a set clock)
//! decides; this phase turns the decision into what happens next.

use http::header;
use http::request;
use levee_cache::{CacheControl, CacheKey, Lookup};

use crate::outcome::CacheResult;
use crate::request::next::{Next, Serve};
use crate::request::respond;
use crate::request::route::Routed;
use crate::request::shared::Shared;

pub(crate) fn lookup(
    shared: &Shared,
    site: Routed<'_>,
    parts: &request::Parts,
    key: CacheKey,
) -> Next {
    let req_cc = CacheControl::from_request_headers(&parts.headers);
    // RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are not applicable to a cache
    // (a cache MUST NOT evaluate preconditions that only apply to an origin server):
    // the backend answers them, and its answer is not stored. Unless the client forbids
    // contacting it: then they are evaluated against the stored response (RFC 9110 §13).
    let origin_preconditions = parts.headers.contains_key(header::IF_MATCH)
        || parts.headers.contains_key(header::IF_UNMODIFIED_SINCE);
    if origin_preconditions && !req_cc.only_if_cached {
        return Next::pass("origin-precondition");
    }
    let now = levee_cache::clock::now();
    let stored = shared.store.get(&key, &parts.headers);
    let serve = |entry, result| Serve {
        entry,
        result,
        now,
        waited: None,
        reason: None,
    };
    match (levee_cache::lookup(&req_cc, stored.as_deref(), now), stored) {
        (Lookup::Hit, Some(entry)) => Next::Serve(serve(entry, CacheResult::Hit)),
        (Lookup::StaleAccepted, Some(entry)) => Next::Serve(serve(entry, CacheResult::Stale)),
        (Lookup::StaleWhileRevalidate, Some(entry)) => Next::ServeAndRevalidate {
            key,
            serve: serve(entry, CacheResult::Stale),
        },
        // RFC 9111 §5.2.1.7: nothing the client may have as it is, and the client forbids
        // contacting the backend.
        (Lookup::OnlyIfCachedMiss, stored) => Next::Respond(respond::error(
            http::StatusCode::GATEWAY_TIMEOUT,
            if stored.is_some() {
                "the stored response is stale and the request said only-if-cached"
            } else {
                "the response is not in the cache and the request said only-if-cached"
            },
        )),
        // Readers never wait for a revalidation while the backend is truly saturated:
        // the copy (within grace, and not must-revalidate & co.: the rule that lets it
        // stand in for a failure; and only one that was fresh here) now, one
        // revalidation in the background. With room at the backend the revalidation is
        // made at once, so an edit reaches readers at once.
        (Lookup::Validate, Some(entry))
            if levee_cache::stale_while_busy(&entry, now)
                && site.upstream().limiter.saturated()
                && entry.vary().matches(&parts.headers) =>
        {
            Next::ServeAndRevalidate {
                key,
                serve: Serve {
                    reason: Some("backend-busy"),
                    ..serve(entry, CacheResult::Stale)
                },
            }
        }
        (Lookup::Validate, Some(entry)) => Next::Fill {
            key,
            stale: Some(entry),
        },
        // An anonymous session (anonymous.rs) gets what is stored, and its refresh (the
        // shared page, asked for without cookies, as a new visitor's would be; also
        // while a refresh replaces the entry, which is then briefly absent), never a
        // first fill of its own made without its cookies: a URL nobody stored may need
        // the session (a captcha, a login's callback). It goes as it is; the answer is
        // not stored.
        (_, None)
            if site.sessions.holds_anonymous(&parts.headers)
                && shared.fills.get(&key).is_none() =>
        {
            Next::pass("anonymous-session")
        }
        (_, stored) => {
            // The last response for this URL could not be stored: for a while, requests
            // go to the backend as they are (Varnish's hit-for-pass), without a fill that
            // would only copy the body through a second task. The pass renews the mark
            // while the URL stays uncacheable, and clears it once it is not.
            if stored.is_none() {
                if let Some(reason) = shared.hit_for_pass.get(&key) {
                    return Next::Pass {
                        reason: reason.as_str().into(),
                        marked: Some(key),
                    };
                }
            }
            Next::Fill { key, stale: stored }
        }
    }
}

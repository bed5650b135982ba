//! Phase 2: a GET or HEAD that may use the cache. The store selects the variant, and
//! [`levee_cache::lookup`] (pure, unit-tested against RFC 9111 §4 with a set clock)
//! decides; this module only carries the decision out.

use std::sync::Arc;

use http::header;
use http::request;
use hyper::body::Incoming;
use levee_cache::{CacheControl, CacheKey, Lookup};

use super::respond::{self, XCache};
use super::shared::Shared;
use super::{fill, pass, Resp};
use crate::upstream::ConnInfo;

pub(crate) async fn cached(
    shared: &Arc<Shared>,
    parts: request::Parts,
    body: Incoming,
    key: CacheKey,
    conn: ConnInfo,
) -> Resp {
    let req_cc = CacheControl::from_request_headers(&parts.headers);
    // RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are not applicable to a cache
    // (a cache MUST NOT evaluate preconditions that only apply to an origin server):
    // the backend answers them, and its answer is not stored. Unless the client forbids
    // contacting it: then they are evaluated against the stored response (RFC 9110 §13).
    let origin_preconditions = parts.headers.contains_key(header::IF_MATCH)
        || parts.headers.contains_key(header::IF_UNMODIFIED_SINCE);
    if origin_preconditions && !req_cc.only_if_cached {
        return Box::pin(pass::pass(shared, parts, body, conn, "origin-precondition")).await;
    }
    let now = levee_cache::clock::now();
    let stored = shared.store.get(&key, &parts.headers);
    match (levee_cache::lookup(&req_cc, stored.as_deref(), now), stored) {
        (Lookup::Hit, Some(entry)) => {
            respond::entry(shared, &entry, &parts, XCache::Hit, now).await
        }
        (Lookup::StaleAccepted, Some(entry)) => {
            respond::entry(shared, &entry, &parts, XCache::Stale, now).await
        }
        (Lookup::StaleWhileRevalidate, Some(entry)) => {
            fill::revalidate_in_background(shared, &key, &parts, &entry, conn);
            respond::entry(shared, &entry, &parts, XCache::Stale, now).await
        }
        // RFC 9111 §5.2.1.7: nothing the client may have as it is, and the client forbids
        // contacting the backend.
        (Lookup::OnlyIfCachedMiss, stored) => respond::error(
            http::StatusCode::GATEWAY_TIMEOUT,
            if stored.is_some() {
                "the stored response is stale and the request said only-if-cached"
            } else {
                "the response is not in the cache and the request said only-if-cached"
            },
        ),
        (Lookup::Validate, Some(entry)) => {
            Box::pin(fill::fetch(shared, parts, body, key, Some(entry), conn)).await
        }
        (_, stored) => {
            // The last response for this URL could not be stored: for a while, requests
            // go to the backend as they are (Varnish's hit-for-pass), without a fill that
            // would only copy the body through a second task. When the mark expires, a
            // fill tries again.
            if stored.is_none() {
                if let Some(reason) = shared.hit_for_miss.get(&key) {
                    let pass = pass::pass_marked(shared, parts, body, conn, reason.as_str(), key);
                    return Box::pin(pass).await;
                }
            }
            Box::pin(fill::fetch(shared, parts, body, key, stored, conn)).await
        }
    }
}

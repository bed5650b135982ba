//! May the request use the cache, under which key, or must it pass, and why: the rule
//! is levee-visitor's (`pass_reason`, which `levee doctor` calls too).

use http::request;
use levee_cache::CacheKey;

use crate::request::next::Next;
use crate::request::route::Routed;
use crate::server::client::ConnInfo;

/// Only GET and HEAD may use the cache, and only without `Authorization`, without a
/// session cookie (configured or learned, see sessions.rs), and outside the site's pass
/// paths. Everything else passes, with its reason: the one place that decides it,
/// besides what the cache itself says (lookup, fill).
pub(crate) fn classify(site: Routed<'_>, parts: &request::Parts, conn: ConnInfo) -> Next {
    if let Some(reason) = levee_visitor::pass_reason(&site.sessions, &site.conf().settings, parts) {
        return Next::pass(reason);
    }
    Next::Lookup(
        CacheKey::for_request(
            conn.scheme(),
            crate::request::route::key_uri(parts),
            &parts.headers,
        )
        .in_site(site.index),
    )
}

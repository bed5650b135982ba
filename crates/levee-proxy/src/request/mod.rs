//! The phases of one request, always in this order (like Pingora's fixed phases), one
//! module each:
//!
//! 1. [`classify`]: is it answered by levee itself (`Max-Forwards: 0`), a static file,
//!    or may it use the cache (its [`CacheKey`](levee_cache::CacheKey)) or must it pass,
//!    and why.
//! 2. [`lookup`]: the stored variant and what RFC 9111 says to do with it
//!    ([`levee_cache::lookup`]): hit, stale, validate, miss.
//! 3. [`fill`] (one backend fetch per key, streamed to every waiter and stored) or
//!    [`pass`] (straight to the backend, never stored; invalidation after unsafe methods).
//! 4. [`respond`]: the one place a result becomes a response: the client's coding, and
//!    `X-Cache`, `Via`, `Age` and `X-Cache-Reason`.
//!
//! Invariant above all others: a request that carries a session cookie or
//! `Authorization` never reads from nor writes to the cache, and a stored response never
//! carries a `Set-Cookie`.

pub(crate) mod classify;
pub(crate) mod fill;
pub(crate) mod lookup;
pub(crate) mod pass;
pub(crate) mod respond;
mod sessions;
mod shared;

pub use shared::Reloader;
pub(crate) use shared::Shared;

/// The session-cookie rules on their own, for the fuzz target (`crate::__fuzz`).
pub(crate) fn fuzz_sessions(configured: levee_config::CookieMatcher) -> sessions::Sessions {
    sessions::Sessions::new(configured)
}

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use levee_config::Backend;
use levee_static::Outcome;

use crate::body::ProxyBody;
use crate::upstream::ConnInfo;
use classify::Class;

pub(crate) type Resp = Response<ProxyBody>;

/// Why a response was not stored or a request passed, for `X-Cache-Reason`.
pub(crate) type Reason = std::borrow::Cow<'static, str>;

/// Entry point for every request: [`route`], then the response is counted (stats.rs).
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    conn: ConnInfo,
) -> Result<Resp, Infallible> {
    let started = std::time::Instant::now();
    // What the access log needs of the request, before the phases consume it (cheap
    // clones: the URI and header values share their bytes).
    let logged = shared.access_log.is_some().then(|| {
        let h = req.headers();
        (
            std::time::SystemTime::now(),
            req.method().clone(),
            req.uri().clone(),
            req.version(),
            h.get(http::header::REFERER).cloned(),
            h.get(http::header::USER_AGENT).cloned(),
        )
    });
    let path = req.uri().clone();
    let mut resp = route(&shared, req, conn).await;
    let total = started.elapsed();
    shared.stats.response(&resp, total);
    note_not_cached(&shared, &path, &mut resp);
    if let (Some(log), Some((time, method, uri, version, referer, user_agent))) =
        (&shared.access_log, logged)
    {
        let bytes = if method == http::Method::HEAD {
            Some(0)
        } else {
            body_len(&resp)
        };
        log.log(crate::access_log::Record {
            time,
            peer: conn.peer.ip(),
            method,
            uri,
            version,
            referer,
            user_agent,
            status: resp.status().as_u16(),
            bytes,
            cache: resp
                .headers()
                .get(&crate::headers::X_CACHE)
                .cloned()
                .unwrap_or_else(|| http::HeaderValue::from_static("-")),
            backend: resp.extensions().get::<BackendWait>().map(|b| b.0),
            total,
        });
    }
    Ok(resp)
}

/// A MISS or PASS with a reason goes to the dashboard's table of URLs not served from
/// the cache; the reason header stays only with `--debug-headers`.
fn note_not_cached(shared: &Shared, uri: &http::Uri, resp: &mut Resp) {
    let Some(reason) = resp.headers().get(&crate::headers::X_CACHE_REASON) else {
        return;
    };
    let cache = match resp
        .headers()
        .get(&crate::headers::X_CACHE)
        .map(|v| v.as_bytes())
    {
        Some(b"MISS") => "MISS",
        Some(b"PASS") => "PASS",
        _ => return,
    };
    let reason = reason.to_str().unwrap_or("?");
    // A MISS that was stored is the cache working: the table is for what it cannot keep.
    if reason != "stored" {
        let url = uri.path_and_query().map_or("/", |p| p.as_str());
        shared.stats.top.note(url, cache, reason);
    }
    if !shared.conf().settings.debug_headers {
        resp.headers_mut().remove(&crate::headers::X_CACHE_REASON);
    }
}

/// The body's length when known at the head: the body's own, or its `Content-Length`.
pub(crate) fn body_len(resp: &Resp) -> Option<u64> {
    http_body::Body::size_hint(resp.body()).exact().or_else(|| {
        resp.headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    })
}

/// How long a request waited for the backend's response head (for the access log), put
/// in the response's extensions by the fill and pass phases.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BackendWait(pub std::time::Duration);

/// The phases, in order; the first that answers ends the request.
async fn route(shared: &Arc<Shared>, req: Request<Incoming>, conn: ConnInfo) -> Resp {
    let (mut parts, body) = req.into_parts();
    if let Some(resp) = classify::refuse_malformed(&parts) {
        return resp;
    }
    if parts.method.as_str() == "PURGE" {
        return purge_from_client(shared, &parts, conn);
    }
    if let Some(resp) = classify::answer_here(shared, &mut parts) {
        return resp;
    }
    let read_only = parts.method == Method::GET || parts.method == Method::HEAD;
    if let (Some(files), true) = (&shared.files, read_only) {
        // Files first, never through the cache nor the backend (nginx's try_files): they
        // are public, and their own memory cache and validators make them cheap.
        match Box::pin(files.serve(&parts)).await {
            Outcome::Response(r) => return Box::pin(respond::static_file(shared, &parts, r)).await,
            Outcome::Forbidden if matches!(shared.conf().settings.backend, Backend::FastCgi(_)) => {
                return respond::error(
                    http::StatusCode::FORBIDDEN,
                    "this file is not served (hidden, outside the document root, or PHP source)",
                );
            }
            // An HTTP backend decides for itself what a refused path means.
            Outcome::Forbidden | Outcome::NotFound | Outcome::Php { .. } => {}
        }
    }
    match classify::classify(shared, &parts) {
        Class::Cache(key) => lookup::cached(shared, parts, body, key, conn).await,
        Class::Pass(reason) => Box::pin(pass::pass(shared, parts, body, conn, reason)).await,
    }
}

/// The `PURGE` method (Varnish's convention; MediaWiki sends it to `$wgCdnServers`):
/// removes every variant of the URL, for clients on the `[purge] allow` list; 403 for
/// anyone else, who learns nothing about what is stored.
fn purge_from_client(shared: &Shared, parts: &http::request::Parts, conn: ConnInfo) -> Resp {
    if !crate::purge::allowed(&shared.conf().settings, conn.peer.ip()) {
        return respond::error(
            http::StatusCode::FORBIDDEN,
            "PURGE is allowed only from the addresses in [purge] allow",
        );
    }
    let key = crate::purge::key_of_request(parts);
    let n = shared.store.purge_key(&key, false);
    shared.stats.purged.inc_by(n as u64);
    let mut resp = http::Response::new(crate::body::ProxyBody::full(bytes::Bytes::from(format!(
        "{{\"purged\":{n}}}\n"
    ))));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    respond::mark(
        shared,
        resp.headers_mut(),
        respond::XCache::Answered,
        None,
        None,
    );
    resp
}

//! The phases of one request: classify → cache key → lookup → (fill | pass) → respond.
//!
//! Invariant above all others: a request that carries a session cookie or
//! `Authorization` never reads from nor writes to the cache, and a stored response never
//! carries a `Set-Cookie`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use levee_cache::policy::{self, Candidate};
use levee_cache::{
    conditional, store, CacheControl, Coalescer, Entry, Fill, NotStored, PolicyConfig, Reader,
    Store, StoredHeaders, VaryKey,
};
use levee_compress::{add_vary_accept_encoding, Coding};
use levee_config::{Backend, Settings};
use levee_static::{Outcome, StaticConfig, StaticFiles};

use crate::body::{BoxError, ProxyBody};
use crate::encoding::{Encoder, EntryForm};
use crate::headers::{add_forwarded, add_via, strip_hop_by_hop, X_CACHE, X_CACHE_REASON};
use crate::upstream::{ConnInfo, UpBody, Upstream, UpstreamError};
use crate::zerocopy;

/// Everything the request handlers share.
pub struct Shared {
    pub settings: Settings,
    pub store: Store,
    pub fills: Coalescer<FillHead>,
    /// Keys whose last response was not cacheable: fetched without coalescing for a while.
    pub hit_for_miss: moka::sync::Cache<String, NotStored>,
    pub upstream: Upstream,
    pub policy: PolicyConfig,
    /// Files of the document root, when there is one.
    pub files: Option<StaticFiles>,
    pub encoder: Encoder,
    /// Memfd copies of hot large bodies, sent with sendfile.
    pub sendfile: zerocopy::Files,
}

impl Shared {
    /// Fails when the document root cannot be used.
    pub fn new(settings: Settings) -> Result<Shared, levee_static::Error> {
        let files = match &settings.root {
            Some(root) => {
                let s = &settings.static_files;
                let mut config = StaticConfig::new(root);
                config.index = s.index.clone();
                config.asset_extensions = s.asset_extensions.clone();
                config.asset_max_age = s.asset_max_age;
                config.memory_cache = s.memory;
                config.memory_max_file = s.memory_max_file;
                Some(StaticFiles::new(config)?)
            }
            None => None,
        };
        let c = &settings.cache;
        let policy = PolicyConfig {
            heuristic: c.heuristic,
            heuristic_fraction: c.heuristic_fraction,
            heuristic_max: c.heuristic_max,
            micro_cache: c.micro_cache,
            grace: c.grace,
            keep: c.keep,
            max_object_size: c.max_object_size,
        };
        Ok(Shared {
            files,
            encoder: Encoder::new(&settings.compression),
            // Hot large bodies only: a bounded extra copy of what the cache holds.
            sendfile: zerocopy::Files::new((c.size / 4).clamp(16 << 20, 256 << 20)),
            store: Store::new(c.size),
            fills: Coalescer::default(),
            hit_for_miss: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(c.hit_for_miss.max(Duration::from_millis(1)))
                .build(),
            upstream: Upstream::new(&settings),
            policy,
            settings,
        })
    }
}

/// What waiting requests learn from a fill once the backend answered.
pub enum FillHead {
    /// A full response is streaming in.
    Stream(StreamHead),
    /// The backend confirmed (304) a stale entry; here it is, refreshed.
    Refreshed(Arc<Entry>),
    /// No response: connect failure, timeout or overload.
    Failed(UpstreamError),
    /// The backend answered 500, 502, 503 or 504 while a stale copy may stand in for it
    /// (RFC 5861 §4). Waiters with such a copy serve it; the others ask the backend.
    ErrorStatus(StatusCode),
}

pub struct StreamHead {
    status: StatusCode,
    headers: HeaderMap,
    vary: VaryKey,
    storable: Result<(), NotStored>,
    initial_age: Duration,
    response_time: Instant,
}

#[derive(Clone, Copy)]
enum XCache {
    Hit,
    Miss,
    Stale,
    Pass,
    Revalidated,
}

impl XCache {
    fn value(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            XCache::Hit => "HIT",
            XCache::Miss => "MISS",
            XCache::Stale => "STALE",
            XCache::Pass => "PASS",
            XCache::Revalidated => "REVALIDATED",
        })
    }
}

type Resp = Response<ProxyBody>;

/// Entry point for every request.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    conn: ConnInfo,
) -> Result<Resp, Infallible> {
    let (mut parts, body) = req.into_parts();
    if parts.method == Method::OPTIONS || parts.method == Method::TRACE {
        if let Some(resp) = max_forwards(&mut parts) {
            return Ok(resp);
        }
    }
    let read_only = parts.method == Method::GET || parts.method == Method::HEAD;
    if let (Some(files), true) = (&shared.files, read_only) {
        // Files first, never through the cache nor the backend (nginx's try_files): they
        // are public, and their own memory cache and validators make them cheap.
        match Box::pin(files.serve(&parts)).await {
            Outcome::Response(r) => return Ok(Box::pin(static_response(&shared, &parts, r)).await),
            Outcome::Forbidden if matches!(shared.settings.backend, Backend::FastCgi(_)) => {
                return Ok(error_response(
                    StatusCode::FORBIDDEN,
                    "this file is not served (hidden, outside the document root, or PHP source)",
                ));
            }
            // An HTTP backend decides for itself what a refused path means.
            Outcome::Forbidden | Outcome::NotFound | Outcome::Php { .. } => {}
        }
    }
    let resp = if read_only {
        match classify(&shared, &parts) {
            Ok(key) => cached(&shared, parts, body, key, conn).await,
            Err(reason) => Box::pin(pass(&shared, parts, body, conn, reason.as_str())).await,
        }
    } else {
        Box::pin(pass(&shared, parts, body, conn, NotStored::Method.as_str())).await
    };
    Ok(resp)
}

/// RFC 9110 §7.6.2: an OPTIONS or TRACE whose `Max-Forwards` is 0 is answered here, as
/// the last recipient; any other value goes on decremented.
fn max_forwards(parts: &mut request::Parts) -> Option<Resp> {
    let value = parts.headers.get(header::MAX_FORWARDS)?;
    // An invalid value is ignored, as if absent (nothing says which hop it meant).
    let n: u64 = value.to_str().ok()?.trim().parse().ok()?;
    if n > 0 {
        parts
            .headers
            .insert(header::MAX_FORWARDS, HeaderValue::from(n - 1));
        return None;
    }
    let mut resp = if parts.method == Method::TRACE {
        // §9.3.8: the request as received, as message/http, without the fields that may
        // hold credentials (the same reasoning as the RFC's advice against echoing them).
        let mut text = format!(
            "{} {} {:?}\r\n",
            parts.method,
            parts.uri.path_and_query().map_or("/", |p| p.as_str()),
            parts.version
        );
        for (name, value) in &parts.headers {
            if [
                header::COOKIE,
                header::AUTHORIZATION,
                header::PROXY_AUTHORIZATION,
            ]
            .contains(name)
            {
                continue;
            }
            text.push_str(name.as_str());
            text.push_str(": ");
            text.push_str(&String::from_utf8_lossy(value.as_bytes()));
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        let mut r = Response::new(ProxyBody::full(Bytes::from(text)));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("message/http"),
        );
        r
    } else {
        let mut r = Response::new(ProxyBody::Empty);
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"),
        );
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        r
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp.headers_mut()
        .insert(X_CACHE.clone(), XCache::Pass.value());
    Some(resp)
}

/// The cache key for a request that may use the cache, or why it must pass.
fn classify(shared: &Shared, parts: &request::Parts) -> Result<String, NotStored> {
    let h = &parts.headers;
    if h.contains_key(header::AUTHORIZATION) {
        return Err(NotStored::Session);
    }
    let anon = &shared.settings.anonymous;
    for cookie in h.get_all(header::COOKIE) {
        // A cookie header we cannot read might hide a session: pass.
        let Ok(s) = cookie.to_str() else {
            return Err(NotStored::Session);
        };
        for pair in s.split(';') {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n).trim();
            if !name.is_empty() && anon.session_cookies.is_session(name) {
                return Err(NotStored::Session);
            }
        }
    }
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if anon.pass_paths.is_match(pq) {
        return Err(NotStored::PassPath);
    }
    Ok(store::key("http", host_of(parts), pq))
}

fn host_of(parts: &request::Parts) -> &str {
    parts
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// GET or HEAD that may be answered from the cache.
async fn cached(
    shared: &Arc<Shared>,
    parts: request::Parts,
    body: Incoming,
    key: String,
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
        return Box::pin(pass(shared, parts, body, conn, "origin-precondition")).await;
    }
    let now = Instant::now();
    if let Some(entry) = shared.store.get(&key, &parts.headers) {
        let age = entry.age(now);
        // RFC 9111 §5.2.1.1: the client does not want a response older than this (in
        // exact time, so `max-age=0` always means "validate").
        let young_enough = req_cc.max_age.is_none_or(|m| age <= Duration::from_secs(m));
        match entry.staleness(now) {
            Ok(remaining) => {
                let acceptable = !req_cc.no_cache
                    && !entry.freshness.no_cache
                    && young_enough
                    && req_cc
                        .min_fresh
                        .is_none_or(|m| remaining >= Duration::from_secs(m));
                if acceptable {
                    return serve_entry(shared, &entry, &parts, XCache::Hit, now).await;
                }
            }
            Err(stale_by) => {
                let f = &entry.freshness;
                // RFC 9111 §5.2.1.2: max-stale accepts this much staleness, but not
                // past `no-cache` (§5.2.1.4: validate first), a request max-age or
                // min-fresh, nor the response's must-revalidate (§5.2.2.2).
                let client_accepts = !f.no_cache
                    && !f.must_revalidate
                    && !req_cc.no_cache
                    && young_enough
                    && req_cc.min_fresh.is_none()
                    && req_cc
                        .max_stale
                        .is_some_and(|m| stale_by <= Duration::from_secs(m));
                if client_accepts {
                    return serve_entry(shared, &entry, &parts, XCache::Stale, now).await;
                }
                // A request max-age or min-fresh asks for a response no stale one can be
                // (§5.2.1.1, §5.2.1.3): it waits for the validation.
                let client_allows_stale =
                    !req_cc.no_cache && req_cc.max_age.is_none() && req_cc.min_fresh.is_none();
                if client_allows_stale && f.allows_stale_while_revalidate(stale_by) {
                    revalidate_in_background(shared, &key, &parts, &entry, conn);
                    return serve_entry(shared, &entry, &parts, XCache::Stale, now).await;
                }
            }
        }
        // RFC 9111 §5.2.1.7: a stored response the client may not have as it is, and
        // the client forbids contacting the backend.
        if req_cc.only_if_cached {
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "the stored response is stale and the request said only-if-cached",
            );
        }
        return Box::pin(fetch(shared, parts, body, key, Some(entry), conn, true)).await;
    }
    if req_cc.only_if_cached {
        return error_response(
            StatusCode::GATEWAY_TIMEOUT,
            "the response is not in the cache and the request said only-if-cached",
        );
    }
    // The last response for this URL could not be stored: for a while, requests go to the
    // backend as they are (Varnish's hit-for-pass), without a fill that would only copy
    // the body through a second task. When the mark expires, a fill tries again.
    if let Some(reason) = shared.hit_for_miss.get(&key) {
        return Box::pin(pass(shared, parts, body, conn, reason.as_str())).await;
    }
    Box::pin(fetch(shared, parts, body, key, None, conn, true)).await
}

/// Gets the response from the backend through a fill, shared with concurrent requests for
/// the same key when `coalesce`.
async fn fetch(
    shared: &Arc<Shared>,
    parts: request::Parts,
    body: Incoming,
    key: String,
    stale: Option<Arc<Entry>>,
    conn: ConnInfo,
    coalesce: bool,
) -> Resp {
    let max = usize::try_from(shared.policy.max_object_size).unwrap_or(usize::MAX);
    let (fill, leader) = if coalesce {
        shared.fills.get_or_create(&key, max)
    } else {
        (Fill::new(max), true)
    };
    let mut reader = None;
    if leader {
        reader = fill.join();
        let req = backend_request(&parts, conn, stale.as_deref());
        let ctx = FillCtx {
            key: key.clone(),
            conn,
            req_cc: CacheControl::from_request_headers(&parts.headers),
            req_headers: parts.headers.clone(),
            stale: stale.clone(),
            registered: coalesce,
        };
        tokio::spawn(run_fill(shared.clone(), fill.clone(), req, ctx));
    }
    let head = fill.head().await;
    let now = Instant::now();
    match &*head {
        FillHead::Stream(h) => {
            if !leader {
                let usable = h.storable.is_ok() && h.vary.matches(&parts.headers);
                reader = if usable { fill.join() } else { None };
                if reader.is_none() {
                    // Not shareable: this request goes to the backend on its own, in parallel.
                    let reason = h.storable.err().unwrap_or(NotStored::HitForMiss);
                    return pass(shared, parts, body, conn, reason.as_str()).await;
                }
            }
            let Some(reader) = reader else {
                return error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "levee lost track of a backend response",
                );
            };
            stream_response(shared, h, reader, &parts, now)
        }
        FillHead::Refreshed(entry) => {
            if entry.vary.matches(&parts.headers) {
                serve_entry(shared, entry, &parts, XCache::Revalidated, now).await
            } else {
                pass(shared, parts, body, conn, NotStored::HitForMiss.as_str()).await
            }
        }
        FillHead::Failed(err) => {
            if let Some(stale) = stale.filter(|s| usable_on_error(s, &parts.headers, now)) {
                return serve_entry(shared, &stale, &parts, XCache::Stale, now).await;
            }
            upstream_error_response(err)
        }
        FillHead::ErrorStatus(status) => {
            if let Some(stale) = stale.filter(|s| usable_on_error(s, &parts.headers, now)) {
                return serve_entry(shared, &stale, &parts, XCache::Stale, now).await;
            }
            tracing::debug!(%status, "backend error status without a usable stale copy");
            pass(shared, parts, body, conn, NotStored::Status.as_str()).await
        }
    }
}

/// May `stale` stand in for a backend failure for a request with these headers?
fn usable_on_error(stale: &Entry, req: &HeaderMap, now: Instant) -> bool {
    // A fresh copy got here only because it needs validation (no-cache, or the client
    // asked): the RFC forbids using it unvalidated, also on error.
    match stale.staleness(now) {
        Ok(_) => false,
        // A stored error is no better than the backend's new one.
        Err(stale_by) => {
            stale.freshness.allows_stale_on_error(stale_by)
                && stale.vary.matches(req)
                && !is_error_status(stale.status)
        }
    }
}

/// RFC 5861 §4: an error is any situation that would result in a 500, 502, 503 or 504.
fn is_error_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

/// Starts one background revalidation for a stale entry, unless one is running.
fn revalidate_in_background(
    shared: &Arc<Shared>,
    key: &str,
    parts: &request::Parts,
    entry: &Arc<Entry>,
    conn: ConnInfo,
) {
    if shared.fills.get(key).is_some() {
        return;
    }
    let max = usize::try_from(shared.policy.max_object_size).unwrap_or(usize::MAX);
    let (fill, created) = shared.fills.get_or_create(key, max);
    if !created {
        return;
    }
    let req = backend_request(parts, conn, Some(entry));
    let ctx = FillCtx {
        key: key.to_string(),
        conn,
        req_cc: CacheControl::default(),
        req_headers: parts.headers.clone(),
        stale: Some(entry.clone()),
        registered: true,
    };
    tokio::spawn(run_fill(shared.clone(), fill, req, ctx));
}

struct FillCtx {
    key: String,
    conn: ConnInfo,
    req_cc: CacheControl,
    req_headers: HeaderMap,
    stale: Option<Arc<Entry>>,
    registered: bool,
}

/// The filler task: one backend request, its body streamed to the readers and stored.
async fn run_fill(
    shared: Arc<Shared>,
    fill: Arc<Fill<FillHead>>,
    req: Request<UpBody>,
    ctx: FillCtx,
) {
    let done = |shared: &Shared, fill: &Arc<Fill<FillHead>>| {
        if ctx.registered {
            shared.fills.remove(&ctx.key, fill);
        }
    };
    let _permit = match shared.upstream.slot().await {
        Ok(p) => p,
        Err(e) => {
            fill.set_head(FillHead::Failed(e));
            done(&shared, &fill);
            return;
        }
    };
    // A conditional request can be sent again without its validators, once, when the
    // backend's 304 turns out to be about a representation levee does not have.
    let (req_parts, req_body) = req.into_parts();
    let mut unconditional = None;
    if ctx.stale.is_some()
        && (req_parts.headers.contains_key(header::IF_NONE_MATCH)
            || req_parts.headers.contains_key(header::IF_MODIFIED_SINCE))
    {
        let mut p = req_parts.clone();
        p.headers.remove(header::IF_NONE_MATCH);
        p.headers.remove(header::IF_MODIFIED_SINCE);
        unconditional = Some(p);
    }
    let mut req = Request::from_parts(req_parts, req_body);
    let (request_time, response_time, response_instant, mut head, mut body) = loop {
        let request_time = SystemTime::now();
        let resp = match shared.upstream.send(req, ctx.conn).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(key = %ctx.key, error = %e, "backend request failed");
                fill.set_head(FillHead::Failed(e));
                done(&shared, &fill);
                return;
            }
        };
        let response_time = SystemTime::now();
        let response_instant = Instant::now();
        let (mut head, body) = resp.into_parts();
        strip_hop_by_hop(&mut head.headers);
        // RFC 9111 §4.3.4: a 304 whose validators are not those of the stored response
        // MUST NOT update it; ask again for the full response.
        if head.status == StatusCode::NOT_MODIFIED {
            if let (Some(stale), Some(_)) = (&ctx.stale, &unconditional) {
                let applies = conditional::not_modified_applies(
                    stale.etag(),
                    stale.last_modified(),
                    &head.headers,
                );
                if !applies {
                    tracing::debug!(key = %ctx.key, "304 for another representation; fetching it whole");
                    if let Some(p) = unconditional.take() {
                        req = Request::from_parts(p, empty_body());
                        continue;
                    }
                }
            }
        }
        break (request_time, response_time, response_instant, head, body);
    };
    // Whether the response answers levee's validation of `ctx.stale`.
    let validation = unconditional.is_some();

    if is_error_status(head.status) {
        if let Some(stale) = &ctx.stale {
            if usable_on_error(stale, &ctx.req_headers, response_instant) {
                tracing::warn!(key = %ctx.key, status = %head.status, "backend error; serving stale");
                fill.set_head(FillHead::ErrorStatus(head.status));
                done(&shared, &fill);
                return;
            }
        }
    }

    if head.status == StatusCode::NOT_MODIFIED && validation {
        if let Some(stale) = &ctx.stale {
            let entry = refresh(
                &shared,
                &ctx,
                stale,
                head.headers,
                request_time,
                response_time,
                response_instant,
            );
            fill.set_head(FillHead::Refreshed(entry));
            done(&shared, &fill);
            return;
        }
    }

    // RFC 9111 §4.3.3: a full response means the stored one it replaces is no longer
    // suitable, even when the new one cannot be stored in its place (uncacheable, too
    // large, another Vary). A 5xx is no such answer: the backend failed (§4.3.3).
    if let Some(stale) = &ctx.stale {
        if head.status != StatusCode::NOT_MODIFIED && !head.status.is_server_error() {
            shared.store.remove(&ctx.key, stale.id);
        }
    }

    let session = |n: &str| shared.settings.anonymous.session_cookies.is_session(n);
    let candidate = Candidate {
        method: &Method::GET,
        request_cc: &ctx.req_cc,
        anonymous: true,
        status: head.status,
        headers: &head.headers,
        now: response_time,
    };
    let decision = policy::decide(&candidate, &shared.policy, &session);
    let initial_age = policy::initial_age(&head.headers, request_time, response_time);
    head.headers.remove(header::AGE);
    // After the decision and the age, which take a missing Date as exactly response_time.
    policy::ensure_date(&mut head.headers, response_time);
    if matches!(&decision, Ok(s) if s.strip_set_cookie) {
        head.headers.remove(header::SET_COOKIE);
    }
    let storable = decision.as_ref().map(|_| ()).map_err(|e| *e);
    if let Err(reason) = storable {
        fill.stop_buffering();
        done(&shared, &fill);
        if reason != NotStored::RequestNoStore {
            shared.hit_for_miss.insert(ctx.key.clone(), reason);
        }
    }
    let vary = VaryKey::new(&head.headers, &ctx.req_headers);
    let stored_headers = decision.is_ok().then(|| head.headers.clone());
    fill.set_head(FillHead::Stream(StreamHead {
        status: head.status,
        headers: head.headers,
        vary: vary.clone(),
        storable,
        initial_age,
        response_time: response_instant,
    }));

    let read_timeout = shared.settings.limits.backend_read_timeout;
    loop {
        match tokio::time::timeout(read_timeout, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() && !fill.push(data, read_timeout).await {
                        // Nobody is reading and the body is not being stored: stop.
                        done(&shared, &fill);
                        return;
                    }
                }
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::warn!(key = %ctx.key, error = %e, "backend response body failed");
                fill.fail(read_timeout).await;
                done(&shared, &fill);
                return;
            }
            Err(_) => {
                tracing::warn!(key = %ctx.key, "backend paused longer than the read timeout");
                fill.fail(read_timeout).await;
                done(&shared, &fill);
                return;
            }
        }
    }
    fill.finish();
    if let (Ok(st), Some(mut headers)) = (decision, stored_headers) {
        match fill.take_body() {
            Some(chunks) => {
                let (body, coding, levee_coded) = shared
                    .encoder
                    .for_storage(head.status, &mut headers, chunks)
                    .await;
                let entry = Entry {
                    id: Entry::next_id(),
                    status: head.status,
                    headers: StoredHeaders::new(&headers),
                    body,
                    coding,
                    levee_coded,
                    vary,
                    freshness: st.freshness,
                    initial_age,
                    response_time: response_instant,
                };
                shared.store.insert(ctx.key.clone(), Arc::new(entry));
                shared.hit_for_miss.invalidate(&ctx.key);
            }
            None => shared
                .hit_for_miss
                .insert(ctx.key.clone(), NotStored::TooLarge),
        }
    }
    done(&shared, &fill);
}

/// Merges a 304's headers into a stale entry (RFC 9111 §4.3.4) and stores the result.
fn refresh(
    shared: &Shared,
    ctx: &FillCtx,
    stale: &Entry,
    mut new_headers: HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
    response_instant: Instant,
) -> Arc<Entry> {
    // The age of the 304 just received (RFC 9111 §4.2.3), not of the stored Date: a 304
    // without Date (FastCGI sends none) is as old as its Age says, and gets one.
    let initial_age = policy::initial_age(&new_headers, request_time, response_time);
    policy::ensure_date(&mut new_headers, response_time);
    // RFC 9111 §3.2: every field of the 304 replaces the stored one, except
    // Content-Length, fields that describe the stored bytes rather than the
    // representation (Content-Encoding: levee may have compressed them itself;
    // Content-Range), and Set-Cookie, which a shared entry never carries.
    let not_updated = |n: &header::HeaderName| {
        [
            header::CONTENT_LENGTH,
            header::CONTENT_ENCODING,
            header::CONTENT_RANGE,
            header::SET_COOKIE,
        ]
        .contains(n)
    };
    let mut headers = stale.headers.to_map();
    let mut last = None;
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
        if not_updated(&name) {
            continue;
        }
        headers.append(name, value);
    }
    // The stored body is in a coding chosen per client: its Vary keeps Accept-Encoding
    // whatever Vary the 304 carried.
    if stale.coding != Coding::Identity {
        add_vary_accept_encoding(&mut headers);
    }
    let mut levee_coded = stale.levee_coded.clone();
    if let Some(coded) = &mut levee_coded {
        Encoder::after_refresh(&mut headers, coded);
    }
    headers.remove(header::AGE);
    let session = |n: &str| shared.settings.anonymous.session_cookies.is_session(n);
    let candidate = Candidate {
        method: &Method::GET,
        request_cc: &ctx.req_cc,
        anonymous: true,
        status: stale.status,
        headers: &headers,
        now: response_time,
    };
    let decision = policy::decide(&candidate, &shared.policy, &session);
    let freshness = match &decision {
        Ok(s) => s.freshness,
        Err(_) => stale.freshness,
    };
    let entry = Arc::new(Entry {
        id: stale.id,
        status: stale.status,
        headers: StoredHeaders::new(&headers),
        body: stale.body.clone(),
        coding: stale.coding,
        levee_coded,
        vary: stale.vary.clone(),
        freshness,
        initial_age,
        response_time: response_instant,
    });
    if decision.is_ok() {
        shared.store.insert(ctx.key.clone(), entry.clone());
    } else {
        // Only this response became unstorable (say, the 304 said no-store); the other
        // variants of the URL are not its business.
        shared.store.remove(&ctx.key, stale.id);
    }
    entry
}

/// The request a fill sends: always a plain GET with no cookies and no client
/// preconditions, because its response may be shared with everyone; and no
/// Accept-Encoding, because levee negotiates codings with each client itself.
fn backend_request(
    parts: &request::Parts,
    conn: ConnInfo,
    stale: Option<&Entry>,
) -> Request<UpBody> {
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    for h in [
        header::COOKIE,
        header::ACCEPT_ENCODING,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_MATCH,
        header::IF_UNMODIFIED_SINCE,
        header::IF_RANGE,
        header::RANGE,
    ] {
        headers.remove(h);
    }
    if let Some(s) = stale {
        if let Some(e) = s.etag() {
            headers.insert(header::IF_NONE_MATCH, e.clone());
        }
        if let Some(lm) = s.last_modified() {
            headers.insert(header::IF_MODIFIED_SINCE, lm.clone());
        }
    }
    finish_backend_headers(&mut headers, parts, conn);
    let mut req = Request::new(empty_body());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = headers;
    req
}

fn empty_body() -> UpBody {
    Empty::<Bytes>::new().map_err(|e| match e {}).boxed_unsync()
}

fn finish_backend_headers(headers: &mut HeaderMap, parts: &request::Parts, conn: ConnInfo) {
    if !headers.contains_key(header::HOST) {
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = HeaderValue::from_str(a.as_str()) {
                headers.insert(header::HOST, v);
            }
        }
    }
    let host = headers.get(header::HOST).cloned();
    add_forwarded(headers, conn.peer.ip(), host.as_ref());
    add_via(headers, parts.version);
}

/// Sends the request to the backend as it is; the response is never stored.
async fn pass(
    shared: &Arc<Shared>,
    parts: request::Parts,
    body: Incoming,
    conn: ConnInfo,
    reason: &'static str,
) -> Resp {
    let permit = match shared.upstream.slot().await {
        Ok(p) => p,
        Err(e) => return upstream_error_response(&e),
    };
    let unsafe_method = !matches!(
        parts.method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    );
    let invalidation_host = host_of(&parts).to_string();
    let invalidation_pq = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    finish_backend_headers(&mut headers, &parts, conn);
    let mut req = Request::new(body.map_err(|e| Box::new(e) as BoxError).boxed_unsync());
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = headers;
    let resp = match shared.upstream.send(req, conn).await {
        Ok(r) => r,
        Err(e) => return upstream_error_response(&e),
    };
    let (mut head, body) = resp.into_parts();
    if unsafe_method && (head.status.is_success() || head.status.is_redirection()) {
        invalidate_after_unsafe(shared, &invalidation_host, &invalidation_pq, &head.headers);
    }
    strip_hop_by_hop(&mut head.headers);
    add_via(&mut head.headers, http::Version::HTTP_11);
    head.headers.insert(X_CACHE.clone(), XCache::Pass.value());
    if !head.headers.contains_key(header::AGE) {
        head.headers
            .insert(header::AGE, HeaderValue::from_static("0"));
    }
    if shared.settings.debug_headers {
        head.headers
            .insert(X_CACHE_REASON.clone(), HeaderValue::from_static(reason));
    }
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        ProxyBody::pass(
            body,
            Some(permit),
            shared.settings.limits.backend_read_timeout,
        )
    };
    let body = shared.encoder.stream(
        &parts.headers,
        &parts.method,
        head.status,
        &mut head.headers,
        body,
    );
    Response::from_parts(head, body)
}

/// RFC 9111 §4.4: a successful unsafe request invalidates the target URI and the URIs in
/// `Location` and `Content-Location` when they have the same origin (scheme, host and
/// port: levee's clients speak plain http to it).
fn invalidate_after_unsafe(shared: &Shared, host: &str, pq: &str, response: &HeaderMap) {
    shared.store.invalidate(&store::key("http", host, pq));
    for h in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(v) = response.get(h).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        let Ok(uri) = v.parse::<http::Uri>() else {
            continue;
        };
        let same_origin = match (uri.scheme_str(), uri.authority()) {
            (None, None) => true,
            (Some(scheme), Some(a)) => {
                scheme.eq_ignore_ascii_case("http") && a.as_str().eq_ignore_ascii_case(host)
            }
            _ => false,
        };
        if same_origin && uri.path().starts_with('/') {
            let pq = uri.path_and_query().map_or("/", |p| p.as_str());
            shared.store.invalidate(&store::key("http", host, pq));
        }
    }
}

/// A stored response in the coding the client accepts, or 304/412 when the client's
/// preconditions say so.
async fn serve_entry(
    shared: &Shared,
    entry: &Entry,
    parts: &request::Parts,
    x: XCache,
    now: Instant,
) -> Resp {
    let age = policy::age_header(entry.age(now));
    // The headers of the form this client gets; built once, used for the preconditions
    // and handed to hyper.
    let (response_headers, body, coding) =
        match shared.encoder.entry_form(entry, &parts.headers).await {
            EntryForm::AsStored => (entry.headers.to_map(), entry.body.clone(), entry.coding),
            EntryForm::Derived { coding, body } => (
                Encoder::derived_headers(entry, coding, body.len()),
                body,
                coding,
            ),
        };
    let stored = &response_headers;
    // RFC 9111 §4.3.2: preconditions are evaluated against a stored 200 only; a stored
    // redirect or error is what the origin would answer regardless of them (RFC 9110
    // §13.2.1).
    if entry.status == StatusCode::OK {
        if let Some(status) = conditional::evaluate(&parts.method, &parts.headers, stored) {
            return precondition_response(shared, status, stored, age, x);
        }
    }
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        large_body(shared, parts, entry.id, coding, body)
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = entry.status;
    let headers = resp.headers_mut();
    *headers = response_headers;
    headers.insert(header::AGE, age);
    headers.insert(X_CACHE.clone(), x.value());
    add_via(headers, http::Version::HTTP_11);
    if shared.settings.debug_headers {
        headers.insert(X_CACHE_REASON.clone(), HeaderValue::from_static("stored"));
    }
    resp
}

/// A stored body as a response body: from a memfd with sendfile when it is large and
/// the connection can (HTTP/1.1, see zerocopy.rs), else from memory.
fn large_body(
    shared: &Shared,
    parts: &request::Parts,
    id: u64,
    coding: levee_compress::Coding,
    body: Bytes,
) -> ProxyBody {
    let len = body.len();
    if (zerocopy::MIN_LEN..=zerocopy::MAX_LEN).contains(&len) {
        if let Some(queue) = parts.extensions.get::<Arc<zerocopy::SendQueue>>() {
            if let Some(file) = shared.sendfile.get(id, coding, &body) {
                return ProxyBody::Zc(zerocopy::ZcBody::new(queue.clone(), file, len));
            }
        }
    }
    ProxyBody::full(body)
}

/// A response streaming in from a fill.
fn stream_response(
    shared: &Shared,
    h: &StreamHead,
    reader: Reader,
    parts: &request::Parts,
    now: Instant,
) -> Resp {
    let age = policy::age_header(h.initial_age + now.saturating_duration_since(h.response_time));
    let body = if parts.method == Method::HEAD {
        ProxyBody::Empty
    } else {
        ProxyBody::Fill(reader)
    };
    // The headers of the 200 this client would get (its coding, weak ETag, Vary): a 304
    // carries those (RFC 9110 §15.4.5).
    let mut headers = h.headers.clone();
    let body = shared
        .encoder
        .stream(&parts.headers, &parts.method, h.status, &mut headers, body);
    if h.storable.is_ok() && h.status == StatusCode::OK {
        if let Some(status) = conditional::evaluate(&parts.method, &parts.headers, &headers) {
            return precondition_response(shared, status, &headers, age, XCache::Miss);
        }
    }
    let mut resp = Response::new(body);
    *resp.status_mut() = h.status;
    *resp.headers_mut() = headers;
    let headers = resp.headers_mut();
    headers.insert(header::AGE, age);
    headers.insert(X_CACHE.clone(), XCache::Miss.value());
    add_via(headers, http::Version::HTTP_11);
    if shared.settings.debug_headers {
        let reason = match h.storable {
            Ok(()) => "stored",
            Err(r) => r.as_str(),
        };
        headers.insert(X_CACHE_REASON.clone(), HeaderValue::from_static(reason));
    }
    resp
}

/// 304 (with the fields RFC 9110 §15.4.5 asks for) or 412.
fn precondition_response(
    shared: &Shared,
    status: StatusCode,
    stored: &HeaderMap,
    age: HeaderValue,
    x: XCache,
) -> Resp {
    let mut resp = Response::new(ProxyBody::Empty);
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if status == StatusCode::NOT_MODIFIED {
        for name in [
            header::CACHE_CONTROL,
            header::CONTENT_LOCATION,
            header::DATE,
            header::ETAG,
            header::EXPIRES,
            header::VARY,
        ] {
            for v in stored.get_all(&name) {
                headers.append(name.clone(), v.clone());
            }
        }
        if !stored.contains_key(header::ETAG) {
            if let Some(lm) = stored.get(header::LAST_MODIFIED) {
                headers.insert(header::LAST_MODIFIED, lm.clone());
            }
        }
    }
    headers.insert(header::AGE, age);
    headers.insert(X_CACHE.clone(), x.value());
    add_via(headers, http::Version::HTTP_11);
    if shared.settings.debug_headers {
        headers.insert(
            X_CACHE_REASON.clone(),
            HeaderValue::from_static("conditional"),
        );
    }
    resp
}

fn upstream_error_response(e: &UpstreamError) -> Resp {
    let mut resp = error_response(e.status(), &e.to_string());
    if matches!(e, UpstreamError::Overloaded { .. }) {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    resp
}

/// A static file's response, compressed when the client accepts it, and marked so that
/// it can be told from cached pages.
async fn static_response(
    shared: &Shared,
    parts: &request::Parts,
    r: Response<levee_static::FileBody>,
) -> Resp {
    let (mut head, body) = r.into_parts();
    head.headers
        .insert(X_CACHE.clone(), HeaderValue::from_static("STATIC"));
    let enc = &shared.encoder;
    if head.status == StatusCode::NOT_MODIFIED {
        enc.static_not_modified(&parts.headers, &mut head.headers);
        return Response::from_parts(head, ProxyBody::Empty);
    }
    if head.status == StatusCode::OK {
        if let Some(content) = body.memory() {
            let path = parts.uri.path();
            if let Some(coded) = enc
                .static_file(&parts.headers, path, &mut head.headers, content)
                .await
            {
                let body = if parts.method == Method::HEAD {
                    ProxyBody::Empty
                } else {
                    ProxyBody::full(coded)
                };
                return Response::from_parts(head, body);
            }
            return Response::from_parts(head, ProxyBody::File(body));
        }
    }
    let body = enc.stream(
        &parts.headers,
        &parts.method,
        head.status,
        &mut head.headers,
        ProxyBody::File(body),
    );
    Response::from_parts(head, body)
}

/// A short plain-text error that says what happened.
pub fn error_response(status: StatusCode, message: &str) -> Resp {
    let text = format!(
        "{} {}\n{}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        message
    );
    let mut resp = Response::new(ProxyBody::full(Bytes::from(text)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(X_CACHE.clone(), HeaderValue::from_static("ERROR"));
    h.insert(header::AGE, HeaderValue::from_static("0"));
    resp
}

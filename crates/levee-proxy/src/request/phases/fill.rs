//! One backend fetch per key (a *fill*), streamed to every request waiting for it and
//! stored when the policy allows. What to do with the backend's answer is decided by
//! [`levee_cache::after_fetch`] (pure, unit-tested there); this module does the I/O.
//!
//! The filler runs in its own task holding the fill's [`FillGuard`]: however it ends,
//! dropping the guard publishes a failure to the waiters that have no head yet, fails
//! readers of an unfinished body and unregisters the key, so every early return below is
//! a plain `return`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, response, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use levee_cache::after_fetch::{self, Refreshed};
use levee_cache::{
    conditional, policy, AfterFetch, Asked, CacheControl, CacheKey, Entry, EntryParts, Fetched,
    Fill, FillGuard, HitForPass, NotStored, VaryKey,
};
use levee_compress::{add_vary_accept_encoding, Coding};

use crate::encoding::Encoder;
use crate::headers::{prepare_forward, strip_hop_by_hop, FILL_DROPPED, FILL_DROPPED_BODY};
use crate::outcome::CacheResult;
use crate::request::next::{FillHead, StreamHead};
use crate::request::next::{Next, Serve, Stream};
use crate::request::partial;
use crate::request::respond;
use crate::request::route::Routed;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;
use crate::upstream::{BackendBody, UpBody, UpstreamError};
use levee_limits::Class;
use levee_tiers::Before;

/// Gets the response through the fill for `key`, shared with concurrent requests for
/// it. `stale` is the stored response being validated, if any: sent as validators and
/// served if the backend fails.
pub(crate) async fn fetch(
    shared: &Arc<Shared>,
    site: Routed<'_>,
    parts: &request::Parts,
    key: CacheKey,
    stale: Option<Arc<Entry>>,
    conn: ConnInfo,
) -> Next {
    let max = usize::try_from(site.conf().policy.max_object_size).unwrap_or(usize::MAX);
    let (fill, guard) = shared.fills.get_or_create(&key, max);
    let leader = guard.is_some();
    let mut reader = None;
    if let Some(guard) = guard {
        reader = fill.join();
        let req = backend_request(parts, &key, conn, stale.as_deref());
        let ctx = FillCtx {
            conn,
            req_cc: CacheControl::from_request_headers(&parts.headers),
            req_headers: parts.headers.clone(),
            path: parts.uri.path().into(),
            stale: stale.clone(),
        };
        spawn_filler(shared, site, guard, req, ctx);
    }
    // The filler is bounded by the queue, connect and first-byte timeouts and its guard
    // publishes any failure; this is the backstop should a filler ever be lost anyway:
    // no request waits on another's fill without a limit.
    let asked = Instant::now();
    // A stale copy that may stand in for a failure, else what `otherwise` makes.
    let stale_or = |now, otherwise: &dyn Fn() -> Next| match stale
        .clone()
        .filter(|s| usable_on_error(s, &parts.headers, now))
    {
        Some(entry) => Next::Serve(Serve {
            entry,
            result: CacheResult::Stale,
            now,
            waited: None,
            reason: None,
        }),
        None => otherwise(),
    };
    let Ok(head) = tokio::time::timeout(head_wait_limit(shared), fill.head()).await else {
        return stale_or(levee_cache::clock::now(), &|| {
            Next::Respond(respond::error(
                StatusCode::GATEWAY_TIMEOUT,
                "the backend response this request waited for did not start in time",
            ))
        });
    };
    let now = levee_cache::clock::now();
    match &*head {
        FillHead::Stream(h) => {
            // Never break a session: a response fetched without this client's cookies
            // reaches it only as the shared anonymous page. When it cannot be that, a
            // request that carried cookies asks the backend again, with them (its own
            // session, not the fresh one the cookie-less fill was given).
            if leader && h.storable.is_err() && parts.headers.contains_key(header::COOKIE) {
                let reason = h.storable.err().unwrap_or(NotStored::HitForPass);
                return Next::pass(reason.as_str());
            }
            if !leader {
                let usable = h.storable.is_ok() && h.vary.matches(&parts.headers);
                reader = if usable { fill.join() } else { None };
                match &reader {
                    Some(_) => {
                        shared.stats.coalesced.inc();
                    }
                    // Not shareable: this request goes to the backend on its own, in
                    // parallel.
                    None => {
                        let reason = h.storable.err().unwrap_or(NotStored::OtherVariant);
                        return Next::pass(reason.as_str());
                    }
                }
            }
            let Some(reader) = reader else {
                return Next::Respond(respond::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "levee lost track of a backend response",
                ));
            };
            let stream = Stream {
                head: head.clone(),
                reader,
                now,
                waited: asked.elapsed(),
            };
            // A range is cut from the whole body: wait for it, when it is to be stored.
            if partial::waits_for_whole_body(parts, h, max) {
                return Next::StreamForRange { stream, max };
            }
            Next::Stream(stream)
        }
        FillHead::Refreshed(entry) if entry.vary().matches(&parts.headers) => Next::Serve(Serve {
            entry: entry.clone(),
            result: CacheResult::Revalidated,
            now,
            waited: None,
            reason: None,
        }),
        FillHead::Refreshed(_) => Next::pass(NotStored::OtherVariant.as_str()),
        FillHead::Found(entry) if entry.vary().matches(&parts.headers) => Next::Serve(Serve {
            entry: entry.clone(),
            result: CacheResult::Hit,
            now,
            waited: None,
            reason: None,
        }),
        // Another variant: this request's own goes through a fill of its own.
        FillHead::Found(_) => Next::pass(NotStored::OtherVariant.as_str()),
        FillHead::Failed(err) => stale_or(now, &|| Next::Respond(respond::upstream_error(err))),
        FillHead::ErrorStatus(status) => stale_or(now, &|| {
            tracing::debug!(%status, "backend error status without a usable stale copy");
            Next::pass(NotStored::Status.as_str())
        }),
    }
}

/// How long a request waits for the head of a fill: everything the filler may
/// legitimately take (a queue slot, a connection, the first byte), and a second more.
fn head_wait_limit(shared: &Shared) -> Duration {
    let l = &shared.conf().settings.limits;
    let below = shared
        .tiers
        .as_ref()
        .map_or(Duration::ZERO, |t| t.extra_wait());
    l.backend_queue_timeout
        + l.backend_connect_timeout
        + l.backend_first_byte_timeout
        + below
        + Duration::from_secs(1)
}

/// May `stale` stand in for a backend failure for a request with these headers?
fn usable_on_error(stale: &Entry, req: &HeaderMap, now: Instant) -> bool {
    levee_cache::stale_on_error(stale, now) && stale.vary().matches(req)
}

/// Starts one background revalidation for a stale entry, unless one is running.
pub(crate) fn revalidate_in_background(
    shared: &Arc<Shared>,
    site: Routed<'_>,
    key: &CacheKey,
    parts: &request::Parts,
    entry: &Arc<Entry>,
    conn: ConnInfo,
) {
    if shared.fills.get(key).is_some() {
        return;
    }
    let max = usize::try_from(site.conf().policy.max_object_size).unwrap_or(usize::MAX);
    let (_, Some(guard)) = shared.fills.get_or_create(key, max) else {
        return;
    };
    let req = backend_request(parts, key, conn, Some(entry));
    let ctx = FillCtx {
        conn,
        req_cc: CacheControl::default(),
        req_headers: parts.headers.clone(),
        path: parts.uri.path().into(),
        stale: Some(entry.clone()),
    };
    spawn_filler(shared, site, guard, req, ctx);
}

/// What the filler needs of the request that started it.
struct FillCtx {
    conn: ConnInfo,
    req_cc: CacheControl,
    /// For the Vary key of what is stored.
    req_headers: HeaderMap,
    /// For what its answer teaches the sessions (a challenge for credentials).
    path: Box<str>,
    /// The stored response being validated.
    stale: Option<Arc<Entry>>,
}

/// When the backend's answer was asked for and came (RFC 9111 §4.2.3), on levee's clock.
struct Received {
    request_time: SystemTime,
    response_time: SystemTime,
    at: Instant,
}

fn spawn_filler(
    shared: &Arc<Shared>,
    site: Routed<'_>,
    guard: FillGuard<FillHead>,
    req: Request<UpBody>,
    ctx: FillCtx,
) {
    // Counted from now until the task ends, stored or not: what tests wait on.
    let in_flight = shared.stats.fill_started();
    let shared = shared.clone();
    let (site, route) = site.indexes();
    tokio::spawn(async move {
        if let Some(site) = shared.sites.get(site) {
            run_fill(&shared, Routed::again(site, route), guard, req, ctx).await;
        }
        drop(in_flight);
    });
}

/// The filler task: one backend request, its body streamed to the readers and stored.
async fn run_fill(
    shared: &Shared,
    site: Routed<'_>,
    mut guard: FillGuard<FillHead>,
    req: Request<UpBody>,
    ctx: FillCtx,
) {
    let fill = guard.fill().clone();
    let key = guard.key().clone();
    let upstream = site.upstream();
    // A revalidation serves everyone who reads the page; a fill of a URL nothing is
    // stored for serves the client that asked, so far (a crawler's random URL looks
    // just like that): the lane, under the asking client's network.
    let class = match ctx.stale {
        Some(_) => Class::Shared,
        None => Class::Anonymous(shared.client_net(ctx.conn.peer.ip(), &ctx.req_headers)),
    };
    // Disk, then Redis, then (with Redis) one fetch in the whole cluster: tiers.rs. A
    // request the lane refuses at once takes no cluster lock, only to free it: two
    // Redis round trips for each of a crawler's thousands of refusals a second.
    let mut lock = None;
    if let Some(tiers) = &shared.tiers {
        let claim = !upstream.refuses_now(class);
        match tiers
            .before_fetch(&shared.store, &key, &ctx.req_cc, &ctx.req_headers, claim)
            .await
        {
            Before::Found(entry) => return fill.set_head(FillHead::Found(entry)),
            Before::Fetch(guard) => lock = guard,
        }
    }
    let permit = match upstream.slot(class).await {
        Ok(p) => p,
        Err(e) => {
            shared.refused(class, &e);
            return fill.set_head(FillHead::Failed(e));
        }
    };
    let (mut head, body, received, validated) = match send(shared, site, req, &ctx, &key).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(%key, error = %e, "backend request failed");
            return fill.set_head(FillHead::Failed(e));
        }
    };
    let conf = site.conf();
    let session = |n: &str| site.sessions.is_configured(n);
    let asked = Asked {
        request_cc: &ctx.req_cc,
        request_headers: &ctx.req_headers,
        stale: ctx.stale.as_deref(),
    };
    let fetched = Fetched {
        status: head.status,
        headers: &head.headers,
        request_time: received.request_time,
        response_time: received.response_time,
        at: received.at,
        validated,
    };
    let full = match levee_cache::after_fetch(&asked, &fetched, &conf.policy, &session) {
        AfterFetch::ServeStale => {
            tracing::warn!(%key, status = %head.status, "backend error; serving stale");
            return fill.set_head(FillHead::ErrorStatus(head.status));
        }
        AfterFetch::Refresh => {
            let Some(stale) = &ctx.stale else {
                return fill.set_head(FillHead::abandoned());
            };
            let entry = refresh(shared, site, &key, &ctx, stale, head.headers, &received);
            fill.set_head(FillHead::Refreshed(entry));
            // The new freshness below memory too (before another node's wait ends).
            if let Some(tiers) = &shared.tiers {
                tiers.stored(&shared.store, &key, lock).await;
            }
            return;
        }
        AfterFetch::Full(full) => full,
    };
    if let (true, Some(stale)) = (full.remove_stale, &ctx.stale) {
        shared.store.remove(&key, stale.id());
    }
    head.headers.remove(header::AGE);
    // After the decision and the age, which take a missing Date as exactly response_time.
    policy::ensure_date(&mut head.headers, received.response_time);
    if matches!(&full.storable, Ok(s) if s.strip_set_cookie) {
        head.headers.remove(header::SET_COOKIE);
    }
    let storable = full.storable.as_ref().map(|_| ()).map_err(|e| *e);
    if storable.is_err() {
        // Not shared: the leader gets it as it is, cookies too, when it sent none (with
        // cookies it asks again with them, see `fetch`): an anonymous session starts.
        if !ctx.req_headers.contains_key(header::COOKIE) {
            site.sessions.observe(
                &Method::GET,
                &ctx.path,
                &ctx.req_headers,
                head.status,
                &head.headers,
            );
        }
        // Not shared: late requests go to the backend on their own (see `fetch`).
        fill.stop_buffering();
        guard.unregister();
        shared.hit_for_pass.mark(&key, full.mark);
    }
    let mut vary = VaryKey::new(&head.headers, &ctx.req_headers);
    // Stored per device class when the application chooses one without saying so.
    if let Some(class) = ctx.req_headers.get(&levee_visitor::device::DEVICE) {
        vary = vary.with_field(
            levee_visitor::device::DEVICE.clone(),
            Bytes::copy_from_slice(class.as_bytes()),
        );
    }
    // Surrogate keys are for purges, not for clients.
    let tags = levee_cache::tags::tags(&head.headers);
    levee_cache::tags::strip(&mut head.headers);
    let stored_headers = full.storable.is_ok().then(|| head.headers.clone());
    let event_stream = crate::headers::is_event_stream(&head.headers);
    let pause = crate::headers::body_pause_limit(&head.headers, &shared.conf().settings.limits);
    // Dropped without a value however this task ends before storing: waiters see that.
    let (stored_tx, stored_rx) = tokio::sync::watch::channel(None);
    fill.set_head(FillHead::Stream(StreamHead {
        status: head.status,
        headers: head.headers,
        vary: vary.clone(),
        storable,
        initial_age: full.initial_age,
        received: received.at,
        stored: stored_rx,
    }));

    // An event stream from an HTTP server keeps no slot of the backend limit (pass.rs).
    let _permit = match event_stream && !upstream.streams_hold_a_process() {
        true => {
            drop(permit);
            None
        }
        false => Some(permit),
    };
    let mut body = body;
    body.allow_pauses(pause);
    if !stream_body(&fill, body, &key, pause).await {
        return;
    }
    fill.finish();
    let (Ok(st), Some(mut headers)) = (full.storable, stored_headers) else {
        return;
    };
    let Some(chunks) = fill.take_body() else {
        shared
            .hit_for_pass
            .mark(&key, HitForPass::Set(NotStored::TooLarge));
        return;
    };
    let (body, coding, levee_coded) = shared
        .encoder
        .for_storage(head.status, &mut headers, chunks)
        .await;
    // Headers and a small body in one allocation (levee-cache entry.rs).
    let entry = Entry::new(EntryParts {
        key: &key,
        id: Entry::next_id(),
        status: head.status,
        headers: &headers,
        body,
        coding,
        levee_coded,
        vary,
        freshness: st.freshness,
        initial_age: full.initial_age,
        response_time: received.at,
        tags,
    });
    let entry = Arc::new(entry);
    shared.store.insert(key.clone(), entry.clone());
    shared.stats.stored.inc();
    shared.hit_for_pass.mark(&key, HitForPass::Clear);
    stored_tx.send_replace(Some(entry));
    if let Some(tiers) = &shared.tiers {
        tiers.stored(&shared.store, &key, lock).await;
    }
}

/// Sends the fill's request. A conditional request is sent again without its
/// validators, once, when the backend's 304 turns out to be about a representation
/// levee does not have (RFC 9111 §4.3.4). The flag says whether the response answers
/// levee's validation of the stale entry.
async fn send(
    shared: &Shared,
    site: Routed<'_>,
    req: Request<UpBody>,
    ctx: &FillCtx,
    key: &CacheKey,
) -> Result<(response::Parts, BackendBody, Received, bool), UpstreamError> {
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
    loop {
        let request_time = levee_cache::clock::system_now();
        let resp = site.upstream().send(req, ctx.conn).await;
        shared.stats.backend(&resp);
        let resp = resp?;
        let received = Received {
            request_time,
            response_time: levee_cache::clock::system_now(),
            at: levee_cache::clock::now(),
        };
        let (mut head, body) = resp.into_parts();
        strip_hop_by_hop(&mut head.headers);
        site.sessions.learn(&head.headers);
        if head.status == StatusCode::NOT_MODIFIED {
            if let (Some(stale), Some(_)) = (&ctx.stale, &unconditional) {
                let applies = conditional::not_modified_applies(
                    stale.etag().as_ref(),
                    stale.last_modified().as_ref(),
                    &head.headers,
                );
                if !applies {
                    tracing::debug!(%key, "304 for another representation; fetching it whole");
                    if let Some(p) = unconditional.take() {
                        req = Request::from_parts(p, empty_body());
                        continue;
                    }
                }
            }
        }
        // Still holding the unconditional form: the validators were sent and answered.
        return Ok((head, body, received, unconditional.is_some()));
    }
}

/// Streams the backend's body to the fill's readers. False when the fill ended early:
/// the backend failed or paused too long (readers then see an error, when the guard
/// drops), or nobody reads and nothing is stored.
async fn stream_body(
    fill: &Fill<FillHead>,
    mut body: BackendBody,
    key: &CacheKey,
    read_timeout: std::time::Duration,
) -> bool {
    loop {
        match tokio::time::timeout(read_timeout, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() && !fill.push(data, read_timeout).await {
                        return false;
                    }
                }
            }
            Ok(None) => return true,
            Ok(Some(Err(e))) => {
                tracing::warn!(%key, error = %e, "backend response body failed");
                return false;
            }
            Err(_) => {
                tracing::warn!(%key, "backend paused longer than the read timeout");
                return false;
            }
        }
    }
}

/// Merges a 304's fields into a stale entry ([`after_fetch::refresh`]) and stores the
/// result, or removes the entry when the 304 made it unstorable.
fn refresh(
    shared: &Shared,
    site: Routed<'_>,
    key: &CacheKey,
    ctx: &FillCtx,
    stale: &Entry,
    mut new_headers: HeaderMap,
    received: &Received,
) -> Arc<Entry> {
    policy::ensure_date(&mut new_headers, received.response_time);
    let conf = site.conf();
    let session = |n: &str| site.sessions.is_configured(n);
    let Refreshed {
        mut headers,
        storable,
        freshness,
        initial_age,
    } = after_fetch::refresh(
        &ctx.req_cc,
        stale,
        new_headers,
        (received.request_time, received.response_time),
        &conf.policy,
        &session,
    );
    // The stored body is in a coding chosen per client: its Vary keeps Accept-Encoding
    // whatever Vary the 304 carried.
    if stale.coding() != Coding::Identity {
        add_vary_accept_encoding(&mut headers);
    }
    let mut levee_coded = stale.levee_coded().cloned();
    if let Some(coded) = &mut levee_coded {
        Encoder::after_refresh(&mut headers, coded);
    }
    let entry = Arc::new(
        Entry::new(EntryParts {
            key,
            id: stale.id(),
            status: stale.status(),
            headers: &headers,
            body: stale.body(),
            coding: stale.coding(),
            levee_coded,
            vary: stale.vary().clone(),
            freshness,
            initial_age,
            response_time: received.at,
            tags: stale.tags().clone(),
        })
        // The same body: its other codings stay valid.
        .with_derived(stale.derived.share()),
    );
    if storable.is_ok() {
        shared.store.insert(key.clone(), entry.clone());
        shared.stats.stored.inc();
    } else {
        // Only this response became unstorable (say, the 304 said no-store); the other
        // variants of the URL are not its business.
        shared.store.remove(key, stale.id());
    }
    entry
}

/// The request a fill sends. Its response is stored under `key` for everyone, so the
/// backend sees of the request only what the key covers, plus what cannot make a
/// different page (or is named by the response's `Vary`, which becomes the secondary
/// key): a plain GET without a body or its framing, the key's normalized `Host`, no
/// cookies, no client preconditions, none of the host/scheme/path/method overrides in
/// [`FILL_DROPPED`], and no Accept-Encoding, because levee negotiates codings with each
/// client itself.
fn backend_request(
    parts: &request::Parts,
    key: &CacheKey,
    conn: ConnInfo,
    stale: Option<&Entry>,
) -> Request<UpBody> {
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    levee_visitor::device::for_fill(&mut headers);
    for h in FILL_DROPPED {
        headers.remove(h);
    }
    for h in &FILL_DROPPED_BODY {
        headers.remove(h);
    }
    match HeaderValue::from_str(key.host()) {
        Ok(host) if !key.host().is_empty() => {
            headers.insert(header::HOST, host);
        }
        _ => {
            headers.remove(header::HOST);
        }
    }
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
    prepare_forward(&mut headers, parts, conn.peer.ip(), conn.tls);
    let mut req = Request::new(empty_body());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = headers;
    req
}

fn empty_body() -> UpBody {
    Empty::<Bytes>::new().map_err(|e| match e {}).boxed_unsync()
}

//! One request's life: a driver over steps. Each step is a module of `phases/` that
//! answers or returns what happens next ([`Next`]); the driver carries it out, so the
//! order is read here and nowhere else, and no step calls another:
//!
//! ```text
//! handle ── drive: the site (Shared::site_for), then run:
//!   route::resolve            the route, once, on the normalized path
//!   malformed::refuse         ambiguous Host or target: 400
//!   acme::http01              a CA's HTTP-01 request: the key authorization
//!   purge::from_client        PURGE from an allowed address
//!   max_forwards::answer      OPTIONS or TRACE with Max-Forwards: 0
//!   https::to_https           redirect_http
//!   harden::check             paths the presets deny
//!   rules::apply              the route's rules (a rewrite: route and harden again)
//!   device::mark              the device class, for the key and fills
//!   upgrade::wanted ──────── Upgrade ── upgrade::tunnel (a WebSocket: relayed)
//!   files::first ─┬─ Files ── files::serve ─┬─ Respond (a file)
//!                 └─ Classify <─────────────┘
//! classify::classify ─┬─ Pass(reason) ───────────────────────────────> pass::pass
//!                     └─ Lookup(key) ── lookup::lookup ─┬─ Serve ────> respond::entry (ranges: partial)
//!                                                       ├─ ServeAndRevalidate
//!                                                       ├─ Pass (hit-for-pass)
//!                                                       └─ Fill ── fill::fetch ─┬─ Stream ─> respond::streaming
//!                                                                               ├─ StreamForRange ─> range_miss::after_fill ─┬─ Serve
//!                                                                               │                                            └─ Stream
//!                                                                               ├─ Serve (stale, refreshed)
//!                                                                               ├─ Pass (not shareable)
//!                                                                               └─ Respond (error)
//!   rules::add_headers        the route's headers, on whatever answered
//! ```
//!
//! The request's site and route are resolved once, first; the steps read them (a
//! [`route::Routed`]). What became of the request is an `Outcome` in the answer, set by
//! [`respond`]: [`handle`] counts it, logs it and notes it for the dashboard from there.
//!
//! Invariant above all others: a request that carries a session cookie or
//! `Authorization` never reads from nor writes to the cache, and a stored response never
//! carries a `Set-Cookie`.

// The steps, one module each, called only from here.
mod phases;

// Helpers the steps share; none of them calls a step.
mod auth;
mod hit_for_pass;
mod next;
mod partial;
mod respond;
mod route;
mod shared;
mod site;

use phases::{
    acme, classify, files, fill, harden, https, lookup, malformed, max_forwards, pass, purge,
    range_miss, rules, upgrade,
};

pub use shared::Reloader;
pub(crate) use shared::Shared;

/// The session-cookie rules on their own, for the fuzz target (`crate::__fuzz`).
pub(crate) fn fuzz_sessions(
    configured: levee_config::CookieMatcher,
) -> levee_visitor::sessions::Sessions {
    levee_visitor::sessions::Sessions::new(
        configured,
        Arc::new(levee_visitor::proven::Proven::new(1000)),
    )
}

use std::convert::Infallible;
use std::sync::Arc;

use http::Request;
use levee_sendfile::SendQueue;

use crate::body::{body_len, ClientBody, Resp};
use crate::outcome::{Answer, CacheResult};
use crate::server::client::ConnInfo;
use next::Next;

/// Entry point for every request: [`drive`], then the response is counted, logged and
/// noted from its [`Outcome`].
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<ClientBody>,
    conn: ConnInfo,
    sendfile: Option<Arc<SendQueue>>,
) -> Result<Resp, Infallible> {
    let started = std::time::Instant::now();
    // What the access log needs of the request, before the phases consume it (cheap
    // clones: the URI and header values share their bytes).
    let logged = shared.access_log.is_some().then(|| {
        let h = req.headers();
        (
            std::time::SystemTime::now(),
            req.method().clone(),
            req.version(),
            h.get(http::header::REFERER).cloned(),
            h.get(http::header::USER_AGENT).cloned(),
        )
    });
    let uri = req.uri().clone();
    let version = req.version();
    let head_only = req.method() == http::Method::HEAD;
    let Answer { mut resp, outcome } = drive(&shared, req, conn, sendfile.as_ref()).await;
    if conn.tls {
        if let Some(hsts) = &shared.conf().settings.tls.hsts {
            resp.headers_mut()
                .insert(http::header::STRICT_TRANSPORT_SECURITY, hsts.clone());
        }
        // HTTP/3 on this port's UDP twin, for the client's next requests.
        if version != http::Version::HTTP_3 {
            let ports = shared.tls.as_ref().and_then(|t| t.alt_svc.get());
            if let Some((_, v)) =
                ports.and_then(|p| p.iter().find(|(p, _)| *p == conn.local.port()))
            {
                resp.headers_mut().insert(http::header::ALT_SVC, v.clone());
            }
        }
    }
    let total = started.elapsed();
    let bytes = if head_only { Some(0) } else { body_len(&resp) };
    shared
        .stats
        .response(outcome.result, resp.status(), version, bytes, total);
    if shared.sites.len() > 1 {
        if let Some(site) = outcome.site.and_then(|i| shared.sites.get(i)) {
            site.requests[outcome.result.index()]
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    // The dashboard's table is for what the cache cannot keep: a MISS that was stored
    // is the cache working.
    if let (true, Some(reason)) = (outcome.result.went_to_backend(), &outcome.reason) {
        if reason != "stored" {
            let url = uri.path_and_query().map_or("/", |p| p.as_str());
            // With several sites, the dashboard says whose URL it is.
            match outcome.site.and_then(|i| shared.sites.get(i)) {
                Some(site) if shared.sites.len() > 1 => {
                    let url = format!("{} {url}", site.name);
                    shared.stats.top.note(&url, outcome.result.as_str(), reason)
                }
                _ => shared.stats.top.note(url, outcome.result.as_str(), reason),
            }
        }
    }
    // A WebSocket's line is written when it closes (upgrade.rs).
    let logged = logged.filter(|_| !outcome.logged_later);
    if let (Some(log), Some((time, method, version, referer, user_agent))) =
        (&shared.access_log, logged)
    {
        log.log(levee_log::Record {
            time,
            peer: conn.peer.ip(),
            method,
            uri,
            version,
            referer,
            user_agent,
            status: resp.status().as_u16(),
            bytes,
            cache: outcome.result.as_str(),
            site: outcome
                .site
                .and_then(|i| shared.sites.get(i))
                .map(|s| s.name.clone()),
            backend: outcome.backend_wait,
            total,
            // Why an error or a stale copy: every refusal names its reason; and a pass
            // whose session nobody proved.
            reason: (matches!(outcome.result, CacheResult::Error | CacheResult::Stale)
                || outcome
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.ends_with("; unproven")))
            .then(|| outcome.reason.clone())
            .flatten(),
        });
    }
    Ok(resp)
}

/// Resolves the request's site, then carries out what each phase decides until one
/// answers.
async fn drive(
    shared: &Arc<Shared>,
    req: Request<ClientBody>,
    conn: ConnInfo,
    sendfile: Option<&Arc<SendQueue>>,
) -> Answer {
    let (parts, body) = req.into_parts();
    let Some(site) = shared.site_for(&parts) else {
        // Over TLS the connection was made for another name (RFC 9110 §15.5.20: the
        // client may retry elsewhere); in cleartext there is simply no such site.
        let status = match conn.tls {
            true => http::StatusCode::MISDIRECTED_REQUEST,
            false => http::StatusCode::NOT_FOUND,
        };
        return respond::error(status, "no site of this server answers this host");
    };
    let mut answer = run(shared, site, parts, body, conn, sendfile).await;
    answer.outcome.site = Some(site.index);
    answer
}

/// The steps before the cache, in order, then [`phases`].
async fn run(
    shared: &Arc<Shared>,
    site: &site::Site,
    mut parts: http::request::Parts,
    body: ClientBody,
    conn: ConnInfo,
    sendfile: Option<&Arc<SendQueue>>,
) -> Answer {
    // The route, once, on the path as the backend will read it: `/%61pi/`, `//api/`
    // and `/x/../api/` are `/api/` to php-fpm, to an nginx behind and to nginx's own
    // location matching. Rules, files, backend and lanes all read this one result.
    let (mut routed, rest) = route::resolve(site, parts.uri.path());
    let rules = routed.route().filter(|r| !r.rules.is_empty());
    // Kept past the steps that may rewrite the target, by the routes whose rules read it.
    let rest = match rules {
        Some(_) => rest.into_owned(),
        None => String::new(),
    };
    let next = match before_cache(shared, site, &mut routed, &rest, &mut parts, conn).await {
        Some(answer) => Next::Respond(answer),
        None if upgrade::wanted(&parts) => Next::Upgrade,
        None => {
            // The device class the application would choose, for the key and fills.
            let device = site.conf().settings.anonymous.device;
            levee_visitor::device::mark(device, &mut parts.headers);
            files::first(routed, &parts)
        }
    };
    let mut answer = phases(shared, routed, parts, body, conn, sendfile, next).await;
    // The route's headers go on whatever answers the request.
    if let Some(r) = rules {
        rules::add_headers(&r.rules, &mut answer);
    }
    answer
}

/// levee's own answers, then the guards: the first that answers ends the request.
async fn before_cache<'s>(
    shared: &Shared,
    site: &'s site::Site,
    routed: &mut route::Routed<'s>,
    rest: &str,
    parts: &mut http::request::Parts,
    conn: ConnInfo,
) -> Option<Answer> {
    if let Some(answer) = malformed::refuse(parts, conn.scheme())
        .or_else(|| acme::http01(shared, parts, conn))
        .or_else(|| purge::from_client(shared, routed, parts, conn))
        .or_else(|| max_forwards::answer(shared, parts))
        .or_else(|| https::to_https(shared, parts, conn))
        // Before the cache: a stored copy must not answer what the presets deny.
        .or_else(|| harden::check(routed, parts))
    {
        return Some(answer);
    }
    // The route's rules, before the cache, so that no stored copy answers what a rule
    // refuses.
    let r = routed.route().filter(|r| !r.rules.is_empty())?;
    let answer = rules::apply(shared, rest, &r.rules, r.auth.as_ref(), parts, conn).await;
    if answer.is_none() && r.rules.rewrite.is_some() {
        // Where the rewritten target goes is decided afresh, and guarded again.
        *routed = route::resolve(site, parts.uri.path()).0;
        return harden::check(routed, parts);
    }
    answer
}

/// From the first stop (files or classification) to the answer.
async fn phases(
    shared: &Arc<Shared>,
    site: route::Routed<'_>,
    parts: http::request::Parts,
    body: ClientBody,
    conn: ConnInfo,
    sendfile: Option<&Arc<SendQueue>>,
    mut next: Next,
) -> Answer {
    loop {
        next = match next {
            Next::Files => Box::pin(files::serve(shared, site, &parts)).await,
            Next::Classify => classify::classify(site, &parts, conn),
            Next::Lookup(key) => lookup::lookup(shared, site, &parts, key),
            Next::Serve(s) => return respond::entry(shared, &parts, s, sendfile).await,
            Next::ServeAndRevalidate { key, serve } => {
                fill::revalidate_in_background(shared, site, &key, &parts, &serve.entry, conn);
                Next::Serve(serve)
            }
            Next::Fill { key, stale } => {
                Box::pin(fill::fetch(shared, site, &parts, key, stale, conn)).await
            }
            Next::Stream(s) => return respond::streaming(shared, &parts, s),
            Next::StreamForRange { stream, max } => range_miss::after_fill(stream, max).await,
            // The one way to the backend as the client asked: only here.
            Next::Pass { reason, marked } => {
                let pass = pass::pass(shared, site, parts, body, conn, reason, marked);
                return Box::pin(pass).await;
            }
            Next::Upgrade => {
                let tunnel = upgrade::tunnel(shared, site, parts, body, conn);
                return Box::pin(tunnel).await;
            }
            Next::Respond(resp) => return resp,
        };
    }
}

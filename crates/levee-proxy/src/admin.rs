//! The admin listener (`--admin-listen`, off unless set): levee's own state for
//! operators and tests, on a port apart from the traffic. `GET /metrics` is
//! the OpenMetrics text format (Prometheus reads it); `POST /purge` drops stored
//! responses (purge.rs); anything else is 404. With `[admin] token`, every request needs
//! `Authorization: Bearer TOKEN` (401 otherwise).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::purge::Purge;

/// The live dashboard (`GET /`): one self-contained page that polls `/metrics` and
/// `/top.json` of the listener that served it.
const DASHBOARD: &str = include_str!("dashboard.html");
use crate::request::Shared;
use crate::stats;

/// Serves the admin listener until `stop` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.changed() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    continue;
                }
            },
        };
        let shared = shared.clone();
        let timeout = shared.conf().settings.limits.header_timeout;
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(&shared, &req).await) }
            });
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new()).header_read_timeout(timeout);
            if let Err(e) = b.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}

async fn answer(shared: &Arc<Shared>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if let Some(token) = &shared.conf().settings.admin.token {
        if !bearer_matches(req, token) {
            let mut r = reply(
                StatusCode::UNAUTHORIZED,
                TEXT,
                "this admin listener needs `Authorization: Bearer TOKEN` ([admin] token)\n".into(),
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/") => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            DASHBOARD.to_string(),
        ),
        (&Method::GET | &Method::HEAD, "/top.json") => {
            (StatusCode::OK, "application/json", stats::top_json(&shared.stats, 50))
        }
        (&Method::GET | &Method::HEAD, "/metrics") => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            stats::encode(
                &shared.stats,
                stats::Scrape {
                    store: &shared.store,
                    backends: shared.sites.iter().flat_map(|s| s.upstreams()).map(|u| &u.limiter).collect(),
                    log_dropped: shared.access_log.as_ref().map(|l| &l.dropped),
                    // The first of each kind: their per-process labels are not per site.
                    app: shared
                        .sites
                        .iter()
                        .flat_map(|s| s.upstreams())
                        .find_map(|u| u.app_pool()),
                    fastcgi: shared
                        .sites
                        .iter()
                        .flat_map(|s| s.upstreams())
                        .find_map(|u| u.fastcgi_stats()),
                    sites: site_scrapes(shared),
                    tables: &side_tables(shared),
                    certificates: &shared
                        .tls
                        .as_ref()
                        .map(|t| t.certs.expiry())
                        .unwrap_or_default(),
                    acme: shared.acme.as_ref(),
                    tiers: shared.tiers.as_ref(),
                    quic: shared
                        .tls
                        .as_ref()
                        .and_then(|t| t.quic_stats.get())
                        .map_or(&[][..], |v| v.as_slice()),
                },
            ),
        ),
        (&Method::POST, "/purge") => match Purge::from_query(req.uri().query().unwrap_or("")) {
            Err(e) => (StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
            Ok(purge) => {
                let shared2 = shared.clone();
                let soft = purge.soft;
                // A prefix or a tag walks the whole store.
                let run = move || {
                    let (n, bans) = purge.run(&shared2.store, &*shared2)?;
                    if let Some(tiers) = &shared2.tiers {
                        bans.into_iter().for_each(|b| tiers.ban(b));
                    }
                    Ok::<_, String>(n)
                };
                match tokio::task::spawn_blocking(run).await {
                    Ok(Err(e)) => (StatusCode::NOT_FOUND, TEXT, format!("{e}\n")),
                    Ok(Ok(n)) => {
                        shared.stats.purged.inc_by(n as u64);
                        (
                            StatusCode::OK,
                            "application/json",
                            format!("{{\"purged\":{n},\"soft\":{soft}}}\n"),
                        )
                    }
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        TEXT,
                        format!("the purge failed: {e}\n"),
                    ),
                }
            }
        },
        // Tests only (`LEVEE_TEST_CLOCK=1`): moves levee's clock forward, so that a test of
        // a TTL advances time instead of sleeping through it (levee_cache::clock).
        (&Method::POST, "/clock") if test_clock_enabled() => {
            match clock_advance(req.uri().query().unwrap_or("")) {
                Some(by) => {
                    let ahead = levee_cache::clock::advance(by);
                    (StatusCode::OK, TEXT, format!("{}\n", ahead.as_millis()))
                }
                None => (
                    StatusCode::BAD_REQUEST,
                    TEXT,
                    "POST /clock?advance=DURATION (for example 1500ms or 3s)\n".to_string(),
                ),
            }
        }
        (&Method::POST, "/reload") => {
            let s = shared.clone();
            match tokio::task::spawn_blocking(move || s.reload_and_report()).await {
                Ok(Ok(kept)) if kept.is_empty() => {
                    (StatusCode::OK, TEXT, "configuration reloaded\n".to_string())
                }
                Ok(Ok(kept)) => (
                    StatusCode::OK,
                    TEXT,
                    format!(
                        "configuration reloaded; these changes need a restart and were not applied: {}\n",
                        kept.join(", ")
                    ),
                ),
                Ok(Err(e)) => (
                    StatusCode::BAD_REQUEST,
                    TEXT,
                    format!("reload refused, the previous configuration keeps running: {e}\n"),
                ),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("the reload failed: {e}\n")),
            }
        }
        (_, "/purge") => (
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "a purge is a POST: POST /purge?url=URL | ?prefix=URL | ?tag=TAG [&soft=1]\n".into(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: the admin listener serves GET / (dashboard), GET /metrics, GET /top.json, POST /purge and POST /reload\n"
                .to_string(),
        ),
    };
    reply(status, content_type, body)
}

/// `Authorization: Bearer TOKEN` (or, for a GET, `?token=TOKEN`: a browser opening the
/// dashboard cannot send a header), compared in time that does not depend on where the
/// two first differ.
/// Each site's counters and backends, for `/metrics`.
fn site_scrapes(shared: &Shared) -> Vec<stats::SiteScrape> {
    use std::sync::atomic::Ordering;
    shared
        .sites
        .iter()
        .map(|site| stats::SiteScrape {
            name: site.name.to_string(),
            requests: std::array::from_fn(|i| site.requests[i].load(Ordering::Relaxed)),
            backends: site
                .backends()
                .map(|(route, u)| stats::BackendScrape {
                    route: route.to_string(),
                    in_use: u.limiter.in_use(),
                    waiting: u.limiter.waiting(),
                    limit: u.limiter.limit(),
                    servers: u.servers(),
                })
                .collect(),
        })
        .collect()
}

fn bearer_matches(req: &Request<Incoming>, token: &str) -> bool {
    let from_query = || {
        (req.method() == Method::GET)
            .then(|| req.uri().query())
            .flatten()
            .and_then(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .find(|(k, _)| k == "token")
                    .map(|(_, v)| v.into_owned())
            })
    };
    let Some(given) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string)
        .or_else(from_query)
    else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The sizes of what levee keeps beside the cache, each bounded (metrics).
fn side_tables(shared: &Shared) -> Vec<(&'static str, &'static str, u64)> {
    let (derived, derived_max) = shared.encoder.derived_bytes();
    let (sendfile_bytes, sendfile_max) = shared.sendfile.held();
    vec![
        (
            "transcoded_bytes",
            "Bytes of stored pages kept in other codings (bounded by transcode_memory / 2; they go with their page)",
            derived,
        ),
        (
            "transcoded_bytes_max",
            "The bound of transcoded_bytes",
            derived_max,
        ),
        (
            "static_transcoded_bytes",
            "Bytes of static files kept compressed (bounded by transcode_memory / 2)",
            shared.encoder.static_forms_bytes(),
        ),
        (
            "sendfile_bytes",
            "Bytes of memfd copies of large bodies kept for sendfile",
            sendfile_bytes,
        ),
        (
            "sendfile_bytes_max",
            "The bound of sendfile_bytes",
            sendfile_max,
        ),
        (
            "hit_for_pass_urls",
            "URLs marked uncacheable for a while (at most 100,000)",
            shared.hit_for_pass.count(),
        ),
        (
            "websockets_open",
            "WebSockets open now",
            shared.tunnels.count() as u64,
        ),
        (
            "fills_registered",
            "Backend fetches registered for coalescing now",
            shared.fills.len() as u64,
        ),
        (
            "learned_session_cookies",
            "Cookie names learned from the backend's Set-Cookie (at most 1,024)",
            shared
                .sites
                .iter()
                .map(|s| s.sessions.learned_count() as u64)
                .sum(),
        ),
        (
            "anonymous_sessions",
            "Session cookie values remembered as anonymous visitors' (at most 200,000 per site)",
            shared
                .sites
                .iter()
                .map(|s| s.sessions.anonymous_count())
                .sum(),
        ),
        (
            "top_urls_tracked",
            "URLs tracked for the dashboard's top lists (at most 2,048)",
            shared.stats.top.len() as u64,
        ),
        (
            "proven_sessions",
            "Session values the backend gave out as people's, kept (at most 100,000)",
            shared.proven.len(),
        ),
        (
            "unproven_networks_tracked",
            "Client networks tracked for the dashboard's unproven-sessions list (at most 2,048)",
            shared.stats.unproven_nets.len() as u64,
        ),
        (
            "refused_networks_tracked",
            "Client networks tracked for the dashboard's refused list (at most 2,048)",
            shared.stats.refused_nets.len() as u64,
        ),
    ]
}

/// Whether levee runs under a test that moves its clock (`LEVEE_TEST_CLOCK=1`).
fn test_clock_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("LEVEE_TEST_CLOCK").is_some_and(|v| v == "1"))
}

/// `advance=1500ms` of `POST /clock`.
fn clock_advance(query: &str) -> Option<std::time::Duration> {
    let value = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("advance="))?;
    humantime::parse_duration(value).ok()
}

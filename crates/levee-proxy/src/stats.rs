//! Counters of what levee is doing: each one atomic, cheap to update on any path, read
//! by the admin listener's `/metrics` (Prometheus text format) and by tests, which wait
//! on them instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use levee_cache::Store;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::outcome::CacheResult;
use crate::upstream::UpstreamError;
use levee_limits::client_net::ClientNet;

use levee_limits::Limiter;

mod families;
mod fleet;
mod quic;
mod websockets;
use families::{register_classes, register_sites, register_tiers};
pub(crate) use families::{BackendScrape, SiteScrape};

/// Counters of what levee is doing. Cheap to update (each is one atomic), read by the
/// admin listener's `/metrics` and by tests, which wait on them instead of sleeping:
/// `levee_fills_in_flight 0` means every fill started so far has been stored or given up.
#[derive(Default)]
pub(crate) struct Stats {
    /// Filler tasks running (a fill counts until its response is stored or dropped).
    pub fills_in_flight: Gauge,
    /// Fills started.
    pub fills: Counter,
    /// Responses stored (new entries and entries refreshed by a 304).
    pub stored: Counter,
    /// Stored responses removed or marked stale by purges.
    pub purged: Counter,
    /// Responses by cache result (`CacheResult::COUNTED`) and status class (1xx..5xx):
    /// plain atomics, so that counting costs the hit path one increment and no lock;
    /// turned into a labelled family when scraped.
    requests: [[AtomicU64; 5]; CacheResult::COUNTED.len()],
    /// Responses by the protocol of their request (`PROTOCOLS`).
    protocols: [AtomicU64; PROTOCOLS.len()],
    /// Body bytes of responses whose length was known when they started.
    response_bytes: Counter,
    /// Time from the request's head to the response's head.
    latency: Latency,
    /// The same, of the requests the backend limiter refused (429/503 `X-Cache: ERROR`):
    /// what a refusal costs levee, apart from what the client's own machine adds.
    refusals: Latency,
    /// Backend requests by outcome (`BACKEND_RESULTS`).
    backend: [AtomicU64; BACKEND_RESULTS.len()],
    /// Requests that joined a fill another request started (coalesced).
    pub coalesced: Counter,
    /// Client connections open now.
    pub connections_open: Gauge,
    /// The URLs most often missed or passed, and why (the dashboard's table).
    pub top: TopUrls,
    /// The client networks refused most by the backend limiter's anonymous lane.
    pub refused_nets: TopNets,
    /// Requests with a session cookie (or credentials) nobody proved, scheduled as
    /// anonymous work: admitted to the backend, refused.
    unproven: [AtomicU64; 2],
    /// The client networks that sent them most.
    pub unproven_nets: TopNets,
    /// WebSockets: opened, closed by why, bytes each way, refused upgrades.
    pub websockets: websockets::WebSocketStats,
    /// Scrape-time copies of state kept elsewhere.
    cache_objects: Gauge,
    cache_bytes: Gauge,
    backend_in_use: Gauge,
    backend_waiting: Gauge,
    backend_limit: Gauge,
}

const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
/// The protocols responses are counted by, in the order of `Stats::protocols`.
const PROTOCOLS: [&str; 3] = ["h1", "h2", "h3"];
/// What a backend request came to, in the order of `Stats::backend`.
const BACKEND_RESULTS: [&str; 6] = [
    "ok",
    "connect_error",
    "timeout",
    "overloaded",
    "protocol_error",
    "bad_request",
];

impl Stats {
    /// Counts a response on its way out (`request::handle`, from its outcome).
    pub fn response(
        &self,
        result: CacheResult,
        status: http::StatusCode,
        version: http::Version,
        bytes: Option<u64>,
        took: Duration,
    ) {
        let class = usize::from(status.as_u16() / 100).clamp(1, 5) - 1;
        self.requests[result.index()][class].fetch_add(1, Ordering::Relaxed);
        let protocol = match version {
            http::Version::HTTP_2 => 1,
            http::Version::HTTP_3 => 2,
            _ => 0,
        };
        self.protocols[protocol].fetch_add(1, Ordering::Relaxed);
        if let Some(len) = bytes {
            self.response_bytes.inc_by(len);
        }
        self.latency.observe(took);
        if result == CacheResult::Error
            && matches!(
                status,
                http::StatusCode::TOO_MANY_REQUESTS | http::StatusCode::SERVICE_UNAVAILABLE
            )
        {
            self.refusals.observe(took);
        }
    }

    /// Counts what a backend request came to.
    pub fn backend<T>(&self, result: &Result<T, UpstreamError>) {
        let i = match result {
            Ok(_) => 0,
            Err(UpstreamError::Connect { .. }) => 1,
            Err(UpstreamError::Timeout { .. }) => 2,
            Err(UpstreamError::Overloaded { .. } | UpstreamError::Refused { .. }) => 3,
            Err(UpstreamError::Protocol { .. }) => 4,
            Err(UpstreamError::BadRequest { .. }) => 5,
        };
        self.backend[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request whose session nobody proved (request/proven.rs), from `net`.
    pub fn unproven_session(&self, net: ClientNet, refused: bool) {
        self.unproven[usize::from(refused)].fetch_add(1, Ordering::Relaxed);
        self.unproven_nets.note(net);
    }

    /// Counts a client connection until the returned guard drops.
    pub fn connection_opened(&self) -> InFlight {
        self.connections_open.inc();
        InFlight(self.connections_open.clone())
    }

    /// Counts a filler task until the returned guard drops.
    pub fn fill_started(&self) -> InFlight {
        self.fills.inc();
        self.fills_in_flight.inc();
        InFlight(self.fills_in_flight.clone())
    }
}

/// One unit of a gauge, given back on drop (however the task holding it ends).
pub(crate) struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The most requested URLs that were not served from the cache (MISS that was not
/// stored, PASS), with the reason. Noted only for those, which go to the backend anyway,
/// so the lock is never on the hit path. Bounded: when full, the URLs seen once go.
#[derive(Default)]
pub(crate) struct TopUrls(std::sync::Mutex<std::collections::HashMap<String, Noted>>);

struct Noted {
    count: u64,
    cache: &'static str,
    reason: String,
}

const MAX_TRACKED: usize = 2048;

impl TopUrls {
    /// URLs tracked now (a metric; at most MAX_TRACKED).
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    pub fn note(&self, url: &str, cache: &'static str, reason: &str) {
        let Ok(mut map) = self.0.lock() else { return };
        if let Some(n) = map.get_mut(url) {
            n.count += 1;
            n.cache = cache;
            if n.reason != reason {
                n.reason = reason.to_string();
            }
            return;
        }
        if map.len() >= MAX_TRACKED {
            let least = map.values().map(|n| n.count).min().unwrap_or(0);
            map.retain(|_, n| n.count > least);
        }
        map.insert(
            url.to_string(),
            Noted {
                count: 1,
                cache,
                reason: reason.to_string(),
            },
        );
    }

    /// The `n` most frequent, as JSON rows for the dashboard.
    pub fn rows(&self, n: usize) -> serde_json::Value {
        let Ok(map) = self.0.lock() else {
            return serde_json::Value::Array(Vec::new());
        };
        let mut rows: Vec<(&String, &Noted)> = map.iter().collect();
        rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
        let rows: Vec<serde_json::Value> = rows
            .into_iter()
            .take(n)
            .map(|(url, n)| {
                serde_json::json!({
                    "url": url, "requests": n.count, "cache": n.cache, "reason": n.reason,
                })
            })
            .collect();
        serde_json::Value::Array(rows)
    }
}

/// Refusals per client network, for the dashboard and `/top.json`. Noted only when a
/// request is refused (never on the hit path); bounded like [`TopUrls`].
#[derive(Default)]
pub(crate) struct TopNets(std::sync::Mutex<std::collections::HashMap<ClientNet, u64>>);

impl TopNets {
    pub fn note(&self, net: ClientNet) {
        let Ok(mut map) = self.0.lock() else { return };
        if let Some(n) = map.get_mut(&net) {
            *n += 1;
            return;
        }
        if map.len() >= MAX_TRACKED {
            let least = map.values().copied().min().unwrap_or(0);
            map.retain(|_, n| *n > least);
        }
        map.insert(net, 1);
    }

    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    /// The `n` noted most, as JSON rows counting `what`.
    pub fn json(&self, n: usize, what: &str) -> serde_json::Value {
        let Ok(map) = self.0.lock() else {
            return serde_json::Value::Array(Vec::new());
        };
        let mut rows: Vec<(String, u64)> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        rows.into_iter()
            .take(n)
            .map(|(net, count)| serde_json::json!({ "network": net, what: count }))
            .collect()
    }
}

/// `/top.json`: the URLs most often not served from the cache, the client networks
/// refused most, and those that sent most session cookies nobody proved.
pub(crate) fn top_json(s: &Stats, n: usize) -> String {
    serde_json::json!({
        "urls": s.top.rows(n),
        "refused_networks": s.refused_nets.json(n, "refused"),
        "unproven_session_networks": s.unproven_nets.json(n, "requests"),
    })
    .to_string()
}

/// Resident memory of this process, from /proc (0 where there is none).
fn resident_bytes() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Upper bounds (seconds) of the latency buckets: 100 us to ~26 s, doubling.
const LATENCY_BOUNDS: [f64; 19] = [
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048,
    0.4096, 0.8192, 1.6384, 3.2768, 6.5536, 13.1072, 26.2144,
];

/// A histogram of atomics: prometheus-client's takes a lock per observation, which every
/// request would contend for. Written out by hand at scrape time.
#[derive(Default)]
struct Latency {
    buckets: [AtomicU64; LATENCY_BOUNDS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Latency {
    fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = LATENCY_BOUNDS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// OpenMetrics text of the histogram, cumulative buckets.
    fn encode(&self, out: &mut String, name: &str, help: &str) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let _ = writeln!(out, "# UNIT {name} seconds");
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BOUNDS.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
    }
}

type Labels = Vec<(&'static str, &'static str)>;

/// Each app process's state, labelled by its place in the pool (`process="0"`...).
fn register_app(r: &mut Registry, pool: &levee_app::Pool) {
    type ByProcess = Vec<(&'static str, String)>;
    let ready = Family::<ByProcess, Gauge>::default();
    let in_flight = Family::<ByProcess, Gauge>::default();
    let rss = Family::<ByProcess, Gauge>::default();
    let served = Family::<ByProcess, Counter>::default();
    let restarts = Family::<ByProcess, Counter>::default();
    let recycled = Family::<ByProcess, Counter>::default();
    for p in pool.states() {
        let l = vec![("process", p.index.to_string())];
        ready.get_or_create(&l).set(i64::from(p.ready));
        in_flight
            .get_or_create(&l)
            .set(i64::try_from(p.in_flight).unwrap_or(i64::MAX));
        rss.get_or_create(&l)
            .set(i64::try_from(p.rss_bytes).unwrap_or(i64::MAX));
        served.get_or_create(&l).inc_by(p.served);
        restarts.get_or_create(&l).inc_by(p.restarts);
        recycled.get_or_create(&l).inc_by(p.recycled);
    }
    r.register(
        "app_process_ready",
        "1 when the app process takes requests",
        ready,
    );
    r.register(
        "app_process_in_flight",
        "Requests an app process is serving now",
        in_flight,
    );
    r.register(
        "app_process_resident_bytes",
        "Resident memory of an app process",
        rss,
    );
    r.register(
        "app_process_served",
        "Requests served by an app process's place in the pool",
        served,
    );
    r.register(
        "app_process_restarts",
        "Unplanned restarts: the process exited or was killed",
        restarts,
    );
    r.register(
        "app_process_recycled",
        "Planned replacements: requests, memory, age or a reload",
        recycled,
    );
}

/// What a scrape reads besides the counters: state kept elsewhere, read now.
pub(crate) struct Scrape<'a> {
    pub store: &'a Store,
    /// Every backend's limiter (sites' and routes'): the backend gauges are their sums.
    pub backends: Vec<&'a Limiter>,
    pub log_dropped: Option<&'a Counter>,
    pub app: Option<&'a levee_app::Pool>,
    pub fastcgi: Option<levee_fastcgi::PoolStats>,
    /// Gauges of the side tables: (name, help, value).
    pub tables: &'a [(&'static str, &'static str, u64)],
    pub certificates: &'a [levee_tls::Expiry],
    pub acme: Option<&'a levee_acme::Manager>,
    /// Per site, when there are several (the totals above cover them all).
    pub sites: Vec<SiteScrape>,
    /// Disk and Redis below memory, when configured.
    pub tiers: Option<&'a levee_tiers::Tiers>,
    /// The HTTP/3 endpoints' counters.
    pub quic: &'a [std::sync::Arc<levee_h3::Stats>],
}

/// The metrics in Prometheus' text format, read now.
pub(crate) fn encode(s: &Stats, scrape: Scrape<'_>) -> String {
    let Scrape {
        store,
        backends,
        log_dropped,
        app,
        fastcgi,
        tables,
        certificates,
        acme,
        sites,
        tiers,
        quic,
    } = scrape;
    store.run_pending_tasks();
    s.cache_objects
        .set(i64::try_from(store.len()).unwrap_or(i64::MAX));
    s.cache_bytes
        .set(i64::try_from(store.weighted_size()).unwrap_or(i64::MAX));
    let sum = |f: fn(&Limiter) -> usize| {
        i64::try_from(backends.iter().map(|l| f(l)).sum::<usize>()).unwrap_or(i64::MAX)
    };
    s.backend_in_use.set(sum(Limiter::in_use));
    s.backend_waiting.set(sum(Limiter::waiting));
    s.backend_limit.set(sum(Limiter::limit));
    let mut r = Registry::with_prefix("levee");
    r.register(
        "fills_in_flight",
        "Backend fetches for the cache still running (streaming or storing)",
        s.fills_in_flight.clone(),
    );
    r.register(
        "fills",
        "Backend fetches for the cache started",
        s.fills.clone(),
    );
    r.register(
        "cache_stores",
        "Responses stored or refreshed in the cache",
        s.stored.clone(),
    );
    r.register(
        "purged_objects",
        "Stored responses removed or marked stale by purges (admin API and PURGE)",
        s.purged.clone(),
    );
    r.register(
        "cache_objects",
        "URLs in the cache",
        s.cache_objects.clone(),
    );
    r.register(
        "cache_bytes",
        "Bytes charged against the cache size",
        s.cache_bytes.clone(),
    );
    r.register(
        "backend_in_use",
        "Backend requests holding a slot of backend_max_concurrency",
        s.backend_in_use.clone(),
    );
    r.register(
        "backend_waiting",
        "Requests waiting in the queue for a backend slot",
        s.backend_waiting.clone(),
    );
    if let Some(f) = fastcgi {
        let counter = |v: u64| {
            let c = Counter::<u64>::default();
            c.inc_by(v);
            c
        };
        r.register(
            "fastcgi_connects",
            "Connections opened to php-fpm (a kept-alive one serves many requests)",
            counter(f.connects),
        );
        r.register(
            "fastcgi_reused",
            "Requests sent on a kept-alive php-fpm connection",
            counter(f.reused),
        );
        let idle = Gauge::<i64>::default();
        idle.set(i64::try_from(f.idle).unwrap_or(i64::MAX));
        r.register(
            "fastcgi_idle",
            "Kept-alive php-fpm connections idle now (each holds a php-fpm worker)",
            idle,
        );
    }
    r.register(
        "backend_limit",
        "Concurrent requests the backend may see now (moves when adaptive)",
        s.backend_limit.clone(),
    );
    // Every structure that grows with traffic, so that growth shows before it hurts.
    for (name, help, value) in tables {
        let g = Gauge::<i64>::default();
        g.set(i64::try_from(*value).unwrap_or(i64::MAX));
        r.register(*name, *help, g);
    }
    let requests = Family::<Labels, Counter>::default();
    for (result, by_class) in CacheResult::COUNTED.iter().zip(&s.requests) {
        for (class, n) in STATUS_CLASSES.iter().zip(by_class) {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                requests
                    .get_or_create(&vec![("cache", result.label()), ("status", *class)])
                    .inc_by(n);
            }
        }
    }
    r.register(
        "requests",
        "Responses sent, by cache result (X-Cache) and status class",
        requests,
    );
    let protocols = Family::<Labels, Counter>::default();
    for (protocol, n) in PROTOCOLS.iter().zip(&s.protocols) {
        protocols
            .get_or_create(&vec![("protocol", *protocol)])
            .inc_by(n.load(Ordering::Relaxed));
    }
    r.register(
        "responses_by_protocol",
        "Responses by the protocol of their request: h1 (HTTP/1.x), h2, h3 (QUIC)",
        protocols,
    );
    let backend = Family::<Labels, Counter>::default();
    for (result, n) in BACKEND_RESULTS.iter().zip(&s.backend) {
        backend
            .get_or_create(&vec![("result", *result)])
            .inc_by(n.load(Ordering::Relaxed));
    }
    r.register(
        "backend_requests",
        "Backend requests by outcome (overloaded: shed, no slot within the queue)",
        backend,
    );
    r.register(
        "response_bytes",
        "Body bytes of responses whose length was known when they started",
        s.response_bytes.clone(),
    );
    let unproven = Family::<Labels, Counter>::default();
    for (outcome, n) in ["admitted", "refused"].iter().zip(&s.unproven) {
        unproven
            .get_or_create(&vec![("outcome", *outcome)])
            .inc_by(n.load(Ordering::Relaxed));
    }
    r.register(
        "unproven_sessions",
        "Requests with a session cookie or credentials the backend never gave out or accepted, scheduled as anonymous work, by what became of them",
        unproven,
    );
    s.websockets.register(&mut r);
    quic::register(&mut r, quic);
    r.register(
        "coalesced",
        "Requests that waited for another request's backend fetch instead of making their own",
        s.coalesced.clone(),
    );
    r.register(
        "connections_open",
        "Client connections open now",
        s.connections_open.clone(),
    );
    let rss = Gauge::<i64>::default();
    rss.set(resident_bytes());
    r.register(
        "process_resident_bytes",
        "Resident memory of the levee process",
        rss,
    );
    let evictions = Counter::<u64>::default();
    evictions.inc_by(store.evictions());
    r.register(
        "cache_evictions",
        "Stored responses evicted to make room (not expiries or purges)",
        evictions,
    );
    if let Some(dropped) = log_dropped {
        r.register(
            "access_log_dropped",
            "Access log lines dropped because the writer could not keep up",
            dropped.clone(),
        );
    }
    if let Some(pool) = app {
        register_app(&mut r, pool);
    }
    register_sites(&mut r, &sites);
    register_classes(&mut r, &backends);
    fleet::register_fleet(&mut r, &backends);
    if let Some(t) = tiers {
        register_tiers(&mut r, t);
    }
    if !certificates.is_empty() {
        // One per certificate file (ACME's included): alert on `levee_tls_certificate_expiry_seconds - time()`.
        let expiry = Family::<Vec<(&'static str, String)>, Gauge>::default();
        for c in certificates {
            expiry
                .get_or_create(&vec![
                    ("file", c.file.display().to_string()),
                    ("names", c.names.join(",")),
                ])
                .set(c.not_after_unix);
        }
        r.register(
            "tls_certificate_expiry_seconds",
            "When each HTTPS certificate expires (notAfter), in seconds since the Unix epoch",
            expiry,
        );
    }
    if let Some(acme) = acme {
        for (name, help, n) in [
            (
                "acme_orders",
                "ACME orders placed since start",
                acme.orders(),
            ),
            (
                "acme_certificates_issued",
                "Certificates issued by ACME and served since start",
                acme.issued(),
            ),
            (
                "acme_failures",
                "ACME orders that failed since start (each retried later)",
                acme.failures(),
            ),
        ] {
            let c = Counter::<u64>::default();
            c.inc_by(n);
            r.register(name, help, c);
        }
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    // The hand-made histogram goes before the end marker.
    let end = out.rfind("# EOF").unwrap_or(out.len());
    let mut tail = out.split_off(end);
    s.latency.encode(
        &mut out,
        "levee_request_duration_seconds",
        "Time from a request's head to its response's head.",
    );
    s.refusals.encode(
        &mut out,
        "levee_refusal_duration_seconds",
        "Time from a request's head to its refusal (429 or 503 for want of a backend slot).",
    );
    if tail.is_empty() {
        tail.push_str("# EOF\n");
    }
    out.push_str(&tail);
    out
}

//! The labelled families and per-tier numbers of a scrape: per site, per backend
//! server, and the disk and Redis tiers.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::outcome::CacheResult;

/// One site's share, read at scrape time.
pub(crate) struct SiteScrape {
    pub name: String,
    /// Responses by cache result (`CacheResult::COUNTED`).
    pub requests: [u64; CacheResult::COUNTED.len()],
    pub backends: Vec<BackendScrape>,
}

/// One backend of a site: the site's own (`route = "/"`) or a route's.
pub(crate) struct BackendScrape {
    pub route: String,
    pub in_use: usize,
    pub waiting: usize,
    pub limit: usize,
    /// (address, up, outstanding, failures) of each server of an HTTP backend.
    pub servers: Vec<(String, bool, usize, u64)>,
}

/// Per-site requests and per-backend gauges, labelled `site` (and `route`, `server`).
pub(super) fn register_sites(r: &mut Registry, sites: &[SiteScrape]) {
    type L = Vec<(&'static str, String)>;
    let requests = Family::<L, Counter>::default();
    let in_use = Family::<L, Gauge>::default();
    let waiting = Family::<L, Gauge>::default();
    let limit = Family::<L, Gauge>::default();
    let up = Family::<L, Gauge>::default();
    let outstanding = Family::<L, Gauge>::default();
    let failures = Family::<L, Counter>::default();
    let gauge = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    for site in sites {
        for (result, n) in CacheResult::COUNTED.iter().zip(&site.requests) {
            if *n > 0 {
                requests
                    .get_or_create(&vec![
                        ("site", site.name.clone()),
                        ("cache", result.label().to_string()),
                    ])
                    .inc_by(*n);
            }
        }
        for b in &site.backends {
            let l = vec![("site", site.name.clone()), ("route", b.route.clone())];
            in_use.get_or_create(&l).set(gauge(b.in_use));
            waiting.get_or_create(&l).set(gauge(b.waiting));
            limit.get_or_create(&l).set(gauge(b.limit));
            for (server, is_up, out, failed) in &b.servers {
                let mut l = l.clone();
                l.push(("server", server.clone()));
                up.get_or_create(&l).set(i64::from(*is_up));
                outstanding.get_or_create(&l).set(gauge(*out));
                failures.get_or_create(&l).inc_by(*failed);
            }
        }
    }
    if sites.len() > 1 {
        r.register(
            "site_requests",
            "Responses sent by each site, by cache result",
            requests,
        );
    }
    r.register(
        "site_backend_in_use",
        "Requests holding a slot of each backend's limit",
        in_use,
    );
    r.register(
        "site_backend_waiting",
        "Requests waiting for a slot of each backend",
        waiting,
    );
    r.register(
        "site_backend_limit",
        "Concurrent requests each backend may see now",
        limit,
    );
    r.register(
        "backend_server_up",
        "1 when a server of an HTTP backend takes requests (not backing off after a failure, passing its health check)",
        up,
    );
    r.register(
        "backend_server_outstanding",
        "Requests sent to a server and not finished",
        outstanding,
    );
    r.register(
        "backend_server_failures",
        "Refused connections and timeouts of a server, each taking it out for a backoff",
        failures,
    );
}

/// The disk and Redis tiers' numbers, as their crates count them.
pub(super) fn register_tiers(r: &mut Registry, t: &levee_tiers::Tiers) {
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let gauge = |r: &mut Registry, name: &'static str, help: &'static str, v: i64| {
        let g = Gauge::<i64>::default();
        g.set(v);
        r.register(name, help, g);
    };
    let counter = |r: &mut Registry, name: &'static str, help: &'static str, v: u64| {
        let c = Counter::<u64>::default();
        c.inc_by(v);
        r.register(name, help, c);
    };
    if let Some(disk) = &t.disk {
        let d = disk.stats();
        gauge(
            r,
            "disk_objects",
            "URLs kept by the disk tier",
            i(d.objects),
        );
        gauge(
            r,
            "disk_bytes",
            "Bytes of the disk tier's files",
            i(d.bytes),
        );
        gauge(
            r,
            "disk_capacity_bytes",
            "The disk tier's bound (cache.disk_size)",
            i(d.capacity),
        );
        gauge(
            r,
            "disk_scan_done",
            "1 once the disk tier has indexed what it found at start",
            i64::from(d.scan_done),
        );
        counter(r, "disk_hits", "Misses in memory found on disk", d.hits);
        counter(
            r,
            "disk_misses",
            "Misses in memory not found on disk",
            d.misses,
        );
        counter(r, "disk_writes", "Records written to disk", d.writes);
        counter(
            r,
            "disk_write_dropped",
            "Writes dropped because the disk could not keep up",
            d.write_dropped,
        );
        counter(
            r,
            "disk_write_errors",
            "Writes that failed (full or failing disk)",
            d.write_errors,
        );
        counter(
            r,
            "disk_torn",
            "Records refused on read for a bad checksum (a crash tore them) and deleted",
            d.torn,
        );
        counter(
            r,
            "disk_evictions",
            "Records evicted to keep the disk tier within its size",
            d.evictions,
        );
    }
    if let Some(redis) = &t.redis {
        let s = redis.stats();
        gauge(
            r,
            "redis_up",
            "1 while the shared Redis tier answers; 0: serving from local tiers, reconnecting",
            i64::from(s.up),
        );
        counter(
            r,
            "redis_hits",
            "Misses on this node found in Redis (another node fetched them)",
            s.hits,
        );
        counter(
            r,
            "redis_misses",
            "Misses on this node not found in Redis",
            s.misses,
        );
        counter(
            r,
            "redis_errors",
            "Redis commands that failed or timed out",
            s.errors,
        );
        counter(r, "redis_writes", "Records written to Redis", s.writes);
        counter(
            r,
            "redis_write_dropped",
            "Writes to Redis dropped (down, or too many in flight)",
            s.write_dropped,
        );
        counter(
            r,
            "redis_locks_acquired",
            "Fills this node made for the whole cluster (it held the key's lock)",
            s.locks_acquired,
        );
        counter(
            r,
            "redis_locks_busy",
            "Fills that found another node fetching the key",
            s.locks_busy,
        );
        counter(
            r,
            "redis_waits_served",
            "Fills served by another node's fetch after waiting for it",
            s.waits_served,
        );
        counter(
            r,
            "redis_bans_received",
            "Purges received from other nodes",
            s.bans_received,
        );
        counter(
            r,
            "redis_reconnects",
            "Reconnections to Redis",
            s.reconnects,
        );
        counter(
            r,
            "redis_failovers",
            "Primaries replaced: Sentinel named a new one, or a Cluster replica took over its primary's slots",
            s.failovers,
        );
        if let Some((mode, primaries)) = redis.reached() {
            // One series per primary written to (Varnish's and node_exporter's "info"
            // convention: the labels are the news, the value is 1).
            let family = Family::<Vec<(&'static str, String)>, Gauge>::default();
            for p in primaries {
                family
                    .get_or_create(&vec![("mode", mode.as_str().to_string()), ("primary", p)])
                    .set(1);
            }
            r.register(
                "redis_primary",
                "The Redis primaries this node writes to (one server, Sentinel's primary, or a Cluster's), by mode",
                family,
            );
        }
    }
}

/// The backend limiter's classes (limit.rs), summed over every backend: admitted,
/// queued, in flight, waited, and refused by reason.
pub(super) fn register_classes(r: &mut Registry, backends: &[&levee_limits::Limiter]) {
    use levee_limits::{Class, Refusal};
    use std::sync::atomic::Ordering::Relaxed;
    type L = Vec<(&'static str, &'static str)>;
    let admitted = Family::<L, Counter>::default();
    let queued = Family::<L, Gauge>::default();
    let in_flight = Family::<L, Gauge>::default();
    let wait = Family::<L, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    let refused = Family::<L, Counter>::default();
    let gauge = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    for (i, class) in Class::LABELS.iter().enumerate() {
        let l = vec![("class", *class)];
        let (mut a, mut q, mut f, mut w) = (0u64, 0usize, 0usize, 0u64);
        for b in backends {
            let s = b.stats();
            a += s.admitted[i].load(Relaxed);
            q += s.queued[i].load(Relaxed);
            f += s.in_flight[i].load(Relaxed);
            w += s.wait_micros[i].load(Relaxed);
        }
        admitted.get_or_create(&l).inc_by(a);
        queued.get_or_create(&l).set(gauge(q));
        in_flight.get_or_create(&l).set(gauge(f));
        wait.get_or_create(&l).inc_by(w as f64 / 1e6);
    }
    for why in Refusal::ALL {
        let class = match why {
            Refusal::QueueFull | Refusal::QueueTimeout => "people",
            _ => "anonymous",
        };
        let n: u64 = backends
            .iter()
            .map(|b| b.stats().refused[why as usize].load(Relaxed))
            .sum();
        refused
            .get_or_create(&vec![("class", class), ("reason", why.reason())])
            .inc_by(n);
    }
    r.register(
        "backend_admitted",
        "Backend requests given a slot, by class (shared: revalidations of stored pages; session; anonymous: the lane crawlers land in)",
        admitted,
    );
    r.register(
        "backend_queued",
        "Requests waiting for a backend slot now, by class",
        queued,
    );
    r.register(
        "backend_in_flight",
        "Backend requests holding a slot now, by class",
        in_flight,
    );
    r.register(
        "backend_wait_seconds",
        "Time admitted requests waited for a backend slot, by class",
        wait,
    );
    let cap = Gauge::<i64>::default();
    cap.set(gauge(backends.iter().map(|b| b.lane_cap()).sum()));
    r.register(
        "backend_anonymous_cap",
        "Slots anonymous work may hold now while people have work: backend_anonymous_share of the limit at most, less while people's requests slow down",
        cap,
    );
    r.register(
        "backend_refused",
        "Requests refused a backend slot (never sent), by class and reason",
        refused,
    );
    let over = Counter::<u64>::default();
    over.inc_by(
        backends
            .iter()
            .map(|b| b.stats().over_share.load(Relaxed))
            .sum(),
    );
    r.register(
        "backend_sessions_over_share",
        "Logged-in people's requests beyond one session's share of the session class (2 at once), scheduled as anonymous work",
        over,
    );
}

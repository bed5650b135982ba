//! Counters of what levee is doing: each one atomic, cheap to update on any path, read
//! by the admin listener's `/metrics` (Prometheus text format) and by tests, which wait
//! on them instead of sleeping.

use levee_cache::Store;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::upstream::Limiter;

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
    /// Scrape-time copies of state kept elsewhere.
    cache_objects: Gauge,
    cache_bytes: Gauge,
    backend_in_use: Gauge,
    backend_waiting: Gauge,
}

impl Stats {
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

/// The metrics in Prometheus' text format, read now.
pub(crate) fn encode(s: &Stats, store: &Store, limiter: &Limiter) -> String {
    store.run_pending_tasks();
    s.cache_objects
        .set(i64::try_from(store.len()).unwrap_or(i64::MAX));
    s.cache_bytes
        .set(i64::try_from(store.weighted_size()).unwrap_or(i64::MAX));
    s.backend_in_use
        .set(i64::try_from(limiter.in_use()).unwrap_or(i64::MAX));
    s.backend_waiting
        .set(i64::try_from(limiter.waiting()).unwrap_or(i64::MAX));
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
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
}

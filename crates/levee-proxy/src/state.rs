//! What every request shares: the settings, the cache and its fills, the backend, the
//! encoder, and the counters ([`Stats`]) that tests wait on and the admin listener
//! exports.

use std::sync::Arc;
use std::time::Duration;

use levee_cache::{CacheKey, Coalescer, NotStored, PolicyConfig, Store};
use levee_config::{CacheSettings, Settings};
use levee_static::{StaticConfig, StaticFiles};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::encoding::Encoder;
use crate::request::fill::FillHead;
use crate::upstream::Upstream;
use crate::zerocopy;

/// Everything the request phases share.
pub(crate) struct Shared {
    pub settings: Settings,
    pub store: Store,
    pub fills: Arc<Coalescer<FillHead>>,
    /// Keys whose last response was not cacheable: fetched without coalescing for a while.
    pub hit_for_miss: moka::sync::Cache<CacheKey, NotStored>,
    pub upstream: Upstream,
    pub policy: PolicyConfig,
    /// Files of the document root, when there is one.
    pub files: Option<StaticFiles>,
    pub encoder: Encoder,
    /// Memfd copies of hot large bodies, sent with sendfile.
    pub sendfile: zerocopy::Files,
    pub stats: Stats,
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
        Ok(Shared {
            files,
            encoder: Encoder::new(&settings.compression),
            // Hot large bodies only: a bounded extra copy of what the cache holds.
            sendfile: zerocopy::Files::new((c.size / 4).clamp(16 << 20, 256 << 20)),
            store: Store::new(c.size),
            fills: Coalescer::new(FillHead::abandoned),
            hit_for_miss: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(c.hit_for_miss.max(Duration::from_millis(1)))
                .build(),
            upstream: Upstream::new(&settings),
            policy: policy_config(c),
            stats: Stats::default(),
            settings,
        })
    }
}

/// The storage policy's knobs, from the settings.
fn policy_config(c: &CacheSettings) -> PolicyConfig {
    PolicyConfig {
        heuristic: c.heuristic,
        heuristic_fraction: c.heuristic_fraction,
        heuristic_max: c.heuristic_max,
        micro_cache: c.micro_cache,
        grace: c.grace,
        keep: c.keep,
        max_object_size: c.max_object_size,
    }
}

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
pub(crate) fn encode_metrics(shared: &Shared) -> String {
    let s = &shared.stats;
    shared.store.run_pending_tasks();
    s.cache_objects
        .set(i64::try_from(shared.store.len()).unwrap_or(i64::MAX));
    s.cache_bytes
        .set(i64::try_from(shared.store.weighted_size()).unwrap_or(i64::MAX));
    let limiter = &shared.upstream.limiter;
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

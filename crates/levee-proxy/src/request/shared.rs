//! What every phase of a request shares: the settings, the cache and its fills, the
//! backend, the encoder and the counters; and what a fill tells the requests waiting
//! for it ([`FillHead`]).

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use std::time::{Duration, Instant};

use http::{HeaderMap, StatusCode};
use levee_cache::{CacheKey, Coalescer, Entry, NotStored, PolicyConfig, Store, VaryKey};
use levee_config::{CacheSettings, Settings};
use levee_static::{StaticConfig, StaticFiles};

use super::sessions::Sessions;
use crate::access_log::AccessLogger;
use crate::encoding::Encoder;
use crate::server::ServeError;
use crate::stats::Stats;
use crate::upstream::{Upstream, UpstreamError};
use crate::zerocopy;

/// What a reload replaces (SIGHUP, `POST /reload`): the settings and what is derived
/// from them alone. Read with [`Shared::conf`].
pub(crate) struct Conf {
    pub settings: Settings,
    pub policy: PolicyConfig,
}

/// Re-reads the configuration (the binary's config file and flags).
pub type Reloader = Box<dyn Fn() -> Result<Settings, String> + Send + Sync>;

/// Everything the request phases share.
pub(crate) struct Shared {
    conf: ArcSwap<Conf>,
    /// Set once serving starts, when there is a config to re-read.
    pub reloader: OnceLock<Reloader>,
    pub store: Store,
    pub fills: Arc<Coalescer<FillHead>>,
    /// Keys whose last response was not cacheable: fetched without coalescing for a while.
    pub hit_for_miss: moka::sync::Cache<CacheKey, NotStored>,
    pub upstream: Upstream,
    /// Files of the document root, when there is one.
    pub files: Option<StaticFiles>,
    pub encoder: Encoder,
    /// Memfd copies of hot large bodies, sent with sendfile.
    pub sendfile: zerocopy::Files,
    pub stats: Stats,
    /// Which cookies mean a session: configured and learned.
    pub sessions: Sessions,
    /// One line per request, when `[log] access` is on.
    pub access_log: Option<AccessLogger>,
}

impl Shared {
    /// Fails when the document root cannot be used or the access log cannot be opened.
    pub fn new(settings: Settings) -> Result<Shared, ServeError> {
        let files = match &settings.root {
            Some(root) => {
                let s = &settings.static_files;
                let mut config = StaticConfig::new(root);
                config.index = s.index.clone();
                config.asset_extensions = s.asset_extensions.clone();
                config.asset_max_age = s.asset_max_age;
                config.memory_cache = s.memory;
                config.memory_max_file = s.memory_max_file;
                Some(StaticFiles::new(config).map_err(ServeError::Root)?)
            }
            None => None,
        };
        let access_log = match &settings.access_log {
            Some(config) => Some(AccessLogger::start(config).map_err(|source| {
                ServeError::AccessLog {
                    file: config
                        .file
                        .as_ref()
                        .map_or("standard output".into(), |f| f.display().to_string()),
                    source,
                }
            })?),
            None => None,
        };
        let c = &settings.cache;
        Ok(Shared {
            access_log,
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
            upstream: Upstream::new(&settings).map_err(ServeError::Backend)?,
            stats: Stats::default(),
            sessions: Sessions::new(settings.anonymous.session_cookies.clone()),
            reloader: OnceLock::new(),
            conf: ArcSwap::from_pointee(Conf {
                policy: policy_config(c),
                settings,
            }),
        })
    }

    /// The settings in force now (a reload may replace them between two calls).
    pub fn conf(&self) -> arc_swap::Guard<Arc<Conf>> {
        self.conf.load()
    }

    /// Re-reads the configuration and applies what can change while serving; the rest
    /// keeps its running value and is named in the answer ("needs a restart"). An
    /// invalid configuration changes nothing: its error is the answer.
    pub fn reload(&self) -> Result<Vec<&'static str>, String> {
        let Some(reloader) = self.reloader.get() else {
            return Err("levee was started without a configuration to re-read".into());
        };
        let mut new = reloader()?;
        let old = self.conf();
        let mut restart = Vec::new();
        // What the running structures were built from (sockets, threads, the backend
        // pool, the cache's capacity, the file cache, codecs, the log writer) stays as
        // it is. Compared by their Debug form: not every settings type is PartialEq.
        macro_rules! keep {
            ($name:literal, $($field:ident).+) => {
                if format!("{:?}", new.$($field).+) != format!("{:?}", old.settings.$($field).+) {
                    restart.push($name);
                    new.$($field).+ = old.settings.$($field).+.clone();
                }
            };
        }
        keep!("listen", listen);
        keep!("workers", workers);
        keep!("backend", backend);
        keep!("root", root);
        keep!("static", static_files);
        keep!("fastcgi", fastcgi);
        keep!("compression", compression);
        keep!("limits", limits);
        keep!("cache.size", cache.size);
        keep!("cache.hit_for_miss", cache.hit_for_miss);
        keep!("admin.listen", admin.listen);
        keep!("log", access_log);
        self.sessions
            .set_configured(new.anonymous.session_cookies.clone());
        // The application's code may have changed too: a rolling restart of its
        // processes, each replacement ready before the old one stops.
        if let Some(pool) = self.upstream.app_pool() {
            pool.restart_all();
        }
        self.conf.store(Arc::new(Conf {
            policy: policy_config(&new.cache),
            settings: new,
        }));
        Ok(restart)
    }
}

/// The storage policy's knobs, from the settings.
fn policy_config(c: &CacheSettings) -> PolicyConfig {
    PolicyConfig {
        heuristic: c.heuristic,
        heuristic_fraction: c.heuristic_fraction,
        heuristic_max: c.heuristic_max,
        micro_cache: c.micro_cache,
        anonymous_ttl: c.anonymous_ttl,
        grace: c.grace,
        keep: c.keep,
        max_object_size: c.max_object_size,
    }
}

/// What waiting requests learn from a fill once the backend answered.
pub(crate) enum FillHead {
    /// A full response is streaming in.
    Stream(StreamHead),
    /// The backend confirmed (304) a stale entry; here it is, refreshed.
    Refreshed(Arc<Entry>),
    /// No response: connect failure, timeout, overload, or the filler went away.
    Failed(UpstreamError),
    /// The backend answered 500, 502, 503 or 504 while a stale copy may stand in for it
    /// (RFC 5861 §4). Waiters with such a copy serve it; the others ask the backend.
    ErrorStatus(StatusCode),
}

impl FillHead {
    /// Published by the [`FillGuard`] when a filler ends without a head (a bug or a
    /// panic): waiters answer 502 or serve stale instead of waiting forever.
    pub fn abandoned() -> FillHead {
        FillHead::Failed(UpstreamError::Protocol {
            backend: "fill".into(),
            detail: "levee's fetch ended without a response".into(),
        })
    }
}

pub(crate) struct StreamHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub vary: VaryKey,
    pub storable: Result<(), NotStored>,
    pub initial_age: Duration,
    pub received: Instant,
}

impl StreamHead {
    /// `current_age` (RFC 9111 §4.2.3) at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.received)
    }
}

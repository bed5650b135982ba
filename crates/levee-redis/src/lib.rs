//! levee's shared cache tier: several levee nodes in front of one site share their
//! cached records, their fills and their purges through one Redis (or Valkey).
//!
//! - **Records** ([`Redis::get`], [`Redis::put`]): every variant of a key as one
//!   self-checking record (`levee_cache::codec`), stored with the time it is worth
//!   keeping (freshness plus stale window) as its TTL; large records in chunks.
//! - **Fill locks** ([`Redis::lock`], [`Redis::wait_for`]): one backend fetch per key
//!   across all nodes; the others wait for its record, or fetch themselves when Redis
//!   cannot tell.
//! - **Purges** ([`Redis::publish`]): a ban made on one node reaches every other node's
//!   local tiers (pub/sub) and applies to every record read from Redis afterwards.
//!
//! Redis is never needed to serve: while it is down or slow, every call returns at once
//! or within `op_timeout` with "nothing here", the node serves from its local tiers,
//! and a background task reconnects. Whatever is read from Redis is untrusted (any node,
//! or anyone who can reach it, may write there): records are checked by their checksum
//! and every field, and nothing read can make this crate panic.
//!
//! Key layout (`P` is the prefix, `levee:` by default; `H` the key's 128-bit hash in
//! hex, `levee_cache::codec::key_hex`):
//!
//! | key | what |
//! | --- | --- |
//! | `P o:{H}` | the record, or for one over 512 KiB a head naming its chunks |
//! | `P o:{H}:G:I` | chunk `I` of generation `G` of a large record |
//! | `P l:{H}` | the fill lock: a node's token, `NX PX lock_ttl` |
//! | `P bans` | recent bans: a sorted set by time, trimmed to a day |
//! | `P purge` | the pub/sub channel bans are published on |
//!
//! (`{H}`: the hash is the key's Redis Cluster hash tag, so a record's head and chunks
//! would share a slot; the prefix should hold no braces.)

mod keys;
mod link;
mod lock;
mod record;
mod stats;
mod sync;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use levee_cache::ban::{Ban, Bans};
use levee_cache::codec::Decoded;
use levee_cache::{CacheKey, Entry};
use redis::aio::MultiplexedConnection;
use tokio::sync::{watch, Notify, Semaphore};

pub use lock::{Lock, LockGuard};
pub use stats::RedisStats;

/// How to reach Redis and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// One URL: a single server (`redis://host:port/db`, `rediss://` for TLS,
    /// `redis+unix:///path`). Several (Redis Cluster) are refused for now.
    pub urls: Vec<String>,
    /// Prepended to every key and to the channel. Default: `levee:`.
    pub prefix: String,
    /// The longest any one Redis operation may take before levee goes on without it.
    /// Default: 250 ms.
    pub op_timeout: Duration,
    /// How long a cross-node fill lock lasts if its holder never releases it (it
    /// crashed). Default: 30 s; levee passes its backend timeouts.
    pub lock_ttl: Duration,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        RedisConfig {
            urls: Vec::new(),
            prefix: "levee:".to_string(),
            op_timeout: Duration::from_millis(250),
            lock_ttl: Duration::from_secs(30),
        }
    }
}

/// Why the tier could not be set up (never because Redis is down: that is handled
/// while running).
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error(
        "`{url}` is not a Redis URL ({reason}): expected redis://host:port/db, \
         rediss://host:port/db (TLS) or redis+unix:///path/to/socket"
    )]
    Url { url: String, reason: String },
    #[error("no Redis URL given: expected redis://host:port/db")]
    NoUrl,
    #[error(
        "{0} Redis URLs given, but Redis Cluster is not supported yet: give the URL of \
         one server (several levee nodes share it)"
    )]
    Cluster(usize),
    #[error("the Redis tier must be started inside a tokio runtime (a bug in levee)")]
    NoRuntime,
}

/// The shared tier. Cheap to clone; the background tasks end when the last clone is
/// dropped.
#[derive(Clone)]
pub struct Redis(Arc<Handle>);

/// What the clones share; dropping it (the last clone) stops the background tasks.
struct Handle {
    inner: Arc<Inner>,
    /// Dropped with the handle: the supervisor sees its channel close and ends.
    _stop: watch::Sender<()>,
}

/// What the handle and the background tasks share.
pub(crate) struct Inner {
    pub(crate) cfg: RedisConfig,
    /// The URL as logs show it (without a password).
    pub(crate) shown: String,
    pub(crate) client: redis::Client,
    /// The connection while Redis is up.
    conn: RwLock<Option<MultiplexedConnection>>,
    up: AtomicBool,
    /// This process's id in ban messages and lock tokens (random).
    pub(crate) node: String,
    pub(crate) keys: keys::Keys,
    pub(crate) bans: Bans,
    pub(crate) sync: Mutex<sync::BanSync>,
    pub(crate) on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
    pub(crate) stats: stats::Counters,
    /// Bounds the background writes in flight.
    pub(crate) writes: Arc<Semaphore>,
    /// A request saw the connection fail: the supervisor checks it at once.
    pub(crate) trouble: Notify,
    /// Bans are waiting to be written.
    pub(crate) flush: Notify,
}

/// Background writes (puts) in flight at most; more are dropped and counted.
const MAX_WRITES_IN_FLIGHT: usize = 64;

impl Redis {
    /// Checks the configuration, then connects in the background (and reconnects,
    /// forever, with a backoff of 1 s doubling to 30 s): Redis being down at start is
    /// not an error. `on_ban` is called for every ban made by another node (published,
    /// or found in Redis on each (re)connection and not seen before), on the task that
    /// reads them: it must not block.
    ///
    /// Spawns its task on the current tokio runtime, which must keep running.
    pub fn connect(
        cfg: RedisConfig,
        on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
    ) -> Result<Redis, RedisError> {
        let url = match cfg.urls.as_slice() {
            [] => return Err(RedisError::NoUrl),
            [url] => url.clone(),
            several => return Err(RedisError::Cluster(several.len())),
        };
        let client = keys::client(&url)?;
        if url.starts_with("rediss:") || url.starts_with("valkeys:") {
            // redis-rs builds its TLS configuration on rustls's process-wide provider;
            // levee's other TLS code names ring explicitly and installs none.
            if rustls::crypto::CryptoProvider::get_default().is_none() {
                let _ = rustls::crypto::ring::default_provider().install_default();
            }
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RedisError::NoRuntime)?;
        let (stop_tx, stop_rx) = watch::channel(());
        let inner = Arc::new(Inner {
            shown: keys::shown(&url),
            client,
            conn: RwLock::new(None),
            up: AtomicBool::new(false),
            node: format!("{:016x}", keys::random()),
            keys: keys::Keys::new(&cfg.prefix),
            bans: Bans::new(),
            sync: Mutex::new(sync::BanSync::default()),
            on_ban,
            stats: stats::Counters::default(),
            writes: Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT)),
            trouble: Notify::new(),
            flush: Notify::new(),
            cfg,
        });
        runtime.spawn(link::supervise(inner.clone(), stop_rx));
        Ok(Redis(Arc::new(Handle {
            inner,
            _stop: stop_tx,
        })))
    }

    /// The record stored for `key`, with the bans made since it was written applied;
    /// None when there is none, or Redis is down or slow (never waits beyond
    /// `op_timeout`), or the record is damaged, another key's, expired or all banned.
    pub async fn get(&self, key: &CacheKey) -> Option<Decoded> {
        record::get(&self.0.inner, key).await
    }

    /// Stores every variant of `key` (newest first) in the background; dropped (and
    /// counted) when Redis is down or too many writes are in flight.
    pub fn put(&self, key: &CacheKey, variants: &[Arc<Entry>]) {
        record::put(&self.0.inner, key, variants);
    }

    /// Stores every variant of `key` and returns when it is written (or failed): before
    /// a fill lock is released, so that the nodes waiting for it find the record.
    pub async fn put_now(&self, key: &CacheKey, variants: &[Arc<Entry>]) {
        record::put_now(&self.0.inner, key, variants).await;
    }

    /// The cross-node fill lock of `key`: whether this node fetches it.
    pub async fn lock(&self, key: &CacheKey) -> Lock {
        lock::lock(&self.0.inner, key).await
    }

    /// After [`Lock::Busy`]: the record the lock's holder stores, once it is there;
    /// None when the lock goes away without a new record, Redis fails, or `limit`
    /// passes (the caller then fetches itself).
    pub async fn wait_for(&self, key: &CacheKey, limit: Duration) -> Option<Decoded> {
        lock::wait_for(&self.0.inner, key, limit).await
    }

    /// A purge made on this node: applied at once to what this tier reads; then, in
    /// the background, the record of a removed URL deleted from Redis, and the ban kept
    /// in Redis and published to every other node (queued while Redis is down, sent
    /// when it is back).
    pub fn publish(&self, ban: Ban) {
        sync::publish(&self.0.inner, ban);
    }

    /// Whether Redis is connected.
    pub fn is_up(&self) -> bool {
        self.0.inner.is_up()
    }

    pub fn stats(&self) -> RedisStats {
        self.0.inner.stats.snapshot(self.is_up())
    }
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("url", &self.0.inner.shown)
            .field("up", &self.is_up())
            .finish()
    }
}

impl Inner {
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// The connection, if Redis is up.
    pub(crate) fn conn(&self) -> Option<MultiplexedConnection> {
        if !self.is_up() {
            return None;
        }
        self.conn.read().ok()?.clone()
    }

    pub(crate) fn set_conn(&self, conn: Option<MultiplexedConnection>) {
        let up = conn.is_some();
        if let Ok(mut slot) = self.conn.write() {
            *slot = conn;
        }
        self.up.store(up, Ordering::Release);
    }

    /// Counts a failed operation; one that looks like a lost connection wakes the
    /// supervisor, which checks the connection at once.
    pub(crate) fn failed(&self, e: &redis::RedisError) {
        self.stats.error();
        tracing::debug!(redis = %self.shown, error = %e, "Redis operation failed");
        if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
            self.trouble.notify_one();
        }
    }

    /// Runs one Redis operation within `op_timeout`; a failure is counted, and one that
    /// looks like a lost connection wakes the supervisor.
    pub(crate) async fn run<T>(
        &self,
        op: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.cfg.op_timeout, op).await {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                self.failed(&e);
                None
            }
            Err(_) => {
                self.stats.error();
                None
            }
        }
    }
}

//! The handle levee holds: [`Redis`], its clones, and the background task they keep
//! alive.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use levee_cache::ban::{Ban, Bans};
use levee_cache::codec::Decoded;
use levee_cache::proof::ProofChange;
use levee_cache::{CacheKey, Entry};
use tokio::sync::{watch, Notify, Semaphore};

use crate::config::{RedisConfig, RedisError};
use crate::inner::{BanSync, Inner, ProofLimits, ProofSync};
use crate::lock::Lock;
use crate::stats::{Counters, RedisStats};
use crate::target::{Mode, Target};
use crate::{fleet, keys, link, lock, record, sessions, sync};

/// Called with every proven-session change another node makes.
pub type OnProof = Arc<dyn Fn(ProofChange) + Send + Sync>;

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

/// Background writes (puts) in flight at most; more are dropped and counted.
const MAX_WRITES_IN_FLIGHT: usize = 64;

impl Redis {
    /// Checks the configuration, then connects in the background (and reconnects,
    /// forever, with a backoff of 1 s, then 2 s): Redis being down at start is
    /// not an error. `on_ban` is called for every ban made by another node (published,
    /// or found in Redis on each (re)connection and not seen before), on the task that
    /// reads them: it must not block.
    ///
    /// Spawns its task on the current tokio runtime, which must keep running.
    pub fn connect(
        cfg: RedisConfig,
        on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
    ) -> Result<Redis, RedisError> {
        Redis::connect_sharing(cfg, on_ban, None)
    }

    /// [`Redis::connect`], also sharing proven sessions ([`Redis::prove`]): `on_proof`
    /// is called for every change another node makes, and for every proof kept in
    /// Redis on each (re)connection, on the task that reads them: it must not block.
    pub fn connect_sharing(
        cfg: RedisConfig,
        on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
        proofs: Option<(OnProof, ProofLimits)>,
    ) -> Result<Redis, RedisError> {
        let target = Target::parse(&cfg.urls)?;
        let shown = cfg
            .urls
            .iter()
            .map(|u| keys::shown(u))
            .collect::<Vec<_>>()
            .join(",");
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RedisError::NoRuntime)?;
        let (stop_tx, stop_rx) = watch::channel(());
        let inner = Arc::new(Inner {
            shown,
            target,
            conn: RwLock::new(None),
            reached: Mutex::new(None),
            up: AtomicBool::new(false),
            node: format!("{:016x}", keys::random()),
            keys: keys::Keys::new(&cfg.prefix),
            bans: Bans::new(),
            sync: Mutex::new(BanSync::default()),
            on_ban,
            stats: Counters::default(),
            writes: Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT)),
            trouble: Notify::new(),
            flush: Notify::new(),
            proofs: proofs.map(|(on_proof, limits)| ProofSync {
                on_proof,
                limits,
                pending: Mutex::new(Default::default()),
            }),
            fleet: Default::default(),
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

    /// A session proven or forgotten on this node: kept in Redis and published to the
    /// other nodes in the background (queued while Redis is down). Nothing without
    /// `connect_sharing`.
    pub fn prove(&self, change: ProofChange) {
        sessions::queue(&self.0.inner, change);
    }

    /// Renews this node's lease on the backend of `scope` (fleet.rs): asks for `want`
    /// slots of `capacity`, reports `line`, for `ttl`. None when Redis is down, slow
    /// or answers something else: the caller keeps its grant until the lease ends.
    pub async fn fleet_renew(
        &self,
        scope: &str,
        want: usize,
        capacity: usize,
        line: &str,
        ttl: Duration,
    ) -> Option<fleet::Lease> {
        fleet::renew(&self.0.inner, scope, want, capacity, line, ttl).await
    }

    /// Asks every other node serving `scope` to renew its lease now.
    pub async fn fleet_nudge(&self, scope: &str) {
        fleet::nudge(&self.0.inner, scope).await;
    }

    /// Notified when another node asks for a renewal of `scope`'s lease.
    pub fn fleet_listen(&self, scope: &str) -> Arc<Notify> {
        self.0.inner.fleet.get(&fleet::scope_part(scope))
    }

    /// This process's name among the nodes (random, new at each start).
    pub fn node(&self) -> &str {
        &self.0.inner.node
    }

    /// Whether Redis is connected.
    pub fn is_up(&self) -> bool {
        self.0.inner.is_up()
    }

    pub fn stats(&self) -> RedisStats {
        self.0.inner.stats.snapshot(self.is_up())
    }

    /// What the last connection reached: one server, Sentinel's primary or a Cluster,
    /// and the primaries written to (`host:port`); None before the first connection.
    pub fn reached(&self) -> Option<(Mode, Vec<String>)> {
        self.0.inner.reached.lock().ok()?.clone()
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

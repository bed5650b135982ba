//! The tiers below memory: a directory on disk (levee-disk) and a Redis shared by every
//! node (levee-redis), both off unless configured. This module is where the request path
//! meets them, at three points:
//!
//! - **a miss**, inside the fill (so concurrent misses on this node ask once): disk, then
//!   Redis; a usable copy is promoted to memory (and from Redis to disk) and served as a
//!   hit. Else, with Redis, a short lock in Redis makes one node in the cluster fetch;
//!   the others wait for its copy to appear there ([`Tiers::before_fetch`]).
//! - **a store**: what memory keeps for a key is written through to disk and Redis
//!   ([`Tiers::stored`]); with the lock held, Redis is written before it is released.
//! - **a purge**: applied to memory by the caller, then to disk and, through Redis
//!   pub/sub, to every other node's memory and disk ([`Tiers::ban`], [`apply_remote`]).
//!
//! And the proven sessions (levee-visitor's proven.rs) are kept with them: in the disk tier's
//! `sessions` file across restarts, and through Redis on every node
//! ([`Tiers::keep_sessions`]).
//!
//! Redis down or slow costs a request at most one bounded wait, and nothing once it is
//! known down: the node then serves from its local tiers alone.

mod fleet;

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::codec::Decoded;
use levee_cache::proof::ProofChange;
use levee_cache::{CacheControl, CacheKey, Entry, Lookup, Store};
use levee_config::CacheSettings;
use levee_disk::{Disk, DiskConfig};
use levee_redis::{Lock, LockGuard, ProofLimits, Redis, RedisConfig};

use levee_visitor::proven::{self, Proven};

/// Why a tier cannot start: each message says which tier and what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its directory, its size, its Redis URL.
    #[error("{0}")]
    Tier(String),
    #[error("cannot start the tiers' thread: {0}")]
    Runtime(std::io::Error),
}

/// The configured tiers below memory.
pub struct Tiers {
    pub disk: Option<Disk>,
    pub redis: Option<Redis>,
    /// How long a fill waits for another node's copy before fetching itself.
    redis_wait: Duration,
    /// The proven sessions' file beside the disk tier's records.
    sessions: Option<Arc<levee_disk::SessionFile>>,
    /// Keeps the thread whose runtime drives Redis's connections alive.
    runtime: Option<TierRuntime>,
}

/// The disk tier's proven sessions: read into `proven`, then kept up to date.
fn open_sessions(disk: &Disk, proven: &Proven) -> Result<levee_disk::SessionFile, Error> {
    let (file, held) =
        levee_disk::SessionFile::open(disk.path(), proven::IDLE, proven::CAPACITY as usize)
            .map_err(|e| {
                Error::Tier(format!(
                    "the disk tier's proven sessions ({}/sessions): {e}",
                    disk.path().display()
                ))
            })?;
    let n = held.len();
    for change in held {
        proven.apply(change);
    }
    tracing::info!(sessions = n, "proven sessions read from the disk tier");
    Ok(file)
}

/// What a fill does after looking below memory.
pub enum Before {
    /// A usable copy was found (and promoted to memory): serve it.
    Found(Arc<Entry>),
    /// Fetch from the backend; with the cluster-wide lock when this node holds it.
    Fetch(Option<LockGuard>),
}

impl Tiers {
    /// Opens what `cache` configures; `None` when neither tier is (the default).
    pub fn open(
        cache: &CacheSettings,
        store: &Store,
        limits: &levee_config::Limits,
        proven: &Arc<Proven>,
    ) -> Result<Option<Tiers>, Error> {
        if cache.disk.is_none() && cache.redis.is_empty() {
            return Ok(None);
        }
        let disk_size = match &cache.disk {
            Some(d) => disk_bytes(d)?,
            None => None,
        };
        let disk = match (&cache.disk, disk_size) {
            (Some(d), Some(size)) => Some(
                Disk::open(DiskConfig {
                    path: d.path.clone(),
                    size,
                })
                .map_err(|e| Error::Tier(format!("the disk tier ({}): {e}", d.path.display())))?,
            ),
            _ => None,
        };
        let sessions = match &disk {
            Some(d) => Some(Arc::new(open_sessions(d, proven)?)),
            None => None,
        };
        // The longest a fill may hold the lock: until its response started, plus a
        // margin for the body; the other nodes wait about as long as a request waits
        // for a fill's head.
        let lock_ttl = limits.backend_connect_timeout
            + limits.backend_first_byte_timeout
            + Duration::from_secs(10);
        let redis_wait = limits.backend_connect_timeout + limits.backend_first_byte_timeout;
        let (redis, runtime) = if cache.redis.is_empty() {
            (None, None)
        } else {
            let cfg = RedisConfig {
                urls: cache.redis.clone(),
                prefix: "levee:".into(),
                op_timeout: Duration::from_millis(250),
                lock_ttl,
            };
            let on_ban = {
                let (store, disk) = (store.clone(), disk.clone());
                Arc::new(move |ban: Ban| apply_remote(&store, disk.as_ref(), ban))
                    as Arc<dyn Fn(Ban) + Send + Sync>
            };
            let on_proof = {
                let proven = proven.clone();
                Arc::new(move |change| proven.apply(change))
                    as Arc<dyn Fn(ProofChange) + Send + Sync>
            };
            let limits = ProofLimits {
                idle_secs: proven::IDLE.as_secs(),
                capacity: proven::CAPACITY as usize,
            };
            let runtime = TierRuntime::start()?;
            let redis = runtime
                .run(move || Redis::connect_sharing(cfg, on_ban, Some((on_proof, limits))))
                .map_err(|e| Error::Tier(format!("the Redis tier: {e}")))?;
            (Some(redis), Some(runtime))
        };
        tracing::info!(
            disk = %match (&cache.disk, disk_size) {
                (Some(d), Some(n)) => format!("{} ({n} bytes, disk_size {})", d.path.display(), d.size),
                _ => "off".into(),
            },
            redis = %if cache.redis.is_empty() { "off".into() } else { cache.redis.iter().map(|u| levee_redis::url_for_logs(u)).collect::<Vec<_>>().join(", ") },
            "cache tiers below memory"
        );
        let tiers = Tiers {
            disk,
            redis,
            redis_wait,
            sessions,
            runtime,
        };
        tiers.keep_sessions(proven);
        Ok(Some(tiers))
    }

    /// From now on, every session proven or forgotten here is written to the disk
    /// tier's file and shared through Redis.
    fn keep_sessions(&self, proven: &Proven) {
        if self.sessions.is_none() && self.redis.is_none() {
            return;
        }
        let (file, redis) = (self.sessions.clone(), self.redis.clone());
        proven.set_sink(Arc::new(move |change| {
            if let Some(f) = &file {
                f.write(change);
            }
            if let Some(r) = &redis {
                r.prove(change);
            }
        }));
    }

    /// From now on `limiter` shares its backend with every node on the same Redis
    /// (fleet.rs): its limit is this node's share of the fleet's. `scope` names the
    /// backend alike on every node. Nothing without Redis.
    pub fn share_admission(&self, scope: String, limiter: levee_limits::Limiter) {
        if let (Some(redis), Some(rt)) = (&self.redis, &self.runtime) {
            rt.handle.spawn(fleet::renew(redis.clone(), scope, limiter));
        }
    }

    /// How much longer than usual a request may wait for a fill's head: the fill may
    /// first wait for another node's copy.
    pub fn extra_wait(&self) -> Duration {
        if self.redis.is_some() {
            self.redis_wait
        } else {
            Duration::ZERO
        }
    }

    /// Looks below memory for `key` before a fill asks the backend. A copy the request
    /// may be served as a hit is promoted and returned; stale copies are left to the
    /// backend's answer. With `claim`, the fill then takes the cluster's lock (or waits
    /// for the node that holds it); without, it fetches on its own if it gets a slot.
    pub async fn before_fetch(
        &self,
        store: &Store,
        key: &CacheKey,
        req_cc: &CacheControl,
        req_headers: &HeaderMap,
        claim: bool,
    ) -> Before {
        if let Some(disk) = &self.disk {
            if let Some(found) = disk.get(key).await {
                if let Some(entry) = promote(store, found, req_cc, req_headers) {
                    return Before::Found(entry);
                }
            }
        }
        let Some(redis) = &self.redis else {
            return Before::Fetch(None);
        };
        if let Some(found) = redis.get(key).await {
            if let Some(entry) = self.promote_shared(store, found, req_cc, req_headers) {
                return Before::Found(entry);
            }
        }
        if !claim {
            return Before::Fetch(None);
        }
        match redis.lock(key).await {
            Lock::Acquired(guard) => Before::Fetch(Some(guard)),
            Lock::Unavailable => Before::Fetch(None),
            Lock::Busy => match redis.wait_for(key, self.redis_wait).await {
                Some(found) => match self.promote_shared(store, found, req_cc, req_headers) {
                    Some(entry) => Before::Found(entry),
                    None => Before::Fetch(None),
                },
                None => Before::Fetch(None),
            },
        }
    }

    /// A copy from Redis: promoted to memory, and kept on disk too.
    fn promote_shared(
        &self,
        store: &Store,
        found: Decoded,
        req_cc: &CacheControl,
        req_headers: &HeaderMap,
    ) -> Option<Arc<Entry>> {
        if let Some(disk) = &self.disk {
            disk.put(&found.key, &found.variants);
        }
        promote(store, found, req_cc, req_headers)
    }

    /// After memory stored (or changed) `key`: its variants go to disk and Redis. With
    /// the cluster lock, Redis is written before the lock is released, so the nodes
    /// waiting on it find the copy.
    pub async fn stored(&self, store: &Store, key: &CacheKey, lock: Option<LockGuard>) {
        let variants = store.variants(key);
        if let Some(disk) = &self.disk {
            disk.put(key, &variants);
        }
        // Nothing to share when memory kept nothing: the lock's release then tells the
        // waiting nodes to fetch themselves.
        if let (Some(redis), false) = (&self.redis, variants.is_empty()) {
            if lock.is_some() {
                redis.put_now(key, &variants).await;
            } else {
                redis.put(key, &variants);
            }
        }
        drop(lock);
    }

    /// [`Tiers::ban`] for each, off the worker thread (the disk tier syncs its ban log),
    /// returning once they hold.
    pub async fn ban_all(&self, bans: Vec<Ban>) {
        if bans.is_empty() {
            return;
        }
        if let Some(disk) = self.disk.clone() {
            let bans = bans.clone();
            let _ = tokio::task::spawn_blocking(move || bans.into_iter().for_each(|b| disk.ban(b)))
                .await;
        }
        if let Some(redis) = &self.redis {
            bans.into_iter().for_each(|b| redis.publish(b));
        }
    }

    /// A purge made on this node (already applied to its memory): to disk, and to every
    /// other node through Redis. Blocks for the disk tier's sync of its ban log (well
    /// under a millisecond on an SSD): call it off the workers, or where a purge is
    /// rare (the PURGE method).
    pub fn ban(&self, ban: Ban) {
        if let Some(disk) = &self.disk {
            disk.ban(ban.clone());
        }
        if let Some(redis) = &self.redis {
            redis.publish(ban);
        }
    }
}

/// Puts a lower tier's copy into memory and returns the variant `req_headers` select,
/// when it may be served without the backend.
fn promote(
    store: &Store,
    found: Decoded,
    req_cc: &CacheControl,
    req_headers: &HeaderMap,
) -> Option<Arc<Entry>> {
    let now = levee_cache::clock::now();
    let entry = found
        .variants
        .iter()
        .find(|e| e.vary().matches(req_headers))
        .cloned();
    let usable = entry
        .as_ref()
        .filter(|e| levee_cache::lookup(req_cc, Some(e), now) == Lookup::Hit)
        .cloned();
    // A stale copy replaces nothing memory has (its own may be newer), but where memory
    // has none it still serves as a validator and within grace.
    if usable.is_some() || store.variants(&found.key).is_empty() {
        store.insert_variants(found.key, found.variants);
    }
    usable
}

/// A purge another node made, received through Redis: applied to this node's memory
/// and disk, off the thread that received it (it walks the store).
pub fn apply_remote(store: &Store, disk: Option<&Disk>, ban: Ban) {
    if let Some(disk) = disk {
        disk.ban(ban.clone());
    }
    let store = store.clone();
    let apply = move || apply_to_memory(&store, &ban);
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn_blocking(apply);
        }
        Err(_) => {
            apply();
        }
    }
}

/// What a ban does to the memory tier; how many stored responses it touched.
pub fn apply_to_memory(store: &Store, ban: &Ban) -> usize {
    match (&ban.target, ban.mode) {
        (BanTarget::Url(key), BanMode::Remove) => store.purge_key(key, false),
        (BanTarget::Url(key), BanMode::Stale) => store.purge_key(key, true),
        (_, BanMode::Validate) => store.soft_purge(|k, e| ban.matches(k, e)),
        (_, mode) => store.purge(mode == BanMode::Stale, |k, e| ban.matches(k, e)),
    }
}

/// A thread with its own runtime, for the tiers' long-lived connections: levee's workers
/// each run a runtime of their own, and a connection's driver must live on one that
/// outlives them all.
struct TierRuntime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TierRuntime {
    fn start() -> Result<TierRuntime, Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("levee-tiers".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(Error::Runtime)?;
        Ok(TierRuntime {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `f` inside the runtime (what it spawns lives there).
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.handle.enter();
        f()
    }
}

impl Drop for TierRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The ban a purge of `key` (both schemes are separate keys) makes.
pub fn url_ban(key: &CacheKey, soft: bool) -> Ban {
    Ban::now(
        if soft {
            BanMode::Stale
        } else {
            BanMode::Remove
        },
        BanTarget::Url(key.clone()),
    )
}

/// The disk tier's bound in bytes; `auto` sized now (None: no room for it at all).
fn disk_bytes(d: &levee_config::DiskSettings) -> Result<Option<u64>, Error> {
    let (total, free) = match d.size {
        levee_config::DiskSize::Bytes(n) => return Ok(Some(n)),
        levee_config::DiskSize::Auto => filesystem_space(&d.path).map_err(|e| {
            Error::Tier(format!(
                "the disk tier ({}): cannot read the size of its filesystem to size it ({e}); give [cache] disk_size in bytes, like 2GiB",
                d.path.display()
            ))
        })?,
    };
    let size = auto_disk_size(total, free);
    if size < AUTO_DISK_MIN {
        tracing::warn!(path = %d.path.display(), free, "too little free space for the disk tier (disk_size = \"auto\"): serving without it");
        return Ok(None);
    }
    Ok(Some(size))
}

/// `disk_size = "auto"`: a tenth of the filesystem, at most [`AUTO_DISK_MAX`], and never
/// more than half of what is free on it when levee starts, so that the cache cannot fill
/// the disk. Sized again at each start: on a filling disk it shrinks (the cache's own
/// files count as used), and the disk tier evicts down to it.
fn auto_disk_size(total: u64, free: u64) -> u64 {
    (total / 10).min(AUTO_DISK_MAX).min(free / 2)
}

/// The most `auto` gives: a cache of hot pages rarely needs more.
const AUTO_DISK_MAX: u64 = 10 << 30;
/// Below this, `auto` turns the disk tier off rather than churn a few pages.
const AUTO_DISK_MIN: u64 = 16 << 20;

/// The size and the space available to unprivileged users (statvfs's `f_bavail`) of the
/// filesystem `path` is on, or will be: the directory may not exist yet (levee-disk
/// makes it), then its nearest existing ancestor's.
fn filesystem_space(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    let dir = path
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(std::path::Path::new("/"));
    let st = rustix::fs::statvfs(dir)?;
    Ok((
        st.f_blocks.saturating_mul(st.f_frsize),
        st.f_bavail.saturating_mul(st.f_frsize),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_disk_size_is_a_tenth_capped_and_half_the_free_space_at_most() {
        const G: u64 = 1 << 30;
        // A tenth of a 50 GiB filesystem with room to spare.
        assert_eq!(auto_disk_size(50 * G, 40 * G), 5 * G);
        // Capped on a large one.
        assert_eq!(auto_disk_size(2000 * G, 1000 * G), AUTO_DISK_MAX);
        // Half the free space on a nearly full one.
        assert_eq!(auto_disk_size(100 * G, 4 * G), 2 * G);
        assert_eq!(auto_disk_size(100 * G, 0), 0);
    }

    #[test]
    fn auto_sizes_by_the_nearest_existing_directory() {
        let (total, free) =
            filesystem_space(std::path::Path::new("/nonexistent/levee/cache")).unwrap();
        assert!(total > 0 && free <= total);
    }
}

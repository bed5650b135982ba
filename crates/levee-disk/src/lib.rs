//! levee's disk tier: responses kept in files under one directory, bounded in bytes,
//! kept across restarts, never served torn, and purges that survive a crash.
//!
//! One file per cache key (every variant of the key in one record of
//! [`levee_cache::codec`], which checks itself: magic, xxh3 checksum, every field),
//! named by the key's 128-bit hash in 256 subdirectories (dir.rs). A write goes to a
//! temp file in the same directory and is renamed over the old record, so a reader
//! sees the old record or the new one, never a mix; a crash can leave a temp file
//! (deleted at the next open) or, after a power loss, a renamed file whose blocks never
//! reached the disk (its checksum fails: deleted, never served).
//!
//! Writes are queued (queue.rs: `put` never blocks, and drops a write when the queue
//! is full) and done by one thread of the disk tier's own (writer.rs; the record
//! operations both sides use are in shared.rs). The same thread keeps the byte bound
//! (CLOCK eviction, index.rs), scans what is on disk at open and applies purges to the
//! files (scan.rs): every ban is logged and synced before `ban` returns (banlog.rs),
//! reads and queued writes apply it at once, and the log is replayed over the records
//! at the next open.
//!
//! ```no_run
//! # async fn demo(key: levee_cache::CacheKey, variants: Vec<std::sync::Arc<levee_cache::Entry>>)
//! # -> Result<(), levee_disk::DiskError> {
//! use levee_disk::{Disk, DiskConfig};
//! let disk = Disk::open(DiskConfig { path: "/var/cache/levee".into(), size: 10 << 30 })?;
//! disk.put(&key, &variants);
//! disk.flush().await;
//! let record = disk.get(&key).await; // Some(Decoded), variants newest first
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod banlog;
mod dir;
mod error;
mod index;
mod queue;
mod scan;
mod sessions;
mod shared;
mod stats;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use levee_cache::ban::{Ban, BanMode, BanTarget, Bans};
use levee_cache::codec::Decoded;
use levee_cache::{CacheKey, Entry};
use tokio::sync::watch;

pub use error::DiskError;
pub use sessions::SessionFile;
pub use stats::DiskStats;

use banlog::BanLog;
use dir::{Dir, Id};
use index::Index;
use queue::Queue;
use shared::Shared;
use stats::{bump, get, warn_once, Counters, Kind, Warned};

/// Where the disk tier keeps its files, and how many bytes it may use there.
#[derive(Debug, Clone)]
pub struct DiskConfig {
    /// A directory of its own: created (mode 0700) if missing; an existing one must be
    /// empty or a levee disk cache.
    pub path: PathBuf,
    /// The bound on the records' bytes, each file counted in 4 KiB blocks.
    pub size: u64,
}

/// The disk tier. Clones share it; dropping the last one waits for its thread to do the
/// writes still queued and stop, then releases the directory's lock.
#[derive(Clone)]
pub struct Disk(Arc<Handle>);

struct Handle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The directory's lock lasts as long as this file is open.
    _lock: File,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.queue.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Disk {
    /// Opens the disk cache at `cfg.path` (see [`DiskConfig`]), locked against a second
    /// levee process, and starts its thread, which first measures what is there (writes
    /// wait for that, reads do not), then checks every record in the background:
    /// expired, torn and temporary files deleted, logged purges applied, the ban log
    /// compacted.
    pub fn open(cfg: DiskConfig) -> Result<Disk, DiskError> {
        if cfg.size == 0 {
            return Err(DiskError::SizeZero);
        }
        let (lock, was_clean) = Dir::prepare(&cfg.path)?;
        let (log, logged, unreadable) =
            BanLog::open(&cfg.path).map_err(|source| DiskError::Io {
                path: cfg.path.clone(),
                what: "cannot read or rewrite its ban log",
                source,
            })?;
        if unreadable > 0 {
            tracing::warn!(
                path = %cfg.path.display(),
                lines = unreadable,
                "the disk cache's ban log had unreadable lines (cut by a crash?): skipped"
            );
        }
        let bans = Bans::new();
        for b in logged {
            bans.add(b);
        }
        let shared = Arc::new(Shared {
            dir: Dir::new(cfg.path.clone()),
            capacity: cfg.size,
            index: Mutex::new(Index::default()),
            bans,
            log,
            queue: Queue::default(),
            done: watch::channel(0).0,
            scanned: watch::channel(false).0,
            was_clean,
            sweep_every_ms: AtomicU64::new(scan::SWEEP_EVERY.as_millis() as u64),
            counters: Counters::default(),
            warned: Warned::default(),
        });
        let thread = std::thread::Builder::new()
            .name("levee-disk".into())
            .spawn({
                let shared = shared.clone();
                move || writer::run(&shared)
            })
            .map_err(DiskError::Thread)?;
        Ok(Disk(Arc::new(Handle {
            shared,
            thread: Some(thread),
            _lock: lock,
        })))
    }

    /// The record stored for `key`, with the purges made since it was written applied
    /// (variants removed or marked stale). None when there is none, or it is torn,
    /// another key's (a hash collision), expired or purged whole; a torn, expired or
    /// purged file is deleted. Reads on tokio's blocking threads.
    pub async fn get(&self, key: &CacheKey) -> Option<Decoded> {
        let shared = self.0.shared.clone();
        let key = key.clone();
        match tokio::task::spawn_blocking(move || shared.read(&key)).await {
            Ok(found) => found,
            Err(_) => {
                bump(&self.0.shared.counters.misses);
                None
            }
        }
    }

    /// Stores every variant of `key` (newest first), replacing what was stored; no
    /// variants removes the key. Queued for the writer thread: never blocks; a write
    /// that finds the queue full (1024 writes or 64 MiB) is dropped and counted.
    pub fn put(&self, key: &CacheKey, variants: &[Arc<Entry>]) {
        self.0.shared.enqueue(key.clone(), variants.to_vec());
    }

    /// A purge. Logged and synced before it returns, so it holds across a crash:
    /// this blocks for one `fdatasync` of a small file (under a millisecond on an SSD,
    /// tens on a spinning disk; purges are rare). Applied at once to reads and to the
    /// writes still queued; a URL purge that removes deletes the file at once. A
    /// record written in the ban's millisecond counts as written before it.
    pub fn ban(&self, ban: Ban) {
        let s = &self.0.shared;
        if let Err(e) = s.log.append(&ban, || s.bans.add(ban.clone())) {
            warn_once!(
                s,
                Kind::BanLog,
                path = %s.dir.root.display(),
                error = %e,
                "cannot write the disk cache's ban log: a purge holds until levee restarts, \
                 not after"
            );
        }
        s.queue.ban(&ban);
        if let (BanTarget::Url(key), BanMode::Remove) = (&ban.target, ban.mode) {
            let id = Id::of(key);
            let mut index = s.index();
            match dir::remove(&s.dir.record(id)) {
                Ok(()) => {
                    if index.remove(id) {
                        bump(&s.counters.purged);
                    }
                }
                Err(e) => s.warn_remove(&s.dir.record(id), &e),
            }
        }
    }

    pub fn stats(&self) -> DiskStats {
        let s = &self.0.shared;
        let c = &s.counters;
        let (objects, bytes) = {
            let ix = s.index();
            (ix.len() as u64, ix.bytes())
        };
        DiskStats {
            objects,
            bytes,
            capacity: s.capacity,
            hits: get(&c.hits),
            misses: get(&c.misses),
            writes: get(&c.writes),
            write_dropped: get(&c.write_dropped),
            write_errors: get(&c.write_errors),
            torn: get(&c.torn),
            evictions: get(&c.evictions),
            expired: get(&c.expired),
            purged: get(&c.purged),
            bans: s.log.unsettled_count() as u64,
            scan_done: *s.scanned.borrow(),
        }
    }

    /// Waits until every write queued before the call is done (renamed into place, or
    /// given up on and counted).
    pub async fn flush(&self) {
        let s = &self.0.shared;
        let target = s.queue.last_seq();
        let mut rx = s.done.subscribe();
        let _ = rx.wait_for(|&done| done >= target).await;
    }

    /// Waits until the opening scan has checked every record (`stats().scan_done`).
    pub async fn scanned(&self) {
        let mut rx = self.0.shared.scanned.subscribe();
        let _ = rx.wait_for(|&done| done).await;
    }

    /// The directory, for messages.
    pub fn path(&self) -> &Path {
        &self.0.shared.dir.root
    }

    #[cfg(test)]
    fn shared(&self) -> &Shared {
        &self.0.shared
    }
}

#[cfg(test)]
mod tests;

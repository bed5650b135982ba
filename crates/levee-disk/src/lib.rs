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
//! Writes are queued and done by one thread of the disk tier's own (writer.rs): `put`
//! never blocks, and drops a write when the queue is full. The same thread keeps the
//! byte bound (CLOCK eviction, index.rs), scans what is on disk at open (scan.rs) and
//! applies purges: every ban is logged and synced before `ban` returns (banlog.rs), the
//! reads apply the bans in memory, and the log is replayed over the records at the next
//! open.
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
mod scan;
mod stats;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use levee_cache::ban::{Ban, BanMode, BanTarget, Bans};
use levee_cache::codec::{self, CodecError, Decoded};
use levee_cache::{clock, CacheKey, Entry};
use tokio::sync::watch;

pub use error::DiskError;
pub use stats::DiskStats;

use banlog::BanLog;
use dir::{Dir, Id};
use index::Index;
use stats::{bump, get, warn_once, Counters, Kind, Warned};
use writer::Queue;

/// Where the disk tier keeps its files, and how many bytes it may use there.
#[derive(Debug, Clone)]
pub struct DiskConfig {
    /// A directory of its own: created (mode 0700) if missing; an existing one must be
    /// empty or a levee disk cache.
    pub path: PathBuf,
    /// The bound on the records' bytes, each file counted in 4 KiB blocks.
    pub size: u64,
}

/// The disk tier. Clones share it; the last one dropped stops its thread (after the
/// writes still queued) and releases the directory's lock.
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
        self.shared.shut_down();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the callers and the writer thread share.
struct Shared {
    dir: Dir,
    capacity: u64,
    /// Records and eviction order. Records are renamed into place and files deleted
    /// (other than by the writer thread) under this lock.
    index: Mutex<Index>,
    /// The bans reads apply (what the log holds, and settled bans not yet forgotten).
    bans: Bans,
    log: BanLog,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// The last write done (queue sequence numbers), for `flush`.
    done: watch::Sender<u64>,
    /// The opening scan is over.
    scanned: watch::Sender<bool>,
    /// Bans made so far: the writer sees a ban that came while it wrote a record.
    bans_made: AtomicU64,
    /// The previous process shut down cleanly (the scan need not read records whole).
    was_clean: bool,
    counters: Counters,
    warned: Warned,
}

/// Why a record file is deleted.
enum Gone {
    Torn(CodecError),
    Misplaced,
    Expired,
    Purged,
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
            dir: Dir {
                root: cfg.path.clone(),
            },
            capacity: cfg.size,
            index: Mutex::new(Index::default()),
            bans,
            log,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            done: watch::channel(0).0,
            scanned: watch::channel(false).0,
            bans_made: AtomicU64::new(0),
            was_clean,
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

    /// A purge. Logged and synced before it returns (one `fdatasync`: a few
    /// milliseconds at most; purges are rare), so it holds across a crash; applied at
    /// once to reads and to writes still queued; a URL purge that removes deletes the
    /// file at once.
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
        s.ban_queued(&ban);
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
        s.wake.notify_all();
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
            bans: s.log.unsettled().count as u64,
            scan_done: *s.scanned.borrow(),
        }
    }

    /// Waits until every write queued before the call is done (renamed into place, or
    /// given up on and counted).
    pub async fn flush(&self) {
        let s = &self.0.shared;
        let target = s.queue().last_seq;
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

impl Shared {
    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self, key: &CacheKey) -> Option<Decoded> {
        let found = self.lookup(key);
        let c = &self.counters;
        bump(if found.is_some() { &c.hits } else { &c.misses });
        found
    }

    fn lookup(&self, key: &CacheKey) -> Option<Decoded> {
        let id = Id::of(key);
        let path = self.dir.record(id);
        let file = match dir::read(&path, self.capacity) {
            Ok(Some(f)) => f,
            Ok(None) => return None,
            Err(e) => {
                self.warn_read(&path, &e);
                return None;
            }
        };
        let ino = file.ino;
        let mut record = match codec::decode(file.bytes) {
            Ok(r) => r,
            Err(e) => {
                self.discard(id, &path, ino, Gone::Torn(e));
                return None;
            }
        };
        if record.key != *key {
            if Id::of(&record.key) != id {
                self.discard(id, &path, ino, Gone::Misplaced);
            }
            // Else two keys share a hash: the other key's record stays.
            return None;
        }
        if record.keep_until <= clock::system_now() {
            self.discard(id, &path, ino, Gone::Expired);
            return None;
        }
        if !self.bans.apply(&mut record) {
            self.discard(id, &path, ino, Gone::Purged);
            return None;
        }
        self.index().touch(id);
        Some(record)
    }

    /// Deletes the record file `ino` at `path` (not a newer one renamed there since it
    /// was read), forgets it and counts why.
    fn discard(&self, id: Id, path: &Path, ino: u64, why: Gone) {
        let c = &self.counters;
        let mut index = self.index();
        match dir::remove_if_same(path, ino) {
            Ok(true) => {
                index.remove(id);
                drop(index);
                match why {
                    Gone::Torn(e) => {
                        bump(&c.torn);
                        warn_once!(
                            self,
                            Kind::Torn,
                            path = %path.display(),
                            error = %e,
                            "deleted a disk cache record that failed its check (torn by a \
                             crash, cut short or altered); it was not served"
                        );
                    }
                    Gone::Misplaced => {
                        bump(&c.torn);
                        warn_once!(
                            self,
                            Kind::Torn,
                            path = %path.display(),
                            "deleted a disk cache record stored under another key's name"
                        );
                    }
                    Gone::Expired => bump(&c.expired),
                    Gone::Purged => bump(&c.purged),
                }
            }
            Ok(false) => {}
            Err(e) => self.warn_remove(path, &e),
        }
    }

    fn warn_remove(&self, path: &Path, e: &std::io::Error) {
        warn_once!(
            self,
            Kind::Remove,
            path = %path.display(),
            error = %e,
            "cannot delete a disk cache file"
        );
    }

    fn shut_down(&self) {
        self.queue().shutdown = true;
        self.wake.notify_all();
    }

    fn bans_made(&self) -> u64 {
        self.bans_made.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests;

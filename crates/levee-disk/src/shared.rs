//! What the `Disk` handles and the writer thread share, and the operations on records
//! both sides use: reading one (checked in full), deleting one (only the file that was
//! read: a newer one renamed there meanwhile stays), writing one (room made first, temp
//! file, rename).
//!
//! A record is written to `<name>.tmp` and renamed over `<name>`, so a reader sees the
//! old record or the new one, never a mix. No fsync per record: a crash loses at most
//! the records whose data had not reached the disk, and their checksums refuse them
//! (deleted, never served); only purges are synced (banlog.rs, scan.rs).
//!
//! Files are created only by the writer thread; they are renamed into place, and
//! deleted by anyone else, under the index's lock.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use levee_cache::ban::Bans;
use levee_cache::codec::{self, unix_ms, CodecError, Decoded};
use levee_cache::{clock, CacheKey, Entry};
use tokio::sync::watch;

use crate::banlog::BanLog;
use crate::dir::{self, charged, Dir, Id};
use crate::index::Index;
use crate::queue::Queue;
use crate::stats::{add, bump, warn_once, Counters, Kind, Warned};

/// What the callers and the writer thread share.
pub struct Shared {
    pub dir: Dir,
    pub capacity: u64,
    /// Records and eviction order. Records are renamed into place and files deleted
    /// (other than by the writer thread) under this lock.
    pub index: Mutex<Index>,
    /// The bans reads apply (what the log holds, and settled bans not yet forgotten).
    pub bans: Bans,
    pub log: BanLog,
    pub queue: Queue,
    /// The last write done (queue sequence numbers), for `flush`.
    pub done: watch::Sender<u64>,
    /// The opening scan is over.
    pub scanned: watch::Sender<bool>,
    /// The previous process shut down cleanly (the scan need not read records whole).
    pub was_clean: bool,
    /// Milliseconds between two sweeps for bans (`scan::SWEEP_EVERY`; tests set 0).
    pub sweep_every_ms: AtomicU64,
    pub counters: Counters,
    pub warned: Warned,
}

/// Why a record file is deleted.
pub enum Gone {
    Torn(CodecError),
    Misplaced,
    Expired,
    Purged,
}

impl Shared {
    pub fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn read(&self, key: &CacheKey) -> Option<Decoded> {
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
    pub fn discard(&self, id: Id, path: &Path, ino: u64, why: Gone) {
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

    pub fn warn_remove(&self, path: &Path, e: &std::io::Error) {
        warn_once!(
            self,
            Kind::Remove,
            path = %path.display(),
            error = %e,
            "cannot delete a disk cache file"
        );
    }

    /// Queues a write for the writer thread; counts it when the queue is full.
    pub fn enqueue(&self, key: CacheKey, variants: Vec<Arc<Entry>>) {
        if !self.queue.push(key, variants) {
            bump(&self.counters.write_dropped);
            warn_once!(
                self,
                Kind::Dropped,
                path = %self.dir.root.display(),
                "the disk cache's write queue is full: writes are dropped (the disk is \
                 slower than the misses)"
            );
        }
    }

    pub fn bans_made(&self) -> u64 {
        self.queue.bans_made()
    }

    pub fn warn_read(&self, path: &Path, e: &std::io::Error) {
        warn_once!(
            self,
            Kind::Read,
            path = %path.display(),
            error = %e,
            "cannot read in the disk cache"
        );
    }

    /// Removes a record (the writer thread's own: nothing renames behind it).
    pub fn forget(&self, id: Id) {
        self.index().remove(id);
        let path = self.dir.record(id);
        if let Err(e) = dir::remove(&path) {
            self.warn_remove(&path, &e);
        }
    }

    /// Puts `record` (of `key`) in place: room made, temp file written (and synced when
    /// `sync`), renamed over the old one, indexed. Not done when a ban made since
    /// `since` may concern the key and came after `bans_seen`. True when it is in place.
    pub fn store(
        &self,
        key: &CacheKey,
        record: &[u8],
        since: SystemTime,
        bans_seen: u64,
        sync: bool,
    ) -> bool {
        let id = Id::of(key);
        let Some((_, written, keep_until)) = codec::peek(record) else {
            return false;
        };
        if keep_until <= written {
            self.forget(id);
            return false;
        }
        let size = charged(record.len() as u64);
        if size > self.capacity {
            bump(&self.counters.write_dropped);
            warn_once!(
                self,
                Kind::TooLarge,
                bytes = record.len(),
                capacity = self.capacity,
                "a response is larger than the whole disk cache: not written there"
            );
            self.forget(id);
            return false;
        }
        let victims = self
            .index()
            .make_room(size, self.capacity, unix_ms(clock::system_now()));
        for v in &victims {
            let path = self.dir.record(*v);
            if let Err(e) = dir::remove(&path) {
                self.warn_remove(&path, &e);
            }
        }
        add(&self.counters.evictions, victims.len());
        let temp = self.dir.temp(id);
        if let Err(e) = dir::write_file(&temp, record, sync) {
            self.write_failed(&temp, &e);
            return false;
        }
        let path = self.dir.record(id);
        let mut index = self.index();
        if self.bans_made() != bans_seen
            && self.bans.since(since).iter().any(|b| b.may_match_key(key))
        {
            // A purge came while it was written: the next put writes it anew.
            drop(index);
            let _ = dir::remove(&temp);
            return false;
        }
        if let Err(e) = std::fs::rename(&temp, &path) {
            drop(index);
            self.write_failed(&temp, &e);
            return false;
        }
        index.insert(id, size, unix_ms(keep_until));
        drop(index);
        bump(&self.counters.writes);
        true
    }

    fn write_failed(&self, temp: &std::path::Path, e: &std::io::Error) {
        bump(&self.counters.write_errors);
        warn_once!(
            self,
            Kind::Write,
            path = %temp.display(),
            error = %e,
            "cannot write a disk cache record (disk full? permissions?)"
        );
        let _ = dir::remove(temp);
    }
}

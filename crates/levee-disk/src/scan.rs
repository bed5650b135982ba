//! The writer thread's work between writes: the opening scan, sweeps, URL bans, expiry.
//!
//! **Opening scan**, in two passes. The first (`measure`) lists the 256 directories
//! and stats each file, reading nothing: temp files and empty files are deleted, every
//! record is indexed with its size (oldest first, by mtime, so eviction starts with the
//! oldest), and the bound is enforced, all before the first write, so that the bound
//! holds from the start. The second is a sweep over those records.
//!
//! **Sweep**: every record is checked, a few dozen per step between writes: its head
//! read (its key, written and keep-until; the whole record and its checksum after a
//! crash, when the previous process left no clean mark), and the file deleted when it
//! is torn, under another key's name, expired, or purged whole by the bans made since
//! it was written; a record partly purged (variants removed or marked stale) is
//! rewritten and synced. Once every record has been seen and the changes are synced,
//! the bans the sweep applied are settled and leave the log (banlog.rs). Sweeps run at
//! open, then when a ban other than a URL's waits: at most every five minutes, or at
//! once when a thousand bans wait.
//!
//! **URL bans** concern one file: it is deleted or rewritten and synced right after the
//! ban, and the ban is settled.
//!
//! **Expiry**: every minute the index gives up the records past their keep-until.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use levee_cache::ban::BanTarget;
use levee_cache::clock;
use levee_cache::codec::{self, unix_ms, Decoded};

use crate::banlog::now_ms;
use crate::dir::{self, charged, sync_dir, FileBytes, Id};
use crate::shared::{Gone, Shared};
use crate::stats::{add, bump, warn_once, Kind};

/// Bytes read of a record to learn its key and times (enough for any URL levee keeps).
const HEAD: u64 = 16 << 10;
pub const SWEEP_EVERY: Duration = Duration::from_secs(300);
const SWEEP_AT_ONCE: usize = 1000;
const EXPIRE_EVERY: Duration = Duration::from_secs(60);
/// A sweep step ends after this many records or this long, whichever comes first, so
/// that writes wait little.
const STEP_RECORDS: usize = 64;
const STEP_TIME: Duration = Duration::from_millis(10);

struct Sweep {
    ids: Vec<Id>,
    next: usize,
    start_ms: u64,
    /// Read every record whole and check its checksum (after a crash).
    verify: bool,
    opening: bool,
    /// Subdirectories with changes to sync before the bans are settled.
    dirty: Vec<bool>,
    /// A change could not be made: the bans stay.
    failed: bool,
}

/// What checking one record came to.
enum Checked {
    /// Nothing to sync.
    Clean,
    /// Deleted or rewritten for a ban: its directory needs a sync.
    Dirty,
    /// A ban could not be applied (write error).
    Failed,
}

pub struct Background<'a> {
    s: &'a Shared,
    /// The first pass ended (it stops early when levee stops): the index holds every
    /// record, so writes keep the bound.
    pub measured: bool,
    sweep: Option<Sweep>,
    last_sweep_end: Instant,
    next_check: Instant,
    next_expiry: Instant,
}

impl<'a> Background<'a> {
    /// Measures what is on disk (the first pass) and starts the opening sweep.
    pub fn new(s: &'a Shared) -> Background<'a> {
        let now = Instant::now();
        let sweep = s.measure().map(|ids| {
            s.log.sweep_started();
            Sweep {
                ids,
                next: 0,
                start_ms: now_ms(),
                verify: !s.was_clean,
                opening: true,
                dirty: vec![false; 256],
                failed: false,
            }
        });
        Background {
            s,
            measured: sweep.is_some(),
            sweep,
            last_sweep_end: now,
            next_check: now,
            next_expiry: now + EXPIRE_EVERY,
        }
    }

    /// A sweep is under way: no waiting between steps.
    pub fn busy(&self) -> bool {
        self.sweep.is_some()
    }

    /// How long the thread may wait for writes before the next timer.
    pub fn idle(&self) -> Duration {
        self.next_check
            .min(self.next_expiry)
            .saturating_duration_since(Instant::now())
    }

    pub fn step(&mut self) {
        let now = Instant::now();
        if let Some(sweep) = self.sweep.as_mut() {
            let until = now + STEP_TIME;
            let end = (sweep.next + STEP_RECORDS).min(sweep.ids.len());
            while sweep.next < end && Instant::now() < until {
                let id = sweep.ids[sweep.next];
                sweep.next += 1;
                match self.s.check(id, sweep.verify) {
                    Checked::Clean => {}
                    Checked::Dirty => sweep.dirty[id.bucket()] = true,
                    Checked::Failed => sweep.failed = true,
                }
            }
            if sweep.next >= sweep.ids.len() {
                self.end_sweep();
            }
        } else if now >= self.next_check {
            self.next_check = now + Duration::from_secs(1);
            let waiting = self.s.log.unsettled();
            if waiting.needs_sweep
                && (now.duration_since(self.last_sweep_end)
                    >= Duration::from_millis(self.s.sweep_every_ms.load(Ordering::Relaxed))
                    || waiting.count >= SWEEP_AT_ONCE)
            {
                self.s.log.sweep_started();
                let ids = self.s.index().ids();
                self.sweep = Some(Sweep {
                    ids,
                    next: 0,
                    start_ms: now_ms(),
                    verify: false,
                    opening: false,
                    dirty: vec![false; 256],
                    failed: false,
                });
            }
        }
        if now >= self.next_expiry {
            self.next_expiry = now + EXPIRE_EVERY;
            self.s.expire();
        }
    }

    fn end_sweep(&mut self) {
        let Some(sweep) = self.sweep.take() else {
            return;
        };
        let s = self.s;
        let mut synced = !sweep.failed;
        for (b, _) in sweep.dirty.iter().enumerate().filter(|(_, d)| **d) {
            if let Err(e) = sync_dir(&s.dir.bucket_path(b)) {
                synced = false;
                s.warn_log(&e);
            }
        }
        if synced {
            s.log.sweep_finished(sweep.start_ms);
        }
        s.compact_log();
        if sweep.opening {
            s.scanned.send_replace(true);
            // One guard: a second `index()` in the same statement would deadlock.
            let (objects, bytes) = {
                let index = s.index();
                (index.len(), index.bytes())
            };
            tracing::info!(
                path = %s.dir.root.display(),
                objects,
                bytes,
                torn = s.counters.torn.load(Ordering::Relaxed),
                "disk cache scanned"
            );
        }
        self.last_sweep_end = Instant::now();
    }

    /// Applies the waiting URL bans to their files, syncs, and settles them.
    pub fn settle_urls(&mut self) {
        let s = self.s;
        let urls = s.log.unsettled().urls;
        if urls.is_empty() {
            return;
        }
        for ban in urls {
            let BanTarget::Url(key) = &ban.target else {
                continue;
            };
            let id = Id::of(key);
            let outcome = s.check(id, false);
            let synced = match outcome {
                Checked::Failed => false,
                _ => match sync_dir(&s.dir.bucket_path(id.bucket())) {
                    Ok(()) => true,
                    Err(e) => {
                        s.warn_log(&e);
                        false
                    }
                },
            };
            if synced {
                s.log.settle(&ban);
            }
        }
        s.compact_log();
    }

    /// At the end of the thread: the mark of a clean shutdown, unless records remain
    /// that a crash may have torn and no scan has read.
    pub fn finish(self) {
        let s = self.s;
        if s.was_clean || *s.scanned.borrow() {
            if let Err(e) = s.dir.mark_clean() {
                tracing::debug!(error = %e, "cannot leave the disk cache's clean mark");
            }
        }
    }
}

impl Shared {
    /// The first pass of the opening scan. None when levee is stopping meanwhile.
    pub(crate) fn measure(&self) -> Option<Vec<Id>> {
        let mut found = Vec::new();
        for b in 0..256 {
            // Levee stopping: the writes still queued are done first (after the whole
            // first pass, for the bound); with none, there is nothing to finish.
            if self.queue.stopping_idle() {
                return None;
            }
            let path = self.dir.bucket_path(b);
            let entries = match fs::read_dir(&path) {
                Ok(e) => e,
                Err(e) => {
                    self.warn_read(&path, &e);
                    continue;
                }
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let path = entry.path();
                if name.ends_with(".tmp") {
                    // Only an earlier process's: this one's are being renamed into place.
                    if self.dir.is_leftover_temp(&name) {
                        if let Err(e) = dir::remove(&path) {
                            self.warn_remove(&path, &e);
                        }
                    }
                    continue;
                }
                let meta = entry.metadata().ok().filter(|m| m.is_file());
                let (Some(id), Some(meta)) = (Id::parse(&name).filter(|i| i.bucket() == b), meta)
                else {
                    warn_once!(
                        self,
                        Kind::Stranger,
                        path = %path.display(),
                        "a file levee did not write is in its disk cache: left alone"
                    );
                    continue;
                };
                if meta.len() == 0 {
                    self.discard(id, &path, meta.ino(), Gone::Torn(codec::CodecError::Magic));
                    continue;
                }
                if charged(meta.len()) > self.capacity {
                    // Written under a larger bound: it no longer fits at all.
                    match dir::remove(&path) {
                        Ok(()) => bump(&self.counters.evictions),
                        Err(e) => self.warn_remove(&path, &e),
                    }
                    continue;
                }
                found.push((meta.mtime(), meta.mtime_nsec(), id, charged(meta.len())));
            }
        }
        found.sort_unstable_by_key(|&(s, ns, id, _)| (s, ns, id.0));
        let victims = {
            let mut index = self.index();
            for &(_, _, id, size) in &found {
                index.insert(id, size, u64::MAX);
            }
            // The bound may have shrunk since the last run.
            index.make_room(0, self.capacity, unix_ms(clock::system_now()))
        };
        self.unlink_all(&victims);
        add(&self.counters.evictions, victims.len());
        Some(found.into_iter().map(|f| f.2).collect())
    }

    /// Checks one record (see the module's comment).
    fn check(&self, id: Id, verify: bool) -> Checked {
        let path = self.dir.record(id);
        let limit = if verify { self.capacity } else { HEAD };
        let file = match dir::read(&path, limit) {
            Ok(Some(f)) => f,
            Ok(None) => {
                // Deleted since it was listed (by a read that found it purged, say):
                // the deletion is synced with the sweep's.
                self.index().remove(id);
                return Checked::Dirty;
            }
            Err(e) => {
                self.warn_read(&path, &e);
                return Checked::Failed;
            }
        };
        let whole = file.bytes.len() as u64 >= file.len;
        let head = if whole {
            None
        } else {
            codec::peek(&file.bytes)
        };
        let mut ino = file.ino;
        let mut decoded = None;
        let (key, written, keep_until) = match head {
            Some(h) => h,
            None => {
                let Some((d, i)) = self.decode(id, &path, whole.then_some(file)) else {
                    return Checked::Clean;
                };
                ino = i;
                let h = (d.key.clone(), d.written, d.keep_until);
                decoded = Some(d);
                h
            }
        };
        if Id::of(&key) != id {
            self.discard(id, &path, ino, Gone::Misplaced);
            return Checked::Clean;
        }
        if keep_until <= clock::system_now() {
            self.discard(id, &path, ino, Gone::Expired);
            return Checked::Clean;
        }
        if !self
            .bans
            .since(written)
            .iter()
            .any(|b| b.may_match_key(&key))
        {
            self.index().set_keep(id, unix_ms(keep_until));
            return Checked::Clean;
        }
        let mut record = match decoded {
            Some(d) => d,
            None => match self.decode(id, &path, None) {
                Some((d, i)) => {
                    ino = i;
                    d
                }
                None => return Checked::Clean,
            },
        };
        let before = marks(&record);
        if !self.bans.apply(&mut record) {
            self.discard(id, &path, ino, Gone::Purged);
            return Checked::Dirty;
        }
        if marks(&record) == before {
            self.index().set_keep(id, unix_ms(keep_until));
            return Checked::Clean;
        }
        let bytes = codec::encode(&record.key, &record.variants);
        if self.store(&record.key, &bytes, written, self.bans_made(), true) {
            Checked::Dirty
        } else {
            Checked::Failed
        }
    }

    /// Reads a record file (its first `limit` bytes); None when it is gone (and then
    /// no longer indexed) or unreadable.
    fn read_file(&self, id: Id, path: &Path, limit: u64) -> Option<FileBytes> {
        match dir::read(path, limit) {
            Ok(Some(f)) => Some(f),
            Ok(None) => {
                self.index().remove(id);
                None
            }
            Err(e) => {
                self.warn_read(path, &e);
                None
            }
        }
    }

    /// The record in `file` (read whole) or at `path`, checked in full; a torn one is
    /// deleted.
    fn decode(&self, id: Id, path: &Path, file: Option<FileBytes>) -> Option<(Decoded, u64)> {
        let file = match file {
            Some(f) => f,
            None => self.read_file(id, path, self.capacity)?,
        };
        match codec::decode(file.bytes) {
            Ok(d) => Some((d, file.ino)),
            Err(e) => {
                self.discard(id, path, file.ino, Gone::Torn(e));
                None
            }
        }
    }

    /// Deletes the records past their keep-until.
    fn expire(&self) {
        let gone = self.index().take_expired(unix_ms(clock::system_now()));
        self.unlink_all(&gone);
        add(&self.counters.expired, gone.len());
    }

    fn unlink_all(&self, ids: &[Id]) {
        for id in ids {
            let path = self.dir.record(*id);
            if let Err(e) = dir::remove(&path) {
                self.warn_remove(&path, &e);
            }
        }
    }

    fn compact_log(&self) {
        if let Err(e) = self.log.compact(&self.bans, now_ms()) {
            self.warn_log(&e);
        }
    }

    fn warn_log(&self, e: &std::io::Error) {
        bump(&self.counters.write_errors);
        warn_once!(
            self,
            Kind::BanLog,
            path = %self.dir.root.display(),
            error = %e,
            "cannot sync the disk cache's purges: they stay in its ban log, to be applied \
             again"
        );
    }
}

/// What a ban may change in a record: which variants are left, and their marks.
fn marks(record: &Decoded) -> Vec<(u64, u8)> {
    record
        .variants
        .iter()
        .map(|e| (e.id(), e.soft_purged.load(Ordering::Relaxed)))
        .collect()
}

//! The disk tier's thread: writes what `put` queued, keeps the byte bound, and between
//! writes does the background work (scan.rs): the opening scan, sweeps for bans,
//! settling URL bans, deleting what expired.
//!
//! A write encodes the record, makes room for it (evicting before the bytes on disk
//! could pass the bound), writes it to `<name>.tmp` and renames it over `<name>`. No
//! fsync per record: a crash tears at most records whose rename had not reached the
//! disk, and their checksums refuse them; only purges are synced (banlog.rs).
//!
//! One thread does all of it, so no two writes of a key race, and files are created
//! only here: the scan and the eviction need not fear a rename under their feet.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use levee_cache::ban::{Ban, BanMode};
use levee_cache::codec::{self, unix_ms};
use levee_cache::{clock, CacheKey, Entry};

use crate::dir::{self, charged, Id};
use crate::scan::Background;
use crate::stats::{bump, warn_once, Kind};
use crate::Shared;

/// Writes waiting at most: a burst of misses beyond this is not worth the memory (the
/// bodies are kept alive by the queue) and the disk is behind anyway.
pub const MAX_JOBS: usize = 1024;
pub const MAX_QUEUED_BYTES: u64 = 64 << 20;
/// Writes done between two steps of background work.
const BATCH: usize = 16;

/// One `put`.
pub struct Job {
    seq: u64,
    key: CacheKey,
    variants: Vec<Arc<Entry>>,
    /// Bodies plus an allowance for the rest.
    cost: u64,
    /// When it was queued: bans from then on apply to it.
    queued: SystemTime,
}

#[derive(Default)]
pub struct Queue {
    jobs: VecDeque<Job>,
    bytes: u64,
    /// The sequence number of the last job queued (`flush` waits for it).
    pub last_seq: u64,
    pub shutdown: bool,
    /// Tests hold writes back to fill the queue.
    pub paused: bool,
}

impl Shared {
    pub(crate) fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn enqueue(&self, key: CacheKey, variants: Vec<Arc<Entry>>) {
        let cost = variants
            .iter()
            .map(|e| e.body.len() as u64 + 1024)
            .sum::<u64>();
        let mut q = self.queue();
        if q.shutdown {
            return;
        }
        let full = q.jobs.len() >= MAX_JOBS || q.bytes + cost > MAX_QUEUED_BYTES;
        // One write larger than the queue's bytes still goes when it is alone.
        if full && !q.jobs.is_empty() {
            drop(q);
            bump(&self.counters.write_dropped);
            warn_once!(
                self,
                Kind::Dropped,
                path = %self.dir.root.display(),
                "the disk cache's write queue is full: writes are dropped (the disk is \
                 slower than the misses)"
            );
            return;
        }
        q.last_seq += 1;
        let seq = q.last_seq;
        q.bytes += cost;
        q.jobs.push_back(Job {
            seq,
            key,
            variants,
            cost,
            queued: clock::system_now(),
        });
        drop(q);
        self.wake.notify_one();
    }

    /// Applies a new ban to the writes still queued (what it removes is not written,
    /// what it marks is written marked), then counts it: the writer, which reads the
    /// count under the same lock when it takes a job, rechecks the bans before the
    /// rename of a job it took before.
    pub(crate) fn ban_queued(&self, ban: &Ban) {
        let mut q = self.queue();
        for job in q.jobs.iter_mut() {
            if unix_ms(job.queued) > ban.at_ms || !ban.may_match_key(&job.key) {
                continue;
            }
            let key = &job.key;
            job.variants.retain(|e| {
                if !ban.matches(key, e) {
                    return true;
                }
                match ban.mode {
                    BanMode::Remove => false,
                    BanMode::Validate => {
                        e.mark_stale();
                        true
                    }
                    BanMode::Stale => {
                        e.mark_stale_serving();
                        true
                    }
                }
            });
        }
        self.bans_made.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes a record (the writer thread's own: nothing renames behind it).
    pub(crate) fn forget(&self, id: Id) {
        self.index().remove(id);
        let path = self.dir.record(id);
        if let Err(e) = dir::remove(&path) {
            self.warn_remove(&path, &e);
        }
    }

    /// Puts `record` (of `key`) in place: room made, temp file written (and synced when
    /// `sync`), renamed over the old one, indexed. Not done when a ban made since
    /// `since` may concern the key and came after `bans_seen`. True when it is in place.
    pub(crate) fn store(
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
        crate::stats::add(&self.counters.evictions, victims.len());
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

    fn write_job(&self, job: &Job, bans_seen: u64) {
        if job.variants.is_empty() {
            self.forget(Id::of(&job.key));
            return;
        }
        let record = codec::encode(&job.key, &job.variants);
        self.store(&job.key, &record, job.queued, bans_seen, false);
    }

    /// The next jobs (with the ban count when they were taken), or none when there is
    /// background work or a timer is due; waits otherwise.
    fn next_jobs(&self, busy: bool, idle: Duration) -> (Vec<Job>, u64, bool) {
        let mut q = self.queue();
        let deadline = Instant::now() + idle;
        loop {
            if q.shutdown {
                let jobs: Vec<Job> = q.jobs.drain(..).collect();
                q.bytes = 0;
                return (jobs, self.bans_made(), true);
            }
            if !q.paused && !q.jobs.is_empty() {
                let n = q.jobs.len().min(BATCH);
                let jobs: Vec<Job> = q.jobs.drain(..n).collect();
                q.bytes -= jobs.iter().map(|j| j.cost).sum::<u64>();
                return (jobs, self.bans_made(), false);
            }
            let now = Instant::now();
            if busy || now >= deadline {
                return (Vec::new(), self.bans_made(), false);
            }
            q = match self.wake.wait_timeout(q, deadline - now) {
                Ok((q, _)) => q,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// The thread's body: ends when the last `Disk` is dropped, after the writes queued.
pub fn run(shared: &Shared) {
    let mut bg = Background::new(shared);
    let mut bans_seen_bg = u64::MAX;
    loop {
        let busy = bg.busy() || shared.bans_made() != bans_seen_bg;
        let (jobs, bans_seen, shutdown) = shared.next_jobs(busy, bg.idle());
        for job in &jobs {
            shared.write_job(job, bans_seen);
            shared.done.send_replace(job.seq);
        }
        if shutdown {
            break;
        }
        if bans_seen_bg != shared.bans_made() {
            bans_seen_bg = shared.bans_made();
            bg.settle_urls();
        }
        bg.step();
    }
    bg.finish();
}

//! The writes waiting for the writer thread: bounded, so `put` never blocks (a write
//! that finds it full is dropped), and in reach of purges (a ban applies to the writes
//! still queued, so a page purged after its `put` is not written after the purge).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use levee_cache::ban::{Ban, BanMode};
use levee_cache::codec::unix_ms;
use levee_cache::{clock, CacheKey, Entry};

/// Writes waiting at most: a burst of misses beyond this is not worth the memory (the
/// queue keeps the bodies alive) and the disk is behind anyway.
pub const MAX_JOBS: usize = 1024;
pub const MAX_QUEUED_BYTES: u64 = 64 << 20;
/// Writes taken at once, between two steps of background work.
const BATCH: usize = 16;

/// One `put`.
pub struct Job {
    pub seq: u64,
    pub key: CacheKey,
    pub variants: Vec<Arc<Entry>>,
    /// Bodies plus an allowance for the rest.
    cost: u64,
    /// When it was queued: bans from then on apply to it.
    pub queued: SystemTime,
}

/// What the writer thread gets from [`Queue::take`].
pub struct Taken {
    pub jobs: Vec<Job>,
    /// Bans made when they were taken (see [`Queue::ban`]).
    pub bans_seen: u64,
    /// Levee is stopping: these are the last jobs.
    pub stop: bool,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    bytes: u64,
    last_seq: u64,
    shutdown: bool,
    paused: bool,
}

#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    wake: Condvar,
    /// Bans made so far, counted under the state's lock.
    bans_made: AtomicU64,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a write; false when the queue is full (or levee is stopping). One write
    /// larger than the queue's bytes still goes when it is alone.
    pub fn push(&self, key: CacheKey, variants: Vec<Arc<Entry>>) -> bool {
        let cost = variants
            .iter()
            .map(|e| e.body_bytes().len() as u64 + 1024)
            .sum::<u64>();
        let mut q = self.lock();
        let full = q.jobs.len() >= MAX_JOBS || q.bytes + cost > MAX_QUEUED_BYTES;
        if q.shutdown || (full && !q.jobs.is_empty()) {
            return false;
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
        true
    }

    /// Applies a new ban to the writes still queued (what it removes is not written,
    /// what it marks is written marked: the entries are the memory tier's, which the
    /// same purge marks), then counts it. The writer reads the count
    /// when it takes jobs, under the same lock: a job taken before the ban is one it
    /// must check again before the rename.
    pub fn ban(&self, ban: &Ban) {
        let mut q = self.lock();
        for job in q.jobs.iter_mut() {
            if unix_ms(job.queued) > ban.at_ms || !ban.may_match_key(&job.key) {
                continue;
            }
            let key = &job.key;
            job.variants.retain(|e| {
                if !ban.matches(key.as_ref(), e) {
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
        drop(q);
        self.wake.notify_all();
    }

    pub fn bans_made(&self) -> u64 {
        self.bans_made.load(Ordering::SeqCst)
    }

    /// The sequence number of the last job queued (`flush` waits for it).
    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    pub fn stop(&self) {
        self.lock().shutdown = true;
        self.wake.notify_all();
    }

    /// Stopping, with no write left to do.
    pub fn stopping_idle(&self) -> bool {
        let q = self.lock();
        q.shutdown && q.jobs.is_empty()
    }

    /// The next jobs; none at once when `busy` (background work waits), else after
    /// `idle` at most.
    pub fn take(&self, busy: bool, idle: Duration) -> Taken {
        let mut q = self.lock();
        let deadline = Instant::now() + idle;
        loop {
            if q.shutdown {
                q.bytes = 0;
                return Taken {
                    jobs: q.jobs.drain(..).collect(),
                    bans_seen: self.bans_made(),
                    stop: true,
                };
            }
            if !q.paused && !q.jobs.is_empty() {
                let n = q.jobs.len().min(BATCH);
                let jobs: Vec<Job> = q.jobs.drain(..n).collect();
                q.bytes -= jobs.iter().map(|j| j.cost).sum::<u64>();
                return Taken {
                    jobs,
                    bans_seen: self.bans_made(),
                    stop: false,
                };
            }
            let now = Instant::now();
            if busy || now >= deadline {
                return Taken {
                    jobs: Vec::new(),
                    bans_seen: self.bans_made(),
                    stop: false,
                };
            }
            q = match self.wake.wait_timeout(q, deadline - now) {
                Ok((q, _)) => q,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Tests hold the writes back, to fill the queue or to purge between a `put` and
    /// its write.
    #[cfg(test)]
    pub fn pause(&self, on: bool) {
        self.lock().paused = on;
        self.wake.notify_all();
    }
}

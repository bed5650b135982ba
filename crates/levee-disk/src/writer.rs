//! The disk tier's thread: writes what `put` queued, keeps the byte bound, and between
//! writes does the background work (scan.rs): the opening scan, sweeps for bans,
//! settling URL bans, deleting what expired.
//!
//! One thread does all of it, so no two writes of a key race, and files are created
//! only here: the scan and the eviction need not fear a rename under their feet.

use levee_cache::codec;

use crate::dir::Id;
use crate::queue::Job;
use crate::scan::Background;
use crate::shared::Shared;

impl Shared {
    fn write_job(&self, job: &Job, bans_seen: u64) {
        if job.variants.is_empty() {
            self.forget(Id::of(&job.key));
            return;
        }
        let record = codec::encode(&job.key, &job.variants);
        self.store(&job.key, &record, job.queued, bans_seen, false);
    }
}

/// The thread's body: ends when the last `Disk` is dropped, after the writes queued.
pub fn run(shared: &Shared) {
    let mut bg = Background::new(shared);
    let mut bans_seen_bg = u64::MAX;
    loop {
        let busy = bg.busy() || shared.bans_made() != bans_seen_bg;
        let taken = shared.queue.take(busy, bg.idle());
        for job in &taken.jobs {
            if bg.measured {
                shared.write_job(job, taken.bans_seen);
            }
            shared.done.send_replace(job.seq);
        }
        if taken.stop {
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

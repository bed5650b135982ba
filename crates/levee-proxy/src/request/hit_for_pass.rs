//! Varnish's hit-for-pass: a URL whose last response could not be stored is marked for
//! a while (`[cache] hit_for_pass`), and its requests go to the backend in parallel
//! instead of waiting behind one fill each. The marks live on levee's clock (tests
//! move it); moka's own time-to-live, on the real clock, only bounds their memory.

use std::time::{Duration, Instant};

use levee_cache::{CacheKey, HitForPass, NotStored};

/// URLs marked at most; the least used go first.
const MARKS: u64 = 100_000;

/// The marks: each key's reason and until when.
pub(crate) struct HitForPassMarks {
    marks: moka::sync::Cache<CacheKey, (NotStored, Instant)>,
    lasts: Duration,
}

impl HitForPassMarks {
    pub fn new(lasts: Duration) -> HitForPassMarks {
        HitForPassMarks {
            marks: moka::sync::Cache::builder()
                .max_capacity(MARKS)
                .time_to_live(lasts.max(Duration::from_millis(1)))
                .build(),
            lasts,
        }
    }

    /// Whether `key` is marked now, and why.
    pub fn get(&self, key: &CacheKey) -> Option<NotStored> {
        let (reason, until) = self.marks.get(key)?;
        (levee_cache::clock::now() < until).then_some(reason)
    }

    /// Sets, renews or clears the mark of `key`.
    pub fn mark(&self, key: &CacheKey, mark: HitForPass) {
        match mark {
            HitForPass::Set(reason) => {
                let until = levee_cache::clock::now() + self.lasts;
                self.marks.insert(key.clone(), (reason, until));
            }
            HitForPass::Clear => self.marks.invalidate(key),
            HitForPass::Leave => {}
        }
    }

    /// Marks held now (a gauge of `/metrics`).
    pub fn count(&self) -> u64 {
        self.marks.entry_count()
    }
}

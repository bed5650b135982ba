//! One stored response: status, packed headers, body, coding, Vary key and freshness.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HeaderValue;
use http::StatusCode;

use levee_compress::Coding;

pub use crate::headers::{AsHeaderName, StoredHeaders};
use crate::key::VaryKey;
use crate::policy::Freshness;
use crate::tags::Tags;

/// What levee changed when it compressed a response for storage, to undo it for a client
/// that does not accept the coding.
#[derive(Debug, Clone)]
pub struct LeveeCoded {
    /// The backend's `ETag`: the validator of the uncompressed representation, sent back
    /// to the backend to revalidate and to clients that get it uncompressed. `headers`
    /// carries its weak form, true of every coding.
    pub original_etag: Option<HeaderValue>,
}

/// A complete stored response.
#[derive(Debug)]
pub struct Entry {
    /// Names this body for forms of it kept elsewhere (other codings); an entry refreshed
    /// by a 304 keeps the body and the id.
    pub id: u64,
    pub status: StatusCode,
    /// Headers as sent to clients: hop-by-hop fields, `Age` and stripped cookies removed.
    pub headers: StoredHeaders,
    /// The body, in `coding` (as `Content-Encoding` in `headers` says).
    pub body: Bytes,
    pub coding: Coding,
    /// Set when levee, not the backend, applied `coding` (boxed: 8 bytes in every
    /// entry instead of 40, for what only levee-compressed entries have).
    pub levee_coded: Option<Box<LeveeCoded>>,
    pub vary: VaryKey,
    pub freshness: Freshness,
    /// `corrected_initial_age` of RFC 9111 §4.2.3.
    pub initial_age: Duration,
    /// When the response (or the 304 that refreshed it) arrived.
    pub response_time: Instant,
    /// Marked stale before its time (a soft purge), as one of the `PURGED_*` values:
    /// the next request validates it (an edit elsewhere on the site: behind coalescing,
    /// readers wait for the new page), or is served it once while one revalidation runs
    /// (an operator's soft purge, as Fastly's). Either way it still stands in for a failed
    /// backend within grace. Set through [`Entry::mark_stale`] and
    /// [`Entry::mark_stale_serving`]; 0 when stored.
    pub soft_purged: AtomicU8,
    /// Surrogate keys the backend gave it (tags.rs), for purges by tag.
    pub tags: Tags,
    /// Its body in other codings, made when a client asks for one (levee-proxy's
    /// encoding.rs). Shared with the entry a 304 refresh makes of it (same body), and
    /// gone with the last of them: a refreshed, evicted or purged page leaves nothing
    /// behind.
    pub derived: Derived,
}

/// An entry's [`DerivedForms`], allocated on first use: most entries are only ever sent
/// as stored, and an empty slot costs 8 bytes (one atomic pointer) where the forms cost
/// several hundred.
#[derive(Debug, Default)]
pub struct Derived(once_cell::race::OnceBox<Arc<DerivedForms>>);

impl Derived {
    pub fn forms(&self) -> &DerivedForms {
        self.0.get_or_init(Default::default)
    }

    /// For the entry a 304 refresh makes of the same body: the same forms.
    pub fn share(&self) -> Derived {
        let d = Derived::default();
        if let Some(f) = self.0.get() {
            let _ = d.0.set(Box::new(f.clone()));
        }
        d
    }
}

/// How many bytes of derived forms all entries together may keep
/// (`[compression] transcode_memory`). Shared; each form gives its bytes back when
/// dropped.
#[derive(Debug)]
pub struct DerivedBudget {
    used: AtomicU64,
    max: u64,
}

impl DerivedBudget {
    pub fn new(max: u64) -> Arc<DerivedBudget> {
        Arc::new(DerivedBudget {
            used: AtomicU64::new(0),
            max,
        })
    }

    /// Bytes held by derived forms now (a metric).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Takes `n` bytes if they fit under the budget.
    fn take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.max)
            })
            .is_ok()
    }
}

/// Something kept for an entry (another coding of its body, a memfd copy of it),
/// counted in its budget while it lives.
#[derive(Debug)]
pub struct Kept<T> {
    value: T,
    cost: u64,
    budget: Arc<DerivedBudget>,
}

impl<T> Kept<T> {
    /// `value`, which takes `len` bytes, if the budget has room for it; else
    /// `Err(value)` (made, but not kept).
    pub fn keep(value: T, len: usize, budget: &Arc<DerivedBudget>) -> Result<Kept<T>, T> {
        // Beyond its bytes: the cell and the value's own header.
        let cost = len as u64 + 64;
        if budget.take(cost) {
            Ok(Kept {
                value,
                cost,
                budget: budget.clone(),
            })
        } else {
            Err(value)
        }
    }

    pub fn get(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Kept<T> {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.cost, Ordering::AcqRel);
    }
}

/// Another coding of an entry's body.
pub type DerivedBody = Kept<Bytes>;

/// What is made of an entry's body on demand, per coding: the body in that coding
/// (made once, concurrent askers wait for the one making it) and a memfd copy of the
/// body sent in that coding (sendfile).
#[derive(Debug, Default)]
pub struct DerivedForms {
    forms: [tokio::sync::OnceCell<DerivedBody>; 4],
    files: [std::sync::OnceLock<Kept<Arc<std::fs::File>>>; 4],
}

fn slot(coding: Coding) -> usize {
    match coding {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Br => 2,
        Coding::Zstd => 3,
    }
}

impl DerivedForms {
    pub fn cell(&self, coding: Coding) -> &tokio::sync::OnceCell<DerivedBody> {
        &self.forms[slot(coding)]
    }

    pub fn file(&self, coding: Coding) -> &std::sync::OnceLock<Kept<Arc<std::fs::File>>> {
        &self.files[slot(coding)]
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What an entry costs beyond its body and packed headers, charged in its weight: the
/// `Entry` itself, its share of the store's index, the allocator's rounding.
pub const ENTRY_OVERHEAD: usize = 384;

/// `Entry::soft_purged`: not purged.
pub const PURGED_NOT: u8 = 0;
/// Stale now; the next request validates it before it is served.
pub const PURGED_VALIDATE: u8 = 1;
/// Stale now; served (once the request allows stale) while one revalidation runs.
pub const PURGED_SERVE_STALE: u8 = 2;

impl Entry {
    /// A fresh id for a new body.
    pub fn next_id() -> u64 {
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// `current_age` (RFC 9111 §4.2.3).
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.response_time)
    }

    /// Time left until stale, or how stale it is (a soft-purged entry is stale now).
    pub fn staleness(&self, now: Instant) -> Result<Duration, Duration> {
        let age = self.age(now);
        if self.soft_purged.load(Ordering::Relaxed) != PURGED_NOT {
            return Err(age.saturating_sub(self.freshness.lifetime));
        }
        if age < self.freshness.lifetime {
            Ok(self.freshness.lifetime - age)
        } else {
            Err(age - self.freshness.lifetime)
        }
    }

    /// How long the entry is worth keeping from `now`.
    pub fn time_to_keep(&self, now: Instant) -> Duration {
        let total = self.freshness.lifetime + self.freshness.retain;
        total.saturating_sub(self.age(now))
    }

    /// Bytes charged against the cache size: body, headers and a fixed overhead.
    pub fn weight(&self) -> u32 {
        let total = self.body.len() + self.headers.size() + ENTRY_OVERHEAD;
        u32::try_from(total).unwrap_or(u32::MAX)
    }

    /// The backend's own `ETag`, to revalidate with (not the weak form levee serves
    /// compressed copies with).
    pub fn etag(&self) -> Option<HeaderValue> {
        match &self.levee_coded {
            Some(c) => c.original_etag.clone(),
            None => self.headers.get(http::header::ETAG),
        }
    }

    /// Makes the entry stale now; the next request validates it (see `soft_purged`).
    pub fn mark_stale(&self) {
        self.soft_purged.store(PURGED_VALIDATE, Ordering::Relaxed);
    }

    /// Makes the entry stale now; the next request is served it while it is
    /// revalidated in the background (see `soft_purged`). Never weakens an earlier
    /// [`Entry::mark_stale`].
    pub fn mark_stale_serving(&self) {
        let _ = self.soft_purged.compare_exchange(
            PURGED_NOT,
            PURGED_SERVE_STALE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Whether the entry was marked stale by an edit: RFC 9111 §4.4's "invalid", in need
    /// of a validation before it is sent again, whatever staleness the response or the
    /// client would accept.
    pub fn invalidated(&self) -> bool {
        self.soft_purged.load(Ordering::Relaxed) == PURGED_VALIDATE
    }

    /// Whether an operator's soft purge asked for this entry to be served once more.
    pub fn serve_stale_after_purge(&self) -> bool {
        self.soft_purged.load(Ordering::Relaxed) == PURGED_SERVE_STALE
    }

    /// Whether the stored response is an HTML page.
    pub fn is_html(&self) -> bool {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| {
                v.to_str()
                    .is_ok_and(|s| s.trim_start().to_ascii_lowercase().starts_with("text/html"))
            })
    }

    pub fn last_modified(&self) -> Option<HeaderValue> {
        self.headers.get(http::header::LAST_MODIFIED)
    }
}

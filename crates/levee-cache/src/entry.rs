//! One stored response: status, packed headers, body, coding, Vary key and freshness.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;

use levee_compress::Coding;

pub use crate::headers::{AsHeaderName, StoredHeaders};
use crate::key::{CacheKey, KeyRef, VaryKey};
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
///
/// Laid out for a million small objects (ARCHITECTURE.md, "The memory tier"): the fixed
/// facts of the response (`Meta`: status, coding, freshness, times), its packed header
/// fields and a body of up to 16 KiB share one allocation, `headers`' buffer, where the
/// allocator's rounding of the body leaves room for the rest. What most entries never
/// have is behind one pointer (`Rare`). The whole `Entry` is 80 bytes.
#[derive(Debug)]
pub struct Entry {
    /// Headers as sent to clients: hop-by-hop fields, `Age` and stripped cookies removed.
    /// Their buffer also holds the `Meta` and the body (when not in `Rare`).
    pub headers: StoredHeaders,
    rare: Option<Box<Rare>>,
    /// Marked stale before its time (a soft purge), as one of the `PURGED_*` values:
    /// the next request validates it (an edit elsewhere on the site: behind coalescing,
    /// readers wait for the new page), or is served it once while one revalidation runs
    /// (an operator's soft purge, as Fastly's). Either way it still stands in for a failed
    /// backend within grace. Set through [`Entry::mark_stale`] and
    /// [`Entry::mark_stale_serving`]; 0 when stored.
    pub soft_purged: AtomicU8,
    /// Its body in other codings, made when a client asks for one (levee-proxy's
    /// encoding.rs). Shared with the entry a 304 refresh makes of it (same body), and
    /// gone with the last of them: a refreshed, evicted or purged page leaves nothing
    /// behind.
    pub derived: Derived,
}

/// What few entries have.
#[derive(Debug, Default)]
struct Rare {
    /// A body larger than `INLINE_BODY_MAX`, kept as it came instead of copied.
    body: Option<Bytes>,
    levee_coded: Option<LeveeCoded>,
    vary: VaryKey,
    tags: Tags,
}

/// Everything a stored response is made of, for [`Entry::new`].
#[derive(Debug)]
pub struct EntryParts<'a> {
    /// What it is stored under (kept in the entry: the store's index holds a hash).
    pub key: &'a CacheKey,
    /// Names this body for forms of it kept elsewhere (other codings); an entry refreshed
    /// by a 304 keeps the body and the id.
    pub id: u64,
    pub status: StatusCode,
    /// Headers as sent to clients: hop-by-hop fields, `Age` and stripped cookies removed.
    pub headers: &'a HeaderMap,
    /// The body, in `coding` (as `Content-Encoding` in `headers` says).
    pub body: Bytes,
    pub coding: Coding,
    /// Set when levee, not the backend, applied `coding`.
    pub levee_coded: Option<LeveeCoded>,
    pub vary: VaryKey,
    pub freshness: Freshness,
    /// `corrected_initial_age` of RFC 9111 §4.2.3.
    pub initial_age: Duration,
    /// When the response (or the 304 that refreshed it) arrived.
    pub response_time: Instant,
    /// Surrogate keys the backend gave it (tags.rs), for purges by tag.
    pub tags: Tags,
}

/// The fixed facts of an entry, as the first bytes of its buffer: durations in
/// nanoseconds (saturating at 584 years), the response time in signed nanoseconds from
/// a process-wide instant, then its key. Read back on each use: a few loads, no
/// allocation.
mod meta {
    pub const ID: usize = 0;
    pub const STATUS: usize = 8;
    pub const CODING: usize = 10;
    pub const FLAGS: usize = 11;
    pub const LIFETIME: usize = 12;
    pub const SWR: usize = 20;
    pub const SIE: usize = 28;
    pub const GRACE: usize = 36;
    pub const RETAIN: usize = 44;
    pub const INITIAL_AGE: usize = 52;
    pub const RESPONSE_TIME: usize = 60;
    pub const SITE: usize = 68;
    /// The key's URL follows, up to the header fields.
    pub const URL: usize = 70;

    pub const MUST_REVALIDATE: u8 = 1;
    pub const NO_CACHE: u8 = 2;
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The instant response times are counted from.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn instant_nanos(t: Instant) -> i64 {
    let base = epoch();
    match t.checked_duration_since(base) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => i64::try_from(base.duration_since(t).as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

fn instant_of(n: i64) -> Instant {
    let base = epoch();
    let d = Duration::from_nanos(n.unsigned_abs());
    let t = if n >= 0 {
        base.checked_add(d)
    } else {
        base.checked_sub(d)
    };
    t.unwrap_or(base)
}

pub(crate) fn coding_byte(c: Coding) -> u8 {
    match c {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Br => 2,
        Coding::Zstd => 3,
    }
}

pub(crate) fn coding_of(b: u8) -> Option<Coding> {
    Some(match b {
        0 => Coding::Identity,
        1 => Coding::Gzip,
        2 => Coding::Br,
        3 => Coding::Zstd,
        _ => return None,
    })
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

/// What an entry costs beyond its buffer and what hangs off it, charged in its weight:
/// the `Entry` in its `Arc` (jemalloc's 96-byte class) and its slot in the store's index
/// (key hash, value, reference bits, table slot, with the table's slack). Measured with
/// `examples/store_memory.rs` (300,000 entries of 1 KiB): charged 430 MiB for 428 MiB of
/// RSS, so that a configured size holds no more than it says.
pub const ENTRY_OVERHEAD: usize = 96 + 128;

/// The bytes jemalloc takes for an allocation of `n`: four size classes per doubling
/// (1,024, 1,280, 1,536, 1,792, 2,048...), multiples of 16 up to 128.
pub fn size_class(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let spacing = 1usize << ((usize::BITS - (n - 1).leading_zeros()) - 3);
    n.div_ceil(spacing) * spacing
}

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

    pub fn new(p: EntryParts<'_>) -> Entry {
        let f = &p.freshness;
        let url = p.key.as_str().as_bytes();
        let mut m = vec![0u8; meta::URL + url.len()];
        m[meta::URL..].copy_from_slice(url);
        let site = p.key.as_ref().site_u16();
        m[meta::SITE..meta::SITE + 2].copy_from_slice(&site.to_le_bytes());
        m[meta::ID..meta::ID + 8].copy_from_slice(&p.id.to_le_bytes());
        m[meta::STATUS..meta::STATUS + 2].copy_from_slice(&p.status.as_u16().to_le_bytes());
        m[meta::CODING] = coding_byte(p.coding);
        m[meta::FLAGS] = if f.must_revalidate {
            meta::MUST_REVALIDATE
        } else {
            0
        } | if f.no_cache { meta::NO_CACHE } else { 0 };
        for (at, d) in [
            (meta::LIFETIME, f.lifetime),
            (meta::SWR, f.stale_while_revalidate),
            (meta::SIE, f.stale_if_error),
            (meta::GRACE, f.grace),
            (meta::RETAIN, f.retain),
            (meta::INITIAL_AGE, p.initial_age),
        ] {
            m[at..at + 8].copy_from_slice(&nanos(d).to_le_bytes());
        }
        m[meta::RESPONSE_TIME..meta::RESPONSE_TIME + 8]
            .copy_from_slice(&instant_nanos(p.response_time).to_le_bytes());
        let (headers, far) = StoredHeaders::pack(&m, p.headers, p.body);
        let rare =
            (far.is_some() || p.levee_coded.is_some() || !p.vary.is_empty() || !p.tags.is_empty())
                .then(|| {
                    Box::new(Rare {
                        body: far,
                        levee_coded: p.levee_coded,
                        vary: p.vary,
                        tags: p.tags,
                    })
                });
        Entry {
            headers,
            rare,
            soft_purged: AtomicU8::new(PURGED_NOT),
            derived: Derived::default(),
        }
    }

    /// With `derived` shared with another entry of the same body (a 304 refresh).
    pub fn with_derived(mut self, derived: Derived) -> Entry {
        self.derived = derived;
        self
    }

    /// Marked as `soft_purged` says (a `PURGED_*` value), as read back from a tier.
    pub fn with_soft_purged(self, soft_purged: u8) -> Entry {
        self.soft_purged.store(soft_purged, Ordering::Relaxed);
        self
    }

    /// The key it was stored under.
    pub fn key(&self) -> KeyRef<'_> {
        let p = self.headers.prefix();
        let site = p
            .get(meta::SITE..meta::SITE + 2)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u16::from_le_bytes);
        // The bytes were a `str` when stored.
        let url = p
            .get(meta::URL..)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default();
        KeyRef::new(url, site)
    }

    /// Whether it was stored under `key` (the store's check after its hash lookup).
    pub fn is_for(&self, key: &CacheKey) -> bool {
        let p = self.headers.prefix();
        p.get(meta::URL..) == Some(key.as_str().as_bytes())
            && p.get(meta::SITE..meta::SITE + 2) == Some(&key.as_ref().site_u16().to_le_bytes()[..])
    }

    fn meta_u64(&self, at: usize) -> u64 {
        self.headers
            .prefix()
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    }

    fn meta_duration(&self, at: usize) -> Duration {
        Duration::from_nanos(self.meta_u64(at))
    }

    fn meta_flags(&self) -> u8 {
        self.headers.prefix().get(meta::FLAGS).copied().unwrap_or(0)
    }

    /// Names this body for forms of it kept elsewhere (other codings); an entry refreshed
    /// by a 304 keeps the body and the id.
    pub fn id(&self) -> u64 {
        self.meta_u64(meta::ID)
    }

    pub fn status(&self) -> StatusCode {
        let p = self.headers.prefix();
        p.get(meta::STATUS..meta::STATUS + 2)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_le_bytes)
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(StatusCode::OK)
    }

    /// The body's coding (as `Content-Encoding` in `headers` says).
    pub fn coding(&self) -> Coding {
        self.headers
            .prefix()
            .get(meta::CODING)
            .and_then(|&b| coding_of(b))
            .unwrap_or(Coding::Identity)
    }

    pub fn freshness(&self) -> Freshness {
        let flags = self.meta_flags();
        Freshness {
            lifetime: self.meta_duration(meta::LIFETIME),
            stale_while_revalidate: self.meta_duration(meta::SWR),
            stale_if_error: self.meta_duration(meta::SIE),
            must_revalidate: flags & meta::MUST_REVALIDATE != 0,
            no_cache: flags & meta::NO_CACHE != 0,
            grace: self.meta_duration(meta::GRACE),
            retain: self.meta_duration(meta::RETAIN),
        }
    }

    /// How long the response stays fresh (`freshness().lifetime`).
    pub fn lifetime(&self) -> Duration {
        self.meta_duration(meta::LIFETIME)
    }

    /// `corrected_initial_age` of RFC 9111 §4.2.3.
    pub fn initial_age(&self) -> Duration {
        self.meta_duration(meta::INITIAL_AGE)
    }

    /// When the response (or the 304 that refreshed it) arrived.
    pub fn response_time(&self) -> Instant {
        instant_of(self.meta_u64(meta::RESPONSE_TIME) as i64)
    }

    /// The body, in [`Entry::coding`] (a reference to the stored bytes, no copy).
    pub fn body(&self) -> Bytes {
        match self.rare.as_deref().and_then(|r| r.body.as_ref()) {
            Some(b) => b.clone(),
            None => self.headers.tail(),
        }
    }

    /// The body's bytes, without taking a reference to them.
    pub fn body_bytes(&self) -> &[u8] {
        match self.rare.as_deref().and_then(|r| r.body.as_ref()) {
            Some(b) => b,
            None => self.headers.tail_bytes(),
        }
    }

    /// Set when levee, not the backend, applied the coding.
    pub fn levee_coded(&self) -> Option<&LeveeCoded> {
        self.rare.as_deref().and_then(|r| r.levee_coded.as_ref())
    }

    pub fn vary(&self) -> &VaryKey {
        static NONE: VaryKey = VaryKey::EMPTY;
        self.rare.as_deref().map_or(&NONE, |r| &r.vary)
    }

    /// Surrogate keys the backend gave it (tags.rs), for purges by tag.
    pub fn tags(&self) -> &Tags {
        static NONE: Tags = Tags::EMPTY;
        self.rare.as_deref().map_or(&NONE, |r| &r.tags)
    }

    /// `current_age` (RFC 9111 §4.2.3).
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age() + now.saturating_duration_since(self.response_time())
    }

    /// Time left until stale, or how stale it is (a soft-purged entry is stale now).
    pub fn staleness(&self, now: Instant) -> Result<Duration, Duration> {
        let age = self.age(now);
        let lifetime = self.lifetime();
        if self.soft_purged.load(Ordering::Relaxed) != PURGED_NOT {
            return Err(age.saturating_sub(lifetime));
        }
        if age < lifetime {
            Ok(lifetime - age)
        } else {
            Err(age - lifetime)
        }
    }

    /// How long the entry is worth keeping from `now`.
    pub fn time_to_keep(&self, now: Instant) -> Duration {
        let total = self
            .lifetime()
            .saturating_add(self.meta_duration(meta::RETAIN));
        total.saturating_sub(self.age(now))
    }

    /// Bytes charged against the cache size, as the memory is taken: the one buffer of
    /// fixed facts, key, packed fields and small body rounded up to the allocator's size
    /// class, a large body, the rare fields, custom header names, and the `Entry` with
    /// its share of the index.
    pub fn weight(&self) -> u32 {
        let far = self.rare.as_ref().map_or(0, |r| {
            size_class(std::mem::size_of::<Rare>())
                + r.body.as_ref().map_or(0, Bytes::len)
                + r.tags.iter().map(|t| t.len()).sum::<usize>()
        });
        let total = size_class(self.headers.buffer_len())
            + self.headers.custom_size()
            + far
            + ENTRY_OVERHEAD;
        u32::try_from(total).unwrap_or(u32::MAX)
    }

    /// The backend's own `ETag`, to revalidate with (not the weak form levee serves
    /// compressed copies with).
    pub fn etag(&self) -> Option<HeaderValue> {
        match self.levee_coded() {
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

#[cfg(test)]
mod tests;

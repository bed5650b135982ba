//! Bounded in-memory storage: quick_cache's sharded index (CLOCK-PRO-like hot/cold
//! eviction with ghost entries, S3-FIFO's cousin), weighed in bytes, under a keyed
//! 64-bit hash of the primary [`CacheKey`] (key.rs: the security boundary). Each entry
//! keeps its whole key (entry.rs), and every read compares it with the key asked for:
//! two URLs whose hashes collide never get each other's responses, they share one slot
//! (the later replaces the earlier). The hash is SipHash with a per-process key, so a
//! client cannot aim URLs at one slot. Keeping the URL once, in the entry's buffer, and
//! 8 bytes in the index instead of a boxed copy of it saves about 40 bytes per object
//! (ARCHITECTURE.md, "The memory tier"). Responses that `Vary` are kept as a short list
//! of variants under it, selected by their [`VaryKey`](crate::VaryKey); the one-variant
//! case, nearly every URL, is the entry's `Arc` itself, with no list.
//!
//! Why quick_cache and not moka (which levee used before; issue 23, measured with
//! `examples/store_memory.rs` and `benchmarks/scale.sh`): at a million objects moka's
//! per-entry bookkeeping (its own `Arc`ed entry, key hash, access and write order
//! deques, the timer wheel for per-entry expiry: about 200 bytes) outweighed what
//! quick_cache keeps (key and value in a slab slot, a 4-byte table index: about 60),
//! and a hit in quick_cache is a shard's read lock and one reference bit, with no
//! access log to replay. quick_cache has no per-entry expiry, so an entry is kept until
//! it is evicted for room, removed, or found useless (past its freshness and `retain`)
//! by a `get`, which removes it, or by the sweep [`Store::run_pending_tasks`] runs at
//! most once a minute (the stats scrape calls it). Useless entries are never
//! referenced, so they are the first the clock evicts; the byte bound holds either way.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use nohash_hasher::BuildNoHashHasher;
use quick_cache::sync::Cache;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};

use crate::entry::Entry;
use crate::key::{CacheKey, KeyRef};

/// At most this many variants per URL; the oldest is dropped first.
const MAX_VARIANTS: usize = 16;

/// How often [`Store::run_pending_tasks`] walks the store for useless entries.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Each shard of the index holds at most this share of the capacity in one object, so a
/// shard's capacity must cover the largest object levee stores (`max_object_size`,
/// 16 MiB by default): shards of at least 64 MiB, fewer shards for smaller caches.
const MIN_SHARD_BYTES: u64 = 64 << 20;

/// The stored responses of one URL, newest first, one per Vary key.
#[derive(Debug, Clone)]
enum Variants {
    /// One response (nearly every URL): the entry itself, no list.
    One(Arc<Entry>),
    /// Several, newest first.
    Many(Arc<Vec<Arc<Entry>>>),
}

impl Variants {
    fn from_list(mut list: Vec<Arc<Entry>>) -> Option<Variants> {
        list.truncate(MAX_VARIANTS);
        match list.len() {
            0 => None,
            1 => list.pop().map(Variants::One),
            _ => Some(Variants::Many(Arc::new(list))),
        }
    }

    fn as_slice(&self) -> &[Arc<Entry>] {
        match self {
            Variants::One(e) => std::slice::from_ref(e),
            Variants::Many(list) => list,
        }
    }

    /// Those stored under `key` (a collision of hashes leaves others beside them).
    fn of<'a>(&'a self, key: &'a CacheKey) -> impl Iterator<Item = &'a Arc<Entry>> + 'a {
        self.as_slice().iter().filter(move |e| e.is_for(key))
    }

    /// The same stored value (not merely equal entries).
    fn same(&self, other: &Variants) -> bool {
        match (self, other) {
            (Variants::One(a), Variants::One(b)) => Arc::ptr_eq(a, b),
            (Variants::Many(a), Variants::Many(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    fn weight(&self) -> u64 {
        self.as_slice().iter().map(|e| u64::from(e.weight())).sum()
    }
}

/// Whether `entry` is still worth keeping at `now` (fresh, or within its stale windows).
fn useful(entry: &Entry, now: Instant) -> bool {
    !entry.time_to_keep(now).is_zero()
}

/// Weight in bytes: the variants' bodies, headers, keys and fixed overhead.
#[derive(Clone)]
struct Bytes;

impl Weighter<u64, Variants> for Bytes {
    fn weight(&self, _hash: &u64, value: &Variants) -> u64 {
        value.weight()
    }
}

/// Counts entries evicted for room.
#[derive(Clone)]
struct CountEvictions(Arc<AtomicU64>);

impl Lifecycle<u64, Variants> for CountEvictions {
    type RequestState = ();

    fn on_evict(&self, _state: &mut (), _hash: u64, _value: Variants) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keys are already SipHash outputs: the index uses them as their own hash.
type Index = Cache<u64, Variants, Bytes, BuildNoHashHasher<u64>, CountEvictions>;

/// The response cache.
#[derive(Clone)]
pub struct Store {
    entries: Arc<Index>,
    /// SipHash with a per-process key (std's `RandomState`): URLs are chosen by
    /// clients, who must not be able to aim them at one slot.
    hasher: RandomState,
    /// Every key hashes to 0: the tests of what a collision does.
    #[cfg(test)]
    collide: bool,
    /// Entries evicted for room (metrics).
    evictions: Arc<AtomicU64>,
    /// When the last sweep for useless entries ran, in seconds since `born`.
    swept: Arc<AtomicU64>,
    born: Instant,
}

impl Store {
    /// A store holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> Store {
        let evictions = Arc::new(AtomicU64::new(0));
        let parallel = std::thread::available_parallelism().map_or(4, |n| n.get());
        let shards = (capacity / MIN_SHARD_BYTES).clamp(1, 4 * parallel as u64) as usize;
        // Ghost entries (recently evicted keys, which a second request admits as hot)
        // are bounded by this estimate; 2 KiB is a small page.
        let items = usize::try_from(capacity / 2048)
            .unwrap_or(usize::MAX)
            .max(64);
        let options = OptionsBuilder::new()
            .shards(shards.next_power_of_two())
            .estimated_items_capacity(items)
            .weight_capacity(capacity)
            .build();
        let lifecycle = CountEvictions(evictions.clone());
        let entries = match options {
            Ok(o) => Cache::with_options(o, Bytes, Default::default(), lifecycle),
            // The builder only refuses options that are missing; all are set above.
            Err(_) => Cache::with(items, capacity, Bytes, Default::default(), lifecycle),
        };
        Store {
            entries: Arc::new(entries),
            hasher: RandomState::new(),
            #[cfg(test)]
            collide: false,
            evictions,
            swept: Arc::new(AtomicU64::new(0)),
            born: Instant::now(),
        }
    }

    /// URLs evicted to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    fn hash(&self, key: &CacheKey) -> u64 {
        #[cfg(test)]
        if self.collide {
            return 0;
        }
        self.hasher.hash_one(key)
    }

    /// The stored response for `key` that `request` selects, fresh or not.
    pub fn get(&self, key: &CacheKey, request: &HeaderMap) -> Option<Arc<Entry>> {
        let hash = self.hash(key);
        let found = match self.entries.get(&hash)? {
            Variants::One(e) => (e.is_for(key) && e.vary().matches(request)).then_some(e),
            Variants::Many(list) => list
                .iter()
                .find(|e| e.is_for(key) && e.vary().matches(request))
                .cloned(),
        }?;
        if useful(&found, crate::clock::now()) {
            return Some(found);
        }
        self.drop_useless(hash);
        None
    }

    /// Every stored variant of `key`, newest first (empty if none): what the other
    /// tiers copy.
    pub fn variants(&self, key: &CacheKey) -> Vec<Arc<Entry>> {
        let now = crate::clock::now();
        self.entries
            .peek(&self.hash(key))
            .map_or_else(Vec::new, |v| {
                v.of(key).filter(|e| useful(e, now)).cloned().collect()
            })
    }

    /// Replaces every variant of `key` with `list` (newest first; at most 16 are kept);
    /// an empty list removes the URL.
    pub fn insert_variants(&self, key: CacheKey, list: Vec<Arc<Entry>>) {
        debug_assert!(list.iter().all(|e| e.is_for(&key)), "entries of {key:?}");
        let hash = self.hash(&key);
        match Variants::from_list(list) {
            Some(v) => self.entries.insert(hash, v),
            None => {
                self.entries.remove(&hash);
            }
        }
    }

    /// Stores `entry` (made for `key`), replacing the variant with the same Vary key.
    pub fn insert(&self, key: CacheKey, entry: Arc<Entry>) {
        debug_assert!(entry.is_for(&key), "an entry of {key:?}");
        // A response without Vary replaces every variant: the resource stopped varying.
        if entry.vary().is_empty() {
            self.entries.insert(self.hash(&key), Variants::One(entry));
            return;
        }
        let now = crate::clock::now();
        let mut list = vec![entry.clone()];
        if let Some(v) = self.entries.peek(&self.hash(&key)) {
            list.extend(
                v.of(&key)
                    .filter(|e| e.vary() != entry.vary() && useful(e, now))
                    .cloned(),
            );
        }
        self.insert_variants(key, list);
    }

    /// Removes every variant of `key` (RFC 9111 §4.4 invalidation).
    pub fn invalidate(&self, key: &CacheKey) {
        self.entries.remove(&self.hash(key));
    }

    /// Removes the one stored response with this `id` from `key`'s variants, if it is
    /// still there: a full response superseded it (RFC 9111 §4.3.3) but could not be
    /// stored in its place.
    pub fn remove(&self, key: &CacheKey, id: u64) {
        let hash = self.hash(key);
        let Some(variants) = self.entries.peek(&hash) else {
            return;
        };
        if !variants.as_slice().iter().any(|e| e.id() == id) {
            return;
        }
        let rest: Vec<Arc<Entry>> = variants
            .as_slice()
            .iter()
            .filter(|e| e.id() != id)
            .cloned()
            .collect();
        self.replace(hash, &variants, rest);
    }

    /// Replaces `old`, if it is still what `hash` holds, with `rest` (none: removes it).
    fn replace(&self, hash: u64, old: &Variants, rest: Vec<Arc<Entry>>) {
        match Variants::from_list(rest) {
            None => {
                self.entries.remove_if(&hash, |v| v.same(old));
            }
            Some(v) => self.entries.insert(hash, v),
        }
    }

    /// Removes what `hash` holds if every variant in it is useless now.
    fn drop_useless(&self, hash: u64) {
        let now = crate::clock::now();
        self.entries
            .remove_if(&hash, |v| !v.as_slice().iter().any(|e| useful(e, now)));
    }

    /// Marks stale every stored response `pick` chooses (a soft purge: they are
    /// validated on their next request, and still serve as stale copies within grace).
    /// Walks the whole store: for rare events like an edit, not per request. Returns
    /// how many were marked.
    pub fn soft_purge(&self, pick: impl Fn(KeyRef<'_>, &Entry) -> bool) -> usize {
        let mut n = 0;
        for (_, variants) in self.entries.iter() {
            for e in variants.as_slice().iter().filter(|e| pick(e.key(), e)) {
                e.mark_stale();
                n += 1;
            }
        }
        n
    }

    /// Removes (or, `soft`, marks stale) every variant of one URL; how many.
    pub fn purge_key(&self, key: &CacheKey, soft: bool) -> usize {
        let hash = self.hash(key);
        let Some(variants) = self.entries.peek(&hash) else {
            return 0;
        };
        let n = variants.of(key).count();
        if soft {
            variants.of(key).for_each(|e| e.mark_stale_serving());
        } else if n > 0 {
            let rest = variants
                .as_slice()
                .iter()
                .filter(|e| !e.is_for(key))
                .cloned()
                .collect();
            self.replace(hash, &variants, rest);
        }
        n
    }

    /// Removes (or, `soft`, marks stale) every stored response `pick` chooses, and
    /// returns how many. A URL whose variants are all removed leaves the store. Walks
    /// the whole store: for purges, not per request.
    pub fn purge(&self, soft: bool, pick: impl Fn(KeyRef<'_>, &Entry) -> bool) -> usize {
        let mut n = 0;
        if soft {
            for (_, variants) in self.entries.iter() {
                for e in variants.as_slice().iter().filter(|e| pick(e.key(), e)) {
                    e.mark_stale_serving();
                    n += 1;
                }
            }
            return n;
        }
        for (hash, variants) in self.entries.iter() {
            let (gone, kept): (Vec<_>, Vec<_>) = variants
                .as_slice()
                .iter()
                .cloned()
                .partition(|e| pick(e.key(), e));
            if gone.is_empty() {
                continue;
            }
            n += gone.len();
            self.replace(hash, &variants, kept);
        }
        n
    }

    /// Number of URLs stored.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes charged against the capacity (never more than the capacity).
    pub fn weighted_size(&self) -> u64 {
        self.entries.weight()
    }

    /// Removes the entries that are no longer worth keeping (past freshness and every
    /// stale window), at most once a minute: a walk of the whole index that holds a
    /// shard's read lock one entry at a time (quick_cache's `retain` would hold its
    /// write lock for a whole shard: 30 ms of blocked hits per shard at 1M objects),
    /// removing each useless URL on its own. Eviction for room needs no pending work
    /// here: the bound holds on every insert.
    pub fn run_pending_tasks(&self) {
        let at = self.born.elapsed().as_secs();
        let last = self.swept.load(Ordering::Relaxed);
        if at < last + SWEEP_EVERY.as_secs() && last != 0 {
            return;
        }
        if self
            .swept
            .compare_exchange(last, at.max(1), Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let now = crate::clock::now();
        let useless = |v: &Variants| !v.as_slice().iter().any(|e| useful(e, now));
        for (hash, variants) in self.entries.iter() {
            if useless(&variants) {
                self.entries.remove_if(&hash, useless);
            }
        }
    }
}

#[cfg(test)]
mod tests;

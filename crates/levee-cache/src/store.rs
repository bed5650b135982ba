//! Bounded in-memory storage: moka's TinyLFU admission and eviction, weighed in bytes,
//! with each entry expiring when it is no longer worth keeping.
//!
//! Entries are kept under their primary [`CacheKey`] (key.rs: the security boundary);
//! responses that `Vary` are kept as a short list of variants under it, selected by
//! their [`VaryKey`](crate::VaryKey).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use moka::sync::Cache;
use moka::Expiry;

use crate::entry::Entry;
use crate::key::CacheKey;

/// At most this many variants per URL; the oldest is dropped first.
const MAX_VARIANTS: usize = 16;

/// The stored responses of one URL, one per Vary key.
#[derive(Debug, Clone, Default)]
pub struct Variants(Vec<Arc<Entry>>);

impl Variants {
    fn select(&self, request: &HeaderMap) -> Option<&Arc<Entry>> {
        self.0.iter().find(|e| e.vary.matches(request))
    }
    fn weight(&self) -> u32 {
        self.0
            .iter()
            .fold(0u32, |w, e| w.saturating_add(e.weight()))
    }
    fn keep_for(&self, now: Instant) -> Duration {
        self.0
            .iter()
            .map(|e| e.time_to_keep(now))
            .max()
            .unwrap_or_default()
    }
}

struct KeepUntilUseless;

impl Expiry<CacheKey, Arc<Variants>> for KeepUntilUseless {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        value: &Arc<Variants>,
        created_at: Instant,
    ) -> Option<Duration> {
        Some(value.keep_for(created_at))
    }
    fn expire_after_update(
        &self,
        _key: &CacheKey,
        value: &Arc<Variants>,
        updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.keep_for(updated_at))
    }
}

/// The response cache.
#[derive(Clone)]
pub struct Store {
    entries: Cache<CacheKey, Arc<Variants>>,
    /// Entries evicted for room (metrics).
    evictions: Arc<AtomicU64>,
}

impl Store {
    /// A store holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> Store {
        let evictions = Arc::new(AtomicU64::new(0));
        let counted = evictions.clone();
        let entries = Cache::builder()
            .max_capacity(capacity)
            .weigher(|_k: &CacheKey, v: &Arc<Variants>| v.weight())
            .expire_after(KeepUntilUseless)
            .eviction_listener(move |_k, _v, cause| {
                if cause == moka::notification::RemovalCause::Size {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build();
        Store { entries, evictions }
    }

    /// URLs evicted to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// The stored response for `key` that `request` selects, fresh or not.
    pub fn get(&self, key: &CacheKey, request: &HeaderMap) -> Option<Arc<Entry>> {
        let variants = self.entries.get(key)?;
        variants.select(request).cloned()
    }

    /// Stores `entry`, replacing the variant with the same Vary key.
    pub fn insert(&self, key: CacheKey, entry: Arc<Entry>) {
        let mut list: Vec<Arc<Entry>> = match self.entries.get(&key) {
            Some(v) => {
                v.0.iter()
                    .filter(|e| e.vary != entry.vary)
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        };
        // A response without Vary replaces every variant: the resource stopped varying.
        if entry.vary.is_empty() {
            list.clear();
        }
        list.insert(0, entry);
        list.truncate(MAX_VARIANTS);
        self.entries.insert(key, Arc::new(Variants(list)));
    }

    /// Every stored variant of `key`, newest first (what the lower tiers write).
    pub fn variants(&self, key: &CacheKey) -> Vec<Arc<Entry>> {
        self.entries
            .get(key)
            .map(|v| v.0.clone())
            .unwrap_or_default()
    }

    /// Replaces every variant of `key` with `list` (newest first), as a lower tier had
    /// them; an empty list removes the key.
    pub fn insert_variants(&self, key: CacheKey, mut list: Vec<Arc<Entry>>) {
        if list.is_empty() {
            self.entries.invalidate(&key);
            return;
        }
        list.truncate(MAX_VARIANTS);
        self.entries.insert(key, Arc::new(Variants(list)));
    }

    /// Removes every variant of `key` (RFC 9111 §4.4 invalidation).
    pub fn invalidate(&self, key: &CacheKey) {
        self.entries.invalidate(key);
    }

    /// Removes the one stored response with this `id` from `key`'s variants, if it is
    /// still there: a full response superseded it (RFC 9111 §4.3.3) but could not be
    /// stored in its place.
    pub fn remove(&self, key: &CacheKey, id: u64) {
        let Some(variants) = self.entries.get(key) else {
            return;
        };
        if !variants.0.iter().any(|e| e.id == id) {
            return;
        }
        let rest: Vec<Arc<Entry>> = variants.0.iter().filter(|e| e.id != id).cloned().collect();
        if rest.is_empty() {
            self.entries.invalidate(key);
        } else {
            self.entries.insert(key.clone(), Arc::new(Variants(rest)));
        }
    }

    /// Marks stale every stored response `pick` chooses (a soft purge: they are
    /// validated on their next request, and still serve as stale copies within grace).
    /// Walks the whole store: for rare events like an edit, not per request. Returns
    /// how many were marked.
    pub fn soft_purge(&self, pick: impl Fn(&CacheKey, &Entry) -> bool) -> usize {
        let mut n = 0;
        for (key, variants) in self.entries.iter() {
            for e in variants.0.iter().filter(|e| pick(&key, e)) {
                e.mark_stale();
                n += 1;
            }
        }
        n
    }

    /// Removes (or, `soft`, marks stale) every variant of one URL; how many.
    pub fn purge_key(&self, key: &CacheKey, soft: bool) -> usize {
        let Some(variants) = self.entries.get(key) else {
            return 0;
        };
        if soft {
            variants.0.iter().for_each(|e| e.mark_stale_serving());
        } else {
            self.entries.invalidate(key);
        }
        variants.0.len()
    }

    /// Removes (or, `soft`, marks stale) every stored response `pick` chooses, and
    /// returns how many. A URL whose variants are all removed leaves the store. Walks
    /// the whole store: for purges, not per request.
    pub fn purge(&self, soft: bool, pick: impl Fn(&CacheKey, &Entry) -> bool) -> usize {
        let mut n = 0;
        if soft {
            for (key, variants) in self.entries.iter() {
                for e in variants.0.iter().filter(|e| pick(&key, e)) {
                    e.mark_stale_serving();
                    n += 1;
                }
            }
            return n;
        }
        for (key, variants) in self.entries.iter() {
            let (gone, kept): (Vec<_>, Vec<_>) =
                variants.0.iter().cloned().partition(|e| pick(&key, e));
            if gone.is_empty() {
                continue;
            }
            n += gone.len();
            if kept.is_empty() {
                self.entries.invalidate(&*key);
            } else {
                self.entries
                    .insert((*key).clone(), Arc::new(Variants(kept)));
            }
        }
        n
    }

    /// Number of URLs stored (approximate while eviction runs).
    pub fn len(&self) -> u64 {
        self.entries.entry_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes charged against the capacity.
    pub fn weighted_size(&self) -> u64 {
        self.entries.weighted_size()
    }

    /// Runs pending eviction work now (tests and stats).
    pub fn run_pending_tasks(&self) {
        self.entries.run_pending_tasks();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scheme;
    use crate::key::VaryKey;
    use crate::policy::Freshness;
    use http::header::{HeaderValue, VARY};

    fn entry(id: u64, lang: &'static str) -> Arc<Entry> {
        let mut resp = HeaderMap::new();
        resp.insert(VARY, HeaderValue::from_static("accept-language"));
        let mut req = HeaderMap::new();
        req.insert("accept-language", HeaderValue::from_static(lang));
        Arc::new(Entry {
            id,
            status: http::StatusCode::OK,
            headers: crate::StoredHeaders::new(&resp),
            body: bytes::Bytes::from_static(b"x"),
            coding: levee_compress::Coding::Identity,
            levee_coded: None,
            vary: VaryKey::new(&resp, &req),
            freshness: Freshness {
                lifetime: Duration::from_secs(60),
                stale_while_revalidate: Duration::ZERO,
                stale_if_error: Duration::ZERO,
                must_revalidate: false,
                no_cache: false,
                grace: Duration::ZERO,
                retain: Duration::ZERO,
            },
            initial_age: Duration::ZERO,
            response_time: Instant::now(),
            soft_purged: Default::default(),
            derived: Default::default(),
            tags: Default::default(),
        })
    }

    fn lang(l: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("accept-language", HeaderValue::from_static(l));
        h
    }

    #[test]
    fn remove_drops_one_variant_by_id() {
        let store = Store::new(1 << 20);
        let k = CacheKey::for_request(Scheme::Http, &"/k".parse().unwrap(), &HeaderMap::new());
        store.insert(k.clone(), entry(1, "en"));
        store.insert(k.clone(), entry(2, "ko"));
        // An id that is no longer stored changes nothing.
        store.remove(&k, 99);
        assert!(store.get(&k, &lang("en")).is_some());
        store.remove(&k, 1);
        assert!(store.get(&k, &lang("en")).is_none());
        assert_eq!(store.get(&k, &lang("ko")).map(|e| e.id), Some(2));
        store.remove(&k, 2);
        assert!(store.get(&k, &lang("ko")).is_none());
    }

    #[test]
    fn soft_purge_marks_only_what_it_picks() {
        let store = Store::new(1 << 20);
        let k =
            |p: &str| CacheKey::for_request(Scheme::Http, &p.parse().unwrap(), &HeaderMap::new());
        store.insert(k("/a"), entry(1, "en"));
        store.insert(k("/b"), entry(2, "en"));
        let now = Instant::now();
        assert!(store
            .get(&k("/a"), &lang("en"))
            .unwrap()
            .staleness(now)
            .is_ok());
        assert_eq!(store.soft_purge(|key, _| key.as_str().ends_with("/a")), 1);
        assert!(store
            .get(&k("/a"), &lang("en"))
            .unwrap()
            .staleness(now)
            .is_err());
        assert!(store
            .get(&k("/b"), &lang("en"))
            .unwrap()
            .staleness(now)
            .is_ok());
    }
}

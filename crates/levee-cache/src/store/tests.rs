//! The store's contract: variants, removal, purges, expiry, the byte bound.

use super::*;
use crate::key::Scheme;
use crate::key::VaryKey;
use crate::policy::Freshness;
use crate::EntryParts;
use http::header::{HeaderValue, VARY};

fn entry(key: &CacheKey, id: u64, lang: &'static str) -> Arc<Entry> {
    entry_with(key, id, lang, 60, 0, 1, true, 0)
}

/// An entry fresh for `lifetime` s, `age` s old, with a body of `size` bytes, with
/// `Vary: Accept-Language` or without `Vary`, kept `retain` s past its freshness.
#[allow(clippy::too_many_arguments)]
fn entry_with(
    key: &CacheKey,
    id: u64,
    lang: &'static str,
    lifetime: u64,
    age: u64,
    size: usize,
    vary: bool,
    retain: u64,
) -> Arc<Entry> {
    let mut resp = HeaderMap::new();
    if vary {
        resp.insert(VARY, HeaderValue::from_static("accept-language"));
    }
    let mut req = HeaderMap::new();
    req.insert("accept-language", HeaderValue::from_static(lang));
    Arc::new(Entry::new(EntryParts {
        key,
        id,
        status: http::StatusCode::OK,
        headers: &resp,
        body: bytes::Bytes::from(vec![b'x'; size]),
        coding: levee_compress::Coding::Identity,
        levee_coded: None,
        vary: VaryKey::new(&resp, &req),
        freshness: Freshness {
            lifetime: Duration::from_secs(lifetime),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::ZERO,
            retain: Duration::from_secs(retain),
        },
        initial_age: Duration::ZERO,
        response_time: crate::clock::now() - Duration::from_secs(age),
        tags: Default::default(),
    }))
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
    store.insert(k.clone(), entry(&k, 1, "en"));
    store.insert(k.clone(), entry(&k, 2, "ko"));
    // An id that is no longer stored changes nothing.
    store.remove(&k, 99);
    assert!(store.get(&k, &lang("en")).is_some());
    store.remove(&k, 1);
    assert!(store.get(&k, &lang("en")).is_none());
    assert_eq!(store.get(&k, &lang("ko")).map(|e| e.id()), Some(2));
    store.remove(&k, 2);
    assert!(store.get(&k, &lang("ko")).is_none());
}

#[test]
fn soft_purge_marks_only_what_it_picks() {
    let store = Store::new(1 << 20);
    let k = |p: &str| CacheKey::for_request(Scheme::Http, &p.parse().unwrap(), &HeaderMap::new());
    store.insert(k("/a"), entry(&k("/a"), 1, "en"));
    store.insert(k("/b"), entry(&k("/b"), 2, "en"));
    let now = crate::clock::now();
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

fn key(path: &str) -> CacheKey {
    CacheKey::for_request(Scheme::Http, &path.parse().unwrap(), &HeaderMap::new())
}

#[test]
fn variants_come_newest_first_and_insert_variants_replaces_them() {
    let store = Store::new(1 << 20);
    let k = key("/v");
    assert!(store.variants(&k).is_empty());
    store.insert(k.clone(), entry(&k, 1, "en"));
    store.insert(k.clone(), entry(&k, 2, "ko"));
    store.insert(k.clone(), entry(&k, 3, "en"));
    let ids: Vec<u64> = store.variants(&k).iter().map(|e| e.id()).collect();
    assert_eq!(ids, [3, 2]);
    store.insert_variants(k.clone(), vec![entry(&k, 7, "fr"), entry(&k, 8, "de")]);
    let ids: Vec<u64> = store.variants(&k).iter().map(|e| e.id()).collect();
    assert_eq!(ids, [7, 8]);
    assert_eq!(store.get(&k, &lang("de")).map(|e| e.id()), Some(8));
    assert!(store.get(&k, &lang("en")).is_none());
    store.insert_variants(k.clone(), Vec::new());
    assert!(store.variants(&k).is_empty());
    assert_eq!(store.len(), 0);
}

#[test]
fn a_response_without_vary_replaces_every_variant() {
    let store = Store::new(1 << 20);
    let k = key("/n");
    store.insert(k.clone(), entry(&k, 1, "en"));
    store.insert(k.clone(), entry(&k, 2, "ko"));
    store.insert(k.clone(), entry_with(&k, 3, "en", 60, 0, 1, false, 0));
    let ids: Vec<u64> = store.variants(&k).iter().map(|e| e.id()).collect();
    assert_eq!(ids, [3]);
    assert_eq!(store.get(&k, &lang("ko")).map(|e| e.id()), Some(3));
}

#[test]
fn an_entry_past_freshness_and_retain_is_gone_on_the_next_get() {
    let store = Store::new(1 << 20);
    let k = key("/old");
    store.insert(k.clone(), entry_with(&k, 1, "en", 5, 10, 1, true, 0));
    assert_eq!(store.len(), 1);
    assert!(store.get(&k, &lang("en")).is_none());
    assert_eq!(store.len(), 0, "removed, not only hidden");
    assert!(store.variants(&k).is_empty());
    // Stale but within its lifetime plus retain: still there (grace, validation).
    store.insert(k.clone(), entry_with(&k, 2, "en", 5, 10, 1, true, 60));
    assert_eq!(store.get(&k, &lang("en")).map(|e| e.id()), Some(2));
}

#[test]
fn the_sweep_removes_useless_entries() {
    let store = Store::new(1 << 20);
    for i in 0..10 {
        store.insert(
            key(&format!("/s{i}")),
            entry_with(&key(&format!("/s{i}")), i, "en", 5, 10, 1, true, 0),
        );
    }
    store.insert(key("/live"), entry(&key("/live"), 100, "en"));
    store.run_pending_tasks();
    assert_eq!(store.len(), 1);
}

#[test]
fn weighted_size_never_exceeds_the_capacity() {
    let capacity = 64 * 1024;
    let store = Store::new(capacity);
    for i in 0..1000 {
        store.insert(
            key(&format!("/w{i}")),
            entry_with(&key(&format!("/w{i}")), i, "en", 60, 0, 1000, true, 0),
        );
        assert!(store.weighted_size() <= capacity);
    }
    store.run_pending_tasks();
    assert!(store.weighted_size() <= capacity);
    assert!(store.evictions() > 0);
    assert!(store.len() < 1000 && store.len() > 10, "{}", store.len());
    // The last one stored is there.
    assert!(store.get(&key("/w999"), &lang("en")).is_some());
}

#[test]
fn the_same_url_in_two_sites_is_two_entries() {
    let store = Store::new(1 << 20);
    let a = key("/same");
    let b = key("/same").in_site(1);
    store.insert(a.clone(), entry(&a, 1, "en"));
    assert!(store.get(&b, &lang("en")).is_none());
    store.insert(b.clone(), entry(&b, 2, "en"));
    assert_eq!(store.get(&a, &lang("en")).map(|e| e.id()), Some(1));
    assert_eq!(store.get(&b, &lang("en")).map(|e| e.id()), Some(2));
    assert_eq!(store.purge(false, |k, _| k.site() == 1), 1);
    assert!(store.get(&b, &lang("en")).is_none());
    assert!(store.get(&a, &lang("en")).is_some());
}

#[test]
fn urls_whose_hashes_collide_never_get_each_others_responses() {
    let store = Store {
        collide: true,
        ..Store::new(1 << 20)
    };
    let (a, b) = (key("/a"), key("/b"));
    store.insert(a.clone(), entry(&a, 1, "en"));
    assert!(store.get(&b, &lang("en")).is_none());
    assert!(store.variants(&b).is_empty());
    assert_eq!(store.purge_key(&b, false), 0);
    assert_eq!(store.get(&a, &lang("en")).map(|e| e.id()), Some(1));
    // They share one slot: the later replaces the earlier, variants and all.
    store.insert(b.clone(), entry(&b, 2, "ko"));
    store.insert(b.clone(), entry(&b, 3, "en"));
    assert!(store.get(&a, &lang("en")).is_none());
    assert_eq!(store.get(&b, &lang("en")).map(|e| e.id()), Some(3));
    assert_eq!(store.get(&b, &lang("ko")).map(|e| e.id()), Some(2));
    assert_eq!(store.len(), 1);
    // A purge of one URL leaves the other's.
    store.insert(a.clone(), entry_with(&a, 4, "en", 60, 0, 1, false, 0));
    assert_eq!(store.purge_key(&b, false), 0);
    assert_eq!(store.purge_key(&a, true), 1);
    assert_eq!(store.purge_key(&a, false), 1);
    assert!(store.get(&a, &lang("en")).is_none());
}

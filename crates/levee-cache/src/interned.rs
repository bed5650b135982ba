//! Header fields that many stored responses share, kept once for the whole process.
//!
//! Most of a page's header bytes are the same on every page of its site: `Server`,
//! `Content-Type`, `Cache-Control`, a `Content-Security-Policy` of several hundred bytes,
//! `Strict-Transport-Security`, `X-Powered-By`, `Link`s to the stylesheet. At a million
//! objects those copies are most of what an entry costs beyond its body (a 1 KiB page with
//! 600 bytes of headers). A field seen in a second stored response is interned here, and
//! the entries that carry it store a 2-byte index instead (headers.rs).
//!
//! Reading is lock-free (an append-only `boxcar::Vec`), and an interned value is a
//! `Bytes` over leaked, never freed memory: building a hit's header map clones it without
//! even the reference count a slice of the entry's own buffer costs. Interning is bounded
//! ([`MAX_VALUES`], [`MAX_BYTES`]): past the bounds fields are stored inline as before.
//! Values that differ per response (`Date`, `ETag`, `Last-Modified`...) and sensitive
//! ones are never interned.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};

/// At most this many interned fields (indexes are 2 bytes).
pub const MAX_VALUES: usize = u16::MAX as usize;
/// At most this many bytes of interned values, leaked for the process's life.
pub const MAX_BYTES: usize = 4 << 20;
/// Fields seen once, counted until they are seen again; past this many the count starts
/// over (a flood of one-off values must not grow it).
const MAX_CANDIDATES: usize = 16_384;
/// Shorter values are cheaper inline (3 bytes of head and the value) than interned.
const MIN_LEN: usize = 4;

/// The interned fields, by index: read on every hit, without a lock.
static FIELDS: boxcar::Vec<(HeaderName, HeaderValue)> = boxcar::Vec::new();

/// The field interned at `index`.
pub fn get(index: u16) -> Option<&'static (HeaderName, HeaderValue)> {
    FIELDS.get(usize::from(index))
}

/// Whether fields named `name` may be interned: not those that differ per response.
fn shareable(name: &HeaderName) -> bool {
    !matches!(
        *name,
        header::DATE
            | header::ETAG
            | header::LAST_MODIFIED
            | header::EXPIRES
            | header::AGE
            | header::CONTENT_LENGTH
            | header::CONTENT_RANGE
            | header::SET_COOKIE
    )
}

#[derive(Default)]
struct Table {
    hasher: RandomState,
    /// Hash of (name, value) to its index in `FIELDS`.
    interned: HashMap<u64, u16>,
    /// Hashes of fields seen once.
    seen: HashSet<u64>,
    bytes: usize,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// Looks up fields while a response is stored, holding the table's lock once for all of
/// them (never on a hit).
pub struct Interner {
    table: std::sync::MutexGuard<'static, Table>,
}

impl Interner {
    pub fn lock() -> Interner {
        Interner {
            table: table().lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// The index of `name: value` if it is interned, interning it if this is the second
    /// time it is seen; `None`: store it inline.
    pub fn intern(&mut self, name: &HeaderName, value: &HeaderValue) -> Option<u16> {
        if value.len() < MIN_LEN || value.is_sensitive() || !shareable(name) {
            return None;
        }
        let t = &mut *self.table;
        let hash = t.hasher.hash_one((name.as_str(), value.as_bytes()));
        if let Some(&i) = t.interned.get(&hash) {
            // Another field may share the hash: then this one stays inline.
            return get(i)
                .filter(|(n, v)| n == name && v.as_bytes() == value.as_bytes())
                .map(|_| i);
        }
        if !t.seen.remove(&hash) {
            if t.seen.len() >= MAX_CANDIDATES {
                t.seen.clear();
            }
            t.seen.insert(hash);
            return None;
        }
        if FIELDS.count() >= MAX_VALUES || t.bytes + value.len() > MAX_BYTES {
            return None;
        }
        let leaked: &'static [u8] = Box::leak(value.as_bytes().to_vec().into_boxed_slice());
        let shared = HeaderValue::from_maybe_shared(Bytes::from_static(leaked)).ok()?;
        let i = u16::try_from(FIELDS.push((name.clone(), shared))).ok()?;
        t.bytes += value.len();
        t.interned.insert(hash, i);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_interned_the_second_time_and_found_after() {
        let name = HeaderName::from_static("x-interned-test");
        let value = HeaderValue::from_static("default-src 'self'; script-src 'self'");
        let mut i = Interner::lock();
        assert_eq!(i.intern(&name, &value), None, "seen once: inline");
        let idx = i.intern(&name, &value).expect("seen twice: interned");
        assert_eq!(i.intern(&name, &value), Some(idx));
        let (n, v) = get(idx).unwrap();
        assert_eq!((n, v), (&name, &value));
        // The same value under another name is another field.
        let other = HeaderName::from_static("x-interned-other");
        assert_eq!(i.intern(&other, &value), None);
    }

    #[test]
    fn per_response_sensitive_and_short_values_stay_inline() {
        let mut i = Interner::lock();
        let date = HeaderValue::from_static("Thu, 26 Nov 2026 02:20:00 GMT");
        let mut secret = HeaderValue::from_static("a long enough secret value");
        secret.set_sensitive(true);
        let secret_name = HeaderName::from_static("x-interned-secret");
        for _ in 0..3 {
            assert_eq!(i.intern(&header::DATE, &date), None);
            assert_eq!(i.intern(&secret_name, &secret), None);
            assert_eq!(
                i.intern(&header::ACCEPT_RANGES, &HeaderValue::from_static("no")),
                None
            );
        }
    }
}

//! Stored responses as bytes, for the tiers below memory (levee-disk's files, levee-redis's
//! values): every variant of one key in one self-checking record.
//!
//! A record is `magic | checksum | meta length | meta | bodies`, little-endian. The
//! checksum (xxh3-64 of everything after it) is checked on every read, so a record torn
//! by a crash, cut short by a full disk or mixed with another write is refused, never
//! served. Times are wall-clock milliseconds, so a record outlives the process (and moves
//! between machines) with its age intact; they are read back onto levee's clock.
//!
//! Hand-written rather than serde: the format must be stable across versions (a disk
//! tier survives upgrades), large bodies must come back as slices of the record without
//! a copy (small ones go next to their headers, as a fill stores them), and every field
//! is validated as it is read: the bytes come from a file or from a Redis any node can
//! write, so nothing here trusts them (no panics, lengths checked).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::StatusCode;

use crate::entry::{coding_byte, coding_of, Entry, EntryParts, LeveeCoded};
use crate::key::{CacheKey, VaryKey};
use crate::policy::Freshness;

const MAGIC: &[u8; 4] = b"LVR1";
/// magic + checksum + meta length.
const PREFIX: usize = 4 + 8 + 4;
/// More variants than the memory store keeps is not a record levee wrote.
const MAX_VARIANTS: usize = 64;

/// A record read back.
#[derive(Debug)]
pub struct Decoded {
    pub key: CacheKey,
    /// When it was written (wall clock): purges after this apply to it.
    pub written: SystemTime,
    /// Until when it is worth keeping (wall clock): the longest of its variants'
    /// freshness plus stale window.
    pub keep_until: SystemTime,
    /// Newest first, as the memory store keeps them.
    pub variants: Vec<Arc<Entry>>,
}

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// Not a levee record (or another version of the format).
    Magic,
    /// Torn, truncated or altered: the checksum does not match.
    Checksum,
    /// The checksum matched but a field is invalid (a bug, or a record crafted to match).
    Invalid(&'static str),
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecError::Magic => f.write_str("not a levee cache record"),
            CodecError::Checksum => f.write_str("checksum mismatch (torn or altered record)"),
            CodecError::Invalid(what) => write!(f, "invalid record: {what}"),
        }
    }
}

impl std::error::Error for CodecError {}

/// A stable 128-bit hash of a key (site and URL), to name it in files and Redis keys.
/// Stable across processes and machines (xxh3 with its fixed seed), unlike std's hasher.
pub fn key_hash(key: &CacheKey) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(key.site() as u64).to_le_bytes());
    h.update(key.as_str().as_bytes());
    h.digest128()
}

/// The hash as 32 lowercase hex digits.
pub fn key_hex(key: &CacheKey) -> String {
    format!("{:032x}", key_hash(key))
}

/// Milliseconds since the epoch.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An instant on levee's clock as a wall-clock time, given both clocks' `now`.
fn to_wall(t: Instant, now: Instant, wall_now: SystemTime) -> SystemTime {
    match now.checked_duration_since(t) {
        Some(ago) => wall_now.checked_sub(ago).unwrap_or(UNIX_EPOCH),
        None => wall_now + t.duration_since(now),
    }
}

fn to_instant(t: SystemTime, now: Instant, wall_now: SystemTime) -> Instant {
    match wall_now.duration_since(t) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(e) => now + e.duration(),
    }
}

/// Until when `variants` are worth keeping, on the wall clock.
pub fn keep_until(variants: &[Arc<Entry>]) -> SystemTime {
    let (now, wall) = (crate::clock::now(), crate::clock::system_now());
    let keep = variants
        .iter()
        .map(|e| e.time_to_keep(now))
        .max()
        .unwrap_or_default();
    wall + keep
}

/// The record of `variants` (newest first) stored under `key`, written now.
pub fn encode(key: &CacheKey, variants: &[Arc<Entry>]) -> Vec<u8> {
    let (now, wall) = (crate::clock::now(), crate::clock::system_now());
    let keep = variants
        .iter()
        .map(|e| e.time_to_keep(now))
        .max()
        .unwrap_or_default();
    let mut meta = BytesMut::with_capacity(512);
    meta.put_u16_le(u16::try_from(key.site()).unwrap_or(u16::MAX));
    put_bytes32(&mut meta, key.as_str().as_bytes());
    meta.put_u64_le(unix_ms(wall));
    meta.put_u64_le(unix_ms(wall + keep));
    let variants = &variants[..variants.len().min(MAX_VARIANTS)];
    meta.put_u16_le(variants.len() as u16);
    for e in variants {
        meta.put_u16_le(e.status().as_u16());
        meta.put_u8(coding_byte(e.coding()));
        meta.put_u8(e.soft_purged.load(std::sync::atomic::Ordering::Relaxed));
        meta.put_u64_le(unix_ms(to_wall(e.response_time(), now, wall)));
        meta.put_u64_le(ms(e.initial_age()));
        let f = &e.freshness();
        for d in [
            f.lifetime,
            f.stale_while_revalidate,
            f.stale_if_error,
            f.grace,
            f.retain,
        ] {
            meta.put_u64_le(ms(d));
        }
        meta.put_u8(u8::from(f.must_revalidate) | u8::from(f.no_cache) << 1);
        match e.levee_coded() {
            None => meta.put_u8(0),
            Some(LeveeCoded {
                original_etag: None,
            }) => meta.put_u8(1),
            Some(LeveeCoded {
                original_etag: Some(etag),
            }) => {
                meta.put_u8(2);
                put_bytes32(&mut meta, etag.as_bytes());
            }
        }
        meta.put_u16_le(e.headers.len() as u16);
        for (n, v) in e.headers.iter() {
            put_bytes32(&mut meta, n.as_str().as_bytes());
            put_bytes32(&mut meta, v.as_bytes());
        }
        let vary = e.vary().fields();
        meta.put_u16_le(vary.len() as u16);
        for (n, v) in vary {
            put_bytes32(&mut meta, n.as_str().as_bytes());
            match v {
                None => meta.put_u8(0),
                Some(v) => {
                    meta.put_u8(1);
                    put_bytes32(&mut meta, v);
                }
            }
        }
        meta.put_u16_le(e.tags().len() as u16);
        for t in e.tags().iter() {
            put_bytes32(&mut meta, t.as_bytes());
        }
        meta.put_u64_le(e.body_bytes().len() as u64);
    }
    let bodies: usize = variants.iter().map(|e| e.body_bytes().len()).sum();
    let mut out = Vec::with_capacity(PREFIX + meta.len() + bodies);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32::try_from(meta.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&meta);
    for e in variants {
        out.extend_from_slice(e.body_bytes());
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&out[12..]);
    out[4..12].copy_from_slice(&sum.to_le_bytes());
    out
}

fn put_bytes32(buf: &mut BytesMut, b: &[u8]) {
    buf.put_u32_le(u32::try_from(b.len()).unwrap_or(u32::MAX));
    buf.put_slice(b);
}

/// Only the key, write time and keep-until of a record, from its first bytes (enough
/// to cover the meta's start), without checking the checksum: for an index built by
/// scanning files, which checks the whole record when it is read.
pub fn peek(first: &[u8]) -> Option<(CacheKey, SystemTime, SystemTime)> {
    if first.len() < PREFIX || &first[..4] != MAGIC {
        return None;
    }
    let mut r = Reader(&first[PREFIX..]);
    let site = r.u16().ok()?;
    let url = std::str::from_utf8(r.bytes32().ok()?).ok()?;
    let written = from_unix_ms(r.u64().ok()?);
    let keep = from_unix_ms(r.u64().ok()?);
    Some((CacheKey::stored(url, usize::from(site)), written, keep))
}

/// Reads a record back, checking its checksum and every field. Large bodies are slices
/// of `record` (no copy); small ones are stored with their headers, as a fill does.
pub fn decode(record: Bytes) -> Result<Decoded, CodecError> {
    if record.len() < PREFIX || &record[..4] != MAGIC {
        return Err(CodecError::Magic);
    }
    let mut sum = [0u8; 8];
    sum.copy_from_slice(&record[4..12]);
    if xxhash_rust::xxh3::xxh3_64(&record[12..]) != u64::from_le_bytes(sum) {
        return Err(CodecError::Checksum);
    }
    let mut len = [0u8; 4];
    len.copy_from_slice(&record[12..16]);
    let meta_len = u32::from_le_bytes(len) as usize;
    let meta_end = PREFIX
        .checked_add(meta_len)
        .filter(|&e| e <= record.len())
        .ok_or(CodecError::Invalid("meta length"))?;
    let mut r = Reader(&record[PREFIX..meta_end]);
    let (now, wall) = (crate::clock::now(), crate::clock::system_now());
    let site = r.u16()?;
    let url = std::str::from_utf8(r.bytes32()?).map_err(|_| CodecError::Invalid("url"))?;
    let key = CacheKey::stored(url, usize::from(site));
    let written = from_unix_ms(r.u64()?);
    let keep_until = from_unix_ms(r.u64()?);
    let n = usize::from(r.u16()?);
    if n > MAX_VARIANTS {
        return Err(CodecError::Invalid("variant count"));
    }
    let mut body_at = meta_end;
    let mut variants = Vec::with_capacity(n);
    for _ in 0..n {
        let status = StatusCode::from_u16(r.u16()?).map_err(|_| CodecError::Invalid("status"))?;
        let coding = coding_of(r.u8()?).ok_or(CodecError::Invalid("coding"))?;
        let soft_purged = r.u8()?;
        if soft_purged > crate::entry::PURGED_SERVE_STALE {
            return Err(CodecError::Invalid("purge mark"));
        }
        let response_time = to_instant(from_unix_ms(r.u64()?), now, wall);
        let initial_age = Duration::from_millis(r.u64()?);
        let mut d = [Duration::ZERO; 5];
        for slot in &mut d {
            *slot = Duration::from_millis(r.u64()?);
        }
        let flags = r.u8()?;
        let freshness = Freshness {
            lifetime: d[0],
            stale_while_revalidate: d[1],
            stale_if_error: d[2],
            must_revalidate: flags & 1 != 0,
            no_cache: flags & 2 != 0,
            grace: d[3],
            retain: d[4],
        };
        let levee_coded = match r.u8()? {
            0 => None,
            1 => Some(LeveeCoded {
                original_etag: None,
            }),
            2 => Some(LeveeCoded {
                original_etag: Some(value(r.bytes32()?)?),
            }),
            _ => return Err(CodecError::Invalid("coded flag")),
        };
        let mut headers = HeaderMap::new();
        for _ in 0..r.u16()? {
            let name = name(r.bytes32()?)?;
            let v = value(r.bytes32()?)?;
            headers.append(name, v);
        }
        let mut vary = Vec::new();
        for _ in 0..r.u16()? {
            let name = name(r.bytes32()?)?;
            let v = match r.u8()? {
                0 => None,
                1 => Some(Bytes::copy_from_slice(r.bytes32()?)),
                _ => return Err(CodecError::Invalid("vary flag")),
            };
            vary.push((name, v));
        }
        let mut tags = Vec::new();
        for _ in 0..r.u16()? {
            let t = std::str::from_utf8(r.bytes32()?).map_err(|_| CodecError::Invalid("tag"))?;
            tags.push(Box::<str>::from(t));
        }
        let body_len = usize::try_from(r.u64()?).map_err(|_| CodecError::Invalid("body"))?;
        let end = body_at
            .checked_add(body_len)
            .filter(|&e| e <= record.len())
            .ok_or(CodecError::Invalid("body length"))?;
        // A small body is copied next to its headers (Entry::new), as a fill stores it,
        // rather than kept as a slice that would pin the whole record (its meta, other
        // variants); a large one stays a slice, without a copy.
        let body = record.slice(body_at..end);
        body_at = end;
        variants.push(Arc::new(
            Entry::new(EntryParts {
                key: &key,
                id: Entry::next_id(),
                status,
                headers: &headers,
                body,
                coding,
                levee_coded,
                vary: VaryKey::from_fields(vary),
                freshness,
                initial_age,
                response_time,
                tags: tags.into(),
            })
            .with_soft_purged(soft_purged),
        ));
    }
    if body_at != record.len() || !r.0.is_empty() {
        return Err(CodecError::Invalid("trailing bytes"));
    }
    Ok(Decoded {
        key,
        written,
        keep_until,
        variants,
    })
}

fn name(b: &[u8]) -> Result<HeaderName, CodecError> {
    HeaderName::from_bytes(b).map_err(|_| CodecError::Invalid("header name"))
}

fn value(b: &[u8]) -> Result<HeaderValue, CodecError> {
    HeaderValue::from_bytes(b).map_err(|_| CodecError::Invalid("header value"))
}

/// A cursor over the meta that fails, never panics, at its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Invalid("truncated meta"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, CodecError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes32(&mut self) -> Result<&'a [u8], CodecError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scheme;
    use http::header::{CONTENT_TYPE, ETAG, VARY};
    use levee_compress::Coding;

    fn entry(body: &'static [u8], lang: &'static str) -> Arc<Entry> {
        let mut resp = HeaderMap::new();
        resp.insert(VARY, HeaderValue::from_static("accept-language"));
        resp.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        resp.append("x-two", HeaderValue::from_static("1"));
        resp.append("x-two", HeaderValue::from_static("2"));
        let mut req = HeaderMap::new();
        req.insert("accept-language", HeaderValue::from_static(lang));
        Arc::new(Entry::new(EntryParts {
            key: &key(),
            id: Entry::next_id(),
            status: StatusCode::OK,
            headers: &resp,
            body: Bytes::from_static(body),
            coding: Coding::Gzip,
            levee_coded: Some(LeveeCoded {
                original_etag: Some(HeaderValue::from_static("\"e1\"")),
            }),
            vary: VaryKey::new(&resp, &req),
            freshness: Freshness {
                lifetime: Duration::from_secs(60),
                stale_while_revalidate: Duration::from_secs(5),
                stale_if_error: Duration::ZERO,
                must_revalidate: true,
                no_cache: false,
                grace: Duration::from_secs(10),
                retain: Duration::from_secs(70),
            },
            initial_age: Duration::from_secs(3),
            response_time: crate::clock::now(),
            tags: vec!["t1".into(), "t2".into()].into(),
        }))
    }

    fn key() -> CacheKey {
        CacheKey::for_request(Scheme::Https, &"/p?q=1".parse().unwrap(), &{
            let mut h = HeaderMap::new();
            h.insert("host", HeaderValue::from_static("Example.com"));
            h
        })
        .in_site(3)
    }

    #[test]
    fn a_record_reads_back_as_it_was_written() {
        let (a, b) = (entry(b"hello", "en"), entry(b"annyeong", "ko"));
        let rec = encode(&key(), &[a.clone(), b.clone()]);
        let d = decode(Bytes::from(rec.clone())).unwrap();
        assert_eq!(d.key, key());
        assert_eq!(d.key.site(), 3);
        assert_eq!(d.variants.len(), 2);
        for (got, want) in d.variants.iter().zip([&a, &b]) {
            assert_eq!(got.body(), want.body());
            assert_eq!(got.headers, want.headers);
            assert_eq!(got.vary(), want.vary());
            assert_eq!(got.coding(), want.coding());
            assert_eq!(got.freshness(), want.freshness());
            assert_eq!(got.initial_age(), want.initial_age());
            assert_eq!(got.tags(), want.tags());
            assert_eq!(got.etag(), Some(HeaderValue::from_static("\"e1\"")));
            assert_eq!(got.headers.get(ETAG), None);
            // Milliseconds survive; the age is the same within that.
            let now = crate::clock::now();
            let diff = got.age(now).abs_diff(want.age(now));
            assert!(diff <= Duration::from_millis(2), "{diff:?}");
        }
        let (k, written, keep) = peek(&rec[..rec.len().min(600)]).unwrap();
        assert_eq!(k, key());
        assert_eq!(written, d.written);
        assert_eq!(keep, d.keep_until);
        assert!(keep > written + Duration::from_secs(100));
    }

    #[test]
    fn every_damaged_record_is_refused_without_a_panic() {
        let rec = encode(&key(), &[entry(b"hello world", "en")]);
        // Every truncation and every single flipped byte.
        for n in 0..rec.len() {
            assert!(
                decode(Bytes::copy_from_slice(&rec[..n])).is_err(),
                "cut at {n}"
            );
            let mut bad = rec.clone();
            bad[n] ^= 0x40;
            assert!(decode(Bytes::from(bad)).is_err(), "flip at {n}");
        }
        // A record whose checksum matches but whose fields lie fails on its fields.
        let mut lying = rec.clone();
        lying[16 + 2..16 + 6].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&lying[12..]);
        lying[4..12].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(
            decode(Bytes::from(lying)),
            Err(CodecError::Invalid(_))
        ));
    }

    #[test]
    fn the_key_hash_is_stable_and_covers_the_site() {
        let k = key();
        assert_eq!(key_hash(&k), key_hash(&k.clone()));
        assert_ne!(key_hash(&k), key_hash(&k.clone().in_site(4)));
        assert_eq!(key_hex(&k).len(), 32);
    }
}

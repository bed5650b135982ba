//! The header fields of a stored response, packed into bytes, and with a small body in
//! the same allocation ([`StoredHeaders::with_body`]).
//!
//! At a million cached objects the bookkeeping per object is what decides memory: a
//! `HeaderName` is 32 bytes and a `HeaderValue` 40, so the 4 to 10 fields of a page kept
//! as `http` types cost 300 to 700 bytes beside their values, in several allocations.
//! Packed, a field costs its value's bytes and 3 bytes, with the name as a one-byte
//! index into the standard names (a name outside them, rare, is kept as a `HeaderName`
//! beside the bytes, so that a hit never allocates one). A hit builds the `HeaderMap`
//! hyper needs from the bytes: each value is a slice of the one shared buffer (a
//! reference count, as cloning a `HeaderValue` was).

use bytes::{BufMut, Bytes};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::thin::ThinSlice;

/// Bodies up to this size share one allocation with their headers: the allocator's
/// size classes (jemalloc: 1,024, 1,280, 1,536, ... bytes) leave room after most bodies
/// that the headers fill for free. Larger bodies are kept as they came.
pub const INLINE_BODY_MAX: usize = 16 * 1024;

/// Names stored as their index here; any other is a custom name.
static STANDARD: [HeaderName; 79] = [
    header::ACCEPT,
    header::ACCEPT_CHARSET,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::ACCEPT_RANGES,
    header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    header::ACCESS_CONTROL_ALLOW_HEADERS,
    header::ACCESS_CONTROL_ALLOW_METHODS,
    header::ACCESS_CONTROL_ALLOW_ORIGIN,
    header::ACCESS_CONTROL_EXPOSE_HEADERS,
    header::ACCESS_CONTROL_MAX_AGE,
    header::ACCESS_CONTROL_REQUEST_HEADERS,
    header::ACCESS_CONTROL_REQUEST_METHOD,
    header::AGE,
    header::ALLOW,
    header::ALT_SVC,
    header::AUTHORIZATION,
    header::CACHE_CONTROL,
    header::CACHE_STATUS,
    header::CDN_CACHE_CONTROL,
    header::CONNECTION,
    header::CONTENT_DISPOSITION,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LENGTH,
    header::CONTENT_LOCATION,
    header::CONTENT_RANGE,
    header::CONTENT_SECURITY_POLICY,
    header::CONTENT_SECURITY_POLICY_REPORT_ONLY,
    header::CONTENT_TYPE,
    header::COOKIE,
    header::DNT,
    header::DATE,
    header::ETAG,
    header::EXPECT,
    header::EXPIRES,
    header::FORWARDED,
    header::FROM,
    header::HOST,
    header::IF_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_NONE_MATCH,
    header::IF_RANGE,
    header::IF_UNMODIFIED_SINCE,
    header::LAST_MODIFIED,
    header::LINK,
    header::LOCATION,
    header::MAX_FORWARDS,
    header::ORIGIN,
    header::PRAGMA,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::PUBLIC_KEY_PINS,
    header::PUBLIC_KEY_PINS_REPORT_ONLY,
    header::RANGE,
    header::REFERER,
    header::REFERRER_POLICY,
    header::REFRESH,
    header::RETRY_AFTER,
    header::SEC_WEBSOCKET_ACCEPT,
    header::SEC_WEBSOCKET_EXTENSIONS,
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_PROTOCOL,
    header::SEC_WEBSOCKET_VERSION,
    header::SERVER,
    header::SET_COOKIE,
    header::STRICT_TRANSPORT_SECURITY,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::USER_AGENT,
    header::UPGRADE,
    header::UPGRADE_INSECURE_REQUESTS,
    header::VARY,
    header::VIA,
    header::WARNING,
    header::WWW_AUTHENTICATE,
    header::X_CONTENT_TYPE_OPTIONS,
    header::X_FRAME_OPTIONS,
];

/// The name byte of a field whose name is the next of `StoredHeaders::custom`.
const CUSTOM: u8 = u8::MAX;
/// The name byte of a field interned for the process (interned.rs): its 2-byte index
/// follows, and nothing else.
const INTERNED: u8 = u8::MAX - 1;
/// Flag byte: the value was marked sensitive.
const SENSITIVE: u8 = 1;
/// A length byte of this value: the length follows as a u32 (little-endian).
const LONG: u8 = u8::MAX;

/// A number as a header value (`Age`, `Content-Length` of a hit), in one allocation
/// (`HeaderValue::from(u64)` takes two: a buffer, then its sharing) and none for a single
/// digit.
pub fn decimal(n: u64) -> HeaderValue {
    const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    if let Some(d) = usize::try_from(n).ok().and_then(|i| DIGITS.get(i)) {
        return HeaderValue::from_static(d);
    }
    let mut digits = itoa::Buffer::new();
    // Digits are always a valid value; the fallback is never taken.
    HeaderValue::from_maybe_shared(Bytes::copy_from_slice(digits.format(n).as_bytes()))
        .unwrap_or_else(|_| HeaderValue::from(n))
}

fn standard_index(name: &HeaderName) -> Option<u8> {
    STANDARD
        .iter()
        .position(|n| n == name)
        .and_then(|i| u8::try_from(i).ok())
}

/// The header fields of a stored response, packed: per field a name byte (an index into
/// the standard names, or "the next custom name"), a flag byte and the value's length,
/// then its bytes; names outside the standard ones in a list of their own.
///
/// The fields are `buf[start..end]`. A stored entry's buffer holds more around them
/// ([`StoredHeaders::pack`]): its fixed facts before, its body after, in one
/// allocation (entry.rs).
#[derive(Debug, Clone, Default)]
pub struct StoredHeaders {
    buf: Bytes,
    /// The names that are not standard, in the order their fields come (none: no
    /// allocation).
    custom: ThinSlice<HeaderName>,
    start: u32,
    end: u32,
}

impl PartialEq for StoredHeaders {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for StoredHeaders {}

/// How each field of a map is stored: interned (its index) or inline.
fn plan(headers: &HeaderMap) -> Vec<Option<u16>> {
    let mut interner = crate::interned::Interner::lock();
    headers.iter().map(|(n, v)| interner.intern(n, v)).collect()
}

/// Bytes a field takes inline: name byte, flag byte, length, value.
fn inline_len(value: &HeaderValue) -> usize {
    3 + value.len()
        + if value.len() >= usize::from(LONG) {
            4
        } else {
            0
        }
}

/// Bytes needed to pack `headers` as `plan` says.
fn packed_len(headers: &HeaderMap, plan: &[Option<u16>]) -> usize {
    headers
        .values()
        .zip(plan)
        .map(|(v, p)| if p.is_some() { 3 } else { inline_len(v) })
        .sum()
}

/// Appends `headers` to `out` as packed fields, as `plan` says; returns the custom names.
fn pack(headers: &HeaderMap, plan: &[Option<u16>], out: &mut Vec<u8>) -> ThinSlice<HeaderName> {
    let mut custom = Vec::new();
    for ((name, value), interned) in headers.iter().zip(plan) {
        if let Some(i) = interned {
            out.push(INTERNED);
            out.extend_from_slice(&i.to_le_bytes());
            continue;
        }
        let Ok(len) = u32::try_from(value.len()) else {
            // Beyond 4 GiB a value never got through hyper's header limits; dropped.
            continue;
        };
        let code = standard_index(name).unwrap_or_else(|| {
            custom.push(name.clone());
            CUSTOM
        });
        out.push(code);
        out.push(if value.is_sensitive() { SENSITIVE } else { 0 });
        match u8::try_from(len) {
            Ok(short) if short < LONG => out.push(short),
            _ => {
                out.push(LONG);
                out.put_u32_le(len);
            }
        }
        out.extend_from_slice(value.as_bytes());
    }
    custom.into()
}

impl StoredHeaders {
    pub fn new(headers: &HeaderMap) -> StoredHeaders {
        StoredHeaders::pack(&[], headers, Bytes::new()).0
    }

    /// `prefix`, the packed `headers` and a body of up to [`INLINE_BODY_MAX`] bytes in
    /// one allocation (read back with [`StoredHeaders::prefix`] and
    /// [`StoredHeaders::tail`]). A larger body is not copied: it is returned.
    pub fn pack(prefix: &[u8], headers: &HeaderMap, body: Bytes) -> (StoredHeaders, Option<Bytes>) {
        let inline = body.len() <= INLINE_BODY_MAX;
        let plan = plan(headers);
        // Exactly the capacity needed: the buffer is kept as allocated.
        let mut out = Vec::with_capacity(
            prefix.len() + packed_len(headers, &plan) + if inline { body.len() } else { 0 },
        );
        out.extend_from_slice(prefix);
        let custom = pack(headers, &plan, &mut out);
        // Offsets beyond u32 need headers beyond 4 GiB, which hyper never lets through.
        let start = u32::try_from(prefix.len()).unwrap_or(u32::MAX);
        let end = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let far = if inline {
            out.extend_from_slice(&body);
            None
        } else {
            Some(body)
        };
        let stored = StoredHeaders {
            buf: Bytes::from(out),
            custom,
            start,
            end,
        };
        (stored, far)
    }

    /// What [`StoredHeaders::pack`] put before the fields.
    pub fn prefix(&self) -> &[u8] {
        self.buf.get(..self.start as usize).unwrap_or_default()
    }

    /// What [`StoredHeaders::pack`] put after the fields (the body), sharing the buffer.
    pub fn tail(&self) -> Bytes {
        if self.end as usize >= self.buf.len() {
            return Bytes::new();
        }
        self.buf.slice(self.end as usize..)
    }

    /// The bytes of [`StoredHeaders::tail`], without taking a reference.
    pub fn tail_bytes(&self) -> &[u8] {
        self.buf.get(self.end as usize..).unwrap_or_default()
    }

    /// The packed fields.
    fn packed(&self) -> &[u8] {
        self.buf
            .get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }

    /// The fields as a `HeaderMap`, in their order (repeated fields stay repeated).
    pub fn to_map(&self) -> HeaderMap {
        // Room for what a hit adds (Age, X-Cache, Via, Content-Length, ...) without
        // growing the map, which would take two more allocations and a rehash.
        let mut map = HeaderMap::with_capacity(self.len() + 8);
        for (n, v) in self.iter() {
            map.append(n.clone(), v);
        }
        map
    }

    /// The first value of `name`.
    pub fn get(&self, name: impl AsHeaderName) -> Option<HeaderValue> {
        let name = name.as_str_name();
        self.iter()
            .find(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    pub fn contains_key(&self, name: impl AsHeaderName) -> bool {
        let name = name.as_str_name();
        self.fields()
            .any(|f| f.name.as_str().eq_ignore_ascii_case(name))
    }

    /// The fields in their order: the name, and the value (a slice of the stored
    /// bytes, no copy).
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, HeaderValue)> + '_ {
        self.fields().filter_map(|f| match f.value {
            Value::Interned(v) => Some((f.name, v.clone())),
            Value::Inline(range) => {
                let at = self.start as usize;
                let value = HeaderValue::from_maybe_shared(
                    self.buf.slice(at + range.start..at + range.end),
                );
                // The bytes were a valid HeaderValue when stored; a field that no
                // longer parses is left out rather than served.
                let mut value = value.ok()?;
                value.set_sensitive(f.sensitive);
                Some((f.name, value))
            }
        })
    }

    pub fn len(&self) -> usize {
        self.fields().count()
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Bytes of the whole buffer: what [`StoredHeaders::pack`] put before, the packed
    /// fields, and the body after.
    pub fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    /// What the custom names cost beside the buffer.
    pub fn custom_size(&self) -> usize {
        self.custom
            .iter()
            .map(|n| n.as_str().len() + std::mem::size_of::<HeaderName>())
            .sum()
    }

    /// Bytes the packed fields take (their values, 3 bytes per field, 3 per interned
    /// field, the custom names).
    pub fn size(&self) -> usize {
        self.packed().len()
            + self
                .custom
                .iter()
                .map(|n| n.as_str().len() + std::mem::size_of::<HeaderName>())
                .sum::<usize>()
    }

    fn fields(&self) -> Fields<'_> {
        Fields {
            buf: self.packed(),
            at: 0,
            custom: self.custom.iter(),
        }
    }
}

/// One packed field: its name, its value, whether it is sensitive.
struct Field<'a> {
    name: &'a HeaderName,
    value: Value,
    sensitive: bool,
}

enum Value {
    /// Where its bytes are in the packed fields.
    Inline(std::ops::Range<usize>),
    Interned(&'static HeaderValue),
}

struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
    custom: std::slice::Iter<'a, HeaderName>,
}

impl<'a> Iterator for Fields<'a> {
    type Item = Field<'a>;

    fn next(&mut self) -> Option<Field<'a>> {
        let head = self.buf.get(self.at..self.at + 3)?;
        if head[0] == INTERNED {
            let (name, value) = crate::interned::get(u16::from_le_bytes([head[1], head[2]]))?;
            self.at += 3;
            return Some(Field {
                name,
                value: Value::Interned(value),
                sensitive: false,
            });
        }
        let (len, start) = if head[2] == LONG {
            let l = self.buf.get(self.at + 3..self.at + 7)?;
            (
                u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize,
                self.at + 7,
            )
        } else {
            (usize::from(head[2]), self.at + 3)
        };
        let end = start.checked_add(len).filter(|&e| e <= self.buf.len())?;
        let name = match head[0] {
            CUSTOM => self.custom.next()?,
            i => STANDARD.get(usize::from(i))?,
        };
        self.at = end;
        Some(Field {
            name,
            value: Value::Inline(start..end),
            sensitive: head[1] & SENSITIVE != 0,
        })
    }
}

/// Header names as `get` takes them: `http::header::ETAG` or `"etag"`.
pub trait AsHeaderName {
    fn as_str_name(&self) -> &str;
}

impl AsHeaderName for HeaderName {
    fn as_str_name(&self) -> &str {
        self.as_str()
    }
}

impl AsHeaderName for &HeaderName {
    fn as_str_name(&self) -> &str {
        self.as_str()
    }
}

impl AsHeaderName for &str {
    fn as_str_name(&self) -> &str {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.append("x-a", HeaderValue::from_static("1"));
        h.append("x-a", HeaderValue::from_static("2"));
        h.append("etag", HeaderValue::from_static("\"e\""));
        h.append("x-b", HeaderValue::from_static(""));
        let mut secret = HeaderValue::from_static("s");
        secret.set_sensitive(true);
        h.append("x-secret", secret);
        h
    }

    #[test]
    fn stored_headers_keep_every_value_in_order() {
        let h = sample();
        let c = StoredHeaders::new(&h);
        assert_eq!(c.to_map(), h);
        assert_eq!(c.len(), 5);
        assert_eq!(c.get(http::header::ETAG).unwrap(), "\"e\"");
        assert_eq!(c.get("X-A").unwrap(), "1");
        assert_eq!(c.get("x-b").unwrap(), "");
        assert!(c.get("x-c").is_none());
        assert!(c.contains_key("x-secret"));
        assert!(c.get("x-secret").unwrap().is_sensitive());
        let names: Vec<_> = c.iter().map(|(n, _)| n.as_str().to_string()).collect();
        assert_eq!(names, ["x-a", "x-a", "etag", "x-b", "x-secret"]);
    }

    #[test]
    fn pack_shares_one_buffer_and_keeps_all_three() {
        let h = sample();
        let body = Bytes::from_static(b"<p>hello</p>");
        let (c, far) = StoredHeaders::pack(b"meta", &h, body.clone());
        assert!(far.is_none());
        assert_eq!(c.tail(), body);
        assert_eq!(c.tail_bytes(), &body[..]);
        assert_eq!(c.prefix(), b"meta");
        assert_eq!(c.to_map(), h);
        assert_eq!(c, StoredHeaders::new(&h));
        assert_eq!(c.size(), StoredHeaders::new(&h).size());
        // A large body stays as it came.
        let large = Bytes::from(vec![7u8; INLINE_BODY_MAX + 1]);
        let (c, far) = StoredHeaders::pack(b"", &h, large.clone());
        assert_eq!(far.map(|b| b.as_ptr()), Some(large.as_ptr()));
        assert!(c.tail().is_empty());
        assert_eq!(c.to_map(), h);
    }

    /// A site's constant fields are interned from the second response that carries
    /// them: the third stores them in 3 bytes each, and every response reads back as it
    /// came, in order, per-response fields and long values inline.
    #[test]
    fn fields_shared_by_responses_are_interned_and_read_back_the_same() {
        let csp = "default-src 'self'; ".repeat(20);
        let page = |etag: &str| {
            let mut h = HeaderMap::new();
            h.append("server", HeaderValue::from_static("nginx/1.22.1"));
            h.append("etag", HeaderValue::from_str(etag).unwrap());
            h.append(
                "content-security-policy",
                HeaderValue::from_str(&csp).unwrap(),
            );
            h.append("x-powered-by-test", HeaderValue::from_static("PHP/8.2.29"));
            h
        };
        let first = StoredHeaders::new(&page("\"a\""));
        let _second = StoredHeaders::new(&page("\"b\""));
        let third = StoredHeaders::new(&page("\"c\""));
        assert_eq!(first.to_map(), page("\"a\""));
        assert_eq!(third.to_map(), page("\"c\""));
        assert_eq!(third.get("x-powered-by-test").unwrap(), "PHP/8.2.29");
        let names: Vec<_> = third.iter().map(|(n, _)| n.as_str().to_string()).collect();
        assert_eq!(
            names,
            [
                "server",
                "etag",
                "content-security-policy",
                "x-powered-by-test"
            ]
        );
        // Inline: the ETag (3 + 3 bytes); interned: the other three, 3 bytes each.
        assert_eq!(third.size(), 6 + 3 * 3, "{third:?}");
        assert!(first.size() > csp.len(), "the first is stored whole");
    }

    #[test]
    fn a_value_of_255_bytes_or_more_keeps_its_length() {
        for n in [254, 255, 256, 70_000] {
            let mut h = HeaderMap::new();
            let v = "v".repeat(n);
            h.append("x-long", HeaderValue::from_str(&v).unwrap());
            h.append("etag", HeaderValue::from_static("\"e\""));
            let c = StoredHeaders::new(&h);
            assert_eq!(c.to_map(), h, "{n}");
        }
    }

    #[test]
    fn empty_and_default_are_empty() {
        assert!(StoredHeaders::default().is_empty());
        assert_eq!(StoredHeaders::new(&HeaderMap::new()).len(), 0);
        assert!(StoredHeaders::default().to_map().is_empty());
    }

    #[test]
    fn decimals_are_their_digits() {
        for n in [0, 7, 9, 10, 99, 100, 12_345, 2_147_483_648, u64::MAX] {
            assert_eq!(decimal(n), HeaderValue::from(n), "{n}");
        }
    }
}

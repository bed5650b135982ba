//! Range requests answered from a stored full response (RFC 9110 §14, §13.1.5; RFC 9111
//! §3.3–3.4 and §4.3.2). Pure: the request's `Range` and `If-Range`, the header section
//! and length of the body the client would get in a 200, in, what to send out.
//!
//! - Only a GET of a stored 200 has ranges (§14.2; HEAD ignores `Range`); the caller
//!   asks for nothing else.
//! - An invalid `Range` (§14.1.1: malformed, `last < first`, another unit) is ignored:
//!   the whole 200, always a correct answer.
//! - `If-Range` (§13.1.5, evaluated after the other preconditions, §13.2.2 step 5): an
//!   entity-tag must match the representation's `ETag` by strong comparison; a date must
//!   be exactly its `Last-Modified` and that date a strong validator (§8.8.2.2: the
//!   stored `Date` at least one second later), and the bytes must be the origin's (a
//!   body levee compressed itself has no strong validator: a compressor at another level
//!   makes other bytes of the same content under the same dates). Otherwise the whole 200.
//! - No satisfiable range (§14.1.2) → 416 with `Content-Range: bytes */LEN`
//!   (§15.5.17). An empty representation has no byte to point at: it is sent whole.
//! - Several ranges (§14.6, multipart/byteranges), bounded against amplification
//!   (§14.2 allows ignoring or coalescing): a `Range` with more than [`MAX_SPECS`]
//!   range-specs is ignored; satisfiable ranges that overlap or lie closer than one part's
//!   overhead ([`COALESCE_GAP`]) are coalesced, so the parts never repeat a byte and
//!   their total is at most the body plus one small header per part. Parts keep the
//!   request's order unless some were coalesced, then they are in ascending order
//!   (§15.3.7.2: coalescing regardless of order). Ranges that coalesce into one make a
//!   single-part 206.

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, DATE, ETAG, IF_RANGE, LAST_MODIFIED, RANGE};

use crate::conditional::{date, parse_tags};

/// More range-specs than this in one `Range` and levee sends the whole representation:
/// real clients (players, PDF readers, download managers) ask for a handful, and it
/// bounds the work one request header can ask for.
pub const MAX_SPECS: usize = 100;

/// Ranges separated by fewer bytes than this are sent as one part: about what a part's
/// own header costs (boundary line, Content-Type, Content-Range).
pub const COALESCE_GAP: u64 = 80;

/// Bytes `start..=end` of the representation (as `Content-Range` writes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// Its length in bytes (never zero).
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never: a range has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `bytes START-END/TOTAL`, the value of its `Content-Range`.
    pub fn content_range(&self, total: u64) -> String {
        format!("bytes {}-{}/{total}", self.start, self.end)
    }
}

/// What to answer a GET that may carry `Range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranges {
    /// The whole representation (200): no `Range`, an invalid or ignored one, or an
    /// `If-Range` that does not hold.
    Full,
    /// 206 with one part.
    One(ByteRange),
    /// 206 multipart/byteranges: two or more parts, disjoint and not adjacent, in the
    /// order to send them.
    Many(Vec<ByteRange>),
    /// 416 with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

/// One range-spec of a `Range` field (RFC 9110 §14.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// `first-` or `first-last` (`last >= first`).
    From { first: u64, last: Option<u64> },
    /// `-n`: the last n bytes.
    Suffix(u64),
}

/// The representation a range would be cut from.
#[derive(Debug, Clone, Copy)]
pub struct Representation<'a> {
    /// The header section the client would get with the 200 (its coding's `ETag`).
    pub headers: &'a HeaderMap,
    /// The length of the body in that coding.
    pub len: u64,
    /// Whether its bytes are the origin's (or a lossless decoding of them), so that its
    /// `Last-Modified` can be a strong validator. False for a coding levee made.
    pub origin_bytes: bool,
}

/// Decides what a GET with these request headers gets from a stored 200 (see the module
/// documentation). Cheap when there is no `Range`: one lookup.
pub fn decide(request: &HeaderMap, rep: Representation<'_>) -> Ranges {
    let mut lines = request.get_all(RANGE).iter();
    // Range is not a list field: two of them are malformed, and malformed is ignored.
    let (Some(range), None) = (lines.next(), lines.next()) else {
        return Ranges::Full;
    };
    let Some(specs) = parse(range) else {
        return Ranges::Full;
    };
    if let Some(if_range) = request.get(IF_RANGE) {
        if !if_range_holds(if_range, rep) {
            return Ranges::Full;
        }
    }
    if rep.len == 0 {
        return Ranges::Full;
    }
    resolve(&specs, rep.len)
}

/// The range-specs of a `bytes=` value; `None` when the value is invalid (§14.1.1), of
/// another unit, or has more than [`MAX_SPECS`] specs.
pub fn parse(value: &HeaderValue) -> Option<Vec<Spec>> {
    let value = value.to_str().ok()?;
    let (unit, set) = value.trim().split_once('=')?;
    // `range-unit "=" range-set`: no space before the `=`; the list may have spaces.
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    // `1#range-spec`: empty list elements are allowed, at least one spec is required.
    for spec in set.split(',').map(|s| s.trim_matches([' ', '\t'])) {
        if spec.is_empty() {
            continue;
        }
        if specs.len() == MAX_SPECS {
            return None;
        }
        specs.push(spec_of(spec)?);
    }
    (!specs.is_empty()).then_some(specs)
}

fn spec_of(spec: &str) -> Option<Spec> {
    let (first, last) = spec.split_once('-')?;
    if first.is_empty() {
        return Some(Spec::Suffix(number(last)?));
    }
    let first = number(first)?;
    if last.is_empty() {
        return Some(Spec::From { first, last: None });
    }
    let last = number(last)?;
    // §14.1.1: last < first makes the whole field invalid.
    (last >= first).then_some(Spec::From {
        first,
        last: Some(last),
    })
}

/// Decimal digits only (no sign, no spaces). Too large saturates: `0-99999999999999999999`
/// still means "to the end", a first-pos that large is beyond any body.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

/// The satisfiable ranges of `specs` over `len` bytes (`len > 0`), coalesced (§14.1.2,
/// §15.3.7.2).
pub fn resolve(specs: &[Spec], len: u64) -> Ranges {
    let asked: Vec<ByteRange> = specs
        .iter()
        .filter_map(|spec| match *spec {
            Spec::From { first, .. } if first >= len => None,
            Spec::From { first, last } => Some(ByteRange {
                start: first,
                end: last.map_or(len - 1, |l| l.min(len - 1)),
            }),
            // §14.1.2: a suffix of zero bytes is unsatisfiable; a longer one than the
            // body is the whole body.
            Spec::Suffix(0) => None,
            Spec::Suffix(n) => Some(ByteRange {
                start: len.saturating_sub(n),
                end: len - 1,
            }),
        })
        .collect();
    match asked.as_slice() {
        [] => return Ranges::Unsatisfiable,
        [one] => return Ranges::One(*one),
        _ => {}
    }
    let mut sorted = asked.clone();
    sorted.sort_unstable_by_key(|r| (r.start, r.end));
    let mut merged: Vec<ByteRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(COALESCE_GAP) => {
                last.end = last.end.max(r.end);
            }
            _ => merged.push(r),
        }
    }
    match merged.len() {
        1 => Ranges::One(merged[0]),
        // Nothing coalesced: the parts in the order they were asked for (§14.6).
        n if n == asked.len() => Ranges::Many(asked),
        _ => Ranges::Many(merged),
    }
}

/// RFC 9110 §13.1.5: whether `If-Range` lets the range request be evaluated.
fn if_range_holds(if_range: &HeaderValue, rep: Representation<'_>) -> bool {
    let value = if_range.as_bytes().trim_ascii();
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        // An entity-tag: strong comparison, so a weak one never matches.
        let Some(tag) = value
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
        else {
            return false;
        };
        if tag.contains(&b'"') {
            return false;
        }
        let current = rep
            .headers
            .get(ETAG)
            .and_then(|e| parse_tags(e.as_bytes()).next());
        return matches!(current, Some((false, current)) if current == tag);
    }
    let (Some(asked), Some(modified)) =
        (date(Some(if_range)), date(rep.headers.get(LAST_MODIFIED)))
    else {
        return false;
    };
    // §8.8.2.2: a date is a strong validator when the response was generated at least
    // a second after it.
    let strong =
        date(rep.headers.get(DATE)).is_some_and(|d| d >= modified + Duration::from_secs(1));
    rep.origin_bytes && strong && asked == modified
}

#[cfg(test)]
mod tests;

//! The examples and rules of RFC 9110 §14 and §13.1.5, one test each.

use super::*;

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LM_PLUS_1: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

fn headers(pairs: &[(http::header::HeaderName, &str)]) -> HeaderMap {
    let mut m = HeaderMap::new();
    for (k, v) in pairs {
        m.append(k.clone(), HeaderValue::from_str(v).unwrap());
    }
    m
}

/// A stored 200 of `len` bytes with a strong ETag and a strong Last-Modified.
fn stored() -> HeaderMap {
    headers(&[(ETAG, "\"v1\""), (LAST_MODIFIED, LM), (DATE, LM_PLUS_1)])
}

fn rep(h: &HeaderMap, len: u64) -> Representation<'_> {
    Representation {
        headers: h,
        len,
        origin_bytes: true,
    }
}

fn d(range: &str, len: u64) -> Ranges {
    decide(&headers(&[(RANGE, range)]), rep(&stored(), len))
}

fn with_if_range(range: &str, if_range: &str, h: &HeaderMap, origin_bytes: bool) -> Ranges {
    let req = headers(&[(RANGE, range), (IF_RANGE, if_range)]);
    let mut r = rep(h, 100);
    r.origin_bytes = origin_bytes;
    decide(&req, r)
}

fn one(start: u64, end: u64) -> Ranges {
    Ranges::One(ByteRange { start, end })
}

fn many(parts: &[(u64, u64)]) -> Ranges {
    Ranges::Many(
        parts
            .iter()
            .map(|&(start, end)| ByteRange { start, end })
            .collect(),
    )
}

#[test]
fn no_range_is_the_whole_response() {
    assert_eq!(decide(&HeaderMap::new(), rep(&stored(), 100)), Ranges::Full);
}

/// §14.1.2's examples, for a representation of 10000 bytes.
#[test]
fn the_examples_of_section_14_1_2() {
    assert_eq!(d("bytes=0-499", 10000), one(0, 499));
    assert_eq!(d("bytes=500-999", 10000), one(500, 999));
    assert_eq!(d("bytes=-500", 10000), one(9500, 9999));
    assert_eq!(d("bytes=9500-", 10000), one(9500, 9999));
    assert_eq!(d("bytes=0-0,-1", 10000), many(&[(0, 0), (9999, 9999)]));
    // "Other valid (but not canonical) specifications of the second 500 bytes".
    assert_eq!(d("bytes=500-600,601-999", 10000), one(500, 999));
    assert_eq!(d("bytes=500-700,601-999", 10000), one(500, 999));
}

#[test]
fn last_positions_past_the_end_and_long_suffixes_are_clipped() {
    assert_eq!(d("bytes=90-1000", 100), one(90, 99));
    assert_eq!(d("bytes=-1000", 100), one(0, 99));
    assert_eq!(d("bytes=0-99999999999999999999999", 100), one(0, 99));
    assert_eq!(d("Bytes= 5-5 ,", 100), one(5, 5));
}

/// §14.1.2: a first-pos at or past the end, or a zero suffix, is unsatisfiable; one
/// satisfiable range is enough for a 206.
#[test]
fn unsatisfiable_ranges() {
    for r in ["bytes=100-", "bytes=100-200", "bytes=-0", "bytes=100-,-0"] {
        assert_eq!(d(r, 100), Ranges::Unsatisfiable, "{r}");
    }
    assert_eq!(
        d("bytes=99999999999999999999999-", 100),
        Ranges::Unsatisfiable
    );
    assert_eq!(d("bytes=100-,0-1", 100), one(0, 1));
    // An empty representation is sent whole (there is no byte to point at).
    assert_eq!(d("bytes=0-1", 0), Ranges::Full);
}

/// §14.1.1: an invalid ranges-specifier is ignored (§14.2), as is another unit.
#[test]
fn invalid_ranges_are_ignored() {
    for r in [
        "bytes=5-1",
        "bytes=0-1,5-1",
        "bytes=a-b",
        "bytes=-",
        "bytes=",
        "bytes=,",
        "bytes=1",
        "bytes=+1-2",
        "bytes=1 -2",
        "bytes=--1",
        "items=0-1",
        "0-1",
        "bytes 0-1",
        "bytes =0-1",
    ] {
        assert_eq!(d(r, 100), Ranges::Full, "{r}");
    }
    // Range is a singleton field: two lines are malformed.
    let mut req = headers(&[(RANGE, "bytes=0-1")]);
    req.append(RANGE, HeaderValue::from_static("bytes=2-3"));
    assert_eq!(decide(&req, rep(&stored(), 100)), Ranges::Full);
}

#[test]
fn several_ranges_keep_their_order_unless_coalesced() {
    assert_eq!(d("bytes=500-599,0-99", 1000), many(&[(500, 599), (0, 99)]));
    assert_eq!(
        d("bytes=0-99, 200-299, -100", 1000),
        many(&[(0, 99), (200, 299), (900, 999)])
    );
    // Overlapping, repeated and nearby ranges become one part each, in ascending order.
    assert_eq!(
        d("bytes=500-599,0-99,0-99,50-150,550-", 1000),
        many(&[(0, 150), (500, 999)])
    );
    // A gap smaller than a part's overhead is sent rather than a new part.
    assert_eq!(d("bytes=0-9,50-59", 1000), one(0, 59));
    assert_eq!(d("bytes=0-9,200-209", 1000), many(&[(0, 9), (200, 209)]));
}

/// §14.2: a server may ignore a Range that asks for too much; the parts never repeat a
/// byte, so a response is at most the body plus one small header per part.
#[test]
fn amplification_is_bounded() {
    let overlapping = format!("bytes={}", vec!["0-"; MAX_SPECS].join(","));
    assert_eq!(d(&overlapping, 1000), one(0, 999));
    let too_many = format!("bytes={}", vec!["0-0"; MAX_SPECS + 1].join(","));
    assert_eq!(d(&too_many, 1000), Ranges::Full);
    let spread: Vec<String> = (0..MAX_SPECS as u64)
        .map(|i| format!("{}-{}", i * 1000, i * 1000))
        .collect();
    match d(&format!("bytes={}", spread.join(",")), 1_000_000) {
        Ranges::Many(parts) => assert_eq!(parts.len(), MAX_SPECS),
        other => panic!("{other:?}"),
    }
}

/// §13.1.5: an entity-tag in If-Range matches by strong comparison only.
#[test]
fn if_range_with_an_entity_tag() {
    let h = stored();
    assert_eq!(with_if_range("bytes=0-9", "\"v1\"", &h, true), one(0, 9));
    assert_eq!(with_if_range("bytes=0-9", "\"v2\"", &h, true), Ranges::Full);
    assert_eq!(
        with_if_range("bytes=0-9", "W/\"v1\"", &h, true),
        Ranges::Full
    );
    assert_eq!(with_if_range("bytes=0-9", "\"v1", &h, true), Ranges::Full);
    // A weak stored ETag (levee's coded forms) never matches.
    let weak = headers(&[(ETAG, "W/\"v1\""), (LAST_MODIFIED, LM), (DATE, LM_PLUS_1)]);
    assert_eq!(
        with_if_range("bytes=0-9", "\"v1\"", &weak, true),
        Ranges::Full
    );
    // If-Range is evaluated before satisfiability: a changed representation is sent
    // whole, not 416; and before an invalid Range is ignored anyway.
    assert_eq!(
        with_if_range("bytes=500-", "\"v2\"", &h, true),
        Ranges::Full
    );
    assert_eq!(
        with_if_range("bytes=500-", "\"v1\"", &h, true),
        Ranges::Unsatisfiable
    );
    assert_eq!(with_if_range("bytes=9-0", "\"v1\"", &h, true), Ranges::Full);
}

/// §13.1.5 and §8.8.2.2: a date matches exactly a strong Last-Modified (the stored Date
/// at least a second later), of bytes that are the origin's.
#[test]
fn if_range_with_a_date() {
    let h = stored();
    assert_eq!(with_if_range("bytes=0-9", LM, &h, true), one(0, 9));
    assert_eq!(
        with_if_range("bytes=0-9", LM_PLUS_1, &h, true),
        Ranges::Full
    );
    assert_eq!(
        with_if_range("bytes=0-9", "Sat, 05 Nov 1994 08:49:37 GMT", &h, true),
        Ranges::Full
    );
    // Date equal to Last-Modified: the representation may have changed within that
    // second, the date is weak.
    let weak_date = headers(&[(LAST_MODIFIED, LM), (DATE, LM)]);
    assert_eq!(
        with_if_range("bytes=0-9", LM, &weak_date, true),
        Ranges::Full
    );
    // No Last-Modified, or a coding levee made.
    let no_lm = headers(&[(DATE, LM_PLUS_1)]);
    assert_eq!(with_if_range("bytes=0-9", LM, &no_lm, true), Ranges::Full);
    assert_eq!(with_if_range("bytes=0-9", LM, &h, false), Ranges::Full);
    assert_eq!(with_if_range("bytes=0-9", "junk", &h, true), Ranges::Full);
}

#[test]
fn content_range_values() {
    let r = ByteRange { start: 0, end: 9 };
    assert_eq!(r.len(), 10);
    assert_eq!(r.content_range(100), "bytes 0-9/100");
}

/// What the `cache_range` fuzz target checks, over many generated `Range` values: parts
/// inside the body, disjoint and apart, never more than `MAX_SPECS`.
#[test]
fn generated_ranges_keep_the_invariants() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..20_000 {
        let len = next(3000);
        let specs: Vec<String> = (0..1 + next(12))
            .map(|_| {
                let (a, b) = (next(3200), next(3200));
                match next(4) {
                    0 => format!("{a}-"),
                    1 => format!("-{a}"),
                    2 => format!("{}-{}", a.min(b), a.max(b)),
                    _ => format!("{a}-{}", a + next(100)),
                }
            })
            .collect();
        let value = format!("bytes={}", specs.join(","));
        match d(&value, len) {
            Ranges::One(r) => assert!(r.start <= r.end && r.end < len, "{value} of {len}"),
            Ranges::Many(parts) => {
                assert!(parts.len() >= 2 && parts.len() <= MAX_SPECS, "{value}");
                let mut sorted = parts.clone();
                sorted.sort_by_key(|r| r.start);
                for r in &sorted {
                    assert!(r.start <= r.end && r.end < len, "{value} of {len}");
                }
                for w in sorted.windows(2) {
                    assert!(w[0].end + COALESCE_GAP < w[1].start, "{value}: {parts:?}");
                }
            }
            Ranges::Full => assert_eq!(len, 0, "{value}"),
            Ranges::Unsatisfiable => assert!(len > 0, "{value}"),
        }
    }
}

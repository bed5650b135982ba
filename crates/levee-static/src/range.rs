//! Byte ranges (RFC 9110 §14).
//!
//! One range gets a 206. A request for several ranges gets the whole file (200): that is
//! always a correct answer (§14.2 lets a server ignore Range), the players and download
//! managers that resume or seek ask for one range, and it leaves no room for the
//! many-small-ranges amplification that multipart/byteranges invites.

use http::header::{HeaderMap, IF_RANGE, RANGE};

use crate::conditional::{if_range_matches, Validators};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No usable Range, or If-Range no longer matches: 200 with everything.
    Full,
    /// 206 for bytes `start..=end`.
    Partial { start: u64, end: u64 },
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Decides what to send for a GET of a file of `len` bytes. Only GET has ranges (§14.2);
/// the caller does not ask for other methods.
pub(crate) fn decide(request: &HeaderMap, len: u64, validators: Validators<'_>) -> Decision {
    let mut lines = request.get_all(RANGE).iter();
    // Range is not a list field: two of them are malformed, and malformed is ignored.
    let (Some(range), None) = (lines.next(), lines.next()) else {
        return Decision::Full;
    };
    let Ok(range) = range.to_str() else {
        return Decision::Full;
    };
    if let Some(if_range) = request.get(IF_RANGE) {
        let matches = if_range
            .to_str()
            .is_ok_and(|v| if_range_matches(v, validators));
        if !matches {
            return Decision::Full;
        }
    }
    // An empty file has no byte to point at; its whole (empty) self is the answer.
    if len == 0 {
        return Decision::Full;
    }
    let Some(spec) = single_spec(range) else {
        return Decision::Full;
    };
    match spec {
        Spec::From { first, last } => {
            if first >= len {
                Decision::Unsatisfiable
            } else {
                Decision::Partial {
                    start: first,
                    end: last.map_or(len - 1, |l| l.min(len - 1)),
                }
            }
        }
        // §14.1.3: a suffix of zero bytes is unsatisfiable; a longer one than the file
        // is the whole file.
        Spec::Suffix(0) => Decision::Unsatisfiable,
        Spec::Suffix(n) => Decision::Partial {
            start: len.saturating_sub(n),
            end: len - 1,
        },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    /// `first-` or `first-last`.
    From { first: u64, last: Option<u64> },
    /// `-n`: the last n bytes.
    Suffix(u64),
}

/// The one range-spec of a `bytes=` value; `None` if the value is malformed, of another
/// unit, or asks for several ranges.
fn single_spec(value: &str) -> Option<Spec> {
    let (unit, set) = value.trim().split_once('=')?;
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = set
        .split(',')
        .map(|s| s.trim_matches([' ', '\t']))
        .filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return None;
    };
    let (first, last) = spec.split_once('-')?;
    if first.is_empty() {
        return Some(Spec::Suffix(number(last)?));
    }
    let first = number(first)?;
    let last = if last.is_empty() {
        None
    } else {
        let last = number(last)?;
        // §14.1.1: last < first makes the whole field invalid.
        if last < first {
            return None;
        }
        Some(last)
    };
    Some(Spec::From { first, last })
}

/// Decimal digits only (no sign, no spaces). Too large saturates: `bytes=0-99999999999999999999`
/// still means "to the end", a first-pos that large is beyond any file.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::time::{Duration, UNIX_EPOCH};

    fn v() -> Validators<'static> {
        Validators {
            etag: Some("1-64"),
            modified: Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        }
    }

    fn d(range: &str, if_range: Option<&str>, len: u64) -> Decision {
        let mut h = HeaderMap::new();
        h.insert(RANGE, HeaderValue::from_str(range).unwrap());
        if let Some(ir) = if_range {
            h.insert(IF_RANGE, HeaderValue::from_str(ir).unwrap());
        }
        decide(&h, len, v())
    }

    fn p(start: u64, end: u64) -> Decision {
        Decision::Partial { start, end }
    }

    #[test]
    fn each_form_of_a_single_range() {
        assert_eq!(d("bytes=0-9", None, 100), p(0, 9));
        assert_eq!(d("bytes=10-", None, 100), p(10, 99));
        assert_eq!(d("bytes=-10", None, 100), p(90, 99));
        assert_eq!(d("bytes=-1000", None, 100), p(0, 99));
        assert_eq!(d("bytes=90-1000", None, 100), p(90, 99));
        assert_eq!(d("Bytes= 5-5 ,", None, 100), p(5, 5));
        assert_eq!(d("bytes=0-99999999999999999999999", None, 100), p(0, 99));
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(d("bytes=100-", None, 100), Decision::Unsatisfiable);
        assert_eq!(d("bytes=100-200", None, 100), Decision::Unsatisfiable);
        assert_eq!(d("bytes=-0", None, 100), Decision::Unsatisfiable);
        assert_eq!(
            d("bytes=99999999999999999999999-", None, 100),
            Decision::Unsatisfiable
        );
    }

    #[test]
    fn malformed_other_units_and_several_ranges_send_everything() {
        for r in [
            "bytes=5-1",
            "bytes=a-b",
            "bytes=-",
            "bytes=",
            "bytes=1",
            "bytes=+1-2",
            "bytes=1 -2",
            "items=0-1",
            "0-1",
            "bytes=0-1,5-6",
            "bytes=0-0,-1",
        ] {
            assert_eq!(d(r, None, 100), Decision::Full, "{r}");
        }
        // An empty file: no range applies.
        assert_eq!(d("bytes=0-1", None, 0), Decision::Full);
    }

    #[test]
    fn if_range_falls_back_to_everything_when_the_file_changed() {
        assert_eq!(d("bytes=0-9", Some(r#""1-64""#), 100), p(0, 9));
        assert_eq!(d("bytes=0-9", Some(r#""2-64""#), 100), Decision::Full);
        assert_eq!(d("bytes=0-9", Some(r#"W/"1-64""#), 100), Decision::Full);
        let lm = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert_eq!(d("bytes=0-9", Some(&lm), 100), p(0, 9));
        let other = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_600_000_000));
        assert_eq!(d("bytes=0-9", Some(&other), 100), Decision::Full);
        // If-Range decides before satisfiability: a changed file is sent whole, not 416.
        assert_eq!(d("bytes=500-", Some(r#""2-64""#), 100), Decision::Full);
    }
}

//! `Cache-Control` parsing (RFC 9111 §5.2), for requests and responses alike.
//!
//! Parsing is forgiving in the safe direction: a directive that cannot be understood
//! never makes a response *more* cacheable. A malformed `max-age` is treated as
//! already stale (RFC 9111 §4.2.1: invalid freshness information means stale).

use std::borrow::Cow;

use http::header::{HeaderMap, CACHE_CONTROL, PRAGMA};

/// The largest delta-seconds levee keeps: RFC 9111 §1.2.2 lets a cache count any larger
/// value, or one that overflows, as 2^31 seconds (68 years), which keeps every later
/// calculation (ages, expiry instants) far from overflowing.
pub const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// The directives levee acts on. Durations are seconds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CacheControl {
    pub no_store: bool,
    pub no_cache: bool,
    pub private: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    /// RFC 9111 §5.2.2.3: store only if the status code is understood; then `no-store`
    /// may be ignored.
    pub must_understand: bool,
    pub only_if_cached: bool,
    pub max_age: Option<u64>,
    pub s_maxage: Option<u64>,
    /// Request only: `max-stale` with no value means any staleness (`u64::MAX`).
    pub max_stale: Option<u64>,
    pub min_fresh: Option<u64>,
    pub stale_while_revalidate: Option<u64>,
    pub stale_if_error: Option<u64>,
}

/// The argument of a directive (`name=argument`), as RFC 9111 §5.2 writes it:
/// `token / quoted-string`, with no whitespace around the `=`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg<'a> {
    Absent,
    Value(Cow<'a, str>),
    /// Present but not a token or quoted-string (`max-age= 5`, `max-age="5`).
    Invalid,
}

impl<'a> Arg<'a> {
    /// Reads what follows `=`; `spaced` when there was whitespace before the `=`.
    fn parse(raw: &'a str, spaced: bool) -> Arg<'a> {
        if spaced || raw.is_empty() || raw.starts_with([' ', '\t']) {
            return Arg::Invalid;
        }
        match raw.strip_prefix('"') {
            Some(rest) => unquote(rest).map_or(Arg::Invalid, Arg::Value),
            None => Arg::Value(Cow::Borrowed(raw)),
        }
    }
}

/// The content of a quoted-string whose opening quote is already gone, if it ends with
/// its closing quote and nothing after it.
fn unquote(rest: &str) -> Option<Cow<'_, str>> {
    let mut out = String::new();
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            return (i + 1 == rest.len()).then(|| {
                if out.len() == i {
                    Cow::Borrowed(&rest[..i])
                } else {
                    Cow::Owned(out)
                }
            });
        } else {
            out.push(c);
        }
    }
    None
}

/// Parses a delta-seconds argument (RFC 9111 §1.2.2: `1*DIGIT`). Anything else (absent,
/// signed, decimal, single-quoted) counts as 0, so an invalid `max-age` is stale
/// (§4.2.1); a value beyond [`DELTA_SECONDS_MAX`] is capped to it.
fn delta_seconds(arg: &Arg<'_>) -> u64 {
    let Arg::Value(v) = arg else { return 0 };
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    v.parse::<u64>()
        .unwrap_or(DELTA_SECONDS_MAX)
        .min(DELTA_SECONDS_MAX)
}

impl CacheControl {
    /// Reads every `Cache-Control` field line of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> CacheControl {
        let mut cc = CacheControl::default();
        for value in headers.get_all(CACHE_CONTROL) {
            match value.to_str() {
                Ok(s) => cc.parse_into(s),
                // Not visible ASCII: we cannot know what it says, so refuse to store.
                Err(_) => cc.no_store = true,
            }
        }
        cc
    }

    /// Like [`from_headers`](Self::from_headers) for a request, where `Pragma: no-cache`
    /// counts as `no-cache` when there is no `Cache-Control` (RFC 9111 §5.4).
    pub fn from_request_headers(headers: &HeaderMap) -> CacheControl {
        let mut cc = CacheControl::from_headers(headers);
        if !headers.contains_key(CACHE_CONTROL) {
            for value in headers.get_all(PRAGMA) {
                if let Ok(s) = value.to_str() {
                    if s.split(',')
                        .any(|d| d.trim().eq_ignore_ascii_case("no-cache"))
                    {
                        cc.no_cache = true;
                    }
                }
            }
        }
        cc
    }

    fn parse_into(&mut self, s: &str) {
        for directive in split_directives(s) {
            // OWS around the commas is allowed; around the `=` it is not (§5.2).
            let directive = directive.trim_matches([' ', '\t']);
            let (name, arg) = match directive.split_once('=') {
                Some((n, v)) => (n.trim_end(), Arg::parse(v, n.len() != n.trim_end().len())),
                None => (directive, Arg::Absent),
            };
            let lname = name.to_ascii_lowercase();
            match lname.as_str() {
                "no-store" => self.no_store = true,
                // Qualified forms (`no-cache="Set-Cookie"`, `private="X"`) are treated as
                // unqualified: §5.2.2.4 and §5.2.2.7 note that caches commonly do, and it
                // is the safe reading.
                "no-cache" => self.no_cache = true,
                "private" => self.private = true,
                "public" => self.public = true,
                "must-revalidate" => self.must_revalidate = true,
                "proxy-revalidate" => self.proxy_revalidate = true,
                "must-understand" => self.must_understand = true,
                "only-if-cached" => self.only_if_cached = true,
                "max-age" => self.max_age = Some(first_or_stale(self.max_age, &arg)),
                "s-maxage" => self.s_maxage = Some(first_or_stale(self.s_maxage, &arg)),
                "max-stale" => {
                    self.max_stale = Some(match arg {
                        Arg::Absent => u64::MAX,
                        _ => delta_seconds(&arg),
                    })
                }
                "min-fresh" => self.min_fresh = Some(delta_seconds(&arg)),
                "stale-while-revalidate" => {
                    self.stale_while_revalidate =
                        Some(min_opt(self.stale_while_revalidate, delta_seconds(&arg)))
                }
                "stale-if-error" => {
                    self.stale_if_error = Some(min_opt(self.stale_if_error, delta_seconds(&arg)))
                }
                _ => {}
            }
        }
    }
}

/// A freshness directive seen again: RFC 9111 §4.2.1 says "either the first occurrence
/// should be used or the response should be considered stale". A repeated identical value
/// is no conflict; different values make the response stale (0), the safer reading.
fn first_or_stale(old: Option<u64>, arg: &Arg<'_>) -> u64 {
    let new = delta_seconds(arg);
    match old {
        Some(o) if o != new => 0,
        _ => new,
    }
}

/// When a stale-serving directive repeats with different values, the smaller (safer) one
/// wins.
fn min_opt(old: Option<u64>, new: u64) -> u64 {
    old.map_or(new, |o| o.min(new))
}

/// Splits on commas that are not inside a quoted string.
fn split_directives(s: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' if in_quotes => escaped = true,
            b'"' => in_quotes = !in_quotes,
            b',' if !in_quotes => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cc(s: &str) -> CacheControl {
        let mut h = HeaderMap::new();
        h.insert(CACHE_CONTROL, HeaderValue::from_str(s).unwrap());
        CacheControl::from_headers(&h)
    }

    #[test]
    fn parses_common_directives() {
        let c = cc("public, s-maxage=3, max-age=0");
        assert!(c.public);
        assert_eq!(c.s_maxage, Some(3));
        assert_eq!(c.max_age, Some(0));
        let c = cc("no-store, no-cache, must-revalidate, post-check=0, pre-check=0");
        assert!(c.no_store && c.no_cache && c.must_revalidate);
        let c = cc("private=\"a, b\", max-age=\"60\"");
        assert!(c.private);
        assert_eq!(c.max_age, Some(60));
        assert!(!c.no_store);
    }

    #[test]
    fn invalid_max_age_is_stale() {
        // RFC 9111 §1.2.2: delta-seconds = 1*DIGIT; §4.2.1: invalid means stale.
        for v in [
            "max-age=abc",
            "max-age=-5",
            "max-age=+5",
            "max-age=5.0",
            "max-age=5a",
            "max-age='5'",
            "max-age=\"5",
            "max-age=",
            "max-age",
            // §5.2: no whitespace around '='.
            "max-age =5",
            "max-age= 5",
        ] {
            assert_eq!(cc(v).max_age, Some(0), "{v}");
        }
        assert_eq!(cc("max-age=005").max_age, Some(5));
        assert_eq!(cc("max-age=\"5\"").max_age, Some(5));
        assert_eq!(cc("max-age=\"\\5\"").max_age, Some(5), "quoted-pair");
        assert_eq!(
            cc(" max-age=5 ,  public ").max_age,
            Some(5),
            "OWS around commas"
        );
    }

    #[test]
    fn huge_delta_seconds_are_capped_at_2_pow_31() {
        // RFC 9111 §1.2.2.
        assert_eq!(cc("max-age=2147483648").max_age, Some(1 << 31));
        assert_eq!(cc("max-age=99999999999").max_age, Some(1 << 31));
        assert_eq!(
            cc("s-maxage=99999999999999999999999").s_maxage,
            Some(1 << 31)
        );
        assert_eq!(
            cc("stale-if-error=99999999999").stale_if_error,
            Some(1 << 31)
        );
    }

    #[test]
    fn conflicting_duplicates_are_stale() {
        // RFC 9111 §4.2.1: the first occurrence, or stale; levee chooses stale.
        assert_eq!(cc("max-age=60, max-age=10").max_age, Some(0));
        assert_eq!(cc("max-age=10, max-age=60").max_age, Some(0));
        assert_eq!(cc("max-age=60, max-age=60").max_age, Some(60));
        assert_eq!(cc("s-maxage=60, s-maxage=1").s_maxage, Some(0));
        let mut h = HeaderMap::new();
        h.append(CACHE_CONTROL, HeaderValue::from_static("max-age=60"));
        h.append(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        assert_eq!(CacheControl::from_headers(&h).max_age, Some(0));
        // Stale-serving directives keep the smaller value.
        assert_eq!(
            cc("stale-while-revalidate=60, stale-while-revalidate=5").stale_while_revalidate,
            Some(5)
        );
    }

    #[test]
    fn quoted_strings_hide_directives() {
        let c = cc("extension=\"max-age=100, no-store\", max-age=1");
        assert_eq!(c.max_age, Some(1));
        assert!(!c.no_store);
        let c = cc("max-age=1, x=\"a\\\", max-age=100\"");
        assert_eq!(c.max_age, Some(1));
    }

    #[test]
    fn must_understand_is_read() {
        let c = cc("must-understand, no-store");
        assert!(c.must_understand && c.no_store);
    }

    #[test]
    fn directive_names_ignore_case() {
        assert!(cc("No-Store").no_store);
        assert_eq!(cc("MAX-AGE=5").max_age, Some(5));
    }

    #[test]
    fn pragma_no_cache_only_without_cache_control() {
        let mut h = HeaderMap::new();
        h.insert(PRAGMA, HeaderValue::from_static("no-cache"));
        assert!(CacheControl::from_request_headers(&h).no_cache);
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        assert!(!CacheControl::from_request_headers(&h).no_cache);
    }
}

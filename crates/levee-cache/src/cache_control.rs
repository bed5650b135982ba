//! `Cache-Control` parsing (RFC 9111 §5.2), for requests and responses alike.
//!
//! Parsing is forgiving in the safe direction: a directive that cannot be understood
//! never makes a response *more* cacheable. A malformed `max-age` is treated as
//! already stale (RFC 9111 §4.2.1: invalid freshness information means stale).

use http::header::{HeaderMap, CACHE_CONTROL, PRAGMA};

/// The directives levee acts on. Durations are seconds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CacheControl {
    pub no_store: bool,
    pub no_cache: bool,
    pub private: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    pub only_if_cached: bool,
    pub max_age: Option<u64>,
    pub s_maxage: Option<u64>,
    /// Request only: `max-stale` with no value means any staleness (`u64::MAX`).
    pub max_stale: Option<u64>,
    pub min_fresh: Option<u64>,
    pub stale_while_revalidate: Option<u64>,
    pub stale_if_error: Option<u64>,
}

/// Parses a delta-seconds value; an invalid one counts as 0 (stale), a huge one saturates.
fn delta_seconds(v: &str) -> u64 {
    let v = v.trim().trim_matches('"');
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    v.parse::<u64>().unwrap_or(u64::MAX)
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
            let (name, value) = match directive.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (directive.trim(), None),
            };
            let lname = name.to_ascii_lowercase();
            match lname.as_str() {
                "no-store" => self.no_store = true,
                // Qualified forms (`no-cache="Set-Cookie"`) are treated as unqualified:
                // the RFC allows it and it is the safe reading.
                "no-cache" => self.no_cache = true,
                "private" => self.private = true,
                "public" => self.public = true,
                "must-revalidate" => self.must_revalidate = true,
                "proxy-revalidate" => self.proxy_revalidate = true,
                "only-if-cached" => self.only_if_cached = true,
                "max-age" => {
                    self.max_age = Some(min_opt(self.max_age, value.map_or(0, delta_seconds)))
                }
                "s-maxage" => {
                    self.s_maxage = Some(min_opt(self.s_maxage, value.map_or(0, delta_seconds)))
                }
                "max-stale" => self.max_stale = Some(value.map_or(u64::MAX, delta_seconds)),
                "min-fresh" => self.min_fresh = Some(value.map_or(0, delta_seconds)),
                "stale-while-revalidate" => {
                    self.stale_while_revalidate = Some(value.map_or(0, delta_seconds))
                }
                "stale-if-error" => self.stale_if_error = Some(value.map_or(0, delta_seconds)),
                _ => {}
            }
        }
    }
}

/// When a directive repeats with different values, the smaller (safer) one wins.
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
    fn invalid_max_age_is_stale_and_duplicates_take_the_minimum() {
        assert_eq!(cc("max-age=abc").max_age, Some(0));
        assert_eq!(cc("max-age=-5").max_age, Some(0));
        assert_eq!(cc("max-age=60, max-age=10").max_age, Some(10));
        assert_eq!(
            cc("max-age=99999999999999999999999").max_age,
            Some(u64::MAX)
        );
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

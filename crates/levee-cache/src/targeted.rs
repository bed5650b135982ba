//! Targeted cache control (RFC 9213): `CDN-Cache-Control`, and levee's own
//! `Levee-Cache-Control`, give a shared cache a policy of its own beside the
//! `Cache-Control` browsers obey (`CDN-Cache-Control: max-age=600` with
//! `Cache-Control: no-store`: ten minutes in levee, never in a browser).
//!
//! levee's target list (§2.2) is `Levee-Cache-Control`, then `CDN-Cache-Control`: the
//! first of them present with a valid, non-empty value is the response's policy, and
//! `Cache-Control` and `Expires` are then ignored for levee's own decision (§2.2: the cache
//! "MUST ignore the Cache-Control and Expires header fields in that response"). Without
//! one, `Cache-Control` and `Expires` count as before.
//!
//! A targeted field is a Dictionary structured field (RFC 8941 §3.2), parsed strictly:
//! a value that is not a valid Dictionary (an uppercase key, a trailing comma, a bad
//! string, non-ASCII) is ignored as a whole, as if it were absent (§2.1). Within a valid
//! one, directives mean what they mean in `Cache-Control`; a freshness directive whose
//! value is not a non-negative Integer (`max-age=3.5`, `max-age="60"`) counts as 0, the
//! same safe reading levee gives an invalid `max-age` in `Cache-Control`.
//!
//! Clients still get the response's `Cache-Control`. levee removes
//! `Levee-Cache-Control` before clients always (it is levee's own), and
//! `CDN-Cache-Control` unless `[cache] strip_cdn_cache_control = false` (a CDN in front
//! of levee may want it); stored copies keep both, so that a 304 without them is decided
//! again with them (RFC 9111 §3.2's merge keeps what the 304 does not replace).

use http::header::{HeaderMap, HeaderName};

use crate::cache_control::{CacheControl, DELTA_SECONDS_MAX};

/// `Levee-Cache-Control`: directives for levee alone.
pub static LEVEE_CACHE_CONTROL: HeaderName = HeaderName::from_static("levee-cache-control");
/// `CDN-Cache-Control` (RFC 9213 §3): directives for CDNs and other shared caches run for
/// the origin.
pub static CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");

/// levee's target list, most specific first (RFC 9213 §2.2).
pub static TARGET_LIST: [&HeaderName; 2] = [&LEVEE_CACHE_CONTROL, &CDN_CACHE_CONTROL];

/// The directives of the first field of the target list present with a valid,
/// non-empty value, if any.
pub fn targeted(headers: &HeaderMap) -> Option<CacheControl> {
    TARGET_LIST
        .iter()
        .find_map(|name| parse_field(headers, name))
}

/// One targeted field: its field lines combined (RFC 8941 §4.2: joined with commas),
/// parsed as a Dictionary.
fn parse_field(headers: &HeaderMap, name: &HeaderName) -> Option<CacheControl> {
    let mut lines = headers.get_all(name).iter();
    let first = lines.next()?;
    let mut combined;
    let value: &[u8] = match lines.next() {
        None => first.as_bytes(),
        Some(second) => {
            combined = first.as_bytes().to_vec();
            for line in std::iter::once(second).chain(lines) {
                combined.extend_from_slice(b", ");
                combined.extend_from_slice(line.as_bytes());
            }
            &combined
        }
    };
    parse(value)
}

/// Parses a targeted field's value; `None` if it is empty or not a valid Dictionary.
pub fn parse(value: &[u8]) -> Option<CacheControl> {
    let mut p = Parser(value);
    p.skip_sp();
    if p.0.is_empty() {
        return None;
    }
    let mut cc = CacheControl::default();
    loop {
        let key = p.key()?;
        let value = if p.eat(b'=') {
            let v = p.item_or_inner_list()?;
            p.parameters()?;
            v
        } else {
            p.parameters()?;
            Bare::Bool(true)
        };
        apply(&mut cc, key, &value);
        p.skip_ows();
        if p.0.is_empty() {
            return Some(cc);
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip_ows();
        if p.0.is_empty() {
            // A trailing comma (RFC 8941 §4.2.2).
            return None;
        }
    }
}

/// A member's value, as much of it as a directive needs.
#[derive(Debug, PartialEq)]
enum Bare {
    Integer(i64),
    Bool(bool),
    /// A Decimal, String, Token, Byte Sequence or Inner List.
    Other,
}

/// Sets the directive `key` (Dictionary members are unique, the last one counts: RFC 8941
/// §4.2.2, so a later member simply overwrites).
fn apply(cc: &mut CacheControl, key: &[u8], value: &Bare) {
    // `private="x"` or `no-cache="Set-Cookie"` read as unqualified, as in Cache-Control.
    let set = *value != Bare::Bool(false);
    let seconds = match value {
        Bare::Integer(n) if *n >= 0 => n.unsigned_abs().min(DELTA_SECONDS_MAX),
        _ => 0,
    };
    match key {
        b"no-store" => cc.no_store = set,
        b"no-cache" => cc.no_cache = set,
        b"private" => cc.private = set,
        b"public" => cc.public = set,
        b"must-revalidate" => cc.must_revalidate = set,
        b"proxy-revalidate" => cc.proxy_revalidate = set,
        b"must-understand" => cc.must_understand = set,
        b"max-age" => cc.max_age = Some(seconds),
        b"s-maxage" => cc.s_maxage = Some(seconds),
        b"stale-while-revalidate" => cc.stale_while_revalidate = Some(seconds),
        b"stale-if-error" => cc.stale_if_error = Some(seconds),
        _ => {}
    }
}

/// RFC 8941 §4.2's parsing algorithms, over what is left of the input.
struct Parser<'a>(&'a [u8]);

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.0 = &self.0[1..];
            true
        } else {
            false
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a [u8] {
        let n = self.0.iter().take_while(|b| f(**b)).count();
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }

    fn skip_sp(&mut self) {
        self.take_while(|b| b == b' ');
    }

    fn skip_ows(&mut self) {
        self.take_while(|b| b == b' ' || b == b'\t');
    }

    /// §4.2.3.3: `( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn key(&mut self) -> Option<&'a [u8]> {
        match self.peek() {
            Some(b'a'..=b'z' | b'*') => Some(self.take_while(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'.' | b'*')
            })),
            _ => None,
        }
    }

    /// §4.2.1.1: an Item or an Inner List.
    fn item_or_inner_list(&mut self) -> Option<Bare> {
        if self.eat(b'(') {
            loop {
                self.skip_sp();
                if self.eat(b')') {
                    self.parameters()?;
                    return Some(Bare::Other);
                }
                self.bare_item()?;
                self.parameters()?;
                match self.peek() {
                    Some(b' ' | b')') => {}
                    _ => return None,
                }
            }
        }
        self.bare_item()
    }

    /// §4.2.2: `*( ";" *SP key [ "=" bare-item ] )`.
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip_sp();
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    /// §4.2.3.1.
    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string(),
            b':' => self.byte_sequence(),
            b'?' => {
                self.0 = &self.0[1..];
                if self.eat(b'1') {
                    Some(Bare::Bool(true))
                } else if self.eat(b'0') {
                    Some(Bare::Bool(false))
                } else {
                    None
                }
            }
            b'*' | b'a'..=b'z' | b'A'..=b'Z' => {
                self.take_while(|b| is_tchar(b) || b == b':' || b == b'/');
                Some(Bare::Other)
            }
            _ => None,
        }
    }

    /// §4.2.4: an Integer (at most 15 digits) or a Decimal (at most 12 digits, a dot, 1
    /// to 3 digits).
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let int = self.take_while(|b| b.is_ascii_digit());
        if int.is_empty() {
            return None;
        }
        if self.eat(b'.') {
            let frac = self.take_while(|b| b.is_ascii_digit());
            return (int.len() <= 12 && (1..=3).contains(&frac.len())).then_some(Bare::Other);
        }
        if int.len() > 15 {
            return None;
        }
        let n = int.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
        Some(Bare::Integer(if negative { -n } else { n }))
    }

    /// §4.2.5: printable ASCII in quotes, `\"` and `\\` the only escapes.
    fn string(&mut self) -> Option<Bare> {
        self.0 = &self.0[1..];
        loop {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            match b {
                b'"' => return Some(Bare::Other),
                b'\\' => {
                    let (&escaped, rest) = self.0.split_first()?;
                    if escaped != b'"' && escaped != b'\\' {
                        return None;
                    }
                    self.0 = rest;
                }
                0x20..=0x7e => {}
                _ => return None,
            }
        }
    }

    /// §4.2.7: `:` base64 `:`.
    fn byte_sequence(&mut self) -> Option<Bare> {
        self.0 = &self.0[1..];
        self.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        self.eat(b':').then_some(Bare::Other)
    }
}

/// RFC 9110 §5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cc(s: &str) -> Option<CacheControl> {
        parse(s.as_bytes())
    }

    #[test]
    fn directives_as_in_cache_control() {
        let c = cc("max-age=600").unwrap();
        assert_eq!(c.max_age, Some(600));
        let c = cc("no-store").unwrap();
        assert!(c.no_store);
        let c = cc("public, s-maxage=60, stale-while-revalidate=30, must-revalidate").unwrap();
        assert!(c.public && c.must_revalidate);
        assert_eq!(c.s_maxage, Some(60));
        assert_eq!(c.stale_while_revalidate, Some(30));
        // RFC 9213 §3.1's example: a field with no known directive is valid, not empty.
        assert_eq!(cc("none"), Some(CacheControl::default()));
        // A qualified private or no-cache is the unqualified one.
        assert!(cc("private=\"set-cookie\"").unwrap().private);
        assert!(!cc("no-store=?0").unwrap().no_store);
        // Parameters are allowed and ignored.
        assert_eq!(cc("max-age=60;foo=bar").unwrap().max_age, Some(60));
        assert_eq!(cc("max-age=60 ,\tpublic").unwrap().max_age, Some(60));
    }

    #[test]
    fn the_last_of_duplicate_members_counts() {
        // RFC 8941 §4.2.2.
        assert_eq!(cc("max-age=10, max-age=60").unwrap().max_age, Some(60));
    }

    #[test]
    fn a_freshness_value_that_is_no_non_negative_integer_is_stale() {
        // RFC 9213 §2.1: implementations SHOULD NOT consume values that violate the
        // directive's constraints; levee's reading of those is 0, as for Cache-Control.
        for v in [
            "max-age=3.5",
            "max-age=\"60\"",
            "max-age=-1",
            "max-age",
            "max-age=?1",
        ] {
            assert_eq!(cc(v).unwrap().max_age, Some(0), "{v}");
        }
        assert_eq!(
            cc("max-age=999999999999999").unwrap().max_age,
            Some(DELTA_SECONDS_MAX)
        );
    }

    #[test]
    fn an_invalid_dictionary_is_ignored_as_a_whole() {
        for v in [
            "",
            "   ",
            "Max-Age=600",
            "max-age=600,",
            "max-age=600,,public",
            "max-age=600 public",
            "max-age =600",
            "max-age= 600",
            "max-age=0600000000000000000",
            "private=\"unterminated",
            "private=\"bad\\escape\"",
            "max-age=600; Foo",
            "max-age=1.2345",
            "x=:not base64!:",
            "x=(a b",
            "x=?2",
            "é",
        ] {
            assert_eq!(cc(v), None, "{v:?}");
        }
    }

    #[test]
    fn levee_cache_control_comes_first_then_cdn_cache_control() {
        let mut h = HeaderMap::new();
        assert_eq!(targeted(&h), None);
        h.insert(&CDN_CACHE_CONTROL, HeaderValue::from_static("max-age=600"));
        assert_eq!(targeted(&h).unwrap().max_age, Some(600));
        h.insert(&LEVEE_CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        assert_eq!(targeted(&h).unwrap().max_age, Some(5));
        // An invalid field is as if absent: the next one on the list counts.
        h.insert(&LEVEE_CACHE_CONTROL, HeaderValue::from_static("MAX-AGE=5"));
        assert_eq!(targeted(&h).unwrap().max_age, Some(600));
        h.insert(&CDN_CACHE_CONTROL, HeaderValue::from_static(""));
        assert_eq!(targeted(&h), None);
    }

    #[test]
    fn field_lines_are_combined() {
        let mut h = HeaderMap::new();
        h.append(&CDN_CACHE_CONTROL, HeaderValue::from_static("max-age=600"));
        h.append(&CDN_CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let c = targeted(&h).unwrap();
        assert!(c.no_store && c.max_age == Some(600));
        // One invalid line spoils the combined value.
        h.append(&CDN_CACHE_CONTROL, HeaderValue::from_static("Bad"));
        assert_eq!(targeted(&h), None);
    }
}

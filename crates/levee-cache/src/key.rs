//! The cache key: which stored responses a request may be answered with.
//!
//! **This is the security boundary of a shared cache.** Two requests with the same key
//! get the same stored response, so anything that changes the response and is not in
//! the key lets one client choose what every other client is served (cache poisoning),
//! and a key that is too fine only costs hit ratio. The primary key is the effective
//! request URI (RFC 9111 §4: scheme, host, path and query), built only here, by
//! [`CacheKey::for_request`]; the secondary key is the request's values of the fields
//! the response's `Vary` names ([`VaryKey`](crate::VaryKey), built from the response
//! when it is stored and matched by the store on every lookup).
//!
//! What the key leaves out is dropped from the backend request of a fill (cookies,
//! `Authorization` never reach a fill; see levee-proxy's `request/fill.rs`).

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, VARY};
use http::Uri;

use crate::thin::ThinSlice;

/// The scheme clients used to reach levee; part of the key so that an `https` page
/// (links, redirects) is never served to an `http` client or the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub fn default_port(self) -> u32 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// `http` or `https`, case-insensitively.
    pub fn parse(s: &str) -> Option<Scheme> {
        if s.eq_ignore_ascii_case("http") {
            Some(Scheme::Http)
        } else if s.eq_ignore_ascii_case("https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }
}

/// The primary cache key: `scheme://host/path?query`, with the host lowercased (host
/// names are case-insensitive, paths and queries are not), and the site that answered
/// it (levee's `[[site]]`, by its place): two sites never share an entry, whatever
/// host a request names.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Exactly sized (no spare capacity): a million keys are kept in the store's index.
    url: Box<str>,
    site: u16,
}

impl CacheKey {
    /// The key of a request: its scheme, the `Host` it asked for (or the authority of an
    /// absolute-form target when it has no `Host`) and its full path with query.
    /// The host is normalized ([`normalize_host`]): `Example.COM.:80` and `example.com`
    /// are one key, and levee sends the backend that same normalized `Host` on a fill,
    /// so the spelling an attacker picks cannot choose what is stored for everyone.
    pub fn for_request(scheme: Scheme, uri: &Uri, headers: &HeaderMap) -> CacheKey {
        let raw = request_host(uri, headers);
        // An invalid Host is refused before a key is made (levee-proxy's classify); should
        // one get here, it is kept as it came, lowercased: a key of its own.
        let host = normalize_host(raw, scheme).unwrap_or_else(|| raw.to_ascii_lowercase().into());
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        CacheKey::new(scheme, &host, pq)
    }

    fn new(scheme: Scheme, host: &str, path_and_query: &str) -> CacheKey {
        let scheme = scheme.as_str();
        let mut k = String::with_capacity(scheme.len() + host.len() + path_and_query.len() + 3);
        k.push_str(scheme);
        k.push_str("://");
        k.push_str(host);
        k.push_str(path_and_query);
        CacheKey {
            url: k.into_boxed_str(),
            site: 0,
        }
    }

    /// The same URL for the site at `index` (the first site's is 0, what every
    /// constructor makes).
    pub fn in_site(mut self, index: usize) -> CacheKey {
        // More sites than u16 holds is refused by levee-config long before.
        self.site = u16::try_from(index).unwrap_or(u16::MAX);
        self
    }

    /// A key read back from a lower tier's record (levee-cache's codec): the URL as it
    /// was stored, in the site at `index`.
    pub fn stored(url: &str, index: usize) -> CacheKey {
        CacheKey {
            url: url.into(),
            site: 0,
        }
        .in_site(index)
    }

    /// The site's place, as given to [`CacheKey::in_site`].
    pub fn site(&self) -> usize {
        usize::from(self.site)
    }

    /// The key of a `Location` or `Content-Location` value of a response to this key's
    /// request, if it names the same origin (RFC 9111 §4.4: only those are invalidated,
    /// so that a response cannot purge another site's pages).
    pub fn same_origin(&self, reference: &str) -> Option<CacheKey> {
        let uri: Uri = reference.parse().ok()?;
        let (scheme, rest) = self.url.split_once("://")?;
        let host = rest.find('/').map_or(rest, |i| &rest[..i]);
        let same = match (uri.scheme_str(), uri.authority()) {
            (None, None) => true,
            (Some(s), Some(a)) => match Scheme::parse(scheme) {
                Some(ours) => {
                    s.eq_ignore_ascii_case(scheme)
                        && normalize_host(a.as_str(), ours).as_deref() == Some(host)
                }
                None => false,
            },
            _ => false,
        };
        if !same || !uri.path().starts_with('/') {
            return None;
        }
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut k = String::with_capacity(scheme.len() + 3 + host.len() + pq.len());
        k.push_str(scheme);
        k.push_str("://");
        k.push_str(host);
        k.push_str(pq);
        Some(CacheKey {
            url: k.into_boxed_str(),
            site: self.site,
        })
    }

    /// The same host, path and query under `scheme` (a purge names a page over both).
    pub fn with_scheme(&self, scheme: Scheme) -> CacheKey {
        let rest = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        let mut k = String::with_capacity(scheme.as_str().len() + 3 + rest.len());
        k.push_str(scheme.as_str());
        k.push_str("://");
        k.push_str(rest);
        CacheKey {
            url: k.into_boxed_str(),
            site: self.site,
        }
    }

    /// The URL (without the site).
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The host part, lowercased (with its port, if the request named one).
    pub fn host(&self) -> &str {
        host_of(&self.url)
    }

    /// The key as a stored entry holds it (entry.rs), for comparisons with those.
    pub fn as_ref(&self) -> KeyRef<'_> {
        KeyRef {
            url: &self.url,
            site: self.site,
        }
    }
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    rest.find('/').map_or(rest, |i| &rest[..i])
}

/// A [`CacheKey`] borrowed from where it is kept: the bytes of a stored entry, which
/// holds its own key (the store's index holds only a hash of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    url: &'a str,
    site: u16,
}

impl<'a> KeyRef<'a> {
    pub(crate) fn new(url: &'a str, site: u16) -> KeyRef<'a> {
        KeyRef { url, site }
    }

    /// The URL (without the site).
    pub fn as_str(&self) -> &'a str {
        self.url
    }

    /// The site's place (see [`CacheKey::site`]).
    pub fn site(&self) -> usize {
        usize::from(self.site)
    }

    /// The host part, lowercased (with its port, if the request named one).
    pub fn host(&self) -> &'a str {
        host_of(self.url)
    }

    /// The owned key.
    pub fn to_key(&self) -> CacheKey {
        CacheKey {
            url: self.url.into(),
            site: self.site,
        }
    }

    pub(crate) fn site_u16(&self) -> u16 {
        self.site
    }
}

impl PartialEq<CacheKey> for KeyRef<'_> {
    fn eq(&self, other: &CacheKey) -> bool {
        self.site == other.site && self.url == &*other.url
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.site != 0 {
            write!(f, "site {}: ", self.site)?;
        }
        fmt::Debug::fmt(&self.url, f)
    }
}

/// The host a request is for: its `Host` field, else the authority of an absolute-form
/// target, else empty (HTTP/1.0 without `Host`).
pub fn request_host<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> &'a str {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// A `Host` value (or a target's authority) in the one spelling levee keys and forwards:
/// lowercase, without the trailing dot of a fully qualified name, without the scheme's
/// default port (RFC 3986 §6.2.3; `:` with no port is dropped too). `None` when it is not
/// a valid `uri-host [ ":" port ]` (RFC 9110 §7.2): no userinfo, no characters outside
/// reg-name, a port of digits up to 65535, a bracketed IPv6 literal; such a request gets
/// 400 (RFC 9112 §3.2). An empty value is valid (HTTP/1.0 without Host) and stays empty.
///
/// Borrowed when `raw` is already normal, as nearly every request's `Host` is: the
/// check runs on every request, twice, and need not allocate.
pub fn normalize_host(raw: &str, scheme: Scheme) -> Option<Cow<'_, str>> {
    let (host, port) = if let Some(rest) = raw.strip_prefix('[') {
        let end = rest.find(']')?;
        let literal = &rest[..end];
        if literal.is_empty()
            || !literal
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return None;
        }
        (&raw[..end + 2], &rest[end + 1..])
    } else {
        match raw.rfind(':') {
            Some(i) => (&raw[..i], &raw[i..]),
            None => (raw, ""),
        }
    };
    let port = match port {
        "" | ":" => "",
        p => {
            let digits = p.strip_prefix(':')?;
            if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            let n: u32 = digits.parse().ok()?;
            if n > 65535 {
                return None;
            }
            if n == scheme.default_port() {
                ""
            } else {
                p
            }
        }
    };
    let reg_name = |b: u8| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            )
    };
    if !host.starts_with('[') && !host.bytes().all(reg_name) {
        return None;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    // ".", ":80", ":": a port or a dot without a host. Empty labels ("a..b", ".a", "a..")
    // name no host either, and would break "one spelling per host" (found by fuzz/host).
    if (host.is_empty() && !raw.is_empty())
        || (!host.starts_with('[')
            && (host.starts_with('.') || host.ends_with('.') || host.contains("..")))
    {
        return None;
    }
    // `host` is a prefix of `raw` and `port` a suffix: together they are all of it
    // only when no trailing dot or default port was dropped.
    if host.len() + port.len() == raw.len() && !host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some(Cow::Borrowed(raw));
    }
    let mut out = String::with_capacity(host.len() + port.len());
    for c in host.chars() {
        out.push(c.to_ascii_lowercase());
    }
    out.push_str(port);
    Some(Cow::Owned(out))
}

/// The secondary key: the request-header values named by a response's `Vary`, in the
/// order `Vary` lists them. Two requests select the same stored response only if these
/// match (RFC 9111 §4.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaryKey(ThinSlice<(HeaderName, Option<Bytes>)>);

impl VaryKey {
    /// The key of a response without `Vary` (or only fields that always read as absent).
    pub const EMPTY: VaryKey = VaryKey(ThinSlice::EMPTY);

    /// Builds the key from the response's `Vary` and the request that produced it.
    pub fn new(response: &HeaderMap, request: &HeaderMap) -> VaryKey {
        let mut fields = Vec::new();
        for v in response.get_all(VARY) {
            let Ok(s) = v.to_str() else { continue };
            for name in s.split(',') {
                let name = name.trim();
                if name.is_empty() {
                    continue;
                }
                if let Ok(h) = HeaderName::from_bytes(name.as_bytes()) {
                    // A field that always counts as absent matches every request: kept,
                    // it would only cost memory in every compressed entry (`Vary:
                    // Accept-Encoding`).
                    if !always_absent(&h) && !fields.iter().any(|(n, _)| *n == h) {
                        let value = normalized(request, &h);
                        fields.push((h, value));
                    }
                }
            }
        }
        VaryKey(fields.into())
    }

    /// Does `request` select a response stored under this key?
    pub fn matches(&self, request: &HeaderMap) -> bool {
        self.0
            .iter()
            .all(|(name, value)| normalized(request, name) == *value)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The header names and normalized values it holds (to write it down).
    pub fn fields(&self) -> &[(HeaderName, Option<Bytes>)] {
        &self.0
    }

    /// The key with one more field, which the response did not name (levee-proxy's
    /// device class): requests match it by their value of `name`.
    pub fn with_field(self, name: HeaderName, value: Bytes) -> VaryKey {
        let mut fields = self.0.to_vec();
        fields.retain(|(n, _)| *n != name);
        fields.push((name, Some(value)));
        VaryKey(fields.into())
    }

    /// A key read back from its [`VaryKey::fields`].
    pub fn from_fields(fields: Vec<(HeaderName, Option<Bytes>)>) -> VaryKey {
        VaryKey(fields.into())
    }
}

/// All field lines of `name` combined with ", ", whitespace around commas removed, as
/// RFC 9111 §4.1 allows a cache to normalise; `Accept-Language` further by its syntax
/// ([`weighted_list`]).
///
/// `Cookie`, `Authorization` and `Accept-Encoding` always count as absent: levee never
/// sends them with a request whose response may be stored (it negotiates codings itself),
/// so they cannot tell variants apart.
fn normalized(request: &HeaderMap, name: &HeaderName) -> Option<Bytes> {
    if always_absent(name) {
        return None;
    }
    let mut values = request.get_all(name).iter().peekable();
    values.peek()?;
    if name == http::header::ACCEPT_LANGUAGE {
        return Some(weighted_list(values));
    }
    let mut out = Vec::new();
    for v in values {
        for part in v.as_bytes().split(|b| *b == b',') {
            let part = part.trim_ascii();
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(part);
        }
    }
    Some(Bytes::from(out))
}

/// The fields [`normalized`] always reads as absent.
fn always_absent(name: &HeaderName) -> bool {
    name == http::header::COOKIE
        || name == http::header::AUTHORIZATION
        || name == http::header::ACCEPT_ENCODING
}

/// A weighted list (`Accept-Language: en-US, fr;q=0.5`, RFC 9110 §12.4.2 and §12.5.4) in
/// one spelling for every way of writing the same preferences: members lowercased
/// (language ranges are case-insensitive), whitespace removed, `q` written in the fewest
/// digits and left out when it is 1 (the default), duplicates dropped, members sorted.
///
/// Sorting reads the list as RFC 9110 defines it, a set of ranges with weights: `en, fr`
/// and `fr, en` give both q=1. A member's weight is kept, so lists that weigh the same
/// ranges differently (`en;q=0.5, fr` and `en, fr;q=0.5`) stay apart: they can select
/// different representations. An unreadable weight is kept as written (lowercased): it
/// only ever matches itself.
fn weighted_list<'a>(values: impl Iterator<Item = &'a http::HeaderValue>) -> Bytes {
    let mut members: Vec<Vec<u8>> = Vec::new();
    for v in values {
        for member in v.as_bytes().split(|b| *b == b',') {
            let mut parts = member.split(|b| *b == b';');
            let range = parts.next().unwrap_or_default().trim_ascii();
            if range.is_empty() {
                continue;
            }
            let mut out = range.to_ascii_lowercase();
            for param in parts {
                let param = param.trim_ascii();
                match param.split_first() {
                    Some((q, rest))
                        if q.eq_ignore_ascii_case(&b'q') && rest.first() == Some(&b'=') =>
                    {
                        match qvalue(&rest[1..]) {
                            Some(1000) => {}
                            Some(q) => {
                                out.extend_from_slice(b";q=");
                                push_qvalue(&mut out, q);
                            }
                            None => {
                                out.push(b';');
                                out.extend(param.iter().map(u8::to_ascii_lowercase));
                            }
                        }
                    }
                    _ => {
                        out.push(b';');
                        out.extend(param.iter().map(u8::to_ascii_lowercase));
                    }
                }
            }
            members.push(out);
        }
    }
    members.sort_unstable();
    members.dedup();
    Bytes::from(members.join(&b',')[..].to_vec())
}

/// RFC 9110 §12.4.2: `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in
/// thousandths.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|b| *b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// `0`, `0.5`, `0.25`, `0.125`: a weight below 1 in the fewest digits.
fn push_qvalue(out: &mut Vec<u8>, q: u16) {
    out.push(b'0');
    if q == 0 {
        return;
    }
    out.push(b'.');
    let digits = [q / 100, q / 10 % 10, q % 10];
    let len = 3 - digits.iter().rev().take_while(|d| **d == 0).count();
    out.extend(
        digits[..len]
            .iter()
            .map(|d| b'0' + u8::try_from(*d).unwrap_or(0)),
    );
}

#[cfg(test)]
mod tests;

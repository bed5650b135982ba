//! Surrogate keys (cache tags): names a backend gives a response so that everything
//! tagged with one can be purged at once (a CMS purges `post-57` when post 57 changes,
//! wherever it appears). Read from the three conventions in use: Fastly's and Souin's
//! `Surrogate-Key` (space-separated), Cloudflare's `Cache-Tag` (comma-separated) and
//! Varnish xkey's `xkey` (space- or comma-separated).

use http::header::{HeaderMap, HeaderName};

/// The response fields that carry tags. levee strips them before clients: they describe
/// the site's internals, not the page.
pub static TAG_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static("surrogate-key"),
    HeaderName::from_static("cache-tag"),
    HeaderName::from_static("xkey"),
];

/// At most this many tags per response, each at most this long: a response cannot make
/// its entry (and every purge's walk over it) grow without bound.
const MAX_TAGS: usize = 256;
const MAX_TAG_LEN: usize = 256;

/// The tags of a response, deduplicated, in the order first seen.
pub fn tags(headers: &HeaderMap) -> Tags {
    let mut out: Vec<Box<str>> = Vec::new();
    for name in &TAG_HEADERS {
        for value in headers.get_all(name) {
            let Ok(s) = value.to_str() else { continue };
            for tag in s.split([' ', ',', '\t']).filter(|t| !t.is_empty()) {
                if out.len() == MAX_TAGS {
                    return out.into();
                }
                if tag.len() <= MAX_TAG_LEN && !out.iter().any(|t| &**t == tag) {
                    out.push(tag.into());
                }
            }
        }
    }
    out.into()
}

/// An entry's surrogate keys (most have none: then nothing is allocated).
pub type Tags = crate::thin::ThinSlice<Box<str>>;

/// Removes the tag fields (what clients are sent).
pub fn strip(headers: &mut HeaderMap) {
    for name in &TAG_HEADERS {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn all_three_conventions() {
        let mut h = HeaderMap::new();
        h.insert("surrogate-key", HeaderValue::from_static("post-57  home"));
        h.insert("cache-tag", HeaderValue::from_static("home,author-3"));
        h.append("xkey", HeaderValue::from_static("feed, post-57"));
        let all = tags(&h);
        let t: Vec<&str> = all.iter().map(|t| &**t).collect();
        assert_eq!(t, ["post-57", "home", "author-3", "feed"]);
        strip(&mut h);
        assert!(h.is_empty());
    }

    #[test]
    fn bounded() {
        let mut h = HeaderMap::new();
        let many: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
        h.insert("xkey", HeaderValue::from_str(&many.join(" ")).unwrap());
        h.insert(
            "cache-tag",
            HeaderValue::from_str(&"x".repeat(300)).unwrap(),
        );
        assert_eq!(tags(&h).len(), MAX_TAGS);
    }
}

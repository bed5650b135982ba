//! Purges: dropping stored responses before their time, when the site changed. From the
//! admin listener (`POST /purge?url=|prefix=|tag=`, `&soft=1`) and from allowed clients
//! on the traffic port (the `PURGE` method, as Varnish and MediaWiki's `$wgCdnServers`
//! expect). A soft purge marks stale instead of removing: the next request revalidates
//! behind coalescing and the old copy still stands in if the backend fails.

use std::net::IpAddr;

use http::request;
use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::{CacheKey, Scheme, Store};

/// What a purge removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Every variant of one URL.
    Url(CacheKey),
    /// Every URL whose key starts with this one (`http://host/path` bans below it).
    Prefix(CacheKey),
    /// Every response the backend tagged with this surrogate key.
    Tag(String),
}

/// A purge request from the admin API's query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Purge {
    pub target: Target,
    pub soft: bool,
    /// `site=NAME`: only that site's responses (a URL or prefix names its site by its
    /// host already; a tag purges every site's unless one is named).
    pub site: Option<String>,
}

/// How a purge finds sites: by a URL's host, and by name.
pub(crate) trait Sites {
    /// The site that answers `host` (lowercase, without port).
    fn site_of_host(&self, host: &str) -> Option<usize>;
    fn site_named(&self, name: &str) -> Option<usize>;
}

impl Purge {
    /// Parses `url=URL`, `prefix=URL` or `tag=TAG`, and `soft=1`. The error says what to
    /// send instead.
    pub fn from_query(query: &str) -> Result<Purge, String> {
        let mut target = None;
        let mut soft = false;
        let mut site = None;
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            let t = match &*k {
                "url" => Target::Url(key_of(&v).map_err(|e| format!("{e}; {USAGE}"))?),
                "prefix" => Target::Prefix(key_of(&v).map_err(|e| format!("{e}; {USAGE}"))?),
                "tag" if !v.trim().is_empty() => Target::Tag(v.trim().to_string()),
                "soft" => {
                    soft = matches!(&*v, "1" | "true" | "yes" | "");
                    continue;
                }
                "site" if !v.trim().is_empty() => {
                    site = Some(v.trim().to_string());
                    continue;
                }
                _ => return Err(format!("unknown parameter `{k}`; {USAGE}")),
            };
            if target.replace(t).is_some() {
                return Err(format!("one of url, prefix or tag per purge; {USAGE}"));
            }
        }
        let target = target.ok_or_else(|| USAGE.to_string())?;
        Ok(Purge { target, soft, site })
    }

    /// Carries it out in memory; how many stored responses it removed or marked, and
    /// the bans for the tiers below. Walks the whole store for a prefix or a tag: run it
    /// off the serving threads. A URL whose host no site answers, or a site name no site
    /// has, purges nothing: the error says which.
    pub fn run(&self, store: &Store, sites: &dyn Sites) -> Result<(usize, Vec<Ban>), String> {
        let bans = self.bans(sites)?;
        let n = bans
            .iter()
            .map(|b| levee_tiers::apply_to_memory(store, b))
            .sum();
        Ok((n, bans))
    }

    /// The purge as bans (levee-cache's ban.rs), its sites resolved: what memory applies
    /// now and the tiers below it keep. A URL is banned under both schemes (an edit is
    /// seen over http and https alike).
    pub fn bans(&self, sites: &dyn Sites) -> Result<Vec<Ban>, String> {
        let named = match &self.site {
            Some(name) => Some(
                sites
                    .site_named(name)
                    .ok_or_else(|| format!("no site is named `{name}`"))?,
            ),
            None => None,
        };
        let site_of = |key: &CacheKey| -> Result<usize, String> {
            let host = key.host();
            let bare = host.rsplit_once(':').map_or(host, |(h, p)| {
                if p.bytes().all(|b| b.is_ascii_digit()) && !h.is_empty() {
                    h
                } else {
                    host
                }
            });
            let site = sites
                .site_of_host(bare)
                .ok_or_else(|| format!("no site answers the host {host}"))?;
            match named {
                Some(n) if n != site => Err(format!(
                    "the host {host} belongs to another site than `{}`",
                    self.site.as_deref().unwrap_or_default()
                )),
                _ => Ok(site),
            }
        };
        let mode = if self.soft {
            BanMode::Stale
        } else {
            BanMode::Remove
        };
        Ok(match &self.target {
            Target::Url(key) => {
                let key = key.clone().in_site(site_of(key)?);
                both_schemes(&key)
                    .into_iter()
                    .map(|k| Ban::now(mode, BanTarget::Url(k)))
                    .collect()
            }
            Target::Prefix(prefix) => {
                let site = site_of(prefix)?;
                vec![Ban::now(
                    mode,
                    BanTarget::Prefix(prefix.clone().in_site(site)),
                )]
            }
            Target::Tag(tag) => vec![Ban::now(
                mode,
                BanTarget::Tag {
                    tag: tag.clone(),
                    site: named,
                },
            )],
        })
    }
}

const USAGE: &str = "send POST /purge?url=http://host/path, ?prefix=http://host/path or ?tag=TAG, \
                     with &soft=1 to mark stale instead of removing (and &site=NAME to purge \
                     a tag on one site only)";

/// The key of an absolute URL (`http://host/path?query`), as a request for it has.
fn key_of(url: &str) -> Result<CacheKey, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| format!("`{url}` is not a URL; write it like http://example.com/page"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some(s), Some(_)) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {
        }
        _ => {
            return Err(format!(
                "`{url}` needs a scheme and a host, like http://example.com/page"
            ))
        }
    }
    let scheme = uri
        .scheme_str()
        .and_then(Scheme::parse)
        .unwrap_or(Scheme::Http);
    Ok(CacheKey::for_request(scheme, &uri, &http::HeaderMap::new()))
}

/// `key` under both schemes.
pub(crate) fn both_schemes(key: &CacheKey) -> [CacheKey; 2] {
    [
        key.with_scheme(Scheme::Http),
        key.with_scheme(Scheme::Https),
    ]
}

/// Whether `peer` may send `PURGE` on the traffic port.
pub(crate) fn allowed(settings: &levee_config::Settings, peer: IpAddr) -> bool {
    settings.purge.allows(peer)
}

/// The key a `PURGE` request names (its target and Host, as a GET of it would have).
pub(crate) fn key_of_request(parts: &request::Parts, scheme: Scheme) -> CacheKey {
    CacheKey::for_request(scheme, &parts.uri, &parts.headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries() {
        let p = Purge::from_query("url=http%3A%2F%2FExample.com%2Fa%3Fb%3D1").unwrap();
        assert_eq!(
            p.target,
            Target::Url(key_of("http://example.com/a?b=1").unwrap())
        );
        assert!(!p.soft);
        let p = Purge::from_query("tag=post-57&soft=1").unwrap();
        assert_eq!(p.target, Target::Tag("post-57".into()));
        assert!(p.soft);
        let p = Purge::from_query("prefix=http://example.com/wiki/").unwrap();
        assert!(matches!(p.target, Target::Prefix(k) if k.as_str() == "http://example.com/wiki/"));
        for bad in [
            "",
            "url=/relative",
            "url=http://a/&tag=x",
            "what=1",
            "tag=",
            "url=ftp://a/b",
        ] {
            assert!(Purge::from_query(bad).is_err(), "{bad}");
        }
    }
}

//! Purges that outlive the moment: a *ban* says "what matches this, written before
//! then, is gone (or stale)". Memory applies a purge at once; the tiers below it
//! (levee-disk, levee-redis) also keep the ban and apply it to every record they read
//! that was written before it, so a purge reaches copies that were not in memory, that a
//! crash left on disk, or that another node wrote to Redis. Bans travel between nodes
//! and into the disk tier's log as one line of text ([`Ban::to_line`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use crate::codec::{unix_ms, Decoded};
use crate::entry::{Entry, PURGED_NOT, PURGED_SERVE_STALE, PURGED_VALIDATE};
use crate::key::{CacheKey, KeyRef};

/// What a ban does to what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BanMode {
    /// Marked stale, served while one revalidation runs (an operator's soft purge).
    Stale,
    /// Marked stale, validated before it is served again (an edit elsewhere on the site).
    Validate,
    /// Removed.
    Remove,
}

/// What a ban matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BanTarget {
    /// Every variant of one URL of one site.
    Url(CacheKey),
    /// Every URL of the key's site that starts with the key's URL.
    Prefix(CacheKey),
    /// Every response tagged so, on one site or (None) all.
    Tag { tag: String, site: Option<usize> },
    /// Every HTML page of one host of one site (what an edit makes stale).
    HostHtml { site: usize, host: String },
}

/// One purge, with when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    /// Wall-clock milliseconds (levee's clock): records written at or before it match.
    pub at_ms: u64,
    pub mode: BanMode,
    pub target: BanTarget,
}

impl Ban {
    /// A ban made now.
    pub fn now(mode: BanMode, target: BanTarget) -> Ban {
        Ban {
            at_ms: unix_ms(crate::clock::system_now()),
            mode,
            target,
        }
    }

    /// Whether the ban applies to a stored response of `key`.
    pub fn matches(&self, key: KeyRef<'_>, entry: &Entry) -> bool {
        match &self.target {
            BanTarget::Url(k) => key == *k,
            BanTarget::Prefix(p) => p.site() == key.site() && key.as_str().starts_with(p.as_str()),
            BanTarget::Tag { tag, site } => {
                site.is_none_or(|s| s == key.site()) && entry.tags().iter().any(|t| **t == **tag)
            }
            BanTarget::HostHtml { site, host } => {
                *site == key.site() && key.host() == host && entry.is_html()
            }
        }
    }

    /// Whether it may concern anything stored under `key` (without looking at entries).
    pub fn may_match_key(&self, key: &CacheKey) -> bool {
        match &self.target {
            BanTarget::Url(k) => k == key,
            BanTarget::Prefix(p) => p.site() == key.site() && key.as_str().starts_with(p.as_str()),
            BanTarget::Tag { site, .. } => site.is_none_or(|s| s == key.site()),
            BanTarget::HostHtml { site, host } => *site == key.site() && key.host() == host,
        }
    }

    /// One line: `at mode kind site argument`. Arguments are URLs, host names and tags,
    /// which come from header values: they hold no line breaks.
    pub fn to_line(&self) -> String {
        let mode = match self.mode {
            BanMode::Stale => "stale",
            BanMode::Validate => "validate",
            BanMode::Remove => "remove",
        };
        let (kind, site, arg) = match &self.target {
            BanTarget::Url(k) => ("url", k.site().to_string(), k.as_str()),
            BanTarget::Prefix(k) => ("prefix", k.site().to_string(), k.as_str()),
            BanTarget::Tag { tag, site } => (
                "tag",
                site.map_or_else(|| "-".to_string(), |s| s.to_string()),
                tag.as_str(),
            ),
            BanTarget::HostHtml { site, host } => ("host-html", site.to_string(), host.as_str()),
        };
        format!("{} {mode} {kind} {site} {arg}", self.at_ms)
    }

    /// Reads [`Ban::to_line`] back; None for anything else.
    pub fn from_line(line: &str) -> Option<Ban> {
        let mut f = line.trim_end_matches(['\r', '\n']).splitn(5, ' ');
        let at_ms = f.next()?.parse().ok()?;
        let mode = match f.next()? {
            "stale" => BanMode::Stale,
            "validate" => BanMode::Validate,
            "remove" => BanMode::Remove,
            _ => return None,
        };
        let kind = f.next()?;
        let site = f.next()?;
        let arg = f.next()?;
        if arg.contains(['\r', '\n']) {
            return None;
        }
        let site_n = || site.parse::<usize>().ok();
        let target = match kind {
            "url" => BanTarget::Url(CacheKey::stored(arg, site_n()?)),
            "prefix" => BanTarget::Prefix(CacheKey::stored(arg, site_n()?)),
            "tag" => BanTarget::Tag {
                tag: arg.to_string(),
                site: if site == "-" { None } else { Some(site_n()?) },
            },
            "host-html" => BanTarget::HostHtml {
                site: site_n()?,
                host: arg.to_string(),
            },
            _ => return None,
        };
        Some(Ban {
            at_ms,
            mode,
            target,
        })
    }
}

/// The bans a tier applies to what it reads, for as long as a record written before
/// them may still be read. Bounded: beyond `MAX_BANS` the oldest go (the disk tier's
/// sweep has applied them to its files by then; a Redis record outlives a ban only for
/// its own TTL).
#[derive(Debug, Clone, Default)]
pub struct Bans(Arc<RwLock<Vec<Ban>>>);

const MAX_BANS: usize = 10_000;

impl Bans {
    pub fn new() -> Bans {
        Bans::default()
    }

    pub fn add(&self, ban: Ban) {
        let Ok(mut list) = self.0.write() else { return };
        // Kept in time order: nodes' bans arrive interleaved.
        let at = list.partition_point(|b| b.at_ms <= ban.at_ms);
        list.insert(at, ban);
        if list.len() > MAX_BANS {
            let extra = list.len() - MAX_BANS;
            list.drain(..extra);
        }
    }

    /// Drops bans older than `horizon` (no record written before then is kept).
    pub fn forget_before(&self, horizon: SystemTime) {
        let h = unix_ms(horizon);
        if let Ok(mut list) = self.0.write() {
            list.retain(|b| b.at_ms >= h);
        }
    }

    pub fn len(&self) -> usize {
        self.0.read().map_or(0, |l| l.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bans made since `written` (inclusive), oldest first.
    pub fn since(&self, written: SystemTime) -> Vec<Ban> {
        let w = unix_ms(written);
        let Ok(list) = self.0.read() else {
            return Vec::new();
        };
        let from = list.partition_point(|b| b.at_ms < w);
        list[from..].to_vec()
    }

    /// Applies the bans made since the record was written: removes the variants a ban
    /// removes, marks stale the ones a soft ban matches. False when nothing is left.
    pub fn apply(&self, record: &mut Decoded) -> bool {
        // Read in place, under the read lock: a record written long ago may face
        // thousands of bans, which a copy per read would allocate again each time.
        let Ok(list) = self.0.read() else {
            return !record.variants.is_empty();
        };
        let w = unix_ms(record.written);
        let bans = &list[list.partition_point(|b| b.at_ms < w)..];
        if bans.is_empty() {
            return !record.variants.is_empty();
        }
        let key = &record.key;
        record.variants.retain(|e| {
            let mut worst = None;
            for b in bans.iter().filter(|b| b.matches(key.as_ref(), e)) {
                worst = worst.max(Some(b.mode));
            }
            match worst {
                Some(BanMode::Remove) => false,
                Some(BanMode::Validate) => {
                    e.soft_purged.store(PURGED_VALIDATE, Ordering::Relaxed);
                    true
                }
                Some(BanMode::Stale) => {
                    let _ = e.soft_purged.compare_exchange(
                        PURGED_NOT,
                        PURGED_SERVE_STALE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    true
                }
                None => true,
            }
        });
        !record.variants.is_empty()
    }
}

/// How long bans are kept when nothing says otherwise: a day covers the TTL plus stale
/// window of the pages levee is put in front of; longer-lived records are checked
/// against what is left.
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scheme;

    fn key(path: &str, site: usize) -> CacheKey {
        let mut h = http::HeaderMap::new();
        h.insert("host", http::HeaderValue::from_static("a.test"));
        CacheKey::for_request(Scheme::Http, &path.parse().unwrap(), &h).in_site(site)
    }

    #[test]
    fn lines_read_back() {
        for target in [
            BanTarget::Url(key("/a%20b?c", 2)),
            BanTarget::Prefix(key("/x/", 0)),
            BanTarget::Tag {
                tag: "t 1".into(),
                site: None,
            },
            BanTarget::Tag {
                tag: "t".into(),
                site: Some(4),
            },
            BanTarget::HostHtml {
                site: 1,
                host: "a.test".into(),
            },
        ] {
            for mode in [BanMode::Stale, BanMode::Validate, BanMode::Remove] {
                let b = Ban {
                    at_ms: 1234,
                    mode,
                    target: target.clone(),
                };
                assert_eq!(Ban::from_line(&b.to_line()), Some(b));
            }
        }
        for bad in ["", "x remove url 0 u", "1 nuke url 0 u", "1 remove url x u"] {
            assert_eq!(Ban::from_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn prefixes_stay_in_their_site() {
        let b = Ban::now(BanMode::Remove, BanTarget::Prefix(key("/x/", 1)));
        assert!(b.may_match_key(&key("/x/y", 1)));
        assert!(!b.may_match_key(&key("/x/y", 0)));
        assert!(!b.may_match_key(&key("/y", 1)));
    }
}

//! Names and small formats: the Redis keys of a cache key, the head of a chunked
//! record, lock tokens, the URL as logs show it. Pure, unit-tested here.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use levee_cache::codec::key_hex;
use levee_cache::CacheKey;

use crate::config::RedisError;

/// Records larger than this are stored in chunks of this size, so that no Redis value
/// is huge (Redis serves one command at a time: a 50 MiB value would hold up
/// everyone's lookups while it is copied).
pub(crate) const CHUNK: usize = 512 * 1024;

/// More chunks than this (1 GiB) is not a head levee wrote.
pub(crate) const MAX_CHUNKS: u32 = 2048;

/// The first bytes of a chunked record's head; a whole record starts with the codec's
/// own magic (`LVR1`).
pub(crate) const HEAD_MAGIC: &[u8; 4] = b"LVRC";

/// The key names of one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
        }
    }

    /// The record (or a large record's head). The hash in braces is the key's Redis
    /// Cluster hash tag: a record's head and chunks share one slot, so that one MGET
    /// reads them all there too.
    pub(crate) fn record(&self, key: &CacheKey) -> String {
        format!("{}o:{{{}}}", self.prefix, key_hex(key))
    }

    /// Chunk `i` of generation `generation` of the record named `record`.
    pub(crate) fn chunk(record: &str, generation: u64, i: u32) -> String {
        format!("{record}:{generation:016x}:{i}")
    }

    /// The fill lock.
    pub(crate) fn lock(&self, key: &CacheKey) -> String {
        format!("{}l:{{{}}}", self.prefix, key_hex(key))
    }

    /// The sorted set of recent bans.
    pub(crate) fn bans(&self) -> String {
        format!("{}bans", self.prefix)
    }

    /// The sorted set of proven sessions' hashes.
    pub(crate) fn sessions(&self) -> String {
        format!("{}sessions", self.prefix)
    }

    /// The pub/sub channel of proven sessions.
    pub(crate) fn proofs(&self) -> String {
        format!("{}proofs", self.prefix)
    }

    /// The pub/sub channel of bans.
    pub(crate) fn channel(&self) -> String {
        format!("{}purge", self.prefix)
    }

    /// The leases of the fleet's nodes on one backend (fleet.rs).
    pub(crate) fn fleet(&self, scope: &str) -> String {
        format!("{}fleet:{scope}", self.prefix)
    }

    /// The pub/sub channel where nodes ask each other to renew their leases now.
    pub(crate) fn fleet_channel(&self) -> String {
        format!("{}fleet", self.prefix)
    }
}

/// The head of a chunked record: which generation of chunks, how many, how many bytes
/// in all. `LVRC | generation u64 | count u32 | total u64`, little-endian; the record's
/// own checksum (in its first chunk) covers the whole once reassembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) generation: u64,
    pub(crate) count: u32,
    pub(crate) total: u64,
}

impl Head {
    pub(crate) const LEN: usize = 4 + 8 + 4 + 8;

    /// The head of a record of `total` bytes.
    pub(crate) fn for_len(total: usize, generation: u64) -> Head {
        Head {
            generation,
            count: u32::try_from(total.div_ceil(CHUNK)).unwrap_or(u32::MAX),
            total: total as u64,
        }
    }

    pub(crate) fn to_bytes(self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Head::LEN);
        b.extend_from_slice(HEAD_MAGIC);
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.extend_from_slice(&self.count.to_le_bytes());
        b.extend_from_slice(&self.total.to_le_bytes());
        b
    }

    /// Reads a head back: None for anything that is not one, or names an impossible
    /// number of chunks or bytes.
    pub(crate) fn parse(b: &[u8]) -> Option<Head> {
        if b.len() != Head::LEN || &b[..4] != HEAD_MAGIC {
            return None;
        }
        let generation = u64::from_le_bytes(b[4..12].try_into().ok()?);
        let count = u32::from_le_bytes(b[12..16].try_into().ok()?);
        let total = u64::from_le_bytes(b[16..24].try_into().ok()?);
        let head = Head {
            generation,
            count,
            total,
        };
        let fits = (2..=MAX_CHUNKS).contains(&count)
            && usize::try_from(total).is_ok_and(|t| Head::for_len(t, generation) == head);
        fits.then_some(head)
    }

    /// The expected length of chunk `i`.
    pub(crate) fn chunk_len(&self, i: u32) -> usize {
        let start = u64::from(i) * CHUNK as u64;
        (self.total.saturating_sub(start)).min(CHUNK as u64) as usize
    }
}

/// A random 64-bit number (std's randomly keyed hasher, over a counter and the time):
/// node ids, lock tokens, chunk generations. Unpredictable enough that two nodes never
/// pick the same; not a secret.
pub(crate) fn random() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A lock token: `node:random:acquired_ms`. The time (the holder's clock, which also
/// dates the record it writes) tells waiters which records are new.
pub(crate) fn lock_token(node: &str, acquired_ms: u64) -> String {
    format!("{node}:{:016x}:{acquired_ms}", random())
}

/// When the lock whose token is `token` was taken, if the token is one of ours.
pub(crate) fn token_time(token: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(token).ok()?;
    s.rsplit(':').next()?.parse().ok()
}

/// A client for `url`, checked (scheme, host) but not connected.
pub(crate) fn client(url: &str) -> Result<redis::Client, RedisError> {
    let bad = |reason: String| RedisError::Url {
        url: shown(url),
        reason,
    };
    if redis::parse_redis_url(url).is_none() {
        return Err(bad("unknown scheme or not a URL".to_string()));
    }
    if url.starts_with("rediss:") || url.starts_with("valkeys:") {
        // redis-rs builds its TLS configuration on rustls's process-wide provider;
        // levee's other TLS code names ring explicitly and installs none.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }
    redis::Client::open(url).map_err(|e| bad(e.to_string()))
}

/// `url` with its password, if any, replaced by `***`: what logs and errors show.
pub fn shown(url: &str) -> String {
    if url.contains("+sentinel://") {
        return shown_sentinel(url);
    }
    match redis::parse_redis_url(url) {
        Some(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        // Not a URL: shown as given, less anything before an `@`.
        None => match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_string(),
        },
    }
}

/// A Sentinel URL as logs show it: the password replaced by `***`.
fn shown_sentinel(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => format!("{userinfo}@{hosts}"),
        },
        None => authority.to_string(),
    };
    if path.is_empty() {
        format!("{scheme}://{authority}")
    } else {
        format!("{scheme}://{authority}/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_is_shown_without_its_password() {
        assert_eq!(
            shown_sentinel("redis+sentinel://app:secret@h1:1,h2:2/mymaster"),
            "redis+sentinel://app:***@h1:1,h2:2/mymaster"
        );
        assert_eq!(
            shown_sentinel("redis+sentinel://h1:1/m"),
            "redis+sentinel://h1:1/m"
        );
    }

    #[test]
    fn names_put_the_hash_in_a_hash_tag() {
        let mut h = http::HeaderMap::new();
        h.insert("host", http::HeaderValue::from_static("a.test"));
        let key =
            CacheKey::for_request(levee_cache::Scheme::Http, &http::Uri::from_static("/x"), &h);
        let hex = key_hex(&key);
        let keys = Keys::new("levee:");
        let record = keys.record(&key);
        assert_eq!(record, format!("levee:o:{{{hex}}}"));
        assert_eq!(
            Keys::chunk(&record, 0xab, 2),
            format!("levee:o:{{{hex}}}:00000000000000ab:2")
        );
        assert_eq!(keys.lock(&key), format!("levee:l:{{{hex}}}"));
        assert_eq!(
            (keys.bans(), keys.channel()),
            ("levee:bans".into(), "levee:purge".into())
        );
    }

    #[test]
    fn heads_read_back_and_refuse_what_does_not_add_up() {
        let h = Head::for_len(2 * 1024 * 1024 + 1, 7);
        assert_eq!(h.count, 5);
        assert_eq!(Head::parse(&h.to_bytes()), Some(h));
        assert_eq!(h.chunk_len(0), CHUNK);
        assert_eq!(h.chunk_len(4), 1);
        // A count that does not match the length, a single chunk, too many, garbage.
        let mut lying = h;
        lying.count = 9;
        assert_eq!(Head::parse(&lying.to_bytes()), None);
        assert_eq!(Head::parse(&Head::for_len(100, 1).to_bytes()), None);
        let huge = Head::for_len(CHUNK * (MAX_CHUNKS as usize + 1), 1);
        assert_eq!(Head::parse(&huge.to_bytes()), None);
        for bad in [&b""[..], b"LVRC", b"LVR1xxxxxxxxxxxxxxxxxxxx", &[0xff; 24]] {
            assert_eq!(Head::parse(bad), None);
        }
    }

    #[test]
    fn tokens_carry_their_time_and_differ() {
        let (a, b) = (lock_token("n1", 1234), lock_token("n1", 1234));
        assert_ne!(a, b);
        assert_eq!(token_time(a.as_bytes()), Some(1234));
        assert_eq!(token_time(b"garbage"), None);
        assert_eq!(token_time(&[0xff, 0xfe]), None);
    }

    #[test]
    fn urls_are_checked_and_shown_without_passwords() {
        for good in [
            "redis://127.0.0.1:6379/0",
            "redis://:secret@cache.internal:6380/2",
            "rediss://cache.internal",
            "redis+unix:///run/redis.sock",
        ] {
            assert!(client(good).is_ok(), "{good}");
        }
        for bad in [
            "127.0.0.1:6379",
            "http://127.0.0.1:6379",
            "redis://",
            "redis://0.0.0.0:6379",
            "",
        ] {
            let e = client(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.to_string().contains("redis://host:port/db"), "{e}");
        }
        let e = client("http://u:hunter2@h:1").err().unwrap().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        assert_eq!(
            shown("redis://user:hunter2@h:6379/1"),
            "redis://user:***@h:6379/1"
        );
        assert_eq!(shown("redis://h:6379/1"), "redis://h:6379/1");
    }
}

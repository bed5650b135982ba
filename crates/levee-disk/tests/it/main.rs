//! levee-disk against real files and real threads, one test binary (the crash test
//! runs it again as the process it kills). Tests wait on state (`flush`, `scanned`),
//! never on time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bans;
mod bound;
mod crash;
mod open;
mod records;
mod torn;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE, VARY};
use http::StatusCode;
use levee_cache::codec::{unix_ms, Decoded};
use levee_cache::{clock, CacheKey, Entry, EntryParts, Freshness, VaryKey};
use levee_compress::Coding;
use levee_disk::{Disk, DiskConfig};

pub const DAY: Duration = Duration::from_secs(86400);

/// A stored response: `lang` makes it a variant (Vary: Accept-Language). Kept a minute
/// past its `lifetime`; a zero lifetime is not worth keeping at all.
pub fn entry(
    body: impl Into<Bytes>,
    lang: Option<&str>,
    tags: &[&str],
    content_type: &'static str,
    lifetime: Duration,
) -> Arc<Entry> {
    let mut resp = HeaderMap::new();
    resp.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.append("x-two", HeaderValue::from_static("1"));
    resp.append("x-two", HeaderValue::from_static("2"));
    let mut req = HeaderMap::new();
    if let Some(lang) = lang {
        resp.insert(VARY, HeaderValue::from_static("accept-language"));
        req.insert("accept-language", HeaderValue::from_str(lang).unwrap());
    }
    Arc::new(Entry::new(EntryParts {
        // The tiers write an entry under the key they are given (the record's); the
        // key an entry holds is the memory tier's, not read here.
        key: &key("/"),
        id: Entry::next_id(),
        status: StatusCode::OK,
        headers: &resp,
        body: body.into(),
        coding: Coding::Identity,
        levee_coded: None,
        vary: VaryKey::new(&resp, &req),
        freshness: Freshness {
            lifetime,
            retain: if lifetime.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_secs(60)
            },
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::ZERO,
        },
        initial_age: Duration::ZERO,
        response_time: clock::now(),
        tags: tags.iter().map(|&t| t.into()).collect(),
    }))
}

/// An HTML page kept a day.
pub fn page(body: &[u8]) -> Arc<Entry> {
    entry(body.to_vec(), None, &[], "text/html", DAY)
}

pub fn key(path: &str) -> CacheKey {
    CacheKey::stored(&format!("http://a.test{path}"), 0)
}

/// A disk cache directory that outlives the `Disk`s opened on it.
pub struct Cache {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub size: u64,
}

impl Cache {
    pub fn new(size: u64) -> Cache {
        // Every log line formatted: a field that locks what its caller holds would hang.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("levee_disk=debug")
            .with_test_writer()
            .try_init();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("disk");
        Cache {
            _tmp: tmp,
            root,
            size,
        }
    }

    pub fn open(&self) -> Disk {
        Disk::open(DiskConfig {
            path: self.root.clone(),
            size: self.size,
        })
        .unwrap()
    }

    /// Where `key`'s record lives.
    pub fn record(&self, key: &CacheKey) -> PathBuf {
        let hex = levee_cache::codec::key_hex(key);
        self.root.join(&hex[..2]).join(hex)
    }

    /// As if levee had crashed: no clean mark, so the next open checks every record.
    pub fn forget_clean_shutdown(&self) {
        let _ = std::fs::remove_file(self.root.join("clean"));
    }

    pub fn ban_log(&self) -> String {
        std::fs::read_to_string(self.root.join("bans")).unwrap()
    }
}

/// Every file in the 256 subdirectories, with its length.
pub fn files(root: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for b in 0..256 {
        let Ok(rd) = std::fs::read_dir(root.join(format!("{b:02x}"))) else {
            continue;
        };
        for e in rd.flatten() {
            out.push((e.path(), e.metadata().unwrap().len()));
        }
    }
    out
}

/// Bytes the records take on disk, in 4 KiB blocks, temp files included.
pub fn du(root: &Path) -> u64 {
    files(root)
        .iter()
        .map(|(_, len)| len.div_ceil(4096).max(1) * 4096)
        .sum()
}

/// Waits for levee's clock to pass `ms`: a record written in the millisecond of a ban
/// is one the ban covers.
pub fn after(ms: u64) {
    while unix_ms(clock::system_now()) <= ms {
        std::thread::yield_now();
    }
}

pub fn bodies(d: &Decoded) -> Vec<&[u8]> {
    d.variants.iter().map(|e| e.body_bytes()).collect()
}

/// Polls `done` until it holds (the writer thread's background work has no event to
/// wait for); fails after 20 s.
pub async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

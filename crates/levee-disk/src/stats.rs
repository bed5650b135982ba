//! What the disk tier counts, and the log's "once per kind" warnings.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A snapshot of the disk tier, for `/metrics` and tests. Counters count since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Records on disk (as far as the opening scan has seen, until `scan_done`).
    pub objects: u64,
    /// Their bytes, each file rounded up to 4 KiB blocks.
    pub bytes: u64,
    /// The configured bound on `bytes`.
    pub capacity: u64,
    /// `get`s answered with a record.
    pub hits: u64,
    /// `get`s answered None: absent, torn, another key's, expired or purged.
    pub misses: u64,
    /// Records renamed into place.
    pub writes: u64,
    /// `put`s not written: the queue was full, or the record was larger than `capacity`.
    pub write_dropped: u64,
    /// Records that could not be written (disk full, I/O errors).
    pub write_errors: u64,
    /// Files deleted for failing their checksum or format (torn by a crash, truncated,
    /// altered), or for holding another key than their name says.
    pub torn: u64,
    /// Records removed to keep `bytes` under `capacity`.
    pub evictions: u64,
    /// Records deleted past their keep-until.
    pub expired: u64,
    /// Records deleted by purges (bans) after they were written.
    pub purged: u64,
    /// Bans in the ban log, not yet applied to every record they may match.
    pub bans: u64,
    /// The opening scan has seen every file: `objects` and `bytes` are exact.
    pub scan_done: bool,
}

#[derive(Debug, Default)]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub writes: AtomicU64,
    pub write_dropped: AtomicU64,
    pub write_errors: AtomicU64,
    pub torn: AtomicU64,
    pub evictions: AtomicU64,
    pub expired: AtomicU64,
    pub purged: AtomicU64,
}

pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub fn add(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Ordering::Relaxed);
}

pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// The kinds of trouble the log hears about once (then at debug level): a torn file or
/// a full disk should not write a line per request.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Torn = 0,
    Read,
    Write,
    Dropped,
    TooLarge,
    Remove,
    BanLog,
    Stranger,
}

#[derive(Debug, Default)]
pub struct Warned(AtomicU32);

impl Warned {
    /// True the first time `kind` is seen.
    pub fn first(&self, kind: Kind) -> bool {
        let bit = 1 << kind as u32;
        self.0.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }
}

/// `tracing::warn!` the first time for its kind, `debug!` after.
macro_rules! warn_once {
    ($shared:expr, $kind:expr, $($arg:tt)+) => {
        if $shared.warned.first($kind) {
            tracing::warn!($($arg)+);
        } else {
            tracing::debug!($($arg)+);
        }
    };
}
pub(crate) use warn_once;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_warns_once() {
        let w = Warned::default();
        assert!(w.first(Kind::Torn));
        assert!(!w.first(Kind::Torn));
        assert!(w.first(Kind::Stranger));
        assert!(!w.first(Kind::Stranger));
        assert!(w.first(Kind::Write));
    }
}

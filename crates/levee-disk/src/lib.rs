//! STUB
use levee_cache::ban::Ban;
use levee_cache::codec::Decoded;
use levee_cache::{CacheKey, Entry};
use std::path::PathBuf;
use std::sync::Arc;
pub struct DiskConfig {
    pub path: PathBuf,
    pub size: u64,
}
#[derive(Clone)]
pub struct Disk;
#[derive(Debug)]
pub struct DiskError;
impl std::fmt::Display for DiskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stub")
    }
}
impl std::error::Error for DiskError {}
#[derive(Debug, Default, Clone)]
pub struct DiskStats {
    pub objects: u64,
    pub bytes: u64,
    pub capacity: u64,
    pub hits: u64,
    pub misses: u64,
    pub writes: u64,
    pub write_dropped: u64,
    pub write_errors: u64,
    pub torn: u64,
    pub evictions: u64,
    pub scan_done: bool,
}
impl Disk {
    pub fn open(_cfg: DiskConfig) -> Result<Disk, DiskError> {
        Ok(Disk)
    }
    pub async fn get(&self, _key: &CacheKey) -> Option<Decoded> {
        None
    }
    pub fn put(&self, _key: &CacheKey, _variants: &[Arc<Entry>]) {}
    pub fn ban(&self, _ban: Ban) {}
    pub fn stats(&self) -> DiskStats {
        DiskStats::default()
    }
    pub async fn flush(&self) {}
}

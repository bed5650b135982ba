//! STUB
use levee_cache::ban::Ban;
use levee_cache::codec::Decoded;
use levee_cache::{CacheKey, Entry};
use std::sync::Arc;
use std::time::Duration;
pub struct RedisConfig {
    pub urls: Vec<String>,
    pub prefix: String,
    pub op_timeout: Duration,
    pub lock_ttl: Duration,
}
#[derive(Clone)]
pub struct Redis;
pub struct LockGuard;
pub enum Lock {
    Acquired(LockGuard),
    Busy,
    Unavailable,
}
#[derive(Debug)]
pub struct RedisError;
impl std::fmt::Display for RedisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stub")
    }
}
impl std::error::Error for RedisError {}
#[derive(Debug, Default, Clone)]
pub struct RedisStats {
    pub up: bool,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub writes: u64,
    pub write_dropped: u64,
    pub locks_acquired: u64,
    pub locks_busy: u64,
    pub waits_served: u64,
    pub bans_received: u64,
    pub reconnects: u64,
}
impl Redis {
    pub fn connect(
        _cfg: RedisConfig,
        _on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
    ) -> Result<Redis, RedisError> {
        Ok(Redis)
    }
    pub async fn get(&self, _key: &CacheKey) -> Option<Decoded> {
        None
    }
    pub fn put(&self, _key: &CacheKey, _variants: &[Arc<Entry>]) {}
    pub async fn put_now(&self, _key: &CacheKey, _variants: &[Arc<Entry>]) {}
    pub async fn lock(&self, _key: &CacheKey) -> Lock {
        Lock::Unavailable
    }
    pub async fn wait_for(&self, _key: &CacheKey, _limit: Duration) -> Option<Decoded> {
        None
    }
    pub fn publish(&self, _ban: Ban) {}
    pub fn is_up(&self) -> bool {
        false
    }
    pub fn stats(&self) -> RedisStats {
        RedisStats::default()
    }
}

//! What the tier is given, and why it can refuse it.

use std::time::Duration;

/// How to reach Redis and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// One URL: a single server (`redis://host:port/db`, `rediss://` for TLS,
    /// `redis+unix:///path`; a Cluster node is taken as the Cluster's seed), or
    /// Sentinel (`redis+sentinel://host1:26379,host2:26379/mymaster`). Several: a
    /// Redis Cluster's seed nodes (target.rs).
    pub urls: Vec<String>,
    /// Prepended to every key and to the channel. Default: `levee:`.
    pub prefix: String,
    /// The longest any one Redis operation may take before levee goes on without it.
    /// Default: 250 ms.
    pub op_timeout: Duration,
    /// How long a cross-node fill lock lasts if its holder never releases it (it
    /// crashed). Default: 30 s; levee passes its backend timeouts.
    pub lock_ttl: Duration,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        RedisConfig {
            urls: Vec::new(),
            prefix: "levee:".to_string(),
            op_timeout: Duration::from_millis(250),
            lock_ttl: Duration::from_secs(30),
        }
    }
}

/// Why the tier could not be set up (never because Redis is down: that is handled
/// while running).
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error(
        "`{url}` is not a Redis URL ({reason}): expected redis://host:port/db, \
         rediss://host:port/db (TLS), redis+unix:///path/to/socket, \
         redis+sentinel://host1:26379,host2:26379/mymaster (Sentinel) or several \
         redis://host:port (a Cluster's nodes)"
    )]
    Url { url: String, reason: String },
    #[error("no Redis URL given: expected redis://host:port/db")]
    NoUrl,
    #[error("the Redis tier must be started inside a tokio runtime (a bug in levee)")]
    NoRuntime,
}

//! The tiers below memory (`[cache] disk_path`, `disk_size`, `redis`): checked here, run
//! by levee-disk and levee-redis.

use crate::convert::size;
use crate::{ConfigError, OneOrMany};

/// Where the disk tier keeps responses, and how many bytes of them at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSettings {
    pub path: std::path::PathBuf,
    pub size: DiskSize,
}

/// The disk tier's bound: bytes, or `auto`, sized by the filesystem it is on when levee
/// starts (levee-proxy's tiers.rs: a tenth of the filesystem, at most 10 GiB, at most
/// half of its free space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskSize {
    Bytes(u64),
    Auto,
}

impl std::fmt::Display for DiskSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiskSize::Bytes(n) => write!(f, "{n} bytes"),
            DiskSize::Auto => f.write_str("auto"),
        }
    }
}

/// The disk tier (when `disk_path` is set) and the Redis URLs (empty: no shared tier).
pub(crate) fn from_options(
    disk_path: Option<String>,
    disk_size: Option<String>,
    redis: Option<OneOrMany>,
) -> Result<(Option<DiskSettings>, Vec<String>), ConfigError> {
    let disk_size = match disk_size {
        Some(v) if v.trim().eq_ignore_ascii_case("auto") => DiskSize::Auto,
        v => DiskSize::Bytes(size("cache.disk_size", v)?),
    };
    let disk = match disk_path {
        Some(p) if !p.trim().is_empty() => {
            if disk_size == DiskSize::Bytes(0) {
                return Err(ConfigError::invalid(
                    "cache.disk_size",
                    "the disk tier needs room: give a size like 10GiB, or \"auto\", or drop disk_path to turn it off",
                ));
            }
            Some(DiskSettings {
                path: p.into(),
                size: disk_size,
            })
        }
        _ => None,
    };
    let redis: Vec<String> = redis
        .map(OneOrMany::into_vec)
        .unwrap_or_default()
        .into_iter()
        .filter(|u| !u.trim().is_empty())
        .collect();
    for url in &redis {
        let ok = [
            "redis://",
            "rediss://",
            "redis+unix://",
            "unix://",
            "redis+sentinel://",
            "rediss+sentinel://",
        ]
        .iter()
        .any(|s| url.len() > s.len() && url[..s.len()].eq_ignore_ascii_case(s));
        if !ok {
            return Err(ConfigError::invalid(
                "cache.redis",
                format!(
                    "`{url}` is not a Redis URL; write it like redis://127.0.0.1:6379 (rediss:// for TLS; \
                     redis+sentinel://host1:26379,host2:26379/mymaster through Sentinel; several \
                     redis://host:port for a Cluster's nodes)"
                ),
            ));
        }
    }
    if redis.len() > 1 {
        for url in &redis {
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("redis://") || lower.starts_with("rediss://")) {
                return Err(ConfigError::invalid(
                    "cache.redis",
                    format!(
                        "several URLs are a Redis Cluster's nodes, each redis://host:port (or rediss://), \
                         but `{url}` is not one; give a Sentinel URL alone, as \
                         redis+sentinel://host1:26379,host2:26379/mymaster"
                    ),
                ));
            }
        }
    }
    Ok((disk, redis))
}

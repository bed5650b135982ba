//! levee's shared cache tier: several levee nodes in front of one site share their
//! cached records, their fills and their purges through one Redis (or Valkey): one
//! server, a primary watched by Sentinel, or a Redis Cluster (target.rs).
//!
//! - **Records** ([`Redis::get`], [`Redis::put`]): every variant of a key as one
//!   self-checking record (`levee_cache::codec`), stored with the time it is worth
//!   keeping (freshness plus stale window) as its TTL; large records in chunks.
//! - **Fill locks** ([`Redis::lock`], [`Redis::wait_for`]): one backend fetch per key
//!   across all nodes; the others wait for its record, or fetch themselves when Redis
//!   cannot tell.
//! - **Purges** ([`Redis::publish`]): a ban made on one node reaches every other node's
//!   local tiers (pub/sub) and applies to every record read from Redis afterwards.
//!
//! Redis is never needed to serve: while it is down or slow, every call returns at once
//! or within `op_timeout` with "nothing here", the node serves from its local tiers,
//! and a background task reconnects. Whatever is read from Redis is untrusted (any node,
//! or anyone who can reach it, may write there): records are checked by their checksum
//! and every field, and nothing read can make this crate panic.
//!
//! Key layout (`P` is the prefix, `levee:` by default; `H` the key's 128-bit hash in
//! hex, `levee_cache::codec::key_hex`):
//!
//! | key | what |
//! | --- | --- |
//! | `P o:{H}` | the record, or for one over 512 KiB a head naming its chunks |
//! | `P o:{H}:G:I` | chunk `I` of generation `G` of a large record |
//! | `P l:{H}` | the fill lock: a node's token, `NX PX lock_ttl` |
//! | `P bans` | recent bans: a sorted set by time, trimmed to a day |
//! | `P purge` | the pub/sub channel bans are published on |
//! | `P sessions` | proven sessions' hashes: a sorted set by time, trimmed (sessions.rs) |
//! | `P proofs` | the pub/sub channel proofs are published on |
//! | `P fleet:S` | the fleet's leases on the backend of scope `S`: a hash, a field per node (fleet.rs) |
//! | `P fleet` | the pub/sub channel where nodes ask each other to renew their leases now |
//!
//! (`{H}`: the hash is the key's Redis Cluster hash tag, so a record's head, chunks and
//! fill lock share a slot; the prefix should hold no braces. No pipeline or script
//! spans two slots.)

mod config;
mod conn;
mod fleet;
mod inner;
mod keys;
mod link;
mod lock;
mod record;
mod sessions;
mod stats;
mod sync;
mod target;
mod tier;

pub use config::{RedisConfig, RedisError};
pub use fleet::{read_fleets, FleetView, Lease, SharedView};
pub use inner::ProofLimits;
pub use keys::shown as url_for_logs;
pub use lock::{Lock, LockGuard};
pub use stats::RedisStats;
pub use target::Mode;

/// Whether `urls` name a shared tier levee can reach (one server, Sentinel, a Cluster),
/// without connecting: what `levee serve --check` and startup refuse.
pub fn check_urls(urls: &[String]) -> Result<(), RedisError> {
    target::Target::parse(urls).map(|_| ())
}
pub use tier::{OnProof, Redis};

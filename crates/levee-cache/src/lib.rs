//! levee's shared HTTP cache (RFC 9111): the storage policy, cache keys and Vary,
//! bounded storage with TinyLFU eviction, and request coalescing.
//!
//! Nothing here knows about sockets: `levee-proxy` drives it.

pub mod cache_control;
pub mod conditional;
pub mod entry;
pub mod fill;
pub mod policy;
pub mod store;

pub use cache_control::CacheControl;
pub use entry::{Entry, LeveeCoded, StoredHeaders, VaryKey};
pub use fill::{Coalescer, Fill, Incomplete, Reader};
pub use policy::{Freshness, NotStored, PolicyConfig, Storable};
pub use store::Store;

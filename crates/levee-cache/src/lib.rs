//! levee's shared HTTP cache (RFC 9111): the storage policy, cache keys and Vary,
//! bounded storage (the memory tier, store.rs), request coalescing, and the ranges a stored
//! response answers (RFC 9110 §14).
//!
//! Nothing here knows about sockets: `levee-proxy` drives it.

pub mod after_fetch;
pub mod ban;
pub mod cache_control;
pub mod clock;
pub mod codec;
pub mod conditional;
pub mod date;
pub mod entry;
pub mod fill;
pub mod headers;
mod interned;
pub mod key;
pub mod lookup;
pub mod policy;
pub mod proof;
pub mod range;
pub mod store;
pub mod tags;
pub mod targeted;
pub mod thin;

pub use after_fetch::{after_fetch, AfterFetch, Asked, Fetched, HitForPass};
pub use cache_control::CacheControl;
pub use entry::{
    Derived, DerivedBody, DerivedBudget, DerivedForms, Entry, EntryParts, Kept, LeveeCoded,
    StoredHeaders,
};
pub use fill::{Coalescer, Fill, FillGuard, Incomplete, Reader};
pub use key::{CacheKey, Scheme, VaryKey};
pub use lookup::{lookup, stale_on_error, stale_while_busy, Lookup};
pub use policy::{Freshness, NotStored, PolicyConfig, Storable};
pub use store::Store;

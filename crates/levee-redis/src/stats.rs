//! What the tier counts, for `/metrics`: plain atomics, read as one snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the tier's counters (totals since start, except `up`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Whether Redis is connected now.
    pub up: bool,
    /// Gets answered with a record.
    pub hits: u64,
    /// Gets that found nothing usable (absent, expired, banned).
    pub misses: u64,
    /// Operations that failed: Redis down, slow (beyond `op_timeout`) or answering an
    /// error, and records that are damaged or another key's.
    pub errors: u64,
    /// Records written.
    pub writes: u64,
    /// Records not written: Redis down, or too many writes in flight.
    pub write_dropped: u64,
    /// Fill locks taken by this node.
    pub locks_acquired: u64,
    /// Fill locks found held by another node.
    pub locks_busy: u64,
    /// Waits for another node's fill that ended with its record.
    pub waits_served: u64,
    /// Bans received from other nodes.
    pub bans_received: u64,
    /// Connections re-established after Redis was lost.
    pub reconnects: u64,
    /// Primaries replaced: Sentinel named another primary, or a Cluster replica took
    /// over its primary's slots.
    pub failovers: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    errors: AtomicU64,
    writes: AtomicU64,
    write_dropped: AtomicU64,
    locks_acquired: AtomicU64,
    locks_busy: AtomicU64,
    waits_served: AtomicU64,
    bans_received: AtomicU64,
    reconnects: AtomicU64,
    failovers: AtomicU64,
}

macro_rules! count {
    ($($name:ident => $field:ident),* $(,)?) => {
        impl Counters {
            $(pub(crate) fn $name(&self) {
                self.$field.fetch_add(1, Ordering::Relaxed);
            })*
        }
    };
}

count! {
    hit => hits,
    miss => misses,
    error => errors,
    write => writes,
    write_dropped => write_dropped,
    lock_acquired => locks_acquired,
    lock_busy => locks_busy,
    wait_served => waits_served,
    ban_received => bans_received,
    reconnect => reconnects,
    failover => failovers,
}

impl Counters {
    pub(crate) fn snapshot(&self, up: bool) -> RedisStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RedisStats {
            up,
            hits: get(&self.hits),
            misses: get(&self.misses),
            errors: get(&self.errors),
            writes: get(&self.writes),
            write_dropped: get(&self.write_dropped),
            locks_acquired: get(&self.locks_acquired),
            locks_busy: get(&self.locks_busy),
            waits_served: get(&self.waits_served),
            bans_received: get(&self.bans_received),
            reconnects: get(&self.reconnects),
            failovers: get(&self.failovers),
        }
    }
}

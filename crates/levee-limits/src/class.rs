//! The classes of backend work and their counters.

use std::sync::atomic::{AtomicU64, AtomicUsize};

use crate::client_net::ClientNet;

/// What a request is worth to people, for the backend's scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A revalidation of a stored page: serves everyone.
    Shared,
    /// A request whose session the backend gave out (proven), or whose credentials it
    /// accepted: a person's.
    Session(SessionOf),
    /// Anything else that reaches the backend without a session: serves one client.
    Anonymous(ClientNet),
}

impl Class {
    pub const LABELS: [&'static str; 3] = ["shared", "session", "anonymous"];

    pub(super) fn index(self) -> usize {
        match self {
            Class::Shared => 0,
            Class::Session(_) => 1,
            Class::Anonymous(_) => 2,
        }
    }
}

/// Whose session a request is: its client network and the session itself (a keyed
/// hash of its value), for the shares within the session class (people.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOf {
    pub net: ClientNet,
    pub who: u64,
}

/// Counters per class, read without the lock by `/metrics`.
#[derive(Default)]
pub struct ClassStats {
    pub admitted: [AtomicU64; 3],
    pub in_flight: [AtomicUsize; 3],
    pub queued: [AtomicUsize; 3],
    /// Time spent waiting for a slot, in microseconds, by those admitted.
    pub wait_micros: [AtomicU64; 3],
    /// By [`Refusal::index`].
    pub refused: [AtomicU64; 5],
    /// People's requests beyond their session's share, scheduled as anonymous work.
    pub over_share: AtomicU64,
}

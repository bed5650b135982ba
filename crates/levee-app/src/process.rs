//! One process of the pool and its place (slot): what the pool leases and the
//! supervisor starts, watches and replaces.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// One running process.
pub(crate) struct Instance {
    pub(crate) addr: SocketAddr,
    pub(crate) pid: u32,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) served: AtomicU64,
    /// Set by [`Lease::kill`] and [`Lease::refused`]: the supervisor kills and replaces
    /// the process.
    pub(crate) kill: Notify,
    /// Why it is killed: it refused a connection (else a request ran over its time).
    pub(crate) refused: AtomicBool,
    /// Kept-alive connections to it, waiting for the next request: never more than
    /// `concurrency` over all of levee's threads, so that a process that serves one
    /// connection at a time is never sent a second while the first sits idle. Opaque
    /// here (the caller's HTTP client connection).
    pub(crate) idle: Mutex<Vec<Box<dyn Any + Send>>>,
    pub(crate) concurrency: usize,
}

impl Instance {
    /// A process that just became ready on `addr`, serving `concurrency` at once.
    pub(crate) fn new(addr: SocketAddr, pid: u32, concurrency: usize) -> Instance {
        Instance {
            addr,
            pid,
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            kill: Notify::new(),
            refused: AtomicBool::new(false),
            idle: Mutex::new(Vec::new()),
            concurrency: concurrency.max(1),
        }
    }
}

/// One place in the pool, and the process that holds it now.
pub(crate) struct Slot {
    pub(crate) index: usize,
    /// Takes new requests; `None` while (re)starting.
    pub(crate) current: Mutex<Option<Arc<Instance>>>,
    pub(crate) restarts: AtomicU64,
    pub(crate) recycled: AtomicU64,
    pub(crate) served: AtomicU64,
    /// Asked to replace its process (a reload).
    pub(crate) replace: AtomicBool,
}

impl Slot {
    pub(crate) fn current(&self) -> Option<Arc<Instance>> {
        self.current.lock().ok().and_then(|c| c.clone())
    }
    /// Takes `inst` out of rotation at once, if it is still the current process.
    pub(crate) fn withdraw(&self, inst: &Arc<Instance>) {
        if let Ok(mut c) = self.current.lock() {
            if c.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, inst)) {
                *c = None;
            }
        }
    }
    pub(crate) fn publish(&self, instance: Option<Arc<Instance>>) {
        if let Ok(mut c) = self.current.lock() {
            *c = instance;
        }
    }
}

/// Per-process state, for metrics and `levee status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessState {
    pub index: usize,
    pub pid: Option<u32>,
    pub ready: bool,
    pub in_flight: usize,
    /// Requests served by this slot's processes, all of them.
    pub served: u64,
    /// Unplanned: the process exited or was killed.
    pub restarts: u64,
    /// Planned: replaced for its requests, memory, age or a reload.
    pub recycled: u64,
    pub rss_bytes: u64,
}

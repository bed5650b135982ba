//! What the handle and the background tasks share: the configuration, the connection
//! while Redis is up, the bans, the counters; and how one operation is run (bounded by
//! `op_timeout`, a failure counted and reported to the supervisor).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use levee_cache::ban::{Ban, Bans};
use levee_cache::proof::ProofChange;
use tokio::sync::{Notify, Semaphore};

use crate::config::RedisConfig;
use crate::conn::Conn;
use crate::keys::Keys;
use crate::stats::Counters;
use crate::target::{Mode, Target};

/// What the handle and the background tasks share.
pub(crate) struct Inner {
    pub(crate) cfg: RedisConfig,
    /// The URL as logs show it (without a password).
    pub(crate) shown: String,
    /// What the URLs name: one server, Sentinel's primary or a Cluster (target.rs).
    pub(crate) target: Target,
    /// The connection while Redis is up.
    pub(crate) conn: RwLock<Option<Conn>>,
    /// What the last connection reached: its mode and the primaries written to.
    pub(crate) reached: Mutex<Option<(Mode, Vec<String>)>>,
    pub(crate) up: AtomicBool,
    /// This process's id in ban messages and lock tokens (random).
    pub(crate) node: String,
    pub(crate) keys: Keys,
    pub(crate) bans: Bans,
    pub(crate) sync: Mutex<BanSync>,
    pub(crate) on_ban: Arc<dyn Fn(Ban) + Send + Sync>,
    pub(crate) stats: Counters,
    /// Bounds the background writes in flight.
    pub(crate) writes: Arc<Semaphore>,
    /// A request saw the connection fail: the supervisor checks it at once.
    pub(crate) trouble: Notify,
    /// Bans or proofs are waiting to be written.
    pub(crate) flush: Notify,
    /// Proven sessions shared with the other nodes, when the caller asked.
    pub(crate) proofs: Option<ProofSync>,
    /// The fleet's renewals waiting for a nudge, by scope (fleet.rs).
    pub(crate) fleet: Listeners,
}

/// How long a proof is kept, and how many; set by the caller (`Redis::connect_sharing`).
#[derive(Debug, Clone, Copy)]
pub struct ProofLimits {
    pub idle_secs: u64,
    pub capacity: usize,
}

/// What this node shares: the callback for other nodes' changes, the queue of its own.
pub(crate) struct ProofSync {
    pub on_proof: Arc<dyn Fn(ProofChange) + Send + Sync>,
    pub limits: ProofLimits,
    pub pending: std::sync::Mutex<VecDeque<ProofChange>>,
}

/// Where the bans between this node and Redis stand (see sync.rs).
#[derive(Debug, Default)]
pub(crate) struct BanSync {
    /// Other nodes' bans already applied (`node line` -> time), so that one heard on
    /// the channel and read again from the set is applied once.
    pub(crate) seen: HashMap<String, u64>,
    /// This node's bans not yet in Redis, oldest first.
    pub(crate) pending: VecDeque<Ban>,
}

impl Inner {
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// The connection, if Redis is up.
    pub(crate) fn conn(&self) -> Option<Conn> {
        if !self.is_up() {
            return None;
        }
        self.conn.read().ok()?.clone()
    }

    pub(crate) fn set_conn(&self, conn: Option<Conn>) {
        let up = conn.is_some();
        if let Ok(mut slot) = self.conn.write() {
            *slot = conn;
        }
        self.up.store(up, Ordering::Release);
    }

    /// Counts a failed operation; one that looks like a lost connection, or a write
    /// refused by a primary a failover made a replica (READONLY), wakes the supervisor,
    /// which checks the connection at once.
    pub(crate) fn failed(&self, e: &redis::RedisError) {
        self.stats.error();
        tracing::debug!(redis = %self.shown, error = %e, "Redis operation failed");
        let demoted = e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if demoted || e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
            self.trouble.notify_one();
        }
    }

    /// Runs one Redis operation within `op_timeout`; a failure is counted, and one that
    /// looks like a lost connection wakes the supervisor.
    pub(crate) async fn run<T>(
        &self,
        op: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.cfg.op_timeout, op).await {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                self.failed(&e);
                None
            }
            Err(_) => {
                self.stats.error();
                None
            }
        }
    }
}

/// What listens for nudges: one Notify per scope.
#[derive(Default)]
pub(crate) struct Listeners(Mutex<HashMap<String, Arc<Notify>>>);

impl Listeners {
    pub(crate) fn get(&self, scope: &str) -> Arc<Notify> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(scope.to_string()).or_default().clone()
    }

    pub(crate) fn find(&self, scope: &str) -> Option<Arc<Notify>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(scope).cloned()
    }
}

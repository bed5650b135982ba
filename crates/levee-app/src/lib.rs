//! The app pool: application processes that levee starts and keeps warm (issue 12), as
//! php-pm, RoadRunner or FrankenPHP's worker mode do, so that a framework boots once per
//! process instead of once per request.
//!
//! A [`Pool`] runs `processes` copies of a command whose `{port}` placeholder becomes a
//! free loopback port. Each copy has a supervisor task: start, wait until the port
//! accepts connections (readiness), serve, and when the process exits, say so and start
//! it again after an exponential backoff. [`Pool::lease`] picks the ready process with
//! the fewest requests in flight, never more than `concurrency` per process (1 for
//! PHP-style workers), and the [`Lease`] gives the slot back when dropped.
//!
//! Recycling: after `max_requests` (with jitter, so that processes do not all recycle
//! together), above `max_memory` of resident memory, or after `max_age`, a replacement is
//! started and made ready first; then the old process gets no new requests, finishes
//! the ones it has (up to `drain_timeout`) and is stopped, so capacity never drops. The
//! same rolling replacement serves [`Pool::restart_all`] (a reload). A request that the
//! caller gives up on can [`Lease::kill`] its process, which is replaced at once.
//!
//! Modules: this file (the pool, leases, kept connections), `supervise` (one process's
//! life), `watch_files` (restarts on file changes). Not here yet: FastCGI workers.

use std::any::Any;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};

mod supervise;
mod watch_files;

use supervise::{rss_bytes, supervise};
use watch_files::watch_files;

/// How to run the application's processes.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// A shell command with a `{port}` placeholder: `php worker.php {port}`.
    pub command: String,
    pub processes: usize,
    /// Requests one process serves at once (1 for PHP).
    pub concurrency: usize,
    /// How long a process may take to accept connections after it starts.
    pub ready_timeout: Duration,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Replace a process after about this many requests (0: never).
    pub max_requests: u64,
    /// Replace a process whose resident memory exceeds this many bytes (0: never).
    pub max_memory: u64,
    /// Replace a process older than this.
    pub max_age: Option<Duration>,
    /// How long a replaced process may take to finish its requests.
    pub drain_timeout: Duration,
    /// Files or directories (recursively) whose changes restart every process, one by
    /// one (the application's code changed).
    pub watch: Vec<PathBuf>,
}

impl AppConfig {
    /// `command` run `processes` times, one request each, nothing recycled.
    pub fn new(command: impl Into<String>, processes: usize) -> AppConfig {
        AppConfig {
            command: command.into(),
            processes,
            concurrency: 1,
            ready_timeout: Duration::from_secs(10),
            cwd: None,
            env: Vec::new(),
            max_requests: 0,
            max_memory: 0,
            max_age: None,
            drain_timeout: Duration::from_secs(60),
            watch: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the app command `{0}` has no {{port}} placeholder: levee gives each process its own port; write it like `php worker.php {{port}}`")]
    NoPortPlaceholder(String),
    #[error("no app process became ready within {0:?}; see the app's output in levee's log")]
    NotReady(Duration),
    #[error("cannot start the app pool's thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot watch {path} for changes: {source}; check that it exists ([app] watch)")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
}

/// One running process.
struct Instance {
    addr: SocketAddr,
    pid: u32,
    in_flight: AtomicUsize,
    served: AtomicU64,
    /// Set by [`Lease::kill`] and [`Lease::refused`]: the supervisor kills and replaces
    /// the process.
    kill: Notify,
    /// Why it is killed: it refused a connection (else a request ran over its time).
    refused: AtomicBool,
    /// Kept-alive connections to it, waiting for the next request: never more than
    /// `concurrency` over all of levee's threads, so that a process that serves one
    /// connection at a time is never sent a second while the first sits idle. Opaque
    /// here (the caller's HTTP client connection).
    idle: Mutex<Vec<Box<dyn Any + Send>>>,
    concurrency: usize,
}

/// One place in the pool, and the process that holds it now.
struct Slot {
    index: usize,
    /// Takes new requests; `None` while (re)starting.
    current: Mutex<Option<Arc<Instance>>>,
    restarts: AtomicU64,
    recycled: AtomicU64,
    served: AtomicU64,
    /// Asked to replace its process (a reload).
    replace: AtomicBool,
}

impl Slot {
    fn current(&self) -> Option<Arc<Instance>> {
        self.current.lock().ok().and_then(|c| c.clone())
    }
    /// Takes `inst` out of rotation at once, if it is still the current process.
    fn withdraw(&self, inst: &Arc<Instance>) {
        if let Ok(mut c) = self.current.lock() {
            if c.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, inst)) {
                *c = None;
            }
        }
    }
    fn publish(&self, instance: Option<Arc<Instance>>) {
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

pub struct Pool {
    slots: Vec<Arc<Slot>>,
    concurrency: usize,
    ready_timeout: Duration,
    /// Woken when a slot becomes ready or a lease ends.
    changed: Arc<Notify>,
    stop: watch::Sender<bool>,
    /// The supervising thread: joined on shutdown, once every process has been stopped
    /// and waited for.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Kept alive as long as the pool: dropping it stops watching.
    _watcher: Option<notify::RecommendedWatcher>,
}

/// After a change, wait this long for more before restarting (an editor or a deploy
/// writes many files).
const DEBOUNCE: Duration = Duration::from_millis(300);

impl Pool {
    /// Starts the processes, supervised by a thread of their own (so that their
    /// readiness checks and restarts never run on a serving thread), and returns at once;
    /// use [`Pool::lease`], which waits for readiness.
    pub fn start(config: AppConfig) -> Result<Pool, AppError> {
        if !config.command.contains("{port}") {
            return Err(AppError::NoPortPlaceholder(config.command));
        }
        let (stop, stop_rx) = watch::channel(false);
        let changed = Arc::new(Notify::new());
        let config = Arc::new(config);
        let slots: Vec<Arc<Slot>> = (0..config.processes.max(1))
            .map(|index| {
                Arc::new(Slot {
                    index,
                    current: Mutex::new(None),
                    restarts: AtomicU64::new(0),
                    recycled: AtomicU64::new(0),
                    served: AtomicU64::new(0),
                    replace: AtomicBool::new(false),
                })
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(AppError::Thread)?;
        let tasks: Vec<_> = slots
            .iter()
            .map(|slot| {
                supervise(
                    slot.clone(),
                    config.clone(),
                    changed.clone(),
                    stop_rx.clone(),
                )
            })
            .collect();
        let (watcher, changes) = watch_files(&config.watch)?;
        let watched = slots.clone();
        let mut stop_watch = stop_rx.clone();
        // The processes are forked from this thread, and their parent-death signal fires
        // when it ends: it lives as long as the pool.
        let thread = std::thread::Builder::new()
            .name("levee-app".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
                    if let Some(mut changes) = changes {
                        tokio::spawn(async move {
                            loop {
                                tokio::select! {
                                    c = changes.recv() => if c.is_none() { return },
                                    _ = stop_watch.changed() => return,
                                }
                                // More changes within the debounce are the same change.
                                while let Ok(Some(_)) =
                                    tokio::time::timeout(DEBOUNCE, changes.recv()).await
                                {}
                                eprintln!("levee: files of the app changed: restarting its processes one by one");
                                for s in &watched {
                                    s.replace.store(true, Ordering::Release);
                                }
                            }
                        });
                    }
                    for h in handles {
                        let _ = h.await;
                    }
                });
            })
            .map_err(AppError::Thread)?;
        Ok(Pool {
            slots,
            concurrency: config.concurrency.max(1),
            ready_timeout: config.ready_timeout,
            changed,
            stop,
            thread: Mutex::new(Some(thread)),
            _watcher: watcher,
        })
    }

    /// The ready process with the fewest requests in flight and room for one more;
    /// waits (at most the ready timeout) while there is none.
    pub async fn lease(&self) -> Result<Lease, AppError> {
        let deadline = tokio::time::Instant::now() + self.ready_timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(lease) = self.try_lease() {
                return Ok(lease);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(AppError::NotReady(self.ready_timeout));
            }
        }
    }

    fn try_lease(&self) -> Option<Lease> {
        loop {
            let (slot, inst) = self.least_busy()?;
            if let Some(lease) = self.claim(slot, inst) {
                return Some(lease);
            }
        }
    }

    /// The ready process with the fewest requests in flight and room for one more.
    fn least_busy(&self) -> Option<(&Arc<Slot>, Arc<Instance>)> {
        self.slots
            .iter()
            .filter_map(|s| s.current().map(|i| (s, i)))
            .filter(|(_, i)| i.in_flight.load(Ordering::Acquire) < self.concurrency)
            .min_by_key(|(_, i)| i.in_flight.load(Ordering::Acquire))
    }

    /// A place on `inst`, if it still has room and is still `slot`'s process; `None`:
    /// look again.
    fn claim(&self, slot: &Arc<Slot>, inst: Arc<Instance>) -> Option<Lease> {
        let n = inst.in_flight.load(Ordering::Acquire);
        // Another request may have taken the room.
        if n >= self.concurrency
            || inst
                .in_flight
                .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        // The process may have been replaced or withdrawn since it was picked, and its
        // drain, seeing nothing in flight, be stopping it: a request sent there fails
        // (502). `publish` and `withdraw` take the lock `current` takes, and a drain reads
        // `in_flight` after them, so either this sees the change or the drain sees the
        // claim and waits for it.
        if !slot.current().is_some_and(|c| Arc::ptr_eq(&c, &inst)) {
            inst.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Lease {
            slot: slot.clone(),
            inst,
            changed: self.changed.clone(),
        })
    }

    /// Replaces every process, each one's replacement ready before it stops (a reload:
    /// the application's code changed).
    pub fn restart_all(&self) {
        for s in &self.slots {
            s.replace.store(true, Ordering::Release);
        }
    }

    /// Every process's state now.
    pub fn states(&self) -> Vec<ProcessState> {
        self.slots
            .iter()
            .map(|s| {
                let inst = s.current();
                ProcessState {
                    index: s.index,
                    pid: inst.as_ref().map(|i| i.pid),
                    ready: inst.is_some(),
                    in_flight: inst
                        .as_ref()
                        .map_or(0, |i| i.in_flight.load(Ordering::Relaxed)),
                    served: s.served.load(Ordering::Relaxed),
                    restarts: s.restarts.load(Ordering::Relaxed),
                    recycled: s.recycled.load(Ordering::Relaxed),
                    rss_bytes: inst.as_ref().map_or(0, |i| rss_bytes(i.pid)),
                }
            })
            .collect()
    }
}

impl Pool {
    /// Stops every process (SIGTERM to its group, SIGKILL after two seconds) and waits
    /// until each has exited. Blocks the calling thread for at most a little over two
    /// seconds; the pool serves nothing afterwards.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One request's hold on a process: its address, given back when dropped.
pub struct Lease {
    slot: Arc<Slot>,
    inst: Arc<Instance>,
    changed: Arc<Notify>,
}

impl Lease {
    pub fn addr(&self) -> SocketAddr {
        self.inst.addr
    }

    pub fn pid(&self) -> u32 {
        self.inst.pid
    }

    /// The request took too long: kill this process (and whatever it is doing) and
    /// start another in its place.
    pub fn kill(&self) {
        self.slot.withdraw(&self.inst);
        self.inst.kill.notify_one();
    }

    /// A kept-alive connection to this process that no request is using, if there is one.
    pub fn take_conn(&self) -> Option<Box<dyn Any + Send>> {
        self.inst.idle.lock().ok().and_then(|mut v| v.pop())
    }

    /// Keeps a connection for the next request to this process; call it before the
    /// lease is dropped. Beyond `concurrency` connections it is dropped (closed).
    pub fn put_conn(&self, conn: Box<dyn Any + Send>) {
        if let Ok(mut v) = self.inst.idle.lock() {
            if v.len() < self.inst.concurrency {
                v.push(conn);
            }
        }
    }

    /// The process refused a connection (it died, or closed its socket): no request
    /// goes to it any more, and it is killed and replaced. The caller may try another.
    pub fn refused(&self) {
        self.inst.refused.store(true, Ordering::Release);
        self.kill();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.inst.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.inst.served.fetch_add(1, Ordering::Relaxed);
        self.slot.served.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(pid: u32) -> Arc<Instance> {
        Arc::new(Instance {
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            pid,
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            kill: Notify::new(),
            refused: AtomicBool::new(false),
            idle: Mutex::new(Vec::new()),
            concurrency: 1,
        })
    }

    /// A pool of one slot serving `inst`, without a supervisor or a process.
    fn pool_of(inst: &Arc<Instance>) -> Pool {
        let slot = Arc::new(Slot {
            index: 0,
            current: Mutex::new(Some(inst.clone())),
            restarts: AtomicU64::new(0),
            recycled: AtomicU64::new(0),
            served: AtomicU64::new(0),
            replace: AtomicBool::new(false),
        });
        Pool {
            slots: vec![slot],
            concurrency: 1,
            ready_timeout: Duration::from_secs(1),
            changed: Arc::new(Notify::new()),
            stop: watch::channel(false).0,
            thread: Mutex::new(None),
            _watcher: None,
        }
    }

    /// A request that picked a process just before its recycle published the
    /// replacement must not claim the old one, whose drain may already be stopping it
    /// (a 502 during a rolling restart).
    #[test]
    fn a_process_replaced_between_the_pick_and_the_claim_is_not_leased() {
        let old = instance(1);
        let pool = pool_of(&old);
        let (slot, picked) = pool.least_busy().expect("the old process is ready");
        assert_eq!(picked.pid, 1);
        slot.publish(Some(instance(2)));
        assert!(pool.claim(slot, picked).is_none());
        assert_eq!(
            old.in_flight.load(Ordering::Acquire),
            0,
            "the claim is given back"
        );
        let lease = pool.try_lease().expect("the replacement is leased");
        assert_eq!(lease.pid(), 2);
    }

    #[test]
    fn a_withdrawn_process_is_not_leased() {
        let inst = instance(1);
        let pool = pool_of(&inst);
        let (slot, picked) = pool.least_busy().expect("ready");
        slot.withdraw(&inst);
        assert!(pool.claim(slot, picked).is_none());
        assert!(pool.try_lease().is_none());
        assert_eq!(inst.in_flight.load(Ordering::Acquire), 0);
    }
}

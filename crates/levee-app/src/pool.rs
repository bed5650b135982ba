//! The pool: its processes' places, leases on the least busy ready process, kept-alive
//! connections parked with each process, rolling restarts and shutdown.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::config::{AppConfig, AppError};
use crate::process::{Instance, ProcessState, Slot};
use crate::supervise::{rss_bytes, supervise};
use crate::watch_files::watch_files;

pub struct Pool {
    slots: Vec<Arc<Slot>>,
    /// Where the next look for the least busy process starts (round robin among equals).
    next: std::sync::atomic::AtomicUsize,
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
            next: Default::default(),
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

    /// The ready process with the fewest requests in flight and room for one more; among
    /// equals, the next after the last one picked. Sequential requests (all processes
    /// idle) then go round every process rather than always to the first: each one's
    /// opcache and JIT stay warm, and a process's own pauses (its garbage collector,
    /// a slow request's aftermath) cost only its share.
    fn least_busy(&self) -> Option<(&Arc<Slot>, Arc<Instance>)> {
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n.max(1);
        (0..n)
            .map(|k| &self.slots[(start + k) % n])
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
mod tests;

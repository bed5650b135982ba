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
//! What is not here yet: watching files for changes, FastCGI workers.

use std::any::Any;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};

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

/// The longest wait between two restarts of a process that keeps exiting.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A process that ran this long before exiting restarts at once (the backoff resets).
const HEALTHY_AFTER: Duration = Duration::from_secs(30);
/// How often a supervisor looks at its process's memory, age and requests served.
const CHECK_EVERY: Duration = Duration::from_millis(250);

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
            let (slot, inst) = self
                .slots
                .iter()
                .filter_map(|s| s.current().map(|i| (s, i)))
                .filter(|(_, i)| i.in_flight.load(Ordering::Acquire) < self.concurrency)
                .min_by_key(|(_, i)| i.in_flight.load(Ordering::Acquire))?;
            let n = inst.in_flight.load(Ordering::Acquire);
            // Another request may have taken the room: claim it or look again.
            if n < self.concurrency
                && inst
                    .in_flight
                    .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return Some(Lease {
                    slot: slot.clone(),
                    inst,
                    changed: self.changed.clone(),
                });
            }
        }
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

type Changes = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Watches `paths` (recursively); a change to a file's content, a new or removed file
/// sends one `()`.
fn watch_files(
    paths: &[PathBuf],
) -> Result<(Option<notify::RecommendedWatcher>, Option<Changes>), AppError> {
    use notify::{EventKind, RecursiveMode, Watcher};
    if paths.is_empty() {
        return Ok((None, None));
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if let Ok(e) = e {
            if matches!(
                e.kind,
                EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
            ) {
                let _ = tx.send(());
            }
        }
    })
    .map_err(|source| AppError::Watch {
        path: paths[0].clone(),
        source,
    })?;
    for p in paths {
        watcher
            .watch(p, RecursiveMode::Recursive)
            .map_err(|source| AppError::Watch {
                path: p.clone(),
                source,
            })?;
    }
    Ok((Some(watcher), Some(rx)))
}

/// A free loopback port, for a process to bind. Another program may take it before the
/// process does; the process then fails to start and is started again on a new port.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Resident memory of a process and its children's group leader, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// `max_requests` give or take 10%, different for each process, so that processes
/// started together are not all replaced together.
fn jittered(max: u64, index: usize, generation: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let spread = (max / 10).max(1);
    let h = (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ generation.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    max - spread / 2 + (h % (spread + 1))
}

/// Why a running process should be replaced now, if it should.
fn recycle_reason(
    config: &AppConfig,
    slot: &Slot,
    inst: &Instance,
    started: Instant,
    max_requests: u64,
) -> Option<String> {
    if slot.replace.swap(false, Ordering::AcqRel) {
        return Some("a reload".into());
    }
    let served = inst.served.load(Ordering::Relaxed);
    if max_requests > 0 && served >= max_requests {
        return Some(format!("{served} requests (max_requests)"));
    }
    if config.max_memory > 0 {
        let rss = rss_bytes(inst.pid);
        if rss > config.max_memory {
            return Some(format!(
                "{} MiB resident, over max_memory {} MiB",
                rss >> 20,
                config.max_memory >> 20
            ));
        }
    }
    if config.max_age.is_some_and(|a| started.elapsed() >= a) {
        return Some(format!("{:?} old (max_age)", started.elapsed()));
    }
    None
}

/// Keeps one slot's process running until the pool stops.
async fn supervise(
    slot: Arc<Slot>,
    config: Arc<AppConfig>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    let mut generation = 0u64;
    loop {
        if *stop.borrow() {
            return;
        }
        let (mut child, mut inst) = match start_ready(&slot, &config, &mut stop).await {
            Ok(x) => x,
            Err(Exit::Stopped) => return,
            Err(Exit::Failed(why)) => {
                restart_later(&slot, &why, &mut backoff, &mut stop).await;
                continue;
            }
        };
        let mut started = Instant::now();
        generation += 1;
        let mut max_requests = jittered(config.max_requests, slot.index, generation);
        slot.publish(Some(inst.clone()));
        changed.notify_waiters();
        let why = loop {
            tokio::select! {
                status = child.wait() => {
                    break match status {
                        Ok(s) => format!("(pid {}) exited: {s}", inst.pid),
                        Err(e) => format!("(pid {}) could not be waited for: {e}", inst.pid),
                    };
                }
                _ = inst.kill.notified() => {
                    slot.publish(None);
                    kill_child(&mut child).await;
                    backoff = Duration::from_millis(100);
                    break if inst.refused.load(Ordering::Acquire) {
                        format!("(pid {}) was killed: it refused a connection", inst.pid)
                    } else {
                        format!("(pid {}) was killed: a request ran over its time limit", inst.pid)
                    };
                }
                _ = stop.changed() => {
                    slot.publish(None);
                    stop_child(&mut child).await;
                    return;
                }
                _ = tokio::time::sleep(CHECK_EVERY) => {
                    let Some(reason) = recycle_reason(&config, &slot, &inst, started, max_requests) else {
                        continue;
                    };
                    // The replacement first, so that capacity never drops.
                    match start_ready(&slot, &config, &mut stop).await {
                        Ok((new_child, new_inst)) => {
                            slot.publish(Some(new_inst.clone()));
                            changed.notify_waiters();
                            let old_pid = inst.pid;
                            let (old_child, old_inst) = (std::mem::replace(&mut child, new_child), std::mem::replace(&mut inst, new_inst));
                            slot.recycled.fetch_add(1, Ordering::Relaxed);
                            started = Instant::now();
                            generation += 1;
                            max_requests = jittered(config.max_requests, slot.index, generation);
                            tracing::info!(process = slot.index, old_pid, pid = inst.pid, "app process recycled: {reason}");
                            eprintln!("levee: app process {} (pid {old_pid}) replaced by pid {} after {reason}", slot.index, inst.pid);
                            tokio::spawn(drain(old_child, old_inst, config.drain_timeout));
                        }
                        Err(Exit::Stopped) => return,
                        Err(Exit::Failed(why)) => {
                            tracing::warn!(process = slot.index, "the replacement for a recycle failed ({why}); the old process keeps serving");
                        }
                    }
                }
            }
        };
        slot.publish(None);
        if started.elapsed() >= HEALTHY_AFTER {
            backoff = Duration::from_millis(100);
        }
        if inst.served.load(Ordering::Relaxed) > 0 || inst.in_flight.load(Ordering::Acquire) > 0 {
            // It served before it ended (a PHP exit() ends the worker after its
            // answer): not a crash loop, so no backoff.
            backoff = Duration::ZERO;
        }
        restart_later(&slot, &why, &mut backoff, &mut stop).await;
        backoff = backoff.max(Duration::from_millis(100));
    }
}

/// Logs an unplanned exit and waits before the next start, longer each time.
async fn restart_later(
    slot: &Slot,
    why: &str,
    backoff: &mut Duration,
    stop: &mut watch::Receiver<bool>,
) {
    slot.restarts.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        process = slot.index,
        "app process {}: {why}; starting it again in {backoff:?}",
        slot.index
    );
    eprintln!(
        "levee: app process {} {why}; starting it again in {backoff:?}",
        slot.index
    );
    if !backoff.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(*backoff) => {}
            _ = stop.changed() => {}
        }
    }
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

/// Lets a replaced process finish what it is doing, then stops it.
async fn drain(mut child: Child, inst: Arc<Instance>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while inst.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            _ = child.wait() => return,
        }
    }
    stop_child(&mut child).await;
}

enum Exit {
    Stopped,
    Failed(String),
}

/// Starts a process and waits until its port accepts connections.
async fn start_ready(
    slot: &Slot,
    config: &AppConfig,
    stop: &mut watch::Receiver<bool>,
) -> Result<(Child, Arc<Instance>), Exit> {
    let port = free_port().map_err(|e| Exit::Failed(format!("found no free port ({e})")))?;
    let command = config.command.replace("{port}", &port.to_string());
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so that stopping it stops whatever it started.
        .process_group(0);
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec and only makes three
    // system calls (no allocation, no lock). std offers no safe way to set the
    // parent-death signal of a child.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            // If levee dies, even by SIGKILL, the kernel kills the process: nothing of
            // levee's outlives it. Set before checking the parent, so that a levee that
            // died during the fork is seen.
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other(
                    "levee exited while the process started",
                ));
            }
            Ok(())
        });
    }
    if let Some(dir) = &config.cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in &config.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Exit::Failed(format!("could not be started ({e}): `{command}`")))?;
    let pid = child.id().unwrap_or(0);
    forward_output(&mut child, slot.index, pid);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + config.ready_timeout;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Exit::Failed(format!(
                "(pid {pid}) exited before it was ready: {status}"
            )));
        }
        if Instant::now() >= deadline {
            stop_child(&mut child).await;
            return Err(Exit::Failed(format!(
                "(pid {pid}) did not accept connections on {addr} within {:?}",
                config.ready_timeout
            )));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.changed() => {
                stop_child(&mut child).await;
                return Err(Exit::Stopped);
            }
        }
    }
    tracing::info!(process = slot.index, pid, %addr, "app process ready");
    Ok((
        child,
        Arc::new(Instance {
            addr,
            pid,
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            kill: Notify::new(),
            refused: AtomicBool::new(false),
            idle: Mutex::new(Vec::new()),
            concurrency: config.concurrency.max(1),
        }),
    ))
}

/// SIGKILL to the process group: a request ran over its time, nothing to wait for.
async fn kill_child(child: &mut Child) {
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.wait().await;
}

/// SIGTERM to the process group, then SIGKILL after two seconds.
async fn stop_child(child: &mut Child) {
    // The group, not only the command: workers it forked go too.
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// The process's output, line by line, into levee's log with the process's number and
/// pid.
fn forward_output(child: &mut Child, index: usize, pid: u32) {
    if let Some(out) = child.stdout.take() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "levee::app", process = index, pid, "{line}");
            }
        });
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(target: "levee::app", process = index, pid, "{line}");
            }
        });
    }
}

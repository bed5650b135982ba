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
//! What is not here yet: recycling (max requests, memory, age), killing a hung request,
//! reload on file changes, FastCGI workers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the app command `{0}` has no {{port}} placeholder: levee gives each process its own port; write it like `php worker.php {{port}}`")]
    NoPortPlaceholder(String),
    #[error("no app process became ready within {0:?}; see the app's output in levee's log")]
    NotReady(Duration),
    #[error("cannot start the app pool's thread: {0}")]
    Thread(std::io::Error),
}

/// The longest wait between two restarts of a process that keeps exiting.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A process that ran this long before exiting restarts at once (the backoff resets).
const HEALTHY_AFTER: Duration = Duration::from_secs(30);

/// One process slot.
struct Slot {
    index: usize,
    /// Where the current process listens, when it is ready.
    addr: Mutex<Option<SocketAddr>>,
    ready: AtomicBool,
    in_flight: AtomicUsize,
    pid: AtomicU32,
    restarts: AtomicU64,
    served: AtomicU64,
}

/// Per-process state, for metrics and `levee status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessState {
    pub index: usize,
    pub pid: Option<u32>,
    pub ready: bool,
    pub in_flight: usize,
    pub served: u64,
    pub restarts: u64,
}

pub struct Pool {
    slots: Vec<Arc<Slot>>,
    concurrency: usize,
    ready_timeout: Duration,
    /// Woken when a slot becomes ready or a lease ends.
    changed: Arc<Notify>,
    stop: watch::Sender<bool>,
}

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
                    addr: Mutex::new(None),
                    ready: AtomicBool::new(false),
                    in_flight: AtomicUsize::new(0),
                    pid: AtomicU32::new(0),
                    restarts: AtomicU64::new(0),
                    served: AtomicU64::new(0),
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
        std::thread::Builder::new()
            .name("levee-app".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
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
            let slot = self
                .slots
                .iter()
                .filter(|s| s.ready.load(Ordering::Acquire))
                .filter(|s| s.in_flight.load(Ordering::Acquire) < self.concurrency)
                .min_by_key(|s| s.in_flight.load(Ordering::Acquire))?;
            let n = slot.in_flight.load(Ordering::Acquire);
            // Another request may have taken the room: claim it or look again.
            if n < self.concurrency
                && slot
                    .in_flight
                    .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                let addr = (*slot.addr.lock().ok()?)?;
                return Some(Lease {
                    slot: slot.clone(),
                    addr,
                    changed: self.changed.clone(),
                });
            }
        }
    }

    /// Every process's state now.
    pub fn states(&self) -> Vec<ProcessState> {
        self.slots
            .iter()
            .map(|s| ProcessState {
                index: s.index,
                pid: Some(s.pid.load(Ordering::Relaxed)).filter(|p| *p != 0),
                ready: s.ready.load(Ordering::Relaxed),
                in_flight: s.in_flight.load(Ordering::Relaxed),
                served: s.served.load(Ordering::Relaxed),
                restarts: s.restarts.load(Ordering::Relaxed),
            })
            .collect()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// One request's hold on a process: its address, given back when dropped.
pub struct Lease {
    slot: Arc<Slot>,
    addr: SocketAddr,
    changed: Arc<Notify>,
}

impl Lease {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.slot.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.slot.served.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
    }
}

/// A free loopback port, for a process to bind. Another program may take it before the
/// process does; the process then fails to start and is started again on a new port.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Keeps one slot's process running until the pool stops.
async fn supervise(
    slot: Arc<Slot>,
    config: Arc<AppConfig>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        let started = Instant::now();
        match run_once(&slot, &config, &changed, &mut stop).await {
            Exit::Stopped => return,
            Exit::Failed(why) => {
                slot.ready.store(false, Ordering::Release);
                slot.pid.store(0, Ordering::Relaxed);
                if started.elapsed() >= HEALTHY_AFTER {
                    backoff = Duration::from_millis(100);
                }
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
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

enum Exit {
    Stopped,
    Failed(String),
}

async fn run_once(
    slot: &Slot,
    config: &AppConfig,
    changed: &Notify,
    stop: &mut watch::Receiver<bool>,
) -> Exit {
    let port = match free_port() {
        Ok(p) => p,
        Err(e) => return Exit::Failed(format!("found no free port ({e})")),
    };
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
    if let Some(dir) = &config.cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in &config.env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Exit::Failed(format!("could not be started ({e}): `{command}`")),
    };
    let pid = child.id().unwrap_or(0);
    slot.pid.store(pid, Ordering::Relaxed);
    forward_output(&mut child, slot.index, pid);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Ready when the port accepts a connection.
    let deadline = Instant::now() + config.ready_timeout;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Exit::Failed(format!("(pid {pid}) exited before it was ready: {status}"));
        }
        if Instant::now() >= deadline {
            stop_child(&mut child).await;
            return Exit::Failed(format!(
                "(pid {pid}) did not accept connections on {addr} within {:?}",
                config.ready_timeout
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.changed() => {
                stop_child(&mut child).await;
                return Exit::Stopped;
            }
        }
    }
    if let Ok(mut a) = slot.addr.lock() {
        *a = Some(addr);
    }
    slot.ready.store(true, Ordering::Release);
    changed.notify_waiters();
    tracing::info!(process = slot.index, pid, %addr, "app process ready");
    tokio::select! {
        status = child.wait() => {
            slot.ready.store(false, Ordering::Release);
            Exit::Failed(match status {
                Ok(s) => format!("(pid {pid}) exited: {s}"),
                Err(e) => format!("(pid {pid}) could not be waited for: {e}"),
            })
        }
        _ = stop.changed() => {
            slot.ready.store(false, Ordering::Release);
            stop_child(&mut child).await;
            Exit::Stopped
        }
    }
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

//! One slot's supervisor: starts its process (with a parent-death signal, in its own
//! process group), waits for readiness, restarts it with backoff, recycles it
//! (requests, memory, age, a reload: the replacement ready first) and stops it.

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};

use crate::config::AppConfig;
use crate::process::{Instance, Slot};
use std::net::SocketAddr;

/// The longest wait between two restarts of a process that keeps exiting.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A process that ran this long before exiting restarts at once (the backoff resets).
const HEALTHY_AFTER: Duration = Duration::from_secs(30);
/// How often a supervisor looks at its process's memory, age and requests served.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// A free loopback port, for a process to bind. Another program may take it before the
/// process does; the process then fails to start and is started again on a new port.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Resident memory of a process and its children's group leader, from /proc.
pub(crate) fn rss_bytes(pid: u32) -> u64 {
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
pub(crate) async fn supervise(
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
        Arc::new(Instance::new(addr, pid, config.concurrency)),
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

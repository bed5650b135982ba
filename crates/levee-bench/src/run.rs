//! Drives a run: worker threads per step, warm-up, sweep steps, progress, and
//! assembly of the report.
//!
//! Each worker thread owns a current-thread tokio runtime and its share of the
//! connections (thread-per-core, like wrk's event loops): no work stealing, no
//! cross-thread wake-ups, and stats that need no locks.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{Report, RunConfig};
use crate::stats::{Live, ThreadStats};
use crate::sweep;
use crate::target::Plan;
use crate::worker::{self, ThreadCtx};

/// When a step ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this long (in-flight requests are abandoned, as wrk does).
    Duration(Duration),
    /// After exactly this many requests (responses plus failed attempts).
    Count(u64),
}

/// The load to apply.
#[derive(Debug, Clone)]
pub struct Load {
    /// Concurrency of each step; one entry for a plain run.
    pub concurrency: Vec<usize>,
    pub stop: Stop,
    /// Open model: total requests per second, spread over the connections.
    pub rate: Option<f64>,
    /// Unmeasured run at the first step's concurrency before measuring.
    pub warmup: Duration,
}

/// The live progress bar; hidden when stderr is not a terminal or when asked.
struct Progress {
    bar: ProgressBar,
    by_count: bool,
}

impl Progress {
    fn new(show: bool, load: &Load) -> Self {
        let steps = load.concurrency.len() as u64;
        let (len, by_count) = match load.stop {
            Stop::Duration(d) => (
                (d.as_millis() as u64) * steps + load.warmup.as_millis() as u64,
                false,
            ),
            Stop::Count(n) => (n * steps, true),
        };
        let target = if show {
            ProgressDrawTarget::stderr_with_hz(4)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len.max(1)), target);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{wide_bar}] {percent:>3}% {msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress { bar, by_count }
    }
}

/// Runs the whole load on dedicated threads and returns the report. Blocking.
pub fn run_blocking(plan: Arc<Plan>, load: &Load, show_progress: bool) -> Result<Report> {
    validate(load)?;
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let progress = Progress::new(show_progress, load);
    let mut base: u64 = 0;
    if !load.warmup.is_zero() {
        let c = load.concurrency.first().copied().unwrap_or(1);
        run_step(
            &plan,
            c,
            Stop::Duration(load.warmup),
            load.rate,
            &progress,
            base,
            "warm-up",
        )?;
        if !progress.by_count {
            base += load.warmup.as_millis() as u64;
        }
    }
    let mut steps = Vec::with_capacity(load.concurrency.len());
    let mut offset = Duration::ZERO;
    for &c in &load.concurrency {
        let (stats, elapsed, slot) = run_step(&plan, c, load.stop, load.rate, &progress, base, "")?;
        steps.push(stats.into_step(c, elapsed, offset, slot));
        offset += elapsed;
        base += match load.stop {
            Stop::Duration(d) => d.as_millis() as u64,
            Stop::Count(n) => n,
        };
    }
    progress.bar.finish_and_clear();
    let knee = if steps.len() > 1 {
        sweep::knee(&steps)
    } else {
        None
    };
    let opts = plan.options();
    let config = RunConfig {
        url: plan.first_url().to_string(),
        urls: plan.url_count(),
        method: plan
            .targets
            .first()
            .map(|t| t.method.to_string())
            .unwrap_or_default(),
        model: if load.rate.is_some() {
            "open"
        } else {
            "closed"
        }
        .to_string(),
        threads: opts.threads,
        concurrency: load.concurrency.clone(),
        duration_s: match load.stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Count(_) => None,
        },
        requests: match load.stop {
            Stop::Count(n) => Some(n),
            Stop::Duration(_) => None,
        },
        rate: load.rate,
        keepalive: opts.keepalive,
        http2: opts.http2,
        http3: opts.http3,
        timeout_s: opts.timeout.as_secs_f64(),
        warmup_s: load.warmup.as_secs_f64(),
    };
    Ok(Report {
        tool: format!("levee bench {}", env!("CARGO_PKG_VERSION")),
        label: None,
        started_unix_ms,
        config,
        steps,
        knee,
        appendix: Vec::new(),
    })
}

fn validate(load: &Load) -> Result<()> {
    if load.concurrency.is_empty() || load.concurrency.contains(&0) {
        return Err(anyhow!("concurrency must be at least 1"));
    }
    if let Some(r) = load.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(anyhow!(
                "--rate must be a positive number of requests per second"
            ));
        }
    }
    match load.stop {
        Stop::Duration(d) if d.is_zero() => Err(anyhow!("-d must be longer than zero")),
        Stop::Count(0) => Err(anyhow!("-n must be at least 1")),
        _ => Ok(()),
    }
}

/// Timeline resolution: about 100 points per step, between 0.1 s and 1 s.
fn slot_len(stop: Stop) -> Duration {
    match stop {
        Stop::Duration(d) => (d / 100).clamp(Duration::from_millis(100), Duration::from_secs(1)),
        Stop::Count(_) => Duration::from_millis(100),
    }
}

/// Runs one step on fresh connections; returns merged stats, elapsed time, slot length.
fn run_step(
    plan: &Arc<Plan>,
    concurrency: usize,
    stop: Stop,
    rate: Option<f64>,
    progress: &Progress,
    base: u64,
    phase: &str,
) -> Result<(ThreadStats, Duration, Duration)> {
    let threads = plan.opts.threads.clamp(1, concurrency);
    let remaining = match stop {
        Stop::Count(n) => Some(Arc::new(AtomicU64::new(n))),
        Stop::Duration(_) => None,
    };
    let interval = rate.map(|r| Duration::from_secs_f64(concurrency as f64 / r));
    let stagger = rate
        .map(|r| Duration::from_secs_f64(1.0 / r))
        .unwrap_or_default();
    let slot = slot_len(stop);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut start_txs = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    let mut lives = Vec::with_capacity(threads);
    // See thread_main: yielding helps only when a core is left for the server.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let yield_on_park = threads < cores;
    for t in 0..threads {
        let conns: Vec<usize> = (t..concurrency).step_by(threads).collect();
        let (start_tx, start_rx) = mpsc::channel::<Instant>();
        start_txs.push(start_tx);
        let live = Arc::new(Live::default());
        lives.push(live.clone());
        let plan = plan.clone();
        let remaining = remaining.clone();
        let done_tx = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("levee-bench-{t}"))
            .spawn(move || {
                let r = thread_main(ThreadArgs {
                    plan,
                    conns,
                    start_rx,
                    live,
                    remaining,
                    stop,
                    interval,
                    stagger,
                    slot,
                    yield_on_park,
                });
                let _ = done_tx.send(());
                r
            })
            .context("cannot start a worker thread")?;
        handles.push(handle);
    }
    drop(done_tx);
    let start = Instant::now();
    for tx in start_txs {
        let _ = tx.send(start);
    }
    let mut finished = 0;
    let mut last = (start, 0u64);
    while finished < threads {
        match done_rx.recv_timeout(Duration::from_millis(250)) {
            Ok(()) => finished += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let responses: u64 = lives
                    .iter()
                    .map(|l| l.responses.load(Ordering::Relaxed))
                    .sum();
                let errors: u64 = lives.iter().map(|l| l.errors.load(Ordering::Relaxed)).sum();
                let dt = now.duration_since(last.0).as_secs_f64().max(1e-3);
                let rps = responses.saturating_sub(last.1) as f64 / dt;
                last = (now, responses);
                let pos = if progress.by_count {
                    base + responses + errors
                } else {
                    base + now.duration_since(start).as_millis() as u64
                };
                progress.bar.set_position(pos);
                let what = if phase.is_empty() {
                    format!("c={concurrency}")
                } else {
                    format!("{phase} c={concurrency}")
                };
                progress
                    .bar
                    .set_message(format!("{what}  {rps:.0} req/s  {errors} errors"));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut merged: Option<ThreadStats> = None;
    for h in handles {
        let stats = h
            .join()
            .map_err(|_| anyhow!("a worker thread panicked"))??;
        match merged.as_mut() {
            None => merged = Some(stats),
            Some(m) => m.merge(stats)?,
        }
    }
    let mut stats = match merged {
        Some(s) => s,
        None => ThreadStats::new()?,
    };
    if let Some(interval) = interval {
        stats.scheduled = scheduled(stop, concurrency, interval, stagger);
    }
    if stats.server.as_deref() == Some("") {
        stats.server = None;
    }
    let elapsed = match stop {
        Stop::Duration(d) => d,
        Stop::Count(_) => stats
            .last_done
            .map(|t| t.saturating_duration_since(start))
            .unwrap_or_else(|| start.elapsed()),
    };
    Ok((stats, elapsed, slot))
}

/// The open model's schedule: how many requests fall due before the end. Connection
/// `i` sends at `stagger * i + k * interval`, as the worker counts them, so the sum is
/// exact; with -n it is n.
fn scheduled(stop: Stop, concurrency: usize, interval: Duration, stagger: Duration) -> u64 {
    match stop {
        Stop::Count(n) => n,
        Stop::Duration(d) => {
            let (d, iv) = (d.as_nanos(), interval.as_nanos().max(1));
            (0..concurrency)
                .map(|i| stagger.as_nanos() * i as u128)
                .filter(|&first| first < d)
                .map(|first| (d - first).div_ceil(iv) as u64)
                .sum()
        }
    }
}

struct ThreadArgs {
    plan: Arc<Plan>,
    conns: Vec<usize>,
    start_rx: mpsc::Receiver<Instant>,
    live: Arc<Live>,
    remaining: Option<Arc<AtomicU64>>,
    stop: Stop,
    interval: Option<Duration>,
    stagger: Duration,
    slot: Duration,
    yield_on_park: bool,
}

fn thread_main(a: ThreadArgs) -> Result<ThreadStats> {
    let mut b = tokio::runtime::Builder::new_current_thread();
    b.enable_all();
    // Yield the CPU before blocking in epoll_wait. When the server shares the machine
    // (the usual loopback benchmark), it gets to run and finish more responses, so the
    // next wait finds a batch of ready sockets instead of sleeping and being woken
    // for each one. Measured against nginx on 2 cores with one thread: ~15-20% more
    // requests/s and far fewer context switches. With a thread on every core the
    // yields only shuffle the client's own threads: 5-10% fewer requests/s, so then not.
    if a.yield_on_park {
        b.on_thread_park(std::thread::yield_now);
    }
    let rt = b
        .build()
        .context("cannot start a tokio runtime for a worker thread")?;
    let start = a
        .start_rx
        .recv()
        .context("the run was abandoned before it started")?;
    let end = match a.stop {
        Stop::Duration(d) => Some(start + d),
        Stop::Count(_) => None,
    };
    let ctx = Rc::new(ThreadCtx {
        plan: a.plan,
        stats: std::cell::RefCell::new(ThreadStats::new()?),
        live: a.live,
        remaining: a.remaining,
        start,
        end,
        interval: a.interval,
        stagger: a.stagger,
        slot_len: a.slot,
    });
    let local = tokio::task::LocalSet::new();
    let handles: Vec<_> = a
        .conns
        .iter()
        .map(|&i| local.spawn_local(worker::connection(ctx.clone(), i)))
        .collect();
    rt.block_on(local.run_until(async move {
        let all = async {
            for h in handles {
                let _ = h.await;
            }
        };
        match end {
            Some(end) => {
                tokio::select! {
                    () = tokio::time::sleep_until(end.into()) => {}
                    () = all => {}
                }
            }
            None => all.await,
        }
    }));
    {
        // Abandon in-flight requests inside the runtime so their sockets deregister cleanly.
        let _guard = rt.enter();
        drop(local);
    }
    let fresh = ThreadStats::new()?;
    Ok(ctx.stats.replace(fresh))
}

//! The per-connection request loop, closed or open model. Each worker thread runs
//! its connections as local tasks on a single-threaded runtime and records into one
//! `RefCell`ed stats block: no cross-thread traffic per request.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use crate::http1::{Resp, H1};
use crate::http2::H2;
use crate::http3::H3;
use crate::stats::{Failure, Live, ThreadStats};
use crate::target::{Order, Plan};

/// What one thread's connections share.
pub(crate) struct ThreadCtx {
    pub(crate) plan: Arc<Plan>,
    pub(crate) stats: RefCell<ThreadStats>,
    pub(crate) live: Arc<Live>,
    /// Requests left for -n runs, shared by all threads.
    pub(crate) remaining: Option<Arc<AtomicU64>>,
    pub(crate) start: Instant,
    /// End of a time-bounded step.
    pub(crate) end: Option<Instant>,
    /// Open model: time between two requests of one connection.
    pub(crate) interval: Option<Duration>,
    /// Open model: offset between connections, so they do not fire together.
    pub(crate) stagger: Duration,
    pub(crate) slot_len: Duration,
}

impl ThreadCtx {
    /// Takes one request from the -n budget; false when it is spent.
    fn claim(&self) -> bool {
        match &self.remaining {
            None => true,
            Some(r) => r
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    fn slot(&self, at: Instant) -> usize {
        (at.saturating_duration_since(self.start).as_micros() / self.slot_len.as_micros().max(1))
            as usize
    }
}

enum Session {
    H1(H1),
    H2(H2),
    H3(H3),
}

impl Session {
    async fn request(
        &mut self,
        plan: &Plan,
        target: &crate::target::Target,
        want_server: bool,
    ) -> Result<Resp, Failure> {
        match self {
            Session::H1(c) => c.request(plan, target, want_server).await,
            Session::H2(c) => c.request(plan, target, want_server).await,
            Session::H3(c) => c.request(plan, target, want_server).await,
        }
    }

    fn reset(&mut self) {
        match self {
            Session::H1(c) => c.reset(),
            Session::H2(c) => c.reset(),
            Session::H3(c) => c.reset(),
        }
    }
}

/// Small xorshift generator: random URL order needs speed, not quality.
struct Picker {
    order: Order,
    len: usize,
    next: usize,
    state: u64,
}

impl Picker {
    fn new(order: Order, len: usize, conn: usize) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15);
        Picker {
            order,
            len: len.max(1),
            next: conn % len.max(1),
            state: seed.wrapping_add((conn as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9)) | 1,
        }
    }

    fn pick(&mut self) -> usize {
        if self.len == 1 {
            return 0;
        }
        match self.order {
            Order::Sequential => {
                let i = self.next;
                self.next = (i + 1) % self.len;
                i
            }
            Order::Random => {
                let mut x = self.state;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.state = x;
                (x % self.len as u64) as usize
            }
        }
    }
}

/// Runs `fut` until done or `deadline`. The watchdog sleep is only re-armed when it
/// fires early, so a fast request costs no timer operation at all.
async fn with_timeout<F>(
    watchdog: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    fut: F,
) -> Result<Resp, Failure>
where
    F: Future<Output = Result<Resp, Failure>>,
{
    tokio::pin!(fut);
    loop {
        tokio::select! {
            biased;
            r = &mut fut => return r,
            () = watchdog.as_mut() => {
                if Instant::now() >= deadline {
                    return Err(Failure::Timeout);
                }
                watchdog.as_mut().reset(deadline.into());
            }
        }
    }
}

/// One connection's request loop, until the step ends or the -n budget is spent.
/// Open model: a request sent this much after it was due counts as late (timer jitter
/// stays well below it).
const LATE: Duration = Duration::from_millis(2);

pub(crate) async fn connection(ctx: Rc<ThreadCtx>, index: usize) {
    let plan = ctx.plan.clone();
    let timeout = plan.opts.timeout;
    let mut session = if plan.opts.http3 {
        Session::H3(H3::new())
    } else if plan.opts.http2 {
        Session::H2(H2::new())
    } else {
        Session::H1(H1::new())
    };
    let mut picker = Picker::new(plan.opts.order, plan.targets.len(), index);
    let mut watchdog = Box::pin(tokio::time::sleep_until((ctx.start + timeout).into()));
    let mut pacer = Box::pin(tokio::time::sleep_until(ctx.start.into()));
    let mut next_intended = ctx.start + ctx.stagger * index as u32;
    let mut now = Instant::now();
    let mut waited_for_answer = false;
    loop {
        // Open model: latency counts from when the request should have started, so a
        // stalled server is charged for the requests it delayed (no coordinated omission).
        let intended = match ctx.interval {
            Some(interval) => {
                let t = next_intended;
                next_intended += interval;
                t
            }
            None => now,
        };
        if ctx.end.is_some_and(|end| intended >= end) || !ctx.claim() {
            break;
        }
        if intended > now {
            pacer.as_mut().reset(intended.into());
            pacer.as_mut().await;
        } else if ctx.interval.is_some() && waited_for_answer && now - intended > LATE {
            ctx.stats.borrow_mut().late_sends += 1;
        }
        // Whatever the cause of a delay (the connection busy, or this thread not run in
        // time), only a send close to when it was due keeps the schedule. A connection's
        // first send is excused: thousands of tasks start at once.
        let sent = Instant::now();
        if ctx.interval.is_some() {
            let lag = sent.saturating_duration_since(intended);
            let mut stats = ctx.stats.borrow_mut();
            if !waited_for_answer || lag <= LATE {
                stats.on_time += 1;
            } else if intended > now {
                // The connection was free when the request fell due: the generator
                // itself woke late.
                stats.generator_late += 1;
            }
        }
        // Only lateness behind an answer counts: a connection task starting a little
        // after its first slot (thousands start at once) is no shortage of connections.
        waited_for_answer = true;
        let target = &plan.targets[picker.pick()];
        let want_server = ctx.stats.borrow().server.is_none();
        let result = with_timeout(
            &mut watchdog,
            sent + timeout,
            session.request(&plan, target, want_server),
        )
        .await;
        now = Instant::now();
        let slot = ctx.slot(now);
        let mut stats = ctx.stats.borrow_mut();
        match result {
            Ok(resp) => {
                stats.response(resp.status, resp.bytes, now - intended, slot, &ctx.live);
                if want_server {
                    stats.server = resp.server.or_else(|| Some(String::new()));
                    stats.doc_len = Some(resp.body_len);
                }
            }
            Err(f) => {
                if f == Failure::Timeout {
                    session.reset();
                }
                stats.failure(f, slot, &ctx.live);
            }
        }
        stats.last_done = Some(now);
    }
}

//! Admission to the backend: how many requests it sees at once, who waits, who is shed.
//!
//! - A concurrency limit, fixed (`backend_max_concurrency = N`, php-fpm's
//!   `pm.max_children`, an app pool's processes × concurrency) or adaptive ("auto" when
//!   the backend's size is unknown): the limit follows the backend's latency in the manner
//!   of Netflix's concurrency-limits Gradient2, so that a slowing backend gets fewer
//!   requests at once, not more. No crate implements this for tokio; it is one small
//!   state machine fed by the slots that end.
//! - A bounded, time-limited queue in front of it, so that a request which waited its
//!   `backend_queue_timeout` is answered 503 or stale instead of being served late.
//!   First come first served, except that a freed slot stays on its worker thread while
//!   that thread holds no more than its fair share of the limit.
//! - A reserved share for requests with a session cookie or Authorization (editors,
//!   logged-in users): anonymous traffic can fill the rest, never all of it.
//!
//! Cache hits and static files never come here: they are never queued behind the backend.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::worker;

/// Who asks for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Anonymous requests and fills.
    Normal,
    /// A request with a session cookie or Authorization: served first while sessions
    /// hold fewer than their share of the slots.
    Session,
}

/// How the limit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Fixed(usize),
    /// Starts at `initial`, moves between `min` and `max` with the backend's latency.
    Adaptive {
        initial: usize,
        min: usize,
        max: usize,
    },
}

pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Mirrors of the state for metrics, read without the lock.
    limit: AtomicUsize,
    in_use: AtomicUsize,
    waiting: AtomicUsize,
    max_waiting: usize,
    queue_timeout: Duration,
    reserved: usize,
    adaptive: Option<Mutex<Gradient>>,
}

/// A priority semaphore: tokio's is fair but has one queue, and a slot freed must go to
/// a waiting session first. Hand-written for that, and to keep slots on the worker
/// thread that freed them: handing a slot to a waiter on another thread wakes that
/// thread's runtime (an eventfd write) and moves the backend connection with it (two
/// epoll_ctl calls), which cost more than php-fpm's own work for a small page. Its lock
/// is held for a few instructions per backend request, never on the hit path.
struct State {
    limit: usize,
    in_use: usize,
    sessions_in_use: usize,
    /// Per worker thread (`worker::id()`), grown as threads show up.
    threads: Vec<Local>,
    /// Arrival numbers: beyond the sessions' share, first come first served.
    arrivals: u64,
}

type Queue = VecDeque<(u64, oneshot::Sender<()>)>;

#[derive(Default)]
struct Local {
    in_use: usize,
    normal: Queue,
    sessions: Queue,
}

impl Local {
    fn is_empty(&self) -> bool {
        self.normal.is_empty() && self.sessions.is_empty()
    }

    /// The queue of whoever came first here: (arrival, is a session).
    fn oldest(&self) -> Option<(u64, bool)> {
        match (self.sessions.front(), self.normal.front()) {
            (None, None) => None,
            (Some((s, _)), None) => Some((*s, true)),
            (None, Some((n, _))) => Some((*n, false)),
            (Some((s, _)), Some((n, _))) => Some(if s < n { (*s, true) } else { (*n, false) }),
        }
    }
}

impl State {
    fn local(&mut self, thread: usize) -> &mut Local {
        if self.threads.len() <= thread {
            self.threads.resize_with(thread + 1, Local::default);
        }
        &mut self.threads[thread]
    }

    fn queued(&self) -> usize {
        self.threads
            .iter()
            .map(|l| l.normal.len() + l.sessions.len())
            .sum()
    }

    /// Gives free slots to waiters, `here` being the thread that freed them:
    /// - sessions first while they hold less than their share (this thread's, else the
    ///   oldest anywhere);
    /// - then this thread's oldest waiter while the thread holds less than its fair
    ///   share of the limit, or no other thread waits;
    /// - else the oldest waiter of any thread, so that no thread starves another.
    fn grant(&mut self, here: usize, reserved: usize) {
        self.local(here);
        while self.in_use < self.limit {
            let Some((thread, session)) = self.pick(here, reserved) else {
                return;
            };
            let local = &mut self.threads[thread];
            let queue = if session {
                &mut local.sessions
            } else {
                &mut local.normal
            };
            let Some((_, tx)) = queue.pop_front() else {
                return;
            };
            // A waiter that gave up (timed out, or its client left) is skipped.
            if tx.send(()).is_ok() {
                local.in_use += 1;
                self.in_use += 1;
                if session {
                    self.sessions_in_use += 1;
                }
            }
        }
    }

    fn pick(&self, here: usize, reserved: usize) -> Option<(usize, bool)> {
        if self.sessions_in_use < reserved {
            if !self.threads[here].sessions.is_empty() {
                return Some((here, true));
            }
            let oldest_session = self
                .threads
                .iter()
                .enumerate()
                .filter_map(|(t, l)| l.sessions.front().map(|(a, _)| (*a, t)))
                .min();
            if let Some((_, t)) = oldest_session {
                return Some((t, true));
            }
        }
        let local = &self.threads[here];
        if let Some((_, session)) = local.oldest() {
            let others_wait = self
                .threads
                .iter()
                .enumerate()
                .any(|(t, l)| t != here && !l.is_empty());
            let fair_share = self.limit.div_ceil(self.threads.len());
            if !others_wait || local.in_use < fair_share {
                return Some((here, session));
            }
        }
        self.threads
            .iter()
            .enumerate()
            .filter_map(|(t, l)| l.oldest().map(|(a, s)| (a, t, s)))
            .min()
            .map(|(_, t, s)| (t, s))
    }
}

impl Limiter {
    /// `session_share` of the limit (at least one slot when the limit is 2 or more,
    /// never all of it) goes to requests with a session first.
    pub fn new(
        mode: Mode,
        session_share: f64,
        max_waiting: usize,
        queue_timeout: Duration,
    ) -> Limiter {
        let (limit, adaptive) = match mode {
            Mode::Fixed(n) => (n.max(1), None),
            Mode::Adaptive { initial, min, max } => {
                let (min, max) = (min.max(1), max.max(min.max(1)));
                let initial = initial.clamp(min, max);
                (initial, Some(Mutex::new(Gradient::new(initial, min, max))))
            }
        };
        Limiter {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    limit,
                    in_use: 0,
                    sessions_in_use: 0,
                    threads: Vec::new(),
                    arrivals: 0,
                }),
                limit: AtomicUsize::new(limit),
                in_use: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
                max_waiting,
                queue_timeout,
                reserved: reserved_slots(limit, session_share),
                adaptive,
            }),
        }
    }

    /// A backend slot, or `None` when the queue is full or the wait timed out.
    pub async fn acquire(&self, priority: Priority) -> Option<BackendSlot> {
        self.acquire_on(worker::id(), priority).await
    }

    /// `acquire` as if from worker thread `thread`.
    async fn acquire_on(&self, thread: usize, priority: Priority) -> Option<BackendSlot> {
        let inner = &self.inner;
        let rx = {
            let mut st = inner.lock();
            st.local(thread);
            // Nobody jumps a waiting session; sessions may pass waiting anonymous ones.
            let queued_ahead = match priority {
                Priority::Normal => st.threads.iter().any(|l| !l.is_empty()),
                Priority::Session => st.threads.iter().any(|l| !l.sessions.is_empty()),
            };
            if st.in_use < st.limit && !queued_ahead {
                st.in_use += 1;
                st.threads[thread].in_use += 1;
                if priority == Priority::Session {
                    st.sessions_in_use += 1;
                }
                None
            } else {
                if st.queued() >= inner.max_waiting {
                    return None;
                }
                let (tx, rx) = oneshot::channel();
                st.arrivals += 1;
                let n = st.arrivals;
                let local = &mut st.threads[thread];
                match priority {
                    Priority::Normal => local.normal.push_back((n, tx)),
                    Priority::Session => local.sessions.push_back((n, tx)),
                }
                inner.waiting.fetch_add(1, Ordering::Relaxed);
                Some(Waiter {
                    rx,
                    inner: inner.clone(),
                    priority,
                    thread,
                    granted: false,
                })
            }
        };
        if let Some(mut waiter) = rx {
            let granted = tokio::time::timeout(inner.queue_timeout, &mut waiter.rx).await;
            match granted {
                Ok(Ok(())) => waiter.granted = true,
                // Timed out: the Waiter's drop returns a slot granted meanwhile.
                _ => return None,
            }
        }
        let in_flight = inner.in_use.fetch_add(1, Ordering::Relaxed) + 1;
        Some(BackendSlot {
            inner: inner.clone(),
            priority,
            thread,
            started: Instant::now(),
            in_flight,
        })
    }

    /// The limit now (it moves when adaptive).
    pub fn limit(&self) -> usize {
        self.inner.limit.load(Ordering::Relaxed)
    }

    /// Slots that go to sessions first.
    pub fn reserved(&self) -> usize {
        self.inner.reserved
    }

    pub fn is_adaptive(&self) -> bool {
        self.inner.adaptive.is_some()
    }

    pub fn in_use(&self) -> usize {
        self.inner.in_use.load(Ordering::Relaxed)
    }

    /// Requests waiting in the queue for a slot.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::Relaxed)
    }
}

/// A request in the queue. Dropped without its slot (timed out, or the client left and
/// its future was dropped): a slot granted in the meantime goes back, and its place in
/// the queue is cleared at once, so that the dead never fill the queue.
struct Waiter {
    rx: oneshot::Receiver<()>,
    inner: Arc<Inner>,
    priority: Priority,
    thread: usize,
    granted: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.inner.waiting.fetch_sub(1, Ordering::Relaxed);
        if self.granted {
            return;
        }
        self.rx.close();
        if self.rx.try_recv().is_ok() {
            self.inner.release(self.priority, self.thread);
            return;
        }
        let mut st = self.inner.lock();
        let local = st.local(self.thread);
        let queue = match self.priority {
            Priority::Normal => &mut local.normal,
            Priority::Session => &mut local.sessions,
        };
        queue.retain(|(_, tx)| !tx.is_closed());
        st.grant(self.thread, self.inner.reserved);
    }
}

fn reserved_slots(limit: usize, share: f64) -> usize {
    if limit < 2 || share <= 0.0 {
        return 0;
    }
    ((limit as f64 * share).ceil() as usize).clamp(1, limit - 1)
}

/// One request's hold on the backend; given back (and, when adaptive, its time
/// counted) when dropped, after the response body ended.
pub struct BackendSlot {
    inner: Arc<Inner>,
    priority: Priority,
    /// The worker thread it was granted to.
    thread: usize,
    started: Instant,
    /// Requests at the backend when this one started, itself included.
    in_flight: usize,
}

impl Drop for BackendSlot {
    fn drop(&mut self) {
        self.inner.in_use.fetch_sub(1, Ordering::Relaxed);
        if let Some(g) = &self.inner.adaptive {
            let change = g.lock().unwrap_or_else(PoisonError::into_inner).sample(
                self.started.elapsed(),
                self.in_flight,
                Instant::now(),
            );
            if let Some(new) = change {
                self.inner.resize(new, self.thread);
            }
        }
        self.inner.release(self.priority, self.thread);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is counters and queues, consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release(&self, priority: Priority, thread: usize) {
        let mut st = self.lock();
        st.in_use = st.in_use.saturating_sub(1);
        let local = st.local(thread);
        local.in_use = local.in_use.saturating_sub(1);
        if priority == Priority::Session {
            st.sessions_in_use = st.sessions_in_use.saturating_sub(1);
        }
        st.grant(thread, self.reserved);
    }

    /// Moves the limit to `new`; slots out beyond it are not given again.
    fn resize(&self, new: usize, here: usize) {
        let mut st = self.lock();
        st.limit = new;
        self.limit.store(new, Ordering::Relaxed);
        st.grant(here, self.reserved);
    }
}

/// Gradient2: the limit grows while the latency of recent requests stays near its long
/// average, and shrinks in proportion when it rises (the backend queues inside).
struct Gradient {
    limit: f64,
    min: usize,
    max: usize,
    /// Average time of many windows: the backend's latency when not queueing.
    long_rtt: Option<f64>,
    window_start: Instant,
    window_sum: f64,
    window_count: u32,
    window_max_in_flight: usize,
}

/// A window ends after this long and at least `MIN_SAMPLES` requests.
const WINDOW: Duration = Duration::from_millis(100);
const MIN_SAMPLES: u32 = 8;
/// Latency may grow this much over the long average before the limit shrinks.
const TOLERANCE: f64 = 1.5;
/// Weight of one window in the long average (about 100 windows).
const LONG_WEIGHT: f64 = 0.01;
const SMOOTHING: f64 = 0.2;

impl Gradient {
    fn new(initial: usize, min: usize, max: usize) -> Gradient {
        Gradient {
            limit: initial as f64,
            min,
            max,
            long_rtt: None,
            window_start: Instant::now(),
            window_sum: 0.0,
            window_count: 0,
            window_max_in_flight: 0,
        }
    }

    /// Counts one request's time; at the end of a window, the new limit if it changed.
    fn sample(&mut self, rtt: Duration, in_flight: usize, now: Instant) -> Option<usize> {
        self.window_sum += rtt.as_secs_f64();
        self.window_count += 1;
        self.window_max_in_flight = self.window_max_in_flight.max(in_flight);
        if self.window_count < MIN_SAMPLES || now.duration_since(self.window_start) < WINDOW {
            return None;
        }
        let short = self.window_sum / f64::from(self.window_count);
        let used = self.window_max_in_flight;
        self.window_start = now;
        self.window_sum = 0.0;
        self.window_count = 0;
        self.window_max_in_flight = 0;
        self.update(short, used)
    }

    fn update(&mut self, short: f64, used: usize) -> Option<usize> {
        let long = match self.long_rtt {
            None => short,
            Some(l) => l * (1.0 - LONG_WEIGHT) + short * LONG_WEIGHT,
        };
        // After a long slow spell the average is high; let it come down faster once the
        // backend is quick again, or the limit would overshoot.
        let long = if long / short > 2.0 {
            long * 0.95
        } else {
            long
        };
        self.long_rtt = Some(long);
        let old = self.limit.round() as usize;
        // Growing a limit nobody uses proves nothing about the backend.
        if (used as f64) < self.limit / 2.0 && short <= long * TOLERANCE {
            return None;
        }
        let gradient = (TOLERANCE * long / short).clamp(0.5, 1.0);
        let queue = self.limit.sqrt();
        let target = self.limit * gradient + queue;
        self.limit = (self.limit * (1.0 - SMOOTHING) + target * SMOOTHING)
            .clamp(self.min as f64, self.max as f64);
        let new = self.limit.round() as usize;
        (new != old).then_some(new)
    }
}

#[cfg(test)]
mod tests;

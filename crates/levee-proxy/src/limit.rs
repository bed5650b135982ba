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
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn reserved_share() {
        assert_eq!(reserved_slots(1, 0.25), 0);
        assert_eq!(reserved_slots(2, 0.25), 1);
        assert_eq!(reserved_slots(4, 0.25), 1);
        assert_eq!(reserved_slots(5, 0.25), 2);
        assert_eq!(reserved_slots(64, 0.25), 16);
        assert_eq!(reserved_slots(4, 1.0), 3);
        assert_eq!(reserved_slots(64, 0.0), 0);
    }

    /// Feeds `windows` windows of requests taking `rtt` with `used` in flight.
    fn run(g: &mut Gradient, windows: usize, rtt: Duration, used: usize, now: &mut Instant) {
        for _ in 0..windows {
            for _ in 0..MIN_SAMPLES {
                g.sample(rtt, used, *now);
            }
            *now += WINDOW;
            g.sample(rtt, used, *now);
        }
    }

    #[test]
    fn a_steady_busy_backend_lets_the_limit_grow() {
        let mut g = Gradient::new(10, 2, 100);
        let mut now = Instant::now();
        run(&mut g, 50, ms(20), 100, &mut now);
        assert!(g.limit > 50.0, "{}", g.limit);
    }

    #[test]
    fn a_slowing_backend_gets_fewer_requests() {
        let mut g = Gradient::new(40, 2, 100);
        let mut now = Instant::now();
        run(&mut g, 20, ms(20), 40, &mut now);
        let before = g.limit;
        // The backend queues inside: the same work takes five times as long.
        run(&mut g, 20, ms(100), 40, &mut now);
        assert!(g.limit < before / 2.0, "{before} -> {}", g.limit);
        assert!(g.limit >= 2.0);
    }

    #[test]
    fn an_idle_limit_does_not_grow() {
        let mut g = Gradient::new(20, 2, 100);
        let mut now = Instant::now();
        run(&mut g, 50, ms(20), 3, &mut now);
        assert_eq!(g.limit, 20.0);
    }

    #[tokio::test]
    async fn resizing_keeps_slots_in_step_with_the_limit() {
        let l = Limiter::new(
            Mode::Adaptive {
                initial: 4,
                min: 1,
                max: 8,
            },
            0.0,
            0,
            ms(10),
        );
        let a = l.acquire(Priority::Normal).await.unwrap();
        let b = l.acquire(Priority::Normal).await.unwrap();
        // Down to 1 while two are out: both must come back before a new one goes.
        l.inner.resize(1, 0);
        assert!(l.acquire(Priority::Normal).await.is_none());
        drop(a);
        assert!(l.acquire(Priority::Normal).await.is_none(), "one still out");
        drop(b);
        let _c = l.acquire(Priority::Normal).await.unwrap();
        assert!(
            l.acquire(Priority::Normal).await.is_none(),
            "the limit is 1"
        );
        l.inner.resize(3, 0);
        let _d = l.acquire(Priority::Normal).await.unwrap();
        let _e = l.acquire(Priority::Normal).await.unwrap();
        assert!(l.acquire(Priority::Normal).await.is_none());
        assert_eq!(l.in_use(), 3);
    }

    /// Four slots, all busy with anonymous work and a queue of it: a session's request
    /// gets the next slot that frees, ahead of the anonymous queue.
    #[tokio::test]
    async fn a_freed_slot_goes_to_a_waiting_session_first() {
        let l = Arc::new(Limiter::new(
            Mode::Fixed(4),
            0.25,
            100,
            Duration::from_secs(5),
        ));
        let mut busy = Vec::new();
        for _ in 0..4 {
            busy.push(l.acquire(Priority::Normal).await.unwrap());
        }
        let queued: Vec<_> = (0..3)
            .map(|_| {
                let l = l.clone();
                tokio::spawn(
                    async move { l.acquire(Priority::Normal).await.map(|_| Instant::now()) },
                )
            })
            .collect();
        while l.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        let editor = {
            let l = l.clone();
            tokio::spawn(async move {
                l.acquire(Priority::Session)
                    .await
                    .map(|s| (Instant::now(), s))
            })
        };
        while l.waiting() < 4 {
            tokio::task::yield_now().await;
        }
        busy.pop();
        let (editor_at, slot) = editor.await.unwrap().unwrap();
        drop((busy, slot));
        for q in queued {
            let at = q.await.unwrap().unwrap();
            assert!(editor_at <= at, "an anonymous request went first");
        }
        // Anonymous work alone may use every slot: nothing idles for sessions.
        let all: Vec<_> = futures_take(&l, Priority::Normal, 4).await;
        assert_eq!(all.len(), 4);
    }

    #[tokio::test]
    async fn a_waiter_that_times_out_gives_its_slot_back() {
        let l = Limiter::new(Mode::Fixed(1), 0.0, 10, ms(20));
        let a = l.acquire(Priority::Normal).await.unwrap();
        assert!(l.acquire(Priority::Normal).await.is_none(), "timed out");
        drop(a);
        let _b = l.acquire(Priority::Normal).await.unwrap();
        assert_eq!(l.waiting(), 0);
    }

    /// Clients that leave while queued (their futures dropped, as hyper does when a
    /// connection closes) leave nothing behind: no place in the queue, no slot.
    #[tokio::test]
    async fn abandoned_waiters_do_not_clog_the_queue() {
        let l = Arc::new(Limiter::new(
            Mode::Fixed(2),
            0.0,
            4,
            Duration::from_secs(30),
        ));
        let a = l.acquire(Priority::Normal).await.unwrap();
        let b = l.acquire(Priority::Normal).await.unwrap();
        let queued: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                tokio::spawn(async move { l.acquire(Priority::Normal).await.is_some() })
            })
            .collect();
        while l.waiting() < 4 {
            tokio::task::yield_now().await;
        }
        for q in &queued {
            q.abort();
        }
        for q in queued {
            let _ = q.await;
        }
        assert_eq!(l.waiting(), 0);
        drop((a, b));
        assert_eq!(l.in_use(), 0);
        // The queue has room and both slots are free again.
        let _c = l.acquire(Priority::Normal).await.unwrap();
        let _d = l.acquire(Priority::Normal).await.unwrap();
        assert_eq!(l.inner.lock().queued(), 0);
    }

    /// Queues `priority` on `thread` in a task; resolves to when it got its slot.
    async fn queue_on(
        l: &Arc<Limiter>,
        thread: usize,
        priority: Priority,
    ) -> tokio::task::JoinHandle<Option<(Instant, BackendSlot)>> {
        let before = l.waiting();
        let task = {
            let l = l.clone();
            tokio::spawn(async move {
                l.acquire_on(thread, priority)
                    .await
                    .map(|s| (Instant::now(), s))
            })
        };
        while l.waiting() == before {
            tokio::task::yield_now().await;
        }
        task
    }

    /// A slot freed on a worker thread goes to that thread's waiter, even one that came
    /// later than another thread's, while the thread holds no more than its share.
    #[tokio::test]
    async fn a_freed_slot_stays_on_its_thread() {
        let l = Arc::new(Limiter::new(
            Mode::Fixed(2),
            0.0,
            10,
            Duration::from_secs(5),
        ));
        let on0 = l.acquire_on(0, Priority::Normal).await.unwrap();
        let on1 = l.acquire_on(1, Priority::Normal).await.unwrap();
        let first = queue_on(&l, 1, Priority::Normal).await;
        let second = queue_on(&l, 0, Priority::Normal).await;
        drop(on0);
        let (_, s0) = second.await.unwrap().unwrap();
        assert_eq!(s0.thread, 0);
        assert!(!first.is_finished());
        drop(on1);
        let (_, s1) = first.await.unwrap().unwrap();
        assert_eq!(s1.thread, 1);
    }

    /// A thread holding every slot does not keep them for its own queue: beyond its
    /// fair share, a freed slot goes to the oldest waiter anywhere.
    #[tokio::test]
    async fn a_busy_thread_does_not_starve_another() {
        let l = Arc::new(Limiter::new(
            Mode::Fixed(2),
            0.0,
            10,
            Duration::from_secs(5),
        ));
        let mut mine = vec![
            l.acquire_on(0, Priority::Normal).await.unwrap(),
            l.acquire_on(0, Priority::Normal).await.unwrap(),
        ];
        let remote = queue_on(&l, 1, Priority::Normal).await;
        let local = queue_on(&l, 0, Priority::Normal).await;
        mine.pop();
        let (_, s) = remote.await.unwrap().unwrap();
        assert_eq!(s.thread, 1, "the other thread's older waiter goes first");
        assert!(!local.is_finished());
        mine.pop();
        let (_, s) = local.await.unwrap().unwrap();
        assert_eq!(s.thread, 0);
    }

    /// The sessions' share comes before keeping slots on their thread.
    #[tokio::test]
    async fn a_session_on_another_thread_comes_before_local_anonymous_work() {
        let l = Arc::new(Limiter::new(
            Mode::Fixed(4),
            0.25,
            10,
            Duration::from_secs(5),
        ));
        let mut mine = Vec::new();
        for _ in 0..4 {
            mine.push(l.acquire_on(0, Priority::Normal).await.unwrap());
        }
        let local = queue_on(&l, 0, Priority::Normal).await;
        let editor = queue_on(&l, 1, Priority::Session).await;
        mine.pop();
        let (_, s) = editor.await.unwrap().unwrap();
        assert_eq!(s.thread, 1);
        assert!(!local.is_finished());
        drop(mine);
        assert!(local.await.unwrap().is_some());
    }

    async fn futures_take(l: &Limiter, p: Priority, n: usize) -> Vec<BackendSlot> {
        let mut v = Vec::new();
        for _ in 0..n {
            if let Some(s) = l.acquire(p).await {
                v.push(s);
            }
        }
        v
    }
}

//! Admission to the backend: how many requests it sees at once, who waits, who is shed.
//!
//! - A concurrency limit, fixed (`backend_max_concurrency = N`, php-fpm's
//!   `pm.max_children`, an app pool's processes × concurrency) or adaptive ("auto" when
//!   the backend's size is unknown): the limit follows the backend's latency in the manner
//!   of Netflix's concurrency-limits Gradient2 (gradient.rs), so that a slowing backend
//!   gets fewer requests at once, not more.
//! - Three classes of work, by what a request is worth to people:
//!   - **shared**: a revalidation of a stored page (it serves everyone who reads it);
//!   - **session**: a request with a session cookie or Authorization (editors,
//!     logged-in users), with a reserved share of the slots (`backend_session_share`);
//!   - **anonymous**: a pass without a session, a fill of a URL nothing is stored for
//!     (it serves one client, so far): the lane where a crawler storm lands (lane.rs).
//!
//!   A freed slot goes to sessions below their share, then to revalidations, then to
//!   sessions, then to the lane. The lane may hold more than
//!   `backend_anonymous_share` of the slots only while people have nothing in flight or
//!   waiting; inside it, client networks are served least-used first, each with at most
//!   `backend_network_share` of the slots in flight and as many waiting.
//! - Bounded, time-limited queues: people's work waits up to `backend_queue_timeout`
//!   (then 503 or stale); anonymous work is refused at once (429 when its network has its
//!   share waiting, 503 when the lane cannot serve it within `backend_anonymous_wait`)
//!   rather than late, and never reaches the backend.
//! - A freed people's slot stays on its worker thread while that thread holds no more
//!   than its fair share of the limit.
//!
//! Cache hits and static files never come here: they are never queued behind the backend.

mod class;
pub mod client_net;
pub mod fleet;
mod governor;
mod gradient;
mod lane;
mod overflow;
mod people;
mod people_times;
mod refusal;
mod sharing;
mod state;
pub mod worker;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};

use crate::client_net::ClientNet;
pub use class::{Class, ClassStats, SessionOf};
use governor::Governor;
use gradient::Gradient;
pub use lane::LaneConfig;
use lane::{Arrival, Grant, Lane, LaneWaiter};
use people::{People, SessionWaiter};
pub use refusal::{Refusal, Refused};
pub use sharing::{Applied, Ask, FleetStats};
use state::State;

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

/// Cheap to clone: the clones share one limiter (the fleet's renewal task holds one).
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Mirrors of the state for metrics, read without the lock.
    limit: AtomicUsize,
    in_use: AtomicUsize,
    waiting: AtomicUsize,
    stats: ClassStats,
    max_waiting: usize,
    queue_timeout: Duration,
    reserved: usize,
    lane: LaneConfig,
    adaptive: Option<Mutex<Gradient>>,
    /// In a fleet, the other nodes' requests at the backend as their last reports say
    /// (kept while Redis is unreachable: they still run their parts): the adaptive estimate is of the backend's capacity, so it counts
    /// every node's load, not this node's share of it (which would read as a limit
    /// nobody uses and decay it to the floor).
    elsewhere: AtomicUsize,
    /// Woken when the fleet's shares should be renewed now rather than at the next
    /// tick: a person waits here, or the capacity moved.
    fleet_wake: Arc<Notify>,
    /// Woken when anonymous work wants more than it has, or a slot freed while some
    /// node wants more: the fleet should hear it soon, but a crawler's thousands of
    /// refusals a second are no reason to renew every `PACE` (levee-tiers' fleet.rs).
    fleet_demand: Arc<Notify>,
}

impl Limiter {
    /// `session_share` of the limit (at least one slot when the limit is 2 or more,
    /// never all of it) goes to requests with a session first.
    pub fn new(
        mode: Mode,
        session_share: f64,
        max_waiting: usize,
        queue_timeout: Duration,
        lane: LaneConfig,
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
                    capacity: limit,
                    in_use: 0,
                    people: People::default(),
                    arrivals: 0,
                    lane: Lane::default(),
                    people_seen: None,
                    governor: Governor::new(),
                    fleet: None,
                    probe: None,
                }),
                limit: AtomicUsize::new(limit),
                in_use: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
                stats: ClassStats::default(),
                max_waiting,
                queue_timeout,
                reserved: reserved_slots(limit, session_share),
                lane,
                adaptive,
                elsewhere: AtomicUsize::new(0),
                fleet_wake: Arc::new(Notify::new()),
                fleet_demand: Arc::new(Notify::new()),
            }),
        }
    }

    /// A backend slot, or why not.
    pub async fn acquire(&self, class: Class) -> Result<BackendSlot, Refused> {
        self.acquire_on(worker::id(), class).await
    }

    /// `acquire` as if from worker thread `thread`.
    async fn acquire_on(&self, thread: usize, class: Class) -> Result<BackendSlot, Refused> {
        let inner = &self.inner;
        let asked = Instant::now();
        let (class, overflow) = inner.effective(class);
        let wait = match class {
            Class::Anonymous(net) => inner.arrive_lane(thread, net)?,
            _ => inner.arrive_people(thread, class)?,
        };
        if let Some(wait) = wait {
            let mut waiter = Waiter {
                wait,
                inner: inner.clone(),
                class,
                thread,
                granted: false,
            };
            inner.waiting.fetch_add(1, Ordering::Relaxed);
            inner.stats.queued[class.index()].fetch_add(1, Ordering::Relaxed);
            let (timeout, on_timeout) = match class {
                Class::Anonymous(_) => (inner.lane.wait, Refusal::LaneWait),
                _ => (inner.queue_timeout, Refusal::QueueTimeout),
            };
            let got = match &mut waiter.wait {
                Wait::People(rx) => tokio::time::timeout(timeout, rx)
                    .await
                    .map(|r| r.map(|()| Grant::Slot)),
                Wait::Lane(rx) => inner.wait_lane(rx, timeout, thread).await,
            };
            match got {
                Ok(Ok(Grant::Slot)) => waiter.granted = true,
                Ok(Ok(Grant::Displaced)) => return Err(inner.refuse(Refusal::NetworkOverShare)),
                // The lane's wait ran out while the backend has room: no alarm.
                Err(_) if inner.admit_late(&mut waiter) => waiter.granted = true,
                // Timed out (or the limiter is gone): the Waiter's drop returns a slot
                // granted meanwhile.
                _ => return Err(inner.refuse(on_timeout)),
            }
        }
        let i = class.index();
        let in_flight = inner.in_use.fetch_add(1, Ordering::Relaxed)
            + 1
            + inner.elsewhere.load(Ordering::Relaxed);
        inner.stats.in_flight[i].fetch_add(1, Ordering::Relaxed);
        inner.stats.admitted[i].fetch_add(1, Ordering::Relaxed);
        let waited = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
        inner.stats.wait_micros[i].fetch_add(waited, Ordering::Relaxed);
        Ok(BackendSlot {
            inner: inner.clone(),
            class,
            thread,
            started: Instant::now(),
            in_flight,
            _overflow: overflow,
        })
    }

    /// The limit now (it moves when adaptive).
    pub fn limit(&self) -> usize {
        self.inner.limit.load(Ordering::Relaxed)
    }

    /// The backend's capacity as this node knows it: the limit, unless the node shares
    /// it with a fleet (then its limit is its share).
    pub fn capacity(&self) -> usize {
        self.inner.lock().capacity
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

    /// Is the backend truly saturated (`State::saturated`)? A stale copy is then served
    /// at once instead of waiting for its revalidation. Takes the lock: asked only for a
    /// stored page that needs revalidating, never on a hit.
    pub fn saturated(&self) -> bool {
        self.inner.lock().saturated()
    }

    /// Would `class` be refused at once, without a wait? A peek, for work a refused
    /// request would waste: the fleet's fill lock in Redis (levee-tiers), taken and
    /// freed, two round trips for each of a crawler's thousands of refusals a second.
    /// People's requests never are: the lane never refuses them.
    pub fn refuses_now(&self, class: Class) -> bool {
        let Class::Anonymous(net) = class else {
            return false;
        };
        let inner = &self.inner;
        let st = inner.lock();
        let view = st.lane_view(&inner.lane, net, Instant::now());
        let bound = st
            .lane
            .bound(inner.max_waiting, inner.lane.wait, view.slots, view.strict);
        !view.admit && st.lane.refuses(net, view.net_cap, bound, view.strict)
    }

    /// The lane's settings.
    pub fn lane(&self) -> &LaneConfig {
        &self.inner.lane
    }

    /// What the lane may hold now while people have work.
    pub fn lane_cap(&self) -> usize {
        let st = self.inner.lock();
        st.governor.lane_cap(&self.inner.lane, st.limit)
    }

    pub fn stats(&self) -> &ClassStats {
        &self.inner.stats
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is counters and queues, consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A lane waiter's wait. A freed slot is handed over by whoever frees it; but a
    /// slot the lane left free only for people's linger is freed by nobody, so while
    /// lingering, the waiter looks again now and then.
    async fn wait_lane(
        &self,
        rx: &mut oneshot::Receiver<Grant>,
        timeout: Duration,
        thread: usize,
    ) -> Result<Result<Grant, oneshot::error::RecvError>, tokio::time::error::Elapsed> {
        let linger = self.lane.people_linger;
        if linger.is_zero() {
            return tokio::time::timeout(timeout, rx).await;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        // Often enough to end a governed rest (governor.rs) within a tenth of a second.
        let tick = (linger / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        loop {
            let next = (tokio::time::Instant::now() + tick).min(deadline);
            match tokio::time::timeout_at(next, &mut *rx).await {
                Ok(got) => return Ok(got),
                Err(elapsed) if next >= deadline => return Err(elapsed),
                Err(_) => {
                    let mut st = self.lock();
                    st.grant(thread, self.reserved, &self.lane);
                }
            }
        }
    }

    /// The class a request is scheduled in: a person's beyond its session's share of
    /// the session class is anonymous work of its network (people.rs), counted as its
    /// session's overflow until it ends.
    fn effective(self: &Arc<Self>, class: Class) -> (Class, Option<Overflow>) {
        let Class::Session(of) = class else {
            return (class, None);
        };
        let mut st = self.lock();
        if st.people.session_arrival_under_share(of) {
            return (class, None);
        }
        st.people.overflow_started(of.who);
        self.stats.over_share.fetch_add(1, Ordering::Relaxed);
        let overflow = Overflow {
            inner: self.clone(),
            who: of.who,
        };
        (Class::Anonymous(of.net), Some(overflow))
    }

    /// A lane waiter whose wait ran out: it gets a slot after all if one was granted
    /// meanwhile, or if the backend is not truly saturated (`State::saturated`: the lane
    /// held it back for people's linger or its share, with slots to spare), unless
    /// people's latency holds the lane below its share (governor.rs). Their cut is the
    /// backend's room as people feel it, which levee's slots do not show (php-fpm behind
    /// nginx, two cores): let in whenever their waits ran out, a storm's waiters came
    /// in at once, 5 to 8 crawlers' pages every few seconds beside the editors', and
    /// those were the editors' slowest requests (issue 51). False: refuse it.
    fn admit_late(&self, waiter: &mut Waiter) -> bool {
        let (Wait::Lane(rx), Class::Anonymous(net)) = (&mut waiter.wait, waiter.class) else {
            return false;
        };
        let mut st = self.lock();
        rx.close();
        if rx.try_recv() == Ok(Grant::Slot) {
            return true;
        }
        st.lane.remove_closed(net);
        let now = Instant::now();
        let view = st.lane_view(&self.lane, net, now);
        // People's latency holds the lane below its share and the lane is not open now.
        let held_back = view.people_busy && view.cut && !view.may_take;
        if st.in_use >= st.limit || st.saturated() || held_back {
            return false;
        }
        st.in_use += 1;
        st.people.local(waiter.thread).in_use += 1;
        st.admit_lane(net, now);
        true
    }

    fn refuse(&self, why: Refusal) -> Refused {
        self.stats.refused[why.index()].fetch_add(1, Ordering::Relaxed);
        let retry_after = match why {
            Refusal::QueueFull | Refusal::QueueTimeout => 5,
            _ => self.lane.wait.as_secs().max(1),
        };
        Refused { why, retry_after }
    }

    /// A people's request: a slot now (`None`), a place in the queue, or refused.
    fn arrive_people(&self, thread: usize, class: Class) -> Result<Option<Wait>, Refused> {
        let mut st = self.lock();
        st.people.local(thread);
        st.people_seen = Some(Instant::now());
        // Nobody jumps a waiting session; sessions may pass waiting shared work; the
        // lane's waiters never hold people back.
        let queued_ahead = match class {
            Class::Session(_) => st.people.sessions_waiting(),
            _ => st.people.threads.iter().any(|l| !l.is_empty()),
        };
        if st.in_use < st.room() && !queued_ahead {
            st.in_use += 1;
            st.people.threads[thread].in_use += 1;
            if let Class::Session(of) = class {
                st.people.session_admitted(of);
            }
            return Ok(None);
        }
        if st.people.queued() >= self.max_waiting {
            drop(st);
            return Err(self.refuse(Refusal::QueueFull));
        }
        // A person waits: the fleet hears it now, and makes room.
        if st.fleet.is_some() {
            self.fleet_wake.notify_one();
        }
        let (tx, rx) = oneshot::channel();
        st.arrivals += 1;
        let arrival = st.arrivals;
        match class {
            Class::Session(of) => st
                .people
                .queue_session(thread, SessionWaiter { arrival, tx, of }),
            _ => st.people.threads[thread].shared.push_back((arrival, tx)),
        }
        Ok(Some(Wait::People(rx)))
    }

    /// An anonymous request: a slot now, a place in its network's queue, or refused at
    /// once.
    fn arrive_lane(&self, thread: usize, net: ClientNet) -> Result<Option<Wait>, Refused> {
        let mut st = self.lock();
        st.people.local(thread);
        let now = Instant::now();
        let view = st.lane_view(&self.lane, net, now);
        if view.admit {
            st.in_use += 1;
            st.people.threads[thread].in_use += 1;
            st.admit_lane(net, now);
            return Ok(None);
        }
        if !view.may_take {
            st.governor.pressed();
        }
        st.lane.wanted_at = Some(now);
        if st.fleet.is_some() {
            self.fleet_demand.notify_one();
        }
        let (tx, rx) = oneshot::channel();
        let waiter = LaneWaiter { thread, tx };
        let bound = st
            .lane
            .bound(self.max_waiting, self.lane.wait, view.slots, view.strict);
        let arrival = st
            .lane
            .arrive(net, waiter, view.net_cap, bound, view.strict, now);
        let expected = st.lane.expected_wait(view.slots);
        drop(st);
        let why = match arrival {
            Arrival::Queued => return Ok(Some(Wait::Lane(rx))),
            Arrival::NetworkOverShare => Refusal::NetworkOverShare,
            Arrival::Full => Refusal::LaneFull,
        };
        let mut refused = self.refuse(why);
        refused.retry_after = expected.as_secs().clamp(1, 60);
        Err(refused)
    }

    fn release(&self, class: Class, thread: usize, held: Duration) {
        let mut st = self.lock();
        st.in_use = st.in_use.saturating_sub(1);
        let local = st.people.local(thread);
        local.in_use = local.in_use.saturating_sub(1);
        match class {
            Class::Session(of) => st.people.session_released(of),
            Class::Anonymous(net) => {
                st.lane.release(net, held);
                if self.lane.governed && st.people_busy(self.lane.people_linger) {
                    st.governor.lane_released(held, Instant::now());
                }
            }
            Class::Shared => {}
        }
        if !matches!(class, Class::Anonymous(_)) {
            let now = Instant::now();
            st.people_seen = Some(now);
            if st.lane.in_use > 0 {
                st.governor.lane_active();
            }
            // People's latency is a session's: a revalidation's time is its URL's (one
            // slow page is no slow backend), a script's or a replay's is its own (a
            // session replayed through a node without editors set that node's lane by
            // the replay's pages). A slot given back unused (held zero) says nothing.
            let person = matches!(class, Class::Session(of) if !st.people.scripted(of));
            if person && !held.is_zero() {
                // In a fleet the cut is the fleet's (fleet.rs): of its capacity.
                let most = self.lane.cap(st.share_base());
                let lane = st.lane.in_use;
                st.governor.sample(held, most, lane, now);
                if let Some(f) = st.fleet.as_mut() {
                    f.times.push(held);
                }
            }
        }
        if st.fleet.as_ref().is_some_and(|f| f.contended) {
            self.fleet_demand.notify_one();
        }
        st.grant(thread, self.reserved, &self.lane);
    }

    /// Moves the capacity to `new` (the adaptive limit) and the probe's cap; alone it
    /// is the limit, in a fleet the next renewal shares it. Slots out beyond it are not
    /// given again.
    fn resize(&self, new: usize, probe: Option<usize>, here: usize) {
        let mut st = self.lock();
        st.capacity = new;
        st.probe = probe;
        match &st.fleet {
            None => st.limit = new,
            Some(_) => self.fleet_wake.notify_one(),
        }
        self.limit.store(st.limit, Ordering::Relaxed);
        st.grant(here, self.reserved, &self.lane);
    }
}

/// How a request waits for its slot.
enum Wait {
    People(oneshot::Receiver<()>),
    Lane(oneshot::Receiver<Grant>),
}

/// A request in a queue. Dropped without its slot (timed out, or the client left and
/// its future was dropped): a slot granted in the meantime goes back, and its place in
/// the queue is cleared at once, so that the dead never fill the queue.
struct Waiter {
    wait: Wait,
    inner: Arc<Inner>,
    class: Class,
    thread: usize,
    granted: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.inner.waiting.fetch_sub(1, Ordering::Relaxed);
        self.inner.stats.queued[self.class.index()].fetch_sub(1, Ordering::Relaxed);
        if self.granted {
            return;
        }
        let got_slot = match &mut self.wait {
            Wait::People(rx) => {
                rx.close();
                rx.try_recv().is_ok()
            }
            Wait::Lane(rx) => {
                rx.close();
                rx.try_recv() == Ok(Grant::Slot)
            }
        };
        if got_slot {
            self.inner
                .release(self.class, self.thread, Duration::from_millis(0));
            return;
        }
        let mut st = self.inner.lock();
        match self.class {
            Class::Anonymous(net) => st.lane.remove_closed(net),
            Class::Session(_) => st.people.remove_closed(self.thread, true),
            Class::Shared => st.people.remove_closed(self.thread, false),
        }
        st.grant(self.thread, self.inner.reserved, &self.inner.lane);
    }
}

fn reserved_slots(limit: usize, share: f64) -> usize {
    if limit < 2 || share <= 0.0 {
        return 0;
    }
    ((limit as f64 * share).ceil() as usize).clamp(1, limit - 1)
}

/// A session's request sent to the lane beyond its share, until it ends (refused, or its
/// slot given back): while a session has one, its share is one slot (people.rs).
struct Overflow {
    inner: Arc<Inner>,
    who: u64,
}

impl Drop for Overflow {
    fn drop(&mut self) {
        self.inner.lock().people.overflow_ended(self.who);
    }
}

/// One request's hold on the backend; given back (and, when adaptive, its time
/// counted) when dropped, after the response body ended.
pub struct BackendSlot {
    inner: Arc<Inner>,
    class: Class,
    /// The worker thread it was granted to.
    thread: usize,
    started: Instant,
    /// Requests at the backend when this one started, itself included (the fleet's,
    /// in a fleet).
    in_flight: usize,
    /// Dropped after the slot's own drop, which gives the slot back first.
    _overflow: Option<Overflow>,
}

impl Drop for BackendSlot {
    fn drop(&mut self) {
        self.inner.in_use.fetch_sub(1, Ordering::Relaxed);
        self.inner.stats.in_flight[self.class.index()].fetch_sub(1, Ordering::Relaxed);
        let held = self.started.elapsed();
        if let Some(g) = &self.inner.adaptive {
            let change = g.lock().unwrap_or_else(PoisonError::into_inner).sample(
                held,
                self.in_flight,
                Instant::now(),
            );
            if let Some((new, probe)) = change {
                self.inner.resize(new, probe, self.thread);
            }
        }
        self.inner.release(self.class, self.thread, held);
    }
}

#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod tests;

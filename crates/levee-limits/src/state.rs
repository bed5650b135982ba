//! The limiter's state under its lock: slots, people's queues, the lane, the governor,
//! the fleet's share; and how free slots are given out.

use std::time::{Duration, Instant};

use crate::client_net::ClientNet;
use crate::fleet::FleetState;
use crate::governor::Governor;
use crate::lane::{Grant, Lane, LaneConfig};
use crate::people::People;

/// A priority semaphore with classes: tokio's is fair but has one queue. Hand-written
/// for the classes and the lane's networks, and to keep slots on the worker thread that
/// freed them: handing a slot to a waiter on another thread wakes that thread's runtime
/// (an eventfd write) and moves the backend connection with it (two epoll_ctl calls),
/// which cost more than php-fpm's own work for a small page. Its lock is held for a few
/// instructions per backend request, never on the hit path.
/// What the lane would do with one more request of a network now.
pub(crate) struct LaneView {
    pub(crate) net_cap: usize,
    /// People's work in flight, waiting or lingering (`State::people_busy`).
    pub(crate) people_busy: bool,
    /// People's latency (or the fleet's part) has the lane's cap below its share.
    pub(crate) cut: bool,
    /// The lane's cap lets it take a slot now (and its slot is not resting).
    pub(crate) may_take: bool,
    /// A slot now, without passing a waiter that should have it.
    pub(crate) admit: bool,
    /// Its queue is bounded by what it serves within half its wait (else by
    /// `max_waiting`).
    pub(crate) strict: bool,
    /// The slots its waiters are served on: what their waits are reckoned on.
    pub(crate) slots: f64,
}

pub(crate) struct State {
    /// What this node may have at the backend at once: the capacity, or with a fleet
    /// this node's share of it.
    pub(crate) limit: usize,
    /// The backend's capacity as this node knows it (fixed, or adapted).
    pub(crate) capacity: usize,
    pub(crate) in_use: usize,
    /// People's waiters per worker thread and the session class's shares.
    pub(crate) people: People,
    /// Arrival numbers: the order of waiters within a class.
    pub(crate) arrivals: u64,
    pub(crate) lane: Lane,
    /// When people's work last came or ended.
    pub(crate) people_seen: Option<Instant>,
    /// The lane's cap while people have work, learnt from their latency.
    pub(crate) governor: Governor,
    /// Sharing the backend with other nodes (fleet.rs), once joined.
    pub(crate) fleet: Option<FleetState>,
    /// While the adaptive limit probes the backend (gradient.rs): fewer admitted.
    pub(crate) probe: Option<usize>,
}

impl State {
    /// People's work in flight, waiting, or seen within `linger`: the lane keeps to
    /// its share, so that the next editor's request or reader's revalidation finds a
    /// free slot rather than waiting for a crawler's request to end.
    /// In a fleet, another node's people count too (they use the same backend).
    pub(crate) fn people_busy(&self, linger: Duration) -> bool {
        self.people_busy_here(linger)
            || self
                .fleet
                .as_ref()
                .is_some_and(|f| !f.alone && f.people_elsewhere)
    }

    /// `people_busy` on this node alone: what it tells the fleet.
    pub(crate) fn people_busy_here(&self, linger: Duration) -> bool {
        self.in_use > self.lane.in_use
            || self.people.queued() > 0
            || self.people_seen.is_some_and(|t| t.elapsed() < linger)
    }

    /// Whether the backend is truly saturated: every slot this node may use is in use
    /// and, with a fleet, every slot of the fleet's as far as the last renewal told.
    /// Measured, never guessed from latency: only then does the lane refuse at once, or
    /// a stale page stand in for a revalidation. An answer that is merely slow, with
    /// slots to spare, is no alarm; a node whose share is full while the fleet has
    /// room waits for its next renewal instead.
    pub(crate) fn saturated(&self) -> bool {
        self.in_use >= self.limit && self.fleet.as_ref().is_none_or(|f| f.full(self.in_use))
    }

    /// What the lane would do with a request of `net` now.
    pub(crate) fn lane_view(&self, cfg: &LaneConfig, net: ClientNet, now: Instant) -> LaneView {
        let limit = self.limit;
        let net_cap = cfg.net_cap(self.share_base());
        let people_busy = self.people_busy(cfg.people_linger);
        let may_take = self
            .governor
            .lane_open(cfg, &self.lane, limit, people_busy, now);
        // Refused for its network's share or the queue's bound only when the backend is
        // truly saturated, or when the slots left are people's: people have work and
        // the lane holds all it may beside them. With room to spare it waits (up to
        // `max_waiting`).
        // While people's latency holds the lane below its share, its pace is the
        // governor's: waiters beyond what it serves in time were let in whenever the
        // lane opened a moment (a waiter ahead kept the newcomer out) and then waited
        // out their whole wait, refused late.
        // A probe of the adaptive limit (gradient.rs) holds admissions back without the
        // backend being saturated: its waiters are still bounded by what the lane can
        // serve in time, so that they are refused at once rather than after the whole
        // wait.
        let cut = self.governor.cut(cfg, limit);
        let strict = self.saturated()
            || (people_busy && (!may_take || cut))
            || (self.probe.is_some() && self.in_use >= self.room());
        LaneView {
            net_cap,
            people_busy,
            cut,
            may_take,
            admit: self.in_use < self.room() && may_take && self.lane.may_admit_now(net, net_cap),
            strict,
            // Its waiters are served at this node's pace: its limit (in a fleet its
            // share, at least one slot: a share of none grows at the next renewal).
            slots: self.governor.lane_slots(cfg, limit.max(1), people_busy),
        }
    }

    /// The other nodes' people's request times this node has not judged yet, judged
    /// as its own (people_times.rs; `most`: the lane's share of the fleet's capacity).
    pub(crate) fn judge_fleet_times(&mut self, most: usize) {
        let Some(f) = self.fleet.as_mut() else {
            return;
        };
        let peers = f.peers.iter();
        let times = f
            .times_seen
            .take(peers.map(|p| (p.node.as_str(), &p.report.people_times)));
        let (lane, now) = (self.lane.in_use, Instant::now());
        for held in times {
            self.governor.sample(held, most, lane, now);
        }
    }

    /// The lane admits a request of `net`, and the governor learns what it holds.
    pub(crate) fn admit_lane(&mut self, net: ClientNet, now: Instant) {
        self.lane.admit(net, now);
        self.governor.lane_admitted(self.lane.in_use);
    }

    /// How many may be at the backend now: the limit, less while probing.
    pub(crate) fn room(&self) -> usize {
        self.probe.map_or(self.limit, |p| p.min(self.limit))
    }

    /// What a network's share is a share of: the fleet's capacity, or this node's limit.
    pub(crate) fn share_base(&self) -> usize {
        match &self.fleet {
            Some(f) if !f.alone => f.capacity,
            _ => self.limit,
        }
    }

    /// Gives free slots to waiters, `here` being the thread that freed them: people's
    /// first (people.rs says which), then the anonymous lane, within its share while
    /// people are busy.
    pub(crate) fn grant(&mut self, here: usize, reserved: usize, lane: &LaneConfig) {
        self.people.local(here);
        while self.in_use < self.room() {
            let cap = lane.net_cap(self.limit);
            let Some(pick) = self.people.pick(here, reserved, self.limit, cap) else {
                if !self.grant_lane(here, lane) {
                    return;
                }
                continue;
            };
            let Some((tx, session)) = self.people.take(pick) else {
                return;
            };
            // A waiter that gave up (timed out, or its client left) is skipped.
            if tx.send(()).is_ok() {
                self.people.threads[pick.thread].in_use += 1;
                self.in_use += 1;
                if let Some(of) = session {
                    self.people.session_admitted(of);
                }
            }
        }
    }

    /// One slot to the lane's next waiter, if the lane may take it; false: nothing to
    /// give.
    fn grant_lane(&mut self, here: usize, lane: &LaneConfig) -> bool {
        let now = Instant::now();
        let net_cap = lane.net_cap(self.share_base());
        let busy = self.people_busy(lane.people_linger);
        if !self
            .governor
            .lane_open(lane, &self.lane, self.limit, busy, now)
        {
            if self.lane.waiting > 0 {
                self.governor.pressed();
            }
            return false;
        }
        let Some((net, w)) = self.lane.next(net_cap, here, now) else {
            return false;
        };
        if w.tx.send(Grant::Slot).is_ok() {
            self.in_use += 1;
            self.people.local(w.thread).in_use += 1;
            self.admit_lane(net, now);
        }
        true
    }
}

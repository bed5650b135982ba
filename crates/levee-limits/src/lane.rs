//! The anonymous lane: backend work that serves one client (a pass without a session,
//! a fill of a URL nothing is stored for), where a crawler storm arrives. Its waiters
//! are kept per client network; a freed slot goes to the network that used the backend
//! least lately (a decayed count of its admissions), so neither one client nor one
//! subnet takes the lane, and a reader who rarely asks comes before a crawler who
//! always does. Bounded three ways: slots per network, waiters per network, and waiters
//! in all to what the lane can serve within its wait at its recent pace (refused at
//! once beyond: refuse fast, not late). All under the limiter's lock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::client_net::ClientNet;

/// What a lane waiter is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grant {
    Slot,
    /// Pushed out of a full queue by a network that used the backend less.
    Displaced,
}

pub(super) struct LaneWaiter {
    pub thread: usize,
    pub tx: oneshot::Sender<Grant>,
}

/// A network's usage halves in this long: a crawler's record outlives its pauses.
const HALF_LIFE: f64 = 10.0;
/// How far into a network's queue a waiter on the freeing thread may be taken first.
const LOCAL_LOOKAHEAD: usize = 8;
/// Networks remembered before idle ones are forgotten.
const PRUNE_AT: usize = 4096;

#[derive(Default)]
struct Net {
    in_flight: usize,
    queue: VecDeque<LaneWaiter>,
    /// Admissions, decayed with `HALF_LIFE`, as of `at`.
    usage: f64,
    at: Option<Instant>,
}

impl Net {
    fn usage(&self, now: Instant) -> f64 {
        match self.at {
            None => 0.0,
            Some(at) => {
                let dt = now.saturating_duration_since(at).as_secs_f64();
                self.usage * (-dt * std::f64::consts::LN_2 / HALF_LIFE).exp()
            }
        }
    }

    fn is_idle(&self, now: Instant) -> bool {
        self.in_flight == 0 && self.queue.is_empty() && self.usage(now) < 0.05
    }
}

/// The lane's settings, derived from the limit each time (it moves when adaptive).
#[derive(Debug, Clone, Copy)]
pub struct LaneConfig {
    /// Share of the limit the lane may hold while people's work is busy.
    pub share: f64,
    /// Share of the limit one network may hold (as many may wait).
    pub network_share: f64,
    /// Longest wait in the lane.
    pub wait: Duration,
    /// How long after people's last work the lane still keeps to its share.
    pub people_linger: Duration,
    /// Whether people's latency sets the lane's cap within its share (governor.rs).
    pub governed: bool,
}

impl LaneConfig {
    /// No caps: what `backend_anonymous_share = backend_network_share = "100%"` gives.
    #[cfg(test)]
    pub const OPEN: LaneConfig = LaneConfig {
        share: 1.0,
        network_share: 1.0,
        wait: Duration::from_secs(10),
        people_linger: Duration::ZERO,
        governed: false,
    };

    /// How long people's work keeps the lane to its share after it was last seen: longer
    /// than an editor's pause between two page views, short enough that the backend is
    /// all the crawlers' soon after people leave.
    pub const PEOPLE_LINGER: Duration = Duration::from_secs(2);

    pub fn cap(&self, limit: usize) -> usize {
        share_of(limit, self.share)
    }

    pub fn net_cap(&self, limit: usize) -> usize {
        share_of(limit, self.network_share)
    }
}

/// A client network's lane work on one node: the network, in flight, waiting (what a
/// node's report to its fleet names, fleet.rs).
pub type NetWork = (ClientNet, usize, usize);

/// `share` of `limit`: at least one slot, at most `limit`.
pub(crate) fn share_of(limit: usize, share: f64) -> usize {
    ((limit as f64 * share).ceil() as usize).clamp(1, limit.max(1))
}

/// What became of a request arriving in the lane with no slot for it now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Arrival {
    Queued,
    /// Its network already has its share waiting.
    NetworkOverShare,
    /// The lane's queue is full and no heavier network's waiter could make room.
    Full,
}

#[derive(Default)]
pub(super) struct Lane {
    pub in_use: usize,
    pub waiting: usize,
    nets: HashMap<ClientNet, Net>,
    /// The networks with waiters: what every decision scans, a few dozen at most, where
    /// `nets` may remember thousands (a refusal must cost microseconds).
    queued: HashSet<ClientNet>,
    /// Networks remembered before the next walk that forgets idle ones.
    prune_at: usize,
    /// Average time a lane request holds its slot (seconds), once known.
    service: Option<f64>,
    /// Slots given back so far, up to `LEARNING`.
    samples: u32,
    /// With a fleet (fleet.rs): lane slots in flight per network on the other nodes,
    /// and the networks waiting there, as of the last renewal. A network's share is
    /// the fleet's: what it holds elsewhere counts against it here.
    elsewhere: HashMap<ClientNet, usize>,
    waiting_elsewhere: HashSet<ClientNet>,
    /// This node's part of each reported network's fleet-wide share: dividing the share
    /// by where the network asks keeps the nodes from all giving it their whole view of
    /// what is left at once (they would, from views a renewal old).
    parts: HashMap<ClientNet, usize>,
    /// When anonymous work last found no slot free for it (refused or queued): a lane
    /// that wants more between its pages, as a duty cycle's mostly does (fleet.rs).
    pub wanted_at: Option<Instant>,
}

/// How long anonymous work turned away (or queued) still counts as the lane wanting
/// more: a fleet renewal's time (fleet.rs), so that every node reads the same from
/// reports at most that old.
pub(crate) const WANTED_LATELY: Duration = Duration::from_secs(1);

/// Slot times the lane learns its pace from before it predicts waits: one slow first
/// request (a cold start) must not make it refuse a burst it can serve.
const LEARNING: u32 = 16;

impl Lane {
    /// Whether anonymous work found no slot free within `WANTED_LATELY` of `now`.
    pub fn wanted(&self, now: Instant) -> bool {
        self.wanted_at
            .is_some_and(|t| now.saturating_duration_since(t) < WANTED_LATELY)
    }

    /// May the lane take one more slot? Beyond its cap only while people's work is
    /// neither in flight nor waiting.
    pub fn may_take(&self, cap: usize, people_busy: bool) -> bool {
        self.in_use < cap || !people_busy
    }

    /// Would `net` get a free slot now without passing a waiter that should have it?
    /// Its cap holds while other networks wait: when nobody else asks, one network may
    /// use what is free (the lane is work-conserving, as a lone client behind a load
    /// balancer with no `trusted_proxies` would otherwise get a quarter of the backend).
    pub fn may_admit_now(&self, net: ClientNet, net_cap: usize) -> bool {
        let in_flight = self.nets.get(&net).map_or(0, |n| n.in_flight);
        let eligible_waits = self
            .queued
            .iter()
            .filter_map(|k| self.nets.get(k).map(|n| self.below_cap(*k, n, net_cap)))
            .any(|below| below);
        !eligible_waits && (in_flight < self.cap_for(net, net_cap) || !self.others_wait(net))
    }

    /// Whether `net` holds less here than its cap here.
    fn below_cap(&self, net: ClientNet, n: &Net, net_cap: usize) -> bool {
        n.in_flight < self.cap_for(net, net_cap)
    }

    /// `net`'s cap on this node: alone, its share; in a fleet, this node's part of its
    /// fleet-wide share (divided by where it asks, fleet.rs), or what the other nodes
    /// leave of it for a network they did not report.
    fn cap_for(&self, net: ClientNet, net_cap: usize) -> usize {
        match self.parts.get(&net) {
            Some(part) => *part,
            None => net_cap.saturating_sub(self.elsewhere.get(&net).copied().unwrap_or(0)),
        }
    }

    /// Whether another network waits for the lane, here or on another node.
    fn others_wait(&self, net: ClientNet) -> bool {
        self.queued.len() > usize::from(self.queued.contains(&net))
            || self.waiting_elsewhere.iter().any(|k| *k != net)
    }

    /// The other nodes' lane, as the last renewal saw it.
    pub fn set_elsewhere(
        &mut self,
        in_flight: HashMap<ClientNet, usize>,
        waiting: HashSet<ClientNet>,
        parts: HashMap<ClientNet, usize>,
    ) {
        self.elsewhere = in_flight;
        self.waiting_elsewhere = waiting;
        self.parts = parts;
    }

    /// The `most` networks with the most in flight and waiting here: what a report to
    /// the fleet names.
    pub fn busiest(&self, most: usize) -> Vec<NetWork> {
        let mut v: Vec<NetWork> = self
            .nets
            .iter()
            .filter(|(_, n)| n.in_flight > 0 || !n.queue.is_empty())
            .map(|(k, n)| (*k, n.in_flight, n.queue.len()))
            .collect();
        v.sort_unstable_by_key(|(_, f, w)| std::cmp::Reverse(f + w));
        v.truncate(most);
        v
    }

    /// Counts a slot given to `net`.
    pub fn admit(&mut self, net: ClientNet, now: Instant) {
        self.in_use += 1;
        self.prune(now);
        let n = self.nets.entry(net).or_default();
        n.usage = n.usage(now) + 1.0;
        n.at = Some(now);
        n.in_flight += 1;
    }

    /// A slot of `net`'s came back after `held`.
    pub fn release(&mut self, net: ClientNet, held: Duration) {
        self.in_use = self.in_use.saturating_sub(1);
        if let Some(n) = self.nets.get_mut(&net) {
            n.in_flight = n.in_flight.saturating_sub(1);
        }
        // A slot granted to a waiter that had left was never used: no pace to learn.
        if held.is_zero() {
            return;
        }
        let held = held.as_secs_f64();
        self.samples = (self.samples + 1).min(LEARNING);
        // Quick to follow a backend that speeds up or slows down (a fifth per sample).
        self.service = Some(match self.service {
            None => held,
            Some(s) => s * 0.8 + held * 0.2,
        });
    }

    /// How many may wait: strictly, the waiters the lane can serve within half of
    /// `wait` on `slots` slots at its recent pace, at most `max` (the other half is for
    /// the pace's ups and downs, so that a waiter is served, not refused late); else
    /// `max`.
    pub fn bound(&self, max: usize, wait: Duration, slots: f64, strict: bool) -> usize {
        match self.service {
            Some(s) if strict && s > 0.0 && self.samples >= LEARNING => {
                let n = (wait.as_secs_f64() / 2.0 / s * slots).floor();
                (n as usize).clamp(1, max.max(1))
            }
            _ => max.max(1),
        }
    }

    /// The expected wait of one more waiter, for `Retry-After`.
    pub fn expected_wait(&self, slots: f64) -> Duration {
        let s = self.service.unwrap_or(1.0);
        Duration::from_secs_f64((s * (self.waiting + 1) as f64 / slots.max(0.01)).min(3600.0))
    }

    /// Whether a request of `net` would be refused rather than queued (`arrive`, but
    /// for a lighter network pushing a heavier one's waiter out).
    pub fn refuses(&self, net: ClientNet, net_cap: usize, bound: usize, strict: bool) -> bool {
        let queued = self.nets.get(&net).map_or(0, |n| n.queue.len());
        (strict && queued >= net_cap && self.others_wait(net)) || self.waiting >= bound
    }

    /// Queues a request of `net`, or says why not. `strict` (the backend is truly
    /// saturated, or people's latency holds the lane): its network's share holds;
    /// `bound` (`Lane::bound`) is how many may wait.
    pub fn arrive(
        &mut self,
        net: ClientNet,
        waiter: LaneWaiter,
        net_cap: usize,
        bound: usize,
        strict: bool,
        now: Instant,
    ) -> Arrival {
        let (queued, usage) = self
            .nets
            .get(&net)
            .map_or((0, 0.0), |n| (n.queue.len(), n.usage(now)));
        if strict && queued >= net_cap && self.others_wait(net) {
            return Arrival::NetworkOverShare;
        }
        if self.waiting >= bound && !self.displace_heavier(net, usage, now) {
            return Arrival::Full;
        }
        self.prune(now);
        self.nets.entry(net).or_default().queue.push_back(waiter);
        self.queued.insert(net);
        self.waiting += 1;
        Arrival::Queued
    }

    /// Tells the newest waiter of the network that used the backend most (admissions
    /// and waiters) it has been pushed out, if that network weighs more than `net` by
    /// at least two: one more than `net` after the move.
    fn displace_heavier(&mut self, net: ClientNet, usage: f64, now: Instant) -> bool {
        let heaviest = self
            .queued
            .iter()
            .filter(|k| **k != net)
            .filter_map(|k| {
                self.nets
                    .get(k)
                    .map(|n| (n.usage(now) + n.queue.len() as f64, *k))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((heavy, victim)) = heaviest else {
            return false;
        };
        // Only if the victim's network still weighs as much as the newcomer's once the
        // waiter has changed hands: between networks of equal weight a push-out is
        // churn (a thousand one-connection crawlers pushed each other out a million
        // times a minute, each a wake-up and a refusal that had waited).
        if heavy - 1.0 < usage + 1.0 {
            return false;
        }
        let Some(w) = self.nets.get_mut(&victim).and_then(|n| n.queue.pop_back()) else {
            return false;
        };
        self.waiting -= 1;
        self.forget_if_empty(victim);
        // A waiter that already left is simply gone.
        let _ = w.tx.send(Grant::Displaced);
        true
    }

    /// The next waiter to get a slot: of the networks below their cap, the one that
    /// used the backend least; when none is below, the least used of the others.
    pub fn next(
        &mut self,
        net_cap: usize,
        here: usize,
        now: Instant,
    ) -> Option<(ClientNet, LaneWaiter)> {
        loop {
            let least = |below: bool| {
                self.queued
                    .iter()
                    .filter_map(|k| self.nets.get(k).map(|n| (k, n)))
                    .filter(|(k, n)| self.below_cap(**k, n, net_cap) == below)
                    .map(|(k, n)| (n.usage(now), *k))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, k)| k)
            };
            let net = least(true).or_else(|| least(false))?;
            let queue = &mut self.nets.get_mut(&net)?.queue;
            // Within the network, a waiter on the thread that freed the slot if one is
            // near the front: no cross-thread wake-up (see limit.rs).
            let at = queue
                .iter()
                .take(LOCAL_LOOKAHEAD)
                .position(|w| w.thread == here)
                .unwrap_or(0);
            let w = queue.remove(at)?;
            self.waiting -= 1;
            self.forget_if_empty(net);
            if !w.tx.is_closed() {
                return Some((net, w));
            }
        }
    }

    /// Forgets `net`'s waiters that gave up.
    pub fn remove_closed(&mut self, net: ClientNet) {
        if let Some(n) = self.nets.get_mut(&net) {
            let before = n.queue.len();
            n.queue.retain(|w| !w.tx.is_closed());
            self.waiting -= before - n.queue.len();
        }
        self.forget_if_empty(net);
    }

    /// Forgets idle networks once there are many; if most are not idle, waits until
    /// there are twice as many, so that the walk stays rare.
    fn prune(&mut self, now: Instant) {
        if self.nets.len() < self.prune_at.max(PRUNE_AT) {
            return;
        }
        self.nets.retain(|_, n| !n.is_idle(now));
        self.prune_at = self.nets.len() * 2;
    }

    fn forget_if_empty(&mut self, net: ClientNet) {
        if self.nets.get(&net).is_none_or(|n| n.queue.is_empty()) {
            self.queued.remove(&net);
        }
    }
}

#[cfg(test)]
impl Lane {
    /// The lane as if it had learnt a pace of `slot_time` per request.
    pub(crate) fn learnt(&mut self, slot_time: Duration) {
        self.service = Some(slot_time.as_secs_f64());
        self.samples = LEARNING;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(a: &str) -> ClientNet {
        ClientNet::of(a.parse().unwrap(), 24, 56)
    }

    /// `Lane::arrive` of a strict lane with room for 100 waiters at most.
    fn arrive(
        lane: &mut Lane,
        net: ClientNet,
        w: LaneWaiter,
        net_cap: usize,
        wait: Duration,
        slots: f64,
        now: Instant,
    ) -> Arrival {
        let bound = lane.bound(100, wait, slots, true);
        lane.arrive(net, w, net_cap, bound, true, now)
    }

    fn waiter() -> (LaneWaiter, oneshot::Receiver<Grant>) {
        let (tx, rx) = oneshot::channel();
        (LaneWaiter { thread: 0, tx }, rx)
    }

    #[test]
    fn shares_are_at_least_one_slot_and_at_most_the_limit() {
        let c = LaneConfig {
            share: 0.5,
            network_share: 0.25,
            wait: Duration::from_secs(2),
            people_linger: Duration::ZERO,
            governed: false,
        };
        assert_eq!((c.cap(4), c.net_cap(4)), (2, 1));
        assert_eq!((c.cap(1), c.net_cap(1)), (1, 1));
        assert_eq!((c.cap(10), c.net_cap(10)), (5, 3));
        assert_eq!(LaneConfig::OPEN.cap(7), 7);
    }

    #[test]
    fn a_network_queues_its_share_then_is_refused_while_others_wait() {
        let mut lane = Lane::default();
        let now = Instant::now();
        let a = net("127.2.0.1");
        let wait = Duration::from_secs(2);
        let mut keep = Vec::new();
        for _ in 0..2 {
            let (w, rx) = waiter();
            keep.push(rx);
            assert_eq!(arrive(&mut lane, a, w, 2, wait, 4.0, now), Arrival::Queued);
        }
        // Alone, it may queue more: nobody else wants the lane.
        let (w, rx) = waiter();
        keep.push(rx);
        assert_eq!(arrive(&mut lane, a, w, 2, wait, 4.0, now), Arrival::Queued);
        let (w, _rx2) = waiter();
        assert_eq!(
            arrive(&mut lane, net("127.3.0.1"), w, 2, wait, 4.0, now),
            Arrival::Queued
        );
        // Now another network waits: beyond its share, refused at once.
        let (w, _rx) = waiter();
        assert_eq!(
            arrive(&mut lane, a, w, 2, wait, 4.0, now),
            Arrival::NetworkOverShare
        );
    }

    #[test]
    fn the_least_used_network_goes_first() {
        let mut lane = Lane::default();
        let now = Instant::now();
        let (crawler, reader) = (net("127.2.0.1"), net("127.9.0.1"));
        for _ in 0..5 {
            lane.admit(crawler, now);
            lane.release(crawler, Duration::from_millis(100));
        }
        let wait = Duration::from_secs(2);
        let (w, _a) = waiter();
        arrive(&mut lane, crawler, w, 4, wait, 4.0, now);
        let (w, _b) = waiter();
        arrive(&mut lane, reader, w, 4, wait, 4.0, now);
        assert_eq!(lane.next(4, 0, now).map(|(n, _)| n), Some(reader));
        assert_eq!(lane.next(4, 0, now).map(|(n, _)| n), Some(crawler));
        assert!(lane.next(4, 0, now).is_none());
        assert_eq!(lane.waiting, 0);
    }

    #[test]
    fn a_full_queue_refuses_at_once_or_pushes_out_a_heavier_network() {
        let mut lane = Lane::default();
        let now = Instant::now();
        let crawler = net("127.2.0.1");
        // The lane's pace: 1 s a request on one slot; a 4 s wait holds two waiters.
        let pace = net("127.200.0.1");
        for _ in 0..LEARNING {
            lane.admit(pace, now);
            lane.release(pace, Duration::from_secs(1));
        }
        lane.admit(crawler, now);
        let wait = Duration::from_secs(4);
        let (w, mut first) = waiter();
        assert_eq!(
            arrive(&mut lane, crawler, w, 8, wait, 1.0, now),
            Arrival::Queued
        );
        let (w, mut second) = waiter();
        assert_eq!(
            arrive(&mut lane, crawler, w, 8, wait, 1.0, now),
            Arrival::Queued
        );
        // As used as the crawler, no one: refused.
        let (w, _r) = waiter();
        let other = net("127.3.0.1");
        lane.admit(other, now);
        lane.admit(other, now);
        lane.admit(other, now);
        assert_eq!(
            arrive(&mut lane, other, w, 8, wait, 1.0, now),
            Arrival::Full
        );
        // A reader that never used it: the crawler's newest waiter makes room.
        let (w, _reader) = waiter();
        assert_eq!(
            arrive(&mut lane, net("127.9.0.1"), w, 8, wait, 1.0, now),
            Arrival::Queued
        );
        assert_eq!(second.try_recv(), Ok(Grant::Displaced));
        assert!(first.try_recv().is_err(), "the older waiter stays");
        assert_eq!(lane.waiting, 2);
        // The crawler used it once more than a newcomer: its last waiter makes room.
        let (w, _fresh) = waiter();
        assert_eq!(
            arrive(&mut lane, net("127.10.0.1"), w, 8, wait, 1.0, now),
            Arrival::Queued
        );
        assert_eq!(first.try_recv(), Ok(Grant::Displaced));
        // Now every waiter's network weighs what a newcomer's would: no churn.
        let (w, _r) = waiter();
        assert_eq!(
            arrive(&mut lane, net("127.11.0.1"), w, 8, wait, 1.0, now),
            Arrival::Full
        );
        assert_eq!(lane.waiting, 2);
    }

    #[test]
    fn in_a_fleet_a_network_holds_its_part_here_while_others_wait() {
        let mut lane = Lane::default();
        let now = Instant::now();
        let (crawler, reader, other) = (net("127.2.0.1"), net("127.9.0.1"), net("127.3.0.1"));
        lane.admit(crawler, now);
        // Alone, its fleet-wide share of 2 would let it take a second slot.
        assert!(lane.may_admit_now(crawler, 2));
        // Its part here is 1 (the rest of its share is another node's), and another
        // network waits on another node: no second slot here.
        let parts = HashMap::from([(crawler, 1)]);
        lane.set_elsewhere(HashMap::new(), HashSet::from([reader]), parts);
        assert!(!lane.may_admit_now(crawler, 2));
        // A network no node reported: its share less what it holds elsewhere.
        lane.set_elsewhere(
            HashMap::from([(other, 2)]),
            HashSet::from([reader]),
            HashMap::new(),
        );
        assert!(!lane.may_admit_now(other, 2), "2 of 2 held elsewhere");
        assert!(lane.may_admit_now(reader, 2));
        // Nobody else waits anywhere: work-conserving again.
        lane.set_elsewhere(
            HashMap::new(),
            HashSet::new(),
            HashMap::from([(crawler, 1)]),
        );
        assert!(lane.may_admit_now(crawler, 2));
    }

    #[test]
    fn usage_decays_and_idle_networks_are_forgotten() {
        let mut lane = Lane::default();
        let t0 = Instant::now();
        let a = net("127.2.0.1");
        lane.admit(a, t0);
        lane.release(a, Duration::from_millis(1));
        let n = &lane.nets[&a];
        let later = t0 + Duration::from_secs(10);
        assert!((n.usage(later) - 0.5).abs() < 0.01);
        assert!(n.is_idle(t0 + Duration::from_secs(60)));
    }
}

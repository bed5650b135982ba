//! A limiter in a fleet (fleet.rs): what it reports, the share it asks for, the grant
//! it is given, and what it does when the fleet cannot be reached.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

use crate::client_net::ClientNet;
use crate::fleet::{
    allocate, fleet_lane_part, water_fill, FleetState, NetWork, OwnLane, Peer, Report, BACK_MOST,
    LEASE, REPORT_NETS,
};
use crate::lane::share_of;
use crate::people::Elsewhere;
use crate::{worker, Limiter};

/// The fleet as one node sees it, for `/metrics`, `serve --check` and the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetStats {
    /// Nodes alive at the last renewal, this one included.
    pub nodes: usize,
    /// This node's share of the capacity (its limit now).
    pub share: usize,
    /// The fleet's capacity.
    pub capacity: usize,
    /// Requests at the backend from every node.
    pub in_flight: usize,
    /// People's requests waiting on every node.
    pub people_waiting: usize,
    /// Redis unreachable past the lease: this node runs on capacity ÷ nodes.
    pub alone: bool,
    /// Renewals applied since the node joined the fleet.
    pub renewals: u64,
}

/// What a node asks of the fleet at a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub report: Report,
    /// The share it asks for.
    pub want: usize,
    /// The capacity it believes the fleet's: Redis grants within it.
    pub capacity: usize,
}

/// What a renewal changed that the caller acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// Tell the other nodes to renew now: this node freed room someone wants, or a
    /// person waits here for room someone else holds.
    pub nudge: bool,
    /// The node was running alone and shares again.
    pub rejoined: bool,
}

impl Limiter {
    /// From now on the limit is this node's share of the backend, set by each renewal
    /// (`apply_fleet`); until the first, one slot (fleet.rs's `FleetState::new`).
    pub fn join_fleet(&self) {
        let inner = &self.inner;
        let mut st = inner.lock();
        if st.fleet.is_none() {
            let f = FleetState::new(st.capacity);
            st.limit = f.grant;
            inner.limit.store(f.grant, Ordering::Relaxed);
            st.fleet = Some(f);
        }
    }

    /// Notified when the shares should be renewed now rather than at the next tick: a
    /// person waits.
    pub fn fleet_wake(&self) -> Arc<Notify> {
        self.inner.fleet_wake.clone()
    }

    /// Notified when the shares should be renewed soon: anonymous work wants more, or
    /// a slot freed while some node wants more.
    pub fn fleet_demand(&self) -> Arc<Notify> {
        self.inner.fleet_demand.clone()
    }

    /// What node `me` reports, and the share it asks for: its part of the capacity by
    /// [`allocate`] over every node's last report (the fleet decides the same
    /// everywhere; Redis only ever grants what no other node holds).
    pub fn fleet_ask(&self, me: &str) -> Ask {
        let st = self.inner.lock();
        let queued = st.people.queued();
        let people_in_flight = st.in_use.saturating_sub(st.lane.in_use);
        let lingering = usize::from(st.people_busy_here(self.inner.lane.people_linger));
        let governed = lingering > 0 && self.inner.lane.governed;
        let most = self.inner.lane.cap(st.share_base());
        let report = Report {
            in_use: st.in_use,
            capacity: st.capacity,
            people: (people_in_flight + queued).max(lingering),
            people_waiting: queued,
            anonymous: st.lane.in_use + st.lane.waiting,
            lane_cap: match governed {
                true => st.governor.lane_cap(&self.inner.lane, st.share_base()),
                false => 0,
            },
            lane_milli: match (governed, st.governor.own(most)) {
                (true, Some(own)) => (own * 1000.0).round().max(1.0) as usize,
                _ => 0,
            },
            nets: st.lane.busiest(REPORT_NETS),
            sessions: st.people.busiest(REPORT_NETS),
            people_times: st
                .fleet
                .as_ref()
                .map(|f| f.times.clone())
                .unwrap_or_default(),
            lane_in_flight: st.lane.in_use,
            lane_wanted: st.lane.wanted(Instant::now()),
        };
        let (want, capacity) = match &st.fleet {
            Some(f) => {
                let want = share_for(me, &report, &f.peers, self.inner.lane.share);
                // Running alone: the first ask that reaches Redis again is made while
                // still alone, when every other lease has run out in Redis's clock
                // (stopped, it jumps) though the others still have their part in
                // flight: no more than its part (asking the whole share gave the
                // backend 8 at once from a fleet of 6). Back from it: no more than it
                // has until the others have renewed.
                let back = !f.alone
                    && f.changed_at.is_some_and(|t| {
                        t.elapsed() < LEASE || (t.elapsed() < BACK_MOST && f.nodes < f.known_before)
                    });
                let part = (st.capacity / f.nodes.max(1)).max(1);
                let want = match (f.alone, back) {
                    (true, _) => want.min(part),
                    (false, true) => want.min(st.limit),
                    (false, false) => want,
                };
                (want, fleet_capacity(st.capacity, &f.peers))
            }
            None => (st.capacity, st.capacity),
        };
        Ask {
            report,
            want,
            capacity,
        }
    }

    /// A renewal's answer for node `me`: its grant and the other nodes alive.
    pub fn apply_fleet(&self, me: &str, grant: usize, peers: Vec<Peer>) -> Applied {
        let inner = &self.inner;
        let mut st = inner.lock();
        let in_use = st.in_use;
        let own_capacity = st.capacity;
        let people_waiting = st.people.queued();
        // Everything in flight here, and everything waiting (`Report::demand`).
        let own_demand = in_use + people_waiting + st.lane.waiting;
        let st_nets = st.lane.busiest(REPORT_NETS);
        let own_lane = OwnLane {
            judged: (st.people_busy_here(inner.lane.people_linger) && inner.lane.governed)
                .then(|| st.governor.own(inner.lane.cap(st.share_base())))
                .flatten(),
            anonymous: st.lane.in_use + st.lane.waiting,
            wanted: st.lane.wanted(Instant::now()),
        };
        let Some(f) = st.fleet.as_mut() else {
            return Applied::default();
        };
        let mut nets: HashMap<_, usize> = HashMap::new();
        let mut waiting = HashSet::new();
        for p in &peers {
            for &(net, in_flight, w) in &p.report.nets {
                *nets.entry(net).or_default() += in_flight;
                if w > 0 {
                    waiting.insert(net);
                }
            }
        }
        f.capacity = fleet_capacity(own_capacity, &peers);
        let parts = net_parts(
            me,
            &st_nets,
            &peers,
            share_of(f.capacity, inner.lane.network_share),
        );
        f.grant = grant;
        f.lease_until = Instant::now() + LEASE;
        f.renewals += 1;
        let known = f.nodes;
        f.nodes = peers.len() + 1;
        f.held_elsewhere = peers.iter().map(Peer::held).sum();
        let mut sessions = Elsewhere::default();
        for p in &peers {
            let s = &p.report.sessions;
            for &(who, n) in &s.whos {
                *sessions.whos.entry(who).or_default() += n;
            }
            for &(net, n) in &s.nets {
                *sessions.nets.entry(net).or_default() += n;
            }
            for &(who, n) in &s.overflow {
                *sessions.overflow.entry(who).or_default() += n;
            }
        }
        f.in_use_elsewhere = peers.iter().map(|p| p.report.in_use).sum();
        inner.elsewhere.store(f.in_use_elsewhere, Ordering::Relaxed);
        f.people_waiting_elsewhere = peers.iter().map(|p| p.report.people_waiting).sum();
        f.people_elsewhere = peers.iter().any(|p| p.report.people > 0);
        let lane_part = fleet_lane_part(me, &own_lane, &peers);
        let lane_elsewhere = (
            peers.iter().any(|p| p.report.lane_in_flight > 0),
            peers.iter().any(|p| p.report.nets.iter().any(|n| n.2 > 0)),
        );
        f.contended = own_demand > grant || peers.iter().any(|p| p.report.demand() > p.grant);
        let held = grant.max(in_use);
        let freed = held < f.held;
        f.held = held;
        let rejoined = std::mem::take(&mut f.alone);
        if rejoined {
            f.changed_at = Some(Instant::now());
            f.known_before = known;
        }
        let nudge = (freed && f.contended) || (people_waiting > 0 && in_use >= grant);
        f.peers = peers;
        st.limit = grant;
        st.lane.set_elsewhere(nets, waiting, parts);
        st.people.set_elsewhere(sessions);
        st.governor.set_fleet(lane_part);
        // The other nodes' lanes load the backend this node's people use: their work
        // in flight is evidence for this node's judgment of the lane (governor.rs), as
        // its own is; their waiters load nothing (counted, every window of a storm was
        // the lane's, where one node's are its own only while a page runs).
        if lane_elsewhere.0 {
            st.governor.lane_active();
        }
        if lane_elsewhere.1 {
            st.governor.pressed();
        }
        let most = inner.lane.cap(st.share_base());
        st.judge_fleet_times(most);
        inner.limit.store(grant, Ordering::Relaxed);
        st.grant(worker::id(), inner.reserved, &inner.lane);
        Applied { nudge, rejoined }
    }

    /// A renewal failed (Redis down or slow). The grant stands until its lease ends;
    /// then the node takes the capacity ÷ the nodes it last knew, never the whole of a
    /// fleet's. True when it has just fallen back (the caller says so once).
    pub fn fleet_unreachable(&self) -> bool {
        let inner = &self.inner;
        let mut st = inner.lock();
        let capacity = st.capacity;
        let Some(f) = st.fleet.as_mut() else {
            return false;
        };
        let now = Instant::now();
        if now < f.lease_until {
            return false;
        }
        // Its part: capacity ÷ nodes; for a lease's time no more than its grant, while
        // a node that had more than its part may still have it in flight.
        let part = (capacity / f.nodes.max(1)).max(1);
        let settled = f.changed_at.is_some_and(|t| now.duration_since(t) >= LEASE);
        let (limit, fell) = match f.alone {
            false => {
                f.alone = true;
                f.contended = false;
                f.changed_at = Some(now);
                // Knowing no other node, there is nobody's work to let drain.
                match f.nodes <= 1 {
                    true => (part, true),
                    false => (part.min(f.grant.max(1)), true),
                }
            }
            true if settled => (part, false),
            true => return false,
        };
        if st.limit == limit && !fell {
            return false;
        }
        st.limit = limit;
        st.lane
            .set_elsewhere(HashMap::new(), HashSet::new(), HashMap::new());
        st.people.set_elsewhere(Elsewhere::default());
        st.governor.set_fleet(None);
        inner.limit.store(limit, Ordering::Relaxed);
        st.grant(worker::id(), inner.reserved, &inner.lane);
        fell
    }

    /// The fleet as this node sees it; None when it shares with no fleet.
    pub fn fleet_stats(&self) -> Option<FleetStats> {
        let st = self.inner.lock();
        let f = st.fleet.as_ref()?;
        Some(FleetStats {
            nodes: f.nodes,
            share: st.limit,
            capacity: f.capacity,
            in_flight: st.in_use + if f.alone { 0 } else { f.in_use_elsewhere },
            people_waiting: st.people.queued() + f.people_waiting_elsewhere,
            alone: f.alone,
            renewals: f.renewals,
        })
    }
}

/// Node `me`'s part of each network's fleet-wide share `net_cap`, for every network
/// some node reported: the share divided by what the network asks on each node (in
/// flight and waiting), every node in the order of its name.
fn net_parts(
    me: &str,
    mine: &[NetWork],
    peers: &[Peer],
    net_cap: usize,
) -> HashMap<ClientNet, usize> {
    let mut nodes: Vec<(&str, &[NetWork])> = peers
        .iter()
        .map(|p| (p.node.as_str(), p.report.nets.as_slice()))
        .chain(std::iter::once((me, mine)))
        .collect();
    nodes.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let Some(at) = nodes.iter().position(|(n, _)| *n == me) else {
        return HashMap::new();
    };
    let known: HashSet<ClientNet> = nodes
        .iter()
        .flat_map(|(_, nets)| nets.iter().map(|(n, _, _)| *n))
        .collect();
    known
        .into_iter()
        .map(|net| {
            let asks: Vec<usize> = nodes
                .iter()
                .map(|(_, nets)| {
                    nets.iter()
                        .find(|(n, _, _)| *n == net)
                        .map_or(0, |(_, f, w)| f + w)
                })
                .collect();
            (
                net,
                water_fill(&asks, net_cap).get(at).copied().unwrap_or(0),
            )
        })
        .collect()
}

/// The least capacity any live node knows: a node that measured a smaller backend
/// (adaptive) is believed.
fn fleet_capacity(own: usize, peers: &[Peer]) -> usize {
    peers
        .iter()
        .map(|p| p.report.capacity)
        .filter(|&c| c > 0)
        .fold(own, usize::min)
}

/// Node `me`'s part of the fleet's capacity, every node in the order of its name (so
/// that every node computes the same division).
fn share_for(me: &str, mine: &Report, peers: &[Peer], lane_share: f64) -> usize {
    let capacity = fleet_capacity(mine.capacity, peers);
    let mut nodes: Vec<(&str, &Report)> = peers
        .iter()
        .map(|p| (p.node.as_str(), &p.report))
        .chain(std::iter::once((me, mine)))
        .collect();
    nodes.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let reports: Vec<&Report> = nodes.iter().map(|(_, r)| *r).collect();
    let shares = allocate(capacity, lane_share, &reports);
    nodes
        .iter()
        .position(|(n, _)| *n == me)
        .and_then(|i| shares.get(i).copied())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Class, LaneConfig, Mode};

    fn limiter(capacity: usize) -> Limiter {
        Limiter::new(
            Mode::Fixed(capacity),
            0.0,
            100,
            Duration::from_secs(10),
            LaneConfig::OPEN,
        )
    }

    fn peer(node: &str, grant: usize, in_use: usize, line_rest: &str) -> Peer {
        Peer {
            node: node.into(),
            grant,
            report: Report::from_line(&format!("{in_use} 8 {line_rest}")).unwrap(),
        }
    }

    fn net(a: &str) -> ClientNet {
        ClientNet::of(a.parse().unwrap(), 24, 56)
    }

    #[tokio::test]
    async fn a_node_starts_with_one_slot_and_takes_what_it_is_granted() {
        let l = limiter(8);
        l.join_fleet();
        assert_eq!(l.limit(), 1);
        let first = l.acquire(Class::Shared).await.unwrap();
        let waiting = tokio::spawn({
            let l = l.clone();
            async move { l.acquire(Class::Shared).await.map(|_| ()) }
        });
        // A person waits: the renewal is woken.
        tokio::time::timeout(Duration::from_secs(1), l.fleet_wake().notified())
            .await
            .unwrap();
        let applied = l.apply_fleet("b", 3, vec![peer("a", 5, 5, "0 0 9 0 ")]);
        assert_eq!(l.limit(), 3);
        assert!(
            waiting.await.unwrap().is_ok(),
            "granted once the share grew"
        );
        assert!(!applied.rejoined);
        let s = l.fleet_stats().unwrap();
        assert_eq!((s.nodes, s.capacity, s.share), (2, 8, 3));
        drop(first);
    }

    /// The adaptive estimate is of the backend's capacity: each request counts the
    /// fleet's requests in flight, not this node's share of them (which, a third of the
    /// capacity on each of three nodes, reads as a limit nobody uses and decays it to
    /// the floor: a fleet of 8 in front of a backend that takes 32).
    #[tokio::test]
    async fn an_adaptive_node_counts_the_fleets_requests_in_flight() {
        let l = Limiter::new(
            Mode::Adaptive {
                initial: 24,
                min: 1,
                max: 64,
            },
            0.0,
            100,
            Duration::from_secs(10),
            LaneConfig::OPEN,
        );
        l.join_fleet();
        let alone = l.acquire(Class::Shared).await.unwrap();
        assert_eq!(alone.in_flight, 1);
        drop(alone);
        l.apply_fleet(
            "b",
            8,
            vec![peer("a", 8, 7, "0 0 7 0 "), peer("c", 8, 8, "0 0 8 0 ")],
        );
        let first = l.acquire(Class::Shared).await.unwrap();
        let second = l.acquire(Class::Shared).await.unwrap();
        assert_eq!((first.in_flight, second.in_flight), (16, 17));
    }

    /// A node of a fleet (8 slots, a quarter to sessions first) and a session (0xbeef).
    fn session_in_a_fleet() -> (Limiter, crate::SessionOf) {
        let l = Limiter::new(
            Mode::Fixed(8),
            0.25,
            100,
            Duration::from_secs(10),
            LaneConfig::OPEN,
        );
        l.join_fleet();
        let of = crate::SessionOf {
            net: net("127.1.0.1"),
            who: 0xbeef,
        };
        (l, of)
    }

    /// One session replayed through every node (a stolen cookie): its two session slots
    /// are the fleet's, so a node where another holds them sends its request to the lane
    /// (anonymous work of its network), as one node would.
    #[tokio::test]
    async fn a_sessions_share_is_the_fleets() {
        let (l, of) = session_in_a_fleet();
        // Alone: its first request is a person's.
        let first = l.acquire(Class::Session(of)).await.unwrap();
        assert_eq!(l.stats().over_share.load(Ordering::Relaxed), 0);
        let said = l.fleet_ask("b").report.sessions;
        assert_eq!(said.whos, vec![(0xbeef, 1)], "reported to the others");
        drop(first);
        // Node a holds its two.
        l.apply_fleet(
            "b",
            4,
            vec![peer("a", 4, 2, "2 0 0 0  who:beef=2,net:127.1.0.0/24=2")],
        );
        let second = l.acquire(Class::Session(of)).await.unwrap();
        assert_eq!(
            l.stats().over_share.load(Ordering::Relaxed),
            1,
            "sent to the lane"
        );
        drop(second);
        // Another session of another network is a person's as ever.
        let other = crate::SessionOf {
            net: net("127.9.0.1"),
            who: 7,
        };
        let _third = l.acquire(Class::Session(other)).await.unwrap();
        assert_eq!(l.stats().over_share.load(Ordering::Relaxed), 1);
    }

    /// A session replayed from many connections through every node overflows its share
    /// a little on each (a lane that refuses at once keeps each node's count low) and a
    /// lot in all: from the others' reports it keeps no person's slot on any node.
    #[tokio::test]
    async fn a_session_overflowing_through_the_fleet_keeps_no_slot_anywhere() {
        let (l, of) = session_in_a_fleet();
        let over = || l.stats().over_share.load(Ordering::Relaxed);
        // Two overflowing on each of three other nodes: six beyond its share in all.
        let others: Vec<Peer> = ["a", "c", "d"]
            .map(|n| peer(n, 2, 2, "0 0 2 0   over:beef=2"))
            .into();
        l.apply_fleet("b", 2, others.clone());
        let first = l.acquire(Class::Session(of)).await.unwrap();
        assert_eq!(over(), 1, "to the lane, not a person's slot");
        drop(first);
        // The overflow seen here is reported though it ended before the report.
        assert_eq!(l.fleet_ask("b").report.sessions.overflow, vec![(0xbeef, 1)]);
        // The others' overflow ended, and this node's is past: its share is back.
        l.apply_fleet("b", 2, ["a", "c"].map(|n| peer(n, 2, 0, "0 0 0 0 ")).into());
        l.inner.lock().people.overflow.forget_recent();
        let _second = l.acquire(Class::Session(of)).await.unwrap();
        assert_eq!(over(), 1, "a person's slot again");
    }

    /// A node with no person of its own, while another node's editor works: its lane
    /// keeps to its part of the fleet's (the other node judged half a slot), as if the
    /// editor were its own; with no person anywhere it takes what is free.
    #[tokio::test]
    async fn another_nodes_people_hold_this_nodes_lane_to_its_part() {
        let l = Limiter::new(
            Mode::Fixed(8),
            0.0,
            100,
            Duration::from_secs(10),
            LaneConfig {
                share: 0.5,
                network_share: 1.0,
                wait: Duration::from_secs(2),
                people_linger: Duration::from_millis(100),
                governed: true,
            },
        );
        l.join_fleet();
        let crawler = || Class::Anonymous(net("127.2.0.1"));
        l.apply_fleet("b", 4, vec![peer("a", 4, 1, "1 0 0 0    500")]);
        // A reader's revalidation here is people's work, but no judgment of their
        // latency (only sessions' times are): nothing to add to the fleet's.
        let revalidation = l.acquire(Class::Shared).await.unwrap();
        let said = l.fleet_ask("b").report;
        assert_eq!(
            (said.people, said.lane_milli),
            (1, 0),
            "no judgment of its own"
        );
        drop(revalidation);
        let first = l.acquire(crawler()).await.unwrap();
        let second = tokio::time::timeout(Duration::from_millis(50), l.acquire(crawler())).await;
        assert!(second.is_err(), "waits: one slot of the lane at most");
        drop(first);
        // Nobody's people at work: work-conserving.
        l.apply_fleet("b", 4, vec![peer("a", 4, 0, "0 0 0 0 ")]);
        let _a = l.acquire(crawler()).await.unwrap();
        let _b = tokio::time::timeout(Duration::from_millis(50), l.acquire(crawler()))
            .await
            .expect("a second slot at once")
            .unwrap();
    }

    #[test]
    fn what_a_node_asks_for_follows_the_fleet() {
        let l = limiter(8);
        l.join_fleet();
        // Alone and idle: the whole capacity.
        assert_eq!(l.fleet_ask("b").want, 8);
        // Another node has a crawler's 20 waiting, this one nothing: all to it but
        // nothing to ask for here.
        l.apply_fleet("b", 0, vec![peer("a", 8, 8, "0 0 28 0 127.2.0.0/24=8:20")]);
        assert_eq!(l.fleet_ask("b").want, 0);
    }

    #[test]
    fn a_network_share_is_divided_where_it_asks() {
        let crawler = net("127.2.0.1");
        let everyone = ["a", "b", "c"].map(|n| peer(n, 3, 3, "0 0 4 0 127.2.0.0/24=1:3"));
        // A share of 2 over three nodes asking alike: one each to two of them.
        let parts: Vec<usize> = everyone
            .iter()
            .map(|me| {
                let others: Vec<Peer> = everyone
                    .iter()
                    .filter(|p| p.node != me.node)
                    .cloned()
                    .collect();
                net_parts(&me.node, &me.report.nets, &others, 2)[&crawler]
            })
            .collect();
        assert_eq!(parts.iter().sum::<usize>(), 2, "{parts:?}");
    }

    #[test]
    fn a_node_that_never_reached_redis_takes_the_whole_capacity_after_its_lease() {
        let l = limiter(6);
        l.join_fleet();
        assert!(!l.fleet_unreachable());
        assert_eq!(l.limit(), 1, "a new node starts small");
        l.inner.lock().fleet.as_mut().unwrap().lease_until = Instant::now() - LEASE;
        assert!(l.fleet_unreachable());
        assert_eq!(l.limit(), 6, "alone as far as it knows");
    }

    #[tokio::test]
    async fn without_redis_a_node_keeps_its_grant_then_takes_its_part_never_more() {
        let l = limiter(6);
        l.join_fleet();
        l.apply_fleet(
            "b",
            1,
            vec![peer("a", 3, 3, "0 0 3 0 "), peer("c", 2, 2, "0 0 2 0 ")],
        );
        assert!(!l.fleet_unreachable(), "within its lease");
        assert_eq!(l.limit(), 1);
        let past = Instant::now() - LEASE;
        l.inner.lock().fleet.as_mut().unwrap().lease_until = past;
        assert!(l.fleet_unreachable(), "fell back: said once");
        assert_eq!(l.limit(), 1, "no more than its grant while others drain");
        assert!(!l.fleet_unreachable());
        l.inner.lock().fleet.as_mut().unwrap().changed_at = Some(past);
        assert!(!l.fleet_unreachable());
        assert_eq!(l.limit(), 2, "capacity / 3 nodes, never the whole");
        assert!(l.fleet_stats().unwrap().alone);
        // Its first ask when Redis answers again, with work waiting beyond its part: no
        // more than its part (the others still have theirs in flight).
        let held = [
            l.acquire(Class::Shared).await.unwrap(),
            l.acquire(Class::Shared).await.unwrap(),
        ];
        let waiting = tokio::spawn({
            let l = l.clone();
            async move { l.acquire(Class::Shared).await.map(drop) }
        });
        tokio::time::timeout(Duration::from_secs(1), l.fleet_wake().notified())
            .await
            .unwrap();
        assert_eq!(l.fleet_ask("b").want, 2, "its part, not the whole");
        drop(held);
        waiting.await.unwrap().unwrap();
        // Back: no more than it has for a lease's time.
        let applied = l.apply_fleet("b", 1, vec![]);
        assert!(applied.rejoined);
        assert_eq!(l.fleet_ask("b").want, 1);
        // After it too while the two others it knew are not back: one of them may
        // still run alone on its part. Work here wants a second slot.
        let _one = l.acquire(Class::Shared).await.unwrap();
        let _two = tokio::spawn({
            let l = l.clone();
            async move { l.acquire(Class::Shared).await.map(drop) }
        });
        tokio::time::timeout(Duration::from_secs(1), l.fleet_wake().notified())
            .await
            .unwrap();
        let back_at = |ago| l.inner.lock().fleet.as_mut().unwrap().changed_at = Some(ago);
        back_at(Instant::now() - LEASE);
        l.apply_fleet("b", 1, vec![peer("a", 1, 1, "0 0 1 0 ")]);
        assert_eq!(l.fleet_ask("b").want, 1, "a is back, c not yet");
        l.apply_fleet(
            "b",
            1,
            vec![peer("a", 1, 1, "0 0 1 0 "), peer("c", 1, 1, "0 0 1 0 ")],
        );
        assert!(
            l.fleet_ask("b").want > 1,
            "every node back: by demand again"
        );
        // A node that never comes back (it died meanwhile) holds nothing after BACK_MOST.
        l.apply_fleet("b", 1, vec![peer("a", 1, 1, "0 0 1 0 ")]);
        back_at(Instant::now() - LEASE);
        assert_eq!(l.fleet_ask("b").want, 1);
        back_at(Instant::now() - BACK_MOST);
        assert!(
            l.fleet_ask("b").want > 1,
            "c's part is taken after BACK_MOST"
        );
    }
}

//! One judgment of the backend for a fleet: several levee nodes in front of one
//! backend hold shares of its capacity, so that N nodes never give it N times its
//! limit, a person waiting on one node takes room from anonymous work on the others,
//! and a client network's share is counted over every node.
//!
//! Pure: what a node reports ([`Report`], one line of text), how the fleet's capacity
//! is divided ([`allocate`]), and what a node keeps of the last view ([`FleetState`]).
//! The shares are leases kept in the shared Redis (levee-redis's fleet.rs holds them
//! and the atomic rule that a node's grant only comes from capacity no other node
//! holds; levee-tiers renews them about every second, and at once when a person
//! waits or a slot frees while someone wants it).

use std::time::{Duration, Instant};

use crate::client_net::ClientNet;
use crate::governor::FLOOR;
use crate::lane::share_of;
pub use crate::lane::NetWork;
pub use crate::people_times::PeopleTimes;
use crate::people_times::TimesSeen;

/// Networks a report names at most (the busiest): a crawler storm comes from a few,
/// and a report must stay one short line.
pub const REPORT_NETS: usize = 16;

/// How long a node's lease lasts without renewal: it renews every second, so a node
/// that stopped (killed, partitioned) frees its share within this.
pub const LEASE: Duration = Duration::from_secs(3);

/// How often a lease is renewed when nothing calls for it sooner.
pub const RENEW_EVERY: Duration = Duration::from_secs(1);

/// What one node tells the fleet about its work for one backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Requests this node has at the backend now.
    pub in_use: usize,
    /// The backend's capacity as this node knows it (fixed, or its adaptive estimate).
    pub capacity: usize,
    /// People's work (sessions, revalidations) in flight or waiting, at least one while
    /// people were seen within the linger.
    pub people: usize,
    /// People's work waiting for a slot.
    pub people_waiting: usize,
    /// Anonymous work in flight or waiting.
    pub anonymous: usize,
    /// While this node's people have work: what their latency lets anonymous work hold
    /// of the fleet's capacity (governor.rs); 0: no cut.
    pub lane_cap: usize,
    /// The same in thousandths of a slot, below one slot too (a duty cycle): the
    /// fleet's lane is one lane, whose cap is what the nodes' people's latency says on
    /// average, shared by the nodes with anonymous work (sharing.rs); 0: none.
    pub lane_milli: usize,
    /// The busiest client networks of the lane: in flight, waiting.
    pub nets: Vec<NetWork>,
    /// The sessions holding the most session slots here, and the client networks whose
    /// sessions do: a session's share and its network's cap are the fleet's (people.rs),
    /// so that one session replayed through every node holds no more than through one.
    pub sessions: SessionWork,
    /// This node's latest people's request times: every node's governor judges the
    /// fleet's people (people_times.rs).
    pub people_times: PeopleTimes,
    /// Anonymous work in flight (not waiting): load on the backend this node's people
    /// use too, where waiting crawlers are none.
    pub lane_in_flight: usize,
    /// Anonymous work found no slot free here within `WANTED_LATELY` (the lane would
    /// take more, though between two pages of a duty cycle it holds none); 1 or 0 on
    /// the line.
    pub lane_wanted: bool,
}

// A lane's turned-away work must count for as long as a report can be old, or nodes
// reading each other's last reports disagree on where the lane's fraction is.
const _: () = assert!(crate::lane::WANTED_LATELY.as_nanos() >= RENEW_EVERY.as_nanos());

/// Session slots held, per session (its hash) and per client network; and the sessions
/// with requests beyond their share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionWork {
    pub whos: Vec<(u64, usize)>,
    pub nets: Vec<(ClientNet, usize)>,
    /// Per session, the most requests it had beyond its share at once (in the lane)
    /// since the last report: a script's or a replay's overflow is lasting, a page
    /// load's is a moment, so the peak, not a snapshot that a lane refusing at once
    /// would leave near zero on every node.
    pub overflow: Vec<(u64, usize)>,
}

impl SessionWork {
    /// `who:HEX=n` and `net:CIDR=n`, comma-separated.
    fn to_field(&self) -> String {
        let whos = self.whos.iter().map(|(w, n)| format!("who:{w:x}={n}"));
        let nets = self.nets.iter().map(|(c, n)| format!("net:{c}={n}"));
        whos.chain(nets).collect::<Vec<_>>().join(",")
    }

    /// `over:HEX=n`, comma-separated: a field of its own, after the one a node of the
    /// version before reads (it refuses an item it does not know).
    fn overflow_field(&self) -> String {
        let over = self.overflow.iter().map(|(w, n)| format!("over:{w:x}={n}"));
        over.collect::<Vec<_>>().join(",")
    }

    /// Reads [`SessionWork::overflow_field`]; None for anything else.
    fn overflow_from_field(field: &str) -> Option<Vec<(u64, usize)>> {
        let items = field.split(',').filter(|s| !s.is_empty()).take(REPORT_NETS);
        items
            .map(|item| {
                let (key, n) = item.split_once('=')?;
                let who = key.strip_prefix("over:")?;
                Some((u64::from_str_radix(who, 16).ok()?, count(n)?))
            })
            .collect()
    }

    /// Reads [`SessionWork::to_field`]; None for anything else.
    fn from_field(field: &str) -> Option<SessionWork> {
        let mut out = SessionWork::default();
        for item in field
            .split(',')
            .filter(|s| !s.is_empty())
            .take(2 * REPORT_NETS)
        {
            let (key, n) = item.split_once('=')?;
            let n = count(n)?;
            if let Some(who) = key.strip_prefix("who:") {
                out.whos.push((u64::from_str_radix(who, 16).ok()?, n));
            } else if let Some(net) = key.strip_prefix("net:") {
                out.nets.push((net.parse().ok()?, n));
            } else {
                return None;
            }
        }
        Some(out)
    }
}

impl Report {
    /// What this node would use now.
    pub fn demand(&self) -> usize {
        self.people + self.anonymous
    }

    /// `in_use capacity people people_waiting anonymous lane_cap
    /// [net=in_flight:waiting,...]`:
    /// the first field is where the lease script reads what the node holds.
    pub fn to_line(&self) -> String {
        let nets: Vec<String> = self
            .nets
            .iter()
            .map(|(n, f, w)| format!("{n}={f}:{w}"))
            .collect();
        // The sessions' fields last: a node of a version before reads the fields it
        // knows and leaves the rest.
        format!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {}",
            self.in_use,
            self.capacity,
            self.people,
            self.people_waiting,
            self.anonymous,
            self.lane_cap,
            nets.join(","),
            self.sessions.to_field(),
            self.sessions.overflow_field(),
            self.lane_milli,
            self.people_times.to_field(),
            self.lane_in_flight,
            u8::from(self.lane_wanted)
        )
    }

    /// Parses [`Report::to_line`]; None for anything else (Redis is shared with anyone
    /// who can reach it: a bad line is ignored, never trusted).
    pub fn from_line(line: &str) -> Option<Report> {
        let mut f = line.split(' ');
        let mut num = || -> Option<usize> {
            let n: usize = f.next()?.parse().ok()?;
            // No backend has a million slots; a larger number is not a report.
            (n <= 1_000_000).then_some(n)
        };
        let (in_use, capacity, people, people_waiting, anonymous, lane_cap) =
            (num()?, num()?, num()?, num()?, num()?, num()?);
        let mut nets = Vec::new();
        if let Some(list) = f.next() {
            for item in list.split(',').filter(|s| !s.is_empty()).take(REPORT_NETS) {
                let (net, counts) = item.split_once('=')?;
                let (fl, w) = counts.split_once(':')?;
                nets.push((net.parse().ok()?, count(fl)?, count(w)?));
            }
        }
        let mut sessions = match f.next() {
            Some(field) => SessionWork::from_field(field)?,
            None => SessionWork::default(),
        };
        if let Some(field) = f.next() {
            sessions.overflow = SessionWork::overflow_from_field(field)?;
        }
        let lane_milli = match f.next() {
            Some(n) => count(n)?,
            None => 0,
        };
        let people_times = match f.next() {
            Some(field) => PeopleTimes::from_field(field)?,
            None => PeopleTimes::default(),
        };
        let lane_in_flight = match f.next() {
            Some(n) => count(n)?,
            None => 0,
        };
        let lane_wanted = match f.next() {
            Some(n) => count(n)? > 0,
            None => false,
        };
        Some(Report {
            in_use,
            capacity,
            people,
            people_waiting,
            anonymous,
            lane_cap,
            lane_milli,
            nets,
            sessions,
            people_times,
            lane_in_flight,
            lane_wanted,
        })
    }
}

/// A count in a report: no backend has a million slots, and a larger number (anyone who
/// can reach Redis may write there) would overflow the sums over the nodes.
fn count(s: &str) -> Option<usize> {
    s.parse().ok().filter(|&n: &usize| n <= 1_000_000)
}

/// Another node as the last renewal saw it: what it was granted and what it reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub node: String,
    pub grant: usize,
    pub report: Report,
}

impl Peer {
    /// What it holds of the capacity: its grant, or more while work it started before
    /// a smaller grant is still in flight.
    pub fn held(&self) -> usize {
        self.grant.max(self.report.in_use)
    }
}

/// Each node's target share of `capacity`, in the order given. People's work first,
/// shared out evenly by need; then anonymous work, within `lane_share` of the capacity
/// while any node has people's work (the lane's share, fleet-wide); what no one needs
/// goes to the nodes with people (room for their next request), else to every node
/// alike, so that a request arriving anywhere finds a slot without waiting for a
/// renewal. The sum is never above `capacity`.
pub fn allocate(capacity: usize, lane_share: f64, nodes: &[&Report]) -> Vec<usize> {
    let people: Vec<usize> = nodes.iter().map(|r| r.people).collect();
    let mut out = water_fill(&people, capacity);
    let mut left = capacity - out.iter().sum::<usize>();
    let any_people = people.iter().any(|&p| p > 0);
    // While people have work anywhere: the lane's share, and no more than the least
    // that any node's people's latency allows (a crawler's pages slow people down
    // whichever node let them in).
    let cut = nodes
        .iter()
        .map(|r| r.lane_cap)
        .filter(|&c| c > 0)
        .min()
        .unwrap_or(usize::MAX);
    let anon_room = match any_people {
        true => left.min(share_of(capacity, lane_share)).min(cut),
        false => left,
    };
    let anonymous: Vec<usize> = nodes.iter().map(|r| r.anonymous).collect();
    for (o, a) in out.iter_mut().zip(water_fill(&anonymous, anon_room)) {
        *o += a;
        left -= a;
    }
    // The rest: to the nodes where people are, else to all.
    let spare_to: Vec<usize> = match any_people {
        true => (0..nodes.len()).filter(|&i| people[i] > 0).collect(),
        false => (0..nodes.len()).collect(),
    };
    if !spare_to.is_empty() {
        let each = left / spare_to.len();
        let extra = left % spare_to.len();
        for (k, &i) in spare_to.iter().enumerate() {
            out[i] += each + usize::from(k < extra);
        }
    }
    out
}

/// `total` shared by need: each gets what it needs up to an even share, the rest of the
/// share goes on to those who need more; left-over single slots to the first.
pub(crate) fn water_fill(need: &[usize], total: usize) -> Vec<usize> {
    let mut out = vec![0; need.len()];
    let mut left = total;
    loop {
        let hungry: Vec<usize> = (0..need.len()).filter(|&i| out[i] < need[i]).collect();
        if hungry.is_empty() || left == 0 {
            return out;
        }
        let each = (left / hungry.len()).max(1);
        for i in hungry {
            let give = each.min(need[i] - out[i]).min(left);
            out[i] += give;
            left -= give;
        }
    }
}

/// This node's lane at a renewal: its own judgment of what the lane may hold while
/// its people have work (None: no people here, or not governed), its anonymous
/// work in flight and waiting, and whether it turned any away lately.
pub(crate) struct OwnLane {
    pub judged: Option<f64>,
    pub anonymous: usize,
    pub wanted: bool,
}

/// Node `me`'s part of the fleet's lane while people have work anywhere: the nodes'
/// judgments averaged (each is the same backend seen through its own people's
/// requests; the least of them would squeeze a fleet below what one node gives), shared
/// by anonymous work in flight and waiting, one more where it was turned away lately:
/// whole slots by demand, every node in the order of its name, and what is left of a
/// slot to the first node that asks for more, one with no whole slot first (fractions
/// on every node would each be rounded down: two nodes' 1.5 slots run 1 each, a third
/// less than one node's 3; and a part of 1.5 runs 1). None while no node judges (no
/// people).
///
/// Turned away, not only in flight: a lane below one slot holds none most of the time
/// (it rests between pages), so by what it held at each renewal the fraction went to
/// whichever node had a page running just then, and each node decided from its own
/// now and the others' last report: both took it (two pages at once where the fleet
/// judged one) or neither (the fleet's lane idle), and a node given it late was still
/// resting a floor's rest (issue 51's two-node storms, crawlers below one node's).
pub(crate) fn fleet_lane_part(me: &str, own: &OwnLane, peers: &[Peer]) -> Option<f64> {
    let judged: Vec<f64> = peers
        .iter()
        .map(|p| p.report.lane_milli)
        .filter(|&m| m > 0)
        .map(|m| m as f64 / 1000.0)
        .chain(own.judged)
        .collect();
    if judged.is_empty() {
        return None;
    }
    let cap = judged.iter().sum::<f64>() / judged.len() as f64;
    let mut nodes: Vec<(&str, usize)> = peers
        .iter()
        .map(|p| {
            (
                p.node.as_str(),
                p.report.anonymous + usize::from(p.report.lane_wanted),
            )
        })
        .chain(std::iter::once((
            me,
            own.anonymous + usize::from(own.wanted),
        )))
        .collect();
    nodes.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let at = nodes.iter().position(|(n, _)| *n == me)?;
    let demand: Vec<usize> = nodes.iter().map(|(_, d)| *d).collect();
    if demand.iter().all(|&d| d == 0) {
        return Some(cap);
    }
    // Two or more nodes with anonymous work: one floor over the judgment. Their lanes
    // cannot see each other's pages start (one node's lane never runs two where it
    // judged one), so people ran slower beside the same fleet's lane than beside one
    // node's; each node cut on that, and two nodes' crawlers got 0.6-0.9 of one node's
    // pages (issue 51's storms). The nodes' floors still come out of this.
    let cap = match demand.iter().filter(|&&d| d > 0).count() {
        0 | 1 => cap,
        _ => cap + FLOOR,
    };
    let whole = cap.floor() as usize;
    let parts = water_fill(&demand, whole);
    let rest_to = (0..demand.len())
        .find(|&i| demand[i] > parts[i] && parts[i] == 0)
        .or_else(|| (0..demand.len()).find(|&i| demand[i] > parts[i]))
        .or_else(|| (0..demand.len()).find(|&i| demand[i] > 0));
    // Every other node with anonymous work and no whole slot keeps the floor (its
    // readers' first visits go through its lane, governor.rs): out of the fleet's cap
    // while the cap has room for it, not on top of it. Four nodes' floors over one
    // node's judgment gave four nodes' crawlers twice one node's pages, and editors
    // over twice their fair weather's p99.
    let floors = (0..demand.len())
        .filter(|&i| demand[i] > 0 && parts[i] == 0 && Some(i) != rest_to)
        .count();
    let rest = if rest_to == Some(at) {
        (cap - whole as f64 - floors as f64 * FLOOR).max(0.0)
    } else {
        0.0
    };
    Some(parts[at] as f64 + rest)
}

/// What a node keeps of the fleet between renewals.
#[derive(Debug)]
pub(crate) struct FleetState {
    /// This node's share of the capacity: its limit.
    pub grant: usize,
    /// Until when the grant stands without a renewal.
    pub lease_until: Instant,
    /// Nodes alive at the last renewal, this one included.
    pub nodes: usize,
    /// The fleet's capacity: the least any live node knows.
    pub capacity: usize,
    /// What the other nodes hold of the capacity (their grants, or more while work
    /// started before a smaller grant runs), as they last reported.
    pub held_elsewhere: usize,
    /// What the other nodes had at the backend, as they last reported.
    pub in_use_elsewhere: usize,
    /// People's work waiting on other nodes.
    pub people_waiting_elsewhere: usize,
    /// Some other node's people have work (in flight, waiting, or lately): the lane
    /// here keeps to its share as if they were this node's.
    pub people_elsewhere: bool,
    /// Some node (this one included) wanted more than it was granted.
    pub contended: bool,
    /// What this node held at its last renewal.
    pub held: usize,
    /// Redis could not be reached and the lease ran out: the node runs on
    /// capacity ÷ nodes alone.
    pub alone: bool,
    /// When the node last fell back to running alone, or shared again: for a lease's
    /// time after either, it neither takes more than it had (the others may still hold
    /// what they had, or have not renewed yet).
    pub changed_at: Option<Instant>,
    /// Shared again after running alone: the nodes it knew before (this one included).
    /// Until as many are back, or `BACK_MOST` has passed, it takes no more than it has:
    /// a node still alone runs on its part, and one back late (a reconnect under load)
    /// found the first back holding that part too (the backend got 7 of a fleet's 6).
    pub known_before: usize,
    /// The other nodes, as last seen: what this node's next request is computed from.
    pub peers: Vec<Peer>,
    /// This node's people's request times, for its reports.
    pub times: PeopleTimes,
    /// What it has taken of the other nodes' times.
    pub times_seen: TimesSeen,
    /// Renewals applied since the node joined: how chatty the fleet is.
    pub renewals: u64,
}

/// The longest a node back from running alone waits for the nodes it knew before to
/// be back too: a node that died meanwhile has its part taken after this.
pub const BACK_MOST: Duration = Duration::from_secs(9);

impl FleetState {
    /// Before the first renewal: one slot, for a lease's time. A new node starts small
    /// and grows by demand; one whose Redis stays unreachable takes the whole capacity
    /// when that lease ends (it knows no other node).
    pub fn new(capacity: usize) -> FleetState {
        FleetState {
            grant: capacity.min(1),
            lease_until: Instant::now() + LEASE,
            nodes: 1,
            capacity,
            held_elsewhere: 0,
            in_use_elsewhere: 0,
            people_waiting_elsewhere: 0,
            people_elsewhere: false,
            contended: false,
            held: 0,
            alone: false,
            changed_at: None,
            known_before: 1,
            peers: Vec::new(),
            times: PeopleTimes::default(),
            times_seen: TimesSeen::default(),
            renewals: 0,
        }
    }

    /// The fleet's slots are all in use, as far as this node knows.
    pub fn full(&self, in_use_here: usize) -> bool {
        self.alone || in_use_here + self.held_elsewhere >= self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(people: usize, anonymous: usize) -> Report {
        Report {
            capacity: 4,
            people,
            anonymous,
            ..Report::default()
        }
    }

    #[test]
    fn a_report_is_one_line_read_back_and_junk_is_refused() {
        let r = Report {
            in_use: 3,
            capacity: 4,
            people: 1,
            people_waiting: 1,
            anonymous: 40,
            lane_cap: 0,
            lane_milli: 350,
            nets: vec![(ClientNet::of("127.2.0.9".parse().unwrap(), 24, 56), 2, 38)],
            sessions: SessionWork {
                whos: vec![(0xbeef, 2)],
                nets: vec![(ClientNet::of("127.1.0.3".parse().unwrap(), 24, 56), 3)],
                overflow: vec![(0xbeef, 5)],
            },
            people_times: PeopleTimes {
                count: 9,
                micros: vec![41000, 52500],
            },
            lane_in_flight: 2,
            lane_wanted: true,
        };
        let line = r.to_line();
        assert_eq!(
            line,
            "3 4 1 1 40 0 127.2.0.0/24=2:38 who:beef=2,net:127.1.0.0/24=3 over:beef=5 350 9:41000,52500 2 1"
        );
        assert_eq!(Report::from_line(&line), Some(r));
        // A report of a version before (no overflow field, no sessions' field) still
        // reads.
        assert_eq!(
            Report::from_line("3 4 1 1 40 0 127.2.0.0/24=2:38 who:beef=2").map(|r| r.sessions.whos),
            Some(vec![(0xbeef, 2)])
        );
        assert_eq!(
            Report::from_line("3 4 1 1 40 0 127.2.0.0/24=2:38").map(|r| r.sessions),
            Some(SessionWork::default())
        );
        assert_eq!(
            Report::from_line("1 2 3 4 5 0 ").map(|r| r.anonymous),
            Some(5)
        );
        for junk in [
            "",
            "1 2 3",
            "a b c d e f",
            "1 2 3 4 5 99999999999",
            "1 2 3 4 5 6 x=1",
            "1 2 3 4 5 6  who:zz=1",
            "1 2 3 4 5 6  other:1=1",
            "1 2 3 4 5 6 127.2.0.0/24=99999999999:0",
            "1 2 3 4 5 6  who:beef=18446744073709551615",
            "1 2 3 4 5 6   who:beef=1",
            "1 2 3 4 5 6   over:beef=9999999",
            "1 2 3 4 5 6    0.5",
        ] {
            assert_eq!(Report::from_line(junk), None, "{junk}");
        }
    }

    #[test]
    fn capacity_is_never_given_twice() {
        for cap in 0..12 {
            for a in 0..10 {
                for p in 0..3 {
                    let (x, y, z) = (report(p, a), report(0, 64), report(1, 0));
                    let shares = allocate(cap, 0.5, &[&x, &y, &z]);
                    assert!(shares.iter().sum::<usize>() <= cap, "{cap} {a} {p}");
                }
            }
        }
    }

    #[test]
    fn a_person_anywhere_gets_a_slot_and_crawlers_keep_to_the_lane_share() {
        // Node A: a crawler's 64; node B: one editor.
        let (a, b) = (report(0, 64), report(1, 0));
        assert_eq!(allocate(4, 0.5, &[&a, &b]), vec![2, 2]);
        // No person anywhere: the crawler may use every slot (work-conserving).
        let idle = report(0, 0);
        assert_eq!(allocate(4, 0.5, &[&a, &idle]), vec![4, 0]);
        // Nobody needs anything: every node gets room to start at once.
        assert_eq!(allocate(4, 0.5, &[&idle, &idle, &idle]), vec![2, 1, 1]);
    }

    #[test]
    fn one_node_s_people_slowing_down_hold_anonymous_work_on_every_node() {
        let mut editor = report(1, 0);
        editor.lane_cap = 1;
        let (a, b) = (report(0, 64), report(0, 64));
        let shares = allocate(6, 0.5, &[&editor, &a, &b]);
        assert_eq!(shares, vec![5, 1, 0], "anonymous work: 1 slot in all");
    }

    #[test]
    fn demand_is_shared_evenly_and_what_one_leaves_goes_to_the_others() {
        let (a, b, c) = (report(0, 64), report(0, 64), report(0, 1));
        assert_eq!(allocate(8, 0.5, &[&a, &b, &c]), vec![4, 3, 1]);
        assert_eq!(water_fill(&[1, 10, 10], 9), vec![1, 4, 4]);
    }

    fn peer(node: &str, line: &str) -> Peer {
        Peer {
            node: node.into(),
            grant: 4,
            report: Report::from_line(line).unwrap(),
        }
    }

    #[test]
    fn the_fleets_lane_is_the_nodes_judgment_averaged_and_shared_by_demand() {
        let part = |me: &str, judged, anonymous, peers: &[Peer]| {
            let own = OwnLane {
                judged,
                anonymous,
                wanted: false,
            };
            fleet_lane_part(me, &own, peers).unwrap()
        };
        // 0.2 here, 0.6 there: 0.4, and a floor over it for two nodes asking, to the
        // first node that asks (by name).
        let a = [peer("a", "1 8 1 0 3 0    600")];
        assert!((part("b", Some(0.2), 1, &a) - 0.0).abs() < 1e-9);
        // c keeps its floor (a tenth of a slot) out of them.
        let c = [peer("c", "1 8 1 0 3 0    600")];
        assert!((part("b", Some(0.2), 1, &c) - 0.4).abs() < 1e-9);
        // One node asking: the judgment alone.
        let quiet = [peer("c", "1 8 1 0 0 0    600")];
        assert!((part("b", Some(0.2), 1, &quiet) - 0.4).abs() < 1e-9);
        // Four nodes judging the floor: each keeps its floor, the fleet four of them
        // (the first node's part is lifted to the floor, `Governor::set_fleet`).
        let floor = ["a", "c", "d"].map(|n| peer(n, "1 8 1 0 3 0    100"));
        assert_eq!(part("b", Some(0.1), 1, &floor), 0.0);
        assert_eq!(part("0", Some(0.1), 1, &floor), 0.0);
        // 3.0 on average over two nodes asking alike: 2 and 1, not 1.5 each rounded
        // down to 1 each.
        let c = [peer("c", "1 8 1 0 3 0    3000")];
        let b = [peer("b", "1 8 1 0 3 0    3000")];
        let (pb, pc) = (part("b", Some(3.0), 3, &c), part("c", Some(3.0), 3, &b));
        assert!((pb - 2.1).abs() < 1e-9 && pc == 1.0, "{pb} {pc}");
        let idle = OwnLane {
            judged: None,
            anonymous: 0,
            wanted: false,
        };
        assert_eq!(
            fleet_lane_part("b", &idle, &[peer("a", "0 8 0 0 3 0 ")]),
            None
        );
    }

    #[test]
    fn a_lane_between_its_pages_keeps_its_part_and_a_fraction_goes_where_no_slot_is() {
        let part = |me: &str, judged, anonymous, wanted, peers: &[Peer]| {
            let own = OwnLane {
                judged,
                anonymous,
                wanted,
            };
            fleet_lane_part(me, &own, peers).unwrap()
        };
        // b's lane rests between two pages (none in flight) and turned crawlers away a
        // moment ago; c has a page running. 0.4 judged, a floor over it: b keeps the
        // fraction whether or not its page runs now, and c, reading b's report, agrees.
        let c_running = [peer("c", "1 8 1 0 1 0    400 0: 1 1")];
        let resting = part("b", Some(0.4), 0, true, &c_running);
        let running = part("b", Some(0.4), 1, true, &c_running);
        assert!((resting - 0.4).abs() < 1e-9, "{resting}");
        assert_eq!(resting, running);
        let b_resting = [peer("b", "0 8 1 0 0 0    400 0: 0 1")];
        assert_eq!(part("c", Some(0.4), 1, true, &b_resting), 0.0);
        // Without its turned-away crawlers b's resting lane would hand it to c.
        let b_quiet = [peer("b", "0 8 1 0 0 0    400 0: 0 0")];
        assert!((part("c", Some(0.4), 1, true, &b_quiet) - 0.4).abs() < 1e-9);
        assert_eq!(part("b", Some(0.4), 0, false, &c_running), 0.0);
        // 1.5 over two nodes that both want more: 1 and 0.5, not 1.5 on one node (a
        // part above one slot runs its whole slots only).
        let c_wants = [peer("c", "1 8 1 0 1 0    1400 0: 1 1")];
        let b_wants = [peer("b", "1 8 1 0 1 0    1400 0: 1 1")];
        let pb = part("b", Some(1.4), 1, true, &c_wants);
        let pc = part("c", Some(1.4), 1, true, &b_wants);
        assert!(pb == 1.0 && (pc - 0.5).abs() < 1e-9, "{pb} {pc}");
    }
}

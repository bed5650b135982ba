//! People's request times, shared over the fleet: every node's governor judges the
//! lane by all the fleet's people's requests, not only its own. The backend is one, so
//! a crawler's page let in anywhere slows every editor; but a node that sees one
//! editor of two gathers half the evidence, judges twice as slowly and more noisily
//! (its best windows are the luckiest of fewer requests), and four nodes so judged kept
//! their lanes at the floor where one node with both editors gave crawlers five times
//! as much (issue 51's storms). Each node's report carries its latest people's times
//! with a running count, and the others take the ones they have not seen.

use std::collections::HashMap;
use std::time::Duration;

/// The most times a report carries: a node renews every second, and a site with more
/// people's requests than this a second has evidence enough in what it carries.
pub const SHARED: usize = 32;

/// The longest time a report may say (a minute, in microseconds): anything above is
/// not a people's request time (anyone who can reach Redis may write there).
const MOST_MICROS: u32 = 60_000_000;

/// A node's latest people's request times, in microseconds, the last of them its
/// `count`-th since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeopleTimes {
    pub count: u64,
    pub micros: Vec<u32>,
}

impl PeopleTimes {
    /// `count:us,us,...`
    pub fn to_field(&self) -> String {
        let micros: Vec<String> = self.micros.iter().map(u32::to_string).collect();
        format!("{}:{}", self.count, micros.join(","))
    }

    /// Reads [`PeopleTimes::to_field`]; None for anything else.
    pub fn from_field(field: &str) -> Option<PeopleTimes> {
        let (count, list) = field.split_once(':')?;
        let micros = list
            .split(',')
            .filter(|s| !s.is_empty())
            .take(SHARED)
            .map(|s| s.parse().ok().filter(|&us: &u32| us <= MOST_MICROS))
            .collect::<Option<Vec<u32>>>()?;
        Some(PeopleTimes {
            count: count.parse().ok()?,
            micros,
        })
    }

    /// Records one people's request time of this node.
    pub fn push(&mut self, held: Duration) {
        if self.micros.len() == SHARED {
            self.micros.remove(0);
        }
        let us = u32::try_from(held.as_micros()).unwrap_or(u32::MAX);
        self.micros.push(us.min(MOST_MICROS));
        self.count += 1;
    }
}

/// What this node has taken of each other node's times: the count it last saw.
#[derive(Debug, Default)]
pub struct TimesSeen {
    seen: HashMap<String, u64>,
}

impl TimesSeen {
    /// The times of the other nodes' reports (`peers`: each node's name and times)
    /// this node has not taken yet, oldest first. A node seen for the first time gives
    /// none (its times may be from long ago); one whose count went back has restarted
    /// and gives what it carries. Nodes gone are forgotten.
    pub fn take<'a>(
        &mut self,
        peers: impl Iterator<Item = (&'a str, &'a PeopleTimes)>,
    ) -> Vec<Duration> {
        let mut out = Vec::new();
        let mut seen = HashMap::with_capacity(self.seen.len());
        for (node, t) in peers {
            let new = match self.seen.get(node) {
                None => 0,
                Some(&last) if t.count >= last => t.count - last,
                Some(_) => t.count,
            };
            let new = usize::try_from(new)
                .unwrap_or(usize::MAX)
                .min(t.micros.len());
            let from = t.micros.len() - new;
            out.extend(
                t.micros[from..]
                    .iter()
                    .map(|&us| Duration::from_micros(u64::from(us))),
            );
            seen.insert(node.to_string(), t.count);
        }
        self.seen = seen;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer<'a>(node: &'a str, times: &'a PeopleTimes) -> [(&'a str, &'a PeopleTimes); 1] {
        [(node, times)]
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn times_are_one_field_read_back_and_junk_is_refused() {
        let mut t = PeopleTimes::default();
        t.push(ms(41));
        t.push(Duration::from_micros(52_500));
        assert_eq!(t.to_field(), "2:41000,52500");
        assert_eq!(PeopleTimes::from_field(&t.to_field()), Some(t.clone()));
        assert_eq!(PeopleTimes::from_field("0:"), Some(PeopleTimes::default()));
        for junk in ["", "7", "x:1", "3:1,a", "3:-1", "3:60000001"] {
            assert_eq!(PeopleTimes::from_field(junk), None, "{junk:?}");
        }
        // A node's own record keeps the latest `SHARED`, however many it has had.
        for _ in 0..100 {
            t.push(ms(5));
        }
        assert_eq!((t.count, t.micros.len()), (102, SHARED));
    }

    #[test]
    fn each_peer_time_is_taken_once() {
        let mut a = PeopleTimes::default();
        let mut seen = TimesSeen::default();
        a.push(ms(40));
        assert_eq!(
            seen.take(peer("a", &a).into_iter()),
            vec![],
            "first sight: none"
        );
        a.push(ms(50));
        a.push(ms(60));
        assert_eq!(seen.take(peer("a", &a).into_iter()), vec![ms(50), ms(60)]);
        assert_eq!(
            seen.take(peer("a", &a).into_iter()),
            vec![],
            "the same report again"
        );
        // More since the last look than a report carries: what it carries.
        for _ in 0..SHARED + 5 {
            a.push(ms(70));
        }
        assert_eq!(seen.take(peer("a", &a).into_iter()).len(), SHARED);
        // Restarted: its count went back.
        let mut again = PeopleTimes::default();
        again.push(ms(45));
        assert_eq!(seen.take(peer("a", &again).into_iter()), vec![ms(45)]);
        // Gone, then back: first sight again.
        assert_eq!(seen.take(std::iter::empty()), vec![]);
        again.push(ms(46));
        assert_eq!(seen.take(peer("a", &again).into_iter()), vec![]);
    }
}

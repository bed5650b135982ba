//! People's queues: revalidations (shared work) and proven sessions, per worker thread,
//! and which of their waiters a freed slot goes to.
//!
//! Fair inside the session class: one session holds at most `SESSION_SLOTS` of it; a
//! request beyond is anonymous work of its network (limit.rs, `effective`), where the
//! lane's shares and people's latency hold it. While it has such overflow it holds one
//! slot as a person's (a browser's page load overflows for a moment, by a few), and none
//! once the overflow is more than a browser sends at once (a script, or a session
//! replayed from many connections): a stolen session, or an editor running a script,
//! cannot take the site from the other editors. One client network (an
//! office, a carrier's NAT: several people) is not cut off, but while others wait, its
//! waiters beyond `cap` (the lane's network share of the limit) go after theirs.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use tokio::sync::oneshot;

use super::class::SessionOf;
use super::overflow::Overflows;

pub(super) type Queue = VecDeque<(u64, oneshot::Sender<()>)>;

/// A session's request waiting for a slot.
pub(super) struct SessionWaiter {
    pub arrival: u64,
    pub tx: oneshot::Sender<()>,
    pub of: SessionOf,
}

/// Slots one session holds at most in the session class: a person's browser asks for a
/// page and a call or two at once; a script asks for dozens.
pub(super) const SESSION_SLOTS: usize = 2;

/// Requests beyond its share a person's page load sends at once: a browser opens six
/// connections to a host, two of them within the share. More than this at once is a
/// script (or a replayed session), and its session keeps no slot as a person's.
pub(super) const PAGE_LOAD_OVERFLOW: usize = 4;

/// How far into a thread's session queue a waiter under its share is looked for: a
/// script's flood of queued requests is skipped over this many at a time, at most.
const LOOKAHEAD: usize = 64;

#[derive(Default)]
pub(super) struct Local {
    /// Slots held by requests of this thread, every class.
    pub in_use: usize,
    pub shared: Queue,
    pub sessions: VecDeque<SessionWaiter>,
}

impl Local {
    pub fn is_empty(&self) -> bool {
        self.shared.is_empty() && self.sessions.is_empty()
    }
}

/// A waiter chosen to get the next slot: its thread, whether a session, and its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pick {
    pub thread: usize,
    pub session: bool,
    pub at: usize,
}

#[derive(Default)]
pub(super) struct People {
    /// Waiters per worker thread (`worker::id()`), grown as threads show up.
    pub threads: Vec<Local>,
    pub sessions_in_use: usize,
    /// Session slots in flight per client network and per session.
    nets: HashMap<crate::client_net::ClientNet, usize>,
    whos: HashMap<u64, usize>,
    /// Per session, its requests waiting for a session slot: they are part of its
    /// share, or 16 connections replaying one session would all queue as a person's
    /// while it held none yet, and take slot after slot.
    whos_waiting: HashMap<u64, usize>,
    /// Per session, its requests sent to the lane beyond its share: running, or
    /// started lately.
    pub overflow: Overflows,
    /// In a fleet, what the other nodes' last reports say: a session's share and a
    /// network's cap are the fleet's.
    elsewhere: Elsewhere,
}

/// The other nodes' session work, summed over their last reports.
#[derive(Default)]
pub(super) struct Elsewhere {
    /// Session slots held, per session and per client network.
    pub whos: HashMap<u64, usize>,
    pub nets: HashMap<crate::client_net::ClientNet, usize>,
    /// Per session, its requests beyond its share, running or started lately.
    pub overflow: HashMap<u64, usize>,
}

impl People {
    pub fn local(&mut self, thread: usize) -> &mut Local {
        if self.threads.len() <= thread {
            self.threads.resize_with(thread + 1, Local::default);
        }
        &mut self.threads[thread]
    }

    pub fn queued(&self) -> usize {
        self.threads
            .iter()
            .map(|l| l.shared.len() + l.sessions.len())
            .sum()
    }

    pub fn sessions_waiting(&self) -> bool {
        self.threads.iter().any(|l| !l.sessions.is_empty())
    }

    /// A session's request waits for a slot on `thread`.
    pub fn queue_session(&mut self, thread: usize, waiter: SessionWaiter) {
        *self.whos_waiting.entry(waiter.of.who).or_default() += 1;
        self.local(thread).sessions.push_back(waiter);
    }

    /// A session's request no longer waits (granted or gone).
    fn session_unqueued(&mut self, who: u64) {
        if let Some(n) = self.whos_waiting.get_mut(&who) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.whos_waiting.remove(&who);
            }
        }
    }

    /// A session's slot taken.
    pub fn session_admitted(&mut self, of: SessionOf) {
        self.sessions_in_use += 1;
        *self.nets.entry(of.net).or_default() += 1;
        *self.whos.entry(of.who).or_default() += 1;
    }

    /// A session's slot given back.
    pub fn session_released(&mut self, of: SessionOf) {
        self.sessions_in_use = self.sessions_in_use.saturating_sub(1);
        for count in [self.nets.get_mut(&of.net), self.whos.get_mut(&of.who)]
            .into_iter()
            .flatten()
        {
            *count = count.saturating_sub(1);
        }
        if self.nets.get(&of.net) == Some(&0) {
            self.nets.remove(&of.net);
        }
        if self.whos.get(&of.who) == Some(&0) {
            self.whos.remove(&of.who);
        }
    }

    /// Whether `of` holds less than its network's `cap` and its session's share, on
    /// every node of a fleet.
    pub fn under_share(&self, of: SessionOf, cap: usize) -> bool {
        let elsewhere = self.elsewhere.nets.get(&of.net).copied().unwrap_or(0);
        self.nets.get(&of.net).copied().unwrap_or(0) + elsewhere < cap
            && self.session_under_share(of)
    }

    /// The sessions (their slots and waiters) and networks holding the most session
    /// slots here, and the sessions with the most requests beyond their share lately
    /// (`most` of each).
    pub fn busiest(&self, most: usize) -> crate::fleet::SessionWork {
        fn top<K: Copy>(m: &HashMap<K, usize>, most: usize) -> Vec<(K, usize)> {
            let mut v: Vec<(K, usize)> = m
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect();
            v.sort_unstable_by_key(|(_, n)| std::cmp::Reverse(*n));
            v.truncate(most);
            v
        }
        let mut claims = self.whos.clone();
        for (who, n) in &self.whos_waiting {
            *claims.entry(*who).or_default() += n;
        }
        crate::fleet::SessionWork {
            whos: top(&claims, most),
            nets: top(&self.nets, most),
            overflow: self.overflow.busiest(most, Instant::now()),
        }
    }

    /// What the other nodes hold (their last reports, summed); empty alone.
    pub fn set_elsewhere(&mut self, elsewhere: Elsewhere) {
        self.elsewhere = elsewhere;
    }

    /// Whether `of`'s session holds less than its share (`session_share`): which of the
    /// waiters a freed slot goes to first.
    pub fn session_under_share(&self, of: SessionOf) -> bool {
        self.session_holds(of, false) < session_share(self.session_overflow(of))
    }

    /// Whether a new request of `of`'s session is a person's: its slots are fewer than
    /// its share, and so are its slots and its requests already waiting for one
    /// together, but for a page load's overflow while it has sent nothing beyond its
    /// share lately (a browser's page load into a full backend waits as a person's; a
    /// script's or a replay's stream, overflowing on and on, does not).
    pub fn session_arrival_under_share(&self, of: SessionOf) -> bool {
        let overflow = self.session_overflow(of);
        let share = session_share(overflow);
        let page_load = if overflow == 0 { PAGE_LOAD_OVERFLOW } else { 0 };
        self.session_holds(of, false) < share && self.session_holds(of, true) < share + page_load
    }

    /// Whether `of`'s session sends more beyond its share than a browser's page load,
    /// lately, on any node: a script or a replay, whose times are not people's.
    pub fn scripted(&self, of: SessionOf) -> bool {
        session_share(self.session_overflow(of)) == 0
    }

    /// The session's requests beyond its share, running or started lately, on every
    /// node of a fleet (a session replayed through N nodes overflows a little on each,
    /// and a lot in all).
    fn session_overflow(&self, of: SessionOf) -> usize {
        let elsewhere = self.elsewhere.overflow.get(&of.who).copied().unwrap_or(0);
        self.overflow.seen(of.who, Instant::now()) + elsewhere
    }

    /// The session slots `of`'s session holds on every node (the other nodes' slots and
    /// waiters as last reported), with its waiters here if `waiting`.
    fn session_holds(&self, of: SessionOf, waiting: bool) -> usize {
        let get = |m: &HashMap<u64, usize>| m.get(&of.who).copied().unwrap_or(0);
        let here = get(&self.whos) + if waiting { get(&self.whos_waiting) } else { 0 };
        here + get(&self.elsewhere.whos)
    }

    pub fn overflow_started(&mut self, who: u64) {
        self.overflow.started(who, Instant::now());
    }

    pub fn overflow_ended(&mut self, who: u64) {
        self.overflow.ended(who);
    }

    /// Takes the chosen waiter out of its queue.
    pub fn take(&mut self, p: Pick) -> Option<(oneshot::Sender<()>, Option<SessionOf>)> {
        let local = self.threads.get_mut(p.thread)?;
        if p.session {
            let w = local.sessions.remove(p.at)?;
            self.session_unqueued(w.of.who);
            Some((w.tx, Some(w.of)))
        } else {
            let (_, tx) = local.shared.remove(p.at)?;
            Some((tx, None))
        }
    }

    /// The waiter a slot freed on thread `here` goes to:
    /// - a session first while sessions hold less than `reserved`;
    /// - then revalidations (shared work), which serve everyone who reads the page;
    /// - then sessions.
    ///
    /// Within a class, this thread's waiter while the thread holds less than its fair
    /// share of `limit` or no other thread waits, else the oldest anywhere; among
    /// sessions, those under their share (`cap`) before those over it.
    pub fn pick(&self, here: usize, reserved: usize, limit: usize, cap: usize) -> Option<Pick> {
        if self.sessions_in_use < reserved {
            if let Some(p) = self.pick_session(here, limit, cap) {
                return Some(p);
            }
        }
        self.pick_shared(here, limit)
            .or_else(|| self.pick_session(here, limit, cap))
    }

    fn fair_share(&self, limit: usize) -> usize {
        limit.div_ceil(self.threads.len().max(1))
    }

    fn pick_shared(&self, here: usize, limit: usize) -> Option<Pick> {
        let front = |l: &Local| l.shared.front().map(|(a, _)| *a);
        let thread = self.choose(here, limit, |t, l| front(l).map(|a| (a, t, 0)))?;
        Some(Pick {
            thread: thread.1,
            session: false,
            at: 0,
        })
    }

    fn pick_session(&self, here: usize, limit: usize, cap: usize) -> Option<Pick> {
        let eligible = |_: usize, l: &Local| {
            l.sessions
                .iter()
                .take(LOOKAHEAD)
                .enumerate()
                .find(|(_, w)| self.under_share(w.of, cap))
                .map(|(i, w)| (w.arrival, i))
        };
        let any = |_: usize, l: &Local| l.sessions.front().map(|w| (w.arrival, 0));
        let chosen = self
            .choose(here, limit, |t, l| eligible(t, l).map(|(a, i)| (a, t, i)))
            .or_else(|| self.choose(here, limit, |t, l| any(t, l).map(|(a, i)| (a, t, i))))?;
        Some(Pick {
            thread: chosen.1,
            session: true,
            at: chosen.2,
        })
    }

    /// Of the candidates `of` finds per thread (arrival, thread, place): this thread's
    /// while it holds less than its fair share or no other thread has one, else the
    /// oldest.
    fn choose(
        &self,
        here: usize,
        limit: usize,
        of: impl Fn(usize, &Local) -> Option<(u64, usize, usize)>,
    ) -> Option<(u64, usize, usize)> {
        let mine = self.threads.get(here).and_then(|l| of(here, l));
        if let Some(m) = mine {
            let others = self
                .threads
                .iter()
                .enumerate()
                .any(|(t, l)| t != here && of(t, l).is_some());
            if !others || self.threads[here].in_use < self.fair_share(limit) {
                return Some(m);
            }
        }
        self.threads
            .iter()
            .enumerate()
            .filter_map(|(t, l)| of(t, l))
            .min()
    }

    /// Forgets this thread's waiters that gave up.
    pub fn remove_closed(&mut self, thread: usize, session: bool) {
        let local = self.local(thread);
        if session {
            let mut gone = Vec::new();
            local.sessions.retain(|w| {
                let open = !w.tx.is_closed();
                if !open {
                    gone.push(w.of.who);
                }
                open
            });
            for who in gone {
                self.session_unqueued(who);
            }
        } else {
            local.shared.retain(|(_, tx)| !tx.is_closed());
        }
    }
}

/// A session's share of the session class: `SESSION_SLOTS`, one while it has a page
/// load's worth of requests beyond them (`overflow`), none while it has more.
fn session_share(overflow: usize) -> usize {
    match overflow {
        0 => SESSION_SLOTS,
        n if n <= PAGE_LOAD_OVERFLOW => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_net::ClientNet;

    fn of(net: &str, who: u64) -> SessionOf {
        SessionOf {
            net: ClientNet::of(net.parse().unwrap(), 24, 56),
            who,
        }
    }

    fn queue(p: &mut People, thread: usize, arrival: u64, s: SessionOf) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        p.queue_session(thread, SessionWaiter { arrival, tx, of: s });
        rx
    }

    #[test]
    fn a_session_over_its_share_waits_behind_the_others() {
        let mut p = People::default();
        let script = of("127.2.0.1", 7);
        p.session_admitted(script);
        let _a = queue(&mut p, 0, 1, script);
        let _b = queue(&mut p, 0, 2, script);
        let _editor = queue(&mut p, 0, 3, of("127.3.0.1", 9));
        // cap 1: the script holds one; the editor, though last, goes first.
        let pick = p.pick(0, 0, 4, 1).unwrap();
        assert_eq!((pick.session, pick.at), (true, 2));
        let (_, got) = p.take(pick).unwrap();
        assert_eq!(got, Some(of("127.3.0.1", 9)));
        // Nobody else waits: the script's own, oldest first (work-conserving).
        assert_eq!(p.pick(0, 0, 4, 1).map(|p| p.at), Some(0));
    }

    #[test]
    fn the_same_session_from_another_network_is_still_one_session() {
        let mut p = People::default();
        p.session_admitted(of("127.2.0.1", 7));
        p.session_admitted(of("127.4.0.1", 7));
        let _stolen = queue(&mut p, 0, 1, of("127.5.0.1", 7));
        let _editor = queue(&mut p, 0, 2, of("127.3.0.1", 9));
        assert_eq!(p.pick(0, 0, 4, 1).map(|p| p.at), Some(1));
        assert!(!p.session_under_share(of("127.6.0.1", 7)));
        p.session_released(of("127.2.0.1", 7));
        p.session_released(of("127.4.0.1", 7));
        assert_eq!(p.pick(0, 0, 4, 1).map(|p| p.at), Some(0));
        assert!(
            p.nets.is_empty() && p.whos.is_empty(),
            "nothing kept for the idle"
        );
    }

    #[test]
    fn a_session_that_overflows_more_than_a_page_load_keeps_no_slot() {
        let mut p = People::default();
        let replayed = of("127.2.0.1", 7);
        assert!(p.session_under_share(replayed));
        p.session_admitted(replayed);
        // A page load: a few beyond its share; it keeps one slot, not two.
        for _ in 0..PAGE_LOAD_OVERFLOW {
            p.overflow_started(replayed.who);
        }
        assert!(!p.session_under_share(replayed));
        p.session_released(replayed);
        assert!(p.session_under_share(replayed));
        // More at once than a browser sends: none as a person's.
        p.overflow_started(replayed.who);
        assert!(!p.session_under_share(replayed));
        // Its overflow ends: remembered a while (a replay's requests refused at once
        // run for no time), then its share is back.
        for _ in 0..=PAGE_LOAD_OVERFLOW {
            p.overflow_ended(replayed.who);
        }
        assert!(!p.session_under_share(replayed));
        p.overflow.forget_recent();
        assert!(p.session_under_share(replayed));
        p.session_admitted(replayed);
        assert!(p.session_under_share(replayed), "two again");
    }

    #[test]
    fn a_page_load_into_a_full_backend_waits_as_a_persons_a_stream_does_not() {
        let mut p = People::default();
        let editor = of("127.3.0.1", 9);
        // Six at once, none admitted yet: all a person's.
        let _page: Vec<_> = (0..6)
            .map(|i| {
                assert!(p.session_arrival_under_share(editor), "request {i}");
                queue(&mut p, 0, i, editor)
            })
            .collect();
        // The seventh is beyond a page load: to the lane, and from then on the
        // session's share counts what it sent beyond.
        assert!(!p.session_arrival_under_share(editor));
        p.overflow_started(editor.who);
        p.overflow_ended(editor.who);
        let _served: Vec<_> = (0..6)
            .map(|_| {
                p.take(Pick {
                    thread: 0,
                    session: true,
                    at: 0,
                })
            })
            .collect();
        assert!(
            p.session_arrival_under_share(editor),
            "one, within its share"
        );
        p.session_admitted(editor);
        assert!(!p.session_arrival_under_share(editor));
    }

    #[test]
    fn revalidations_come_before_sessions_beyond_the_reserve() {
        let mut p = People::default();
        let _s = queue(&mut p, 0, 1, of("127.3.0.1", 9));
        let (tx, _rx) = oneshot::channel();
        p.local(0).shared.push_back((2, tx));
        // Sessions below their reserve: the session.
        assert_eq!(p.pick(0, 1, 4, 1).map(|p| p.session), Some(true));
        p.session_admitted(of("127.4.0.1", 1));
        // At their reserve: the revalidation.
        assert_eq!(p.pick(0, 1, 4, 1).map(|p| p.session), Some(false));
    }
}

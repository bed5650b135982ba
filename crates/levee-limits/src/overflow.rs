//! A session's requests beyond its share of the session class (people.rs): how many
//! run now, and how many started lately. A script or a session replayed from many
//! connections sends them on and on, yet a lane that refuses them at once leaves few
//! running at any moment; a browser's page load sends a few, once. So a session's
//! overflow is the more of the two: running now, or started within the last second or
//! two.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a request beyond its share is remembered: at least this, at most twice.
pub(super) const RECENT: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(super) struct Overflows {
    /// Per session, its requests beyond its share not ended yet.
    running: HashMap<u64, usize>,
    /// Per session, those started in the window now and in the one before (windows of
    /// `RECENT`, from `window`): emptied as they pass, so a flood of made-up sessions
    /// leaves nothing behind.
    started: HashMap<u64, usize>,
    started_before: HashMap<u64, usize>,
    window: Option<Instant>,
}

impl Overflows {
    pub fn started(&mut self, who: u64, now: Instant) {
        self.turn(now);
        *self.running.entry(who).or_default() += 1;
        *self.started.entry(who).or_default() += 1;
    }

    pub fn ended(&mut self, who: u64) {
        if let Some(n) = self.running.get_mut(&who) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(&who);
            }
        }
    }

    /// `who`'s requests beyond its share, running now or started lately.
    pub fn seen(&self, who: u64, now: Instant) -> usize {
        let get = |m: &HashMap<u64, usize>| m.get(&who).copied().unwrap_or(0);
        get(&self.running).max(self.recent(now, get))
    }

    /// The sessions seen beyond their share the most (`most` of them), for a fleet's
    /// report.
    pub fn busiest(&self, most: usize, now: Instant) -> Vec<(u64, usize)> {
        let mut v: Vec<(u64, usize)> = self
            .running
            .keys()
            .chain(self.started.keys())
            .chain(self.started_before.keys())
            .map(|&who| (who, self.seen(who, now)))
            .filter(|&(_, n)| n > 0)
            .collect();
        v.sort_unstable();
        v.dedup();
        v.sort_unstable_by_key(|&(_, n)| std::cmp::Reverse(n));
        v.truncate(most);
        v
    }

    /// Forgets what started lately (tests: as if `RECENT` had passed twice).
    #[cfg(test)]
    pub fn forget_recent(&mut self) {
        self.window = None;
    }

    fn recent(&self, now: Instant, get: impl Fn(&HashMap<u64, usize>) -> usize) -> usize {
        match self.window.map(|w| now.saturating_duration_since(w)) {
            Some(age) if age < RECENT => get(&self.started) + get(&self.started_before),
            Some(age) if age < 2 * RECENT => get(&self.started),
            _ => 0,
        }
    }

    /// Moves on to the window `now` falls in.
    fn turn(&mut self, now: Instant) {
        match self.window.map(|w| now.saturating_duration_since(w)) {
            Some(age) if age < RECENT => return,
            Some(age) if age < 2 * RECENT => {
                self.started_before = std::mem::take(&mut self.started);
            }
            _ => {
                self.started.clear();
                self.started_before.clear();
            }
        }
        self.window = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_what_runs_or_started_lately_and_passes() {
        let mut o = Overflows::default();
        let t = Instant::now();
        // A script's requests refused at once: none running, many seen.
        for _ in 0..10 {
            o.started(7, t);
            o.ended(7);
        }
        assert_eq!(o.seen(7, t), 10);
        assert_eq!(o.seen(7, t + RECENT), 10, "the window before still counts");
        // Two more in the next window: the window before is dropped after it.
        o.started(7, t + RECENT);
        o.started(7, t + RECENT);
        assert_eq!(o.seen(7, t + RECENT), 12);
        assert_eq!(o.seen(7, t + 2 * RECENT), 2, "running: two");
        o.ended(7);
        o.ended(7);
        assert_eq!(o.seen(7, t + 3 * RECENT), 0);
        assert_eq!(o.busiest(4, t + RECENT), vec![(7, 12)]);
        // Long after, a new start forgets everything older.
        o.started(9, t + 10 * RECENT);
        assert_eq!(o.busiest(4, t + 10 * RECENT), vec![(9, 1)]);
        assert!(o.started_before.is_empty() && !o.started.contains_key(&7));
    }
}

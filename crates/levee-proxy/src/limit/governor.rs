//! How much of the backend the anonymous lane may hold while people have work, learnt
//! from people's own latency. `backend_anonymous_share` of the limit is the most; but a
//! limit levee adapted for an HTTP backend may be far above what the application behind
//! it runs at once (18 slots before nginx and 4 php-fpm workers), and on a small machine
//! even a share of the workers takes the CPU people's requests need. So the lane's cap
//! is cut by a third when people's requests take half as long again as they did at their
//! best lately, and climbs back one slot a window while they do not: the crawlers get
//! what does not slow people down (AIMD, as TCP shares a link).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A window ends after this long and at least `MIN_SAMPLES` people's requests.
const WINDOW: Duration = Duration::from_millis(500);
const MIN_SAMPLES: u32 = 4;
/// Windows whose best average is people's reference latency (~10 s or more).
const HISTORY: usize = 20;
/// People's latency may grow this much over their reference before the lane is cut.
const TOLERANCE: f64 = 1.5;
const CUT: f64 = 0.67;

pub(super) struct Governor {
    cap: f64,
    /// Recent windows' average people's latency, seconds.
    history: VecDeque<f64>,
    window_start: Instant,
    sum: f64,
    count: u32,
    /// The lane held its cap at some point in this window (the cap mattered).
    pressed: bool,
    /// The lane had work in flight in this window.
    lane_active: bool,
}

impl Governor {
    /// Starts at the whole share: a site with one editor at work and no storm must not
    /// serve its anonymous misses one at a time until people's latency proves it may.
    pub fn new() -> Governor {
        Governor {
            cap: f64::MAX,
            history: VecDeque::with_capacity(HISTORY),
            window_start: Instant::now(),
            sum: 0.0,
            count: 0,
            pressed: false,
            lane_active: false,
        }
    }

    /// The lane's cap now, within `most` (its share of the limit).
    pub fn cap(&self, most: usize) -> usize {
        (self.cap.floor() as usize).clamp(1, most.max(1))
    }

    /// The lane was held at its cap (it would have taken more).
    pub fn pressed(&mut self) {
        self.pressed = true;
    }

    /// The lane had a request in flight.
    pub fn lane_active(&mut self) {
        self.lane_active = true;
    }

    /// One people's request held its slot for `held`; `most` is the lane's share of
    /// the limit now.
    pub fn sample(&mut self, held: Duration, most: usize, now: Instant) {
        self.sum += held.as_secs_f64();
        self.count += 1;
        if self.count < MIN_SAMPLES || now.duration_since(self.window_start) < WINDOW {
            return;
        }
        let avg = self.sum / f64::from(self.count);
        let best = self.history.iter().copied().fold(f64::INFINITY, f64::min);
        if self.lane_active && avg > best * TOLERANCE {
            self.cap = (self.cap * CUT).max(1.0);
        } else if self.pressed {
            self.cap += 1.0;
        }
        self.cap = self.cap.min(most.max(1) as f64);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(avg);
        self.window_start = now;
        self.sum = 0.0;
        self.count = 0;
        self.pressed = false;
        self.lane_active = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A window of people's requests of `latency`, the lane active and pressed.
    fn window(g: &mut Governor, latency: Duration, now: &mut Instant) {
        g.lane_active();
        g.pressed();
        for _ in 0..MIN_SAMPLES {
            *now += WINDOW / MIN_SAMPLES;
            g.sample(latency, 8, *now);
        }
    }

    #[test]
    fn the_cap_is_the_share_while_people_are_as_fast_as_ever() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        assert_eq!(g.cap(8), 8);
        for _ in 0..20 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 8, "the share, no further");
        assert_eq!(g.cap(4), 4);
    }

    #[test]
    fn the_cap_is_cut_when_people_slow_down_and_climbs_back() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        window(&mut g, ms(200), &mut now);
        assert_eq!(g.cap(8), 5, "8 cut by a third");
        window(&mut g, ms(200), &mut now);
        window(&mut g, ms(200), &mut now);
        window(&mut g, ms(200), &mut now);
        assert_eq!(g.cap(8), 1, "down to one slot, never none");
        window(&mut g, ms(50), &mut now);
        assert_eq!(g.cap(8), 2);
    }

    #[test]
    fn people_slow_without_crawlers_do_not_cut_it() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..4 {
            window(&mut g, ms(50), &mut now);
        }
        let before = g.cap(8);
        // Slow, but the lane had nothing in flight: not the crawlers' doing.
        for _ in 0..MIN_SAMPLES {
            now += WINDOW;
            g.sample(ms(500), 8, now);
        }
        assert_eq!(g.cap(8), before);
    }
}

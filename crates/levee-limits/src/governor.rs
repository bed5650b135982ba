//! How much of the backend the anonymous lane may hold while people have work, learnt
//! from people's own latency. `backend_anonymous_share` of the limit is the most; but a
//! limit levee adapted for an HTTP backend may be far above what the application behind
//! it runs at once (18 slots before nginx and 4 php-fpm workers), and on a small machine
//! even a share of the workers takes the CPU people's requests need. So the lane's cap
//! is cut by a third when people's requests take half as long again as they did at their
//! best lately, and climbs back one slot a half second while they do not: the crawlers get
//! what does not slow people down (AIMD, as TCP shares a link).
//!
//! Robust to answers that are merely slow: a window is judged by its median, not its
//! mean, and the early cut needs `EARLY_RUN` slow people's requests in a row. One
//! deliberately slow page (a report, a search, a test's delayed answer) is not a
//! saturated backend; every people's request slowing down is. Nor is the median all:
//! people's requests over twice their reference, beside the lane's work, more often
//! than the site gives them with the lane idle, cut it too (`TAIL`): a crawler's page
//! beside an editor's on two cores left the editors' median as it was and doubled
//! their slowest 2%. A cut only holds the lane back while people have work: its
//! queue is then what it serves in time at the pace the cut allows, and a waiter whose
//! wait runs out is refused rather than let in beside people (people feel the room
//! behind nginx that levee's slots cannot show). With nobody at work, refusals and
//! stale pages need the slots all in use (`State::saturated`), measured, not guessed
//! from latency. Only sessions' times are samples: a revalidation takes its URL's
//! time, and one slow URL is no slow backend.
//!
//! A cap the lane does not reach is unproven and falls to what it held (`VALID_LEAST`):
//! a storm starts from the lane's fair-weather use and climbs as people allow.
//!
//! Below one slot the cap is a duty cycle: one crawler's page running beside people's
//! still takes a core of a two-core machine (php-fpm and the database), so at a cap of
//! 0.25 the lane's one slot rests three times as long as its last request held it
//! before the next is admitted. It never goes below `FLOOR`: anonymous misses (a
//! reader's first visit of a page) go through the lane too.

use std::collections::VecDeque;

use super::gradient::median;
use super::lane::{Lane, LaneConfig};
use std::time::{Duration, Instant};

/// A window ends after this long and at least `MIN_SAMPLES` people's requests.
pub(super) const WINDOW: Duration = Duration::from_millis(500);
const MIN_SAMPLES: u32 = 4;
/// Windows whose best average is people's reference latency (~30 s or more): long
/// enough that a storm does not become the reference before it ends.
const HISTORY: usize = 60;
/// People's latency may grow this much over their reference before the lane is cut.
const TOLERANCE: f64 = 1.5;
const CUT: f64 = 0.67;
/// `EARLY_RUN` people's requests in a row this many times their reference cut the lane
/// at once, by `EARLY_CUT`, at most once per `EARLY_EVERY`: a storm's first wave fills
/// the lane in a millisecond, and waiting for whole windows of evidence left people's
/// requests queued behind it inside the application for a second and a half.
const EARLY: f64 = 2.0;
const EARLY_RUN: u32 = 2;
const EARLY_CUT: f64 = 0.5;
const EARLY_EVERY: Duration = Duration::from_millis(100);
/// The least the lane's cap falls to: a tenth of one slot's time.
pub(crate) const FLOOR: f64 = 0.1;
/// Below one slot the cap climbs back by this much a `WINDOW` (a slot at a time above).
const STEP_BELOW_ONE: f64 = 0.1;
/// The most steps one window climbs, however long it took to gather: people back
/// after a pause have not proved the backend has room for more than that.
const MAX_STEPS: f64 = 4.0;
/// People's request times kept per window for its median; more are not kept (the
/// median of the first ones stands for the window).
const WINDOW_SAMPLES: usize = 256;
/// The tail: of people's latest `TAIL` requests made while the lane had work, how
/// many took over `EARLY` times their reference. A median that holds while one page in
/// twenty hangs behind a crawler's is not people first: on two cores a storm left the
/// editors' median as it was and doubled their slowest 2% (issue 51's storms). More
/// than the site's own share of such pages (learnt while the lane is idle) plus
/// `TAIL_MARGIN` cuts the lane; it climbs only after `TAIL_FRESH` requests have shown
/// none beyond that share. One slow report among quick pages is the site, not the lane.
const TAIL: usize = 32;
const TAIL_FRESH: usize = 16;
const TAIL_MARGIN: f64 = 0.03;
/// How fast the site's own share of slow people's requests is learnt (per request seen
/// while the lane is idle).
const OWN_SLOW_RATE: f64 = 0.02;
/// A cap the lane did not reach in a window is unproven: it falls to what the lane
/// held plus one, at least `VALID_LEAST` (as TCP's congestion window decays while a
/// connection sends less than it allows, RFC 2861). Otherwise a lane that carried one
/// reader's miss at a time in fair weather still allowed its whole share when a storm
/// arrived, and 8 crawlers' pages took the 4 workers before people's latency could
/// say anything: the editors' slowest requests of a storm were in its first seconds.
const VALID_LEAST: usize = 2;

pub(super) struct Governor {
    cap: f64,
    /// In a fleet while people have work on some node: this node's part of the fleet's
    /// cap (sharing.rs), below `cap` when the other nodes' lanes take the rest: one
    /// lane's worth for the whole fleet, not one per node.
    fleet: Option<Part>,
    /// Recent windows' average people's latency, seconds.
    history: VecDeque<f64>,
    window_start: Instant,
    /// This window's people's request times, seconds (at most `WINDOW_SAMPLES`).
    samples: Vec<f64>,
    count: u32,
    /// People's requests in a row slower than `EARLY` times the reference.
    slow_run: u32,
    /// People's latest requests while the lane had work: slow or not (at most `TAIL`,
    /// none from before the last cut).
    latest: VecDeque<bool>,
    /// The share of people's requests slower than `EARLY` times the reference while
    /// the lane is idle: the site's own slow pages.
    own_slow: f64,
    /// The lane held its cap at some point in this window (the cap mattered).
    pressed: bool,
    /// The lane had work in flight in this window.
    lane_active: bool,
    /// The most slots the lane held at once in this window.
    peak: usize,
    /// While the cap is below one slot: the lane admits nothing before this.
    rest_until: Option<Instant>,
    /// The lane's last page below one slot: when it ended and how long it held the
    /// slot, to reckon its rest again when the fleet moves this node's part.
    last_page: Option<(Instant, Duration)>,
    /// The last early cut.
    cut_at: Option<Instant>,
}

/// This node's part of the fleet's lane, and its own cap when the part was set.
#[derive(Clone, Copy)]
struct Part {
    part: f64,
    cap_then: f64,
}

impl Governor {
    /// Starts at the whole share: a site with one editor at work and no storm must not
    /// serve its anonymous misses one at a time until people's latency proves it may.
    /// The first window the lane does not use it all brings it down to what the lane
    /// held (`VALID_LEAST`).
    pub fn new() -> Governor {
        Governor {
            cap: f64::MAX,
            fleet: None,
            history: VecDeque::with_capacity(HISTORY),
            window_start: Instant::now(),
            samples: Vec::with_capacity(16),
            count: 0,
            slow_run: 0,
            latest: VecDeque::with_capacity(TAIL),
            own_slow: 0.0,
            pressed: false,
            lane_active: false,
            peak: 0,
            rest_until: None,
            last_page: None,
            cut_at: None,
        }
    }

    /// The lane's cap now, within `most` (its share of the limit).
    pub fn cap(&self, most: usize) -> usize {
        (self.effective().floor() as usize).clamp(1, most.max(1))
    }

    /// The share of one slot's time the lane may use while people have work: below 1
    /// only when the cap is.
    pub fn duty(&self) -> f64 {
        self.effective().clamp(FLOOR, 1.0)
    }

    /// What this node's own judgment allows, within `most`: what it tells the fleet.
    /// None before it has judged a window of people's requests (a node whose people
    /// are readers' revalidations has no judgment to add to the fleet's).
    pub fn own(&self, most: usize) -> Option<f64> {
        (!self.history.is_empty()).then(|| self.within(most))
    }

    /// This node's part of the fleet's cap (None: alone, or no node's people busy).
    pub fn set_fleet(&mut self, part: Option<f64>) {
        self.fleet = part.map(|p| Part {
            part: p.max(FLOOR),
            cap_then: self.cap,
        });
        if self.effective() >= 1.0 {
            self.rest_until = None;
        } else if let (Some(_), Some((ended, held))) = (self.rest_until, self.last_page) {
            // The rest at the duty now: a node given the fleet's fraction was still
            // resting a floor's rest (nine times its page), one that lost it rested
            // too little.
            self.rest_until = Some(ended + self.rest_for(held));
        }
    }

    /// How long the lane's one slot rests after a page that held it for `held`.
    fn rest_for(&self, held: Duration) -> Duration {
        let rest = held.as_secs_f64() * (1.0 / self.duty() - 1.0);
        Duration::from_secs_f64(rest.clamp(0.0, 60.0))
    }

    /// The cap within the lane's share of the limit (`most`, at least one slot).
    fn within(&self, most: usize) -> f64 {
        self.cap.min(most.max(1) as f64)
    }

    /// In a fleet, this node's part, cut as this node's own cap was cut since the
    /// renewal that set it (the cut reaches the fleet's average at the next one), not
    /// the least of the part and its own cap: the part is of the nodes' average, and
    /// the least of it and one node's judgment ran a two-node fleet's lane 10-30% below
    /// that average whenever the nodes disagreed, and the crawlers below one node's.
    fn effective(&self) -> f64 {
        match self.fleet {
            None => self.cap,
            // A cap never judged yet (`new`'s) is no measure to cut by.
            Some(f) if f.cap_then == f64::MAX => f.part,
            Some(f) => (f.part * (self.cap / f.cap_then).min(1.0)).max(FLOOR),
        }
    }

    /// Whether the lane's slot is resting at `now` (a cap below one slot).
    pub fn resting(&self, now: Instant) -> bool {
        self.rest_until.is_some_and(|t| now < t)
    }

    /// A lane request held its slot for `held` while people had work: below one slot,
    /// the slot rests so that it is busy `duty` of the time.
    pub fn lane_released(&mut self, held: Duration, now: Instant) {
        if self.duty() < 1.0 && !held.is_zero() {
            self.rest_until = Some(now + self.rest_for(held));
            self.last_page = Some((now, held));
        }
    }

    /// The lane was held at its cap (it would have taken more).
    pub fn pressed(&mut self) {
        self.pressed = true;
    }

    /// The lane had a request in flight.
    pub fn lane_active(&mut self) {
        self.lane_active = true;
    }

    /// The lane admitted a request and holds `in_use` slots now.
    pub fn lane_admitted(&mut self, in_use: usize) {
        self.lane_active = true;
        self.peak = self.peak.max(in_use);
    }

    /// One people's request held its slot for `held`; `most` is the lane's share of
    /// the limit now, `lane_in_use` the slots the lane holds now.
    pub fn sample(&mut self, held: Duration, most: usize, lane_in_use: usize, now: Instant) {
        let held = held.as_secs_f64();
        if self.samples.len() < WINDOW_SAMPLES {
            self.samples.push(held);
        }
        self.count += 1;
        let best = self.history.iter().copied().fold(f64::INFINITY, f64::min);
        let slow = held > best * EARLY;
        self.slow_run = match slow {
            true => self.slow_run + 1,
            false => 0,
        };
        if best.is_finite() {
            match self.lane_active {
                true => {
                    if self.latest.len() == TAIL {
                        self.latest.pop_front();
                    }
                    self.latest.push_back(slow);
                }
                false => {
                    self.own_slow += (f64::from(u8::from(slow)) - self.own_slow) * OWN_SLOW_RATE
                }
            }
        }
        let early_due = self
            .cut_at
            .is_none_or(|t| now.duration_since(t) >= EARLY_EVERY);
        if self.lane_active && self.slow_run >= EARLY_RUN && early_due {
            let was = self.within(most);
            self.cap = (was * EARLY_CUT).max(FLOOR);
            tracing::debug!(
                was,
                cap = self.cap,
                held,
                best,
                "lane cut: people's requests slow in a row"
            );
            self.cut_at = Some(now);
            self.latest.clear();
        }
        if self.count < MIN_SAMPLES || now.duration_since(self.window_start) < WINDOW {
            return;
        }
        let avg = median(&mut self.samples);
        let (tail_slow, tail_quiet) = self.tail();
        if self.lane_active && (avg > best * TOLERANCE || tail_slow) {
            let was = self.within(most);
            self.cap = (was * CUT).max(FLOOR);
            tracing::debug!(
                was,
                cap = self.cap,
                median = avg,
                best,
                tail_slow,
                own_slow = self.own_slow,
                "lane cut"
            );
            self.latest.clear();
        } else if self.pressed && tail_quiet {
            // A step per `WINDOW` of time, not per window judged: a node with one
            // editor takes twice as long to gather a window as a node with two, and
            // must not give the lane back half as fast (a fleet of such nodes ran its
            // lane below one node's).
            let windows = (now.duration_since(self.window_start).as_secs_f64()
                / WINDOW.as_secs_f64())
            .clamp(1.0, MAX_STEPS);
            self.cap += windows * if self.cap < 1.0 { STEP_BELOW_ONE } else { 1.0 };
            tracing::debug!(cap = self.within(most), median = avg, best, "lane climbs");
            if self.cap >= 1.0 {
                self.rest_until = None;
            }
        } else if !self.pressed {
            let held = self.peak.max(lane_in_use);
            let valid = held.saturating_add(1).max(VALID_LEAST) as f64;
            if valid < self.within(most) {
                self.cap = valid;
                // What people's requests said beside a lane that held more is not
                // evidence for the next load: it climbs on fresh requests.
                self.latest.clear();
            }
        }
        self.cap = self.within(most);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(avg);
        self.window_start = now;
        self.samples.clear();
        self.count = 0;
        self.pressed = false;
        self.lane_active = false;
        self.peak = lane_in_use;
    }
}

impl Governor {
    /// Whether people's latest requests beside the lane's work were slow more often
    /// than the site's own share allows (cut), and whether enough of them were judged
    /// and none beyond that share (the cap may climb).
    fn tail(&self) -> (bool, bool) {
        let seen = self.latest.len();
        let slow = self.latest.iter().filter(|s| **s).count();
        let allowed = ((self.own_slow + TAIL_MARGIN) * seen as f64).floor() as usize;
        // Half the margin: a site whose own share is a whole number of them (one
        // slow page in four) climbs at exactly that share.
        let own = ((self.own_slow + TAIL_MARGIN / 2.0) * seen as f64).floor() as usize;
        (slow > allowed.max(1), seen >= TAIL_FRESH && slow <= own)
    }
}

/// The lane's cap as the grant decisions read it, from the limit now.
impl Governor {
    /// What the lane may hold while people have work: its share of the limit, as far as
    /// people's latency allows.
    pub fn lane_cap(&self, cfg: &LaneConfig, limit: usize) -> usize {
        let most = cfg.cap(limit);
        match cfg.governed {
            true => self.cap(most),
            false => most,
        }
    }

    /// May the lane take one more slot now? Within its cap while people are busy, and
    /// not while its one slot rests (a governed cap below one slot).
    pub fn lane_open(
        &self,
        cfg: &LaneConfig,
        lane: &Lane,
        limit: usize,
        people_busy: bool,
        now: Instant,
    ) -> bool {
        lane.may_take(self.lane_cap(cfg, limit), people_busy)
            && !(people_busy && cfg.governed && self.resting(now))
    }

    /// Whether people's latency (or the fleet's part) has the lane's cap below its
    /// share of `limit`.
    pub fn cut(&self, cfg: &LaneConfig, limit: usize) -> bool {
        cfg.governed && self.effective() < cfg.cap(limit) as f64
    }

    /// The slots the lane serves its queue with now, a fraction while its governed
    /// cap is below one: what its waiters' expected wait is reckoned on.
    pub fn lane_slots(&self, cfg: &LaneConfig, limit: usize, people_busy: bool) -> f64 {
        match (people_busy, cfg.governed) {
            (false, _) => limit as f64,
            (true, true) => self.lane_cap(cfg, limit) as f64 * self.duty(),
            (true, false) => self.lane_cap(cfg, limit) as f64,
        }
    }
}

#[cfg(test)]
impl Governor {
    /// The cap as if people's latency had brought it to `cap`.
    pub(super) fn set_cap(&mut self, cap: f64) {
        self.cap = cap.max(FLOOR);
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
        requests(
            g,
            &[latency; MIN_SAMPLES as usize],
            WINDOW / MIN_SAMPLES,
            8,
            true,
            now,
        );
    }

    /// People's requests of `latencies`, one each `every`, within a lane's share of
    /// `most`; the lane active, pressed and holding its share when `busy`, else idle.
    fn requests(
        g: &mut Governor,
        latencies: &[Duration],
        every: Duration,
        most: usize,
        busy: bool,
        now: &mut Instant,
    ) {
        if busy {
            g.lane_active();
            g.pressed();
        }
        for &latency in latencies {
            *now += every;
            g.sample(latency, most, if busy { most } else { 0 }, *now);
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
        window(&mut g, ms(90), &mut now);
        assert_eq!(g.cap(8), 5, "8 cut by a third (1.8x: no early cut)");
        window(&mut g, ms(90), &mut now);
        window(&mut g, ms(90), &mut now);
        window(&mut g, ms(90), &mut now);
        assert_eq!(g.cap(8), 1, "down to one slot");
        assert_eq!(g.duty(), 1.0);
        for _ in 0..TAIL_FRESH / MIN_SAMPLES as usize - 1 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(
            g.cap(8),
            1,
            "no climb before TAIL_FRESH requests are judged"
        );
        window(&mut g, ms(50), &mut now);
        assert_eq!(g.cap(8), 2);
    }

    #[test]
    fn a_slow_tail_beside_the_lane_cuts_it_though_the_median_holds() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 8);
        // One request in eight takes four times as long: the median is as ever.
        for _ in 0..2 {
            let one_slow = [ms(200), ms(50), ms(50), ms(50)];
            requests(&mut g, &one_slow, WINDOW / MIN_SAMPLES, 8, true, &mut now);
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 5, "cut by a third");
    }

    #[test]
    fn the_cap_climbs_by_time_not_by_windows() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        for _ in 0..4 {
            window(&mut g, ms(90), &mut now);
        }
        assert_eq!(g.cap(8), 1);
        for _ in 0..TAIL_FRESH / MIN_SAMPLES as usize {
            window(&mut g, ms(50), &mut now);
        }
        let before = g.cap;
        // Fewer people: a window of four requests takes a whole second, two WINDOWs.
        let quick = [ms(50); MIN_SAMPLES as usize];
        requests(
            &mut g,
            &quick,
            2 * WINDOW / MIN_SAMPLES,
            100,
            true,
            &mut now,
        );
        assert!(
            (g.cap - before - 2.0).abs() < 1e-9,
            "two slots for two WINDOWs"
        );
        // A long pause is not proof of more room than MAX_STEPS.
        requests(&mut g, &quick, 10 * WINDOW, 100, true, &mut now);
        assert!((g.cap - before - 2.0 - MAX_STEPS).abs() < 1e-9);
    }

    #[test]
    fn below_one_slot_the_slot_rests_but_never_stops() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        for _ in 0..12 {
            window(&mut g, ms(500), &mut now);
        }
        assert_eq!(g.cap(8), 1);
        assert!(
            (g.duty() - FLOOR).abs() < 1e-9,
            "a tenth of a slot, never none"
        );
        // A crawler's page held the slot 100 ms: it rests 900 ms.
        g.lane_released(ms(100), now);
        assert!(g.resting(now + ms(899)));
        assert!(!g.resting(now + ms(901)));
        // People fast again: back to whole slots, no rest.
        for _ in 0..20 {
            window(&mut g, ms(50), &mut now);
        }
        assert!(g.duty() >= 1.0);
        g.lane_released(ms(100), now);
        assert!(!g.resting(now));
    }

    #[test]
    fn a_run_of_very_slow_requests_cuts_at_once() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        g.lane_active();
        for _ in 0..EARLY_RUN - 1 {
            now += ms(10);
            g.sample(ms(150), 8, 0, now);
        }
        assert_eq!(g.cap(8), 8, "slow answers, not yet a slow backend");
        now += ms(10);
        g.sample(ms(150), 8, 0, now);
        assert_eq!(g.cap(8), 4, "halved by a run three times as slow");
        now += ms(10);
        g.sample(ms(150), 8, 0, now);
        assert_eq!(g.cap(8), 4, "not twice within EARLY_EVERY");
        now += EARLY_EVERY;
        g.sample(ms(150), 8, 0, now);
        assert_eq!(g.cap(8), 2);
        now += ms(10);
        g.sample(ms(90), 8, 0, now);
        assert_eq!(g.cap(8), 2, "within twice the reference: no early cut");
    }

    #[test]
    fn a_few_slow_answers_among_quick_ones_cut_nothing() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        // The site's own: one answer of 3 s (a slow page) among three quick ones, the
        // lane idle.
        let one_slow = [ms(3000), ms(50), ms(50), ms(50)];
        for _ in 0..60 {
            requests(&mut g, &one_slow, WINDOW / MIN_SAMPLES, 8, false, &mut now);
        }
        // The lane idle that long held its cap to what it used (VALID_LEAST).
        assert_eq!(g.cap(8), VALID_LEAST);
        // The same beside the lane's work: never cut (a cut leaves 1), and it climbs.
        for _ in 0..10 {
            requests(&mut g, &one_slow, WINDOW / MIN_SAMPLES, 8, true, &mut now);
            assert!(g.cap(8) >= VALID_LEAST, "cut to {}", g.cap(8));
        }
        assert_eq!(g.cap(8), 8);
    }

    #[test]
    fn people_slow_without_crawlers_do_not_cut_it() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..4 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 8);
        // Slow, but the lane had nothing in flight: not the crawlers' doing. A cut
        // would leave 5; the lane's unused cap falls to what it held, VALID_LEAST
        // (after a window that began with the 8 it held).
        for _ in 0..2 * MIN_SAMPLES {
            now += WINDOW;
            g.sample(ms(500), 8, 0, now);
        }
        assert_eq!(g.cap(8), VALID_LEAST);
    }

    #[test]
    fn a_cap_the_lane_did_not_use_falls_to_what_it_held_and_climbs_when_pressed() {
        let mut g = Governor::new();
        let mut now = Instant::now();
        for _ in 0..6 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 8);
        // The storm's 8 end with the window: the next began with them in flight.
        requests(&mut g, &[ms(50); 4], WINDOW / 4, 8, false, &mut now);
        assert_eq!(g.cap(8), 8);
        // Fair weather: readers' misses, three at once at most, never held back.
        g.lane_admitted(3);
        requests(&mut g, &[ms(50); 4], WINDOW / 4, 8, false, &mut now);
        assert_eq!(g.cap(8), 4, "what the lane held, and one more");
        // It holds 4 through a window and admits none: still in use, nothing falls.
        requests(&mut g, &[ms(50); 3], WINDOW / 4, 8, false, &mut now);
        g.sample(ms(50), 8, 4, now + WINDOW / 4);
        now += WINDOW / 4;
        assert_eq!(g.cap(8), 4);
        // A storm: the lane pressed at 4 while people stay quick. It climbs once
        // TAIL_FRESH people's requests beside it have shown nothing slow.
        let mut climbed_after = 0;
        while g.cap(8) == 4 {
            window(&mut g, ms(50), &mut now);
            climbed_after += MIN_SAMPLES as usize;
        }
        assert_eq!(climbed_after, TAIL_FRESH);
        for _ in 0..4 {
            window(&mut g, ms(50), &mut now);
        }
        assert_eq!(g.cap(8), 8);
    }

    #[test]
    fn a_fleet_part_is_not_cut_to_the_nodes_own_judgment_but_follows_its_cuts() {
        let mut g = Governor::new();
        g.set_cap(0.5);
        // The fleet's average gave this node more than its own judgment: it runs that.
        g.set_fleet(Some(1.5));
        assert!((g.effective() - 1.5).abs() < 1e-9, "{}", g.effective());
        assert_eq!(g.cap(8), 1);
        assert_eq!(g.duty(), 1.0);
        // Its own cut halves its part at once, until the next renewal averages it in.
        g.set_cap(0.25);
        assert!((g.effective() - 0.75).abs() < 1e-9, "{}", g.effective());
        g.set_fleet(Some(1.2));
        assert!((g.effective() - 1.2).abs() < 1e-9, "{}", g.effective());
        // Climbing alone does not raise the part; never below the floor.
        g.set_cap(3.0);
        assert!((g.effective() - 1.2).abs() < 1e-9, "{}", g.effective());
        g.set_fleet(Some(0.01));
        assert_eq!(g.duty(), FLOOR);
    }
}

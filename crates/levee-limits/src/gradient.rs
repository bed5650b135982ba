//! The adaptive limit (see lib.rs): for a backend whose size levee cannot read (an HTTP
//! server, php-fpm behind nginx), the concurrency where its latency starts to grow.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// In the manner of Netflix's concurrency-limits Gradient2, against a baseline that
/// cannot drift: the limit grows while recent requests take about as long as the
/// backend's latency without queueing, and shrinks in proportion when they take longer
/// (the backend queues inside). Gradient2's baseline is a long average of latency,
/// which a backend kept past its knee (a crawler storm) drags up with it, so that the
/// limit settles at several times the backend's size (16 for 4 php-fpm children behind
/// nginx); here it is the least window median of the last `BASE_FOR`, and the limit
/// is halved for a moment every `PROBE_EVERY` (as BBR's ProbeRTT does) so that the
/// baseline is measured without levee's own queue inside the backend. A window is
/// judged by its median, not its mean: a few answers that are slow by nature (a
/// report, a search) are not the backend queueing.
pub(super) struct Gradient {
    /// The estimate; the limit given out is half of it while probing.
    pub(super) limit: f64,
    min: usize,
    max: usize,
    /// Recent windows' medians, increasing (a monotonic queue: the front is the least
    /// of the last `BASE_FOR`).
    base: VecDeque<(Instant, f64)>,
    window_start: Instant,
    /// This window's request times, seconds (at most `WINDOW_SAMPLES`).
    window: Vec<f64>,
    window_count: u32,
    window_max_in_flight: usize,
    /// When the next probe is due.
    probe_at: Instant,
    /// While probing: when it started.
    probing: Option<Instant>,
}

/// A window ends after this long and at least `MIN_SAMPLES` requests.
pub(super) const WINDOW: Duration = Duration::from_millis(100);
pub(super) const MIN_SAMPLES: u32 = 8;
/// Latency may grow this much over the baseline before the limit shrinks, and by
/// `SLACK` more: a millisecond's answer taking two under load (a busy small machine) is
/// no queue inside the backend.
const TOLERANCE: f64 = 1.3;
const SLACK: f64 = 0.005;
/// Requests allowed to queue inside the backend beyond the knee.
const QUEUE: f64 = 1.0;
const SMOOTHING: f64 = 0.2;
/// The least a limit nobody uses comes down to: a backend's usual size, so that a burst
/// after quiet weather is not held to one or two requests.
const VALIDATED_FLOOR: usize = 8;
/// Request times kept per window for its median.
const WINDOW_SAMPLES: usize = 256;
/// How long a window's median can stand as the baseline: long enough to hold two
/// probes, short enough that a backend that became slower for good (a bigger database)
/// is soon taken as it is.
const BASE_FOR: Duration = Duration::from_secs(12);
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// A probe lasts this long at least, and two baselines (the backend's own time, and
/// more, for the requests in flight to drain).
const PROBE_FOR: Duration = Duration::from_millis(300);

/// The middle of `v` (reordered), or 0 when empty.
pub(super) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    *m
}

impl Gradient {
    pub(super) fn new(initial: usize, min: usize, max: usize) -> Gradient {
        let now = Instant::now();
        Gradient {
            limit: initial as f64,
            min,
            max,
            base: VecDeque::new(),
            window_start: now,
            window: Vec::with_capacity(16),
            window_count: 0,
            window_max_in_flight: 0,
            probe_at: now + PROBE_EVERY,
            probing: None,
        }
    }

    /// The estimate now: the backend's capacity, what saturation is judged against.
    pub(super) fn current(&self) -> usize {
        self.limit.round() as usize
    }

    /// While probing, the fewer requests to let in (half the estimate): a cap on
    /// admissions only, never a reason to refuse or serve stale.
    pub(super) fn probe(&self) -> Option<usize> {
        self.probing.map(|_| (self.current() / 2).max(self.min))
    }

    /// Counts one request's time; at the end of a window, the new estimate and probe
    /// cap if either changed.
    pub(super) fn sample(
        &mut self,
        rtt: Duration,
        in_flight: usize,
        now: Instant,
    ) -> Option<(usize, Option<usize>)> {
        if self.window.len() < WINDOW_SAMPLES {
            self.window.push(rtt.as_secs_f64());
        }
        self.window_count += 1;
        self.window_max_in_flight = self.window_max_in_flight.max(in_flight);
        if self.window_count < MIN_SAMPLES || now.duration_since(self.window_start) < WINDOW {
            return None;
        }
        let short = median(&mut self.window);
        let used = self.window_max_in_flight;
        self.window_start = now;
        self.window.clear();
        self.window_count = 0;
        self.window_max_in_flight = 0;
        let old = (self.current(), self.probe());
        self.remember(short, now);
        self.update(short, used, now);
        let new = (self.current(), self.probe());
        (new != old).then_some(new)
    }

    /// Keeps `short` in the baseline's window (dropping what it outdoes or outlives).
    fn remember(&mut self, short: f64, now: Instant) {
        while self.base.back().is_some_and(|(_, v)| *v >= short) {
            self.base.pop_back();
        }
        self.base.push_back((now, short));
        while self
            .base
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > BASE_FOR)
        {
            self.base.pop_front();
        }
    }

    fn update(&mut self, short: f64, used: usize, now: Instant) {
        let base = self.base.front().map_or(short, |(_, v)| *v);
        if let Some(started) = self.probing {
            // Long enough for the queue inside the backend to drain, then measured.
            let long_enough = PROBE_FOR.max(Duration::from_secs_f64(base * 2.0));
            if now.duration_since(started) >= long_enough {
                self.probing = None;
                self.probe_at = now + PROBE_EVERY;
            }
            return;
        }
        if now >= self.probe_at && used as f64 >= self.limit / 2.0 {
            self.probing = Some(now);
            return;
        }
        let allowed = base * TOLERANCE + SLACK;
        // Growing a limit nobody uses proves nothing about the backend; keeping it
        // either (RFC 7661's congestion window validation): a limit left high by quiet
        // weather would let a storm's first second past the knee at once. It comes down
        // a tenth a window toward twice what was used, and grows back within a second
        // or two of load.
        if (used as f64) < self.limit / 2.0 && short <= allowed {
            self.limit = (self.limit * 0.9)
                .max(2.0 * used as f64)
                .max(VALIDATED_FLOOR as f64)
                .clamp(self.min as f64, self.max as f64);
            return;
        }
        let gradient = (allowed / short.max(1e-9)).clamp(0.5, 1.0);
        // Within the tolerance it grows quickly (far below the knee it has far to go);
        // past it, to what the latency says, with `QUEUE` waiting inside.
        let target = match gradient >= 1.0 {
            true => self.limit + self.limit.sqrt(),
            false => self.limit * gradient + QUEUE,
        };
        self.limit = (self.limit * (1.0 - SMOOTHING) + target * SMOOTHING)
            .clamp(self.min as f64, self.max as f64);
    }
}

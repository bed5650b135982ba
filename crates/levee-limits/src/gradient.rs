//! Gradient2: the adaptive limit (see limit.rs).

use std::time::{Duration, Instant};

/// Gradient2: the limit grows while the latency of recent requests stays near its long
/// average, and shrinks in proportion when it rises (the backend queues inside). A
/// window is judged by its median, not its mean: a few answers that are slow by nature
/// (a report, a test's delayed answer) are not the backend queueing, and must not take
/// its limit down.
pub(super) struct Gradient {
    pub(super) limit: f64,
    min: usize,
    max: usize,
    /// Average time of many windows: the backend's latency when not queueing.
    long_rtt: Option<f64>,
    window_start: Instant,
    /// This window's request times, seconds (at most `WINDOW_SAMPLES`).
    window: Vec<f64>,
    window_count: u32,
    window_max_in_flight: usize,
}

/// A window ends after this long and at least `MIN_SAMPLES` requests.
pub(super) const WINDOW: Duration = Duration::from_millis(100);
pub(super) const MIN_SAMPLES: u32 = 8;
/// Latency may grow this much over the long average before the limit shrinks.
const TOLERANCE: f64 = 1.5;
/// Weight of one window in the long average (about 100 windows).
const LONG_WEIGHT: f64 = 0.01;
const SMOOTHING: f64 = 0.2;
/// Request times kept per window for its median.
const WINDOW_SAMPLES: usize = 256;

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
        Gradient {
            limit: initial as f64,
            min,
            max,
            long_rtt: None,
            window_start: Instant::now(),
            window: Vec::with_capacity(16),
            window_count: 0,
            window_max_in_flight: 0,
        }
    }

    /// Counts one request's time; at the end of a window, the new limit if it changed.
    pub(super) fn sample(
        &mut self,
        rtt: Duration,
        in_flight: usize,
        now: Instant,
    ) -> Option<usize> {
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
        self.update(short, used)
    }

    fn update(&mut self, short: f64, used: usize) -> Option<usize> {
        let long = match self.long_rtt {
            None => short,
            Some(l) => l * (1.0 - LONG_WEIGHT) + short * LONG_WEIGHT,
        };
        // After a long slow spell the average is high; let it come down faster once the
        // backend is quick again, or the limit would overshoot.
        let long = if long / short > 2.0 {
            long * 0.95
        } else {
            long
        };
        self.long_rtt = Some(long);
        let old = self.limit.round() as usize;
        // Growing a limit nobody uses proves nothing about the backend.
        if (used as f64) < self.limit / 2.0 && short <= long * TOLERANCE {
            return None;
        }
        let gradient = (TOLERANCE * long / short).clamp(0.5, 1.0);
        let queue = self.limit.sqrt();
        let target = self.limit * gradient + queue;
        self.limit = (self.limit * (1.0 - SMOOTHING) + target * SMOOTHING)
            .clamp(self.min as f64, self.max as f64);
        let new = self.limit.round() as usize;
        (new != old).then_some(new)
    }
}

//! Per-thread measurements, merged once at the end of a step: no lock or shared
//! cache line is touched per request except this thread's own live counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use crate::report::{ErrorCounts, LatencySummary, Percentile, StatusCounts, StepReport, Timeline};

/// Highest latency the histograms hold (longer ones are clamped): one hour, in µs.
const HIST_MAX_US: u64 = 3_600_000_000;

/// Why a request produced no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// TCP connect (or HTTP/2 handshake) failed or timed out.
    Connect,
    /// No full response within --timeout.
    Timeout,
    /// Anything else: reset, early close, malformed response.
    Other,
}

/// A fresh latency histogram in microseconds with 3 significant digits.
pub(crate) fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).context("cannot create latency histogram")
}

/// Counters the progress bar reads while the run goes on; one per thread, padded so
/// threads never share a cache line.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Live {
    pub(crate) responses: AtomicU64,
    pub(crate) errors: AtomicU64,
}

/// What one thread measured during one step.
pub(crate) struct ThreadStats {
    pub(crate) hist: Histogram<u64>,
    /// The 2xx responses alone.
    pub(crate) hist_2xx: Histogram<u64>,
    pub(crate) responses: u64,
    pub(crate) errors: ErrorCounts,
    pub(crate) status: StatusCounts,
    pub(crate) bytes: u64,
    /// Open model: requests sent late because their connection was busy.
    pub(crate) late_sends: u64,
    /// Open model: requests the schedule holds (rate x duration), and those sent within
    /// 2 ms of when they were due. The difference is what the generator did not keep:
    /// connections busy, or a machine too busy to run it in time.
    pub(crate) scheduled: u64,
    pub(crate) on_time: u64,
    /// Open model: sends late although their connection was free when they fell due:
    /// the generator not run in time.
    pub(crate) generator_late: u64,
    /// Responses and errors per timeline slot.
    pub(crate) tl_responses: Vec<u64>,
    pub(crate) tl_errors: Vec<u64>,
    pub(crate) server: Option<String>,
    pub(crate) doc_len: Option<u64>,
    pub(crate) last_done: Option<Instant>,
}

impl ThreadStats {
    pub(crate) fn new() -> Result<Self> {
        Ok(ThreadStats {
            hist: new_histogram()?,
            hist_2xx: new_histogram()?,
            responses: 0,
            errors: ErrorCounts::default(),
            status: StatusCounts::default(),
            bytes: 0,
            late_sends: 0,
            scheduled: 0,
            on_time: 0,
            generator_late: 0,
            tl_responses: Vec::new(),
            tl_errors: Vec::new(),
            server: None,
            doc_len: None,
            last_done: None,
        })
    }

    fn slot(v: &mut Vec<u64>, i: usize) -> &mut u64 {
        if i >= v.len() {
            v.resize(i + 1, 0);
        }
        &mut v[i]
    }

    /// Records a response: latency into the histogram, status into its class.
    pub(crate) fn response(
        &mut self,
        status: u16,
        bytes: u64,
        latency: Duration,
        slot: usize,
        live: &Live,
    ) {
        self.responses += 1;
        self.bytes += bytes;
        let us = (latency.as_micros() as u64).clamp(1, HIST_MAX_US);
        self.hist.saturating_record(us);
        *Self::slot(&mut self.tl_responses, slot) += 1;
        live.responses.fetch_add(1, Ordering::Relaxed);
        match status {
            200..=299 => {
                self.status.s2xx += 1;
                self.hist_2xx.saturating_record(us);
            }
            300..=399 => self.status.s3xx += 1,
            400..=499 => {
                self.status.s4xx += 1;
                self.errors.status_4xx += 1;
                self.error_tick(slot, live);
            }
            500..=599 => {
                self.status.s5xx += 1;
                self.errors.status_5xx += 1;
                self.error_tick(slot, live);
            }
            _ => self.status.other += 1,
        }
    }

    /// Records a request that got no response.
    pub(crate) fn failure(&mut self, f: Failure, slot: usize, live: &Live) {
        match f {
            Failure::Connect => self.errors.connect += 1,
            Failure::Timeout => self.errors.timeout += 1,
            Failure::Other => self.errors.other += 1,
        }
        self.error_tick(slot, live);
    }

    fn error_tick(&mut self, slot: usize, live: &Live) {
        *Self::slot(&mut self.tl_errors, slot) += 1;
        live.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Folds another thread's numbers into this one.
    pub(crate) fn merge(&mut self, other: ThreadStats) -> Result<()> {
        self.hist
            .add(&other.hist)
            .context("cannot merge latency histograms")?;
        self.hist_2xx
            .add(&other.hist_2xx)
            .context("cannot merge latency histograms")?;
        self.responses += other.responses;
        self.errors.add(&other.errors);
        self.status.add(&other.status);
        self.bytes += other.bytes;
        self.late_sends += other.late_sends;
        self.scheduled += other.scheduled;
        self.on_time += other.on_time;
        self.generator_late += other.generator_late;
        for (v, o) in [
            (&mut self.tl_responses, other.tl_responses),
            (&mut self.tl_errors, other.tl_errors),
        ] {
            if v.len() < o.len() {
                v.resize(o.len(), 0);
            }
            for (a, b) in v.iter_mut().zip(o) {
                *a += b;
            }
        }
        if self.server.is_none() {
            self.server = other.server;
        }
        if self.doc_len.is_none() {
            self.doc_len = other.doc_len;
        }
        self.last_done = match (self.last_done, other.last_done) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(())
    }

    /// Turns raw numbers into a report step.
    pub(crate) fn into_step(
        self,
        concurrency: usize,
        elapsed: Duration,
        offset: Duration,
        slot_len: Duration,
    ) -> StepReport {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let q = |p: f64| quantile_ms(&self.hist, p);
        let latency = summary(&self.hist);
        let latency_2xx = summary(&self.hist_2xx);
        let percentiles = PERCENTILES
            .iter()
            .map(|&p| Percentile {
                pct: p,
                ms: q(p / 100.0),
            })
            .collect();
        let slot_s = slot_len.as_secs_f64();
        let slots = ((secs / slot_s).ceil() as usize).max(1);
        let mut tl_r = self.tl_responses;
        let mut tl_e = self.tl_errors;
        tl_r.resize(slots.max(tl_r.len()), 0);
        tl_e.resize(tl_r.len(), 0);
        tl_r.truncate(slots);
        tl_e.truncate(slots);
        StepReport {
            concurrency,
            elapsed_s: secs,
            requests: self.responses + self.errors.transport(),
            responses: self.responses,
            errors: self.errors,
            status: self.status,
            rps: self.responses as f64 / secs,
            bytes: self.bytes,
            transfer_bytes_per_s: self.bytes as f64 / secs,
            latency,
            latency_2xx,
            late_sends: self.late_sends,
            scheduled: self.scheduled,
            on_time: self.on_time,
            generator_late: self.generator_late,
            percentiles,
            timeline: Timeline {
                start_s: offset.as_secs_f64(),
                interval_s: slot_s,
                responses: tl_r,
                errors: tl_e,
            },
            server: self.server,
            document_length: self.doc_len,
        }
    }
}

/// The latency at quantile `p` (0..=1) in ms; 0 when nothing was recorded.
fn quantile_ms(h: &Histogram<u64>, p: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(p) as f64 / 1000.0
    }
}

fn summary(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    LatencySummary {
        mean_ms: h.mean() / 1000.0,
        stdev_ms: h.stdev() / 1000.0,
        min_ms: ms(h.min()),
        p50_ms: quantile_ms(h, 0.5),
        p90_ms: quantile_ms(h, 0.9),
        p99_ms: quantile_ms(h, 0.99),
        p999_ms: quantile_ms(h, 0.999),
        max_ms: ms(h.max()),
    }
}

/// Percentiles kept in reports: ab's list plus a fine tail for distribution charts.
pub(crate) const PERCENTILES: &[f64] = &[
    0.0, 10.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 66.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.5, 95.0,
    96.0, 97.0, 97.5, 98.0, 98.5, 99.0, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99, 99.999, 100.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A server shedding load: a few slow 200s among many fast 503s. The 2xx summary is
    /// what the served waited; the overall one is pulled down by the refusals.
    #[test]
    fn latency_of_2xx_leaves_out_fast_refusals() {
        let live = Live::default();
        let mut t = ThreadStats::new().unwrap();
        for _ in 0..10 {
            t.response(200, 100, Duration::from_millis(1500), 0, &live);
        }
        for _ in 0..90 {
            t.response(503, 100, Duration::from_millis(1), 0, &live);
        }
        let step = t.into_step(
            1,
            Duration::from_secs(1),
            Duration::ZERO,
            Duration::from_secs(1),
        );
        assert!(step.latency.p50_ms < 2.0, "{:?}", step.latency);
        assert!(
            (step.latency_2xx.p50_ms - 1500.0).abs() < 5.0,
            "{:?}",
            step.latency_2xx
        );
        assert!(step.latency_2xx.min_ms > 1400.0);
        assert_eq!(step.status.s2xx, 10);
    }
}

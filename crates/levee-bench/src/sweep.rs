//! Concurrency sweeps: the `--sweep` syntax and knee detection.
//!
//! Syntax:
//! - a list: `1,2,4,8,16`
//! - a doubling range: `1..256` = 1,2,4,...,256 (the end is always included)
//! - a range with a factor: `10..1000:x10` = 10,100,1000
//! - a range with a step: `10..50:+10` = 10,20,30,40,50
//!
//! Lists and ranges can be mixed: `1,2..16,100`.

use anyhow::{anyhow, bail, Result};

use crate::report::{Knee, StepReport};

/// Most steps a sweep may have; more is almost surely a typo.
const MAX_STEPS: usize = 1000;
/// Most connections per step.
pub(crate) const MAX_CONCURRENCY: usize = 100_000;

const SYNTAX: &str = "use a list like 1,2,4,8 or a range like 1..256 (doubling), \
                      10..1000:x10 (factor) or 10..50:+10 (step)";

/// Parses a `--sweep` value into concurrency levels, in the order given.
pub fn parse_sweep(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            bail!("bad --sweep '{s}': empty item; {SYNTAX}");
        }
        if let Some((from, rest)) = part.split_once("..") {
            let (to, how) = match rest.split_once(':') {
                Some((to, how)) => (to, Some(how)),
                None => (rest, None),
            };
            let from = number(from, s)?;
            let to = number(to, s)?;
            if to < from {
                bail!("bad --sweep '{s}': range {from}..{to} goes down; {SYNTAX}");
            }
            let step: Box<dyn Fn(usize) -> usize> = match how {
                None => Box::new(|v| v * 2),
                Some(h) => {
                    if let Some(f) = h.strip_prefix('x') {
                        let f = number(f, s)?;
                        if f < 2 {
                            bail!("bad --sweep '{s}': factor must be at least 2; {SYNTAX}");
                        }
                        Box::new(move |v| v * f)
                    } else if let Some(d) = h.strip_prefix('+') {
                        let d = number(d, s)?;
                        Box::new(move |v| v + d)
                    } else {
                        bail!("bad --sweep '{s}': unknown range step ':{h}'; {SYNTAX}");
                    }
                }
            };
            let mut v = from;
            while v < to {
                out.push(v);
                if out.len() > MAX_STEPS {
                    bail!("bad --sweep '{s}': more than {MAX_STEPS} steps");
                }
                v = step(v);
            }
            out.push(to);
        } else {
            out.push(number(part, s)?);
        }
        if out.len() > MAX_STEPS {
            bail!("bad --sweep '{s}': more than {MAX_STEPS} steps");
        }
    }
    Ok(out)
}

fn number(n: &str, whole: &str) -> Result<usize> {
    let v: usize = n
        .trim()
        .parse()
        .map_err(|_| anyhow!("bad --sweep '{whole}': '{n}' is not a whole number; {SYNTAX}"))?;
    if v == 0 || v > MAX_CONCURRENCY {
        bail!("bad --sweep '{whole}': concurrency must be between 1 and {MAX_CONCURRENCY}");
    }
    Ok(v)
}

/// Within this fraction of the peak, throughput counts as saturated: on a noisy machine
/// a flat curve wobbles by a few percent, and "peak at 128" would hide that it stopped
/// growing at 8.
const SATURATION: f64 = 0.95;

/// Finds the peak-throughput step, the first step within 5% of it (where throughput
/// stops growing), and the first step whose p99 is more than twice the p99 at the lowest
/// concurrency (the "low-load value").
pub fn knee(steps: &[StepReport]) -> Option<Knee> {
    // rev: on a tie, the lowest concurrency reaching the peak is the peak (as
    // Report::peak picks it).
    let peak = steps.iter().rev().max_by(|a, b| a.rps.total_cmp(&b.rps))?;
    let saturated = steps
        .iter()
        .filter(|s| s.rps >= SATURATION * peak.rps)
        .min_by_key(|s| s.concurrency)
        .map(|s| s.concurrency);
    let base = steps
        .iter()
        .filter(|s| s.responses > 0)
        .min_by_key(|s| s.concurrency)?;
    let baseline = base.latency.p99_ms;
    let degraded = steps
        .iter()
        .filter(|s| s.concurrency > base.concurrency && s.responses > 0)
        .find(|s| s.latency.p99_ms > 2.0 * baseline);
    Some(Knee {
        peak_concurrency: peak.concurrency,
        peak_rps: peak.rps,
        saturated_concurrency: saturated,
        baseline_p99_ms: baseline,
        degraded_concurrency: degraded.map(|s| s.concurrency),
        degraded_p99_ms: degraded.map(|s| s.latency.p99_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_sweep("1,2,4,8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(
            parse_sweep("1..256").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256]
        );
        assert_eq!(
            parse_sweep("1..100").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64, 100]
        );
        assert_eq!(parse_sweep("10..1000:x10").unwrap(), vec![10, 100, 1000]);
        assert_eq!(parse_sweep("10..50:+20").unwrap(), vec![10, 30, 50]);
        assert_eq!(parse_sweep("1, 2..8 ,100").unwrap(), vec![1, 2, 4, 8, 100]);
        assert_eq!(parse_sweep("5..5").unwrap(), vec![5]);
    }

    fn step(concurrency: usize, rps: f64, p99_ms: f64) -> StepReport {
        serde_json::from_value(serde_json::json!({
            "concurrency": concurrency, "elapsed_s": 1.0, "requests": 10, "responses": 10,
            "errors": {"connect": 0, "timeout": 0, "status_4xx": 0, "status_5xx": 0, "other": 0},
            "status": {"s2xx": 10, "s3xx": 0, "s4xx": 0, "s5xx": 0, "other": 0},
            "rps": rps, "bytes": 0, "transfer_bytes_per_s": 0.0,
            "latency": {"mean_ms": 1.0, "stdev_ms": 0.0, "min_ms": 1.0, "p50_ms": 1.0,
                        "p90_ms": 1.0, "p99_ms": p99_ms, "p999_ms": p99_ms, "max_ms": p99_ms},
            "percentiles": [],
            "timeline": {"start_s": 0.0, "interval_s": 0.1, "responses": [], "errors": []}
        }))
        .unwrap()
    }

    #[test]
    fn knee_finds_peak_saturation_and_latency_doubling() {
        // The thesis' figure 5.8 shape: throughput flat from 8 on, latency climbing.
        let steps = [
            step(1, 46.0, 25.0),
            step(4, 183.0, 26.0),
            step(8, 231.0, 45.0),
            step(16, 233.0, 85.0),
            step(32, 232.0, 150.0),
        ];
        let k = knee(&steps).unwrap();
        assert_eq!(k.peak_concurrency, 16);
        assert_eq!(k.saturated_concurrency, Some(8));
        assert_eq!(k.baseline_p99_ms, 25.0);
        assert_eq!(k.degraded_concurrency, Some(16));
        // Still growing at the last step: saturation is the peak itself.
        let k = knee(&steps[..2]).unwrap();
        assert_eq!((k.peak_concurrency, k.saturated_concurrency), (4, Some(4)));
        assert_eq!(k.degraded_concurrency, None);
    }

    #[test]
    fn bad_syntax_explains() {
        for bad in [
            "",
            "1,,2",
            "a",
            "0",
            "8..1",
            "1..8:x1",
            "1..8:*2",
            "1..1000000:+1",
        ] {
            let err = parse_sweep(bad).unwrap_err().to_string();
            assert!(err.contains("--sweep"), "{bad}: {err}");
        }
    }
}

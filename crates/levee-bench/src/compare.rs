//! `levee bench compare A.json B.json`: two runs side by side with B/A ratios,
//! steps matched by concurrency (or by position when no level is shared).

use std::fmt::Write;

use crate::report::text::{ms, rate};
use crate::report::{Report, StepReport};

fn ratio(a: f64, b: f64) -> String {
    if a == 0.0 && b == 0.0 {
        "=".into()
    } else if a == 0.0 {
        "n/a".into()
    } else {
        format!("{:.2}x", b / a)
    }
}

fn pairs<'a>(a: &'a Report, b: &'a Report) -> Vec<(&'a StepReport, &'a StepReport)> {
    let matched: Vec<_> = a
        .steps
        .iter()
        .filter_map(|sa| {
            b.steps
                .iter()
                .find(|sb| sb.concurrency == sa.concurrency)
                .map(|sb| (sa, sb))
        })
        .collect();
    if matched.is_empty() {
        a.steps.iter().zip(&b.steps).collect()
    } else {
        matched
    }
}

/// Renders the comparison; `names` label the two columns (usually file names).
pub fn render(a: &Report, b: &Report, names: (&str, &str)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "levee bench compare");
    for (tag, r, n) in [("A", a, names.0), ("B", b, names.1)] {
        let label = r
            .label
            .as_deref()
            .map(|l| format!(" [{l}]"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {tag}: {n}{label}  {} {} ({} model, {} step(s))",
            r.config.method,
            r.config.url,
            r.config.model,
            r.steps.len()
        );
    }
    let pairs = pairs(a, b);
    if pairs.is_empty() {
        let _ = writeln!(out, "\nNo steps to compare: one of the reports is empty.");
        return out;
    }
    type Metric = (&'static str, fn(&StepReport) -> f64, fn(f64) -> String);
    let metrics: [Metric; 10] = [
        ("req/s", |s| s.rps, |v| format!("{v:.1}")),
        ("transfer", |s| s.transfer_bytes_per_s, rate),
        ("mean ms", |s| s.latency.mean_ms, ms),
        ("p50 ms", |s| s.latency.p50_ms, ms),
        ("p90 ms", |s| s.latency.p90_ms, ms),
        ("p99 ms", |s| s.latency.p99_ms, ms),
        ("p99.9 ms", |s| s.latency.p999_ms, ms),
        ("max ms", |s| s.latency.max_ms, ms),
        ("responses", |s| s.responses as f64, |v| format!("{v:.0}")),
        ("errors", |s| s.errors.total() as f64, |v| format!("{v:.0}")),
    ];
    for (sa, sb) in pairs {
        let title = if sa.concurrency == sb.concurrency {
            format!("concurrency {}", sa.concurrency)
        } else {
            format!("concurrency {} vs {}", sa.concurrency, sb.concurrency)
        };
        let _ = writeln!(out, "\n{title:<22} {:>14} {:>14} {:>9}", "A", "B", "B/A");
        for (label, f, fmt) in &metrics {
            let (va, vb) = (f(sa), f(sb));
            let _ = writeln!(
                out,
                "  {label:<20} {:>14} {:>14} {:>9}",
                fmt(va),
                fmt(vb),
                ratio(va, vb)
            );
        }
    }
    let _ = writeln!(
        out,
        "\nB/A above 1 means B is higher: better for req/s, worse for latency and errors."
    );
    out
}

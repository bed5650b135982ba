//! The terminal report, laid out like ab's so its readers feel at home.

use std::fmt::Write;

use super::{LatencySummary, Report, StepReport};

/// Percentiles of ab's "served within a certain time" table.
const AB_PERCENTILES: &[f64] = &[50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 100.0];

/// Formats milliseconds with precision that suits the magnitude.
pub(crate) fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.3}")
    } else if v < 100.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// Human-readable byte rate.
pub(crate) fn rate(bytes_per_s: f64) -> String {
    let kib = bytes_per_s / 1024.0;
    if kib < 1024.0 {
        format!("{kib:.1} KiB/s")
    } else {
        format!("{:.2} MiB/s", kib / 1024.0)
    }
}

/// Renders the whole report: a detailed single-run report, or a sweep table.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    header(&mut out, report);
    if report.steps.len() == 1 {
        single(&mut out, report, &report.steps[0]);
    } else {
        sweep(&mut out, report);
    }
    out
}

fn header(out: &mut String, r: &Report) {
    let c = &r.config;
    let (host, path) = match c.url.parse::<http::Uri>() {
        Ok(u) => (
            u.authority().map(|a| a.to_string()).unwrap_or_default(),
            u.path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_else(|| "/".into()),
        ),
        Err(_) => (c.url.clone(), String::new()),
    };
    let first = r.steps.first();
    let _ = writeln!(out, "{}", r.tool);
    if let Some(label) = &r.label {
        let _ = writeln!(out, "Run:                    {label}");
    }
    let server = first.and_then(|s| s.server.clone()).unwrap_or_default();
    let _ = writeln!(out, "\nServer Software:        {server}");
    let _ = writeln!(out, "Server Hostname:        {host}");
    if c.urls > 1 {
        let _ = writeln!(
            out,
            "Document Path:          {path} (and {} more URLs)",
            c.urls - 1
        );
    } else {
        let _ = writeln!(out, "Document Path:          {path}");
    }
    if let Some(len) = first.and_then(|s| s.document_length) {
        let _ = writeln!(out, "Document Length:        {len} bytes");
    }
    let proto = c.protocol();
    let ka = if c.keepalive {
        "keep-alive"
    } else {
        "new connection per request"
    };
    let _ = writeln!(out, "Protocol:               {proto}, {ka}, {}", c.method);
    match c.rate {
        Some(rate) => {
            let _ = writeln!(
                out,
                "Load model:             open, {rate:.0} req/s target (latency from intended start), {} threads",
                c.threads
            );
        }
        None => {
            let _ = writeln!(out, "Load model:             closed, {} threads", c.threads);
        }
    }
    out.push('\n');
}

fn single(out: &mut String, r: &Report, s: &StepReport) {
    let e = &s.errors;
    let _ = writeln!(out, "Concurrency Level:      {}", s.concurrency);
    let _ = writeln!(out, "Time taken for tests:   {:.3} seconds", s.elapsed_s);
    let _ = writeln!(out, "Complete requests:      {}", s.responses);
    let _ = writeln!(out, "Failed requests:        {}", e.total());
    let _ = writeln!(
        out,
        "   (Connect: {}, Timeout: {}, 4xx: {}, 5xx: {}, Other: {})",
        e.connect, e.timeout, e.status_4xx, e.status_5xx, e.other
    );
    let _ = writeln!(out, "Total transferred:      {} bytes", s.bytes);
    let _ = writeln!(out, "Requests per second:    {:.2} [#/sec] (mean)", s.rps);
    if s.responses > 0 {
        let per = s.elapsed_s * 1000.0 / s.responses as f64;
        let _ = writeln!(
            out,
            "Time per request:       {:.3} [ms] (mean)",
            per * s.concurrency as f64
        );
        let _ = writeln!(
            out,
            "Time per request:       {per:.3} [ms] (mean, across all concurrent requests)"
        );
    }
    let _ = writeln!(
        out,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        s.transfer_bytes_per_s / 1024.0
    );
    if let Some(rate) = r.config.rate {
        let _ = writeln!(
            out,
            "Target rate:            {rate:.2} [#/sec] ({:.1}% achieved)",
            100.0 * s.rps / rate
        );
        let _ = writeln!(
            out,
            "Schedule:               {}",
            schedule_kept(s.scheduled, s.on_time, s.generator_late)
        );
        if s.late_sends > 0 {
            let pct = 100.0 * s.late_sends as f64 / s.requests.max(1) as f64;
            let _ = writeln!(
                out,
                "Late sends:             {} ({pct:.1}%): their connection was still waiting for \
                 its last answer; their latency includes that wait{}",
                s.late_sends,
                if pct >= 1.0 {
                    ". Raise -c to measure the server alone"
                } else {
                    ""
                }
            );
        }
    }
    let _ = writeln!(
        out,
        "\nLatency (ms)    min     mean  [+/-sd]    p50      p90      p99    p99.9      max"
    );
    latency_row(out, "Total:", &s.latency);
    // Refusals (503 when shedding) are fast; what the served waited is its own line.
    if s.status.s2xx > 0 && s.status.s2xx < s.responses {
        latency_row(out, "2xx only:", &s.latency_2xx);
    }
    percentages(out, s);
}

fn latency_row(out: &mut String, label: &str, l: &LatencySummary) {
    let _ = writeln!(
        out,
        "{label:<10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        ms(l.min_ms),
        ms(l.mean_ms),
        ms(l.stdev_ms),
        ms(l.p50_ms),
        ms(l.p90_ms),
        ms(l.p99_ms),
        ms(l.p999_ms),
        ms(l.max_ms)
    );
}

fn percentages(out: &mut String, s: &StepReport) {
    let _ = writeln!(
        out,
        "\nPercentage of the requests served within a certain time (ms)"
    );
    for &p in AB_PERCENTILES {
        if let Some(v) = s.percentile(p) {
            let label = if p.fract() == 0.0 {
                format!("{p:.0}%")
            } else {
                format!("{p}%")
            };
            let tail = if p == 100.0 { " (longest request)" } else { "" };
            let _ = writeln!(out, " {label:>6} {:>9}{tail}", ms(v));
        }
    }
}

fn sweep(out: &mut String, r: &Report) {
    let c = &r.config;
    let per = match (c.duration_s, c.requests) {
        (Some(d), _) => format!("{d} s per step"),
        (None, Some(n)) => format!("{n} requests per step"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "Concurrency sweep:      {} steps, {per}, warm-up {} s",
        r.steps.len(),
        c.warmup_s
    );
    let _ = writeln!(
        out,
        "\n{:>7} {:>11} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}  errors (conn/tmo/4xx/5xx/other)",
        "conc", "req/s", "transfer", "mean", "p50", "p90", "p99", "p99.9", "max", "2xx p99", "err"
    );
    for s in &r.steps {
        let l = &s.latency;
        let e = &s.errors;
        let _ = writeln!(
            out,
            "{:>7} {:>11.1} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}  {}/{}/{}/{}/{}",
            s.concurrency,
            s.rps,
            rate(s.transfer_bytes_per_s),
            ms(l.mean_ms),
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.p999_ms),
            ms(l.max_ms),
            ms(s.latency_2xx.p99_ms),
            e.total(),
            e.connect,
            e.timeout,
            e.status_4xx,
            e.status_5xx,
            e.other
        );
    }
    let _ = writeln!(
        out,
        "(latencies in ms; 2xx p99: of the 2xx responses alone, without fast refusals)"
    );
    if let Some(k) = &r.knee {
        let _ = writeln!(
            out,
            "\nKnee: peak throughput {:.1} req/s at concurrency {}.",
            k.peak_rps, k.peak_concurrency
        );
        if let Some(c) = k.saturated_concurrency.filter(|c| *c < k.peak_concurrency) {
            let _ = writeln!(
                out,
                "      throughput stops growing at concurrency {c} (within 5% of the peak)."
            );
        }
        match (k.degraded_concurrency, k.degraded_p99_ms) {
            (Some(c), Some(p)) => {
                let _ = writeln!(
                    out,
                    "      p99 first exceeds twice its low-load value ({} ms) at concurrency {c} ({} ms).",
                    ms(k.baseline_p99_ms),
                    ms(p)
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "      p99 stays within twice its low-load value ({} ms) at every step.",
                    ms(k.baseline_p99_ms)
                );
            }
        }
    }
    if let Some(peak) = r.peak() {
        let _ = write!(
            out,
            "\nAt peak throughput (concurrency {}):",
            peak.concurrency
        );
        percentages(out, peak);
    }
}

/// Whether the open model's generator sent its requests when they were due: the rate
/// and latencies it reports are the asked-for rate's only when it did (99%).
pub(crate) fn schedule_kept(scheduled: u64, on_time: u64, generator_late: u64) -> String {
    let missed = scheduled.saturating_sub(on_time);
    let pct = 100.0 * on_time as f64 / scheduled.max(1) as f64;
    if missed * 100 <= scheduled {
        format!("kept ({on_time} of {scheduled} requests sent on time)")
    } else if generator_late * 100 > scheduled {
        format!(
            "NOT kept: {on_time} of {scheduled} requests ({pct:.1}%) sent on time, {generator_late} \
             late on a free connection: this machine could not run the generator in time (other \
             load?); the rate and latencies include its delay"
        )
    } else {
        format!(
            "NOT kept: {on_time} of {scheduled} requests ({pct:.1}%) sent on time; the others \
             waited for their connection's last answer (raise -c)"
        )
    }
}

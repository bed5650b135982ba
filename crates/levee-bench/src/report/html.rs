//! `--html FILE`: one self-contained page (inline CSS and SVG, no network) with
//! throughput and latency against concurrency, the latency distribution and
//! throughput over time. Several reports can share one page (before/after, or
//! direct vs. through a proxy), each drawn in its own colour.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

use super::svg::{esc, num, Chart, Marker, Scale, Series, PALETTE};
use super::text::{ms, rate};
use super::{write_out, Report};

/// Writes the HTML page for one report.
pub fn write_html(report: &Report, path: &Path) -> Result<()> {
    write_out(path, render_html(std::slice::from_ref(report)).as_bytes())
}

/// Writes one HTML page overlaying several reports (e.g. direct vs. through levee).
pub fn write_html_many(reports: &[Report], path: &Path) -> Result<()> {
    write_out(path, render_html(reports).as_bytes())
}

/// Picks one latency figure out of a summary.
type LatencyOf = fn(&super::LatencySummary) -> f64;

/// Series name prefix: a run's label when several runs share a chart; with one run the
/// label is already the page's heading.
fn name(r: &Report, i: usize, many: bool) -> String {
    match (&r.label, many) {
        (Some(l), true) => l.clone(),
        (None, true) => format!("run {}", i + 1),
        (_, false) => String::new(),
    }
}

fn with(prefix: &str, what: &str) -> String {
    if prefix.is_empty() {
        what.to_string()
    } else {
        format!("{prefix} {what}")
    }
}

/// Renders the page. Charts are `<svg class="chart">` elements; a short script only
/// checks the embedded data and marks the page rendered (tests look for the mark).
pub fn render_html(reports: &[Report]) -> String {
    let many = reports.len() > 1;
    let mut conc: Vec<usize> = reports
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.concurrency))
        .collect();
    conc.sort_unstable();
    conc.dedup();
    let (cmin, cmax) = (
        conc.first().copied().unwrap_or(1),
        conc.last().copied().unwrap_or(1),
    );
    let cscale = if cmax >= cmin * 4 {
        Scale::Log2
    } else {
        Scale::Linear
    };
    let cticks: Vec<f64> = conc.iter().map(|&c| c as f64).collect();

    let mut throughput = Chart {
        id: "chart-throughput",
        title: "Throughput vs concurrency".into(),
        x_label: "concurrency (connections)".into(),
        y_label: "requests/s".into(),
        x_scale: cscale,
        series: Vec::new(),
        markers: Vec::new(),
        x_ticks: cticks.clone(),
    };
    let mut latency = Chart {
        id: "chart-latency",
        title: "Latency vs concurrency".into(),
        x_label: "concurrency (connections)".into(),
        y_label: "latency (ms)".into(),
        x_scale: cscale,
        series: Vec::new(),
        markers: Vec::new(),
        x_ticks: cticks,
    };
    let mut dist = Chart {
        id: "chart-distribution",
        title: "Latency distribution (by percentile)".into(),
        x_label: "percentile".into(),
        y_label: "latency (ms)".into(),
        x_scale: Scale::Tail,
        series: Vec::new(),
        markers: Vec::new(),
        x_ticks: Vec::new(),
    };
    let mut timeline = Chart {
        id: "chart-timeline",
        title: "Throughput over time".into(),
        x_label: "time (s)".into(),
        y_label: "requests/s".into(),
        x_scale: Scale::Linear,
        series: Vec::new(),
        markers: Vec::new(),
        x_ticks: Vec::new(),
    };
    let mut color = 0usize;
    let mut next = || {
        let c = PALETTE[color % PALETTE.len()];
        color += 1;
        c
    };
    for (i, r) in reports.iter().enumerate() {
        let n = name(r, i, many);
        let c = next();
        throughput.series.push(Series {
            name: with(&n, "req/s"),
            color: c,
            points: r
                .steps
                .iter()
                .map(|s| (s.concurrency as f64, s.rps))
                .collect(),
            dots: true,
        });
        let lat: &[(&str, LatencyOf)] = if many {
            &[("p50", |l| l.p50_ms), ("p99", |l| l.p99_ms)]
        } else {
            &[
                ("p50", |l| l.p50_ms),
                ("p90", |l| l.p90_ms),
                ("p99", |l| l.p99_ms),
                ("p99.9", |l| l.p999_ms),
            ]
        };
        for (k, (label, f)) in lat.iter().enumerate() {
            let col = if many && k > 0 {
                next()
            } else if many {
                c
            } else {
                PALETTE[k % PALETTE.len()]
            };
            latency.series.push(Series {
                name: with(&n, label),
                color: col,
                points: r
                    .steps
                    .iter()
                    .map(|s| (s.concurrency as f64, f(&s.latency)))
                    .collect(),
                dots: true,
            });
        }
        if !many {
            if let Some(k) = &r.knee {
                throughput.markers.push(Marker {
                    x: k.peak_concurrency as f64,
                    label: format!("peak at {}", k.peak_concurrency),
                    color: "#d62728",
                });
                if let Some(c) = k.saturated_concurrency.filter(|c| *c < k.peak_concurrency) {
                    throughput.markers.push(Marker {
                        x: c as f64,
                        label: format!("flat from {c}"),
                        color: "#7f7f7f",
                    });
                }
                if let Some(d) = k.degraded_concurrency {
                    latency.markers.push(Marker {
                        x: d as f64,
                        label: format!("p99 > 2x at {d}"),
                        color: "#d62728",
                    });
                }
            }
        }
        let dist_steps: Vec<&super::StepReport> = if many {
            r.peak().into_iter().collect()
        } else {
            r.steps.iter().collect()
        };
        for (k, s) in dist_steps.iter().enumerate() {
            dist.series.push(Series {
                name: if many {
                    with(&n, &format!("c={}", s.concurrency))
                } else {
                    format!("c={}", s.concurrency)
                },
                color: if many { c } else { PALETTE[k % PALETTE.len()] },
                points: s
                    .percentiles
                    .iter()
                    .filter(|p| p.pct < 100.0)
                    .map(|p| (p.pct, p.ms))
                    .collect(),
                dots: false,
            });
        }
        let mut rps = Vec::new();
        let mut errs = Vec::new();
        for s in &r.steps {
            let t = &s.timeline;
            let iv = t.interval_s.max(1e-6);
            for (k, (&resp, &err)) in t.responses.iter().zip(&t.errors).enumerate() {
                let from = k as f64 * iv;
                let width = (s.elapsed_s - from).min(iv);
                if width <= iv * 0.2 {
                    continue; // a sliver at the end would read as a fake dip
                }
                let x = t.start_s + from + width / 2.0;
                rps.push((x, resp as f64 / width));
                errs.push((x, err as f64 / width));
            }
            if !many && r.steps.len() > 1 && r.steps.len() <= 16 {
                timeline.markers.push(Marker {
                    x: t.start_s,
                    label: format!("c={}", s.concurrency),
                    color: "#7f7f7f",
                });
            }
        }
        timeline.series.push(Series {
            name: with(&n, "req/s"),
            color: c,
            points: rps,
            dots: false,
        });
        if errs.iter().any(|e| e.1 > 0.0) {
            timeline.series.push(Series {
                name: with(&n, "errors/s"),
                color: "#d62728",
                points: errs,
                dots: false,
            });
        }
    }

    let mut out = String::with_capacity(64 * 1024);
    let title = match reports.first() {
        Some(r) if !many => format!("levee bench: {}", r.config.url),
        _ => "levee bench: comparison".to_string(),
    };
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{}</title>
<style>
body {{ font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }}
h2 {{ font-size: 16px; margin: 24px 0 8px; }}
.meta {{ color: #555; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 16px; }}
svg.chart {{ border: 1px solid #ddd; border-radius: 4px; background: #fcfcfc; max-width: 100%; height: auto; }}
svg .title {{ font-size: 14px; font-weight: 600; }}
svg .tick, svg .legend, svg .mlabel {{ font-size: 11px; fill: #444; }}
svg .label {{ font-size: 12px; fill: #333; }}
svg .grid {{ stroke: #e6e6e6; }}
svg .axis {{ stroke: #888; }}
svg .marker {{ stroke-dasharray: 4 3; }}
table {{ border-collapse: collapse; font-variant-numeric: tabular-nums; }}
th, td {{ padding: 3px 10px; text-align: right; border-bottom: 1px solid #eee; white-space: nowrap; }}
th {{ background: #f4f4f4; }}
td.l, th.l {{ text-align: left; }}
.knee {{ background: #fff6e0; border-left: 4px solid #f0a000; padding: 6px 10px; }}
</style></head>
<body>
<h1>{}</h1>
"#,
        esc(&title),
        esc(&title)
    );
    for (i, r) in reports.iter().enumerate() {
        let heading = r.label.clone().unwrap_or_else(|| name(r, i, many));
        summary(&mut out, r, &heading);
    }
    out.push_str("<h2>Charts</h2>\n<div class=\"charts\">\n");
    for c in [&throughput, &latency, &dist, &timeline] {
        out.push_str(&c.render());
        out.push('\n');
    }
    out.push_str("</div>\n");
    for a in reports.iter().flat_map(|r| &r.appendix) {
        let _ = write!(
            out,
            "<section class=\"appendix\"><h2>{}</h2>\n<pre>{}</pre></section>\n",
            esc(&a.title),
            esc(&a.text)
        );
    }
    let json = serde_json::to_string(reports).unwrap_or_else(|_| "[]".into());
    // "</" cannot appear inside a script element; JSON allows the escaped form.
    let json = json.replace("</", "<\\/");
    let _ = write!(
        out,
        r#"<script type="application/json" id="levee-report-data">{json}</script>
<script>
(function () {{
  var data = JSON.parse(document.getElementById("levee-report-data").textContent);
  var charts = document.querySelectorAll("svg.chart").length;
  document.body.setAttribute("data-rendered", "charts=" + charts + ";reports=" + data.length);
}})();
</script>
</body></html>
"#
    );
    out
}

fn summary(out: &mut String, r: &Report, name: &str) {
    let c = &r.config;
    let heading = if name.is_empty() {
        "Summary".to_string()
    } else {
        format!("Summary: {name}")
    };
    let model = match c.rate {
        Some(rate) => format!("open model at {rate:.0} req/s (latency from intended start)"),
        None => "closed model".to_string(),
    };
    let per = match (c.duration_s, c.requests) {
        (Some(d), _) => format!("{d} s per step"),
        (None, Some(n)) => format!("{n} requests per step"),
        _ => String::new(),
    };
    let proto = c.protocol();
    let ka = if c.keepalive {
        "keep-alive"
    } else {
        "new connection per request"
    };
    let urls = if c.urls > 1 {
        format!(" and {} more URLs", c.urls - 1)
    } else {
        String::new()
    };
    let server = r
        .steps
        .first()
        .and_then(|s| s.server.clone())
        .map(|s| format!(", server {s}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<h2>{}</h2>\n<p class=\"meta\">{} {}{} &middot; {} &middot; {}, {} &middot; {} threads &middot; {} &middot; warm-up {} s{} &middot; {}</p>",
        esc(&heading),
        esc(&c.method),
        esc(&c.url),
        esc(&urls),
        esc(&model),
        proto,
        ka,
        c.threads,
        esc(&per),
        c.warmup_s,
        esc(&server),
        esc(&r.tool)
    );
    if let Some(k) = &r.knee {
        let degraded = match (k.degraded_concurrency, k.degraded_p99_ms) {
            (Some(d), Some(p)) => format!(
                "p99 first exceeds twice its low-load value ({} ms) at concurrency {d} ({} ms).",
                ms(k.baseline_p99_ms),
                ms(p)
            ),
            _ => format!(
                "p99 stays within twice its low-load value ({} ms) at every step.",
                ms(k.baseline_p99_ms)
            ),
        };
        let saturated = match k.saturated_concurrency.filter(|c| *c < k.peak_concurrency) {
            Some(c) => {
                format!(" Throughput stops growing at concurrency {c} (within 5% of the peak).")
            }
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "<p class=\"knee\"><b>Knee:</b> peak throughput {} req/s at concurrency {}.{} {}</p>",
            num(k.peak_rps),
            k.peak_concurrency,
            esc(&saturated),
            esc(&degraded)
        );
    }
    out.push_str(
        "<table><tr><th>concurrency</th><th>req/s</th><th>transfer</th><th>mean ms</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>responses</th><th class=\"l\">errors (connect / timeout / 4xx / 5xx / other)</th></tr>\n",
    );
    for s in &r.steps {
        let l = &s.latency;
        let e = &s.errors;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{} ({} / {} / {} / {} / {})</td></tr>",
            s.concurrency,
            s.rps,
            rate(s.transfer_bytes_per_s),
            ms(l.mean_ms),
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.p999_ms),
            ms(l.max_ms),
            s.responses,
            e.total(),
            e.connect,
            e.timeout,
            e.status_4xx,
            e.status_5xx,
            e.other
        );
    }
    out.push_str("</table>\n");
}

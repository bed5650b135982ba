//! `--csv`: one row per step, for spreadsheets and plotting scripts.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

use super::{write_out, Report};

/// Column names, in order.
pub const HEADER: &str = "concurrency,elapsed_s,requests,responses,errors,errors_connect,\
errors_timeout,errors_4xx,errors_5xx,errors_other,rps,bytes,transfer_bytes_per_s,mean_ms,\
stdev_ms,min_ms,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,p50_2xx_ms,p99_2xx_ms";

/// Renders the report as CSV (header plus one row per step).
pub fn render(report: &Report) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for s in &report.steps {
        let e = &s.errors;
        let l = &s.latency;
        let _ = writeln!(
            out,
            "{},{:.3},{},{},{},{},{},{},{},{},{:.2},{},{:.1},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
            s.concurrency,
            s.elapsed_s,
            s.requests,
            s.responses,
            e.total(),
            e.connect,
            e.timeout,
            e.status_4xx,
            e.status_5xx,
            e.other,
            s.rps,
            s.bytes,
            s.transfer_bytes_per_s,
            l.mean_ms,
            l.stdev_ms,
            l.min_ms,
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.p999_ms,
            l.max_ms,
            s.latency_2xx.p50_ms,
            s.latency_2xx.p99_ms
        );
    }
    out
}

/// Writes the CSV to `path` (`-` for stdout).
pub fn write_csv(report: &Report, path: &Path) -> Result<()> {
    write_out(path, render(report).as_bytes())
}

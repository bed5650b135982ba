//! `levee bench`: a load tester that shows how a server behaves under overload.
//!
//! Closed model (`-c` connections for `-d` or `-n`), open model (`--rate`, latency
//! from intended start), concurrency sweeps with knee detection, and reports for
//! people (terminal, HTML) and machines (JSON, CSV).
//!
//! Library use (e.g. from `levee demo`, inside a tokio runtime):
//! [`quick`] for a one-shot measurement, [`run_async`] for a full [`Report`], and
//! [`write_html`] / [`write_html_many`] for pages.

mod cli;
mod compare;
mod http1;
mod http2;
mod http3;
pub mod report;
mod run;
mod stats;
mod sweep;
mod target;
mod urls;
mod worker;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

pub use cli::{parse_duration, parse_header, BenchAction, BenchCommand, UsageError};
pub use report::html::{render_html, write_html, write_html_many};
pub use report::{
    Appendix, ErrorCounts, Knee, LatencySummary, Percentile, Report, RunConfig, StatusCounts,
    StepReport, Timeline,
};
pub use run::{run_blocking, Load, Stop};
pub use sweep::{knee, parse_sweep};
pub use target::{default_threads, Options, Order, Plan, RequestSpec};
pub use urls::{parse_url_file, read_url_file, UrlEntry};

/// Runs `levee bench` to completion (exit code 1 when no response came back at all).
pub fn main(cmd: BenchCommand) -> Result<ExitCode> {
    cli::execute(cmd).map(|(code, _)| code)
}

/// Runs a parsed command and also returns its report (None for `compare`).
pub fn execute(cmd: BenchCommand) -> Result<(ExitCode, Option<Report>)> {
    cli::execute(cmd)
}

/// Side-by-side comparison text of two reports (what `levee bench compare` prints).
pub fn render_compare(a: &Report, b: &Report, names: (&str, &str)) -> String {
    compare::render(a, b, names)
}

/// The terminal report of a run.
pub fn render_text(report: &Report) -> String {
    report::text::render(report)
}

/// The CSV report of a run.
pub fn render_csv(report: &Report) -> String {
    report::csv::render(report)
}

/// Runs a load from async code. The load runs on its own threads (each with its own
/// runtime), so it neither blocks nor competes with the caller's runtime scheduler.
pub async fn run_async(plan: Arc<Plan>, load: Load) -> Result<Report> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("levee-bench".into())
        .spawn(move || {
            let _ = tx.send(run_blocking(plan, &load, false));
        })
        .context("cannot start the bench thread")?;
    rx.await
        .map_err(|_| anyhow!("the bench thread stopped unexpectedly"))?
}

/// The headline numbers of a [`quick`] run.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickResult {
    /// Responses received.
    pub requests: u64,
    /// Errors of every kind (transport and 4xx/5xx).
    pub errors: u64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// GETs `url` over `concurrency` keep-alive connections for `duration`, sending
/// `headers` on every request.
pub async fn quick(
    url: &str,
    concurrency: usize,
    duration: Duration,
    headers: &[(String, String)],
) -> Result<QuickResult> {
    let mut hdrs = Vec::with_capacity(headers.len());
    for (n, v) in headers {
        hdrs.push(parse_header(&format!("{n}: {v}"))?);
    }
    let concurrency = concurrency.max(1);
    let opts = Options {
        headers: hdrs,
        threads: default_threads().min(concurrency),
        ..Options::default()
    };
    let url = url.to_string();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("levee-bench".into())
        .spawn(move || {
            let r = Plan::build(vec![RequestSpec::get(&url)], opts).and_then(|plan| {
                let load = Load {
                    concurrency: vec![concurrency],
                    stop: Stop::Duration(duration),
                    rate: None,
                    warmup: Duration::ZERO,
                };
                run_blocking(Arc::new(plan), &load, false)
            });
            let _ = tx.send(r);
        })
        .context("cannot start the bench thread")?;
    let report = rx
        .await
        .map_err(|_| anyhow!("the bench thread stopped unexpectedly"))??;
    let s = report
        .steps
        .first()
        .ok_or_else(|| anyhow!("the run produced no measurements"))?;
    Ok(QuickResult {
        requests: s.responses,
        errors: s.errors.total(),
        rps: s.rps,
        p50_ms: s.latency.p50_ms,
        p99_ms: s.latency.p99_ms,
    })
}

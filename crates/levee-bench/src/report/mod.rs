//! The report of a run. Its serde form is the `--json` format, which `compare` and
//! the HTML writer read back, so every other output is rendered from it alone.

pub mod csv;
pub mod html;
mod svg;
pub mod text;

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// A whole run: one step for a plain run, one per concurrency level for a sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Producer and version, e.g. "levee bench 0.1.0".
    pub tool: String,
    /// Free label (the demo uses it for "direct" / "through levee").
    #[serde(default)]
    pub label: Option<String>,
    /// When the run started, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    pub config: RunConfig,
    pub steps: Vec<StepReport>,
    /// Where throughput peaks and latency degrades (sweeps only).
    #[serde(default)]
    pub knee: Option<Knee>,
    /// Sections other tools add to the report, shown after the charts (`levee bench
    /// --doctor`: the doctor's audit of the URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub appendix: Vec<Appendix>,
}

/// A titled block of preformatted text in the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Appendix {
    pub title: String,
    pub text: String,
}

/// How the run was set up.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunConfig {
    /// The first URL loaded.
    pub url: String,
    /// Number of distinct URLs (more than 1 with -f).
    pub urls: usize,
    pub method: String,
    /// "closed" (fixed connections) or "open" (fixed arrival rate).
    pub model: String,
    pub threads: usize,
    /// Concurrency of each step, in order.
    pub concurrency: Vec<usize>,
    /// Per-step duration, for time-bounded runs.
    pub duration_s: Option<f64>,
    /// Per-step request count, for -n runs.
    pub requests: Option<u64>,
    /// Target requests/s of the open model.
    pub rate: Option<f64>,
    pub keepalive: bool,
    pub http2: bool,
    /// HTTP/3 (QUIC) to https:// URLs.
    #[serde(default)]
    pub http3: bool,
    pub timeout_s: f64,
    pub warmup_s: f64,
}

impl RunConfig {
    /// The protocol the run spoke, as the reports name it.
    pub fn protocol(&self) -> &'static str {
        if self.http3 {
            "HTTP/3 (QUIC)"
        } else if self.http2 {
            "HTTP/2 (h2c)"
        } else {
            "HTTP/1.1"
        }
    }
}

/// Results of one concurrency level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepReport {
    /// Connections (closed model) or connections the rate was spread over (open model).
    pub concurrency: usize,
    /// Measured wall time of the step.
    pub elapsed_s: f64,
    /// Requests finished: responses plus transport errors.
    pub requests: u64,
    /// Responses received, of any status.
    pub responses: u64,
    pub errors: ErrorCounts,
    pub status: StatusCounts,
    /// Responses per second.
    pub rps: f64,
    /// Bytes received (head and body).
    pub bytes: u64,
    pub transfer_bytes_per_s: f64,
    pub latency: LatencySummary,
    /// Latency of the 2xx responses alone: past the knee a server that sheds load answers
    /// many requests at once with 503, and those fast refusals would pull the percentiles
    /// of `latency` down below what a served user waited.
    #[serde(default)]
    pub latency_2xx: LatencySummary,
    /// Open model: requests sent later than they were due because their connection
    /// was still waiting for its previous answer. Their latency counts that wait, which
    /// is the client's shortage of connections as much as the server's slowness: many
    /// of them mean `-c` should be higher.
    #[serde(default)]
    pub late_sends: u64,
    /// Open model: the requests its schedule holds (rate x duration, or -n), and those
    /// sent within 2 ms of when they were due. When nearly all were, the rate measured is
    /// the rate asked for; when not, the connections ran short (`late_sends`) or the
    /// machine could not run the generator in time, and latencies include its delay.
    #[serde(default)]
    pub scheduled: u64,
    #[serde(default)]
    pub on_time: u64,
    /// Open model: sends late although their connection was free: the generator itself
    /// was not run in time (a machine too busy).
    #[serde(default)]
    pub generator_late: u64,
    /// Latency at fixed percentiles, for distribution charts and `ab`-style tables.
    pub percentiles: Vec<Percentile>,
    pub timeline: Timeline,
    /// Server header of the first response.
    #[serde(default)]
    pub server: Option<String>,
    /// Body length of the first response.
    #[serde(default)]
    pub document_length: Option<u64>,
}

impl StepReport {
    /// Latency at percentile `pct` (0..=100) from the stored list, if present.
    pub fn percentile(&self, pct: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| (p.pct - pct).abs() < 1e-9)
            .map(|p| p.ms)
    }
}

/// Errors by kind. Status errors are responses too (they count in `responses`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorCounts {
    pub connect: u64,
    pub timeout: u64,
    pub status_4xx: u64,
    pub status_5xx: u64,
    pub other: u64,
}

impl ErrorCounts {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.connect + self.timeout + self.status_4xx + self.status_5xx + self.other
    }

    /// Errors without any response.
    pub fn transport(&self) -> u64 {
        self.connect + self.timeout + self.other
    }

    pub(crate) fn add(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.timeout += o.timeout;
        self.status_4xx += o.status_4xx;
        self.status_5xx += o.status_5xx;
        self.other += o.other;
    }
}

/// Responses by status class.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusCounts {
    pub s2xx: u64,
    pub s3xx: u64,
    pub s4xx: u64,
    pub s5xx: u64,
    pub other: u64,
}

impl StatusCounts {
    pub(crate) fn add(&mut self, o: &StatusCounts) {
        self.s2xx += o.s2xx;
        self.s3xx += o.s3xx;
        self.s4xx += o.s4xx;
        self.s5xx += o.s5xx;
        self.other += o.other;
    }
}

/// Latency summary in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// Latency at one percentile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Percentile {
    pub pct: f64,
    pub ms: f64,
}

/// Responses and errors per fixed interval, for throughput-over-time charts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timeline {
    /// Offset of this step from the start of the run (warm-up excluded).
    pub start_s: f64,
    pub interval_s: f64,
    pub responses: Vec<u64>,
    pub errors: Vec<u64>,
}

/// The knee of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Knee {
    /// Step with the highest throughput.
    pub peak_concurrency: usize,
    pub peak_rps: f64,
    /// Lowest step whose throughput is within 5% of the peak: where adding clients
    /// stops adding throughput.
    #[serde(default)]
    pub saturated_concurrency: Option<usize>,
    /// p99 of the lowest-concurrency step.
    pub baseline_p99_ms: f64,
    /// First step whose p99 exceeds twice the baseline, if any.
    pub degraded_concurrency: Option<usize>,
    pub degraded_p99_ms: Option<f64>,
}

impl Report {
    /// Reads a report written by `--json`.
    pub fn read_json(path: &Path) -> Result<Report> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read report {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a levee bench JSON report (write one with --json FILE)",
                path.display()
            )
        })
    }

    /// Pretty JSON, the `--json` format.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).context("cannot serialize report")
    }

    /// Writes the report as JSON; `-` means stdout.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        let mut json = self.to_json()?;
        json.push('\n');
        write_out(path, json.as_bytes())
    }

    /// The step with the highest throughput.
    /// The step with the highest throughput; on a tie the lowest concurrency, as the
    /// knee reports it.
    pub fn peak(&self) -> Option<&StepReport> {
        self.steps
            .iter()
            .rev()
            .max_by(|a, b| a.rps.total_cmp(&b.rps))
    }
}

/// Writes to a file, or stdout for `-`, naming the file on failure.
pub(crate) fn write_out(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes).context("cannot write to stdout")?;
        return out.flush().context("cannot write to stdout");
    }
    std::fs::write(path, bytes).with_context(|| {
        format!(
            "cannot write {}: check that the directory exists and is writable",
            path.display()
        )
    })
}

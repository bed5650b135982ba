//! The `levee bench` command line: flags, their validation, and output routing.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::Method;

use crate::report::{csv, html, text, Report};
use crate::run::{run_blocking, Load, Stop};
use crate::sweep::{parse_sweep, MAX_CONCURRENCY};
use crate::target::{default_threads, Options, Order, Plan, RequestSpec};
use crate::urls::read_url_file;

const EXAMPLES: &str = "\
Examples:
  levee bench http://127.0.0.1:8080/ -c 64 -d 10s
  levee bench http://127.0.0.1:8080/ -n 10000 -c 16
  levee bench http://127.0.0.1:8080/ --rate 2000 -c 32 -d 30s      (open model, wrk2-style)
  levee bench -f urls.txt --random --cookie PHPSESSID=abc -c 50 -d 1m
  levee bench http://127.0.0.1:8080/ --sweep 1..256 -d 10s --html report.html --json run.json
  levee bench compare before.json after.json

--sweep takes a list (1,2,4,8) or a range: 1..256 doubles from 1 to 256,
10..1000:x10 multiplies by 10, 10..50:+10 adds 10; the end is always included.
Durations: 500ms, 10s, 2m, 1h (a bare number is seconds).";

/// Arguments of `levee bench`.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = EXAMPLES
)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub action: Option<BenchAction>,

    /// URL to load (http://host[:port]/path); not needed with -f.
    #[arg(value_name = "URL")]
    pub url: Option<String>,

    /// Concurrent connections (closed model), or connections the --rate is spread over.
    #[arg(
        short = 'c',
        long = "connections",
        value_name = "N",
        default_value_t = 50
    )]
    pub connections: usize,

    /// How long to run (each sweep step); default 10s unless -n is given.
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,

    /// Send exactly N requests (each sweep step), failed attempts included.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Worker threads [default: number of cores].
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,

    /// Open model: this many requests per second in total, latency measured from each
    /// request's intended start (coordinated-omission correct).
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,

    /// HTTP method [default: GET, or POST with a body].
    #[arg(short = 'm', long, value_name = "METHOD")]
    pub method: Option<String>,

    /// Extra request header, repeatable: -H 'Accept: text/html'.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Request body.
    #[arg(long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,

    /// Cookie sent on every request, repeatable: --cookie PHPSESSID=abc.
    #[arg(long = "cookie", value_name = "NAME=VALUE")]
    pub cookies: Vec<String>,

    /// Give up on a request after this long (counted as a timeout error).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Give up on connecting after this long (counted as a connect error).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Open a new connection for every request.
    #[arg(long)]
    pub no_keepalive: bool,

    /// Speak HTTP/2 with prior knowledge (h2c) instead of HTTP/1.1.
    #[arg(long, conflicts_with = "h3")]
    pub http2: bool,

    /// Speak HTTP/3 (QUIC) to https:// URLs: one QUIC connection per -c.
    #[arg(long)]
    pub h3: bool,

    /// With --h3: accept any certificate (a self-signed test server), as curl -k.
    #[arg(short = 'k', long, requires = "h3")]
    pub insecure: bool,

    /// URL list in siege's format: one URL per line, 'URL POST data' lines, # comments.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "url"
    )]
    pub file: Option<PathBuf>,

    /// Pick URLs from the -f list at random (default: in order).
    #[arg(long, requires = "file")]
    pub random: bool,

    /// Run one step per concurrency level: 1,2,4,8 or 1..256 (doubling); see below.
    #[arg(long, value_name = "LIST", conflicts_with = "connections")]
    pub sweep: Option<String>,

    /// Unmeasured warm-up before measuring [default: 1s with --sweep, else none].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Write the JSON report to FILE ('-' for stdout, replacing the text report).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write one CSV row per step to FILE ('-' for stdout, replacing the text report).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write a self-contained HTML report with charts to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Label stored in reports (shown by compare and the HTML page).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// No progress bar and no text report (files are still written).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Audit the URL with `levee doctor` first (what a cache can keep of it, and why);
    /// the audit goes into the HTML report.
    #[arg(long)]
    pub doctor: bool,

    /// Sections the caller adds to the reports (the doctor's audit).
    #[arg(skip)]
    pub appendix: Vec<crate::report::Appendix>,
}

/// Subcommands of `levee bench`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchAction {
    /// Print two JSON reports side by side with ratios (B/A).
    Compare {
        /// The baseline report (written with --json).
        a: PathBuf,
        /// The report to compare with it.
        b: PathBuf,
    },
}

/// Parses `500ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration; use e.g. 500ms, 10s, 2m or 1h"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}'; use ms, s, m or h (e.g. 10s)"
            ))
        }
    };
    if !secs.is_finite() || secs > 30.0 * 24.0 * 3600.0 {
        return Err(format!("'{s}' is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a `Name: value` header.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue)> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| anyhow!("bad header '{s}': expected 'Name: value'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| anyhow!("bad header '{s}': '{}' is not a header name", name.trim()))?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| {
        anyhow!("bad header '{s}': the value has characters not allowed in headers")
    })?;
    Ok((name, value))
}

/// A validated command, ready to run.
pub(crate) struct Prepared {
    pub(crate) plan: Arc<Plan>,
    pub(crate) load: Load,
}

/// Turns flags into a plan and a load, with a message saying what to fix on error.
pub(crate) fn prepare(cmd: &BenchCommand) -> Result<Prepared> {
    let mut headers = Vec::with_capacity(cmd.headers.len());
    for h in &cmd.headers {
        headers.push(parse_header(h)?);
    }
    for c in &cmd.cookies {
        if !c.contains('=') {
            bail!("bad --cookie '{c}': expected NAME=VALUE");
        }
    }
    let threads = cmd.threads.unwrap_or_else(default_threads);
    if threads == 0 || threads > 1024 {
        bail!("-t must be between 1 and 1024");
    }
    if cmd.timeout.is_zero() || cmd.connect_timeout.is_zero() {
        bail!("--timeout and --connect-timeout must be longer than zero");
    }
    let opts = Options {
        headers,
        cookies: cmd.cookies.clone(),
        keepalive: !cmd.no_keepalive,
        http2: cmd.http2,
        http3: cmd.h3,
        insecure: cmd.insecure,
        timeout: cmd.timeout,
        connect_timeout: cmd.connect_timeout,
        order: if cmd.random {
            Order::Random
        } else {
            Order::Sequential
        },
        threads,
    };
    let specs = match (&cmd.file, &cmd.url) {
        (Some(file), _) => {
            if cmd.body.is_some() || cmd.body_file.is_some() || cmd.method.is_some() {
                bail!(
                    "with -f, methods and bodies come from the URL file ('URL POST data'); \
                     drop -m/--body/--body-file"
                );
            }
            read_url_file(file)?
                .into_iter()
                .map(|e| RequestSpec {
                    url: e.url,
                    method: e.method,
                    form: e.body.is_some(),
                    body: e.body.unwrap_or_default(),
                })
                .collect()
        }
        (None, Some(url)) => {
            let body = match (&cmd.body, &cmd.body_file) {
                (Some(b), _) => Bytes::from(b.clone().into_bytes()),
                (None, Some(f)) => Bytes::from(std::fs::read(f).with_context(|| {
                    format!("cannot read --body-file {}: check the path", f.display())
                })?),
                (None, None) => Bytes::new(),
            };
            let has_body = cmd.body.is_some() || cmd.body_file.is_some();
            let method = match &cmd.method {
                Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| anyhow!("bad -m '{m}': expected a method like GET or POST"))?,
                None if has_body => Method::POST,
                None => Method::GET,
            };
            let url = if url.contains("://") {
                url.clone()
            } else {
                format!("http://{url}")
            };
            vec![RequestSpec {
                url,
                method,
                body,
                form: false,
            }]
        }
        (None, None) => bail!(
            "give a URL to load (e.g. levee bench http://127.0.0.1:8080/ -c 64 -d 10s) \
             or a URL list with -f FILE"
        ),
    };
    let concurrency = match &cmd.sweep {
        Some(s) => parse_sweep(s)?,
        None => {
            if cmd.connections == 0 || cmd.connections > MAX_CONCURRENCY {
                bail!("-c must be between 1 and {MAX_CONCURRENCY}");
            }
            vec![cmd.connections]
        }
    };
    let stop = match (cmd.requests, cmd.duration) {
        (Some(0), _) => bail!("-n must be at least 1"),
        (Some(n), _) => Stop::Count(n),
        (None, Some(d)) if d.is_zero() => bail!("-d must be longer than zero"),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    if let Some(r) = cmd.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be a positive number of requests per second");
        }
    }
    let warmup = cmd.warmup.unwrap_or(if cmd.sweep.is_some() {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    });
    let plan = Plan::build(specs, opts)?;
    Ok(Prepared {
        plan: Arc::new(plan),
        load: Load {
            concurrency,
            stop,
            rate: cmd.rate,
            warmup,
        },
    })
}

fn is_stdout(p: &Option<PathBuf>) -> bool {
    p.as_deref() == Some(Path::new("-"))
}

/// Runs the command and writes every requested output; returns the report too, so
/// tests can drive the CLI path without a process.
/// A command line `levee bench` cannot run (bad option, URL or URL file): the binary
/// exits 2 for it, as for any usage error, and 1 when the work itself fails.
#[derive(Debug)]
pub struct UsageError(pub anyhow::Error);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn execute(cmd: BenchCommand) -> Result<(ExitCode, Option<Report>)> {
    if let Some(BenchAction::Compare { a, b }) = &cmd.action {
        let ra = Report::read_json(a)?;
        let rb = Report::read_json(b)?;
        let names = (a.display().to_string(), b.display().to_string());
        print!("{}", crate::compare::render(&ra, &rb, (&names.0, &names.1)));
        return Ok((ExitCode::SUCCESS, None));
    }
    // What `prepare` refuses is the command line's fault: the caller exits 2 for it.
    let prepared = prepare(&cmd).map_err(|e| anyhow::Error::new(UsageError(e)))?;
    let tty = std::io::stderr().is_terminal();
    let show_progress = tty && !cmd.quiet;
    if show_progress {
        let what = match prepared.load.stop {
            Stop::Duration(d) => format!("for {}s", d.as_secs_f64()),
            Stop::Count(n) => format!("{n} requests"),
        };
        eprintln!(
            "Benchmarking {} ({} threads, {} {what}{})",
            prepared.plan.first_url(),
            prepared.plan.options().threads,
            if prepared.load.concurrency.len() > 1 {
                format!("{} steps of", prepared.load.concurrency.len())
            } else {
                format!("{} connections,", prepared.load.concurrency[0])
            },
            if prepared.load.concurrency.len() > 1 {
                " each"
            } else {
                ""
            }
        );
    }
    let mut report = run_blocking(prepared.plan, &prepared.load, show_progress)?;
    report.label = cmd.label.clone();
    report.appendix = cmd.appendix.clone();
    if let Some(p) = &cmd.json {
        report.write_json(p)?;
    }
    if let Some(p) = &cmd.csv {
        csv::write_csv(&report, p)?;
    }
    if let Some(p) = &cmd.html {
        html::write_html(&report, p)?;
    }
    if !cmd.quiet && !is_stdout(&cmd.json) && !is_stdout(&cmd.csv) {
        print!("{}", text::render(&report));
        for (what, p) in [("JSON", &cmd.json), ("CSV", &cmd.csv), ("HTML", &cmd.html)] {
            if let Some(p) = p {
                println!("{what} report written to {}", p.display());
            }
        }
    }
    let responses: u64 = report.steps.iter().map(|s| s.responses).sum();
    if responses == 0 {
        let e = report
            .steps
            .iter()
            .fold(crate::report::ErrorCounts::default(), |mut acc, s| {
                acc.add(&s.errors);
                acc
            });
        eprintln!(
            "levee bench: no response at all (connect errors: {}, timeouts: {}, other: {}); \
             is the server running at {}?",
            e.connect, e.timeout, e.other, report.config.url
        );
        return Ok((ExitCode::from(1), Some(report)));
    }
    Ok((ExitCode::SUCCESS, Some(report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10x").unwrap_err().contains("unit"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn headers() {
        let (n, v) = parse_header("X-Thing:  a: b ").unwrap();
        assert_eq!(n.as_str(), "x-thing");
        assert_eq!(v.to_str().unwrap(), "a: b");
        assert!(parse_header("nocolon").is_err());
        assert!(parse_header("bad name: x").is_err());
    }
}

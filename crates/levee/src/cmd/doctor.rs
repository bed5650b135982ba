//! `levee doctor`: audits a site (or this host, `--system`) and says what levee will do
//! with it and what to change. The audit itself is levee-doctor's; this is the command
//! line, the settings (resolved as `levee serve` resolves them) and the exit status:
//! 0 when the audit ran, whatever it found; 2 for bad arguments; 1 when the site cannot
//! be reached.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use levee_doctor::fetch::Url;
use levee_doctor::{report, system, Audit};

use super::serve::ServeArgs;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  levee doctor http://127.0.0.1:8080/\n  levee doctor --crawl 20 --preset wordpress http://example.com/\n  levee doctor -f urls.txt --json > audit.json\n  levee doctor --system --config levee.toml\n\nOnly GET requests are sent, without cookies, at most --rate per second; robots.txt is\nhonoured when crawling. Exit status: 0 the audit ran, 1 the site cannot be reached,\n2 bad arguments."
)]
pub struct DoctorArgs {
    /// Pages to audit (http://host/path).
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// Read more URLs from this file, one a line (# for comments).
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Follow same-host links from the URLs until N pages are audited.
    #[arg(long, value_name = "N")]
    pub crawl: Option<usize>,
    /// Requests per second at most.
    #[arg(long, value_name = "N", default_value_t = 4.0)]
    pub rate: f64,
    /// Time limit of each request, like 10s.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also trust the certificates in this PEM file for https:// URLs (a private CA).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Check this host's readiness for load (kernel limits, memory, php-fpm's pool).
    #[arg(long)]
    pub system: bool,
    /// levee's config file, as for levee serve: the verdicts follow it.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The backend levee would forward to, as for levee serve [default: the site itself].
    #[arg(long, short = 'b', value_name = "URL")]
    pub backend: Vec<String>,
    /// Application preset, as for levee serve; repeatable.
    #[arg(long, value_name = "NAME")]
    pub preset: Vec<String>,
    /// As for levee serve: cache anonymous HTML without freshness this long, like 3s.
    #[arg(long, value_name = "DURATION")]
    pub micro_cache: Option<String>,
    /// As for levee serve: store anonymous HTML pages this long, like 60s, or off.
    #[arg(long, value_name = "DURATION")]
    pub anonymous_ttl: Option<String>,
    /// As for levee serve: memory for cached responses, like 256MiB (--system).
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Check a document root: what levee alone would serve or run there that the
    /// application's nginx guide keeps from the web (its preset found from the files,
    /// or --preset), and PHP files under upload directories.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// A mistake in the command line (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DoctorUsage(pub String);

impl DoctorArgs {
    /// The flags as `levee serve` reads them: the same `ServeArgs::options`.
    fn serve_args(&self) -> ServeArgs {
        ServeArgs {
            config: self.config.clone(),
            backend: self.backend.clone(),
            preset: self.preset.clone(),
            micro_cache: self.micro_cache.clone(),
            anonymous_ttl: self.anonymous_ttl.clone(),
            cache_size: self.cache_size.clone(),
            ..ServeArgs::default()
        }
    }

    fn urls(&self) -> anyhow::Result<Vec<Url>> {
        let mut lines = self.urls.clone();
        if let Some(file) = &self.file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                DoctorUsage(format!("cannot read the URL file {}: {e}", file.display()))
            })?;
            lines.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string),
            );
        }
        let urls = lines
            .iter()
            .map(|u| Url::parse(u).map_err(DoctorUsage))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(first) = urls.first() {
            if let Some(other) = urls
                .iter()
                .find(|u| u.host != first.host || u.port != first.port)
            {
                return Err(DoctorUsage(format!(
                    "{other}: one site at a time: every URL must be on {}",
                    first.authority()
                ))
                .into());
            }
        }
        Ok(urls)
    }
}

pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    print!("{}", render(&args, colour)?);
    Ok(ExitCode::SUCCESS)
}

/// The text audit of `url` with the defaults, for `levee bench --doctor`'s report.
pub fn audit_text(url: &str) -> anyhow::Result<String> {
    let args = DoctorArgs {
        urls: vec![url.to_string()],
        file: None,
        crawl: None,
        rate: 4.0,
        timeout: "10s".into(),
        json: false,
        cacert: None,
        system: false,
        config: None,
        backend: Vec::new(),
        preset: Vec::new(),
        micro_cache: None,
        anonymous_ttl: None,
        cache_size: None,
        root: None,
    };
    render(&args, false)
}

/// `--root`: the document root's report, as text or JSON.
fn root_text(args: &DoctorArgs, dir: &std::path::Path) -> anyhow::Result<String> {
    let given = args
        .preset
        .iter()
        .map(|p| levee_config::Preset::parse(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| DoctorUsage(e.to_string()))?;
    let (presets, detected) = match given.is_empty() {
        true => (levee_doctor::root::detect(dir).into_iter().collect(), true),
        false => (given, false),
    };
    let report = levee_doctor::root::audit(dir, &presets, detected).map_err(DoctorUsage)?;
    Ok(match args.json {
        true => format!("{}\n", serde_json::to_string(&report)?),
        false => levee_doctor::root::text(&report),
    })
}

/// What `levee doctor` prints: the audit as text or JSON.
fn render(args: &DoctorArgs, colour: bool) -> anyhow::Result<String> {
    let urls = args.urls()?;
    if let Some(f) = args.cacert.as_ref().filter(|f| !f.is_file()) {
        return Err(DoctorUsage(format!(
            "--cacert {}: no such file; give the PEM file of the CA that signed the site's certificate",
            f.display()
        ))
        .into());
    }
    let root = match &args.root {
        Some(dir) => Some(root_text(args, dir)?),
        None => None,
    };
    if let (Some(text), true) = (&root, urls.is_empty() && !args.system) {
        return Ok(text.clone());
    }
    if urls.is_empty() && !args.system {
        return Err(DoctorUsage(
            "give the URL of a page to audit (levee doctor http://example.com/), -f FILE, or --system"
                .into(),
        )
        .into());
    }
    if !(args.rate > 0.0 && args.rate <= 100.0) {
        return Err(DoctorUsage(format!(
            "--rate {}: give requests per second between 0 and 100",
            args.rate
        ))
        .into());
    }
    let timeout = humantime::parse_duration(&args.timeout)
        .ok()
        .filter(|t| *t > Duration::ZERO)
        .ok_or_else(|| {
            DoctorUsage(format!(
                "--timeout {}: give a duration like 10s",
                args.timeout
            ))
        })?;
    let serve = args.serve_args();
    let flags = serve.options();
    // Without a backend, the site audited stands for it (or, for --system alone, a
    // placeholder: php-fpm's pool is then looked for only with a fastcgi backend).
    let placeholder = Url::parse("http://127.0.0.1/").map_err(DoctorUsage)?;
    let settings = levee_doctor::settings(
        args.config.as_deref(),
        &flags,
        urls.first().unwrap_or(&placeholder),
    )?;
    let checks = args
        .system
        .then(|| system::evaluate(&system::read(&settings), &settings));
    let Some(first) = urls.first().cloned() else {
        let checks = checks.unwrap_or_default();
        return Ok(match args.json {
            true => format!("{}\n", serde_json::json!({ "system": checks })),
            false => report::system_text(&checks, colour),
        });
    };
    let audit = Audit {
        urls,
        crawl: args.crawl.unwrap_or(0),
        rate: args.rate,
        timeout,
        max_body: 8 << 20,
        config: args.config.clone(),
        flags,
        ca: args.cacert.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let mut report = runtime
        .block_on(levee_doctor::run(&audit))
        .map_err(|e| anyhow::anyhow!("{first}: the site cannot be reached: {e}"))?;
    report.system = checks;
    Ok(match args.json {
        true => format!("{}\n", serde_json::to_string_pretty(&report)?),
        false => {
            let note = settings_note(args);
            let site = format!("{}://{}", first.scheme(), first.authority());
            report::text(&report, &site, &note, colour)
        }
    })
}

/// Which settings the verdicts follow, in the words of the command line.
fn settings_note(args: &DoctorArgs) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &args.config {
        parts.push(format!("--config {}", c.display()));
    }
    for p in &args.preset {
        parts.push(format!("--preset {p}"));
    }
    if let Some(m) = &args.micro_cache {
        parts.push(format!("--micro-cache {m}"));
    }
    if let Some(a) = &args.anonymous_ttl {
        parts.push(format!("--anonymous-ttl {a}"));
    }
    if parts.is_empty() {
        "levee serve's defaults (give --preset, --config... as to levee serve)".into()
    } else {
        parts.join(" ")
    }
}

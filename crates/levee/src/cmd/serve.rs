//! `levee serve`: flags → settings → bind → serve until SIGTERM/SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;

use levee_config::{
    AdminOptions, AppOptions, CacheOptions, CompressionOptions, LimitsOptions, LogOptions,
    OneOrMany, Options, Settings, TlsOptions, Workers,
};

/// Arguments of `levee serve`. Every flag overrides the same option in the config file.
#[derive(Debug, Default, clap::Args)]
#[command(
    after_help = "Examples:\n  levee serve --backend http://127.0.0.1:9000\n  levee serve --backend http://127.0.0.1:9000 --preset wordpress --micro-cache 3s\n  levee serve --backend fastcgi+unix:/run/php/php8.2-fpm.sock --root /var/www/html\n  levee serve --config levee.toml --check\n\nEvery option is documented in levee.example.toml."
)]
pub struct ServeArgs {
    /// The origin to forward to: http://127.0.0.1:9000, or php-fpm as
    /// fastcgi://127.0.0.1:9000 or fastcgi+unix:/run/php/php8.2-fpm.sock; repeat for
    /// several http:// servers of one application (balanced).
    #[arg(long, short = 'b', value_name = "URL")]
    pub backend: Vec<String>,
    /// Document root: static files are served from it directly; with a FastCGI backend
    /// the PHP scripts are found in it.
    #[arg(long, short = 'r', value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Address to listen on; repeat for several [default: 127.0.0.1:8080].
    #[arg(long, short = 'l', value_name = "ADDR")]
    pub listen: Vec<String>,
    /// HTTPS address to listen on (HTTP/2 by ALPN, then HTTP/1.1); repeat for several.
    #[arg(long, value_name = "ADDR")]
    pub listen_tls: Vec<String>,
    /// Certificate chain (PEM) for HTTPS; repeat with --tls-key, in pairs. The first is
    /// served to clients that send no name.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Vec<String>,
    /// The private key (PEM) of the --tls-cert of the same place.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Vec<String>,
    /// Redirect cleartext requests to https (301 for GET and HEAD, 308 for the rest).
    #[arg(long)]
    pub redirect_http: bool,
    /// Strict-Transport-Security on HTTPS responses, like "max-age=31536000".
    #[arg(long, value_name = "VALUE")]
    pub hsts: Option<String>,
    /// Get certificates from ACME (Let's Encrypt unless [tls] acme_directory says
    /// otherwise) for the sites' hosts that no --tls-cert covers; the CA's contact
    /// address. Agrees to the CA's terms of service.
    #[arg(long, value_name = "ADDRESS")]
    pub acme_email: Option<String>,
    /// TOML config file (see levee.example.toml for every option).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Application preset: wordpress, mediawiki, dokuwiki, drupal, xe, rhymix, gnuboard, moniwiki; repeatable.
    #[arg(long, value_name = "NAME")]
    pub preset: Vec<String>,
    /// Cache anonymous HTML without explicit freshness for this long, like 3s.
    #[arg(long, value_name = "DURATION")]
    pub micro_cache: Option<String>,
    /// Store anonymous HTML pages this long whatever the application's headers say
    /// (private, no-store, max-age=0), like 60s; `off` to disable what presets turn on.
    #[arg(long, value_name = "DURATION")]
    pub anonymous_ttl: Option<String>,
    /// Memory for cached responses, like 256MiB.
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Keep cached responses on disk too, in this directory: they survive restarts
    /// (the disk tier; off by default).
    #[arg(long, value_name = "PATH")]
    pub cache_disk: Option<String>,
    /// Most bytes the disk tier keeps, like 10GiB (default 1GiB).
    #[arg(long, value_name = "SIZE")]
    pub cache_disk_size: Option<String>,
    /// Share cached responses with other levee nodes through Redis, like
    /// redis://10.0.0.5:6379, redis+sentinel://h1:26379,h2:26379/mymaster
    /// (Sentinel), or repeated for a Redis Cluster's nodes (off by default).
    #[arg(long, value_name = "URL")]
    pub cache_redis: Vec<String>,
    /// How long stale content may be served when the backend fails, like 1h.
    #[arg(long, value_name = "DURATION")]
    pub grace: Option<String>,
    /// Most concurrent requests the backend will ever see, or "auto" (php-fpm's
    /// pm.max_children, an app pool's size, else adapted to the backend's latency).
    #[arg(long, value_name = "N|auto")]
    pub backend_max_concurrency: Option<String>,
    /// Share of the backend anonymous work (crawlers' lane) may hold while people's
    /// work waits, like 50% (100%: no cap).
    #[arg(long, value_name = "PERCENT")]
    pub backend_anonymous_share: Option<String>,
    /// A proxy in front of levee whose X-Forwarded-For names the client, like
    /// 10.0.0.0/8 (repeat for more).
    #[arg(long, value_name = "NET")]
    pub trusted_proxy: Vec<String>,
    /// Send responses uncompressed (no gzip, br or zstd).
    #[arg(long)]
    pub no_compression: bool,
    /// Threads serving connections [default: one per CPU core].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Serve levee's metrics (GET /metrics) on this separate address, like 127.0.0.1:9091.
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// Require `Authorization: Bearer TOKEN` on the admin listener.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "LEVEE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
    /// One line per request: combined (NCSA, as nginx writes it, plus cache result and
    /// times), json, or off.
    #[arg(long, value_name = "FORMAT")]
    pub access_log: Option<String>,
    /// Where the access log goes: a file (reopened on SIGUSR1) or - for standard output.
    #[arg(long, value_name = "PATH")]
    pub access_log_file: Option<String>,
    /// Run the application itself, kept warm: a command with {port}, like
    /// "php worker.php {port}" (instead of --backend).
    #[arg(long, value_name = "COMMAND", conflicts_with = "backend")]
    pub app: Option<String>,
    /// How many processes of --app to run [default: 4].
    #[arg(long, value_name = "N")]
    pub app_processes: Option<usize>,
    /// Add X-Cache-Reason: why a response was or was not stored.
    #[arg(long)]
    pub debug_headers: bool,
    /// Validate the configuration, print it, and exit.
    #[arg(long)]
    pub check: bool,
}

impl ServeArgs {
    /// The flags as options: the one place a flag names the option it sets. They are
    /// merged over the config file and the defaults by `levee_config` (see options.rs).
    pub fn options(&self) -> Options {
        Options {
            listen: OneOrMany::from_flags(&self.listen),
            listen_tls: OneOrMany::from_flags(&self.listen_tls),
            tls: TlsOptions {
                cert: (!self.tls_cert.is_empty()).then(|| self.tls_cert.clone()),
                key: (!self.tls_key.is_empty()).then(|| self.tls_key.clone()),
                redirect_http: self.redirect_http.then_some(true),
                hsts: self.hsts.clone(),
                acme_email: self.acme_email.clone(),
                ..TlsOptions::default()
            },
            backend: OneOrMany::from_flags(&self.backend),
            root: self.root.clone(),
            preset: OneOrMany::from_flags(&self.preset),
            // A switch given is a value; not given leaves the file's.
            debug_headers: self.debug_headers.then_some(true),
            workers: self.workers.map(Workers::Count),
            cache: CacheOptions {
                micro_cache: self.micro_cache.clone(),
                anonymous_ttl: self.anonymous_ttl.clone(),
                size: self.cache_size.clone(),
                grace: self.grace.clone(),
                disk_path: self.cache_disk.clone(),
                disk_size: self.cache_disk_size.clone(),
                redis: OneOrMany::from_flags(&self.cache_redis),
                ..CacheOptions::default()
            },
            limits: LimitsOptions {
                backend_max_concurrency: self.backend_max_concurrency.as_deref().map(|v| {
                    v.parse()
                        .map_or_else(|_| Workers::Word(v.to_string()), Workers::Count)
                }),
                backend_anonymous_share: self.backend_anonymous_share.clone(),
                trusted_proxies: (!self.trusted_proxy.is_empty())
                    .then(|| self.trusted_proxy.clone()),
                ..LimitsOptions::default()
            },
            compression: CompressionOptions {
                enabled: self.no_compression.then_some(false),
                ..CompressionOptions::default()
            },
            admin: AdminOptions {
                listen: self.admin_listen.clone(),
                token: self.admin_token.clone(),
            },
            app: AppOptions {
                command: self.app.clone(),
                processes: self.app_processes,
                ..AppOptions::default()
            },
            log: LogOptions {
                access: self.access_log.clone(),
                access_file: self.access_log_file.clone(),
            },
            ..Options::default()
        }
    }

    pub fn settings(&self) -> Result<Settings, levee_config::ConfigError> {
        Settings::load(self.config.as_deref(), self.options())
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    if args.check {
        // The certificates are read and checked as serving would (exit 2 on a bad one).
        // (None with ACME alone: its certificates come while serving.)
        let pairs = levee_proxy::cert_pairs(&settings, &settings.sites);
        if !pairs.is_empty() {
            levee_tls::CertStore::load(&pairs, levee_tls::Settings::default())?;
        }
        // A Redis URL levee cannot read is the configuration's error (exit 2), not Redis
        // being down.
        if !settings.cache.redis.is_empty() {
            levee_redis::check_urls(&settings.cache.redis)?;
        }
        print_settings(&settings);
        print_fleets(&settings);
        return Ok(ExitCode::SUCCESS);
    }
    let backend = settings
        .sites
        .iter()
        .map(|s| s.backend.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let workers = settings.workers;
    // A reload re-reads the same file under the same flags.
    let config = args.config.clone();
    let flags = args.options();
    let reloader: levee_proxy::Reloader = Box::new(move || {
        Settings::load(config.as_deref(), flags.clone()).map_err(|e| e.to_string())
    });
    levee_proxy::serve_workers(
        settings,
        workers,
        |bound| {
            for addr in &bound.traffic {
                tracing::info!(%addr, %backend, workers, "levee serving");
                eprintln!("levee: listening on http://{addr}, backend {backend}");
            }
            for addr in &bound.tls {
                eprintln!("levee: listening on https://{addr}, backend {backend}");
            }
            for addr in &bound.quic {
                eprintln!("levee: HTTP/3 on UDP {addr} (open it in the firewall too)");
            }
            eprintln!("levee: backend limit {}", bound.backend_limit);
            if let Some(addr) = bound.admin {
                eprintln!("levee: admin listening on http://{addr} (GET /metrics, POST /purge, POST /reload)");
            }
        },
        shutdown_signal(),
        Some(reloader),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Every setting as levee resolved it (`Settings::describe`: the option names of the
/// config file), the process's first, then each site's; written at once, so that a
/// closed standard output (`| head`) is not an error worth a panic.
fn print_settings(s: &Settings) {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "configuration is valid");
    let mut site = None;
    for d in s.describe() {
        if d.site != site {
            if let Some(name) = &d.site {
                let _ = writeln!(out, "\n[site {name}]");
            }
            site = d.site.clone();
        }
        let indent = if site.is_some() { "  " } else { "" };
        let _ = writeln!(out, "{indent}{:<34} {}", d.option, d.value);
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
}

/// With the Redis tier: whether Redis answers, and each backend's fleet as its leases
/// there say (levee-limits' fleet.rs). Never fails the check: Redis down is no error
/// in the configuration, and levee serves without it.
fn print_fleets(s: &Settings) {
    if s.cache.redis.is_empty() {
        return;
    }
    let shown = s
        .cache
        .redis
        .iter()
        .map(|u| levee_redis::url_for_logs(u))
        .collect::<Vec<_>>()
        .join(", ");
    let read = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(levee_redis::read_fleets(
                &s.cache.redis,
                "levee:",
                std::time::Duration::from_secs(3),
            ))
        });
    let view = match read {
        Ok(v) => v,
        Err(e) => {
            println!("\nfleet: Redis at {shown} is unreachable ({e}); each node then runs on its part of the backend alone");
            return;
        }
    };
    let reached = match view.mode {
        levee_redis::Mode::Server => String::new(),
        levee_redis::Mode::Sentinel => {
            format!(", through Sentinel: primary {}", view.primaries.join(", "))
        }
        levee_redis::Mode::Cluster => format!(
            ", a Cluster of {} primaries: {}",
            view.primaries.len(),
            view.primaries.join(", ")
        ),
    };
    println!("\nfleet: Redis at {shown} is reachable{reached}");
    let fleets = view.fleets;
    if fleets.iter().all(|f| f.nodes.is_empty()) {
        println!("  no levee node holds a lease on a backend now");
    }
    for f in fleets.iter().filter(|f| !f.nodes.is_empty()) {
        let reports: Vec<_> = f
            .nodes
            .iter()
            .map(|(node, grant, line)| (node, grant, levee_limits::fleet::Report::from_line(line)))
            .collect();
        let capacity = reports
            .iter()
            .filter_map(|(_, _, r)| r.as_ref().map(|r| r.capacity))
            .min()
            .unwrap_or(0);
        let in_flight: usize = reports
            .iter()
            .filter_map(|(_, _, r)| r.as_ref().map(|r| r.in_use))
            .sum();
        let waiting: usize = reports
            .iter()
            .filter_map(|(_, _, r)| r.as_ref().map(|r| r.people_waiting))
            .sum();
        // The scope is `site|path|backend` (levee-proxy's shared.rs names it so).
        let mut parts = f.scope.splitn(3, '|');
        let (site, path, backend) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        println!(
            "  site {site}, {path} -> {backend}: {} node(s) alive, capacity {capacity}, {in_flight} in flight, {waiting} people's request(s) waiting",
            f.nodes.len()
        );
        for (node, grant, r) in reports {
            match r {
                Some(r) => println!(
                    "    node {node}: share {grant}, {} in flight, {} people's waiting, {} anonymous in flight or waiting",
                    r.in_use, r.people_waiting, r.anonymous
                ),
                None => println!("    node {node}: share {grant} (a report levee cannot read)"),
            }
        }
    }
}

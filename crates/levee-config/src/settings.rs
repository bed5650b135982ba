//! The validated settings `levee serve` runs with, and the one conversion from
//! [`Options`] to them: every value is parsed and checked here, before a port is bound,
//! so that a mistake is reported with a message that says what to change. No default is
//! named here: they all come from [`DEFAULTS`](crate::options::DEFAULTS).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::duration::{parse_duration, parse_size};
use crate::options::{Combine, OneOrMany, Options, Workers};
use crate::{AppSettings, Backend, ConfigError, CookieMatcher, PathMatcher, Preset};

/// The cache: size, freshness rules and stale serving.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Bound on the bytes of stored responses (bodies and headers).
    pub size: u64,
    /// Larger responses pass through unstored.
    pub max_object_size: u64,
    /// Whether heuristic freshness (RFC 9111 §4.2.2) is used when a response has none.
    pub heuristic: bool,
    /// Fraction of the time since `Last-Modified` used as heuristic lifetime.
    pub heuristic_fraction: f64,
    /// Upper bound on a heuristic lifetime.
    pub heuristic_max: Duration,
    /// TTL given to anonymous HTML responses that carry no explicit freshness.
    pub micro_cache: Option<Duration>,
    /// TTL of anonymous HTML pages whatever the application's headers say (private,
    /// no-store, max-age=0, PHP's session headers); off unless set or a preset is used.
    pub anonymous_ttl: Option<Duration>,
    /// How long past its freshness a response may be served when the backend fails.
    pub grace: Duration,
    /// How long a key whose response was not cacheable goes straight to the backend.
    pub hit_for_miss: Duration,
    /// How long a stale response with validators is kept for conditional revalidation.
    pub keep: Duration,
}

/// Which requests are anonymous and which must always pass.
#[derive(Debug, Clone)]
pub struct AnonymousSettings {
    pub session_cookies: CookieMatcher,
    pub pass_paths: PathMatcher,
    /// Names of the presets in effect, for `--check` output.
    pub presets: Vec<Preset>,
    /// What a successful edit (an unsafe request with a session) makes stale.
    pub edit_invalidation: EditInvalidation,
}

/// What a successful unsafe request (POST, PUT, DELETE...) that carries a session makes
/// stale, so that anonymous readers see an edit at once rather than after a TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditInvalidation {
    /// Every stored HTML page of the host, softly (validated on next request, behind
    /// coalescing; served stale within grace if the backend fails). An edit arrives as
    /// a POST to a URL that is not the page (WordPress REST, MediaWiki's api.php,
    /// DokuWiki's doku.php), so the page cannot be named in general: the safe default.
    Host,
    /// Only the request's own URL and its same-origin `Location`/`Content-Location`
    /// (RFC 9111 §4.4), which levee always does.
    Url,
}

/// Limits and timeouts that keep one client or a slow backend from taking levee down.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub max_header_bytes: usize,
    pub max_headers: usize,
    /// Time a client has to send a request's headers; also the keep-alive idle limit.
    pub header_timeout: Duration,
    pub backend_connect_timeout: Duration,
    pub backend_first_byte_timeout: Duration,
    /// Longest pause between two pieces of a backend's response body.
    pub backend_read_timeout: Duration,
    /// Concurrent requests the backend may see, at most.
    pub backend_max_concurrency: BackendLimit,
    /// Share of the backend's slots kept for requests with a session cookie or
    /// Authorization (0.0 to 1.0).
    pub backend_session_share: f64,
    /// Requests that may wait for a backend slot; more are refused at once.
    pub backend_queue: usize,
    /// Longest wait for a backend slot.
    pub backend_queue_timeout: Duration,
    /// Longest wait for in-flight requests after SIGTERM.
    pub shutdown_timeout: Duration,
}

/// Files served from the document root without asking the backend.
#[derive(Debug, Clone)]
pub struct StaticSettings {
    /// Index files tried for a directory, in order.
    pub index: Vec<String>,
    /// Extensions of long-lived assets (lowercase, no dot): they get `asset_max_age`.
    pub asset_extensions: Vec<String>,
    pub asset_max_age: Duration,
    /// Memory for small hot files, so that they are not read on every request.
    pub memory: u64,
    /// Larger files stream from disk.
    pub memory_max_file: u64,
}

/// How PHP is reached over FastCGI.
#[derive(Debug, Clone)]
pub struct FastCgiSettings {
    /// The front controller: requests for paths that are neither a file nor a script go
    /// to it (nginx's `try_files $uri $uri/ /index.php?$args`). Empty: answer 404.
    pub index: String,
    /// Idle connections kept open for reuse (0: a connection per request, like nginx's
    /// default). Each holds a php-fpm worker while idle, so keep it below
    /// `pm.max_children`.
    pub keep_alive: usize,
    /// A request body without Content-Length (chunked) is read whole before it goes to
    /// php, which needs its length; larger ones get 413.
    pub max_unsized_body: u64,
    /// php-fpm's configuration, to read the pool's `pm.max_children` from when
    /// `backend_max_concurrency = "auto"`; found on its own when unset.
    pub pool_config: Option<PathBuf>,
}

/// How many requests the backend sees at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendLimit {
    Fixed(usize),
    /// An app pool's processes × concurrency; php-fpm's `pm.max_children`; else
    /// adapted to the backend's latency.
    Auto,
}

impl std::fmt::Display for BackendLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendLimit::Fixed(n) => write!(f, "{n}"),
            BackendLimit::Auto => f.write_str("auto"),
        }
    }
}

/// Response compression.
#[derive(Debug, Clone)]
pub struct CompressionSettings {
    pub enabled: bool,
    /// Smaller bodies are sent as they are.
    pub min_size: u64,
    /// The coding stored objects are kept in: `gzip`, `br` or `zstd`.
    pub store: String,
    /// Memory for other codings of stored objects (and their decoded form), made on
    /// demand for clients that do not accept the stored one.
    pub transcode_memory: u64,
}

/// Everything `levee serve` needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: Vec<SocketAddr>,
    pub backend: Backend,
    /// The document root: static files are served from it (and PHP scripts found in it
    /// with a FastCGI backend).
    pub root: Option<PathBuf>,
    pub static_files: StaticSettings,
    pub fastcgi: FastCgiSettings,
    pub compression: CompressionSettings,
    pub cache: CacheSettings,
    pub anonymous: AnonymousSettings,
    pub limits: Limits,
    /// Adds `X-Cache-Reason` explaining why a response was not stored.
    pub debug_headers: bool,
    /// Threads serving connections, each with its own listening socket; one per core
    /// by default.
    pub workers: usize,
    pub admin: AdminSettings,
    pub purge: PurgeSettings,
    /// One line per request, when on.
    pub access_log: Option<AccessLog>,
}

/// `[log] access` and `access_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    pub format: AccessLogFormat,
    /// `None`: standard output.
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// NCSA combined, then `cache=… backend=… total=…`.
    Combined,
    /// One JSON object per line.
    Json,
}

/// The admin listener: levee's own state (metrics) and purges, apart from the traffic.
#[derive(Debug, Clone, Default)]
pub struct AdminSettings {
    /// Off when unset.
    pub listen: Option<SocketAddr>,
    /// When set, every admin request needs `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
}

/// The `PURGE` method on the traffic port (Varnish's convention, MediaWiki's
/// `$wgCdnServers`): only from these networks.
#[derive(Debug, Clone, Default)]
pub struct PurgeSettings {
    pub allow: Vec<ipnet::IpNet>,
}

impl PurgeSettings {
    pub fn allows(&self, ip: std::net::IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|net| net.contains(&ip))
    }
}

/// More worker threads than this is a typo, not a machine.
const MAX_WORKERS: usize = 1024;

/// A value the merged options must have: the defaults table provides every one, so a
/// missing one is levee's bug, reported rather than panicking.
fn need<T>(value: Option<T>, option: &'static str) -> Result<T, ConfigError> {
    value.ok_or_else(|| {
        ConfigError::invalid(
            option,
            "no value and no built-in default (a bug in levee: please report it)",
        )
    })
}

fn duration(option: &'static str, value: Option<String>) -> Result<Duration, ConfigError> {
    parse_duration(option, &need(value, option)?)
}

fn size(option: &'static str, value: Option<String>) -> Result<u64, ConfigError> {
    parse_size(option, &need(value, option)?)
}

/// A duration that may be switched off with `off` or `0`.
fn optional_duration(
    option: &'static str,
    value: Option<String>,
) -> Result<Option<Duration>, ConfigError> {
    match need(value, option)?.as_str() {
        "off" | "0" | "0s" => Ok(None),
        s => parse_duration(option, s).map(Some),
    }
}

/// "25%" → 0.25.
fn percent(option: &'static str, s: &str) -> Result<f64, ConfigError> {
    s.trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|n| (0.0..=100.0).contains(n))
        .map(|n| n / 100.0)
        .ok_or_else(|| {
            ConfigError::invalid(option, format!("{s:?} is not a percentage like \"25%\""))
        })
}

fn positive(option: &'static str, v: Option<usize>) -> Result<usize, ConfigError> {
    match need(v, option)? {
        0 => Err(ConfigError::invalid(option, "must be at least 1")),
        v => Ok(v),
    }
}

fn address(option: &'static str, s: &str, example: &str) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|_| {
        ConfigError::invalid(
            option,
            format!("`{s}` is not an address; write it like {example}"),
        )
    })
}

impl Settings {
    /// Reads the config file (if any) and resolves it under `flags`, over the defaults.
    pub fn load(config: Option<&Path>, flags: Options) -> Result<Settings, ConfigError> {
        let file = match config {
            Some(path) => Options::read(path)?,
            None => Options::default(),
        };
        Settings::from_options(flags.combine(file))
    }

    /// Validates `options` (flags and file, already merged) with the defaults filling
    /// whatever they leave unset.
    pub fn from_options(options: Options) -> Result<Settings, ConfigError> {
        // Presets turn the anonymous TTL on, unless the flags or the file say otherwise.
        let anonymous_ttl_set = options.cache.anonymous_ttl.is_some();
        let o = options.combine(Options::defaults());

        let mut listen = Vec::new();
        for l in need(o.listen, "listen")?.into_vec() {
            listen.push(address("listen", &l, "127.0.0.1:8080 or [::1]:8080")?);
        }
        if listen.is_empty() {
            return Err(ConfigError::invalid(
                "listen",
                "at least one address is needed",
            ));
        }

        let backend = match (o.backend, o.app.command) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    "app.command",
                    "give either a backend (--backend) or an app command (--app), not both",
                ))
            }
            (Some(b), None) => Backend::parse(&b)?,
            (None, Some(command)) => {
                if !command.contains("{port}") {
                    return Err(ConfigError::invalid(
                        "app.command",
                        format!("`{command}` has no {{port}} placeholder: levee gives each process its own port; write it like `php worker.php {{port}}`"),
                    ));
                }
                let processes = need(o.app.processes, "app.processes")?;
                let concurrency = need(o.app.concurrency, "app.concurrency")?;
                if processes == 0 || processes > MAX_WORKERS || concurrency == 0 {
                    return Err(ConfigError::invalid(
                        "app.processes",
                        format!("{processes} process(es) of {concurrency} request(s) each: both must be at least 1 (and processes at most {MAX_WORKERS})"),
                    ));
                }
                Backend::App(AppSettings {
                    command,
                    processes,
                    concurrency,
                    ready_timeout: duration("app.ready_timeout", o.app.ready_timeout)?,
                    request_timeout: duration("app.request_timeout", o.app.request_timeout)?,
                    max_requests: need(o.app.max_requests, "app.max_requests")?,
                    max_memory: match need(o.app.max_memory, "app.max_memory")?.as_str() {
                        "off" | "0" => 0,
                        m => parse_size("app.max_memory", m)?,
                    },
                    max_age: optional_duration("app.max_age", o.app.max_age)?,
                    watch: need(o.app.watch, "app.watch")?
                        .into_iter()
                        .map(PathBuf::from)
                        .collect(),
                    cwd: match o.app.cwd {
                        Some(d) if !d.is_dir() => {
                            return Err(ConfigError::invalid(
                                "app.cwd",
                                format!("{} is not a directory", d.display()),
                            ))
                        }
                        d => d,
                    },
                    env: o.app.env.unwrap_or_default().into_iter().collect(),
                })
            }
            (None, None) => return Err(ConfigError::NoBackend),
        };
        let root = o.root;
        if let Some(r) = &root {
            if !r.is_dir() {
                return Err(ConfigError::invalid(
                    "root",
                    format!("{} is not a directory; give the site's document root (where index.php or index.html is)", r.display()),
                ));
            }
        }
        if matches!(backend, Backend::FastCgi(_)) && root.is_none() {
            return Err(ConfigError::invalid(
                "root",
                "a FastCGI backend needs the document root: pass `--root /var/www/html` or set `root = \"...\"` (the directory php-fpm finds the scripts in)",
            ));
        }

        let st = o.static_files;
        let static_files = StaticSettings {
            index: need(st.index, "static.index")?,
            asset_extensions: need(st.asset_extensions, "static.asset_extensions")?
                .into_iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            asset_max_age: duration("static.asset_max_age", st.asset_max_age)?,
            memory: size("static.memory", st.memory)?,
            memory_max_file: size("static.memory_max_file", st.memory_max_file)?,
        };

        let fc = o.fastcgi;
        let fastcgi = FastCgiSettings {
            index: need(fc.index, "fastcgi.index")?,
            keep_alive: need(fc.keep_alive, "fastcgi.keep_alive")?,
            max_unsized_body: size("fastcgi.max_unsized_body", fc.max_unsized_body)?,
            pool_config: match fc.pool_config {
                Some(f) if !f.is_file() => {
                    return Err(ConfigError::invalid(
                        "fastcgi.pool_config",
                        format!("{} is not a file; give php-fpm's configuration (php-fpm.conf or the pool's file)", f.display()),
                    ))
                }
                f => f,
            },
        };
        if fastcgi.index.contains('/') || fastcgi.index.starts_with('.') {
            return Err(ConfigError::invalid(
                "fastcgi.index",
                "give a file name in the document root, like index.php",
            ));
        }

        let cz = o.compression;
        let compression = CompressionSettings {
            enabled: need(cz.enabled, "compression.enabled")?,
            min_size: size("compression.min_size", cz.min_size)?,
            store: need(cz.store, "compression.store")?,
            transcode_memory: size("compression.transcode_memory", cz.transcode_memory)?,
        };
        if !matches!(compression.store.as_str(), "gzip" | "br" | "zstd") {
            return Err(ConfigError::invalid(
                "compression.store",
                format!("`{}` is not one of gzip, br, zstd", compression.store),
            ));
        }

        let presets = o
            .preset
            .map(OneOrMany::into_vec)
            .unwrap_or_default()
            .iter()
            .map(|name| Preset::parse(name))
            .collect::<Result<Vec<_>, _>>()?;

        let c = o.cache;
        let micro_cache = optional_duration("micro_cache", c.micro_cache)?;
        let anonymous_ttl = match optional_duration("cache.anonymous_ttl", c.anonymous_ttl)? {
            // The shortest of the presets' own: the most careful of the applications.
            None if !anonymous_ttl_set => presets.iter().map(|p| p.anonymous_ttl()).min(),
            ttl => ttl,
        };
        let heuristic_fraction = need(c.heuristic_fraction, "cache.heuristic_fraction")?;
        if !(0.0..=1.0).contains(&heuristic_fraction) {
            return Err(ConfigError::invalid(
                "cache.heuristic_fraction",
                "must be between 0.0 and 1.0 (the RFC suggests 0.1)",
            ));
        }
        let cache = CacheSettings {
            size: size("cache.size", c.size)?,
            max_object_size: size("cache.max_object_size", c.max_object_size)?,
            heuristic: need(c.heuristic, "cache.heuristic")?,
            heuristic_fraction,
            heuristic_max: duration("cache.heuristic_max", c.heuristic_max)?,
            micro_cache,
            anonymous_ttl,
            grace: duration("cache.grace", c.grace)?,
            hit_for_miss: duration("cache.hit_for_miss", c.hit_for_miss)?,
            keep: duration("cache.keep", c.keep)?,
        };
        if cache.max_object_size > cache.size {
            return Err(ConfigError::invalid(
                "cache.max_object_size",
                "must not exceed cache.size",
            ));
        }

        let a = o.anonymous;
        let mut cookies = need(a.session_cookies, "anonymous.session_cookies")?;
        cookies.extend(need(
            a.extra_session_cookies,
            "anonymous.extra_session_cookies",
        )?);
        let mut pass = need(a.pass_paths, "anonymous.pass_paths")?;
        for p in &presets {
            cookies.extend(p.session_cookies().iter().map(|s| s.to_string()));
            pass.extend(p.pass_paths().iter().map(|s| s.to_string()));
        }
        let edit_invalidation =
            match need(a.edit_invalidation, "anonymous.edit_invalidation")?.as_str() {
                "host" => EditInvalidation::Host,
                "url" => EditInvalidation::Url,
                other => {
                    return Err(ConfigError::invalid(
                        "anonymous.edit_invalidation",
                        format!("`{other}` is not one of host, url"),
                    ))
                }
            };
        let anonymous = AnonymousSettings {
            session_cookies: CookieMatcher::new(&cookies)?,
            pass_paths: PathMatcher::new(&pass)?,
            presets,
            edit_invalidation,
        };

        let l = o.limits;
        let limits = Limits {
            max_connections: positive("limits.max_connections", l.max_connections)?,
            max_header_bytes: usize::try_from(size("limits.max_header_bytes", l.max_header_bytes)?)
                .unwrap_or(usize::MAX),
            max_headers: positive("limits.max_headers", l.max_headers)?,
            header_timeout: duration("limits.header_timeout", l.header_timeout)?,
            backend_connect_timeout: duration(
                "limits.backend_connect_timeout",
                l.backend_connect_timeout,
            )?,
            backend_first_byte_timeout: duration(
                "limits.backend_first_byte_timeout",
                l.backend_first_byte_timeout,
            )?,
            backend_read_timeout: duration("limits.backend_read_timeout", l.backend_read_timeout)?,
            backend_max_concurrency: match need(
                l.backend_max_concurrency,
                "limits.backend_max_concurrency",
            )? {
                Workers::Count(0) => {
                    return Err(ConfigError::invalid(
                        "limits.backend_max_concurrency",
                        "must be at least 1, or \"auto\"",
                    ))
                }
                Workers::Count(n) => BackendLimit::Fixed(n),
                Workers::Word(w) if w.eq_ignore_ascii_case("auto") => BackendLimit::Auto,
                Workers::Word(w) => {
                    return Err(ConfigError::invalid(
                        "limits.backend_max_concurrency",
                        format!("{w:?} is not a number; write a number, or \"auto\" (php-fpm's pm.max_children, or adapted to the backend's latency)"),
                    ))
                }
            },
            backend_session_share: percent(
                "limits.backend_session_share",
                &need(l.backend_session_share, "limits.backend_session_share")?,
            )?,
            backend_queue: need(l.backend_queue, "limits.backend_queue")?,
            backend_queue_timeout: duration(
                "limits.backend_queue_timeout",
                l.backend_queue_timeout,
            )?,
            shutdown_timeout: duration("limits.shutdown_timeout", l.shutdown_timeout)?,
        };
        if limits.max_header_bytes < 8192 {
            return Err(ConfigError::invalid(
                "limits.max_header_bytes",
                "must be at least 8KiB",
            ));
        }

        let workers = match need(o.workers, "workers")? {
            Workers::Count(n) => n,
            Workers::Word(w) if w.eq_ignore_ascii_case("auto") => 0,
            Workers::Word(w) => {
                return Err(ConfigError::invalid(
                    "workers",
                    format!("{w:?} is not a number of threads; write a number, or \"auto\" for one per core"),
                ))
            }
        };
        // 0 and "auto" mean one per core.
        let workers = match workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n.min(MAX_WORKERS),
        };

        let admin = AdminSettings {
            listen: match o.admin.listen {
                Some(l) => Some(address("admin.listen", &l, "127.0.0.1:9091 or [::1]:9091")?),
                None => None,
            },
            token: match o.admin.token {
                Some(t) if t.trim().is_empty() => {
                    return Err(ConfigError::invalid(
                        "admin.token",
                        "the token is empty; remove the line to run without one",
                    ))
                }
                t => t,
            },
        };
        let mut allow = Vec::new();
        for a in need(o.purge.allow, "purge.allow")? {
            let net = a
                .parse::<ipnet::IpNet>()
                .or_else(|_| a.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    ConfigError::invalid(
                        "purge.allow",
                        format!("`{a}` is not an address or network; write it like 127.0.0.1, 10.0.0.0/8 or ::1/128"),
                    )
                })?;
            allow.push(net);
        }
        let purge = PurgeSettings { allow };
        let format = match need(o.log.access, "log.access")?.as_str() {
            "off" => None,
            "combined" => Some(AccessLogFormat::Combined),
            "json" => Some(AccessLogFormat::Json),
            other => {
                return Err(ConfigError::invalid(
                    "log.access",
                    format!(
                        "`{other}` is not a log format; write \"combined\", \"json\" or \"off\""
                    ),
                ))
            }
        };
        let access_log = format.map(|format| AccessLog {
            format,
            file: o
                .log
                .access_file
                .filter(|f| f != "-" && !f.is_empty())
                .map(PathBuf::from),
        });

        Ok(Settings {
            listen,
            backend,
            root,
            static_files,
            fastcgi,
            compression,
            cache,
            anonymous,
            limits,
            debug_headers: need(o.debug_headers, "debug_headers")?,
            workers,
            admin,
            purge,
            access_log,
        })
    }
}

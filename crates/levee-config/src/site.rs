//! One site's settings: the hosts it answers and everything that serves them (backend,
//! document root, FastCGI, presets, session cookies, cache rules). A request resolves
//! its site once; the phases read the site's settings. Today there is one site, built
//! from the flags and the file's top-level tables.

use std::path::PathBuf;
use std::time::Duration;

use crate::convert::{duration, need, optional_duration, size, MAX_WORKERS};
use crate::duration::parse_size;
use crate::options::{
    AnonymousOptions, AppOptions, CacheOptions, FastCgiOptions, OneOrMany, Options, StaticOptions,
};
use crate::{AppSettings, Backend, ConfigError, CookieMatcher, PathMatcher, Preset};

/// One site.
#[derive(Debug, Clone)]
pub struct Site {
    /// How the site is named in the log, the metrics and `--check` ("default").
    pub name: String,
    /// The hosts it answers (lowercase, no port); empty: every host.
    pub hosts: Vec<String>,
    pub backend: Backend,
    /// The document root: static files are served from it (and PHP scripts found in it
    /// with a FastCGI backend).
    pub root: Option<PathBuf>,
    pub static_files: StaticSettings,
    pub fastcgi: FastCgiSettings,
    pub anonymous: AnonymousSettings,
    pub cache: CacheRules,
}

/// What may be stored for a site, how long it is fresh, how long served stale (the
/// `[cache]` options other than the store's size).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheRules {
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

/// Files served from the document root without asking the backend.
#[derive(Debug, Clone, PartialEq)]
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
    /// Sent with every request, replacing levee's own parameter of the same name.
    pub params: Vec<(String, String)>,
}

impl Site {
    /// The one site of a configuration without `[[site]]` tables: every host, from the
    /// top-level options. `anonymous_ttl_set`: the flags or the file set
    /// `cache.anonymous_ttl` (otherwise presets turn it on).
    pub(crate) fn default_from(o: &Options, anonymous_ttl_set: bool) -> Result<Site, ConfigError> {
        let backend = backend(o.backend.clone(), &o.app)?;
        let root = o.root.clone();
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
        let presets = o
            .preset
            .clone()
            .map(OneOrMany::into_vec)
            .unwrap_or_default()
            .iter()
            .map(|name| Preset::parse(name))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Site {
            name: "default".into(),
            hosts: Vec::new(),
            backend,
            root,
            static_files: StaticSettings::from_options(o.static_files.clone())?,
            fastcgi: FastCgiSettings::from_options(o.fastcgi.clone())?,
            cache: CacheRules::from_options(o.cache.clone(), &presets, anonymous_ttl_set)?,
            anonymous: AnonymousSettings::from_options(o.anonymous.clone(), presets)?,
        })
    }

    /// Whether this site answers `host` (lowercase, without port).
    pub fn answers(&self, host: &str) -> bool {
        self.hosts.is_empty() || self.hosts.iter().any(|h| h == host)
    }
}

/// `backend` or `[app] command`, exactly one of them.
fn backend(backend: Option<String>, app: &AppOptions) -> Result<Backend, ConfigError> {
    match (backend, app.command.clone()) {
        (Some(_), Some(_)) => Err(ConfigError::invalid(
            "app.command",
            "give either a backend (--backend) or an app command (--app), not both",
        )),
        (Some(b), None) => Backend::parse(&b),
        (None, Some(command)) => Ok(Backend::App(app_settings(command, app.clone())?)),
        (None, None) => Err(ConfigError::NoBackend),
    }
}

fn app_settings(command: String, a: AppOptions) -> Result<AppSettings, ConfigError> {
    if !command.contains("{port}") {
        return Err(ConfigError::invalid(
            "app.command",
            format!("`{command}` has no {{port}} placeholder: levee gives each process its own port; write it like `php worker.php {{port}}`"),
        ));
    }
    let processes = need(a.processes, "app.processes")?;
    let concurrency = need(a.concurrency, "app.concurrency")?;
    if processes == 0 || processes > MAX_WORKERS || concurrency == 0 {
        return Err(ConfigError::invalid(
            "app.processes",
            format!("{processes} process(es) of {concurrency} request(s) each: both must be at least 1 (and processes at most {MAX_WORKERS})"),
        ));
    }
    Ok(AppSettings {
        command,
        processes,
        concurrency,
        ready_timeout: duration("app.ready_timeout", a.ready_timeout)?,
        request_timeout: duration("app.request_timeout", a.request_timeout)?,
        max_requests: need(a.max_requests, "app.max_requests")?,
        max_memory: match need(a.max_memory, "app.max_memory")?.as_str() {
            "off" | "0" => 0,
            m => parse_size("app.max_memory", m)?,
        },
        max_age: optional_duration("app.max_age", a.max_age)?,
        watch: need(a.watch, "app.watch")?
            .into_iter()
            .map(PathBuf::from)
            .collect(),
        cwd: match a.cwd {
            Some(d) if !d.is_dir() => {
                return Err(ConfigError::invalid(
                    "app.cwd",
                    format!("{} is not a directory", d.display()),
                ))
            }
            d => d,
        },
        env: a.env.unwrap_or_default().into_iter().collect(),
    })
}

impl StaticSettings {
    pub(crate) fn from_options(st: StaticOptions) -> Result<StaticSettings, ConfigError> {
        Ok(StaticSettings {
            index: need(st.index, "static.index")?,
            asset_extensions: need(st.asset_extensions, "static.asset_extensions")?
                .into_iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            asset_max_age: duration("static.asset_max_age", st.asset_max_age)?,
            memory: size("static.memory", st.memory)?,
            memory_max_file: size("static.memory_max_file", st.memory_max_file)?,
        })
    }
}

impl FastCgiSettings {
    pub(crate) fn from_options(fc: FastCgiOptions) -> Result<FastCgiSettings, ConfigError> {
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
            params: need(fc.params, "fastcgi.params")?.into_iter().collect(),
        };
        for (name, value) in &fastcgi.params {
            let ok_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
            if !ok_name || value.contains('\0') {
                return Err(ConfigError::invalid(
                    "fastcgi.params",
                    format!("`{name}` is not a parameter name (letters, digits, _ - .) or its value holds a NUL; write it like MW_CONFIG_FILE = \"/etc/mediawiki/LocalSettings.php\""),
                ));
            }
        }
        if fastcgi.index.contains('/') || fastcgi.index.starts_with('.') {
            return Err(ConfigError::invalid(
                "fastcgi.index",
                "give a file name in the document root, like index.php",
            ));
        }
        Ok(fastcgi)
    }
}

impl CacheRules {
    pub(crate) fn from_options(
        c: CacheOptions,
        presets: &[Preset],
        anonymous_ttl_set: bool,
    ) -> Result<CacheRules, ConfigError> {
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
        Ok(CacheRules {
            max_object_size: size("cache.max_object_size", c.max_object_size)?,
            heuristic: need(c.heuristic, "cache.heuristic")?,
            heuristic_fraction,
            heuristic_max: duration("cache.heuristic_max", c.heuristic_max)?,
            micro_cache: optional_duration("micro_cache", c.micro_cache)?,
            anonymous_ttl,
            grace: duration("cache.grace", c.grace)?,
            keep: duration("cache.keep", c.keep)?,
        })
    }
}

impl AnonymousSettings {
    pub(crate) fn from_options(
        a: AnonymousOptions,
        presets: Vec<Preset>,
    ) -> Result<AnonymousSettings, ConfigError> {
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
        Ok(AnonymousSettings {
            session_cookies: CookieMatcher::new(&cookies)?,
            pass_paths: PathMatcher::new(&pass)?,
            presets,
            edit_invalidation,
        })
    }
}

//! One site's settings: the hosts it answers and everything that serves them (backend,
//! document root, FastCGI, presets, session cookies, cache rules). A request resolves
//! its site once; the phases read the site's settings. `[[site]]` tables inherit what
//! they leave unset from the file's top level; without any, one site answers every
//! host, from the flags and the top level.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::convert::{duration, need, optional_duration, size, MAX_WORKERS};
use crate::duration::parse_size;
use crate::hardening::Hardening;
use crate::options::{
    AnonymousOptions, AppOptions, CacheOptions, Combine, FastCgiOptions, OneOrMany, Options,
    RouteOptions, SiteOptions, StaticOptions,
};
use crate::route_rules::RouteRules;
use crate::{AppSettings, Backend, ConfigError, CookieMatcher, PathMatcher, Preset};

/// One site.
#[derive(Debug, Clone)]
pub struct Site {
    /// How the site is named in the log, the metrics and `--check`: `name`, else its
    /// first host ("default" for the site of a file without `[[site]]`).
    pub name: String,
    /// The hosts it answers (lowercase, no port, `*.example.com` for every subdomain).
    pub hosts: Vec<String>,
    /// Answers every host no site names (the site of a file without `[[site]]` is).
    pub default: bool,
    pub backend: Backend,
    /// A path each server answers with 2xx or 3xx when it is up, checked actively.
    pub health: Option<String>,
    /// The document root: static files are served from it (and PHP scripts found in it
    /// with a FastCGI backend).
    pub root: Option<PathBuf>,
    pub static_files: StaticSettings,
    pub fastcgi: FastCgiSettings,
    pub anonymous: AnonymousSettings,
    pub cache: CacheRules,
    /// `[site.tls]`: the site's own certificate chain and key files.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Path prefixes sent elsewhere, longest first.
    pub routes: Vec<Route>,
    /// What the presets keep from the web (hardening.rs).
    pub hardening: Hardening,
}

/// `[[site.route]]`: requests whose path starts with `path` go to `target`.
#[derive(Debug, Clone)]
pub struct Route {
    /// Starts with `/`; matched as a prefix of the request's path.
    pub path: String,
    pub target: RouteTarget,
    /// Deny, networks, basic auth, redirect, rewrite, headers (route_rules.rs).
    pub rules: RouteRules,
}

#[derive(Debug, Clone)]
pub enum RouteTarget {
    /// Another backend, under the site's own cache rules.
    Backend {
        backend: Backend,
        health: Option<String>,
    },
    /// Files of this directory only (the site's root unless the route names one);
    /// a path that is no file is 404, and the backend is never asked.
    Static { root: PathBuf },
    /// Served as the site is (its files, its backend): a route of rules only.
    Site,
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
    /// Whether session cookies started for an anonymous visitor keep them anonymous
    /// (levee-proxy's request/anonymous.rs).
    pub remember_anonymous_sessions: bool,
    /// A preset's device rule: stored pages vary on the device class it gives.
    pub device: Option<crate::DeviceRule>,
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
    /// Directories outside the root its symlinks may lead into: the site's own and its
    /// presets' (Debian's package layouts).
    pub link_dirs: Vec<PathBuf>,
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
    /// top-level options (`o`, merged over the defaults). `anonymous_ttl_set`: the
    /// flags or the file set `cache.anonymous_ttl` (otherwise presets turn it on).
    pub(crate) fn default_from(o: &Options, anonymous_ttl_set: bool) -> Result<Site, ConfigError> {
        let top = SiteOptions {
            name: Some("default".into()),
            default: Some(true),
            ..SiteOptions::default()
        };
        Site::from_options(top, o, anonymous_ttl_set)
    }

    /// A `[[site]]` table, what it leaves unset taken from the top level `o` (merged
    /// over the defaults), as nginx's `server` blocks inherit from `http`.
    pub(crate) fn from_options(
        s: SiteOptions,
        o: &Options,
        anonymous_ttl_set: bool,
    ) -> Result<Site, ConfigError> {
        let hosts = s
            .hosts
            .unwrap_or_default()
            .iter()
            .map(|h| host_pattern(h))
            .collect::<Result<Vec<_>, _>>()?;
        let default = s.default.unwrap_or(false);
        if hosts.is_empty() && !default {
            return Err(ConfigError::invalid(
                "site.hosts",
                "a site answers the hosts it lists: add hosts = [\"example.com\"], or default = true for every host no other site names",
            ));
        }
        for (option, set) in [
            ("cache.size", s.cache.size.is_some()),
            ("cache.hit_for_pass", s.cache.hit_for_pass.is_some()),
            ("cache.disk_path", s.cache.disk_path.is_some()),
            ("cache.disk_size", s.cache.disk_size.is_some()),
            ("cache.redis", s.cache.redis.is_some()),
            (
                "cache.strip_cdn_cache_control",
                s.cache.strip_cdn_cache_control.is_some(),
            ),
        ] {
            if set {
                return Err(ConfigError::invalid(
                    option,
                    "the store is shared by every site: set it at the top level of the file, not in [[site]]",
                ));
            }
        }
        let name = match s.name {
            Some(n) if n.trim().is_empty() => {
                return Err(ConfigError::invalid("site.name", "is empty"))
            }
            Some(n) => n,
            None => hosts.first().cloned().unwrap_or_else(|| "default".into()),
        };
        // A site that names its backend (or its app) replaces the top level's, whichever
        // kind that was; one that names neither inherits it.
        let own_app = s.app.command.is_some();
        let own = s.backend.is_some() || own_app;
        let mut app = s.app.combine(o.app.clone());
        let backend_option = match own {
            true => {
                if !own_app {
                    app.command = None;
                }
                s.backend
            }
            false => o.backend.clone(),
        };
        let backend = backend(backend_option, &app)?;
        let health = health(s.health.or_else(|| o.health.clone()))?;
        if health.is_some() && !matches!(backend, Backend::Http { .. }) {
            return Err(ConfigError::invalid(
                "health",
                "active checks are for http:// backends; php-fpm and app pools are watched already",
            ));
        }
        let root = s.root.or_else(|| o.root.clone());
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
        let presets = s
            .preset
            .or_else(|| o.preset.clone())
            .map(OneOrMany::into_vec)
            .unwrap_or_default()
            .iter()
            .map(|name| Preset::parse(name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut fastcgi = s.fastcgi.combine(o.fastcgi.clone());
        if s.fastcgi_params.is_some() {
            fastcgi.params = s.fastcgi_params;
        }
        let tls = match (s.tls.cert, s.tls.key) {
            (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
            (None, None) => None,
            _ => {
                return Err(ConfigError::invalid(
                    "site.tls",
                    "give both the certificate chain and its key: cert = \"...pem\" and key = \"...key\"",
                ))
            }
        };
        let mut routes = s
            .route
            .unwrap_or_default()
            .into_iter()
            .map(|r| Route::from_options(r, root.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        // The longest prefix decides, as nginx's prefix locations.
        routes.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
        if let Some(w) = routes.windows(2).find(|w| w[0].path == w[1].path) {
            return Err(ConfigError::invalid(
                "site.route",
                format!("two routes for the path {}", w[0].path),
            ));
        }
        let mut static_files =
            StaticSettings::from_options(s.static_files.combine(o.static_files.clone()))?;
        let params: Vec<(String, String)> = fastcgi
            .params
            .clone()
            .map(|p| p.into_iter().collect())
            .unwrap_or_default();
        let hardening = Hardening::new(
            &presets,
            root.as_deref(),
            static_files.link_dirs.clone(),
            &params,
        )?;
        static_files.link_dirs = hardening.link_dirs.clone();
        // The application's index first (`doku.php`), as its nginx config's `index`.
        for (i, name) in hardening.index.iter().enumerate() {
            static_files.index.retain(|n| n != name);
            static_files.index.insert(i, name.clone());
        }
        add_aliases(&mut routes, &presets, root.as_deref());
        let mut fastcgi = FastCgiSettings::from_options(fastcgi)?;
        // DokuWiki's nginx guide: `index doku.php` and every other path to doku.php.
        // Only over the default: a front controller the user named stays.
        if let Some(script) = hardening.index.iter().find(|n| n.ends_with(".php")) {
            if fastcgi.index == "index.php" {
                fastcgi.index = script.clone();
            }
        }
        let cache_set = anonymous_ttl_set || s.cache.anonymous_ttl.is_some();
        Ok(Site {
            name,
            hosts,
            default,
            backend,
            health,
            root,
            static_files,
            hardening,
            fastcgi,
            cache: CacheRules::from_options(s.cache.combine(o.cache.clone()), &presets, cache_set)?,
            anonymous: AnonymousSettings::from_options(
                s.anonymous.combine(o.anonymous.clone()),
                presets,
            )?,
            tls,
            routes,
        })
    }

    /// Whether this site names `host` (lowercase, without port), exactly or by a
    /// `*.` pattern; the default site answers the rest ([`Settings::site_for`]).
    pub fn names(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| host_matches(h, host))
    }

    /// The route for a request's path, if one matches.
    pub fn route_for(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| path.starts_with(&r.path))
    }
}

/// The presets' asset directories where Debian's package puts them (WordPress's
/// `wp-content` in /var/lib/wordpress): a files-only route each, unless the site routes
/// that path itself. Files only: PHP never runs from there, as no upload's may.
fn add_aliases(routes: &mut Vec<Route>, presets: &[Preset], root: Option<&Path>) {
    let Some(root) = root.and_then(|r| r.canonicalize().ok()) else {
        return;
    };
    for alias in presets.iter().flat_map(|p| p.hardening().aliases) {
        let dir = Path::new(alias.root);
        if root != Path::new(alias.when_root)
            || !dir.is_dir()
            || routes.iter().any(|r| r.path == alias.path)
        {
            continue;
        }
        routes.push(Route {
            path: alias.path.to_string(),
            target: RouteTarget::Static {
                root: dir.to_path_buf(),
            },
            rules: RouteRules::default(),
        });
    }
    routes.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
}

/// Whether a site's host `pattern` matches `host`: equal, or `*.example.com` and a
/// subdomain of example.com at any depth (as nginx's `server_name *.example.com`).
pub fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
        None => pattern == host,
    }
}

/// A `hosts` entry: lowercase, no trailing dot, no port; `*.` only as its first label.
fn host_pattern(raw: &str) -> Result<String, ConfigError> {
    let h = raw.trim().trim_end_matches('.').to_ascii_lowercase();
    let bare = h.strip_prefix("*.").unwrap_or(&h);
    let ok = !bare.is_empty()
        && bare
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !bare.starts_with('.')
        && !bare.contains("..");
    if !ok {
        return Err(ConfigError::invalid(
            "site.hosts",
            format!("`{raw}` is not a host name; write it like example.com or *.example.com (no scheme, port or path)"),
        ));
    }
    Ok(h)
}

fn health(path: Option<String>) -> Result<Option<String>, ConfigError> {
    match path {
        Some(p) if p == "off" || p.is_empty() => Ok(None),
        Some(p) if !p.starts_with('/') || p.bytes().any(|b| b.is_ascii_whitespace()) => {
            Err(ConfigError::invalid(
                "health",
                format!("`{p}` is not a path; write it like \"/healthz\""),
            ))
        }
        p => Ok(p),
    }
}

impl Route {
    fn from_options(r: RouteOptions, site_root: Option<&Path>) -> Result<Route, ConfigError> {
        let path = match r.path.clone() {
            Some(p) if p.starts_with('/') => p,
            _ => {
                return Err(ConfigError::invalid(
                    "site.route.path",
                    "each route needs the path prefix it takes, like path = \"/api/\"",
                ))
            }
        };
        let rules = RouteRules::from_options(&r, &path)?;
        let target = match (r.backend, r.static_only.unwrap_or(false)) {
            (Some(b), false) => {
                let backend = Backend::parse_list(&b.into_vec())?;
                match backend {
                    Backend::FastCgi(_) if site_root.is_none() => {
                        return Err(ConfigError::invalid(
                            "site.route.backend",
                            format!(
                                "the route {path} goes to FastCGI, which needs the site's root"
                            ),
                        ))
                    }
                    _ => {}
                }
                let health = health(r.health)?;
                RouteTarget::Backend { backend, health }
            }
            (None, true) => {
                let root = match r.root.or_else(|| site_root.map(Path::to_path_buf)) {
                    Some(root) if root.is_dir() => root,
                    Some(root) => {
                        return Err(ConfigError::invalid(
                            "site.route.root",
                            format!("{} is not a directory", root.display()),
                        ))
                    }
                    None => {
                        return Err(ConfigError::invalid(
                            "site.route.root",
                            format!("the static route {path} needs a directory: root = \"/var/www/assets\" (or the site's root)"),
                        ))
                    }
                };
                RouteTarget::Static { root }
            }
            (None, false) if !rules.is_empty() => RouteTarget::Site,
            _ => {
                return Err(ConfigError::invalid(
                    "site.route",
                    format!(
                        "the route {path} needs backend = \"http://...\", static = true, or a rule (deny, allow_networks, auth_basic, redirect, rewrite, headers)"
                    ),
                ))
            }
        };
        if rules.redirect.is_some() && !matches!(target, RouteTarget::Site) {
            return Err(ConfigError::invalid(
                "site.route.redirect",
                format!("the route {path} redirects: it needs no backend nor static files"),
            ));
        }
        Ok(Route {
            path,
            target,
            rules,
        })
    }
}

/// `backend` or `[app] command`, exactly one of them.
fn backend(backend: Option<OneOrMany>, app: &AppOptions) -> Result<Backend, ConfigError> {
    match (backend.map(OneOrMany::into_vec), app.command.clone()) {
        (Some(_), Some(_)) => Err(ConfigError::invalid(
            "app.command",
            "give either a backend (--backend) or an app command (--app), not both",
        )),
        (Some(b), None) => Backend::parse_list(&b),
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
            link_dirs: match need(st.link_dirs, "static.link_dirs")? {
                dirs if dirs.iter().all(|d| d.is_absolute()) => dirs,
                _ => {
                    return Err(ConfigError::invalid(
                        "static.link_dirs",
                        "give absolute directories, like [\"/var/lib/dokuwiki/lib\"]",
                    ))
                }
            },
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
        let mut visitors = need(a.visitor_cookies, "anonymous.visitor_cookies")?;
        for p in &presets {
            visitors.extend(p.visitor_cookies().iter().map(|s| s.to_string()));
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
        let device = presets.iter().find_map(|p| p.device());
        Ok(AnonymousSettings {
            session_cookies: CookieMatcher::new(&cookies)?.with_visitors(&visitors)?,
            pass_paths: PathMatcher::new(&pass)?,
            presets,
            edit_invalidation,
            device,
            remember_anonymous_sessions: need(
                a.remember_anonymous_sessions,
                "anonymous.remember_anonymous_sessions",
            )?,
        })
    }
}

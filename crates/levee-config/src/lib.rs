//! levee's settings: the TOML file and the command-line flags, resolved into one
//! validated [`Settings`] by one precedence rule (flag > file > built-in default).
//!
//! - options.rs: [`Options`], the one shape of both the file and the flags, merged by
//!   [`Combine`]; [`DEFAULTS`], every built-in value in one table.
//! - settings.rs: [`Settings`], what `levee serve` runs with, validated from options
//!   before a port is bound so that a mistake is reported with what to change: what
//!   the process shares (listeners, workers, limits, admin, log, the store's size) and
//!   the [`Site`]s (site.rs: hosts, backend, root, presets, cache and anonymous rules,
//!   FastCGI), each table converted by its own `from_options`.
//! - describe.rs: every setting as `levee serve --check` prints it, from the settings.
//! - convert.rs: the conversions the tables share (durations, sizes, percentages).
//! - presets.rs, matcher.rs: applications' session cookies and pass paths, as globs.

mod backend_limit;
mod convert;
mod describe;
mod duration;
mod hardening;
mod matcher;
mod options;
mod presets;
mod route_rules;
mod settings;
mod site;
mod tiers;

use std::path::PathBuf;

pub use describe::Described;
pub use hardening::{Alias, Hardening, Installer, PresetHardening};
pub use matcher::{CookieMatcher, PathMatcher};
pub use options::{
    AdminOptions, AnonymousOptions, AppOptions, CacheOptions, Combine, CompressionOptions,
    FastCgiOptions, LimitsOptions, LogOptions, OneOrMany, Options, PurgeOptions, RouteOptions,
    SiteOptions, SiteTlsOptions, StaticOptions, TlsOptions, Workers, DEFAULTS,
};
pub use presets::{
    DeviceRule, Preset, DEFAULT_SESSION_COOKIES, NEVER_PROOF_COOKIES, NEVER_SESSION_COOKIES,
};
pub use route_rules::{BasicAuth, Redirect, RouteRules};
pub use settings::{
    AccessLog, AccessLogFormat, AcmeChallenge, AcmeSettings, AdminSettings, BackendLimit,
    CacheSettings, CompressionSettings, Limits, PurgeSettings, Settings, SiteIndex, TlsSettings,
};
pub use site::{
    host_matches, AnonymousSettings, CacheRules, EditInvalidation, FastCgiSettings, Route,
    RouteTarget, Site, StaticSettings,
};
pub use tiers::{DiskSettings, DiskSize};

/// An error in the configuration: always says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for `{option}`: {message}")]
    Invalid {
        option: &'static str,
        message: String,
    },
    #[error(
        "no backend given: pass `--backend http://127.0.0.1:9000` or set `backend = \"...\"` in the config file"
    )]
    NoBackend,
    /// An error in one `[[site]]` table.
    #[error("in the site `{site}`: {source}")]
    Site {
        site: String,
        source: Box<ConfigError>,
    },
}

impl ConfigError {
    pub(crate) fn invalid(option: &'static str, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            option,
            message: message.into(),
        }
    }
}

/// Where levee forwards requests that the cache cannot answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// HTTP/1.1 origins, `http://host:port`: one, or several that serve the same site
    /// (balanced by least outstanding requests).
    Http {
        /// Each server's `host:port` as written, used as the connection authority; never
        /// empty.
        servers: Vec<http::uri::Authority>,
    },
    /// A FastCGI responder such as php-fpm: `fastcgi://host:port` or
    /// `fastcgi+unix:/run/php/php8.2-fpm.sock`.
    FastCgi(FastCgiAddress),
    /// levee's own pool of application processes speaking HTTP (`[app]`, `--app`).
    App(AppSettings),
}

/// `[app]`: long-running application processes levee starts and balances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSettings {
    /// A shell command with `{port}`: `php worker.php {port}`.
    pub command: String,
    pub processes: usize,
    /// Requests one process serves at once.
    pub concurrency: usize,
    pub ready_timeout: std::time::Duration,
    /// A request running longer gets 504 and its process is killed and replaced.
    pub request_timeout: std::time::Duration,
    /// Replace a process after about this many requests; 0: never.
    pub max_requests: u64,
    /// Replace a process above this much resident memory (bytes); 0: never.
    pub max_memory: u64,
    /// Replace a process older than this.
    pub max_age: Option<std::time::Duration>,
    /// Changes under these paths restart the processes one by one.
    pub watch: Vec<PathBuf>,
    /// Where the processes run; levee's own directory when unset.
    pub cwd: Option<PathBuf>,
    /// Environment variables added to the processes' (levee's own are inherited).
    pub env: Vec<(String, String)>,
}

/// Where a FastCGI application listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FastCgiAddress {
    /// `host:port`.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl Backend {
    /// A backend of one or several servers (`backend = ["http://a", "http://b"]`):
    /// several must all be `http://` (one application on several machines).
    pub fn parse_list(servers: &[String]) -> Result<Backend, ConfigError> {
        match servers {
            [] => Err(ConfigError::NoBackend),
            [one] => Backend::parse(one),
            many => {
                let mut all = Vec::with_capacity(many.len());
                for s in many {
                    match Backend::parse(s)? {
                        Backend::Http { servers } => {
                            for a in servers {
                                if all.contains(&a) {
                                    return Err(ConfigError::invalid(
                                        "backend",
                                        format!("`{s}` is listed twice"),
                                    ));
                                }
                                all.push(a);
                            }
                        }
                        _ => {
                            return Err(ConfigError::invalid(
                                "backend",
                                format!("`{s}`: several servers must all be http:// (for php-fpm, give one FastCGI address)"),
                            ))
                        }
                    }
                }
                Ok(Backend::Http { servers: all })
            }
        }
    }

    /// Parses `http://host:port`, `fastcgi://host:port` or `fastcgi+unix:/path`.
    pub fn parse(s: &str) -> Result<Backend, ConfigError> {
        if let Some(path) = s
            .strip_prefix("fastcgi+unix://")
            .or_else(|| s.strip_prefix("fastcgi+unix:"))
            .or_else(|| s.strip_prefix("unix:"))
        {
            if !path.starts_with('/') {
                return Err(ConfigError::invalid(
                    "backend",
                    format!("`{s}`: give the socket's absolute path, like fastcgi+unix:/run/php/php8.2-fpm.sock"),
                ));
            }
            return Ok(Backend::FastCgi(FastCgiAddress::Unix(PathBuf::from(path))));
        }
        if let Some(rest) = s.strip_prefix("fastcgi://") {
            let hostport = rest.trim_end_matches('/');
            let ok = hostport
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok || hostport.contains('/') {
                return Err(ConfigError::invalid(
                    "backend",
                    format!("`{s}`: write a FastCGI backend like fastcgi://127.0.0.1:9000 (host and port, no path)"),
                ));
            }
            return Ok(Backend::FastCgi(FastCgiAddress::Tcp(hostport.to_string())));
        }
        let uri: http::Uri = s.parse().map_err(|e| {
            ConfigError::invalid(
                "backend",
                format!("`{s}` is not a URL ({e}); write it like http://127.0.0.1:9000"),
            )
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(ConfigError::invalid(
                    "backend",
                    format!("`{s}`: TLS to the backend is not supported yet; use http://"),
                ))
            }
            _ => {
                return Err(ConfigError::invalid(
                    "backend",
                    format!("`{s}` needs a scheme; write it like http://127.0.0.1:9000"),
                ))
            }
        }
        let authority = uri.authority().cloned().ok_or_else(|| {
            ConfigError::invalid(
                "backend",
                format!("`{s}` has no host; write it like http://127.0.0.1:9000"),
            )
        })?;
        if !matches!(uri.path(), "" | "/") {
            return Err(ConfigError::invalid(
                "backend",
                format!("`{s}`: a path in the backend URL is not supported; give only scheme, host and port"),
            ));
        }
        Ok(Backend::Http {
            servers: vec![authority],
        })
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Http { servers } => {
                for (i, a) in servers.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "http://{a}")?;
                }
                Ok(())
            }
            Backend::FastCgi(FastCgiAddress::Tcp(a)) => write!(f, "fastcgi://{a}"),
            Backend::FastCgi(FastCgiAddress::Unix(p)) => write!(f, "fastcgi+unix:{}", p.display()),
            Backend::App(a) => write!(
                f,
                "app pool: {} process(es) of `{}`, {} request(s) each",
                a.processes, a.command, a.concurrency
            ),
        }
    }
}

#[cfg(test)]
mod site_tests;
#[cfg(test)]
mod tests;

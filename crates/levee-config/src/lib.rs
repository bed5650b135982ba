//! levee's settings: the TOML file and the command-line flags, resolved into one
//! validated [`Settings`] by one precedence rule (flag > file > built-in default).
//!
//! Everything is validated here, before a port is bound, so that a mistake in the
//! configuration is reported with a message that says what to change.

mod duration;
mod file;
mod matcher;
mod presets;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use file::FileConfig;
pub use matcher::{CookieMatcher, PathMatcher};
pub use presets::{Preset, DEFAULT_SESSION_COOKIES};

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
    /// An HTTP/1.1 origin, `http://host:port`.
    Http {
        /// `host:port` as written, used as the connection authority.
        authority: http::uri::Authority,
    },
    /// A FastCGI responder such as php-fpm: `fastcgi://host:port` or
    /// `fastcgi+unix:/run/php/php8.2-fpm.sock`.
    FastCgi(FastCgiAddress),
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
        Ok(Backend::Http { authority })
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Http { authority } => write!(f, "http://{authority}"),
            Backend::FastCgi(FastCgiAddress::Tcp(a)) => write!(f, "fastcgi://{a}"),
            Backend::FastCgi(FastCgiAddress::Unix(p)) => write!(f, "fastcgi+unix:{}", p.display()),
        }
    }
}

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
    pub backend_max_concurrency: usize,
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
}

/// The admin listener: levee's own state (metrics), apart from the traffic.
#[derive(Debug, Clone, Default)]
pub struct AdminSettings {
    /// Off when unset.
    pub listen: Option<SocketAddr>,
}

/// Values given on the command line; each one overrides the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Vec<String>,
    pub backend: Option<String>,
    pub root: Option<PathBuf>,
    pub presets: Vec<String>,
    pub micro_cache: Option<String>,
    pub cache_size: Option<String>,
    pub grace: Option<String>,
    pub debug_headers: bool,
    pub backend_max_concurrency: Option<usize>,
    pub no_compression: bool,
    pub workers: Option<usize>,
    pub admin_listen: Option<String>,
}

/// Extensions of files that change only with a new name (hashed builds) or rarely:
/// they get a long `Cache-Control: max-age`. HTML is not among them.
pub const DEFAULT_ASSET_EXTENSIONS: &[&str] = &[
    "css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp",
    "woff", "woff2", "ttf", "otf", "eot", "mp3", "mp4", "webm", "ogg", "ogv", "wav", "flac", "pdf",
    "zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "txt", "xml", "json", "wasm",
];

/// More worker threads than this is a typo, not a machine.
const MAX_WORKERS: usize = 1024;

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

impl Settings {
    /// Reads the file (if any) and resolves it with the flags.
    pub fn load(config: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
        let file = match config {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        Settings::resolve(file, overrides)
    }

    /// Applies the precedence rule: flag, then file, then default.
    pub fn resolve(file: FileConfig, o: &Overrides) -> Result<Settings, ConfigError> {
        use duration::{parse_duration, parse_size};

        let listen_strs: Vec<String> = if !o.listen.is_empty() {
            o.listen.clone()
        } else if let Some(l) = file.listen.clone() {
            l.into_vec()
        } else {
            vec![DEFAULT_LISTEN.to_string()]
        };
        let mut listen = Vec::new();
        for l in &listen_strs {
            let addr: SocketAddr = l.parse().map_err(|_| {
                ConfigError::invalid(
                    "listen",
                    format!("`{l}` is not an address; write it like 127.0.0.1:8080 or [::1]:8080"),
                )
            })?;
            listen.push(addr);
        }
        if listen.is_empty() {
            return Err(ConfigError::invalid(
                "listen",
                "at least one address is needed",
            ));
        }

        let backend_str = o
            .backend
            .clone()
            .or(file.backend.clone())
            .ok_or(ConfigError::NoBackend)?;
        let backend = Backend::parse(&backend_str)?;
        let root = o.root.clone().or(file.root.clone());
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
        let st = file.static_files.clone().unwrap_or_default();
        let static_files = StaticSettings {
            index: st
                .index
                .unwrap_or_else(|| vec!["index.html".into(), "index.htm".into()]),
            asset_extensions: st
                .asset_extensions
                .map(|v| {
                    v.into_iter()
                        .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                        .collect()
                })
                .unwrap_or_else(|| {
                    DEFAULT_ASSET_EXTENSIONS
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                }),
            asset_max_age: parse_duration(
                "static.asset_max_age",
                st.asset_max_age.as_deref().unwrap_or("7d"),
            )?,
            memory: parse_size("static.memory", st.memory.as_deref().unwrap_or("64MiB"))?,
            memory_max_file: parse_size(
                "static.memory_max_file",
                st.memory_max_file.as_deref().unwrap_or("1MiB"),
            )?,
        };
        let fc = file.fastcgi.clone().unwrap_or_default();
        let fastcgi = FastCgiSettings {
            index: fc.index.unwrap_or_else(|| "index.php".into()),
            keep_alive: fc.keep_alive.unwrap_or(4),
            max_unsized_body: parse_size(
                "fastcgi.max_unsized_body",
                fc.max_unsized_body.as_deref().unwrap_or("64MiB"),
            )?,
        };
        if fastcgi.index.contains('/') || fastcgi.index.starts_with('.') {
            return Err(ConfigError::invalid(
                "fastcgi.index",
                "give a file name in the document root, like index.php",
            ));
        }
        let cz = file.compression.clone().unwrap_or_default();
        let compression = CompressionSettings {
            enabled: !o.no_compression && cz.enabled.unwrap_or(true),
            min_size: parse_size(
                "compression.min_size",
                cz.min_size.as_deref().unwrap_or("1KiB"),
            )?,
            store: cz.store.unwrap_or_else(|| "gzip".into()),
            transcode_memory: parse_size(
                "compression.transcode_memory",
                cz.transcode_memory.as_deref().unwrap_or("32MiB"),
            )?,
        };
        if !matches!(compression.store.as_str(), "gzip" | "br" | "zstd") {
            return Err(ConfigError::invalid(
                "compression.store",
                format!("`{}` is not one of gzip, br, zstd", compression.store),
            ));
        }

        let c = file.cache.unwrap_or_default();
        let dur = |opt: &'static str, flag: &Option<String>, v: &Option<String>, d: &str| {
            parse_duration(opt, flag.as_deref().or(v.as_deref()).unwrap_or(d))
        };
        let micro_cache = match o.micro_cache.as_deref().or(c.micro_cache.as_deref()) {
            None | Some("off") | Some("0") | Some("0s") => None,
            Some(s) => Some(parse_duration("micro_cache", s)?),
        };
        let heuristic_fraction = c.heuristic_fraction.unwrap_or(0.1);
        if !(0.0..=1.0).contains(&heuristic_fraction) {
            return Err(ConfigError::invalid(
                "cache.heuristic_fraction",
                "must be between 0.0 and 1.0 (the RFC suggests 0.1)",
            ));
        }
        let cache = CacheSettings {
            size: parse_size(
                "cache.size",
                o.cache_size
                    .as_deref()
                    .or(c.size.as_deref())
                    .unwrap_or("256MiB"),
            )?,
            max_object_size: parse_size(
                "cache.max_object_size",
                c.max_object_size.as_deref().unwrap_or("16MiB"),
            )?,
            heuristic: c.heuristic.unwrap_or(true),
            heuristic_fraction,
            heuristic_max: dur("cache.heuristic_max", &None, &c.heuristic_max, "1d")?,
            micro_cache,
            grace: dur("cache.grace", &o.grace, &c.grace, "1h")?,
            hit_for_miss: dur("cache.hit_for_miss", &None, &c.hit_for_miss, "10s")?,
            keep: dur("cache.keep", &None, &c.keep, "1h")?,
        };
        if cache.max_object_size > cache.size {
            return Err(ConfigError::invalid(
                "cache.max_object_size",
                "must not exceed cache.size",
            ));
        }

        let a = file.anonymous.unwrap_or_default();
        let mut preset_names: Vec<String> = o.presets.clone();
        if preset_names.is_empty() {
            preset_names = file.preset.map(|p| p.into_vec()).unwrap_or_default();
        }
        let mut presets = Vec::new();
        for name in &preset_names {
            presets.push(Preset::parse(name)?);
        }
        let mut cookies: Vec<String> = match a.session_cookies {
            Some(list) => list,
            None => DEFAULT_SESSION_COOKIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        cookies.extend(a.extra_session_cookies.unwrap_or_default());
        let mut pass: Vec<String> = a.pass_paths.unwrap_or_default();
        for p in &presets {
            cookies.extend(p.session_cookies().iter().map(|s| s.to_string()));
            pass.extend(p.pass_paths().iter().map(|s| s.to_string()));
        }
        let anonymous = AnonymousSettings {
            session_cookies: CookieMatcher::new(&cookies)?,
            pass_paths: PathMatcher::new(&pass)?,
            presets,
        };

        let l = file.limits.unwrap_or_default();
        let limits = Limits {
            max_connections: positive(
                "limits.max_connections",
                l.max_connections.unwrap_or(10_000),
            )?,
            max_header_bytes: parse_size(
                "limits.max_header_bytes",
                l.max_header_bytes.as_deref().unwrap_or("64KiB"),
            )? as usize,
            max_headers: positive("limits.max_headers", l.max_headers.unwrap_or(100))?,
            header_timeout: dur("limits.header_timeout", &None, &l.header_timeout, "10s")?,
            backend_connect_timeout: dur(
                "limits.backend_connect_timeout",
                &None,
                &l.backend_connect_timeout,
                "3s",
            )?,
            backend_first_byte_timeout: dur(
                "limits.backend_first_byte_timeout",
                &None,
                &l.backend_first_byte_timeout,
                "60s",
            )?,
            backend_read_timeout: dur(
                "limits.backend_read_timeout",
                &None,
                &l.backend_read_timeout,
                "60s",
            )?,
            backend_max_concurrency: positive(
                "limits.backend_max_concurrency",
                o.backend_max_concurrency
                    .or(l.backend_max_concurrency)
                    .unwrap_or(64),
            )?,
            backend_queue: l.backend_queue.unwrap_or(1024),
            backend_queue_timeout: dur(
                "limits.backend_queue_timeout",
                &None,
                &l.backend_queue_timeout,
                "10s",
            )?,
            shutdown_timeout: dur("limits.shutdown_timeout", &None, &l.shutdown_timeout, "30s")?,
        };
        if limits.max_header_bytes < 8192 {
            return Err(ConfigError::invalid(
                "limits.max_header_bytes",
                "must be at least 8KiB",
            ));
        }

        let file_workers = match file.workers {
            None => None,
            Some(file::WorkersFile::Count(n)) => Some(n),
            Some(file::WorkersFile::Word(w)) if w.eq_ignore_ascii_case("auto") => Some(0),
            Some(file::WorkersFile::Word(w)) => {
                return Err(ConfigError::invalid(
                    "workers",
                    format!("{w:?} is not a number of threads; write a number, or \"auto\" for one per core"),
                ))
            }
        };
        let workers = match o.workers.or(file_workers) {
            // 0 and "auto", like unset, mean one per core.
            Some(n) if n > 0 => n.min(MAX_WORKERS),
            _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };

        let admin_listen = o.admin_listen.clone().or(file.admin.and_then(|a| a.listen));
        let admin = AdminSettings {
            listen: match admin_listen {
                None => None,
                Some(l) => Some(l.parse().map_err(|_| {
                    ConfigError::invalid(
                        "admin.listen",
                        format!(
                            "`{l}` is not an address; write it like 127.0.0.1:9091 or [::1]:9091"
                        ),
                    )
                })?),
            },
        };

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
            debug_headers: o.debug_headers || file.debug_headers.unwrap_or(false),
            workers,
            admin,
        })
    }
}

fn positive(option: &'static str, v: usize) -> Result<usize, ConfigError> {
    if v == 0 {
        Err(ConfigError::invalid(option, "must be at least 1"))
    } else {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_backend() -> Overrides {
        Overrides {
            backend: Some("http://127.0.0.1:9000".into()),
            ..Overrides::default()
        }
    }

    #[test]
    fn backend_alone_is_a_complete_setup() {
        let s = Settings::resolve(FileConfig::default(), &with_backend()).unwrap();
        assert_eq!(s.listen, vec!["127.0.0.1:8080".parse().unwrap()]);
        assert_eq!(s.cache.size, 256 * 1024 * 1024);
        assert!(s.cache.micro_cache.is_none());
        assert!(s.anonymous.session_cookies.is_session("PHPSESSID"));
        assert!(s
            .anonymous
            .session_cookies
            .is_session("wordpress_logged_in_abc"));
        assert!(!s.anonymous.session_cookies.is_session("_ga"));
    }

    #[test]
    fn flags_override_file() {
        let file: FileConfig = toml::from_str(
            r#"
            backend = "http://127.0.0.1:1"
            listen = "127.0.0.1:1234"
            [cache]
            micro_cache = "10s"
            size = "1MiB"
            max_object_size = "512KiB"
            "#,
        )
        .unwrap();
        let o = Overrides {
            micro_cache: Some("3s".into()),
            ..with_backend()
        };
        let s = Settings::resolve(file, &o).unwrap();
        assert_eq!(s.backend.to_string(), "http://127.0.0.1:9000");
        assert_eq!(s.listen, vec!["127.0.0.1:1234".parse().unwrap()]);
        assert_eq!(s.cache.micro_cache, Some(Duration::from_secs(3)));
        assert_eq!(s.cache.size, 1024 * 1024);
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = toml::from_str::<FileConfig>("bakend = \"x\"").unwrap_err();
        assert!(err.to_string().contains("bakend"), "{err}");
    }

    #[test]
    fn missing_backend_says_what_to_do() {
        let err = Settings::resolve(FileConfig::default(), &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("--backend"));
    }

    #[test]
    fn bad_values_name_the_option() {
        for (o, needle) in [
            (
                Overrides {
                    micro_cache: Some("three seconds".into()),
                    ..with_backend()
                },
                "micro_cache",
            ),
            (
                Overrides {
                    backend: Some("127.0.0.1:9000".into()),
                    ..Overrides::default()
                },
                "backend",
            ),
            (
                Overrides {
                    presets: vec!["joomla-ish".into()],
                    ..with_backend()
                },
                "preset",
            ),
        ] {
            let err = Settings::resolve(FileConfig::default(), &o).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn presets_add_pass_paths() {
        let o = Overrides {
            presets: vec!["wordpress".into()],
            ..with_backend()
        };
        let s = Settings::resolve(FileConfig::default(), &o).unwrap();
        assert!(s.anonymous.pass_paths.is_match("/wp-admin/edit.php"));
        assert!(s
            .anonymous
            .pass_paths
            .is_match("/wp-login.php?action=lostpassword"));
        assert!(!s.anonymous.pass_paths.is_match("/2024/01/hello-world/"));
    }

    #[test]
    fn fastcgi_backends_parse_and_need_a_root() {
        for (s, want) in [
            (
                "fastcgi://127.0.0.1:9000",
                FastCgiAddress::Tcp("127.0.0.1:9000".into()),
            ),
            (
                "fastcgi+unix:/run/php/php8.2-fpm.sock",
                FastCgiAddress::Unix("/run/php/php8.2-fpm.sock".into()),
            ),
            (
                "fastcgi+unix:///run/php.sock",
                FastCgiAddress::Unix("/run/php.sock".into()),
            ),
        ] {
            assert_eq!(
                Backend::parse(s).unwrap(),
                Backend::FastCgi(want.clone()),
                "{s}"
            );
        }
        let unix = Backend::parse("fastcgi+unix:///run/php.sock").unwrap();
        assert_eq!(unix.to_string(), "fastcgi+unix:/run/php.sock");
        for bad in [
            "fastcgi://127.0.0.1",
            "fastcgi://:9000",
            "fastcgi://h:1/x",
            "fastcgi+unix:run.sock",
        ] {
            let err = Backend::parse(bad).unwrap_err().to_string();
            assert!(err.contains("backend"), "{bad}: {err}");
        }
        let o = Overrides {
            backend: Some("fastcgi://127.0.0.1:9000".into()),
            ..Overrides::default()
        };
        let err = Settings::resolve(FileConfig::default(), &o)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--root"), "{err}");
        let o = Overrides {
            root: Some(std::env::temp_dir()),
            ..o
        };
        let s = Settings::resolve(FileConfig::default(), &o).unwrap();
        assert_eq!(s.fastcgi.index, "index.php");
        let o = Overrides {
            root: Some("/nonexistent/levee-root".into()),
            ..o
        };
        let err = Settings::resolve(FileConfig::default(), &o)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn compression_store_is_checked() {
        let file: FileConfig = toml::from_str("[compression]\nstore = \"lzma\"").unwrap();
        let err = Settings::resolve(file, &with_backend())
            .unwrap_err()
            .to_string();
        assert!(err.contains("compression.store"), "{err}");
        let s = Settings::resolve(FileConfig::default(), &with_backend()).unwrap();
        assert!(s.compression.enabled);
        assert_eq!(s.compression.store, "gzip");
    }

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../../levee.example.toml");
        let file: FileConfig = toml::from_str(text).unwrap();
        Settings::resolve(file, &Overrides::default()).unwrap();
    }

    #[test]
    fn workers_is_a_count_or_auto_and_defaults_to_one_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = |toml: &str, flag: Option<usize>| {
            let file: FileConfig = toml::from_str(toml).unwrap();
            let o = Overrides {
                workers: flag,
                ..with_backend()
            };
            Settings::resolve(file, &o).map(|s| s.workers)
        };
        assert_eq!(workers("", None).unwrap(), cores);
        assert_eq!(workers("workers = 3", None).unwrap(), 3);
        assert_eq!(workers("workers = 0", None).unwrap(), cores);
        assert_eq!(workers("workers = \"auto\"", None).unwrap(), cores);
        assert_eq!(workers("workers = 3", Some(5)).unwrap(), 5, "the flag wins");
        let err = workers("workers = \"many\"", None).unwrap_err().to_string();
        assert!(err.contains("workers") && err.contains("auto"), "{err}");
    }
}

//! Options as written, before validation: one type for the config file and the
//! command-line flags alike, every value optional. The flags become an [`Options`]
//! (levee's `cmd/serve.rs`), the file is parsed into one, and the two are merged with
//! [`Combine`] over the built-in [`DEFAULTS`] (also an `Options`, parsed from TOML):
//!
//! ```text
//! flags.combine(file).combine(defaults)  ->  Settings::from_options (validates)
//! ```
//!
//! Adding an option is a field here, its default in `DEFAULTS`, its conversion in
//! `settings.rs`, and a flag only if it deserves one. Modelled on uv's
//! args → options → settings.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ConfigError;

/// Every option's built-in value, in one table: what `levee serve --backend URL` runs
/// with. `levee.example.toml` documents each (a unit test keeps the two in step). The
/// built-in session cookie globs are the exception, kept beside the presets they mirror
/// (`DEFAULT_SESSION_COOKIES` in presets.rs) and added by [`Options::defaults`].
pub const DEFAULTS: &str = r#"
listen = ["127.0.0.1:8080"]
listen_tls = []
workers = "auto"
debug_headers = false

[cache]
size = "256MiB"
max_object_size = "16MiB"
heuristic = true
heuristic_fraction = 0.1
heuristic_max = "1d"
micro_cache = "off"
anonymous_ttl = "off"
grace = "1h"
hit_for_pass = "10s"
keep = "1h"
strip_cdn_cache_control = true
disk_size = "1GiB"

[anonymous]
extra_session_cookies = []
visitor_cookies = []
remember_anonymous_sessions = true
pass_paths = []
edit_invalidation = "host"

[limits]
max_connections = 10000
max_header_bytes = "64KiB"
max_headers = 100
header_timeout = "10s"
backend_connect_timeout = "3s"
backend_first_byte_timeout = "60s"
backend_read_timeout = "60s"
backend_max_concurrency = "auto"
backend_session_share = "25%"
backend_queue = 1024
backend_queue_timeout = "10s"
backend_anonymous_share = "50%"
backend_network_share = "25%"
backend_anonymous_wait = "2s"
backend_anonymous_adaptive = true
trust_unproven_sessions = "0s"
websocket_max = 10000
websocket_per_network = 256
websocket_idle_timeout = "10m"
client_network_v4 = 24
client_network_v6 = 56
trusted_proxies = []
shutdown_timeout = "30s"

[static]
index = ["index.html", "index.htm"]
asset_extensions = ["css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp", "woff", "woff2", "ttf", "otf", "eot", "mp3", "mp4", "m4a", "m4v", "webm", "ogg", "oga", "ogv", "wav", "flac", "pdf", "zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "txt", "xml", "json", "wasm"]
asset_max_age = "7d"
memory = "64MiB"
memory_max_file = "1MiB"
link_dirs = []

[fastcgi]
index = "index.php"
keep_alive = 4
max_unsized_body = "64MiB"
params = {}

[compression]
enabled = true
min_size = "1KiB"
store = "gzip"
transcode_memory = "32MiB"

[purge]
allow = ["127.0.0.1/32", "::1/128"]

[tls]
cert = []
key = []
redirect_http = false
hsts = "off"
http3 = true
acme_directory = "https://acme-v02.api.letsencrypt.org/directory"
acme_dir = "/var/lib/levee/acme"
acme_challenge = "tls-alpn-01"

[log]
access = "off"
access_file = "-"

[app]
processes = 4
concurrency = 1
ready_timeout = "10s"
request_timeout = "60s"
max_requests = 0
max_memory = "off"
max_age = "off"
watch = []
"#;

/// Merging two sets of options: `self` wins where it has a value, `other` fills in.
pub trait Combine {
    fn combine(self, other: Self) -> Self;
}

impl<T> Combine for Option<T> {
    fn combine(self, other: Self) -> Self {
        self.or(other)
    }
}

/// Declares an options table: the struct (serde, unknown keys refused so that a typo is
/// reported) and its [`Combine`], field by field, so that no option is merged by hand.
macro_rules! options_table {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Clone, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl Combine for $name {
            fn combine(self, other: Self) -> Self {
                $name {
                    $($field: Combine::combine(self.$field, other.$field),)*
                }
            }
        }
    };
}

options_table! {
    /// `levee serve`'s options: the config file's top level.
    pub struct Options {
        pub listen: Option<OneOrMany>,
        /// HTTPS listeners (certificates in `[tls]`).
        pub listen_tls: Option<OneOrMany>,
        /// One server, or several of one kind (`["http://10.0.0.1", "http://10.0.0.2"]`).
        pub backend: Option<OneOrMany>,
        /// A path every server of the backend answers with 2xx or 3xx when it is up
        /// (`"/healthz"`); checked actively when set.
        pub health: Option<String>,
        pub root: Option<PathBuf>,
        pub preset: Option<OneOrMany>,
        pub debug_headers: Option<bool>,
        pub workers: Option<Workers>,
        #[serde(default)]
        pub cache: CacheOptions,
        #[serde(default)]
        pub anonymous: AnonymousOptions,
        #[serde(default)]
        pub limits: LimitsOptions,
        #[serde(default, rename = "static")]
        pub static_files: StaticOptions,
        #[serde(default)]
        pub fastcgi: FastCgiOptions,
        #[serde(default)]
        pub compression: CompressionOptions,
        #[serde(default)]
        pub admin: AdminOptions,
        #[serde(default)]
        pub purge: PurgeOptions,
        #[serde(default)]
        pub log: LogOptions,
        #[serde(default)]
        pub app: AppOptions,
        #[serde(default)]
        pub tls: TlsOptions,
        /// `[[site]]` tables; none: one site for every host, from the top level.
        #[serde(rename = "site")]
        pub sites: Option<Vec<SiteOptions>>,
    }
}

options_table! {
    /// `[[site]]`: one site, like nginx's `server`. What it leaves unset comes from the
    /// file's top level (then the built-in defaults), as nginx's blocks inherit.
    pub struct SiteOptions {
        /// How the site is named in the log and the metrics; its first host by default.
        pub name: Option<String>,
        /// The `Host` values (and TLS server names) it answers: `example.com`,
        /// `*.example.com`.
        pub hosts: Option<Vec<String>>,
        /// Answers every host no other site names.
        pub default: Option<bool>,
        pub backend: Option<OneOrMany>,
        pub health: Option<String>,
        pub root: Option<PathBuf>,
        pub preset: Option<OneOrMany>,
        /// nginx's `fastcgi_param`: `MW_CONFIG_FILE = "/etc/mediawiki/LocalSettings.php"`.
        pub fastcgi_params: Option<std::collections::BTreeMap<String, String>>,
        #[serde(default)]
        pub cache: CacheOptions,
        #[serde(default)]
        pub anonymous: AnonymousOptions,
        #[serde(default, rename = "static")]
        pub static_files: StaticOptions,
        #[serde(default)]
        pub fastcgi: FastCgiOptions,
        #[serde(default)]
        pub app: AppOptions,
        #[serde(default)]
        pub tls: SiteTlsOptions,
        /// `[[site.route]]`: path prefixes sent elsewhere.
        pub route: Option<Vec<RouteOptions>>,
    }
}

options_table! {
    /// `[site.tls]`: the site's own certificate.
    pub struct SiteTlsOptions {
        pub cert: Option<String>,
        pub key: Option<String>,
    }
}

options_table! {
    /// `[[site.route]]`, like nginx's `location`: requests whose path starts with `path`
    /// go to another backend, or only to the files of a directory.
    pub struct RouteOptions {
        pub path: Option<String>,
        pub backend: Option<OneOrMany>,
        pub health: Option<String>,
        /// Static files only: from `root` (the site's when unset); never the backend.
        #[serde(rename = "static")]
        pub static_only: Option<bool>,
        pub root: Option<PathBuf>,
        /// Rules (route_rules.rs): a route may carry only these and serve like its site.
        pub deny: Option<bool>,
        pub allow_networks: Option<Vec<String>>,
        pub deny_networks: Option<Vec<String>>,
        pub auth_basic: Option<String>,
        pub auth_basic_user_file: Option<PathBuf>,
        pub redirect: Option<String>,
        pub redirect_status: Option<u16>,
        pub rewrite: Option<String>,
        pub headers: Option<std::collections::BTreeMap<String, String>>,
    }
}

options_table! {
    /// `[tls]`: certificates for the HTTPS listeners.
    pub struct TlsOptions {
        /// Certificate chain files (PEM), each paired with the key of the same place in
        /// `key`; the first is served to clients that send no name.
        pub cert: Option<Vec<String>>,
        pub key: Option<Vec<String>>,
        /// Cleartext GET and HEAD get a 301 to https (others 308).
        pub redirect_http: Option<bool>,
        /// `Strict-Transport-Security` on HTTPS responses, like "max-age=31536000".
        pub hsts: Option<String>,
        /// HTTP/3 (QUIC) on the UDP port of every HTTPS listener, announced by Alt-Svc.
        pub http3: Option<bool>,
        /// Certificates from ACME for the sites' hosts: the account's contact address.
        /// Unset: no ACME.
        pub acme_email: Option<String>,
        /// The ACME server's directory URL (Let's Encrypt's by default).
        pub acme_directory: Option<String>,
        /// Where the ACME account key, certificates and keys are kept.
        pub acme_dir: Option<PathBuf>,
        /// A PEM root certificate to trust for the ACME server, besides the system's.
        pub acme_ca: Option<PathBuf>,
        /// The challenge answered: "tls-alpn-01" or "http-01".
        pub acme_challenge: Option<String>,
    }
}

options_table! {
    /// `[cache]`
    pub struct CacheOptions {
        pub size: Option<String>,
        pub max_object_size: Option<String>,
        pub heuristic: Option<bool>,
        pub heuristic_fraction: Option<f64>,
        pub heuristic_max: Option<String>,
        pub micro_cache: Option<String>,
        pub anonymous_ttl: Option<String>,
        pub grace: Option<String>,
        /// Its name until 0.1 was `hit_for_miss`, which is still read.
        #[serde(alias = "hit_for_miss")]
        pub hit_for_pass: Option<String>,
        pub keep: Option<String>,
        /// Remove `CDN-Cache-Control` from responses to clients (RFC 9213).
        pub strip_cdn_cache_control: Option<bool>,
        /// A directory for the disk tier (off when unset).
        pub disk_path: Option<String>,
        pub disk_size: Option<String>,
        /// `redis://host:port` of the shared tier (off when unset); several: a cluster.
        pub redis: Option<OneOrMany>,
    }
}

options_table! {
    /// `[anonymous]`
    pub struct AnonymousOptions {
        /// Replaces the built-in list of session cookie globs.
        pub session_cookies: Option<Vec<String>>,
        pub extra_session_cookies: Option<Vec<String>>,
        /// Per-visitor cookies (trails, visit counters) that neither stop a page from
        /// being stored nor make the visitor's later requests pass.
        pub visitor_cookies: Option<Vec<String>>,
        /// Session cookies the backend gave a cookieless visitor on a GET (a session
        /// started for everyone, a form's) keep that visitor anonymous until they send
        /// anything but GET or HEAD with it.
        pub remember_anonymous_sessions: Option<bool>,
        pub pass_paths: Option<Vec<String>>,
        pub edit_invalidation: Option<String>,
    }
}

options_table! {
    /// `[limits]`
    pub struct LimitsOptions {
        pub max_connections: Option<usize>,
        pub max_header_bytes: Option<String>,
        pub max_headers: Option<usize>,
        pub header_timeout: Option<String>,
        pub backend_connect_timeout: Option<String>,
        pub backend_first_byte_timeout: Option<String>,
        pub backend_read_timeout: Option<String>,
        pub backend_max_concurrency: Option<Workers>,
        pub backend_session_share: Option<String>,
        pub backend_queue: Option<usize>,
        pub backend_queue_timeout: Option<String>,
        pub backend_anonymous_share: Option<String>,
        pub backend_network_share: Option<String>,
        pub backend_anonymous_wait: Option<String>,
        pub backend_anonymous_adaptive: Option<bool>,
        pub trust_unproven_sessions: Option<String>,
        pub websocket_max: Option<usize>,
        pub websocket_per_network: Option<usize>,
        pub websocket_idle_timeout: Option<String>,
        pub client_network_v4: Option<u8>,
        pub client_network_v6: Option<u8>,
        pub trusted_proxies: Option<Vec<String>>,
        pub shutdown_timeout: Option<String>,
    }
}

options_table! {
    /// `[static]`
    pub struct StaticOptions {
        pub index: Option<Vec<String>>,
        pub asset_extensions: Option<Vec<String>>,
        pub asset_max_age: Option<String>,
        pub memory: Option<String>,
        pub memory_max_file: Option<String>,
        /// Directories outside the root that its symlinks may lead into (the presets
        /// add their packages' own).
        pub link_dirs: Option<Vec<PathBuf>>,
    }
}

options_table! {
    /// `[fastcgi]`
    pub struct FastCgiOptions {
        pub index: Option<String>,
        pub keep_alive: Option<usize>,
        pub max_unsized_body: Option<String>,
        pub pool_config: Option<PathBuf>,
        /// Parameters sent to php with every request, over levee's own (nginx's
        /// `fastcgi_param`): `MW_CONFIG_FILE = "/etc/mediawiki/LocalSettings.php"`.
        pub params: Option<std::collections::BTreeMap<String, String>>,
    }
}

options_table! {
    /// `[compression]`
    pub struct CompressionOptions {
        pub enabled: Option<bool>,
        pub min_size: Option<String>,
        pub store: Option<String>,
        pub transcode_memory: Option<String>,
    }
}

options_table! {
    /// `[admin]`
    pub struct AdminOptions {
        pub listen: Option<String>,
        pub token: Option<String>,
    }
}

options_table! {
    /// `[app]`
    pub struct AppOptions {
        pub command: Option<String>,
        pub processes: Option<usize>,
        pub concurrency: Option<usize>,
        pub ready_timeout: Option<String>,
        pub request_timeout: Option<String>,
        pub max_requests: Option<u64>,
        pub max_memory: Option<String>,
        pub max_age: Option<String>,
        pub watch: Option<Vec<String>>,
        pub cwd: Option<PathBuf>,
        pub env: Option<std::collections::BTreeMap<String, String>>,
    }
}

options_table! {
    /// `[log]`
    pub struct LogOptions {
        pub access: Option<String>,
        pub access_file: Option<String>,
    }
}

options_table! {
    /// `[purge]`
    pub struct PurgeOptions {
        pub allow: Option<Vec<String>>,
    }
}

/// One value or a list of them (`preset = "wordpress"` or `preset = ["wordpress", "mediawiki"]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl From<&str> for OneOrMany {
    fn from(s: &str) -> OneOrMany {
        OneOrMany::One(s.to_string())
    }
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }

    /// A list given on the command line (a repeated flag): `None` when it was not given.
    pub fn from_flags(values: &[String]) -> Option<OneOrMany> {
        (!values.is_empty()).then(|| OneOrMany::Many(values.to_vec()))
    }
}

/// `workers = 4`, or `workers = "auto"` as nginx's `worker_processes` takes it; also
/// `backend_max_concurrency`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Workers {
    Count(usize),
    Word(String),
}

impl Options {
    /// The config file at `path`.
    pub fn read(path: &Path) -> Result<Options, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// The built-in values ([`DEFAULTS`]).
    pub fn defaults() -> Options {
        // DEFAULTS is a constant checked by a unit test; an empty table would still give
        // clear "missing value" errors rather than a panic.
        let mut d: Options = toml::from_str(DEFAULTS).unwrap_or_default();
        d.anonymous.session_cookies = Some(
            crate::DEFAULT_SESSION_COOKIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_table_parses_whole() {
        let d: Options = toml::from_str(DEFAULTS).unwrap();
        assert!(d.listen.is_some() && d.cache.size.is_some() && d.compression.store.is_some());
    }
}

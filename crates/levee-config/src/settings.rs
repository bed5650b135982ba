//! The validated settings `levee serve` runs with, and the one conversion from
//! [`Options`] to them: every value is parsed and checked here, before a port is bound,
//! so that a mistake is reported with a message that says what to change. No default is
//! named here: they all come from [`DEFAULTS`](crate::options::DEFAULTS).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::backend_limit::BackendLimit;
use crate::convert::{
    address, duration, need, networks, percent, positive, prefix_len, share, size, workers,
};
use crate::options::{
    AdminOptions, CacheOptions, Combine, CompressionOptions, LimitsOptions, LogOptions, Options,
    PurgeOptions, Workers,
};
use crate::site::Site;
use crate::ConfigError;

/// The store shared by every site: its size, and how long an uncacheable URL goes
/// straight to the backend. What may be stored and for how long is each site's
/// ([`CacheRules`](crate::CacheRules)).
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Bound on the bytes of stored responses (bodies and headers).
    pub size: u64,
    /// How long a key whose response was not cacheable goes straight to the backend.
    pub hit_for_pass: Duration,
    /// Remove `CDN-Cache-Control` from responses before clients get them (levee obeys it,
    /// RFC 9213); `Levee-Cache-Control` is levee's own and always removed.
    pub strip_cdn_cache_control: bool,
    /// The disk tier (levee-disk), when a directory is given.
    pub disk: Option<crate::DiskSettings>,
    /// The shared tier's Redis URLs (levee-redis); empty: no shared tier.
    pub redis: Vec<String>,
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
    /// Share of the slots kept for requests with a session or Authorization (0 to 1).
    pub backend_session_share: f64,
    /// Requests that may wait for a backend slot; more are refused at once.
    pub backend_queue: usize,
    /// Longest wait for a backend slot.
    pub backend_queue_timeout: Duration,
    /// Share of the slots anonymous work (the crawlers' lane) may hold while people's
    /// work (revalidations, sessions) is in flight or waiting (0.0 to 1.0).
    pub backend_anonymous_share: f64,
    /// Share of the slots one client network's anonymous work may hold (as many wait).
    pub backend_network_share: f64,
    /// Longest wait of anonymous work for a backend slot; a request that would wait
    /// longer is refused at once.
    pub backend_anonymous_wait: Duration,
    /// People's latency sets the lane's cap within its share (and 2 s of linger).
    pub backend_anonymous_adaptive: bool,
    /// For this long after levee starts, a session cookie whose value levee never saw
    /// the backend give out still counts as a person's for the backend's scheduling
    /// (zero: never). For the first hours in front of a site whose people logged in
    /// before levee was there.
    pub trust_unproven_sessions: Duration,
    /// WebSockets open at once, in all and per client network; one silent both ways
    /// this long is closed.
    pub websocket_max: usize,
    pub websocket_per_network: usize,
    pub websocket_idle_timeout: Duration,
    /// Client networks' prefix lengths (IPv4, IPv6).
    pub client_network_v4: u8,
    pub client_network_v6: u8,
    /// Peers whose `X-Forwarded-For` / `Forwarded` name the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Longest wait for in-flight requests after SIGTERM.
    pub shutdown_timeout: Duration,
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

/// Everything `levee serve` needs, validated: what the whole process shares (listeners,
/// workers, limits, the admin listener, the log, the store's size), and the sites.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: Vec<SocketAddr>,
    /// HTTPS listeners; empty: none.
    pub listen_tls: Vec<SocketAddr>,
    pub tls: TlsSettings,
    /// The sites, each with its hosts, backend, root and rules; a request goes to the
    /// first that answers its host. Never empty: today one, for every host.
    pub sites: Vec<Site>,
    pub compression: CompressionSettings,
    pub cache: CacheSettings,
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

/// `[tls]`: the certificates of the HTTPS listeners, and what cleartext gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// (certificate chain, key) files, in order; the first is the default certificate.
    pub certs: Vec<(PathBuf, PathBuf)>,
    /// Cleartext GET and HEAD are redirected to https with 301, other methods with 308.
    pub redirect_http: bool,
    /// The `Strict-Transport-Security` value sent on HTTPS responses: a header value
    /// made once here, not on every response.
    pub hsts: Option<http::HeaderValue>,
    /// HTTP/3 over QUIC on the UDP port of each HTTPS listener (levee-h3).
    pub http3: bool,
    /// Certificates from an ACME CA for the sites' hosts that no file covers; `None`:
    /// no ACME (`acme_email` unset).
    pub acme: Option<AcmeSettings>,
}

/// `[tls] acme_*`: where certificates come from when no file gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcmeSettings {
    /// The account's contact address (without `mailto:`).
    pub email: String,
    /// The ACME server's directory URL, https.
    pub directory: String,
    /// The account key, certificates and keys (made 0700, files 0600).
    pub dir: PathBuf,
    /// An extra root to trust for the ACME server.
    pub ca: Option<PathBuf>,
    /// The challenge answered when the server offers both.
    pub challenge: AcmeChallenge,
}

/// The ACME challenge levee answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// On the HTTPS listener (the CA connects to port 443).
    TlsAlpn01,
    /// On the cleartext listener (the CA connects to port 80).
    Http01,
}

impl AcmeChallenge {
    pub fn as_str(self) -> &'static str {
        match self {
            AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            AcmeChallenge::Http01 => "http-01",
        }
    }
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

        let listen = listen(o.listen.clone())?;
        let listen_tls = need(o.listen_tls.clone(), "listen_tls")?
            .into_vec()
            .iter()
            .map(|l| address("listen_tls", l, "0.0.0.0:443 or [::]:443"))
            .collect::<Result<Vec<_>, _>>()?;
        let sites = sites(&o, anonymous_ttl_set)?;
        let tls = TlsSettings::from_options(o.tls.clone(), !listen_tls.is_empty(), &sites)?;
        let compression = CompressionSettings::from_options(o.compression)?;
        let cache = CacheSettings::from_options(o.cache)?;
        if sites.iter().any(|s| s.cache.max_object_size > cache.size) {
            return Err(ConfigError::invalid(
                "cache.max_object_size",
                "must not exceed cache.size",
            ));
        }
        let limits = Limits::from_options(o.limits)?;
        let workers = workers(need(o.workers, "workers")?)?;
        let admin = AdminSettings::from_options(o.admin)?;
        let purge = PurgeSettings::from_options(o.purge)?;
        let access_log = AccessLog::from_options(o.log)?;
        Ok(Settings {
            listen,
            listen_tls,
            tls,
            sites,
            compression,
            cache,
            limits,
            debug_headers: need(o.debug_headers, "debug_headers")?,
            workers,
            admin,
            purge,
            access_log,
        })
    }

    /// The site for requests to `host` (lowercase, without port): see [`SiteIndex`].
    pub fn site_for(&self, host: &str) -> Option<&Site> {
        self.sites.get(SiteIndex::new(&self.sites).site_for(host)?)
    }
}

/// Which site answers which host: the one that names it exactly, else the longest `*.`
/// pattern that matches, else the default site; `None`: no site answers it (421 over
/// TLS, else 404). Built once by `levee serve`; the one rule, for serve and doctor alike.
#[derive(Debug, Clone)]
pub struct SiteIndex {
    exact: std::collections::HashMap<String, usize>,
    /// `*.example.com` patterns, longest first.
    wildcards: Vec<(String, usize)>,
    default: Option<usize>,
    /// One site for every host (a configuration without `[[site]]`): no lookup.
    pub only: Option<usize>,
}

impl SiteIndex {
    pub fn new(sites: &[Site]) -> SiteIndex {
        let mut exact = std::collections::HashMap::new();
        let mut wildcards = Vec::new();
        for (i, s) in sites.iter().enumerate() {
            for h in &s.hosts {
                match h.starts_with('*') {
                    true => wildcards.push((h.clone(), i)),
                    false => {
                        exact.insert(h.clone(), i);
                    }
                }
            }
        }
        wildcards.sort_by_key(|w| std::cmp::Reverse(w.0.len()));
        let only = match sites {
            [one] if one.default && one.hosts.is_empty() => Some(0),
            _ => None,
        };
        SiteIndex {
            exact,
            wildcards,
            default: sites.iter().position(|s| s.default),
            only,
        }
    }

    /// The index of the site for `host` (lowercase, without port or trailing dot).
    pub fn site_for(&self, host: &str) -> Option<usize> {
        if self.only.is_some() {
            return self.only;
        }
        self.exact
            .get(host)
            .copied()
            .or_else(|| {
                self.wildcards
                    .iter()
                    .find(|(pattern, _)| crate::site::host_matches(pattern, host))
                    .map(|(_, i)| *i)
            })
            .or(self.default)
    }
}

/// The `[[site]]` tables, or the one site of the top level when there are none. Hosts
/// and names are unique; at most one site is the default.
fn sites(o: &Options, anonymous_ttl_set: bool) -> Result<Vec<Site>, ConfigError> {
    let Some(tables) = o.sites.clone() else {
        return Ok(vec![Site::default_from(o, anonymous_ttl_set)?]);
    };
    if tables.is_empty() {
        return Err(ConfigError::invalid(
            "site",
            "no [[site]] table; remove `site = []` to serve every host from the top level",
        ));
    }
    let mut sites: Vec<Site> = Vec::with_capacity(tables.len());
    for (i, t) in tables.into_iter().enumerate() {
        let label = t
            .name
            .clone()
            .or_else(|| t.hosts.as_ref().and_then(|h| h.first().cloned()))
            .unwrap_or_else(|| format!("#{}", i + 1));
        let site = Site::from_options(t, o, anonymous_ttl_set).map_err(|e| ConfigError::Site {
            site: label.clone(),
            source: Box::new(e),
        })?;
        let clash = |message: String| ConfigError::Site {
            site: label.clone(),
            source: Box::new(ConfigError::invalid("site", message)),
        };
        for other in &sites {
            if let Some(h) = site.hosts.iter().find(|h| other.hosts.contains(h)) {
                return Err(clash(format!(
                    "the host {h} is also listed by the site `{}`; a host belongs to one site",
                    other.name
                )));
            }
            if other.name == site.name {
                return Err(clash(format!(
                    "another site is named `{}`; give each a name of its own (name = \"...\")",
                    site.name
                )));
            }
            if site.default && other.default {
                return Err(clash(format!(
                    "the site `{}` is the default already; only one site may say default = true",
                    other.name
                )));
            }
        }
        sites.push(site);
    }
    Ok(sites)
}

fn listen(value: Option<crate::OneOrMany>) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut listen = Vec::new();
    for l in need(value, "listen")?.into_vec() {
        listen.push(address("listen", &l, "127.0.0.1:8080 or [::1]:8080")?);
    }
    if listen.is_empty() {
        return Err(ConfigError::invalid(
            "listen",
            "at least one address is needed",
        ));
    }
    Ok(listen)
}

impl AcmeSettings {
    /// `None` without `acme_email`.
    fn from_options(t: &crate::options::TlsOptions) -> Result<Option<AcmeSettings>, ConfigError> {
        let Some(email) = t.acme_email.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let email = email.strip_prefix("mailto:").unwrap_or(email);
        let valid = email
            .split_once('@')
            .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
            && !email.contains(|c: char| c.is_whitespace() || c == ',');
        if !valid {
            return Err(ConfigError::invalid(
                "tls.acme_email",
                format!("`{email}` is not an email address; give the address the certificate authority may write to, like admin@example.com"),
            ));
        }
        let directory = need(t.acme_directory.clone(), "tls.acme_directory")?;
        if !directory.starts_with("https://") {
            return Err(ConfigError::invalid(
                "tls.acme_directory",
                format!("`{directory}` is not an https URL; give the ACME server's directory, like https://acme-v02.api.letsencrypt.org/directory"),
            ));
        }
        let dir = need(t.acme_dir.clone(), "tls.acme_dir")?;
        if dir.as_os_str().is_empty() {
            return Err(ConfigError::invalid(
                "tls.acme_dir",
                "give the directory for ACME keys and certificates, like /var/lib/levee/acme",
            ));
        }
        let challenge = match need(t.acme_challenge.clone(), "tls.acme_challenge")?.as_str() {
            "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
            "http-01" => AcmeChallenge::Http01,
            other => {
                return Err(ConfigError::invalid(
                    "tls.acme_challenge",
                    format!("`{other}` is not a challenge levee answers: \"tls-alpn-01\" (on the HTTPS listener) or \"http-01\" (on the cleartext one)"),
                ))
            }
        };
        Ok(Some(AcmeSettings {
            email: email.to_owned(),
            directory,
            dir,
            ca: t.acme_ca.clone(),
            challenge,
        }))
    }
}

impl TlsSettings {
    fn from_options(
        t: crate::options::TlsOptions,
        listening: bool,
        sites: &[Site],
    ) -> Result<TlsSettings, ConfigError> {
        let acme = AcmeSettings::from_options(&t)?;
        let site_certs = sites.iter().any(|s| s.tls.is_some());
        let certs = need(t.cert, "tls.cert")?;
        let keys = need(t.key, "tls.key")?;
        if certs.len() != keys.len() {
            return Err(ConfigError::invalid(
                "tls.cert",
                format!("{} certificate file(s) and {} key file(s): give each certificate its key (--tls-cert FILE --tls-key FILE, in pairs)", certs.len(), keys.len()),
            ));
        }
        if listening && certs.is_empty() && !site_certs && acme.is_none() {
            return Err(ConfigError::invalid(
                "listen_tls",
                "an HTTPS listener needs a certificate: --tls-cert FILE --tls-key FILE, or [tls] cert and key, or certificates from ACME (--acme-email ADDRESS, [tls] acme_email)",
            ));
        }
        if !listening && acme.is_some() {
            return Err(ConfigError::invalid(
                "tls.acme_email",
                "ACME certificates are for HTTPS, and there is no HTTPS address: add --listen-tls ADDR (listen_tls)",
            ));
        }
        if !listening && (!certs.is_empty() || site_certs) {
            return Err(ConfigError::invalid(
                "tls.cert",
                "certificates are given but no HTTPS address: add --listen-tls ADDR (listen_tls)",
            ));
        }
        let redirect_http = need(t.redirect_http, "tls.redirect_http")?;
        if redirect_http && !listening {
            return Err(ConfigError::invalid(
                "tls.redirect_http",
                "redirecting to https needs an HTTPS listener: add --listen-tls ADDR (listen_tls)",
            ));
        }
        // A value with characters no header may carry is refused like any other.
        let hsts = match need(t.hsts, "tls.hsts")?.trim() {
            "off" | "" => None,
            v => match http::HeaderValue::from_str(v) {
                Ok(h) if v.to_ascii_lowercase().starts_with("max-age=") => Some(h),
                _ => return Err(ConfigError::invalid(
                    "tls.hsts",
                    format!("`{v}` is not a Strict-Transport-Security value; write it like \"max-age=31536000\" (add \"; includeSubDomains\" if every subdomain is HTTPS), or \"off\""),
                )),
            },
        };
        let http3 = need(t.http3, "tls.http3")?;
        Ok(TlsSettings {
            http3,
            certs: certs
                .into_iter()
                .zip(keys)
                .map(|(c, k)| (PathBuf::from(c), PathBuf::from(k)))
                .collect(),
            redirect_http,
            hsts,
            acme,
        })
    }
}

impl CompressionSettings {
    fn from_options(cz: CompressionOptions) -> Result<CompressionSettings, ConfigError> {
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
        Ok(compression)
    }
}

impl CacheSettings {
    fn from_options(c: CacheOptions) -> Result<CacheSettings, ConfigError> {
        let (disk, redis) = crate::tiers::from_options(c.disk_path, c.disk_size, c.redis)?;
        Ok(CacheSettings {
            disk,
            redis,
            size: size("cache.size", c.size)?,
            hit_for_pass: duration("cache.hit_for_pass", c.hit_for_pass)?,
            strip_cdn_cache_control: need(
                c.strip_cdn_cache_control,
                "cache.strip_cdn_cache_control",
            )?,
        })
    }
}

impl Limits {
    fn from_options(l: LimitsOptions) -> Result<Limits, ConfigError> {
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
            backend_anonymous_share: share(
                "limits.backend_anonymous_share",
                l.backend_anonymous_share,
            )?,
            backend_network_share: share(
                "limits.backend_network_share",
                l.backend_network_share,
            )?,
            backend_anonymous_wait: duration(
                "limits.backend_anonymous_wait",
                l.backend_anonymous_wait,
            )?,
            backend_anonymous_adaptive: need(
                l.backend_anonymous_adaptive,
                "limits.backend_anonymous_adaptive",
            )?,
            trust_unproven_sessions: duration(
                "limits.trust_unproven_sessions",
                l.trust_unproven_sessions,
            )?,
            websocket_max: need(l.websocket_max, "limits.websocket_max")?,
            websocket_per_network: need(l.websocket_per_network, "limits.websocket_per_network")?,
            websocket_idle_timeout: duration(
                "limits.websocket_idle_timeout",
                l.websocket_idle_timeout,
            )?,
            client_network_v4: prefix_len("limits.client_network_v4", l.client_network_v4, 32)?,
            client_network_v6: prefix_len("limits.client_network_v6", l.client_network_v6, 128)?,
            trusted_proxies: networks(
                "limits.trusted_proxies",
                need(l.trusted_proxies, "limits.trusted_proxies")?,
            )?,
            shutdown_timeout: duration("limits.shutdown_timeout", l.shutdown_timeout)?,
        };
        if limits.max_header_bytes < 8192 {
            return Err(ConfigError::invalid(
                "limits.max_header_bytes",
                "must be at least 8KiB",
            ));
        }
        Ok(limits)
    }
}

impl AdminSettings {
    fn from_options(a: AdminOptions) -> Result<AdminSettings, ConfigError> {
        Ok(AdminSettings {
            listen: match a.listen {
                Some(l) => Some(address("admin.listen", &l, "127.0.0.1:9091 or [::1]:9091")?),
                None => None,
            },
            token: match a.token {
                Some(t) if t.trim().is_empty() => {
                    return Err(ConfigError::invalid(
                        "admin.token",
                        "the token is empty; remove the line to run without one",
                    ))
                }
                t => t,
            },
        })
    }
}

impl PurgeSettings {
    fn from_options(p: PurgeOptions) -> Result<PurgeSettings, ConfigError> {
        let allow = networks("purge.allow", need(p.allow, "purge.allow")?)?;
        Ok(PurgeSettings { allow })
    }
}

impl AccessLog {
    /// `None`: the access log is off.
    fn from_options(l: LogOptions) -> Result<Option<AccessLog>, ConfigError> {
        let format = match need(l.access, "log.access")?.as_str() {
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
        Ok(format.map(|format| AccessLog {
            format,
            file: l
                .access_file
                .filter(|f| f != "-" && !f.is_empty())
                .map(PathBuf::from),
        }))
    }
}

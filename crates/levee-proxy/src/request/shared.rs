//! What every phase of a request shares: the settings, the sites, the cache and its
//! fills, the encoder and the counters; and what a fill tells the requests waiting for
//! it ([`FillHead`]).

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use std::time::{Duration, Instant};

use http::{HeaderMap, StatusCode};
use levee_cache::{CacheKey, Coalescer, Entry, HitForMiss, NotStored, Store, VaryKey};
use levee_config::Settings;

use super::site::Site;
use crate::encoding::Encoder;
use crate::error::ServeError;
use crate::stats::Stats;
use crate::upstream::UpstreamError;
use crate::zerocopy;
use levee_limits::client_net::{ClientNet, ClientNets};
use levee_limits::Class;
use levee_log::AccessLogger;
use levee_visitor::proven::Proven;

/// What a reload replaces of the settings the whole process shares (SIGHUP,
/// `POST /reload`). Read with [`Shared::conf`]. Its `settings.sites` is empty: each
/// site's settings live with the site ([`Site::conf`]).
pub(crate) struct Conf {
    pub settings: Settings,
}

/// Re-reads the configuration (the binary's config file and flags).
pub type Reloader = Box<dyn Fn() -> Result<Settings, String> + Send + Sync>;

/// URLs marked hit-for-miss at most; the least used go first.
const HIT_FOR_MISS_URLS: u64 = 100_000;
/// Memory for memfd copies of hot large bodies (sendfile): a quarter of the cache, within
/// these bounds. A bounded extra copy of what the cache holds.
const SENDFILE_MEMORY: (u64, u64) = (16 << 20, 256 << 20);

/// Everything the request phases share.
pub(crate) struct Shared {
    conf: ArcSwap<Conf>,
    /// Set once serving starts, when there is a config to re-read.
    pub reloader: OnceLock<Reloader>,
    /// Never empty; a request goes to the site that names its host, else the default.
    pub sites: Vec<Site>,
    /// Which site answers which host.
    hosts: levee_config::SiteIndex,
    pub store: Store,
    /// Disk and Redis below memory, when configured (tiers.rs).
    pub tiers: Option<levee_tiers::Tiers>,
    pub fills: Arc<Coalescer<FillHead>>,
    /// Session values the backend gave out as people's, shared by every site (proven.rs).
    pub proven: Arc<Proven>,
    /// Keys whose last response was not cacheable, and until when (levee's clock):
    /// fetched without coalescing meanwhile.
    hit_for_miss: moka::sync::Cache<CacheKey, (NotStored, Instant)>,
    pub encoder: Encoder,
    /// Memfd copies of hot large bodies, sent with sendfile.
    pub sendfile: zerocopy::Files,
    pub stats: Stats,
    /// One line per request, when `[log] access` is on.
    pub access_log: Option<AccessLogger>,
    /// The certificates of the HTTPS listeners, and the acceptor over them (HTTP/2 and
    /// HTTP/1.1 by ALPN), when there are any.
    pub tls: Option<Tls>,
    /// Certificates from ACME (`[tls] acme_email`): the manager that orders them, run by
    /// `serve_workers`, and answers HTTP-01 for `classify::early`.
    pub acme: Option<levee_acme::Manager>,
}

/// HTTPS: the certificates (reloaded in place, and issued by ACME) and one acceptor for
/// every listener.
pub(crate) struct Tls {
    pub certs: Arc<levee_tls::CertStore>,
    pub acceptor: levee_tls::tokio_rustls::TlsAcceptor,
    /// The HTTPS listeners as bound (port 0 resolved), for `redirect_http`.
    pub bound: OnceLock<Vec<std::net::SocketAddr>>,
}

/// The certificate pairs of the settings: `[tls]`'s, each checked against the hosts of
/// every site, then each site's own against its hosts (a certificate for none of them
/// is a mistake; no hosts: any name goes).
pub fn cert_pairs(settings: &Settings, sites: &[levee_config::Site]) -> Vec<levee_tls::CertPair> {
    let hosts: Vec<String> = sites.iter().flat_map(|s| s.hosts.clone()).collect();
    let global = settings
        .tls
        .certs
        .iter()
        .map(|(cert, key)| levee_tls::CertPair::new(cert, key).serving(hosts.iter().cloned()));
    let own = sites.iter().filter_map(|s| {
        let (cert, key) = s.tls.as_ref()?;
        Some(levee_tls::CertPair::new(cert, key).serving(s.hosts.iter().cloned()))
    });
    global.chain(own).collect()
}

/// What the ACME manager is to do: the settings, and the names of every site (those a
/// certificate file covers are left out by the manager).
fn acme_config(a: levee_config::AcmeSettings, sites: &[Site]) -> levee_acme::Config {
    levee_acme::Config {
        email: a.email,
        directory: a.directory,
        dir: a.dir,
        ca: a.ca,
        names: sites.iter().flat_map(|s| s.hosts().to_vec()).collect(),
        challenge: match a.challenge {
            levee_config::AcmeChallenge::TlsAlpn01 => levee_acme::Challenge::TlsAlpn01,
            levee_config::AcmeChallenge::Http01 => levee_acme::Challenge::Http01,
        },
    }
}

impl Shared {
    /// Fails when a site's document root or backend cannot be used, or the access log
    /// cannot be opened.
    pub fn new(mut settings: Settings) -> Result<Shared, ServeError> {
        let pairs = cert_pairs(&settings, &settings.sites);
        let hosts = levee_config::SiteIndex::new(&settings.sites);
        let site_settings = std::mem::take(&mut settings.sites);
        let proven = Arc::new(Proven::new(levee_visitor::proven::CAPACITY));
        proven.trust_for(settings.limits.trust_unproven_sessions);
        if !settings.limits.trust_unproven_sessions.is_zero() {
            tracing::warn!(
                window = ?settings.limits.trust_unproven_sessions,
                "limits.trust_unproven_sessions: every session cookie counts as a person's until then, made-up ones too"
            );
        }
        let sites = site_settings
            .into_iter()
            .enumerate()
            .map(|(i, s)| Site::new(i, &settings, s, proven.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        if sites.is_empty() {
            return Err(ServeError::NoSite);
        }
        let access_log = match &settings.access_log {
            Some(config) => Some(AccessLogger::start(config).map_err(|source| {
                ServeError::AccessLog {
                    file: config
                        .file
                        .as_ref()
                        .map_or("standard output".into(), |f| f.display().to_string()),
                    source,
                }
            })?),
            None => None,
        };
        let acme_settings = settings.tls.acme.clone();
        let tls = match settings.listen_tls.is_empty() {
            true => None,
            false => {
                let certs = Arc::new(levee_tls::CertStore::load(
                    &pairs,
                    levee_tls::Settings {
                        runtime_certificates: acme_settings.is_some(),
                        ..levee_tls::Settings::default()
                    },
                )?);
                // acme-tls/1 last: only a TLS-ALPN-01 validation, which offers nothing
                // else, negotiates it (and connection.rs closes it after the handshake).
                let acceptor = match acme_settings {
                    Some(_) => certs.acceptor(&[b"h2", b"http/1.1", levee_tls::ACME_TLS_ALPN]),
                    None => certs.acceptor(levee_tls::DEFAULT_ALPN),
                };
                warn_expiring(&certs);
                Some(Tls {
                    certs,
                    acceptor,
                    bound: OnceLock::new(),
                })
            }
        };
        let acme = match (acme_settings, &tls) {
            (Some(a), Some(tls)) => Some(levee_acme::Manager::new(
                acme_config(a, &sites),
                tls.certs.clone(),
            )?),
            _ => None,
        };
        let c = &settings.cache;
        let store = Store::new(c.size);
        let tiers = levee_tiers::Tiers::open(c, &store, &settings.limits, &proven)?;
        Ok(Shared {
            tls,
            acme,
            access_log,
            hosts,
            sites,
            encoder: Encoder::new(&settings.compression),
            sendfile: zerocopy::Files::new(
                (c.size / 4).clamp(SENDFILE_MEMORY.0, SENDFILE_MEMORY.1),
            ),
            store,
            tiers,
            proven,
            fills: Coalescer::new(FillHead::abandoned),
            // Expiry is checked on levee's clock (tests move it); moka's own TTL, on the
            // real clock, only bounds how long a mark takes memory.
            hit_for_miss: moka::sync::Cache::builder()
                .max_capacity(HIT_FOR_MISS_URLS)
                .time_to_live(c.hit_for_miss.max(Duration::from_millis(1)))
                .build(),
            stats: Stats::default(),
            reloader: OnceLock::new(),
            conf: ArcSwap::from_pointee(Conf { settings }),
        })
    }

    /// The settings in force now (a reload may replace them between two calls).
    pub fn conf(&self) -> arc_swap::Guard<Arc<Conf>> {
        self.conf.load()
    }

    /// The client network of a request from `peer` (the backend lane's unit).
    pub fn client_net(&self, peer: std::net::IpAddr, headers: &HeaderMap) -> ClientNet {
        ClientNets::from_limits(&self.conf().settings.limits).of(peer, headers)
    }

    /// Counts a backend request that got no slot, and the network refused for the
    /// dashboard.
    pub fn refused(&self, class: Class, e: &UpstreamError) {
        self.stats.backend::<()>(&Err(e.clone()));
        if let (Class::Anonymous(net), UpstreamError::Refused { .. }) = (class, e) {
            self.stats.refused_nets.note(net);
        }
    }

    /// The site that answers a request for this target and `Host`: `None` when no
    /// site does (421 over TLS, else 404).
    pub fn site_for(&self, parts: &http::request::Parts) -> Option<&Site> {
        if let Some(only) = self.hosts.only {
            return self.sites.get(only);
        }
        let host = parts
            .uri
            .host()
            .or_else(|| parts.headers.get(http::header::HOST)?.to_str().ok())
            .map(|h| host_name(h).to_ascii_lowercase())
            .unwrap_or_default();
        let index = self.hosts.site_for(host.trim_end_matches('.'))?;
        self.sites.get(index)
    }

    /// Whether `key` is marked hit-for-miss now, and why.
    pub fn hit_for_miss(&self, key: &CacheKey) -> Option<NotStored> {
        let (reason, until) = self.hit_for_miss.get(key)?;
        (levee_cache::clock::now() < until).then_some(reason)
    }

    /// Sets, renews or clears the hit-for-miss mark of `key`.
    pub fn mark_hit_for_miss(&self, key: &CacheKey, mark: HitForMiss) {
        match mark {
            HitForMiss::Set(reason) => {
                let until = levee_cache::clock::now() + self.conf().settings.cache.hit_for_miss;
                self.hit_for_miss.insert(key.clone(), (reason, until));
            }
            HitForMiss::Clear => self.hit_for_miss.invalidate(key),
            HitForMiss::Leave => {}
        }
    }

    /// Hit-for-miss marks held now (a gauge of `/metrics`).
    pub fn hit_for_miss_urls(&self) -> u64 {
        self.hit_for_miss.entry_count()
    }

    /// Re-reads the configuration and applies what can change while serving; the rest
    /// keeps its running value and is named in the answer ("needs a restart"). An
    /// invalid configuration changes nothing: its error is the answer.
    pub fn reload(&self) -> Result<Vec<&'static str>, String> {
        let Some(reloader) = self.reloader.get() else {
            return Err("levee was started without a configuration to re-read".into());
        };
        let mut new = reloader()?;
        // Certificates first: a file that cannot be used refuses the whole reload, and
        // the certificates in use stay (renewed files under the same names are read
        // again).
        if let Some(tls) = &self.tls {
            tls.certs
                .reload(&cert_pairs(&new, &new.sites))
                .map_err(|e| e.to_string())?;
            warn_expiring(&tls.certs);
        }
        let old = self.conf();
        let mut restart = Vec::new();
        // What the running structures were built from (sockets, threads, the cache's
        // capacity, codecs, the log writer) stays as it is. Compared by their Debug
        // form: not every settings type is PartialEq.
        macro_rules! keep {
            ($name:literal, $($field:ident).+) => {
                if format!("{:?}", new.$($field).+) != format!("{:?}", old.settings.$($field).+) {
                    restart.push($name);
                    new.$($field).+ = old.settings.$($field).+.clone();
                }
            };
        }
        keep!("listen", listen);
        keep!("listen_tls", listen_tls);
        keep!("tls.acme_*", tls.acme);
        keep!("workers", workers);
        keep!("compression", compression);
        keep!("limits", limits);
        keep!("cache.size", cache.size);
        keep!("cache.hit_for_miss", cache.hit_for_miss);
        keep!("cache.disk_path", cache.disk);
        keep!("cache.redis", cache.redis);
        keep!("admin.listen", admin.listen);
        keep!("log", access_log);
        let sites = std::mem::take(&mut new.sites);
        let same_sites = sites.len() == self.sites.len()
            && sites
                .iter()
                .zip(&self.sites)
                .all(|(n, s)| *n.name == *s.name);
        if same_sites {
            for (site, settings) in self.sites.iter().zip(sites) {
                site.reload(settings, &mut restart);
            }
        } else {
            restart.push("sites");
        }
        self.conf.store(Arc::new(Conf { settings: new }));
        restart.dedup();
        Ok(restart)
    }

    /// Reloads and says how it went on standard error (the operator's terminal or
    /// journal): SIGHUP and `POST /reload` alike.
    pub fn reload_and_report(&self) -> Result<Vec<&'static str>, String> {
        levee_systemd::reloading();
        let r = self.reload();
        levee_systemd::reloaded();
        match &r {
            Ok(kept) if kept.is_empty() => eprintln!("levee: configuration reloaded"),
            Ok(kept) => eprintln!(
                "levee: configuration reloaded; these changes need a restart and were not applied: {}",
                kept.join(", ")
            ),
            Err(e) => eprintln!("levee: reload refused, the previous configuration keeps running: {e}"),
        }
        r
    }
}

/// Certificates expire: say so 14 days before (at start and on every reload).
pub(crate) fn warn_expiring(certs: &levee_tls::CertStore) {
    let now = std::time::SystemTime::now();
    for e in certs.expiring_within(14) {
        let days = e.days_left(now);
        tracing::warn!(file = %e.file.display(), names = ?e.names, days, "certificate expires soon");
        eprintln!(
            "levee: the certificate {} ({}) {}; renew it and reload",
            e.file.display(),
            e.names.join(", "),
            if days < 0 {
                "has expired".to_string()
            } else {
                format!("expires in {days} day(s)")
            }
        );
    }
}

impl crate::purge::Sites for Shared {
    fn site_of_host(&self, host: &str) -> Option<usize> {
        self.hosts.site_for(host.trim_end_matches('.'))
    }

    fn site_named(&self, name: &str) -> Option<usize> {
        self.sites
            .iter()
            .find(|s| &*s.name == name)
            .map(|s| s.index)
    }
}

/// The host of a `Host` field, without its port.
fn host_name(raw: &str) -> &str {
    if raw.starts_with('[') {
        raw.find(']').map_or(raw, |i| &raw[..=i])
    } else {
        raw.rsplit_once(':').map_or(raw, |(h, _)| h)
    }
}

/// What waiting requests learn from a fill once the backend answered.
pub(crate) enum FillHead {
    /// A full response is streaming in.
    Stream(StreamHead),
    /// The backend confirmed (304) a stale entry; here it is, refreshed.
    Refreshed(Arc<Entry>),
    /// A tier below memory (disk, another node through Redis) had it: a hit.
    Found(Arc<Entry>),
    /// No response: connect failure, timeout, overload, or the filler went away.
    Failed(UpstreamError),
    /// The backend answered 500, 502, 503 or 504 while a stale copy may stand in for it
    /// (RFC 5861 §4). Waiters with such a copy serve it; the others ask the backend.
    ErrorStatus(StatusCode),
}

impl FillHead {
    /// Published by the [`FillGuard`] when a filler ends without a head (a bug or a
    /// panic): waiters answer 502 or serve stale instead of waiting forever.
    pub fn abandoned() -> FillHead {
        FillHead::Failed(UpstreamError::Protocol {
            backend: "fill".into(),
            detail: "levee's fetch ended without a response".into(),
        })
    }
}

pub(crate) struct StreamHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub vary: VaryKey,
    pub storable: Result<(), NotStored>,
    pub initial_age: Duration,
    pub received: Instant,
    /// The entry the filler stored, once it did (`None` until then); closed without one
    /// when the filler ends without storing. A range request on a miss is answered from
    /// it (`range_miss::after_fill`).
    pub stored: tokio::sync::watch::Receiver<Option<Arc<Entry>>>,
}

impl StreamHead {
    /// `current_age` (RFC 9111 §4.2.3) at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.received)
    }
}

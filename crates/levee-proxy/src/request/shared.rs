//! What every phase of a request shares: the settings, the sites, the cache and its
//! fills, the encoder and the counters. How they are reloaded is reload.rs's; TLS and
//! ACME are set up in tls.rs; what a fill tells its waiters is in next.rs.

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use http::HeaderMap;
use levee_cache::{Coalescer, Store};
use levee_config::Settings;

use super::next::FillHead;
use super::site::Site;
use crate::encoding::Encoder;
use crate::error::ServeError;
use crate::stats::Stats;
use crate::upstream::UpstreamError;
use levee_limits::client_net::{ClientNet, ClientNets};
use levee_limits::Class;
use levee_log::AccessLogger;
use levee_sendfile as zerocopy;
use levee_visitor::proven::Proven;

/// What a reload replaces of the settings the whole process shares (SIGHUP,
/// `POST /reload`). Read with [`Shared::conf`]. Its `settings.sites` is empty: each
/// site's settings live with the site ([`Site::conf`]).
pub(crate) struct Conf {
    pub settings: Settings,
}

/// Re-reads the configuration (the binary's config file and flags).
pub type Reloader = Box<dyn Fn() -> Result<Settings, String> + Send + Sync>;

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
    /// Keys whose last response was not cacheable: they pass, uncoalesced, meanwhile.
    pub hit_for_pass: super::hit_for_pass::HitForPassMarks,
    pub encoder: Encoder,
    /// Memfd copies of hot large bodies, sent with sendfile.
    pub sendfile: zerocopy::Files,
    pub stats: Stats,
    /// The WebSockets open now, bounded per client network and in all (upgrade.rs).
    pub tunnels: levee_websocket::Tunnels<ClientNet>,
    /// One line per request, when `[log] access` is on.
    pub access_log: Option<AccessLogger>,
    /// The certificates of the HTTPS listeners, and the acceptor over them (HTTP/2 and
    /// HTTP/1.1 by ALPN), when there are any.
    pub tls: Option<crate::tls::Tls>,
    /// Certificates from ACME (`[tls] acme_email`): the manager that orders them, run by
    /// `serve_workers`, and answers HTTP-01 for the `acme` step.
    pub acme: Option<levee_acme::Manager>,
}

impl Shared {
    /// Fails when a site's document root or backend cannot be used, or the access log
    /// cannot be opened.
    pub fn new(mut settings: Settings) -> Result<Shared, ServeError> {
        let pairs = crate::tls::cert_pairs(&settings, &settings.sites);
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
        let names = sites.iter().flat_map(|s| s.hosts().to_vec()).collect();
        let (tls, acme) = crate::tls::start(&settings, &pairs, names)?;
        let c = &settings.cache;
        let store = Store::new(c.size);
        let tiers = levee_tiers::Tiers::open(c, &store, &settings.limits, &proven)?;
        if let Some(t) = &tiers {
            // Every node on the same Redis shares each backend's capacity (levee-limits'
            // fleet.rs), named alike on every node: the site, the path, the backend.
            for site in &sites {
                for (path, upstream) in site.backends() {
                    let scope = format!("{}|{path}|{}", site.name, upstream.backend_name());
                    t.share_admission(scope, upstream.limiter.clone());
                }
            }
        }
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
            hit_for_pass: super::hit_for_pass::HitForPassMarks::new(c.hit_for_pass),
            stats: Stats::default(),
            tunnels: levee_websocket::Tunnels::default(),
            reloader: OnceLock::new(),
            conf: ArcSwap::from_pointee(Conf { settings }),
        })
    }

    /// Puts reloaded settings in force (reload.rs).
    pub fn set_conf(&self, settings: Settings) {
        self.conf.store(Arc::new(Conf { settings }));
    }

    /// The settings in force now (a reload may replace them between two calls).
    pub fn conf(&self) -> arc_swap::Guard<Arc<Conf>> {
        self.conf.load()
    }

    /// The client network of a request from `peer` (the backend lane's unit).
    pub fn client_net(&self, peer: std::net::IpAddr, headers: &HeaderMap) -> ClientNet {
        ClientNets::from_limits(&self.conf().settings.limits).of(peer, headers)
    }

    /// Asks `upstream`, counting the answer: the response head, and how long it took.
    pub async fn ask(
        &self,
        upstream: &crate::upstream::Upstream,
        req: http::Request<crate::upstream::UpBody>,
        conn: crate::server::client::ConnInfo,
    ) -> (
        Result<http::Response<crate::upstream::BackendBody>, UpstreamError>,
        std::time::Duration,
    ) {
        let asked = std::time::Instant::now();
        let resp = upstream.send(req, conn).await;
        let waited = asked.elapsed();
        self.stats.backend(&resp);
        (resp, waited)
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

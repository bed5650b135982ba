//! The store levee-proxy will hold: the loaded certificates behind our resolver, the
//! rustls configuration over it (TLS 1.2 and 1.3, session resumption), reload, and the
//! expiry dates.

use std::sync::Arc;
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::error::Error;
use crate::expiry::Expiry;
use crate::names;
use crate::pair::{self, CertPair};
use crate::resolver::{Certs, Issued, Resolver, UnknownName};

/// The ALPN protocols offered by default, in order of preference: HTTP/2, then
/// HTTP/1.1. A client that offers neither fails the handshake (rustls's rule when the
/// server has a list); one that offers none at all gets HTTP/1.1's framing.
pub const DEFAULT_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// How the store answers clients; every field documents its default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// What a client asking for a name no certificate covers gets. Default:
    /// [`UnknownName::Default`], the default (first) certificate.
    pub unknown_name: UnknownName,
    /// Certificates also come while serving ([`CertStore::set_issued`], from ACME), so
    /// that loading no file at all is no error: handshakes are then refused until the
    /// first certificate is issued. Default: false, a store needs a file.
    pub runtime_certificates: bool,
}

/// Certificates for HTTPS, swappable while serving.
///
/// The first pair's certificate is the default: for clients that send no name (SNI),
/// and, unless [`Settings::unknown_name`] says otherwise, for names no certificate
/// covers.
#[derive(Debug)]
pub struct CertStore {
    resolver: Arc<Resolver>,
    provider: Arc<CryptoProvider>,
    /// Everything but ALPN, which each listener chooses: see `server_config`.
    base: ServerConfig,
    /// [`Settings::runtime_certificates`].
    runtime_certificates: bool,
}

impl CertStore {
    /// Loads and checks every pair; the first error stops the load.
    pub fn load(pairs: &[CertPair], settings: Settings) -> Result<CertStore, Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let certs = load_all(pairs, &provider)?;
        if certs.expiry.is_empty() && !settings.runtime_certificates {
            return Err(Error::NoCertificates);
        }
        let resolver = Arc::new(Resolver::new(certs, settings.unknown_name));
        let mut base = ServerConfig::builder_with_provider(provider.clone())
            // TLS 1.0 and 1.1 are deprecated (RFC 8996); rustls has neither anyway.
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(Error::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        // Resumption: the builder already keeps a session cache (rustls's 256 entries,
        // for TLS 1.2 clients without tickets); tickets spare that memory for the rest.
        // The ticketer changes its key every 6 hours. No 0-RTT data (rustls's default,
        // kept): it can be replayed, and levee forwards requests.
        base.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().map_err(Error::Tls)?;
        Ok(CertStore {
            resolver,
            provider,
            base,
            runtime_certificates: settings.runtime_certificates,
        })
    }

    /// Replaces the certificates with `pairs`, checked as at load. New handshakes get
    /// the new certificates; connections already open are not touched, and a client
    /// that resumes a session keeps the certificate it checked (resumption does not use
    /// the certificate's key). On error the certificates in use stay as they were.
    pub fn reload(&self, pairs: &[CertPair]) -> Result<(), Error> {
        let certs = load_all(pairs, &self.provider)?;
        if certs.expiry.is_empty() && !self.runtime_certificates {
            return Err(Error::NoCertificates);
        }
        self.resolver.certs.store(Arc::new(certs));
        Ok(())
    }

    /// A rustls configuration over this store offering `alpn` (see [`DEFAULT_ALPN`]),
    /// in order of preference. Configurations share the certificates (a reload reaches
    /// them all), the session cache and the ticket key.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<ServerConfig> {
        let mut config = self.base.clone();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// An acceptor for `server_config(alpn)`.
    pub fn acceptor(&self, alpn: &[&[u8]]) -> TlsAcceptor {
        TlsAcceptor::from(self.server_config(alpn))
    }

    /// Every certificate's names and notAfter: the files in the order of the pairs,
    /// then the issued ones by name.
    pub fn expiry(&self) -> Vec<Expiry> {
        let mut all = self.resolver.certs.load().expiry.clone();
        all.extend(
            self.resolver
                .issued
                .load()
                .values()
                .map(|i| i.expiry.clone()),
        );
        all
    }

    /// Loads `pair` (checked as at load; its names must include `name`) and serves it
    /// for `name` from the next handshake on, in place of the one issued before. File
    /// certificates keep precedence for the names they cover. On error nothing changes.
    pub fn set_issued(&self, name: &str, pair: &CertPair) -> Result<Expiry, Error> {
        let loaded = pair::load(pair, &self.provider)?;
        let name = names::normalize(name);
        let expiry = loaded.expiry.clone();
        let issued = Issued {
            key: loaded.key,
            expiry: loaded.expiry,
        };
        self.resolver.issued.rcu(|map| {
            let mut map = (**map).clone();
            map.insert(name.clone(), issued.clone());
            map
        });
        Ok(expiry)
    }

    /// The issued certificate served for `name`, if any: its names and notAfter.
    pub fn issued(&self, name: &str) -> Option<Expiry> {
        let name = names::normalize(name);
        self.resolver
            .issued
            .load()
            .get(&name)
            .map(|i| i.expiry.clone())
    }

    /// Serves `key` to TLS-ALPN-01 validations of `name` (ClientHellos that offer only
    /// `acme-tls/1`, [`ACME_TLS_ALPN`](crate::ACME_TLS_ALPN)) until removed.
    pub fn set_challenge(&self, name: &str, key: Arc<rustls::sign::CertifiedKey>) {
        let name = names::normalize(name);
        self.resolver.challenges.rcu(|map| {
            let mut map = (**map).clone();
            map.insert(name.clone(), key.clone());
            map
        });
    }

    /// Ends the TLS-ALPN-01 validation of `name`: such ClientHellos are refused again.
    pub fn remove_challenge(&self, name: &str) {
        let name = names::normalize(name);
        self.resolver.challenges.rcu(|map| {
            let mut map = (**map).clone();
            map.remove(&name);
            map
        });
    }

    /// The crypto provider the store signs with (ring), for callers that make keys.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }

    /// The certificates that expire within `days` from now, or have expired, soonest
    /// first: what deserves an "expires in N days" warning.
    pub fn expiring_within(&self, days: u32) -> Vec<Expiry> {
        let now = SystemTime::now();
        let mut soon: Vec<Expiry> = self
            .expiry()
            .into_iter()
            .filter(|e| e.expires_within(now, days))
            .collect();
        soon.sort_by_key(|e| e.not_after_unix);
        soon
    }

    /// Whether a client asking for `name` gets a certificate file's certificate issued
    /// for it (and not the default for want of one): lets the caller warn about a host
    /// left uncovered, and tells ACME which names are not its business.
    pub fn covers(&self, name: &str) -> bool {
        self.resolver
            .certs
            .load()
            .find(&names::normalize(name))
            .is_some()
    }
}

fn load_all(pairs: &[CertPair], provider: &CryptoProvider) -> Result<Certs, Error> {
    let loaded = pairs
        .iter()
        .map(|p| pair::load(p, provider))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Certs::new(loaded))
}

//! HTTPS set-up: the certificates of the settings (files, each checked against the
//! sites' hosts; reloaded in place), one acceptor for every listener (HTTP/2 and
//! HTTP/1.1 by ALPN), and the ACME manager that orders certificates when asked to.

use std::sync::{Arc, OnceLock};

use levee_config::Settings;

use crate::error::ServeError;

/// HTTPS: the certificates (reloaded in place, and issued by ACME) and one acceptor for
/// every listener.
pub(crate) struct Tls {
    pub certs: Arc<levee_tls::CertStore>,
    pub acceptor: levee_tls::tokio_rustls::TlsAcceptor,
    /// The HTTPS listeners as bound (port 0 resolved), for `redirect_http`.
    pub bound: OnceLock<Vec<std::net::SocketAddr>>,
    /// Per HTTPS port, the `Alt-Svc` that announces HTTP/3 on its UDP twin (server/quic.rs).
    pub alt_svc: OnceLock<Vec<(u16, http::HeaderValue)>>,
    /// The HTTP/3 endpoints' counters, for `/metrics`.
    pub quic_stats: OnceLock<Vec<Arc<levee_h3::Stats>>>,
}

/// The acceptor over the settings' certificates when there are HTTPS listeners, and
/// the ACME manager for `names` when `[tls] acme_email` asks for one.
pub(crate) fn start(
    settings: &Settings,
    pairs: &[levee_tls::CertPair],
    names: Vec<String>,
) -> Result<(Option<Tls>, Option<levee_acme::Manager>), ServeError> {
    let acme_settings = settings.tls.acme.clone();
    if settings.listen_tls.is_empty() {
        return Ok((None, None));
    }
    let certs = Arc::new(levee_tls::CertStore::load(
        pairs,
        levee_tls::Settings {
            runtime_certificates: acme_settings.is_some(),
            ..levee_tls::Settings::default()
        },
    )?);
    // acme-tls/1 last: only a TLS-ALPN-01 validation, which offers nothing else,
    // negotiates it (and connection.rs closes it after the handshake).
    let acceptor = match acme_settings {
        Some(_) => certs.acceptor(&[b"h2", b"http/1.1", levee_tls::ACME_TLS_ALPN]),
        None => certs.acceptor(levee_tls::DEFAULT_ALPN),
    };
    warn_expiring(&certs);
    let acme = match acme_settings {
        Some(a) => Some(levee_acme::Manager::new(
            acme_config(a, names),
            certs.clone(),
        )?),
        None => None,
    };
    let tls = Tls {
        certs,
        acceptor,
        bound: OnceLock::new(),
        alt_svc: OnceLock::new(),
        quic_stats: OnceLock::new(),
    };
    Ok((Some(tls), acme))
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
fn acme_config(a: levee_config::AcmeSettings, names: Vec<String>) -> levee_acme::Config {
    levee_acme::Config {
        email: a.email,
        directory: a.directory,
        dir: a.dir,
        ca: a.ca,
        names,
        challenge: match a.challenge {
            levee_config::AcmeChallenge::TlsAlpn01 => levee_acme::Challenge::TlsAlpn01,
            levee_config::AcmeChallenge::Http01 => levee_acme::Challenge::Http01,
        },
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

//! Certificates from an ACME certificate authority (RFC 8555: Let's Encrypt, or any
//! other, a private one included) for the names levee serves, with nothing else to run:
//! levee answers the challenges itself, TLS-ALPN-01 (RFC 8737) on its HTTPS listener
//! and HTTP-01 on its cleartext one, stores each key and certificate under a private
//! directory, serves a stored certificate at once on the next start, renews at two
//! thirds of the lifetime, and retries failures with a growing delay while the
//! certificate in use stays.
//!
//! Only the names it is given are ever ordered (the hosts of levee's sites): never a
//! name a client sends, so a scanner cannot make levee spend the CA's rate limits.
//!
//! The protocol is instant-acme's; keys, signing requests and challenge certificates are
//! rcgen's; the certificates go to levee-tls's [`CertStore`], which serves them from the
//! next handshake on.
//!
//! ```no_run
//! # async fn run(certs: std::sync::Arc<levee_tls::CertStore>) -> Result<(), levee_acme::Error> {
//! use levee_acme::{Challenge, Config, Manager};
//! let config = Config {
//!     email: "admin@example.com".into(),
//!     directory: levee_acme::LETS_ENCRYPT.into(),
//!     dir: "/var/lib/levee/acme".into(),
//!     ca: None,
//!     names: vec!["example.com".into(), "www.example.com".into()],
//!     challenge: Challenge::TlsAlpn01,
//! };
//! // Stored certificates are served from here on; an error names what to fix.
//! let manager = Manager::new(config, certs)?;
//! // The proxy answers GET /.well-known/acme-challenge/TOKEN with manager.http01(TOKEN).
//! let (_stop_tx, stop) = tokio::sync::watch::channel(false);
//! manager.run(stop).await; // orders, renews, until stop
//! # Ok(()) }
//! ```

mod client;
mod error;
mod manager;
mod order;
mod schedule;
mod storage;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

pub use error::Error;
pub use manager::Manager;

/// Let's Encrypt's production directory, the default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// What the manager is to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The contact address the account is registered with (the CA writes there about
    /// expiring certificates and changes to its terms, which registering agrees to).
    pub email: String,
    /// The ACME server's directory URL (https).
    pub directory: String,
    /// Where the account key, the certificates and their keys are kept (made 0700).
    pub dir: PathBuf,
    /// A PEM root certificate to trust for the ACME server, besides the system's.
    pub ca: Option<PathBuf>,
    /// The names to keep a certificate for, one certificate each. Wildcards, IP
    /// addresses and names a certificate file already covers are left out (and said so).
    pub names: Vec<String>,
    /// The challenge answered when the server offers both.
    pub challenge: Challenge,
}

/// The ACME challenge levee answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Challenge {
    /// TLS-ALPN-01: a special certificate on the HTTPS listener (port 443 for the CA).
    /// The default: it needs nothing but the port HTTPS serves on anyway.
    #[default]
    TlsAlpn01,
    /// HTTP-01: a token under `/.well-known/acme-challenge/` on the cleartext listener
    /// (port 80 for the CA).
    Http01,
}

impl Challenge {
    fn kind(self) -> instant_acme::ChallengeType {
        match self {
            Challenge::TlsAlpn01 => instant_acme::ChallengeType::TlsAlpn01,
            Challenge::Http01 => instant_acme::ChallengeType::Http01,
        }
    }

    fn other(self) -> Challenge {
        match self {
            Challenge::TlsAlpn01 => Challenge::Http01,
            Challenge::Http01 => Challenge::TlsAlpn01,
        }
    }

    /// As written in the configuration: `tls-alpn-01` or `http-01`.
    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
        }
    }
}

/// The path prefix of HTTP-01 (RFC 8555 §8.3).
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// Pending HTTP-01 tokens and their key authorizations.
#[derive(Default)]
pub(crate) struct Tokens(Mutex<HashMap<String, String>>);

impl Tokens {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // A panic elsewhere while holding the lock leaves a map that is still whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(crate) fn insert(&self, token: String, key_authorization: String) {
        self.map().insert(token, key_authorization);
    }
    pub(crate) fn remove(&self, token: &str) {
        self.map().remove(token);
    }
    pub(crate) fn get(&self, token: &str) -> Option<String> {
        self.map().get(token).cloned()
    }
}

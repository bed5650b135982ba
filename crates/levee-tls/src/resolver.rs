//! Which certificate a handshake gets: by the name the client asked for (SNI), an exact
//! name before a wildcard, then a certificate issued at runtime (ACME) for that exact
//! name, else the default certificate or a refusal, as configured. The file certificates
//! sit behind an `ArcSwap`, so a reload replaces them whole while handshakes under way
//! keep the certificate they picked, and established connections never look again;
//! issued certificates and TLS-ALPN-01 challenge certificates have maps of their own,
//! swapped one entry at a time, so that an issuance never waits for a reload nor
//! undoes one.
//!
//! A ClientHello whose ALPN offers exactly `acme-tls/1` is an ACME server validating a
//! TLS-ALPN-01 challenge (RFC 8737): it gets the pending challenge certificate for its
//! name or nothing, never a certificate that serves traffic.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::expiry::Expiry;
use crate::names;
use crate::pair::Loaded;

/// What a client that asks for a name no certificate covers gets. A client that sends
/// no name at all (one that connects by IP address, or a very old one) always gets the
/// default certificate: there is nothing to be wrong about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownName {
    /// The default certificate (the first pair's), as nginx and most servers do: the
    /// client then reports a name mismatch, which says more to a person than a failed
    /// handshake does. The default.
    #[default]
    Default,
    /// A failed handshake (rustls sends the `access_denied` alert), so that the server
    /// does not show a scanner which names it serves, nor a certificate for the wrong
    /// site to a person.
    Refuse,
}

/// One generation of certificates, swapped whole on reload.
pub(crate) struct Certs {
    /// By exact name, lowercase.
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com` under `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    /// The first pair's; `None` when there is no file certificate (only issued ones).
    default: Option<Arc<CertifiedKey>>,
    pub(crate) expiry: Vec<Expiry>,
}

impl Certs {
    /// The map over loaded pairs, the first pair the default. Where two certificates
    /// share a name, the earlier pair keeps it.
    pub(crate) fn new(loaded: Vec<Loaded>) -> Certs {
        let default = loaded.first().map(|l| l.key.clone());
        let mut exact = HashMap::new();
        let mut wildcard = HashMap::new();
        let mut expiry = Vec::with_capacity(loaded.len());
        for one in loaded {
            for name in &one.expiry.names {
                if let Some(parent) = names::wildcard_parent(name) {
                    wildcard
                        .entry(parent.to_owned())
                        .or_insert_with(|| one.key.clone());
                } else if !name.contains('*') {
                    exact.entry(name.clone()).or_insert_with(|| one.key.clone());
                }
                // A wildcard elsewhere than the first label (`a*.example.com`) is not
                // honoured by clients: such a name answers for nothing.
            }
            expiry.push(one.expiry);
        }
        Certs {
            exact,
            wildcard,
            default,
            expiry,
        }
    }

    /// The certificate issued for `name` (normalized), exact names first.
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        self.exact
            .get(name)
            .or_else(|| self.wildcard.get(names::parent_of(name)?))
    }
}

/// A certificate issued at runtime for one name, and what the leaf says.
#[derive(Clone)]
pub(crate) struct Issued {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) expiry: Expiry,
}

/// Our `ResolvesServerCert`: the current `Certs`, the issued and challenge certificates,
/// and what unknown names get.
pub(crate) struct Resolver {
    pub(crate) certs: ArcSwap<Certs>,
    /// By exact name, lowercase; ordered, so that "the first" (the default when there is
    /// no file certificate) is the same on every run.
    pub(crate) issued: ArcSwap<BTreeMap<String, Issued>>,
    /// TLS-ALPN-01 challenge certificates by exact name, while a validation is pending.
    pub(crate) challenges: ArcSwap<HashMap<String, Arc<CertifiedKey>>>,
    unknown: UnknownName,
}

/// The ALPN protocol of TLS-ALPN-01 validations (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

impl Resolver {
    pub(crate) fn new(certs: Certs, unknown: UnknownName) -> Resolver {
        Resolver {
            certs: ArcSwap::from_pointee(certs),
            issued: ArcSwap::from_pointee(BTreeMap::new()),
            challenges: ArcSwap::from_pointee(HashMap::new()),
            unknown,
        }
    }

    /// The certificate a client asking for `server_name` gets, `None` to refuse it.
    /// File certificates first (an operator's file overrides what ACME issued), then an
    /// issued one for the exact name.
    pub(crate) fn pick(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let certs = self.certs.load();
        let issued = self.issued.load();
        let default = || {
            certs
                .default
                .clone()
                .or_else(|| issued.values().next().map(|i| i.key.clone()))
        };
        let Some(name) = server_name else {
            return default();
        };
        let name = names::normalize(name);
        if let Some(key) = certs.find(&name) {
            return Some(key.clone());
        }
        if let Some(one) = issued.get(&name) {
            return Some(one.key.clone());
        }
        match self.unknown {
            UnknownName::Default => default(),
            UnknownName::Refuse => None,
        }
    }

    /// The pending TLS-ALPN-01 certificate for `server_name`, `None` to refuse.
    pub(crate) fn challenge(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let name = names::normalize(server_name?);
        self.challenges.load().get(&name).cloned()
    }
}

/// Whether a ClientHello's ALPN list is exactly `acme-tls/1`: RFC 8737 §3 has the
/// validating server offer that protocol alone, and no browser ever does.
fn is_acme_validation(client_hello: &ClientHello<'_>) -> bool {
    let Some(mut offered) = client_hello.alpn() else {
        return false;
    };
    offered.next() == Some(ACME_TLS_ALPN) && offered.next().is_none()
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if is_acme_validation(&client_hello) {
            return self.challenge(client_hello.server_name());
        }
        self.pick(client_hello.server_name())
    }
}

/// The names and files, not the keys: a Debug print ends up in logs.
impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let certs = self.certs.load();
        let issued = self.issued.load();
        f.debug_struct("Resolver")
            .field("certificates", &certs.expiry)
            .field(
                "issued",
                &issued.values().map(|i| &i.expiry).collect::<Vec<_>>(),
            )
            .field("unknown", &self.unknown)
            .finish()
    }
}

//! Which certificate a handshake gets: by the name the client asked for (SNI), an exact
//! name before a wildcard, else the default certificate or a refusal, as configured.
//! The map sits behind an `ArcSwap`, so a reload replaces it whole while handshakes
//! under way keep the certificate they picked, and established connections never look
//! again.

use std::collections::HashMap;
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
    default: Arc<CertifiedKey>,
    pub(crate) expiry: Vec<Expiry>,
}

impl Certs {
    /// The map over loaded pairs, the first pair the default; `None` when there is none.
    /// Where two certificates share a name, the earlier pair keeps it.
    pub(crate) fn new(loaded: Vec<Loaded>) -> Option<Certs> {
        let default = loaded.first()?.key.clone();
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
        Some(Certs {
            exact,
            wildcard,
            default,
            expiry,
        })
    }

    /// The certificate issued for `name` (normalized), exact names first.
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        self.exact
            .get(name)
            .or_else(|| self.wildcard.get(names::parent_of(name)?))
    }
}

/// Our `ResolvesServerCert`: the current `Certs` and what unknown names get.
pub(crate) struct Resolver {
    pub(crate) certs: ArcSwap<Certs>,
    unknown: UnknownName,
}

impl Resolver {
    pub(crate) fn new(certs: Certs, unknown: UnknownName) -> Resolver {
        Resolver {
            certs: ArcSwap::from_pointee(certs),
            unknown,
        }
    }

    /// The certificate a client asking for `server_name` gets, `None` to refuse it.
    pub(crate) fn pick(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let certs = self.certs.load();
        let Some(name) = server_name else {
            return Some(certs.default.clone());
        };
        match certs.find(&names::normalize(name)) {
            Some(key) => Some(key.clone()),
            None => match self.unknown {
                UnknownName::Default => Some(certs.default.clone()),
                UnknownName::Refuse => None,
            },
        }
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(client_hello.server_name())
    }
}

/// The names and files, not the keys: a Debug print ends up in logs.
impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let certs = self.certs.load();
        f.debug_struct("Resolver")
            .field("certificates", &certs.expiry)
            .field("unknown", &self.unknown)
            .finish()
    }
}

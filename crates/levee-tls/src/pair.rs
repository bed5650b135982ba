//! One certificate chain file and its private key file: read, parsed and checked
//! together, so that every way a pair can be wrong is found at load (and reported with
//! its file) rather than at a client's handshake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use x509_parser::extensions::GeneralName;

use crate::error::Error;
use crate::expiry::Expiry;
use crate::names;

/// A certificate chain file and its private key file, both PEM, with the names the
/// certificate is meant to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPair {
    /// The chain: the server's certificate first, then intermediates (the root may be
    /// left out). The key may be in the same file.
    pub cert: PathBuf,
    /// The private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
    /// The names this certificate is meant to serve (a site's hosts). When not empty,
    /// loading fails unless the certificate covers at least one of them, which catches a
    /// certificate swapped with another site's. Empty: no check. Either way the
    /// certificate answers for the names it was issued for, not for these.
    pub names: Vec<String>,
}

impl CertPair {
    /// A pair with no names to check.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        CertPair {
            cert: cert.into(),
            key: key.into(),
            names: Vec::new(),
        }
    }

    /// The names the certificate must cover at least one of.
    pub fn serving<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.names = names.into_iter().map(Into::into).collect();
        self
    }
}

/// A pair ready to serve: the chain with its signing key, and what the leaf says.
pub(crate) struct Loaded {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) expiry: Expiry,
}

/// Reads and checks one pair: both files readable PEM, a certificate and a key in them,
/// the key the certificate's own, the certificate for one of the pair's names.
pub(crate) fn load(pair: &CertPair, provider: &CryptoProvider) -> Result<Loaded, Error> {
    let chain = read_chain(&pair.cert)?;
    let (dns_names, not_after_unix) = match chain.first() {
        Some(leaf) => leaf_facts(&pair.cert, leaf)?,
        None => {
            return Err(Error::NoCertificate {
                file: pair.cert.clone(),
            })
        }
    };
    let key = read_key(&pair.key)?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| Error::BadKey {
            file: pair.key.clone(),
            reason: e.to_string(),
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    check_keys_match(&certified, pair)?;
    check_names(&dns_names, pair)?;
    Ok(Loaded {
        key: Arc::new(certified),
        expiry: Expiry {
            file: pair.cert.clone(),
            names: dns_names,
            not_after_unix,
        },
    })
}

fn read_chain(file: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    CertificateDer::pem_file_iter(file)
        .map_err(|e| pem_error(file, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(file, e))
}

fn read_key(file: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_file(file).map_err(|e| match e {
        pem::Error::NoItemsFound => Error::NoKey {
            file: file.to_owned(),
        },
        other => pem_error(file, other),
    })
}

/// A PEM reading error as ours: the I/O ones (missing file, no permission, a
/// directory) apart, since their fix is a path and not the file's content.
fn pem_error(file: &Path, e: pem::Error) -> Error {
    match e {
        pem::Error::Io(cause) => Error::Read {
            file: file.to_owned(),
            cause,
        },
        other => Error::Pem {
            file: file.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// The leaf's DNS names (subjectAltName; the subject's CN is not read, as no current
/// client does) and its notAfter as a Unix time.
fn leaf_facts(file: &Path, leaf: &CertificateDer<'_>) -> Result<(Vec<String>, i64), Error> {
    let bad = |reason: String| Error::BadCertificate {
        file: file.to_owned(),
        reason,
    };
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|e| bad(e.to_string()))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| bad(format!("subjectAltName: {e}")))?;
    let mut dns_names: Vec<String> = Vec::new();
    for general in san.iter().flat_map(|ext| ext.value.general_names.iter()) {
        if let GeneralName::DNSName(name) = general {
            let name = names::normalize(name);
            if !dns_names.contains(&name) {
                dns_names.push(name);
            }
        }
    }
    Ok((dns_names, cert.validity().not_after.timestamp()))
}

fn check_keys_match(certified: &CertifiedKey, pair: &CertPair) -> Result<(), Error> {
    use rustls::{Error as Tls, InconsistentKeys};
    match certified.keys_match() {
        Ok(()) => Ok(()),
        // A key that cannot tell its public half (none of rustls's providers' keys) is taken on trust,
        // as rustls's own CertifiedKey::from_der does: a wrong one fails every handshake.
        Err(Tls::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(()),
        Err(Tls::InconsistentKeys(_)) => Err(Error::KeyMismatch {
            key: pair.key.clone(),
            cert: pair.cert.clone(),
        }),
        // keys_match parses the leaf again, with webpki, which may be stricter than
        // x509-parser was.
        Err(other) => Err(Error::BadCertificate {
            file: pair.cert.clone(),
            reason: other.to_string(),
        }),
    }
}

fn check_names(dns_names: &[String], pair: &CertPair) -> Result<(), Error> {
    let wanted: Vec<String> = pair.names.iter().map(|n| names::normalize(n)).collect();
    let covered = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| dns_names.iter().any(|san| names::covers(san, w)));
    if covered {
        Ok(())
    } else {
        Err(Error::NamesNotCovered {
            file: pair.cert.clone(),
            has: dns_names.to_vec(),
            wanted,
        })
    }
}

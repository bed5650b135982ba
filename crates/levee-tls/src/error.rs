//! Why certificates could not be loaded. Each error names the file and says what to do,
//! because levee prints it as it is and exits with code 2: the fix is in the
//! configuration or on disk, never in levee.
//!
//! Causes are part of the sentence rather than `source()`: levee prints the whole error
//! chain (`{:#}`), and a cause in both places would read twice.

use std::io;
use std::path::PathBuf;

/// A certificate or key that cannot be served; nothing was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No pair was given: without one there is no default certificate.
    #[error(
        "no certificate is configured: HTTPS needs at least one certificate chain file and \
         its private key file"
    )]
    NoCertificates,

    /// The file is missing or cannot be read.
    #[error(
        "cannot read {}: {cause}; check the path and that levee may read the file",
        file.display()
    )]
    Read { file: PathBuf, cause: io::Error },

    /// The file is not PEM: a section without its end, bad base64.
    #[error(
        "{} is not valid PEM ({reason}); give the file as your certificate authority or key \
         generator wrote it",
        file.display()
    )]
    Pem { file: PathBuf, reason: String },

    /// A PEM file with no `CERTIFICATE` section (a key file, or something else).
    #[error(
        "{} holds no certificate (no \"BEGIN CERTIFICATE\" section); give the certificate \
         chain file, the server's certificate first",
        file.display()
    )]
    NoCertificate { file: PathBuf },

    /// The first certificate does not parse as X.509.
    #[error(
        "the certificate in {} cannot be parsed ({reason}); give a PEM-encoded X.509 \
         certificate",
        file.display()
    )]
    BadCertificate { file: PathBuf, reason: String },

    /// A PEM file with no private key section.
    #[error(
        "{} holds no private key (no \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" or \
         \"BEGIN EC PRIVATE KEY\" section); give the private key file of the certificate",
        file.display()
    )]
    NoKey { file: PathBuf },

    /// A private key the crypto provider cannot sign with.
    #[error(
        "the private key in {} cannot be used ({reason}); give an RSA (2048 bits or more), \
         ECDSA P-256 or P-384, or Ed25519 key",
        file.display()
    )]
    BadKey { file: PathBuf, reason: String },

    /// The key is not the one the certificate was issued for.
    #[error(
        "{} is not the private key of the certificate in {}; give the key file that was \
         made together with this certificate",
        key.display(),
        cert.display()
    )]
    KeyMismatch { key: PathBuf, cert: PathBuf },

    /// The certificate is for other names than those it is to serve.
    #[error(
        "the certificate in {} is for {}, which covers none of {}; give a certificate \
         issued for these names",
        file.display(),
        list(has),
        list(wanted)
    )]
    NamesNotCovered {
        file: PathBuf,
        /// The certificate's DNS names (subjectAltName).
        has: Vec<String>,
        /// The names it was given to serve.
        wanted: Vec<String>,
    },

    /// rustls refused the setup (the session ticket key could not be made).
    #[error("cannot set up TLS: {0}")]
    Tls(rustls::Error),
}

impl Error {
    /// The file the error is about, when it is about one (the key file for a mismatch).
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Error::Read { file, .. }
            | Error::Pem { file, .. }
            | Error::NoCertificate { file }
            | Error::BadCertificate { file, .. }
            | Error::NoKey { file }
            | Error::BadKey { file, .. }
            | Error::NamesNotCovered { file, .. } => Some(file),
            Error::KeyMismatch { key, .. } => Some(key),
            Error::NoCertificates | Error::Tls(_) => None,
        }
    }
}

/// `a, b, c`, or `no DNS name` for a certificate that has none.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "no DNS name".to_owned()
    } else {
        names.join(", ")
    }
}

//! What can go wrong: at start (the directory, the CA file: the operator's to fix, levee
//! exits with code 2) and while ordering (the CA's answer, the network: logged, retried
//! with backoff while the old certificate, if any, is still served).

use std::path::PathBuf;

/// Why ACME could not start, or an order failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `acme_dir` cannot be created or made private.
    #[error(
        "cannot use {} for ACME keys and certificates: {cause}; create it (mode 0700) and \
         let levee write there, or set [tls] acme_dir to another directory",
        dir.display()
    )]
    Dir { dir: PathBuf, cause: std::io::Error },

    /// A file under `acme_dir` cannot be written or read.
    #[error(
        "cannot {action} {}: {cause}; check that levee may write in its directory \
         ([tls] acme_dir)",
        file.display()
    )]
    File {
        action: &'static str,
        file: PathBuf,
        cause: std::io::Error,
    },

    /// `acme_ca` is not a PEM certificate file.
    #[error(
        "cannot use {} as a root for the ACME server: {reason}; give the PEM certificate of \
         the CA that signed the ACME server's own certificate ([tls] acme_ca)",
        file.display()
    )]
    Ca { file: PathBuf, reason: String },

    /// Neither the system's roots nor `acme_ca`.
    #[error(
        "no root certificate to trust the ACME server with: install the system's \
         (apt-get install ca-certificates) or give one in [tls] acme_ca"
    )]
    NoRoots,

    /// rustls refused the client setup.
    #[error("cannot set up TLS for the ACME client: {0}")]
    Tls(String),

    /// The ACME server said no, or could not be reached.
    #[error("{0}")]
    Acme(#[from] instant_acme::Error),

    /// The order went invalid: a challenge failed, with the CA's reason.
    #[error(
        "the ACME server could not validate {name}: {reason}; check that {name} resolves \
         to this server and that its port 443 (TLS-ALPN-01) or 80 (HTTP-01) reaches levee"
    )]
    Validation { name: String, reason: String },

    /// Anything else about an order (no usable challenge, a bad certificate back).
    #[error("{0}")]
    Order(String),

    /// The certificate the CA sent cannot be served.
    #[error("the certificate issued for {name} cannot be served: {cause}")]
    Certificate {
        name: String,
        cause: levee_tls::Error,
    },

    /// The whole order took too long.
    #[error("the order for {0} did not complete within {1:?}")]
    Timeout(String, std::time::Duration),
}

impl From<rcgen::Error> for Error {
    fn from(e: rcgen::Error) -> Error {
        Error::Order(format!("cannot make a key or signing request: {e}"))
    }
}

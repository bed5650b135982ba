//! The certificate side of HTTPS for levee, and nothing else: certificate chain and key
//! files (PEM) loaded and checked so that a wrong pair is a clear error at start rather
//! than failed handshakes later; the certificate for each handshake picked by the name
//! the client asks for (SNI), wildcards included; reload without dropping a connection;
//! expiry dates for metrics and warnings; a rustls configuration (TLS 1.2 and 1.3,
//! session resumption, ALPN `h2` then `http/1.1`) and a tokio acceptor over it.
//!
//! Certificates may also arrive while serving ([`CertStore::set_issued`], from ACME:
//! levee-acme), behind the files for the names both cover, and TLS-ALPN-01 challenge
//! certificates ([`CertStore::set_challenge`]) answer only a ClientHello that offers
//! [`ACME_TLS_ALPN`] alone.
//!
//! Serving HTTP over the accepted streams is levee-proxy's business.
//!
//! ```no_run
//! use levee_tls::{CertPair, CertStore, Settings, DEFAULT_ALPN};
//!
//! # async fn serve(listener: tokio::net::TcpListener) -> Result<(), Box<dyn std::error::Error>> {
//! let pairs = [CertPair::new("/etc/levee/example.com.pem", "/etc/levee/example.com.key")
//!     .serving(["example.com", "www.example.com"])];
//! // An error names the file and what to do: levee exits with code 2.
//! let store = CertStore::load(&pairs, Settings::default())?;
//! for cert in store.expiring_within(14) {
//!     eprintln!("{} expires in {} days", cert.file.display(),
//!         cert.days_left(std::time::SystemTime::now()));
//! }
//! let acceptor = store.acceptor(DEFAULT_ALPN);
//! let (tcp, _) = listener.accept().await?;
//! let tls = acceptor.accept(tcp).await?;
//! let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
//! // Later, on a reload: new handshakes get the new files; on error the old ones stay.
//! store.reload(&pairs)?;
//! # Ok(()) }
//! ```

mod error;
mod expiry;
mod names;
mod pair;
mod resolver;
mod store;

pub use error::Error;
pub use expiry::Expiry;
pub use pair::CertPair;
pub use resolver::{UnknownName, ACME_TLS_ALPN};
pub use store::{CertStore, Settings, DEFAULT_ALPN};

/// The rustls and tokio-rustls levee-tls was built with, so that callers name the same
/// versions (`ServerConfig`, `TlsAcceptor`, `server::TlsStream`).
pub use {rustls, tokio_rustls};

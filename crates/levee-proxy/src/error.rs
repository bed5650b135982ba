//! Why `levee serve` could not start: each error says what to do.

use std::net::SocketAddr;

/// Binding failed; says which address and what to do.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}{hint}")]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
    pub(crate) hint: &'static str,
}

/// Why `levee serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Root(levee_static::Error),
    #[error("cannot start levee's threads: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Backend(crate::upstream::StartError),
    #[error(transparent)]
    Tls(#[from] levee_tls::Error),
    /// ACME cannot start: its directory, its CA file.
    #[error(transparent)]
    Acme(#[from] levee_acme::Error),
    /// The sockets systemd passed (socket activation) cannot be used.
    #[error(transparent)]
    Activation(#[from] levee_systemd::ActivationError),
    #[error("the configuration has no site: give a backend (--backend URL) or an app (--app)")]
    NoSite,
    /// A cache tier below memory cannot start (its directory, its Redis URL).
    #[error(transparent)]
    Tier(#[from] levee_tiers::Error),
    #[error("cannot open the access log {file}: {source}; check that its directory exists and levee may write there ([log] access_file)")]
    AccessLog {
        file: String,
        source: std::io::Error,
    },
}

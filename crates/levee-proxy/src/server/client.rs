//! The client's connection as the server accepted it: what the request path and the
//! backend client read of it. A leaf module: everything may use it, it uses nothing.

use std::net::SocketAddr;

/// The two ends of the client's connection, which a FastCGI application is told about
/// (`REMOTE_ADDR`, `SERVER_ADDR`).
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The client came over TLS (an HTTPS listener).
    pub tls: bool,
}

impl ConnInfo {
    /// The scheme the client used: part of the cache key, told to the backend.
    pub fn scheme(&self) -> levee_cache::Scheme {
        if self.tls {
            levee_cache::Scheme::Https
        } else {
            levee_cache::Scheme::Http
        }
    }
}

//! `levee serve`: the caching reverse proxy.
//!
//! [`Server`] and [`serve_workers`] (server.rs) own the listeners and connections;
//! `request/` walks one request through its phases (classify → lookup → fill or pass →
//! respond); `upstream` talks to the backend under the overload limit; `encoding` makes
//! each response's content coding; `stats` counts what the admin listener exports.

mod admin;
mod body;
mod encoding;
mod error;
mod headers;
mod outcome;
mod purge;
mod reload;
mod request;
mod server;
mod stats;
mod tls;
mod upstream;

pub use error::{BindError, ServeError};
pub use levee_systemd::is_journal_stream;
pub use request::Reloader;
pub use server::{serve_workers, Bound, Server};
pub use tls::cert_pairs;

/// Entry points for the fuzz targets in `fuzz/` (not an API).
#[doc(hidden)]
pub mod __fuzz {
    use http::HeaderMap;

    /// The client network of a request from a trusted proxy with these headers.
    pub fn client_net(headers: &HeaderMap) {
        let trusted: [ipnet::IpNet; 2] = [
            ipnet::IpNet::from(std::net::IpAddr::from([127, 0, 0, 1])),
            ipnet::IpNet::from(std::net::IpAddr::from([10, 0, 0, 0])),
        ];
        let nets = levee_limits::client_net::ClientNets {
            v4: 24,
            v6: 56,
            trusted: &trusted,
        };
        let _ = nets
            .of(std::net::IpAddr::from([127, 0, 0, 1]), headers)
            .to_string();
    }

    /// Cookie fields as classification reads them, after `set_cookies` taught their names.
    pub fn cookies(set_cookies: &HeaderMap, request: &HeaderMap) {
        // Compiling the globs costs more than the rest: once per process.
        static MATCHER: std::sync::OnceLock<Option<levee_config::CookieMatcher>> =
            std::sync::OnceLock::new();
        let matcher = MATCHER.get_or_init(|| {
            levee_config::CookieMatcher::new(
                &levee_config::DEFAULT_SESSION_COOKIES
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>(),
            )
            .ok()
        });
        let Some(matcher) = matcher.clone() else {
            return;
        };
        let sessions = crate::request::fuzz_sessions(matcher);
        sessions.learn(set_cookies);
        if let Ok(Some(name)) = sessions.session_cookie(request) {
            assert!(!name.is_empty());
        }
    }
}

//! A FastCGI 1.0 responder client for php-fpm, so that levee can run PHP sites without
//! nginx in front of php-fpm.
//!
//! - [`route`]: which file answers a path (static file, script with `PATH_INFO`, front
//!   controller), the way nginx's usual PHP configuration decides, refusing traversal and
//!   dotfiles.
//! - [`Params::cgi`]: the CGI/1.1 variables php expects, as nginx sets them.
//! - [`Client::request`]: sends the parameters and streams the request body while the
//!   response is read; resolves with the parsed CGI head and a [`ResponseBody`] that
//!   streams the rest. Connections are kept alive (FCGI_KEEP_CONN) in a small pool and
//!   reused only after a request completed cleanly.
//!
//! What php writes to stderr is logged with target `levee::php`, never mixed into a body.
//!
//! ```no_run
//! # async fn demo() -> Result<(), levee_fastcgi::Error> {
//! use levee_fastcgi::{Address, Client, ClientConfig, Params};
//!
//! let php = Client::new(Address::Unix("/run/php/php8.2-fpm.sock".into()), ClientConfig::default());
//! let params = Params::new()
//!     .add("SCRIPT_FILENAME", "/srv/www/index.php")
//!     .add("REQUEST_METHOD", "GET");
//! let resp = php.request(params, http_body_util::Empty::new()).await?;
//! println!("{}", resp.status());
//! # Ok(())
//! # }
//! ```

mod body;
mod client;
mod conn;
mod error;
mod head;
mod params;
pub mod pool;
mod record;
mod route;
mod shared;

pub use body::ResponseBody;
pub use client::{Client, PoolStats};
pub use conn::Address;
pub use error::Error;
pub use params::{CgiRequest, OriginalUri, Params};
pub use route::{route, Route};
pub use shared::ClientConfig;

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_can_cross_tasks() {
        send_sync::<Client>();
        send_sync::<ResponseBody>();
        send_sync::<Error>();
        send_sync::<Params>();
        send_sync::<Route>();
    }

    /// The proxy spawns requests: their future must be Send.
    #[allow(dead_code)]
    fn request_future_is_send(client: Client) {
        fn send<T: Send>(_: &T) {}
        let fut = client.request(Params::new(), http_body_util::Empty::<bytes::Bytes>::new());
        send(&fut);
    }
}

/// Entry points for the fuzz targets in `fuzz/` (not an API): what php-fpm sends back,
/// parsed by code private to this crate.
#[doc(hidden)]
pub mod __fuzz {
    /// A stream of FastCGI records, decoded as the connection does.
    pub fn records(data: &[u8]) {
        let mut buf = bytes::BytesMut::from(data);
        while let Ok(Some(record)) = crate::record::decode(&mut buf) {
            let _ = crate::record::EndRequest::parse(&record.content);
        }
    }

    /// A CGI response head.
    pub fn cgi_head(data: &[u8]) {
        if let Ok(Some(head)) = crate::head::parse(data) {
            assert!(head.len <= data.len());
        }
    }
}

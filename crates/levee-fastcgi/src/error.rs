//! What can go wrong talking to php-fpm, each error saying what to check next.

use std::io;
use std::time::Duration;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An error of [`Client::request`](crate::Client::request) or of a
/// [`ResponseBody`](crate::ResponseBody). `addr` is the php-fpm address, as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection to php-fpm could be opened. Nothing was sent: safe to retry elsewhere.
    #[error("{}", connect_message(addr, source))]
    Connect { addr: String, source: io::Error },

    /// Connecting took longer than `connect_timeout`.
    #[error(
        "connecting to php-fpm at {addr} timed out after {after:?}: is php-fpm running and \
         not overloaded (its listen.backlog full)?"
    )]
    ConnectTimeout { addr: String, after: Duration },

    /// The connection failed while sending the request or reading the response.
    #[error(
        "the connection to php-fpm at {addr} failed while {during}: {source}; did the php-fpm \
         worker crash or get killed? see php-fpm's error_log"
    )]
    Io {
        addr: String,
        during: &'static str,
        source: io::Error,
    },

    /// php-fpm closed the connection before the response was complete: the worker died
    /// (crash, `kill`, `request_terminate_timeout`, memory limit of the system), or php-fpm
    /// is restarting.
    #[error(
        "php-fpm at {addr} closed the connection while {during}: did the worker crash, get \
         killed or hit request_terminate_timeout? see php-fpm's error_log"
    )]
    Closed { addr: String, during: &'static str },

    /// php-fpm sent nothing for `read_timeout` (or did not read the request for
    /// `write_timeout`).
    #[error(
        "php-fpm at {addr} made no progress for {after:?} while {during}: is the script \
         stuck? raise read_timeout if it is legitimately slow, and check \
         request_terminate_timeout and the slowlog of the php-fpm pool"
    )]
    Timeout {
        addr: String,
        during: &'static str,
        after: Duration,
    },

    /// php-fpm answered something that is not a valid FastCGI responder answer.
    #[error("php-fpm at {addr} sent an invalid response: {message}")]
    Protocol { addr: String, message: String },

    /// php-fpm refused the request (FCGI_OVERLOADED, or FCGI_CANT_MPX_CONN).
    #[error(
        "php-fpm at {addr} refused the request ({status}): it is overloaded; raise \
         pm.max_children or lower levee's backend concurrency"
    )]
    Overloaded { addr: String, status: String },

    /// The request cannot be encoded (a parameter larger than FastCGI allows).
    #[error("cannot send this request to php-fpm: {message}")]
    Request { message: String },

    /// A request body without Content-Length is larger than
    /// [`max_unsized_body`](crate::ClientConfig::max_unsized_body): php needs its length
    /// first, and levee reads no more than that to learn it.
    #[error(
        "the request body has no Content-Length and is larger than {limit} bytes, the \
         most levee reads to learn its length (php needs CONTENT_LENGTH); send \
         Content-Length or raise max_unsized_body"
    )]
    BodyTooLarge { limit: u64 },

    /// Reading the request body (from levee's client) failed: the request was abandoned
    /// and its connection to php-fpm closed.
    #[error("reading the request body to pass to php-fpm failed: {source}")]
    Body { source: BoxError },
}

impl Error {
    /// Whether php-fpm could not be reached at all (nothing was sent).
    pub fn is_connect(&self) -> bool {
        matches!(self, Error::Connect { .. } | Error::ConnectTimeout { .. })
    }

    /// Whether php-fpm was too slow: `connect_timeout`, `read_timeout` or `write_timeout`.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::ConnectTimeout { .. } | Error::Timeout { .. })
    }

    /// Whether php-fpm refused the request for lack of capacity.
    pub fn is_overloaded(&self) -> bool {
        matches!(self, Error::Overloaded { .. })
    }

    /// Whether the client's request body failed, rather than php-fpm.
    pub fn is_body(&self) -> bool {
        matches!(self, Error::Body { .. })
    }

    /// Whether the request itself cannot go to php-fpm (too large, not encodable): the
    /// client's fault, not php-fpm's.
    pub fn is_request(&self) -> bool {
        matches!(self, Error::Request { .. } | Error::BodyTooLarge { .. })
    }
}

fn connect_message(addr: &str, e: &io::Error) -> String {
    let unix = addr.starts_with("unix:");
    let what = if unix { "socket" } else { "address" };
    let target = addr.strip_prefix("unix:").unwrap_or(addr);
    match e.kind() {
        io::ErrorKind::NotFound if unix => format!(
            "php-fpm socket {target} does not exist: is php-fpm running? check listen = in \
             its pool config"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "no permission to connect to php-fpm {what} {target}: check listen.owner, \
             listen.group and listen.mode in its pool config, or the user levee runs as"
        ),
        io::ErrorKind::ConnectionRefused if unix => format!(
            "nothing accepts connections on php-fpm socket {target} (a stale socket file?): \
             is php-fpm running? check listen = in its pool config"
        ),
        io::ErrorKind::ConnectionRefused => format!(
            "php-fpm refused the connection on {target}: is it running, and does a pool \
             listen on this address (listen = in its pool config)?"
        ),
        _ => format!(
            "cannot connect to php-fpm {what} {target}: {e}; is php-fpm running? check \
             listen = in its pool config"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_messages_say_what_to_check() {
        let e = Error::Connect {
            addr: "unix:/run/php/x.sock".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(
            e.to_string(),
            "php-fpm socket /run/php/x.sock does not exist: is php-fpm running? check listen = \
             in its pool config"
        );
        assert!(e.is_connect() && !e.is_timeout());
        let e = Error::Connect {
            addr: "127.0.0.1:9000".into(),
            source: io::Error::from(io::ErrorKind::ConnectionRefused),
        };
        assert!(e
            .to_string()
            .contains("refused the connection on 127.0.0.1:9000"));
        let e = Error::Connect {
            addr: "unix:/run/php/x.sock".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(e.to_string().contains("listen.owner"));
    }
}

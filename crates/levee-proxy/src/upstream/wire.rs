//! What crosses between levee and a backend, whatever the transport: the request
//! body type, the client's connection, and why a backend gave no response. A leaf:
//! upstream.rs and its transports (app.rs) both build on it.

use std::time::Duration;

use http_body_util::combinators::UnsyncBoxBody;

/// The error of any body levee streams.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Request bodies sent to the backend: empty for fills, streamed for pass.
pub type UpBody = UnsyncBoxBody<bytes::Bytes, BoxError>;

/// Why the backend gave no response. Decides the status levee answers with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("levee could not connect to the backend {backend}: {detail}")]
    Connect { backend: String, detail: String },
    #[error("the backend {backend} did not start its response within {timeout:?}")]
    Timeout { backend: String, timeout: Duration },
    #[error("the backend {backend} is at its limit of {limit} concurrent requests and the wait queue is full or timed out")]
    Overloaded { backend: String, limit: usize },
    /// No slot for this request, decided at once or after its wait (limit.rs).
    #[error("the backend {backend} is busy: request refused ({})", why.reason())]
    Refused {
        backend: String,
        why: levee_limits::Refusal,
        retry_after: u64,
    },
    #[error("the backend {backend} failed: {detail}")]
    Protocol { backend: String, detail: String },
    /// The request could not be sent as it is (a FastCGI body of unknown length over
    /// the limit, a request body that broke off): the client's side.
    #[error("{detail}")]
    BadRequest {
        status: http::StatusCode,
        detail: String,
    },
}

impl UpstreamError {
    /// What a client is told: what happened, never the backend's address, a path, a
    /// port or a command line of levee's (those are in the log, from `Display`).
    pub fn public_message(&self) -> String {
        match self {
            UpstreamError::Connect { backend, .. } if backend.starts_with("fastcgi") => {
                "levee could not connect to php-fpm; the details are in levee's log".into()
            }
            UpstreamError::Connect { .. } => {
                "levee could not connect to the backend; the details are in levee's log".into()
            }
            UpstreamError::Timeout { timeout, .. } => {
                format!("the backend did not start its response within {timeout:?}")
            }
            UpstreamError::Overloaded { limit, .. } => format!(
                "the backend is at its limit of {limit} concurrent requests and the wait queue is full or timed out"
            ),
            UpstreamError::Refused { why, retry_after, .. } => {
                use levee_limits::Refusal;
                let what = match why {
                    Refusal::NetworkOverShare => "too many requests from your network are waiting for the backend",
                    Refusal::LaneFull => "the backend is busy and its queue for requests without a session is full",
                    Refusal::LaneWait => "the backend is busy and this request's wait in its queue ran out",
                    Refusal::QueueFull | Refusal::QueueTimeout => "the backend is at its limit and its wait queue is full or timed out",
                };
                format!("{what}; please retry in {retry_after} s")
            }
            UpstreamError::Protocol { .. } => {
                "the backend failed to answer; the details are in levee's log".into()
            }
            UpstreamError::BadRequest { detail, .. } => detail.clone(),
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            UpstreamError::Connect { .. } | UpstreamError::Protocol { .. } => {
                http::StatusCode::BAD_GATEWAY
            }
            UpstreamError::Timeout { .. } => http::StatusCode::GATEWAY_TIMEOUT,
            UpstreamError::Overloaded { .. } => http::StatusCode::SERVICE_UNAVAILABLE,
            UpstreamError::Refused { why, .. } => why.status(),
            UpstreamError::BadRequest { status, .. } => *status,
        }
    }
}

/// An error reading the client's request body while it was forwarded, so that it is
/// answered as the client's fault (400), not the backend's (502).
#[derive(Debug, thiserror::Error)]
#[error("the request body is malformed or broke off: {0}")]
pub struct ClientBodyError(#[source] pub BoxError);

/// "outer: inner: innermost", the way people read nested errors.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

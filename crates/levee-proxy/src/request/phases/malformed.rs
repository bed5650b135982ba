//! Requests whose target is ambiguous are refused before anything reads them.

use http::header::{self, HeaderValue};
use http::request;
use levee_cache::key::normalize_host;
use levee_cache::Scheme;

use crate::outcome::Answer;
use crate::request::respond;

/// Requests whose target is ambiguous get 400 and their connection closed, and are never
/// forwarded: two readers of them (levee's key, the backend's router) could disagree on
/// which site they are for. RFC 9112 §3.2: more than one `Host`, an invalid `Host`, an
/// HTTP/1.1 request without one; RFC 9112 §3.2.2 and RFC 9113 §8.3.1: a `Host` naming
/// another site than an absolute-form target or `:authority`. Framing (`Content-Length`
/// with `Transfer-Encoding`, a coding other than chunked, HTTP/1.0 with
/// `Transfer-Encoding`) is hyper's to refuse before a request exists.
pub(crate) fn refuse(parts: &request::Parts, scheme: Scheme) -> Option<Answer> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    let why = if hosts.next().is_some() {
        "more than one Host field"
    } else if let Some(host) = host {
        let normal = host.to_str().ok().and_then(|h| normalize_host(h, scheme));
        match (normal, parts.uri.authority()) {
            (None, _) => "the Host field is not a valid host[:port]",
            (Some(n), Some(a)) if normalize_host(a.as_str(), scheme).as_deref() != Some(&*n) => {
                "the Host field names another site than the request target"
            }
            _ => return None,
        }
    } else if parts.version == http::Version::HTTP_11 && parts.uri.authority().is_none() {
        "an HTTP/1.1 request must have a Host field"
    } else {
        return None;
    };
    let mut answer = respond::error(http::StatusCode::BAD_REQUEST, why);
    if parts.version <= http::Version::HTTP_11 {
        answer
            .resp
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    tracing::debug!(why, "refused a malformed request");
    Some(answer)
}

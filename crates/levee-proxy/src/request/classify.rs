//! Phase 1: what kind of request this is. Answered by levee itself (`Max-Forwards: 0`),
//! or allowed to use the cache under its key, or passed to the backend with a reason.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Method, Response};
use levee_cache::key::normalize_host;
use levee_cache::{CacheKey, NotStored, Scheme};

use super::respond::{self, XCache};
use super::shared::Shared;
use super::{Reason, Resp};
use crate::body::ProxyBody;

/// Where a request goes after classification.
pub(crate) enum Class {
    /// GET or HEAD that may be answered from the cache, under this key.
    Cache(CacheKey),
    /// To the backend as it is, never stored; the reason shows in `X-Cache-Reason`.
    Pass(Reason),
}

/// Only GET and HEAD may use the cache, and only without `Authorization`, without a
/// session cookie (configured or learned, see sessions.rs), and outside the pass paths.
pub(crate) fn classify(shared: &Shared, parts: &request::Parts) -> Class {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Class::Pass(NotStored::Method.as_str().into());
    }
    let h = &parts.headers;
    if h.contains_key(header::AUTHORIZATION) {
        return Class::Pass(NotStored::Session.as_str().into());
    }
    match shared.sessions.session_cookie(h) {
        Ok(None) => {}
        Ok(Some(name)) => return Class::Pass(format!("session-cookie:{name}").into()),
        // A cookie header we cannot read might hide a session: pass.
        Err(()) => return Class::Pass(NotStored::Session.as_str().into()),
    }
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if shared.conf().settings.anonymous.pass_paths.is_match(pq) {
        return Class::Pass(NotStored::PassPath.as_str().into());
    }
    Class::Cache(CacheKey::for_request(Scheme::Http, &parts.uri, h))
}

/// Requests whose target is ambiguous get 400 and their connection closed, and are never
/// forwarded: two readers of them (levee's key, the backend's router) could disagree on
/// which site they are for. RFC 9112 §3.2: more than one `Host`, an invalid `Host`, an
/// HTTP/1.1 request without one; RFC 9112 §3.2.2 and RFC 9113 §8.3.1: a `Host` naming
/// another site than an absolute-form target or `:authority`. Framing (`Content-Length`
/// with `Transfer-Encoding`, a coding other than chunked, HTTP/1.0 with
/// `Transfer-Encoding`) is hyper's to refuse before a request exists.
pub(crate) fn refuse_malformed(parts: &request::Parts) -> Option<Resp> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    let why = if hosts.next().is_some() {
        "more than one Host field"
    } else if let Some(host) = host {
        let normal = host
            .to_str()
            .ok()
            .and_then(|h| normalize_host(h, Scheme::Http));
        match (normal, parts.uri.authority()) {
            (None, _) => "the Host field is not a valid host[:port]",
            (Some(n), Some(a)) if normalize_host(a.as_str(), Scheme::Http).as_ref() != Some(&n) => {
                "the Host field names another site than the request target"
            }
            _ => return None,
        }
    } else if parts.version == http::Version::HTTP_11 && parts.uri.authority().is_none() {
        "an HTTP/1.1 request must have a Host field"
    } else {
        return None;
    };
    let mut resp = respond::error(http::StatusCode::BAD_REQUEST, why);
    if parts.version <= http::Version::HTTP_11 {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    tracing::debug!(why, "refused a malformed request");
    Some(resp)
}

/// RFC 9110 §7.6.2: an OPTIONS or TRACE whose `Max-Forwards` is 0 is answered here, as
/// the last recipient; any other value goes on decremented.
pub(crate) fn answer_here(shared: &Shared, parts: &mut request::Parts) -> Option<Resp> {
    if parts.method != Method::OPTIONS && parts.method != Method::TRACE {
        return None;
    }
    let value = parts.headers.get(header::MAX_FORWARDS)?;
    // An invalid value is ignored, as if absent (nothing says which hop it meant).
    let n: u64 = value.to_str().ok()?.trim().parse().ok()?;
    if n > 0 {
        parts
            .headers
            .insert(header::MAX_FORWARDS, HeaderValue::from(n - 1));
        return None;
    }
    let mut resp = if parts.method == Method::TRACE {
        // §9.3.8: the request as received, as message/http, without the fields that may
        // hold credentials (the same reasoning as the RFC's advice against echoing them).
        let mut text = format!(
            "{} {} {:?}\r\n",
            parts.method,
            parts.uri.path_and_query().map_or("/", |p| p.as_str()),
            parts.version
        );
        for (name, value) in &parts.headers {
            if [
                header::COOKIE,
                header::AUTHORIZATION,
                header::PROXY_AUTHORIZATION,
            ]
            .contains(name)
            {
                continue;
            }
            text.push_str(name.as_str());
            text.push_str(": ");
            text.push_str(&String::from_utf8_lossy(value.as_bytes()));
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        let mut r = Response::new(ProxyBody::full(Bytes::from(text)));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("message/http"),
        );
        r
    } else {
        let mut r = Response::new(ProxyBody::Empty);
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"),
        );
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        r
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    respond::mark(shared, resp.headers_mut(), XCache::Answered, None, None);
    Some(resp)
}

//! `redirect_http`: a cleartext request is sent to the same URL over HTTPS.

use http::header::{self, HeaderValue};
use http::{request, Method, Response};

use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::request::respond;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;

/// `redirect_http`: the same URL over https, 301 for GET and HEAD, 308 for the rest
/// (which keeps the method and body). The port is the first HTTPS listener's, unless 443.
pub(crate) fn to_https(shared: &Shared, parts: &request::Parts, conn: ConnInfo) -> Option<Answer> {
    // Only with an HTTPS listener (checked first: no settings load on the hit path).
    if conn.tls || shared.tls.is_none() || !shared.conf().settings.tls.redirect_http {
        return None;
    }
    Some(redirect(shared, parts))
}

fn redirect(shared: &Shared, parts: &request::Parts) -> Answer {
    let host = parts
        .uri
        .host()
        .or_else(|| parts.headers.get(header::HOST)?.to_str().ok())
        .map(|h| match h.strip_prefix('[') {
            Some(_) => h.split_inclusive(']').next().unwrap_or(h),
            None => h.split(':').next().unwrap_or(h),
        })
        .unwrap_or("");
    if host.is_empty() {
        return respond::error(
            http::StatusCode::BAD_REQUEST,
            "this server answers over https: the request needs a Host",
        );
    }
    let bound = shared.tls.as_ref().and_then(|t| t.bound.get());
    let port = match bound.and_then(|b| b.first()).map(|a| a.port()) {
        Some(443) | None => String::new(),
        Some(p) => format!(":{p}"),
    };
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let status = if parts.method == Method::GET || parts.method == Method::HEAD {
        http::StatusCode::MOVED_PERMANENTLY
    } else {
        http::StatusCode::PERMANENT_REDIRECT
    };
    let mut resp = Response::new(ProxyBody::Empty);
    *resp.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(&format!("https://{host}{port}{pq}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    respond::mark(shared, resp, CacheResult::Answered, None, None)
}

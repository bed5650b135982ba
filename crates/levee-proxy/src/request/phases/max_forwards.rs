//! `Max-Forwards` (RFC 9110 §7.6.2): OPTIONS and TRACE answered here as the last hop,
//! decremented otherwise.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Method, Response};

use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::request::respond;
use crate::request::shared::Shared;

/// RFC 9110 §7.6.2: an OPTIONS or TRACE whose `Max-Forwards` is 0 is answered here, as
/// the last recipient; any other value goes on decremented.
pub(crate) fn answer(shared: &Shared, parts: &mut request::Parts) -> Option<Answer> {
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
    Some(respond::mark(
        shared,
        resp,
        CacheResult::Answered,
        None,
        None,
    ))
}

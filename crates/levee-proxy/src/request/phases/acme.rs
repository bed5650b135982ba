//! ACME's HTTP-01 challenge on the cleartext listeners (levee-acme orders the
//! certificates; this answers the CA's requests for them).

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Method, Response};

use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::request::respond;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;

/// HTTP-01 (RFC 8555 §8.3): with ACME on, a cleartext GET or HEAD under
/// `/.well-known/acme-challenge/` gets the key authorization of a pending token, or 404;
/// never the cache nor the backend, and before `redirect_http` (the CA follows no
/// redirect to a certificate that does not exist yet). Without ACME the path is the
/// backend's, as before.
pub(crate) fn http01(shared: &Shared, parts: &request::Parts, conn: ConnInfo) -> Option<Answer> {
    let acme = shared.acme.as_ref()?;
    if conn.tls || !(parts.method == Method::GET || parts.method == Method::HEAD) {
        return None;
    }
    let answer = acme.http01_path(parts.uri.path())?;
    let mut resp = Response::new(ProxyBody::Empty);
    match answer {
        Some(key_authorization) => {
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            resp.headers_mut()
                .insert(header::CONTENT_LENGTH, key_authorization.len().into());
            if parts.method == Method::GET {
                *resp.body_mut() = ProxyBody::full(Bytes::from(key_authorization));
            }
        }
        None => {
            *resp.status_mut() = http::StatusCode::NOT_FOUND;
            resp.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        }
    }
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

//! A route's rules while serving (levee-config's route_rules.rs): client networks,
//! deny, basic authentication, redirects and rewrites, checked after levee's own
//! answers and before the cache, so that no stored copy answers what a rule refuses;
//! and the route's response headers, set on whatever the request is answered with.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Response, StatusCode};
use levee_config::RouteRules;

use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::request::auth::Auth;
use crate::request::respond;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;
use levee_limits::client_net::ClientNets;

/// Carries out `rules` for a request under a route (`rest`: its normalized path after
/// the route's prefix): an answer (403, 401, a redirect), or `None` to go on, `parts`
/// rewritten when the route says so.
pub(crate) async fn apply(
    shared: &Shared,
    rest: &str,
    rules: &RouteRules,
    auth: Option<&Auth>,
    parts: &mut request::Parts,
    conn: ConnInfo,
) -> Option<Answer> {
    if !rules.allow_networks.is_empty() || !rules.deny_networks.is_empty() {
        let client = ClientNets::from_limits(&shared.conf().settings.limits)
            .client_addr(conn.peer.ip(), &parts.headers);
        let allowed = rules.allow_networks.is_empty()
            || rules.allow_networks.iter().any(|n| n.contains(&client));
        if !allowed || rules.deny_networks.iter().any(|n| n.contains(&client)) {
            return Some(respond::error(
                StatusCode::FORBIDDEN,
                "this path is not open to your network",
            ));
        }
    }
    if rules.deny {
        return Some(respond::error(
            StatusCode::FORBIDDEN,
            "this path is not served",
        ));
    }
    if let Some(auth) = auth {
        if !auth.allows(parts.headers.get(header::AUTHORIZATION)).await {
            return Some(unauthorized(shared, &auth.conf.realm));
        }
        // levee checked the password itself: a person, for the backend's scheduling.
        parts
            .extensions
            .insert(levee_visitor::sessions::AuthVerified);
    }
    let query = parts.uri.query().map(str::to_string);
    if let Some(r) = &rules.redirect {
        let mut location = format!("{}{}", r.to, encode_rest(rest));
        if let Some(q) = &query {
            location.push('?');
            location.push_str(q);
        }
        let mut resp = Response::new(ProxyBody::Empty);
        *resp.status_mut() =
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
        let headers = resp.headers_mut();
        match HeaderValue::from_str(&location) {
            Ok(v) => headers.insert(header::LOCATION, v),
            Err(_) => {
                return Some(respond::error(
                    StatusCode::BAD_REQUEST,
                    "cannot redirect this path",
                ))
            }
        };
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        return Some(respond::mark(
            shared,
            resp,
            CacheResult::Answered,
            None,
            None,
        ));
    }
    if let Some(to) = &rules.rewrite {
        // The cache key stays the client's URL (classify's `key_uri`): the rewrite
        // follows from it alone, so one key still means one backend request; and
        // `/wiki/A` and `/index.php?title=A` stay apart, as the application (reading
        // REQUEST_URI) tells them apart, and `PURGE /wiki/A` finds its page.
        let mut target = to.replace("{rest}", &encode_rest(rest));
        if let Some(q) = &query {
            target.push(if target.contains('?') { '&' } else { '?' });
            target.push_str(q);
        }
        let mut uri = http::uri::Parts::from(parts.uri.clone());
        match http::uri::PathAndQuery::try_from(target.as_str()) {
            Ok(pq) => uri.path_and_query = Some(pq),
            Err(_) => {
                return Some(respond::error(
                    StatusCode::BAD_REQUEST,
                    "cannot rewrite this path",
                ))
            }
        }
        match http::Uri::from_parts(uri) {
            Ok(u) => {
                let received = std::mem::replace(&mut parts.uri, u);
                parts
                    .extensions
                    .insert(levee_fastcgi::OriginalUri(received));
            }
            Err(_) => {
                return Some(respond::error(
                    StatusCode::BAD_REQUEST,
                    "cannot rewrite this path",
                ))
            }
        }
    }
    None
}

/// 401 with the realm; never stored (levee's own answer, `no-store` besides).
fn unauthorized(shared: &Shared, realm: &str) -> Answer {
    let body = Bytes::from_static(b"401 Unauthorized\nthis path needs a user name and password\n");
    let mut resp = Response::new(ProxyBody::full(body.clone()));
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\"")) {
        h.insert(header::WWW_AUTHENTICATE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, body.len().into());
    respond::mark(shared, resp, CacheResult::Answered, None, None)
}

/// Sets the route's headers on the answer.
pub(crate) fn add_headers(rules: &RouteRules, answer: &mut Answer) {
    for (name, value) in &rules.headers {
        if let (Ok(n), Ok(v)) = (
            header::HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            answer.resp.headers_mut().insert(n, v);
        }
    }
}

/// The normalized rest of a path, percent-encoded again where a URI needs it.
fn encode_rest(rest: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'/')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b':')
        .remove(b'@')
        .remove(b'!')
        .remove(b'$')
        .remove(b'&')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')')
        .remove(b'*')
        .remove(b'+')
        .remove(b',')
        .remove(b';')
        .remove(b'=');
    percent_encoding::utf8_percent_encode(rest, KEEP).to_string()
}

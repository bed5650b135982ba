//! The first phases: is the request answered by levee itself (malformed, `PURGE`,
//! `Max-Forwards: 0`), a file of the document root, or may it use the cache (under its
//! key) or must it pass, and why.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Method, Response};
use levee_cache::key::normalize_host;
use levee_cache::{CacheKey, Scheme};

use super::next::Next;
use super::respond;
use super::route::Routed;
use super::shared::Shared;
use super::site::Site;
use crate::body::ProxyBody;
use crate::outcome::{Answer, CacheResult};
use crate::server::client::ConnInfo;

/// What levee answers itself, before anything else; then the document root for GET and
/// HEAD, when the site has one.
pub(crate) fn early(
    shared: &Shared,
    site: Routed<'_>,
    parts: &mut request::Parts,
    conn: ConnInfo,
) -> Next {
    if let Some(answer) = refuse_malformed(parts, conn.scheme()) {
        return Next::Respond(answer);
    }
    if let Some(answer) = acme_http01(shared, parts, conn) {
        return Next::Respond(answer);
    }
    if parts.method.as_str() == "PURGE" {
        return Next::Respond(purge_from_client(shared, &site, parts, conn));
    }
    if let Some(answer) = answer_here(shared, parts) {
        return Next::Respond(answer);
    }
    // Only with an HTTPS listener (checked first: no settings load on the hit path).
    if !conn.tls && shared.tls.is_some() && shared.conf().settings.tls.redirect_http {
        return Next::Respond(to_https(shared, parts));
    }
    // Before the cache: a stored copy must not answer what the presets deny either.
    if let Some(answer) = super::harden::check(&site, parts) {
        return Next::Respond(answer);
    }
    let read_only = parts.method == Method::GET || parts.method == Method::HEAD;
    // A script URL (`/doku.php?id=start`) is never a file: straight on, without the
    // file server's parse and lookup on every cached page.
    let script = site.routes.is_empty() && levee_static::names_php_script(parts.uri.path());
    if !script && ((read_only && site.files.is_some()) || !site.routes.is_empty()) {
        // Files first, never through the cache nor the backend (nginx's try_files):
        // they are public, and their own memory cache and validators make them cheap.
        return Next::Files;
    }
    Next::Classify
}

/// HTTP-01 (RFC 8555 §8.3): with ACME on, a cleartext GET or HEAD under
/// `/.well-known/acme-challenge/` gets the key authorization of a pending token, or 404;
/// never the cache nor the backend, and before `redirect_http` (the CA follows no
/// redirect to a certificate that does not exist yet). Without ACME the path is the
/// backend's, as before.
fn acme_http01(shared: &Shared, parts: &request::Parts, conn: ConnInfo) -> Option<Answer> {
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

/// Only GET and HEAD may use the cache, and only without `Authorization`, without a
/// session cookie (configured or learned, see sessions.rs), and outside the site's pass
/// paths. Everything else passes, with its reason: the one place that decides it,
/// besides what the cache itself says (lookup, fill).
pub(crate) fn classify(site: Routed<'_>, parts: &request::Parts, conn: ConnInfo) -> Next {
    if let Some(reason) = levee_visitor::pass_reason(&site.sessions, &site.conf().settings, parts) {
        return Next::pass(reason);
    }
    Next::Lookup(
        CacheKey::for_request(conn.scheme(), key_uri(parts), &parts.headers).in_site(site.index),
    )
}

/// The target a request is stored and purged under: the client's, also when a route
/// rewrote it (rules.rs).
pub(crate) fn key_uri(parts: &request::Parts) -> &http::Uri {
    parts
        .extensions
        .get::<levee_fastcgi::OriginalUri>()
        .map_or(&parts.uri, |o| &o.0)
}

/// `redirect_http`: the same URL over https, 301 for GET and HEAD, 308 for the rest
/// (which keeps the method and body). The port is the first HTTPS listener's, unless 443.
fn to_https(shared: &Shared, parts: &request::Parts) -> Answer {
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

/// The `PURGE` method (Varnish's convention; MediaWiki sends it to `$wgCdnServers`):
/// removes every variant of the URL, for clients on the `[purge] allow` list; 403 for
/// anyone else, who learns nothing about what is stored.
fn purge_from_client(
    shared: &Shared,
    site: &Site,
    parts: &request::Parts,
    conn: ConnInfo,
) -> Answer {
    if !crate::purge::allowed(&shared.conf().settings, conn.peer.ip()) {
        return respond::error(
            http::StatusCode::FORBIDDEN,
            "PURGE is allowed only from the addresses in [purge] allow",
        );
    }
    let key = crate::purge::key_of_request(parts, conn.scheme()).in_site(site.index);
    let n: usize = crate::purge::both_schemes(&key)
        .iter()
        .map(|k| {
            if let Some(tiers) = &shared.tiers {
                tiers.ban(levee_tiers::url_ban(k, false));
            }
            shared.store.purge_key(k, false)
        })
        .sum();
    shared.stats.purged.inc_by(n as u64);
    let mut resp = Response::new(ProxyBody::full(Bytes::from(format!(
        "{{\"purged\":{n}}}\n"
    ))));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    respond::mark(shared, resp, CacheResult::Answered, None, None)
}

/// Requests whose target is ambiguous get 400 and their connection closed, and are never
/// forwarded: two readers of them (levee's key, the backend's router) could disagree on
/// which site they are for. RFC 9112 §3.2: more than one `Host`, an invalid `Host`, an
/// HTTP/1.1 request without one; RFC 9112 §3.2.2 and RFC 9113 §8.3.1: a `Host` naming
/// another site than an absolute-form target or `:authority`. Framing (`Content-Length`
/// with `Transfer-Encoding`, a coding other than chunked, HTTP/1.0 with
/// `Transfer-Encoding`) is hyper's to refuse before a request exists.
fn refuse_malformed(parts: &request::Parts, scheme: Scheme) -> Option<Answer> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    let why = if hosts.next().is_some() {
        "more than one Host field"
    } else if let Some(host) = host {
        let normal = host.to_str().ok().and_then(|h| normalize_host(h, scheme));
        match (normal, parts.uri.authority()) {
            (None, _) => "the Host field is not a valid host[:port]",
            (Some(n), Some(a)) if normalize_host(a.as_str(), scheme).as_ref() != Some(&n) => {
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

/// RFC 9110 §7.6.2: an OPTIONS or TRACE whose `Max-Forwards` is 0 is answered here, as
/// the last recipient; any other value goes on decremented.
fn answer_here(shared: &Shared, parts: &mut request::Parts) -> Option<Answer> {
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

//! A route's rules while serving (levee-config's route_rules.rs): client networks,
//! deny, basic authentication, redirects and rewrites, checked after levee's own
//! answers and before the cache, so that no stored copy answers what a rule refuses;
//! and the route's response headers, set on whatever the request is answered with.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, Response, StatusCode};
use levee_config::{BasicAuth, RouteRules};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::respond;
use super::shared::Shared;
use crate::body::ProxyBody;
use crate::client_net::ClientNets;
use crate::outcome::{Answer, CacheResult};
use crate::upstream::ConnInfo;

/// Credentials already checked, by a SHA-256 of the whole `Authorization` value (never
/// the password): bcrypt takes tens of milliseconds a check, by design.
const VERIFIED: u64 = 10_000;
const VERIFIED_FOR: Duration = Duration::from_secs(600);

/// What a route's basic authentication keeps while serving.
pub(crate) struct Auth {
    pub conf: BasicAuth,
    verified: moka::sync::Cache<[u8; 32], ()>,
    /// A hash of the users' cost, checked for a user who does not exist, so that an
    /// unknown name takes as long as a wrong password.
    dummy: String,
    /// bcrypt checks at once: a flood of wrong passwords waits here instead of taking
    /// every core.
    checks: Arc<Semaphore>,
}

impl Auth {
    pub fn new(conf: BasicAuth) -> Auth {
        let cost = conf
            .users
            .first()
            .and_then(|(_, h)| h.get(4..6)?.parse::<u32>().ok())
            .unwrap_or(10);
        let dummy = bcrypt::hash("levee: no such user", cost).unwrap_or_default();
        Auth {
            conf,
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED)
                .time_to_live(VERIFIED_FOR)
                .build(),
            dummy,
            checks: Arc::new(Semaphore::new(2)),
        }
    }

    /// Whether `authorization` names a user of the file with the right password.
    async fn allows(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        if self.verified.contains_key(&digest) {
            return true;
        }
        let Some((user, password)) = basic_credentials(value) else {
            return false;
        };
        let known = self.conf.users.iter().find(|(u, _)| *u == user);
        let hash = known.map_or(self.dummy.clone(), |(_, h)| h.clone());
        let Ok(_permit) = self.checks.clone().acquire_owned().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false);
        let ok = ok && known.is_some();
        if ok {
            self.verified.insert(digest, ());
        }
        ok
    }
}

/// `Basic base64(user:password)`, decoded.
fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    let text = value.to_str().ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Carries out `rules` for a request under the route at `prefix`: an answer (403, 401,
/// a redirect), or `None` to go on, `parts` rewritten when the route says so.
pub(crate) async fn apply(
    shared: &Shared,
    prefix: &str,
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
    }
    let rest = parts
        .uri
        .path()
        .get(prefix.len()..)
        .unwrap_or_default()
        .to_string();
    let query = parts.uri.query().map(str::to_string);
    if let Some(r) = &rules.redirect {
        let mut location = format!("{}{rest}", r.to);
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
        // The rewritten target is what the cache key and the backend both see (the key
        // is computed after this), and it follows from the URL alone: a stored copy
        // under it serves exactly the requests that would be rewritten to it.
        let mut target = to.replace("{rest}", &rest);
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
            Ok(u) => parts.uri = u,
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

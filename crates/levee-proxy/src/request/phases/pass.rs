//! To the backend as the client sent it (with its cookies and body); the response is
//! never stored. A successful unsafe request invalidates what the cache holds for its
//! URL. Entered only from the driver (`Next::Pass`), with the reason it passes.

use std::sync::Arc;

use crate::body::ClientBody;
use http::header::HeaderMap;
use http::{request, Method, Request};
use http_body_util::BodyExt;
use levee_cache::after_fetch::decide;
use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::{CacheControl, CacheKey, HitForPass};
use levee_config::EditInvalidation;

use crate::headers::{passed_on, strip_hop_by_hop, X_CACHE_REASON};
use crate::outcome::{Answer, Reason};
use crate::request::respond;
use crate::request::route::Routed;
use crate::request::shared::Shared;
use crate::server::client::ConnInfo;
use crate::upstream::{BoxError, ClientBodyError};
use levee_limits::{Class, SessionOf};
use levee_visitor::sessions::Standing;

/// Sends the request to the backend as it is. `marked`: the key is marked hit-for-pass;
/// the response renews the mark while it is still uncacheable, or clears it once it is
/// not (the next request then fills). Without the renewal the mark would lapse every
/// `hit_for_pass` and every request for the URL would wait behind one fill, as long as
/// the backend takes; seconds, when it is overloaded.
pub(crate) async fn pass(
    shared: &Arc<Shared>,
    site: Routed<'_>,
    parts: request::Parts,
    body: ClientBody,
    conn: ConnInfo,
    reason: Reason,
    marked: Option<CacheKey>,
) -> Answer {
    // A POST with an anonymous session may be its login: no longer anonymous, before
    // the backend answers.
    site.sessions
        .forget_anonymous(&parts.method, &parts.headers);
    // People whose session the backend gave out (proven.rs) may use the slots kept for
    // them: anonymous traffic cannot crowd them out. A session cookie nobody proved is
    // a claim any client can write: personal (passed with its cookies, never stored),
    // but anonymous work, in the lane, fair between client networks.
    let net = shared.client_net(conn.peer.ip(), &parts.headers);
    let standing = site.sessions.standing(&parts);
    let class = match standing {
        Standing::Person { who } => Class::Session(SessionOf { net, who }),
        Standing::Anonymous | Standing::Unproven => Class::Anonymous(net),
    };
    let session = matches!(standing, Standing::Person { .. });
    let unproven = standing == Standing::Unproven;
    let upstream = site.upstream();
    let permit = upstream.slot(class).await;
    if unproven {
        shared.stats.unproven_session(net, permit.is_err());
    }
    let permit = match permit {
        Ok(p) => p,
        Err(e) => {
            shared.refused(class, &e);
            let whole = drain_refused(&parts, body).await;
            let mut answer = respond::upstream_error(&e);
            if !whole && parts.version <= http::Version::HTTP_11 {
                answer.resp.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            if unproven {
                // The refusal, and that the session it claimed was nobody's.
                let why = answer.outcome.reason.take().unwrap_or_default();
                let why = format!("{why}; unproven");
                if let Ok(v) = http::HeaderValue::from_str(&why) {
                    answer.resp.headers_mut().insert(X_CACHE_REASON.clone(), v);
                }
                answer.outcome.reason = Some(why.into());
            }
            return answer;
        }
    };
    let unsafe_method = !matches!(
        parts.method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    );
    let invalidates = unsafe_method.then(|| {
        CacheKey::for_request(
            conn.scheme(),
            crate::request::route::key_uri(&parts),
            &parts.headers,
        )
        .in_site(site.index)
    });
    // An edit by someone logged in: anonymous readers must see it at once.
    let edit = unsafe_method && session;
    let headers = passed_on(&parts, conn.peer.ip(), conn.tls);
    let mut req = Request::new(
        body.map_err(|e| Box::new(ClientBodyError(e)) as BoxError)
            .boxed_unsync(),
    );
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = headers;
    let (resp, waited) = shared.ask(upstream, req, conn).await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return respond::upstream_error(&e),
    };
    let (mut head, body) = resp.into_parts();
    site.sessions.learn(&head.headers);
    site.sessions.observe(
        &parts.method,
        parts.uri.path(),
        &parts.headers,
        head.status,
        &head.headers,
    );
    if let Some(key) = marked {
        let conf = site.conf();
        let is_session = |n: &str| site.sessions.is_configured(n);
        let decision = decide(
            &CacheControl::from_request_headers(&parts.headers),
            head.status,
            &head.headers,
            levee_cache::clock::system_now(),
            &conf.policy,
            &is_session,
        );
        shared.hit_for_pass.mark(&key, HitForPass::after(&decision));
    }
    if let Some(key) = invalidates {
        if head.status.is_success() || head.status.is_redirection() {
            let mut bans = invalidate_after_unsafe(shared, &key, &head.headers);
            if edit && site.conf().settings.anonymous.edit_invalidation == EditInvalidation::Host {
                bans.push(soft_purge_host(shared, key));
            }
            // The tiers below memory before the client hears back: the next request,
            // whichever node it reaches, must not find the old page on disk.
            if let Some(tiers) = &shared.tiers {
                tiers.ban_all(bans).await;
            }
        }
    }
    strip_hop_by_hop(&mut head.headers);
    levee_cache::tags::strip(&mut head.headers);
    let reason = match unproven {
        true => format!("{reason}; unproven").into(),
        false => reason,
    };
    // An event stream from an HTTP server (a Mercure hub, a Node process) may last hours:
    // it keeps no slot of the backend limit, which is for requests. From php-fpm or an
    // app process it does: a PHP process serves it all along.
    let permit = match crate::headers::is_event_stream(&head.headers)
        && !upstream.streams_hold_a_process()
    {
        true => {
            drop(permit);
            None
        }
        false => Some(permit),
    };
    let mut answer = respond::passed(shared, &parts, head, body, permit, reason);
    answer.outcome.backend_wait = Some(waited);
    answer
}

/// Bytes and time a refused request's body is read for, at most.
const DRAIN_BYTES: usize = 1 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and drops what a refused request's client is still sending (a login form, an
/// upload), up to `DRAIN_BYTES` within `DRAIN_TIME`, as nginx's `lingering_close` does:
/// a connection closed with its body unread is reset, and the client, still writing,
/// fails with a broken pipe instead of reading its 503 and `Retry-After`. Bounded, so
/// that a slow body cannot hold the connection; not for a client that waits for
/// `100 Continue` (it has sent nothing, and the refusal is its final answer). True:
/// the whole body was read (the connection may be kept).
async fn drain_refused(parts: &request::Parts, body: ClientBody) -> bool {
    use http_body::Body;
    if body.is_end_stream() {
        return true;
    }
    let expects = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects || parts.version > http::Version::HTTP_11 {
        return false;
    }
    let read = async {
        let mut body = body;
        let mut n = 0;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            n += frame.data_ref().map_or(0, |d| d.len());
            if n > DRAIN_BYTES {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false)
}

/// RFC 9111 §4.4: a successful unsafe request invalidates the target URI and the URIs in
/// `Location` and `Content-Location` when they have the same origin (scheme, host and
/// port), so that an edit purges the anonymous copy, also when a logged-in user made it.
/// Returns the same as bans, for the tiers below memory.
fn invalidate_after_unsafe(shared: &Shared, key: &CacheKey, response: &HeaderMap) -> Vec<Ban> {
    let mut bans = Vec::new();
    let mut invalidate = |key: &CacheKey| {
        shared.store.invalidate(key);
        bans.push(levee_tiers::url_ban(key, false));
    };
    invalidate(key);
    for h in [http::header::LOCATION, http::header::CONTENT_LOCATION] {
        let Some(v) = response.get(h).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(other) = key.same_origin(v) {
            invalidate(&other);
        }
    }
    bans
}

/// Marks every stored HTML page of the edited host stale, off the worker thread: it
/// walks the whole store. Returns the same as a ban, for the tiers below memory.
fn soft_purge_host(shared: &Arc<Shared>, key: CacheKey) -> Ban {
    let ban = Ban::now(
        BanMode::Validate,
        BanTarget::HostHtml {
            site: key.site(),
            host: key.host().to_string(),
        },
    );
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let host = key.host();
        let n = shared
            .store
            .soft_purge(|k, e| k.site() == key.site() && k.host() == host && e.is_html());
        tracing::debug!(
            host,
            pages = n,
            "edit: stored pages of the host marked stale"
        );
    });
    ban
}

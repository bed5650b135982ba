//! Who a visitor is, as levee judges it from what the backend gave out rather than
//! from what the client writes: which cookies mean a session (configured and learned,
//! [`sessions`]), which sessions a login proved ([`proven`]), anonymous sessions levee
//! remembers ([`anonymous`]), the device class the application would choose
//! ([`device`]); and from that, whether a request may use the shared cache
//! ([`pass_reason`]) and what `levee serve` does with an anonymous GET ([`verdict`],
//! which `levee doctor` calls, so that the two cannot drift apart).
//!
//! Pure decisions on headers and settings: no I/O, no server; levee-proxy's phases
//! and `levee doctor` both call them.

use std::borrow::Cow;

use http::{header, request, Method};
use levee_cache::NotStored;

pub mod anonymous;
pub mod device;
pub mod proven;
pub mod sessions;
pub mod verdict;

use sessions::Sessions;

/// Why a request must pass the cache, or `None` when it may use it: the rule of
/// levee-proxy's classify phase, also called by `levee doctor` ([`verdict`]) so that the two agree.
pub fn pass_reason(
    sessions: &Sessions,
    settings: &levee_config::Site,
    parts: &request::Parts,
) -> Option<Cow<'static, str>> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Some(NotStored::Method.as_str().into());
    }
    let h = &parts.headers;
    if h.contains_key(header::AUTHORIZATION) {
        return Some(NotStored::Session.as_str().into());
    }
    match sessions.session_cookie(h) {
        Ok(None) => {}
        Ok(Some(name)) => return Some(format!("session-cookie:{name}").into()),
        // A cookie header we cannot read might hide a session: pass.
        Err(sessions::Unreadable) => return Some(NotStored::Session.as_str().into()),
    }
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if settings.anonymous.pass_paths.is_match(pq) {
        return Some(NotStored::PassPath.as_str().into());
    }
    None
}

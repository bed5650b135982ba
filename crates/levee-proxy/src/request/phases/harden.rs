//! The presets' hardening (levee-config's hardening.rs) on the request path: a path the
//! application's own nginx config keeps from the web is answered 403 before the cache,
//! the files and the backend, so a stored copy, a file or php-fpm never answers it.

use std::borrow::Cow;

use http::request;

use crate::outcome::Answer;
use crate::request::respond;
use crate::request::site::Site;

/// 403 for a path the site's presets deny, or a PHP script under a directory where PHP
/// never runs (uploads); `None` for everything else.
pub(crate) fn check(site: &Site, parts: &request::Parts) -> Option<Answer> {
    let conf = site.conf();
    let h = &conf.settings.hardening;
    if h.is_empty() {
        return None;
    }
    let raw = parts.uri.path();
    // Matched as the filesystem sees the path, so that `/%69nc/` or `//inc/` cannot walk
    // around `/inc/`; a path with nothing to decode is used as it is (no allocation).
    let plain = !raw.contains(['%', '\\']) && !raw.contains("//") && !raw.contains("/.");
    let decoded: Cow<str> = match plain {
        true => Cow::Borrowed(raw),
        false => match levee_static::decoded_path(raw) {
            Some(d) => Cow::Owned(d),
            // Traversal, hidden segments, an encoded `/`: never a file, refused by the
            // file server; the backend decides for an HTTP one, as before.
            None => return None,
        },
    };
    if h.denies(&decoded) {
        return Some(refused(&h.by));
    }
    // Only a path under an upload directory is parsed for a script (most paths are
    // not; the check is a prefix compare).
    if h.runs_php(&decoded) {
        return None;
    }
    match levee_static::php_script(raw) {
        Some(script) if !h.runs_php(&script) => Some(refused(&h.by)),
        _ => None,
    }
}

fn refused(by: &str) -> Answer {
    respond::error(
        http::StatusCode::FORBIDDEN,
        &format!("this path is not served ({by}: the application's own web server configuration keeps it from the web)"),
    )
}

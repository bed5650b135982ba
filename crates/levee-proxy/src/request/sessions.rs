//! Which cookies mean a session: the configured globs (presets, `session_cookies`) and
//! every cookie name the backend itself has set with `Set-Cookie`, learned as responses
//! pass by. A request carrying one is personal: it passes, with its cookies, and its
//! response is never stored. Cookies only the browser's scripts set (analytics, consent,
//! a theme) are never seen in a `Set-Cookie`, so they still do not split the cache.
//!
//! Learning closes the hole of an application whose session cookie no list knows
//! (DokuWiki's `DokuWiki`, a custom `session_name()`): without it, its logged-in users
//! would be served what a fill fetched without their cookies.

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::header::{HeaderMap, COOKIE, SET_COOKIE};
use levee_config::CookieMatcher;

/// More learned names than this is not an application's cookies: stop learning (the
/// configured globs still apply) rather than grow without bound.
const MAX_LEARNED: usize = 1024;

pub(crate) struct Sessions {
    /// Replaced by a reload.
    configured: ArcSwap<CookieMatcher>,
    /// Copy-on-write: read on every request with cookies, written when the backend sets
    /// a name not seen before, which stops happening soon after start.
    learned: ArcSwap<HashSet<Box<str>>>,
}

impl Sessions {
    pub fn new(configured: CookieMatcher) -> Sessions {
        Sessions {
            configured: ArcSwap::from_pointee(configured),
            learned: ArcSwap::from_pointee(HashSet::new()),
        }
    }

    /// Cookie names learned so far (a metric; at most MAX_LEARNED).
    pub fn learned_count(&self) -> usize {
        self.learned.load().len()
    }

    /// The configured globs after a reload (the learned names are kept).
    pub fn set_configured(&self, configured: CookieMatcher) {
        self.configured.store(Arc::new(configured));
    }

    /// Whether `name` is configured as a session cookie (presets, globs) or a visitor
    /// cookie. Only these may be dropped from a response that is shared (see
    /// `policy::decide`).
    pub fn is_configured(&self, name: &str) -> bool {
        let c = self.configured.load();
        c.is_session(name) || c.is_visitor(name)
    }

    /// The cookie of this request that makes it personal, if any. `Err(())` for a
    /// `Cookie` field that cannot be read (it might hide a session: pass).
    pub fn session_cookie<'a>(&self, headers: &'a HeaderMap) -> Result<Option<&'a str>, ()> {
        let mut learned = None;
        let configured = self.configured.load();
        for value in headers.get_all(COOKIE) {
            let s = value.to_str().map_err(|_| ())?;
            for pair in s.split(';') {
                let name = pair.split_once('=').map_or(pair, |(n, _)| n).trim();
                if name.is_empty() {
                    continue;
                }
                if configured.is_session(name) {
                    return Ok(Some(name));
                }
                let learned = learned.get_or_insert_with(|| self.learned.load());
                if learned.contains(name) {
                    return Ok(Some(name));
                }
            }
        }
        Ok(None)
    }

    /// Learns the names of the cookies a backend response sets.
    pub fn learn(&self, response: &HeaderMap) {
        for value in response.get_all(SET_COOKIE) {
            let Some(name) = value
                .to_str()
                .ok()
                .and_then(|s| s.split_once('='))
                .map(|(n, _)| n.trim())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            if self.is_configured(name)
                || self.learned.load().contains(name)
                || levee_config::NEVER_SESSION_COOKIES.contains(&name)
            {
                continue;
            }
            self.learned.rcu(|set| {
                let mut set = HashSet::clone(set);
                if set.len() < MAX_LEARNED {
                    set.insert(name.into());
                }
                Arc::new(set)
            });
            if self.learned.load().contains(name) {
                tracing::info!(cookie = name, "learned a session cookie from the backend");
            } else {
                tracing::warn!(
                    cookie = name,
                    "not learned: {MAX_LEARNED} cookie names already are; list it in anonymous.session_cookies"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn sessions() -> Sessions {
        Sessions::new(CookieMatcher::new(&["PHPSESSID".into()]).unwrap())
    }

    fn cookies(v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn configured_and_learned_names_make_a_request_personal() {
        let s = sessions();
        assert_eq!(
            s.session_cookie(&cookies("_ga=1; PHPSESSID=x")),
            Ok(Some("PHPSESSID"))
        );
        assert_eq!(s.session_cookie(&cookies("_ga=1; DokuWiki=abc")), Ok(None));
        let mut resp = HeaderMap::new();
        resp.append(
            SET_COOKIE,
            HeaderValue::from_static("DokuWiki=abc; path=/; HttpOnly"),
        );
        resp.append(
            SET_COOKIE,
            HeaderValue::from_static("DW68700bfd=deleted; expires=Thu, 01 Jan 1970 00:00:00 GMT"),
        );
        s.learn(&resp);
        assert_eq!(
            s.session_cookie(&cookies("_ga=1; DokuWiki=abc")),
            Ok(Some("DokuWiki"))
        );
        assert_eq!(
            s.session_cookie(&cookies("DW68700bfd=x")),
            Ok(Some("DW68700bfd"))
        );
        assert_eq!(s.session_cookie(&cookies("_ga=1; theme=dark")), Ok(None));
        assert!(
            !s.is_configured("DokuWiki"),
            "learned names are not dropped from responses"
        );
    }

    #[test]
    fn cookies_everyone_gets_alike_are_never_learned() {
        let s = sessions();
        let mut resp = HeaderMap::new();
        resp.insert(
            SET_COOKIE,
            HeaderValue::from_static("wordpress_test_cookie=WP%20Cookie%20check; path=/"),
        );
        s.learn(&resp);
        assert_eq!(
            s.session_cookie(&cookies("wordpress_test_cookie=WP%20Cookie%20check")),
            Ok(None)
        );
    }

    #[test]
    fn learning_is_bounded() {
        let s = sessions();
        for i in 0..MAX_LEARNED + 10 {
            let mut resp = HeaderMap::new();
            resp.insert(
                SET_COOKIE,
                HeaderValue::from_str(&format!("c{i}=1")).unwrap(),
            );
            s.learn(&resp);
        }
        assert_eq!(s.learned.load().len(), MAX_LEARNED);
    }

    #[test]
    fn an_unreadable_cookie_field_is_treated_as_personal() {
        let s = sessions();
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_bytes(b"a=\xff").unwrap());
        assert!(s.session_cookie(&h).is_err());
    }
}

//! Which cookies mean a session: the configured globs (presets, `session_cookies`) and
//! every cookie name the backend itself has set with `Set-Cookie`, learned as responses
//! pass by. A request carrying one is personal: it passes, with its cookies, and its
//! response is never stored. Cookies only the browser's scripts set (analytics, consent,
//! a theme) are never seen in a `Set-Cookie`, so they still do not split the cache.
//!
//! Learning closes the hole of an application whose session cookie no list knows
//! (DokuWiki's `DokuWiki`, a custom `session_name()`): without it, its logged-in users
//! would be served what a fill fetched without their cookies.
//!
//! A session cookie whose value levee saw started for an anonymous visitor does not make
//! a request personal (anonymous.rs). Whether a personal request is a *person's*, for
//! the backend's scheduling, is a second question: its value must be one levee saw the
//! backend give out as a login's ([`Standing`], proven.rs).

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::header::{HeaderMap, AUTHORIZATION, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use http::{request, Method, StatusCode};
use levee_config::CookieMatcher;

use crate::anonymous::{set_cookie_parts, AnonymousSessions};
use crate::proven::{self, Given, Held, Proven};

/// A `Cookie` field that cannot be read as cookies: it might hide a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// A request whose `Authorization` levee checked itself (a route's basic auth).
#[derive(Debug, Clone, Copy)]
pub struct AuthVerified;

/// The name `Authorization` values are proven under (no cookie can have it).
const AUTHORIZATION_NAME: &str = "\0authorization";

/// Paths whose backend asked for credentials (401 with `WWW-Authenticate`), remembered
/// this many at most, this long: credentials it then accepts there prove a person.
const CHALLENGED_PATHS: u64 = 10_000;
const CHALLENGED_FOR: Duration = Duration::from_secs(24 * 3600);

/// Who a request is to the backend's scheduler (limit.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// No session cookie (or only anonymous sessions') and no `Authorization`.
    Anonymous,
    /// A session levee saw the backend give out, or credentials it accepted: people's
    /// work. `who` tells one session from another (fair shares within the class).
    Person { who: u64 },
    /// A session cookie or `Authorization` nobody proved: personal (never stored), but
    /// scheduled as anonymous work.
    Unproven,
}

/// More learned names than this is not an application's cookies: stop learning (the
/// configured globs still apply) rather than grow without bound.
const MAX_LEARNED: usize = 1024;

pub struct Sessions {
    /// Replaced by a reload.
    configured: ArcSwap<CookieMatcher>,
    /// Copy-on-write: read on every request with cookies, written when the backend sets
    /// a name not seen before, which stops happening soon after start.
    learned: ArcSwap<HashSet<Box<str>>>,
    /// `[anonymous] remember_anonymous_sessions`; replaced by a reload.
    remember: AtomicBool,
    anonymous: AnonymousSessions,
    /// Shared by every site (a value proves the same wherever it is shown).
    proven: Arc<Proven>,
    /// Session cookies whose values never prove a person (`NEVER_PROOF_COOKIES`).
    never_proof: CookieMatcher,
    /// Hashes of paths whose backend challenged for credentials.
    challenged: moka::sync::Cache<u64, ()>,
    path_hasher: std::collections::hash_map::RandomState,
}

impl Sessions {
    pub fn new(configured: CookieMatcher, proven: Arc<Proven>) -> Sessions {
        let never: Vec<String> = levee_config::NEVER_PROOF_COOKIES
            .iter()
            .map(|s| s.to_string())
            .collect();
        Sessions {
            configured: ArcSwap::from_pointee(configured),
            learned: ArcSwap::from_pointee(HashSet::new()),
            remember: AtomicBool::new(false),
            anonymous: AnonymousSessions::new(crate::anonymous::CAPACITY),
            proven,
            // Fixed globs, compiled once: they cannot fail.
            never_proof: CookieMatcher::new(&never).unwrap_or_default(),
            challenged: moka::sync::Cache::builder()
                .max_capacity(CHALLENGED_PATHS)
                .time_to_live(CHALLENGED_FOR)
                .build(),
            path_hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Who the request is to the backend's scheduler: a proven person, someone whose
    /// session nobody proved, or anonymous. Its session cookies' values are looked up,
    /// anonymous sessions' skipped; `Authorization` counts when levee checked it (a
    /// route's basic auth) or the backend accepted it where it had asked for it.
    pub fn standing(&self, parts: &request::Parts) -> Standing {
        let h = &parts.headers;
        let mut claimed = false;
        if let Some(auth) = h.get(AUTHORIZATION) {
            claimed = true;
            let value = String::from_utf8_lossy(auth.as_bytes());
            if parts.extensions.get::<AuthVerified>().is_some()
                || self.proven.contains(AUTHORIZATION_NAME, &value)
            {
                return Standing::Person {
                    who: self.who(AUTHORIZATION_NAME, &value),
                };
            }
        }
        let remembering = self.remembering();
        let mut person = None;
        let readable = self.each_session_cookie(h, |name, value| {
            if remembering && self.anonymous.contains(name, value) {
                return true;
            }
            claimed = true;
            if self.proven.contains(name, value) {
                person = Some(self.who(name, value));
                return false;
            }
            true
        });
        claimed |= readable.is_err();
        match person {
            Some(who) => Standing::Person { who },
            None if claimed && self.proven.trusting() => Standing::Person {
                who: self.who("", &String::from_utf8_lossy(cookie_bytes(h))),
            },
            None if claimed => Standing::Unproven,
            None => Standing::Anonymous,
        }
    }

    /// One session's identity for fair shares: a keyed hash, not the value.
    fn who(&self, name: &str, value: &str) -> u64 {
        self.path_hasher.hash_one((name, value))
    }

    /// Turns anonymous sessions on or off (off forgets nothing, but nothing counts).
    pub fn remember_anonymous(&self, on: bool) {
        self.remember.store(on, Ordering::Relaxed);
    }

    fn remembering(&self) -> bool {
        self.remember.load(Ordering::Relaxed)
    }

    /// Whether `name` is a session cookie, configured or learned, not a visitor's.
    fn is_session_name(&self, name: &str) -> bool {
        let c = self.configured.load();
        !c.is_visitor(name) && (c.is_session(name) || self.learned.load().contains(name))
    }

    /// The session cookies of a request, `(name, value)`, until `f` says stop.
    fn each_session_cookie<'a>(
        &self,
        headers: &'a HeaderMap,
        mut f: impl FnMut(&'a str, &'a str) -> bool,
    ) -> Result<(), ()> {
        let configured = self.configured.load();
        let mut learned = None;
        for value in headers.get_all(COOKIE) {
            let s = value.to_str().map_err(|_| ())?;
            for pair in s.split(';') {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                let (name, value) = (name.trim(), value.trim());
                if name.is_empty() {
                    continue;
                }
                let session = configured.is_session(name)
                    || learned
                        .get_or_insert_with(|| self.learned.load())
                        .contains(name);
                if session && !f(name, value) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Cookie names learned so far (a metric; at most MAX_LEARNED).
    pub fn learned_count(&self) -> usize {
        self.learned.load().len()
    }

    /// Session values remembered as anonymous (a metric; about, as the cache counts).
    pub fn anonymous_count(&self) -> u64 {
        self.anonymous.len()
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

    /// The cookie of this request that makes it personal, if any: a session cookie,
    /// unless its value is an anonymous session's. [`Unreadable`] for a `Cookie` field that
    /// cannot be read (it might hide a session: pass).
    pub fn session_cookie<'a>(
        &self,
        headers: &'a HeaderMap,
    ) -> Result<Option<&'a str>, Unreadable> {
        let remembering = self.remembering();
        let mut found = None;
        self.each_session_cookie(headers, |name, value| {
            if remembering && self.anonymous.contains(name, value) {
                return true;
            }
            found = Some(name);
            false
        })
        .map_err(|()| Unreadable)?;
        Ok(found)
    }

    /// Whether the request holds a session cookie and all of them are anonymous
    /// sessions': it may be served what is stored, not a fill (lookup.rs).
    pub fn holds_anonymous(&self, headers: &HeaderMap) -> bool {
        if !self.remembering() || !headers.contains_key(COOKIE) {
            return false;
        }
        let mut any = false;
        let mut all = true;
        let readable = self.each_session_cookie(headers, |name, value| {
            any = true;
            all = self.anonymous.contains(name, value);
            all
        });
        readable.is_ok() && any && all
    }

    /// A request that may change what its session is (anything but GET and HEAD: a
    /// login is a POST): its session cookies are no longer anonymous, before the backend
    /// sees it.
    pub fn forget_anonymous(&self, method: &Method, headers: &HeaderMap) {
        if *method == Method::GET || *method == Method::HEAD || !self.remembering() {
            return;
        }
        let _ = self.each_session_cookie(headers, |name, value| {
            self.anonymous.forget(name, value);
            true
        });
    }

    /// Remembers the session cookies a backend answer gives an anonymous client, and
    /// forgets those it changes or deletes (anonymous.rs says when). Called with what
    /// reaches the client, after `learn`.
    pub fn observe(
        &self,
        method: &Method,
        path: &str,
        request: &HeaderMap,
        status: StatusCode,
        response: &HeaderMap,
    ) {
        self.witness(method, path, request, status, response);
        if !self.remembering()
            || !(*method == Method::GET || *method == Method::HEAD)
            || request.contains_key(AUTHORIZATION)
            || !response.contains_key(SET_COOKIE)
        {
            return;
        }
        // The session cookies it holds, all remembered (else it is a member: nothing to
        // remember for it).
        let mut held: Vec<(&str, &str)> = Vec::new();
        let mut member = false;
        let readable = self.each_session_cookie(request, |name, value| {
            member = !self.anonymous.contains(name, value);
            held.push((name, value));
            !member
        });
        if member || readable.is_err() {
            return;
        }
        let mut new = Vec::new();
        let mut renewed = Vec::new();
        for field in response.get_all(SET_COOKIE) {
            let Some((name, value, deletes)) = field.to_str().ok().and_then(set_cookie_parts)
            else {
                continue;
            };
            if !self.is_session_name(name) {
                continue;
            }
            match held.iter().find(|(n, _)| *n == name) {
                Some((_, v)) if *v == value && !deletes => {}
                // One visitor's id renewed (session_regenerate_id): still theirs.
                Some((_, v))
                    if !deletes && status.is_success() && self.anonymous.identifies(name, v) =>
                {
                    renewed.push((name, *v, value));
                }
                // Its session ended or changed state under a GET: a logout, a login.
                Some(_) => {
                    for (n, v) in &held {
                        self.anonymous.forget(n, v);
                    }
                    return;
                }
                None if !deletes => new.push((name, value)),
                None => {}
            }
        }
        if status.is_success() {
            for (name, value) in new {
                self.anonymous.remember(name, value);
            }
            for (name, old, value) in renewed {
                self.anonymous.forget(name, old);
                self.anonymous.remember(name, value);
            }
        }
    }

    /// What an answer that reaches the client proves or ends (proven.rs): the session
    /// values it gives out after a login, the ones it deletes; credentials it accepts
    /// where it asked for them, or refuses.
    fn witness(
        &self,
        method: &Method,
        path: &str,
        request: &HeaderMap,
        status: StatusCode,
        response: &HeaderMap,
    ) {
        if let Some(auth) = request.get(AUTHORIZATION) {
            let value = String::from_utf8_lossy(auth.as_bytes());
            let path_hash = self.path_hasher.hash_one(path);
            if status == StatusCode::UNAUTHORIZED {
                self.proven.forget(AUTHORIZATION_NAME, &value);
            } else if (status.is_success() || status.is_redirection())
                && self.challenged.contains_key(&path_hash)
                && value.len() >= proven::MIN_PROOF_LEN
            {
                self.proven.prove(AUTHORIZATION_NAME, &value);
            }
        }
        if status == StatusCode::UNAUTHORIZED && response.contains_key(WWW_AUTHENTICATE) {
            self.challenged.insert(self.path_hasher.hash_one(path), ());
        }
        if !response.contains_key(SET_COOKIE) {
            return;
        }
        let mut held = Vec::new();
        let _ = self.each_session_cookie(request, |name, value| {
            let proven = self.proven.contains(name, value);
            held.push(Held {
                name,
                value,
                proven,
                given: proven || self.anonymous.was_given(name, value),
            });
            true
        });
        let given: Vec<Given> = response
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|f| f.to_str().ok().and_then(set_cookie_parts))
            .filter(|(name, _, _)| self.is_session_name(name))
            .map(|(name, value, deletes)| Given {
                name,
                value,
                deletes,
            })
            .collect();
        let p = proven::proofs(method, status, &held, &given);
        for (name, value) in p.forget {
            self.proven.forget(name, value);
        }
        // Whatever else it is, each value given out is known as given (`was_given`).
        for g in given.iter().filter(|g| !g.deletes) {
            self.anonymous.note_given(g.name, g.value);
        }
        let configured = self.configured.load();
        for (name, value) in p.prove {
            if value.len() >= proven::MIN_PROOF_LEN
                && configured.is_session(name)
                && !self.never_proof.is_session(name)
            {
                // A person's now: no longer an anonymous visitor's.
                self.anonymous.forget(name, value);
                self.proven.prove(name, value);
            }
        }
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

/// The request's `Cookie` field as sent (the first one), for a trusted session's identity.
fn cookie_bytes(h: &HeaderMap) -> &[u8] {
    h.get(COOKIE).map_or(&[], |v| v.as_bytes())
}

#[cfg(test)]
mod tests;

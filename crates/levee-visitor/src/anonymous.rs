//! Anonymous sessions: session cookies the backend started for a visitor who was
//! anonymous, remembered by value so that the visitor stays anonymous to the cache.
//!
//! gnuboard and XE/Rhymix start a PHP session for every visitor; their login forms do
//! for anyone who opens them. A session cookie makes a request personal (sessions.rs), so
//! a reader who once opened the login form, or any page levee does not store, passed the
//! cache on every later page: the documents' "75 req/s until anonymous pages stop
//! setting cookies". The cookie's name cannot tell a reader from a member; its value can,
//! if levee saw it given out:
//!
//! - remembered: a session cookie's `name=value` that a `2xx` answer to a GET or HEAD set
//!   for a client holding no session cookie but remembered ones and no `Authorization`
//!   (`Sessions::observe`). Only answers that reach the client: a stored page's cookie is
//!   dropped, nobody holds it;
//! - forgotten: when a request carrying it is anything but GET or HEAD (a login is a
//!   POST: forgotten before the backend sees it), or when an answer to a GET deletes one
//!   of the session cookies it was sent with (a logout), changes a shared one
//!   (`rx_login_status=none` to a member's), or answers other than `2xx` with a change;
//! - renewed: a `2xx` answer to a GET that gives one visitor's session id a new value
//!   (Rhymix renews its session id every 5 minutes, PHP's `session_regenerate_id`)
//!   passes the remembrance on to the new value. A login by a GET answered `200` with a
//!   new id would be taken for a renewal: `remember_anonymous_sessions = false` for an
//!   application that logs people in that way;
//! - a value given to two different clients (`rx_login_status=none`) identifies nobody:
//!   it stays remembered (it can make no one a member by itself).
//!
//! A request whose session cookies are all remembered is served what is stored, as a
//! new visitor is, refreshed by a fill without cookies when stale; a URL nothing is
//! stored for goes to the backend as it is, cookies included, and is not stored
//! (lookup.rs): a captcha or a login's callback needs the session, which a fill made
//! without cookies would not carry. When in doubt it passes:
//! a value levee never saw (before a restart, from another node), one evicted from the
//! bounded set, one that outlived its idle time.
//!
//! Hand-written over moka because the rules are levee's; moka holds the values.

use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use moka::sync::Cache;

/// Values remembered at most: about 40 bytes each. A flood of cookieless GETs to a page
/// that starts a session evicts the least used; their visitors then pass.
pub const CAPACITY: u64 = 200_000;

/// A session not seen for a day is forgotten (PHP's own default lifetime is 24 minutes
/// of inactivity; applications raise it to hours).
const IDLE: Duration = Duration::from_secs(24 * 3600);

/// What levee knows of a value it saw given out to an anonymous visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Given {
    /// Given to one visitor: an id.
    Once,
    /// Given to two or more: a flag that identifies nobody.
    Shared,
    /// No longer anonymous (a POST with it, a change under a GET), but levee saw the
    /// backend give it out: a login that regenerates it proves the new value
    /// (proven.rs), where a made-up one proves nothing.
    Spent,
}

pub struct AnonymousSessions {
    /// Keyed by a 64-bit hash of `name=value` under a random key (SipHash): the values
    /// themselves, session identifiers, are not kept.
    seen: Cache<u64, Given>,
    hasher: std::collections::hash_map::RandomState,
}

impl AnonymousSessions {
    pub fn new(capacity: u64) -> AnonymousSessions {
        AnonymousSessions {
            seen: Cache::builder()
                .max_capacity(capacity)
                .time_to_idle(IDLE)
                .build(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn key(&self, name: &str, value: &str) -> u64 {
        let mut h = self.hasher.build_hasher();
        name.hash(&mut h);
        value.hash(&mut h);
        h.finish()
    }

    /// Whether the value is an anonymous visitor's now.
    pub fn contains(&self, name: &str, value: &str) -> bool {
        matches!(
            self.seen.get(&self.key(name, value)),
            Some(Given::Once | Given::Shared)
        )
    }

    /// Whether levee saw the backend give the value out to a visitor (anonymous now or
    /// not).
    pub fn was_given(&self, name: &str, value: &str) -> bool {
        self.seen.contains_key(&self.key(name, value))
    }

    /// Notes that the backend gave the value out, without making it anonymous (it may be
    /// anyone's): what `was_given` asks.
    pub fn note_given(&self, name: &str, value: &str) {
        let key = self.key(name, value);
        if !self.seen.contains_key(&key) {
            self.seen.insert(key, Given::Spent);
        }
    }

    pub fn remember(&self, name: &str, value: &str) {
        let key = self.key(name, value);
        // Two clients got the same value: it is nobody's in particular.
        let given = match self.seen.get(&key) {
            None | Some(Given::Spent) => Given::Once,
            Some(_) => Given::Shared,
        };
        self.seen.insert(key, given);
    }

    /// Whether the value was given to one visitor only (an id, not a flag).
    pub fn identifies(&self, name: &str, value: &str) -> bool {
        self.seen.get(&self.key(name, value)) == Some(Given::Once)
    }

    /// A value that identifies one visitor is no longer anonymous (it stays known as
    /// given out); a shared one stays anonymous.
    pub fn forget(&self, name: &str, value: &str) {
        let key = self.key(name, value);
        if self.seen.get(&key) == Some(Given::Once) {
            self.seen.insert(key, Given::Spent);
        }
    }

    /// How many values are remembered (moka's count, brought up to date first).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> u64 {
        self.seen.run_pending_tasks();
        self.seen.entry_count()
    }
}

/// A `Set-Cookie` field's name and value, and whether it deletes the cookie (an empty
/// value, `Max-Age` ≤ 0, or an `Expires` before 2000: what applications send to delete).
pub fn set_cookie_parts(field: &str) -> Option<(&str, &str, bool)> {
    let mut attrs = field.split(';');
    let (name, value) = attrs.next()?.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() {
        return None;
    }
    let mut deletes = value.is_empty() || value == "deleted";
    for attr in attrs {
        let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("max-age") && v.parse::<i64>().is_ok_and(|s| s <= 0) {
            deletes = true;
        }
        if k.eq_ignore_ascii_case("expires") && old_date(v) {
            deletes = true;
        }
    }
    Some((name, value, deletes))
}

/// An `Expires` in the last century (1970, 1999, PHP's 1981): a deletion. Read loosely:
/// the year is the first four-digit number of the date.
fn old_date(v: &str) -> bool {
    v.split(|c: char| !c.is_ascii_digit())
        .find(|w| w.len() == 4)
        .and_then(|y| y.parse::<u32>().ok())
        .is_some_and(|y| y < 2000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_given_once_is_forgotten_one_given_twice_is_not() {
        let a = AnonymousSessions::new(CAPACITY);
        a.remember("PHPSESSID", "abc");
        assert!(a.contains("PHPSESSID", "abc"));
        assert!(!a.contains("PHPSESSID", "abd"));
        assert!(!a.contains("OTHER", "abc"));
        a.forget("PHPSESSID", "abc");
        assert!(!a.contains("PHPSESSID", "abc"));
        assert!(
            a.was_given("PHPSESSID", "abc"),
            "no longer anonymous, still given"
        );
        assert!(!a.was_given("PHPSESSID", "made-up"));
        a.remember("rx_login_status", "none");
        a.remember("rx_login_status", "none");
        a.forget("rx_login_status", "none");
        assert!(a.contains("rx_login_status", "none"));
    }

    #[test]
    fn the_set_is_bounded() {
        let a = AnonymousSessions::new(100);
        for i in 0..1000 {
            a.remember("PHPSESSID", &i.to_string());
        }
        assert!(a.len() <= 100, "{}", a.len());
    }

    #[test]
    fn set_cookie_fields_are_read_with_their_deletions() {
        assert_eq!(
            set_cookie_parts("PHPSESSID=abc; path=/; HttpOnly"),
            Some(("PHPSESSID", "abc", false))
        );
        assert_eq!(
            set_cookie_parts("a=; expires=Thu, 01-Jan-1970 00:00:01 GMT"),
            Some(("a", "", true))
        );
        assert_eq!(
            set_cookie_parts("MONI_ID=x; expires=Tuesday, 01-Jan-1999 12:00:00 GMT"),
            Some(("MONI_ID", "x", true))
        );
        assert_eq!(set_cookie_parts("b=1; Max-Age=0"), Some(("b", "1", true)));
        assert_eq!(
            set_cookie_parts("c=2; expires=Sun, 27 Dec 2026 02:55:38 GMT; Max-Age=2592000"),
            Some(("c", "2", false))
        );
        assert_eq!(set_cookie_parts("=x"), None);
        assert_eq!(set_cookie_parts("novalue"), None);
    }
}

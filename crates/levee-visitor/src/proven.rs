//! Proven sessions: session-cookie values levee saw the backend give out as a person's,
//! so that a session cookie is a claim the backend's own answers can back, not a pass
//! to the front of the queue that any client can write.
//!
//! A request whose session cookies levee cannot back still goes to the backend with its
//! cookies and is never stored or served a stored page (privacy is decided by the
//! cookie's *name*, sessions.rs); only its backend work is scheduled as anonymous work,
//! in the lane, fair per network (limit.rs). A logged-in person whose session levee
//! cannot back is never logged out: their requests pass exactly as before, they only
//! lose their place ahead of the crawlers while the backend is saturated.
//!
//! What proves a value is decided in [`proofs`] (pure), from what the backend answered:
//! - a form post answered with a redirect that sets it anew (a login's
//!   POST-redirect-GET), from a client whose session cookies levee all saw given out;
//! - a form post whose answer gives the client a new value for a session cookie levee saw
//!   given to it (an id regenerated at login, answered 200). A made-up id that the
//!   application replaces (it knows no such session) proves nothing;
//! - any answer to a request that already held a proven value and deletes none of its
//!   session cookies (a renewed id, the cookies a logged-in page adds).
//!
//! Only the session cookies the configuration names (presets, built-in globs,
//! `extra_session_cookies`) prove anything: a learned name may be a token the
//! application sets anew on every answer (Laravel's `XSRF-TOKEN`), which a failed login
//! would then "regenerate".
//!
//! A value stops counting when an answer deletes it (a logout), after `IDLE` unused, or
//! when evicted from the bounded set. A session started for a visitor (a GET answered
//! with a new cookie, a cookieless form post answered 200: a failed login) proves
//! nothing: a crawler gets those by asking. Values a client can guess or read never
//! prove anything: short ones (a user id) and those of levee-config's
//! `NEVER_PROOF_COOKIES` (a user name).
//!
//! Kept as a 128-bit SHA-256 of `name=value`, never the value: the same on every node
//! and after a restart, so the tiers below memory can keep and share it (tiers.rs), and
//! what they keep cannot be turned back into a session id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{Method, StatusCode};
use levee_cache::proof::ProofChange as Change;
use moka::sync::Cache;
use sha2::{Digest, Sha256};

/// Values kept at most (about 120 bytes each with moka's bookkeeping). More logged-in
/// people than this at once is beyond the sites levee is for; the least used go first.
pub const CAPACITY: u64 = 100_000;

/// A proven value unused this long is forgotten: longer than the "remember me" logins
/// of the applications (WordPress 14 days, MediaWiki 30), whose renewals prove the new
/// session anyway.
pub const IDLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// A kept value is written below memory again once this old, so that a session in use
/// outlives `IDLE` across restarts too.
const TOUCH_AFTER: u64 = IDLE.as_secs() / 8;

/// Shorter values are guessable (a user id, a flag): they never prove a person.
pub const MIN_PROOF_LEN: usize = 16;

/// Where changes go below memory (the disk tier's file, Redis), set once the tiers open.
pub type Sink = Arc<dyn Fn(Change) + Send + Sync>;

pub struct Proven {
    /// The value's hash -> unix seconds when it was last written below memory.
    kept: Cache<u128, u64>,
    sink: OnceLock<Sink>,
    /// Until when (unix seconds) a value nobody proved is trusted anyway
    /// (`[anonymous] trust_unproven_sessions`): the first hours in front of a site whose
    /// people logged in before levee was there.
    trust_until: AtomicU64,
}

impl Proven {
    pub fn new(capacity: u64) -> Proven {
        Proven {
            kept: Cache::builder()
                .max_capacity(capacity)
                .time_to_idle(IDLE)
                .build(),
            sink: OnceLock::new(),
            trust_until: AtomicU64::new(0),
        }
    }

    /// Where changes are written from now on (the tiers below memory).
    pub fn set_sink(&self, sink: Sink) {
        let _ = self.sink.set(sink);
    }

    /// Trusts values nobody proved for `window` from now (zero: not at all).
    pub fn trust_for(&self, window: Duration) {
        let until = match window.is_zero() {
            true => 0,
            false => unix_now().saturating_add(window.as_secs().max(1)),
        };
        self.trust_until.store(until, Ordering::Relaxed);
    }

    /// Whether values nobody proved count as people's now.
    pub fn trusting(&self) -> bool {
        let until = self.trust_until.load(Ordering::Relaxed);
        until != 0 && unix_now() < until
    }

    pub fn hash(name: &str, value: &str) -> u128 {
        let mut h = Sha256::new();
        h.update(b"levee-session\0");
        h.update(name.as_bytes());
        h.update(b"\0");
        h.update(value.as_bytes());
        let d = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&d[..16]);
        u128::from_le_bytes(first)
    }

    /// Whether `name=value` was proven (and is still kept).
    pub fn contains(&self, name: &str, value: &str) -> bool {
        let hash = Proven::hash(name, value);
        let Some(written) = self.kept.get(&hash) else {
            return false;
        };
        let now = unix_now();
        if now.saturating_sub(written) > TOUCH_AFTER {
            self.kept.insert(hash, now);
            self.send(Change::Proven { hash, at: now });
        }
        true
    }

    pub fn prove(&self, name: &str, value: &str) {
        let hash = Proven::hash(name, value);
        let now = unix_now();
        self.kept.insert(hash, now);
        self.send(Change::Proven { hash, at: now });
    }

    pub fn forget(&self, name: &str, value: &str) {
        let hash = Proven::hash(name, value);
        if self.kept.remove(&hash).is_some() {
            self.send(Change::Forgotten { hash });
        }
    }

    /// A change heard from below (read at start, or another node's): applied here only.
    pub fn apply(&self, change: Change) {
        match change {
            Change::Proven { hash, at } => {
                if unix_now().saturating_sub(at) < IDLE.as_secs() {
                    self.kept.insert(hash, at);
                }
            }
            Change::Forgotten { hash } => self.kept.invalidate(&hash),
        }
    }

    /// Values kept (a metric; about, as the cache counts).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> u64 {
        self.kept.run_pending_tasks();
        self.kept.entry_count()
    }

    fn send(&self, change: Change) {
        if let Some(sink) = self.sink.get() {
            sink(change);
        }
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A session cookie a request held: its name, value, whether that value is proven, and
/// whether levee saw the backend give it out (proven, or to an anonymous visitor).
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub name: &'a str,
    pub value: &'a str,
    pub proven: bool,
    pub given: bool,
}

/// A session cookie an answer set: name, value, and whether it deletes it.
#[derive(Debug, Clone, Copy)]
pub struct Given<'a> {
    pub name: &'a str,
    pub value: &'a str,
    pub deletes: bool,
}

/// What one answer proves and unproves (see the module's rules).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Proofs<'a> {
    pub prove: Vec<(&'a str, &'a str)>,
    pub forget: Vec<(&'a str, &'a str)>,
}

/// The rules, pure: `held` the request's session cookies, `given` the answer's.
pub fn proofs<'a>(
    method: &Method,
    status: StatusCode,
    held: &[Held<'a>],
    given: &[Given<'a>],
) -> Proofs<'a> {
    let mut out = Proofs::default();
    let unsafe_method = !matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    );
    // A held session cookie deleted: a logout (or a state the application ended). All
    // the held values stop counting, and nothing given with it counts.
    let ends = given
        .iter()
        .any(|g| g.deletes && held.iter().any(|h| h.name == g.name));
    if ends {
        out.forget = held.iter().map(|h| (h.name, h.value)).collect();
        return out;
    }
    let held_proven = held.iter().any(|h| h.proven);
    let all_given = held.iter().all(|h| h.given);
    for g in given.iter().filter(|g| !g.deletes) {
        let anew = !held.iter().any(|h| h.name == g.name && h.value == g.value);
        let regenerated = held
            .iter()
            .any(|h| h.name == g.name && h.value != g.value && h.given);
        let proves = held_proven
            || (unsafe_method && status.is_redirection() && anew && all_given)
            || (unsafe_method && regenerated);
        if proves {
            out.prove.push((g.name, g.value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held<'a>(name: &'a str, value: &'a str, proven: bool) -> Held<'a> {
        Held {
            name,
            value,
            proven,
            given: true,
        }
    }

    fn made_up(name: &str) -> Held<'_> {
        Held {
            name,
            value: "made-up",
            proven: false,
            given: false,
        }
    }

    fn given<'a>(name: &'a str, value: &'a str) -> Given<'a> {
        Given {
            name,
            value,
            deletes: false,
        }
    }

    fn deleted(name: &str) -> Given<'_> {
        Given {
            name,
            value: "",
            deletes: true,
        }
    }

    const POST: Method = Method::POST;
    const GET: Method = Method::GET;

    #[test]
    fn a_login_proves_what_it_sets() {
        // MediaWiki, WordPress, gnuboard: POST, then a redirect with the new cookies.
        let p = proofs(
            &POST,
            StatusCode::FOUND,
            &[held("wiki_session", "anon", false)],
            &[given("wiki_session", "new"), given("wikiUserID", "1")],
        );
        assert_eq!(p.prove, [("wiki_session", "new"), ("wikiUserID", "1")]);
        // Laravel, Symfony: the id regenerated, answered 200 (an AJAX login).
        let p = proofs(
            &POST,
            StatusCode::OK,
            &[held("laravel_session", "a", false)],
            &[given("laravel_session", "b")],
        );
        assert_eq!(p.prove, [("laravel_session", "b")]);
    }

    #[test]
    fn a_session_started_for_anyone_proves_nothing() {
        // A GET that starts a session; a cookieless POST answered 200 (a failed login
        // that starts one); a failed login that keeps its id; a made-up value answered.
        for (method, status, h, g) in [
            (&GET, StatusCode::OK, vec![], vec![given("PHPSESSID", "x")]),
            (
                &GET,
                StatusCode::FOUND,
                vec![],
                vec![given("PHPSESSID", "x")],
            ),
            (&POST, StatusCode::OK, vec![], vec![given("PHPSESSID", "x")]),
            (
                &POST,
                StatusCode::OK,
                vec![held("PHPSESSID", "x", false)],
                vec![given("PHPSESSID", "x")],
            ),
            (
                &GET,
                StatusCode::OK,
                vec![made_up("PHPSESSID")],
                vec![given("PHPSESSID", "fresh")],
            ),
            // A made-up id the application replaced at a (failed) login post; or a
            // redirect answering a post that held one.
            (
                &POST,
                StatusCode::OK,
                vec![made_up("wiki_session")],
                vec![given("wiki_session", "fresh")],
            ),
            (
                &POST,
                StatusCode::FOUND,
                vec![made_up("wiki_session")],
                vec![given("wiki_session", "fresh")],
            ),
            // A failed login answered with a redirect that sets the same id again
            // (Laravel re-sends its session cookie with every answer).
            (
                &POST,
                StatusCode::FOUND,
                vec![held("laravel_session", "same", false)],
                vec![given("laravel_session", "same")],
            ),
        ] {
            assert_eq!(proofs(method, status, &h, &g), Proofs::default());
        }
    }

    #[test]
    fn a_proven_session_proves_its_renewals_and_a_logout_ends_it() {
        let h = [held("PHPSESSID", "old", true), held("rx_login", "z", false)];
        let p = proofs(&GET, StatusCode::OK, &h, &[given("PHPSESSID", "renewed")]);
        assert_eq!(p.prove, [("PHPSESSID", "renewed")]);
        let p = proofs(
            &GET,
            StatusCode::FOUND,
            &h,
            &[deleted("rx_login"), given("PHPSESSID", "after-logout")],
        );
        assert!(p.prove.is_empty());
        assert_eq!(p.forget, [("PHPSESSID", "old"), ("rx_login", "z")]);
    }

    #[test]
    fn kept_values_are_hashed_forgotten_and_applied() {
        let p = Proven::new(100);
        assert!(!p.contains("PHPSESSID", "abc"));
        p.prove("PHPSESSID", "abc");
        assert!(p.contains("PHPSESSID", "abc"));
        assert!(!p.contains("PHPSESSID", "abd"));
        assert!(!p.contains("OTHER", "abc"));
        p.forget("PHPSESSID", "abc");
        assert!(!p.contains("PHPSESSID", "abc"));
        let hash = Proven::hash("a", "b");
        assert_ne!(
            hash,
            Proven::hash("a\0b", ""),
            "name and value are kept apart"
        );
        p.apply(Change::Proven {
            hash,
            at: unix_now(),
        });
        assert!(p.contains("a", "b"));
        p.apply(Change::Forgotten { hash });
        assert!(!p.contains("a", "b"));
        // Too old to be kept.
        p.apply(Change::Proven {
            hash,
            at: unix_now() - IDLE.as_secs() - 1,
        });
        assert!(!p.contains("a", "b"));
    }

    #[test]
    fn changes_reach_the_sink() {
        let p = Proven::new(100);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        p.set_sink(Arc::new(move |c| s.lock().unwrap().push(c)));
        p.prove("PHPSESSID", "abc");
        p.forget("PHPSESSID", "abc");
        p.forget("PHPSESSID", "never");
        let seen = seen.lock().unwrap();
        let hash = Proven::hash("PHPSESSID", "abc");
        assert!(matches!(seen[0], Change::Proven { hash: h, .. } if h == hash));
        assert_eq!(seen[1], Change::Forgotten { hash });
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn trust_is_time_bounded() {
        let p = Proven::new(10);
        assert!(!p.trusting());
        p.trust_for(Duration::from_secs(3600));
        assert!(p.trusting());
        p.trust_for(Duration::ZERO);
        assert!(!p.trusting());
    }
}

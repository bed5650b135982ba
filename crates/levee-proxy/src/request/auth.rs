//! A route's basic authentication while serving: the users of its htpasswd file, bcrypt
//! checked off the request threads, and the credentials already checked.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http::header::HeaderValue;
use levee_config::BasicAuth;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

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
    pub async fn allows(&self, authorization: Option<&HeaderValue>) -> bool {
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

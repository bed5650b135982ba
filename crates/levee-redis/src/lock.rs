//! One fill per key across all nodes: `SET P l:{H} token NX PX lock_ttl`. The node that
//! takes the lock fetches and stores the record; the others poll for it. The token
//! carries when the lock was taken (the holder's clock, which also dates the record it
//! writes), so a waiter takes only a record written since, never the stale one the
//! fill is replacing.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use levee_cache::clock::system_now;
use levee_cache::codec::{unix_ms, Decoded};
use levee_cache::CacheKey;

use crate::inner::Inner;
use crate::keys::{lock_token, token_time};

/// What [`Redis::lock`](crate::Redis::lock) found.
#[derive(Debug)]
pub enum Lock {
    /// This node fetches; the guard releases the lock when dropped.
    Acquired(LockGuard),
    /// Another node is fetching: [`Redis::wait_for`](crate::Redis::wait_for) its record.
    Busy,
    /// Redis is down or slow: fetch without it.
    Unavailable,
}

/// A held fill lock. Dropping it releases the lock (in a spawned task, and only if
/// the lock is still this one: it may have expired and been taken by another node).
pub struct LockGuard {
    inner: Arc<Inner>,
    name: String,
    token: String,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .finish()
    }
}

/// Deletes the lock if it still holds our token.
static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then
             return redis.call('DEL', KEYS[1])
         end
         return 0",
    )
});

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Without a runtime (shutdown) the lock expires after lock_ttl.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (inner, name, token) = (
            self.inner.clone(),
            std::mem::take(&mut self.name),
            std::mem::take(&mut self.token),
        );
        runtime.spawn(async move {
            let Some(mut conn) = inner.conn() else {
                return;
            };
            let mut release = RELEASE.prepare_invoke();
            release.key(&name).arg(&token);
            let release = release.invoke_async(&mut conn);
            let _: Option<i64> = inner.run(release).await;
        });
    }
}

pub(crate) async fn lock(inner: &Arc<Inner>, key: &CacheKey) -> Lock {
    let Some(mut conn) = inner.conn() else {
        return Lock::Unavailable;
    };
    let name = inner.keys.lock(key);
    let token = lock_token(&inner.node, unix_ms(system_now()));
    let ttl = u64::try_from(inner.cfg.lock_ttl.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let mut cmd = redis::cmd("SET");
    cmd.arg(&name).arg(&token).arg("NX").arg("PX").arg(ttl);
    let set = cmd.query_async::<Option<String>>(&mut conn);
    match inner.run(set).await {
        Some(Some(_)) => {
            inner.stats.lock_acquired();
            Lock::Acquired(LockGuard {
                inner: inner.clone(),
                name,
                token,
            })
        }
        Some(None) => {
            inner.stats.lock_busy();
            Lock::Busy
        }
        None => {
            // No answer in time, but the SET may have been carried out: release it (if
            // it is ours), or the other nodes would wait for a fill nobody does.
            drop(LockGuard {
                inner: inner.clone(),
                name,
                token,
            });
            Lock::Unavailable
        }
    }
}

/// How often a waiter looks for the record.
const POLL: Duration = Duration::from_millis(15);

pub(crate) async fn wait_for(
    inner: &Arc<Inner>,
    key: &CacheKey,
    limit: Duration,
) -> Option<Decoded> {
    let deadline = tokio::time::Instant::now() + limit;
    let (record, lock) = (inner.keys.record(key), inner.keys.lock(key));
    // Records written before the lock was taken are what the fill replaces.
    let mut since: Option<u64> = None;
    // The fingerprint (checksum or chunk generation) of the last record refused, so
    // that it is not read again and again.
    let mut refused: Option<Vec<u8>> = None;
    loop {
        let mut conn = inner.conn()?;
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(&lock)
            .cmd("GETRANGE")
            .arg(&record)
            .arg(4)
            .arg(11);
        let (holder, fingerprint): (Option<Vec<u8>>, Vec<u8>) =
            inner.run(pipe.query_async(&mut conn)).await?;
        if since.is_none() {
            since = holder.as_deref().and_then(token_time);
        }
        let new = !fingerprint.is_empty() && refused.as_ref() != Some(&fingerprint);
        if new {
            if let Some(d) = crate::record::get(inner, key).await {
                // Strictly later: a record of the very millisecond the lock was
                // taken may be the one the fill replaces (a wrong guess costs one
                // fetch, the other way a stale page).
                if since.is_none_or(|t| unix_ms(d.written) > t) {
                    inner.stats.wait_served();
                    return Some(d);
                }
            }
            refused = Some(fingerprint);
        }
        if holder.is_none() && !new {
            // Released (or expired) without a new record: the fill stored nothing.
            return None;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return None;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

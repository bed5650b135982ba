//! Purges across nodes. A ban made on a node is applied there at once (to what this
//! tier reads), then written to Redis by the supervisor: the record of a removed URL
//! deleted, the ban added to `P bans` (a sorted set by time, trimmed to the ban
//! horizon) and published on `P purge` as `node line` (`Ban::to_line`). Every other
//! node hears it, skips its own, and calls `on_ban` so that its local tiers drop their
//! copies. A node that was disconnected reads `P bans` when it connects again and
//! calls `on_ban` for each ban it had not seen; bans made while Redis was down wait in
//! a bounded queue and are sent when it is back.

use std::sync::Arc;

use crate::conn::Conn;
use levee_cache::ban::{Ban, BanMode, BanTarget, DEFAULT_HORIZON};
use levee_cache::clock::system_now;
use levee_cache::codec::unix_ms;

use crate::inner::Inner;

/// Bans kept: in the queue while Redis is down, in Redis, read back on connection.
const MAX_BANS: usize = 10_000;

pub(crate) fn publish(inner: &Arc<Inner>, ban: Ban) {
    inner.bans.add(ban.clone());
    if let Ok(mut sync) = inner.sync.lock() {
        if sync.pending.len() >= MAX_BANS {
            // Redis has been down through ten thousand purges: the oldest is lost to
            // the other nodes (it still applies here).
            sync.pending.pop_front();
            inner.stats.write_dropped();
        }
        sync.pending.push_back(ban);
    }
    inner.flush.notify_one();
}

/// Writes the queued bans, oldest first; each leaves the queue once Redis took it.
/// False if Redis failed (the rest stay queued).
pub(crate) async fn flush(inner: &Inner, conn: &mut Conn) -> bool {
    loop {
        let next = inner
            .sync
            .lock()
            .ok()
            .and_then(|s| s.pending.front().cloned());
        let Some(ban) = next else {
            return true;
        };
        if !write(inner, conn, &ban).await {
            return false;
        }
        if let Ok(mut sync) = inner.sync.lock() {
            if sync.pending.front() == Some(&ban) {
                sync.pending.pop_front();
            }
        }
    }
}

/// One ban into Redis: delete what it removes, keep it, publish it.
async fn write(inner: &Inner, conn: &mut Conn, ban: &Ban) -> bool {
    if let (BanMode::Remove, BanTarget::Url(key)) = (ban.mode, &ban.target) {
        if !crate::record::delete(inner, conn, key).await {
            return false;
        }
    }
    let member = format!("{} {}", inner.node, ban.to_line());
    let set = inner.keys.bans();
    let horizon = unix_ms(system_now()).saturating_sub(unix_ms_of(DEFAULT_HORIZON));
    let mut pipe = redis::pipe();
    pipe.cmd("ZADD")
        .arg(&set)
        .arg(ban.at_ms)
        .arg(&member)
        .ignore()
        .cmd("ZREMRANGEBYSCORE")
        .arg(&set)
        .arg("-inf")
        .arg(format!("({horizon}"))
        .ignore()
        .cmd("ZREMRANGEBYRANK")
        .arg(&set)
        .arg(0)
        .arg(-(MAX_BANS as i64) - 1)
        .ignore();
    if inner.run(pipe.exec_async(&mut *conn)).await.is_none() {
        return false;
    }
    // Published on its own: in a Cluster the channel's slot is not the set's, and a
    // pipeline must stay within one slot.
    let mut publish = redis::cmd("PUBLISH");
    publish.arg(inner.keys.channel()).arg(&member);
    inner.run(publish.exec_async(conn)).await.is_some()
}

fn unix_ms_of(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A message from the channel.
pub(crate) fn received(inner: &Inner, payload: &[u8]) {
    match std::str::from_utf8(payload) {
        Ok(member) => accept(inner, member),
        Err(_) => tracing::debug!(redis = %inner.shown, "ignored a ban message that is not text"),
    }
}

/// One ban of `node line` form, from the channel or the set: applied and passed on
/// unless it is this node's own or was seen before.
fn accept(inner: &Inner, member: &str) {
    let Some((node, line)) = member.split_once(' ') else {
        return;
    };
    if node == inner.node {
        return;
    }
    let Some(ban) = Ban::from_line(line) else {
        tracing::debug!(redis = %inner.shown, member, "ignored a ban that is not one");
        return;
    };
    match inner.sync.lock() {
        Ok(mut sync) => {
            if sync.seen.len() >= 2 * MAX_BANS {
                // A flood (anyone who can reach Redis can publish): forgetting costs at
                // most one more call of on_ban for a ban read again, which is harmless.
                sync.seen.clear();
            }
            if sync.seen.insert(member.to_string(), ban.at_ms).is_some() {
                return;
            }
        }
        Err(_) => return,
    }
    inner.bans.add(ban.clone());
    inner.stats.ban_received();
    (inner.on_ban)(ban);
}

/// Reads the recent bans kept in Redis (the newest `MAX_BANS`, within the horizon)
/// and applies those not seen yet. False if Redis failed.
pub(crate) async fn load(inner: &Inner, conn: &mut Conn) -> bool {
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(inner.keys.bans()).arg(-(MAX_BANS as i64)).arg(-1);
    let range = cmd.query_async::<Vec<Vec<u8>>>(conn);
    let Some(members) = inner.run(range).await else {
        return false;
    };
    let horizon = unix_ms(system_now()).saturating_sub(unix_ms_of(DEFAULT_HORIZON));
    for member in members {
        let Ok(member) = std::str::from_utf8(&member) else {
            continue;
        };
        let recent = member
            .split_once(' ')
            .and_then(|(_, line)| line.split(' ').next())
            .and_then(|at| at.parse::<u64>().ok())
            .is_some_and(|at| at >= horizon);
        if recent {
            accept(inner, member);
        }
    }
    true
}

/// Forgets bans older than the horizon: no record written before them is kept.
pub(crate) fn trim(inner: &Inner) {
    let now = system_now();
    let horizon = now.checked_sub(DEFAULT_HORIZON).unwrap_or(now);
    inner.bans.forget_before(horizon);
    let h = unix_ms(horizon);
    if let Ok(mut sync) = inner.sync.lock() {
        sync.seen.retain(|_, at| *at >= h);
    }
}

/// Whether bans wait to be written.
pub(crate) fn pending(inner: &Inner) -> bool {
    inner.sync.lock().is_ok_and(|s| !s.pending.is_empty())
}

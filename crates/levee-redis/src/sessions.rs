//! Proven sessions across nodes (levee-proxy's request/proven.rs decides what is
//! proven): an editor who logged in through one node keeps priority on every other.
//! A change made on a node is queued here, then written by the supervisor: kept in
//! `P sessions` (a sorted set of hashes by the time they were last proven, trimmed to
//! the idle lifetime and a capacity) and published on `P proofs` as `node line`
//! (`ProofChange::to_line`). Every other node hears it, skips its own, and calls
//! `on_proof`. A node that (re)connects reads the set and calls `on_proof` for each
//! hash in it; changes made while Redis was down wait in a bounded queue.
//!
//! Redis is untrusted: anyone who can write to it can make a session value count as a
//! person's on every node (only for the backend's scheduling: what a request may be
//! served is never decided from it).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::conn::Conn;
use levee_cache::proof::ProofChange;

use crate::inner::{Inner, ProofLimits};

/// Changes queued while Redis is down, at most.
const MAX_PENDING: usize = 10_000;

pub(crate) fn queue(inner: &Inner, change: ProofChange) {
    let Some(p) = &inner.proofs else { return };
    if let Ok(mut pending) = p.pending.lock() {
        if pending.len() >= MAX_PENDING {
            pending.pop_front();
            inner.stats.write_dropped();
        }
        pending.push_back(change);
    }
    inner.flush.notify_one();
}

/// Writes the queued changes, oldest first. False if Redis failed (the rest stay).
pub(crate) async fn flush(inner: &Inner, conn: &mut Conn) -> bool {
    let Some(p) = &inner.proofs else { return true };
    loop {
        let next = p.pending.lock().ok().and_then(|q| q.front().copied());
        let Some(change) = next else { return true };
        if !write(inner, p.limits, conn, change).await {
            return false;
        }
        if let Ok(mut q) = p.pending.lock() {
            if q.front() == Some(&change) {
                q.pop_front();
            }
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn write(inner: &Inner, limits: ProofLimits, conn: &mut Conn, change: ProofChange) -> bool {
    let set = inner.keys.sessions();
    let member = format!("{:032x}", change.hash());
    let mut pipe = redis::pipe();
    match change {
        ProofChange::Proven { at, .. } => pipe.cmd("ZADD").arg(&set).arg(at).arg(&member),
        ProofChange::Forgotten { .. } => pipe.cmd("ZREM").arg(&set).arg(&member),
    }
    .ignore();
    let horizon = now().saturating_sub(limits.idle_secs);
    pipe.cmd("ZREMRANGEBYSCORE")
        .arg(&set)
        .arg("-inf")
        .arg(format!("({horizon}"))
        .ignore()
        .cmd("ZREMRANGEBYRANK")
        .arg(&set)
        .arg(0)
        .arg(-(limits.capacity as i64) - 1)
        .ignore();
    if inner.run(pipe.exec_async(&mut *conn)).await.is_none() {
        return false;
    }
    // Published on its own: in a Cluster the channel's slot is not the set's, and a
    // pipeline must stay within one slot.
    let mut publish = redis::cmd("PUBLISH");
    publish
        .arg(inner.keys.proofs())
        .arg(format!("{} {}", inner.node, change.to_line()));
    inner.run(publish.exec_async(conn)).await.is_some()
}

/// A message from the proofs channel: applied unless it is this node's own.
pub(crate) fn received(inner: &Inner, payload: &[u8]) {
    let Some(p) = &inner.proofs else { return };
    let Some((node, line)) = std::str::from_utf8(payload)
        .ok()
        .and_then(|m| m.split_once(' '))
    else {
        return;
    };
    if node == inner.node {
        return;
    }
    match ProofChange::from_line(line) {
        Some(change) => (p.on_proof)(change),
        None => tracing::debug!(redis = %inner.shown, "ignored a proofs message that is not one"),
    }
}

/// Reads the proofs kept in Redis (the newest `capacity` within the idle lifetime) and
/// applies each. False if Redis failed.
pub(crate) async fn load(inner: &Inner, conn: &mut Conn) -> bool {
    let Some(p) = &inner.proofs else { return true };
    let horizon = now().saturating_sub(p.limits.idle_secs);
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(inner.keys.sessions())
        .arg(-(p.limits.capacity as i64))
        .arg(-1)
        .arg("WITHSCORES");
    // Read loosely (bytes, a float): a stranger's member must not fail the whole read.
    let Some(members) = inner
        .run(cmd.query_async::<Vec<(Vec<u8>, f64)>>(conn))
        .await
    else {
        return false;
    };
    for (hex, at) in members {
        let at = at.max(0.0) as u64;
        let change = std::str::from_utf8(&hex)
            .ok()
            .and_then(|hex| ProofChange::from_line(&format!("+{hex} {at}")));
        if let (Some(change), true) = (change, at >= horizon) {
            (p.on_proof)(change);
        }
    }
    true
}

/// Whether changes wait to be written.
pub(crate) fn pending(inner: &Inner) -> bool {
    inner
        .proofs
        .as_ref()
        .is_some_and(|p| p.pending.lock().is_ok_and(|q| !q.is_empty()))
}

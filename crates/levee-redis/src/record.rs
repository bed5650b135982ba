//! Records in Redis: read (reassembled from chunks, checked, expired and banned ones
//! refused), written (chunks first, then the head, all with the record's TTL), deleted.
//!
//! A record up to [`CHUNK`] bytes is the value of `P o:{H}` itself. A larger one is cut
//! into chunks `P o:{H}:G:I` of one random generation `G`, written first, and `P o:{H}`
//! becomes a small [`Head`] naming them: a reader never sees a head whose chunks are
//! not all there (unless they expired or were deleted: then the read is a miss), and a
//! writer replacing a record deletes the chunks of the one it replaced. The record's
//! checksum covers the whole, so chunks of two writes can never be mixed unnoticed.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::conn::Conn;
use bytes::{Bytes, BytesMut};
use levee_cache::ban::DEFAULT_HORIZON;
use levee_cache::clock::system_now;
use levee_cache::codec::{self, Decoded};
use levee_cache::{CacheKey, Entry};

use crate::inner::Inner;
use crate::keys::{self, Head, Keys, CHUNK, HEAD_MAGIC};

/// Sets the head (or small record) and returns the head it replaced if that one named
/// chunks, in one step, so that the replaced chunks can be deleted.
static REPLACE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "local old = redis.call('GET', KEYS[1])
         redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
         if old and string.sub(old, 1, 4) == 'LVRC' then return old end
         return false",
    )
});

/// Deletes the head (or small record) and returns it if it named chunks.
static DELETE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "local old = redis.call('GET', KEYS[1])
         redis.call('DEL', KEYS[1])
         if old and string.sub(old, 1, 4) == 'LVRC' then return old end
         return false",
    )
});

pub(crate) async fn get(inner: &Inner, key: &CacheKey) -> Option<Decoded> {
    let Some(mut conn) = inner.conn() else {
        // Down: nothing to wait for.
        inner.stats.error();
        return None;
    };
    let name = inner.keys.record(key);
    let bytes = match tokio::time::timeout(inner.cfg.op_timeout, read(&mut conn, &name)).await {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => {
            inner.stats.miss();
            return None;
        }
        Ok(Err(Failed::Redis(e))) => {
            inner.failed(&e);
            return None;
        }
        Ok(Err(Failed::Invalid(why))) => {
            inner.stats.error();
            tracing::warn!(redis = %inner.shown, key = %name, why, "invalid record in Redis; ignored");
            return None;
        }
        Err(_) => {
            inner.stats.error();
            return None;
        }
    };
    let mut record = match codec::decode(bytes) {
        Ok(r) => r,
        Err(e) => {
            inner.stats.error();
            tracing::warn!(redis = %inner.shown, key = %name, error = %e, "invalid record in Redis; ignored");
            return None;
        }
    };
    if record.key != *key {
        // Another key's record under this hash: forged, or a collision.
        inner.stats.error();
        tracing::warn!(redis = %inner.shown, key = %name, "record of another key in Redis; ignored");
        return None;
    }
    if record.keep_until <= system_now() || !inner.bans.apply(&mut record) {
        inner.stats.miss();
        return None;
    }
    inner.stats.hit();
    Some(record)
}

/// Why a read found no record.
enum Failed {
    Redis(redis::RedisError),
    /// The head is not one levee wrote, or a chunk is the wrong size.
    Invalid(&'static str),
}

impl From<redis::RedisError> for Failed {
    fn from(e: redis::RedisError) -> Failed {
        Failed::Redis(e)
    }
}

/// The record's bytes: the value itself, or its chunks reassembled. None when there is
/// no record, or a chunk is missing (expired, deleted, replaced meanwhile).
async fn read(conn: &mut Conn, name: &str) -> Result<Option<Bytes>, Failed> {
    let value: Option<Vec<u8>> = redis::cmd("GET").arg(name).query_async(conn).await?;
    let Some(value) = value else {
        return Ok(None);
    };
    if !value.starts_with(HEAD_MAGIC) {
        return Ok(Some(Bytes::from(value)));
    }
    let head = Head::parse(&value).ok_or(Failed::Invalid("chunk head"))?;
    let mut mget = redis::cmd("MGET");
    for i in 0..head.count {
        mget.arg(Keys::chunk(name, head.generation, i));
    }
    let chunks: Vec<Option<Vec<u8>>> = mget.query_async(conn).await?;
    if chunks.len() != head.count as usize {
        return Err(Failed::Invalid("chunk count"));
    }
    let mut total = 0;
    for (i, chunk) in (0..head.count).zip(&chunks) {
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        if chunk.len() != head.chunk_len(i) {
            return Err(Failed::Invalid("chunk length"));
        }
        total += chunk.len();
    }
    // Sized by what arrived, not by what the (untrusted) head claims.
    let mut whole = BytesMut::with_capacity(total);
    for chunk in chunks.iter().flatten() {
        whole.extend_from_slice(chunk);
    }
    Ok(Some(whole.freeze()))
}

pub(crate) fn put(inner: &Arc<Inner>, key: &CacheKey, variants: &[Arc<Entry>]) {
    if !inner.is_up() {
        inner.stats.write_dropped();
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        inner.stats.write_dropped();
        return;
    };
    let Ok(permit) = inner.writes.clone().try_acquire_owned() else {
        inner.stats.write_dropped();
        return;
    };
    let (inner, key, variants) = (inner.clone(), key.clone(), variants.to_vec());
    runtime.spawn(async move {
        write(&inner, &key, &variants).await;
        drop(permit);
    });
}

pub(crate) async fn put_now(inner: &Inner, key: &CacheKey, variants: &[Arc<Entry>]) {
    if !inner.is_up() {
        inner.stats.write_dropped();
        return;
    }
    write(inner, key, variants).await;
}

/// How long Redis keeps a record of `variants`: until the last of them is no longer
/// worth keeping (freshness plus stale window), at most the ban horizon, past which a
/// purge made meanwhile could be forgotten. None when not worth storing at all.
fn ttl(variants: &[Arc<Entry>]) -> Option<Duration> {
    let keep = codec::keep_until(variants)
        .duration_since(system_now())
        .ok()?
        .min(DEFAULT_HORIZON);
    (keep >= Duration::from_millis(1)).then_some(keep)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn write(inner: &Inner, key: &CacheKey, variants: &[Arc<Entry>]) {
    let Some(ttl) = ttl(variants) else {
        return;
    };
    let record = codec::encode(key, variants);
    let Some(mut conn) = inner.conn() else {
        inner.stats.write_dropped();
        return;
    };
    let name = inner.keys.record(key);
    let head = if record.len() <= CHUNK {
        record
    } else {
        let head = Head::for_len(record.len(), keys::random());
        // Chunks outlive their head by a second, so that a reader of the head finds them.
        let chunk_ttl = ms(ttl) + 1000;
        let mut pipe = redis::pipe();
        for (i, chunk) in (0..head.count).zip(record.chunks(CHUNK)) {
            pipe.cmd("SET")
                .arg(Keys::chunk(&name, head.generation, i))
                .arg(chunk)
                .arg("PX")
                .arg(chunk_ttl)
                .ignore();
        }
        if inner.run(pipe.exec_async(&mut conn)).await.is_none() {
            return;
        }
        head.to_bytes()
    };
    let mut replace = REPLACE.prepare_invoke();
    replace.key(&name).arg(head).arg(ms(ttl));
    let replace = replace.invoke_async(&mut conn);
    let Some(replaced) = inner.run(replace).await else {
        return;
    };
    inner.stats.write();
    let replaced: Option<Vec<u8>> = replaced;
    delete_chunks(inner, &mut conn, &name, replaced).await;
}

/// Deletes the record of `key` and its chunks (a URL purged on this node).
pub(crate) async fn delete(inner: &Inner, conn: &mut Conn, key: &CacheKey) -> bool {
    let name = inner.keys.record(key);
    let mut del = DELETE.prepare_invoke();
    del.key(&name);
    let Some(old) = inner.run(del.invoke_async(conn)).await else {
        return false;
    };
    let old: Option<Vec<u8>> = old;
    delete_chunks(inner, conn, &name, old).await;
    true
}

/// Deletes the chunks a replaced or deleted head named (best effort: they expire anyway).
async fn delete_chunks(inner: &Inner, conn: &mut Conn, name: &str, head: Option<Vec<u8>>) {
    let Some(head) = head.as_deref().and_then(Head::parse) else {
        return;
    };
    let mut del = redis::cmd("UNLINK");
    for i in 0..head.count {
        del.arg(Keys::chunk(name, head.generation, i));
    }
    let _: Option<()> = inner.run(del.exec_async(conn)).await;
}

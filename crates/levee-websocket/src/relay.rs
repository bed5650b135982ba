//! One WebSocket's two byte streams relayed as they come, each write as soon as its
//! read, both directions at once (a direction that waits on its writer never holds the
//! other up), until a side closes, the connection idles past its timeout, or levee
//! stops: then a Close frame `1001 Going Away` goes to both sides, between frames.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::frames::{close_from_client, close_from_server, Boundaries, GOING_AWAY};

/// Bytes read at once from either side.
const CHUNK: usize = 16 * 1024;
/// At a stop, how long a frame in the middle may take to end before the connection is
/// closed without a Close frame.
const FRAME_END: Duration = Duration::from_secs(1);

/// Why a relayed WebSocket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its connection (after its Close frame, or not).
    Client,
    /// The backend closed its connection.
    Backend,
    /// Nothing came either way for the idle timeout.
    Idle,
    /// levee stopped: both sides were sent `1001 Going Away`.
    Stopped,
    /// A read or write failed (a reset connection).
    Error,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Client => "client",
            Ended::Backend => "backend",
            Ended::Idle => "idle",
            Ended::Stopped => "stopped",
            Ended::Error => "error",
        }
    }

    pub const ALL: [Ended; 5] = [
        Ended::Client,
        Ended::Backend,
        Ended::Idle,
        Ended::Stopped,
        Ended::Error,
    ];
}

/// What a relayed WebSocket did, for the access log and the metrics.
#[derive(Debug, Clone, Copy)]
pub struct Closed {
    pub ended: Ended,
    /// Bytes from the client to the backend, and back.
    pub up: u64,
    pub down: u64,
    pub lasted: Duration,
}

/// Relays `client` and `backend` (both past the upgrade) until one ends; `stop`
/// completes when levee is going away. `idle`: how long both may stay silent.
pub async fn relay<C, B>(
    client: C,
    backend: B,
    idle: Duration,
    stop: impl Future<Output = ()>,
    counted: &(dyn Fn(u64, u64) + Sync),
) -> Closed
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut br, mut bw) = tokio::io::split(backend);
    let last = AtomicU64::new(0);
    let (mut up, mut down) = (Boundaries::default(), Boundaries::default());
    let (mut up_bytes, mut down_bytes) = (0u64, 0u64);
    // Raced with the reads only, never with a write: a chunk read is written whole,
    // so the frame boundaries stay true to what each side received.
    let (stopping, stop_rx) = tokio::sync::watch::channel(false);
    let ended = {
        let up_pump = pump(
            &mut cr,
            &mut bw,
            &mut up,
            &mut up_bytes,
            &last,
            started,
            counted,
            true,
            stop_rx.clone(),
        );
        let down_pump = pump(
            &mut br,
            &mut cw,
            &mut down,
            &mut down_bytes,
            &last,
            started,
            counted,
            false,
            stop_rx,
        );
        tokio::pin!(up_pump, down_pump);
        let idle_watch = async {
            loop {
                let since = Duration::from_millis(last.load(Ordering::Relaxed));
                let quiet = started.elapsed().saturating_sub(since);
                if quiet >= idle {
                    return;
                }
                tokio::time::sleep(idle - quiet).await;
            }
        };
        tokio::select! {
            r = &mut up_pump => match r {
                Ok(()) => Ended::Client,
                Err(()) => Ended::Error,
            },
            r = &mut down_pump => match r {
                Ok(()) => Ended::Backend,
                Err(()) => Ended::Error,
            },
            _ = idle_watch => Ended::Idle,
            _ = stop => {
                let _ = stopping.send(true);
                let _ = tokio::time::timeout(FRAME_END, async {
                    let _ = (&mut up_pump).await;
                    let _ = (&mut down_pump).await;
                })
                .await;
                Ended::Stopped
            }
        }
    };
    if ended == Ended::Stopped {
        // Each direction ends its frame in the middle, if any, then gets the Close.
        let key = mask_key();
        let ends = async {
            let a = finish_frame(&mut cr, &mut bw, &mut up, &mut up_bytes).await;
            let b = finish_frame(&mut br, &mut cw, &mut down, &mut down_bytes).await;
            if a {
                let _ = bw.write_all(&close_from_client(GOING_AWAY, key)).await;
            }
            if b {
                let _ = cw.write_all(&close_from_server(GOING_AWAY)).await;
            }
        };
        let _ = tokio::time::timeout(FRAME_END * 2, ends).await;
    }
    let _ = tokio::time::timeout(FRAME_END, async {
        let _ = cw.shutdown().await;
        let _ = bw.shutdown().await;
    })
    .await;
    Closed {
        ended,
        up: up_bytes,
        down: down_bytes,
        lasted: started.elapsed(),
    }
}

/// One direction: every read written on at once. `Ok` when the reader ends or levee
/// stops (between two reads).
#[allow(clippy::too_many_arguments)]
async fn pump<R, W>(
    r: &mut R,
    w: &mut W,
    frames: &mut Boundaries,
    bytes: &mut u64,
    last: &AtomicU64,
    started: Instant,
    counted: &(dyn Fn(u64, u64) + Sync),
    up: bool,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), ()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return Ok(()),
            n = r.read(&mut buf) => n.map_err(|_| ())?,
        };
        if n == 0 {
            return Ok(());
        }
        frames.feed(&buf[..n], false);
        w.write_all(&buf[..n]).await.map_err(|_| ())?;
        *bytes += n as u64;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        last.store(ms, Ordering::Relaxed);
        match up {
            true => counted(n as u64, 0),
            false => counted(0, n as u64),
        }
    }
}

/// Relays the rest of a frame in the middle, if any: whether the stream is now between
/// frames (a Close may follow).
async fn finish_frame<R, W>(r: &mut R, w: &mut W, frames: &mut Boundaries, bytes: &mut u64) -> bool
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    let work = async {
        while !frames.at_boundary() {
            let n = match r.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            // Only up to the frame's end: what follows is dropped with the connection.
            let take = frames.feed(&buf[..n], true);
            if w.write_all(&buf[..take]).await.is_err() {
                return false;
            }
            *bytes += take as u64;
        }
        true
    };
    tokio::time::timeout(FRAME_END, work).await.unwrap_or(false)
}

/// A masking key for levee's own Close frame to the backend.
fn mask_key() -> [u8; 4] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    let n = h.finish();
    let b = n.to_le_bytes();
    [b[0], b[1], b[2], b[3]]
}

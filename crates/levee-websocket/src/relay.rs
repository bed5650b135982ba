//! One WebSocket's two byte streams relayed as they come: each chunk read is written on
//! whole before the next read of that direction, both directions polled by one future
//! (as tokio's `copy_bidirectional`, so that a direction waiting on its writer never
//! holds the other up), until a side closes, the connection idles past its timeout, or
//! levee stops: then each side is sent a Close frame `1001 Going Away`, between frames.
//!
//! Written out rather than `copy_bidirectional` around wrappers because a stop needs the
//! copy's own state: the bytes read but not yet written, and where the frame in the
//! middle ends, so that the Close frame follows the last whole frame.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::frames::{close_from_client, close_from_server, unpredictable, Boundaries, GOING_AWAY};

/// Bytes read at once from either side.
const CHUNK: usize = 16 * 1024;
/// Bytes relayed before the counters are told (and at the end).
const COUNT_EVERY: u64 = 256 * 1024;
/// At a stop, how long the frames in the middle may take to end and the Close frames to
/// go out, before the connections are closed as they are.
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

    /// For the access log: what ended it.
    pub fn describe(self) -> &'static str {
        match self {
            Ended::Client => "the client closed it",
            Ended::Backend => "the backend closed it",
            Ended::Idle => "idle past websocket_idle_timeout",
            Ended::Stopped => "levee stopped (1001 Going Away)",
            Ended::Error => "a connection failed",
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

/// One direction's copy.
struct Pump {
    buf: Box<[u8]>,
    pos: usize,
    cap: usize,
    frames: Boundaries,
    bytes: u64,
    uncounted: u64,
    /// The reader ended (or, stopping, the stream reached a frame boundary).
    read_done: bool,
    /// Stopping: read only to the end of the frame in the middle, then `close`.
    stopping: bool,
    /// The Close frame still to write once stopping, and how much of it is written.
    close: Option<(Vec<u8>, usize)>,
}

impl Pump {
    fn new() -> Pump {
        Pump {
            buf: vec![0u8; CHUNK].into_boxed_slice(),
            pos: 0,
            cap: 0,
            frames: Boundaries::default(),
            bytes: 0,
            uncounted: 0,
            read_done: false,
            stopping: false,
            close: None,
        }
    }

    fn stop(&mut self, close: Vec<u8>) {
        self.stopping = true;
        self.close = Some((close, 0));
    }

    /// Copies until the reader ends: `Ready(Ok)` then (writer flushed; when stopping,
    /// the Close frame written after the last whole frame). `active` is set when bytes
    /// moved.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut r: Pin<&mut R>,
        mut w: Pin<&mut W>,
        active: &mut bool,
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            if self.pos == self.cap && !self.read_done {
                if self.stopping && self.frames.at_boundary() {
                    self.read_done = true;
                    continue;
                }
                let mut rb = ReadBuf::new(&mut self.buf);
                ready!(r.as_mut().poll_read(cx, &mut rb))?;
                let n = rb.filled().len();
                if n == 0 {
                    self.read_done = true;
                } else {
                    // Stopping: what follows the frame in the middle is dropped with the
                    // connection.
                    let take = self.frames.feed(&self.buf[..n], self.stopping);
                    self.pos = 0;
                    self.cap = if self.stopping { take } else { n };
                    *active = true;
                }
            }
            while self.pos < self.cap {
                let n = ready!(w.as_mut().poll_write(cx, &self.buf[self.pos..self.cap]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.pos += n;
                self.bytes += n as u64;
                self.uncounted += n as u64;
            }
            if self.read_done {
                if let (true, Some((frame, at))) = (self.frames.at_boundary(), &mut self.close) {
                    while *at < frame.len() {
                        let n = ready!(w.as_mut().poll_write(cx, &frame[*at..]))?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        *at += n;
                    }
                }
                ready!(w.as_mut().poll_flush(cx))?;
                return Poll::Ready(Ok(()));
            }
            // Written whole: flushed before the next read (TLS keeps records otherwise).
            ready!(w.as_mut().poll_flush(cx))?;
        }
    }
}

/// Relays `client` and `backend` (both past the upgrade) until one ends; `stop`
/// completes when levee is going away. `idle`: how long both may stay silent.
/// `counted(up, down)` is told the bytes relayed as they add up.
pub async fn relay<C, B>(
    mut client: C,
    mut backend: B,
    idle: Duration,
    stop: impl Future<Output = ()>,
    counted: &(dyn Fn(u64, u64) + Sync),
) -> Closed
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let (mut up, mut down) = (Pump::new(), Pump::new());
    let (mut up_done, mut down_done) = (false, false);
    let mut stop = std::pin::pin!(stop);
    let mut stopping: Option<Pin<Box<tokio::time::Sleep>>> = None;
    let mut last = Instant::now();
    let mut idle_timer = Box::pin(tokio::time::sleep(idle));
    let ended = std::future::poll_fn(|cx| {
        if stopping.is_none() && stop.as_mut().poll(cx).is_ready() {
            up.stop(
                close_from_client(GOING_AWAY, {
                    let k = unpredictable();
                    [k[0], k[1], k[2], k[3]]
                })
                .to_vec(),
            );
            down.stop(close_from_server(GOING_AWAY).to_vec());
            stopping = Some(Box::pin(tokio::time::sleep(FRAME_END)));
        }
        let mut active = false;
        if !up_done {
            match up.poll_copy(
                cx,
                Pin::new(&mut client),
                Pin::new(&mut backend),
                &mut active,
            ) {
                Poll::Ready(Ok(())) if stopping.is_some() => up_done = true,
                Poll::Ready(Ok(())) => return Poll::Ready(Ended::Client),
                Poll::Ready(Err(_)) => return Poll::Ready(Ended::Error),
                Poll::Pending => {}
            }
        }
        if !down_done {
            match down.poll_copy(
                cx,
                Pin::new(&mut backend),
                Pin::new(&mut client),
                &mut active,
            ) {
                Poll::Ready(Ok(())) if stopping.is_some() => down_done = true,
                Poll::Ready(Ok(())) => return Poll::Ready(Ended::Backend),
                Poll::Ready(Err(_)) => return Poll::Ready(Ended::Error),
                Poll::Pending => {}
            }
        }
        if up.uncounted + down.uncounted >= COUNT_EVERY {
            counted(up.uncounted, down.uncounted);
            (up.uncounted, down.uncounted) = (0, 0);
        }
        if let Some(deadline) = &mut stopping {
            if (up_done && down_done) || deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ended::Stopped);
            }
            return Poll::Pending;
        }
        // Idle: the timer is moved only when it fires, not at every chunk.
        if active {
            last = Instant::now();
        }
        while idle_timer.as_mut().poll(cx).is_ready() {
            let quiet = last.elapsed();
            if quiet >= idle {
                return Poll::Ready(Ended::Idle);
            }
            let at = tokio::time::Instant::now() + (idle - quiet);
            idle_timer.as_mut().reset(at);
        }
        Poll::Pending
    })
    .await;
    counted(up.uncounted, down.uncounted);
    let _ = tokio::time::timeout(FRAME_END, async {
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut client).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut backend).await;
    })
    .await;
    Closed {
        ended,
        up: up.bytes,
        down: down.bytes,
        lasted: started.elapsed(),
    }
}

//! What a client shares with the bodies of its responses: the configuration, the pool of
//! kept-alive connections to php-fpm (checked out by a request, checked back in by the
//! body that finished with it) and what every try of one request sends. Below both
//! `client` (which sends requests) and `body` (which reads their answers).

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::conn::{Address, Stream};
use crate::error::Error;

/// How a [`Client`](crate::client::Client) treats php-fpm. Every wait is bounded by one of these.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long opening a connection may take. Default: 5 s.
    pub connect_timeout: Duration,
    /// Once the request has been sent, how long php-fpm may stay silent: before the
    /// response head and between two reads of the body (nginx's `fastcgi_read_timeout`).
    /// Default: 60 s.
    pub read_timeout: Duration,
    /// How long one write of the request may wait for php-fpm to read
    /// (nginx's `fastcgi_send_timeout`). Default: 60 s.
    pub write_timeout: Duration,
    /// How many idle connections are kept for reuse; 0 closes each connection after its
    /// request (php-fpm is then asked to close it, as nginx does by default).
    ///
    /// A php-fpm worker stays attached to a kept-alive connection until it is closed, so
    /// keep this below the pool's `pm.max_children`: the workers not held by idle
    /// connections are what other clients of the pool get. Default: 4.
    pub max_idle: usize,
    /// An idle connection older than this is closed, which frees its php-fpm worker for
    /// the pool's other clients (cron, nginx, a second levee). Short, because an idle
    /// connection holds a whole php-fpm process, while a busy site reuses a connection
    /// within milliseconds and a quiet one loses only a connect (some 30 µs on a Unix
    /// socket) per request. Default: 2 s.
    pub idle_timeout: Duration,
    /// The largest request body of unknown length (`Transfer-Encoding: chunked`, no
    /// `Content-Length`) that is read into memory before it is sent: php reads exactly
    /// `CONTENT_LENGTH` bytes of the body, so its length must be known first (nginx
    /// buffers such bodies too). A larger one fails the request with
    /// [`Error::BodyTooLarge`]. Default: 64 MiB.
    pub max_unsized_body: u64,
    /// The caller never has more requests in flight than the pool has workers (levee's
    /// limit is `pm.max_children`): no connection ever waits in php-fpm's listen
    /// backlog, so a kept-alive connection is never closed to make room for a new one.
    /// Default: false.
    pub within_pool_size: bool,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            max_idle: 4,
            idle_timeout: Duration::from_secs(2),
            max_unsized_body: 64 * 1024 * 1024,
            within_pool_size: false,
        }
    }
}

/// What a [`Client`](crate::client::Client)'s clones and the bodies of its responses
/// share: php-fpm's address, the configuration, the kept-alive connections, counters.
pub(crate) struct Inner {
    pub(crate) addr: Address,
    /// `addr` as text, for errors and logs.
    pub(crate) name: String,
    pub(crate) config: ClientConfig,
    idle: Mutex<Idle>,
    /// New connections that have not received a byte yet. php-fpm may not have accepted
    /// them: its workers may all be attached to kept-alive connections.
    waiting: AtomicUsize,
    pub(crate) connects: AtomicU64,
    pub(crate) reused: AtomicU64,
    pub(crate) retries: AtomicU64,
}

struct IdleConn {
    stream: Stream,
    since: Instant,
    /// The thread whose runtime watches the socket (see [`Inner::checkout`]).
    home: std::thread::ThreadId,
}

#[derive(Default)]
struct Idle {
    /// Oldest first; reuse takes the newest, so that unneeded connections age out.
    conns: Vec<IdleConn>,
    reaper: bool,
}

/// What every try of one request sends.
pub(crate) struct Req {
    pub(crate) head: Bytes,
    pub(crate) declared_len: u64,
    pub(crate) script: Arc<str>,
}

impl Inner {
    pub(crate) fn new(addr: Address, config: ClientConfig) -> Inner {
        Inner {
            name: addr.to_string(),
            addr,
            config,
            idle: Mutex::new(Idle::default()),
            waiting: AtomicUsize::new(0),
            connects: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            retries: AtomicU64::new(0),
        }
    }

    /// Connections idle in the pool now.
    pub(crate) fn idle_count(&self) -> usize {
        self.lock_idle().conns.len()
    }

    fn lock_idle(&self) -> MutexGuard<'_, Idle> {
        // A panic elsewhere while holding the lock leaves a plain Vec: still consistent.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection if `reuse` and one is usable, else a new one.
    pub(crate) async fn checkout(&self, reuse: bool) -> Result<(Stream, bool), Error> {
        if !reuse {
            // If idle connections hold every php-fpm worker, a new connection would wait in
            // the listen backlog until one expires: closing the oldest frees its worker.
            let oldest = {
                let mut idle = self.lock_idle();
                (!idle.conns.is_empty()).then(|| idle.conns.remove(0))
            };
            drop(oldest);
            return Ok((self.connect().await?, false));
        }
        let here = std::thread::current().id();
        loop {
            // The newest connection of this thread, else the newest of any. With
            // `levee serve`'s single-threaded workers, a socket is watched by the runtime
            // that registered it, which notices its readiness only between its own tasks:
            // one from another worker is moved to this one first.
            let candidate = {
                let mut idle = self.lock_idle();
                let at = idle
                    .conns
                    .iter()
                    .rposition(|c| c.home == here)
                    .or(idle.conns.len().checked_sub(1));
                at.map(|i| idle.conns.remove(i))
            };
            let Some(c) = candidate else {
                break;
            };
            if c.since.elapsed() < self.config.idle_timeout && c.stream.is_reusable() {
                let stream = if c.home == here || !single_threaded_runtime() {
                    c.stream
                } else {
                    match c.stream.rehome() {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::debug!(php = %self.name, error = %e, "cannot move an idle connection");
                            continue;
                        }
                    }
                };
                self.reused.fetch_add(1, Ordering::Relaxed);
                return Ok((stream, true));
            }
            tracing::debug!(php = %self.name, "dropping a closed or expired idle connection");
        }
        Ok((self.connect().await?, false))
    }

    pub(crate) async fn connect(&self) -> Result<Stream, Error> {
        let after = self.config.connect_timeout;
        match tokio::time::timeout(after, Stream::connect(&self.addr)).await {
            Ok(Ok(s)) => {
                self.connects.fetch_add(1, Ordering::Relaxed);
                Ok(s)
            }
            Ok(Err(source)) => Err(Error::Connect {
                addr: self.name.clone(),
                source,
            }),
            Err(_) => Err(Error::ConnectTimeout {
                addr: self.name.clone(),
                after,
            }),
        }
    }

    /// Takes back a connection whose request completed cleanly.
    pub(crate) fn checkin(self: &Arc<Inner>, stream: Stream) {
        if !self.config.within_pool_size && self.waiting.load(Ordering::SeqCst) > 0 {
            // A new connection may be queued in php-fpm's listen backlog because every
            // worker sits on a kept-alive connection; closing this one frees its worker.
            tracing::debug!(php = %self.name, "closing a kept-alive connection for a waiting one");
            return;
        }
        let now = Instant::now();
        let mut idle = self.lock_idle();
        let timeout = self.config.idle_timeout;
        idle.conns.retain(|c| now.duration_since(c.since) < timeout);
        if idle.conns.len() >= self.config.max_idle {
            return;
        }
        idle.conns.push(IdleConn {
            stream,
            since: now,
            home: std::thread::current().id(),
        });
        if !idle.reaper {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                idle.reaper = true;
                rt.spawn(reap(Arc::downgrade(self)));
            }
        }
    }

    pub(crate) fn io_error(&self, during: &'static str, source: io::Error) -> Error {
        Error::Io {
            addr: self.name.clone(),
            during,
            source,
        }
    }

    pub(crate) fn timeout(&self, during: &'static str, after: Duration) -> Error {
        Error::Timeout {
            addr: self.name.clone(),
            during,
            after,
        }
    }

    pub(crate) fn protocol(&self, message: String) -> Error {
        Error::Protocol {
            addr: self.name.clone(),
            message,
        }
    }
}

/// Whether the caller runs on a current-thread runtime, whose sockets only it watches.
fn single_threaded_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

/// Closes idle connections once they expire, so that they do not hold php-fpm workers
/// while levee is quiet; ends when the pool is empty or the client is gone.
async fn reap(pool: Weak<Inner>) {
    loop {
        let wait = {
            let Some(inner) = pool.upgrade() else { return };
            let now = Instant::now();
            let timeout = inner.config.idle_timeout;
            let mut idle = inner.lock_idle();
            idle.conns.retain(|c| now.duration_since(c.since) < timeout);
            match idle.conns.first() {
                Some(oldest) => (oldest.since + timeout).saturating_duration_since(now),
                None => {
                    idle.reaper = false;
                    return;
                }
            }
        };
        tokio::time::sleep(wait + Duration::from_millis(10)).await;
    }
}

/// Counts a new connection in [`Inner::waiting`] until its first byte arrives.
pub(crate) struct WaitingGuard(Arc<Inner>);

impl WaitingGuard {
    pub(crate) fn new(inner: Arc<Inner>) -> WaitingGuard {
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        WaitingGuard(inner)
    }
}

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

//! The client: a pool of kept-alive connections to one php-fpm address, and the sending of
//! one request with its retry rule.

use std::fmt;
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::Body;
use http_body_util::{BodyExt, Either, Full};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::body::{Event, Exchange, ResponseBody, Writer};
use crate::conn::{Address, Stream};
use crate::error::{BoxError, Error};
use crate::head;
use crate::params::Params;
use crate::record::{self, ProtocolStatus};

/// How a [`Client`] treats php-fpm. Every wait is bounded by one of these.
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

/// Counters of a [`Client`]'s connections, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections opened.
    pub connects: u64,
    /// Requests sent on a kept-alive connection.
    pub reused: u64,
    /// Requests sent a second time, on a new connection, after a kept-alive one turned out
    /// to be closed.
    pub retries: u64,
    /// Connections idle in the pool now.
    pub idle: usize,
}

/// A FastCGI client for one php-fpm address. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) addr: Address,
    /// `addr` as text, for errors and logs.
    pub(crate) name: String,
    pub(crate) config: ClientConfig,
    idle: Mutex<Idle>,
    /// New connections that have not received a byte yet. php-fpm may not have accepted
    /// them: its workers may all be attached to kept-alive connections.
    waiting: AtomicUsize,
    connects: AtomicU64,
    reused: AtomicU64,
    retries: AtomicU64,
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

impl Client {
    /// A client for php-fpm at `addr`. Connects lazily, on the first request.
    pub fn new(addr: Address, config: ClientConfig) -> Client {
        Client {
            inner: Arc::new(Inner {
                name: addr.to_string(),
                addr,
                config,
                idle: Mutex::new(Idle::default()),
                waiting: AtomicUsize::new(0),
                connects: AtomicU64::new(0),
                reused: AtomicU64::new(0),
                retries: AtomicU64::new(0),
            }),
        }
    }

    pub fn address(&self) -> &Address {
        &self.inner.addr
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    pub fn stats(&self) -> PoolStats {
        let i = &self.inner;
        PoolStats {
            connects: i.connects.load(Ordering::Relaxed),
            reused: i.reused.load(Ordering::Relaxed),
            retries: i.retries.load(Ordering::Relaxed),
            idle: i.lock_idle().conns.len(),
        }
    }

    /// Sends one request: `params` (the CGI variables, see [`Params::cgi`]), then `body`
    /// streamed as FCGI_STDIN while the response is read, so neither a large upload nor a
    /// large response is held in memory and neither side can block the other. Resolves
    /// when the response head has been parsed; the body streams after it.
    ///
    /// php only reads as much of the body as `CONTENT_LENGTH` says. If `params` has none
    /// and the body knows its exact length, `CONTENT_LENGTH` is added; a body of unknown
    /// length (chunked) is first read whole, up to
    /// [`max_unsized_body`](ClientConfig::max_unsized_body), to learn it.
    ///
    /// Kept-alive connections and retries: php-fpm closes a kept-alive connection without
    /// notice (a worker exiting after `pm.max_requests`, reaped, or restarted), and when a
    /// request sent on it gets no answer, whether the worker died running the script or had
    /// closed the connection before reading it is not knowable. So:
    /// - an idle connection is checked (one non-blocking read) before it is reused;
    /// - a request that is safe to send twice (GET, HEAD, OPTIONS, TRACE, PUT, DELETE
    ///   without a body) uses a kept-alive connection, and is sent once more on a new
    ///   connection if that one fails before any byte of the answer;
    /// - any other request (POST, or a body that cannot be replayed since it is streamed)
    ///   uses a new connection, so it never meets a stale one, and is never sent twice.
    pub async fn request<B>(
        &self,
        mut params: Params,
        body: B,
    ) -> Result<Response<ResponseBody>, Error>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut empty_body = body.is_end_stream();
        let body = if params.get("CONTENT_LENGTH").is_some() || empty_body {
            Either::Left(body)
        } else if let Some(n) = body.size_hint().exact() {
            if n > 0 {
                params.push("CONTENT_LENGTH", n.to_string());
            }
            Either::Left(body)
        } else {
            // Without CONTENT_LENGTH php would read none of it.
            let data = self.read_unsized(body).await?;
            params.push("CONTENT_LENGTH", data.len().to_string());
            empty_body = data.is_empty();
            Either::Right(Full::new(data))
        };
        let declared_len = params
            .get("CONTENT_LENGTH")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let keep_conn = self.inner.config.max_idle > 0;
        let head = record::encode_request_head(&params, keep_conn, empty_body)
            .map_err(|message| Error::Request { message })?;
        let idempotent = matches!(
            params.get("REQUEST_METHOD"),
            Some(b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE")
        );
        let script: Arc<str> = params
            .get("SCRIPT_FILENAME")
            .map(|s| String::from_utf8_lossy(s).into())
            .unwrap_or_else(|| "-".into());
        let req = Req {
            head,
            declared_len,
            script,
        };
        let mut body = (!empty_body).then_some(body);
        let resendable = idempotent && empty_body;

        let (stream, reused) = self.inner.checkout(resendable).await?;
        let failure = match self.attempt(stream, reused, &req, &mut body).await {
            Ok(resp) => return Ok(resp),
            Err(f) => f,
        };
        if !(reused && resendable && failure.unanswered) {
            return Err(failure.error);
        }
        tracing::debug!(
            php = %self.inner.name,
            error = %failure.error,
            "kept-alive php-fpm connection was closed; sending the request again on a new one"
        );
        self.inner.retries.fetch_add(1, Ordering::Relaxed);
        let stream = self.inner.connect().await?;
        self.attempt(stream, false, &req, &mut body)
            .await
            .map_err(|f| f.error)
    }

    /// Reads a request body of unknown length into memory, at most `max_unsized_body`.
    async fn read_unsized<B>(&self, body: B) -> Result<Bytes, Error>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let limit = self.inner.config.max_unsized_body;
        let mut body = pin!(body);
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Error::Body { source: e.into() })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if (buf.len() + data.len()) as u64 > limit {
                return Err(Error::BodyTooLarge { limit });
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    }

    /// One try on one connection: the head, the body in a task, the response head.
    async fn attempt<B>(
        &self,
        stream: Stream,
        reused: bool,
        req: &Req,
        body: &mut Option<B>,
    ) -> Result<Response<ResponseBody>, Failure>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let inner = &self.inner;
        let waiting = (!reused).then(|| WaitingGuard::new(inner.clone()));
        let (reader, mut writer) = stream.into_split();
        let write_timeout = inner.config.write_timeout;
        match tokio::time::timeout(write_timeout, writer.write_all(&req.head)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Failure {
                    unanswered: is_closed(&e),
                    error: inner.io_error("sending the request", e),
                });
            }
            Err(_) => {
                return Err(Failure {
                    error: inner.timeout("sending the request", write_timeout),
                    unanswered: false,
                })
            }
        }
        let writer = match body.take() {
            None => Writer::Done(writer),
            Some(b) => Writer::spawn(writer, b, write_timeout),
        };
        let mut ex = Exchange::new(inner.clone(), reader, writer, req, waiting);

        let mut head_buf = BytesMut::new();
        loop {
            let event =
                std::future::poll_fn(|cx| ex.poll_event(cx, "waiting for the response head")).await;
            match event {
                Ok(Event::Stdout(data)) => {
                    head_buf.extend_from_slice(&data);
                    let parsed = head::parse(&head_buf).map_err(|m| Failure {
                        error: inner.protocol(m),
                        unanswered: false,
                    })?;
                    if let Some(h) = parsed {
                        let rest = head_buf.split_off(h.len).freeze();
                        let mut resp = Response::new(ResponseBody::new(ex, rest));
                        *resp.status_mut() = h.status;
                        *resp.headers_mut() = h.headers;
                        return Ok(resp);
                    }
                    if head_buf.len() > head::MAX_HEAD {
                        return Err(Failure {
                            error: inner.protocol(format!(
                                "the response headers are larger than {} KiB (or the blank \
                                 line that ends them is missing)",
                                head::MAX_HEAD / 1024
                            )),
                            unanswered: false,
                        });
                    }
                }
                Ok(Event::End(end)) => {
                    let error = match end.protocol_status {
                        ProtocolStatus::Overloaded | ProtocolStatus::CantMpxConn => {
                            Error::Overloaded {
                                addr: inner.name.clone(),
                                status: end.protocol_status.name(),
                            }
                        }
                        ProtocolStatus::RequestComplete => {
                            // The request ended cleanly; only its output was unusable.
                            ex.release();
                            inner.protocol(if head_buf.is_empty() {
                                "the request ended without any output, not even headers".into()
                            } else {
                                "the request ended before the blank line that ends the \
                                 response headers"
                                    .into()
                            })
                        }
                        other => inner.protocol(format!(
                            "the request ended with {} instead of a response",
                            other.name()
                        )),
                    };
                    return Err(Failure {
                        error,
                        unanswered: false,
                    });
                }
                Err(error) => {
                    let unanswered = ex.received() == 0 && is_closed_error(&error);
                    return Err(Failure { error, unanswered });
                }
            }
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.inner.name)
            .field("stats", &self.stats())
            .finish()
    }
}

/// What every try of one request sends.
pub(crate) struct Req {
    head: Bytes,
    pub(crate) declared_len: u64,
    pub(crate) script: Arc<str>,
}

struct Failure {
    error: Error,
    /// The connection was found closed and not a byte of an answer came: what a stale
    /// kept-alive connection looks like (and also a worker that died running the script,
    /// which is why only requests safe to send twice are sent again).
    unanswered: bool,
}

/// Errors meaning the peer closed or reset the connection.
pub(crate) fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::UnexpectedEof
    )
}

fn is_closed_error(e: &Error) -> bool {
    match e {
        Error::Closed { .. } => true,
        Error::Io { source, .. } => is_closed(source),
        _ => false,
    }
}

impl Inner {
    fn lock_idle(&self) -> MutexGuard<'_, Idle> {
        // A panic elsewhere while holding the lock leaves a plain Vec: still consistent.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection if `reuse` and one is usable, else a new one.
    async fn checkout(&self, reuse: bool) -> Result<(Stream, bool), Error> {
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

    async fn connect(&self) -> Result<Stream, Error> {
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

/// Closes idle connections once they expire, so that they do not hold php-fpm workers
/// while levee is quiet; ends when the pool is empty or the client is gone.
/// Whether the caller runs on a current-thread runtime, whose sockets only it watches.
fn single_threaded_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

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
    fn new(inner: Arc<Inner>) -> WaitingGuard {
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        WaitingGuard(inner)
    }
}

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

//! One client connection: the TLS handshake on an HTTPS listener, then HTTP/2 (ALPN or
//! prior knowledge) or HTTP/1.1 (with sendfile for large hits), header limits and
//! timeouts, graceful close on shutdown, and HTTP/2's bounds (streams at once, rapid
//! reset).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::request::{handle, Shared};
use crate::server::client::ConnInfo;
use http_body_util::Either;
use levee_sendfile::{SendQueue, ZcStream};

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    tls: bool,
    stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let header_timeout = shared.conf().settings.limits.header_timeout;
    let conn = ConnInfo {
        peer,
        local: stream.local_addr().unwrap_or(peer),
        tls,
    };
    if tls {
        let Some(acceptor) = shared.tls.as_ref().map(|t| t.acceptor.clone()) else {
            return;
        };
        // The handshake counts against the time a client has to send its request.
        let stream = tokio::select! {
            r = tokio::time::timeout(header_timeout, acceptor.accept(stream)) => match r {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            },
            _ = stopped_for(stop.clone(), FIRST_REQUEST_GRACE) => return,
        };
        let alpn = stream.get_ref().1.alpn_protocol();
        if alpn == Some(levee_tls::ACME_TLS_ALPN) {
            // A TLS-ALPN-01 validation: the handshake was all of it (RFC 8737 §3); never
            // HTTP over it. Closed politely, briefly.
            let mut stream = stream;
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                tokio::io::AsyncWriteExt::shutdown(&mut stream),
            )
            .await;
            return;
        }
        let h2 = alpn == Some(b"h2".as_slice());
        // No sendfile under TLS: the bytes are encrypted in levee.
        return serve_http(shared, TokioIo::new(stream), conn, h2, None, stop).await;
    }
    // hyper's auto-detection has no timer while it waits for the first bytes, so an idle
    // connection could be held forever; detect the HTTP/2 preface ourselves, with one.
    let is_h2 = tokio::select! {
        r = tokio::time::timeout(header_timeout, sniff_h2(&stream)) => match r {
            Ok(Ok(h2)) => h2,
            _ => return,
        },
        _ = stopped_for(stop.clone(), FIRST_REQUEST_GRACE) => return,
    };
    if is_h2 {
        serve_http(shared, TokioIo::new(stream), conn, true, None, stop).await;
    } else {
        // Large hits go out with sendfile (zerocopy.rs): the stream sends queued file
        // ranges where hyper writes their placeholders, and each request carries the
        // queue so that the handler can use it.
        let queue = Arc::new(SendQueue::default());
        let io = TokioIo::new(ZcStream::new(stream, queue.clone()));
        serve_http(shared, io, conn, false, Some(queue), stop).await;
    }
}

/// HTTP/2 or HTTP/1.1 over `io`, until the client is done or shutdown.
async fn serve_http<I>(
    shared: Arc<Shared>,
    io: I,
    conn: ConnInfo,
    h2: bool,
    sendfile: Option<Arc<SendQueue>>,
    stop: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let _open = shared.stats.connection_opened();
    let limits = shared.conf().settings.limits.clone();
    let peer = conn.peer;
    let first = Arc::new(FirstRequest::default());
    // On shutdown: a connection that has not sent its first request yet gets
    // FIRST_REQUEST_GRACE for it (it was accepted before the stop: its client is owed an
    // answer); then the request in flight is finished and answered with `Connection:
    // close` (HTTP/1.1; HTTP/2: GOAWAY) and an idle kept-alive connection closed, which
    // clients retry on a new connection, served by the next levee (graceful_shutdown).
    macro_rules! drive {
        ($conn:expr) => {{
            let conn = $conn;
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stopped_for(stop.clone(), Duration::ZERO) => {
                    tokio::select! {
                        r = conn.as_mut() => r,
                        _ = first.wait(FIRST_REQUEST_GRACE) => {
                            conn.as_mut().graceful_shutdown();
                            conn.as_mut().await
                        }
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }};
    }
    let svc_shared = shared.clone();
    if h2 {
        // Rapid reset (CVE-2023-44487): streams the client cancels before their answer
        // cost levee a request each for the price of two frames to the client. Past
        // `H2_MAX_CANCELLED`, when they outnumber the answered ones, the connection goes.
        let cancels = Arc::new(Cancels::default());
        let svc_cancels = cancels.clone();
        let svc_first = first.clone();
        let service = service_fn(move |req| {
            svc_first.seen();
            let guard = CancelGuard {
                cancels: svc_cancels.clone(),
                answered: false,
            };
            let shared = svc_shared.clone();
            async move {
                let mut guard = guard;
                let resp = handle(shared, req.map(Either::Left), conn, None).await;
                guard.answered = true;
                resp
            }
        });
        let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            // Bounds per connection: streams at once (hyper's default is 200), and the
            // resets of streams not yet answered that a client may cause (CVE-2023-44487,
            // rapid reset: h2 closes the connection beyond them).
            .max_concurrent_streams(H2_MAX_STREAMS)
            .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            // RFC 8441: WebSockets over HTTP/2 (extended CONNECT), upgrade.rs.
            .enable_connect_protocol();
        let served = b.serve_connection(io, service);
        tokio::select! {
            _ = async { drive!(served) } => {}
            _ = cancels.too_many.notified() => {
                tracing::warn!(%peer, "HTTP/2 client cancels most of its requests (rapid reset): connection closed");
            }
        }
    } else {
        let svc_first = first.clone();
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            svc_first.seen();
            // Handed down, not put in the request's extensions: that would take three
            // allocations per request (the map, its table, the boxed value).
            let queue = sendfile.clone();
            handle(svc_shared.clone(), req.map(Either::Left), conn, queue)
        });
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new())
            // Bodies are written as given, never copied into hyper's buffer: what the
            // placeholders of zerocopy.rs rely on.
            .writev(true)
            .keep_alive(true)
            .header_read_timeout(limits.header_timeout)
            .max_headers(limits.max_headers)
            .max_header_size(limits.max_header_bytes);
        // An upgrade (a WebSocket) takes the connection over once answered: upgrade.rs.
        drive!(b.serve_connection(io, service).with_upgrades());
    }
}

/// How long a connection accepted before a stop may take to send its first request: a
/// client sends it at once (after the TLS handshake: a round trip), and one that sends
/// nothing is a browser's spare connection, closed after this. Bounds the drain.
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Completes `grace` after `stop` turns true (or its sender is gone: the server too).
async fn stopped_for(mut stop: watch::Receiver<bool>, grace: Duration) {
    // Not kept: the guard wait_for returns holds the channel's lock.
    let _ = stop.wait_for(|s| *s).await.is_ok();
    tokio::time::sleep(grace).await;
}

/// Whether a connection has had its first request.
#[derive(Default)]
struct FirstRequest {
    seen: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl FirstRequest {
    fn seen(&self) {
        if !self.seen.load(Ordering::Relaxed) {
            self.seen.store(true, Ordering::Relaxed);
            // A permit is kept if nobody waits yet: `wait` cannot miss it.
            self.notify.notify_one();
        }
    }

    /// Until the first request has come, for at most `grace`.
    async fn wait(&self, grace: Duration) {
        if !self.seen.load(Ordering::Relaxed) {
            let _ = tokio::time::timeout(grace, self.notify.notified()).await;
        }
    }
}

/// Requests of one HTTP/2 connection cancelled before their answer, counted against
/// those answered.
#[derive(Default)]
struct Cancels {
    cancelled: std::sync::atomic::AtomicU64,
    answered: std::sync::atomic::AtomicU64,
    too_many: tokio::sync::Notify,
}

/// Counts a request as answered, or, dropped before (the client reset the stream), as
/// cancelled.
struct CancelGuard {
    cancels: Arc<Cancels>,
    answered: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let c = &self.cancels;
        if self.answered {
            c.answered.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let cancelled = c.cancelled.fetch_add(1, Ordering::Relaxed) + 1;
        if cancelled >= H2_MAX_CANCELLED && cancelled > c.answered.load(Ordering::Relaxed) {
            c.too_many.notify_one();
        }
    }
}

/// Cancelled requests an HTTP/2 connection may have before the rule above applies: a
/// browser cancels a few (a page left while it loads), a rapid-reset client thousands.
const H2_MAX_CANCELLED: u64 = 100;

/// Streams one HTTP/2 connection may have open at once.
const H2_MAX_STREAMS: u32 = 100;
/// Streams reset by the client before levee answered them, at most, before the
/// connection is closed (rapid reset).
const H2_MAX_PENDING_RESETS: usize = 20;

/// Peeks until the bytes either are the HTTP/2 preface or cannot be.
async fn sniff_h2(stream: &TcpStream) -> std::io::Result<bool> {
    let mut buf = [0u8; 24];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if buf[..n] != H2_PREFACE[..n] {
            return Ok(false);
        }
        if n == H2_PREFACE.len() {
            return Ok(true);
        }
        // A prefix of the preface so far. peek does not consume, so readiness stays
        // set: poll again shortly instead of spinning.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

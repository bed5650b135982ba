//! The listener: accept with a connection limit, HTTP/1.1 (keep-alive) or HTTP/2 with
//! prior knowledge, header limits and timeouts, graceful drain on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use levee_config::Settings;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::handler::{handle, Shared};
use crate::upstream::ConnInfo;
use crate::zerocopy::{SendQueue, ZcStream};

/// A bound, not yet running, `levee serve`.
pub struct Server {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
}

/// Binding failed; says which address and what to do.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}{hint}")]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
    hint: &'static str,
}

/// Why `levee serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Root(levee_static::Error),
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Server {
    /// Binds every listen address; nothing is served until [`run`](Self::run).
    pub async fn bind(settings: Settings) -> Result<Server, ServeError> {
        let mut listeners = Vec::new();
        for addr in &settings.listen {
            let l = TcpListener::bind(addr).await.map_err(|source| {
                let hint = match source.kind() {
                    std::io::ErrorKind::AddrInUse => " (another program uses this port; pick another with --listen)",
                    std::io::ErrorKind::PermissionDenied => " (ports below 1024 need root or CAP_NET_BIND_SERVICE; pick a higher one with --listen)",
                    _ => "",
                };
                BindError { addr: *addr, source, hint }
            })?;
            listeners.push(l);
        }
        let shared = Shared::new(settings).map_err(ServeError::Root)?;
        Ok(Server {
            listeners,
            shared: Arc::new(shared),
        })
    }

    /// The addresses actually bound (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The shared state (cache, backend), for stats and tests.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serves until `shutdown` completes, then drains in-flight requests for at most the
    /// configured shutdown timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let limits = self.shared.settings.limits.clone();
        // Every open connection holds one permit, so "all permits back" means drained.
        let conns = Arc::new(Semaphore::new(limits.max_connections));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for listener in self.listeners {
            let shared = self.shared.clone();
            let conns = conns.clone();
            let mut stop = stop_rx.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let permit = tokio::select! {
                        _ = stop.changed() => break,
                        p = conns.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                    };
                    let (stream, peer) = tokio::select! {
                        _ = stop.changed() => break,
                        r = listener.accept() => match r {
                            Ok(x) => x,
                            Err(e) => {
                                // EMFILE and friends: wait a little instead of spinning.
                                tracing::warn!(error = %e, "accept failed");
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                        },
                    };
                    let shared = shared.clone();
                    let stop = stop.clone();
                    tokio::spawn(async move {
                        serve_connection(shared, stream, peer, stop).await;
                        drop(permit);
                    });
                }
                // Dropping the listener here closes the port: new connections are refused.
            }));
        }
        shutdown.await;
        tracing::info!("shutting down: no new connections, draining in-flight requests");
        let _ = stop_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        let total = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
        let drained =
            tokio::time::timeout(limits.shutdown_timeout, conns.acquire_many(total)).await;
        match drained {
            Ok(_) => tracing::info!("all connections closed"),
            Err(_) => {
                tracing::warn!(timeout = ?limits.shutdown_timeout, "drain timed out; closing remaining connections")
            }
        }
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let limits = &shared.settings.limits;
    // hyper's auto-detection has no timer while it waits for the first bytes, so an idle
    // connection could be held forever; detect the HTTP/2 preface ourselves, with one.
    let is_h2 = tokio::select! {
        r = tokio::time::timeout(limits.header_timeout, sniff_h2(&stream)) => match r {
            Ok(Ok(h2)) => h2,
            _ => return,
        },
        _ = stop.changed() => return,
    };
    let svc_shared = shared.clone();
    let conn = ConnInfo {
        peer,
        local: stream.local_addr().unwrap_or(peer),
    };
    // On shutdown, finish the request in flight, then close (graceful_shutdown).
    macro_rules! drive {
        ($conn:expr) => {{
            let conn = $conn;
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    conn.as_mut().await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }};
    }
    if is_h2 {
        let service = service_fn(move |req| handle(svc_shared.clone(), req, conn));
        let io = TokioIo::new(stream);
        let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .keep_alive_interval(Some(Duration::from_secs(30)));
        drive!(b.serve_connection(io, service));
    } else {
        // Large hits go out with sendfile (zerocopy.rs): the stream sends queued file
        // ranges where hyper writes their placeholders, and each request carries the
        // queue so that the handler can use it.
        let queue = Arc::new(SendQueue::default());
        let io = TokioIo::new(ZcStream::new(stream, queue.clone()));
        let service = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(queue.clone());
            handle(svc_shared.clone(), req, conn)
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
        drive!(b.serve_connection(io, service));
    }
}

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

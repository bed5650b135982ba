//! The listener: accept with a connection limit, HTTP/1.1 (keep-alive) or HTTP/2 with
//! prior knowledge, header limits and timeouts, graceful drain on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use levee_config::Settings;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::error::{BindError, ServeError};
use crate::request::handle;
pub use crate::request::Reloader;
use crate::request::Shared;
use crate::upstream::ConnInfo;
use crate::zerocopy::{SendQueue, ZcStream};

/// A bound, not yet running, `levee serve`.
pub struct Server {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Server {
    /// Binds every listen address; nothing is served until [`run`](Self::run).
    pub async fn bind(settings: Settings) -> Result<Server, ServeError> {
        let listeners = bind_std(&settings.listen)?
            .into_iter()
            .zip(&settings.listen)
            .map(|(l, addr)| {
                TcpListener::from_std(l).map_err(|source| BindError {
                    addr: *addr,
                    source,
                    hint: "",
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shared = Shared::new(settings)?;
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

    /// Serves until `shutdown` completes, then drains in-flight requests for at most the
    /// configured shutdown timeout. Runs on the caller's runtime (`levee demo`, tests);
    /// `levee serve` uses [`serve_workers`] instead.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let limits = self.shared.conf().settings.limits.clone();
        // Every open connection holds one permit, so "all permits back" means drained.
        let conns = Arc::new(Semaphore::new(limits.max_connections));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for listener in self.listeners {
            let (shared, conns, stop) = (self.shared.clone(), conns.clone(), stop_rx.clone());
            tasks.push(tokio::spawn(accept_loop(
                listener, false, shared, conns, stop, None,
            )));
        }
        shutdown.await;
        stop_and_drain(&stop_tx, tasks, &conns, &limits).await;
    }
}

/// Accepts connections on `listener` until `stop`, each served in its own task holding a
/// permit of `conns`, on this thread or, for `levee serve`'s workers, on the worker
/// serving the fewest. Dropping the listener at the end closes the port: new connections
/// are refused.
async fn accept_loop(
    listener: TcpListener,
    tls: bool,
    shared: Arc<Shared>,
    conns: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    worker: Option<Worker>,
) {
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
        let conn = Accepted {
            stream,
            peer,
            tls,
            permit,
        };
        match &worker {
            Some(w) => w.dispatch(conn, &shared, &stop),
            None => conn.spawn(shared.clone(), stop.clone(), None),
        }
    }
}

/// An accepted connection and its `max_connections` permit.
struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
    /// From an HTTPS listener.
    tls: bool,
    permit: OwnedSemaphorePermit,
}

impl Accepted {
    /// Serves the connection in a task of the current runtime, counted in a worker's
    /// `load` while it lives.
    fn spawn(self, shared: Arc<Shared>, stop: watch::Receiver<bool>, load: Option<LoadGuard>) {
        tokio::spawn(async move {
            serve_connection(shared, self.stream, self.peer, self.tls, stop).await;
            drop(self.permit);
            drop(load);
        });
    }
}

/// A connection moving to another worker (a std socket: it leaves this runtime's reactor
/// and joins the other's).
struct Handoff {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    tls: bool,
    permit: OwnedSemaphorePermit,
    /// Counted in the receiving worker's load from the moment it is sent, so that the
    /// rest of a burst sees it.
    load: LoadGuard,
}

/// How many connections each worker serves, and the way to give one a connection.
struct Balance {
    load: Vec<AtomicUsize>,
    inbox: Vec<mpsc::UnboundedSender<Handoff>>,
}

/// One of `levee serve`'s worker threads.
#[derive(Clone)]
struct Worker {
    id: usize,
    balance: Arc<Balance>,
}

impl Worker {
    /// Serves `conn` here unless another worker has fewer connections. Whichever worker
    /// wakes first takes every connection of a burst; without this, a few busy
    /// connections (a benchmark with 4) could all land on one thread while the others
    /// idle. Each connection moves at most once, when accepted, and then stays: a
    /// cross-thread hand-off per connection, not per request.
    fn dispatch(&self, conn: Accepted, shared: &Arc<Shared>, stop: &watch::Receiver<bool>) {
        let load = |i: usize| self.balance.load[i].load(Ordering::Relaxed);
        let mut target = self.id;
        for i in 0..self.balance.load.len() {
            if load(i) < load(target) {
                target = i;
            }
        }
        if target != self.id {
            let Accepted {
                stream,
                peer,
                tls,
                permit,
            } = conn;
            match stream.into_std() {
                Ok(stream) => {
                    let handoff = Handoff {
                        stream,
                        peer,
                        tls,
                        permit,
                        load: LoadGuard::new(Worker {
                            id: target,
                            balance: self.balance.clone(),
                        }),
                    };
                    match self.balance.inbox[target].send(handoff) {
                        Ok(()) => return,
                        // That worker is gone: serve it here after all.
                        Err(mpsc::error::SendError(mut h)) => {
                            h.load = LoadGuard::new(self.clone());
                            self.adopt(h, shared, stop);
                            return;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot move a connection to another worker");
                    return;
                }
            }
        }
        conn.spawn(
            shared.clone(),
            stop.clone(),
            Some(LoadGuard::new(self.clone())),
        );
    }

    /// Serves a connection handed over by another worker.
    fn adopt(&self, h: Handoff, shared: &Arc<Shared>, stop: &watch::Receiver<bool>) {
        match TcpStream::from_std(h.stream) {
            Ok(stream) => Accepted {
                stream,
                peer: h.peer,
                tls: h.tls,
                permit: h.permit,
            }
            .spawn(shared.clone(), stop.clone(), Some(h.load)),
            Err(e) => tracing::warn!(error = %e, "cannot take over a connection"),
        }
    }
}

/// Counts a connection in its worker's load while it lives.
struct LoadGuard(Worker);

impl LoadGuard {
    fn new(w: Worker) -> LoadGuard {
        w.balance.load[w.id].fetch_add(1, Ordering::Relaxed);
        LoadGuard(w)
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        self.0.balance.load[self.0.id].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Stops the accept loops and waits for them (their listeners are then closed: new
/// connections are refused), then until every connection permit is back, for at most
/// the shutdown timeout.
async fn stop_and_drain<F: Future>(
    stop_tx: &watch::Sender<bool>,
    accept_loops: impl IntoIterator<Item = F>,
    conns: &Semaphore,
    limits: &levee_config::Limits,
) {
    tracing::info!("shutting down: no new connections, draining in-flight requests");
    let _ = stop_tx.send(true);
    for l in accept_loops {
        let _ = l.await;
    }
    let total = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(limits.shutdown_timeout, conns.acquire_many(total)).await;
    match drained {
        Ok(_) => tracing::info!("all connections closed"),
        Err(_) => {
            tracing::warn!(timeout = ?limits.shutdown_timeout, "drain timed out; closing remaining connections")
        }
    }
}

/// The addresses `levee serve` listens on, once bound.
pub struct Bound {
    pub traffic: Vec<SocketAddr>,
    /// The HTTPS listeners.
    pub tls: Vec<SocketAddr>,
    /// The admin listener (`/metrics`), when configured.
    pub admin: Option<SocketAddr>,
    /// The backend limit now, and where it comes from ("pm.max_children of ...").
    pub backend_limit: String,
}

/// `levee serve`: `workers` threads, each with its own single-threaded runtime, sharing
/// one cache and backend. Like nginx's worker processes, a connection stays on one
/// thread for its life: no work stealing, whose cross-thread wake-ups cost a tenth
/// of the throughput of large hits on a small machine. Every worker accepts from the same
/// listening sockets (not SO_REUSEPORT's one socket each), so a free worker takes the
/// next connection whichever it is, and a connection waiting for `max_connections` is
/// taken as soon as any permit is back. `on_listening` gets the bound addresses before
/// anything is served; returns once drained after `shutdown`.
///
/// `reloader`, when given, re-reads the configuration on SIGHUP and `POST /reload` (see
/// `Shared::reload` for what changes while serving).
pub fn serve_workers(
    settings: Settings,
    workers: usize,
    on_listening: impl FnOnce(&Bound),
    shutdown: impl Future<Output = ()>,
    reloader: Option<Reloader>,
) -> Result<(), ServeError> {
    let workers = workers.max(1);
    // Cleartext listeners, then the HTTPS ones.
    let all: Vec<SocketAddr> = settings
        .listen
        .iter()
        .chain(&settings.listen_tls)
        .copied()
        .collect();
    let plain = settings.listen.len();
    let listeners = bind_std(&all)?;
    let mut addrs = listeners
        .iter()
        .zip(&all)
        .map(|(l, addr)| {
            l.local_addr().map_err(|source| BindError {
                addr: *addr,
                source,
                hint: "",
            })
        })
        .collect::<Result<Vec<SocketAddr>, _>>()?;
    let admin = match settings.admin.listen {
        Some(addr) => Some((bind_std(&[addr])?.remove(0), addr)),
        None => None,
    };
    let limits = settings.limits.clone();
    let shared = Arc::new(Shared::new(settings)?);
    if let Some(r) = reloader {
        let _ = shared.reloader.set(r);
    }
    let conns = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    // Workers keep driving their connections until told to exit, after the drain.
    let (exit_tx, exit_rx) = watch::channel(false);
    let (senders, inboxes): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
    let balance = Arc::new(Balance {
        load: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
        inbox: senders,
    });
    let mut threads = Vec::new();
    let mut accepting = Vec::new();
    for (i, mut inbox) in inboxes.into_iter().enumerate() {
        // Each worker registers its own descriptor of the same socket with its runtime.
        let set = listeners
            .iter()
            .zip(&addrs)
            .map(|(l, addr)| {
                l.try_clone().map_err(|source| BindError {
                    addr: *addr,
                    source,
                    hint:
                        " (too many open files? raise the limit with ulimit -n, or lower workers)",
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (shared, conns, stop, mut exit) = (
            shared.clone(),
            conns.clone(),
            stop_rx.clone(),
            exit_rx.clone(),
        );
        let worker = Worker {
            id: i,
            balance: balance.clone(),
        };
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("levee-worker-{i}"))
            .spawn(move || {
                crate::worker::set_id(i);
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start a worker runtime");
                        return;
                    }
                };
                rt.block_on(async move {
                    // Connections other workers hand over; runs until the thread exits.
                    let (w, s, st) = (worker.clone(), shared.clone(), stop.clone());
                    tokio::spawn(async move {
                        while let Some(h) = inbox.recv().await {
                            w.adopt(h, &s, &st);
                        }
                    });
                    let mut loops = Vec::new();
                    for (n, l) in set.into_iter().enumerate() {
                        match TcpListener::from_std(l) {
                            Ok(l) => loops.push(tokio::spawn(accept_loop(
                                l,
                                n >= plain,
                                shared.clone(),
                                conns.clone(),
                                stop.clone(),
                                Some(worker.clone()),
                            ))),
                            Err(e) => tracing::error!(error = %e, "cannot use a listening socket"),
                        }
                    }
                    for l in loops {
                        let _ = l.await;
                    }
                    let _ = done_tx.send(());
                    let _ = exit.wait_for(|e| *e).await;
                });
            });
        threads.push(thread.map_err(ServeError::Runtime)?);
        accepting.push(done_rx);
    }
    // The originals are no longer needed: the workers hold their own descriptors, and
    // the port closes when the last of them is dropped.
    drop(listeners);
    let admin_addr = match &admin {
        Some((l, addr)) => Some(l.local_addr().map_err(|source| BindError {
            addr: *addr,
            source,
            hint: "",
        })?),
        None => None,
    };
    let upstream = &shared.first_site().upstream;
    let limiter = &upstream.limiter;
    let backend_limit = format!(
        "{}{} concurrent ({}), {} of them kept for sessions",
        if limiter.is_adaptive() {
            "starting at "
        } else {
            ""
        },
        limiter.limit(),
        upstream.limit_source(),
        limiter.reserved()
    );
    let tls_addrs = addrs.split_off(plain);
    if let Some(tls) = &shared.tls {
        let _ = tls.bound.set(tls_addrs.clone());
    }
    on_listening(&Bound {
        traffic: addrs,
        tls: tls_addrs,
        admin: admin_addr,
        backend_limit,
    });
    // The signals, the admin listener and the drain run on this thread, off the
    // workers' hit path.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    rt.block_on(async {
        if let Some((l, addr)) = admin {
            let l = TcpListener::from_std(l).map_err(|source| BindError {
                addr,
                source,
                hint: "",
            })?;
            tokio::spawn(crate::admin::serve(l, shared.clone(), stop_rx.clone()));
        }
        // SIGHUP: re-read the configuration, as nginx and Varnish users expect.
        if shared.reloader.get().is_some() {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::hangup()) {
                Ok(mut hup) => {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        while hup.recv().await.is_some() {
                            let s = shared.clone();
                            let _ = tokio::task::spawn_blocking(move || s.reload_and_report()).await;
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "no SIGHUP handler: reload with POST /reload"),
            }
        }
        // SIGUSR1: reopen the access log (logrotate moved it), as nginx does.
        if shared.access_log.is_some() {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::user_defined1()) {
                Ok(mut usr1) => {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        while usr1.recv().await.is_some() {
                            if let Some(log) = &shared.access_log {
                                log.reopen();
                            }
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "no SIGUSR1 handler: the access log cannot be reopened"),
            }
        }
        shutdown.await;
        stop_and_drain(&stop_tx, accepting, &conns, &limits).await;
        Ok::<(), ServeError>(())
    })?;
    let _ = exit_tx.send(true);
    for t in threads {
        let _ = t.join();
    }
    // The app's processes last: every request to them has ended. Waits until each one
    // has exited, so that none outlives levee.
    for site in &shared.sites {
        if let Some(pool) = site.upstream.app_pool() {
            pool.shutdown();
        }
    }
    Ok(())
}

/// One non-blocking listening socket per address (backlog 1024, like tokio's).
fn bind_std(addrs: &[SocketAddr]) -> Result<Vec<std::net::TcpListener>, BindError> {
    addrs
        .iter()
        .map(|addr| {
            bind_one(*addr).map_err(|source| {
                let hint = match source.kind() {
                    std::io::ErrorKind::AddrInUse => " (another program uses this port; pick another with --listen)",
                    std::io::ErrorKind::PermissionDenied => " (ports below 1024 need root or CAP_NET_BIND_SERVICE; pick a higher one with --listen)",
                    _ => "",
                };
                BindError { addr: *addr, source, hint }
            })
        })
        .collect()
}

fn bind_one(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Restart without waiting for TIME_WAIT to clear, as tokio's bind does.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    tls: bool,
    mut stop: watch::Receiver<bool>,
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
            _ = stop.changed() => return,
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
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
        _ = stop.changed() => return,
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
    mut stop: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let _open = shared.stats.connection_opened();
    let limits = shared.conf().settings.limits.clone();
    let peer = conn.peer;
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
    let svc_shared = shared.clone();
    if h2 {
        // Rapid reset (CVE-2023-44487): streams the client cancels before their answer
        // cost levee a request each for the price of two frames to the client. Past
        // `H2_MAX_CANCELLED`, when they outnumber the answered ones, the connection goes.
        let cancels = Arc::new(Cancels::default());
        let svc_cancels = cancels.clone();
        let service = service_fn(move |req| {
            let guard = CancelGuard {
                cancels: svc_cancels.clone(),
                answered: false,
            };
            let shared = svc_shared.clone();
            async move {
                let mut guard = guard;
                let resp = handle(shared, req, conn).await;
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
            .keep_alive_interval(Some(Duration::from_secs(30)));
        let served = b.serve_connection(io, service);
        tokio::select! {
            _ = async { drive!(served) } => {}
            _ = cancels.too_many.notified() => {
                tracing::warn!(%peer, "HTTP/2 client cancels most of its requests (rapid reset): connection closed");
            }
        }
    } else {
        let service = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            if let Some(queue) = &sendfile {
                req.extensions_mut().insert(queue.clone());
            }
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

//! The listeners: worker threads, accept with a connection limit and hand-off to the
//! least busy worker, graceful drain on shutdown. One connection's life (TLS, HTTP/1.1
//! or HTTP/2, limits and timeouts) is `server/connection.rs`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use levee_config::Settings;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::error::{BindError, ServeError};
use crate::request::Reloader;
use crate::request::Shared;

pub(crate) mod client;
mod connection;
mod quic;
use connection::serve_connection;

/// A bound, not yet running, `levee serve`.
pub struct Server {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
}

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
        stop_and_drain(&stop_tx, tasks, &conns, &limits, &self.shared.tunnels).await;
        flush_tiers(&self.shared).await;
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
    tunnels: &levee_websocket::Tunnels<levee_limits::client_net::ClientNet>,
) {
    tracing::info!("shutting down: no new connections, draining in-flight requests");
    let began = tokio::time::Instant::now();
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
    // WebSockets have the rest of the shutdown timeout to close on their own; then each
    // gets `1001 Going Away` (its clients reconnect, to the next levee).
    if tunnels.count() > 0 {
        let deadline = began + limits.shutdown_timeout;
        while tunnels.count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracing::info!(
            open = tunnels.count(),
            "closing WebSockets: 1001 Going Away"
        );
        tunnels.go_away();
        tunnels.closed(Duration::from_secs(3)).await;
    }
}

/// The addresses `levee serve` listens on, once bound.
pub struct Bound {
    pub traffic: Vec<SocketAddr>,
    /// The HTTPS listeners.
    pub tls: Vec<SocketAddr>,
    /// The UDP ports of HTTP/3 (the HTTPS listeners' own numbers).
    pub quic: Vec<SocketAddr>,
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
    // Before any thread: the sockets systemd passed, if it did (socket activation).
    let mut activated = levee_systemd::Activated::from_env()?;
    // Cleartext listeners, then the HTTPS ones.
    let all: Vec<SocketAddr> = settings
        .listen
        .iter()
        .chain(&settings.listen_tls)
        .copied()
        .collect();
    let plain = settings.listen.len();
    let configured: Vec<SocketAddr> = all.iter().copied().chain(settings.admin.listen).collect();
    activated.release_unconfigured(&configured);
    let listeners = take_or_bind(&all, &mut activated)?;
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
        Some(addr) => Some((take_or_bind(&[addr], &mut activated)?.remove(0), addr)),
        None => None,
    };
    // Every socket handed to systemd's store, for the next levee (the unit's
    // FileDescriptorStoreMax=): a restart refuses no connection.
    let listening: Vec<&std::net::TcpListener> = listeners
        .iter()
        .chain(admin.as_ref().map(|(l, _)| l))
        .collect();
    // HTTP/3's UDP twins of the HTTPS ports, stored the same way.
    let quic_sockets = quic::bind(&settings, &addrs[plain..], &mut activated)?;
    activated.finish(&listening, &quic_sockets.iter().collect::<Vec<_>>())?;
    let limits = settings.limits.clone();
    let shared = Arc::new(Shared::new(settings)?);
    if let Some(r) = reloader {
        let _ = shared.reloader.set(r);
    }
    let conns = Arc::new(Semaphore::new(limits.max_connections));
    // HTTP/3 on the UDP port of each HTTPS listener, served by the first worker.
    quic::announce(&shared, &quic_sockets);
    let quic_addrs: Vec<SocketAddr> = quic_sockets
        .iter()
        .filter_map(|s| s.local_addr().ok())
        .collect();
    let mut quic = Some(quic_sockets);
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
        let quic = quic.take();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("levee-worker-{i}"))
            .spawn(move || {
                levee_limits::worker::set_id(i);
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
                    if let Some(sockets) = quic {
                        quic::serve(&shared, sockets, &conns, &stop);
                    }
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
    let backend_limit = shared
        .sites
        .iter()
        .map(|site| {
            let upstream = &site.upstream;
            let limiter = &upstream.limiter;
            format!(
                "{}{}{} concurrent ({}), {} of them kept for sessions; anonymous work {} while people's waits, {} per client network",
                match shared.sites.len() {
                    1 => String::new(),
                    _ => format!("site {}: ", site.name),
                },
                if limiter.is_adaptive() {
                    "starting at "
                } else {
                    ""
                },
                limiter.capacity(),
                upstream.limit_source(),
                limiter.reserved(),
                limiter.lane().cap(limiter.capacity()),
                limiter.lane().net_cap(limiter.capacity()),
            ) + if shared.tiers.as_ref().is_some_and(|t| t.redis.is_some()) {
                ", shared with every levee on the same Redis (each node holds a share)"
            } else {
                ""
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let tls_addrs = addrs.split_off(plain);
    if let Some(tls) = &shared.tls {
        let _ = tls.bound.set(tls_addrs.clone());
    }
    on_listening(&Bound {
        traffic: addrs,
        tls: tls_addrs,
        quic: quic_addrs,
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
        // ACME: orders, renewals and retries, off the workers, until shutdown.
        if let Some(acme) = &shared.acme {
            tokio::spawn(acme.clone().run(stop_rx.clone()));
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
        // systemd's watchdog (WatchdogSec=): pings from this thread while it runs.
        if let Some(every) = levee_systemd::watchdog_interval() {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    levee_systemd::watchdog();
                }
            });
        }
        // READY=1 once `shutdown` has been polled, so that its signal handlers are in
        // place (spawned tasks run after the first poll of the task blocked on).
        tokio::spawn(async { levee_systemd::ready() });
        shutdown.await;
        levee_systemd::stopping();
        stop_and_drain(&stop_tx, accepting, &conns, &limits, &shared.tunnels).await;
        flush_tiers(&shared).await;
        Ok::<(), ServeError>(())
    })?;
    let _ = exit_tx.send(true);
    for t in threads {
        let _ = t.join();
    }
    // The app's processes last: every request to them has ended. Waits until each one
    // has exited, so that none outlives levee.
    for site in &shared.sites {
        for pool in site.upstreams().filter_map(|u| u.app_pool()) {
            pool.shutdown();
        }
    }
    Ok(())
}

/// After the drain: what the disk tier has queued is written, so that a restart finds
/// everything this process stored (bounded: a failing disk does not hold the exit).
async fn flush_tiers(shared: &Shared) {
    if let Some(disk) = shared.tiers.as_ref().and_then(|t| t.disk.as_ref()) {
        if tokio::time::timeout(Duration::from_secs(10), disk.flush())
            .await
            .is_err()
        {
            tracing::warn!("the disk tier did not finish its writes within 10 s; exiting anyway");
        }
    }
}

/// The socket systemd passed for each address, else one bound here.
fn take_or_bind(
    addrs: &[SocketAddr],
    activated: &mut levee_systemd::Activated,
) -> Result<Vec<std::net::TcpListener>, BindError> {
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in addrs {
        match activated.take(*addr) {
            Some(l) => listeners.push(l),
            None if activated.released(addr.port()) => listeners.push(bind_after_release(*addr)?),
            None => listeners.extend(bind_std(std::slice::from_ref(addr))?),
        }
    }
    Ok(listeners)
}

/// Binds `addr` while systemd closes the stored socket just released on its port
/// (another address of the same port, say `127.0.0.1:80` now `0.0.0.0:80`): tries again
/// for a second while the port is in use.
fn bind_after_release(addr: SocketAddr) -> Result<std::net::TcpListener, BindError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        match bind_std(std::slice::from_ref(&addr)) {
            Err(e)
                if e.source.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r.map(|mut v| v.remove(0)),
        }
    }
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

//! systemd, and nothing when systemd is not there: readiness, reload and stop notices
//! and watchdog pings (sd_notify(3), through `NOTIFY_SOCKET`), and the listening sockets
//! systemd passes (sd_listen_fds(3): `LISTEN_FDS` for this `LISTEN_PID`).
//!
//! Those come from two places. A `.socket` unit (levee.socket, optional): systemd binds
//! them. systemd's file descriptor store (the packaged unit's `FileDescriptorStoreMax=`):
//! levee binds the addresses of its configuration and hands each listening socket to
//! systemd (`FDSTORE=1`, named [`store_name`]); systemd keeps it open while levee
//! restarts and passes it to the next levee. Either way a restart or an upgrade refuses
//! no connection: they queue in the kernel until the next levee accepts them, and the
//! admin keeps one list of addresses, in levee.toml.
//!
//! A passed socket is matched to the `listen`, `listen_tls` or `[admin] listen` address
//! it is bound to (its own local address, whatever order systemd passes them in), a
//! `.socket` unit's first; a configured address no passed socket matches is bound as
//! usual. A stored socket no address names any more is taken out of the store
//! (`FDSTOREREMOVE=1`) and closed, so that its port is free; a `.socket` unit's socket no
//! address names is an error: levee would never accept from it.
//!
//! HTTP/3's UDP sockets (one per HTTPS port) are stored the same way, named
//! [`quic_store_name`], so that a restart keeps the port (QUIC packets that come
//! meanwhile wait in the socket's buffer).

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

use sd_notify::NotifyState;

/// The sockets systemd passed (socket activation) cannot be used; says why.
#[derive(Debug, thiserror::Error)]
#[error("socket activation: {0}")]
pub struct ActivationError(pub String);

/// `READY=1`: listening, signal handlers in place.
pub fn ready() {
    notify(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// `RELOADING=1` with the time it started (`MONOTONIC_USEC`, as systemd 253's
/// `Type=notify-reload` wants); [`reloaded`] ends it.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `READY=1` again after a reload, applied or refused.
pub fn reloaded() {
    ready();
}

/// `STOPPING=1`: draining.
pub fn stopping() {
    notify(&[
        NotifyState::Stopping,
        NotifyState::Status("draining connections"),
    ]);
}

/// How often to send `WATCHDOG=1`: half the unit's `WatchdogSec=`, when it has one.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|t| t / 2)
}

pub fn watchdog() {
    notify(&[NotifyState::Watchdog]);
}

/// A no-op without `NOTIFY_SOCKET`; a failure to tell systemd is logged, never fatal.
fn notify(state: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
    }
}

/// Whether `stream` (standard error or output) is the one systemd connected to the
/// journal: `JOURNAL_STREAM` names its device and inode, as systemd.exec(5) says to
/// check (a child with its output redirected inherits the variable, not the stream).
pub fn is_journal_stream(stream: impl std::os::fd::AsFd) -> bool {
    let Some(want) = std::env::var("JOURNAL_STREAM")
        .ok()
        .and_then(|v| parse_journal_stream(&v))
    else {
        return false;
    };
    rustix::fs::fstat(stream).is_ok_and(|st| (st.st_dev, st.st_ino) == want)
}

/// `JOURNAL_STREAM`'s `DEVICE:INODE`.
fn parse_journal_stream(v: &str) -> Option<(u64, u64)> {
    let (dev, ino) = v.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The names levee stores its sockets under start with this, told apart from a `.socket`
/// unit's (named after the unit, or by its `FileDescriptorName=`).
const STORE_PREFIX: &str = "levee-listen-";

/// The names levee stores its HTTP/3 UDP sockets under.
const QUIC_PREFIX: &str = "levee-quic-";

/// The name the listening socket bound to `addr` is stored under (`FDNAME=` may not hold
/// ':', `LISTEN_FDNAMES`'s separator).
pub fn store_name(addr: SocketAddr) -> String {
    format!("{STORE_PREFIX}{}", addr.to_string().replace(':', "_"))
}

/// The name the HTTP/3 UDP socket bound to `addr` is stored under.
pub fn quic_store_name(addr: SocketAddr) -> String {
    format!("{QUIC_PREFIX}{}", addr.to_string().replace(':', "_"))
}

/// A UDP socket levee stored (HTTP/3), passed back.
struct PassedUdp {
    addr: SocketAddr,
    socket: UdpSocket,
    name: String,
}

/// A socket systemd passed: where it is bound, and the name it came with.
struct Passed {
    addr: SocketAddr,
    listener: TcpListener,
    name: String,
}

impl Passed {
    /// From levee's own store rather than a `.socket` unit.
    fn stored(&self) -> bool {
        self.name.starts_with(STORE_PREFIX)
    }
}

/// The listening sockets systemd passed, each with the address it is bound to.
pub struct Activated {
    sockets: Vec<Passed>,
    /// HTTP/3's UDP sockets from levee's store.
    udp: Vec<PassedUdp>,
    /// Where the sockets taken from a `.socket` unit are bound: systemd holds those
    /// already, they are not stored.
    from_unit: Vec<SocketAddr>,
    /// Ports of the stored sockets released: a bind of one may race systemd closing it.
    released: Vec<u16>,
}

impl Activated {
    /// Takes the sockets systemd passed to this process (none outside systemd; the
    /// `LISTEN_*` variables are removed, so that no child takes them for its own).
    /// Call it before any thread starts.
    pub fn from_env() -> Result<Activated, ActivationError> {
        // Read first: listenfd removes LISTEN_PID and LISTEN_FDS, not the names.
        let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
            .map(|v| v.split(':').map(str::to_owned).collect())
            .unwrap_or_default();
        std::env::remove_var("LISTEN_FDNAMES");
        let mut fds = listenfd::ListenFd::from_env();
        let mut sockets = Vec::new();
        let mut udp = Vec::new();
        for i in 0..fds.len() {
            let name = names.get(i).cloned().unwrap_or_default();
            if name.starts_with(QUIC_PREFIX) {
                let socket = fds.take_udp_socket(i).map_err(|e| {
                    activation(format!(
                        "socket {} ({name}) is not a UDP socket ({e})",
                        i + 3
                    ))
                })?;
                let Some(socket) = socket else { continue };
                let addr = socket
                    .local_addr()
                    .map_err(|e| activation(format!("socket {}: {e}", i + 3)))?;
                socket
                    .set_nonblocking(true)
                    .map_err(|e| activation(format!("socket {addr}: {e}")))?;
                udp.push(PassedUdp { addr, socket, name });
                continue;
            }
            let listener = fds
                .take_tcp_listener(i)
                .map_err(|e| activation(format!("socket {} is not a listening TCP socket ({e}); levee.socket may only have ListenStream= lines", i + 3)))?;
            let Some(listener) = listener else { continue };
            let addr = listener
                .local_addr()
                .map_err(|e| activation(format!("socket {}: {e}", i + 3)))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| activation(format!("socket {addr}: {e}")))?;
            sockets.push(Passed {
                addr,
                listener,
                name,
            });
        }
        if !sockets.is_empty() {
            let addrs: Vec<_> = sockets
                .iter()
                .map(|p| format!("{} ({})", p.addr, p.name))
                .collect();
            tracing::info!(sockets = ?addrs, "listening sockets from systemd");
        }
        Ok(Activated {
            sockets,
            udp,
            from_unit: Vec::new(),
            released: Vec::new(),
        })
    }

    /// Releases the stored sockets no address of `configured` matches (the
    /// configuration changed since they were stored): out of systemd's store, and
    /// closed. Before anything is bound, as the port may be wanted by another address
    /// (`127.0.0.1:80` becoming `0.0.0.0:80`).
    pub fn release_unconfigured(&mut self, configured: &[SocketAddr]) {
        let (gone, kept) = std::mem::take(&mut self.sockets)
            .into_iter()
            .partition(|p| p.stored() && !configured.iter().any(|c| matches(*c, p.addr)));
        self.sockets = kept;
        for p in gone {
            self.release(p);
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.udp)
            .into_iter()
            .partition(|p| !configured.iter().any(|c| matches(*c, p.addr)));
        self.udp = kept;
        for p in gone {
            self.release_udp(p);
        }
    }

    fn release_udp(&mut self, p: PassedUdp) {
        tracing::info!(addr = %p.addr, "an HTTP/3 socket systemd kept is not configured any more: released");
        notify(&[NotifyState::FdStoreRemove, NotifyState::FdName(&p.name)]);
        self.released.push(p.addr.port());
    }

    /// The stored HTTP/3 socket for `addr` (an HTTPS listener's address), if one
    /// matches.
    pub fn take_udp(&mut self, addr: SocketAddr) -> Option<UdpSocket> {
        let i = self.udp.iter().position(|p| matches(addr, p.addr))?;
        Some(self.udp.swap_remove(i).socket)
    }

    fn release(&mut self, p: Passed) {
        tracing::info!(addr = %p.addr, "a listening socket systemd kept is not configured any more: released");
        notify(&[NotifyState::FdStoreRemove, NotifyState::FdName(&p.name)]);
        self.released.push(p.addr.port());
    }

    /// Whether a stored socket on `port` was just released: systemd closes its copy
    /// when it reads the message, so a new bind of the port may have to try again.
    pub fn released(&self, port: u16) -> bool {
        self.released.contains(&port)
    }

    /// The passed socket for the configured address `addr`, if one matches: a `.socket`
    /// unit's before a stored one.
    pub fn take(&mut self, addr: SocketAddr) -> Option<TcpListener> {
        let found = |unit: bool| {
            self.sockets
                .iter()
                .position(|p| p.stored() != unit && matches(addr, p.addr))
        };
        let i = found(true).or_else(|| found(false))?;
        let p = self.sockets.swap_remove(i);
        if !p.stored() {
            self.from_unit.push(p.addr);
        }
        Some(p.listener)
    }

    /// Refuses to serve with a `.socket` unit's socket no address took: its connections
    /// would wait forever. Otherwise releases what is left of the store (a socket stored
    /// twice), and hands every socket of `listening` systemd does not hold already to its
    /// store, for the next levee.
    pub fn finish(
        mut self,
        listening: &[&TcpListener],
        quic: &[&UdpSocket],
    ) -> Result<(), ActivationError> {
        if let Some(p) = self.sockets.iter().find(|p| !p.stored()) {
            return Err(activation(format!(
                "systemd passed a socket on {} that no listen, listen_tls or [admin] listen of the configuration names; make levee.socket's ListenStream= and /etc/levee/levee.toml agree",
                p.addr
            )));
        }
        for p in std::mem::take(&mut self.sockets) {
            self.release(p);
        }
        for p in std::mem::take(&mut self.udp) {
            self.release_udp(p);
        }
        for l in listening {
            match l.local_addr() {
                Ok(addr) if !self.from_unit.contains(&addr) => store(addr, l),
                _ => {}
            }
        }
        for s in quic {
            if let Ok(addr) = s.local_addr() {
                store_fd(&quic_store_name(addr), addr, s);
            }
        }
        Ok(())
    }
}

/// `FDSTORE=1`: systemd keeps a copy of `listener` while levee restarts, if the unit
/// has `FileDescriptorStoreMax=` (systemd logs and drops it otherwise). A no-op without
/// `NOTIFY_SOCKET`.
fn store(addr: SocketAddr, listener: &TcpListener) {
    store_fd(&store_name(addr), addr, listener);
}

fn store_fd(name: &str, addr: SocketAddr, socket: &impl std::os::fd::AsFd) {
    let state = [NotifyState::FdStore, NotifyState::FdName(name)];
    if let Err(e) = sd_notify::notify_with_fds(&state, &[socket.as_fd()]) {
        tracing::warn!(%addr, error = %e, "cannot hand a socket to systemd: a restart will miss packets and connections for a moment");
    }
}

fn activation(message: String) -> ActivationError {
    ActivationError(message)
}

/// Whether the socket systemd bound to `passed` serves the configured address
/// `configured`: the same address, or both the wildcard of either family on the same
/// port (`ListenStream=8080` binds `[::]:8080`, which also takes IPv4, for
/// `listen = "0.0.0.0:8080"`).
pub fn matches(configured: SocketAddr, passed: SocketAddr) -> bool {
    configured == passed
        || (configured.port() == passed.port()
            && configured.ip().is_unspecified()
            && passed.ip().is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_stored_socket_is_named_after_its_address_without_colons() {
        assert_eq!(
            store_name(a("127.0.0.1:8080")),
            "levee-listen-127.0.0.1_8080"
        );
        assert_eq!(store_name(a("[::]:443")), "levee-listen-[__]_443");
    }

    #[test]
    fn a_passed_socket_serves_the_address_it_is_bound_to() {
        assert!(matches(a("127.0.0.1:8080"), a("127.0.0.1:8080")));
        assert!(matches(a("[::1]:443"), a("[::1]:443")));
        assert!(!matches(a("127.0.0.1:8080"), a("127.0.0.1:8081")));
        assert!(!matches(a("127.0.0.2:8080"), a("127.0.0.1:8080")));
    }

    #[test]
    fn wildcards_of_either_family_match_on_the_same_port() {
        assert!(matches(a("0.0.0.0:80"), a("[::]:80")));
        assert!(matches(a("[::]:80"), a("0.0.0.0:80")));
        assert!(!matches(a("0.0.0.0:80"), a("[::]:81")));
        // A wildcard socket is wider than a configured loopback address: not taken.
        assert!(!matches(a("127.0.0.1:80"), a("[::]:80")));
        assert!(!matches(a("0.0.0.0:80"), a("127.0.0.1:80")));
    }

    #[test]
    fn journal_stream_is_device_colon_inode() {
        assert_eq!(parse_journal_stream("8:12345"), Some((8, 12345)));
        assert_eq!(parse_journal_stream("8"), None);
        assert_eq!(parse_journal_stream("a:1"), None);
    }

    #[test]
    fn outside_systemd_nothing_is_passed_and_nothing_is_sent() {
        // The test runner has no LISTEN_FDS for this process, nor NOTIFY_SOCKET.
        if std::env::var_os("LISTEN_FDS").is_none() {
            let activated = Activated::from_env().unwrap();
            assert!(activated.sockets.is_empty());
            assert!(activated.finish(&[], &[]).is_ok());
        }
        if std::env::var_os("NOTIFY_SOCKET").is_none() {
            ready();
            stopping();
        }
    }
}

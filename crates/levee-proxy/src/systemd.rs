//! systemd, and nothing when systemd is not there: readiness, reload and stop notices
//! and watchdog pings (sd_notify(3), through `NOTIFY_SOCKET`), and socket activation
//! (sd_listen_fds(3): `LISTEN_FDS` for this `LISTEN_PID`), with which systemd holds the
//! listening sockets and a restart refuses no connection: they queue in the kernel until
//! the next levee accepts them.
//!
//! A passed socket is matched to the `listen`, `listen_tls` or `[admin] listen` address
//! it is bound to (its own local address, whatever order `levee.socket` lists them in);
//! a configured address no passed socket matches is bound as usual. A passed socket no
//! address names is an error: levee would never accept from it.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use sd_notify::NotifyState;

use crate::error::ServeError;

/// `READY=1`: listening, signal handlers in place.
pub(crate) fn ready() {
    notify(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// `RELOADING=1` with the time it started (`MONOTONIC_USEC`, as systemd 253's
/// `Type=notify-reload` wants); [`reloaded`] ends it.
pub(crate) fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `READY=1` again after a reload, applied or refused.
pub(crate) fn reloaded() {
    ready();
}

/// `STOPPING=1`: draining.
pub(crate) fn stopping() {
    notify(&[
        NotifyState::Stopping,
        NotifyState::Status("draining connections"),
    ]);
}

/// How often to send `WATCHDOG=1`: half the unit's `WatchdogSec=`, when it has one.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|t| t / 2)
}

pub(crate) fn watchdog() {
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

/// The listening sockets systemd passed, each with the address it is bound to.
pub(crate) struct Activated {
    sockets: Vec<(SocketAddr, TcpListener)>,
}

impl Activated {
    /// Takes the sockets systemd passed to this process (none outside systemd; the
    /// `LISTEN_*` variables are removed, so that no child takes them for its own).
    /// Call it before any thread starts.
    pub(crate) fn from_env() -> Result<Activated, ServeError> {
        let mut fds = listenfd::ListenFd::from_env();
        let mut sockets = Vec::new();
        for i in 0..fds.len() {
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
            sockets.push((addr, listener));
        }
        if !sockets.is_empty() {
            let addrs: Vec<_> = sockets.iter().map(|(a, _)| a.to_string()).collect();
            tracing::info!(sockets = ?addrs, "listening sockets from systemd");
        }
        Ok(Activated { sockets })
    }

    /// The passed socket for the configured address `addr`, if one matches.
    pub(crate) fn take(&mut self, addr: SocketAddr) -> Option<TcpListener> {
        let i = self.sockets.iter().position(|(a, _)| matches(addr, *a))?;
        Some(self.sockets.swap_remove(i).1)
    }

    /// Refuses to serve with passed sockets no address took: their connections would
    /// wait forever.
    pub(crate) fn finish(self) -> Result<(), ServeError> {
        match self.sockets.first() {
            None => Ok(()),
            Some((addr, _)) => Err(activation(format!(
                "systemd passed a socket on {addr} that no listen, listen_tls or [admin] listen of the configuration names; make levee.socket's ListenStream= and /etc/levee/levee.toml agree"
            ))),
        }
    }
}

fn activation(message: String) -> ServeError {
    ServeError::Activation(message)
}

/// Whether the socket systemd bound to `passed` serves the configured address
/// `configured`: the same address, or both the wildcard of either family on the same
/// port (`ListenStream=8080` binds `[::]:8080`, which also takes IPv4, for
/// `listen = "0.0.0.0:8080"`).
pub(crate) fn matches(configured: SocketAddr, passed: SocketAddr) -> bool {
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
            assert!(activated.finish().is_ok());
        }
        if std::env::var_os("NOTIFY_SOCKET").is_none() {
            ready();
            stopping();
        }
    }
}

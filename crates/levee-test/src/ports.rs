//! Ports for servers a test starts but cannot hand a bound socket to (Pebble validating
//! on levee's ports, php-fpm, Redis).
//!
//! Binding port 0 and releasing it leaves a window in which any other process may take
//! the port: the kernel hands out the same ephemeral range to every `bind(0)` and every
//! outgoing connection on the machine, and a fresh clone's CI once lost
//! 127.0.0.1:33333 that way. Ports are taken instead from below the kernel's ephemeral
//! range, where nothing is given out unasked, starting at a place that depends on the
//! process (test binaries run one after another, tests of one binary in threads), and
//! each is checked free for TCP and UDP (Pebble's DNS) before it is handed out.

use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out: above the well-known and most registered services.
const LOWEST: u32 = 10_000;

/// A port on 127.0.0.1 that nothing listens on and no other process is given by the
/// kernel, for a server the test starts next.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let top = ephemeral_start().max(LOWEST + 1_000);
    let span = top - LOWEST;
    let _ = NEXT.compare_exchange(
        0,
        std::process::id() % span,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..span {
        let port = LOWEST + NEXT.fetch_add(1, Ordering::SeqCst) % span;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && UdpSocket::bind(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
    }
    panic!("no free port between {LOWEST} and {top} on 127.0.0.1");
}

/// An address on 127.0.0.1 where connections are refused, for as long as the test process
/// lives.
///
/// Binding port 0 and dropping the listener is not enough: tests running beside this one
/// bind their own ephemeral ports, and CI once saw such a port taken by another test's
/// server in the window (the connection was accepted and closed instead of refused). The
/// port is kept bound here without listening, so the kernel answers SYNs with a reset and
/// gives the port to no one else; the socket is left open on purpose until the process
/// exits.
pub fn refused_addr() -> std::net::SocketAddr {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind 127.0.0.1:0");
    let addr = socket.local_addr().expect("the bound address");
    std::mem::forget(socket);
    addr
}

/// The first port of the kernel's ephemeral range (Linux: 32768 unless changed).
fn ephemeral_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_below_the_ephemeral_range_and_differ() {
        let a = super::free_port();
        let b = super::free_port();
        assert_ne!(a, b);
        assert!(u32::from(a) < super::ephemeral_start().max(11_000));
        assert!(u32::from(a) >= super::LOWEST);
    }

    #[test]
    fn a_refused_address_refuses_and_stays_taken() {
        let addr = super::refused_addr();
        let err = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
        // Nobody else is given the port while it is held.
        assert!(std::net::TcpListener::bind(addr).is_err());
    }
}

//! The bounds of the HTTP/3 listener, and the count of connections per client network.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use levee_limits::client_net::ClientNet;

/// Bounds of an HTTP/3 listener.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests (bidirectional streams) open at once on one connection.
    pub streams: u32,
    /// Connections at once from one client network (a /24, a /56).
    pub per_network: usize,
    /// Handshakes under way beyond which clients must prove their address (Retry).
    pub handshakes: usize,
    /// A connection silent both ways this long is closed.
    pub idle_timeout: Duration,
    /// The time a client has for its handshake.
    pub handshake_timeout: Duration,
    /// The most bytes of one request's header section.
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            streams: 100,
            per_network: 256,
            handshakes: 64,
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Connections open per client network.
#[derive(Default, Clone)]
pub(crate) struct PerNetwork {
    open: Arc<Mutex<HashMap<ClientNet, usize>>>,
}

/// One connection's place in its network's count, given back when dropped.
pub(crate) struct NetworkSlot {
    of: PerNetwork,
    net: ClientNet,
}

impl PerNetwork {
    /// A place for a connection from `ip`, if its network holds fewer than `max`.
    pub fn take(&self, ip: IpAddr, max: usize) -> Option<NetworkSlot> {
        let net = ClientNet::of(ip, 24, 56);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(net).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(NetworkSlot {
            of: self.clone(),
            net,
        })
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        self.open.lock().map(|m| m.len()).unwrap_or(0)
    }
}

impl Drop for NetworkSlot {
    fn drop(&mut self) {
        let mut open = self.of.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.net) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.net);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_holds_at_most_its_share_and_gets_it_back() {
        let p = PerNetwork::default();
        let a = p.take("127.5.0.1".parse().unwrap(), 2);
        let b = p.take("127.5.0.2".parse().unwrap(), 2);
        assert!(a.is_some() && b.is_some());
        assert!(
            p.take("127.5.0.3".parse().unwrap(), 2).is_none(),
            "same /24"
        );
        assert!(p.take("127.6.0.1".parse().unwrap(), 2).is_some(), "another");
        drop(a);
        assert!(p.take("127.5.0.3".parse().unwrap(), 2).is_some());
        drop(b);
        assert_eq!(p.count(), 0, "nothing kept for the gone");
    }
}

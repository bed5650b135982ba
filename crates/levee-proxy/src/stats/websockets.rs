//! What the WebSockets did (upgrade.rs), counted as they go and exported with
//! `/metrics`; the open ones are counted by levee-websocket's `Tunnels`.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The label pairs of a family (stats.rs has the same).
type Labels = Vec<(&'static str, &'static str)>;

/// What the WebSockets did (upgrade.rs), for `/metrics`.
#[derive(Default)]
pub(crate) struct WebSocketStats {
    opened: AtomicU64,
    closed: [AtomicU64; levee_websocket::Ended::ALL.len()],
    bytes: [AtomicU64; 2],
    refused: [AtomicU64; 2],
}

impl WebSocketStats {
    pub fn opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self, ended: levee_websocket::Ended) {
        if let Some(i) = levee_websocket::Ended::ALL.iter().position(|e| *e == ended) {
            self.closed[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes relayed from the client (`up`) and to it (`down`).
    pub fn bytes(&self, up: u64, down: u64) {
        if up > 0 {
            self.bytes[0].fetch_add(up, Ordering::Relaxed);
        }
        if down > 0 {
            self.bytes[1].fetch_add(down, Ordering::Relaxed);
        }
    }

    pub fn refused(&self, full: levee_websocket::Full) {
        let i = usize::from(full == levee_websocket::Full::Total);
        self.refused[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn register(&self, r: &mut Registry) {
        let opened = Counter::<u64>::default();
        opened.inc_by(self.opened.load(Ordering::Relaxed));
        r.register(
            "websockets_opened",
            "WebSockets opened (upgraded and relayed)",
            opened,
        );
        let closed = Family::<Labels, Counter>::default();
        for (e, n) in levee_websocket::Ended::ALL.iter().zip(&self.closed) {
            closed
                .get_or_create(&vec![("reason", e.as_str())])
                .inc_by(n.load(Ordering::Relaxed));
        }
        r.register(
            "websockets_closed",
            "WebSockets closed, by what ended them (client, backend, idle, stopped, error)",
            closed,
        );
        let bytes = Family::<Labels, Counter>::default();
        for (d, n) in ["up", "down"].iter().zip(&self.bytes) {
            bytes
                .get_or_create(&vec![("direction", *d)])
                .inc_by(n.load(Ordering::Relaxed));
        }
        r.register(
            "websocket_bytes",
            "Bytes relayed by WebSockets: up from clients, down to them",
            bytes,
        );
        let refused = Family::<Labels, Counter>::default();
        for (w, n) in ["network", "total"].iter().zip(&self.refused) {
            refused
                .get_or_create(&vec![("limit", *w)])
                .inc_by(n.load(Ordering::Relaxed));
        }
        r.register(
            "websockets_refused",
            "Upgrades refused before the backend: the client network's limit, or levee's",
            refused,
        );
    }
}

//! HTTP/3's counters (levee-h3's `Stats`, one per endpoint), summed for `/metrics`.

use std::sync::atomic::Ordering;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The label pairs of a family (stats.rs has the same).
type Labels = Vec<(&'static str, &'static str)>;

/// HTTP/3: connections open, Retries sent, connections refused by why (levee-h3).
pub(super) fn register(r: &mut Registry, quic: &[std::sync::Arc<levee_h3::Stats>]) {
    let sum = |f: fn(&levee_h3::Stats) -> u64| quic.iter().map(|q| f(q)).sum::<u64>();
    let open: Gauge = Gauge::default();
    open.set(i64::try_from(sum(|q| q.open.load(Ordering::Relaxed) as u64)).unwrap_or(i64::MAX));
    r.register(
        "http3_connections_open",
        "HTTP/3 (QUIC) connections open now",
        open,
    );
    let retries = Counter::<u64>::default();
    retries.inc_by(sum(|q| q.retries.load(Ordering::Relaxed)));
    r.register(
        "http3_retries",
        "QUIC Retries sent: clients asked to prove their address while many handshakes were under way",
        retries,
    );
    let refused = Family::<Labels, Counter>::default();
    for (why, n) in [
        (
            "network",
            sum(|q| q.refused_network.load(Ordering::Relaxed)),
        ),
        (
            "max_connections",
            sum(|q| q.refused_full.load(Ordering::Relaxed)),
        ),
    ] {
        refused.get_or_create(&vec![("reason", why)]).inc_by(n);
    }
    r.register(
        "http3_refused",
        "QUIC connections refused at their handshake: their client network at its bound, or levee's max_connections taken",
        refused,
    );
}

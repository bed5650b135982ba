//! The fleet as this node sees it (levee-limits' fleet.rs): only with the Redis tier,
//! where every node shares each backend's capacity.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub(super) fn register_fleet(r: &mut Registry, backends: &[&levee_limits::Limiter]) {
    let fleets: Vec<levee_limits::FleetStats> =
        backends.iter().filter_map(|b| b.fleet_stats()).collect();
    if fleets.is_empty() {
        return;
    }
    let sum = |f: fn(&levee_limits::FleetStats) -> usize| fleets.iter().map(f).sum::<usize>();
    let most = |f: fn(&levee_limits::FleetStats) -> usize| fleets.iter().map(f).max().unwrap_or(0);
    let gauges = [
        (
            "fleet_nodes",
            "levee nodes sharing the backend through Redis at the last renewal, this one included",
            most(|s| s.nodes),
        ),
        (
            "fleet_share",
            "Backend slots this node holds of the fleet's: its limit now",
            sum(|s| s.share),
        ),
        (
            "fleet_capacity",
            "Backend slots of the whole fleet (backend_max_concurrency, or the least any node measured)",
            sum(|s| s.capacity),
        ),
        (
            "fleet_in_flight",
            "Requests at the backend from every node, as the last renewal told",
            sum(|s| s.in_flight),
        ),
        (
            "fleet_people_waiting",
            "People's requests (sessions, revalidations) waiting for a backend slot on every node",
            sum(|s| s.people_waiting),
        ),
        (
            "fleet_alone",
            "1 while Redis is unreachable past this node's lease: it runs on the capacity / the nodes it last knew",
            most(|s| usize::from(s.alone)),
        ),
    ];
    for (name, help, value) in gauges {
        let g = Gauge::<i64>::default();
        g.set(i64::try_from(value).unwrap_or(i64::MAX));
        r.register(name, help, g);
    }
    let renewals = Counter::<u64>::default();
    renewals.inc_by(fleets.iter().map(|s| s.renewals).sum());
    r.register(
        "fleet_renewals",
        "Lease renewals this node made through Redis (about one a second; sooner when a person waits, or anonymous work wants more, at most ten a second)",
        renewals,
    );
}

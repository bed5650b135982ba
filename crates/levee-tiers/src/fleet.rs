//! The fleet's one judgment of a backend: each backend limiter's lease renewed through
//! the shared Redis (levee-limits' fleet.rs decides, levee-redis's fleet.rs keeps the
//! leases). A task per backend on the tiers' runtime renews about every second, at once
//! when a person waits or another node nudges (never more often than every `PACE`),
//! and soon when anonymous work wants more or a slot freed while someone wants one
//! (never more often than every `DEMAND_PACE`).

use std::time::{Duration, Instant};

use levee_limits::fleet::{Peer, Report, LEASE, RENEW_EVERY};
use levee_limits::Limiter;
use levee_redis::Redis;

/// The least time between two renewals when a person waits or a node nudges: a
/// renewal is a Redis round trip; a person's wait grows by at most this.
const PACE: Duration = Duration::from_millis(10);
/// The least time between two renewals for anonymous demand alone. Woken at `PACE` by
/// every crawler's refusal, each node of a storm renewed about 90 times a second: a
/// script reading every node's report each time (N² work in Redis; levee took 1.6-2.3
/// times one node's CPU at two nodes, on the machine the backend runs on), for lanes
/// that people's latency, not the shares, held back.
const DEMAND_PACE: Duration = Duration::from_millis(100);

pub(crate) async fn renew(redis: Redis, scope: String, limiter: Limiter) {
    let wake = limiter.fleet_wake();
    let demand = limiter.fleet_demand();
    let nudged = redis.fleet_listen(&scope);
    limiter.join_fleet();
    let mut last: Option<Instant> = None;
    loop {
        if let Some(at) = last {
            let urgent = tokio::select! {
                _ = tokio::time::sleep(RENEW_EVERY) => true,
                _ = wake.notified() => true,
                _ = nudged.notified() => true,
                _ = demand.notified() => false,
            };
            if !urgent && at.elapsed() < DEMAND_PACE {
                // A person's wait or another node's nudge ends the slower pace.
                tokio::select! {
                    _ = tokio::time::sleep_until((at + DEMAND_PACE).into()) => {}
                    _ = wake.notified() => {}
                    _ = nudged.notified() => {}
                }
            }
            if at.elapsed() < PACE {
                tokio::time::sleep_until((at + PACE).into()).await;
            }
        }
        last = Some(Instant::now());
        // What a node asks for is reckoned from the last view of the others; when the
        // view this renewal brings changes it (a person now waits elsewhere, a node
        // left), it asks again at once rather than a second later.
        let mut asked = None;
        for _ in 0..2 {
            let ask = limiter.fleet_ask(redis.node());
            if asked.is_some_and(|(want, grant)| ask.want == want || ask.want == grant) {
                break;
            }
            let grant = renew_once(&redis, &scope, &limiter, &ask).await;
            match grant {
                Some(grant) => asked = Some((ask.want, grant)),
                None => break,
            }
        }
    }
}

/// One renewal: the lease asked for, its answer applied. The grant, or None when Redis
/// did not answer.
async fn renew_once(
    redis: &Redis,
    scope: &str,
    limiter: &Limiter,
    ask: &levee_limits::Ask,
) -> Option<usize> {
    let line = ask.report.to_line();
    let lease = redis
        .fleet_renew(scope, ask.want, ask.capacity, &line, LEASE)
        .await;
    let Some(lease) = lease else {
        if limiter.fleet_unreachable() {
            let s = limiter.fleet_stats();
            tracing::warn!(
                backend = %scope,
                limit = limiter.limit(),
                nodes = s.map_or(1, |s| s.nodes),
                "the fleet's Redis is unreachable past this node's lease: it takes the backend's capacity / the {} node(s) it last knew ({} slots) until Redis is back",
                s.map_or(1, |s| s.nodes),
                limiter.limit()
            );
        }
        return None;
    };
    let grant = lease.grant;
    let peers = lease
        .others
        .into_iter()
        .filter_map(|(node, grant, line)| {
            Some(Peer {
                node,
                grant,
                report: Report::from_line(&line)?,
            })
        })
        .collect();
    let applied = limiter.apply_fleet(redis.node(), lease.grant, peers);
    if applied.rejoined {
        tracing::warn!(backend = %scope, "the fleet's Redis is reachable again: this node shares the backend with the fleet");
    }
    if applied.nudge {
        redis.fleet_nudge(scope).await;
    }
    Some(grant)
}

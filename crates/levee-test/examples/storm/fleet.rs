//! The fleet's limit while it runs (storm.sh's `--fleet-metrics`, issue 51): every
//! node's `levee_fleet_capacity` from its admin `/metrics`, once a second. The backend's
//! concurrency is held to the limit the fleet had at that moment; the limit adapts, so
//! the value at the end of a run is no measure of what it was during the storm.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::time::sleep_until;

use super::http::Conn;
use super::stats::PHASES;
use super::wiki::LOCALHOST;

/// Between two samples: /metrics is a few hundred lines, read from every node.
const EVERY: Duration = Duration::from_secs(1);

/// `levee_fleet_capacity`'s value in a /metrics text.
fn capacity(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("levee_fleet_capacity "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Samples every node from `start` to `end`: per phase (`storm_from` on: the storm)
/// the most and the least fleet capacity any node reported, and the samples taken.
pub async fn sample(
    nodes: Vec<(SocketAddr, String)>,
    start: Instant,
    storm_from: Instant,
    end: Instant,
) -> Value {
    let mut phases: [(Vec<u64>, u64); 2] = Default::default();
    let mut conns: Vec<(Conn, String)> = nodes
        .into_iter()
        .map(|(addr, path)| (Conn::new(addr, LOCALHOST, Duration::from_secs(1)), path))
        .collect();
    let mut tick = start;
    sleep_until(tick.into()).await;
    while tick < end {
        let (samples, failed) = &mut phases[usize::from(tick >= storm_from)];
        for (conn, path) in conns.iter_mut() {
            match conn.get(path, &[]).await {
                Ok(r) if r.status == 200 => match capacity(&r.body) {
                    Some(c) => samples.push(c),
                    None => *failed += 1,
                },
                _ => *failed += 1,
            }
        }
        tick += EVERY;
        sleep_until(tick.into()).await;
    }
    let mut m = serde_json::Map::new();
    for ((samples, failed), name) in phases.iter().zip(PHASES) {
        m.insert(
            name.to_string(),
            json!({
                "samples": samples.len(),
                "failed": failed,
                "max": samples.iter().max(),
                "min": samples.iter().min(),
            }),
        );
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capacity_is_read_from_metrics() {
        let text =
            b"# HELP levee_fleet_capacity x\nlevee_fleet_capacity_x 9\nlevee_fleet_capacity 6\n";
        assert_eq!(capacity(text), Some(6));
        assert_eq!(capacity(b"levee_fleet_nodes 2\n"), None);
    }
}

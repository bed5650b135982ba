//! How busy php-fpm is: its status page with every process (`pm.status_path`, `?json&full`)
//! sampled every `EVERY` through an nginx of storm-board.sh's that no front is given.
//!
//! Not storm/busy.rs's summary counts: levee keeps its FastCGI connections alive, and a
//! php-fpm worker holding an idle kept-alive connection waits in "Reading headers", which
//! php-fpm 8.2's summary counts as an active process (seen here: 1 of 4 "active" with
//! nothing to do; under load it even said 24 active of 24 in a static pool of 4, and 10 of
//! 10 while its process list showed 4 running); `accepted conn` counts connections, not
//! requests. So a worker is busy here while it runs a request
//! (from "Getting request information" to "Finishing"), and requests are the sum of each
//! process's own count.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::time::sleep_until;

use super::http::Conn;
use super::stats::PHASES;

/// Between two samples: 5 a second, a few hundred per phase.
const EVERY: Duration = Duration::from_millis(200);

/// The states of a worker running a request (php-fpm's fpm_request.c); the others are
/// "Idle" (waiting for a connection) and "Reading headers" (for a request on it).
const BUSY: &[&str] = &[
    "Getting request information",
    "Running",
    "Ending",
    "Finishing",
];

#[derive(Default)]
struct Phase {
    /// (busy processes, processes) per sample.
    samples: Vec<(u64, u64)>,
    /// The processes' summed request counts at the first and last sample.
    requests: Option<(u64, u64)>,
    failed: u64,
    why: Option<String>,
}

impl Phase {
    fn to_json(&self) -> Value {
        let n = self.samples.len();
        if n == 0 {
            return json!({ "samples": 0, "failed": self.failed, "why": self.why });
        }
        let share: f64 = self
            .samples
            .iter()
            .map(|&(b, t)| b as f64 / t.max(1) as f64)
            .sum::<f64>()
            / n as f64;
        let full = self.samples.iter().filter(|&&(b, t)| b >= t).count();
        let busy: u64 = self.samples.iter().map(|s| s.0).sum();
        json!({
            "samples": n,
            "failed": self.failed,
            "why": self.why,
            "busy_pct": round1(100.0 * share),
            "all_busy_pct": round1(100.0 * full as f64 / n as f64),
            "active_mean": round1(busy as f64 / n as f64),
            "active_max": self.samples.iter().map(|s| s.0).max(),
            "workers": self.samples.iter().map(|s| s.1).max(),
            "requests_between_samples": self.requests.map(|(a, b)| b.saturating_sub(a)),
        })
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// `http://127.0.0.1:PORT/PATH`: the status page's address and path (`?json&full` added).
pub fn parse_url(url: &str) -> Option<(SocketAddr, String)> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let addr: SocketAddr = host.parse().ok()?;
    let sep = if path.contains('?') { '&' } else { '?' };
    (addr.ip().is_loopback()).then(|| (addr, format!("/{path}{sep}json&full")))
}

/// Samples from `start` to `end`; a sample belongs to the phase it was taken in
/// (`storm_from` on: the storm). JSON by phase, in storm/busy.rs's shape.
pub async fn sample(
    target: SocketAddr,
    path: String,
    local: IpAddr,
    start: Instant,
    storm_from: Instant,
    end: Instant,
) -> Value {
    let mut phases: [Phase; 2] = Default::default();
    // Short: a status page that does not answer at once is a failed sample, not a wait.
    let mut conn = Conn::new(target, local, Duration::from_secs(1));
    sleep_until(start.into()).await;
    let mut tick = start;
    while tick < end {
        let phase = &mut phases[usize::from(tick >= storm_from)];
        let why = match conn.get(&path, &[]).await {
            Ok(r) if r.status == 200 => match read(&r.body) {
                Some((busy, total, requests)) => {
                    phase.samples.push((busy, total));
                    let first = phase.requests.map_or(requests, |a| a.0);
                    phase.requests = Some((first, requests));
                    None
                }
                None => Some(format!("not php-fpm's full JSON: {:.200}", r.text())),
            },
            Ok(r) => Some(format!("HTTP {}", r.status)),
            Err(e) => Some(format!("{e:?}")),
        };
        if let Some(why) = why {
            phase.failed += 1;
            phase.why.get_or_insert(why);
        }
        tick += EVERY;
        sleep_until(tick.into()).await;
    }
    let mut m = serde_json::Map::new();
    for (p, name) in phases.iter().zip(PHASES) {
        m.insert(name.to_string(), p.to_json());
    }
    Value::Object(m)
}

/// Busy processes, processes, and their summed request counts, from `?json&full`.
fn read(body: &[u8]) -> Option<(u64, u64, u64)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let procs = v["processes"].as_array()?;
    let busy = procs
        .iter()
        .filter(|p| p["state"].as_str().is_some_and(|s| BUSY.contains(&s)))
        .count();
    let requests = procs.iter().filter_map(|p| p["requests"].as_u64()).sum();
    Some((busy as u64, procs.len() as u64, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_states() {
        let (addr, path) = parse_url("http://127.0.0.1:8080/fpm-status").expect("a status URL");
        assert_eq!(addr.port(), 8080);
        assert_eq!(path, "/fpm-status?json&full");
        assert!(parse_url("http://10.0.0.1:80/s").is_none());
        let body = br#"{"active processes":3,"total processes":4,"processes":[
            {"state":"Idle","requests":5},{"state":"Reading headers","requests":7},
            {"state":"Running","requests":2},{"state":"Finishing","requests":1}]}"#;
        assert_eq!(read(body), Some((2, 4, 15)));
    }
}

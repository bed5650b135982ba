//! How busy the backend is: php-fpm's status page (`pm.status_path`, JSON) for the wiki's
//! pool, sampled every `EVERY` through the site's nginx on a port no front is given
//! (storm.sh's `--fpm-status`). The share of the pool's workers at work is what a crawler
//! storm takes from the people: a front that keeps them all busy on crawlers leaves
//! people waiting in php-fpm's queue.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::time::sleep_until;

use super::http::Conn;
use super::stats::PHASES;

/// Between two samples: 5 a second, a few hundred per phase.
const EVERY: Duration = Duration::from_millis(200);

/// One phase's samples.
#[derive(Default)]
struct Phase {
    /// (active processes, total processes) per sample.
    samples: Vec<(u64, u64)>,
    /// php-fpm's `accepted conn` at the first and last sample: requests it took.
    accepted: Option<(u64, u64)>,
    /// Samples that failed (no answer, not the JSON expected).
    failed: u64,
    /// The first failure, for the report.
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
            .map(|&(a, t)| a as f64 / t.max(1) as f64)
            .sum::<f64>()
            / n as f64;
        let full = self.samples.iter().filter(|&&(a, t)| a >= t).count();
        let active: u64 = self.samples.iter().map(|s| s.0).sum();
        let requests = self
            .accepted
            .map(|(first, last)| last.saturating_sub(first));
        json!({
            "samples": n,
            "failed": self.failed,
            "why": self.why,
            "busy_pct": round1(100.0 * share),
            "all_busy_pct": round1(100.0 * full as f64 / n as f64),
            "active_mean": round1(active as f64 / n as f64),
            "active_max": self.samples.iter().map(|s| s.0).max(),
            "workers": self.samples.iter().map(|s| s.1).max(),
            "requests_between_samples": requests,
        })
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// `http://127.0.0.1:PORT/PATH`: the status page's address and path (`?json` added).
pub fn parse_url(url: &str) -> Option<(SocketAddr, String)> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let addr: SocketAddr = host.parse().ok()?;
    let sep = if path.contains('?') { '&' } else { '?' };
    (addr.ip().is_loopback()).then(|| (addr, format!("/{path}{sep}json")))
}

/// Samples from `start` to `end`; a sample belongs to the phase it was taken in
/// (`storm_from` on: the storm). JSON by phase.
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
        match conn.get(&path, &[]).await {
            Ok(r) if r.status == 200 => match read(&r.body) {
                Some((active, total, accepted)) => {
                    phase.samples.push((active, total));
                    let first = phase.accepted.map_or(accepted, |a| a.0);
                    phase.accepted = Some((first, accepted));
                }
                None => fail(phase, format!("not php-fpm's JSON: {:.200}", r.text())),
            },
            Ok(r) => fail(phase, format!("HTTP {}", r.status)),
            Err(e) => fail(phase, format!("{e:?}")),
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

fn fail(phase: &mut Phase, why: String) {
    phase.failed += 1;
    phase.why.get_or_insert(why);
}

/// `active processes`, `total processes` and `accepted conn` of php-fpm's JSON status.
fn read(body: &[u8]) -> Option<(u64, u64, u64)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let n = |k: &str| v[k].as_u64();
    Some((
        n("active processes")?,
        n("total processes")?,
        n("accepted conn")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_status() {
        let (addr, path) = parse_url("http://127.0.0.1:8080/fpm-status").expect("a status URL");
        assert_eq!(addr.port(), 8080);
        assert_eq!(path, "/fpm-status?json");
        assert!(parse_url("http://10.0.0.1:80/s").is_none());
        let body = br#"{"pool":"unix","accepted conn":7,"active processes":3,"total processes":4}"#;
        assert_eq!(read(body), Some((3, 4, 7)));
    }
}

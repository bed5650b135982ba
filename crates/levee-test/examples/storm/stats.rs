//! What each population saw, per phase: counts by outcome and exact latency percentiles
//! (every latency kept: a few hundred thousand numbers at most).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::http::{Failure, Reply};

/// The phases; a request belongs to the one it started in.
pub const PHASES: [&str; 2] = ["fair", "storm"];

#[derive(Default, Clone)]
pub struct Tally {
    pub requests: u64,
    pub s2xx: u64,
    pub s3xx: u64,
    pub s429: u64,
    pub s503: u64,
    /// Any other status (4xx, 5xx but 429 and 503).
    pub other_status: u64,
    /// Those statuses, by code.
    others: BTreeMap<u16, u64>,
    pub connect_errors: u64,
    pub timeouts: u64,
    pub io_errors: u64,
    /// Microseconds, every request (errors at the time they failed).
    lat: Vec<u32>,
    /// Microseconds, 429 and 503 answers only.
    refusal_lat: Vec<u32>,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Tally {
    pub fn record(&mut self, result: &Result<Reply, Failure>, took: Duration) {
        self.requests += 1;
        self.lat.push(micros(took));
        match result {
            Ok(r) => match r.status {
                200..=299 => self.s2xx += 1,
                300..=399 => self.s3xx += 1,
                429 | 503 => {
                    if r.status == 429 {
                        self.s429 += 1;
                    } else {
                        self.s503 += 1;
                    }
                    self.refusal_lat.push(micros(took));
                }
                other => {
                    self.other_status += 1;
                    *self.others.entry(other).or_default() += 1;
                }
            },
            Err(Failure::Connect) => self.connect_errors += 1,
            Err(Failure::Timeout) => self.timeouts += 1,
            Err(Failure::Io) => self.io_errors += 1,
        }
    }

    pub fn merge(&mut self, o: &Tally) {
        self.requests += o.requests;
        self.s2xx += o.s2xx;
        self.s3xx += o.s3xx;
        self.s429 += o.s429;
        self.s503 += o.s503;
        self.other_status += o.other_status;
        for (k, v) in &o.others {
            *self.others.entry(*k).or_default() += v;
        }
        self.connect_errors += o.connect_errors;
        self.timeouts += o.timeouts;
        self.io_errors += o.io_errors;
        self.lat.extend_from_slice(&o.lat);
        self.refusal_lat.extend_from_slice(&o.refusal_lat);
    }

    pub fn ok(&self) -> u64 {
        self.s2xx + self.s3xx
    }

    pub fn errors(&self) -> u64 {
        self.connect_errors + self.timeouts + self.io_errors
    }

    /// `secs`: how long the population ran in this phase, for the rates.
    pub fn to_json(&self, secs: f64) -> Value {
        let pct = |n: u64| {
            if self.requests == 0 {
                Value::Null
            } else {
                json!(round2(100.0 * n as f64 / self.requests as f64))
            }
        };
        let per_s = |n: u64| {
            if secs > 0.0 {
                json!(round2(n as f64 / secs))
            } else {
                Value::Null
            }
        };
        json!({
            "requests": self.requests,
            "ok": self.ok(),
            "ok_pct": pct(self.ok()),
            "s2xx": self.s2xx,
            "s2xx_pct": pct(self.s2xx),
            "s3xx": self.s3xx,
            "s429": self.s429,
            "s503": self.s503,
            "other_status": self.other_status,
            "other_statuses": self.others.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "connect_errors": self.connect_errors,
            "timeouts": self.timeouts,
            "io_errors": self.io_errors,
            "errors": self.errors(),
            "p50_ms": percentile_ms(&self.lat, 50.0),
            "p99_ms": percentile_ms(&self.lat, 99.0),
            "max_ms": percentile_ms(&self.lat, 100.0),
            "ok_per_s": per_s(self.ok()),
            "refused_per_s": per_s(self.s429 + self.s503),
            "refusal_p99_ms": percentile_ms(&self.refusal_lat, 99.0),
            "secs": round2(secs),
        })
    }

    pub fn refusal_latencies(&self) -> &[u32] {
        &self.refusal_lat
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// The nearest-rank percentile of microsecond samples, in ms (null when empty).
pub fn percentile_ms(samples: &[u32], p: f64) -> Value {
    if samples.is_empty() {
        return Value::Null;
    }
    let mut v = samples.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    let i = rank.clamp(1, v.len()) - 1;
    json!(round2(f64::from(v[i]) / 1000.0))
}

/// What became of the edits saved in one phase.
#[derive(Default, Clone)]
pub struct Edits {
    /// Saves tried.
    pub saves: u64,
    /// The API answered `"result":"Success"`.
    pub stored: u64,
    /// The editor's own next view of the page (with their cookies) showed it.
    pub shown_editor: u64,
    /// An anonymous reader saw it within the bound.
    pub shown_anonymous: u64,
    /// Both: the editor at once and anonymous readers within the bound.
    pub shown_both: u64,
    /// Microseconds from the save's answer to the first anonymous view showing it.
    anon_delay: Vec<u32>,
    save_lat: Vec<u32>,
    /// Why a save or check failed, first few only.
    pub problems: Vec<String>,
}

impl Edits {
    pub fn save_took(&mut self, d: Duration) {
        self.save_lat.push(micros(d));
    }

    pub fn anonymous_after(&mut self, d: Duration) {
        self.shown_anonymous += 1;
        self.anon_delay.push(micros(d));
    }

    pub fn problem(&mut self, p: String) {
        if self.problems.len() < 5 {
            self.problems.push(p);
        }
    }

    pub fn merge(&mut self, o: &Edits) {
        self.saves += o.saves;
        self.stored += o.stored;
        self.shown_editor += o.shown_editor;
        self.shown_anonymous += o.shown_anonymous;
        self.shown_both += o.shown_both;
        self.anon_delay.extend_from_slice(&o.anon_delay);
        self.save_lat.extend_from_slice(&o.save_lat);
        for p in &o.problems {
            self.problem(p.clone());
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "saves": self.saves,
            "stored": self.stored,
            "shown_editor": self.shown_editor,
            "shown_anonymous": self.shown_anonymous,
            "shown_both": self.shown_both,
            "save_p50_ms": percentile_ms(&self.save_lat, 50.0),
            "save_p99_ms": percentile_ms(&self.save_lat, 99.0),
            "anonymous_delay_max_ms": percentile_ms(&self.anon_delay, 100.0),
            "problems": self.problems,
        })
    }
}

/// Everything one task saw, by phase.
#[derive(Default, Clone)]
pub struct Seen {
    pub tally: [Tally; 2],
    pub edits: [Edits; 2],
}

impl Seen {
    pub fn merge(&mut self, o: &Seen) {
        for i in 0..2 {
            self.tally[i].merge(&o.tally[i]);
            self.edits[i].merge(&o.edits[i]);
        }
    }
}

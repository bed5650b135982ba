//! The audit's result: what `--json` prints (the schema of issue 24), the site summary
//! and the fixes, and the text for a terminal (one screen, colour when it is one).

use std::fmt::Write as _;

use serde::Serialize;

use crate::checks::Reason;
use crate::system::Check;

/// The whole audit.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub urls: Vec<UrlReport>,
    /// The application most pages showed, with its evidence.
    pub app: Option<String>,
    pub app_evidence: Option<String>,
    /// The preset for it (`levee serve --preset`), when levee has one.
    pub preset: Option<String>,
    pub summary: Summary,
    pub fixes: Vec<String>,
    /// `--system`: the host's checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<Vec<Check>>,
}

/// One URL.
#[derive(Debug, Clone, Serialize)]
pub struct UrlReport {
    pub url: String,
    pub status: Option<u16>,
    /// A plain RFC 9111 shared cache may store it and reuse it without asking.
    pub storable: bool,
    pub reasons: Vec<Reason>,
    pub app: Option<String>,
    /// What `levee serve` does with it under the configuration given.
    pub levee: LeveeVerdict,
    /// The same with the proposed flags added (`summary.with_preset.flags`): the
    /// application's preset, else an anonymous TTL when pages are kept out of caches.
    pub with_preset: Option<LeveeVerdict>,
    /// The cookie this page gives a visitor that makes their later requests pass (under
    /// the proposed flags when there are any): `None` when a returning visitor is served
    /// as a new one.
    pub returning_passes_with: Option<String>,
    /// The first request's time, to the end of the body.
    pub ms: Option<f64>,
    /// Why it could not be audited.
    pub error: Option<String>,
}

/// levee's verdict, from `levee_visitor::verdict`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeveeVerdict {
    /// HIT (after the first request), MICRO (micro-cached), REVALIDATED, PASS, NONE.
    pub result: &'static str,
    pub reason: String,
    /// How long a stored copy answers by itself.
    pub ttl_s: Option<u64>,
}

impl LeveeVerdict {
    pub fn cached(&self) -> bool {
        matches!(self.result, "HIT" | "MICRO")
    }

    fn text(&self) -> String {
        match (self.result, self.ttl_s) {
            ("HIT", Some(t)) => format!("HIT {t} s ({})", self.reason),
            ("MICRO", Some(t)) => format!("MICRO-cached {t} s"),
            ("REVALIDATED", _) => "stored, REVALIDATED each time".into(),
            (r, _) => format!("{r} ({})", self.reason),
        }
    }
}

/// The site as a whole.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub pages: usize,
    pub audited: usize,
    /// Pages levee answers from its cache after the first request, and their share.
    pub levee_cached: usize,
    pub share: f64,
    pub storable_by_shared_caches: usize,
    pub median_ms: Option<f64>,
    /// Measured time of all pages over the time with levee, a hit taken as `hit_ms`.
    pub projected_speedup: Option<f64>,
    pub hit_ms: f64,
    /// The same with the proposed preset.
    pub with_preset: Option<PresetSummary>,
    pub always_pass: Vec<Passing>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PresetSummary {
    /// The flags proposed: `--preset NAME`, or `--anonymous-ttl 60s`.
    pub flags: String,
    pub levee_cached: usize,
    pub share: f64,
    pub projected_speedup: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Passing {
    pub url: String,
    pub reason: String,
}

/// The time a hit is taken to cost in the projection: levee answers one from memory in
/// well under a millisecond on loopback; 1 ms leaves room for the network.
pub const HIT_MS: f64 = 1.0;

/// (pages cached, share, projected speed-up) of `urls` under the verdict `pick` gives.
pub fn project(
    urls: &[UrlReport],
    pick: impl Fn(&UrlReport) -> Option<&LeveeVerdict>,
) -> (usize, f64, Option<f64>) {
    let audited: Vec<&UrlReport> = urls.iter().filter(|u| u.error.is_none()).collect();
    let cached = audited
        .iter()
        .filter(|u| pick(u).is_some_and(LeveeVerdict::cached))
        .count();
    let share = if audited.is_empty() {
        0.0
    } else {
        cached as f64 / audited.len() as f64
    };
    let now: f64 = audited.iter().filter_map(|u| u.ms).sum();
    let with: f64 = audited
        .iter()
        .filter_map(|u| {
            let ms = u.ms?;
            Some(if pick(u).is_some_and(LeveeVerdict::cached) {
                HIT_MS.min(ms)
            } else {
                ms
            })
        })
        .sum();
    let speedup = (with > 0.0).then(|| now / with);
    (cached, share, speedup)
}

pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn verdict(&self, v: &LeveeVerdict) -> String {
        let code = match v.result {
            "HIT" | "MICRO" => "32",
            "REVALIDATED" => "33",
            _ => "31",
        };
        self.wrap(code, &v.text())
    }
}

fn path_of(url: &str) -> &str {
    url.strip_prefix("http://")
        .and_then(|r| r.find('/').map(|i| &r[i..]))
        .unwrap_or(url)
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The text report.
pub fn text(r: &Report, site: &str, settings_note: &str, colour: bool) -> String {
    let p = Paint(colour);
    let mut o = String::new();
    let app = match (&r.app, &r.app_evidence) {
        (Some(a), Some(e)) => format!("{a} ({e})"),
        (Some(a), None) => a.clone(),
        _ => "application not recognised".into(),
    };
    let _ = writeln!(o, "{} {site}: {app}", p.wrap("1", "levee doctor"));
    let _ = writeln!(o, "levee's settings: {settings_note}");
    let _ = writeln!(
        o,
        "(levee: HIT = from its cache after the first request, for that long)\n"
    );
    for u in &r.urls {
        let path = short(path_of(&u.url), 30);
        if let Some(e) = &u.error {
            let _ = writeln!(o, "  {path:<30}  {}", p.wrap("31", e));
            continue;
        }
        let status = u.status.map_or("-".into(), |s| s.to_string());
        let ms = u.ms.map_or("-".into(), |m| format!("{m:.0} ms"));
        let shared = if u.storable { "yes" } else { "no" };
        let _ = write!(
            o,
            "  {path:<30} {status} {ms:>6}  shared cache: {shared:<3}  levee: {}",
            p.verdict(&u.levee)
        );
        if let Some(w) = &u.with_preset {
            if w != &u.levee {
                let _ = write!(o, "  proposed: {}", p.verdict(w));
            }
        }
        if let Some(c) = &u.returning_passes_with {
            let _ = write!(o, "  returning visitors: PASS (they hold {c})");
        }
        let _ = writeln!(o);
        if !u.reasons.is_empty() {
            let list: Vec<String> = u
                .reasons
                .iter()
                .map(|x| {
                    if x.levee_fixes {
                        format!("{}*", x.id)
                    } else {
                        x.id.to_string()
                    }
                })
                .collect();
            let _ = writeln!(o, "      {}", p.wrap("2", &list.join(", ")));
        }
    }
    let mut seen = Vec::new();
    let details: Vec<&Reason> = r
        .urls
        .iter()
        .flat_map(|u| &u.reasons)
        .filter(|x| {
            let new = !seen.contains(&x.id);
            seen.push(x.id);
            new
        })
        .collect();
    if !details.is_empty() {
        let _ = writeln!(o, "\nWhat the reasons mean (* levee makes up for it):");
        for x in details {
            let _ = writeln!(o, "  {:<15} {}", x.id, x.detail);
        }
    }
    summary(&mut o, r, &p);
    if !r.fixes.is_empty() {
        let _ = writeln!(o, "\n{}", p.wrap("1", "What to change:"));
        for f in &r.fixes {
            let _ = writeln!(o, "  - {f}");
        }
    }
    if let Some(checks) = &r.system {
        system(&mut o, checks, &p);
    }
    o
}

fn summary(o: &mut String, r: &Report, p: &Paint) {
    let s = &r.summary;
    let _ = writeln!(o, "\n{}", p.wrap("1", "Summary:"));
    let speed = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.1}x"));
    let _ = writeln!(
        o,
        "  {} of {} pages served from levee's cache after the first request ({:.0}%); {} storable by any shared cache",
        s.levee_cached,
        s.audited,
        s.share * 100.0,
        s.storable_by_shared_caches
    );
    let _ = writeln!(
        o,
        "  measured median {}; projected speed-up {} (a hit taken as {} ms)",
        s.median_ms.map_or("-".into(), |m| format!("{m:.0} ms")),
        speed(s.projected_speedup),
        s.hit_ms
    );
    if let Some(w) = &s.with_preset {
        let _ = writeln!(
            o,
            "  with {}: {} pages cached ({:.0}%), speed-up {}",
            w.flags,
            w.levee_cached,
            w.share * 100.0,
            speed(w.projected_speedup)
        );
    }
    for a in &s.always_pass {
        let _ = writeln!(o, "  always passes: {} ({})", path_of(&a.url), a.reason);
    }
}

fn system(o: &mut String, checks: &[Check], p: &Paint) {
    let _ = writeln!(o, "\n{}", p.wrap("1", "This host under load:"));
    for c in checks {
        let mark = if c.ok {
            p.wrap("32", "ok  ")
        } else {
            p.wrap("31", "FIX ")
        };
        let _ = writeln!(
            o,
            "  {mark}{:<40} {} (recommended {})",
            c.name, c.current, c.recommended
        );
        if !c.ok && !c.command.is_empty() {
            let _ = writeln!(o, "        {}: {}", c.why, c.command);
        }
    }
}

/// The host's checks alone (`--system` without URLs).
pub fn system_text(checks: &[Check], colour: bool) -> String {
    let mut o = String::new();
    system(&mut o, checks, &Paint(colour));
    o
}

//! The load of benchmarks/storm.sh (issue 32, "people first under overload"): people and
//! crawlers on one MediaWiki, measured apart.
//!
//! ```text
//! storm setup --target http://127.0.0.1:PORT [--pages 8 --revisions 3 --editors 2]
//! storm run   --target http://127.0.0.1:PORT[,http://127.0.0.1:PORT2...] [--fair-secs 30
//!             --storm-secs 60 --readers 8 --think-ms 200 --editors 2 --edit-every-secs 5
//!             --crawler-kind plain --crawler-addrs 64 --crawler-conns 64 --pages 8
//!             --visible-within-secs 10 --timeout-secs 30 --refused-pause-ms 0
//!             --fpm-status http://127.0.0.1:PORT/fpm-status
//!             --nginx-status http://127.0.0.1:PORT/nginx-status]
//! ```
//!
//! `--target` may name several fronts, comma-separated: the nodes of one fleet (levee
//! nodes sharing one Redis and one backend, issue 51). Reader i, editor i and crawler
//! connection i each talk to node i mod N only; an editor logs in through its own node,
//! and its anonymous check asks that node too (each node's `Host` is its own address, so
//! its cached pages and an edit's invalidation are its own). Before the clock every page
//! is viewed through every node. `setup` uses the first.
//!
//! - readers: anonymous, from 127.0.0.1, one of the pages, then `think-ms`;
//! - editors: logged in (the API's clientlogin, cookies kept), view pages with `think-ms`
//!   between them, save an edit every `edit-every-secs`; after each save they view the
//!   page (it must show the edit at once) and an anonymous reader polls it until it
//!   shows the edit or `visible-within-secs` passed;
//! - crawlers, from the storm phase on: `crawler-conns` connections, no think time,
//!   connection i bound to address i mod `crawler-addrs` (127.1.0.1 onwards, each in its
//!   own /24; `replay`: all in 127.1.0.0/24), of one `crawler-kind` (storm/crawlers.rs:
//!   plain, fake-session, fake-session-each, query, login-flood, replay);
//! - the backend's busy share: php-fpm's status page (`--fpm-status`), sampled 5 times a
//!   second in both phases (storm/busy.rs);
//! - the backend's concurrency: requests in the site's nginx at once (its stub_status
//!   `Writing`, less the sample itself: `--nginx-status`), sampled 5 times a second,
//!   the most and the mean per phase. php-fpm's active processes cannot pass its
//!   workers; this counts every request the fronts have at the backend, queued or not.
//!
//! Readers, editors and the sampler run on one thread, crawlers on another (each a
//! single-threaded runtime), so that the crawlers' own work does not delay the people's
//! clocks.
//! Prints a summary per population and phase, then one `RESULT {json}` line. Only ever
//! connects to 127.0.0.0/8.

#[path = "storm/busy.rs"]
mod busy;
#[path = "storm/crawlers.rs"]
mod crawlers;
#[path = "storm/fleet.rs"]
mod fleet;
#[path = "storm/http.rs"]
mod http;
#[path = "storm/stats.rs"]
mod stats;
#[path = "storm/wiki.rs"]
mod wiki;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use levee_test::apps::MediaWiki;
use serde_json::{json, Value};
use tokio::time::sleep_until;

use crawlers::{Crawl, Kind};
use http::Conn;
use stats::{Seen, Tally, PHASES};
use wiki::{Rng, Session, LOCALHOST};

/// No task sends more than this many requests, whatever the clock says.
const MAX_REQUESTS_PER_TASK: u64 = 5_000_000;
/// How often the anonymous check asks for an edited page.
const CHECK_EVERY: Duration = Duration::from_millis(250);

#[derive(Clone)]
struct Args {
    /// The fronts (one, or the nodes of a fleet): population member i talks to i mod N.
    targets: Vec<SocketAddr>,
    pages: usize,
    revisions: usize,
    readers: usize,
    think: Duration,
    editors: usize,
    edit_every: Duration,
    crawler_kind: Kind,
    crawler_addrs: usize,
    crawler_conns: usize,
    /// php-fpm's status page (address, path with `?json`), sampled for the busy share.
    fpm_status: Option<(SocketAddr, String)>,
    /// nginx's stub_status page (address, path), sampled for the requests in flight.
    nginx_status: Option<(SocketAddr, String)>,
    /// Every node's admin /metrics (address, path), sampled for the fleet's capacity.
    fleet_metrics: Vec<(SocketAddr, String)>,
    /// A crawler's pause after a 429 or 503 (0: it asks again at once).
    refused_pause: Duration,
    fair: Duration,
    storm: Duration,
    visible_within: Duration,
    timeout: Duration,
    /// People's requests slower than this are printed, with when they started
    /// (`--slow-ms`; 0: none): where a p99 comes from.
    slow: Duration,
}

impl Args {
    /// The front population member `i` talks to: node i mod N.
    fn node(&self, i: usize) -> SocketAddr {
        self.targets[i % self.targets.len()]
    }
}

fn usage(why: &str) -> ! {
    eprintln!("storm: {why}\nusage: storm setup|run --target http://127.0.0.1:PORT[,...] [--flag value]... (see the source's header)");
    std::process::exit(2);
}

fn parse_args(argv: &[String]) -> Args {
    let mut a = Args {
        targets: Vec::new(),
        pages: 8,
        revisions: 3,
        readers: 8,
        think: Duration::from_millis(200),
        editors: 2,
        edit_every: Duration::from_secs(5),
        crawler_kind: Kind::Plain,
        crawler_addrs: 64,
        crawler_conns: 64,
        fpm_status: None,
        nginx_status: None,
        fleet_metrics: Vec::new(),
        refused_pause: Duration::ZERO,
        fair: Duration::from_secs(30),
        storm: Duration::from_secs(60),
        visible_within: Duration::from_secs(10),
        timeout: Duration::from_secs(30),
        slow: Duration::ZERO,
    };
    let mut target = None;
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            usage(&format!("{flag} needs a value"))
        };
        let num = || -> u64 {
            value
                .parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {value}")))
        };
        let secs = || Duration::from_secs_f64(num() as f64);
        match flag.as_str() {
            "--target" => target = Some(value.clone()),
            "--pages" => a.pages = num() as usize,
            "--revisions" => a.revisions = num() as usize,
            "--readers" => a.readers = num() as usize,
            "--think-ms" => a.think = Duration::from_millis(num()),
            "--editors" => a.editors = num() as usize,
            "--edit-every-secs" => a.edit_every = secs(),
            "--crawler-kind" => {
                a.crawler_kind = Kind::parse(value).unwrap_or_else(|| {
                    usage(&format!("--crawler-kind {value}: one of {}", Kind::names()))
                })
            }
            "--fpm-status" => {
                a.fpm_status = Some(busy::parse_url(value).unwrap_or_else(|| {
                    usage(&format!(
                        "--fpm-status {value}: want http://127.x.y.z:PORT/PATH"
                    ))
                }))
            }
            "--nginx-status" => {
                a.nginx_status = Some(status_url(value).unwrap_or_else(|| {
                    usage(&format!(
                        "--nginx-status {value}: want http://127.x.y.z:PORT/PATH"
                    ))
                }))
            }
            "--fleet-metrics" => {
                a.fleet_metrics = value
                    .split(',')
                    .map(|u| {
                        status_url(u).unwrap_or_else(|| {
                            usage(&format!(
                                "--fleet-metrics {u}: want http://127.x.y.z:PORT/metrics[,...]"
                            ))
                        })
                    })
                    .collect()
            }
            "--crawler-addrs" => a.crawler_addrs = num() as usize,
            "--crawler-conns" => a.crawler_conns = num() as usize,
            "--refused-pause-ms" => a.refused_pause = Duration::from_millis(num()),
            "--fair-secs" => a.fair = secs(),
            "--storm-secs" => a.storm = secs(),
            "--visible-within-secs" => a.visible_within = secs(),
            "--timeout-secs" => a.timeout = secs(),
            "--slow-ms" => a.slow = Duration::from_millis(num()),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    let Some(target) = target else {
        usage("--target is required")
    };
    for one in target.split(',').filter(|t| !t.trim().is_empty()) {
        let hostport = one
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let addr: SocketAddr = hostport
            .parse()
            .unwrap_or_else(|_| usage(&format!("--target {one}: want http://127.x.y.z:PORT")));
        // This program floods what it targets: loopback only.
        if !addr.ip().is_loopback() || !addr.is_ipv4() {
            usage("--target must be on 127.0.0.0/8");
        }
        a.targets.push(addr);
    }
    if a.targets.is_empty() {
        usage("--target names no front");
    }
    // One site on every node: the first front's address is its name (the wiki was set
    // up through it), whichever node a request goes to.
    let _ = http::SITE_HOST.set(a.targets[0].to_string());
    if a.pages == 0 || a.crawler_addrs == 0 || a.crawler_addrs > 254 * 254 * 256 {
        usage("--pages and --crawler-addrs must be 1 or more (crawler-addrs up to 16516096)");
    }
    a
}

/// When each phase ends; a request belongs to the phase it started in.
#[derive(Clone, Copy)]
struct Plan {
    fair_end: Instant,
    storm_end: Instant,
}

impl Plan {
    fn phase(&self, at: Instant) -> usize {
        usize::from(at >= self.fair_end)
    }

    /// Prints a people's request that took longer than `--slow-ms`.
    fn note_slow(&self, a: &Args, who: &str, what: &str, at: Instant, took: Duration) {
        if !a.slow.is_zero() && took > a.slow {
            let since = at.saturating_duration_since(self.fair_end).as_secs_f64()
                - self.fair_end.saturating_duration_since(at).as_secs_f64();
            println!(
                "SLOW {who} {what}: {:.0} ms, started {since:+.2} s from the storm",
                took.as_secs_f64() * 1000.0
            );
        }
    }

    fn running(&self) -> bool {
        Instant::now() < self.storm_end
    }
}

/// Sleeps `d`, but not past the end of the run.
async fn think(plan: &Plan, d: Duration) {
    let until = (Instant::now() + d).min(plan.storm_end);
    sleep_until(until.into()).await;
}

async fn reader(a: Args, plan: Plan, i: usize) -> Seen {
    let mut seen = Seen::default();
    let mut conn = Conn::new(a.node(i), LOCALHOST, a.timeout);
    let mut rng = Rng::new(1000 + i as u64);
    for _ in 0..MAX_REQUESTS_PER_TASK {
        if !plan.running() {
            break;
        }
        let path = wiki::page_path(&wiki::title(rng.below(a.pages as u64) as usize));
        let start = Instant::now();
        let r = conn.get(&path, &[]).await;
        seen.tally[plan.phase(start)].record(&r, start.elapsed());
        think(&plan, a.think).await;
    }
    seen
}

/// Polls `path` anonymously through `node` until it shows `marker` or `within` has passed
/// since `saved`; how long after the save it showed.
async fn anonymous_check(
    a: Args,
    node: SocketAddr,
    path: String,
    marker: String,
    saved: Instant,
) -> Result<Duration, String> {
    let mut conn = Conn::new(node, LOCALHOST, a.timeout);
    let deadline = saved + a.visible_within;
    let mut last = String::from("no answer");
    for _ in 0..10_000 {
        let tick = Instant::now() + CHECK_EVERY;
        match conn.get(&path, &[]).await {
            Ok(r) if r.status == 200 && wiki::shows(&r.body, &marker) => {
                // An answer that came after the bound is late, whatever it shows.
                let after = saved.elapsed();
                if after <= a.visible_within {
                    return Ok(after);
                }
                last = format!("shown only after {after:?}");
                break;
            }
            Ok(r) => last = format!("HTTP {} without the edit", r.status),
            Err(e) => last = format!("{e:?}"),
        }
        if tick >= deadline {
            break;
        }
        sleep_until(tick.into()).await;
    }
    Err(format!(
        "{marker} not shown to anonymous readers within {:?}: {last}",
        a.visible_within
    ))
}

async fn editor(a: Args, plan: Plan, e: usize, mut s: Session) -> Seen {
    let mut seen = Seen::default();
    let mut rng = Rng::new(2000 + e as u64);
    let mine: Vec<usize> = (0..a.pages).filter(|p| p % a.editors == e).collect();
    let mut checks = tokio::task::JoinSet::new();
    // Editors take turns: their saves are spread over the interval.
    let mut next_edit =
        plan.fair_end - a.fair + a.edit_every.mul_f64((e as f64 + 0.5) / a.editors as f64);
    for n in 0..MAX_REQUESTS_PER_TASK {
        if !plan.running() {
            break;
        }
        let now = Instant::now();
        if now < next_edit || mine.is_empty() {
            let path = wiki::page_path(&wiki::title(rng.below(a.pages as u64) as usize));
            let r = s.conn.get(&path, &s.jar.header()).await;
            seen.tally[plan.phase(now)].record(&r, now.elapsed());
            plan.note_slow(&a, "editor", &path, now, now.elapsed());
            think(
                &plan,
                a.think
                    .min(next_edit.saturating_duration_since(Instant::now())),
            )
            .await;
            continue;
        }
        next_edit = (next_edit + a.edit_every).max(now);
        let phase = plan.phase(now);
        let title = wiki::title(mine[n as usize % mine.len()]);
        let marker = format!("storm-edit-{e}-{n}-{:x}", rng.next());
        let text = wiki::page_text(mine[n as usize % mine.len()], a.pages, &marker);
        seen.edits[phase].saves += 1;
        let saved = s.edit(&title, &text).await;
        let took = now.elapsed();
        // The save counts in the editors' latencies as any of their requests.
        seen.tally[phase].record(&saved, took);
        plan.note_slow(&a, "editor", "save", now, took);
        let stored = match &saved {
            Ok(r) => wiki::edit_stored(r),
            Err(f) => Err(format!("{marker}: the save: {f:?}")),
        };
        if let Err(why) = stored {
            seen.edits[phase].problem(why);
            continue;
        }
        seen.edits[phase].stored += 1;
        seen.edits[phase].save_took(took);
        let path = wiki::page_path(&title);
        let at = Instant::now();
        let view = s.conn.get(&path, &s.jar.header()).await;
        seen.tally[plan.phase(at)].record(&view, at.elapsed());
        plan.note_slow(&a, "editor", "own view", at, at.elapsed());
        let editor_saw = match &view {
            Ok(r) if r.status == 200 && wiki::shows(&r.body, &marker) => true,
            Ok(r) => {
                let why = format!(
                    "{marker}: the editor's view answered {} without it",
                    r.status
                );
                seen.edits[phase].problem(why);
                false
            }
            Err(f) => {
                seen.edits[phase].problem(format!("{marker}: the editor's view: {f:?}"));
                false
            }
        };
        seen.edits[phase].shown_editor += u64::from(editor_saw);
        // Through the editor's own node (see the header: each node's Host is its own).
        let check = anonymous_check(a.clone(), a.node(e), path, marker, Instant::now());
        checks.spawn(async move { (phase, editor_saw, check.await) });
    }
    // Bounded: each check ends within visible_within + one request timeout.
    while let Some(done) = checks.join_next().await {
        match done {
            Ok((phase, editor_saw, Ok(after))) => {
                seen.edits[phase].anonymous_after(after);
                seen.edits[phase].shown_both += u64::from(editor_saw);
            }
            Ok((phase, _, Err(why))) => seen.edits[phase].problem(why),
            Err(e) => seen.edits[1].problem(format!("a check failed: {e}")),
        }
    }
    seen
}

/// What `prepare` leaves for the run.
struct Prepared {
    max_rev: u64,
    editors: Vec<Session>,
    /// The wiki's session cookie as its login set it (`<dbname>_session`), if one did.
    session_cookie: Option<String>,
    /// `replay`: the `Cookie` header of the replayed account's session.
    replayed: Vec<(&'static str, String)>,
}

/// Before the clock starts: the newest revision, every page viewed once through every
/// node (a cache's first miss is not the readers'), the editors logged in, each through
/// its own node (and for `replay` the replayed account, as they are: from 127.0.0.1,
/// through the first node).
async fn prepare(a: &Args) -> Result<Prepared, String> {
    let mut anon = Session::new(a.targets[0], a.timeout);
    let max_rev = wiki::max_revision(&mut anon).await?;
    for (n, &node) in a.targets.iter().enumerate() {
        let mut conn = Conn::new(node, LOCALHOST, a.timeout);
        for p in 0..a.pages {
            for _ in 0..2 {
                // Without any cookie api.php may have set: as the readers ask.
                let r = conn.get(&wiki::page_path(&wiki::title(p)), &[]).await;
                match r {
                    Ok(r) if r.status == 200 => {}
                    Ok(r) => {
                        return Err(format!(
                            "{} answered {} (node {n})",
                            wiki::title(p),
                            r.status
                        ))
                    }
                    Err(f) => return Err(format!("{} (node {n}): {f:?}", wiki::title(p))),
                }
            }
        }
    }
    let mut editors = Vec::new();
    for e in 0..a.editors {
        let mut s = Session::new(a.node(e), a.timeout);
        s.login(&wiki::editor_name(e), wiki::EDITOR_PASSWORD)
            .await?;
        editors.push(s);
    }
    let mut replayed = Vec::new();
    let mut session_cookie = editors
        .iter()
        .find_map(|s| s.jar.name_ending("_session"))
        .map(str::to_string);
    if a.crawler_kind == Kind::Replay {
        let mut s = Session::new(a.targets[0], a.timeout);
        s.login(wiki::REPLAYED_ACCOUNT, wiki::EDITOR_PASSWORD)
            .await?;
        session_cookie = session_cookie.or(s.jar.name_ending("_session").map(str::to_string));
        replayed = s.jar.header();
        if session_cookie.is_none() {
            return Err(format!(
                "the replayed account's login set no *_session cookie (cookies: {:?})",
                s.jar.names()
            ));
        }
    }
    if a.crawler_kind.needs_session_name() && session_cookie.is_none() {
        return Err(format!(
            "--crawler-kind {}: no editor's login set a *_session cookie (editors: {})",
            a.crawler_kind.name(),
            a.editors
        ));
    }
    Ok(Prepared {
        max_rev,
        editors,
        session_cookie,
        replayed,
    })
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn run(a: &Args) -> Result<Value, String> {
    let people_rt = runtime().map_err(|e| format!("runtime: {e}"))?;
    let ready = people_rt.block_on(prepare(a))?;
    let max_rev = ready.max_rev;
    let start = Instant::now() + Duration::from_millis(100);
    let plan = Plan {
        fair_end: start + a.fair,
        storm_end: start + a.fair + a.storm,
    };
    let crawl = Crawl {
        kind: a.crawler_kind,
        target: a.targets[0],
        timeout: a.timeout,
        addrs: a.crawler_addrs,
        pages: a.pages,
        max_rev,
        session_cookie: ready.session_cookie.clone().unwrap_or_default(),
        replayed: ready.replayed,
        refused_pause: a.refused_pause,
        start: plan.fair_end,
        end: plan.storm_end,
    };
    let crawlers = {
        let conns = a.crawler_conns;
        let nodes = a.targets.clone();
        std::thread::spawn(move || -> Result<(Tally, u64), String> {
            let rt = runtime().map_err(|e| format!("runtime: {e}"))?;
            rt.block_on(async move {
                let tasks: Vec<_> = (0..conns)
                    .map(|i| {
                        // Connection i to node i mod N.
                        let mut c = crawl.clone();
                        c.target = nodes[i % nodes.len()];
                        tokio::spawn(crawlers::crawler(c, i))
                    })
                    .collect();
                let (mut all, mut opened) = (Tally::default(), 0);
                for t in tasks {
                    let (tally, n) = t.await.map_err(|e| format!("a crawler failed: {e}"))?;
                    all.merge(&tally);
                    opened += n;
                }
                Ok((all, opened))
            })
        })
    };
    let (readers, editors, backend, in_flight, fleet_capacity) = people_rt.block_on(async {
        let fleet_capacity = (!a.fleet_metrics.is_empty()).then(|| {
            tokio::spawn(fleet::sample(
                a.fleet_metrics.clone(),
                start,
                plan.fair_end,
                plan.storm_end,
            ))
        });
        let in_flight = a.nginx_status.clone().map(|(addr, path)| {
            tokio::spawn(in_flight_sample(
                addr,
                path,
                start,
                plan.fair_end,
                plan.storm_end,
            ))
        });
        let sampler = a.fpm_status.clone().map(|(addr, path)| {
            tokio::spawn(busy::sample(
                addr,
                path,
                LOCALHOST,
                start,
                plan.fair_end,
                plan.storm_end,
            ))
        });
        sleep_until(start.into()).await;
        let r: Vec<_> = (0..a.readers)
            .map(|i| tokio::spawn(reader(a.clone(), plan, i)))
            .collect();
        let e: Vec<_> = ready
            .editors
            .into_iter()
            .enumerate()
            .map(|(i, s)| tokio::spawn(editor(a.clone(), plan, i, s)))
            .collect();
        let (mut readers, mut editors) = (Seen::default(), Seen::default());
        for t in r {
            readers.merge(&t.await.map_err(|e| format!("a reader failed: {e}"))?);
        }
        for t in e {
            editors.merge(&t.await.map_err(|e| format!("an editor failed: {e}"))?);
        }
        let backend = match sampler {
            Some(t) => t.await.map_err(|e| format!("the sampler failed: {e}"))?,
            None => Value::Null,
        };
        let in_flight = match in_flight {
            Some(t) => t
                .await
                .map_err(|e| format!("the nginx sampler failed: {e}"))?,
            None => Value::Null,
        };
        let fleet_capacity = match fleet_capacity {
            Some(t) => t
                .await
                .map_err(|e| format!("the fleet sampler failed: {e}"))?,
            None => Value::Null,
        };
        Ok::<_, String>((readers, editors, backend, in_flight, fleet_capacity))
    })?;
    let (crawlers, crawler_conns_opened) = crawlers
        .join()
        .map_err(|_| "the crawlers' thread panicked".to_string())??;
    let secs = [a.fair.as_secs_f64(), a.storm.as_secs_f64()];
    // The saves the editors' schedule asks for (editor e's first at (e + 0.5) / editors
    // of the interval): fewer were made when saves took longer than the interval.
    let total = secs[0] + secs[1];
    let every = a.edit_every.as_secs_f64();
    let saves_due: u64 = (0..a.editors)
        .map(|e| every * (e as f64 + 0.5) / a.editors as f64)
        .filter(|first| *first < total)
        .map(|first| ((total - first) / every).floor() as u64 + 1)
        .sum();
    let by_phase = |s: &Seen| {
        let mut m = serde_json::Map::new();
        for (i, name) in PHASES.iter().enumerate() {
            m.insert(name.to_string(), s.tally[i].to_json(secs[i]));
        }
        Value::Object(m)
    };
    let mut edits = serde_json::Map::new();
    let mut refusals = serde_json::Map::new();
    for (i, name) in PHASES.iter().enumerate() {
        edits.insert(name.to_string(), editors.edits[i].to_json());
        let mut all: Vec<u32> = readers.tally[i].refusal_latencies().to_vec();
        all.extend_from_slice(editors.tally[i].refusal_latencies());
        if i == 1 {
            all.extend_from_slice(crawlers.refusal_latencies());
        }
        refusals.insert(name.to_string(), stats::percentile_ms(&all, 99.0));
    }
    Ok(json!({
        "target": a.targets.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        "nodes": a.targets.len(),
        "fair_secs": secs[0],
        "storm_secs": secs[1],
        "readers_n": a.readers,
        "editors_n": a.editors,
        "crawler_kind": a.crawler_kind.name(),
        "session_cookie": ready.session_cookie,
        "crawler_addrs": a.crawler_addrs,
        "crawler_conns": a.crawler_conns,
        "visible_within_s": a.visible_within.as_secs_f64(),
        "max_rev_at_start": max_rev,
        "readers": by_phase(&readers),
        "editors": by_phase(&editors),
        "crawlers": { "storm": crawlers.to_json(secs[1]) },
        "crawler_connections_opened": crawler_conns_opened,
        "edits": edits,
        "saves_due": saves_due,
        "refusal_p99_ms": refusals,
        "backend": backend,
        "backend_in_flight": in_flight,
        "fleet_capacity": fleet_capacity,
    }))
}

fn show(v: &Value) {
    let f = |x: &Value| match x {
        Value::Null => "-".to_string(),
        x => x.to_string(),
    };
    println!("fronts   : {} node(s): {}", v["nodes"], f(&v["target"]));
    for pop in ["readers", "editors", "crawlers"] {
        for phase in PHASES {
            let t = &v[pop][phase];
            if t.is_null() {
                continue;
            }
            println!(
                "{pop:8} {phase:5}: {} requests, ok {}%, 2xx {}%, 429 {}, 503 {}, other {}, errors {} (timeouts {}), p50 {} ms, p99 {} ms, ok/s {}, refused/s {}, refusal p99 {} ms",
                t["requests"], f(&t["ok_pct"]), f(&t["s2xx_pct"]), t["s429"], t["s503"], t["other_status"],
                t["errors"],
                t["timeouts"], f(&t["p50_ms"]), f(&t["p99_ms"]), f(&t["ok_per_s"]), f(&t["refused_per_s"]), f(&t["refusal_p99_ms"]),
            );
        }
    }
    for phase in PHASES {
        let e = &v["edits"][phase];
        println!(
            "edits    {phase:5}: {} saves, {} stored, {} shown to the editor at once, {} to anonymous readers within {} s (slowest {} ms), {} both, save p99 {} ms; problems: {}",
            e["saves"], e["stored"], e["shown_editor"], e["shown_anonymous"], v["visible_within_s"],
            f(&e["anonymous_delay_max_ms"]), e["shown_both"], f(&e["save_p99_ms"]), e["problems"],
        );
    }
    println!(
        "edits    due  : {} saves by the editors' schedule",
        v["saves_due"]
    );
    println!(
        "crawlers kind : {}, session cookie {}",
        v["crawler_kind"],
        f(&v["session_cookie"])
    );
    for phase in PHASES {
        let b = &v["backend"][phase];
        if b.is_null() {
            continue;
        }
        println!(
            "backend  {phase:5}: {}% of php-fpm's workers busy (all {} busy in {}% of {} samples, {} failed: {}), {} requests",
            f(&b["busy_pct"]), f(&b["workers"]), f(&b["all_busy_pct"]), b["samples"], b["failed"],
            f(&b["why"]), f(&b["requests_between_samples"]),
        );
        println!(
            "backend  {phase:5}: php-fpm's active processes at most {} (mean {})",
            f(&b["active_max"]),
            f(&b["active_mean"]),
        );
    }
    for phase in PHASES {
        let b = &v["backend_in_flight"][phase];
        if b.is_null() {
            continue;
        }
        println!(
            "backend  {phase:5}: requests in the site's nginx at most {} (mean {}; {} samples, {} failed: {})",
            f(&b["max"]), f(&b["mean"]), b["samples"], b["failed"], f(&b["why"]),
        );
    }
}

/// `http://127.0.0.1:PORT/PATH`: a status page's address and path, loopback only.
fn status_url(url: &str) -> Option<(SocketAddr, String)> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let addr: SocketAddr = host.parse().ok()?;
    addr.ip().is_loopback().then(|| (addr, format!("/{path}")))
}

/// nginx's stub_status `Writing:` (requests whose answer nginx is still working on,
/// waiting on php-fpm included), less one: the sample's own request.
fn nginx_writing(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let at = text.find("Writing:")? + "Writing:".len();
    let n: u64 = text[at..].split_whitespace().next()?.parse().ok()?;
    Some(n.saturating_sub(1))
}

/// Requests in the site's nginx at once (`--nginx-status`), every 200 ms from `start`
/// to `end`; the most and the mean per phase (`storm_from` on: the storm).
async fn in_flight_sample(
    target: SocketAddr,
    path: String,
    start: Instant,
    storm_from: Instant,
    end: Instant,
) -> Value {
    const EVERY: Duration = Duration::from_millis(200);
    // (samples, failed, first failure) per phase.
    let mut phases: [(Vec<u64>, u64, Option<String>); 2] = Default::default();
    let mut conn = Conn::new(target, LOCALHOST, Duration::from_secs(1));
    // Half a period after php-fpm's sampler, whose request through the same nginx would
    // otherwise be counted.
    let mut tick = start + EVERY / 2;
    sleep_until(tick.into()).await;
    while tick < end {
        let (samples, failed, why) = &mut phases[usize::from(tick >= storm_from)];
        match conn.get(&path, &[]).await {
            Ok(r) if r.status == 200 => match nginx_writing(&r.body) {
                Some(n) => samples.push(n),
                None => {
                    *failed += 1;
                    why.get_or_insert_with(|| format!("not stub_status: {:.200}", r.text()));
                }
            },
            Ok(r) => {
                *failed += 1;
                why.get_or_insert_with(|| format!("HTTP {}", r.status));
            }
            Err(e) => {
                *failed += 1;
                why.get_or_insert_with(|| format!("{e:?}"));
            }
        }
        tick += EVERY;
        sleep_until(tick.into()).await;
    }
    let mut m = serde_json::Map::new();
    for ((samples, failed, why), name) in phases.iter().zip(PHASES) {
        let n = samples.len();
        let mean = (n > 0).then(|| {
            let sum: u64 = samples.iter().sum();
            (10.0 * sum as f64 / n as f64).round() / 10.0
        });
        m.insert(
            name.to_string(),
            json!({
                "samples": n,
                "failed": failed,
                "why": why,
                "max": samples.iter().max(),
                "mean": mean,
            }),
        );
    }
    Value::Object(m)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        usage("setup or run?")
    };
    if cmd == "-h" || cmd == "--help" {
        println!("storm setup|run --target http://127.0.0.1:PORT [--flag value]...; see the header of crates/levee-test/examples/storm.rs");
        return;
    }
    let a = parse_args(&argv[1..]);
    let result = match cmd.as_str() {
        "setup" => runtime()
            .map_err(|e| format!("runtime: {e}"))
            .and_then(|rt| {
                rt.block_on(wiki::setup(
                    a.targets[0],
                    a.timeout,
                    (MediaWiki::ADMIN_NAME, MediaWiki::ADMIN_PASSWORD),
                    a.editors,
                    a.pages,
                    a.revisions,
                ))
            })
            .map(|()| println!("SETUP done: {} pages, {} editors", a.pages, a.editors)),
        "run" => run(&a).map(|v| {
            show(&v);
            println!("RESULT {v}");
        }),
        _ => usage(&format!("unknown command {cmd}")),
    };
    if let Err(e) = result {
        eprintln!("storm: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_status_and_fronts() {
        let body = b"Active connections: 9 \nserver accepts handled requests\n 10 10 40 \nReading: 0 Writing: 5 Waiting: 4 \n";
        assert_eq!(nginx_writing(body), Some(4));
        assert_eq!(nginx_writing(b"nothing"), None);
        let (addr, path) = status_url("http://127.0.0.1:81/nginx-status").expect("a URL");
        assert_eq!((addr.port(), path.as_str()), (81, "/nginx-status"));
        assert!(status_url("http://10.0.0.1:81/s").is_none());
        let argv: Vec<String> = ["--target", "http://127.0.0.1:1,http://127.0.0.1:2/"]
            .map(String::from)
            .to_vec();
        let a = parse_args(&argv);
        assert_eq!(a.targets.len(), 2);
        assert_eq!((a.node(0).port(), a.node(3).port()), (1, 2));
    }
}

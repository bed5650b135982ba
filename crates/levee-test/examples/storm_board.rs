//! The load of benchmarks/storm-board.sh: people and crawlers on one gnuboard5 forum,
//! measured apart (the second application of the crawler-storm benchmark, after
//! storm.rs's MediaWiki).
//!
//! ```text
//! storm_board --target http://127.0.0.1:PORT --page PATH... --member-jar FILE...
//!             [--member-id ID... --member-mark TEXT --first-visit PATH
//!             --board free --readers 8
//!             --think-ms 200 --post-every-secs 5-10 --crawler-kind search
//!             --crawler-addrs 64 --crawler-conns 64 --fair-secs 30 --storm-secs 60
//!             --visible-within-secs 10 --timeout-secs 30 --refused-pause-ms 0
//!             --fpm-status http://127.0.0.1:PORT/fpm-status]
//! ```
//!
//! - readers: anonymous, from 127.0.0.1, one of the `--page`s (the front page, the board's
//!   list, a few posts), then `think-ms`; each keeps the cookies gnuboard gives it and
//!   sends them back, as a browser does, from a first visit before the clock to
//!   `--first-visit` (a page never stored, such as the login form: where a browser gets
//!   its PHP session);
//! - members: logged in through the front by storm-board.sh before the clock (curl's jar
//!   in `--member-jar`, read here), view the pages with `think-ms` between them and write
//!   a post on `--board` every `post-every-secs` (a random interval within the range);
//!   after each post they view it (it must show at once) and an anonymous reader, with no
//!   cookie, polls the board's list until it shows the post's subject or
//!   `visible-within-secs` passed;
//! - crawlers, from the storm phase on: `crawler-conns` connections, no think time,
//!   connection i from 127.1.N.1 (N = i mod `crawler-addrs`, a /24 each), of one
//!   `crawler-kind` (storm_board/crawlers.rs: search, member-pages, fake-session,
//!   fake-session-each);
//! - the backend's busy share: php-fpm's status page with every process (`--fpm-status`),
//!   sampled 5 times a second in both phases (storm_board/workers.rs: not storm.rs's
//!   summary counts, which levee's kept-alive FastCGI connections inflate).
//!
//! The HTTP client and the tallies are storm.rs's (storm/http.rs, storm/stats.rs). Readers, members and the sampler run on one thread, crawlers on another
//! (each a single-threaded runtime), so that the crawlers' own work does not delay the
//! people's clocks. Prints a summary per population and phase, then one `RESULT {json}`
//! line. Only ever connects to 127.0.0.0/8.

#[path = "storm_board/board.rs"]
mod board;
#[path = "storm_board/crawlers.rs"]
mod crawlers;
// storm.rs's client and tallies, shared: this load uses part of them.
#[allow(dead_code)]
#[path = "storm/http.rs"]
mod http;
#[allow(dead_code)]
#[path = "storm/stats.rs"]
mod stats;
#[path = "storm_board/workers.rs"]
mod workers;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ::http::Method;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::time::sleep_until;

use board::{Rng, LOCALHOST};
use crawlers::{Crawl, Kind};
use http::{Conn, Failure, Jar, Reply};
use stats::{Seen, Tally, PHASES};

/// No task sends more than this many requests, whatever the clock says.
const MAX_REQUESTS_PER_TASK: u64 = 5_000_000;
/// How often the anonymous check asks for the board's list.
const CHECK_EVERY: Duration = Duration::from_millis(250);

#[derive(Clone)]
struct Args {
    target: SocketAddr,
    /// What readers and members read: the front page, the list, posts.
    pages: Vec<String>,
    /// Where each reader goes first, before the clock (none: no cookie to begin with).
    first_visit: Option<String>,
    board: String,
    readers: usize,
    think: Duration,
    member_jars: Vec<String>,
    member_ids: Vec<String>,
    /// Text only a logged-in member's pages show (gnuboard5.sh's MEMBER_MARK).
    member_mark: String,
    post_every: (Duration, Duration),
    crawler_kind: Kind,
    crawler_addrs: usize,
    crawler_conns: usize,
    fpm_status: Option<(SocketAddr, String)>,
    refused_pause: Duration,
    fair: Duration,
    storm: Duration,
    visible_within: Duration,
    timeout: Duration,
}

fn usage(why: &str) -> ! {
    eprintln!("storm_board: {why}\nusage: storm_board --target http://127.0.0.1:PORT --page PATH --member-jar FILE [--flag value]... (see the source's header)");
    std::process::exit(2);
}

fn parse_args(argv: &[String]) -> Args {
    let mut a = Args {
        target: SocketAddr::from(([127, 0, 0, 1], 80)),
        pages: Vec::new(),
        first_visit: None,
        board: "free".to_string(),
        readers: 8,
        think: Duration::from_millis(200),
        member_jars: Vec::new(),
        member_ids: Vec::new(),
        member_mark: String::new(),
        post_every: (Duration::from_secs(5), Duration::from_secs(10)),
        crawler_kind: Kind::Search,
        crawler_addrs: 64,
        crawler_conns: 64,
        fpm_status: None,
        refused_pause: Duration::ZERO,
        fair: Duration::from_secs(30),
        storm: Duration::from_secs(60),
        visible_within: Duration::from_secs(10),
        timeout: Duration::from_secs(30),
    };
    let mut target = None;
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            usage(&format!("{flag} needs a value"))
        };
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {value}")))
        };
        let secs = |v: &str| Duration::from_secs(num(v));
        match flag.as_str() {
            "--target" => target = Some(value.clone()),
            "--page" => a.pages.push(value.clone()),
            "--first-visit" => a.first_visit = Some(value.clone()),
            "--board" => a.board = value.clone(),
            "--readers" => a.readers = num(value) as usize,
            "--think-ms" => a.think = Duration::from_millis(num(value)),
            "--member-jar" => a.member_jars.push(value.clone()),
            "--member-id" => a.member_ids.push(value.clone()),
            "--member-mark" => a.member_mark = value.clone(),
            "--post-every-secs" => {
                let (lo, hi) = value.split_once('-').unwrap_or((value, value));
                a.post_every = (secs(lo), secs(hi));
            }
            "--crawler-kind" => {
                a.crawler_kind = Kind::parse(value).unwrap_or_else(|| {
                    usage(&format!("--crawler-kind {value}: one of {}", Kind::names()))
                })
            }
            "--crawler-addrs" => a.crawler_addrs = num(value) as usize,
            "--crawler-conns" => a.crawler_conns = num(value) as usize,
            "--fpm-status" => {
                a.fpm_status = Some(workers::parse_url(value).unwrap_or_else(|| {
                    usage(&format!(
                        "--fpm-status {value}: want http://127.x.y.z:PORT/PATH"
                    ))
                }))
            }
            "--refused-pause-ms" => a.refused_pause = Duration::from_millis(num(value)),
            "--fair-secs" => a.fair = secs(value),
            "--storm-secs" => a.storm = secs(value),
            "--visible-within-secs" => a.visible_within = secs(value),
            "--timeout-secs" => a.timeout = secs(value),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    let Some(target) = target else {
        usage("--target is required")
    };
    let hostport = target.trim_start_matches("http://").trim_end_matches('/');
    a.target = hostport
        .parse()
        .unwrap_or_else(|_| usage(&format!("--target {target}: want http://127.x.y.z:PORT")));
    // This program floods what it targets: loopback only.
    if !a.target.ip().is_loopback() || !a.target.is_ipv4() {
        usage("--target must be on 127.0.0.0/8");
    }
    if a.pages.is_empty() || a.member_jars.is_empty() {
        usage("at least one --page and one --member-jar");
    }
    if a.crawler_addrs == 0 || a.crawler_addrs > 254 * 256 {
        usage("--crawler-addrs must be 1 to 65024");
    }
    if a.post_every.0.is_zero() || a.post_every.0 > a.post_every.1 {
        usage("--post-every-secs LO-HI with 0 < LO <= HI");
    }
    a
}

/// When each phase ends; a request belongs to the phase it started in.
#[derive(Clone, Copy)]
struct Plan {
    start: Instant,
    fair_end: Instant,
    storm_end: Instant,
}

impl Plan {
    fn phase(&self, at: Instant) -> usize {
        usize::from(at >= self.fair_end)
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

/// What one reader or member saw: the tallies, and per phase how levee answered
/// (readers: `X-Cache`; members: `X-Cache-Reason`, with `--debug-headers`); the names of
/// the cookies it held at the end.
#[derive(Default)]
struct Out {
    seen: Seen,
    marks: [BTreeMap<String, u64>; 2],
    cookies: BTreeSet<String>,
}

impl Out {
    fn note(&mut self, plan: &Plan, start: Instant, r: &Result<Reply, Failure>, header: &str) {
        let phase = plan.phase(start);
        self.seen.tally[phase].record(r, start.elapsed());
        let mark = r
            .as_ref()
            .ok()
            .and_then(|r| r.headers.get(header))
            .and_then(|v| v.to_str().ok());
        if let Some(m) = mark {
            *self.marks[phase].entry(m.to_string()).or_default() += 1;
        }
    }

    fn merge(&mut self, o: Out) {
        self.seen.merge(&o.seen);
        for (mine, theirs) in self.marks.iter_mut().zip(o.marks) {
            for (k, n) in theirs {
                *mine.entry(k).or_default() += n;
            }
        }
        self.cookies.extend(o.cookies);
    }
}

async fn reader(a: Args, plan: Plan, i: usize, mut jar: Jar) -> Out {
    let mut out = Out::default();
    let mut conn = Conn::new(a.target, LOCALHOST, a.timeout);
    let mut rng = Rng::new(1000 + i as u64);
    for _ in 0..MAX_REQUESTS_PER_TASK {
        if !plan.running() {
            break;
        }
        let path = &a.pages[rng.below(a.pages.len() as u64) as usize];
        let mut rec = |s: Instant, r: &Result<Reply, Failure>| out.note(&plan, s, r, "x-cache");
        let (get, b) = (Method::GET, Bytes::new());
        let _ = board::browse(&mut conn, &mut jar, get, path, &[], b, &mut rec).await;
        think(&plan, a.think).await;
    }
    out.cookies = jar.names().into_iter().map(str::to_string).collect();
    out
}

/// Polls the board's list with no cookie until it shows `subject` or `within` has passed
/// since `posted`; how long after the post it showed.
async fn anonymous_check(a: Args, subject: String, posted: Instant) -> Result<Duration, String> {
    let mut conn = Conn::new(a.target, LOCALHOST, a.timeout);
    let path = board::list_path(&a.board);
    let deadline = posted + a.visible_within;
    let mut last = String::from("no answer");
    for _ in 0..10_000 {
        let tick = Instant::now() + CHECK_EVERY;
        match conn.get(&path, &[]).await {
            Ok(r) if r.status == 200 && board::shows(&r.body, &subject) => {
                // An answer that came after the bound is late, whatever it shows.
                let after = posted.elapsed();
                if after <= a.visible_within {
                    return Ok(after);
                }
                last = format!("shown only after {after:?}");
                break;
            }
            Ok(r) => {
                let xc = r.headers.get("x-cache").and_then(|v| v.to_str().ok());
                last = format!(
                    "HTTP {} without it (X-Cache {})",
                    r.status,
                    xc.unwrap_or("-")
                );
            }
            Err(e) => last = format!("{e:?}"),
        }
        if tick >= deadline {
            break;
        }
        sleep_until(tick.into()).await;
    }
    Err(format!(
        "{subject} not on {path} for anonymous readers within {:?}: {last}",
        a.visible_within
    ))
}

/// Member `m`'s posting schedule: the first post at (m + 0.5) / members of the shortest
/// interval (members take turns), then one every random interval of `post_every`.
fn first_post(a: &Args, m: usize) -> Duration {
    a.post_every
        .0
        .mul_f64((m as f64 + 0.5) / a.member_jars.len() as f64)
}

fn post_rng(m: usize) -> Rng {
    Rng::new(3000 + m as u64)
}

/// The posts the members' schedules ask for in the run (fewer are made when posting falls
/// behind by more than an interval: a late post is followed by the next one at once).
fn posts_due(a: &Args) -> u64 {
    let total = a.fair + a.storm;
    (0..a.member_jars.len())
        .map(|m| {
            let mut rng = post_rng(m);
            let (mut at, mut n) = (first_post(a, m), 0);
            while at < total {
                n += 1;
                at += rng.between(a.post_every.0, a.post_every.1);
            }
            n
        })
        .sum()
}

async fn member(a: Args, plan: Plan, m: usize, mut jar: Jar) -> Out {
    let mut out = Out::default();
    let mut conn = Conn::new(a.target, LOCALHOST, a.timeout);
    let mut rng = Rng::new(2000 + m as u64);
    let mut every = post_rng(m);
    let mut checks = tokio::task::JoinSet::new();
    let mut pages = a.pages.clone();
    let mut next_post = plan.start + first_post(&a, m);
    for n in 0..MAX_REQUESTS_PER_TASK {
        if !plan.running() {
            break;
        }
        let now = Instant::now();
        let mut rec =
            |s: Instant, r: &Result<Reply, Failure>| out.note(&plan, s, r, "x-cache-reason");
        if now < next_post {
            let path = &pages[rng.below(pages.len() as u64) as usize];
            let (get, b) = (Method::GET, Bytes::new());
            let _ = board::browse(&mut conn, &mut jar, get, path, &[], b, &mut rec).await;
            let until_post = next_post.saturating_duration_since(Instant::now());
            think(&plan, a.think.min(until_post)).await;
            continue;
        }
        next_post = (next_post + every.between(a.post_every.0, a.post_every.1)).max(now);
        let phase = plan.phase(now);
        let subject = format!("storm-post-{m}-{n}-{:06x}", rng.next() & 0xff_ffff);
        let content = board::post_text(&mut rng, &subject);
        let posted =
            board::write_post(&mut conn, &mut jar, &a.board, &subject, &content, &mut rec).await;
        // The post is on the board from its answer on: the bound runs from here.
        let accepted_at = Instant::now();
        let took = now.elapsed();
        let edits = &mut out.seen.edits[phase];
        edits.saves += 1;
        let id = match posted {
            Ok(id) => id,
            Err(why) => {
                edits.problem(format!("{subject}: {why}"));
                continue;
            }
        };
        edits.stored += 1;
        edits.save_took(took);
        // The redirect's target, as the browser follows it: the member's own view.
        let path = board::post_path(&a.board, id);
        let mut rec =
            |s: Instant, r: &Result<Reply, Failure>| out.note(&plan, s, r, "x-cache-reason");
        let (get, b) = (Method::GET, Bytes::new());
        let view = board::browse(&mut conn, &mut jar, get, &path, &[], b, &mut rec).await;
        let member_saw = match &view {
            Ok(r) if r.status == 200 && board::shows(&r.body, &subject) => true,
            Ok(r) => {
                let why = format!(
                    "{subject}: the member's view answered {} without it",
                    r.status
                );
                out.seen.edits[phase].problem(why);
                false
            }
            Err(f) => {
                let why = format!("{subject}: the member's view: {f:?}");
                out.seen.edits[phase].problem(why);
                false
            }
        };
        out.seen.edits[phase].shown_editor += u64::from(member_saw);
        pages.push(path);
        let check = anonymous_check(a.clone(), subject, accepted_at);
        checks.spawn(async move { (phase, member_saw, check.await) });
    }
    // Bounded: each check ends within visible_within + one request timeout.
    while let Some(done) = checks.join_next().await {
        match done {
            Ok((phase, member_saw, Ok(after))) => {
                out.seen.edits[phase].anonymous_after(after);
                out.seen.edits[phase].shown_both += u64::from(member_saw);
            }
            Ok((phase, _, Err(why))) => out.seen.edits[phase].problem(why),
            Err(e) => out.seen.edits[1].problem(format!("a check failed: {e}")),
        }
    }
    out.cookies = jar.names().into_iter().map(str::to_string).collect();
    out
}

/// Before the clock: every page viewed twice with no cookie (a cache's first miss is not
/// the readers'); each reader's first visit (its cookies); each member's jar read and
/// checked: the front page shows them logged in. (readers' jars, members' jars)
async fn prepare(a: &Args) -> Result<(Vec<Jar>, Vec<Jar>), String> {
    let mut conn = Conn::new(a.target, LOCALHOST, a.timeout);
    for p in &a.pages {
        for _ in 0..2 {
            match conn.get(p, &[]).await {
                Ok(r) if r.status == 200 => {}
                Ok(r) => return Err(format!("{p} answered {}", r.status)),
                Err(f) => return Err(format!("{p}: {f:?}")),
            }
        }
    }
    let mut readers = Vec::new();
    for _ in 0..a.readers {
        let mut jar = Jar::default();
        if let Some(p) = &a.first_visit {
            match conn.get(p, &[]).await {
                Ok(r) if r.status == 200 => jar.keep(&r.headers),
                Ok(r) => return Err(format!("{p} answered {}", r.status)),
                Err(f) => return Err(format!("{p}: {f:?}")),
            }
        }
        readers.push(jar);
    }
    let mut jars = Vec::new();
    for path in &a.member_jars {
        let mut jar = board::read_jar(path)?;
        let r = conn.get("/", &jar.header()).await;
        match &r {
            Ok(r) if r.status == 200 && board::shows(&r.body, &a.member_mark) => {
                jar.keep(&r.headers)
            }
            Ok(r) => {
                return Err(format!(
                    "{path}: the front page ({}) does not show the member logged in",
                    r.status
                ))
            }
            Err(f) => return Err(format!("{path}: the front page: {f:?}")),
        }
        jars.push(jar);
    }
    Ok((readers, jars))
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn run(a: &Args) -> Result<Value, String> {
    let people_rt = runtime().map_err(|e| format!("runtime: {e}"))?;
    let (reader_jars, jars) = people_rt.block_on(prepare(a))?;
    let start = Instant::now() + Duration::from_millis(100);
    let plan = Plan {
        start,
        fair_end: start + a.fair,
        storm_end: start + a.fair + a.storm,
    };
    let crawl = Crawl {
        kind: a.crawler_kind,
        target: a.target,
        timeout: a.timeout,
        addrs: a.crawler_addrs,
        board: a.board.clone(),
        members: a.member_ids.clone(),
        refused_pause: a.refused_pause,
        start: plan.fair_end,
        end: plan.storm_end,
    };
    let crawlers = {
        let conns = a.crawler_conns;
        std::thread::spawn(move || -> Result<(Tally, u64), String> {
            let rt = runtime().map_err(|e| format!("runtime: {e}"))?;
            rt.block_on(async move {
                let tasks: Vec<_> = (0..conns)
                    .map(|i| tokio::spawn(crawlers::crawler(crawl.clone(), i)))
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
    let (readers, members, backend) = people_rt.block_on(async {
        let sampler = a.fpm_status.clone().map(|(addr, path)| {
            tokio::spawn(workers::sample(
                addr,
                path,
                LOCALHOST,
                start,
                plan.fair_end,
                plan.storm_end,
            ))
        });
        sleep_until(start.into()).await;
        let r: Vec<_> = reader_jars
            .into_iter()
            .enumerate()
            .map(|(i, jar)| tokio::spawn(reader(a.clone(), plan, i, jar)))
            .collect();
        let m: Vec<_> = jars
            .into_iter()
            .enumerate()
            .map(|(i, jar)| tokio::spawn(member(a.clone(), plan, i, jar)))
            .collect();
        let (mut readers, mut members) = (Out::default(), Out::default());
        for t in r {
            readers.merge(t.await.map_err(|e| format!("a reader failed: {e}"))?);
        }
        for t in m {
            members.merge(t.await.map_err(|e| format!("a member failed: {e}"))?);
        }
        let backend = match sampler {
            Some(t) => t.await.map_err(|e| format!("the sampler failed: {e}"))?,
            None => Value::Null,
        };
        Ok::<_, String>((readers, members, backend))
    })?;
    let (crawlers, crawler_conns_opened) = crawlers
        .join()
        .map_err(|_| "the crawlers' thread panicked".to_string())??;
    let secs = [a.fair.as_secs_f64(), a.storm.as_secs_f64()];
    let by_phase = |o: &Out| {
        let mut m = serde_json::Map::new();
        for (i, name) in PHASES.iter().enumerate() {
            m.insert(name.to_string(), o.seen.tally[i].to_json(secs[i]));
        }
        Value::Object(m)
    };
    let marks = |o: &Out| {
        let mut m = serde_json::Map::new();
        for (i, name) in PHASES.iter().enumerate() {
            m.insert(name.to_string(), json!(o.marks[i]));
        }
        Value::Object(m)
    };
    let mut posts = serde_json::Map::new();
    let mut refusals = serde_json::Map::new();
    for (i, name) in PHASES.iter().enumerate() {
        posts.insert(name.to_string(), members.seen.edits[i].to_json());
        let mut all: Vec<u32> = readers.seen.tally[i].refusal_latencies().to_vec();
        all.extend_from_slice(members.seen.tally[i].refusal_latencies());
        if i == 1 {
            all.extend_from_slice(crawlers.refusal_latencies());
        }
        refusals.insert(name.to_string(), stats::percentile_ms(&all, 99.0));
    }
    Ok(json!({
        "target": a.target.to_string(),
        "fair_secs": secs[0],
        "storm_secs": secs[1],
        "readers_n": a.readers,
        "members_n": a.member_jars.len(),
        "pages": a.pages,
        "crawler_kind": a.crawler_kind.name(),
        "crawler_addrs": a.crawler_addrs,
        "crawler_conns": a.crawler_conns,
        "visible_within_s": a.visible_within.as_secs_f64(),
        "readers": by_phase(&readers),
        "members": by_phase(&members),
        "crawlers": { "storm": crawlers.to_json(secs[1]) },
        "crawler_connections_opened": crawler_conns_opened,
        "posts": posts,
        "posts_due": posts_due(a),
        "refusal_p99_ms": refusals,
        "backend": backend,
        "readers_x_cache": marks(&readers),
        "members_x_cache_reason": marks(&members),
        "readers_cookies": readers.cookies,
        "members_cookies": members.cookies,
    }))
}

fn show(v: &Value) {
    let f = |x: &Value| match x {
        Value::Null => "-".to_string(),
        x => x.to_string(),
    };
    for pop in ["readers", "members", "crawlers"] {
        for phase in PHASES {
            let t = &v[pop][phase];
            if t.is_null() {
                continue;
            }
            println!(
                "{pop:8} {phase:5}: {} requests, 2xx {}%, 3xx {}, 429 {}, 503 {}, other {} {}, errors {} (timeouts {}), p50 {} ms, p99 {} ms, ok/s {}",
                t["requests"], f(&t["s2xx_pct"]), t["s3xx"], t["s429"], t["s503"], t["other_status"],
                t["other_statuses"], t["errors"], t["timeouts"], f(&t["p50_ms"]), f(&t["p99_ms"]),
                f(&t["ok_per_s"]),
            );
        }
    }
    for phase in PHASES {
        let e = &v["posts"][phase];
        println!(
            "posts    {phase:5}: {} tried, {} accepted, {} shown to the member at once, {} on the list for anonymous readers within {} s (slowest {} ms), {} both, post p99 {} ms; problems: {}",
            e["saves"], e["stored"], e["shown_editor"], e["shown_anonymous"], v["visible_within_s"],
            f(&e["anonymous_delay_max_ms"]), e["shown_both"], f(&e["save_p99_ms"]), e["problems"],
        );
    }
    println!(
        "posts    due  : {} by the members' schedules",
        v["posts_due"]
    );
    for phase in PHASES {
        println!(
            "levee    {phase:5}: readers' X-Cache {}; members' X-Cache-Reason {}",
            v["readers_x_cache"][phase], v["members_x_cache_reason"][phase]
        );
    }
    println!(
        "cookies       : readers held {}, members {}",
        v["readers_cookies"], v["members_cookies"]
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
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("storm_board --target http://127.0.0.1:PORT --page PATH --member-jar FILE [--flag value]...; see the header of crates/levee-test/examples/storm_board.rs");
        return;
    }
    let a = parse_args(&argv);
    match run(&a) {
        Ok(v) => {
            show(&v);
            println!("RESULT {v}");
        }
        Err(e) => {
            eprintln!("storm_board: {e}");
            std::process::exit(1);
        }
    }
}

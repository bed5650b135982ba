//! What the lane tests share: a php-fpm site whose scripts log when each request starts
//! and ends, clients from chosen loopback networks, `/metrics` by class and label.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use levee_test::{levee, Levee, LeveeBuilder, PhpFpm, Req, Resp};
use tokio::task::JoinSet;

/// Included by the scripts: one line per event in `@STATE@/log`, appended under a lock.
pub(super) const LIB: &str = r#"<?php
function lane_log(string $line): void {
    file_put_contents('@STATE@/log', "$line\n", FILE_APPEND | LOCK_EX);
}
function lane_tag(string $default): string {
    return $_SERVER['HTTP_X_TAG'] ?? $_GET['tag'] ?? $default;
}
"#;

pub(super) const SCRIPTS: &[(&str, &str)] = &[
    // Uncacheable work of `ms` milliseconds; says what request body it received. With
    // `?auth=1` it asks for credentials first (401), as an API behind a login does.
    (
        "work.php",
        r#"<?php require '@LIB@';
if (isset($_GET['auth']) && ($_SERVER['HTTP_AUTHORIZATION'] ?? '') === '') {
    header('WWW-Authenticate: Basic realm="lanes"', true, 401);
    exit;
}
$tag = lane_tag('-');
$body = file_get_contents('php://input');
lane_log("start $tag");
usleep((int) ($_GET['ms'] ?? 0) * 1000);
lane_log("end $tag");
header('Content-Type: text/plain');
header('Cache-Control: no-store');
echo "done $tag len=", strlen($body), ' md5=', md5($body);
"#,
    ),
    // A wiki page, stored for an hour; `@STATE@/rev` is its revision, `@STATE@/page_ms`
    // how long it takes.
    (
        "page.php",
        r#"<?php require '@LIB@';
$tag = lane_tag('page');
lane_log("start $tag");
usleep((int) @file_get_contents('@STATE@/page_ms') * 1000);
$rev = (int) @file_get_contents('@STATE@/rev') ?: 1;
lane_log("end $tag");
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, max-age=3600');
echo "<p>revision $rev</p>";
"#,
    ),
    // A login: the form posted, a redirect with the person's session cookie (its name
    // and who it is for in the form), as WordPress, MediaWiki and gnuboard answer it.
    (
        "login.php",
        r#"<?php
setcookie($_POST['name'] ?? 'PHPSESSID', 'person-' . ($_POST['who'] ?? 'x') . '-5f0d8c2e9a7b41e3', ['path' => '/']);
// Not a stored page: a 3xx to a POST invalidates its Location (RFC 9111 §4.4).
header('Location: /', true, 302);
"#,
    ),
    // A logout: the session cookie deleted, as PHP applications delete it.
    (
        "logout.php",
        r#"<?php
setcookie('PHPSESSID', '', ['expires' => 1, 'path' => '/']);
header('Location: /', true, 302);
"#,
    ),
    // An editor's save: a new revision.
    (
        "edit.php",
        r#"<?php require '@LIB@';
$rev = ((int) @file_get_contents('@STATE@/rev') ?: 1) + 1;
file_put_contents('@STATE@/rev', (string) $rev, LOCK_EX);
lane_log("edit $rev");
header('Cache-Control: no-store');
echo "saved $rev";
"#,
    ),
];

/// How long a refusal may take here: it is answered at once (microseconds in levee),
/// far below any script's time; generous for a loaded test machine.
pub(super) const AT_ONCE: Duration = Duration::from_millis(500);

/// A document root with [`SCRIPTS`], a state directory beside it, and a php-fpm.
pub(super) struct Site {
    fpm: Option<PhpFpm>,
    base: PathBuf,
}

impl Site {
    pub(super) fn start(children: usize) -> Site {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "levee-lanes-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["www", "state"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let fill = |text: &str| {
            text.replace("@STATE@", &base.join("state").display().to_string())
                .replace("@LIB@", &base.join("lib.php").display().to_string())
        };
        std::fs::write(base.join("lib.php"), fill(LIB)).unwrap();
        for (name, text) in SCRIPTS {
            std::fs::write(base.join("www").join(name), fill(text)).unwrap();
        }
        let fpm = PhpFpm::builder(base.join("www"))
            .max_children(children)
            .start();
        Site {
            fpm: Some(fpm),
            base,
        }
    }

    /// `levee serve` in front of it (Unix socket), with these `[limits]` lines and the
    /// lane's share fixed (`backend_anonymous_adaptive = false`).
    pub(super) fn levee(&self, limits: &str) -> LeveeBuilder {
        let fpm = self.fpm.as_ref().unwrap();
        levee!()
            .backend(&format!("fastcgi+unix:{}", fpm.socket_path().display()))
            .arg("--root")
            .arg(self.base.join("www").to_str().unwrap())
            // The share as it is written: people's latency does not move it here (the
            // governor's own tests are levee-proxy's limit/governor.rs).
            .config(&format!(
                "[limits]\nbackend_anonymous_adaptive = false\n{limits}"
            ))
    }

    pub(super) fn state(&self, name: &str) -> PathBuf {
        self.base.join("state").join(name)
    }

    pub(super) fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.state("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The tags of the scripts that started, in order, without the warm-up's.
    pub(super) fn started(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter_map(|l| l.strip_prefix("start "))
            .filter(|t| !t.starts_with("warm"))
            .map(str::to_string)
            .collect()
    }

    pub(super) fn set_page_ms(&self, ms: u64) {
        std::fs::write(self.state("page_ms"), ms.to_string()).unwrap();
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Client `host` of network `n`: 127.n.0.host, in 127.n.0.0/24.
pub(super) fn net(n: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, n, 0, host))
}

/// Uncacheable work named `tag` that takes `ms` at the backend.
pub(super) fn work(tag: &str, ms: u64) -> Req {
    Req::get(&format!("/work.php?tag={tag}&ms={ms}"))
}

/// The cookie `login.php` gives `who` under `name`.
pub(super) fn person(name: &str, who: &str) -> String {
    format!("{name}=person-{who}-5f0d8c2e9a7b41e3")
}

/// Logs `who` in through levee (login.php): from now on levee counts the session
/// cookie it got (`person(name, who)`) as a person's, since it saw the backend give it
/// out at a login. Made-up session cookies are anonymous work (proven.rs).
pub(super) async fn log_in(levee: &Levee, name: &str, who: &str) -> String {
    let r = Req::post("/login.php", format!("name={name}&who={who}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .send(levee)
        .await;
    assert_eq!(r.status, 302, "the login: {}", r.summary());
    let cookie = person(name, who);
    let set = r.header("set-cookie").unwrap_or_default();
    assert!(
        set.starts_with(&cookie),
        "the login set {set:?}, not {cookie}"
    );
    cookie
}

/// A logged-in request of `who` (logged in first with `log_in(levee, "PHPSESSID", who)`).
pub(super) fn session(req: Req, who: &str) -> Req {
    req.header("cookie", &person("PHPSESSID", who))
        .header("x-tag", who)
}

pub(super) type Done = (String, Resp, Duration);

/// Sends `req` from `from` in a task of `set`; the task says its name, the response and
/// how long it took.
pub(super) fn spawn(set: &mut JoinSet<Done>, addr: SocketAddr, name: &str, from: IpAddr, req: Req) {
    let name = name.to_string();
    set.spawn(async move {
        let start = Instant::now();
        let r = req.send_from(addr, from).await;
        (name, r, start.elapsed())
    });
}

pub(super) async fn join_all(set: &mut JoinSet<Done>) -> Vec<Done> {
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        out.push(done.expect("client task"));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub(super) fn assert_ok(done: &[Done]) {
    for (name, r, _) in done {
        assert_eq!(r.status, 200, "{name}: {}", r.summary());
    }
}

/// Sequential quick anonymous requests from their own network, so that the lane has a
/// recent pace (what it can serve within backend_anonymous_wait) before the test.
pub(super) async fn warm_up(levee: &Levee) {
    for i in 0..10 {
        let r = work(&format!("warm{i}"), 0)
            .send_from(levee.addr(), net(250, 1))
            .await;
        assert_eq!(r.status, 200, "warm-up: {}", r.summary());
    }
}

/// Asserts `r` is a refusal: `status`, `X-Cache: ERROR`, this `X-Cache-Reason`, a
/// `Retry-After` of a second or more, answered at once.
pub(super) fn assert_refused(name: &str, r: &Resp, took: Duration, status: u16, reason: &str) {
    assert_eq!(r.status, status, "{name}: {}", r.summary());
    assert_eq!(r.x_cache(), "ERROR", "{name}: {}", r.summary());
    assert_eq!(r.reason(), reason, "{name}: {}", r.summary());
    let retry = r
        .header("retry-after")
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(
        retry.is_some_and(|s| s >= 1),
        "{name}: no usable Retry-After: {:?}",
        r.headers
    );
    assert!(
        took < AT_ONCE,
        "{name}: refused after {took:?}, not at once"
    );
}

/// One scrape of `/metrics`.
pub(super) struct Metrics(pub(super) String);

impl Metrics {
    pub(super) async fn of(levee: &Levee) -> Metrics {
        let r = levee.admin(Req::get("/metrics")).await;
        assert_eq!(r.status, 200, "GET /metrics: {}", r.summary());
        Metrics(r.text())
    }

    /// The sum of the series of `name` that have these labels (and maybe others).
    /// Panics if levee has no such series at all.
    pub(super) fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut found = None;
        for line in self.0.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                continue;
            }
            let have: Vec<(&str, &str)> = rest
                .trim_end_matches('}')
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
                .collect();
            if labels.iter().all(|l| have.contains(l)) {
                *found.get_or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(f64::NAN);
            }
        }
        found.unwrap_or_else(|| panic!("no {name}{labels:?} in /metrics:\n{}", self.0))
    }

    pub(super) fn class(&self, name: &str, class: &str) -> f64 {
        self.get(name, &[("class", class)])
    }
}

/// Waits (10 s at most) until `cond` holds for `name{class=...}`.
pub(super) async fn wait_class(levee: &Levee, name: &str, class: &str, cond: impl Fn(f64) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = Metrics::of(levee).await;
        if cond(m.class(name, class)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{{class={class:?}}} stayed at {}; metrics:\n{}\nstderr:\n{}",
            m.class(name, class),
            m.0,
            levee.stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The most anonymous scripts (tags for which `anonymous` holds) running when one of
/// them started while a person's script ran, by the log. Counted only where anonymous
/// work is let in: what was already running when people's work came is never cut. In
/// php-fpm's view, which is within levee's slots (a script logs its end before levee
/// frees its slot and its start after levee gave it one).
pub(super) fn anonymous_beside_people(log: &[String], anonymous: impl Fn(&str) -> bool) -> usize {
    let mut running: Vec<&str> = Vec::new();
    let mut most = 0;
    for line in log {
        if let Some(tag) = line.strip_prefix("start ") {
            running.push(tag);
            let anon = running.iter().filter(|t| anonymous(t)).count();
            if anonymous(tag) && anon < running.len() {
                most = most.max(anon);
            }
        } else if let Some(tag) = line.strip_prefix("end ") {
            running.retain(|t| *t != tag);
        }
    }
    most
}

/// An editor's save (a POST with `cookie`), then the wait until it has marked the
/// stored `/page.php` stale: levee marks the host's pages off the request path, a moment
/// after the editor's response (pass.rs, `soft_purge_host`). Returns what the save said.
pub(super) async fn edit(levee: &Levee, cookie: &str) -> String {
    let r = Req::post("/edit.php", "title=Main")
        .header("cookie", cookie)
        .send(levee)
        .await;
    assert_eq!(r.status, 200, "the edit: {}", r.summary());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stored = Req::get("/page.php")
            .header("cache-control", "only-if-cached")
            .send(levee)
            .await;
        if stored.x_cache() != "HIT" {
            return r.text();
        }
        assert!(
            Instant::now() < deadline,
            "the stored page is still fresh 5 s after the edit"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Stores `/page.php` (revision 1) and has an editor save revision 2, which marks it
/// stale; the backend is free, so the next reader waits for the revalidation.
pub(super) async fn stored_then_edited(levee: &Levee) {
    let r = levee.get("/page.php").await;
    assert_eq!(r.text(), "<p>revision 1</p>", "{}", r.summary());
    levee.wait_stored("/page.php").await;
    let editor = log_in(levee, "PHPSESSID", "editor").await;
    assert_eq!(edit(levee, &editor).await, "saved 2");
}

/// Whole tests run under this, so that a hang fails instead.
pub(super) async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(90), f)
        .await
        .expect("the test did not finish in time")
}

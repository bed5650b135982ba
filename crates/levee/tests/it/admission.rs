//! Admission to the backend with nobody to protect: saturation is measured (every slot
//! in use), never guessed from how long answers take. Slow answers of an idle backend,
//! revalidations among them, neither refuse anonymous work nor put stale pages in
//! place of revalidations; and with no person about, anonymous work may use every slot
//! php-fpm has.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use levee_test::{levee, Origin, PhpFpm, Reply, Req, Resp};
use tokio::task::JoinSet;

/// Clients at once, each in a closed loop over its block of URLs.
const CLIENTS: usize = 16;
/// URLs in a block: seven quick ones, then a slow one.
const BLOCK: usize = 8;
const ROUNDS: usize = 5;

/// How long the origin takes for `/p/{i}`, fresh or revalidated: 1 ms, or for the last
/// URL of each block of eight, 0.4 to 3 s (fixed per URL).
fn delay(i: usize) -> Duration {
    let pos = match std::env::var("SLOW_AT").as_deref() {
        Ok("mid") => 3,
        Ok("vary") => (i / BLOCK * 3) % BLOCK,
        Ok("first") => 0,
        _ => BLOCK - 1,
    };
    if i % BLOCK == pos {
        let spread = (i as u64).wrapping_mul(7919) % 2601;
        Duration::from_millis(400 + spread)
    } else {
        Duration::from_millis(1)
    }
}

/// One client of one network: every connection comes from the same address.
fn client() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 61, 0, 1))
}

/// What a client's loop saw: (URL index, response).
type Seen = Vec<(usize, Resp)>;

/// One client's closed loop over a block: each request when the last was answered.
async fn run_block(addr: std::net::SocketAddr, block: usize) -> Seen {
    let mut seen = Vec::with_capacity(BLOCK);
    for i in block * BLOCK..(block + 1) * BLOCK {
        let r = Req::get(&format!("/p/{i}")).send_from(addr, client()).await;
        seen.push((i, r));
    }
    seen
}

/// An idle origin (it never queues: each answer takes its own time) behind an adaptive
/// limit, one client sending 16 requests at once, no session anywhere. Each round after
/// the first, levee's clock moves past the pages' max-age: eight clients revalidate
/// pages stored before (shared work, 304s, one in eight slow), eight fetch new ones
/// (anonymous work, one in eight slow). The old rule read the slow revalidations as
/// people's latency, cut the anonymous lane, and then called the backend saturated
/// while the lane had waiters: stale pages instead of revalidations, refusals. Nothing
/// here is saturated: every answer is 200, each a MISS or REVALIDATED as expected,
/// none STALE, nothing refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_false_alarm_from_slow_answers_of_an_idle_backend() {
    let origin = Origin::start(|r| {
        let i: usize = r
            .path
            .strip_prefix("/p/")
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        if i == usize::MAX {
            return Reply::status(404);
        }
        let etag = format!("\"p{i}\"");
        let reply = if r.header("if-none-match") == Some(etag.as_str()) {
            Reply::status(304)
        } else {
            Reply::text(format!("page {i}")).header("content-type", "text/plain")
        };
        reply
            .header("cache-control", "max-age=1")
            .header("etag", &etag)
            .delay(delay(i))
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let addr = levee.addr();
    let started = Instant::now();
    let admin = levee.admin_addr().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let poller = tokio::spawn(async move {
        let mut trace: Vec<(u128, f64, f64, f64, f64)> = Vec::new();
        let t0 = Instant::now();
        while !stop2.load(Ordering::SeqCst) {
            let r = Req::get("/metrics").send_to(admin).await.text();
            let get = |n: &str| {
                r.lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == n).then(|| v.parse::<f64>().ok()).flatten()
                    })
                    .unwrap_or(-1.0)
            };
            let v = (
                t0.elapsed().as_millis(),
                get("levee_backend_limit"),
                get("levee_backend_in_use"),
                get("levee_backend_in_flight{class=\"anonymous\"}"),
                get("levee_backend_queued{class=\"anonymous\"}"),
            );
            trace.push(v);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        trace
    });
    let test = async {
        let mut expected = Vec::new();
        let mut seen: Seen = Vec::new();
        for round in 0..ROUNDS {
            // Blocks fetched for the first time, and blocks stored in an earlier round.
            let (fresh, again) = match round {
                0 => (0..CLIENTS, 0..0),
                r => (
                    CLIENTS / 2 * (r + 1)..CLIENTS / 2 * (r + 2),
                    CLIENTS / 2 * (r - 1)..CLIENTS / 2 * r,
                ),
            };
            if round > 0 {
                // Every stored page is past its max-age (well within grace): each of
                // `again` is revalidated, or served stale if levee thinks it must.
                levee.advance_clock(Duration::from_secs(2)).await;
                origin.advance_clock(Duration::from_secs(2));
            }
            let mut set = JoinSet::new();
            for b in fresh.clone().chain(again.clone()) {
                set.spawn(run_block(addr, b));
            }
            for b in fresh {
                expected.extend((b * BLOCK..(b + 1) * BLOCK).map(|i| (i, "MISS")));
            }
            for b in again {
                expected.extend((b * BLOCK..(b + 1) * BLOCK).map(|i| (i, "REVALIDATED")));
            }
            while let Some(done) = set.join_next().await {
                seen.extend(done.expect("client task"));
            }
            // Stored, and every slot given back, before the clock moves again.
            levee.wait_fills_done().await;
            levee.wait_backend_idle().await;
            eprintln!(
                "round {round}: {:?}, limit {}, refused {}",
                started.elapsed(),
                levee.metric("levee_backend_limit").await,
                levee.metric_sum("levee_backend_refused_total").await
            );
        }
        (expected, seen)
    };
    let (mut expected, mut seen) = tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the rounds did not end within 60 s");
    stop.store(true, Ordering::SeqCst);
    let trace = poller.await.unwrap();
    let minlim = trace.iter().map(|t| t.1).fold(f64::MAX, f64::min);
    let maxuse = trace.iter().map(|t| t.2).fold(0.0, f64::max);
    eprintln!("min limit {minlim}, max in_use {maxuse}");
    if std::env::var("TRACE").is_ok() {
        for t in &trace {
            eprintln!("{t:?}");
        }
    }
    for (i, r) in &seen {
        if r.x_cache() == "STALE" {
            eprintln!("STALE {i}: {}", r.summary());
        }
    }
    expected.sort_unstable();
    seen.sort_unstable_by_key(|(i, _)| *i);

    let bad: Vec<String> = seen
        .iter()
        .filter(|(_, r)| r.status != 200)
        .map(|(i, r)| format!("/p/{i}: {}", r.summary()))
        .collect();
    assert!(bad.is_empty(), "refused or failed: {bad:#?}");
    let mut got: Vec<(usize, &str)> = seen.iter().map(|(i, r)| (*i, r.x_cache())).collect();
    got.sort_unstable();
    let stale: Vec<&(usize, &str)> = got.iter().filter(|(_, x)| *x == "STALE").collect();
    assert!(
        stale.is_empty(),
        "{} stale pages from an idle backend: {stale:?}",
        stale.len()
    );
    let wrong: Vec<String> = got
        .iter()
        .zip(&expected)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("{a:?} want {b:?}"))
        .collect();
    assert!(wrong.is_empty(), "X-Cache: {wrong:#?}");
    assert_eq!(got, expected, "X-Cache of each URL");
    assert_eq!(
        levee.metric_sum("levee_backend_refused_total").await,
        0.0,
        "refusals"
    );
    // Every request reached the origin, the revalidations as conditional ones.
    let recorded = origin.recorded();
    let conditional = recorded
        .iter()
        .filter(|r| r.header("if-none-match").is_some())
        .count();
    let revalidations = expected.iter().filter(|(_, x)| *x == "REVALIDATED").count();
    assert_eq!(conditional, revalidations);
    assert_eq!(recorded.len(), expected.len());
    eprintln!(
        "{} requests in {:?}; the origin saw {} at once",
        expected.len(),
        started.elapsed(),
        origin.max_in_flight()
    );
}

/// The php-fpm script: uncacheable work of `ms` milliseconds, its start and end
/// appended to `@LOG@` (one line each, under a lock).
const WORK_PHP: &str = r#"<?php
$tag = $_GET['tag'] ?? '-';
file_put_contents('@LOG@', "start $tag\n", FILE_APPEND | LOCK_EX);
usleep((int) ($_GET['ms'] ?? 0) * 1000);
file_put_contents('@LOG@', "end $tag\n", FILE_APPEND | LOCK_EX);
header('Content-Type: text/plain');
header('Cache-Control: no-store');
echo "done $tag";
"#;

/// A document root with `work.php` and a php-fpm of `children` workers; both removed
/// when dropped.
struct Site {
    fpm: Option<PhpFpm>,
    base: PathBuf,
}

impl Site {
    fn start(children: usize) -> Site {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "levee-admission-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("www")).unwrap();
        let log = base.join("work.log");
        std::fs::write(
            base.join("www").join("work.php"),
            WORK_PHP.replace("@LOG@", &log.display().to_string()),
        )
        .unwrap();
        let fpm = PhpFpm::builder(base.join("www"))
            .max_children(children)
            .start();
        Site {
            fpm: Some(fpm),
            base,
        }
    }

    fn fpm(&self) -> &PhpFpm {
        self.fpm.as_ref().unwrap()
    }

    /// The most scripts that ran at once, by their log.
    fn most_at_once(&self) -> usize {
        let log = std::fs::read_to_string(self.base.join("work.log")).unwrap_or_default();
        let (mut running, mut most) = (0usize, 0usize);
        for line in log.lines() {
            if line.starts_with("start ") {
                running += 1;
                most = most.max(running);
            } else if line.starts_with("end ") {
                running = running.saturating_sub(1);
            }
        }
        most
    }

    /// The tags of the scripts that ran to their end.
    fn ended(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.base.join("work.log")).unwrap_or_default();
        let mut tags: Vec<String> = log
            .lines()
            .filter_map(|l| l.strip_prefix("end "))
            .map(str::to_string)
            .collect();
        tags.sort();
        tags
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// php-fpm with `pm.max_children = 4` and no limit in levee's configuration: levee
/// reads the pool's size, so the limit is 4. No person anywhere, one client network
/// sends 16 uncacheable requests of 300 ms at once: anonymous work alone takes every
/// slot (the lane's and the network's shares hold only while people work or other
/// networks wait), php-fpm runs four scripts at once, and all 16 are served, none
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_work_keeps_every_slot_of_a_four_child_php_fpm_busy() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(4);
    let levee = levee!()
        .backend(&format!(
            "fastcgi+unix:{}",
            site.fpm().socket_path().display()
        ))
        .arg("--root")
        .arg(site.fpm().docroot().to_str().unwrap())
        .start();
    let addr = levee.addr();
    let test = async {
        assert_eq!(levee.metric("levee_backend_limit").await, 4.0);
        assert!(
            levee.stderr().contains("pm.max_children of php-fpm's pool"),
            "{}",
            levee.stderr()
        );
        let from = IpAddr::V4(Ipv4Addr::new(127, 62, 0, 1));
        let mut set = JoinSet::new();
        for i in 0..16 {
            set.spawn(async move {
                let r = Req::get(&format!("/work.php?tag=w{i:02}&ms=300"))
                    .send_from(addr, from)
                    .await;
                (i, r)
            });
        }
        let mut done = Vec::new();
        while let Some(d) = set.join_next().await {
            done.push(d.expect("client task"));
        }
        done.sort_by_key(|(i, _)| *i);
        for (i, r) in &done {
            assert_eq!(r.status, 200, "w{i:02}: {}", r.summary());
            assert_eq!(r.text(), format!("done w{i:02}"));
        }
        let mut want: Vec<String> = (0..16).map(|i| format!("w{i:02}")).collect();
        want.sort();
        assert_eq!(site.ended(), want, "the scripts that ran");
        assert_eq!(
            site.most_at_once(),
            4,
            "scripts running at once in php-fpm with 4 children"
        );
        assert_eq!(levee.metric_sum("levee_backend_refused_total").await, 0.0);
        assert_eq!(
            levee
                .metric("levee_backend_admitted_total{class=\"anonymous\"}")
                .await,
            16.0
        );
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test did not finish in time");
}

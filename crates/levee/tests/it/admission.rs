//! Admission to the backend with nobody to protect: saturation is measured (every slot
//! in use), never guessed from how long answers take. Slow answers of an idle backend,
//! revalidations among them, neither refuse anonymous work nor put stale pages in
//! place of revalidations; and with no person about, anonymous work may use every slot
//! php-fpm has.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use levee_test::{levee, Origin, PhpFpm, Reply, Req, Resp};
use tokio::task::JoinSet;

/// Clients at once, each in a closed loop over its block of URLs.
const CLIENTS: usize = 16;
/// URLs in a block: one of them slow.
const BLOCK: usize = 8;
const ROUNDS: usize = 5;

/// How long the origin takes for `/p/{i}`, fresh or revalidated: 1 ms, or for one URL
/// in each block of eight (not always at the same place in the block) 0.4 to 3 s. Fixed
/// per URL.
fn delay(i: usize) -> Duration {
    let block = i / BLOCK;
    if i % BLOCK == block * 3 % BLOCK {
        let spread = (i as u64 * 7919) % 2601;
        Duration::from_millis(400 + spread)
    } else {
        Duration::from_millis(1)
    }
}

/// The origin: `/p/{i}` is stored for a second with an ETag, and answered 304 to that
/// ETag; each answer takes `delay(i)`, however many are in flight (it never queues).
fn idle_origin() -> Origin {
    Origin::start(|r| {
        let Some(i) = r.path.strip_prefix("/p/").and_then(|n| n.parse().ok()) else {
            return Reply::status(404);
        };
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
    })
}

/// One client, one network: every connection comes from this address.
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 61, 0, 1));

/// One client's closed loop over block `block`: each request once the last is
/// answered. (URL index, response) for each.
async fn run_block(addr: SocketAddr, block: usize) -> Vec<(usize, Resp)> {
    let mut seen = Vec::with_capacity(BLOCK);
    for i in block * BLOCK..(block + 1) * BLOCK {
        let r = Req::get(&format!("/p/{i}")).send_from(addr, CLIENT).await;
        seen.push((i, r));
    }
    seen
}

/// The blocks round `round` fetches for the first time, and those it revalidates:
/// round 0 fetches 16, each later one 8 new and 8 stored two rounds before (or one,
/// for round 1).
fn blocks(round: usize) -> (Range<usize>, Range<usize>) {
    let half = CLIENTS / 2;
    match round {
        0 => (0..CLIENTS, 0..0),
        r => (half * (r + 1)..half * (r + 2), half * (r - 1)..half * r),
    }
}

/// An idle origin (each answer takes its own time, however many are in flight) behind
/// an adaptive limit (no `backend_max_concurrency`), one client sending 16 requests at
/// once in a closed loop, no session anywhere. Before each round after the first,
/// levee's clock (and the origin's) moves past the pages' max-age: eight clients
/// revalidate pages stored before (shared work: 304s, one in eight slow), eight fetch
/// new ones (anonymous work, one in eight slow). The old rule took the slow
/// revalidations for people's latency, cut the anonymous lane, and then called the
/// backend saturated while the lane had waiters: stale pages instead of revalidations,
/// anonymous requests refused (`anonymous-lane-full`, `anonymous-wait`). Nothing here is
/// saturated: every answer is a 200, a MISS or REVALIDATED as expected, none STALE,
/// nothing refused, and every request reached the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_false_alarm_from_slow_answers_of_an_idle_backend() {
    let origin = idle_origin();
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let addr = levee.addr();
    let started = Instant::now();
    // The limit's lowest value meanwhile, for the failure messages: stale pages or
    // refusals with every slot in use mean the limit fell below 16.
    let lowest = AtomicUsize::new(usize::MAX);
    let done = AtomicBool::new(false);
    let rounds = async {
        let mut expected = Vec::new();
        let mut seen = Vec::new();
        for round in 0..ROUNDS {
            let (new, stored) = blocks(round);
            if round > 0 {
                // Every stored page is past its max-age, well within grace: revalidated,
                // or served stale if levee thinks the backend is saturated.
                levee.advance_clock(Duration::from_secs(2)).await;
                origin.advance_clock(Duration::from_secs(2));
            }
            let mut set = JoinSet::new();
            for b in new.clone().chain(stored.clone()) {
                set.spawn(run_block(addr, b));
            }
            let urls = |r: Range<usize>| r.start * BLOCK..r.end * BLOCK;
            expected.extend(urls(new).map(|i| (i, "MISS")));
            expected.extend(urls(stored).map(|i| (i, "REVALIDATED")));
            while let Some(block) = set.join_next().await {
                seen.extend(block.expect("client task"));
            }
            // Stored, and every slot given back, before the clock moves again.
            levee.wait_fills_done().await;
            levee.wait_backend_idle().await;
        }
        done.store(true, Ordering::SeqCst);
        (expected, seen)
    };
    let watch = async {
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        while !done.load(Ordering::SeqCst) {
            let limit = levee.metric("levee_backend_limit").await as usize;
            lowest.fetch_min(limit, Ordering::SeqCst);
            tick.tick().await;
        }
    };
    let ((mut expected, seen), ()) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(rounds, watch)
    })
    .await
    .expect("the rounds did not end within 60 s");
    let lowest = lowest.load(Ordering::SeqCst);

    let failed: Vec<String> = seen
        .iter()
        .filter(|(_, r)| r.status != 200)
        .map(|(i, r)| format!("/p/{i}: {}", r.summary()))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} refused or failed (the limit fell to {lowest}): {failed:#?}",
        failed.len(),
        seen.len()
    );
    let stale: Vec<String> = seen
        .iter()
        .filter(|(_, r)| r.x_cache() == "STALE")
        .map(|(i, r)| format!("/p/{i}: {}", r.summary()))
        .collect();
    assert!(
        stale.is_empty(),
        "{} stale pages from an idle backend (the limit fell to {lowest}): {stale:#?}",
        stale.len()
    );
    let mut got: Vec<(usize, &str)> = seen.iter().map(|(i, r)| (*i, r.x_cache())).collect();
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected, "X-Cache of each URL");
    assert_eq!(
        levee.metric_sum("levee_backend_refused_total").await,
        0.0,
        "refusals"
    );
    // Every request reached the origin; the revalidations with levee's validator.
    let recorded = origin.recorded();
    let revalidations = expected.iter().filter(|(_, x)| *x == "REVALIDATED").count();
    let conditional = recorded
        .iter()
        .filter(|r| r.header("if-none-match").is_some())
        .count();
    assert_eq!(recorded.len(), expected.len(), "requests at the origin");
    assert_eq!(conditional, revalidations, "revalidations at the origin");
    eprintln!(
        "{} requests in {:?}; the origin had {} at once; the limit was {lowest} at its lowest",
        seen.len(),
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

//! The shared tier on Redis as people run it (issue 52): a Redis Cluster of 3 primaries
//! and 3 replicas, and Sentinel watching a primary and its replica. Real `redis-server`
//! processes (levee_test::RedisCluster, RedisSentinel), real levee nodes: they share
//! hits, purges, proven sessions and the fleet's leases there, and go on through a slot
//! migration and a primary's death with no client error and no purge lost.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use levee_test::{levee, Levee, Origin, RedisCluster, RedisSentinel, Reply, Req, Resp};

use crate::fleet::within;

const SESSION: &str = "PHPSESSID=5b1e0c9d8a7f6e5d4c3b2a1908f7e6d5";

/// Cacheable pages (`/p/...`) whose body names the path, a login that sets
/// [`SESSION`], and uncacheable `/whoami` for a session's check.
fn site() -> Origin {
    Origin::start(|r| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/login") => Reply::status(302)
            .header("location", "/")
            .header("set-cookie", &format!("{SESSION}; path=/; HttpOnly")),
        (_, "/whoami") => Reply::text("you").header("cache-control", "no-store"),
        _ => Reply::text(format!("page {}", r.path))
            .header("cache-control", "public, max-age=3600")
            .header("content-type", "text/html"),
    })
}

/// `n` levee nodes in front of `origin`, sharing the Redis `urls` name, each up.
async fn nodes(origin: &Origin, urls: &[String], n: usize) -> Vec<Levee> {
    let mut args = Vec::new();
    for u in urls {
        args.push("--cache-redis".to_string());
        args.push(u.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nodes: Vec<Levee> = (0..n)
        .map(|_| {
            levee!()
                .backend(&origin.url())
                .debug_headers()
                .args(&args)
                .start()
        })
        .collect();
    for node in &nodes {
        node.wait_metric_within("levee_redis_up", Duration::from_secs(20), |v| v == 1.0)
            .await;
    }
    nodes
}

/// What `levee serve --check` says of the shared tier at `urls`: its first line, and
/// the fleets' lines after it.
fn check_says(urls: &[String]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_levee"));
    cmd.args(["serve", "--check", "--backend", "http://127.0.0.1:9"]);
    for u in urls {
        cmd.args(["--cache-redis", u]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .skip_while(|l| !l.starts_with("fleet: Redis"))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn get(levee: &Levee, path: &str) -> Resp {
    Req::get(path).header("host", "site.test").send(levee).await
}

fn assert_page(r: &Resp, path: &str) {
    assert_eq!(r.status, 200, "{path}: {}", r.summary());
    assert_eq!(r.text(), format!("page {path}"), "{path}");
}

/// `only-if-cached`: 200 while `levee` holds `path`, 504 once it is gone; never asks the
/// backend.
async fn cached(levee: &Levee, path: &str) -> http::StatusCode {
    Req::get(path)
        .header("host", "site.test")
        .header("cache-control", "only-if-cached")
        .send(levee)
        .await
        .status
}

/// A miss on `a` is a hit on `b` with one backend request.
async fn shares_a_fill(a: &Levee, b: &Levee, origin: &Origin, path: &str) {
    let written = a.metric("levee_redis_writes_total").await;
    let r = get(a, path).await;
    assert_page(&r, path);
    assert_eq!(r.x_cache(), "MISS", "{path} on a");
    a.wait_fills_done().await;
    // Written to Redis in the background: this fill's write, not an earlier one.
    a.wait_metric_within("levee_redis_writes_total", Duration::from_secs(20), |n| {
        n > written
    })
    .await;
    let r = get(b, path).await;
    assert_page(&r, path);
    assert_eq!(r.x_cache(), "HIT", "{path} on b: {}", r.summary());
    assert_eq!(origin.requests_for(path), 1, "{path} fetched twice");
}

/// A purge on `from` empties `path` on every node of `to` (each held it) within
/// `limit`.
async fn purge_reaches(from: &Levee, to: &[&Levee], path: &str, limit: Duration) {
    from.purge(&format!("url=http://site.test{path}")).await;
    for n in to {
        within(
            limit,
            &format!("the purge of {path} to reach a node"),
            || async { cached(n, path).await == 504 },
        )
        .await;
    }
}

/// What levee says of a session cookie (`X-Cache-Reason`): unproven or not.
async fn session_counts(levee: &Levee) -> bool {
    let r = Req::get("/whoami")
        .header("host", "site.test")
        .header("cookie", SESSION)
        .send(levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    r.reason() == "session-cookie:PHPSESSID"
}

async fn log_in(levee: &Levee) {
    let r = Req::post("/login", "user=editor&password=secret")
        .header("host", "site.test")
        .send(levee)
        .await;
    assert_eq!(r.status, 302, "{}", r.summary());
}

/// Requests on every node, round robin over `paths`, until stopped: every answer must
/// be the page (a client error fails the test at its end, with what it got).
struct Load {
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Load {
    fn start(nodes: &[Levee], paths: Vec<String>) -> Load {
        let addrs: Vec<_> = nodes.iter().map(|n| n.addr()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (s, n) = (stop.clone(), served.clone());
        let task = tokio::spawn(async move {
            let mut bad = Vec::new();
            let mut i = 0usize;
            while !s.load(Ordering::Relaxed) {
                let path = &paths[i % paths.len()];
                // Never a panic here: a failed exchange is one of `bad`, said by
                // `finish`. A panic on this task would also bury the test's own
                // message under its backtrace when the test fails and kills the nodes.
                let r = Req::get(path)
                    .header("host", "site.test")
                    .try_send_to(addrs[(i / paths.len() + i) % addrs.len()])
                    .await;
                match r {
                    Some(r) if r.status == 200 && r.text() == format!("page {path}") => {}
                    Some(r) => bad.push(format!("{path}: {}", r.summary())),
                    None => bad.push(format!("{path}: no answer")),
                }
                n.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            bad
        });
        Load { stop, served, task }
    }

    /// Waits until `more` requests were served after now.
    async fn serves(&self, more: usize) {
        let target = self.served.load(Ordering::Relaxed) + more;
        within(Duration::from_secs(30), "the load to go on", || async {
            self.served.load(Ordering::Relaxed) >= target
        })
        .await;
    }

    async fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let bad = (&mut self.task).await.unwrap();
        assert!(bad.is_empty(), "client errors under load: {bad:?}");
        self.served.load(Ordering::Relaxed)
    }
}

/// A test that fails stops its load before its nodes go.
impl Drop for Load {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn paths(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/p/{prefix}/{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_shares_hits_purges_sessions_and_the_fleet() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start();
    let origin = site();
    let mut n = nodes(&origin, &cluster.urls(), 1).await;
    // One URL of a Cluster node is enough: the node says it is one.
    n.extend(nodes(&origin, &cluster.urls()[..1], 1).await);
    let (a, b) = (&n[0], &n[1]);
    let metrics = a.admin(Req::get("/metrics")).await.text();
    assert_eq!(
        metrics
            .matches("levee_redis_primary{mode=\"cluster\"")
            .count(),
        3,
        "{metrics}"
    );
    // Keys on every primary: a record's slot is its hash's.
    for i in 0..6 {
        shares_a_fill(a, b, &origin, &format!("/p/shared/{i}")).await;
    }
    purge_reaches(a, &[b], "/p/shared/0", Duration::from_secs(5)).await;
    log_in(a).await;
    within(Duration::from_secs(5), "the proof to reach node b", || {
        session_counts(b)
    })
    .await;
    // The fleet's leases live in the Cluster too: each node sees the other, and
    // `serve --check` finds them on whichever primary holds them.
    for node in [a, b] {
        get(node, "/whoami").await;
        node.wait_metric_within("levee_fleet_nodes", Duration::from_secs(10), |v| v == 2.0)
            .await;
    }
    let said = check_says(&cluster.urls());
    assert!(
        said.contains("is reachable, a Cluster of 3 primaries"),
        "{said}"
    );
    assert!(said.contains("2 node(s) alive"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_loses_nothing_through_a_slot_migration_and_a_primary_killed() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start();
    let origin = site();
    let n = nodes(&origin, &cluster.urls(), 2).await;
    let (a, b) = (&n[0], &n[1]);
    let load = Load::start(&n, paths("load", 40));
    load.serves(200).await;

    // A slot migration under load; a purge made during it reaches the other node.
    let primaries = cluster.primaries();
    let reshard = cluster.reshard_in_background(primaries[0], primaries[1], 2000);
    for path in ["/p/moved/0", "/p/moved/1", "/p/moved/2"] {
        shares_a_fill(a, b, &origin, path).await;
    }
    purge_reaches(a, &[b], "/p/moved/1", Duration::from_secs(10)).await;
    reshard.wait().expect("the reshard");
    load.serves(200).await;

    // A primary killed under load: its replica takes over; a purge made before the
    // Cluster has noticed is not lost, nor one made after.
    for path in ["/p/kept/0", "/p/kept/1"] {
        shares_a_fill(a, b, &origin, path).await;
    }
    // The first primary: the node each levee subscribed to (the primaries are tried in
    // order), so the subscription is lost too and taken again on another node.
    let victim = cluster.primaries()[0];
    cluster.kill(victim);
    purge_reaches(a, &[b], "/p/kept/0", Duration::from_secs(30)).await;
    let promoted = cluster.wait_promoted(victim);
    for node in [a, b] {
        node.wait_metric_within(
            "levee_redis_failovers_total",
            Duration::from_secs(20),
            |v| v >= 1.0,
        )
        .await;
        // Its subscription was on the killed node: it connected again elsewhere.
        node.wait_metric_within(
            "levee_redis_reconnects_total",
            Duration::from_secs(20),
            |v| v >= 1.0,
        )
        .await;
        let metrics = node.admin(Req::get("/metrics")).await.text();
        assert!(
            metrics.contains(&format!("primary=\"127.0.0.1:{promoted}\"")),
            "the promoted replica {promoted} is not shown: {metrics}"
        );
    }
    purge_reaches(b, &[a], "/p/kept/1", Duration::from_secs(10)).await;
    shares_a_fill(b, a, &origin, "/p/after/0").await;
    load.serves(200).await;
    let served = load.finish().await;
    eprintln!("{served} requests through a reshard and a failover, none failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_moves_the_nodes_to_the_new_primary_without_a_restart() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let sentinel = RedisSentinel::start();
    let origin = site();
    let n = nodes(&origin, &[sentinel.url()], 2).await;
    let (a, b) = (&n[0], &n[1]);
    shares_a_fill(a, b, &origin, "/p/before").await;
    log_in(a).await;
    within(Duration::from_secs(5), "the proof to reach node b", || {
        session_counts(b)
    })
    .await;
    let load = Load::start(&n, paths("load", 40));
    load.serves(200).await;

    let old = sentinel.kill_primary();
    let new = sentinel.wait_failover(old);
    for node in [a, b] {
        within(
            Duration::from_secs(20),
            "the node to follow the failover",
            || async {
                let m = node.admin(Req::get("/metrics")).await.text();
                m.contains(&format!("primary=\"127.0.0.1:{new}\""))
                    && m.contains("levee_redis_up 1")
            },
        )
        .await;
        assert!(node.metric("levee_redis_failovers_total").await >= 1.0);
    }
    let said = check_says(&[sentinel.url()]);
    assert!(
        said.contains(&format!("through Sentinel: primary 127.0.0.1:{new}")),
        "{said}"
    );
    // Sharing resumes on the new primary: fills, purges, and the fleet.
    shares_a_fill(b, a, &origin, "/p/after").await;
    purge_reaches(a, &[a, b], "/p/after", Duration::from_secs(5)).await;
    for node in [a, b] {
        get(node, "/whoami").await;
        node.wait_metric_within("levee_fleet_nodes", Duration::from_secs(10), |v| v == 2.0)
            .await;
    }
    load.serves(200).await;
    load.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_reaches_a_cluster_and_a_sentinel_primary() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start_with_auth("levee", "s3cret-pass");
    let origin = site();
    let n = nodes(&origin, &cluster.urls(), 2).await;
    shares_a_fill(&n[0], &n[1], &origin, "/p/cluster-acl").await;
    drop(n);
    let sentinel = RedisSentinel::start_with_auth("levee", "s3cret-pass");
    let n = nodes(&origin, &[sentinel.url()], 2).await;
    shares_a_fill(&n[0], &n[1], &origin, "/p/sentinel-acl").await;
    // The password is never shown.
    let metrics = n[0].admin(Req::get("/metrics")).await.text();
    assert!(!metrics.contains("s3cret-pass"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_limit_holds_on_a_cluster_and_through_sentinel() {
    use crate::fleet::{never_more_than_four, Fleet};
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let fleet = Fleet::start_on(cluster, &urls, 3, "backend_max_concurrency = 4").await;
    never_more_than_four(&fleet).await;
    drop(fleet);
    let sentinel = RedisSentinel::start();
    let url = sentinel.url();
    let fleet = Fleet::start_on(sentinel, &[url], 3, "backend_max_concurrency = 4").await;
    never_more_than_four(&fleet).await;
    // After a failover the nodes share the capacity again on the new primary.
    let old = fleet.redis.kill_primary();
    fleet.redis.wait_failover(old);
    for node in &fleet.nodes {
        node.wait_metric_within(
            "levee_redis_failovers_total",
            Duration::from_secs(20),
            |v| v >= 1.0,
        )
        .await;
        node.wait_metric_within("levee_fleet_alone", Duration::from_secs(10), |v| v == 0.0)
            .await;
    }
    fleet.origin.reset();
    never_more_than_four(&fleet).await;
}

/// A partition, as Sentinel resolves one: the sentinels promote another server while
/// the old primary, cut off from them, still says it is a primary. A node that kept
/// writing there would share nothing with the nodes on the new one; it asks the
/// sentinels every few seconds and moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_primary_the_sentinels_no_longer_name_is_left() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let sentinel = RedisSentinel::start();
    let origin = site();
    let n = nodes(&origin, &[sentinel.url()], 1).await;
    let old = sentinel.primary_port();
    let other = *sentinel.ports().iter().find(|p| **p != old).unwrap();
    // The replica made a primary and named by every sentinel; the old one untouched.
    assert!(sentinel.command(other, "REPLICAOF NO ONE").contains("OK"));
    for s in sentinel.sentinel_ports() {
        sentinel.command(s, "SENTINEL REMOVE mymaster");
        let said = sentinel.command(s, &format!("SENTINEL MONITOR mymaster 127.0.0.1 {other} 2"));
        assert!(said.contains("OK"), "{said}");
    }
    assert!(sentinel.command(old, "ROLE").contains("master"));
    within(
        Duration::from_secs(15),
        "the node to move to the named primary",
        || async {
            let m = n[0].admin(Req::get("/metrics")).await.text();
            m.contains(&format!("primary=\"127.0.0.1:{other}\"")) && m.contains("levee_redis_up 1")
        },
    )
    .await;
    assert_eq!(n[0].metric("levee_redis_failovers_total").await, 1.0);
}

#[test]
fn serve_check_refuses_a_redis_url_it_cannot_read() {
    for (urls, says) in [
        (
            vec!["redis+sentinel://127.0.0.1:26379"],
            "no primary's name",
        ),
        (
            vec!["redis://127.0.0.1:6379", "redis+unix:///tmp/redis.sock"],
            "Cluster's",
        ),
    ] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_levee"));
        cmd.args(["serve", "--check", "--backend", "http://127.0.0.1:9"]);
        for u in &urls {
            cmd.args(["--cache-redis", u]);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{urls:?}: {err}");
        assert!(err.contains(says), "{urls:?}: {err}");
    }
}

//! The cache tiers below memory (issue 23): a directory on disk that survives restarts
//! and crashes, and a Redis shared by several nodes. Real `levee` processes, a real
//! directory, a real `redis-server`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use levee_test::{levee, Levee, Origin, Recorded, Reply, Req, Resp};

/// The body the origin sends for `path`: a pattern of the path, 1 KiB to 200 KiB by a
/// hash of it, so a torn or mixed copy cannot match by chance.
fn body_for(path: &str) -> Vec<u8> {
    let h = path.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    let len = 1024 + (h % (200 * 1024)) as usize;
    let line = format!("{path}:{h:016x}\n");
    line.as_bytes().iter().copied().cycle().take(len).collect()
}

/// Cacheable pages of `body_for(path)`, tagged `t-<first segment>`.
fn origin() -> Origin {
    Origin::start(|r: &Recorded| {
        let tag = r
            .path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        Reply::ok()
            .header("content-type", "application/octet-stream")
            .header("cache-control", "public, max-age=3600")
            .header("surrogate-key", &format!("t-{tag}"))
            .body(body_for(&r.path))
    })
}

/// Checks a response is the whole page the origin sent for `path`.
fn assert_page(r: &Resp, path: &str) {
    assert_eq!(r.status, 200, "{path}: {}", r.summary());
    assert!(
        r.body[..] == body_for(path)[..],
        "{path}: a body of {} bytes that is not what the origin sent ({} bytes)",
        r.body.len(),
        body_for(path).len()
    );
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("levee-{name}-"))
        .tempdir()
        .unwrap()
}

fn with_disk(origin: &Origin, dir: &std::path::Path) -> Levee {
    levee!()
        .backend(&origin.url())
        .args(&[
            "--cache-disk",
            dir.to_str().unwrap(),
            "--cache-disk-size",
            "256MiB",
        ])
        .start()
}

/// `GET path` with the Host every node of a cluster sees.
async fn get(levee: &Levee, path: &str) -> Resp {
    Req::get(path).header("host", "site.test").send(levee).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_objects_survive_a_restart() {
    let origin = origin();
    let dir = temp_dir("disk-restart");
    let paths: Vec<String> = (0..20).map(|i| format!("/keep/{i}")).collect();
    {
        let levee = with_disk(&origin, dir.path());
        for p in &paths {
            assert_page(&get(&levee, p).await, p);
        }
        levee.wait_fills_done().await;
        levee
            .wait_metric("levee_disk_writes_total", |n| n >= paths.len() as f64)
            .await;
        let mut levee = levee;
        levee.sigterm();
        assert!(levee.wait_exit(Duration::from_secs(20)).is_some());
    }
    let asked = origin.requests();
    let levee = with_disk(&origin, dir.path());
    for p in &paths {
        let r = get(&levee, p).await;
        assert_page(&r, p);
        assert_eq!(r.x_cache(), "HIT", "{p} after the restart");
    }
    assert_eq!(
        origin.requests(),
        asked,
        "the restart sent requests to the backend"
    );
    assert!(levee.metric("levee_disk_hits_total").await >= paths.len() as f64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_heavy_writes_then_a_restart_serves_no_torn_body() {
    let origin = origin();
    let dir = temp_dir("disk-crash");
    let paths: Arc<Vec<String>> = Arc::new((0..600).map(|i| format!("/crash/{i}")).collect());
    let mut levee = with_disk(&origin, dir.path());
    let addr = levee.addr();
    // Eight clients fetch distinct pages as fast as they can: a stream of disk writes.
    let mut clients = Vec::new();
    for c in 0..8 {
        let paths = paths.clone();
        clients.push(tokio::spawn(async move {
            for p in paths.iter().skip(c).step_by(8) {
                // Requests fail once levee is killed: expected. Until then, every
                // page is whole.
                match Req::get(p)
                    .header("host", "site.test")
                    .try_send_to(addr)
                    .await
                {
                    Some(r) if r.status == 200 => assert_page(&r, p),
                    _ => return,
                }
            }
        }));
    }
    levee
        .wait_metric_within("levee_disk_writes_total", Duration::from_secs(30), |n| {
            n >= 150.0
        })
        .await;
    // No drain, no flush: as a crash or a power cut leaves it.
    levee.kill();
    for c in clients {
        let _ = c.await;
    }
    let levee = with_disk(&origin, dir.path());
    let mut from_disk = 0;
    for p in paths.iter() {
        let r = get(&levee, p).await;
        assert_page(&r, p);
        if r.x_cache() == "HIT" {
            from_disk += 1;
        }
    }
    assert!(
        from_disk >= 100,
        "only {from_disk} pages came back from disk after the crash"
    );
    // And they are served from memory now, still whole.
    for p in paths.iter().take(50) {
        assert_page(&get(&levee, p).await, p);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_before_a_restart_stays_purged() {
    let origin = origin();
    let dir = temp_dir("disk-purge");
    let host = "site.test";
    {
        let mut levee = with_disk(&origin, dir.path());
        for p in ["/p/1", "/p/2", "/tagged/1", "/tagged/2", "/kept/1"] {
            assert_page(&get(&levee, p).await, p);
        }
        levee.wait_fills_done().await;
        levee
            .wait_metric("levee_disk_writes_total", |n| n >= 5.0)
            .await;
        assert_eq!(levee.purge(&format!("url=http://{host}/p/1")).await, 1);
        assert_eq!(levee.purge(&format!("prefix=http://{host}/p/")).await, 1);
        assert_eq!(levee.purge("tag=t-tagged").await, 2);
        // Killed right after the purges: nothing gets a chance to tidy up.
        levee.kill();
    }
    let levee = with_disk(&origin, dir.path());
    let before = origin.requests();
    for p in ["/p/1", "/p/2", "/tagged/1", "/tagged/2"] {
        let r = get(&levee, p).await;
        assert_page(&r, p);
        assert_eq!(r.x_cache(), "MISS", "{p} came back after its purge");
    }
    assert_eq!(origin.requests(), before + 4);
    let r = get(&levee, "/kept/1").await;
    assert_page(&r, "/kept/1");
    assert_eq!(r.x_cache(), "HIT", "an unpurged page is kept");
}

/// Three levee nodes in front of `origin`, sharing `redis`, each connected to it.
async fn three_nodes(origin: &Origin, redis: &levee_test::Redis) -> [Levee; 3] {
    let node = || {
        levee!()
            .backend(&origin.url())
            .args(&["--cache-redis", &redis.url()])
            .start()
    };
    let nodes = [node(), node(), node()];
    for n in &nodes {
        n.wait_metric("levee_redis_up", |v| v == 1.0).await;
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_on_one_node_is_a_hit_on_the_others() {
    let redis = levee_test::Redis::start();
    let origin = origin();
    let [a, b, c] = three_nodes(&origin, &redis).await;
    let r = get(&a, "/shared").await;
    assert_page(&r, "/shared");
    assert_eq!(r.x_cache(), "MISS");
    a.wait_fills_done().await;
    a.wait_metric("levee_redis_writes_total", |n| n >= 1.0)
        .await;
    for n in [&b, &c] {
        let r = get(n, "/shared").await;
        assert_page(&r, "/shared");
        assert_eq!(r.x_cache(), "HIT");
        assert_eq!(n.metric("levee_redis_hits_total").await, 1.0);
        // Promoted: the next one is a memory hit.
        assert_eq!(get(n, "/shared").await.x_cache(), "HIT");
    }
    assert_eq!(origin.requests_for("/shared"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_misses_over_three_nodes_make_one_backend_request() {
    let redis = levee_test::Redis::start();
    let origin = Origin::start(|r: &Recorded| {
        Reply::ok()
            .header("cache-control", "public, max-age=3600")
            .body(body_for(&r.path))
            // Long enough that every request arrives while the first is being fetched.
            .delay(Duration::from_millis(500))
    });
    let nodes = three_nodes(&origin, &redis).await;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr()).collect();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let addr = addrs[i % 3];
        tasks.push(tokio::spawn(async move {
            Req::get("/hot")
                .header("host", "site.test")
                .send_to(addr)
                .await
        }));
    }
    for t in tasks {
        assert_page(&t.await.unwrap(), "/hot");
    }
    assert_eq!(
        origin.requests_for("/hot"),
        1,
        "100 misses over 3 nodes reached the backend more than once"
    );
    let mut acquired = 0.0;
    for n in &nodes {
        acquired += n.metric("levee_redis_locks_acquired_total").await;
    }
    assert_eq!(acquired, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_on_one_node_is_seen_on_the_others_within_100_ms() {
    let redis = levee_test::Redis::start();
    let origin = origin();
    let [a, b, c] = three_nodes(&origin, &redis).await;
    for n in [&a, &b, &c] {
        assert_page(&get(n, "/news").await, "/news");
        n.wait_fills_done().await;
    }
    async fn cached(n: &Levee) -> Resp {
        Req::get("/news")
            .header("host", "site.test")
            .header("cache-control", "only-if-cached")
            .send(n)
            .await
    }
    for n in [&b, &c] {
        assert_eq!(cached(n).await.status, 200);
    }
    assert_eq!(a.purge("url=http://site.test/news").await, 1);
    let purged = Instant::now();
    for n in [&b, &c] {
        // only-if-cached: a hit answers 200, a purged copy 504, the backend is never asked.
        while cached(n).await.status == 200 {
            assert!(
                purged.elapsed() < Duration::from_secs(5),
                "the purge never reached a node"
            );
        }
    }
    let took = purged.elapsed();
    eprintln!("purge seen on both other nodes after {took:?}");
    assert!(took < Duration::from_millis(100), "took {took:?}");
    // And Redis's copy is gone too: the next request is fetched again.
    let before = origin.requests_for("/news");
    assert_page(&get(&b, "/news").await, "/news");
    assert_eq!(origin.requests_for("/news"), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_mid_load_no_request_for_a_local_object_fails() {
    let mut redis = levee_test::Redis::start();
    let origin = origin();
    let nodes = three_nodes(&origin, &redis).await;
    let paths: Vec<String> = (0..30).map(|i| format!("/local/{i}")).collect();
    for n in &nodes {
        for p in &paths {
            assert_page(&get(n, p).await, p);
        }
        n.wait_fills_done().await;
    }
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr()).collect();
    let load = |rounds: usize| {
        let (addrs, paths) = (addrs.clone(), paths.clone());
        tokio::spawn(async move {
            let mut served = 0;
            for round in 0..rounds {
                for (i, p) in paths.iter().enumerate() {
                    let r = Req::get(p)
                        .header("host", "site.test")
                        .send_to(addrs[(i + round) % addrs.len()])
                        .await;
                    assert_page(&r, p);
                    served += 1;
                }
            }
            served
        })
    };
    let first = load(20);
    redis.stop();
    let second = load(20);
    assert_eq!(
        first.await.unwrap() + second.await.unwrap(),
        2 * 20 * paths.len()
    );
    for n in &nodes {
        n.wait_metric("levee_redis_up", |v| v == 0.0).await;
    }
    // It comes back, and the nodes reconnect.
    redis.restart();
    for n in &nodes {
        n.wait_metric_within("levee_redis_up", Duration::from_secs(40), |v| v == 1.0)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tiers_are_off_by_default_and_a_bad_one_is_refused_with_what_to_do() {
    let origin = origin();
    let levee = levee!().backend(&origin.url()).start();
    let metrics = levee.admin(Req::get("/metrics")).await.text();
    assert!(!metrics.contains("levee_disk_") && !metrics.contains("levee_redis_"));
    drop(levee);

    let dir = temp_dir("disk-refused");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let second = dir.path().join("taken");
    // A file where the directory should be; a directory another levee holds.
    let _holder = with_disk(&origin, &second);
    for (path, says) in [(&file, "not a directory"), (&second, "another")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--backend",
                &origin.url(),
            ])
            .args(["--cache-disk", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.to_lowercase().contains(says), "{stderr}");
    }
}

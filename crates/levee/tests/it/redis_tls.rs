//! The shared tier over TLS (`rediss://`): one server, a Redis Cluster and Sentinel,
//! every Redis process on TLS only (levee_test::RedisTls), the certificate checked
//! against a private CA that levee trusts through `SSL_CERT_FILE`, as an operator
//! would set it. Two levee nodes share a fill on each; a node that does not trust the
//! CA never reaches the tier and goes on serving from the backend.

use std::path::Path;
use std::time::{Duration, Instant};

use levee_test::{levee, Levee, Origin, Redis, RedisCluster, RedisSentinel, RedisTls, Reply, Req};

/// Cacheable pages whose body names the path.
fn site() -> Origin {
    Origin::start(|r| {
        Reply::text(format!("page {}", r.path))
            .header("cache-control", "public, max-age=3600")
            .header("content-type", "text/html")
    })
}

/// A levee node in front of `origin` with the shared tier at `urls`, trusting the CA
/// at `ca` (`SSL_CERT_FILE`) if given; not waited for.
fn node(origin: &Origin, urls: &[String], ca: Option<&Path>) -> Levee {
    let mut b = levee!().backend(&origin.url()).debug_headers();
    for u in urls {
        b = b.arg("--cache-redis").arg(u);
    }
    if let Some(ca) = ca {
        b = b.env("SSL_CERT_FILE", ca);
    }
    b.start()
}

/// `n` nodes trusting `tls`'s CA, each up on the tier.
async fn nodes(origin: &Origin, urls: &[String], tls: &RedisTls, n: usize) -> Vec<Levee> {
    let nodes: Vec<Levee> = (0..n)
        .map(|_| node(origin, urls, Some(&tls.ca_path())))
        .collect();
    for node in &nodes {
        node.wait_metric_within("levee_redis_up", Duration::from_secs(20), |v| v == 1.0)
            .await;
    }
    nodes
}

/// A miss on `a` is a hit on `b` with one backend request.
async fn shares_a_fill(a: &Levee, b: &Levee, origin: &Origin, path: &str) {
    let get = |node: &Levee| {
        Req::get(path)
            .header("host", "site.test")
            .send_to(node.addr())
    };
    let written = a.metric("levee_redis_writes_total").await;
    let r = get(a).await;
    assert_eq!(r.status, 200, "{path} on a: {}", r.summary());
    assert_eq!(r.text(), format!("page {path}"));
    assert_eq!(r.x_cache(), "MISS", "{path} on a");
    a.wait_fills_done().await;
    // Its record written to Redis (given time on a loaded machine).
    a.wait_metric_within("levee_redis_writes_total", Duration::from_secs(20), |n| {
        n > written
    })
    .await;
    let r = get(b).await;
    assert_eq!(r.status, 200, "{path} on b: {}", r.summary());
    assert_eq!(r.text(), format!("page {path}"));
    assert_eq!(r.x_cache(), "HIT", "{path} on b: {}", r.summary());
    assert_eq!(origin.requests_for(path), 1, "{path} fetched twice");
}

/// The `levee_redis_primary{mode="..."` samples of a node's metrics.
async fn primaries_shown(node: &Levee, mode: &str) -> usize {
    let metrics = node.admin(Req::get("/metrics")).await.text();
    metrics
        .matches(&format!("levee_redis_primary{{mode=\"{mode}\""))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tls_server_shares_a_fill() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let redis = Redis::start_tls(&tls);
    assert!(redis.url().starts_with("rediss://127.0.0.1:"));
    let origin = site();
    let n = nodes(&origin, &[redis.url()], &tls, 2).await;
    shares_a_fill(&n[0], &n[1], &origin, "/p/tls-server").await;
    assert_eq!(primaries_shown(&n[0], "server").await, 1);
    // What levee wrote is there, read back over TLS by a client of the test's own.
    assert_ne!(
        redis.command("DBSIZE").trim(),
        ":0",
        "nothing stored in Redis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_shares_fills() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let cluster = RedisCluster::start_tls(&tls);
    let origin = site();
    let n = nodes(&origin, &cluster.urls(), &tls, 2).await;
    assert_eq!(primaries_shown(&n[0], "cluster").await, 3);
    // Records on every primary (a record's slot is its hash's): the nodes the Cluster
    // names are reached over TLS too.
    for i in 0..6 {
        shares_a_fill(&n[0], &n[1], &origin, &format!("/p/tls-cluster/{i}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_tls_shares_a_fill() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let sentinel = RedisSentinel::start_tls(&tls);
    let url = sentinel.url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let origin = site();
    let n = nodes(&origin, &[url], &tls, 2).await;
    assert_eq!(primaries_shown(&n[0], "sentinel").await, 1);
    let metrics = n[0].admin(Req::get("/metrics")).await.text();
    let primary = sentinel.primary_port();
    assert!(
        metrics.contains(&format!("primary=\"127.0.0.1:{primary}\"")),
        "the primary {primary} is not shown: {metrics}"
    );
    shares_a_fill(&n[0], &n[1], &origin, "/p/tls-sentinel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_trust_the_ca_stays_off_the_tier_and_serves() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let redis = Redis::start_tls(&tls);
    let origin = site();
    // The same server is fine for a node that trusts the CA.
    let trusting = nodes(&origin, &[redis.url()], &tls, 1).await;
    // No SSL_CERT_FILE of the test's: the environment's trust store (the system's),
    // in which the private CA is not.
    let untrusting = node(&origin, &[redis.url()], None);
    // Refused for the certificate (rustls: signed by an issuer it does not know), not
    // for anything else.
    untrusting
        .wait_log("invalid peer certificate: UnknownIssuer")
        .await;
    // A wait for something not to happen: looked at over 3 s, six times at least.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut looks = 0;
    while looks < 6 || Instant::now() < deadline {
        let up = untrusting.metric("levee_redis_up").await;
        assert_eq!(
            up,
            0.0,
            "levee reached Redis over TLS with a certificate it cannot check; stderr:\n{}",
            untrusting.stderr()
        );
        looks += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let r = Req::get("/p/untrusted")
        .header("host", "site.test")
        .send(&untrusting)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "page /p/untrusted");
    assert_eq!(origin.requests_for("/p/untrusted"), 1);
    // The trusting node is still up.
    assert_eq!(trusting[0].metric("levee_redis_up").await, 1.0);
}

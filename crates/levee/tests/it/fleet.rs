//! One judgment of the backend for a fleet (issue 51): levee nodes sharing one Redis
//! share each backend's capacity through leases (levee-limits' fleet.rs), so that N
//! nodes never give the backend N times its limit, a person on one node takes room
//! from anonymous work on another, a client network's share is the fleet's, a killed
//! node's share comes back, and a node that loses Redis runs on its part alone. Real
//! `redis-server`, real levee processes, an origin that counts what it has in flight.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use levee_test::{levee, Levee, Origin, Recorded, Reply, Req};
use tokio::task::JoinSet;

/// What a fleet test runs: `n` levee nodes in front of an origin of work (its
/// arrivals counted), sharing a real Redis (one redis-server, or `R`: a Cluster, a
/// Sentinel's, in redis_ha.rs), each seeing the others. Fields drop in order: the
/// nodes first, Redis last.
pub(crate) struct Fleet<R = levee_test::Redis> {
    pub(crate) nodes: Vec<Levee>,
    pub(crate) origin: Origin,
    arrivals: Arc<Mutex<Vec<(String, Instant)>>>,
    pub(crate) redis: R,
}

impl Fleet {
    /// With `limits` (TOML lines of `[limits]`) on every node.
    async fn start(n: usize, limits: &str) -> Fleet {
        let redis = levee_test::Redis::start();
        let url = redis.url();
        Fleet::start_on(redis, &[url], n, limits).await
    }
}

impl<R> Fleet<R> {
    /// [`Fleet::start`] on the Redis `redis` runs, reached at `urls`.
    pub(crate) async fn start_on(redis: R, urls: &[String], n: usize, limits: &str) -> Fleet<R> {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let origin = origin_of_work(arrivals.clone());
        let mut args = Vec::new();
        for u in urls {
            args.extend(["--cache-redis", u.as_str()]);
        }
        let nodes: Vec<Levee> = (0..n)
            .map(|_| {
                levee!()
                    .backend(&origin.url())
                    .debug_headers()
                    .args(&args)
                    .config(&format!("[limits]\n{limits}"))
                    .start()
            })
            .collect();
        for node in &nodes {
            node.wait_metric_within("levee_redis_up", Duration::from_secs(20), |v| v == 1.0)
                .await;
            node.wait_metric_within("levee_fleet_nodes", Duration::from_secs(10), |v| {
                v == n as f64
            })
            .await;
        }
        Fleet {
            nodes,
            origin,
            arrivals,
            redis,
        }
    }
}

/// 127.N.0.H: network N (a /24 each), host H.
fn ip(n: u8, h: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, n, 0, h))
}

/// Uncacheable work of `ms`, counted by the origin; its path says who asked.
fn origin_of_work(arrivals: Arc<Mutex<Vec<(String, Instant)>>>) -> Origin {
    Origin::start(move |r: &Recorded| {
        arrivals
            .lock()
            .unwrap()
            .push((r.path.clone(), Instant::now()));
        let ms = r
            .uri
            .split("ms=")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut reply = Reply::text("work done\n")
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(ms));
        if r.path == "/login" {
            // `/login?as=NAME` logs NAME in; `ed` by default.
            let name = r.uri.split("as=").nth(1).unwrap_or("ed");
            reply = Reply::status(302)
                .header("location", "/")
                .header(
                    "set-cookie",
                    &format!("PHPSESSID=person-{name}-5f0d8c2e9a7b41e3; path=/; HttpOnly"),
                )
                .header("cache-control", "no-store");
        }
        reply
    })
}

/// A client asking `path` from `from` at `addr` again and again until `stop` (at most
/// 200 times), 20 ms apart after a refusal: the statuses it got.
fn keep_asking(
    set: &mut JoinSet<Vec<u16>>,
    addr: SocketAddr,
    from: IpAddr,
    path: String,
    stop: Arc<AtomicBool>,
) {
    keep_asking_as(set, (addr, from), path, None, 200, stop);
}

/// [`keep_asking`] with `cookie`, if any, at most `most` times.
fn keep_asking_as(
    set: &mut JoinSet<Vec<u16>>,
    (addr, from): (SocketAddr, IpAddr),
    path: String,
    cookie: Option<String>,
    most: usize,
    stop: Arc<AtomicBool>,
) {
    set.spawn(async move {
        let mut statuses = Vec::new();
        while !stop.load(Ordering::SeqCst) && statuses.len() < most {
            let mut req = Req::get(&path);
            if let Some(c) = &cookie {
                req = req.header("cookie", c);
            }
            let r = req.send_from(addr, from).await;
            if r.status != 200 {
                // A refused client comes back a moment later, not in a busy loop.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            statuses.push(r.status.as_u16());
        }
        statuses
    });
}

/// Waits until `check` holds, at most `limit`; fails the test with `what` otherwise.
pub(crate) async fn within<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Logs `name` in through `node` (the backend gives out its session, proven on every
/// node through Redis); its cookie.
async fn log_in(node: &Levee, nodes: &[Levee], name: &str) -> String {
    let login = Req::post(&format!("/login?as={name}"), "user=x")
        .header("content-type", "application/x-www-form-urlencoded")
        .send_from(node.addr(), ip(8, 1))
        .await;
    assert_eq!(login.status, 302, "{}", login.summary());
    let cookie = format!("PHPSESSID=person-{name}-5f0d8c2e9a7b41e3");
    for n in nodes {
        within(
            Duration::from_secs(5),
            "the proof to reach every node",
            || {
                let cookie = cookie.clone();
                async move {
                    let r = Req::get("/whoami").header("cookie", &cookie).send(n).await;
                    r.reason() == "session-cookie:PHPSESSID"
                }
            },
        )
        .await;
    }
    cookie
}

/// A metric summed over the nodes.
async fn fleet_metric(nodes: &[Levee], name: &str) -> f64 {
    let mut sum = 0.0;
    for n in nodes {
        sum += n.metric_sum(name).await;
    }
    sum
}

async fn statuses(set: &mut JoinSet<Vec<u16>>) -> Vec<u16> {
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done.unwrap());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_one_redis_never_give_the_backend_more_than_its_limit() {
    let fleet = Fleet::start(3, "backend_max_concurrency = 4").await;
    never_more_than_four(&fleet).await;
}

/// 64 clients from 64 networks, split over the fleet's 3 nodes (started with
/// `backend_max_concurrency = 4`), each asking 3 times for 200 ms of work: the backend
/// sees at most 4 at once, and does see 4.
pub(crate) async fn never_more_than_four<R>(fleet: &Fleet<R>) {
    let (nodes, origin) = (&fleet.nodes, &fleet.origin);
    let mut set = JoinSet::new();
    for i in 0..64u8 {
        let addr = nodes[usize::from(i) % 3].addr();
        set.spawn(async move {
            let mut got = Vec::new();
            for k in 0..3 {
                let r = Req::get(&format!("/work/{i}/{k}?ms=200"))
                    .send_from(addr, ip(10 + i, 1))
                    .await;
                got.push(r.status.as_u16());
            }
            got
        });
    }
    let got = statuses(&mut set).await;
    let ok = got.iter().filter(|s| **s == 200).count();
    assert!(
        got.iter().all(|s| [200, 429, 503].contains(s)),
        "statuses: {got:?}"
    );
    assert!(
        origin.max_in_flight() <= 4,
        "the backend saw {} at once from a fleet whose limit is 4",
        origin.max_in_flight()
    );
    assert_eq!(
        origin.max_in_flight(),
        4,
        "the fleet used its capacity (work-conserving)"
    );
    // Every request answered 200 reached the backend; no refused one did.
    assert_eq!(origin.requests(), ok, "statuses: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_on_one_node_takes_room_from_anonymous_work_on_another() {
    let Fleet {
        redis: _redis,
        origin,
        nodes,
        ..
    } = Fleet::start(
        2,
        "backend_max_concurrency = 2\nbackend_anonymous_wait = \"10s\"",
    )
    .await;
    let (a, b) = (&nodes[0], &nodes[1]);
    // Idle, the capacity is shared out: each node can start a request at once.
    for n in [a, b] {
        n.wait_metric_within("levee_fleet_share", Duration::from_secs(10), |v| v == 1.0)
            .await;
    }
    // The editor logs in through B: B sees the backend give out the session.
    let login = Req::post("/login", "user=ed")
        .header("content-type", "application/x-www-form-urlencoded")
        .send_from(b.addr(), ip(8, 1))
        .await;
    assert_eq!(login.status, 302, "{}", login.summary());
    let cookie = "PHPSESSID=person-ed-5f0d8c2e9a7b41e3";
    // A crawler on A fills the backend with 1.5 s pages.
    let stop = Arc::new(AtomicBool::new(false));
    let mut set = JoinSet::new();
    for i in 0..6u8 {
        let path = format!("/crawl/{i}?ms=1500");
        keep_asking(&mut set, a.addr(), ip(2, i + 1), path, stop.clone());
    }
    assert!(
        levee_test::eventually(Duration::from_secs(10), || origin.in_flight() == 2).await,
        "the crawler did not fill the backend"
    );
    // Past the editor's linger on B: A holds the whole backend.
    a.wait_metric_within("levee_fleet_share", Duration::from_secs(10), |v| v == 2.0)
        .await;
    origin.reset();
    let started = Instant::now();
    let r = Req::get("/edit?ms=50")
        .header("cookie", cookie)
        .send_from(b.addr(), ip(8, 1))
        .await;
    let waited = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let crawled = statuses(&mut set).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    // One crawler page's time (1.5 s) at most, with room for a loaded machine: the node
    // that frees a slot hands it over at once, not at the next renewal (1 s later).
    assert!(
        waited < Duration::from_millis(1900),
        "the editor waited {waited:?} behind anonymous work on another node"
    );
    assert!(
        origin.max_in_flight() <= 2,
        "the backend saw {} at once; the fleet's limit is 2",
        origin.max_in_flight()
    );
    // The crawler is served, or refused at once (never sent) while it is over its share.
    assert!(
        crawled.contains(&200) && crawled.iter().all(|s| [200, 429, 503].contains(s)),
        "crawler: {crawled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawler_network_split_over_three_nodes_holds_its_share_of_the_fleet() {
    // 8 slots, a network's share 25%: 2 slots, fleet-wide.
    let Fleet {
        redis: _redis,
        arrivals,
        origin,
        nodes,
    } = Fleet::start(
        3,
        "backend_max_concurrency = 8\nbackend_network_share = \"25%\"\nbackend_anonymous_wait = \"30s\"",
    )
    .await;
    let renewed = fleet_metric(&nodes, "levee_fleet_renewals_total").await;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut set = JoinSet::new();
    // The crawler (network 2): four connections to each node. Three other networks,
    // six connections each, each to one node, as a load balancer keeps a client on
    // one. Each node alone sees two networks and would give the crawler half of its
    // slots: half the fleet's, twice its share.
    for (k, node) in nodes.iter().enumerate() {
        for c in 0..4u8 {
            let path = format!("/net2/{k}-{c}?ms=500");
            keep_asking(&mut set, node.addr(), ip(2, c + 1), path, stop.clone());
        }
        let n = 3 + k as u8;
        for c in 0..6u8 {
            let path = format!("/net{n}/{c}?ms=500");
            keep_asking(&mut set, node.addr(), ip(n, c + 1), path, stop.clone());
        }
    }
    // 120 pages: 7.5 s of the backend's 8 slots.
    let seen = || arrivals.lock().unwrap().len();
    assert!(levee_test::eventually(Duration::from_secs(30), || seen() >= 120).await);
    stop.store(true, Ordering::SeqCst);
    let got = statuses(&mut set).await;
    assert!(
        got.iter().all(|s| [200, 429].contains(s)),
        "statuses: {got:?}"
    );
    assert!(origin.max_in_flight() <= 8, "{}", origin.max_in_flight());
    // Past the first second (before the first renewals, each node knows only its own):
    // the crawler's part of the pages the backend ran.
    let arrived = arrivals.lock().unwrap().clone();
    let t0 = arrived[0].1 + Duration::from_secs(1);
    let later: Vec<&String> = arrived
        .iter()
        .filter(|(_, t)| *t >= t0)
        .map(|(p, _)| p)
        .collect();
    let crawler = later.iter().filter(|p| p.starts_with("/net2/")).count();
    let part = crawler as f64 / later.len().max(1) as f64;
    assert!(
        part <= 0.3,
        "the crawler's network ran {crawler} of {} pages ({:.0}%); its share is 25% of the fleet",
        later.len(),
        part * 100.0
    );
    // A request refused at once took no fill lock in Redis first (two round trips for
    // each refusal): the nodes' locks are no more than the pages the backend ran.
    let refused = got.iter().filter(|s| **s == 429).count();
    let mut locks = 0.0;
    for node in &nodes {
        locks += node.metric_sum("levee_redis_locks_acquired_total").await;
    }
    assert!(
        refused > 0,
        "nothing refused: the check below proves nothing"
    );
    assert!(
        locks <= arrived.len() as f64,
        "{locks} fill locks for {} backend requests and {refused} refusals",
        arrived.len()
    );
    // Refusals are demand, not a person's wait: they renew the shares at most ten
    // times a second, not at every refusal (each renewal reads every node's report).
    let renewals = fleet_metric(&nodes, "levee_fleet_renewals_total").await - renewed;
    let per_node = renewals / 3.0 / started.elapsed().as_secs_f64();
    assert!(
        (1.0..=15.0).contains(&per_node),
        "{per_node:.1} renewals a second per node while {refused} requests were refused"
    );
}

/// One logged-in session replayed by 24 connections of one /24, 8 through each of 3
/// nodes (a stolen cookie in a crawler's hands), while an editor works on one node: the
/// session's requests beyond its share are anonymous work, held to the lane's share,
/// and past its first burst it holds no slot as a person's on any node (its waiters
/// count in its share; its overflow, running or lately refused, is the fleet's).
/// Before, each node gave it a person's two slots whenever its lane had just refused
/// the rest: the replay held most of the backend as people's work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replayed_through_three_nodes_holds_no_persons_slot() {
    let Fleet {
        redis: _redis,
        arrivals,
        origin,
        nodes,
    } = Fleet::start(
        3,
        // The lane at its share beside the editor, not as people's latency would have
        // it on a loaded test machine: the replay's pages come at a steady pace.
        "backend_max_concurrency = 6\nbackend_anonymous_adaptive = false",
    )
    .await;
    let editor = log_in(&nodes[0], &nodes, "ed").await;
    let replayed = log_in(&nodes[1], &nodes, "rep").await;
    const SESSION: &str = "levee_backend_admitted_total{class=\"session\"}";
    let before = fleet_metric(&nodes, SESSION).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut editing = JoinSet::new();
    let path = "/edit?ms=50".to_string();
    let (a, ed_stop) = ((nodes[0].addr(), ip(9, 1)), stop.clone());
    keep_asking_as(&mut editing, a, path, Some(editor), 2000, ed_stop);
    let mut set = JoinSet::new();
    for (k, node) in nodes.iter().enumerate() {
        for c in 0..8u8 {
            let path = format!("/replay/{k}-{c}?ms=300");
            // Until the end: a replay that dwindles is a smaller script, whose share
            // comes back.
            let to = (node.addr(), ip(2, 8 * k as u8 + c + 1));
            let cookie = Some(replayed.clone());
            keep_asking_as(&mut set, to, path, cookie, 2000, stop.clone());
        }
    }
    // 150 of the replay's pages: 7.5 s of the backend's 6 slots.
    let replay_pages = || {
        let arrived = arrivals.lock().unwrap();
        arrived
            .iter()
            .filter(|(p, _)| p.starts_with("/replay/"))
            .count()
    };
    assert!(levee_test::eventually(Duration::from_secs(40), || replay_pages() >= 150).await);
    stop.store(true, Ordering::SeqCst);
    let replay = statuses(&mut set).await;
    let edits = statuses(&mut editing).await;
    assert!(edits.iter().all(|s| *s == 200), "the editor got {edits:?}");
    assert!(
        replay.iter().all(|s| [200, 429, 503].contains(s)),
        "replay: {replay:?}"
    );
    assert!(origin.max_in_flight() <= 6, "{}", origin.max_in_flight());
    // Every editor request was a person's; the rest of the session class's admissions
    // were the replay's: its first burst's (a page load's worth may wait on each node),
    // then none. Here 6-14; 29-42 before, each node giving it a slot or two whenever
    // its lane had just refused the rest.
    let as_person = fleet_metric(&nodes, SESSION).await - before - edits.len() as f64;
    let over = fleet_metric(&nodes, "levee_backend_sessions_over_share_total").await;
    assert!(
        as_person <= 20.0 && over >= 150.0,
        "the replay ran {as_person} requests as a person's ({over} beyond its share) of its {} pages",
        replay_pages()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_holding_slots_frees_them_within_5_s() {
    let Fleet {
        redis: _redis,
        origin,
        mut nodes,
        ..
    } = Fleet::start(
        2,
        "backend_max_concurrency = 4\nbackend_anonymous_wait = \"30s\"",
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut set = JoinSet::new();
    let a_addr = nodes[0].addr();
    for i in 0..8u8 {
        keep_asking(
            &mut set,
            a_addr,
            ip(2, i + 1),
            format!("/a/{i}?ms=1000"),
            stop.clone(),
        );
    }
    nodes[0]
        .wait_metric_within("levee_fleet_share", Duration::from_secs(10), |v| v == 4.0)
        .await;
    nodes[1]
        .wait_metric_within("levee_fleet_share", Duration::from_secs(10), |v| v == 0.0)
        .await;
    nodes[0].kill();
    stop.store(true, Ordering::SeqCst);
    let killed = Instant::now();
    let b = &nodes[1];
    // Its lease runs out (3 s), and the whole backend is B's.
    b.wait_metric_within("levee_fleet_share", Duration::from_secs(5), |v| v == 4.0)
        .await;
    b.wait_metric_within("levee_fleet_nodes", Duration::from_secs(1), |v| v == 1.0)
        .await;
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "{:?}",
        killed.elapsed()
    );
    // And B uses it: 4 at once at the backend.
    origin.reset();
    let mut asks = JoinSet::new();
    for i in 0..4u8 {
        let addr = b.addr();
        asks.spawn(async move {
            Req::get(&format!("/b/{i}?ms=300"))
                .send_from(addr, ip(3 + i, 1))
                .await
                .status
                .as_u16()
        });
    }
    let mut got = Vec::new();
    while let Some(s) = asks.join_next().await {
        got.push(s.unwrap());
    }
    assert_eq!(got, [200; 4]);
    assert_eq!(origin.max_in_flight(), 4);
    // The killed node's clients saw their connections end (their tasks fail, which is
    // what a client of a crashed node sees); nothing to check of them.
    set.abort_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_each_node_runs_on_its_part_and_shares_again_after() {
    let Fleet {
        redis,
        origin,
        nodes,
        ..
    } = Fleet::start(
        3,
        // Shares between networks off: a refusal here could only be the outage's.
        "backend_max_concurrency = 6\nbackend_network_share = \"100%\"\nbackend_anonymous_share = \"100%\"\nbackend_anonymous_wait = \"30s\"",
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut set = JoinSet::new();
    for (k, node) in nodes.iter().enumerate() {
        for c in 0..4u8 {
            let from = ip(20 + k as u8, c + 1);
            keep_asking(
                &mut set,
                node.addr(),
                from,
                format!("/n{k}/{c}?ms=300"),
                stop.clone(),
            );
        }
    }
    assert!(
        levee_test::eventually(Duration::from_secs(10), || origin.in_flight() == 6).await,
        "the fleet did not fill the backend"
    );
    origin.reset();
    redis.pause();
    let paused = Instant::now();
    for node in &nodes {
        node.wait_metric_within("levee_fleet_alone", Duration::from_secs(8), |v| v == 1.0)
            .await;
        // Its part at once, or within a lease if it held less than its part.
        node.wait_metric_within("levee_backend_limit", Duration::from_secs(5), |v| v == 2.0)
            .await;
    }
    // Redis stays stopped 10 s in all.
    levee_test::eventually(Duration::from_secs(12), || {
        paused.elapsed() >= Duration::from_secs(10)
    })
    .await;
    redis.resume();
    for node in &nodes {
        node.wait_metric_within("levee_fleet_alone", Duration::from_secs(10), |v| v == 0.0)
            .await;
        node.wait_metric_within("levee_fleet_nodes", Duration::from_secs(10), |v| v == 3.0)
            .await;
    }
    // Through the fall-back, the outage and the return, and a little after it.
    let seen = origin.requests();
    assert!(
        levee_test::eventually(Duration::from_secs(10), || origin.requests() >= seen + 40).await
    );
    assert!(
        origin.max_in_flight() <= 6,
        "around the outage the nodes gave the backend {} at once (its limit is 6)",
        origin.max_in_flight()
    );
    stop.store(true, Ordering::SeqCst);
    let got = statuses(&mut set).await;
    assert!(
        got.iter().all(|s| *s == 200),
        "a client saw an error while Redis was stopped: {got:?}"
    );
}

/// Redis down long enough for a reconnect's backoff to grow, then back (empty): every
/// node shares again within seconds. Alone, a node runs on its part while the nodes
/// already back take that part again; one that reconnected up to 30 s late gave the
/// backend its part twice over for that long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_restarts_every_node_shares_again_within_seconds() {
    let Fleet {
        mut redis, nodes, ..
    } = Fleet::start(3, "backend_max_concurrency = 6").await;
    // Fleet::start has waited for every node to see the other two.
    redis.stop();
    let stopped = Instant::now();
    for node in &nodes {
        node.wait_metric_within("levee_fleet_alone", Duration::from_secs(8), |v| v == 1.0)
            .await;
    }
    // Long enough for a backoff doubling from 1 s to wait 16 s (after 1, 2, 4, 8 s).
    levee_test::eventually(Duration::from_secs(18), || {
        stopped.elapsed() >= Duration::from_secs(16)
    })
    .await;
    redis.restart();
    let back = Instant::now();
    for node in &nodes {
        node.wait_metric_within("levee_fleet_alone", Duration::from_secs(40), |v| v == 0.0)
            .await;
    }
    assert!(
        back.elapsed() <= Duration::from_secs(6),
        "the last node shared again {:?} after Redis restarted",
        back.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_metrics_show_the_fleet() {
    let bin = levee_test::require!(levee_test::tools::CHROMIUM);
    let Fleet {
        redis,
        origin: _origin,
        nodes,
        ..
    } = Fleet::start(2, "backend_max_concurrency = 4").await;
    let a = &nodes[0];
    assert_eq!(a.metric("levee_fleet_capacity").await, 4.0);
    let primary = format!("127.0.0.1:{}", redis.port());
    assert_eq!(a.metric("levee_fleet_alone").await, 0.0);
    let admin = a.admin_addr().await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{admin}/");
    let (dom, stderr) = tokio::task::spawn_blocking({
        let profile = dir.path().join("profile");
        move || {
            levee_test::tools::run_chromium(
                &bin,
                &profile,
                &["--dump-dom", "--virtual-time-budget=4000"],
                &url,
            )
        }
    })
    .await
    .unwrap();
    assert!(dom.contains("data-fleet=\"2\""), "stderr:\n{stderr}\n{dom}");
    assert!(dom.contains("fleet: 2 nodes, this one's share"), "{dom}");
    // The shared tier: up, and the server written to.
    assert!(
        dom.contains(&format!("data-redis-primary=\"{primary}\"")),
        "{dom}"
    );
    assert!(
        dom.contains(&format!("Redis up (primary {primary})")),
        "{dom}"
    );
    for bad in ["Uncaught", "SyntaxError", "TypeError", "ReferenceError"] {
        assert!(!stderr.contains(bad), "console error {bad}:\n{stderr}");
    }
}

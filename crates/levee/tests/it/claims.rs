//! A session cookie is a claim (issue 42): which values count as a person's (levee saw
//! the backend give them out at a login), that a logout ends it, that a restart (the
//! disk tier) and a second node (Redis) keep it; and no false alarms: slow answers from
//! a backend with room are neither refused nor served stale. Scheduling under load with
//! real php-fpm is in lanes/claims.rs.

use std::time::{Duration, Instant};

use levee_test::{levee, Levee, LeveeBuilder, Origin, Reply, Req, Resp};
use tokio::task::JoinSet;

use crate::fleet::within;

/// The session the site gives at login (long and random, as a real one is).
const SESSION: &str = "PHPSESSID=3c9e1f7a52d84b06a1e5f9c27d3b8e40";

/// The session a failed login starts.
const FRESH: &str = "PHPSESSID=9a0b7c6d5e4f30211e2d3c4b5a697887";

/// A site: `POST /login` logs in (a redirect that sets [`SESSION`]), `/logout` deletes
/// it, `/challenge` asks for credentials unless it gets some (then accepts them), and
/// every other page answers at once, never stored.
fn site() -> Origin {
    Origin::start(|r| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/login") => Reply::status(302)
            .header("location", "/")
            .header("set-cookie", &format!("{SESSION}; path=/; HttpOnly")),
        (_, "/logout") => Reply::status(302).header("location", "/").header(
            "set-cookie",
            "PHPSESSID=deleted; expires=Thu, 01 Jan 1970 00:00:01 GMT; path=/",
        ),
        // A failed login, as MediaWiki answers one whose session it does not know: the
        // form again (200), with a session of its own.
        ("POST", "/failed-login") => Reply::text("wrong password")
            .header("cache-control", "private")
            .header("set-cookie", &format!("{FRESH}; path=/; HttpOnly")),
        (_, "/challenge") if r.header("authorization").is_none() => {
            Reply::status(401).header("www-authenticate", "Basic realm=\"site\"")
        }
        _ => Reply::text(format!("{} for {:?}", r.path, r.header("cookie")))
            .header("cache-control", "no-store"),
    })
}

/// What levee makes of a request with `cookie` (`X-Cache-Reason`): `; unproven` when
/// nobody proved its session.
async fn reason_with(levee: &Levee, header: (&str, &str)) -> String {
    let r = Req::get("/page")
        .header(header.0, header.1)
        .send(levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    r.reason().to_string()
}

async fn log_in(levee: &Levee) {
    let r = Req::post("/login", "user=editor&password=secret")
        .send(levee)
        .await;
    assert_eq!(r.status, 302, "{}", r.summary());
}

#[tokio::test]
async fn a_session_counts_once_given_out_at_a_login_and_stops_at_a_logout() {
    let origin = site();
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let unproven = "session-cookie:PHPSESSID; unproven";
    // Before any login the same value is only a claim, as is any made-up one.
    assert_eq!(reason_with(&levee, ("cookie", SESSION)).await, unproven);
    log_in(&levee).await;
    assert_eq!(
        reason_with(&levee, ("cookie", SESSION)).await,
        "session-cookie:PHPSESSID"
    );
    let made_up = "PHPSESSID=made-up-by-a-crawler-000000000000";
    assert_eq!(reason_with(&levee, ("cookie", made_up)).await, unproven);
    // The request still reached the backend with its cookie (privacy is unchanged).
    assert_eq!(origin.last().header("cookie"), Some(made_up));
    // A made-up session posted to a login that fails: the session the application
    // starts in its place proves nothing (a crawler would have one per connection).
    let r = Req::post("/failed-login", "user=admin&password=guess")
        .header("cookie", made_up)
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(reason_with(&levee, ("cookie", FRESH)).await, unproven);
    // A logout (an answer that deletes it) ends it.
    let r = Req::get("/logout")
        .header("cookie", SESSION)
        .send(&levee)
        .await;
    assert_eq!(r.status, 302, "{}", r.summary());
    assert_eq!(reason_with(&levee, ("cookie", SESSION)).await, unproven);
    let m = levee.admin(Req::get("/metrics")).await.text();
    let admitted = metric_line(&m, "levee_unproven_sessions_total{outcome=\"admitted\"}");
    assert!(admitted >= 3.0, "{admitted}: {m}");
}

/// The way through the first hours in front of a site whose people logged in before
/// levee was there: every session value counts for `trust_unproven_sessions`.
#[tokio::test]
async fn a_trust_window_counts_sessions_nobody_proved() {
    let origin = site();
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config("[limits]\ntrust_unproven_sessions = \"1h\"")
        .start();
    let before_levee = "PHPSESSID=logged-in-before-levee-was-there-0001";
    assert_eq!(
        reason_with(&levee, ("cookie", before_levee)).await,
        "session-cookie:PHPSESSID"
    );
    assert!(
        levee.stderr().contains("trust_unproven_sessions"),
        "no warning"
    );
}

#[tokio::test]
async fn credentials_count_where_the_backend_asked_for_them_and_accepted_them() {
    let origin = site();
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let basic = ("authorization", "Basic ZWRpdG9yOmEtbG9uZy1wYXNzd29yZA==");
    let unproven = "session-or-authorization; unproven";
    // Accepted where nothing was asked (a page that ignores them): proves nothing.
    assert_eq!(reason_with(&levee, basic).await, unproven);
    // Asked for (401), then accepted: a person's.
    let r = Req::get("/challenge").send(&levee).await;
    assert_eq!(r.status, 401, "{}", r.summary());
    let r = Req::get("/challenge")
        .header(basic.0, basic.1)
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(reason_with(&levee, basic).await, "session-or-authorization");
    let other = ("authorization", "Bearer made-up-token-0000000000000");
    assert_eq!(reason_with(&levee, other).await, unproven);
}

fn metric_line(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn with_disk(origin: &Origin, dir: &std::path::Path) -> LeveeBuilder {
    levee!()
        .backend(&origin.url())
        .debug_headers()
        .args(&["--cache-disk", dir.to_str().unwrap()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proven_session_outlives_a_restart_with_the_disk_tier() {
    let origin = site();
    let dir = tempfile::tempdir().unwrap();
    {
        let levee = with_disk(&origin, dir.path()).start();
        log_in(&levee).await;
        assert_eq!(
            reason_with(&levee, ("cookie", SESSION)).await,
            "session-cookie:PHPSESSID"
        );
        // Stopped as systemd stops it; the file is written as proofs come.
        levee.sigterm();
    }
    let levee = with_disk(&origin, dir.path()).start();
    assert_eq!(
        reason_with(&levee, ("cookie", SESSION)).await,
        "session-cookie:PHPSESSID",
        "forgotten across the restart"
    );
    let file = std::fs::read_to_string(dir.path().join("sessions")).unwrap();
    assert!(
        !file.contains("3c9e1f7a52d84b06"),
        "the session's value itself is written: {file}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_proven_on_one_node_counts_on_another() {
    let redis = levee_test::Redis::start();
    let origin = site();
    let node = || {
        levee!()
            .backend(&origin.url())
            .debug_headers()
            .args(&["--cache-redis", &redis.url()])
            .start()
    };
    let (a, b) = (node(), node());
    for n in [&a, &b] {
        n.wait_metric("levee_redis_up", |v| v == 1.0).await;
    }
    log_in(&a).await;
    within(
        Duration::from_secs(5),
        "the proof to reach node b",
        || async { reason_with(&b, ("cookie", SESSION)).await == "session-cookie:PHPSESSID" },
    )
    .await;
    // A node that starts later reads it from Redis.
    let c = node();
    c.wait_metric("levee_redis_up", |v| v == 1.0).await;
    assert_eq!(
        reason_with(&c, ("cookie", SESSION)).await,
        "session-cookie:PHPSESSID"
    );
    // A logout on one node ends it on the others.
    Req::get("/logout").header("cookie", SESSION).send(&b).await;
    within(
        Duration::from_secs(5),
        "the logout to reach node a",
        || async {
            reason_with(&a, ("cookie", SESSION))
                .await
                .ends_with("; unproven")
        },
    )
    .await;
}

/// No false alarm: with room at the backend (48 slots), one client address sends 32
/// concurrent misses whose answers take 2.5 s while readers' revalidations run (people's
/// work: the lane keeps to its half meanwhile, so 8 of them wait longer than
/// `backend_anonymous_wait`). None is refused, and readers who arrive meanwhile wait
/// for their revalidation rather than being served a stale copy: the backend is slow,
/// not saturated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_from_a_backend_with_room_are_neither_refused_nor_served_stale() {
    let origin = Origin::start(|r| {
        let reply = if r.path.starts_with("/page/") {
            Reply::text(format!(
                "{} at {}",
                r.path,
                r.header("if-none-match").is_some()
            ))
            .header("cache-control", "max-age=1")
            .header("content-type", "text/html")
        } else {
            Reply::text(r.path.clone()).header("cache-control", "no-store")
        };
        reply.delay(Duration::from_millis(2500))
    });
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config("[limits]\nbackend_max_concurrency = 48")
        .start();
    let addr = levee.addr();
    let mut pages = JoinSet::new();
    for i in 0..8 {
        pages.spawn(async move { Req::get(&format!("/page/{i}")).send_to(addr).await });
    }
    while let Some(r) = pages.join_next().await {
        assert_eq!(r.unwrap().status, 200);
    }
    levee.wait_fills_done().await;
    levee.advance_clock(Duration::from_secs(10)).await;
    // People's work: four readers of stale pages, revalidated (2.5 s each).
    let mut readers = JoinSet::new();
    for i in 0..4 {
        readers.spawn(async move { Req::get(&format!("/page/{i}")).send_to(addr).await });
    }
    levee
        .wait_metric("levee_backend_in_use", |n| n >= 4.0)
        .await;
    let started = Instant::now();
    let mut misses = JoinSet::new();
    for i in 0..32 {
        misses.spawn(async move { Req::get(&format!("/miss/{i}")).send_to(addr).await });
    }
    levee
        .wait_metric("levee_backend_waiting", |n| n >= 1.0)
        .await;
    // Readers arriving while anonymous work waits for the lane's share.
    for i in 4..8 {
        readers.spawn(async move { Req::get(&format!("/page/{i}")).send_to(addr).await });
    }
    let mut statuses = Vec::new();
    while let Some(r) = misses.join_next().await {
        let r: Resp = r.unwrap();
        statuses.push((r.status.as_u16(), r.reason().to_string()));
    }
    assert!(
        statuses.iter().all(|(s, _)| *s == 200),
        "refused with room to spare: {statuses:?}"
    );
    assert!(
        started.elapsed() > Duration::from_millis(4500),
        "the lane did not hold half of them back: {:?}",
        started.elapsed()
    );
    while let Some(r) = readers.join_next().await {
        let r: Resp = r.unwrap();
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_ne!(r.x_cache(), "STALE", "{}", r.summary());
    }
}

/// A response that arrived already stale (its `Age` beyond its `max-age`) was never
/// fresh here: while the backend is saturated it is not served in place of its
/// revalidation (RFC 9111 §4.2.4), though a page that was fresh here is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_arrived_stale_is_never_served_while_the_backend_is_busy() {
    let origin = Origin::start(|r| match r.path.as_str() {
        "/arrived-stale" => Reply::text("arrived stale")
            .header("cache-control", "max-age=60")
            .header("age", "120"),
        "/was-fresh" => Reply::text("was fresh").header("cache-control", "max-age=60"),
        _ => Reply::text("busy")
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(1500)),
    });
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config("[limits]\nbackend_max_concurrency = 1")
        .start();
    for path in ["/arrived-stale", "/was-fresh"] {
        let r = levee.get(path).await;
        assert_eq!(r.reason(), "stored", "{}", r.summary());
        levee.wait_fills_done().await;
    }
    levee.advance_clock(Duration::from_secs(61)).await;
    let addr = levee.addr();
    let busy = tokio::spawn(async move { Req::get("/busy").send_to(addr).await });
    levee
        .wait_metric("levee_backend_in_use", |n| n == 1.0)
        .await;
    // The only slot is taken and a revalidation would wait: saturated.
    let r = levee.get("/was-fresh").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.reason(), "backend-busy", "{}", r.summary());
    let r = levee.get("/arrived-stale").await;
    assert_ne!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "arrived stale");
    assert_eq!(busy.await.unwrap().status, 200);
}

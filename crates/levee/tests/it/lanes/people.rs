//! Issue 32 for people: stale pages while the backend is saturated, POSTs never cut,
//! logged-in requests never refused by the lane nor served stored copies, and whose
//! forwarded addresses count (`trusted_proxies`).

use std::time::{Duration, Instant};

use levee_test::Req;
use tokio::task::JoinSet;

use super::support::*;

/// R7: a page marked stale by an edit, or past its max-age (within grace), is served
/// stale at once while every slot is busy, and revalidated once in the background; with
/// a free slot the reader gets the new revision at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_page_is_served_at_once_while_the_backend_is_saturated() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(6);
    let levee = site
        .levee("backend_max_concurrency = 2\nbackend_anonymous_wait = \"30s\"")
        .debug_headers()
        .start();
    bounded(async {
        let addr = levee.addr();
        // A free slot: the edit reaches the reader at once.
        stored_then_edited(&levee).await;
        let r = levee.get("/page.php").await;
        assert!(
            matches!(r.x_cache(), "REVALIDATED" | "MISS"),
            "{}",
            r.summary()
        );
        assert_eq!(r.text(), "<p>revision 2</p>");
        levee.wait_stored("/page.php").await;

        for (round, stale_by) in [(1, "edit"), (2, "max-age")] {
            if stale_by == "edit" {
                let r = Req::post("/edit.php", "x")
                    .header("cookie", "wordpress_logged_in_abc=editor")
                    .send(&levee)
                    .await;
                assert_eq!(r.text(), "saved 3", "{}", r.summary());
            } else {
                levee.advance_clock(Duration::from_secs(3700)).await;
            }
            let runs = site.started().iter().filter(|t| *t == "page").count();
            let mut set = JoinSet::new();
            for i in 1..=2 {
                let tag = format!("busy{round}{i}");
                spawn(&mut set, addr, &tag, net(1 + i, 1), work(&tag, 1500));
            }
            wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 2.0).await;
            for i in 1..=5 {
                let start = Instant::now();
                let r = Req::get("/page.php").send_from(addr, net(10 + i, 1)).await;
                let took = start.elapsed();
                assert_eq!(r.status, 200, "{stale_by}: {}", r.summary());
                assert_eq!(r.x_cache(), "STALE", "{stale_by}: {}", r.summary());
                assert_eq!(r.reason(), "backend-busy", "{stale_by}: {}", r.summary());
                let want = if round == 1 {
                    "revision 2"
                } else {
                    "revision 3"
                };
                assert_eq!(r.text(), format!("<p>{want}</p>"), "{stale_by}");
                assert!(took < AT_ONCE, "{stale_by}: the stale page took {took:?}");
            }
            wait_class(&levee, "levee_backend_queued", "shared", |v| v == 1.0).await;
            assert_ok(&join_all(&mut set).await);
            // One background revalidation, which stores revision 3.
            levee.wait_stored("/page.php").await;
            let r = levee.get("/page.php").await;
            assert_eq!(r.x_cache(), "HIT", "{stale_by}: {}", r.summary());
            assert_eq!(r.text(), "<p>revision 3</p>", "{stale_by}");
            let now = site.started().iter().filter(|t| *t == "page").count();
            assert_eq!(
                now,
                runs + 1,
                "{stale_by}: revalidations: {:?}",
                site.started()
            );
        }
        // Past max-age with a free slot: revalidated at once, not served stale.
        levee.advance_clock(Duration::from_secs(3700)).await;
        let r = levee.get("/page.php").await;
        assert!(
            matches!(r.x_cache(), "REVALIDATED" | "MISS"),
            "{}",
            r.summary()
        );
    })
    .await;
}

/// R6: a slow anonymous POST holds the only slot, longer than backend_anonymous_wait,
/// while the lane refuses others (a waiter, a newcomer, another POST): it is never cut,
/// and php-fpm receives all of its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_sent_to_the_backend_completes_while_the_lane_refuses_others() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(4);
    let levee = site
        .levee(
            "backend_max_concurrency = 1\nbackend_queue = 1\n\
             backend_anonymous_wait = \"500ms\"",
        )
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        let body = levee_test::pseudo_random(3 << 20, 32);
        let md5 = levee_test::digest_hex("md5sum", &body);
        let mut set = JoinSet::new();
        let post = Req::post("/work.php?tag=post&ms=1500", body.clone());
        spawn(&mut set, addr, "post", net(2, 1), post);
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 1.0).await;
        let mut others = JoinSet::new();
        spawn(&mut others, addr, "waiter", net(3, 1), work("waiter", 0));
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 1.0).await;
        spawn(&mut others, addr, "get", net(3, 2), work("get", 0));
        spawn(
            &mut others,
            addr,
            "post2",
            net(4, 1),
            Req::post("/work.php?tag=post2", "x"),
        );
        for (name, r, _) in join_all(&mut others).await {
            assert!(
                matches!(r.status.as_u16(), 429 | 503),
                "{name}: {}",
                r.summary()
            );
            assert_eq!(r.x_cache(), "ERROR", "{name}: {}", r.summary());
        }
        let done = join_all(&mut set).await;
        let (_, r, took) = &done[0];
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), format!("done post len={} md5={md5}", body.len()));
        assert!(*took > Duration::from_millis(1400), "{took:?}");
        assert_eq!(
            site.started(),
            ["post"],
            "a refused request reached php-fpm"
        );
    })
    .await;
}

/// R6/R7: while the anonymous lane is full, logged-in requests of every kind from the
/// network that fills it queue and are served; a logged-in reader of a stored page that
/// anonymous readers get stale gets the application's answer, never the stored or stale
/// copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logged_in_requests_are_never_refused_by_the_lane_nor_served_stored_pages() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(10);
    // Eight slots, all of them anonymous work's while nobody else has any; one network
    // may hold them all (100%); backend_queue = 5: the lane is full with five waiting.
    // People queue up to five too (a revalidation and four sessions).
    let levee = site
        .levee(
            "backend_max_concurrency = 8\nbackend_queue = 5\n\
             backend_network_share = \"100%\"\nbackend_anonymous_wait = \"30s\"",
        )
        .start();
    bounded(async {
        let addr = levee.addr();
        stored_then_edited(&levee).await;
        warm_up(&levee).await;
        let mut set = JoinSet::new();
        for i in 1..=8 {
            spawn(&mut set, addr, "a", net(2, i), work(&format!("a{i}"), 1500));
        }
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 8.0).await;
        for i in 1..=5 {
            spawn(
                &mut set,
                addr,
                "w",
                net(2, 10 + i),
                work(&format!("w{i}"), 0),
            );
        }
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 5.0).await;
        let r = work("x", 0).send_from(addr, net(2, 20)).await;
        assert_eq!(r.status, 503, "the lane is not full: {}", r.summary());
        assert_eq!(r.reason(), "anonymous-lane-full", "{}", r.summary());
        let r = Req::get("/page.php").send_from(addr, net(9, 1)).await;
        assert_eq!(r.x_cache(), "STALE", "anonymous reader: {}", r.summary());

        let people = [
            (
                "s-page",
                Req::get("/page.php").header("cookie", "PHPSESSID=s"),
            ),
            (
                "s-wiki",
                Req::get("/page.php").header("cookie", "wiki_session=w"),
            ),
            (
                "s-wp",
                work("s-wp", 0).header("cookie", "wordpress_logged_in_1=u"),
            ),
            (
                "s-auth",
                Req::post("/work.php?tag=s-auth", "a=1").header("authorization", "Basic dTpw"),
            ),
        ];
        let mut logged_in = JoinSet::new();
        for (i, (tag, req)) in people.into_iter().enumerate() {
            spawn(
                &mut logged_in,
                addr,
                tag,
                net(2, 30 + i as u8),
                req.header("x-tag", tag),
            );
        }
        for (name, r, _) in join_all(&mut logged_in).await {
            assert_eq!(r.status, 200, "{name} refused: {}", r.summary());
            assert!(
                !matches!(r.x_cache(), "HIT" | "STALE"),
                "{name}: {}",
                r.summary()
            );
            if name.ends_with("page") || name.ends_with("wiki") {
                assert_eq!(r.text(), "<p>revision 2</p>", "{name}");
            }
        }
        assert_ok(&join_all(&mut set).await);
        let started = site.started();
        for tag in ["s-page", "s-wiki", "s-wp", "s-auth"] {
            assert!(
                started.iter().any(|t| t == tag),
                "{tag} never ran: {started:?}"
            );
        }
        // The fresh copy is stored again: anonymous readers get it, logged-in ones not.
        levee.wait_stored("/page.php").await;
        let r = Req::get("/page.php")
            .header("cookie", "PHPSESSID=s")
            .header("x-tag", "s-again")
            .send(&levee)
            .await;
        assert!(!matches!(r.x_cache(), "HIT" | "STALE"), "{}", r.summary());
        assert!(site.started().iter().any(|t| t == "s-again"));
    })
    .await;
}

/// `trusted_proxies`: from any other peer, `X-Forwarded-For` is ignored (three clients
/// claimed by one peer are one network: N = 1 in flight, 1 waiting, 1 refused); from a
/// trusted proxy it names the client (three networks: all served), the rightmost address
/// that is not itself a trusted proxy, or `Forwarded: for=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_addresses_count_only_from_trusted_proxies() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(8);
    let levee = site
        .levee(
            "backend_max_concurrency = 4\nbackend_network_share = \"25%\"\n\
             backend_anonymous_wait = \"30s\"\ntrusted_proxies = [\"127.5.0.0/24\"]",
        )
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        let xff = |tag: &str, ms: u64, value: &str| work(tag, ms).header("x-forwarded-for", value);
        let refused = |done: &[Done]| done.iter().filter(|(_, r, _)| r.status == 429).count();

        let mut set = JoinSet::new();
        for (i, client) in ["10.1.0.1", "10.2.0.1", "10.3.0.1"].iter().enumerate() {
            let tag = format!("untrusted{i}");
            spawn(&mut set, addr, &tag, net(2, 1), xff(&tag, 800, client));
        }
        let done = join_all(&mut set).await;
        assert_eq!(
            refused(&done),
            1,
            "an untrusted peer's X-Forwarded-For counted: {done:#?}"
        );

        for (i, client) in ["10.1.0.1", "10.2.0.1", "10.3.0.1"].iter().enumerate() {
            let tag = format!("trusted{i}");
            spawn(&mut set, addr, &tag, net(5, 1), xff(&tag, 800, client));
        }
        let done = join_all(&mut set).await;
        assert_ok(&done);
        for (name, _, took) in &done {
            assert!(
                *took < Duration::from_millis(1500),
                "{name} waited: {took:?}"
            );
        }

        // One client network behind the proxy, however it is named.
        let same = [
            ("fwd1", xff("fwd1", 800, "10.9.0.1")),
            ("fwd2", xff("fwd2", 800, "10.9.0.2, 127.5.0.9")),
            (
                "fwd3",
                work("fwd3", 800).header("forwarded", "for=10.9.0.3;proto=http"),
            ),
        ];
        for (tag, req) in same {
            spawn(&mut set, addr, tag, net(5, 1), req);
        }
        let done = join_all(&mut set).await;
        assert_eq!(
            refused(&done),
            1,
            "one client network behind the proxy: {done:#?}"
        );

        let top = levee.admin(Req::get("/top.json")).await;
        let top: serde_json::Value = serde_json::from_slice(&top.body).unwrap();
        let networks: Vec<&str> = top["refused_networks"]
            .as_array()
            .expect("refused_networks")
            .iter()
            .filter_map(|n| n["network"].as_str())
            .collect();
        assert!(networks.contains(&"127.2.0.0/24"), "{top}");
        assert!(networks.contains(&"10.9.0.0/24"), "{top}");
        assert!(!networks.iter().any(|n| n.starts_with("127.5.")), "{top}");
    })
    .await;
}

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
                let editor = log_in(&levee, "wordpress_logged_in_abc", "editor").await;
                let saved = edit(&levee, &editor).await;
                assert_eq!(saved, "saved 3");
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
        let s = log_in(&levee, "PHPSESSID", "s").await;
        let w = log_in(&levee, "wiki_session", "w").await;
        let u = log_in(&levee, "wordpress_logged_in_1", "u").await;
        // Credentials count once the backend asked for them and accepted them.
        let r = Req::get("/work.php?auth=1&tag=challenge")
            .send(&levee)
            .await;
        assert_eq!(r.status, 401, "{}", r.summary());
        let credentials = "Basic dXNlcjpsb25nLXBhc3N3b3Jk";
        let r = Req::get("/work.php?auth=1&tag=accepted")
            .header("authorization", credentials)
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}", r.summary());
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
            ("s-page", Req::get("/page.php").header("cookie", &s)),
            ("s-wiki", Req::get("/page.php").header("cookie", &w)),
            ("s-wp", work("s-wp", 0).header("cookie", &u)),
            (
                "s-auth",
                // A GET: a POST with Authorization is an edit, which would mark the
                // page stale again whenever it ended after the revalidation.
                Req::get("/work.php?auth=1&tag=s-auth").header("authorization", credentials),
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
            .header("cookie", &s)
            .header("x-tag", "s-again")
            .send(&levee)
            .await;
        assert!(!matches!(r.x_cache(), "HIT" | "STALE"), "{}", r.summary());
        assert!(site.started().iter().any(|t| t == "s-again"));
    })
    .await;
}

/// `trusted_proxies`: from any other peer, `X-Forwarded-For` is ignored (three clients
/// claimed by one peer are one network: 1 waiting, 2 refused while another network
/// waits); from a trusted proxy it names the client (three networks: none refused), the
/// rightmost address that is not itself a trusted proxy, or `Forwarded: for=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_addresses_count_only_from_trusted_proxies() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(8);
    let levee = site
        .levee(
            "backend_max_concurrency = 2\nbackend_network_share = \"25%\"\n\
             backend_anonymous_wait = \"30s\"\ntrusted_proxies = [\"127.5.0.0/24\"]",
        )
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        let xff = |tag: &str, value: &str| work(tag, 0).header("x-forwarded-for", value);
        let mut set = JoinSet::new();
        // The backend busy, another network waiting: networks keep to their share.
        for i in 1..=2 {
            let name = format!("busy{i}");
            spawn(&mut set, addr, &name, net(9, i), work(&name, 2500));
        }
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 2.0).await;
        spawn(&mut set, addr, "other", net(8, 1), work("other", 0));
        let mut queued = 1.0;
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == queued).await;
        let groups: [(&str, u8, Vec<Req>); 3] = [
            // An untrusted peer's claims: one network.
            (
                "untrusted",
                2,
                ["10.1.0.1", "10.2.0.1", "10.3.0.1"]
                    .iter()
                    .enumerate()
                    .map(|(i, c)| xff(&format!("untrusted{i}"), c))
                    .collect(),
            ),
            // A trusted proxy's: three networks.
            (
                "trusted",
                5,
                ["10.1.0.1", "10.2.0.1", "10.3.0.1"]
                    .iter()
                    .enumerate()
                    .map(|(i, c)| xff(&format!("trusted{i}"), c))
                    .collect(),
            ),
            // One client network behind the proxy, however it is named.
            (
                "fwd",
                5,
                // Distinct URLs: one URL's requests would share one fill.
                vec![
                    xff("fwd0", "10.9.0.1"),
                    xff("fwd1", "10.9.0.2, 127.5.0.9"),
                    work("fwd2", 0).header("forwarded", "for=10.9.0.3;proto=http"),
                ],
            ),
        ];
        let mut refused_by = Vec::new();
        for (group, n, reqs) in groups {
            let mut mine = JoinSet::new();
            let mut waiting = Vec::new();
            for (i, req) in reqs.into_iter().enumerate() {
                let name = format!("{group}{i}");
                let from = net(n, 1);
                let start = Instant::now();
                let h = tokio::spawn(async move {
                    let r = req.send_from(addr, from).await;
                    (name, r, start.elapsed())
                });
                // Each in turn, so that the queue is as the rule sees it: refused (the
                // answer came) or queued (the gauge counts it) before the next is sent.
                let queued_now = queued + waiting.len() as f64 + 1.0;
                let deadline = Instant::now() + Duration::from_secs(10);
                while !h.is_finished() {
                    let m = Metrics::of(&levee).await;
                    if m.class("levee_backend_queued", "anonymous") >= queued_now {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "{group}{i} neither answered nor queued"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                if h.is_finished() {
                    mine.spawn(async move { h.await.expect("client task") });
                } else {
                    waiting.push(h);
                }
            }
            let done = join_all(&mut mine).await;
            for (name, r, took) in &done {
                assert_refused(name, r, *took, 429, "network-over-share");
            }
            queued += waiting.len() as f64;
            wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == queued).await;
            refused_by.push((group, done.len()));
            for h in waiting {
                set.spawn(async move { h.await.expect("client task") });
            }
        }
        assert_eq!(
            refused_by,
            [("untrusted", 2), ("trusted", 0), ("fwd", 2)],
            "X-Forwarded-For counted from an untrusted peer, or not from a trusted one"
        );
        assert_ok(&join_all(&mut set).await);

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

//! Purges (issue 11): by URL, by prefix and by tag on the admin listener, soft or not;
//! the `PURGE` method from allowed clients; the admin token.

use levee_test::{levee, Levee, Origin, Recorded, Reply, Req};

/// Pages that say which request rendered them, cacheable for an hour, tagged by path:
/// `/post/57` is `post-57 home`, `/post/58` is `post-58 home`, anything else `other`.
fn tagged_origin() -> Origin {
    Origin::start(|r: &Recorded| {
        let tags = match r.path.as_str() {
            "/post/57" => "post-57 home",
            "/post/58" => "post-58 home",
            _ => "other",
        };
        Reply::text(format!("{} #{}", r.path, r.n))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=3600")
            .header("surrogate-key", tags)
            .header("xkey", "everything")
    })
}

/// Stores each path, and checks that the second request is a hit.
async fn warm(levee: &Levee, paths: &[&str]) {
    for p in paths {
        levee.get(p).await;
        levee.wait_stored(p).await;
        assert_eq!(levee.get(p).await.x_cache(), "HIT", "{p}");
    }
}

async fn x_cache(levee: &Levee, path: &str) -> String {
    levee.get(path).await.x_cache().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_by_url_prefix_and_tag_removes_exactly_what_it_names() {
    let origin = tagged_origin();
    let levee = levee!().backend(&origin.url()).start();
    let host = levee.addr().to_string();
    let all = [
        "/post/57",
        "/post/58",
        "/wiki/a",
        "/wiki/b",
        "/wikipedia",
        "/other",
    ];
    warm(&levee, &all).await;
    // Tags are levee's business, not the client's.
    let r = levee.get("/post/57").await;
    assert!(r.header("surrogate-key").is_none() && r.header("xkey").is_none());

    // One URL: every variant of it, nothing else.
    let n = levee.purge(&format!("url=http://{host}/wiki/a")).await;
    assert_eq!(n, 1);
    assert_eq!(levee.purge(&format!("url=http://{host}/nothing")).await, 0);
    for (path, expected) in [("/wiki/a", "MISS"), ("/wiki/b", "HIT"), ("/other", "HIT")] {
        assert_eq!(x_cache(&levee, path).await, expected, "{path}");
    }
    levee.wait_stored("/wiki/a").await;

    // A prefix: everything below /wiki/, not /wikipedia.
    let n = levee.purge(&format!("prefix=http://{host}/wiki/")).await;
    assert_eq!(n, 2);
    for (path, expected) in [
        ("/wiki/a", "MISS"),
        ("/wiki/b", "MISS"),
        ("/wikipedia", "HIT"),
        ("/post/57", "HIT"),
    ] {
        assert_eq!(x_cache(&levee, path).await, expected, "{path}");
    }

    // A tag: post-57 is on one page, home on two.
    assert_eq!(levee.purge("tag=post-57").await, 1);
    assert_eq!(x_cache(&levee, "/post/57").await, "MISS");
    assert_eq!(x_cache(&levee, "/post/58").await, "HIT");
    levee.wait_stored("/post/57").await;
    assert_eq!(levee.purge("tag=home").await, 2);
    for (path, expected) in [
        ("/post/57", "MISS"),
        ("/post/58", "MISS"),
        ("/other", "HIT"),
    ] {
        assert_eq!(x_cache(&levee, path).await, expected, "{path}");
    }
    assert_eq!(levee.purge("tag=nobody-has-this").await, 0);
    levee.wait_fills_done().await;
    assert!(levee.metric("levee_purged_objects_total").await >= 6.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_purge_serves_the_old_copy_once_while_one_revalidation_runs() {
    let origin = tagged_origin();
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    warm(&levee, &["/post/57"]).await;
    assert_eq!(levee.get("/post/57").await.text(), "/post/57 #1");
    let before = origin.requests();
    assert_eq!(levee.purge("tag=post-57&soft=1").await, 1);
    let r = levee.get("/post/57").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/post/57 #1");
    levee.wait_fills_done().await;
    assert_eq!(origin.requests(), before + 1, "one revalidation");
    let r = levee.get("/post/57").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/post/57 #2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_method_works_from_allowed_addresses_only() {
    let origin = tagged_origin();
    // Loopback is allowed by default.
    let levee = levee!().backend(&origin.url()).start();
    warm(&levee, &["/wiki/a", "/wiki/b"]).await;
    let r = Req::new("PURGE", "/wiki/a").send(&levee).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert!(r.text().contains("\"purged\":1"), "{}", r.text());
    assert_eq!(x_cache(&levee, "/wiki/a").await, "MISS");
    assert_eq!(x_cache(&levee, "/wiki/b").await, "HIT");

    // Nobody is allowed: 403, nothing removed, the backend never asked.
    let strict = levee!()
        .backend(&origin.url())
        .config("[purge]\nallow = [\"192.0.2.1\"]")
        .start();
    warm(&strict, &["/wiki/a"]).await;
    let before = origin.requests();
    let r = Req::new("PURGE", "/wiki/a").send(&strict).await;
    assert_eq!(r.status, 403, "{}", r.summary());
    assert_eq!(x_cache(&strict, "/wiki/a").await, "HIT");
    assert_eq!(origin.requests(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_refuses_a_wrong_token() {
    let origin = tagged_origin();
    let levee = levee!()
        .backend(&origin.url())
        .admin_token("right-token")
        .start();
    warm(&levee, &["/wiki/a"]).await;
    let addr = levee.admin_addr().await;
    for auth in [
        None,
        Some("Bearer wrong-token"),
        Some("Bearer right-toke"),
        Some("right-token"),
    ] {
        let mut req = Req::new(
            "POST",
            &format!("/purge?url=http://{}/wiki/a", levee.addr()),
        );
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let r = req.send_to(addr).await;
        assert_eq!(r.status, 401, "{auth:?}: {}", r.summary());
        let r = Req::get("/metrics").send_to(addr).await;
        assert_eq!(r.status, 401);
    }
    assert_eq!(x_cache(&levee, "/wiki/a").await, "HIT");
    // The right one (levee_test sends it).
    assert_eq!(
        levee
            .purge(&format!("url=http://{}/wiki/a", levee.addr()))
            .await,
        1
    );
    assert_eq!(x_cache(&levee, "/wiki/a").await, "MISS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_purges_say_what_to_send() {
    let origin = tagged_origin();
    let levee = levee!().backend(&origin.url()).start();
    for (req, status) in [
        (Req::new("POST", "/purge"), 400),
        (Req::new("POST", "/purge?url=/relative"), 400),
        (Req::new("POST", "/purge?tag=a&url=http://x/"), 400),
        (Req::get("/purge?tag=a"), 405),
    ] {
        let r = levee.admin(req).await;
        assert_eq!(r.status, status, "{}", r.summary());
        assert!(r.text().contains("/purge?"), "{}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levee_purge_is_the_command_line_client() {
    let origin = tagged_origin();
    let levee = levee!().backend(&origin.url()).admin_token("t0ken").start();
    warm(&levee, &["/post/57", "/post/58"]).await;
    let admin = levee.admin_addr().await.to_string();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .arg("purge")
            .args(args)
            .args(["--admin", &admin])
            .env_remove("LEVEE_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    let out = run(&["--tag", "post-57", "--token", "t0ken"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "levee: 1 stored response(s) removed"
    );
    assert_eq!(x_cache(&levee, "/post/57").await, "MISS");
    assert_eq!(x_cache(&levee, "/post/58").await, "HIT");
    // Without the token: exit code 2 and what to do.
    let out = run(&["--tag", "post-58"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
    // Nothing there: exit code 1 and how to start it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
        .args(["purge", "--tag", "x", "--admin", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--admin-listen"));
}

//! Anonymous caching of session-cookie sites: a session-starting `Set-Cookie` is dropped
//! and the page shared, session and `Authorization` requests always pass and are never
//! stored, analytics cookies are ignored, pass paths (presets and config), micro-cache.

use std::time::Duration;

use levee_test::{levee, Origin, Recorded, Reply, Req};

/// Who the origin thinks is asking: the credentials it received, or "guest".
fn who(r: &Recorded) -> String {
    match (r.header("authorization"), r.header_joined("cookie")) {
        (Some(a), _) => format!("authorization {a}"),
        (None, Some(c)) => format!("cookie {c}"),
        (None, None) => "guest".to_string(),
    }
}

/// The body every origin of this file answers: different for every request, and naming
/// the credentials it saw, so that any leak between users is visible.
fn page(r: &Recorded) -> String {
    format!("{} #{} for {}", r.uri, r.n, who(r))
}

/// A PHP site that starts a new session on every response, like XE or gnuboard.
fn session_site(cache_control: &'static str) -> Origin {
    Origin::start(move |r| {
        Reply::text(page(r))
            .header("content-type", "text/html; charset=UTF-8")
            .header("cache-control", cache_control)
            .header("set-cookie", &format!("PHPSESSID=sid{}; path=/", r.n))
    })
}

#[tokio::test]
async fn session_starting_page_is_served_from_cache_without_its_set_cookie() {
    let origin = session_site("public, max-age=60");
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "/ #1 for guest");
    // The fill's response is shared with every concurrent anonymous visitor.
    assert!(
        r.header_all("set-cookie").is_empty(),
        "a shared fill handed out the origin's session cookie: {:?}",
        r.header_all("set-cookie")
    );
    levee.wait_stored("/").await;
    for _ in 0..3 {
        let r = levee.get("/").await;
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.text(), "/ #1 for guest");
        assert!(
            r.header_all("set-cookie").is_empty(),
            "the cached copy carries Set-Cookie: {:?}",
            r.header_all("set-cookie")
        );
    }
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn xe_style_page_is_micro_cached_without_its_set_cookie() {
    // What XE sends: no freshness at all, plus a new PHPSESSID on every page.
    const XE: &str = "public, must-revalidate, post-check=0, pre-check=0";
    let origin = session_site(XE);
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--micro-cache", "3s"])
        .start();
    let r = levee.get("/index.php?mid=board").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert!(r.header_all("set-cookie").is_empty(), "{:?}", r.headers);
    levee.wait_stored("/index.php?mid=board").await;
    for _ in 0..3 {
        let r = levee.get("/index.php?mid=board").await;
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.text(), "/index.php?mid=board #1 for guest");
        assert!(
            r.header_all("set-cookie").is_empty(),
            "the cached copy carries Set-Cookie: {:?}",
            r.header_all("set-cookie")
        );
    }
    assert_eq!(origin.requests(), 1);

    // Without micro-caching the same page has no freshness and is not stored.
    let plain = levee!().backend(&origin.url()).start();
    for _ in 0..2 {
        let r = plain.get("/index.php?mid=other").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    }
    assert_eq!(origin.requests_for("/index.php"), 3);
}

#[tokio::test]
async fn session_cookie_and_authorization_requests_always_reach_the_backend() {
    let origin = session_site("public, max-age=60");
    let levee = levee!().backend(&origin.url()).start();
    // An anonymous copy of /page is stored first.
    let r = levee.get("/page").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "/page #1 for guest");
    levee.wait_stored("/page").await;

    let credentials = [
        ("cookie", "PHPSESSID=abc"),
        ("cookie", "wordpress_logged_in_x=admin%7C1700000000"),
        ("cookie", "SESS123=drupal"),
        ("cookie", "some_session=wiki"),
        ("cookie", "MONIWIKI-x=moni"),
        ("cookie", "_ga=GA1.1.1; PHPSESSID=abc; theme=dark"),
        ("authorization", "Basic YWxpY2U6c2VjcmV0"),
    ];
    for (i, (name, value)) in credentials.iter().enumerate() {
        let fresh = format!("/fresh/{i}");
        for path in ["/page", fresh.as_str()] {
            let before = origin.requests();
            let r = levee.get_with(path, &[(name, value)]).await;
            assert_eq!(r.status, 200, "{name}: {value}: {}", r.summary());
            assert_eq!(r.x_cache(), "PASS", "{name}: {value}: {}", r.summary());
            assert_eq!(
                origin.requests(),
                before + 1,
                "{name}: {value} on {path} did not reach the backend"
            );
            let seen = origin.last();
            assert_eq!(
                seen.header(name),
                Some(*value),
                "the backend did not get the client's {name}"
            );
            // The origin's own answer, with its own Set-Cookie.
            assert_eq!(r.text(), page(&seen), "{name}: {value}: {}", r.summary());
            assert_eq!(
                r.header_all("set-cookie"),
                vec![format!("PHPSESSID=sid{}; path=/", seen.n)],
                "{name}: {value}: the backend's Set-Cookie did not reach its client"
            );
        }
    }

    // Nothing of theirs was stored: the anonymous copy is unchanged, and the paths only
    // visited with credentials are misses whose body is for a guest.
    let r = levee.get("/page").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/page #1 for guest");
    for i in 0..credentials.len() {
        let path = format!("/fresh/{i}");
        let r = levee.get(&path).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
        assert!(
            r.text().ends_with("for guest"),
            "{path}: an anonymous visitor got a logged-in response: {}",
            r.summary()
        );
    }
}

#[tokio::test]
async fn a_logged_in_page_is_never_stored() {
    let origin = Origin::start(|r| {
        let body = match r.cookie("PHPSESSID") {
            Some(sid) => format!("hello {sid} #{}", r.n),
            None => format!("hello guest #{}", r.n),
        };
        // Headers that would make the page cacheable if anyone could have it.
        Reply::text(body)
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = levee
        .get_with("/home", &[("cookie", "PHPSESSID=alice")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.text(), "hello alice #1");
    levee.wait_backend_idle().await;
    levee.wait_fills_done().await;
    let r = levee
        .get_with("/home", &[("cache-control", "only-if-cached")])
        .await;
    assert_eq!(r.status, 504, "alice's page was stored: {}", r.summary());

    let r = levee.get("/home").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "hello guest #2");
    levee.wait_stored("/home").await;

    // Alice is not given the guest copy, and her page does not replace it.
    let r = levee
        .get_with("/home", &[("cookie", "PHPSESSID=alice")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.text(), "hello alice #3");
    levee.wait_backend_idle().await;
    levee.wait_fills_done().await;
    let r = levee.get("/home").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "hello guest #2");
    assert_eq!(origin.requests(), 3);
}

#[tokio::test]
async fn analytics_cookies_do_not_split_the_cache_and_are_not_sent_on_a_fill() {
    let origin = Origin::start(|r| {
        Reply::text(page(r))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();

    // Analytics cookies first: the fill goes out without them.
    let r = levee.get_with("/a", &[("cookie", "_ga=1; _gid=2")]).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "/a #1 for guest");
    let seen = origin.last();
    assert_eq!(
        seen.header("cookie"),
        None,
        "a fill sent the client's cookies to the backend"
    );
    levee.wait_stored("/a").await;
    for cookie in [None, Some("_ga=1; _gid=2"), Some("_ga=99")] {
        let mut req = Req::get("/a");
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send(&levee).await;
        assert_eq!(r.x_cache(), "HIT", "cookie {cookie:?}: {}", r.summary());
        assert_eq!(r.text(), "/a #1 for guest");
    }

    // No cookies first, then analytics cookies: the same stored copy.
    assert_eq!(levee.get("/b").await.x_cache(), "MISS");
    levee.wait_stored("/b").await;
    let r = levee.get_with("/b", &[("cookie", "_ga=1; _gid=2")]).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/b #2 for guest");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn a_response_that_sets_a_non_session_cookie_is_not_stored() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(page(r))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
            .header("set-cookie", "visitor_count=5; path=/");
        if r.path == "/both" {
            reply.header("set-cookie", &format!("PHPSESSID=sid{}; path=/", r.n))
        } else {
            reply
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    for path in ["/visitor", "/both"] {
        for round in 0..3 {
            let r = levee.get(path).await;
            assert_eq!(r.status, 200, "{path}: {}", r.summary());
            assert_ne!(r.x_cache(), "HIT", "{path} round {round}: {}", r.summary());
            assert_eq!(
                r.reason(),
                "sets-non-session-cookie",
                "{path} round {round}: {}",
                r.summary()
            );
            assert_eq!(r.text(), page(&origin.last()), "{path} round {round}");
            // Not shared, so the client gets its cookie.
            assert!(
                r.header_all("set-cookie")
                    .iter()
                    .any(|c| c.starts_with("visitor_count=5")),
                "{path}: {:?}",
                r.header_all("set-cookie")
            );
        }
        assert_eq!(origin.requests_for(path), 3, "{path} was stored");
        let r = levee
            .get_with(path, &[("cache-control", "only-if-cached")])
            .await;
        assert_eq!(r.status, 504, "{path} was stored: {}", r.summary());
    }
}

#[tokio::test]
async fn wordpress_preset_passes_admin_and_login_paths() {
    let origin = Origin::start(|r| {
        Reply::text(page(r))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--preset", "wordpress"])
        .debug_headers()
        .start();
    let test_cookie = "wordpress_test_cookie=WP%20Cookie%20check";
    for path in [
        "/wp-admin/",
        "/wp-admin/edit.php?post=1",
        "/wp-login.php",
        "/wp-login.php?action=lostpassword",
    ] {
        for _ in 0..2 {
            let r = levee.get_with(path, &[("cookie", test_cookie)]).await;
            assert_eq!(r.status, 200, "{path}: {}", r.summary());
            assert_eq!(r.x_cache(), "PASS", "{path}: {}", r.summary());
            assert_eq!(r.reason(), "pass-path", "{path}: {}", r.summary());
            // A pass goes to the backend as it is, cookies included.
            let seen = origin.last();
            assert_eq!(seen.uri, path);
            assert_eq!(seen.header("cookie"), Some(test_cookie), "{path}");
        }
        let n = origin.recorded().iter().filter(|r| r.uri == path).count();
        assert_eq!(n, 2, "{path} was cached");
    }
    // Ordinary posts are still cached.
    let post = "/2024/01/hello-world/";
    assert_eq!(levee.get(post).await.x_cache(), "MISS");
    levee.wait_stored(post).await;
    assert_eq!(levee.get(post).await.x_cache(), "HIT");

    // Without the preset, the same admin page would have been cached: the preset is
    // what keeps it out.
    let plain = levee!().backend(&origin.url()).start();
    assert_eq!(plain.get("/wp-admin/").await.x_cache(), "MISS");
    plain.wait_stored("/wp-admin/").await;
}

#[tokio::test]
async fn config_pass_paths_are_never_cached() {
    let origin = Origin::start(|r| {
        Reply::text(page(r))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
    });
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config("[anonymous]\npass_paths = [\"/account*\", \"*nocache=1*\"]")
        .start();
    for path in ["/account", "/account/orders?page=2", "/news?nocache=1"] {
        for _ in 0..2 {
            let r = levee.get(path).await;
            assert_eq!(r.status, 200, "{path}: {}", r.summary());
            assert_eq!(r.x_cache(), "PASS", "{path}: {}", r.summary());
            assert_eq!(r.reason(), "pass-path", "{path}: {}", r.summary());
            assert_eq!(r.text(), page(&origin.last()));
        }
        let n = origin.recorded().iter().filter(|r| r.uri == path).count();
        assert_eq!(n, 2, "{path} was cached");
    }
    assert_eq!(levee.get("/news").await.x_cache(), "MISS");
    levee.wait_stored("/news").await;
    let r = levee.get("/news").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.reason(), "stored");
}

#[tokio::test]
async fn extra_session_cookies_from_the_config_file_pass_and_are_dropped_when_set() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(page(r))
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60");
        if r.path == "/starts" {
            reply.header("set-cookie", &format!("mysite_auth=s{}; path=/", r.n))
        } else {
            reply
        }
    });
    let config = "[anonymous]\nextra_session_cookies = [\"mysite_auth\", \"forum_*\"]";
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config(config)
        .start();
    assert_eq!(levee.get("/page").await.x_cache(), "MISS");
    levee.wait_stored("/page").await;
    // The extra cookies, and the built-in ones still, make a request pass.
    for cookie in ["mysite_auth=1", "forum_user=bob", "PHPSESSID=abc"] {
        let r = levee.get_with("/page", &[("cookie", cookie)]).await;
        assert_eq!(r.x_cache(), "PASS", "{cookie}: {}", r.summary());
        let name = cookie.split('=').next().unwrap();
        // Nobody proved these values: passed, and scheduled as anonymous work.
        assert_eq!(r.reason(), format!("session-cookie:{name}; unproven"));
        assert_eq!(r.text(), page(&origin.last()));
        assert_eq!(origin.last().header("cookie"), Some(cookie));
    }
    // Other cookies do not.
    let r = levee.get_with("/page", &[("cookie", "theme=dark")]).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/page #1 for guest");

    // A response that starts a configured session is stored without its Set-Cookie.
    let r = levee.get("/starts").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.reason(), "stored", "{}", r.summary());
    levee.wait_stored("/starts").await;
    let r = levee.get("/starts").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert!(r.header_all("set-cookie").is_empty(), "{:?}", r.headers);
    assert_eq!(origin.requests_for("/starts"), 1);

    // Without the config, mysite_auth is an ordinary cookie: such requests are
    // anonymous...
    let plain = levee!().backend(&origin.url()).debug_headers().start();
    assert_eq!(plain.get("/page").await.x_cache(), "MISS");
    plain.wait_stored("/page").await;
    let r = plain
        .get_with("/page", &[("cookie", "mysite_auth=1")])
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    // ...and a Set-Cookie of it makes the response personal, not stored. From then on
    // levee knows the backend sets it: requests carrying it pass (a learned session).
    let r = plain.get("/starts").await;
    assert_eq!(r.reason(), "sets-non-session-cookie", "{}", r.summary());
    let r = plain
        .get_with("/page", &[("cookie", "mysite_auth=1")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.reason(), "session-cookie:mysite_auth; unproven");
}

#[tokio::test]
async fn debug_headers_give_the_reason_for_every_decision() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(page(r)).header("content-type", "text/html");
        match r.path.as_str() {
            "/no-store" => reply.header("cache-control", "no-store"),
            "/private" => reply.header("cache-control", "private, max-age=60"),
            "/cookie" => reply
                .header("cache-control", "max-age=60")
                .header("set-cookie", "visitor=1"),
            "/plain" => reply,
            _ => reply.header("cache-control", "max-age=60"),
        }
    });
    // The RFC's reasons, without the anonymous TTL the preset would turn on (see
    // anonymous_ttl.rs for that).
    let with_flag = levee!()
        .backend(&origin.url())
        .args(&["--preset", "wordpress", "--anonymous-ttl", "off"])
        .debug_headers()
        .start();
    let with_file = levee!()
        .backend(&origin.url())
        .config("debug_headers = true\npreset = \"wordpress\"\n[cache]\nanonymous_ttl = \"off\"")
        .start();
    for levee in [&with_flag, &with_file] {
        let r = levee.get("/cacheable").await;
        assert_eq!(
            (r.x_cache(), r.reason()),
            ("MISS", "stored"),
            "{}",
            r.summary()
        );
        levee.wait_stored("/cacheable").await;
        let cases = [
            (Req::get("/cacheable"), "HIT", "stored"),
            (
                Req::get("/cacheable").header("cookie", "PHPSESSID=abc"),
                "PASS",
                "session-cookie:PHPSESSID; unproven",
            ),
            (
                Req::get("/cacheable").header("authorization", "Bearer x"),
                "PASS",
                "session-or-authorization; unproven",
            ),
            (Req::get("/wp-login.php"), "PASS", "pass-path"),
            (Req::post("/form", "a=1"), "PASS", "method-not-cacheable"),
            (Req::get("/no-store"), "MISS", "no-store"),
            (Req::get("/private"), "MISS", "private"),
            (Req::get("/cookie"), "MISS", "sets-non-session-cookie"),
            (Req::get("/plain"), "MISS", "no-freshness-no-validator"),
        ];
        for (req, x_cache, reason) in cases {
            let desc = format!("{req:?}");
            let r = req.send(levee).await;
            assert_eq!(r.status, 200, "{desc}: {}", r.summary());
            assert_eq!(r.x_cache(), x_cache, "{desc}: {}", r.summary());
            assert_eq!(r.reason(), reason, "{desc}: {}", r.summary());
        }
    }

    // Without the option, no X-Cache-Reason at all.
    let quiet = levee!()
        .backend(&origin.url())
        .args(&["--preset", "wordpress"])
        .start();
    for req in [
        Req::get("/cacheable"),
        Req::get("/cacheable"),
        Req::get("/cacheable").header("cookie", "PHPSESSID=abc"),
        Req::get("/wp-login.php"),
        Req::get("/no-store"),
    ] {
        let r = req.send(&quiet).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert!(!r.x_cache().is_empty(), "{}", r.summary());
        assert!(!r.has("x-cache-reason"), "{}", r.summary());
    }
}

#[tokio::test]
async fn micro_cache_keeps_anonymous_html_briefly_then_asks_again() {
    // MoniWiki-like: HTML without any freshness, a new session on every page.
    let origin = Origin::start(|r| {
        Reply::text(page(r))
            .header("content-type", "text/html; charset=utf-8")
            .header("set-cookie", &format!("MONIWIKI-abc=s{}; path=/", r.n))
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--micro-cache", "10s"])
        .start();
    let r = levee.get("/wiki/FrontPage").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #1 for guest");
    levee.wait_stored("/wiki/FrontPage").await;
    let r = levee.get("/wiki/FrontPage").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #1 for guest");
    assert!(r.header_all("set-cookie").is_empty(), "{:?}", r.headers);

    // A logged-in user is not given the micro-cached copy.
    let r = levee
        .get_with("/wiki/FrontPage", &[("cookie", "MONIWIKI-abc=alice")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #2 for cookie MONIWIKI-abc=alice");

    // Past the micro-cache TTL, for as long again, the old copy once more while one
    // request in the background asks the origin (no reader waits for the page). The
    // age counts from the Date header, whole seconds: up to 1 s more than the clock
    // moved, well inside the margins of 5 s on either side.
    levee.advance_clock(Duration::from_secs(15)).await;
    origin.advance_clock(Duration::from_secs(15));
    let r = levee.get("/wiki/FrontPage").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #1 for guest");
    levee.wait_fills_done().await;
    let r = levee.get("/wiki/FrontPage").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #3 for guest");
    assert_eq!(origin.requests(), 3);

    // Never older than twice the TTL: past that, the reader waits for the origin.
    levee.advance_clock(Duration::from_secs(25)).await;
    origin.advance_clock(Duration::from_secs(25));
    let r = levee.get("/wiki/FrontPage").await;
    assert!(!["HIT", "STALE"].contains(&r.x_cache()), "{}", r.summary());
    assert_eq!(r.text(), "/wiki/FrontPage #4 for guest");
    assert_eq!(origin.requests(), 4);
}

#[tokio::test]
async fn micro_cache_is_only_for_html_without_explicit_freshness() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(page(r));
        match r.path.as_str() {
            "/api.json" => reply.header("content-type", "application/json"),
            "/max-age-0" => reply
                .header("content-type", "text/html")
                .header("cache-control", "max-age=0"),
            "/no-store" => reply
                .header("content-type", "text/html")
                .header("cache-control", "no-store"),
            "/private" => reply
                .header("content-type", "text/html")
                .header("cache-control", "private"),
            _ => reply.header("content-type", "text/html"),
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--micro-cache", "3s"])
        .debug_headers()
        .start();
    // The control: plain HTML is micro-cached.
    assert_eq!(levee.get("/html").await.x_cache(), "MISS");
    levee.wait_stored("/html").await;
    assert_eq!(levee.get("/html").await.x_cache(), "HIT");
    assert_eq!(origin.requests_for("/html"), 1);

    for path in ["/api.json", "/max-age-0", "/no-store", "/private"] {
        for round in 0..2 {
            let r = levee.get(path).await;
            assert_eq!(r.status, 200, "{path}: {}", r.summary());
            assert_ne!(r.x_cache(), "HIT", "{path} round {round}: {}", r.summary());
            assert_ne!(r.reason(), "stored", "{path}: {}", r.summary());
        }
        assert_eq!(origin.requests_for(path), 2, "{path} was micro-cached");
        let r = levee
            .get_with(path, &[("cache-control", "only-if-cached")])
            .await;
        assert_eq!(r.status, 504, "{path} was stored: {}", r.summary());
    }

    // Micro-caching is off by default: the same HTML is not stored.
    let plain = levee!().backend(&origin.url()).start();
    for _ in 0..2 {
        let r = plain.get("/html-default").await;
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    }
    assert_eq!(origin.requests_for("/html-default"), 2);
}

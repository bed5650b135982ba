//! RFC 9111 shared-cache behaviour, observed from outside: storage rules, freshness,
//! Age, Vary, validation, conditional requests, HEAD, invalidation, request directives.

use std::time::{Duration, SystemTime};

use levee_test::{http_date, levee, Levee, Origin, Reply, Req};

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

/// Moves past a 1-second freshness lifetime, once every fill so far is stored: levee's
/// clock, and the origin's with it for what it answers after.
async fn past_one_second(levee: &Levee, origin: &Origin) {
    levee.wait_fills_done().await;
    let by = Duration::from_millis(1500);
    levee.advance_clock(by).await;
    origin.advance_clock(by);
}

#[tokio::test]
async fn s_maxage_beats_max_age_beats_expires() {
    let origin = Origin::start(|r| {
        let now = SystemTime::now();
        let reply = Reply::text(format!("{} #{}", r.path, r.n));
        match r.path.as_str() {
            "/smax-long" => reply.header("cache-control", "s-maxage=60, max-age=0"),
            "/smax-short" => reply.header("cache-control", "s-maxage=1, max-age=600"),
            "/maxage-long" => reply
                .header("cache-control", "max-age=60")
                .header("expires", &http_date(now - Duration::from_secs(3600))),
            "/maxage-short" => reply
                .header("cache-control", "max-age=1")
                .header("expires", &http_date(now + Duration::from_secs(3600))),
            "/expires-future" => reply
                .header("date", &http_date(now))
                .header("expires", &http_date(now + Duration::from_secs(60))),
            "/expires-invalid" => reply.header("expires", "0"),
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();

    for path in [
        "/smax-long",
        "/smax-short",
        "/maxage-long",
        "/maxage-short",
        "/expires-future",
        "/expires-invalid",
    ] {
        let r = levee.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
    }
    // s-maxage=60 wins over max-age=0; max-age=60 over an Expires in the past; a future
    // Expires alone gives freshness.
    for path in ["/smax-long", "/maxage-long", "/expires-future"] {
        levee.wait_stored(path).await;
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "HIT", "{path}: {}", r.summary());
        assert_eq!(origin.requests_for(path), 1, "{path}");
    }
    // An invalid Expires means already expired.
    let r = levee.get("/expires-invalid").await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests_for("/expires-invalid"), 2);

    // s-maxage=1 wins over max-age=600, max-age=1 over a later Expires.
    past_one_second(&levee, &origin).await;
    for path in ["/smax-short", "/maxage-short"] {
        let r = levee.get(path).await;
        assert_ne!(r.x_cache(), "HIT", "{path} is stale: {}", r.summary());
        assert_eq!(origin.requests_for(path), 2, "{path}");
    }
}

#[tokio::test]
async fn no_store_private_and_authorization_are_never_stored() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/no-store" => "no-store",
            "/private" => "private, max-age=60",
            _ => "max-age=60",
        };
        let who = r.header("authorization").unwrap_or("anonymous").to_string();
        Reply::text(format!("{} for {who}", r.path)).header("cache-control", cc)
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();

    for (path, reason) in [("/no-store", "no-store"), ("/private", "private")] {
        for _ in 0..3 {
            let r = levee.get(path).await;
            assert_eq!(r.status, 200);
            assert_ne!(r.x_cache(), "HIT", "{path}: {}", r.summary());
            assert_eq!(r.reason(), reason, "{path}: {}", r.summary());
        }
        assert_eq!(origin.requests_for(path), 3, "{path} was stored");
    }

    // A response to a request with Authorization is not stored, even when cacheable...
    let r = levee
        .get_with("/auth", &[("authorization", "Bearer alice")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.reason(), "session-or-authorization; unproven");
    assert_eq!(r.text(), "/auth for Bearer alice");
    assert_eq!(origin.last().header("authorization"), Some("Bearer alice"));
    let r = levee.get("/auth").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(r.text(), "/auth for anonymous");
    levee.wait_stored("/auth").await;
    let r = levee.get("/auth").await;
    assert_eq!(r.x_cache(), "HIT");
    // ...and a stored response is never used to answer one.
    let r = levee
        .get_with("/auth", &[("authorization", "Bearer bob")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.text(), "/auth for Bearer bob");
    assert_eq!(origin.requests_for("/auth"), 3);
}

#[tokio::test]
async fn heuristic_freshness_needs_last_modified() {
    // One Last-Modified for the origin's life: computed per request, it would move when
    // two requests straddle a second, and the 304 to levee's validator would not come.
    let modified = http_date(SystemTime::now() - Duration::from_secs(10_000));
    let origin = Origin::start(move |r| {
        let now = SystemTime::now();
        let reply = Reply::text(format!("{} #{}", r.path, r.n)).header("date", &http_date(now));
        match r.path.as_str() {
            "/old" => {
                let lm = modified.clone();
                if r.header("if-modified-since") == Some(lm.as_str()) {
                    Reply::status(304).header("date", &http_date(now))
                } else {
                    reply.header("last-modified", &lm)
                }
            }
            _ => reply,
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    // Last-Modified 10000 s ago: fresh for 10% of that.
    assert_eq!(levee.get("/old").await.x_cache(), "MISS");
    levee.wait_stored("/old").await;
    let r = levee.get("/old").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    // No Last-Modified, no explicit freshness: not stored.
    assert_eq!(levee.get("/plain").await.x_cache(), "MISS");
    let r = levee.get("/plain").await;
    // Marked uncacheable: the next requests pass (hit-for-pass), saying why.
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_eq!(r.reason(), "no-freshness-no-validator");
    assert_eq!(origin.requests_for("/plain"), 2);

    // With heuristics off, the Last-Modified response is kept for revalidation only.
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\nheuristic = false")
        .start();
    origin.reset();
    assert_eq!(levee.get("/old").await.x_cache(), "MISS");
    levee.wait_kept("/old").await;
    let r = levee.get("/old").await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(r.text(), "/old #1");
    let seen = origin.last();
    assert!(
        seen.header("if-modified-since").is_some(),
        "revalidation without If-Modified-Since: {:?}",
        seen.headers
    );
}

#[tokio::test]
async fn age_grows_while_stored_and_includes_upstream_age() {
    let origin = Origin::start(|r| {
        let reply = Reply::text("aging").header("cache-control", "max-age=600");
        if r.path == "/from-upstream-cache" {
            reply.header("age", "100")
        } else {
            reply
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/age").await;
    assert_eq!(r.x_cache(), "MISS");
    let first = r.age().expect("Age on a miss");
    assert!(first <= 1, "fresh response has Age {first}");
    levee.wait_stored("/age").await;
    let r = levee.get("/age").await;
    assert_eq!(r.x_cache(), "HIT");
    let a1 = r.age().expect("Age on a hit");
    levee.advance_clock(Duration::from_millis(1500)).await;
    origin.advance_clock(Duration::from_millis(1500));
    let r = levee.get("/age").await;
    let a2 = r.age().expect("Age on a hit");
    assert!(a2 > a1, "Age did not increase: {a1} then {a2}");

    let r = levee.get("/from-upstream-cache").await;
    assert!(r.age().expect("Age") >= 100, "{}", r.summary());
    levee.wait_stored("/from-upstream-cache").await;
    let r = levee.get("/from-upstream-cache").await;
    assert_eq!(r.x_cache(), "HIT");
    assert!(r.age().expect("Age") >= 100, "{}", r.summary());
}

#[tokio::test]
async fn vary_stores_one_variant_per_request_header_value() {
    let origin = Origin::start(|r| {
        let lang = r.header("accept-language").unwrap_or("none").to_string();
        let vary = if r.path == "/star" {
            "*"
        } else {
            "Accept-Language"
        };
        Reply::text(format!("lang={lang} #{}", r.n))
            .header("cache-control", "max-age=60")
            .header("vary", vary)
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let get = |lang: Option<&'static str>| {
        let mut req = Req::get("/page");
        if let Some(l) = lang {
            req = req.header("accept-language", l);
        }
        req.send(&levee)
    };
    assert_eq!(get(Some("en")).await.x_cache(), "MISS");
    assert_eq!(get(Some("ko")).await.x_cache(), "MISS");
    assert_eq!(get(None).await.x_cache(), "MISS");
    for lang in ["en", "ko"] {
        levee
            .wait_stored_req(Req::get("/page").header("accept-language", lang))
            .await;
    }
    levee.wait_stored("/page").await;
    for _ in 0..2 {
        let en = get(Some("en")).await;
        assert_eq!(en.x_cache(), "HIT", "{}", en.summary());
        assert!(en.text().starts_with("lang=en "), "{}", en.summary());
        let ko = get(Some("ko")).await;
        assert_eq!(ko.x_cache(), "HIT", "{}", ko.summary());
        assert!(ko.text().starts_with("lang=ko "), "{}", ko.summary());
        let none = get(None).await;
        assert_eq!(none.x_cache(), "HIT", "{}", none.summary());
        assert!(none.text().starts_with("lang=none "), "{}", none.summary());
    }
    assert_eq!(origin.requests_for("/page"), 3);

    // Vary: * can never match: not stored.
    for _ in 0..2 {
        let r = levee.get_with("/star", &[("accept-language", "en")]).await;
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.reason(), "vary-star");
    }
    assert_eq!(origin.requests_for("/star"), 2);
}

#[tokio::test]
async fn no_cache_response_is_revalidated_every_time_and_304_headers_are_merged() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match") == Some("\"v1\"") {
            Reply::status(304)
                .header("etag", "\"v1\"")
                .header("cache-control", "no-cache")
                .header("x-revalidation", &format!("#{}", r.n))
        } else {
            Reply::text("full body v1")
                .header("etag", "\"v1\"")
                .header("cache-control", "no-cache")
                .header("x-revalidation", "none")
                .header("x-original", "kept")
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/nc").await;
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(r.text(), "full body v1");
    // A no-cache response reaches the client a moment before its fill stores it, and
    // no probe can see it without validating it.
    levee.wait_fills_done().await;
    for n in 2..=4 {
        let r = levee.get("/nc").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
        assert_eq!(r.text(), "full body v1");
        assert_eq!(
            r.header("x-revalidation"),
            Some(format!("#{n}").as_str()),
            "304 headers not merged"
        );
        assert_eq!(r.header("x-original"), Some("kept"));
        assert_eq!(origin.requests(), n);
        let seen = origin.last();
        assert_eq!(seen.header("if-none-match"), Some("\"v1\""));
        assert_eq!(seen.method, "GET");
    }
}

#[tokio::test]
async fn must_revalidate_is_never_served_stale_when_backend_is_down() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/must" => "max-age=1, must-revalidate",
            "/proxy" => "max-age=1, proxy-revalidate",
            _ => "max-age=1",
        };
        Reply::text(format!("{} content", r.path)).header("cache-control", cc)
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/must", "/proxy", "/plain"] {
        assert_eq!(levee.get(p).await.status, 200);
    }
    origin.stop();
    past_one_second(&levee, &origin).await;
    for p in ["/must", "/proxy"] {
        let r = levee.get(p).await;
        assert_eq!(r.status, 502, "{p}: {}", r.summary());
        assert!(!r.text().contains("content"), "{p}: {}", r.summary());
    }
    // Control: without must-revalidate, grace serves it.
    let r = levee.get("/plain").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/plain content");
}

#[tokio::test]
async fn must_revalidate_gets_504_when_backend_times_out() {
    let origin = Origin::start(|r| {
        let reply = Reply::text("content").header("cache-control", "max-age=1, must-revalidate");
        if r.n > 1 {
            reply.hang()
        } else {
            reply
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_first_byte_timeout = \"1s\"")
        .start();
    assert_eq!(levee.get("/m").await.status, 200);
    past_one_second(&levee, &origin).await;
    let r = levee.get("/m").await;
    assert_eq!(r.status, 504, "{}", r.summary());
}

#[tokio::test]
async fn client_conditional_requests_get_304_from_the_cache() {
    let origin = Origin::fixed(|| {
        Reply::text("conditional body")
            .header("cache-control", "max-age=60")
            .header("etag", "\"abc\"")
            .header("last-modified", LM)
    });
    let levee = levee!().backend(&origin.url()).start();
    // A conditional request on a miss: the fill is unconditional, the client gets 304.
    let r = levee.get_with("/c", &[("if-none-match", "\"abc\"")]).await;
    assert_eq!(r.status, 304, "{}", r.summary());
    assert!(origin.last().header("if-none-match").is_none());
    levee.wait_stored("/c").await;

    let cases: [(&str, &str, u16); 6] = [
        ("if-none-match", "\"abc\"", 304),
        ("if-none-match", "W/\"abc\"", 304),
        ("if-none-match", "\"other\"", 200),
        ("if-none-match", "*", 304),
        ("if-modified-since", LM, 304),
        ("if-modified-since", "Sat, 05 Nov 1994 08:49:37 GMT", 200),
    ];
    for (name, value, status) in cases {
        let r = levee.get_with("/c", &[(name, value)]).await;
        assert_eq!(r.status, status, "{name}: {value}: {}", r.summary());
        assert_eq!(r.x_cache(), "HIT", "{name}: {value}");
        if status == 304 {
            assert!(r.body.is_empty());
            assert_eq!(r.header("etag"), Some("\"abc\""));
            assert_eq!(r.header("cache-control"), Some("max-age=60"));
        } else {
            assert_eq!(r.text(), "conditional body");
        }
    }
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn head_is_answered_from_a_stored_get() {
    let body = "x".repeat(1234);
    let origin = Origin::start(move |_| {
        Reply::text(body.clone())
            .header("cache-control", "max-age=60")
            .header("content-type", "text/plain")
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/h").await;
    assert_eq!(r.body.len(), 1234);
    levee.wait_stored("/h").await;
    let r = Req::head("/h").send(&levee).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.header("content-length"), Some("1234"));
    assert!(r.body.is_empty());
    assert_eq!(origin.requests(), 1);

    // A HEAD miss is filled with a GET, so the following GET is a hit.
    let r = Req::head("/head-first").send(&levee).await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(r.header("content-length"), Some("1234"), "{:?}", r.headers);
    assert_eq!(origin.last().method, "GET");
    levee.wait_stored("/head-first").await;
    let r = levee.get("/head-first").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.body.len(), 1234);
    assert!(origin.recorded().iter().all(|r| r.method == "GET"));
}

#[tokio::test]
async fn successful_unsafe_methods_invalidate_the_url_and_its_location() {
    let origin = Origin::start(|r| {
        if r.method == "GET" {
            return Reply::text(format!("{} #{}", r.path, r.n))
                .header("cache-control", "max-age=60");
        }
        if r.header("x-fail").is_some() {
            return Reply::status(500).body("failed");
        }
        match r.method.as_str() {
            "POST" => Reply::status(201)
                .header("location", "/other")
                .header("content-location", "/third"),
            "DELETE" => Reply::status(204),
            _ => Reply::ok(),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    let lv = &levee;
    let warm = |paths: &'static [&'static str]| async move {
        for p in paths {
            lv.get(p).await;
            lv.wait_stored(p).await;
            let r = lv.get(p).await;
            assert_eq!(r.x_cache(), "HIT", "{p}: {}", r.summary());
        }
    };
    warm(&["/item", "/other", "/third", "/unrelated"]).await;

    let r = Req::post("/item", "new").send(&levee).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.x_cache(), "PASS");
    for p in ["/item", "/other", "/third"] {
        let r = levee.get(p).await;
        assert_eq!(r.x_cache(), "MISS", "{p} not invalidated: {}", r.summary());
    }
    assert_eq!(levee.get("/unrelated").await.x_cache(), "HIT");

    for method in ["PUT", "DELETE", "PATCH"] {
        warm(&["/item"]).await;
        let r = Req::new(method, "/item").send(&levee).await;
        assert!(r.status.is_success(), "{method}: {}", r.summary());
        let r = levee.get("/item").await;
        assert_eq!(r.x_cache(), "MISS", "{method} did not invalidate");
    }

    // A failed unsafe request changes nothing: the stored response stays.
    warm(&["/item"]).await;
    let r = Req::post("/item", "x")
        .header("x-fail", "1")
        .send(&levee)
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(levee.get("/item").await.x_cache(), "HIT");
}

#[tokio::test]
async fn request_no_cache_causes_revalidation() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match") == Some("\"e1\"") {
            Reply::status(304).header("etag", "\"e1\"")
        } else {
            Reply::text(format!("body #{}", r.n))
                .header("etag", "\"e1\"")
                .header("cache-control", "max-age=60")
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/r").await;
    levee.wait_stored("/r").await;
    for (n, cc) in [(2, "no-cache"), (3, "no-cache, max-age=60")] {
        let r = levee.get_with("/r", &[("cache-control", cc)]).await;
        assert_eq!(r.x_cache(), "REVALIDATED", "{cc}: {}", r.summary());
        assert_eq!(r.text(), "body #1");
        assert_eq!(origin.requests(), n, "{cc}");
        assert_eq!(origin.last().header("if-none-match"), Some("\"e1\""));
    }
}

#[tokio::test]
async fn only_if_cached_gives_504_on_a_miss_and_the_stored_response_on_a_hit() {
    let origin = Origin::fixed(|| Reply::text("stored").header("cache-control", "max-age=60"));
    let levee = levee!().backend(&origin.url()).start();
    let r = levee
        .get_with("/o", &[("cache-control", "only-if-cached")])
        .await;
    assert_eq!(r.status, 504, "{}", r.summary());
    assert_eq!(origin.requests(), 0, "only-if-cached reached the backend");
    levee.get("/o").await;
    levee.wait_stored("/o").await;
    let r = levee
        .get_with("/o", &[("cache-control", "only-if-cached")])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(r.text(), "stored");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn only_if_cached_never_contacts_the_backend_for_a_stale_response() {
    let origin = Origin::start(|r| {
        let cc = if r.path == "/no-cache" {
            "no-cache"
        } else {
            "max-age=1"
        };
        Reply::text("stored")
            .header("cache-control", cc)
            .header("etag", "\"t\"")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/stale").await;
    levee.get("/no-cache").await;
    past_one_second(&levee, &origin).await;
    // RFC 9111 §5.2.1.7: a stored response consistent with the request, or 504.
    for p in ["/stale", "/no-cache"] {
        let r = levee
            .get_with(p, &[("cache-control", "only-if-cached")])
            .await;
        assert_eq!(r.status, 504, "{p}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 2, "only-if-cached reached the backend");
}

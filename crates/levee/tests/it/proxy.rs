//! Proxying basics: keep-alive, proxy headers, hop-by-hop fields, request bodies, HTTP/2.

use levee_test::{levee, Conn, H2Conn, Origin, Reply, Req};

fn echo_origin() -> Origin {
    Origin::start(|r| {
        Reply::text(format!("{} {} {}", r.method, r.uri, r.body.len()))
            .header("content-type", "text/plain")
    })
}

#[tokio::test]
async fn client_keep_alive_connection_serves_several_requests() {
    let origin = echo_origin();
    let levee = levee!().backend(&origin.url()).start();
    let mut conn = Conn::open(levee.addr()).await;
    for i in 0..5 {
        let r = conn.send(Req::get(&format!("/ka/{i}"))).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), format!("GET /ka/{i} 0"));
        assert!(!conn.is_closed(), "levee closed a keep-alive connection");
    }
    // The backend side is pooled too: five requests in turn need far fewer connections.
    assert_eq!(origin.requests(), 5);
    assert!(
        origin.connections() <= 2,
        "backend connections are not reused: {} connections for 5 requests",
        origin.connections()
    );
}

#[tokio::test]
async fn proxy_headers_reach_the_backend_and_via_reaches_the_client() {
    let origin = echo_origin();
    let levee = levee!().backend(&origin.url()).start();
    // A pass (POST) and a fill (cacheable GET miss) both add the headers.
    for req in [
        Req::post("/form", "x"),
        Req::get("/page"),
        Req::get("/cookie").header("cookie", "PHPSESSID=abc"),
    ] {
        let r = req
            .header("host", "www.example.test")
            .header("x-forwarded-for", "10.1.2.3")
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}", r.summary());
        let via = r.header_all("via").join(", ");
        assert!(via.contains("levee"), "client response Via: {via:?}");
        let seen = origin.last();
        let via = seen.header_joined("via").unwrap_or_default();
        assert!(via.contains("levee"), "backend Via: {via:?}");
        assert_eq!(
            seen.header("x-forwarded-for"),
            Some("10.1.2.3, 127.0.0.1"),
            "{} {}",
            seen.method,
            seen.uri
        );
        assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
        assert_eq!(seen.header("x-forwarded-host"), Some("www.example.test"));
        assert_eq!(seen.header("host"), Some("www.example.test"));
    }
}

#[tokio::test]
async fn hop_by_hop_request_headers_are_not_forwarded() {
    let origin = echo_origin();
    let levee = levee!().backend(&origin.url()).start();
    for req in [
        Req::get("/hop"),
        Req::post("/hop", "body"),
        Req::get("/hop-session").header("cookie", "PHPSESSID=s1"),
    ] {
        let r = req
            .header("connection", "keep-alive, x-secret-hop")
            .header("x-secret-hop", "1")
            .header("keep-alive", "timeout=5")
            .header("te", "trailers")
            .header("trailer", "x-foo")
            .header("proxy-authorization", "Basic c2VjcmV0")
            .header("proxy-connection", "keep-alive")
            .header("x-end-to-end", "kept")
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}", r.summary());
        let seen = origin.last();
        for h in [
            "x-secret-hop",
            "keep-alive",
            "te",
            "trailer",
            "proxy-authorization",
            "proxy-connection",
        ] {
            assert!(
                !seen.headers.contains_key(h),
                "{} {}: backend received hop-by-hop {h}: {:?}",
                seen.method,
                seen.uri,
                seen.headers.get(h)
            );
        }
        let conn = seen.header_joined("connection").unwrap_or_default();
        assert!(
            !conn.contains("x-secret-hop"),
            "backend Connection: {conn:?}"
        );
        assert_eq!(seen.header("x-end-to-end"), Some("kept"));
    }
}

#[tokio::test]
async fn hop_by_hop_response_headers_are_not_forwarded() {
    let origin = Origin::start(|r| {
        let cc = if r.path.starts_with("/cached") {
            "max-age=60"
        } else {
            "private"
        };
        Reply::text("hello")
            .header("cache-control", cc)
            .header("connection", "x-private-hop")
            .header("x-private-hop", "secret")
            .header("keep-alive", "timeout=99")
            .header("proxy-authenticate", "Basic realm=x")
            .header("x-end-to-end", "kept")
    });
    let levee = levee!().backend(&origin.url()).start();
    // Pass, uncacheable miss, cacheable miss, then the stored copy.
    for req in [
        Req::post("/p", ""),
        Req::get("/uncached"),
        Req::get("/cached"),
        Req::get("/cached"),
    ] {
        let r = req.send(&levee).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), "hello");
        for h in ["x-private-hop", "keep-alive", "proxy-authenticate"] {
            assert!(!r.has(h), "client got hop-by-hop {h} ({})", r.summary());
        }
        let conn = r.header_all("connection").join(",");
        assert!(!conn.contains("x-private-hop"), "Connection: {conn:?}");
        assert_eq!(r.header("x-end-to-end"), Some("kept"));
    }
}

#[tokio::test]
async fn request_bodies_reach_the_backend() {
    let origin = Origin::start(|r| {
        Reply::text(format!("got {} bytes", r.body.len())).header("cache-control", "no-store")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = Req::post("/form", "a=1&b=2")
        .header("content-type", "application/x-www-form-urlencoded")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "PASS");
    let seen = origin.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(&seen.body[..], b"a=1&b=2");
    assert_eq!(
        seen.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );

    // A large body streams through intact, for every unsafe method.
    let big: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    for method in ["POST", "PUT", "PATCH"] {
        let r = Req::new(method, "/upload")
            .body(big.clone())
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{method}: {}", r.summary());
        let seen = origin.last();
        assert_eq!(seen.method, method);
        assert!(seen.body == big, "{method} body arrived altered");
    }
}

#[tokio::test]
async fn http2_prior_knowledge_requests_are_served() {
    let origin = Origin::start(|r| {
        Reply::text(format!("h2 ok {}", r.uri)).header("cache-control", "max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();
    let mut conn = H2Conn::open(levee.addr()).await;
    let r = conn.send(Req::get("/h2")).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.version, http::Version::HTTP_2);
    assert_eq!(r.text(), "h2 ok /h2");
    assert_eq!(r.x_cache(), "MISS");
    // The backend is spoken to in HTTP/1.1, with the authority as Host.
    let seen = origin.last();
    assert_eq!(seen.version, http::Version::HTTP_11);
    assert_eq!(seen.header("host"), Some(levee.addr().to_string().as_str()));
    // Several streams on the one connection; the second request for /h2 is a hit.
    let r = conn.send(Req::get("/h2")).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    let r = conn.send(Req::post("/h2-post", "data")).await;
    assert_eq!(r.status, 200);
    assert_eq!(&origin.last().body[..], b"data");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn max_forwards_zero_is_answered_by_levee_and_others_are_decremented() {
    // RFC 9110 §7.6.2: OPTIONS and TRACE with Max-Forwards: 0 stop at levee.
    let origin = Origin::fixed(|| Reply::text("origin"));
    let levee = levee!().backend(&origin.url()).start();

    let r = Req::new("OPTIONS", "/x")
        .header("max-forwards", "0")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert!(r.header("allow").is_some_and(|a| a.contains("GET")));
    let r = Req::new("TRACE", "/t?q=1")
        .header("max-forwards", "0")
        .header("x-probe", "here")
        .header("cookie", "PHPSESSID=secret")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.header("content-type"), Some("message/http"));
    let echo = r.text();
    assert!(echo.starts_with("TRACE /t?q=1 HTTP/1.1\r\n"), "{echo}");
    assert!(echo.contains("x-probe: here"), "{echo}");
    assert!(!echo.contains("secret"), "credentials echoed: {echo}");
    assert_eq!(origin.requests(), 0);

    // Any other value is decremented on the way; GET is not concerned.
    let r = Req::new("OPTIONS", "/x")
        .header("max-forwards", "3")
        .send(&levee)
        .await;
    assert_eq!(r.text(), "origin");
    assert_eq!(origin.last().header("max-forwards"), Some("2"));
    Req::get("/g")
        .header("max-forwards", "0")
        .send(&levee)
        .await;
    assert_eq!(origin.last().header("max-forwards"), Some("0"));
}

//! Hostile clients (issue 10), against an origin that reflects into its cacheable
//! response everything a framework might build a page from: the Host, every request
//! header, the body, and a `Location` made from the Host. For each attack: what the
//! backend saw, and that a clean request afterwards gets the clean page.

use std::time::Duration;

use levee_test::{levee, Levee, Origin, RawConn, Recorded, Reply, Req};

/// The reflecting origin: `public, max-age=60`, the body lists the request as the
/// backend saw it.
fn reflecting_origin() -> Origin {
    Origin::start(|r: &Recorded| {
        let mut page = format!(
            "<html>method={} uri={} host={}\n",
            r.method,
            r.uri,
            r.header("host").unwrap_or("-")
        );
        for (name, value) in &r.headers {
            page.push_str(&format!(
                "{name}: {}\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        page.push_str(&format!(
            "body={}\n</html>",
            String::from_utf8_lossy(&r.body)
        ));
        Reply::text(page)
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
            .header(
                "location",
                &format!("http://{}/login", r.header("host").unwrap_or("-")),
            )
    })
}

fn start(origin: &Origin) -> Levee {
    levee!().backend(&origin.url()).debug_headers().start()
}

/// A clean request for `path` gets a page without `needle` (from the cache or not).
async fn clean_page_has_no(levee: &Levee, path: &str, needle: &str) {
    let r = levee.get(path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.summary());
    assert!(
        !r.text().contains(needle),
        "{path}: a clean visitor got the attacker's {needle:?}: {}",
        r.text()
    );
    if let Some(l) = r.header("location") {
        assert!(!l.contains(needle), "{path}: poisoned Location {l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_is_filled_without_it_and_does_not_stall_the_page() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    // Before the fix, the fill carried `Content-Length: 9` and no body: the backend
    // waited for it until the first-byte timeout and every visitor waited behind it.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        Req::get("/fat")
            .header("content-type", "application/x-www-form-urlencoded")
            .body("x=evil123")
            .send(&levee),
    )
    .await
    .expect("a GET with a body stalled the fill");
    assert_eq!(r.status, 200, "{}", r.summary());
    let seen = origin.last();
    assert!(seen.body.is_empty(), "the backend got the body of a fill");
    assert!(seen.header("content-length").is_none_or(|v| v == "0"));
    assert!(seen.header("content-type").is_none());
    levee.wait_stored("/fat").await;
    clean_page_has_no(&levee, "/fat", "evil123").await;
    assert_eq!(levee.get("/fat").await.x_cache(), "HIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn override_headers_never_reach_a_fill() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    let overrides = [
        "x-host",
        "x-forwarded-host",
        "x-forwarded-server",
        "x-original-host",
        "x-http-host-override",
        "forwarded",
        "x-forwarded-proto",
        "x-forwarded-scheme",
        "x-forwarded-ssl",
        "x-forwarded-port",
        "x-url-scheme",
        "front-end-https",
        "x-original-url",
        "x-rewrite-url",
        "x-forwarded-prefix",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    ];
    for (i, name) in overrides.iter().enumerate() {
        let path = format!("/page{i}");
        let r = Req::get(&path)
            .header(name, "evil.example")
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.summary());
        let seen = origin.last();
        for (h, v) in &seen.headers {
            assert!(
                !v.as_bytes()
                    .windows(b"evil.example".len())
                    .any(|w| w == b"evil.example"),
                "{name}: the backend saw {h}: {v:?} on a fill"
            );
        }
        levee.wait_stored(&path).await;
        clean_page_has_no(&levee, &path, "evil.example").await;
    }
    // levee's own X-Forwarded-* describe the real request.
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_spellings_are_one_key_and_the_backend_sees_the_normal_one() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    let r = Req::get("/h")
        .header("host", "WWW.Example.COM.:80")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(origin.last().header("host"), Some("www.example.com"));
    levee
        .wait_stored_req(Req::get("/h").header("host", "www.example.com"))
        .await;
    for spelling in ["www.example.com", "www.example.com.", "WWW.EXAMPLE.COM:80"] {
        let r = Req::get("/h").header("host", spelling).send(&levee).await;
        assert_eq!(r.x_cache(), "HIT", "{spelling}: {}", r.summary());
        assert!(r.text().contains("host=www.example.com\n"), "{}", r.text());
    }
    assert_eq!(origin.requests(), 1);
}

/// Sends raw bytes; returns what came back before levee closed the connection.
async fn raw(levee: &Levee, bytes: &[u8]) -> String {
    let mut c = RawConn::connect(levee.addr()).await;
    let _ = c.write(bytes).await;
    let out = c
        .read_until_closed(Duration::from_secs(5))
        .await
        .expect("levee kept a connection open after a malformed request");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_hosts_are_refused_and_never_forwarded() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    for (what, request) in [
        (
            "two Host fields",
            "GET /x HTTP/1.1\r\nHost: a.example\r\nHost: evil.example\r\n\r\n",
        ),
        (
            "Host against an absolute-form target",
            "GET http://a.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        ),
        ("no Host", "GET /x HTTP/1.1\r\n\r\n"),
        (
            "userinfo",
            "GET /x HTTP/1.1\r\nHost: a@evil.example\r\n\r\n",
        ),
        (
            "a path in Host",
            "GET /x HTTP/1.1\r\nHost: a.example/evil\r\n\r\n",
        ),
        (
            "a bad port",
            "GET /x HTTP/1.1\r\nHost: a.example:99999\r\n\r\n",
        ),
    ] {
        let out = raw(&levee, request.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 400"), "{what}: {out}");
    }
    assert_eq!(origin.requests(), 0, "{:?}", origin.recorded());
    // The same target, spelled the same way twice, is fine.
    let out = raw(
        &levee,
        b"GET http://a.example/x HTTP/1.1\r\nHost: A.example:80\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert_eq!(origin.last().header("host"), Some("a.example"));
}

/// The classic desyncs: whatever levee answers, the backend never sees the request
/// hidden in the body, and the attacker's connection is not reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggled_requests_never_reach_the_backend() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: a.example\r\n\r\n";
    let attacks = [
        // CL.TE: a front end reading Content-Length forwards all; one reading chunked
        // sees an empty body and then a second request.
        format!(
            "POST /cl-te HTTP/1.1\r\nHost: a.example\r\nContent-Length: {}\r\n\
             Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}",
            5 + smuggled.len()
        ),
        // TE.CL: the other way round.
        format!(
            "POST /te-cl HTTP/1.1\r\nHost: a.example\r\nContent-Length: 4\r\n\
             Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n",
            smuggled.len()
        ),
        // TE.TE: an obfuscated coding one side ignores.
        format!(
            "POST /te-te HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\
             Transfer-Encoding: x\r\nContent-Length: 4\r\n\r\n0\r\n\r\n{smuggled}"
        ),
        format!(
            "POST /te-space HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding : chunked\r\n\
             Content-Length: 5\r\n\r\n0\r\n\r\n{smuggled}"
        ),
        format!(
            "POST /te-x HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: xchunked\r\n\
             Content-Length: 5\r\n\r\n0\r\n\r\n{smuggled}"
        ),
        // HTTP/1.0 with Transfer-Encoding.
        format!(
            "POST /te-10 HTTP/1.0\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n\
             0\r\n\r\n{smuggled}"
        ),
        // A GET whose Content-Length hides a request (a well-framed one: the
        // connection is closed by the client's own `Connection: close`).
        format!(
            "GET /fat-get HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        ),
    ];
    for attack in &attacks {
        let out = raw(&levee, attack.as_bytes()).await;
        let status = out.lines().next().unwrap_or("");
        // One response at most: the request hidden in the body got none. (The origin
        // reflects a POST body, so "/smuggled" may well appear as data.)
        let responses = out.lines().filter(|l| l.starts_with("HTTP/1.")).count();
        assert!(
            responses <= 1,
            "{attack:?}: a response to the smuggled request: {out}"
        );
        assert!(
            status.starts_with("HTTP/1.1 400") || status.starts_with("HTTP/1.1 200"),
            "{attack:?}: {status}"
        );
    }
    levee.wait_backend_idle().await;
    let paths: Vec<String> = origin.recorded().iter().map(|r| r.path.clone()).collect();
    assert!(
        !paths.iter().any(|p| p == "/smuggled"),
        "the backend saw a smuggled request: {paths:?}"
    );
    for r in origin.recorded() {
        assert!(
            !String::from_utf8_lossy(&r.body).contains("/smuggled") || r.method == "POST",
            "{r:?}"
        );
    }
    clean_page_has_no(&levee, "/fat-get", "smuggled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_chunked_bodies_are_the_clients_fault() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    for body in [
        "zz\r\nhello\r\n0\r\n\r\n",
        "-5\r\nhello\r\n0\r\n\r\n",
        "3\r\nhello\r\n0\r\n\r\n",
        "ffffffffffffffffffff\r\nx\r\n0\r\n\r\n",
    ] {
        let out = raw(
            &levee,
            format!(
                "POST /form HTTP/1.1\r\nHost: a.example\r\nCookie: PHPSESSID=abc\r\n\
                 Transfer-Encoding: chunked\r\n\r\n{body}"
            )
            .as_bytes(),
        )
        .await;
        let status = out.lines().next().unwrap_or("");
        assert!(
            status.starts_with("HTTP/1.1 400") || status.is_empty(),
            "{body:?}: levee blamed the backend: {status}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_deception_never_stores_a_personal_page() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    // The victim, logged in, is lured to a "static-looking" URL of a personal page.
    let r = Req::get("/account/x.css")
        .header("cookie", "PHPSESSID=victim-secret-42")
        .send(&levee)
        .await;
    assert_eq!(r.x_cache(), "PASS");
    assert!(r.text().contains("victim-secret-42"));
    // The attacker asks for the same URL.
    clean_page_has_no(&levee, "/account/x.css", "victim-secret-42").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_cloaking_gets_keys_of_its_own() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    // Frameworks split queries on `;` differently; the key is the query as sent, so each
    // spelling is stored apart and none can stand in for another.
    for path in ["/q?a=1;a=evil", "/q?a=1&a=evil", "/q?a=1%26a=evil"] {
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
    }
    clean_page_has_no(&levee, "/q?a=1", "evil").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_requests_get_errors_and_levee_carries_on() {
    let origin = reflecting_origin();
    let levee = start(&origin);
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: a.example\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let many: String = (0..500).map(|i| format!("X-H{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nHost: a.example\r\n{many}\r\n");
    let inputs: Vec<Vec<u8>> = vec![
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-tls-hello\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"G\0T / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n".to_vec(),
        huge.into_bytes(),
        many.into_bytes(),
        (0..=255u8).cycle().take(100_000).collect(),
    ];
    for input in &inputs {
        let out = raw(&levee, input).await;
        let status = out.lines().next().unwrap_or("");
        assert!(
            status.is_empty()
                || status.starts_with("HTTP/1.1 4")
                || status.starts_with("HTTP/1.0 4"),
            "{:?}: {status}",
            String::from_utf8_lossy(&input[..input.len().min(40)])
        );
    }
    assert_eq!(origin.requests(), 0);
    let r = levee.get("/still-up").await;
    assert_eq!(r.status, 200);
}

/// A backend that answers `/split` with a response framed both ways (Content-Length and
/// chunked) followed by a second response: a proxy that trusted the wrong length or
/// reused the connection would hand the hidden response to the next request.
async fn splitting_backend() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        let reply: &[u8] = if head.starts_with("GET /split") {
                            b"HTTP/1.1 200 OK\r\nContent-Length: 120\r\nTransfer-Encoding: chunked\r\n\
                              Cache-Control: max-age=60\r\n\r\n5\r\nfirst\r\n0\r\n\r\n\
                              HTTP/1.1 200 OK\r\nContent-Length: 6\r\nCache-Control: max-age=60\r\n\r\npoison"
                        } else {
                            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nCache-Control: max-age=60\r\n\r\nclean"
                        };
                        if s.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_framed_two_ways_never_leaks_into_the_next_one() {
    let (addr, task) = splitting_backend().await;
    let levee = levee!()
        .backend(&format!("http://{addr}"))
        .args(&["--workers", "1"])
        .start();
    let first = levee.get("/split").await;
    assert!(!first.text().contains("poison"), "{}", first.summary());
    for i in 0..5 {
        let r = levee.get(&format!("/next{i}")).await;
        assert_eq!(
            r.text(),
            "clean",
            "/next{i} got the hidden response: {}",
            r.summary()
        );
    }
    task.abort();
}

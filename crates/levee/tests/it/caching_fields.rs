//! The fields that steer a shared cache beyond RFC 9111's `Cache-Control`, each against
//! an origin that sends exactly them: RFC 9213's targeted fields (`CDN-Cache-Control`,
//! levee's `Levee-Cache-Control`), HTTP dates in RFC 9110 §5.6.7's three formats and in
//! any case, interim (1xx) responses (RFC 9110 §15.2), and `Vary` on request fields
//! written differently but meaning the same (RFC 9111 §4.1).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use levee_test::{http_date, levee, H2Conn, Levee, Origin, RawConn, Reply, Req};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Moves levee's clock, and the origin's, past a 1-second freshness lifetime once every
/// fill so far is stored.
async fn past_one_second(levee: &Levee, origin: &Origin) {
    levee.wait_fills_done().await;
    let by = Duration::from_millis(1500);
    levee.advance_clock(by).await;
    origin.advance_clock(by);
}

/// RFC 9213 §3.1's first example and its reverse, for levee's decision, and what the
/// client is sent.
#[tokio::test]
async fn cdn_cache_control_decides_for_levee_and_cache_control_for_browsers() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("{} #{}", r.path, r.n));
        match r.path.as_str() {
            // "cache for 10 minutes here, never in the browser"
            "/cdn-only" => reply
                .header("cache-control", "no-store")
                .header("cdn-cache-control", "max-age=600"),
            "/cdn-no-store" => reply
                .header("cache-control", "max-age=600")
                .header("cdn-cache-control", "no-store"),
            // Levee-Cache-Control is more specific still: it wins over both.
            "/levee-first" => reply
                .header("cache-control", "no-store")
                .header("cdn-cache-control", "no-store")
                .header("levee-cache-control", "max-age=600"),
            // RFC 9213 §2.1: an invalid targeted field (a Dictionary has no trailing comma,
            // and its keys are lowercase) is ignored as a whole: Cache-Control decides.
            "/cdn-invalid" => reply
                .header("cache-control", "no-store")
                .header("cdn-cache-control", "Max-Age=600, public,"),
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();

    for path in ["/cdn-only", "/levee-first"] {
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
        levee.wait_stored(path).await;
        let hit = levee.get(path).await;
        assert_eq!(hit.x_cache(), "HIT", "{path}: {}", hit.summary());
        assert_eq!(origin.requests_for(path), 1, "{path}");
        for resp in [&r, &hit] {
            // Browsers get the origin's Cache-Control, and none of levee's directives.
            assert_eq!(resp.header("cache-control"), Some("no-store"), "{path}");
            assert!(!resp.has("cdn-cache-control"), "{}", resp.summary());
            assert!(!resp.has("levee-cache-control"), "{}", resp.summary());
        }
    }
    for path in ["/cdn-no-store", "/cdn-invalid"] {
        for _ in 0..2 {
            let r = levee.get(path).await;
            assert_ne!(r.x_cache(), "HIT", "{path}: {}", r.summary());
            assert_eq!(r.reason(), "no-store", "{path}: {}", r.summary());
            assert!(!r.has("cdn-cache-control"), "{}", r.summary());
        }
        assert_eq!(origin.requests_for(path), 2, "{path}");
    }
    // The browser still may cache what levee may not.
    let r = levee.get("/cdn-no-store").await;
    assert_eq!(r.header("cache-control"), Some("max-age=600"));
}

#[tokio::test]
async fn cdn_cache_control_is_kept_for_a_cdn_in_front_when_configured() {
    let origin = Origin::fixed(|| {
        Reply::text("page")
            .header("etag", "\"v1\"")
            .header("cache-control", "no-store")
            .header("cdn-cache-control", "max-age=600")
            .header("levee-cache-control", "max-age=60")
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\nstrip_cdn_cache_control = false")
        .start();
    let r = levee.get("/").await;
    levee.wait_stored("/").await;
    let hit = levee.get("/").await;
    assert_eq!(hit.x_cache(), "HIT", "{}", hit.summary());
    let etag = hit.header("etag").unwrap().to_string();
    let not_modified = Req::get("/")
        .header("if-none-match", &etag)
        .send(&levee)
        .await;
    assert_eq!(not_modified.status, 304, "{}", not_modified.summary());
    for resp in [&r, &hit, &not_modified] {
        assert_eq!(resp.header("cdn-cache-control"), Some("max-age=600"));
        assert_eq!(resp.header("cache-control"), Some("no-store"));
        // levee's own field is levee's alone.
        assert!(!resp.has("levee-cache-control"), "{}", resp.summary());
    }
}

/// A 304 need not repeat CDN-Cache-Control (RFC 9110 §15.4.5 lists Cache-Control and
/// Expires, not it): the stored field still decides after the merge (RFC 9111 §3.2).
#[tokio::test]
async fn a_304_without_the_targeted_field_keeps_the_stored_one() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match") == Some("\"v1\"") {
            return Reply::status(304)
                .header("etag", "\"v1\"")
                .header("cache-control", "no-store");
        }
        Reply::text(format!("v1 #{}", r.n))
            .header("etag", "\"v1\"")
            .header("cache-control", "no-store")
            .header("cdn-cache-control", "max-age=1")
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    levee.get("/").await;
    levee.wait_stored("/").await;
    past_one_second(&levee, &origin).await;
    let r = levee.get("/").await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(origin.requests(), 2);
    levee.wait_fills_done().await;
    let r = levee.get("/").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert!(r.text().starts_with("v1 #1"), "{}", r.summary());
    assert!(!r.has("cdn-cache-control"), "{}", r.summary());
}

/// `t` in RFC 9110 §5.6.7's obsolete formats.
fn rfc850(t: SystemTime) -> String {
    let imf = http_date(t); // "Sun, 06 Nov 1994 08:49:37 GMT"
    let day = match &imf[..3] {
        "Mon" => "Monday",
        "Tue" => "Tuesday",
        "Wed" => "Wednesday",
        "Thu" => "Thursday",
        "Fri" => "Friday",
        "Sat" => "Saturday",
        _ => "Sunday",
    };
    format!(
        "{day}, {}-{}-{} {} GMT",
        &imf[5..7],
        &imf[8..11],
        &imf[14..16],
        &imf[17..25]
    )
}

fn asctime(t: SystemTime) -> String {
    let imf = http_date(t);
    let mday: u32 = imf[5..7].parse().unwrap();
    format!(
        "{} {} {mday:>2} {} {}",
        &imf[..3],
        &imf[8..11],
        &imf[17..25],
        &imf[12..16]
    )
}

#[tokio::test]
async fn expires_in_every_format_and_case_gives_freshness() {
    let origin = Origin::start(|r| {
        // The origin's Date is now; each Expires is an hour later, written another way.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let expires = match r.path.as_str() {
            "/asctime" => asctime(later),
            "/asctime-lowercase" => asctime(later).to_lowercase(),
            "/rfc850" => rfc850(later),
            "/imf-lowercase" => http_date(later).to_lowercase(),
            "/imf-uppercase" => http_date(later).to_uppercase(),
            // RFC 9110 §5.6.7: a two-digit year is in the past only when it would be more
            // than 50 years ahead: `75` is 2075 from 2026, not 1975.
            "/rfc850-2075" => "Friday, 01-Jan-75 00:00:00 GMT".into(),
            "/invalid" => "tomorrow".into(),
            _ => return Reply::status(404),
        };
        Reply::text(format!("{} #{}", r.path, r.n)).header("expires", &expires)
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    for path in [
        "/asctime",
        "/asctime-lowercase",
        "/rfc850",
        "/imf-lowercase",
        "/imf-uppercase",
        "/rfc850-2075",
    ] {
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
        levee.wait_stored(path).await;
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "HIT", "{path}: {}", r.summary());
        assert_eq!(origin.requests_for(path), 1, "{path}");
    }
    // RFC 9111 §5.3: an invalid Expires still means already expired.
    for _ in 0..2 {
        let r = levee.get("/invalid").await;
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    }
    assert_eq!(origin.requests_for("/invalid"), 2);
}

/// Last-Modified and If-Modified-Since are dates too: a lowercase Last-Modified gives
/// heuristic freshness (RFC 9111 §4.2.2), a lowercase If-Modified-Since a 304.
#[tokio::test]
async fn last_modified_and_if_modified_since_in_any_format() {
    let origin = Origin::start(|r| {
        let day_ago = SystemTime::now() - Duration::from_secs(86_400);
        Reply::text(format!("{} #{}", r.path, r.n))
            .header("last-modified", &http_date(day_ago).to_lowercase())
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    levee.get("/lm").await;
    levee.wait_stored("/lm").await;
    let r = levee.get("/lm").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests(), 1);

    let now = http_date(SystemTime::now()).to_lowercase();
    let r = Req::get("/lm")
        .header("if-modified-since", &now)
        .send(&levee)
        .await;
    assert_eq!(r.status, 304, "{}", r.summary());
}

/// RFC 9110 §15.2: a client must accept 1xx responses before the final one; a cache
/// never stores or reuses one. levee cannot pass a 103 on (hyper's server has no way to
/// send an interim response: README, "Limits"), so the client gets the final 200 alone,
/// stored as the final response it is.
#[tokio::test]
async fn early_hints_never_reach_the_cache_and_the_final_response_does() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    let server = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        count.fetch_add(1, Ordering::SeqCst);
                        let reply: &[u8] = b"HTTP/1.1 103 Early Hints\r\n\
                            Link: </style.css>; rel=preload; as=style\r\n\r\n\
                            HTTP/1.1 103 Early Hints\r\n\
                            Link: </app.js>; rel=preload; as=script\r\n\r\n\
                            HTTP/1.1 200 OK\r\n\
                            Content-Type: text/plain\r\n\
                            Cache-Control: max-age=60\r\n\
                            Content-Length: 5\r\n\r\n\
                            hello";
                        if socket.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    let levee = levee!()
        .backend(&format!("http://{addr}"))
        .debug_headers()
        .start();

    let r = levee.get("/hints").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "hello");
    assert!(
        !r.has("link"),
        "an interim field is no field of the final response"
    );
    levee.wait_stored("/hints").await;
    let r = levee.get("/hints").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "hello");

    // On the wire: one 200 and nothing before it, over HTTP/1.1 and HTTP/2.
    let mut raw = RawConn::connect(levee.addr()).await;
    let head = format!(
        "GET /hints HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        levee.addr()
    );
    raw.write(head.as_bytes()).await.unwrap();
    let bytes = raw.read_until_closed(Duration::from_secs(5)).await.unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "{text}");
    assert!(text.ends_with("hello"), "{text}");
    let mut h2 = H2Conn::open(levee.addr()).await;
    let r = h2.send(Req::get("/hints")).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "hello");

    assert_eq!(requests.load(Ordering::SeqCst), 1, "one fill, then hits");
    server.abort();
}

/// RFC 9111 §4.1: a cache may normalise a field by its semantics. Accept-Language is a
/// weighted set of language ranges (RFC 9110 §12.4.2, §12.5.4): order, case and spacing
/// do not change it; weights do.
#[tokio::test]
async fn vary_accept_language_matches_the_same_preferences_written_differently() {
    let origin = Origin::start(|r| {
        let lang = r.header("accept-language").unwrap_or("none").to_string();
        Reply::text(format!("lang={lang} #{}", r.n))
            .header("cache-control", "max-age=60")
            .header("vary", "Accept-Language")
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let get = |lang: &'static str| {
        Req::get("/page")
            .header("accept-language", lang)
            .send(&levee)
    };

    assert_eq!(get("en, fr").await.x_cache(), "MISS");
    levee
        .wait_stored_req(Req::get("/page").header("accept-language", "en, fr"))
        .await;
    for same in ["FR,EN", "fr, en", "en,fr", " en ,  FR", "en;q=1, fr;q=1.0"] {
        let r = get(same).await;
        assert_eq!(r.x_cache(), "HIT", "{same}: {}", r.summary());
        assert!(r.text().starts_with("lang=en, fr #1"), "{}", r.summary());
    }
    assert_eq!(origin.requests_for("/page"), 1);

    // Different weights may choose a different language: separate variants.
    let a = get("en;q=0.5, fr").await;
    assert_eq!(a.x_cache(), "MISS", "{}", a.summary());
    let b = get("en, fr;q=0.5").await;
    assert_eq!(b.x_cache(), "MISS", "{}", b.summary());
    for (lang, stored) in [("en;q=0.5, fr", a.text()), ("en, fr;q=0.5", b.text())] {
        levee
            .wait_stored_req(Req::get("/page").header("accept-language", lang))
            .await;
        let again = get(lang).await;
        assert_eq!(again.text(), stored, "{}", again.summary());
    }
    for (same, stored) in [("FR, en;q=0.50", a.text()), ("fr;q=0.5, EN", b.text())] {
        let r = get(same).await;
        assert_eq!(r.x_cache(), "HIT", "{same}: {}", r.summary());
        assert_eq!(r.text(), stored, "{same}");
    }
    // `.5` is no qvalue (RFC 9110 §12.4.2): a variant of its own, never another's.
    let r = get("en, fr;q=.5").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(origin.requests_for("/page"), 4);
}

/// levee negotiates codings itself and never sends Accept-Encoding on a fill, so the
/// field cannot tell variants apart: any spelling hits.
#[tokio::test]
async fn vary_accept_encoding_in_another_order_or_case_hits() {
    let origin = Origin::fixed(|| {
        Reply::text("body")
            .header("cache-control", "max-age=60")
            .header("vary", "Accept-Encoding")
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let get = |ae: &'static str| Req::get("/").header("accept-encoding", ae).send(&levee);
    assert_eq!(get("gzip, br").await.x_cache(), "MISS");
    levee
        .wait_stored_req(Req::get("/").header("accept-encoding", "gzip, br"))
        .await;
    for same in ["BR,GZIP", "br, gzip", "gzip;q=1.0, br"] {
        let r = get(same).await;
        assert_eq!(r.x_cache(), "HIT", "{same}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 1);
}

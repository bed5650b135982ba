//! Range requests answered from stored full responses (RFC 9110 §14, §13.1.5, §15.3.7,
//! §15.5.17; RFC 9111 §3.3–3.4, §4.3.2), real levee against an origin that sends exactly
//! the headers each case needs (crates/levee-proxy/src/request/partial.rs, the decision
//! in crates/levee-cache/src/range.rs):
//!
//! - single, suffix and open-ended ranges from a hit, with the representation's headers;
//!   several ranges as multipart/byteranges; 416 `bytes */LEN`; invalid Range ignored;
//!   HEAD ignores Range; If-None-Match before Range;
//! - If-Range with a strong ETag or a strong date, and every way it does not hold;
//! - with compression, the range of the body in the coding the client gets;
//! - a range request that misses: one backend request without Range, shared by
//!   concurrent requests, the range from what was stored, then hits; too large to
//!   store: the whole 200; after a 304 refresh: the range of the refreshed entry;
//! - a 206 from the backend (a pass, or an origin answering 206 to a fill) is never
//!   stored.

use std::time::Duration;

use bytes::Bytes;
use levee_compress::{decompress, Coding};
use levee_test::{http_date, levee, Levee, Origin, Reply, Req, Resp};

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LEN: usize = 1000;

/// `LEN` bytes where each position is recognisable: `body()[i] = i * 7 % 251`.
fn body() -> Bytes {
    (0..LEN)
        .map(|i| (i * 7 % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// A stored, uncompressible 200 (video): strong ETag, strong Last-Modified (the origin's
/// Date is now, years later).
fn video() -> Reply {
    Reply::text(body())
        .header("content-type", "video/mp4")
        .header("etag", "\"v1\"")
        .header("last-modified", LM)
        .header("cache-control", "max-age=60")
}

async fn send(levee: &Levee, path: &str, headers: &[(&str, &str)]) -> Resp {
    let mut r = Req::get(path);
    for (k, v) in headers {
        r = r.header(k, v);
    }
    r.send(levee).await
}

async fn ranged(levee: &Levee, path: &str, range: &str) -> Resp {
    send(levee, path, &[("range", range)]).await
}

/// A 206 with one part: `Content-Range`, an exact `Content-Length`, the bytes.
#[track_caller]
fn assert_part(r: &Resp, start: usize, end: usize, total: usize, full: &[u8]) {
    assert_eq!(r.status, 206, "{}", r.summary());
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {start}-{end}/{total}").as_str()),
        "{}",
        r.summary()
    );
    assert_eq!(
        r.header("content-length"),
        Some((end - start + 1).to_string().as_str())
    );
    assert!(r.body == full[start..=end], "wrong bytes for {start}-{end}");
}

/// A whole 200, as the origin sent it.
#[track_caller]
fn assert_whole(r: &Resp, what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.summary());
    assert!(!r.has("content-range"), "{what}: {}", r.summary());
    assert!(r.body == body(), "{what}: not the whole body");
}

/// The parts of a multipart/byteranges body: (their header lines, their bytes).
fn multipart(r: &Resp) -> Vec<(Vec<String>, Bytes)> {
    let ct = r.header("content-type").unwrap_or_default();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart/byteranges: {ct:?}"));
    let delimiter = format!("--{boundary}");
    let b = &r.body[..];
    let find = |from: usize, needle: &[u8]| {
        b[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|p| p + from)
    };
    let mut parts = Vec::new();
    let mut at = find(0, delimiter.as_bytes()).expect("no first boundary");
    loop {
        at += delimiter.len();
        if b[at..].starts_with(b"--") {
            break;
        }
        assert!(
            b[at..].starts_with(b"\r\n"),
            "boundary not followed by CRLF"
        );
        let head_end = find(at, b"\r\n\r\n").expect("part head does not end");
        let head = String::from_utf8(b[at + 2..head_end].to_vec()).unwrap();
        let next = find(head_end, format!("\r\n{delimiter}").as_bytes()).expect("no next boundary");
        parts.push((
            head.split("\r\n").map(str::to_string).collect(),
            r.body.slice(head_end + 4..next),
        ));
        at = next + 2;
    }
    parts
}

#[tokio::test]
async fn single_suffix_and_open_ended_ranges_from_a_hit() {
    let origin = Origin::fixed(video);
    let levee = levee!().backend(&origin.url()).start();
    assert_whole(&levee.get("/v").await, "the first GET");
    levee.wait_stored("/v").await;
    let full = body();
    for (range, start, end) in [
        ("bytes=0-99", 0, 99),
        ("bytes=100-199", 100, 199),
        ("bytes=-100", 900, 999),
        ("bytes=900-", 900, 999),
        ("bytes=990-5000", 990, 999),
        ("bytes=-5000", 0, 999),
        ("bytes=0-0", 0, 0),
    ] {
        let r = ranged(&levee, "/v", range).await;
        assert_part(&r, start, end, LEN, &full);
        assert_eq!(r.x_cache(), "HIT", "{range}");
        // §15.3.7: the fields a 200 would have carried.
        assert_eq!(r.header("etag"), Some("\"v1\""), "{range}");
        assert_eq!(r.header("last-modified"), Some(LM), "{range}");
        assert_eq!(r.header("cache-control"), Some("max-age=60"), "{range}");
        assert_eq!(r.header("content-type"), Some("video/mp4"), "{range}");
        assert!(r.has("date") && r.has("age"), "{range}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn several_ranges_are_multipart_byteranges() {
    let origin = Origin::fixed(video);
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/v").await;
    levee.wait_stored("/v").await;
    let full = body();

    let r = ranged(&levee, "/v", "bytes=0-9, 500-509, -5").await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert_eq!(r.x_cache(), "HIT");
    assert!(
        !r.has("content-range"),
        "a multipart 206 has none of its own"
    );
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    let parts = multipart(&r);
    let want = [(0, 9), (500, 509), (995, 999)];
    assert_eq!(parts.len(), want.len(), "{parts:?}");
    for ((head, bytes), (start, end)) in parts.iter().zip(want) {
        assert!(
            head.contains(&"Content-Type: video/mp4".to_string()),
            "{head:?}"
        );
        assert!(
            head.contains(&format!("Content-Range: bytes {start}-{end}/{LEN}")),
            "{head:?}"
        );
        assert!(bytes[..] == full[start..=end], "part {start}-{end}");
    }

    // Overlapping ranges are coalesced: no byte is sent twice, however often asked.
    let r = ranged(&levee, "/v", "bytes=0-499,100-599,0-,-1").await;
    assert_part(&r, 0, 999, LEN, &full);
    let r = ranged(&levee, "/v", "bytes=600-699,0-99,50-149").await;
    let parts = multipart(&r);
    assert_eq!(parts.len(), 2);
    assert!(parts[0]
        .0
        .contains(&"Content-Range: bytes 0-149/1000".to_string()));
    assert!(parts[1]
        .0
        .contains(&"Content-Range: bytes 600-699/1000".to_string()));
    // More range-specs than levee takes: the whole 200.
    let many = vec!["1-1"; 101].join(",");
    assert_whole(
        &ranged(&levee, "/v", &format!("bytes={many}")).await,
        "101 ranges",
    );
}

#[tokio::test]
async fn unsatisfiable_invalid_and_head() {
    let origin = Origin::fixed(video);
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/v").await;
    levee.wait_stored("/v").await;

    // §15.5.17: none satisfiable.
    for range in [
        "bytes=1000-",
        "bytes=5000-6000",
        "bytes=-0",
        "bytes=1000-,2000-",
    ] {
        let r = ranged(&levee, "/v", range).await;
        assert_eq!(r.status, 416, "{range}: {}", r.summary());
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{range}");
        assert!(r.body.is_empty());
        assert!(
            !r.has("cache-control"),
            "a 416 is not for caches: {}",
            r.summary()
        );
    }
    // §14.1.1, §14.2: an invalid Range is ignored.
    for range in [
        "bytes=5-1",
        "bytes=abc",
        "items=0-1",
        "bytes=",
        "0-1",
        "bytes=1-2,x",
    ] {
        let r = ranged(&levee, "/v", range).await;
        assert_whole(&r, range);
        assert_eq!(r.x_cache(), "HIT");
    }
    // §14.2: Range is for GET; HEAD gets the 200's head.
    let r = Req::head("/v")
        .header("range", "bytes=0-9")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert!(!r.has("content-range"));
    assert_eq!(r.header("content-length"), Some("1000"));
    // §13.2.2: If-None-Match is evaluated first.
    let r = send(
        &levee,
        "/v",
        &[("range", "bytes=0-9"), ("if-none-match", "\"v1\"")],
    )
    .await;
    assert_eq!(r.status, 304, "{}", r.summary());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn if_range_with_an_entity_tag_or_a_date() {
    let origin = Origin::start(|r| match r.path.as_str() {
        // Last-Modified equal to Date: a weak date (§8.8.2.2).
        "/same-second" => {
            let now = http_date(std::time::SystemTime::now());
            Reply::text(body())
                .header("content-type", "video/mp4")
                .header("etag", "\"v1\"")
                .header("last-modified", &now)
                .header("date", &now)
                .header("cache-control", "max-age=60")
        }
        _ => video(),
    });
    let levee = levee!().backend(&origin.url()).start();
    for path in ["/v", "/same-second"] {
        levee.get(path).await;
        levee.wait_stored(path).await;
    }
    let full = body();
    let other_date = http_date(std::time::SystemTime::now());
    for (if_range, partial) in [
        ("\"v1\"", true),
        ("\"v2\"", false),
        // Strong comparison: a weak tag never matches.
        ("W/\"v1\"", false),
        (LM, true),
        ("Sun, 06 Nov 1994 08:49:38 GMT", false),
        (other_date.as_str(), false),
        ("not a validator", false),
    ] {
        let r = send(
            &levee,
            "/v",
            &[("range", "bytes=10-19"), ("if-range", if_range)],
        )
        .await;
        if partial {
            assert_part(&r, 10, 19, LEN, &full);
        } else {
            assert_whole(&r, if_range);
        }
        assert_eq!(r.x_cache(), "HIT");
    }
    // A changed representation is sent whole rather than 416.
    let r = send(
        &levee,
        "/v",
        &[("range", "bytes=5000-"), ("if-range", "\"v0\"")],
    )
    .await;
    assert_whole(&r, "If-Range before satisfiability");
    // A Last-Modified less than a second before Date is not a strong validator.
    let stored = levee.get("/same-second").await;
    let lm = stored.header("last-modified").unwrap().to_string();
    assert_eq!(
        stored.header("date"),
        Some(lm.as_str()),
        "{}",
        stored.summary()
    );
    let r = send(
        &levee,
        "/same-second",
        &[("range", "bytes=10-19"), ("if-range", &lm)],
    )
    .await;
    assert_whole(&r, "weak date");
    let r = send(
        &levee,
        "/same-second",
        &[("range", "bytes=10-19"), ("if-range", "\"v1\"")],
    )
    .await;
    assert_part(&r, 10, 19, LEN, &full);
    assert_eq!(origin.requests(), 2);
}

/// Ranges apply to the representation the client receives: with gzip, a slice of the
/// gzip bytes that a whole gzip response has, `Content-Encoding: gzip`.
#[tokio::test]
async fn ranges_of_the_coded_body_the_client_gets() {
    let mut page = String::new();
    while page.len() < 20_000 {
        page.push_str(&format!(
            "<p>paragraph {} of a page levee stores gzipped</p>\n",
            page.len()
        ));
    }
    let page = Bytes::from(page);
    let served = page.clone();
    let origin = Origin::fixed(move || {
        Reply::text(served.clone())
            .header("content-type", "text/html")
            .header("etag", "\"p1\"")
            .header("last-modified", LM)
            .header("cache-control", "max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/page").await;
    levee.wait_stored("/page").await;

    let gz = send(&levee, "/page", &[("accept-encoding", "gzip")]).await;
    assert_eq!(
        gz.header("content-encoding"),
        Some("gzip"),
        "{}",
        gz.summary()
    );
    assert_eq!(decompress(Coding::Gzip, &gz.body, 1 << 20).unwrap(), page);
    let glen = gz.body.len();

    let r = send(
        &levee,
        "/page",
        &[("accept-encoding", "gzip"), ("range", "bytes=0-99")],
    )
    .await;
    assert_part(&r, 0, 99, glen, &gz.body);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("etag"), Some("W/\"p1\""));
    let r = send(
        &levee,
        "/page",
        &[("accept-encoding", "gzip"), ("range", "bytes=-50")],
    )
    .await;
    assert_part(&r, glen - 50, glen - 1, glen, &gz.body);
    // levee made these gzip bytes: its date is no strong validator of them, and its weak
    // ETag never matches strongly. The whole response.
    for v in [LM, "\"p1\"", "W/\"p1\""] {
        let r = send(
            &levee,
            "/page",
            &[
                ("accept-encoding", "gzip"),
                ("range", "bytes=0-99"),
                ("if-range", v),
            ],
        )
        .await;
        assert_eq!(r.status, 200, "If-Range {v}: {}", r.summary());
        assert_eq!(r.body, gz.body);
    }
    // Several ranges over a content coding: the whole response.
    let r = send(
        &levee,
        "/page",
        &[("accept-encoding", "gzip"), ("range", "bytes=0-9,500-509")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.summary());

    // Without Accept-Encoding: the origin's own bytes, its strong ETag, its dates.
    let r = send(
        &levee,
        "/page",
        &[("range", "bytes=100-199"), ("if-range", LM)],
    )
    .await;
    assert_part(&r, 100, 199, page.len(), &page);
    assert!(!r.has("content-encoding"));
    assert_eq!(r.header("etag"), Some("\"p1\""));
    let r = send(&levee, "/page", &[("range", "bytes=0-9,-10")]).await;
    assert_eq!(multipart(&r).len(), 2, "{}", r.summary());
    assert_eq!(origin.requests(), 1);
}

/// A range request that misses: the fill asks for the whole response (no Range), once
/// for every concurrent request, and each gets its range of what was stored; the next
/// range request is a hit.
#[tokio::test]
async fn a_range_miss_fetches_the_whole_response_once() {
    let origin = Origin::start(|r| match r.path.as_str() {
        "/chunked" => Reply::ok()
            .header("content-type", "video/mp4")
            .header("cache-control", "max-age=60")
            .chunks(
                body()
                    .chunks(100)
                    .map(|c| (Duration::from_millis(5), Bytes::copy_from_slice(c)))
                    .collect(),
            ),
        _ => video().delay(Duration::from_millis(300)),
    });
    let levee = levee!().backend(&origin.url()).start();
    let full = body();

    let ranges = [(0, 99), (100, 199), (500, 999), (990, 999)];
    let requests = ranges.map(|(s, e)| {
        let range = format!("bytes={s}-{e}");
        let req = Req::get("/v").header("range", &range);
        let addr = levee.addr();
        tokio::spawn(async move { req.send_to(addr).await })
    });
    for (task, (start, end)) in requests.into_iter().zip(ranges) {
        let r = task.await.unwrap();
        assert_part(&r, start, end, LEN, &full);
        assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
        assert_eq!(r.header("etag"), Some("\"v1\""));
    }
    assert_eq!(origin.requests(), 1, "one fill for every range request");
    assert_eq!(
        origin.last().header("range"),
        None,
        "the fill asks for everything"
    );
    assert_eq!(origin.last().header("if-range"), None);
    levee.wait_stored("/v").await;
    let r = ranged(&levee, "/v", "bytes=-1").await;
    assert_part(&r, 999, 999, LEN, &full);
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(origin.requests(), 1);

    // Without Content-Length: the same, once the body is complete.
    let r = ranged(&levee, "/chunked", "bytes=200-299").await;
    assert_part(&r, 200, 299, LEN, &full);
    assert_eq!(r.x_cache(), "MISS");
    levee.wait_stored("/chunked").await;
    let r = ranged(&levee, "/chunked", "bytes=0-9,-10").await;
    assert_eq!(multipart(&r).len(), 2, "{}", r.summary());
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(origin.requests_for("/chunked"), 1);
}

/// Large stored bodies go out with sendfile over HTTP/1.1 (zerocopy.rs); a 206 between
/// two such hits on one kept-alive connection is sent from memory and leaves the
/// connection's sendfile queue in order. The same over HTTP/2.
#[tokio::test]
async fn ranges_of_large_bodies_on_kept_alive_connections() {
    let big: Bytes = (0..300_000)
        .map(|i| (i % 253) as u8)
        .collect::<Vec<u8>>()
        .into();
    let served = big.clone();
    let origin = Origin::fixed(move || {
        Reply::text(served.clone())
            .header("content-type", "video/mp4")
            .header("cache-control", "max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/big").await;
    levee.wait_stored("/big").await;
    let total = big.len();
    let mut h1 = levee_test::Conn::open(levee.addr()).await;
    let mut h2 = levee_test::H2Conn::open(levee.addr()).await;
    for round in 0..2 {
        for range in [
            None,
            Some("bytes=100000-199999"),
            None,
            Some("bytes=0-9,-10"),
            None,
        ] {
            let mut req = Req::get("/big");
            if let Some(range) = range {
                req = req.header("range", range);
            }
            let r = match round {
                0 => h1.send(req).await,
                _ => h2.send(req).await,
            };
            assert_eq!(r.x_cache(), "HIT", "{range:?}: {}", r.summary());
            match range {
                None => assert!(
                    r.status == 200 && r.body == big,
                    "{range:?}: {}",
                    r.summary()
                ),
                Some("bytes=100000-199999") => assert_part(&r, 100_000, 199_999, total, &big),
                Some(_) => {
                    let parts = multipart(&r);
                    assert_eq!(parts.len(), 2);
                    assert!(parts[0].1[..] == big[..10] && parts[1].1[..] == big[total - 10..]);
                }
            }
        }
    }
    assert_eq!(origin.requests(), 1);
}

/// Too large to store: the whole response streams through (200 is always allowed); the
/// origin never sees Range from a fill.
#[tokio::test]
async fn a_range_miss_too_large_to_store_gets_the_whole_response() {
    let origin = Origin::start(|r| {
        let reply = Reply::ok()
            .header("content-type", "video/mp4")
            .header("cache-control", "max-age=60");
        match r.path.as_str() {
            "/chunked" => reply.chunks(
                body()
                    .chunks(100)
                    .map(|c| (Duration::ZERO, Bytes::copy_from_slice(c)))
                    .collect(),
            ),
            _ => reply.body(body()),
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\nmax_object_size = \"512B\"")
        .start();
    for path in ["/sized", "/chunked"] {
        let r = ranged(&levee, path, "bytes=0-9").await;
        assert_whole(&r, path);
        assert_eq!(r.x_cache(), "MISS");
        assert_eq!(origin.last().header("range"), None);
    }
}

/// Stale entries keep answering ranges: revalidated with a 304 (the range of the
/// refreshed entry), replaced by a new 200 (the range of the new one).
#[tokio::test]
async fn ranges_after_validation() {
    let origin = Origin::start(|r| {
        let validating = r.header("if-none-match") == Some("\"v1\"");
        let reply = |etag: &str| {
            Reply::ok()
                .header("content-type", "video/mp4")
                .header("etag", etag)
                .header("cache-control", "max-age=60")
        };
        match (r.path.as_str(), validating) {
            ("/same", true) => Reply::status(304)
                .header("etag", "\"v1\"")
                .header("cache-control", "max-age=60"),
            ("/changed", true) => {
                let mut b = body().to_vec();
                b.reverse();
                reply("\"v2\"").body(b)
            }
            _ => reply("\"v1\"").body(body()),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    for path in ["/same", "/changed"] {
        levee.get(path).await;
        levee.wait_stored(path).await;
    }
    levee.wait_fills_done().await;
    // A minute on both clocks: real seconds a loaded machine spends change nothing.
    let by = Duration::from_secs(61);
    levee.advance_clock(by).await;
    origin.advance_clock(by);

    let full = body();
    let r = ranged(&levee, "/same", "bytes=10-19").await;
    assert_part(&r, 10, 19, LEN, &full);
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(origin.last().header("if-none-match"), Some("\"v1\""));
    assert_eq!(origin.last().header("range"), None);

    let mut reversed = full.to_vec();
    reversed.reverse();
    let r = ranged(&levee, "/changed", "bytes=10-19").await;
    assert_part(&r, 10, 19, LEN, &reversed);
    assert_eq!(r.header("etag"), Some("\"v2\""));
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(origin.last().header("range"), None);
    assert_eq!(origin.requests(), 4);
}

/// RFC 9111 §3.3–3.4: levee stores no 206 and combines none; a 206 reaches a client only
/// as passed.
#[tokio::test]
async fn a_206_from_the_backend_is_never_stored() {
    let origin = Origin::start(|r| match (r.path.as_str(), r.header("range")) {
        (_, Some(_)) | ("/always-206", _) => Reply::status(206)
            .header("content-type", "video/mp4")
            .header("content-range", "bytes 0-1/1000")
            .header("cache-control", "max-age=60")
            .body(body().slice(..2)),
        _ => video(),
    });
    let levee = levee!().backend(&origin.url()).start();
    // Passed (Authorization): the origin's 206, as it is.
    let r = send(
        &levee,
        "/passed",
        &[("authorization", "Bearer x"), ("range", "bytes=0-1")],
    )
    .await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert_eq!(r.x_cache(), "PASS");
    assert_eq!(origin.last().header("range"), Some("bytes=0-1"));
    let r = send(&levee, "/passed", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(r.status, 504, "the passed 206 was stored: {}", r.summary());
    // An origin that answers a fill (no Range) with a 206: streamed, not stored, and no
    // range is made from it.
    for _ in 0..2 {
        let r = ranged(&levee, "/always-206", "bytes=0-0").await;
        assert_eq!(r.status, 206, "{}", r.summary());
        assert_eq!(r.header("content-range"), Some("bytes 0-1/1000"));
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
    }
    assert_eq!(origin.requests_for("/always-206"), 2);
}

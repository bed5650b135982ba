//! Large cache hits go out with sendfile from a memfd (levee-proxy/src/zerocopy.rs).
//! What matters above all is that every byte is the body's: these tests compare whole
//! bodies across keep-alive, pipelining, HEAD in between, HTTP/2, codings, concurrency
//! and clients that leave mid-body.

use std::time::Duration;

use bytes::Bytes;
use levee_test::{levee, Conn, H2Conn, Origin, RawConn, Reply, Req};

/// Bytes that differ at every offset within a body and between bodies.
fn body(len: usize, seed: u32) -> Bytes {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

fn origin() -> Origin {
    Origin::start(|r| {
        // /bin/<kib>/<seed>: random bytes (stored as sent); /html/<kib>: text (stored
        // gzip-compressed, sent uncompressed to clients without Accept-Encoding).
        let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
        let kib: usize = parts.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
        let seed: u32 = parts.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
        if parts.first() == Some(&"html") {
            let text: String = (0..kib * 1024)
                .map(|i| (b'a' + ((i * 7 + i / 13) % 26) as u8) as char)
                .collect();
            Reply::text(text)
                .header("content-type", "text/html")
                .header("cache-control", "max-age=600")
        } else {
            Reply::ok()
                .header("content-type", "application/octet-stream")
                .header("cache-control", "max-age=600")
                .body(body(kib * 1024, seed))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_hits_are_byte_exact_over_keep_alive_and_http2() {
    let origin = origin();
    let levee = levee!().backend(&origin.url()).start();
    let want = body(300 * 1024, 7);
    levee.get("/bin/300/7").await;
    levee.wait_stored("/bin/300/7").await;

    let mut conn = Conn::open(levee.addr()).await;
    for round in 0..5 {
        let r = conn.send(Req::get("/bin/300/7")).await;
        assert_eq!(r.x_cache(), "HIT", "round {round}");
        assert!(r.body == want, "round {round}: body differs");
        let h = conn.send(Req::head("/bin/300/7")).await;
        assert_eq!(h.header("content-length"), Some("307200"));
        assert!(h.body.is_empty());
    }
    let mut h2 = H2Conn::open(levee.addr()).await;
    let r = h2.send(Req::get("/bin/300/7")).await;
    assert!(r.body == want, "HTTP/2 body differs");

    // Text stored compressed: its uncompressed form is what goes out with sendfile.
    let text = levee.get("/html/200").await.body;
    assert_eq!(text.len(), 200 * 1024);
    levee.wait_stored("/html/200").await;
    for _ in 0..3 {
        let r = conn.send(Req::get("/html/200")).await;
        assert_eq!(r.x_cache(), "HIT");
        assert!(r.body == text, "uncompressed text differs");
    }
    assert_eq!(origin.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_get_each_body_in_order() {
    let origin = origin();
    let levee = levee!().backend(&origin.url()).start();
    let paths = ["/bin/100/1", "/bin/70/2", "/bin/1/3", "/bin/250/4"];
    for p in paths {
        levee.get(p).await;
        levee.wait_stored(p).await;
    }
    // One write with every request, a HEAD in the middle, the last one closing.
    // The Host of the stored responses: another host is another cache key.
    let host = levee.addr();
    let mut raw = Vec::new();
    for p in paths {
        raw.extend_from_slice(format!("GET {p} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    }
    raw.extend_from_slice(format!("HEAD /bin/100/1 HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    for p in paths.iter().rev() {
        raw.extend_from_slice(format!("GET {p} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    }
    raw.extend_from_slice(
        format!("GET /bin/1/3 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let mut c = RawConn::connect(levee.addr()).await;
    c.write(&raw).await.unwrap();
    let out = c.read_until_closed(Duration::from_secs(10)).await.unwrap();

    let mut expected: Vec<Option<Bytes>> = Vec::new();
    let seeded = |p: &str| {
        let parts: Vec<&str> = p.trim_start_matches('/').split('/').collect();
        body(
            parts[1].parse::<usize>().unwrap() * 1024,
            parts[2].parse().unwrap(),
        )
    };
    for p in paths {
        expected.push(Some(seeded(p)));
    }
    expected.push(None);
    for p in paths.iter().rev() {
        expected.push(Some(seeded(p)));
    }
    expected.push(Some(seeded("/bin/1/3")));

    let mut at = 0;
    for (i, want) in expected.iter().enumerate() {
        let end = out[at..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("response {i}: no head"))
            + at;
        let head = String::from_utf8_lossy(&out[at..end]).to_string();
        assert!(head.starts_with("HTTP/1.1 200"), "response {i}: {head}");
        assert!(
            head.contains("x-cache: HIT"),
            "response {i} not a hit: {head}"
        );
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or_else(|| panic!("response {i}: no length: {head}"));
        at = end + 4;
        if let Some(want) = want {
            assert_eq!(len, want.len(), "response {i}");
            assert!(out[at..at + len] == want[..], "response {i}: body differs");
            at += len;
        }
    }
    assert_eq!(at, out.len(), "trailing bytes after the last response");
    assert_eq!(origin.requests(), paths.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_and_a_client_leaving_mid_body_do_not_mix_bodies() {
    let origin = origin();
    let levee = levee!().backend(&origin.url()).start();
    for seed in 0..4 {
        let p = format!("/bin/512/{seed}");
        levee.get(&p).await;
        levee.wait_stored(&p).await;
    }
    // A client reads the head and a little of a body, then leaves.
    let mut c = RawConn::connect(levee.addr()).await;
    let req = format!("GET /bin/512/0 HTTP/1.1\r\nHost: {}\r\n\r\n", levee.addr());
    c.write(req.as_bytes()).await.unwrap();
    let some = c.read_until(b"\r\n\r\n", Duration::from_secs(5)).await;
    assert!(some.starts_with(b"HTTP/1.1 200"));
    assert!(String::from_utf8_lossy(&some).contains("x-cache: HIT"));
    drop(c);

    let mut tasks = Vec::new();
    for client in 0..16u32 {
        let addr = levee.addr();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            for n in 0..6u32 {
                let seed = (client + n) % 4;
                let r = conn.send(Req::get(&format!("/bin/512/{seed}"))).await;
                assert_eq!(r.status, 200);
                assert_eq!(r.x_cache(), "HIT");
                assert!(
                    r.body == body(512 * 1024, seed),
                    "client {client} request {n}: body of seed {seed} differs"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let paths: Vec<String> = origin.recorded().iter().map(|r| r.path.clone()).collect();
    assert_eq!(origin.requests(), 4, "{paths:?}");
}

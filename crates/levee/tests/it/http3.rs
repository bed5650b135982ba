//! HTTP/3 (issue 45): a real HTTP/3 client (quinn and hyper's h3) to levee's QUIC
//! endpoint on the UDP port of its HTTPS listener: misses and hits of the same cache as
//! HTTP/1.1 and HTTP/2, POST bodies to the backend, ranges, purge, the certificate of
//! each site by SNI, `Alt-Svc` on the HTTP/1.1 and HTTP/2 answers, and the access log's
//! protocol.

use bytes::Bytes;
use http::Method;
use levee_test::http3::H3;
use levee_test::{levee, tools, LeveeBuilder, Origin, Reply};

use super::tls::{curl, Ca};

/// A CA of the test's own and a certificate for a.test from it, written in `dir`, and
/// `levee` given an HTTPS listener with it (and so HTTP/3 on the same port over UDP).
fn https(levee: LeveeBuilder, dir: &std::path::Path) -> (LeveeBuilder, Ca) {
    let ca = Ca::new("levee test CA");
    let (cert, key) = ca.issue(dir, "a", &["a.test"]);
    let levee = levee
        .args(&["--listen-tls", "127.0.0.1:0"])
        .args(&["--tls-cert", cert.to_str().unwrap()])
        .args(&["--tls-key", key.to_str().unwrap()]);
    (levee, ca)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_serves_the_same_cache_bodies_ranges_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("levee test CA");
    let (a_cert, a_key) = ca.issue(dir.path(), "a", &["a.test"]);
    let (b_cert, b_key) = ca.issue(dir.path(), "b", &["b.test"]);
    let log = dir.path().join("access.log");
    let origin = Origin::start(|r| match r.path.as_str() {
        "/echo" => Reply::text(format!(
            "{} {} bytes: {}",
            r.method,
            r.body.len(),
            String::from_utf8_lossy(&r.body[..r.body.len().min(16)])
        ))
        .header("cache-control", "no-store"),
        "/big" => Reply::text("0123456789".repeat(1000)).header("cache-control", "max-age=60"),
        _ => Reply::text(format!(
            "page {} for {} over {}",
            r.path,
            r.header("host")
                .unwrap_or("-")
                .split(':')
                .next()
                .unwrap_or("-"),
            r.header("x-forwarded-proto").unwrap_or("-")
        ))
        .header("cache-control", "max-age=60"),
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0"])
        .args(&["--tls-cert", a_cert.to_str().unwrap()])
        .args(&["--tls-key", a_key.to_str().unwrap()])
        .args(&["--tls-cert", b_cert.to_str().unwrap()])
        .args(&["--tls-key", b_key.to_str().unwrap()])
        .config(&format!(
            "[log]\naccess = \"combined\"\naccess_file = {:?}\n",
            log.display().to_string()
        ))
        .start();
    let addr = levee.tls_addr().await;

    // A miss, then a hit of the same entry, on one connection.
    let mut a = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    let first = a.get("/page").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "page /page for a.test over https");
    assert_eq!(first.header("x-cache"), Some("MISS"), "{first:?}");
    let again = a.get("/page").await;
    assert_eq!(again.header("x-cache"), Some("HIT"), "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(
        again.header("alt-svc"),
        None,
        "no Alt-Svc over HTTP/3 itself"
    );
    // HEAD: the GET's fields, no content (RFC 9110 §9.3.2).
    let head = a.request(Method::HEAD, "/page", &[], None).await.unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "{head:?}");
    assert_eq!(
        head.header("content-length"),
        Some(first.body.len().to_string().as_str())
    );

    // The same cache as HTTP/2 and HTTP/1.1 over TLS, which announce HTTP/3.
    if tools::require(&tools::CURL).is_some() {
        let ca_pem = ca.write(dir.path(), "ca");
        for version in ["--http2", "--http1.1"] {
            let got = curl("a.test", addr, &ca_pem, "/page", &[version]);
            assert_eq!(got.header("x-cache").as_deref(), Some("HIT"), "{version}");
            assert_eq!(
                got.header("alt-svc"),
                Some(format!("h3=\":{}\"; ma=86400", addr.port())),
                "{version}: {}",
                got_headers(&got)
            );
        }
    }

    // A POST's body reaches the backend whole (100 KiB, several QUIC packets).
    let body = Bytes::from(vec![b'x'; 100 * 1024]);
    let posted = a
        .request(
            Method::POST,
            "/echo",
            &[("content-type", "text/plain")],
            Some(body),
        )
        .await
        .unwrap();
    assert_eq!(posted.status, 200, "{posted:?}");
    assert_eq!(posted.text(), "POST 102400 bytes: xxxxxxxxxxxxxxxx");

    // A range of a stored body.
    let _ = a.get("/big").await;
    let part = a
        .request(Method::GET, "/big", &[("range", "bytes=10-19")], None)
        .await
        .unwrap();
    assert_eq!(part.status, 206, "{part:?}");
    assert_eq!(part.text(), "0123456789");
    assert_eq!(part.header("content-range"), Some("bytes 10-19/10000"));

    // Another site's name gets its own certificate (the client checks it).
    let mut b = H3::connect(addr, "b.test", &ca.der).await.unwrap();
    assert_eq!(
        b.get("/page").await.text(),
        "page /page for b.test over https"
    );

    // A PURGE over HTTP/3 (from an allowed address) drops the entry.
    let purged = a
        .request(Method::from_bytes(b"PURGE").unwrap(), "/page", &[], None)
        .await
        .unwrap();
    assert!(purged.status.is_success(), "{purged:?}");
    let after = a.get("/page").await;
    assert_eq!(after.header("x-cache"), Some("MISS"), "{after:?}");
    a.close().await;
    b.close().await;

    // Metrics per protocol.
    let metrics = levee.admin(levee_test::Req::get("/metrics")).await.text();
    for (protocol, at_least) in [("h3", 9), ("h2", 1), ("h1", 1)] {
        let n: f64 = metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "levee_responses_by_protocol_total{{protocol=\"{protocol}\"}} "
                ))
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let wanted = if tools::require(&tools::CURL).is_some() || protocol == "h3" {
            at_least
        } else {
            0
        };
        assert!(n >= f64::from(wanted), "{protocol}: {n}\n{metrics}");
    }

    // The access log names the protocol.
    let logged = levee_test::eventually(std::time::Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("POST /echo HTTP/3.0"))
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged, "{text}");
}

fn got_headers(got: &super::tls::Got) -> String {
    got.header("alt-svc").unwrap_or_default()
}

/// A real browser over HTTP/3: headless Chromium, told to use QUIC for levee's origin and
/// to trust the test certificate by its key's hash, loads a page and its assets; the
/// page writes the protocol of each from the browser's own record (Resource Timing's
/// `nextHopProtocol`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_loads_a_page_and_its_assets_over_http3() {
    let Some(bin) = tools::require(&tools::CHROMIUM) else {
        return;
    };
    const PAGE: &str = r#"<!doctype html><html><head><link rel="stylesheet" href="/style.css"></head>
<body><p id="nav">nav: waiting</p><p id="res">res: waiting</p><script src="/app.js"></script></body></html>"#;
    const SCRIPT: &str = r#"
window.addEventListener("load", () => {
  const nav = performance.getEntriesByType("navigation")[0];
  document.getElementById("nav").textContent = "nav: " + nav.nextHopProtocol;
  document.getElementById("res").textContent = "res: " + performance.getEntriesByType("resource")
    .map(e => e.name.split("/").pop() + "=" + e.nextHopProtocol).sort().join(" ");
});"#;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("levee test CA");
    let (cert, key, spki) = ca.issue_with_spki(dir.path(), "a", &["a.test"]);
    let origin = Origin::start(|r| match r.path.as_str() {
        "/app.js" => Reply::text(SCRIPT)
            .header("content-type", "text/javascript")
            .header("cache-control", "max-age=60"),
        "/style.css" => Reply::text("p { color: #123 }")
            .header("content-type", "text/css")
            .header("cache-control", "max-age=60"),
        _ => Reply::text(PAGE)
            .header("content-type", "text/html; charset=utf-8")
            .header("cache-control", "max-age=60"),
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0"])
        .args(&["--tls-cert", cert.to_str().unwrap()])
        .args(&["--tls-key", key.to_str().unwrap()])
        .start();
    let port = levee.tls_addr().await.port();
    let url = format!("https://a.test:{port}/");
    let args = [
        format!("--origin-to-force-quic-on=a.test:{port}"),
        "--host-resolver-rules=MAP a.test 127.0.0.1".to_string(),
        format!("--ignore-certificate-errors-spki-list={spki}"),
        "--dump-dom".to_string(),
        "--virtual-time-budget=5000".to_string(),
    ];
    let (dom, stderr) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tools::run_chromium(&bin, &dir.path().join("profile"), &args, &url)
    })
    .await
    .unwrap();
    assert!(
        dom.contains("nav: h3"),
        "the page did not come over HTTP/3:\n{dom}\n{stderr}"
    );
    assert!(
        dom.contains("res: app.js=h3 style.css=h3"),
        "its assets did not come over HTTP/3:\n{dom}\n{stderr}"
    );
}

/// 0-RTT is refused by default: early data can be replayed by anyone who saw it, and a
/// request may change state. A client resuming its session is not let send any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_rtt_is_refused_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|_| Reply::text("a page").header("cache-control", "max-age=60"));
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee.start();
    let addr = levee.tls_addr().await;
    let (offered, accepted) = levee_test::http3::zero_rtt(addr, "a.test", &ca.der).await;
    assert!(
        !offered,
        "the session ticket lets the client send early data"
    );
    assert!(!accepted, "early data was accepted");
}

/// The backend limit holds over HTTP/3 as over HTTP/1.1 and HTTP/2: one slot, busy, and
/// the queue's one place taken: the next request is refused at once with 503 and a
/// `Retry-After`, and never reaches the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_limit_refuses_over_http3_as_over_tcp() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|r| {
        Reply::text(format!("{} {}", r.method, r.uri))
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(2000))
    });
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee
        .config(
            "[limits]\nbackend_max_concurrency = 1\nbackend_queue = 1\nbackend_queue_timeout = \"10s\"",
        )
        .start();
    let addr = levee.tls_addr().await;
    let der = ca.der.clone();
    let slow = |path: &'static str| {
        let der = der.clone();
        tokio::spawn(async move {
            let mut c = H3::connect(addr, "a.test", &der).await.unwrap();
            c.get(path).await
        })
    };
    let a = slow("/slow/a");
    origin.wait_for_requests(1, Duration::from_secs(5)).await;
    let b = slow("/slow/b");
    levee
        .wait_metric("levee_backend_waiting", |n| n == 1.0)
        .await;
    let mut c = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    let started = Instant::now();
    let refused = c.get("/slow/c").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert_eq!(refused.header("x-cache"), Some("ERROR"));
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert_eq!(a.await.unwrap().status, 200);
    assert_eq!(b.await.unwrap().status, 200);
    assert_eq!(origin.requests_for("/slow/c"), 0);
    assert_eq!(origin.max_in_flight(), 1);
}

/// A certificate renewed in place and a reload (SIGHUP) while HTTP/3 clients keep
/// asking: no request fails, the open QUIC connections carry on, and a new connection
/// gets the new certificate (the client trusts only the new issuer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_swaps_the_certificate_under_load_and_keeps_quic_connections() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let old_ca = Ca::new("levee old CA");
    let new_ca = Ca::new("levee new CA");
    let (cert, key) = old_ca.issue(dir.path(), "a", &["a.test"]);
    let origin = Origin::start(|r| {
        Reply::text(format!("page {}", r.path)).header("cache-control", "max-age=60")
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0"])
        .args(&["--tls-cert", cert.to_str().unwrap()])
        .args(&["--tls-key", key.to_str().unwrap()])
        .start();
    let addr = levee.tls_addr().await;
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut clients = Vec::new();
    for i in 0..4 {
        let (stop, done, failed, der) = (
            stop.clone(),
            done.clone(),
            failed.clone(),
            old_ca.der.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut c = H3::connect(addr, "a.test", &der).await.unwrap();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                match c
                    .request(
                        Method::GET,
                        &format!("/p{}", (i * 1000 + n) % 50),
                        &[],
                        None,
                    )
                    .await
                {
                    Ok(r) if r.status == 200 => done.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
            c
        }));
    }
    assert!(
        levee_test::eventually(std::time::Duration::from_secs(10), || done
            .load(Ordering::Relaxed)
            >= 100)
        .await,
        "no load"
    );
    // Renewed in place by another issuer, then SIGHUP.
    let (renewed_cert, renewed_key) = new_ca.issue(dir.path(), "renewed", &["a.test"]);
    std::fs::copy(&renewed_cert, &cert).unwrap();
    std::fs::copy(&renewed_key, &key).unwrap();
    levee.signal("HUP");
    levee.wait_log("configuration reloaded").await;
    let before = done.load(Ordering::Relaxed);
    assert!(
        levee_test::eventually(std::time::Duration::from_secs(10), || done
            .load(Ordering::Relaxed)
            >= before + 100)
        .await,
        "the open connections stopped after the reload"
    );
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap().close().await;
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed across the swap"
    );
    // A new connection: the new certificate (the old issuer is not trusted for it).
    let mut fresh = H3::connect(addr, "a.test", &new_ca.der).await.unwrap();
    assert_eq!(fresh.get("/p1").await.status, 200);
    assert!(
        H3::connect(addr, "a.test", &old_ca.der).await.is_err(),
        "the old certificate is still served"
    );
}

/// Hostile datagrams on the QUIC port (random bytes, a truncated Initial, a long header
/// with absurd lengths, an empty one) and a request whose header section is over
/// `max_header_bytes`: levee answers neither with a crash nor a stall, and keeps serving
/// HTTP/3 and HTTPS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_quic_packets_and_oversized_headers_leave_levee_serving() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|_| Reply::text("fine").header("cache-control", "max-age=60"));
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee
        .config("[limits]\nmax_header_bytes = \"8KiB\"")
        .start();
    let addr = levee.tls_addr().await;
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |n: usize| {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect::<Vec<u8>>()
    };
    let mut packets: Vec<Vec<u8>> = vec![Vec::new(), vec![0xc0], vec![0xff; 1500]];
    // A long header, version 1, connection IDs of absurd length, then noise.
    let mut bad_initial = vec![0xc0, 0, 0, 0, 1, 0xff];
    bad_initial.extend(noise(1194));
    packets.push(bad_initial);
    // A well-formed Initial's first bytes, cut short.
    packets.push(vec![
        0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x44,
    ]);
    for _ in 0..2000 {
        let len = 1 + (noise(2)[0] as usize * 5);
        packets.push(noise(len));
    }
    for p in &packets {
        let _ = udp.send_to(p, addr);
    }
    // Oversized headers over QPACK: refused, the connection and levee unharmed.
    let mut c = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    let big = "x".repeat(16 * 1024);
    // A 4xx, or the stream refused (an error here): either way not served.
    if let Ok(r) = c.request(Method::GET, "/", &[("x-big", &big)], None).await {
        assert!(r.status.is_client_error(), "{r:?}");
    }
    let mut c = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    assert_eq!(c.get("/").await.text(), "fine");
    assert_eq!(levee.get("/").await.text(), "fine");
}

/// `levee bench --h3 -k` measures an HTTP/3 server (here levee itself): every request
/// answered, none failed; without --h3 an https:// URL is refused with what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levee_bench_speaks_http3() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|_| Reply::text("a page").header("cache-control", "max-age=60"));
    let (levee, _) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee.start();
    let url = format!("https://127.0.0.1:{}/page", levee.tls_addr().await.port());
    let bench = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
                .arg("bench")
                .args(args)
                .output()
                .unwrap()
        })
    };
    let out = bench(
        [
            "--h3", "-k", "-c", "4", "-n", "200", "-q", "--csv", "-", &url,
        ]
        .map(String::from)
        .to_vec(),
    )
    .await
    .unwrap();
    let csv = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{csv}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let row: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    assert_eq!((col("responses"), col("errors")), ("200", "0"), "{csv}");
    assert_eq!(origin.requests(), 1, "one miss, the rest hits over HTTP/3");
    // https without --h3: refused, saying how.
    let out = bench(vec!["-n".into(), "1".into(), url]).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--h3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The anonymous lane over HTTP/3 as over TCP (`lanes.rs`, R4): with another network
/// waiting, one /24 keeps to its share (N = ceil(4 × 25%) = 1 waiting); the rest of its
/// flood is refused at once with 429 `network-over-share` and never reaches the backend.
/// The client network is the QUIC connection's validated address. (With
/// `backend_network_share = "100%"` the flood is served and the test fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_refuses_a_networks_flood_over_http3() {
    use std::net::IpAddr;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|r| {
        let slow = r.path.starts_with("/busy/");
        Reply::text(format!("done {}", r.path))
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(if slow { 3000 } else { 0 }))
    });
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee
        .config(
            "[limits]\nbackend_max_concurrency = 4\nbackend_network_share = \"25%\"\n\
             backend_anonymous_wait = \"30s\"\nbackend_anonymous_adaptive = false",
        )
        .start();
    let addr = levee.tls_addr().await;
    let request = |from: &str, path: String| {
        let (der, from) = (ca.der.clone(), from.parse::<IpAddr>().unwrap());
        tokio::spawn(async move {
            let config = levee_test::http3::client_config(&der);
            let mut c = H3::connect_from(addr, from, "a.test", config)
                .await
                .unwrap();
            let started = Instant::now();
            let r = c.get(&path).await;
            (path, r, started.elapsed())
        })
    };
    // Alone, network 3 takes the whole backend.
    let mut busy = Vec::new();
    for i in 1..=4 {
        busy.push(request(&format!("127.3.0.{i}"), format!("/busy/b{i}")));
    }
    levee
        .wait_metric("levee_backend_in_flight{class=\"anonymous\"}", |v| v == 4.0)
        .await;
    // Network 4 waits for a slot.
    let waiting = request("127.4.0.1", "/c1".into());
    levee
        .wait_metric("levee_backend_queued{class=\"anonymous\"}", |v| v == 1.0)
        .await;
    // Network 2: one waits beside it, the other nine are over its share.
    let first = request("127.2.0.1", "/n01".into());
    levee
        .wait_metric("levee_backend_queued{class=\"anonymous\"}", |v| v == 2.0)
        .await;
    let mut flood = Vec::new();
    for i in 2..=10 {
        flood.push(request(&format!("127.2.0.{i}"), format!("/n{i:02}")));
    }
    for f in flood {
        let (path, r, took) = f.await.unwrap();
        assert_eq!(r.status, 429, "{path}: {r:?}");
        assert!(
            r.header("x-cache-reason")
                .is_some_and(|v| v.contains("network-over-share")),
            "{path}: {r:?}"
        );
        assert!(
            took < Duration::from_millis(1500),
            "{path} refused only after {took:?}"
        );
        assert_eq!(origin.requests_for(&path), 0, "{path} reached the backend");
    }
    for t in busy.into_iter().chain([waiting, first]) {
        let (path, r, _) = t.await.unwrap();
        assert_eq!(r.status, 200, "{path}: {r:?}");
    }
}

/// A stream flood on one connection: 300 requests at once to a slow backend. QUIC lets
/// at most 100 streams be open (the rest wait in the client), the backend never sees
/// more than its limit, every request is answered or refused readably, and levee keeps
/// serving others meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_flood_on_one_connection_is_bounded() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|r| {
        Reply::text(format!("done {}", r.path))
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(200))
    });
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee
        .config("[limits]\nbackend_max_concurrency = 8\nbackend_anonymous_wait = \"30s\"\nbackend_queue_timeout = \"30s\"")
        .start();
    let addr = levee.tls_addr().await;
    let conn = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..300 {
        let mut h = conn.handle();
        set.spawn(async move { h.get(&format!("/f{i}")).await });
    }
    // Meanwhile another client is served.
    let mut other = H3::connect(addr, "a.test", &ca.der).await.unwrap();
    let r = other.get("/other").await;
    assert!(
        r.status == 200 || r.status == 429 || r.status == 503,
        "{r:?}"
    );
    let (mut ok, mut refused) = (0, 0);
    while let Some(r) = set.join_next().await {
        match r.unwrap() {
            Ok(a) if a.status == 200 => ok += 1,
            Ok(a) if a.status == 429 || a.status == 503 => refused += 1,
            other => panic!("neither answered nor refused readably: {other:?}"),
        }
    }
    assert_eq!(ok + refused, 300);
    assert!(ok > 0, "nothing served");
    assert!(origin.max_in_flight() <= 8, "{}", origin.max_in_flight());
    assert_eq!(levee.get("/after").await.status, 200);
}

/// `levee serve --check` shows the UDP listener HTTP/3 will take, and `[tls] http3 =
/// false` turns it off.
#[test]
fn serve_check_shows_the_http3_udp_listener() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("levee test CA");
    let (cert, key) = ca.issue(dir.path(), "a", &["a.test"]);
    let check = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["serve", "--check", "--backend", "http://127.0.0.1:9"])
            .args(["--listen-tls", "127.0.0.1:8443"])
            .args(["--tls-cert", cert.to_str().unwrap()])
            .args(["--tls-key", key.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        text.lines()
            .find(|l| l.starts_with("tls.http3"))
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(check(&[]), "on: UDP 127.0.0.1:8443");
    let off = dir.path().join("off.toml");
    std::fs::write(&off, "[tls]\nhttp3 = false\n").unwrap();
    assert_eq!(check(&["--config", off.to_str().unwrap()]), "off");
}

/// QUIC connections per client network are bounded (256 from one /24, as WebSockets
/// are): the next connection from that network is refused at its handshake, while
/// another network still connects, and the network's room comes back as its
/// connections close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_connections_per_network_are_bounded() {
    use std::net::IpAddr;
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|_| Reply::text("fine").header("cache-control", "max-age=60"));
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee.start();
    let addr = levee.tls_addr().await;
    let connect = |from: String| {
        let der = ca.der.clone();
        async move {
            let from: IpAddr = from.parse().unwrap();
            let config = levee_test::http3::client_config(&der);
            H3::connect_from(addr, from, "a.test", config).await
        }
    };
    let mut held = Vec::new();
    for i in 0..256u32 {
        let from = format!("127.9.{}.{}", 0, 1 + i % 250);
        let mut c = connect(from)
            .await
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        if i == 0 {
            assert_eq!(c.get("/").await.text(), "fine");
        }
        held.push(c);
    }
    assert!(
        connect("127.9.0.251".into()).await.is_err(),
        "a 257th connection from 127.9.0.0/24 was let in"
    );
    let mut other = connect("127.10.0.1".into()).await.unwrap();
    assert_eq!(other.get("/").await.text(), "fine");
    // One closes: the network has room again.
    held.pop().unwrap().close().await;
    let mut again = None;
    for _ in 0..100 {
        if let Ok(c) = connect("127.9.0.252".into()).await {
            again = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "the network's room did not come back");
}

/// A burst of handshakes (200 at once) goes past the 64 levee lets run before it asks
/// for address validation: clients are sent a QUIC Retry, follow it (as every QUIC
/// client must), and all connect; `/metrics` counts the Retries and the open
/// connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_handshakes_gets_retries_and_still_connects() {
    use std::net::IpAddr;
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(|_| Reply::text("fine").header("cache-control", "max-age=60"));
    let (levee, ca) = https(levee!().backend(&origin.url()), dir.path());
    let levee = levee.start();
    let addr = levee.tls_addr().await;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..200u32 {
        let der = ca.der.clone();
        set.spawn(async move {
            let from: IpAddr = format!("127.12.{}.{}", i / 200, 1 + i % 200)
                .parse()
                .unwrap();
            let config = levee_test::http3::client_config(&der);
            H3::connect_from(addr, from, "a.test", config).await
        });
    }
    let mut held = Vec::new();
    while let Some(c) = set.join_next().await {
        held.push(c.unwrap().expect("a client could not connect"));
    }
    assert_eq!(held[0].get("/").await.text(), "fine");
    let retries = levee.metric("levee_http3_retries_total").await;
    assert!(retries > 0.0, "no Retry in a burst of 200 handshakes");
    levee
        .wait_metric("levee_http3_connections_open", |n| n == 200.0)
        .await;
}

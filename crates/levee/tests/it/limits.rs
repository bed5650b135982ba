//! Overload protection, limits and shutdown: the backend concurrency limit and its queue,
//! request header limits, slowloris, the connection limit, backend failures, SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use levee_test::{eventually, levee, Conn, Origin, RawConn, Reply, Req, Resp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// An origin whose every response is uncacheable and takes `delay`.
fn slow_uncacheable(delay: Duration) -> Origin {
    Origin::start(move |r| {
        Reply::text(format!("{} {}", r.method, r.uri))
            .header("cache-control", "no-store")
            .delay(delay)
    })
}

/// Asserts `r` is levee's own plain-text error with this status, naming the backend.
fn assert_clear_error(r: &Resp, status: u16, backend: &str) {
    assert_eq!(r.status, status, "{}", r.summary());
    assert_eq!(r.x_cache(), "ERROR", "{}", r.summary());
    let ct = r.header("content-type").unwrap_or("");
    assert!(ct.starts_with("text/plain"), "Content-Type {ct:?}");
    let text = r.text();
    assert!(
        text.starts_with(&status.to_string()),
        "the body does not say what happened: {text:?}"
    );
    // The backend's address is the operator's business, not the client's: it goes to
    // levee's log (checked where the connection fails).
    let addr = backend.trim_start_matches("http://");
    assert!(
        !text.contains(addr),
        "the body shows clients the backend {addr}: {text:?}"
    );
}

/// Sends `request` as raw bytes and returns what came back up to the end of the head.
async fn raw_head(addr: SocketAddr, request: &[u8]) -> String {
    let mut conn = RawConn::connect(addr).await;
    // levee may answer and close before reading all of an oversized request.
    let _ = conn.write(request).await;
    let got = conn.read_until(b"\r\n\r\n", Duration::from_secs(5)).await;
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_never_sees_more_than_backend_max_concurrency_requests() {
    let origin = slow_uncacheable(Duration::from_millis(50));
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--backend-max-concurrency", "4"])
        // 150 anonymous requests of 50 ms from one client on 2 slots (the lane's share
        // while sessions work) take ~4 s: past the anonymous lane's default 2 s wait.
        .config("[limits]\nbackend_anonymous_wait = \"10s\"")
        .start();
    let addr = levee.addr();
    let mut set = JoinSet::new();
    // 100 fills of distinct uncacheable URLs and 100 passes, all at once.
    for i in 0..100 {
        set.spawn(async move {
            let path = format!("/fill/{i}");
            let r = Req::get(&path).send_to(addr).await;
            (format!("GET {path}"), r)
        });
    }
    for i in 0..100 {
        set.spawn(async move {
            let path = format!("/pass/{i}");
            if i % 2 == 0 {
                let r = Req::post(&path, "x").send_to(addr).await;
                (format!("POST {path}"), r)
            } else {
                let r = Req::get(&path)
                    .header("cookie", "PHPSESSID=abc")
                    .send_to(addr)
                    .await;
                (format!("GET {path}"), r)
            }
        });
    }
    while let Some(res) = set.join_next().await {
        let (expected, r) = res.expect("client task");
        assert_eq!(r.status, 200, "{expected}: {}", r.summary());
        assert_eq!(r.text(), expected);
    }
    assert_eq!(origin.requests(), 200);
    assert!(
        origin.max_in_flight() <= 4,
        "the backend saw {} concurrent requests with --backend-max-concurrency 4",
        origin.max_in_flight()
    );
    assert_eq!(
        origin.max_in_flight(),
        4,
        "the limit was never reached: requests were serialised more than needed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_backend_max_concurrency_limits_the_backend() {
    let origin = slow_uncacheable(Duration::from_millis(50));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 2")
        .start();
    let addr = levee.addr();
    let mut set = JoinSet::new();
    for i in 0..30 {
        set.spawn(async move { Req::get(&format!("/c/{i}")).send_to(addr).await });
    }
    while let Some(r) = set.join_next().await {
        let r = r.expect("client task");
        assert_eq!(r.status, 200, "{}", r.summary());
    }
    assert_eq!(origin.requests(), 30);
    assert_eq!(
        origin.max_in_flight(),
        2,
        "limits.backend_max_concurrency = 2 not respected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_backend_queue_gives_503_with_retry_after_at_once() {
    let origin = slow_uncacheable(Duration::from_millis(2000));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 1\nbackend_queue = 1\nbackend_queue_timeout = \"10s\"")
        .start();
    let addr = levee.addr();
    // A holds the only backend slot, B waits in the one-place queue.
    let a = tokio::spawn(async move { Req::get("/slow/a").send_to(addr).await });
    origin.wait_for_requests(1, Duration::from_secs(5)).await;
    let b = tokio::spawn(async move { Req::get("/slow/b").send_to(addr).await });
    levee
        .wait_metric("levee_backend_waiting", |n| n == 1.0)
        .await;

    for req in [Req::get("/slow/c"), Req::post("/slow/c", "x")] {
        let start = Instant::now();
        let r = req.send(&levee).await;
        let took = start.elapsed();
        assert_clear_error(&r, 503, &origin.url());
        assert!(
            took < Duration::from_millis(1000),
            "a full queue should be refused at once, took {took:?}"
        );
        let retry = r.header("retry-after").and_then(|v| v.parse::<u64>().ok());
        assert!(
            retry.is_some_and(|s| s >= 1),
            "503 without a usable Retry-After: {:?}",
            r.headers
        );
        assert!(
            r.text().contains("queue"),
            "the body does not explain the overload: {:?}",
            r.text()
        );
    }
    // A and B are served, one after the other; C never reached the backend.
    let ra = a.await.expect("client A");
    let rb = b.await.expect("client B");
    assert_eq!(ra.status, 200, "{}", ra.summary());
    assert_eq!(rb.status, 200, "{}", rb.summary());
    assert_eq!(origin.requests_for("/slow/c"), 0);
    assert_eq!(origin.requests(), 2);
    assert_eq!(origin.max_in_flight(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_queue_timeout_gives_503_with_retry_after() {
    let origin = slow_uncacheable(Duration::from_millis(2000));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 1\nbackend_queue_timeout = \"500ms\"")
        .start();
    let addr = levee.addr();
    let a = tokio::spawn(async move { Req::get("/slow/a").send_to(addr).await });
    origin.wait_for_requests(1, Duration::from_secs(5)).await;
    let start = Instant::now();
    let r = levee.get("/slow/b").await;
    let took = start.elapsed();
    assert_clear_error(&r, 503, &origin.url());
    assert!(r.has("retry-after"), "{:?}", r.headers);
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1500),
        "the queue wait was {took:?}, not about 500ms"
    );
    assert_eq!(origin.requests_for("/slow/b"), 0);
    let ra = a.await.expect("client A");
    assert_eq!(ra.status, 200, "{}", ra.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_backend_serves_a_stale_copy_instead_of_503() {
    let origin = Origin::start(|r| {
        if r.path == "/hold" {
            Reply::text("held")
                .header("cache-control", "no-store")
                .delay(Duration::from_secs(3))
        } else {
            // A minute of freshness: a second could pass before wait_stored looks.
            Reply::text(format!("stored {} #{}", r.path, r.n)).header("cache-control", "max-age=60")
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 1\nbackend_queue_timeout = \"300ms\"")
        .start();
    let r = levee.get("/page").await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    levee.wait_stored("/page").await;
    let addr = levee.addr();
    let hold = tokio::spawn(async move { Req::get("/hold").send_to(addr).await });
    assert!(
        eventually(Duration::from_secs(3), || origin.in_flight() == 1).await,
        "the slot-holding request did not reach the backend"
    );
    // Past max-age=60 on levee's clock (within the default grace); the origin is not
    // asked again, so its Date needs no advance.
    levee.advance_clock(Duration::from_secs(61)).await;

    // /page is stale (max-age=60) and the backend is busy: the stale copy, not a 503.
    let r = levee.get("/page").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "stored /page #1");
    // Without a stored copy, the same overload is a 503.
    let r = levee.get("/never-stored").await;
    assert_clear_error(&r, 503, &origin.url());
    assert_eq!(origin.requests_for("/page"), 1);
    assert_eq!(origin.requests_for("/never-stored"), 0);
    hold.abort();
}

#[tokio::test]
async fn request_headers_over_max_header_bytes_or_max_headers_get_431() {
    let origin = Origin::fixed(|| Reply::text("ok").header("cache-control", "no-store"));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nmax_header_bytes = \"8KiB\"\nmax_headers = 10")
        .start();
    let addr = levee.addr();
    let with_big_header = |len: usize| {
        format!(
            "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
            "a".repeat(len)
        )
    };
    let with_headers = |n: usize| {
        let mut s = String::from("GET /many HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
        for i in 0..n {
            s.push_str(&format!("X-H{i}: {i}\r\n"));
        }
        s.push_str("\r\n");
        s
    };

    let head = raw_head(addr, with_big_header(6000).as_bytes()).await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "6000-byte header: {head:?}"
    );
    let head = raw_head(addr, with_big_header(9000).as_bytes()).await;
    assert!(
        head.starts_with("HTTP/1.1 431"),
        "9000-byte header: {head:?}"
    );

    // Host, Connection and 6 more: 8 fields. Host, Connection and 15 more: 17.
    let head = raw_head(addr, with_headers(6).as_bytes()).await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "8 header fields: {head:?}"
    );
    let head = raw_head(addr, with_headers(15).as_bytes()).await;
    assert!(
        head.starts_with("HTTP/1.1 431"),
        "17 header fields: {head:?}"
    );

    assert_eq!(
        origin.requests(),
        2,
        "a refused request reached the backend"
    );
}

/// Connects and writes `lines` one by one, `pause` apart, until levee closes the
/// connection; returns how long levee kept it open (at most `limit`).
async fn time_until_closed(
    addr: SocketAddr,
    lines: Vec<&'static str>,
    pause: Duration,
    limit: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        for line in lines {
            if wr.write_all(line.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(pause).await;
        }
        // Keep the write half open (no FIN): a client that just goes quiet, until the
        // test aborts this task.
        std::future::pending::<()>().await;
        drop(wr);
    });
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + limit;
    let closed = loop {
        match tokio::time::timeout_at(deadline, rd.read(&mut buf)).await {
            Err(_) => break None,
            Ok(Ok(0)) | Ok(Err(_)) => break Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    };
    writer.abort();
    closed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_disconnected_after_header_timeout() {
    let origin = Origin::fixed(|| Reply::text("ok"));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nheader_timeout = \"1s\"")
        .start();
    let addr = levee.addr();
    let limit = Duration::from_secs(4);
    let pause = Duration::from_millis(200);
    // Silent; partial headers then silence; a header line every 200 ms forever.
    let mut trickle = vec!["GET / HTTP/1.1\r\n"];
    trickle.extend(["X-Slow: 1\r\n"; 50]);
    let (silent, partial, trickling) = tokio::join!(
        time_until_closed(addr, vec![], pause, limit),
        time_until_closed(addr, vec!["GET / HTTP/1.1\r\nHost: x\r\n"], pause, limit),
        time_until_closed(addr, trickle, pause, limit),
    );
    for (name, closed) in [
        ("silent", silent),
        ("partial headers", partial),
        ("trickling headers", trickling),
    ] {
        let took = closed.unwrap_or_else(|| panic!("{name}: still open after {limit:?}"));
        assert!(
            took >= Duration::from_millis(800) && took < Duration::from_millis(2500),
            "{name}: closed after {took:?} with header_timeout = 1s"
        );
    }
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_header_timeout() {
    let origin = Origin::fixed(|| Reply::text("ok"));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nheader_timeout = \"1s\"")
        .start();
    let mut conn = Conn::open(levee.addr()).await;
    let r = conn.send(Req::get("/a")).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    // Kept alive: the next request goes on the same connection (`send` panics on a
    // closed one)...
    assert!(!conn.is_closed(), "the connection was not kept alive");
    let r = conn.send(Req::get("/b")).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let idle_since = Instant::now();
    // ...but not forever.
    assert!(
        conn.closed_within(Duration::from_secs(3)).await,
        "an idle keep-alive connection is still open after 3s with header_timeout = 1s"
    );
    let idle = idle_since.elapsed();
    assert!(
        idle >= Duration::from_millis(800),
        "closed after only {idle:?} idle with header_timeout = 1s"
    );
}

/// Connections to `addr`'s listening socket that the kernel has completed and the
/// server has not accepted yet (a listening socket's Recv-Q in /proc/net/tcp); `None`
/// without /proc or without that socket.
fn accept_queue(addr: SocketAddr) -> Option<u64> {
    let port = format!(":{:04X}", addr.port());
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // local_address, state (0A: LISTEN), tx_queue:rx_queue in hex.
        if !f.get(1)?.ends_with(&port) || *f.get(3)? != "0A" {
            return None;
        }
        u64::from_str_radix(f.get(4)?.split_once(':')?.1, 16).ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_wait_until_one_closes() {
    let origin = Origin::start(|r| Reply::text(format!("ok {}", r.uri)));
    let levee = levee!()
        .backend(&origin.url())
        // Several workers: the waiting connection must be taken by whichever has a permit.
        .config("workers = 4\n[limits]\nmax_connections = 2")
        .start();
    let addr = levee.addr();
    let mut a = Conn::open(addr).await;
    let mut b = Conn::open(addr).await;
    assert_eq!(a.send(Req::get("/a")).await.text(), "ok /a");
    assert_eq!(b.send(Req::get("/b")).await.text(), "ok /b");

    let mut c = Conn::open(addr).await;
    let third = tokio::spawn(async move {
        let r = c.send(Req::get("/c")).await;
        (c, r)
    });
    // The kernel completed the third connection and holds it for levee, which does not
    // take it...
    assert!(
        eventually(Duration::from_secs(5), || accept_queue(addr) == Some(1)).await,
        "the third connection never waited in levee's accept queue ({:?}); connections open: {}",
        accept_queue(addr),
        levee.metric("levee_connections_open").await
    );
    // ...while the two admitted connections keep working: a round trip through levee
    // and the origin, long after levee would have taken a connection it was free to.
    assert_eq!(b.send(Req::get("/b2")).await.text(), "ok /b2");
    assert_eq!(
        accept_queue(addr),
        Some(1),
        "the third connection was taken"
    );
    assert_eq!(levee.metric("levee_connections_open").await, 2.0);
    assert!(
        !third.is_finished(),
        "a third connection was served with max_connections = 2"
    );
    assert_eq!(origin.requests_for("/c"), 0);

    drop(a);
    let (_c, r) = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("the waiting connection was not served after another one closed")
        .expect("client task");
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "ok /c");
}

#[tokio::test]
async fn backend_connect_failure_gives_a_clear_502() {
    let backend = Origin::refusing_url();
    let levee = levee!().backend(&backend).start();
    for req in [
        Req::get("/page"),
        Req::get("/page").header("cookie", "PHPSESSID=abc"),
        Req::post("/form", "a=1"),
    ] {
        let desc = format!("{req:?}");
        let start = Instant::now();
        let r = req.send(&levee).await;
        assert_clear_error(&r, 502, &backend);
        assert!(
            r.text().contains("connect"),
            "{desc}: the 502 does not say the connection failed: {:?}",
            r.text()
        );
        assert!(start.elapsed() < Duration::from_secs(3), "{desc}");
    }
    // What the client was not told is in the log, for the operator.
    levee.wait_log(backend.trim_start_matches("http://")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_first_byte_timeout_gives_504() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("{} {}", r.method, r.path));
        match r.path.as_str() {
            "/quick" => reply.delay(Duration::from_millis(300)),
            _ => reply.hang(),
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_first_byte_timeout = \"1s\"")
        .start();
    // Slower than nothing, but within the timeout: served.
    let r = levee.get("/quick").await;
    assert_eq!(r.status, 200, "{}", r.summary());

    let addr = levee.addr();
    let (fill, pass) = tokio::join!(
        async {
            let start = Instant::now();
            (Req::get("/hang").send_to(addr).await, start.elapsed())
        },
        async {
            let start = Instant::now();
            (Req::post("/hang", "x").send_to(addr).await, start.elapsed())
        },
    );
    for (r, took) in [fill, pass] {
        assert_clear_error(&r, 504, &origin.url());
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(3),
            "504 after {took:?} with backend_first_byte_timeout = 1s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_in_flight_requests_finish_refuses_new_connections_and_exits_0() {
    let origin = Origin::start(|r| {
        let reply = Reply::ok().header("cache-control", "no-store");
        match r.path.as_str() {
            "/slow-head" => reply
                .body("slow head done")
                .delay(Duration::from_millis(2000)),
            _ => reply.chunks(vec![
                (Duration::ZERO, "first half, ".into()),
                (Duration::from_millis(2000), "second half".into()),
            ]),
        }
    });
    let mut levee = levee!().backend(&origin.url()).start();
    let addr = levee.addr();
    let head = tokio::spawn(async move { Req::get("/slow-head").send_to(addr).await });
    let body = tokio::spawn(async move { Req::get("/slow-body").send_to(addr).await });
    origin.wait_for_requests(2, Duration::from_secs(5)).await;

    levee.sigterm();
    let refused = eventually(Duration::from_secs(2), || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
    })
    .await;
    assert!(refused, "levee still accepts connections 2s after SIGTERM");
    assert!(
        levee.is_running(),
        "levee exited without waiting for its in-flight requests"
    );

    let r = head.await.expect("client task");
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "slow head done");
    let r = body.await.expect("client task");
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "first half, second half");

    let status = levee.wait_exit(Duration::from_secs(5)).unwrap_or_else(|| {
        panic!(
            "levee did not exit after draining; stderr:\n{}",
            levee.stderr()
        )
    });
    assert_eq!(status.code(), Some(0), "stderr:\n{}", levee.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drain_is_bounded_by_shutdown_timeout() {
    let origin = Origin::fixed(|| Reply::text("never").hang());
    let mut levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nshutdown_timeout = \"1s\"")
        .start();
    let mut conn = RawConn::connect(levee.addr()).await;
    conn.write(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write request");
    origin.wait_for_requests(1, Duration::from_secs(5)).await;

    let start = Instant::now();
    levee.sigterm();
    let status = levee.wait_exit(Duration::from_secs(5)).unwrap_or_else(|| {
        panic!("levee still running 5s after SIGTERM with shutdown_timeout = 1s")
    });
    let took = start.elapsed();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", levee.stderr());
    assert!(
        took >= Duration::from_millis(800),
        "levee exited after {took:?}, without waiting for its in-flight request"
    );
    assert!(
        conn.read_until_closed(Duration::from_secs(2))
            .await
            .is_some(),
        "the in-flight connection is still open after levee exited"
    );
}

/// The names of `pid`'s threads that serve connections.
fn worker_threads(pid: u32) -> Vec<String> {
    // No /proc: no names, and the assertions say what was expected.
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let mut names: Vec<String> = tasks
        .into_iter()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with("levee-worker-"))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn workers_sets_the_serving_threads_and_every_connection_is_served() {
    let origin = Origin::start(|r| {
        Reply::text(format!("ok {}", r.uri))
            .header("cache-control", "no-store")
            .delay(Duration::from_millis(100))
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--workers", "3"])
        .start();
    // A thread names itself once it runs, maybe just after levee says it listens.
    let expected = ["levee-worker-0", "levee-worker-1", "levee-worker-2"];
    eventually(Duration::from_secs(5), || {
        worker_threads(levee.pid()) == expected
    })
    .await;
    assert_eq!(worker_threads(levee.pid()), expected);
    // More connections than workers, all open at once: whichever worker accepts them and
    // wherever they are handed to, each is answered, on every request.
    let addr = levee.addr();
    let mut set = JoinSet::new();
    for i in 0..12 {
        set.spawn(async move {
            let mut c = Conn::open(addr).await;
            for j in 0..3 {
                let path = format!("/c{i}/r{j}");
                let r = c.send(Req::get(&path)).await;
                assert_eq!(r.text(), format!("ok {path}"), "{}", r.summary());
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("client task");
    }
    assert_eq!(origin.requests(), 36);

    // Unset (or 0): one per core.
    let levee = levee!().backend(&origin.url()).start();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    eventually(Duration::from_secs(5), || {
        worker_threads(levee.pid()).len() == cores
    })
    .await;
    assert_eq!(worker_threads(levee.pid()).len(), cores);
}

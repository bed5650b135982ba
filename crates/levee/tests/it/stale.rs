//! Stale content: stale-while-revalidate, grace when the backend is down or slow,
//! stale-if-error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use levee_test::{levee, Origin, Reply, Req};
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_serves_stale_at_once_and_revalidates_once() {
    // The revalidation takes 3 s, and what it brings stays fresh for a minute: a client
    // task that a loaded machine starts late (CI once saw one past a 400 ms revalidation
    // and the 1 s its answer was fresh) still finds it under way, and none causes a
    // second one.
    let origin = Origin::start(|r| {
        if r.n > 1 {
            Reply::text(format!("v{}", r.n))
                .header("cache-control", "max-age=60")
                .delay(Duration::from_secs(3))
        } else {
            Reply::text("v1").header("cache-control", "max-age=1, stale-while-revalidate=30")
        }
    });
    let levee = Arc::new(levee!().backend(&origin.url()).start());
    assert_eq!(levee.get("/swr").await.text(), "v1");
    levee.wait_stored("/swr").await;
    levee.advance_clock(Duration::from_millis(1500)).await;
    origin.advance_clock(Duration::from_millis(1500));

    let mut set = JoinSet::new();
    for _ in 0..8 {
        let addr = levee.addr();
        set.spawn(async move {
            let start = Instant::now();
            let r = Req::get("/swr").send_to(addr).await;
            (r, start.elapsed())
        });
    }
    while let Some(res) = set.join_next().await {
        let (r, took) = res.expect("client task");
        assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
        assert_eq!(r.text(), "v1");
        // Waiting for the revalidation would take 3 s.
        assert!(
            took < Duration::from_millis(1500),
            "stale response waited for the revalidation ({took:?})"
        );
    }
    // Exactly one background revalidation, which then replaces the stored response.
    origin.wait_for_requests(2, Duration::from_secs(3)).await;
    levee.wait_stored("/swr").await;
    let r = levee.get("/swr").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.text(), "v2");
    assert_eq!(origin.requests(), 2, "more than one revalidation");
}

#[tokio::test]
async fn backend_down_serves_stale_within_grace_then_a_clear_502() {
    // Minutes, moved by levee's clock: a loaded machine's real seconds change nothing.
    let origin =
        Origin::fixed(|| Reply::text("the stored page").header("cache-control", "max-age=60"));
    let backend = origin.url();
    let levee = levee!()
        .backend(&backend)
        .config("[cache]\ngrace = \"120s\"")
        .start();
    assert_eq!(levee.get("/page").await.x_cache(), "MISS");
    levee.wait_stored("/page").await;
    origin.stop();

    // Stale (past max-age=60) but within the 120 s grace.
    levee.advance_clock(Duration::from_secs(90)).await;
    for _ in 0..3 {
        let r = levee.get("/page").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
        assert_eq!(r.text(), "the stored page");
    }
    // Beyond max-age + grace: a 502 that says what is wrong.
    levee.advance_clock(Duration::from_secs(120)).await;
    let r = levee.get("/page").await;
    assert_eq!(r.status, 502, "{}", r.summary());
    assert_eq!(r.x_cache(), "ERROR");
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("text/plain"),
        "{:?}",
        r.headers
    );
    let addr = backend.trim_start_matches("http://");
    assert!(
        !r.text().contains(addr),
        "502 body shows clients the backend {addr}: {:?}",
        r.text()
    );
    assert!(!r.text().contains("the stored page"));
}

#[tokio::test]
async fn backend_timeout_serves_stale_within_grace() {
    let hang = Arc::new(AtomicBool::new(false));
    let origin_hang = hang.clone();
    let origin = Origin::start(move |_| {
        let reply = Reply::text("cached copy").header("cache-control", "max-age=1");
        if origin_hang.load(Ordering::SeqCst) {
            reply.hang()
        } else {
            reply
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_first_byte_timeout = \"1s\"")
        .start();
    levee.get("/t").await;
    levee.wait_stored("/t").await;
    hang.store(true, Ordering::SeqCst);
    levee.advance_clock(Duration::from_millis(1500)).await;
    let start = Instant::now();
    let r = levee.get("/t").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "cached copy");
    assert!(start.elapsed() < Duration::from_secs(3));
    // Without a stored copy, the same slowness is a 504.
    let r = levee.get("/never-stored").await;
    assert_eq!(r.status, 504, "{}", r.summary());
}

#[tokio::test]
async fn stale_if_error_is_honoured_even_without_grace() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/sie" => "max-age=1, stale-if-error=60",
            _ => "max-age=1",
        };
        Reply::text(format!("{} stored", r.path)).header("cache-control", cc)
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\ngrace = \"0s\"")
        .start();
    for p in ["/sie", "/plain"] {
        levee.get(p).await;
        levee.wait_stored(p).await;
    }
    origin.stop();
    levee.advance_clock(Duration::from_millis(1500)).await;
    let r = levee.get("/sie").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/sie stored");
    let r = levee.get("/plain").await;
    assert_eq!(
        r.status,
        502,
        "no grace, no stale-if-error: {}",
        r.summary()
    );
}

#[tokio::test]

async fn stale_if_error_covers_backend_5xx_answers() {
    let failing = Arc::new(AtomicBool::new(false));
    let origin_failing = failing.clone();
    let origin = Origin::start(move |_| {
        if origin_failing.load(Ordering::SeqCst) {
            Reply::status(503).body("backend broken")
        } else {
            Reply::text("good copy").header("cache-control", "max-age=1, stale-if-error=60")
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/e").await;
    levee.wait_stored("/e").await;
    failing.store(true, Ordering::SeqCst);
    levee.advance_clock(Duration::from_millis(1500)).await;
    // RFC 5861 §4: an error is any situation that would result in a 500, 502, 503 or
    // 504 being returned.
    let r = levee.get("/e").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "STALE");
    assert_eq!(r.text(), "good copy");
}

//! Request coalescing and hit-for-pass.

use std::sync::Arc;
use std::time::{Duration, Instant};

use levee_test::{levee, Origin, Reply, Req};
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_misses_make_exactly_one_backend_request() {
    const CLIENTS: usize = 500;
    let body: String = (0..10_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let origin_body = body.clone();
    let origin = Origin::fixed(move || {
        Reply::text(origin_body.clone())
            .header("cache-control", "max-age=60")
            .delay(Duration::from_millis(200))
    });
    let levee = Arc::new(levee!().backend(&origin.url()).start());
    let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let mut clients = JoinSet::new();
    for _ in 0..CLIENTS {
        let addr = levee.addr();
        let barrier = barrier.clone();
        clients.spawn(async move {
            let mut conn = levee_test::Conn::open(addr).await;
            barrier.wait().await;
            conn.send(Req::get("/popular")).await
        });
    }
    let mut x_cache = std::collections::BTreeMap::<String, usize>::new();
    while let Some(r) = clients.join_next().await {
        let r = r.expect("client task");
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.body.len(), body.len(), "{}", r.summary());
        assert!(r.text() == body, "a client got a different body");
        *x_cache.entry(r.x_cache().to_string()).or_default() += 1;
    }
    assert_eq!(
        origin.requests(),
        1,
        "{CLIENTS} concurrent misses made {} backend requests (X-Cache: {x_cache:?})",
        origin.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_response_releases_waiters_in_parallel_and_then_hit_for_pass_passes() {
    const DELAY: Duration = Duration::from_millis(300);
    let origin = Origin::start(|r| {
        Reply::text(format!("private page #{}", r.n))
            .header("cache-control", "private")
            .delay(DELAY)
    });
    let levee = Arc::new(levee!().backend(&origin.url()).debug_headers().start());

    let burst = |n: usize| {
        let levee = levee.clone();
        async move {
            let start = Instant::now();
            let mut set = JoinSet::new();
            for _ in 0..n {
                let addr = levee.addr();
                set.spawn(async move { Req::get("/private").send_to(addr).await });
            }
            let mut out = Vec::new();
            while let Some(r) = set.join_next().await {
                out.push(r.expect("client task"));
            }
            (out, start.elapsed())
        }
    };

    // First burst: one leader; when its response turns out private, the 9 waiters go
    // to the backend in parallel, not one after another.
    let (resps, took) = burst(10).await;
    for r in &resps {
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_ne!(r.x_cache(), "HIT");
    }
    let mut bodies: Vec<String> = resps.iter().map(|r| r.text()).collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(
        bodies.len(),
        10,
        "waiters shared a private response: {bodies:?}"
    );
    assert_eq!(origin.requests(), 10);
    assert!(
        origin.max_in_flight() >= 5,
        "waiters were not released in parallel (max {} in flight)",
        origin.max_in_flight()
    );
    assert!(
        took < DELAY * 3,
        "10 requests took {took:?}: waiters were serialised"
    );

    // Within hit_for_pass, requests do not coalesce at all: all of them reach the
    // backend at once.
    origin.reset();
    let (resps, took) = burst(8).await;
    for r in &resps {
        assert_eq!(r.status, 200, "{}", r.summary());
    }
    assert_eq!(origin.requests(), 8);
    assert_eq!(
        origin.max_in_flight(),
        8,
        "hit-for-pass requests waited for each other"
    );
    assert!(took < DELAY * 2, "8 hit-for-pass requests took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_waiters_do_not_share_responses_across_vary_variants() {
    let origin = Origin::start(|r| {
        let lang = r.header("accept-language").unwrap_or("none").to_string();
        Reply::text(format!("lang={lang}"))
            .header("cache-control", "max-age=60")
            .header("vary", "Accept-Language")
            .delay(Duration::from_millis(200))
    });
    let levee = Arc::new(levee!().backend(&origin.url()).start());
    let mut set = JoinSet::new();
    for i in 0..20 {
        let addr = levee.addr();
        let lang = if i % 2 == 0 { "en" } else { "ko" };
        set.spawn(async move {
            let r = Req::get("/v")
                .header("accept-language", lang)
                .send_to(addr)
                .await;
            (lang, r)
        });
    }
    while let Some(r) = set.join_next().await {
        let (lang, r) = r.expect("client task");
        assert_eq!(r.text(), format!("lang={lang}"), "{}", r.summary());
    }
    assert!(origin.requests() <= 20);
}

/// The hit-for-pass mark lasts while the URL stays uncacheable and is asked for: it does
/// not lapse every `hit_for_pass` and send the next requests to wait behind one fill
/// (for as long as the backend takes: seconds, when it is overloaded). Once the
/// response could be stored, the mark goes and the URL is cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hit_for_pass_is_renewed_while_the_url_stays_uncacheable() {
    let cacheable = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cacheable.clone();
    let origin = Origin::start(move |r| {
        let cc = if flag.load(std::sync::atomic::Ordering::SeqCst) {
            "max-age=60"
        } else {
            "private"
        };
        Reply::text(format!("page #{}", r.n)).header("cache-control", cc)
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\nhit_for_pass = \"3s\"\n")
        .start();
    let get = || Req::get("/page").send_to(levee.addr());
    let first = get().await;
    assert_eq!(first.x_cache(), "MISS", "{}", first.summary());
    // Three lifetimes of the mark on levee's clock, a request every second of it: each
    // one renews the mark, so none of them waits behind a fill.
    for n in 0..9 {
        levee.advance_clock(Duration::from_secs(1)).await;
        let r = get().await;
        assert_eq!(
            r.x_cache(),
            "PASS",
            "request {n} after the first: {}",
            r.summary()
        );
    }
    cacheable.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = get().await;
    assert_eq!(r.x_cache(), "PASS", "still marked: {}", r.summary());
    let r = get().await;
    assert_eq!(
        r.x_cache(),
        "MISS",
        "the mark went: a fill: {}",
        r.summary()
    );
    // The client has the body a moment before the fill stores it.
    levee.wait_fills_done().await;
    let r = get().await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
}

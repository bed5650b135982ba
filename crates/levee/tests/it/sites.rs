//! Several sites in one process (`[[site]]`, issue 21): each host to its own backend and
//! cache, a path route to another backend or to files only, the default site or
//! 404 for a host no site names, purges and metrics by site; several servers behind
//! one backend, balanced, a failed one skipped and back once it answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use levee_test::{levee, Levee, Origin, Reply, Req};

/// An origin that says who it is, cacheable for a minute.
fn named(name: &'static str) -> Origin {
    Origin::start(move |r| {
        Reply::text(format!("{name} {}", r.path)).header("cache-control", "max-age=60")
    })
}

async fn get(levee: &Levee, host: &str, path: &str) -> levee_test::Resp {
    Req::get(path).header("host", host).send(levee).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sites_and_a_route_on_four_backends() {
    let (a, b, c, api) = (named("a"), named("b"), named("c"), named("api"));
    let files = tempfile::tempdir().unwrap();
    // As nginx's `root`: the whole path is looked up under it.
    std::fs::create_dir(files.path().join("files")).unwrap();
    std::fs::write(files.path().join("files/logo.txt"), "a file").unwrap();
    let config = format!(
        r#"
[[site]]
hosts = ["a.test", "www.a.test"]
backend = "{a}"
[[site.route]]
path = "/api/"
backend = "{api}"
[[site.route]]
path = "/files/"
static = true
root = "{files}"

[[site]]
name = "bee"
hosts = ["b.test"]
backend = "{b}"

[[site]]
hosts = ["*.c.test"]
backend = "{c}"
"#,
        a = a.url(),
        b = b.url(),
        c = c.url(),
        api = api.url(),
        files = files.path().display(),
    );
    let levee = levee!().config(&config).start();

    // Each host reaches its own backend; the same path on two sites is two entries.
    for (host, body) in [
        ("a.test", "a /page"),
        ("www.a.test", "a /page"),
        ("B.test.", "b /page"),
        ("x.c.test", "c /page"),
        ("deep.x.c.test", "c /page"),
    ] {
        let r = get(&levee, host, "/page").await;
        assert_eq!(
            (r.status.as_u16(), r.text()),
            (200, body.to_string()),
            "{host}"
        );
    }
    levee.wait_fills_done().await;
    let r = get(&levee, "b.test", "/page").await;
    assert_eq!(r.header("x-cache"), Some("HIT"), "{}", r.summary());
    assert_eq!(r.text(), "b /page");
    assert_eq!((a.requests(), b.requests(), c.requests()), (2, 1, 2));

    // The route: /api/ goes to its own backend, cached under the site's rules.
    let r = get(&levee, "a.test", "/api/users").await;
    assert_eq!(r.text(), "api /api/users");
    assert_eq!(a.requests_for("/api/users"), 0);
    levee.wait_fills_done().await;
    assert_eq!(
        get(&levee, "a.test", "/api/users").await.header("x-cache"),
        Some("HIT")
    );
    assert_eq!(api.requests(), 1);

    // Files only: a file, or 404 without asking the backend; other methods 405.
    let r = get(&levee, "a.test", "/files/logo.txt").await;
    assert_eq!((r.status.as_u16(), r.text()), (200, "a file".to_string()));
    let r = get(&levee, "a.test", "/files/missing.txt").await;
    assert_eq!(r.status, 404);
    let r = Req::post("/files/logo.txt", "x")
        .header("host", "a.test")
        .send(&levee)
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    assert_eq!(a.requests_for("/files/missing.txt"), 0);

    // No site names this host, and none is the default: 404 over cleartext.
    let r = get(&levee, "unknown.test", "/page").await;
    assert_eq!(r.status, 404, "{}", r.summary());
    assert_eq!(a.requests() + b.requests() + c.requests(), 5);

    // A purge reaches only the site its URL names.
    assert_eq!(levee.purge("url=http://b.test/page").await, 1);
    assert_eq!(
        get(&levee, "a.test", "/page").await.header("x-cache"),
        Some("HIT"),
        "a.test's /page is another entry"
    );
    assert_eq!(
        get(&levee, "b.test", "/page").await.header("x-cache"),
        Some("MISS")
    );

    // Metrics by site.
    let hits = levee
        .metric("levee_site_requests_total{site=\"a.test\",cache=\"hit\"}")
        .await;
    assert!(hits >= 2.0, "{hits}");
    assert!(
        levee
            .metric("levee_site_requests_total{site=\"bee\",cache=\"miss\"}")
            .await
            >= 2.0
    );
    assert_eq!(
        levee
            .metric("levee_site_backend_limit{site=\"a.test\",route=\"/api/\"}")
            .await,
        16.0,
        "the route's backend has a limit of its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_site_takes_unknown_hosts() {
    let (a, fallback) = (named("a"), named("fallback"));
    let config = format!(
        "[[site]]\nhosts = [\"a.test\"]\nbackend = \"{}\"\n[[site]]\nname = \"rest\"\ndefault = true\nbackend = \"{}\"\n",
        a.url(),
        fallback.url()
    );
    let levee = levee!().config(&config).start();
    assert_eq!(get(&levee, "a.test", "/").await.text(), "a /");
    assert_eq!(get(&levee, "other.test", "/").await.text(), "fallback /");
    // HTTP/1.0 without Host: the default site.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(levee.addr()).await.unwrap();
    conn.write_all(b"GET /x HTTP/1.0\r\n\r\n").await.unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).await.unwrap();
    assert!(got.ends_with("fallback /x"), "{got}");
}

/// An origin for balancing: counts requests, and answers its health check with 503
/// while `sick` is set.
fn server(sick: Arc<AtomicBool>) -> impl Fn(&levee_test::Recorded) -> Reply + Send + Sync {
    move |r| {
        if r.path == "/healthz" {
            return match sick.load(Ordering::SeqCst) {
                true => Reply::status(503),
                false => Reply::text("ok"),
            };
        }
        Reply::text("hello").header("cache-control", "no-store")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_servers_share_the_load_and_a_failed_one_is_skipped_until_it_answers() {
    let sick = Arc::new(AtomicBool::new(false));
    let one = Origin::start(server(sick.clone()));
    let two = Origin::start(server(Arc::new(AtomicBool::new(false))));
    let levee = levee!()
        .args(&["--backend", &one.url(), "--backend", &two.url()])
        .start();
    for _ in 0..20 {
        assert_eq!(levee.get("/p").await.status, 200);
    }
    assert!(
        one.requests() >= 5 && two.requests() >= 5,
        "both servers take requests: {} and {}",
        one.requests(),
        two.requests()
    );

    // Server one goes down: every request still succeeds (a refused GET is sent to the
    // other server), and it is out.
    let addr = one.addr();
    one.stop();
    for _ in 0..20 {
        let r = levee.get("/p").await;
        assert_eq!(r.status, 200, "{}", r.summary());
    }
    let up = format!("levee_backend_server_up{{site=\"default\",route=\"/\",server=\"{addr}\"}}");
    assert_eq!(levee.metric(&up).await, 0.0);
    assert!(
        levee
            .metric(&format!(
                "levee_backend_server_failures_total{{site=\"default\",route=\"/\",server=\"{addr}\"}}"
            ))
            .await
            >= 1.0
    );

    // It comes back on the same address: once its backoff ends a request tries it,
    // and it takes requests again.
    let back = Origin::start_on(addr, server(sick));
    // Polls with requests of its own: the backoff (1 s, then 2 s) ends on its own.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while back.requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server that came back gets no requests"
        );
        assert_eq!(levee.get("/p").await.status, 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    levee.wait_metric(&up, |v| v == 1.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_failing_its_health_check_is_taken_out_and_comes_back() {
    let sick = Arc::new(AtomicBool::new(false));
    let one = Origin::start(server(sick.clone()));
    let two = Origin::start(server(Arc::new(AtomicBool::new(false))));
    let levee = levee!()
        .args(&["--backend", &one.url(), "--backend", &two.url()])
        .config("health = \"/healthz\"")
        .start();
    let up = format!(
        "levee_backend_server_up{{site=\"default\",route=\"/\",server=\"{}\"}}",
        one.addr()
    );
    levee.wait_metric(&up, |v| v == 1.0).await;
    sick.store(true, Ordering::SeqCst);
    levee.wait_metric(&up, |v| v == 0.0).await;
    let before = one.requests_for("/p");
    for _ in 0..10 {
        assert_eq!(levee.get("/p").await.status, 200);
    }
    assert_eq!(
        one.requests_for("/p"),
        before,
        "a sick server gets no requests"
    );
    sick.store(false, Ordering::SeqCst);
    levee.wait_metric(&up, |v| v == 1.0).await;
    for _ in 0..10 {
        assert_eq!(levee.get("/p").await.status, 200);
    }
    assert!(one.requests_for("/p") > before, "back in the rotation");
}

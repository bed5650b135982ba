//! `/metrics` (issue 11): read by a Prometheus text-format parser, its counters match a
//! known sequence of requests.

use std::collections::HashMap;

use levee_test::{levee, Origin, RawConn, Recorded, Reply, Req};

/// `name{labels}` -> value, as a scraper reads them.
async fn scrape(levee: &levee_test::Levee) -> HashMap<String, f64> {
    let r = levee.admin(Req::get("/metrics")).await;
    assert_eq!(r.status, 200);
    let text = r.text();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{text}"));
    let mut out = HashMap::new();
    for s in scrape.samples {
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let name = if labels.is_empty() {
            s.metric.clone()
        } else {
            format!("{}{{{}}}", s.metric, labels.join(","))
        };
        let v = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(h) => h.iter().map(|c| c.count).fold(0.0, f64::max),
            prometheus_parse::Value::Summary(_) => continue,
        };
        out.insert(name, v);
    }
    assert!(!out.is_empty(), "no samples in:\n{text}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_count_a_known_sequence() {
    let origin = Origin::start(|r: &Recorded| match r.path.as_str() {
        "/a" => Reply::text("cached page").header("cache-control", "max-age=60"),
        "/missing" => Reply::status(404).header("cache-control", "no-store"),
        _ => Reply::text("personal"),
    });
    let levee = levee!().backend(&origin.url()).start();
    let before = scrape(&levee).await;
    assert_eq!(
        before.get("levee_fills_total").copied(),
        Some(0.0),
        "{before:?}"
    );

    assert_eq!(levee.get("/a").await.x_cache(), "MISS");
    // Stored once its fill is done (waiting on the metric, which makes no request).
    levee.wait_fills_done().await;
    for _ in 0..2 {
        assert_eq!(levee.get("/a").await.x_cache(), "HIT");
    }
    let r = levee.get_with("/p", &[("cookie", "PHPSESSID=x")]).await;
    assert_eq!(r.x_cache(), "PASS");
    assert_eq!(levee.get("/missing").await.status, 404);
    let mut c = RawConn::connect(levee.addr()).await;
    c.write(b"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        .await
        .unwrap();
    let out = c
        .read_until_closed(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert!(out.starts_with(b"HTTP/1.1 400"));
    levee.wait_fills_done().await;

    let m = scrape(&levee).await;
    let get = |k: &str| {
        m.get(k)
            .copied()
            .unwrap_or_else(|| panic!("no {k} in {m:#?}"))
    };
    assert_eq!(get("levee_requests_total{cache=hit,status=2xx}"), 2.0);
    assert_eq!(get("levee_requests_total{cache=miss,status=2xx}"), 1.0);
    assert_eq!(get("levee_requests_total{cache=pass,status=2xx}"), 1.0);
    assert_eq!(get("levee_requests_total{cache=miss,status=4xx}"), 1.0);
    assert_eq!(get("levee_requests_total{cache=error,status=4xx}"), 1.0);
    // /a filled once, /missing filled once, /p passed.
    assert_eq!(get("levee_fills_total"), 2.0, "{m:#?}");
    assert_eq!(get("levee_backend_requests_total{result=ok}"), 3.0);
    assert_eq!(get("levee_cache_stores_total"), 1.0);
    assert_eq!(get("levee_cache_objects"), 1.0);
    assert_eq!(get("levee_request_duration_seconds_count"), 6.0);
    assert!(get("levee_response_bytes_total") >= 3.0 * "cached page".len() as f64);
    assert_eq!(get("levee_fills_in_flight"), 0.0);
    assert_eq!(origin.requests(), 3);
}

/// The clock tests move is not there in production: without `LEVEE_TEST_CLOCK=1`,
/// `POST /clock` is an unknown path, and what is stored stays fresh.
#[tokio::test]
async fn the_clock_cannot_be_moved_outside_tests() {
    let origin = Origin::fixed(|| Reply::text("page").header("cache-control", "max-age=60"));
    let levee = levee!().backend(&origin.url()).without_test_clock().start();
    levee.get("/p").await;
    levee.wait_stored("/p").await;
    let r = levee.admin(Req::new("POST", "/clock?advance=1h")).await;
    assert_eq!(r.status, 404, "{}", r.summary());
    assert_eq!(levee.get("/p").await.x_cache(), "HIT");
    // And with it, the same request moves it: the test above is about the variable.
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/p").await;
    levee.wait_stored("/p").await;
    levee
        .advance_clock(std::time::Duration::from_secs(3600))
        .await;
    assert_eq!(levee.get("/p").await.x_cache(), "MISS");
}

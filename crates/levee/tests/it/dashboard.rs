//! The live dashboard (issue 11): `GET /` on the admin listener, opened in headless
//! Chromium while levee serves a load; its charts must move and its table must name the
//! URLs that were not served from the cache, with the reason.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use levee_test::{levee, tools, Origin, Recorded, Reply, Req};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_moves_under_load_in_headless_chromium() {
    let bin = levee_test::require!(tools::CHROMIUM);
    let origin = Origin::start(|r: &Recorded| match r.path.as_str() {
        "/cached" => Reply::text("<p>cached</p>")
            .header("content-type", "text/html")
            .header("cache-control", "max-age=600"),
        _ => Reply::text("<p>every time</p>")
            .header("content-type", "text/html")
            .header("cache-control", "no-store"),
    });
    let levee = levee!().backend(&origin.url()).start();
    let admin = levee.admin_addr().await;

    // A page of the dashboard itself, as a browser gets it.
    let page = Req::get("/").send_to(admin).await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    assert!(
        !page.text().contains("http://") && !page.text().contains("https://"),
        "external assets"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let addr = levee.addr();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for path in ["/cached", "/cached", "/cached", "/no-store-page"] {
                    Req::get(path).send_to(addr).await;
                }
                Req::get("/cookie")
                    .header("cookie", "PHPSESSID=abc")
                    .send_to(addr)
                    .await;
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{admin}/");
    let (dom, stderr) = tokio::task::spawn_blocking({
        let (bin, profile) = (bin.clone(), dir.path().join("profile"));
        move || {
            tools::run_chromium(
                &bin,
                &profile,
                &["--dump-dom", "--virtual-time-budget=6000"],
                &url,
            )
        }
    })
    .await
    .unwrap();
    let shot = dir.path().join("dashboard.png");
    let (_, shot_err) = tokio::task::spawn_blocking({
        let (bin, profile) = (bin.clone(), dir.path().join("profile2"));
        let url = format!("http://{admin}/");
        let arg = format!("--screenshot={}", shot.display());
        move || tools::run_chromium(&bin, &profile, &[&arg, "--virtual-time-budget=6000"], &url)
    })
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();

    let samples: u32 = dom
        .split("data-samples=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no samples in the page; stderr:\n{stderr}\n{dom}"));
    assert!(samples >= 3, "{samples} samples; stderr:\n{stderr}");
    assert!(
        dom.contains("data-moving=\"yes\""),
        "the charts did not move:\n{dom}"
    );
    for bad in ["Uncaught", "SyntaxError", "TypeError", "ReferenceError"] {
        assert!(!stderr.contains(bad), "console error {bad}:\n{stderr}");
    }
    // The table: the uncacheable page and the session request, with their reasons.
    assert!(
        dom.contains("/no-store-page") && dom.contains("no-store"),
        "{dom}"
    );
    assert!(dom.contains("/cookie") && dom.contains("PASS"), "{dom}");
    // The session cookie nobody gave out: its network is listed.
    assert!(dom.contains("data-unproven=\"1\""), "{dom}");
    assert!(dom.contains("127.0.0.0/24"), "{dom}");
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {shot_err}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("LEVEE_KEEP_DASHBOARD_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

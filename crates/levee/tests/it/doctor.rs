//! `levee doctor` (issue 24): against origins built to show one problem each, every
//! reason is named, and levee's verdict is what `levee serve` then does (X-Cache on a
//! second anonymous request); against the real applications from Debian (through a
//! levee that passes everything, as a plain HTTP front for php-fpm), the application is
//! named, the preset proposed, and the verdict under that preset is what levee serve
//! with it does. Exit status: 2 for bad arguments, 1 for a site that cannot be reached.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use levee_test::apps::{DokuWiki, MediaWiki, WordPress};
use levee_test::{levee, tools, Levee, Origin, Recorded, Reply};
use serde_json::Value;

/// `levee doctor ARGS`: (exit status, stdout, stderr), run off the async runtime.
async fn doctor(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_levee"))
            .arg("doctor")
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .expect("run levee doctor");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// `levee doctor --json ARGS`, parsed; the audit must have run.
async fn doctor_json(args: &[&str]) -> Value {
    let mut all = vec!["--json".to_string(), "--rate".into(), "100".into()];
    all.extend(args.iter().map(|s| s.to_string()));
    let (code, out, err) = doctor(all).await;
    assert_eq!(code, 0, "levee doctor failed: {err}\n{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn ids(url: &Value) -> Vec<String> {
    url["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// The X-Cache levee serve gives a second anonymous GET when doctor says `result`.
fn expected_x_cache(result: &str) -> &'static str {
    match result {
        "HIT" | "MICRO" => "HIT",
        "REVALIDATED" => "REVALIDATED",
        _ => "PASS",
    }
}

/// Two anonymous GETs of `path` through `levee`: the second's X-Cache must be what the
/// doctor's `verdict` (its `levee` object) says.
async fn serve_agrees(levee: &Levee, path: &str, verdict: &Value) {
    let result = verdict["result"].as_str().unwrap();
    let first = levee.get(path).await;
    if result == "HIT" || result == "MICRO" {
        levee.wait_stored(path).await;
    } else {
        levee.wait_fills_done().await;
    }
    let second = levee.get(path).await;
    assert_eq!(
        second.x_cache(),
        expected_x_cache(result),
        "{path}: doctor said {verdict}, levee serve answered {} then {}",
        first.summary(),
        second.summary()
    );
}

/// A page a shared cache can use well: fresh for a minute, an ETag answered with 304,
/// small, kept alive. Each case changes one thing.
fn good(r: &Recorded, change: &dyn Fn(Reply, &Recorded) -> Reply) -> Reply {
    if r.header("if-none-match") == Some("\"v1\"") {
        return change(Reply::status(304).header("etag", "\"v1\""), r);
    }
    let page = Reply::text("<html><body>hello</body></html>")
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "public, max-age=60")
        .header("etag", "\"v1\"");
    change(page, r)
}

type Change = Box<dyn Fn(Reply, &Recorded) -> Reply + Send + Sync>;

fn case(change: impl Fn(Reply, &Recorded) -> Reply + Send + Sync + 'static) -> Change {
    Box::new(change)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_problem_is_named_and_levee_serve_does_what_doctor_says() {
    let counter = Arc::new(AtomicUsize::new(0));
    let n = counter.clone();
    let cases: Vec<(&str, Change)> = vec![
        (
            "session-cookie",
            case(|p, r| p.header("set-cookie", &format!("PHPSESSID=s{}; path=/", r.n))),
        ),
        ("private", case(|p, _| p.header("cache-control", "private"))),
        (
            "no-store",
            case(|p, _| p.header("cache-control", "no-store")),
        ),
        (
            "no-freshness",
            case(|p, _| p.header("cache-control", "max-age=0")),
        ),
        ("vary-cookie", case(|p, _| p.header("vary", "Cookie"))),
        ("vary-star", case(|p, _| p.header("vary", "*"))),
        (
            "no-validator",
            case(|_, _| {
                Reply::text("<p>no validators</p>")
                    .header("content-type", "text/html")
                    .header("cache-control", "public, max-age=60")
            }),
        ),
        (
            "no-304",
            case(|p, r| {
                if r.header("if-none-match").is_some() {
                    Reply::text("<p>again</p>")
                        .header("content-type", "text/html")
                        .header("cache-control", "public, max-age=60")
                        .header("etag", "\"v1\"")
                } else {
                    p
                }
            }),
        ),
        (
            "no-compression",
            case(|p, r| {
                if r.header("if-none-match").is_some() {
                    p
                } else {
                    p.body("<p>".repeat(2000))
                }
            }),
        ),
        (
            "cookie-differs",
            case(move |p, _| {
                let v = n.fetch_add(1, Ordering::SeqCst);
                p.header("set-cookie", &format!("visits={v}; path=/"))
            }),
        ),
        (
            "no-keep-alive",
            case(|p, _| p.header("connection", "close")),
        ),
    ];

    // The page as it should be: nothing to say, storable, a HIT with levee.
    let origin = Origin::start(|r| good(r, &|p, _| p));
    let report = doctor_json(&[&origin.url()]).await;
    let page = &report["urls"][0];
    assert_eq!(ids(page), Vec::<String>::new(), "{page}");
    assert_eq!(page["storable"], true);
    assert_eq!(page["levee"]["result"], "HIT");
    assert!(page["ms"].as_f64().unwrap() > 0.0);
    assert_eq!(report["summary"]["levee_cached"], 1);

    for (id, change) in cases {
        let change = Arc::new(change);
        let c = change.clone();
        let origin = Origin::start(move |r| good(r, &|p, r| c(p, r)));
        let report = doctor_json(&[&format!("{}/page", origin.url())]).await;
        let page = &report["urls"][0];
        let found = ids(page);
        assert!(found.contains(&id.to_string()), "{id}: {page}");
        let levee = levee!().backend(&origin.url()).start();
        serve_agrees(&levee, "/page", &page["levee"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verdict_follows_serve_flags() {
    // A PHP page as XE or gnuboard sends it: a new session, no-store, no freshness.
    let origin = Origin::start(|r| {
        Reply::text("<html>forum</html>")
            .header("content-type", "text/html")
            .header("cache-control", "no-store, no-cache, must-revalidate")
            .header("expires", "Thu, 19 Nov 1981 08:52:00 GMT")
            .header("set-cookie", &format!("PHPSESSID=p{}; path=/", r.n))
    });
    let report = doctor_json(&[&origin.url()]).await;
    let page = &report["urls"][0];
    assert_eq!(page["levee"]["result"], "PASS", "{page}");
    assert_eq!(page["levee"]["reason"], "no-store");
    // No application recognised: the anonymous TTL is proposed, and would store it.
    assert_eq!(page["with_preset"]["result"], "HIT", "{page}");
    assert_eq!(
        report["summary"]["with_preset"]["flags"],
        "--anonymous-ttl 60s"
    );

    let report = doctor_json(&["--anonymous-ttl", "30s", &origin.url()]).await;
    let verdict = &report["urls"][0]["levee"];
    assert_eq!(verdict["result"], "HIT");
    assert_eq!(verdict["ttl_s"], 30);
    assert_eq!(verdict["reason"], "anonymous_ttl");
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--anonymous-ttl", "30s"])
        .start();
    serve_agrees(&levee, "/", verdict).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_status_2_for_bad_arguments_1_for_an_unreachable_site() {
    for args in [
        vec![],
        vec!["--rate", "0", "http://127.0.0.1/"],
        vec!["ftp://example.com/"],
        vec!["--cacert", "/nonexistent.pem", "https://127.0.0.1:1/"],
        vec!["--preset", "nosuchapp", "http://127.0.0.1/"],
        vec!["http://127.0.0.1:1/", "http://127.0.0.2:1/"],
    ] {
        let (code, _, err) = doctor(args.iter().map(|s| s.to_string()).collect()).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.is_empty());
    }
    let (code, _, err) = doctor(vec![format!("{}/", Origin::refusing_url())]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot be reached"), "{err}");
    assert!(
        err.contains("Connection refused") || err.contains("refused"),
        "{err}"
    );
}

/// levee as a plain HTTP front for php-fpm: every request passes, nothing compressed,
/// so the doctor sees the application's own headers.
fn plain_front(app_args: Vec<String>) -> Levee {
    let mut args = app_args;
    args.push("--no-compression".into());
    levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .config("[anonymous]\npass_paths = [\"*\"]\n")
        .start()
}

/// Audits the application through a plain front, checks the application and preset
/// named, then that levee serve with the preset does, page by page, what the doctor said
/// it would.
async fn audit_app(app_args: Vec<String>, start: &str, app: &str, preset: &str) -> Value {
    let front = plain_front(app_args.clone());
    let report = doctor_json(&["--crawl", "6", &front.url(start)]).await;
    assert_eq!(report["app"], app, "{report}");
    assert_eq!(report["preset"], preset, "{report}");
    assert_eq!(
        report["summary"]["with_preset"]["flags"],
        format!("--preset {preset}")
    );
    let (code, text, err) = doctor(vec!["--rate".into(), "100".into(), front.url(start)]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(app) && text.contains(&format!("--preset {preset}")),
        "{text}"
    );

    let mut args = app_args;
    args.extend(["--preset".into(), preset.into()]);
    let levee = levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .start();
    let urls = report["urls"].as_array().unwrap();
    assert!(urls.len() >= 2, "{report}");
    for u in urls.iter().filter(|u| u["status"] == 200) {
        let url = u["url"].as_str().unwrap();
        let path = &url[url.find("//").unwrap() + 2..];
        let path = &path[path.find('/').unwrap()..];
        serve_agrees(&levee, path, &u["with_preset"]).await;
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordpress_is_named_and_its_preset_does_what_doctor_says() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::MARIADB);
    levee_test::require!(tools::WORDPRESS);
    let site = WordPress::start();
    let report = audit_app(site.levee_args(), "/", "WordPress", "wordpress").await;
    let front = &report["urls"][0];
    assert!(ids(front).contains(&"no-freshness".to_string()), "{front}");
    assert_eq!(front["levee"]["result"], "PASS", "{front}");
    assert_eq!(front["with_preset"]["result"], "HIT", "{front}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dokuwiki_is_named_and_its_preset_does_what_doctor_says() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::DOKUWIKI);
    let wiki = DokuWiki::start();
    let report = audit_app(
        wiki.levee_args(),
        "/doku.php?id=start",
        "DokuWiki",
        "dokuwiki",
    )
    .await;
    let start = &report["urls"][0];
    let found = ids(start);
    assert!(found.contains(&"session-cookie".to_string()), "{start}");
    assert_eq!(start["with_preset"]["result"], "HIT", "{start}");
    // Its login and edit links are found by the crawl and always pass.
    let passing = report["summary"]["always_pass"].as_array().unwrap();
    assert!(
        passing.iter().any(|p| p["reason"] == "pass-path"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mediawiki_is_named_and_its_preset_does_what_doctor_says() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::MARIADB);
    levee_test::require!(tools::MEDIAWIKI);
    let wiki = MediaWiki::start();
    let report = audit_app(
        wiki.levee_args(),
        "/index.php/Main_Page",
        "MediaWiki",
        "mediawiki",
    )
    .await;
    let main = &report["urls"][0];
    // MediaWiki marks every page private for shared caches (it expects to purge a CDN
    // it is told about); its preset stores anonymous pages anyway.
    assert!(ids(main).contains(&"private".to_string()), "{main}");
    assert_ne!(main["levee"]["result"], "HIT", "{main}");
    assert_eq!(main["with_preset"]["result"], "HIT", "{main}");
}

/// `levee bench --doctor`: the audit of the URL goes into the bench's HTML report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_with_doctor_puts_the_audit_in_its_html_report() {
    let origin = Origin::fixed(|| {
        Reply::text("<p>a page</p>")
            .header("content-type", "text/html")
            .header("cache-control", "private")
    });
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let url = format!("{}/page", origin.url());
    let args = vec![
        "bench".to_string(),
        url,
        "-n".into(),
        "20".into(),
        "-c".into(),
        "2".into(),
        "--doctor".into(),
        "--quiet".into(),
        "--html".into(),
        html.display().to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .expect("run levee bench")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let section = page
        .split("<section class=\"appendix\"><h2>levee doctor</h2>")
        .nth(1)
        .unwrap_or_else(|| panic!("no doctor section in:\n{page}"));
    assert!(
        section.contains("private"),
        "the reason is there: {section}"
    );
    assert!(
        page.contains("id=\"chart-throughput\""),
        "the bench's own charts are still there"
    );
}

/// An https site: the doctor speaks TLS (trusting the test's CA with --cacert), and its
/// verdict is the same as over http.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_sites_are_audited() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let (ca, crt, k) = (
        dir.path().join("ca.pem"),
        dir.path().join("site.pem"),
        dir.path().join("site.key"),
    );
    std::fs::write(&ca, ca_cert.pem()).unwrap();
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    let origin = Origin::fixed(|| {
        Reply::text("<p>a page</p>")
            .header("content-type", "text/html")
            .header("cache-control", "max-age=60")
            .header("etag", "\"v1\"")
    });
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--listen-tls", "127.0.0.1:0"])
        .args(&[
            "--tls-cert",
            crt.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ])
        .start();
    let url = format!("https://localhost:{}/page", levee.tls_addr().await.port());
    let report = doctor_json(&["--cacert", ca.to_str().unwrap(), &url]).await;
    let page = &report["urls"][0];
    assert_eq!(page["status"], 200, "{report}");
    assert_eq!(page["url"], url.as_str(), "{report}");
    assert_eq!(page["storable"], true, "{report}");
    // Without the CA: the handshake fails, and the reason says what to do.
    let (code, _, err) = doctor(vec![url]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--cacert"), "{err}");
}

/// A proposal its own count shows does not help is not made: doctor says so and names
/// the cookie that keeps the pages out (issue 34: it recommended gnuboard's preset
/// while counting 0 of 20 pages cached).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_that_does_not_help_is_not_recommended_and_the_cookie_is_named() {
    let origin = Origin::start(|_| {
        Reply::text("<html><body>board</body></html>")
            .header("content-type", "text/html; charset=utf-8")
            .header("cache-control", "private, max-age=0")
            .header("set-cookie", "visit_counter=1; path=/")
    });
    let report = doctor_json(&[&format!("{}/", origin.url())]).await;
    let fixes: Vec<&str> = report["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !fixes.iter().any(|f| f.starts_with("run levee serve")),
        "{fixes:?}"
    );
    assert!(
        fixes
            .iter()
            .any(|f| f.contains("does not help here") && f.contains("visit_counter")),
        "{fixes:?}"
    );
    // A visitor who kept that cookie passes.
    assert_eq!(
        report["urls"][0]["returning_passes_with"], "visit_counter",
        "{report}"
    );
}

/// A returning visitor of MoniWiki (its trail cookie sent back) is served as a new one
/// under the preset doctor proposes; recognised by the cookie alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_visitor_with_only_a_visitor_cookie_is_served_from_the_cache() {
    let origin = Origin::start(|_| {
        Reply::text("<html><body>FrontPage</body></html>")
            .header("content-type", "text/html; charset=UTF-8")
            .header("cache-control", "public, max-age=0, must-revalidate")
            .header("set-cookie", "MONI_TRAIL=FrontPage; path=/wiki.php")
    });
    let report = doctor_json(&[&format!("{}/wiki.php/FrontPage", origin.url())]).await;
    assert_eq!(report["preset"], "moniwiki", "{report}");
    let page = &report["urls"][0];
    assert_eq!(page["with_preset"]["result"], "HIT", "{page}");
    assert!(page["returning_passes_with"].is_null(), "{page}");
}

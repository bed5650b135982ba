//! The anonymous TTL: anonymous pages are reused despite the application's own headers
//! (private, no-store, max-age=0, PHP's session headers), safely: never for a session,
//! never with another visitor's cookie, and browsers still get the application's
//! Cache-Control.

use levee_test::{levee, Origin, Reply};

/// An origin answering like the real applications do (issue 9's table).
fn app_origin() -> Origin {
    Origin::start(|r| {
        let who = r
            .cookie("DokuWiki")
            .map_or("guest".to_string(), |s| format!("session {s}"));
        let body = format!("{} #{} for {who}", r.path, r.n);
        let html = |reply: Reply| reply.header("content-type", "text/html; charset=utf-8");
        match r.path.as_str() {
            // MediaWiki to anonymous readers.
            "/mediawiki" => html(Reply::text(body))
                .header("cache-control", "private, must-revalidate, max-age=0")
                .header("vary", "Accept-Encoding, Cookie"),
            // WordPress: nothing at all.
            "/wordpress" => html(Reply::text(body)),
            // DokuWiki: no-store and a new session on every page.
            "/dokuwiki" => html(Reply::text(body))
                .header("cache-control", "no-store, no-cache, must-revalidate")
                .header("expires", "Thu, 19 Nov 1981 08:52:00 GMT")
                .header(
                    "set-cookie",
                    &format!("DokuWiki=s{}; path=/; HttpOnly", r.n),
                ),
            // A preference cookie: the page is the visitor's.
            "/lang" => html(Reply::text(body)).header("set-cookie", "lang=ko; path=/"),
            "/json" => Reply::text(body)
                .header("content-type", "application/json")
                .header("cache-control", "private"),
            _ => html(Reply::text(body)),
        }
    })
}

#[tokio::test]
async fn anonymous_pages_are_reused_whatever_the_application_says() {
    let origin = app_origin();
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--anonymous-ttl", "60s", "--preset", "dokuwiki"])
        .debug_headers()
        .start();
    for path in ["/mediawiki", "/wordpress", "/dokuwiki"] {
        let first = levee.get(path).await;
        assert_eq!(first.x_cache(), "MISS", "{path}: {}", first.summary());
        assert_eq!(first.reason(), "stored", "{path}: {}", first.summary());
        levee.wait_stored(path).await;
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "HIT", "{path}: {}", r.summary());
        assert_eq!(r.text(), first.text(), "{path}");
        // No session cookie handed out to anybody, the first visitor included.
        assert!(
            first.header("set-cookie").is_none(),
            "{path}: {:?}",
            first.headers
        );
        assert!(r.header("set-cookie").is_none(), "{path}: {:?}", r.headers);
        assert_eq!(origin.requests_for(path), 1, "{path}");
    }
    // Browsers still get the application's own Cache-Control.
    let r = levee.get("/mediawiki").await;
    assert_eq!(
        r.header("cache-control"),
        Some("private, must-revalidate, max-age=0")
    );
    // A session (here DokuWiki's, from the preset) always reaches the application.
    let r = levee
        .get_with("/dokuwiki", &[("cookie", "DokuWiki=admin")])
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert!(r.text().ends_with("for session admin"), "{}", r.summary());
    // Not overridden: a cookie that is not a session's, and what is not HTML.
    for path in ["/lang", "/json"] {
        levee.get(path).await;
        levee.wait_fills_done().await;
        let r = levee.get(path).await;
        assert_ne!(r.x_cache(), "HIT", "{path}: {}", r.summary());
    }
}

#[tokio::test]
async fn without_the_anonymous_ttl_the_application_is_obeyed() {
    let origin = app_origin();
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    for (path, reason) in [
        ("/mediawiki", "private"),
        ("/wordpress", "no-freshness-no-validator"),
        ("/dokuwiki", "no-store"),
    ] {
        let r = levee.get(path).await;
        assert_eq!(r.reason(), reason, "{path}: {}", r.summary());
        levee.wait_fills_done().await;
        let r = levee.get(path).await;
        assert_ne!(r.x_cache(), "HIT", "{path}: {}", r.summary());
    }
}

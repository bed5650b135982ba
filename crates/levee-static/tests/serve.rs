//! `StaticFiles::serve` against real files in a temp dir, one behaviour per test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use http::{Method, StatusCode};
use http_body::Body;
use levee_static::{Error, Outcome, StaticConfig, StaticFiles};

use common::*;

// ---- path safety -------------------------------------------------------------------

#[tokio::test]
async fn traversal_attempts_are_forbidden() {
    let s = site();
    for uri in [
        "/../secret.txt",
        "/../etc/passwd",
        "/%2e%2e/secret.txt",
        "/%2E%2E/etc/passwd",
        "/a/%2e%2e/%2e%2e/secret.txt",
        "/blog/%2e%2e/%2e%2e/secret.txt",
        "/..%2f..%2fsecret.txt",
        "/blog%2f..%2f..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/blog/..%5c..%5csecret.txt",
        "/style.css%00.png",
        "/%00",
        "/./style.css",
    ] {
        let outcome = get(&s.files, uri).await;
        assert!(matches!(outcome, Outcome::Forbidden), "{uri}: {outcome:?}");
    }
}

#[tokio::test]
async fn a_raw_backslash_is_forbidden() {
    let s = site();
    // http::Uri (and so hyper) accepts `\` in a path: this is the only line of defence.
    let mut p = parts(Method::GET, "/", &[]);
    p.uri = http::Uri::try_from("/blog\\..\\..\\secret.txt").unwrap();
    assert!(matches!(s.files.serve(&p).await, Outcome::Forbidden));
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_the_root_are_forbidden() {
    let s = site();
    assert!(matches!(
        get(&s.files, "/leak.txt").await,
        Outcome::Forbidden
    ));
    assert!(matches!(
        get(&s.files, "/etc-link/passwd").await,
        Outcome::Forbidden
    ));
    assert!(matches!(
        get(&s.files, "/etc-link/").await,
        Outcome::Forbidden
    ));
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_inside_the_root_are_followed_under_the_same_rules() {
    let s = site();
    let r = response(get(&s.files, "/alias.css").await);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await, STYLE);
    let r = response(get(&s.files, "/blog-alias/").await);
    assert_eq!(body(r).await, "<h1>blog</h1>");
    // A link may not give a hidden file or PHP source a public name.
    assert!(matches!(
        get(&s.files, "/env.txt").await,
        Outcome::Forbidden
    ));
    assert!(matches!(
        get(&s.files, "/config.txt").await,
        Outcome::Forbidden
    ));
}

/// Debian's layout: `lib/tpl -> /var/lib/dokuwiki/lib/tpl`. A link into a directory
/// the site names is followed, under the same rules relative to it; a link elsewhere,
/// and a hidden file or PHP source reached through a named one, are still refused.
#[cfg(unix)]
#[tokio::test]
async fn links_into_named_directories_are_followed_under_the_same_rules() {
    let outer = tempfile::tempdir().unwrap();
    let (root, var, elsewhere) = (
        outer.path().join("share"),
        outer.path().join("var/lib"),
        outer.path().join("etc"),
    );
    write(&root.join("doku.php"), "<?php");
    write(&var.join("tpl/logo.png"), "png");
    write(&var.join("tpl/.env"), "SECRET=1");
    write(&var.join("tpl/main.php"), "<?php $secret = 1;");
    write(&elsewhere.join("passwd"), "root:x:0:0");
    std::os::unix::fs::symlink(var.join("tpl"), root.join("tpl")).unwrap();
    std::os::unix::fs::symlink(var.join("tpl/.env"), root.join("env.txt")).unwrap();
    std::os::unix::fs::symlink(var.join("tpl/main.php"), root.join("main.txt")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("etc")).unwrap();
    let files = |link_dirs: Vec<std::path::PathBuf>| {
        StaticFiles::new(StaticConfig {
            link_dirs,
            ..StaticConfig::new(&root)
        })
        .unwrap()
    };
    // Without naming it, as before: refused.
    let closed = files(vec![]);
    assert!(matches!(
        get(&closed, "/tpl/logo.png").await,
        Outcome::Forbidden
    ));
    let open = files(vec![var.clone()]);
    let r = response(get(&open, "/tpl/logo.png").await);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await, "png");
    for refused in ["/env.txt", "/main.txt", "/etc/passwd", "/tpl/.env"] {
        let outcome = get(&open, refused).await;
        assert!(
            matches!(outcome, Outcome::Forbidden),
            "{refused}: {outcome:?}"
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_root_that_is_a_symlink_follows_a_deploy_switch() {
    let outer = tempfile::tempdir().unwrap();
    write(&outer.path().join("r1/v.txt"), "one");
    write(&outer.path().join("r2/v.txt"), "two");
    let current = outer.path().join("current");
    std::os::unix::fs::symlink("r1", &current).unwrap();
    let mut config = StaticConfig::new(&current);
    config.revalidate_every = Duration::from_millis(100);
    let files = StaticFiles::new(config).unwrap();
    assert_eq!(body(response(get(&files, "/v.txt").await)).await, "one");
    // Atomic switch, as deploy tools do it.
    std::os::unix::fs::symlink("r2", outer.path().join("next")).unwrap();
    std::fs::rename(outer.path().join("next"), &current).unwrap();
    // Seen once the root is revalidated (every 100 ms here).
    eventually(async || match get(&files, "/v.txt").await {
        Outcome::Response(r) => body(r).await == "two",
        _ => false,
    })
    .await;
}

#[tokio::test]
async fn dotfiles_are_forbidden_but_well_known_is_served() {
    let s = site();
    for uri in [
        "/.env",
        "/.htaccess",
        "/.git/config",
        "/.git/",
        "/blog/.env",
        "/%2eenv",
    ] {
        let outcome = get(&s.files, uri).await;
        assert!(matches!(outcome, Outcome::Forbidden), "{uri}: {outcome:?}");
    }
    let r = response(get(&s.files, "/.well-known/security.txt").await);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await, "Contact: x");
}

#[tokio::test]
async fn php_is_never_sent_as_text() {
    let s = site();
    for (uri, script) in [
        ("/wp-config.php", "/wp-config.php"),
        ("/UPPER.PHP", "/UPPER.PHP"),
        ("/page.phtml", "/page.phtml"),
        ("/wp-config.PhP", "/wp-config.PhP"),
        ("/missing.php5", "/missing.php5"),
        ("/x.phar", "/x.phar"),
        ("/index.php/feed/atom", "/index.php"),
        ("/wp-config%2ephp", "/wp-config.php"),
    ] {
        match get(&s.files, uri).await {
            Outcome::Php { script: s } => assert_eq!(s, script, "{uri}"),
            other => panic!("{uri}: {other:?}"),
        }
    }
    // Also for other methods: the caller may send a POST here first.
    assert!(matches!(
        req(&s.files, Method::POST, "/wp-login.php", &[]).await,
        Outcome::Php { .. }
    ));
    for uri in ["/wp-config.php.bak", "/wp-config.php~", "/shell.php.png"] {
        let outcome = get(&s.files, uri).await;
        assert!(matches!(outcome, Outcome::Forbidden), "{uri}: {outcome:?}");
    }
}

#[tokio::test]
async fn missing_files_are_not_found() {
    let s = site();
    for uri in [
        "/nope.css",
        "/2024/05/my-post/",
        "/style.css/",
        "/style.css/x",
        "/blog/nope",
    ] {
        let outcome = get(&s.files, uri).await;
        assert!(matches!(outcome, Outcome::NotFound), "{uri}: {outcome:?}");
    }
}

// ---- headers -----------------------------------------------------------------------

#[tokio::test]
async fn content_types_by_extension() {
    let s = site();
    for (uri, ct) in [
        ("/index.html", "text/html; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/robots.txt", "text/plain; charset=utf-8"),
        ("/logo.png", "image/png"),
        ("/font.woff2", "font/woff2"),
        ("/data.json", "application/json"),
        ("/README", "application/octet-stream"),
    ] {
        let r = response(get(&s.files, uri).await);
        assert_eq!(header(&r, "content-type"), Some(ct), "{uri}");
        assert_eq!(header(&r, "x-content-type-options"), Some("nosniff"));
    }
    let r = response(get(&s.files, "/app.js").await);
    let ct = header(&r, "content-type").unwrap();
    assert!(
        ct.contains("javascript") && ct.ends_with("; charset=utf-8"),
        "{ct}"
    );
}

#[tokio::test]
async fn validators_and_lengths() {
    let s = site();
    let r = response(get(&s.files, "/style.css").await);
    assert_eq!(r.status(), StatusCode::OK);
    let etag = format!("\"{:x}-{:x}\"", MTIME, STYLE.len());
    assert_eq!(header(&r, "etag"), Some(etag.as_str()));
    assert_eq!(etag, "\"6553f100-16\"");
    assert_eq!(
        header(&r, "last-modified"),
        Some("Tue, 14 Nov 2023 22:13:20 GMT")
    );
    assert_eq!(header(&r, "content-length"), Some("22"));
    assert_eq!(header(&r, "accept-ranges"), Some("bytes"));
    assert!(header(&r, "date").is_none(), "Date is the server's job");
    assert_eq!(body(r).await, STYLE);
}

#[tokio::test]
async fn cache_control_long_for_assets_no_cache_for_the_rest() {
    let s = site();
    // The same list as `levee serve`'s defaults (levee-config), text and data included.
    for uri in [
        "/style.css",
        "/logo.png",
        "/app.js",
        "/font.woff2",
        "/robots.txt",
        "/data.json",
    ] {
        let r = response(get(&s.files, uri).await);
        assert_eq!(
            header(&r, "cache-control"),
            Some("public, max-age=604800"),
            "{uri}"
        );
    }
    for uri in ["/index.html", "/README"] {
        let r = response(get(&s.files, uri).await);
        assert_eq!(header(&r, "cache-control"), Some("no-cache"), "{uri}");
    }
    let s = site_with(|c| {
        c.asset_max_age = Duration::from_secs(60);
        c.asset_extensions = vec![".TXT".into()];
    });
    let r = response(get(&s.files, "/robots.txt").await);
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=60"));
    let r = response(get(&s.files, "/style.css").await);
    assert_eq!(header(&r, "cache-control"), Some("no-cache"));
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() {
    let s = site();
    let g = response(get(&s.files, "/style.css").await);
    let h = response(req(&s.files, Method::HEAD, "/style.css", &[]).await);
    assert_eq!(h.status(), StatusCode::OK);
    for name in [
        "content-type",
        "content-length",
        "etag",
        "last-modified",
        "cache-control",
        "accept-ranges",
    ] {
        assert_eq!(header(&h, name), header(&g, name), "{name}");
    }
    assert!(h.body().is_end_stream());
    assert_eq!(body(h).await.len(), 0);
    // HEAD ignores Range (RFC 9110 §14.2: only GET has ranges).
    let h = response(
        req(
            &s.files,
            Method::HEAD,
            "/style.css",
            &[("range", "bytes=0-1")],
        )
        .await,
    );
    assert_eq!(h.status(), StatusCode::OK);
}

#[tokio::test]
async fn other_methods_get_405_with_allow() {
    let s = site();
    for (method, uri) in [
        (Method::POST, "/style.css"),
        (Method::PUT, "/blog"),
        (Method::DELETE, "/blog/"),
    ] {
        let r = response(req(&s.files, method, uri, &[]).await);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{uri}");
        assert_eq!(header(&r, "allow"), Some("GET, HEAD"));
    }
    // A POST to a pretty URL is the front controller's: not ours to refuse.
    assert!(matches!(
        req(&s.files, Method::POST, "/wp-json/x", &[]).await,
        Outcome::NotFound
    ));
}

// ---- conditional requests ----------------------------------------------------------

const ETAG: &str = "\"6553f100-16\"";
const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
const BEFORE_LM: &str = "Tue, 14 Nov 2023 22:13:19 GMT";

async fn status(s: &Site, headers: &[(&str, &str)]) -> StatusCode {
    response(req(&s.files, Method::GET, "/style.css", headers).await).status()
}

#[tokio::test]
async fn if_none_match_gives_304_with_validators_and_no_body() {
    let s = site();
    let r = response(
        req(
            &s.files,
            Method::GET,
            "/style.css",
            &[("if-none-match", ETAG)],
        )
        .await,
    );
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&r, "etag"), Some(ETAG));
    assert_eq!(header(&r, "last-modified"), Some(LM));
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=604800"));
    assert!(r.body().is_end_stream());
    assert_eq!(body(r).await.len(), 0);

    let nm = StatusCode::NOT_MODIFIED;
    assert_eq!(
        status(&s, &[("if-none-match", "W/\"6553f100-16\"")]).await,
        nm,
        "weak comparison"
    );
    assert_eq!(
        status(&s, &[("if-none-match", "\"a\", \"6553f100-16\"")]).await,
        nm
    );
    assert_eq!(status(&s, &[("if-none-match", "*")]).await, nm);
    assert_eq!(
        status(&s, &[("if-none-match", "\"other\"")]).await,
        StatusCode::OK
    );
    let h = response(
        req(
            &s.files,
            Method::HEAD,
            "/style.css",
            &[("if-none-match", ETAG)],
        )
        .await,
    );
    assert_eq!(h.status(), nm);
}

#[tokio::test]
async fn if_modified_since_only_without_if_none_match() {
    let s = site();
    let nm = StatusCode::NOT_MODIFIED;
    assert_eq!(status(&s, &[("if-modified-since", LM)]).await, nm);
    assert_eq!(status(&s, &[("if-modified-since", &now_plus(0))]).await, nm);
    assert_eq!(
        status(&s, &[("if-modified-since", BEFORE_LM)]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&s, &[("if-modified-since", "garbage")]).await,
        StatusCode::OK
    );
    // If-None-Match present and not matching: the file changed, whatever the date says.
    assert_eq!(
        status(
            &s,
            &[("if-none-match", "\"old\""), ("if-modified-since", LM)]
        )
        .await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn if_match_and_if_unmodified_since_give_412() {
    let s = site();
    let failed = StatusCode::PRECONDITION_FAILED;
    assert_eq!(status(&s, &[("if-match", ETAG)]).await, StatusCode::OK);
    assert_eq!(status(&s, &[("if-match", "*")]).await, StatusCode::OK);
    assert_eq!(status(&s, &[("if-match", "\"other\"")]).await, failed);
    assert_eq!(
        status(&s, &[("if-match", "W/\"6553f100-16\"")]).await,
        failed,
        "strong comparison"
    );
    assert_eq!(
        status(&s, &[("if-unmodified-since", LM)]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&s, &[("if-unmodified-since", BEFORE_LM)]).await,
        failed
    );
    // If-Match is evaluated first and, when present, If-Unmodified-Since is not.
    assert_eq!(
        status(
            &s,
            &[("if-match", ETAG), ("if-unmodified-since", BEFORE_LM)]
        )
        .await,
        StatusCode::OK
    );
    // 412 comes before 304 (step 1 before step 3).
    assert_eq!(
        status(&s, &[("if-match", "\"other\""), ("if-none-match", ETAG)]).await,
        failed
    );
    // A precondition that fails ends the matter before Range.
    assert_eq!(
        status(&s, &[("if-match", "\"other\""), ("range", "bytes=0-1")]).await,
        failed
    );
}

// ---- ranges ------------------------------------------------------------------------

async fn ranged(
    s: &Site,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Option<String>, bytes::Bytes) {
    let r = response(req(&s.files, Method::GET, uri, headers).await);
    let status = r.status();
    let cr = header(&r, "content-range").map(str::to_string);
    let len: Option<usize> = header(&r, "content-length").map(|v| v.parse().unwrap());
    let b = body(r).await;
    assert_eq!(len, Some(b.len()), "Content-Length matches the body");
    (status, cr, b)
}

#[tokio::test]
async fn single_ranges_in_each_form() {
    let s = site();
    let all = pattern(100);
    let pc = StatusCode::PARTIAL_CONTENT;
    let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", "bytes=0-9")]).await;
    assert_eq!(
        (st, cr.as_deref(), &b[..]),
        (pc, Some("bytes 0-9/100"), &all[0..10])
    );
    let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", "bytes=90-")]).await;
    assert_eq!(
        (st, cr.as_deref(), &b[..]),
        (pc, Some("bytes 90-99/100"), &all[90..])
    );
    let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", "bytes=-5")]).await;
    assert_eq!(
        (st, cr.as_deref(), &b[..]),
        (pc, Some("bytes 95-99/100"), &all[95..])
    );
    let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", "bytes=50-500")]).await;
    assert_eq!(
        (st, cr.as_deref(), &b[..]),
        (pc, Some("bytes 50-99/100"), &all[50..])
    );
    let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", "bytes=-500")]).await;
    assert_eq!(
        (st, cr.as_deref(), &b[..]),
        (pc, Some("bytes 0-99/100"), &all[..])
    );
}

#[tokio::test]
async fn unsatisfiable_ranges_get_416() {
    let s = site();
    for range in ["bytes=100-", "bytes=100-200", "bytes=-0"] {
        let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", range)]).await;
        assert_eq!(st, StatusCode::RANGE_NOT_SATISFIABLE, "{range}");
        assert_eq!(cr.as_deref(), Some("bytes */100"));
        assert!(b.is_empty());
    }
}

#[tokio::test]
async fn malformed_and_multiple_ranges_get_the_whole_file() {
    let s = site();
    for range in [
        "bytes=9-1",
        "bytes=x-y",
        "bytes=",
        "lines=1-2",
        "bytes=0-1,5-6",
        "bytes 0-1",
    ] {
        let (st, cr, b) = ranged(&s, "/hundred.txt", &[("range", range)]).await;
        assert_eq!((st, cr, b.len()), (StatusCode::OK, None, 100), "{range}");
    }
    // An empty file has no bytes to range over.
    let (st, _, b) = ranged(&s, "/empty.txt", &[("range", "bytes=0-1")]).await;
    assert_eq!((st, b.len()), (StatusCode::OK, 0));
}

#[tokio::test]
async fn if_range_matches_or_falls_back_to_200() {
    let s = site();
    let (st, _, b) = ranged(
        &s,
        "/style.css",
        &[("range", "bytes=0-3"), ("if-range", ETAG)],
    )
    .await;
    assert_eq!(
        (st, &b[..]),
        (StatusCode::PARTIAL_CONTENT, &STYLE.as_bytes()[..4])
    );
    let (st, _, b) = ranged(
        &s,
        "/style.css",
        &[("range", "bytes=0-3"), ("if-range", LM)],
    )
    .await;
    assert_eq!((st, b.len()), (StatusCode::PARTIAL_CONTENT, 4));
    for stale in ["\"changed\"", "W/\"6553f100-16\"", BEFORE_LM, "garbage"] {
        let (st, cr, b) = ranged(
            &s,
            "/style.css",
            &[("range", "bytes=0-3"), ("if-range", stale)],
        )
        .await;
        assert_eq!(
            (st, cr, &b[..]),
            (StatusCode::OK, None, STYLE.as_bytes()),
            "{stale}"
        );
    }
}

// ---- directories -------------------------------------------------------------------

#[tokio::test]
async fn a_directory_without_slash_redirects_keeping_the_query() {
    let s = site();
    let r = response(get(&s.files, "/blog").await);
    assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/blog/"));
    let r = response(get(&s.files, "/blog?page=2&x=%20").await);
    assert_eq!(header(&r, "location"), Some("/blog/?page=2&x=%20"));
    // `//blog` must not become the protocol-relative `//blog/`.
    let r = response(get(&s.files, "//blog").await);
    assert_eq!(header(&r, "location"), Some("/blog/"));
    let r = response(get(&s.files, "/app").await);
    assert_eq!(header(&r, "location"), Some("/app/"));
    let r = response(req(&s.files, Method::HEAD, "/blog", &[]).await);
    assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
}

#[tokio::test]
async fn a_directory_serves_its_index_or_goes_to_php() {
    let s = site();
    let r = response(get(&s.files, "/").await);
    assert_eq!(body(r).await, "<h1>home</h1>");
    let r = response(get(&s.files, "/blog/").await);
    assert_eq!(header(&r, "content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(body(r).await, "<h1>blog</h1>");
    match get(&s.files, "/app/").await {
        Outcome::Php { script } => assert_eq!(script, "/app/index.php"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        get(&s.files, "/noindex/").await,
        Outcome::NotFound
    ));

    let s = site_with(|c| c.index = vec!["index.php".into(), "index.html".into()]);
    assert!(matches!(get(&s.files, "/app/").await, Outcome::Php { .. }));
    assert_eq!(
        body(response(get(&s.files, "/blog/").await)).await,
        "<h1>blog</h1>"
    );
}

/// Waits (polling every 10 ms, 5 s at most) until `cond` holds: files are re-checked on
/// disk every `revalidate_every`, so a change is seen some time after it is made.
async fn eventually(cond: impl AsyncFn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !cond().await {
        assert!(
            std::time::Instant::now() < deadline,
            "the change on disk was not seen within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- memory cache ------------------------------------------------------------------

#[tokio::test]
async fn a_cached_file_is_served_from_memory_until_revalidated() {
    // Generous, so a stalled CI machine does not revalidate before the second request.
    let s = site_with(|c| c.revalidate_every = Duration::from_secs(1));
    let path = s.root().join("news.html");
    write(&path, "v1");
    let first = response(get(&s.files, "/news.html").await);
    let etag1 = header(&first, "etag").unwrap().to_string();
    assert_eq!(body(first).await, "v1");

    write(&path, "version two");
    // Within revalidate_every nothing is read from disk: the old bytes are still served.
    assert_eq!(
        body(response(get(&s.files, "/news.html").await)).await,
        "v1"
    );

    // After revalidate_every, the new version (waited for, not slept for).
    eventually(async || {
        let r = response(get(&s.files, "/news.html").await);
        header(&r, "etag").is_some_and(|e| e != etag1)
    })
    .await;
    let r = response(get(&s.files, "/news.html").await);
    assert_ne!(header(&r, "etag").unwrap(), etag1);
    assert_eq!(header(&r, "content-length"), Some("11"));
    assert_eq!(body(r).await, "version two");

    // A deleted file disappears too, and a new one appears.
    std::fs::remove_file(&path).unwrap();
    eventually(async || matches!(get(&s.files, "/news.html").await, Outcome::NotFound)).await;
    write(&path, "back");
    eventually(async || match get(&s.files, "/news.html").await {
        Outcome::Response(r) => body(r).await == "back",
        _ => false,
    })
    .await;
}

#[tokio::test]
async fn a_rewrite_that_keeps_size_and_mtime_is_still_seen() {
    let s = site_with(|c| c.revalidate_every = Duration::from_millis(100));
    let path = s.root().join("same.txt");
    write(&path, "aaaa");
    set_mtime(&path, MTIME);
    let first = response(get(&s.files, "/same.txt").await);
    let old_etag = header(&first, "etag").unwrap().to_string();
    assert_eq!(body(first).await, "aaaa");
    // Like `cp -p` or `rsync -a`: same size, old mtime restored; the ctime moves.
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(&path, "bbbb");
    set_mtime(&path, MTIME);
    eventually(async || match get(&s.files, "/same.txt").await {
        Outcome::Response(r) => body(r).await == "bbbb",
        _ => false,
    })
    .await;
    let second = response(get(&s.files, "/same.txt").await);
    // nginx's tag (mtime second, length) would not change: the new version needs its own,
    // or the old one would validate it (304) and splice it into ranges (If-Range).
    let new_etag = header(&second, "etag").unwrap().to_string();
    assert_ne!(new_etag, old_etag);
    assert_eq!(body(second).await, "bbbb");
    let r = response(
        req(
            &s.files,
            Method::GET,
            "/same.txt",
            &[("if-none-match", &old_etag)],
        )
        .await,
    );
    assert_eq!(r.status(), StatusCode::OK);
    let r = response(
        req(
            &s.files,
            Method::GET,
            "/same.txt",
            &[("range", "bytes=2-3"), ("if-range", &old_etag)],
        )
        .await,
    );
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "a range of the new bytes for the old tag"
    );
    let r = response(
        req(
            &s.files,
            Method::GET,
            "/same.txt",
            &[("if-none-match", &new_etag)],
        )
        .await,
    );
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn with_the_memory_cache_off_every_request_sees_the_disk() {
    let s = site_with(|c| c.memory_cache = 0);
    let path = s.root().join("live.txt");
    write(&path, "1");
    assert_eq!(body(response(get(&s.files, "/live.txt").await)).await, "1");
    write(&path, "22");
    assert_eq!(body(response(get(&s.files, "/live.txt").await)).await, "22");
}

// ---- big files ---------------------------------------------------------------------

#[tokio::test]
async fn a_big_file_streams_intact_in_bounded_chunks() {
    let s = site();
    let data = pattern(5 * 1024 * 1024 + 12345);
    write(&s.root().join("video.mp4"), &data);
    let r = response(get(&s.files, "/video.mp4").await);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        header(&r, "content-length"),
        Some(data.len().to_string().as_str())
    );
    assert_eq!(header(&r, "content-type"), Some("video/mp4"));
    let mut body = r.into_body();
    let mut got = Vec::with_capacity(data.len());
    let mut frames = 0;
    while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
        let chunk = frame.unwrap().into_data().unwrap();
        assert!(
            !chunk.is_empty() && chunk.len() <= 256 * 1024,
            "chunk of {}",
            chunk.len()
        );
        got.extend_from_slice(&chunk);
        frames += 1;
    }
    assert!(frames >= 20, "{frames} frames");
    assert!(
        got == data,
        "the streamed file differs from the one on disk"
    );
}

#[tokio::test]
async fn a_big_file_serves_ranges_from_disk() {
    let s = site();
    let data = pattern(3 * 1024 * 1024);
    write(&s.root().join("big.bin"), &data);
    let (st, cr, b) = ranged(&s, "/big.bin", &[("range", "bytes=1000000-2500000")]).await;
    assert_eq!(st, StatusCode::PARTIAL_CONTENT);
    assert_eq!(cr.as_deref(), Some("bytes 1000000-2500000/3145728"));
    assert!(b[..] == data[1_000_000..=2_500_000]);
    let (_, _, b) = ranged(&s, "/big.bin", &[("range", "bytes=-100")]).await;
    assert!(b[..] == data[data.len() - 100..]);
    let (st, _, b) = ranged(&s, "/big.bin", &[]).await;
    assert_eq!((st, b.len()), (StatusCode::OK, data.len()));
}

#[tokio::test]
async fn a_big_file_replaced_within_revalidate_every_is_never_sent_half_old() {
    let s = site_with(|c| c.revalidate_every = Duration::from_secs(3600));
    let path = s.root().join("big.bin");
    write(&path, pattern(2 * 1024 * 1024));
    let r = response(get(&s.files, "/big.bin").await);
    assert_eq!(body(r).await.len(), 2 * 1024 * 1024);
    // Replaced by rename, as deploys and uploads do; the cached metadata is now wrong.
    let new = pattern(3 * 1024 * 1024 + 1);
    write(&s.root().join("big.tmp"), &new);
    std::fs::rename(s.root().join("big.tmp"), &path).unwrap();
    let r = response(get(&s.files, "/big.bin").await);
    assert_eq!(
        header(&r, "content-length"),
        Some(new.len().to_string().as_str())
    );
    assert!(body(r).await[..] == new[..]);
}

#[tokio::test]
async fn small_files_come_from_memory_and_big_ones_from_disk() {
    let s = site_with(|c| c.memory_max_file = 10);
    write(&s.root().join("small.txt"), "0123456789");
    write(&s.root().join("large.txt"), "0123456789A");
    let small = response(get(&s.files, "/small.txt").await);
    let large = response(get(&s.files, "/large.txt").await);
    assert!(format!("{:?}", small.body()).contains("Memory"));
    assert!(format!("{:?}", large.body()).contains("File"));
    assert_eq!(body(large).await, "0123456789A");
}

// ---- configuration -----------------------------------------------------------------

#[test]
fn config_errors_say_what_to_do() {
    let outer = tempfile::tempdir().unwrap();
    let missing = outer.path().join("missing");
    let e = StaticFiles::new(StaticConfig::new(&missing)).unwrap_err();
    assert!(matches!(e, Error::Root { .. }));
    assert!(e.to_string().contains("create it"), "{e}");

    let file = outer.path().join("file");
    write(&file, "x");
    let e = StaticFiles::new(StaticConfig::new(&file)).unwrap_err();
    assert!(matches!(e, Error::RootNotDirectory { .. }), "{e}");

    for bad in [
        "",
        "../index.html",
        "a/index.html",
        ".index",
        "index.php.bak",
    ] {
        let mut c = StaticConfig::new(outer.path());
        c.index = vec![bad.into()];
        let e = StaticFiles::new(c).unwrap_err();
        assert!(matches!(e, Error::IndexName { .. }), "{bad}: {e}");
    }
}

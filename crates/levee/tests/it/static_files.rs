//! Static files from the document root, through the real levee, in front of an HTTP
//! backend (levee_test::Origin) and in front of a real php-fpm: traversal over the wire,
//! hidden files, PHP source, ranges, conditional requests, HEAD, content types,
//! Cache-Control of assets, directories, and what goes to the backend instead.

// Panicking is how a test fails: helpers unwrap freely.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use levee_test::{levee, Levee, LeveeBuilder, Origin, PhpFpm, RawConn, Reply, Req, Resp};

/// Text that must never leave levee: the contents of hidden files, of PHP sources and
/// their backups, of a file outside the document root, and of `/etc/passwd`.
const SECRETS: &[&str] = &[
    "SECRET_ENV_7f3a",
    "SECRET_GIT_7f3a",
    "SECRET_PHP_7f3a",
    "SECRET_BAK_7f3a",
    "SECRET_TILDE_7f3a",
    "SECRET_OUTSIDE_7f3a",
    "root:x:0:0",
    "/bin/sh",
];

const STYLE: &str = "body { color: #222; background: #fafafa; }\n";

/// A document root (`www/`), with `secret.txt` beside it (outside the root).
struct Site {
    fpm: Option<PhpFpm>,
    base: PathBuf,
}

impl Site {
    fn new() -> Site {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "levee-static-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&base);
        let www = base.join("www");
        let files: &[(&str, &[u8])] = &[
            ("style.css", STYLE.as_bytes()),
            ("app.js", b"console.log('levee');\n"),
            ("data.json", b"{\"ok\":true}\n"),
            ("icon.svg", b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"),
            ("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake png"),
            ("notes.txt", b"plain notes\n"),
            ("page.html", b"<p>a static page</p>\n"),
            ("dir/index.html", b"<h1>dir index page</h1>\n"),
            ("emptydir/other.txt", b"not an index\n"),
            (".env", b"DB_PASSWORD=SECRET_ENV_7f3a\n"),
            (".git/config", b"[core]\n\tsecret = SECRET_GIT_7f3a\n"),
            (".well-known/acme-challenge/token", b"acme-token-ok"),
            (
                "wp-config.php",
                b"<?php define('DB_PASSWORD', 'SECRET_PHP_7f3a'); echo 'config loaded';",
            ),
            ("x.php.bak", b"<?php $password = 'SECRET_BAK_7f3a';"),
            ("wp-config.php~", b"<?php $password = 'SECRET_TILDE_7f3a';"),
            (
                "index.php",
                b"<?php echo 'front controller ', $_SERVER['REQUEST_URI'];",
            ),
            ("blog/index.php", b"<?php echo 'blog index';"),
        ];
        for (name, content) in files {
            let path = www.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, content).expect("write file");
        }
        std::fs::write(www.join("big.bin"), big()).expect("write big.bin");
        std::fs::write(base.join("secret.txt"), "SECRET_OUTSIDE_7f3a\n").expect("write");
        // Links: out of the root, and to files that are not served under their own name.
        for (target, link) in [
            (base.join("secret.txt"), "link-out.txt"),
            (www.join(".env"), "env-link.txt"),
            (www.join("wp-config.php"), "config-link.txt"),
        ] {
            std::os::unix::fs::symlink(target, www.join(link)).expect("symlink");
        }
        Site { fpm: None, base }
    }

    /// The same files, with php-fpm running them.
    fn with_php() -> Site {
        let mut site = Site::new();
        site.fpm = Some(PhpFpm::start(site.root()));
        site
    }

    fn root(&self) -> PathBuf {
        self.base.join("www")
    }

    /// `levee serve --root <www>` in front of this site's php-fpm.
    fn levee_php(&self) -> Levee {
        let fpm = self.fpm.as_ref().expect("a site with php");
        let backend = format!("fastcgi+unix:{}", fpm.socket_path().display());
        self.levee(&backend).start()
    }

    fn levee(&self, backend: &str) -> LeveeBuilder {
        levee!()
            .backend(backend)
            .arg("--root")
            .arg(self.root().to_str().expect("UTF-8 temp dir"))
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// 3 MiB that differ everywhere: larger than `memory_max_file` (1 MiB), so it is
/// streamed from disk.
fn big() -> Vec<u8> {
    let mut x: u32 = 12345;
    (0..3 * 1024 * 1024 + 17)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect()
}

/// An HTTP backend that answers everything with 404 and says what it got.
fn origin() -> Origin {
    Origin::start(|r| {
        Reply::status(404)
            .header("content-type", "text/plain")
            .body(format!("origin: {} {}", r.method, r.uri))
    })
}

/// A response read off a raw connection: the request line was sent exactly as written.
struct Raw {
    status: u16,
    bytes: Vec<u8>,
}

impl Raw {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// What follows the head.
    fn body(&self) -> &[u8] {
        match self.bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(end) => &self.bytes[end + 4..],
            None => &[],
        }
    }
}

/// `METHOD target` over raw TCP with `Connection: close`; fails the test if levee does
/// not finish within 10 s.
async fn raw(addr: SocketAddr, method: &str, target: &str) -> Raw {
    let mut conn = RawConn::connect(addr).await;
    let req = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write(req.as_bytes()).await.expect("send request");
    let bytes = conn
        .read_until_closed(Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("{method} {target}: no complete answer within 10 s"));
    let status = String::from_utf8_lossy(&bytes)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Raw { status, bytes }
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(
            !text.contains(secret),
            "{what}: the response contains {secret:?}:\n{text}"
        );
    }
}

/// Every spelling of "up and out of the root" that a client can put on the wire.
const TRAVERSALS: &[&str] = &[
    "/../etc/passwd",
    "/../../../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    "/..%2f..%2fetc/passwd",
    "/..%2f..%2f..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/a/%2e%2e/%2e%2e/",
    "/a/%2e%2e/%2e%2e/etc/passwd",
    "/dir/../../secret.txt",
    "/../secret.txt",
    "/%2e%2e/secret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/..%2fsecret.txt",
    "/dir/..%2f..%2fsecret.txt",
    "/dir/..%5c..%5csecret.txt",
    "/%c0%ae%c0%ae/secret.txt",
    "/secret.txt%00",
    "/%00/../secret.txt",
    "/style.css%00.html",
    "/..%00/secret.txt",
    "/link-out.txt",
    "/..\\secret.txt",
    "//../secret.txt",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_attempts_never_return_files_outside_the_root() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let origin = origin();
    let http = site.levee(&origin.url()).start();
    let php = site.levee_php();
    for (name, levee) in [("http backend", &http), ("fastcgi backend", &php)] {
        let addr = levee.addr();
        for target in TRAVERSALS {
            let r = raw(addr, "GET", target).await;
            let what = format!("{name}: GET {target}");
            assert_no_secret(&what, &r.text());
            assert!(
                matches!(r.status, 400 | 403 | 404),
                "{what}: status {}:\n{}",
                r.status,
                r.text()
            );
        }
        // The absolute form of the request target, as a proxy would send it.
        let target = format!("http://{addr}/%2e%2e/%2e%2e/etc/passwd");
        let r = raw(addr, "GET", &target).await;
        assert_no_secret(&format!("{name}: GET {target}"), &r.text());
        assert!(matches!(r.status, 400 | 403 | 404), "{}", r.text());
        // The raw client does reach files: the same request for a real one.
        let r = raw(addr, "GET", "/style.css").await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body(), STYLE.as_bytes());
    }
    // Nothing was answered from the root: each request went on to the HTTP backend.
    for target in TRAVERSALS {
        let path = target.split('?').next().unwrap_or(target);
        assert!(
            origin.recorded().iter().any(|r| r.uri == *path),
            "the origin did not see {target}"
        );
    }
    // With php-fpm, levee answers every one of them itself: 403 for what it refused.
    for target in [
        "/../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2f..%2fetc/passwd",
        "/a/%2e%2e/%2e%2e/",
        "/secret.txt%00",
        "/link-out.txt",
    ] {
        let r = raw(php.addr(), "GET", target).await;
        assert_eq!(r.status, 403, "GET {target}:\n{}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_files_are_refused_with_php_and_left_to_the_http_backend() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let php = site.levee_php();
    for path in [
        "/.env",
        "/.git/config",
        "/.git/",
        "/.git",
        "/%2eenv",
        "/.git/config?x=1",
        "/env-link.txt",
        "/config-link.txt",
    ] {
        let r = raw(php.addr(), "GET", path).await;
        assert_eq!(r.status, 403, "GET {path}:\n{}", r.text());
        assert_no_secret(path, &r.text());
        let r = raw(php.addr(), "HEAD", path).await;
        assert_eq!(r.status, 403, "HEAD {path}:\n{}", r.text());
    }
    // RFC 8615's directory is public.
    let r = php.get("/.well-known/acme-challenge/token").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "acme-token-ok");
    assert_eq!(r.x_cache(), "STATIC");

    let origin = origin();
    let http = site.levee(&origin.url()).start();
    for path in ["/.env", "/.git/config", "/env-link.txt", "/config-link.txt"] {
        let r = http.get(path).await;
        assert_no_secret(path, &r.text());
        assert_eq!(r.status, 404, "{}", r.summary());
        assert_eq!(r.text(), format!("origin: GET {path}"));
        assert_eq!(
            origin.requests_for(path),
            1,
            "the origin did not see {path}"
        );
    }
    let r = http.get("/.well-known/acme-challenge/token").await;
    assert_eq!(r.text(), "acme-token-ok");
    assert_eq!(r.x_cache(), "STATIC");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_source_and_its_backups_are_never_sent_as_text() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let php = site.levee_php();
    // With php-fpm the script runs: its output, never its source.
    for path in ["/wp-config.php", "/wp-config.ph%70", "/wp-config.php/extra"] {
        let r = raw(php.addr(), "GET", path).await;
        assert_no_secret(path, &r.text());
        assert_eq!(r.status, 200, "GET {path}:\n{}", r.text());
        assert!(r.text().contains("config loaded"), "{path}: {}", r.text());
    }
    // Backups and editor copies are PHP source under another name: refused.
    for path in [
        "/x.php.bak",
        "/wp-config.php~",
        "/wp-config.php%7e",
        "/wp-config.php%20",
        "/wp-config.php.",
    ] {
        let r = raw(php.addr(), "GET", path).await;
        assert_no_secret(path, &r.text());
        assert_eq!(r.status, 403, "GET {path}:\n{}", r.text());
    }

    // An HTTP backend gets the request (it is the one that runs PHP); the file itself
    // never leaves levee.
    let origin = origin();
    let http = site.levee(&origin.url()).start();
    for path in ["/wp-config.php", "/x.php.bak", "/wp-config.php~"] {
        let r = raw(http.addr(), "GET", path).await;
        assert_no_secret(path, &r.text());
        assert_eq!(r.status, 404, "GET {path}:\n{}", r.text());
        assert!(
            r.text().contains(&format!("origin: GET {path}")),
            "{}",
            r.text()
        );
    }
    assert_eq!(origin.requests(), 3);
}

async fn get_with(levee: &Levee, path: &str, headers: &[(&str, &str)]) -> Resp {
    levee.get_with(path, headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_ranges_of_files_in_memory_and_on_disk() {
    let site = Site::new();
    let origin = origin();
    let levee = site.levee(&origin.url()).start();
    let big = big();
    for (path, content) in [("/style.css", STYLE.as_bytes()), ("/big.bin", &big[..])] {
        let len = content.len();
        let full = levee.get(path).await;
        assert_eq!(full.status, 200, "{}", full.summary());
        assert_eq!(full.header("accept-ranges"), Some("bytes"));
        assert!(full.body[..] == content[..], "{path}: full body differs");
        let etag = full.header("etag").expect("ETag").to_string();

        let cases: Vec<(String, usize, usize)> = vec![
            ("bytes=0-9".into(), 0, 9),
            ("bytes=-5".into(), len - 5, len - 1),
            ("bytes=10-".into(), 10, len - 1),
            (format!("bytes=3-{}", len + 100), 3, len - 1),
        ];
        for (range, start, end) in cases {
            let r = get_with(&levee, path, &[("range", &range)]).await;
            assert_eq!(r.status, 206, "{path} {range}: {}", r.summary());
            assert_eq!(
                r.header("content-range"),
                Some(format!("bytes {start}-{end}/{len}").as_str()),
                "{path} {range}"
            );
            assert_eq!(
                r.header("content-length"),
                Some((end - start + 1).to_string().as_str())
            );
            assert!(r.body[..] == content[start..=end], "{path} {range}: body");
            assert_eq!(r.x_cache(), "STATIC");
        }

        let r = get_with(&levee, path, &[("range", &format!("bytes={len}-"))]).await;
        assert_eq!(r.status, 416, "{path}: {}", r.summary());
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes */{len}").as_str())
        );
        assert!(r.body.is_empty());

        // If-Range: the range only if the file is still the one the client has.
        let r = get_with(&levee, path, &[("range", "bytes=0-3"), ("if-range", &etag)]).await;
        assert_eq!(r.status, 206, "{path}: {}", r.summary());
        assert!(r.body[..] == content[..4]);
        let r = get_with(
            &levee,
            path,
            &[("range", "bytes=0-3"), ("if-range", "\"an-old-version\"")],
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert!(
            r.body[..] == content[..],
            "{path}: If-Range mismatch must send all"
        );

        // A malformed range is ignored: the whole file.
        let r = get_with(&levee, path, &[("range", "bytes=abc")]).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert!(r.body[..] == content[..]);
    }
    // In the middle of the big file, across its 128 KiB read chunks.
    let start = 1_048_000;
    let end = 1_311_000;
    let r = get_with(
        &levee,
        "/big.bin",
        &[("range", &format!("bytes={start}-{end}"))],
    )
    .await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert!(r.body[..] == big[start..=end], "middle range differs");
    assert_eq!(origin.requests(), 0, "a static file reached the backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_requests_get_304_and_412() {
    let site = Site::new();
    let origin = origin();
    let levee = site.levee(&origin.url()).start();
    for path in ["/style.css", "/big.bin", "/dir/"] {
        let full = levee.get(path).await;
        assert_eq!(full.status, 200, "{}", full.summary());
        let etag = full.header("etag").expect("ETag").to_string();
        let lm = full
            .header("last-modified")
            .expect("Last-Modified")
            .to_string();
        assert!(etag.starts_with('"'), "a strong ETag: {etag}");

        for (name, value) in [
            ("if-none-match", etag.clone()),
            ("if-none-match", format!("\"other\", {etag}")),
            ("if-none-match", format!("W/{etag}")),
            ("if-none-match", "*".to_string()),
            ("if-modified-since", lm.clone()),
        ] {
            let r = get_with(&levee, path, &[(name, &value)]).await;
            assert_eq!(r.status, 304, "{path} {name}: {value}: {}", r.summary());
            assert!(r.body.is_empty());
            assert_eq!(r.header("etag"), Some(etag.as_str()), "{path}");
            assert_eq!(r.x_cache(), "STATIC");
        }
        // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
        let r = get_with(
            &levee,
            path,
            &[("if-none-match", "\"other\""), ("if-modified-since", &lm)],
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        let r = get_with(
            &levee,
            path,
            &[("if-modified-since", "Sat, 01 Jan 2000 00:00:00 GMT")],
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert_eq!(r.body, full.body);

        let r = get_with(&levee, path, &[("if-match", "\"nope\"")]).await;
        assert_eq!(r.status, 412, "{path}: {}", r.summary());
        assert!(r.body.is_empty());
        let r = get_with(&levee, path, &[("if-match", &etag)]).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        let r = get_with(
            &levee,
            path,
            &[("if-unmodified-since", "Sat, 01 Jan 2000 00:00:00 GMT")],
        )
        .await;
        assert_eq!(r.status, 412, "{path}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 0, "a static file reached the backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_gets_the_headers_of_get_and_no_body() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let origin = origin();
    let http = site.levee(&origin.url()).start();
    let php = site.levee_php();
    for levee in [&http, &php] {
        for (path, len) in [("/style.css", STYLE.len()), ("/big.bin", big().len())] {
            let get = levee.get(path).await;
            let r = raw(levee.addr(), "HEAD", path).await;
            assert_eq!(r.status, 200, "HEAD {path}:\n{}", r.text());
            assert!(r.body().is_empty(), "HEAD {path} sent a body");
            let head = r.text().to_ascii_lowercase();
            assert!(
                head.contains(&format!("content-length: {len}\r\n")),
                "HEAD {path}:\n{head}"
            );
            let etag = get.header("etag").expect("etag").to_ascii_lowercase();
            assert!(head.contains(&format!("etag: {etag}\r\n")), "{head}");
            assert!(head.contains("x-cache: static\r\n"), "{head}");
        }
    }
    assert_eq!(origin.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_types_and_cache_control_of_assets_and_pages() {
    let site = Site::new();
    let origin = origin();
    let levee = site.levee(&origin.url()).start();
    let week = "public, max-age=604800";
    for (path, content_type, cache_control) in [
        ("/style.css", "text/css", week),
        ("/app.js", "javascript", week),
        ("/logo.png", "image/png", week),
        ("/icon.svg", "image/svg+xml", week),
        ("/data.json", "application/json", week),
        ("/big.bin", "application/octet-stream", "no-cache"),
        ("/page.html", "text/html", "no-cache"),
        ("/dir/", "text/html", "no-cache"),
    ] {
        let r = levee.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert_eq!(r.x_cache(), "STATIC", "{path}");
        let ct = r.header("content-type").unwrap_or("");
        assert!(ct.contains(content_type), "{path}: Content-Type {ct:?}");
        assert_eq!(r.header("cache-control"), Some(cache_control), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
    let r = levee.get("/page.html").await;
    assert_eq!(
        r.header("content-type"),
        Some("text/html; charset=utf-8"),
        "text gets a charset"
    );
    // WordPress versions its assets with a query: still the file.
    let r = levee.get("/style.css?ver=6.4.2").await;
    assert_eq!(r.x_cache(), "STATIC", "{}", r.summary());
    assert_eq!(r.text(), STYLE);
    let r = levee.get("/notes.txt").await;
    assert!(
        r.header("content-type")
            .is_some_and(|ct| ct.starts_with("text/plain")),
        "{:?}",
        r.headers
    );

    // The asset lifetime and list come from [static].
    let levee = site
        .levee(&origin.url())
        .config("[static]\nasset_max_age = \"1h\"\nasset_extensions = [\"css\"]")
        .start();
    let r = levee.get("/style.css").await;
    assert_eq!(r.header("cache-control"), Some("public, max-age=3600"));
    let r = levee.get("/logo.png").await;
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(origin.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_redirect_to_their_slash_and_serve_their_index() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let origin = origin();
    let http = site.levee(&origin.url()).start();
    let php = site.levee_php();
    for levee in [&http, &php] {
        for (target, location) in [
            ("/dir", "/dir/"),
            ("/dir?x=1&y=2", "/dir/?x=1&y=2"),
            ("//dir", "/dir/"),
            ("/blog", "/blog/"),
        ] {
            let r = raw(levee.addr(), "GET", target).await;
            assert_eq!(r.status, 301, "GET {target}:\n{}", r.text());
            let want = format!("\r\nlocation: {location}\r\n");
            assert!(
                r.text().to_ascii_lowercase().contains(&want),
                "GET {target}: want Location {location}:\n{}",
                r.text()
            );
        }
        let r = levee.get("/dir/").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), "<h1>dir index page</h1>\n");
        assert_eq!(r.x_cache(), "STATIC");
    }
    // A directory whose index is index.php belongs to PHP.
    let r = php.get("/blog/").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "blog index");
    assert_ne!(r.x_cache(), "STATIC");
    // ... or to the HTTP backend.
    let r = http.get("/blog/").await;
    assert_eq!(r.text(), "origin: GET /blog/");
    // A directory without an index: not listed.
    let r = http.get("/emptydir/").await;
    assert_eq!(r.text(), "origin: GET /emptydir/");
    let r = php.get("/emptydir/").await;
    assert_eq!(r.text(), "front controller /emptydir/");
    assert!(!r.text().contains("other.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_do_not_exist_go_to_the_backend() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_php();
    let origin = origin();
    let http = site.levee(&origin.url()).start();
    for path in [
        "/missing.css",
        "/2024/01/hello-world/",
        "/style.css/extra",
        "/wiki/Main_Page?action=history",
    ] {
        let r = http.get(path).await;
        assert_eq!(r.status, 404, "{path}: {}", r.summary());
        assert_eq!(r.text(), format!("origin: GET {path}"));
        assert_ne!(r.x_cache(), "STATIC");
    }
    assert_eq!(origin.requests_for("/missing.css"), 1);
    assert_eq!(origin.requests_for("/style.css/extra"), 1);
    // Other methods on a static file are the backend's business too.
    let r = Req::post("/style.css", "a=1").send(&http).await;
    assert_eq!(r.text(), "origin: POST /style.css");

    // With php-fpm: the front controller answers pretty URLs.
    let php = site.levee_php();
    for path in ["/missing.css", "/2024/01/hello-world/", "/style.css/extra"] {
        let r = php.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert_eq!(r.text(), format!("front controller {path}"));
    }
    // ... and a POST to a static file is not for PHP.
    let r = Req::post("/style.css", "a=1").send(&php).await;
    assert_eq!(r.status, 405, "{}", r.summary());
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    let r = php.get("/style.css").await;
    assert_eq!(r.text(), STYLE);
    assert_eq!(r.x_cache(), "STATIC");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_new_and_deleted_files_are_seen_within_a_second_or_two() {
    let site = Site::new();
    let origin = origin();
    let levee = site.levee(&origin.url()).start();
    let www = site.root();
    let old = levee.get("/style.css").await;
    let old_etag = old.header("etag").expect("etag").to_string();
    assert_eq!(
        levee.get("/later.css").await.text(),
        "origin: GET /later.css"
    );

    // A deploy: an edit in place (same length), a new file, a deleted file.
    let edited = STYLE.replace("#222", "#333");
    assert_eq!(edited.len(), STYLE.len());
    std::fs::write(www.join("style.css"), &edited).expect("edit");
    std::fs::write(www.join("later.css"), "p { margin: 0 }\n").expect("create");
    std::fs::remove_file(www.join("notes.txt")).expect("delete");

    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let r = levee.get("/style.css").await;
        if r.text() == edited {
            assert_ne!(r.header("etag"), Some(old_etag.as_str()), "same ETag");
            break;
        }
        assert_eq!(r.text(), STYLE, "neither the old nor the new file");
        assert!(
            std::time::Instant::now() < deadline,
            "the edit was not seen within 3 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The old validator no longer matches.
    let r = levee
        .get_with("/style.css", &[("if-none-match", &old_etag)])
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), edited);
    let r = levee
        .get_with(
            "/style.css",
            &[("range", "bytes=0-3"), ("if-range", &old_etag)],
        )
        .await;
    assert_eq!(
        r.status,
        200,
        "an old If-Range got a range: {}",
        r.summary()
    );

    let r = levee.get("/later.css").await;
    assert_eq!(r.x_cache(), "STATIC", "{}", r.summary());
    assert_eq!(r.text(), "p { margin: 0 }\n");
    let r = levee.get("/notes.txt").await;
    assert_eq!(
        r.text(),
        "origin: GET /notes.txt",
        "a deleted file is still served"
    );
}

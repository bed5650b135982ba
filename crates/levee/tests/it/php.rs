//! levee in front of a real php-fpm (FastCGI over its Unix socket and over TCP), running
//! real PHP fixture apps from a temporary document root: CGI variables of a front
//! controller, headers and statuses from PHP, uploads and large bodies, streamed
//! responses, scripts that die, session-starting pages of MoniWiki and XE, coalescing,
//! the backend concurrency limit, php-fpm being down, and static files while every PHP
//! worker is busy.

// Panicking is how a test fails: helpers unwrap freely.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use levee_test::{eventually, levee, Levee, LeveeBuilder, PhpFpm, RawConn, Req, Resp};
use tokio::task::JoinSet;

/// Included by every fixture (it lives outside the document root): run counters and a
/// concurrency gauge kept in files under `@STATE@`, updated under `flock`.
const LIB: &str = r#"<?php
const LEVEE_STATE = '@STATE@';

function levee_update(string $file, callable $f): string {
    $h = fopen(LEVEE_STATE . '/' . $file, 'c+');
    flock($h, LOCK_EX);
    $new = $f(stream_get_contents($h));
    ftruncate($h, 0);
    rewind($h);
    fwrite($h, $new);
    fflush($h);
    flock($h, LOCK_UN);
    fclose($h);
    return $new;
}

/// Counts one run of the script `$name`; returns the new count.
function levee_run(string $name): int {
    return (int) levee_update("$name.runs", fn ($s) => (string) ((int) $s + 1));
}

/// "in-flight peak" in $name.conc.
function levee_enter(string $name): void {
    levee_update("$name.conc", function ($s) {
        [$cur, $max] = array_map('intval', explode(' ', $s ?: '0 0'));
        $cur++;
        return "$cur " . max($cur, $max);
    });
}

function levee_leave(string $name): void {
    levee_update("$name.conc", function ($s) {
        [$cur, $max] = array_map('intval', explode(' ', $s ?: '0 0'));
        $cur--;
        return "$cur $max";
    });
}

/// Debian's php.ini sets output_buffering = 4096: without this, flush() sends nothing.
function levee_unbuffer(): void {
    while (ob_get_level() > 0) {
        ob_end_flush();
    }
}

/// One `KEY=json` line per value, for the test to read without a JSON parser.
function levee_dump(array $values): void {
    header('Content-Type: text/plain; charset=utf-8');
    foreach ($values as $k => $v) {
        echo $k, '=', json_encode($v, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
    }
}
"#;

const FIXTURES: &[(&str, &str)] = &[
    // The front controller of a wiki or CMS: every pretty URL ends here.
    (
        "index.php",
        r#"<?php require '@LIB@';
$run = levee_run('index');
$out = ['run' => $run, 'GET' => $_GET];
foreach (['REQUEST_URI', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO', 'PHP_SELF',
          'QUERY_STRING', 'REQUEST_METHOD', 'REMOTE_ADDR', 'SERVER_NAME', 'SERVER_PORT',
          'SERVER_ADDR', 'DOCUMENT_ROOT', 'SERVER_PROTOCOL', 'GATEWAY_INTERFACE',
          'HTTP_HOST', 'HTTP_X_CUSTOM', 'HTTP_USER_AGENT', 'HTTP_ACCEPT_LANGUAGE',
          'HTTP_COOKIE', 'MW_CONFIG_FILE'] as $k) {
    $out[$k] = $_SERVER[$k] ?? null;
}
levee_dump($out);
"#,
    ),
    ("hello.php", "<?php echo 'hello from php';"),
    (
        "headers.php",
        r#"<?php
header('Content-Type: text/plain; charset=utf-8');
header('X-App: levee-test');
header('X-Multi: one');
header('X-Multi: two', false);
setcookie('theme', 'dark', ['path' => '/']);
setcookie('lang', 'ko');
header('Set-Cookie: raw=1; HttpOnly', false);
echo 'headers set';
"#,
    ),
    (
        "status404.php",
        "<?php header('Status: 404 Not Found'); echo 'no such article';",
    ),
    (
        "code404.php",
        "<?php http_response_code(404); echo 'not here either';",
    ),
    (
        "status503.php",
        "<?php header('Status: 503 Service Unavailable'); header('Retry-After: 7'); \
         echo 'down for maintenance';",
    ),
    (
        "redirect.php",
        "<?php header('Location: /target?from=php'); echo 'moved';",
    ),
    (
        "redirect301.php",
        "<?php header('Status: 301 Moved Permanently'); header('Location: /new-home');",
    ),
    (
        "redirect301b.php",
        "<?php header('Location: /new-home', true, 301);",
    ),
    (
        "upload.php",
        r#"<?php
header('Content-Type: text/plain');
foreach ($_FILES as $field => $f) {
    $md5 = $f['error'] === 0 ? md5_file($f['tmp_name']) : '-';
    echo "file $field error={$f['error']} name={$f['name']} size={$f['size']} md5=$md5\n";
}
foreach ($_POST as $k => $v) {
    echo "post $k=$v\n";
}
"#,
    ),
    (
        "input.php",
        r#"<?php
$in = file_get_contents('php://input');
header('Content-Type: text/plain');
echo 'len=', strlen($in), ' md5=', md5($in), ' content_length=',
    $_SERVER['CONTENT_LENGTH'] ?? '-', "\n";
"#,
    ),
    (
        "stream.php",
        r#"<?php require '@LIB@';
levee_unbuffer();
header('Content-Type: application/octet-stream');
header('Cache-Control: public, max-age=60');
$n = (int) ($_GET['n'] ?? 20);
$pause = (int) ($_GET['pause_ms'] ?? 0);
for ($i = 0; $i < $n; $i++) {
    echo str_repeat(sprintf('%07d:', $i), 131072);
    flush();
    if ($pause > 0) {
        usleep($pause * 1000);
    }
}
file_put_contents(LEVEE_STATE . '/stream.done', 'done');
"#,
    ),
    (
        "die_exit.php",
        r#"<?php require '@LIB@';
levee_run('die_exit');
levee_unbuffer();
header('Cache-Control: public, max-age=60');
echo str_repeat('x', 100000);
flush();
exit(1);
"#,
    ),
    (
        "die_fatal.php",
        r#"<?php require '@LIB@';
levee_run('die_fatal');
levee_unbuffer();
header('Cache-Control: public, max-age=60');
echo str_repeat('y', 100000);
flush();
levee_no_such_function();
"#,
    ),
    (
        "die_kill.php",
        r#"<?php require '@LIB@';
levee_run('die_kill');
levee_unbuffer();
header('Cache-Control: public, max-age=60');
echo str_repeat('z', 100000);
flush();
usleep(50000);
if (function_exists('posix_kill')) {
    file_put_contents(LEVEE_STATE . '/die_kill.how', 'posix_kill');
    posix_kill(getmypid(), 9);
    sleep(5);
}
file_put_contents(LEVEE_STATE . '/die_kill.how', 'exit');
exit(1);
"#,
    ),
    // MoniWiki: a session on every page, and `s-maxage=3` for shared caches.
    (
        "moniwiki.php",
        r#"<?php require '@LIB@';
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
$run = levee_run('moniwiki');
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, s-maxage=3, max-age=0');
echo '<p>n=', $_SESSION['n'], ' sid=', session_id(), ' run=', $run, "</p>\n";
"#,
    ),
    // XE: a session on every page, and no freshness at all.
    (
        "xe.php",
        r#"<?php require '@LIB@';
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
$run = levee_run('xe');
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, must-revalidate, post-check=0, pre-check=0');
echo '<p>n=', $_SESSION['n'], ' sid=', session_id(), ' run=', $run, "</p>\n";
"#,
    ),
    (
        "slow.php",
        r#"<?php require '@LIB@';
$run = levee_run('slow');
usleep(300000);
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, max-age=60');
echo "slow page, run $run";
"#,
    ),
    (
        "conc.php",
        r#"<?php require '@LIB@';
levee_enter('conc');
usleep(200000);
levee_leave('conc');
header('Cache-Control: no-store');
echo 'done ', $_SERVER['REQUEST_METHOD'], ' ', $_SERVER['REQUEST_URI'];
"#,
    ),
    (
        "page.php",
        r#"<?php require '@LIB@';
$run = levee_run('page');
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, max-age=1');
echo "cached page, run $run";
"#,
    ),
    (
        "sleep3.php",
        r#"<?php require '@LIB@';
levee_run('sleep3');
sleep(3);
header('Cache-Control: no-store');
echo 'slept';
"#,
    ),
    // Validators, and the application's own answer to If-None-Match (MediaWiki does this).
    (
        "etag.php",
        r#"<?php require '@LIB@';
$run = levee_run('etag');
header('Content-Type: text/html; charset=UTF-8');
header('Cache-Control: public, max-age=60');
header('ETag: "v1"');
if (($_SERVER['HTTP_IF_NONE_MATCH'] ?? '') === '"v1"') {
    levee_run('etag304');
    http_response_code(304);
    exit;
}
echo "page with validators, run $run";
"#,
    ),
    (
        "stream_nostore.php",
        r#"<?php require '@LIB@';
levee_unbuffer();
// Runs however the script ends: at its end, or when PHP stops it for a client gone.
register_shutdown_function(function () {
    file_put_contents(LEVEE_STATE . '/stream_nostore.ended', 'ended');
});
header('Content-Type: application/octet-stream');
header('Cache-Control: no-store');
for ($i = 0; $i < 20; $i++) {
    echo str_repeat(sprintf('%07d:', $i), 131072);
    flush();
    usleep(100000);
}
file_put_contents(LEVEE_STATE . '/stream_nostore.done', 'done');
"#,
    ),
    (
        "assets/style.css",
        "body { color: #333; } /* served by levee itself */\n",
    ),
];

/// A temporary site: `www/` (the document root, with [`FIXTURES`]), `lib.php` and
/// `state/` beside it, `sessions/` for php's session files, and a php-fpm serving it.
/// Everything is stopped and removed on drop.
struct Site {
    fpm: Option<PhpFpm>,
    base: PathBuf,
}

impl Site {
    fn start() -> Site {
        Site::with_children(4)
    }

    /// php-fpm with `n` workers in each of its two pools.
    fn with_children(n: usize) -> Site {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "levee-php-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["www", "state", "sessions"] {
            std::fs::create_dir_all(base.join(dir)).expect("create site directories");
        }
        let fill = |text: &str| {
            text.replace("@STATE@", &base.join("state").display().to_string())
                .replace("@LIB@", &base.join("lib.php").display().to_string())
        };
        std::fs::write(base.join("lib.php"), fill(LIB)).expect("write lib.php");
        for (name, text) in FIXTURES {
            let path = base.join("www").join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, fill(text)).expect("write fixture");
        }
        let fpm = PhpFpm::builder(base.join("www"))
            .max_children(n)
            .ini(
                "session.save_path",
                &base.join("sessions").display().to_string(),
            )
            .start();
        Site {
            fpm: Some(fpm),
            base,
        }
    }

    fn root(&self) -> PathBuf {
        self.base.join("www")
    }

    fn fpm(&self) -> &PhpFpm {
        self.fpm.as_ref().expect("php-fpm was stopped")
    }

    /// `fastcgi+unix:` URL of the pool on the Unix socket.
    fn unix(&self) -> String {
        format!("fastcgi+unix:{}", self.fpm().socket_path().display())
    }

    /// `fastcgi://` URL of the pool on 127.0.0.1.
    fn tcp(&self) -> String {
        format!("fastcgi://{}", self.fpm().tcp_addr())
    }

    /// How many times the fixture counted with `levee_run($name)`.
    fn runs(&self, name: &str) -> usize {
        std::fs::read_to_string(self.base.join("state").join(format!("{name}.runs")))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The peak of concurrent runs recorded with `levee_enter($name)`.
    fn peak(&self, name: &str) -> usize {
        let s = std::fs::read_to_string(self.base.join("state").join(format!("{name}.conc")))
            .unwrap_or_default();
        s.split_whitespace()
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }

    fn state_file(&self, name: &str) -> PathBuf {
        self.base.join("state").join(name)
    }

    /// Stops php-fpm (its sockets disappear with it).
    fn stop_fpm(&mut self) {
        self.fpm.take();
    }

    /// php-fpm's log, for assertion messages.
    fn log(&self) -> String {
        self.fpm.as_ref().map(|f| f.error_log()).unwrap_or_default()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// `levee serve --backend <backend> --root <site's www>`.
fn levee_php(site: &Site, backend: &str) -> LeveeBuilder {
    let root = site.root();
    levee!()
        .backend(backend)
        .arg("--root")
        .arg(root.to_str().expect("UTF-8 temp dir"))
}

/// The `KEY=json` lines of `levee_dump`.
fn dumped(r: &Resp) -> HashMap<String, String> {
    r.text()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A JSON string literal, as `levee_dump` writes it.
fn js(s: &str) -> String {
    format!("\"{s}\"")
}

/// Whole test bodies run under this, so that a hang anywhere fails instead.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("the test did not finish in time")
}

async fn check_front_controller(site: &Site, levee: &Levee) {
    let port = levee.addr().port().to_string();
    let root = site.root();
    let get = |path: &str| {
        Req::get(path)
            .header("host", "wiki.example:8080")
            .header("x-custom", "hello-php")
            .header("user-agent", "levee-test/1.0")
            .header("accept-language", "ko-KR,ko;q=0.9")
    };

    let r = get("/").send(levee).await;
    assert_eq!(r.status, 200, "{}\n{}", r.summary(), site.log());
    let v = dumped(&r);
    let expect = |v: &HashMap<String, String>, k: &str, want: &str| {
        assert_eq!(v.get(k).map(String::as_str), Some(want), "{k} in {:#?}", v);
    };
    expect(&v, "REQUEST_URI", &js("/"));
    expect(&v, "SCRIPT_NAME", &js("/index.php"));
    expect(&v, "PHP_SELF", &js("/index.php"));
    expect(
        &v,
        "SCRIPT_FILENAME",
        &js(&root.join("index.php").display().to_string()),
    );
    expect(&v, "DOCUMENT_ROOT", &js(&root.display().to_string()));
    expect(&v, "QUERY_STRING", &js(""));
    expect(&v, "REQUEST_METHOD", &js("GET"));
    expect(&v, "REMOTE_ADDR", &js("127.0.0.1"));
    expect(&v, "SERVER_ADDR", &js("127.0.0.1"));
    expect(&v, "SERVER_NAME", &js("wiki.example"));
    expect(&v, "SERVER_PORT", &js(&port));
    expect(&v, "SERVER_PROTOCOL", &js("HTTP/1.1"));
    expect(&v, "GATEWAY_INTERFACE", &js("CGI/1.1"));
    expect(&v, "HTTP_HOST", &js("wiki.example:8080"));
    expect(&v, "HTTP_X_CUSTOM", &js("hello-php"));
    expect(&v, "HTTP_USER_AGENT", &js("levee-test/1.0"));
    expect(&v, "HTTP_ACCEPT_LANGUAGE", &js("ko-KR,ko;q=0.9"));
    let path_info = v.get("PATH_INFO").map(String::as_str);
    assert!(
        matches!(path_info, Some("\"\"") | Some("null")),
        "PATH_INFO for / is {path_info:?}"
    );

    let r = get("/wiki/Some_Page?action=view").send(levee).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let v = dumped(&r);
    expect(&v, "REQUEST_URI", &js("/wiki/Some_Page?action=view"));
    expect(&v, "SCRIPT_NAME", &js("/index.php"));
    expect(&v, "QUERY_STRING", &js("action=view"));
    expect(&v, "GET", r#"{"action":"view"}"#);
    let path_info = v.get("PATH_INFO").map(String::as_str);
    assert!(
        matches!(path_info, Some("\"\"") | Some("null")),
        "PATH_INFO for a pretty URL is {path_info:?}"
    );

    // Percent-encoding reaches PHP as it was sent; $_GET is decoded by PHP.
    let r = get("/wiki/Caf%C3%A9?q=a%20b&x=1").send(levee).await;
    let v = dumped(&r);
    expect(&v, "REQUEST_URI", &js("/wiki/Caf%C3%A9?q=a%20b&x=1"));
    expect(&v, "QUERY_STRING", &js("q=a%20b&x=1"));
    expect(&v, "GET", r#"{"q":"a b","x":"1"}"#);

    let r = get("/index.php/a/b").send(levee).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let v = dumped(&r);
    expect(&v, "REQUEST_URI", &js("/index.php/a/b"));
    expect(&v, "SCRIPT_NAME", &js("/index.php"));
    expect(&v, "PATH_INFO", &js("/a/b"));
    expect(&v, "PHP_SELF", &js("/index.php/a/b"));

    // A session request passes with its cookies; PHP sees them.
    let r = get("/wiki/Private")
        .header("cookie", "PHPSESSID=abc123; theme=dark")
        .send(levee)
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    let v = dumped(&r);
    expect(&v, "HTTP_COOKIE", &js("PHPSESSID=abc123; theme=dark"));
    expect(&v, "REQUEST_URI", &js("/wiki/Private"));

    // A missing script is 404 and never runs the front controller in its name.
    let before = site.runs("index");
    let r = get("/nope.php").send(levee).await;
    assert_eq!(r.status, 404, "{}", r.summary());
    let r = get("/nope.php/with/path/info?x=1").send(levee).await;
    assert_eq!(r.status, 404, "{}", r.summary());
    let r = get("/wiki/nope.php").send(levee).await;
    assert_eq!(r.status, 404, "{}", r.summary());
    assert_eq!(
        site.runs("index"),
        before,
        "index.php ran for a missing script"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_controller_gets_the_cgi_variables_over_the_unix_socket() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(check_front_controller(&site, &levee)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_controller_gets_the_cgi_variables_over_tcp() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp()).start();
    bounded(check_front_controller(&site, &levee)).await;
}

/// `[fastcgi] params` (nginx's `fastcgi_param`): sent with every request, over levee's
/// own parameter of the same name; Debian's MediaWiki finds its settings this way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastcgi_params_reach_php() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix())
        .config(
            "[fastcgi.params]\nMW_CONFIG_FILE = \"/etc/mediawiki/LocalSettings.php\"\nSERVER_NAME = \"wiki.example.org\"\n",
        )
        .start();
    let r = Req::get("/")
        .header("host", "other.example")
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}\n{}", r.summary(), site.log());
    let v = dumped(&r);
    assert_eq!(
        v.get("MW_CONFIG_FILE").map(String::as_str),
        Some(js("/etc/mediawiki/LocalSettings.php").as_str()),
        "{v:#?}"
    );
    assert_eq!(
        v.get("SERVER_NAME").map(String::as_str),
        Some(js("wiki.example.org").as_str()),
        "the configured value replaces levee's: {v:#?}"
    );
}

/// `[site.fastcgi_params]`: each site sends its own parameters to the same php-fpm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_sends_its_own_fastcgi_params() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let config = format!(
        r#"
backend = "{backend}"
root = "{root}"
[[site]]
hosts = ["one.test"]
[site.fastcgi_params]
MW_CONFIG_FILE = "/etc/one.php"
[[site]]
hosts = ["two.test"]
[site.fastcgi_params]
MW_CONFIG_FILE = "/etc/two.php"
"#,
        backend = site.unix(),
        root = site.root().display()
    );
    let levee = levee!().config(&config).start();
    for (host, file) in [("one.test", "/etc/one.php"), ("two.test", "/etc/two.php")] {
        let r = Req::get("/").header("host", host).send(&levee).await;
        assert_eq!(r.status, 200, "{}\n{}", r.summary(), site.log());
        let v = dumped(&r);
        assert_eq!(
            v.get("MW_CONFIG_FILE").map(String::as_str),
            Some(js(file).as_str()),
            "{host}: {v:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_headers_statuses_redirects_and_cookies_reach_the_client() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp()).start();
    bounded(async {
        let r = levee.get("/headers.php").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), "headers set");
        assert_eq!(r.header("x-app"), Some("levee-test"));
        assert_eq!(r.header_all("x-multi"), ["one", "two"]);
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        let mut cookies = r.header_all("set-cookie");
        cookies.sort();
        assert_eq!(cookies.len(), 3, "{cookies:?}");
        assert!(cookies[0].starts_with("lang=ko"), "{cookies:?}");
        assert_eq!(cookies[1], "raw=1; HttpOnly");
        assert!(cookies[2].starts_with("theme=dark; path=/"), "{cookies:?}");
        // A page that sets cookies is personal: never a HIT.
        let r = levee.get("/headers.php").await;
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.header_all("set-cookie").len(), 3);

        let r = levee.get("/status404.php").await;
        assert_eq!(r.status, 404, "{}", r.summary());
        assert_eq!(r.text(), "no such article");
        assert!(
            !r.has("status"),
            "the CGI Status header leaked: {:?}",
            r.headers
        );
        let r = levee.get("/code404.php").await;
        assert_eq!(r.status, 404, "{}", r.summary());
        assert_eq!(r.text(), "not here either");

        let r = levee.get("/status503.php").await;
        assert_eq!(r.status, 503, "{}", r.summary());
        assert_eq!(r.header("retry-after"), Some("7"));
        assert_eq!(r.text(), "down for maintenance");

        let r = levee.get("/redirect.php").await;
        assert_eq!(r.status, 302, "{}", r.summary());
        assert_eq!(r.header("location"), Some("/target?from=php"));
        assert_eq!(r.text(), "moved");

        for path in ["/redirect301.php", "/redirect301b.php"] {
            let r = levee.get(path).await;
            assert_eq!(r.status, 301, "{path}: {}", r.summary());
            assert_eq!(r.header("location"), Some("/new-home"), "{path}");
        }

        // HEAD: the headers, and not a byte of body on the wire.
        for headers in ["", "Cookie: PHPSESSID=abc\r\n"] {
            let mut conn = RawConn::connect(levee.addr()).await;
            let req = format!(
                "HEAD /hello.php HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n"
            );
            conn.write(req.as_bytes()).await.expect("send");
            let got = conn
                .read_until_closed(Duration::from_secs(10))
                .await
                .expect("HEAD never ended");
            let text = String::from_utf8_lossy(&got).into_owned();
            assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
            assert!(text.ends_with("\r\n\r\n"), "HEAD sent a body: {text:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_upload_of_several_mib_reaches_php_intact() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let big = levee_test::pseudo_random(6 * 1024 * 1024 + 123, 1);
        let small = levee_test::pseudo_random(1000, 2);
        let boundary = "----leveeBoundary7MA4YWxkTrZu0gW";
        let mut body = Vec::new();
        let mut part = |headers: &str, content: &[u8]| {
            body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n\r\n").as_bytes());
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        };
        part(
            "Content-Disposition: form-data; name=\"title\"",
            b"holiday photos",
        );
        part(
            "Content-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\
             Content-Type: application/octet-stream",
            &big,
        );
        part(
            "Content-Disposition: form-data; name=\"other\"; filename=\"small.bin\"\r\n\
             Content-Type: application/octet-stream",
            &small,
        );
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());

        let r = Req::post("/upload.php", body)
            .header(
                "content-type",
                &format!("multipart/form-data; boundary={boundary}"),
            )
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}\n{}", r.summary(), site.log());
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        let text = r.text();
        let want_big = format!(
            "file file error=0 name=big.bin size={} md5={}",
            big.len(),
            levee_test::digest_hex("md5sum", &big)
        );
        let want_small = format!(
            "file other error=0 name=small.bin size={} md5={}",
            small.len(),
            levee_test::digest_hex("md5sum", &small)
        );
        assert!(text.contains(&want_big), "want {want_big:?}, got {text:?}");
        assert!(
            text.contains(&want_small),
            "want {want_small:?}, got {text:?}"
        );
        assert!(text.contains("post title=holiday photos"), "{text:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_post_body_streams_through_to_php() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let body = levee_test::pseudo_random(8 * 1024 * 1024 + 7, 3);
        let want = format!(
            "len={} md5={} content_length={}\n",
            body.len(),
            levee_test::digest_hex("md5sum", &body),
            body.len()
        );
        let r = Req::post("/input.php", body)
            .header("content-type", "application/octet-stream")
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}\n{}", r.summary(), site.log());
        assert_eq!(r.text(), want);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_with_expect_100_continue_gets_its_continue_and_reaches_php() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    // What curl does for any body over 1 MiB: the headers, then wait for 100 Continue.
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp()).start();
    bounded(async {
        let body = levee_test::pseudo_random(2 * 1024 * 1024, 5);
        let mut conn = RawConn::connect(levee.addr()).await;
        let head = format!(
            "POST /input.php HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
            body.len()
        );
        conn.write(head.as_bytes()).await.expect("send the head");
        let interim = conn.read_until(b"\r\n\r\n", Duration::from_secs(5)).await;
        let interim = String::from_utf8_lossy(&interim).into_owned();
        assert!(
            interim.starts_with("HTTP/1.1 100 Continue"),
            "no 100 Continue within 5 s: {interim:?}"
        );
        conn.write(&body).await.expect("send the body");
        let raw = conn
            .read_until_closed(Duration::from_secs(15))
            .await
            .expect("the response never ended");
        let r = parse_raw(&raw);
        assert_eq!(r.status, 200, "{}", r.head);
        let want = format!(
            "len={} md5={} content_length={}\n",
            body.len(),
            levee_test::digest_hex("md5sum", &body),
            body.len()
        );
        assert_eq!(String::from_utf8_lossy(&r.body), want);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_post_body_reaches_php() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    // No Content-Length: the client streams the body in chunks, as curl does for
    // `-T -` and browsers' fetch() with a stream. PHP reads CONTENT_LENGTH bytes, so
    // the body must arrive with its length (nginx buffers such a body to know it).
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let body = levee_test::pseudo_random(300_000, 4);
        let mut request = format!(
            "POST /input.php HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            levee.addr()
        )
        .into_bytes();
        for chunk in body.chunks(70_000) {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let mut conn = RawConn::connect(levee.addr()).await;
        conn.write(&request)
            .await
            .expect("send the chunked request");
        let raw = conn
            .read_until_closed(Duration::from_secs(15))
            .await
            .expect("levee did not finish the response");
        let r = parse_raw(&raw);
        assert_eq!(r.status, 200, "{}", r.head);
        let text = String::from_utf8_lossy(&r.body).into_owned();
        let want = format!(
            "len={} md5={}",
            body.len(),
            levee_test::digest_hex("md5sum", &body)
        );
        assert!(text.starts_with(&want), "want {want:?}, got {text:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_post_body_over_the_limit_gets_413_that_says_what_to_do() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    // php needs CONTENT_LENGTH, so a chunked body is read whole first, up to
    // fastcgi.max_unsized_body; beyond it the client is told, and php runs nothing.
    let site = Site::start();
    let levee = levee_php(&site, &site.unix())
        .config("[fastcgi]\nmax_unsized_body = \"64KiB\"")
        .start();
    bounded(async {
        let body = levee_test::pseudo_random(200_000, 5);
        let mut request = format!(
            "POST /input.php HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            levee.addr()
        )
        .into_bytes();
        for chunk in body.chunks(50_000) {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let mut conn = RawConn::connect(levee.addr()).await;
        // levee may answer and close before reading it all: a failed write is fine.
        let _ = conn.write(&request).await;
        let raw = conn
            .read_until_closed(Duration::from_secs(15))
            .await
            .expect("levee did not finish the response");
        let r = parse_raw(&raw);
        assert_eq!(r.status, 413, "{}", r.head);
        assert!(
            String::from_utf8_lossy(&r.body).contains("Content-Length"),
            "the body should say what to do: {:?}",
            String::from_utf8_lossy(&r.body)
        );
        // A body with its length goes through, whatever its size.
        let r = Req::post("/input.php", body.clone()).send(&levee).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert!(
            r.text().starts_with(&format!("len={}", body.len())),
            "{}",
            r.text()
        );
    })
    .await;
}

/// What `stream.php?n=N` sends: N pieces of 1 MiB, each its index repeated.
fn stream_body(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n << 20);
    for i in 0..n {
        let piece = format!("{i:07}:");
        for _ in 0..131072 {
            v.extend_from_slice(piece.as_bytes());
        }
    }
    v
}

/// Reads a streamed response; returns its body and whether `probe` was true when the
/// first bytes arrived.
async fn read_streamed(
    addr: SocketAddr,
    path: &str,
    probe: impl Fn() -> bool,
) -> (Resp, Option<bool>) {
    let resp = Req::get(path).send_streaming(addr).await;
    let (parts, mut body) = resp.into_parts();
    let mut got = Vec::new();
    let mut probed = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), body.frame()).await {
            Err(_) => panic!("the streamed body stalled after {} bytes", got.len()),
            Ok(None) => break,
            Ok(Some(Err(e))) => panic!("the streamed body failed after {} bytes: {e}", got.len()),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if probed.is_none() && !data.is_empty() {
                        probed = Some(probe());
                    }
                    got.extend_from_slice(&data);
                }
            }
        }
    }
    let r = Resp {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: got.into(),
    };
    (r, probed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_mib_streamed_response_arrives_complete_and_before_the_script_ends() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let want = stream_body(20);
        let done = site.state_file("stream.done");
        // 20 pieces with 100 ms between them: the script runs for about 2 s.
        let path = "/stream.php?n=20&pause_ms=100";
        let (r, script_done) = read_streamed(levee.addr(), path, || done.exists()).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(
            script_done,
            Some(false),
            "the first bytes arrived only after the script had finished (buffered, not streamed)"
        );
        assert_eq!(r.body.len(), want.len(), "wrong length");
        assert!(
            r.body[..] == want[..],
            "the body differs from what PHP sent"
        );
        assert!(done.exists(), "the script did not finish");

        // Larger than max_object_size (16 MiB): streamed again, never a HIT.
        let (r, _) = read_streamed(levee.addr(), path, || false).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_ne!(r.x_cache(), "HIT", "{}", r.summary());
        assert!(r.body[..] == want[..], "the second body differs");
    })
    .await;
}

/// A raw HTTP/1.1 response as received, with its body de-chunked.
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
    /// The body ended as its framing says (last chunk, or Content-Length reached).
    complete: bool,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

fn parse_raw(raw: &[u8]) -> Raw {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Raw {
            status: 0,
            head: String::from_utf8_lossy(raw).into_owned(),
            body: Vec::new(),
            complete: false,
        };
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rest = &raw[end + 4..];
    let mut r = Raw {
        status,
        head,
        body: Vec::new(),
        complete: false,
    };
    let chunked = r
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        let mut pos = 0;
        while let Some(nl) = rest[pos..].windows(2).position(|w| w == b"\r\n") {
            let size_line = String::from_utf8_lossy(&rest[pos..pos + nl]).into_owned();
            let Ok(size) =
                usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            else {
                break;
            };
            pos += nl + 2;
            if size == 0 {
                r.complete = rest[pos..].starts_with(b"\r\n");
                break;
            }
            let avail = (rest.len() - pos).min(size);
            r.body.extend_from_slice(&rest[pos..pos + avail]);
            if avail < size || rest.len() < pos + size + 2 {
                break;
            }
            pos += size + 2;
        }
    } else if let Some(len) = r
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        r.body = rest[..rest.len().min(len)].to_vec();
        r.complete = rest.len() >= len;
    } else {
        r.body = rest.to_vec();
        r.complete = true;
    }
    r
}

/// `GET path` with `Connection: close` over raw TCP; `None` if levee neither finished
/// nor closed within 15 s (a hang).
async fn raw_get(addr: SocketAddr, path: &str, headers: &str) -> Option<Raw> {
    let mut conn = RawConn::connect(addr).await;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    conn.write(req.as_bytes()).await.expect("send request");
    let raw = conn.read_until_closed(Duration::from_secs(15)).await?;
    Some(parse_raw(&raw))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_that_die_mid_response_never_hang_the_client_nor_get_cached() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let addr = levee.addr();
        // exit() and a fatal error after output end the request cleanly (php-fpm sends
        // END_REQUEST): the client gets what was written, properly terminated.
        for (script, byte) in [("die_exit", b'x'), ("die_fatal", b'y')] {
            let path = format!("/{script}.php");
            let r = raw_get(addr, &path, "")
                .await
                .unwrap_or_else(|| panic!("{path}: the response never ended"));
            assert_eq!(r.status, 200, "{path}: {}", r.head);
            assert!(r.complete, "{path}: a clean end was cut off: {}", r.head);
            assert_eq!(r.body.len(), 100_000, "{path}");
            assert!(
                r.body.iter().all(|&b| b == byte),
                "{path}: unexpected bytes"
            );
        }

        // A worker killed mid-response: the client sees an aborted response, never a
        // hang and never a clean end; waiters of the same fill alike.
        let mut set = JoinSet::new();
        for _ in 0..5 {
            set.spawn(async move { raw_get(addr, "/die_kill.php", "").await });
        }
        let mut n = 0;
        while let Some(res) = set.join_next().await {
            let r = res
                .expect("client task")
                .expect("a client of a killed script hung");
            n += 1;
            let how = std::fs::read_to_string(site.state_file("die_kill.how")).unwrap_or_default();
            if how == "posix_kill" {
                assert!(
                    !r.complete,
                    "a response cut off by a killed worker looks complete: {} ({} bytes)",
                    r.head,
                    r.body.len()
                );
                assert!(r.body.len() <= 100_000);
                assert!(r.body.iter().all(|&b| b == b'z'));
            }
        }
        assert_eq!(n, 5);
        let how = std::fs::read_to_string(site.state_file("die_kill.how")).unwrap_or_default();
        assert_eq!(
            how, "posix_kill",
            "posix_kill is not available in php-fpm: the kill case was not tested"
        );

        // Nothing partial was stored: the next request runs the script again.
        let runs = site.runs("die_kill");
        let r = raw_get(addr, "/die_kill.php", "")
            .await
            .expect("the request after a killed worker hung");
        assert_ne!(
            r.header("x-cache"),
            Some("HIT"),
            "a partial body was cached: {}",
            r.head
        );
        assert!(!r.complete, "{}", r.head);
        assert!(
            eventually(Duration::from_secs(5), || site.runs("die_kill") > runs).await,
            "the script did not run again"
        );

        // The same for a request that passes (a session): aborted, not hung.
        let r = raw_get(addr, "/die_kill.php", "Cookie: PHPSESSID=abc\r\n")
            .await
            .expect("a passed request to a killed worker hung");
        assert_eq!(r.header("x-cache"), Some("PASS"), "{}", r.head);
        assert!(!r.complete, "{}", r.head);

        // And levee keeps serving.
        for _ in 0..3 {
            let r = levee.get("/hello.php").await;
            assert_eq!(r.status, 200, "{}", r.summary());
            assert_eq!(r.text(), "hello from php");
        }
    })
    .await;
}

/// `n=.. sid=.. run=..` of the session fixtures.
fn session_line(r: &Resp) -> String {
    r.text()
        .trim()
        .trim_start_matches("<p>")
        .trim_end_matches("</p>")
        .to_string()
}

/// Clients with a session always reach PHP and get their own session's page.
async fn check_session_clients_pass(levee: &Levee, path: &str, first_n: usize) {
    for (sid, n) in [
        ("leveeclientA1", first_n),
        ("leveeclientA1", first_n + 1),
        ("leveeclientB2", first_n),
        ("leveeclientA1", first_n + 2),
    ] {
        let r = Req::get(path)
            .header("cookie", &format!("PHPSESSID={sid}; _ga=GA1.2.3"))
            .send(levee)
            .await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        let line = session_line(&r);
        assert!(
            line.starts_with(&format!("n={n} sid={sid} ")),
            "{sid} got {line:?}, expected n={n}"
        );
    }
}

/// Anonymous clients get the one stored copy, without Set-Cookie.
async fn check_anonymous_hits(site: &Site, levee: &Levee, path: &str, script: &str) {
    let runs = site.runs(script);
    let first = levee.get(path).await;
    assert_eq!(first.status, 200, "{}\n{}", first.summary(), site.log());
    // (levee runs with --debug-headers here.)
    assert_eq!(
        first.reason(),
        "stored",
        "the anonymous page was not stored: {}\n{:#?}",
        first.summary(),
        first.headers
    );
    assert!(
        first.header_all("set-cookie").is_empty(),
        "an anonymous response carried Set-Cookie: {}\n{:#?}",
        first.summary(),
        first.headers
    );
    assert_eq!(site.runs(script), runs + 1);
    let line = session_line(&first);
    assert!(line.starts_with("n=1 sid="), "{line:?}");
    levee.wait_stored(path).await;
    for _ in 0..5 {
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.text(), first.text());
        assert!(
            r.header_all("set-cookie").is_empty(),
            "a HIT carried {:?}",
            r.header_all("set-cookie")
        );
    }
    assert_eq!(site.runs(script), runs + 1, "php-fpm ran the script again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moniwiki_session_pages_with_s_maxage_are_shared_with_anonymous_clients_only() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).debug_headers().start();
    bounded(async {
        check_session_clients_pass(&levee, "/moniwiki.php", 1).await;
        assert_eq!(site.runs("moniwiki"), 4);
        check_anonymous_hits(&site, &levee, "/moniwiki.php", "moniwiki").await;
        // Still their own pages, not the stored one.
        let r = levee
            .get_with("/moniwiki.php", &[("cookie", "PHPSESSID=leveeclientB2")])
            .await;
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        assert!(
            session_line(&r).starts_with("n=2 sid=leveeclientB2 "),
            "{}",
            r.text()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xe_session_pages_are_micro_cached_for_anonymous_clients_only() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp())
        .args(&["--micro-cache", "2s"])
        .debug_headers()
        .start();
    bounded(async {
        check_session_clients_pass(&levee, "/xe.php?mid=board", 1).await;
        assert_eq!(site.runs("xe"), 4);
        check_anonymous_hits(&site, &levee, "/xe.php?mid=board", "xe").await;
        let r = levee
            .get_with(
                "/xe.php?mid=board",
                &[("cookie", "PHPSESSID=leveeclientA1")],
            )
            .await;
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        assert!(
            session_line(&r).starts_with("n=4 sid=leveeclientA1 "),
            "{}",
            r.text()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_misses_run_the_php_script_once() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp()).start();
    bounded(async {
        let addr = levee.addr();
        let mut set = JoinSet::new();
        for _ in 0..100 {
            set.spawn(async move { Req::get("/slow.php").send_to(addr).await });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            let r = r.expect("client task");
            assert_eq!(r.status, 200, "{}", r.summary());
            assert_eq!(r.text(), "slow page, run 1", "{}", r.summary());
            n += 1;
        }
        assert_eq!(n, 100);
        assert_eq!(
            site.runs("slow"),
            1,
            "php-fpm ran the script more than once"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_never_runs_more_scripts_at_once_than_backend_max_concurrency() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    // More php-fpm workers than the limit: only levee can keep PHP at 2.
    let site = Site::with_children(8);
    let levee = levee_php(&site, &site.unix())
        .args(&["--backend-max-concurrency", "2"])
        .start();
    bounded(async {
        let addr = levee.addr();
        let started = Instant::now();
        let mut set = JoinSet::new();
        for i in 0..20 {
            set.spawn(async move {
                let path = format!("/conc.php?i={i}");
                if i % 2 == 0 {
                    (path.clone(), Req::get(&path).send_to(addr).await)
                } else {
                    (path.clone(), Req::post(&path, "x=1").send_to(addr).await)
                }
            });
        }
        while let Some(res) = set.join_next().await {
            let (path, r) = res.expect("client task");
            assert_eq!(r.status, 200, "{path}: {}", r.summary());
            assert!(r.text().ends_with(&path), "{path}: {}", r.text());
        }
        let peak = site.peak("conc");
        assert!(
            peak <= 2,
            "PHP ran {peak} scripts at once with a limit of 2"
        );
        assert_eq!(
            peak, 2,
            "the limit was never reached: the test measured nothing"
        );
        // 20 runs of 200 ms, two at a time.
        assert!(
            started.elapsed() >= Duration::from_millis(1800),
            "{:?}",
            started.elapsed()
        );
    })
    .await;
}

/// With no limit given, levee reads pm.max_children from the configuration the running
/// php-fpm master names, keeps that many connections, all kept alive, and queues the
/// rest itself: php-fpm's listen backlog stays empty and nothing connects per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_fpm_pm_max_children_is_the_limit_and_its_connections_stay_kept_alive() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_children(3);
    for backend in [site.unix(), site.tcp()] {
        let levee = levee_php(&site, &backend).start();
        bounded(async {
            let addr = levee.addr();
            let mut set = JoinSet::new();
            for i in 0..15 {
                set.spawn(async move {
                    let path = format!("/conc.php?i={i}");
                    (path.clone(), Req::get(&path).send_to(addr).await)
                });
            }
            while let Some(res) = set.join_next().await {
                let (path, r) = res.expect("client task");
                assert_eq!(r.status, 200, "{path}: {}", r.summary());
            }
            assert!(
                levee.stderr().contains("pm.max_children of php-fpm's pool"),
                "{}",
                levee.stderr()
            );
            assert_eq!(levee.metric("levee_backend_limit").await, 3.0);
            let connects = levee.metric("levee_fastcgi_connects_total").await;
            assert!(
                connects <= 3.0,
                "{connects} connections for 15 requests over a limit of 3 ({backend})"
            );
            assert_eq!(site.peak("conc"), 3, "{backend}");
        })
        .await;
    }
}

/// Asserts a clear 502 from levee that speaks of php-fpm, and names `what` (the socket
/// or address) in levee's log, never to the client.
async fn assert_php_fpm_502(levee: &Levee, r: &Resp, what: &str) {
    assert_eq!(r.status, 502, "{}", r.summary());
    assert_eq!(r.x_cache(), "ERROR", "{}", r.summary());
    let text = r.text();
    assert!(
        text.contains("php-fpm"),
        "the body does not say php-fpm: {text:?}"
    );
    assert!(
        !text.contains(what),
        "the body shows clients {what}: {text:?}"
    );
    levee.wait_log(what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_fpm_not_running_gives_a_clear_502() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let mut site = Site::start();
    site.stop_fpm();
    let socket = site.base.join("no-such-dir").join("php-fpm.sock");
    let levee = levee_php(&site, &format!("fastcgi+unix:{}", socket.display())).start();
    bounded(async {
        for path in ["/", "/wiki/Page", "/hello.php"] {
            let r = levee.get(path).await;
            assert_php_fpm_502(&levee, &r, &socket.display().to_string()).await;
        }
        let r = Req::post("/hello.php", "a=1").send(&levee).await;
        assert_php_fpm_502(&levee, &r, &socket.display().to_string()).await;
        // Static files do not need php-fpm.
        let r = levee.get("/assets/style.css").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "STATIC");
    })
    .await;

    let refusing = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let levee = levee_php(&site, &format!("fastcgi://{refusing}")).start();
    bounded(async {
        let r = levee.get("/").await;
        assert_php_fpm_502(&levee, &r, &refusing.to_string()).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_page_is_served_within_grace_when_php_fpm_stops() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let mut site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    let r = bounded(levee.get("/page.php")).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), "cached page, run 1");
    bounded(levee.wait_stored("/page.php")).await;
    // max-age=1: stale a second later, still within the default grace of 1 h. (php-fpm
    // sends no Date: levee dates the page by its own clock.)
    bounded(levee.advance_clock(Duration::from_secs(2))).await;
    site.stop_fpm();
    bounded(async {
        let r = levee.get("/page.php").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
        assert_eq!(r.text(), "cached page, run 1");
        // A page that was never cached has nothing to fall back on.
        let r = levee.get("/hello.php").await;
        assert_eq!(r.status, 502, "{}", r.summary());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_are_served_while_every_php_worker_is_busy() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::with_children(2);
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let addr = levee.addr();
        let mut set = JoinSet::new();
        for i in 0..2 {
            set.spawn(async move { Req::get(&format!("/sleep3.php?i={i}")).send_to(addr).await });
        }
        assert!(
            eventually(Duration::from_secs(5), || site.runs("sleep3") == 2).await,
            "both php workers did not get busy: {} runs",
            site.runs("sleep3")
        );
        let t = Instant::now();
        let r = levee.get("/assets/style.css").await;
        let took = t.elapsed();
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "STATIC", "{}", r.summary());
        assert_eq!(
            r.text(),
            "body { color: #333; } /* served by levee itself */\n"
        );
        assert!(took < Duration::from_secs(1), "took {took:?}");
        // The workers really were busy: the slow scripts are still running.
        assert_eq!(site.runs("sleep3"), 2);
        while let Some(r) = set.join_next().await {
            let r = r.expect("client task");
            assert_eq!(r.status, 200, "{}", r.summary());
            assert_eq!(r.text(), "slept");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_304_revalidates_a_stale_page_and_conditional_clients_get_304() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let r = levee.get("/etag.php").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), "page with validators, run 1");
        assert_eq!(r.header("etag"), Some("\"v1\""));
        levee.wait_stored("/etag.php").await;
        // A client that has the page: 304 from the cache.
        let r = levee
            .get_with("/etag.php", &[("if-none-match", "\"v1\"")])
            .await;
        assert_eq!(r.status, 304, "{}", r.summary());
        assert!(r.body.is_empty());
        // A session client asks PHP itself, which answers 304 with no body.
        let r = levee
            .get_with(
                "/etag.php",
                &[("if-none-match", "\"v1\""), ("cookie", "PHPSESSID=abc")],
            )
            .await;
        assert_eq!(r.status, 304, "{}", r.summary());
        assert_eq!(r.x_cache(), "PASS");
        assert!(r.body.is_empty());
        assert_eq!(site.runs("etag304"), 1);

        // Stale after max-age=60: levee asks PHP with If-None-Match, PHP says 304, and
        // the stored body is served again, fresh for another minute (not a second a slow
        // machine could spend between two requests). (php-fpm sends no Date: levee dates
        // the 304 by its own clock, so only levee's moves.)
        levee.advance_clock(Duration::from_secs(61)).await;
        let r = levee.get("/etag.php").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
        assert_eq!(r.text(), "page with validators, run 1");
        assert_eq!(site.runs("etag304"), 2, "levee did not revalidate with PHP");
        let r = levee.get("/etag.php").await;
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(site.runs("etag"), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_slower_than_the_first_byte_timeout_gives_504_and_levee_recovers() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.tcp())
        .config("[limits]\nbackend_first_byte_timeout = \"1s\"")
        .start();
    bounded(async {
        let t = Instant::now();
        let r = levee.get("/sleep3.php").await;
        let took = t.elapsed();
        assert_eq!(r.status, 504, "{}", r.summary());
        assert!(r.text().contains("1s"), "{}", r.text());
        assert!(took < Duration::from_millis(2500), "took {took:?}");
        for _ in 0..3 {
            let r = levee.get("/hello.php").await;
            assert_eq!(r.status, 200, "{}", r.summary());
            assert_eq!(r.text(), "hello from php");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_stops_the_script_of_its_passed_request() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start();
    let levee = levee_php(&site, &site.unix()).start();
    bounded(async {
        let resp = Req::get("/stream_nostore.php")
            .header("cookie", "PHPSESSID=abc")
            .send_streaming(levee.addr())
            .await;
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let first = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("no first chunk within 5 s");
        assert!(first.is_some());
        drop(body);
        // The script would end after 2 s; levee closing php-fpm's connection ends it at its
        // next write. Either way its shutdown function marks that it ended.
        assert!(
            eventually(Duration::from_secs(10), || site
                .state_file("stream_nostore.ended")
                .exists())
            .await,
            "the script did not end within 10 s"
        );
        assert!(
            !site.state_file("stream_nostore.done").exists(),
            "the script ran to its end for a client that had gone"
        );
        let r = levee.get("/hello.php").await;
        assert_eq!(r.status, 200, "{}", r.summary());
    })
    .await;
}

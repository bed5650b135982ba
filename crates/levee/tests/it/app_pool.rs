//! levee running the application itself (issue 12, first part): `--app` processes,
//! balanced and restarted, with the cache in front of them unchanged.

use std::time::Duration;

use levee_test::{levee, Levee, Req};

/// A Python worker: `/pid` answers its pid uncached, `/slow` after 400 ms, `/page` is
/// cacheable, `/exit` kills it in the middle of the request, `/unlisten` closes its
/// listening socket but keeps it running, `/env` shows its directory and `APP_GREETING`.
const WORKER: &str = r#"
import http.server, os, sys, time
leak = []
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per response: headers and body in separate small writes meet Nagle and
    # delayed ACKs (40 ms a request).
    wbufsize = 1 << 16
    def do_GET(self):
        if self.path == "/exit":
            os._exit(3)
        if self.path == "/hang":
            time.sleep(300)
        if self.path.startswith("/grow"):
            leak.append(bytearray(os.urandom(1024)) * 20480)
        if self.path.startswith("/slow"):
            time.sleep(0.4)
        body = ("%s pid=%d" % (self.path, os.getpid())).encode()
        if self.path == "/env":
            body = ("cwd=%s greeting=%s" % (os.getcwd(), os.environ.get("APP_GREETING"))).encode()
        self.send_response(200)
        if self.path == "/unlisten":
            # Closed before it answers: the next connection is refused.
            self.server.shutdown()
            self.server.socket.close()
            self.close_connection = True
            self.send_header("Connection", "close")
        cc = "max-age=60" if self.path == "/page" else "no-store"
        self.send_header("Cache-Control", cc)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
server.serve_forever()
server.server_close()
time.sleep(600)
"#;

fn start(dir: &std::path::Path, processes: &str) -> Levee {
    start_with(dir, processes, "")
}

/// levee running the worker, with `app_config` lines in its `[app]` table.
fn start_with(dir: &std::path::Path, processes: &str, app_config: &str) -> Levee {
    std::fs::write(dir.join("worker.py"), WORKER).unwrap();
    levee!()
        .args(&[
            "--app",
            &format!("python3 {}/worker.py {{port}}", dir.display()),
        ])
        .args(&["--app-processes", processes])
        .config(&format!("[app]\n{app_config}"))
        .start()
}

fn pid(text: &str) -> String {
    text.split("pid=").nth(1).unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_processes_serve_behind_the_cache_one_request_each() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start(dir.path(), "2");
    // The first request waits for a process to be ready.
    let r = levee.get("/page").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "MISS");
    levee.wait_stored("/page").await;
    assert_eq!(levee.get("/page").await.x_cache(), "HIT");

    // Two slow requests at once (two URLs: one URL would share one backend request) go
    // to the two processes, one request per process.
    let (a, b) = tokio::join!(levee.get("/slow?a"), levee.get("/slow?b"));
    assert!(
        a.status == 200 && b.status == 200,
        "{} / {}",
        a.summary(),
        b.summary()
    );
    assert_ne!(
        pid(&a.text()),
        pid(&b.text()),
        "{} / {}",
        a.text(),
        b.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_dies_mid_request_is_replaced() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start(dir.path(), "1");
    let first = pid(&levee.get("/pid").await.text());
    assert!(!first.is_empty());
    let r = levee.get("/exit").await;
    assert_eq!(r.status, 502, "{}", r.summary());
    // The replacement comes up on its own; requests succeed again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = Req::get("/pid").send(&levee).await;
        if r.status == 200 {
            assert_ne!(pid(&r.text()), first, "a new process");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no replacement: {}",
            r.summary()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        levee.stderr().contains("levee: app process 0 (pid"),
        "the exit is logged: {}",
        levee.stderr()
    );
}

/// A process that stops accepting connections while still running (its supervisor sees
/// nothing wrong): a GET refused by it goes to the other process, nothing fails, and the
/// broken one is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_refused_by_a_process_goes_to_another() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start(dir.path(), "2");
    for p in ["0", "1"] {
        let ready = format!("levee_app_process_ready{{process=\"{p}\"}}");
        levee.wait_metric(&ready, |v| v == 1.0).await;
    }
    let first = pid(&levee.get("/unlisten").await.text());
    levee.wait_backend_idle().await;
    // Idle processes are taken in turn: of two requests in a row, one is offered to the
    // broken process first. Both are answered by the other.
    for _ in 0..2 {
        let r = levee.get("/pid").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_ne!(pid(&r.text()), first, "{}", r.text());
    }
    // The broken process is replaced (its log line comes before the new one is ready).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while levee.metric_sum("levee_app_process_restarts_total").await < 1.0 {
        assert!(std::time::Instant::now() < deadline, "{}", levee.stderr());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for p in ["0", "1"] {
        let ready = format!("levee_app_process_ready{{process=\"{p}\"}}");
        levee.wait_metric(&ready, |v| v == 1.0).await;
    }
    let err = levee.stderr();
    assert!(err.contains("refused a connection"), "{err}");
}

/// A request refused at connect never reached the application: it waits for the only
/// process's replacement and goes there, a POST too, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_refused_at_connect_goes_to_the_replacement() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start(dir.path(), "1");
    let first = pid(&levee.get("/unlisten").await.text());
    levee.wait_backend_idle().await;
    // The worker has no do_POST: the replacement's 501 says the POST arrived there
    // (with a 502, it would have been dropped).
    let r = Req::post("/pid", "x").send(&levee).await;
    assert_eq!(r.status, 501, "{}", r.summary());
    let r = levee.get("/pid").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_ne!(pid(&r.text()), first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processes_run_in_their_directory_with_their_environment() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let levee = start_with(
        dir.path(),
        "1",
        &format!(
            "cwd = \"{}\"\nenv = {{ APP_GREETING = \"hello there\" }}",
            home.display()
        ),
    );
    let r = levee.get("/env").await;
    let home = home.canonicalize().unwrap();
    assert_eq!(
        r.text(),
        format!("cwd={} greeting=hello there", home.display()),
        "{}",
        r.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_request_gets_504_and_its_process_is_replaced() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_with(dir.path(), "1", "request_timeout = \"1s\"");
    let first = pid(&levee.get("/pid").await.text());
    let started = std::time::Instant::now();
    let r = levee.get("/hang").await;
    assert_eq!(r.status, 504, "{}", r.summary());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = levee.get("/pid").await;
        if r.status == 200 && pid(&r.text()) != first {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not replaced: {}",
            r.summary()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(levee.stderr().contains("was killed"), "{}", levee.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaking_worker_is_recycled_by_max_memory_with_no_failed_request() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_with(dir.path(), "1", "max_memory = \"80MiB\"");
    const RSS: &str = "levee_app_process_resident_bytes{process=\"0\"}";
    const RECYCLED: &str = "levee_app_process_recycled_total{process=\"0\"}";
    let mut pids = Vec::new();
    // 20 MB more a request: over 80 MiB within a few.
    for i in 0.. {
        let r = levee.get(&format!("/grow?{i}")).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.summary());
        pids.push(pid(&r.text()));
        if levee.metric(RSS).await > f64::from(80 << 20) {
            break;
        }
        assert!(i < 20, "20 MB a request, still under 80 MiB after {i}");
    }
    // Requests go on while the supervisor's check (every 250 ms) replaces it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while levee.metric(RECYCLED).await < 1.0 {
        let r = levee.get("/pid").await;
        assert_eq!(r.status, 200, "during the recycle: {}", r.summary());
        assert!(
            std::time::Instant::now() < deadline,
            "never recycled: {pids:?}"
        );
    }
    let r = levee.get("/pid").await;
    assert_eq!(r.status, 200, "after the recycle: {}", r.summary());
    assert_ne!(pid(&r.text()), pids[0], "the replacement serves");
    assert!(
        levee.stderr().contains("over max_memory"),
        "{}",
        levee.stderr()
    );
    assert!(
        !levee.stderr().contains("starting it again"),
        "an unplanned restart: {}",
        levee.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_command_without_its_port_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
        .args(["serve", "--app", "php worker.php", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("{port}"));
}

/// A deploy: a file under `[app] watch` changes while clients keep requesting an
/// uncached URL; every process is replaced, each one's replacement ready before it
/// stops, and no request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_change_restarts_the_processes_with_no_failed_request() {
    levee_test::require!(levee_test::tools::PYTHON3);
    const ANSWERED: &str = "levee_request_duration_seconds_count";
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code");
    std::fs::create_dir(&code).unwrap();
    std::fs::write(code.join("version.txt"), "1").unwrap();
    let levee = start_with(
        dir.path(),
        "2",
        &format!("watch = [\"{}\"]", code.display()),
    );
    assert_eq!(levee.get("/pid").await.status, 200);
    // Both processes up before the change (a loaded machine can take seconds to start
    // one), so that it replaces running processes rather than meeting a first start.
    for p in ["0", "1"] {
        let ready = format!("levee_app_process_ready{{process=\"{p}\"}}");
        levee
            .wait_metric_within(&ready, Duration::from_secs(20), |v| v == 1.0)
            .await;
    }
    // Clients on kept-alive connections, one request after another until told to stop:
    // the load lasts as long as the restart takes (seconds, on a loaded machine).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (stop, addr) = (stop.clone(), levee.addr());
        clients.spawn(async move {
            let mut conn = levee_test::Conn::open(addr).await;
            let mut answered = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = conn.send(Req::get("/pid")).await;
                if r.status != 200 {
                    return Err(format!("after {answered} answers: {}", r.summary()));
                }
                answered += 1;
            }
            Ok(answered)
        });
    }
    // The load is on: the change comes while it runs...
    let start = levee.metric(ANSWERED).await;
    levee.wait_metric(ANSWERED, |n| n >= start + 50.0).await;
    std::fs::write(code.join("version.txt"), "2").unwrap();
    let at_change = levee.metric(ANSWERED).await;
    // ...both processes are replaced...
    for p in ["0", "1"] {
        let recycled = format!("levee_app_process_recycled_total{{process=\"{p}\"}}");
        levee
            .wait_metric_within(&recycled, Duration::from_secs(20), |n| n == 1.0)
            .await;
    }
    let restarted = levee.metric(ANSWERED).await;
    assert!(
        restarted > at_change,
        "no request was answered during the restart"
    );
    // ...and the replacements serve.
    levee.wait_metric(ANSWERED, |n| n >= restarted + 50.0).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(client) = clients.join_next().await {
        let answered = client.expect("client task").unwrap_or_else(|e| {
            panic!(
                "a request failed during the restart: {e}\n{}",
                levee.stderr()
            )
        });
        assert!(answered > 0, "a client was never answered");
    }
    let err = levee.stderr();
    assert!(err.contains("files of the app changed"), "{err}");
    assert_eq!(err.matches("replaced by pid").count(), 2, "{err}");
    assert!(
        !err.contains("starting it again"),
        "an unplanned restart: {err}"
    );
}

/// levee running `app` (a PHP app file's text) on runtime/levee-worker.php.
fn start_php_app(dir: &std::path::Path, app: &str, processes: &str) -> Levee {
    std::fs::write(dir.join("app.php"), app).unwrap();
    let runtime =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runtime/levee-worker.php");
    levee!()
        .args(&[
            "--app",
            &format!(
                "php {} {{port}} {}",
                runtime.display(),
                dir.join("app.php").display()
            ),
            "--app-processes",
            processes,
        ])
        .start()
}

/// A PHP app kept warm by runtime/levee-worker.php, nothing but php-cli: booted once,
/// its handler called per request with fresh superglobals.
const PHP_APP: &str = r#"<?php
$count = 0;
return function (array $r) use (&$count) {
    $count++;
    if ($r['path'] === '/exit') { exit(1); }
    if ($r['path'] === '/throw') { throw new RuntimeException('boom'); }
    $seen = json_encode(['get' => $_GET, 'cookie' => $_COOKIE, 'method' => $_SERVER['REQUEST_METHOD']]);
    return [200, ['Content-Type' => 'text/plain', 'Cache-Control' => 'no-store'],
        'php=' . getmypid() . ' count=' . $count . ' seen=' . $seen];
};
"#;

fn field<'a>(text: &'a str, name: &str) -> &'a str {
    text.split(&format!("{name}="))
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_app_stays_warm_in_the_php_worker_runtime() {
    levee_test::require!(levee_test::tools::PHP_CGI);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_php_app(dir.path(), PHP_APP, "1");
    let a = levee.get("/a?x=1").await;
    assert_eq!(a.status, 200, "{}", a.summary());
    let b = Req::get("/b")
        .header("cookie", "PHPSESSID=s1")
        .send(&levee)
        .await;
    assert_eq!(b.status, 200, "{}", b.summary());
    let (ta, tb) = (a.text(), b.text());
    // One process, booted once: the same pid, the request count goes on.
    assert_eq!(field(&ta, "php"), field(&tb, "php"));
    assert_eq!((field(&ta, "count"), field(&tb, "count")), ("1", "2"));
    // Each request sees only its own query and cookies.
    assert!(ta.contains(r#""get":{"x":"1"}"#), "{ta}");
    assert!(
        tb.contains(r#""get":[]"#) && tb.contains(r#""PHPSESSID":"s1""#),
        "{tb}"
    );
    // A handler that throws answers 500; the process lives on.
    assert_eq!(levee.get("/throw").await.status, 500);
    let c = levee.get("/c").await.text();
    assert_eq!(field(&c, "php"), field(&ta, "php"));
    assert_eq!(field(&c, "count"), "4");
    // One that exits answers as php-fpm would (what it printed, 200) and is replaced.
    let r = levee.get("/exit").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = levee.get("/d").await;
        if r.status == 200 {
            assert_ne!(field(&r.text(), "php"), field(&ta, "php"));
            assert_eq!(field(&r.text(), "count"), "1", "a new process boots anew");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.summary());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a request changes with ini_set() (and set_include_path(), error_reporting())
/// is set back before the next, as php-fpm does at the end of every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_a_request_changes_are_set_back_before_the_next() {
    levee_test::require!(levee_test::tools::PHP_CGI);
    let dir = tempfile::tempdir().unwrap();
    let app = r#"<?php
return function (array $r) {
    if ($r['path'] === '/change') {
        ini_set('precision', '5');
        ini_set('default_charset', 'ISO-8859-1');
        set_include_path('/nowhere');
        error_reporting(0);
    }
    return [200, ['Cache-Control' => 'no-store'], 'precision=' . ini_get('precision')
        . ' charset=' . ini_get('default_charset') . ' include_path=' . get_include_path()
        . ' error_reporting=' . error_reporting()];
};
"#;
    let levee = start_php_app(dir.path(), app, "1");
    let before = levee.get("/read").await;
    assert_eq!(before.status, 200, "{}", before.summary());
    let changed = levee.get("/change").await.text();
    assert!(
        changed.contains("precision=5") && changed.contains("include_path=/nowhere"),
        "{changed}"
    );
    assert!(
        changed.contains("error_reporting=0 ") || changed.ends_with("error_reporting=0"),
        "{changed}"
    );
    for _ in 0..2 {
        assert_eq!(levee.get("/read").await.text(), before.text(), "set back");
    }
}

/// Sequential requests (every process idle each time) go round the processes, not
/// all to the first: four in a row reach four processes of the warm PHP runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_requests_reach_every_process() {
    levee_test::require!(levee_test::tools::PHP_CGI);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_php_app(dir.path(), PHP_APP, "4");
    for p in 0..4 {
        levee
            .wait_metric(
                &format!("levee_app_process_ready{{process=\"{p}\"}}"),
                |v| v == 1.0,
            )
            .await;
    }
    let mut pids = std::collections::BTreeSet::new();
    for i in 0..4 {
        let r = levee.get(&format!("/seq{i}")).await;
        assert_eq!(r.status, 200, "{}", r.summary());
        pids.insert(field(&r.text(), "php").to_string());
    }
    assert_eq!(pids.len(), 4, "processes reached: {pids:?}");
}

/// A worker as plain as they come: one connection at a time, served until the client
/// closes it (Python's non-threading HTTPServer), as many hand-written PHP loops are.
const ONE_CONNECTION_WORKER: &str = r#"
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16
    def do_GET(self):
        body = ("pid=%d" % os.getpid()).encode()
        self.send_response(200)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pid-%d" % os.getpid()), "w").close()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

fn start_one_connection_workers(dir: &std::path::Path, processes: &str) -> Levee {
    std::fs::write(dir.join("one.py"), ONE_CONNECTION_WORKER).unwrap();
    levee!()
        .args(&[
            "--workers",
            "2",
            "--app",
            &format!("python3 {}/one.py {{port}}", dir.display()),
            "--app-processes",
            processes,
        ])
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_serves_one_connection_at_a_time_gets_one_connection() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_one_connection_workers(dir.path(), "2");
    assert_eq!(levee.get("/warm").await.status, 200);
    // 16 clients on their own connections, spread over levee's two worker threads: with
    // a connection pool per thread, a process would get a second connection while the
    // first sat idle in the other thread's pool, and never answer on it.
    let addr = levee.addr();
    let clients: Vec<_> = (0..16)
        .map(|c| {
            tokio::spawn(async move {
                let mut conn = levee_test::Conn::open(addr).await;
                let mut slowest = Duration::ZERO;
                for i in 0..10 {
                    let t = std::time::Instant::now();
                    let r = tokio::time::timeout(
                        Duration::from_secs(5),
                        conn.send(Req::get(&format!("/c{c}/{i}"))),
                    )
                    .await
                    .unwrap_or_else(|_| panic!("client {c} request {i} had no answer in 5 s"));
                    assert_eq!(r.status, 200, "{}", r.summary());
                    slowest = slowest.max(t.elapsed());
                }
                slowest
            })
        })
        .collect();
    for c in clients {
        let slowest = c.await.unwrap();
        assert!(
            slowest < Duration::from_secs(1),
            "a request took {slowest:?}"
        );
    }
    let err = levee.stderr();
    assert!(
        !err.contains("was killed") && !err.contains("starting it again"),
        "a process was killed or restarted: {err}"
    );
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

fn worker_pids(dir: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("pid-")?
                .parse()
                .ok()
        })
        .collect()
}

/// A PHP app on runtime/levee-worker.php that notes its pid (php-cli re-executes itself
/// as php-cgi: the same pid, which must still die with levee).
const PHP_PID_APP: &str = r#"<?php
touch(__DIR__ . '/pid-' . getmypid());
return fn (array $r) => 'php ' . getmypid();
"#;

fn start_php_pid_app(dir: &std::path::Path, processes: &str) -> Levee {
    start_php_app(dir, PHP_PID_APP, processes)
}

/// Starts 4 processes with `start`, stops levee with `signal`, and asserts that none of
/// them runs 3 s later.
async fn none_outlives(start: fn(&std::path::Path, &str) -> Levee, signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut levee = start(dir.path(), "4");
    assert_eq!(levee.get("/up").await.status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while worker_pids(dir.path()).len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "4 processes never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pids = worker_pids(dir.path());
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    levee.signal(signal);
    assert!(
        levee.wait_exit(Duration::from_secs(10)).is_some(),
        "levee did not exit on SIG{signal}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after SIG{signal} of levee, app processes {left:?} still run 3 s later"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_app_process_outlives_levee_killed_or_stopped() {
    levee_test::require!(levee_test::tools::PYTHON3);
    for signal in ["KILL", "TERM"] {
        none_outlives(start_one_connection_workers, signal).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_php_worker_outlives_levee_killed_or_stopped() {
    levee_test::require!(levee_test::tools::PHP_CGI);
    for signal in ["KILL", "TERM"] {
        none_outlives(start_php_pid_app, signal).await;
    }
}

/// A PHP app that shows what PHP made of a request's body, and whether a file exists.
const PHP_UPLOAD_APP: &str = r#"<?php
return function (array $r) {
    if ($r['path'] === '/exists') {
        echo json_encode(['exists' => file_exists($_GET['p'] ?? '')]);
        return null;
    }
    echo json_encode(['files' => $_FILES, 'post' => $_POST, 'input' => strlen(file_get_contents('php://input'))]);
    return null;
};
"#;

/// Uploads as php-fpm takes them (issue 19): `$_FILES` in PHP's shapes, a file over
/// upload_max_filesize (2M in Debian's php.ini) refused with UPLOAD_ERR_INI_SIZE, a body
/// over post_max_size (8M) dropped, temporary files removed after the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_uploads_honour_the_ini_limits_and_leave_no_file_behind() {
    levee_test::require!(levee_test::tools::PHP_CGI);
    let dir = tempfile::tempdir().unwrap();
    let levee = start_php_app(dir.path(), PHP_UPLOAD_APP, "1");
    let small = levee_test::pseudo_random(1000, 1);
    let big = levee_test::pseudo_random(3 << 20, 2);
    let (ct, body) = levee_test::multipart(
        &[("note", "hello"), ("a[b]", "nested")],
        &[
            ("small", "small.bin", &small),
            ("big", "big.bin", &big),
            ("docs[]", "one.txt", b"one"),
            ("docs[]", "two.txt", b"two"),
        ],
    );
    let r = Req::post("/upload", body)
        .header("content-type", &ct)
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let files = &v["files"];
    assert_eq!(v["post"]["note"], "hello", "{v}");
    assert_eq!(v["post"]["a"]["b"], "nested", "{v}");
    assert_eq!(
        v["input"], 0,
        "php://input is empty for multipart, as in php-fpm: {v}"
    );
    assert_eq!(files["small"]["error"], 0, "{v}");
    assert_eq!(files["small"]["size"], 1000, "{v}");
    assert_eq!(files["big"]["error"], 1, "UPLOAD_ERR_INI_SIZE: {v}");
    assert_eq!(files["big"]["size"], 0, "{v}");
    assert_eq!(files["docs"]["name"][0], "one.txt", "{v}");
    assert_eq!(files["docs"]["name"][1], "two.txt", "{v}");
    assert_eq!(files["docs"]["size"][1], 3, "{v}");
    // The temporary files are gone once the request is over.
    for tmp in [
        files["small"]["tmp_name"].as_str().unwrap_or_default(),
        files["docs"]["tmp_name"][0].as_str().unwrap_or_default(),
    ] {
        assert!(tmp.starts_with('/'), "{v}");
        let r = levee.get(&format!("/exists?p={tmp}")).await;
        assert_eq!(r.text(), r#"{"exists":false}"#, "{tmp} is left behind");
    }
    // Over post_max_size: PHP drops the body.
    let (ct, body) =
        levee_test::multipart(&[("note", "x")], &[("huge", "h.bin", &vec![7u8; 9 << 20])]);
    let r = Req::post("/upload", body)
        .header("content-type", &ct)
        .send(&levee)
        .await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.text(), r#"{"files":[],"post":[],"input":0}"#);
}

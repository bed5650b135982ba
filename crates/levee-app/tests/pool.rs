//! The app pool with real processes: Python workers that answer their pid, and exit
//! when asked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use levee_app::{AppConfig, AppError, Pool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A worker: `GET /` answers its pid, `GET /exit` makes it exit with status 3, `GET
/// /grow` keeps 20 MB more for good (a leak).
const WORKER: &str = r#"
import http.server, os, sys
leak = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/exit":
            os._exit(3)
        if self.path == "/grow":
            leak.append(bytearray(os.urandom(1024)) * 20480)
        body = str(os.getpid()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

fn config(dir: &std::path::Path, processes: usize) -> AppConfig {
    std::fs::write(dir.join("worker.py"), WORKER).unwrap();
    AppConfig::new(
        format!("python3 {}/worker.py {{port}}", dir.display()),
        processes,
    )
}

/// `GET path` to the process a lease names; the body, or "" if it is gone or closed
/// first (a process that just exited may still be leased until its supervisor sees it).
async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
}

#[tokio::test]
async fn requests_spread_over_ready_processes_one_at_a_time() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(config(dir.path(), 2)).unwrap();
    let a = pool.lease().await.unwrap();
    let b = pool.lease().await.unwrap();
    assert_ne!(a.addr(), b.addr(), "two requests, two processes");
    let (pa, pb) = (get(a.addr(), "/").await, get(b.addr(), "/").await);
    assert_ne!(pa, pb);
    // Both busy: a third waits (its first poll finds no room)...
    let mut third = std::pin::pin!(pool.lease());
    let waits = std::future::poll_fn(|cx| Poll::Ready(third.as_mut().poll(cx).is_pending()));
    assert!(waits.await, "a third lease while both processes are busy");
    // ...until one is given back.
    let freed = a.addr();
    drop(a);
    let c = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("the waiting lease was not woken when one was given back")
        .unwrap();
    assert_eq!(c.addr(), freed);
    let states = pool.states();
    assert_eq!(states.len(), 2);
    assert!(states.iter().all(|s| s.ready && s.pid.is_some()));
}

#[tokio::test]
async fn a_process_that_exits_is_started_again() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(config(dir.path(), 1)).unwrap();
    let lease = pool.lease().await.unwrap();
    let first = get(lease.addr(), "/").await;
    assert_eq!(get(lease.addr(), "/exit").await, "", "the worker exits");
    drop(lease);
    // The next lease waits for the replacement.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let lease = pool.lease().await.unwrap();
        let pid = get(lease.addr(), "/").await;
        if !pid.is_empty() && pid != first {
            break;
        }
        drop(lease);
        assert!(tokio::time::Instant::now() < deadline, "not restarted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(pool.states()[0].restarts, 1);
}

#[tokio::test]
async fn a_command_that_never_gets_ready_is_an_error_with_backoff() {
    let pool = Pool::start(AppConfig {
        ready_timeout: Duration::from_millis(800),
        ..AppConfig::new("sh -c 'exit 7' {port}", 1)
    })
    .unwrap();
    let err = pool.lease().await.err().expect("never ready");
    assert!(matches!(err, AppError::NotReady(_)), "{err}");
    let restarts = pool.states()[0].restarts;
    // 100 + 200 + 400 ms of backoff fit in 800 ms: a few tries, not a busy loop.
    assert!((1..=5).contains(&restarts), "{restarts} restarts");
}

#[test]
fn a_command_needs_its_port() {
    let err = Pool::start(AppConfig::new("php worker.php", 1))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("{port}"), "{err}");
}

/// `n` requests one after the other, each through a fresh lease; every one must be
/// answered. The pids that answered.
async fn sequential(pool: &Pool, path: &str, n: usize) -> Vec<String> {
    let mut pids = Vec::new();
    for i in 0..n {
        let lease = pool.lease().await.unwrap();
        let pid = get(lease.addr(), path).await;
        assert!(!pid.is_empty(), "request {i} of {n} to {path} failed");
        pids.push(pid);
    }
    pids
}

fn distinct(pids: &[String]) -> usize {
    let mut p = pids.to_vec();
    p.sort();
    p.dedup();
    p.len()
}

/// Waits until `cond` holds for the pool's states (10 s at most).
async fn wait_states(pool: &Pool, what: &str, cond: impl Fn(&[levee_app::ProcessState]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond(&pool.states()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {:?}",
            pool.states()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn processes_are_recycled_after_max_requests_without_a_failed_request() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(AppConfig {
        max_requests: 5,
        ..config(dir.path(), 1)
    })
    .unwrap();
    let mut pids = Vec::new();
    for batch in 1..=3u64 {
        // Each batch reaches the limit (5 or 6 with jitter); the replacement comes up
        // while the old process still serves, so no request in between fails.
        pids.extend(sequential(&pool, "/", 6).await);
        wait_states(&pool, "recycled", |s| s[0].recycled >= batch).await;
    }
    pids.extend(sequential(&pool, "/", 1).await);
    assert!(distinct(&pids) >= 3, "{pids:?}");
    assert_eq!(pool.states()[0].restarts, 0, "no unplanned restart");
}

#[tokio::test]
async fn a_leaking_process_is_recycled_by_max_memory_without_a_failed_request() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(AppConfig {
        max_memory: 80 << 20,
        ..config(dir.path(), 1)
    })
    .unwrap();
    let mut pids = Vec::new();
    // 20 MB more a request: over 80 MiB within a few.
    while pool.states()[0].rss_bytes <= 80 << 20 {
        pids.extend(sequential(&pool, "/grow", 1).await);
        assert!(pids.len() <= 20, "still under 80 MiB: {:?}", pool.states());
    }
    // Requests go on while the supervisor's check (every 250 ms) replaces it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while pool.states()[0].recycled == 0 {
        pids.extend(sequential(&pool, "/", 1).await);
        assert!(
            tokio::time::Instant::now() < deadline,
            "never recycled: {:?}",
            pool.states()
        );
    }
    pids.extend(sequential(&pool, "/", 1).await);
    assert!(distinct(&pids) >= 2, "never replaced: {pids:?}");
    assert!(pool.states()[0].rss_bytes < 200 << 20);
    assert_eq!(pool.states()[0].restarts, 0);
}

#[tokio::test]
async fn a_killed_process_is_replaced_at_once() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(config(dir.path(), 1)).unwrap();
    let lease = pool.lease().await.unwrap();
    let first = lease.pid();
    lease.kill();
    drop(lease);
    wait_states(&pool, "replaced", |s| s[0].pid.is_some_and(|p| p != first)).await;
    assert_eq!(pool.states()[0].restarts, 1);
}

#[tokio::test]
async fn restart_all_replaces_every_process_without_a_failed_request() {
    levee_test::require!(levee_test::tools::PYTHON3);
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(config(dir.path(), 2)).unwrap();
    wait_states(&pool, "ready", |s| s.iter().all(|p| p.ready)).await;
    let before: Vec<_> = pool.states().iter().map(|s| s.pid).collect();
    pool.restart_all();
    let mut pids = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while pool.states().iter().any(|s| s.recycled == 0) {
        pids.extend(sequential(&pool, "/", 2).await);
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            pool.states()
        );
    }
    let after: Vec<_> = pool.states().iter().map(|s| s.pid).collect();
    assert!(
        before.iter().zip(&after).all(|(b, a)| b != a),
        "{before:?} {after:?}"
    );
    assert!(pool.states().iter().all(|s| s.restarts == 0));
}

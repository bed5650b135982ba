//! The app pool with real processes: Python workers that answer their pid, and exit
//! when asked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use levee_app::{AppConfig, AppError, Pool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A worker: `GET /` answers its pid, `GET /exit` makes it exit with status 3.
const WORKER: &str = r#"
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/exit":
            os._exit(3)
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
    AppConfig {
        command: format!("python3 {}/worker.py {{port}}", dir.display()),
        processes,
        concurrency: 1,
        ready_timeout: Duration::from_secs(10),
        cwd: None,
        env: Vec::new(),
    }
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
    // Both busy: a third waits until one is given back.
    let waiting = tokio::time::timeout(Duration::from_millis(200), pool.lease()).await;
    assert!(
        waiting.is_err(),
        "a third lease while both processes are busy"
    );
    let freed = a.addr();
    drop(a);
    let c = pool.lease().await.unwrap();
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
        command: "sh -c 'exit 7' {port}".into(),
        processes: 1,
        concurrency: 1,
        ready_timeout: Duration::from_millis(800),
        cwd: None,
        env: Vec::new(),
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
    let err = Pool::start(AppConfig {
        command: "php worker.php".into(),
        processes: 1,
        concurrency: 1,
        ready_timeout: Duration::from_secs(1),
        cwd: None,
        env: Vec::new(),
    })
    .err()
    .expect("refused");
    assert!(err.to_string().contains("{port}"), "{err}");
}

//! A real `redis-server` for the shared tier's tests: one per test, on a free port of
//! 127.0.0.1, in a temporary directory, nothing saved to disk. It can be stopped and
//! restarted on the same port ("Redis went down mid-load"), and it dies with the test:
//! killed and waited for when the guard drops (also on panic), and killed by the
//! kernel if the test process itself is killed (`setpriv --pdeathsig KILL`, the
//! parent-death signal levee-app sets for its processes, here without unsafe code).
//!
//! ```no_run
//! let mut redis = levee_test::Redis::start();
//! let url = redis.url(); // redis://127.0.0.1:PORT/0
//! redis.stop();          // as if the server crashed
//! redis.restart();       // back on the same port, empty
//! redis.pause();         // SIGSTOP: hung, connections open; resume() with SIGCONT
//! ```
//!
//! [`Redis::start_tls`] runs it on TLS only (`rediss://`), with the certificate of a
//! [`RedisTls`].

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::redis_tls::{RedisTls, Stream};
use crate::tools::SKIP_MISSING;

/// How long redis-server may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Where Debian's package puts it.
const BINARY: &str = "/usr/bin/redis-server";

/// At the top of a test, as [`tools::require`](crate::tools::require) for the other
/// tools: redis-server's path; `None` (the test should return) when it is missing and
/// `LEVEE_TEST_SKIP_MISSING` names `redis-server` (or `all`); a panic saying how to
/// install it when it is missing otherwise.
pub fn require() -> Option<PathBuf> {
    let p = PathBuf::from(BINARY);
    if p.is_file() {
        return Some(p);
    }
    let skipped = std::env::var(SKIP_MISSING).is_ok_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|t| t.eq_ignore_ascii_case("redis-server") || t.eq_ignore_ascii_case("all"))
    });
    if skipped {
        eprintln!(
            "skipped: redis-server is not installed and {SKIP_MISSING} names it; this test did not run"
        );
        return None;
    }
    panic!(
        "redis-server is not installed: run `apt-get install -y redis-server` \
         (or set {SKIP_MISSING}=redis-server to skip the tests that need it)"
    );
}

/// A running redis-server; see the module's documentation.
pub struct Redis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    tls: Option<RedisTls>,
}

impl Redis {
    /// Starts redis-server on a free port and waits until it answers PING. Panics (with
    /// its log) if it cannot, or, saying how to install it, if it is not installed.
    pub fn start() -> Redis {
        Redis::launch_new(None)
    }

    /// [`Redis::start`] on TLS only, with `tls`'s certificate (and again so after a
    /// [`Redis::restart`]): [`Redis::url`] is then `rediss://127.0.0.1:PORT/0`, and
    /// [`Redis::command`] talks TLS, checking the certificate.
    pub fn start_tls(tls: &RedisTls) -> Redis {
        Redis::launch_new(Some(tls.clone()))
    }

    fn launch_new(tls: Option<RedisTls>) -> Redis {
        let mut last = String::new();
        // The port is picked free and then handed to redis-server: another process may
        // take it in between, so a failed start is retried on a new port.
        for _ in 0..3 {
            let mut redis = Redis {
                child: None,
                port: crate::pebble::free_port(),
                dir: tempfile::tempdir().expect("create redis-server temp dir"),
                tls: tls.clone(),
            };
            match redis.launch() {
                Ok(child) => {
                    redis.child = Some(child);
                    return redis;
                }
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    /// `redis://127.0.0.1:PORT/0` (`rediss://` on TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL, as a crash) and waits for it. Its data is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server if it runs, then starts a new, empty one on the same port and
    /// waits until it answers PING.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        // The port may linger for a moment after the kill.
        loop {
            match self.launch() {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(e) if Instant::now() > deadline => panic!("redis-server did not restart: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Stops the server with SIGSTOP: connections stay open and nothing answers (a hung
    /// or overloaded Redis). [`Redis::resume`] lets it go on.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`Redis::pause`].
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self
            .child
            .as_ref()
            .map(|c| c.id())
            .expect("redis-server is not running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// Whether the server process is running (it may still be starting).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Sends one command (inline, space-separated arguments without spaces) and returns
    /// the raw reply: for tests that look at what levee left in Redis (`PTTL k`, `KEYS *`).
    pub fn command(&self, line: &str) -> String {
        let mut s = self.connect();
        s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        s.flush().unwrap();
        read_reply(&mut s)
    }

    /// A connection to the server (over TLS on TLS), reads timing out after 5 s.
    fn connect(&self) -> Stream {
        Stream::connect(self.port, self.tls.as_ref(), Duration::from_secs(5))
            .expect("connect to redis")
    }

    /// Writes `value` (any bytes) to `key`, for tests of what a hostile or broken writer
    /// leaves there.
    pub fn set_raw(&self, key: &str, value: &[u8]) {
        let mut s = self.connect();
        let mut cmd = Vec::new();
        for arg in [b"SET".as_slice(), key.as_bytes(), value] {
            cmd.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            cmd.extend_from_slice(arg);
            cmd.extend_from_slice(b"\r\n");
        }
        s.write_all(b"*3\r\n").unwrap();
        s.write_all(&cmd).unwrap();
        s.flush().unwrap();
        let reply = read_reply(&mut s);
        assert_eq!(reply, "+OK\r\n", "SET {key}");
    }

    /// The server's log, for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Starts redis-server and waits until it answers PING.
    fn launch(&self) -> Result<Child, String> {
        let bin =
            require().ok_or("redis-server is not installed (and its tests were not skipped)")?;
        let log = self.dir.path().join("redis.log");
        let port = match &self.tls {
            Some(tls) => tls.server_args(self.port),
            None => vec!["--port".into(), self.port.to_string().into()],
        };
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--"])
            .arg(bin)
            .args(port)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = spawn(cmd).map_err(|e| format!("cannot run setpriv redis-server: {e}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if ping(self.port, self.tls.as_ref()) {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited with {status}; its log:\n{}", self.log()));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no answer to PING within {START_TIMEOUT:?}; its log:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // A paused server still dies of SIGKILL.
        self.stop();
    }
}

/// Whether a server on `port` (on TLS with `tls`) answers PING with PONG.
fn ping(port: u16, tls: Option<&RedisTls>) -> bool {
    let Ok(mut s) = Stream::connect(port, tls, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").and_then(|()| s.flush()).is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// One RESP reply as raw text (a simple reply, or a bulk or array read until the
/// server has nothing more for a moment): enough for a test to look at.
fn read_reply(s: &mut Stream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let n = s.read(&mut buf).expect("redis reply");
    out.extend_from_slice(&buf[..n]);
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Spawns `cmd` from one thread that lives as long as the test process: the kernel
/// sends the parent-death signal when the *thread* that forked the child ends, and a
/// test's own thread may end before the guard that owns the server is dropped.
pub(crate) fn spawn(cmd: Command) -> std::io::Result<Child> {
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("levee-test-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap()
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

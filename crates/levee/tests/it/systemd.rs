//! systemd (issue 25), without systemd: the test plays the service manager. It binds the
//! `NOTIFY_SOCKET` datagram socket levee reports to (READY=1 once listening, RELOADING=1
//! then READY=1 around a SIGHUP reload, STOPPING=1 on SIGTERM, WATCHDOG=1 pings), and it
//! holds a listening socket passed to levee as fd 3 with `LISTEN_FDS`/`LISTEN_PID`, as a
//! `.socket` unit does: a connection made while no levee runs is answered by the next.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use levee_test::{Origin, Recorded, Reply};

/// The fake service manager's end of `NOTIFY_SOCKET`, and every message received.
struct Notify {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    seen: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Notify {
    fn bind() -> Notify {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        Notify {
            socket,
            path,
            seen: Vec::new(),
            _dir: dir,
        }
    }

    /// Waits (at most 10 s) for a message with `line` among its lines, after those
    /// already matched; returns the message.
    fn expect(&mut self, line: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.seen.iter().position(|m| m.lines().any(|l| l == line)) {
                return self.seen.drain(..=i).next_back().unwrap();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {line:?} from levee; got {:?}",
                self.seen
            );
            self.socket.set_read_timeout(Some(left)).unwrap();
            let mut buf = [0u8; 4096];
            if let Ok(n) = self.socket.recv(&mut buf) {
                self.seen
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }
}

fn origin() -> Origin {
    Origin::start(|r: &Recorded| {
        Reply::text(format!("{} #{}", r.path, r.n)).header("cache-control", "max-age=600")
    })
}

fn levee_cmd(origin: &Origin, listen: &str, notify: &Notify) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_levee"));
    cmd.args(["serve", "--backend", &origin.url(), "--listen", listen])
        .args(["--workers", "2"])
        .env("NOTIFY_SOCKET", &notify.path)
        .env_remove("LISTEN_FDS")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// levee started the way systemd starts it under a `.socket` unit: `listener` as fd 3,
/// `LISTEN_FDS=1` and `LISTEN_PID` its own pid (set by a shell that then execs levee,
/// keeping its pid).
#[allow(unsafe_code)]
fn spawn_activated(cmd: Command, listener: &TcpListener, stderr: Stdio) -> Child {
    use std::os::fd::AsRawFd;
    let fd = listener.as_raw_fd();
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(r#"export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" "$@""#)
        .arg(program)
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: between fork and exec only dup2 and fcntl, both async-signal-safe; fd 3
    // then refers to the listener without close-on-exec.
    unsafe {
        sh.pre_exec(move || {
            let r = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    sh.spawn().unwrap()
}

fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "levee did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One HTTP/1.1 GET on `stream`; the response head and body as text.
fn get_on(mut stream: TcpStream, path: &str) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

fn get(addr: SocketAddr, path: &str) -> String {
    get_on(TcpStream::connect(addr).unwrap(), path)
}

#[test]
fn levee_tells_systemd_it_is_ready_reloading_and_stopping() {
    let origin = origin();
    let mut notify = Notify::bind();
    let mut cmd = levee_cmd(&origin, "127.0.0.1:0", &notify);
    // WatchdogSec=0.2s: pings at least every 100 ms.
    cmd.env("WATCHDOG_USEC", "200000");
    let mut levee = cmd.spawn().unwrap();
    let ready = notify.expect("READY=1");
    assert!(ready.contains("STATUS=serving"), "{ready:?}");
    notify.expect("WATCHDOG=1");
    kill(&levee, "HUP");
    let reloading = notify.expect("RELOADING=1");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading:?}");
    notify.expect("READY=1");
    kill(&levee, "TERM");
    notify.expect("STOPPING=1");
    wait_exit(&mut levee);
    assert!(levee.wait().unwrap().success());
}

#[test]
fn a_restart_with_systemds_socket_refuses_no_connection() {
    let origin = origin();
    let mut notify = Notify::bind();
    // systemd's socket: bound and listening before levee, kept across its restarts.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let listen = addr.to_string();
    let mut first = spawn_activated(
        levee_cmd(&origin, &listen, &notify),
        &listener,
        Stdio::null(),
    );
    notify.expect("READY=1");
    let miss = get(addr, "/page");
    assert!(miss.starts_with("HTTP/1.1 200"), "{miss}");
    assert!(miss.contains("/page #1"), "{miss}");

    kill(&first, "TERM");
    notify.expect("STOPPING=1");
    wait_exit(&mut first);
    // No levee runs now: the connection waits in the socket's queue, not refused.
    let waiting = TcpStream::connect(addr).expect("connection refused between two levees");
    let mut second = spawn_activated(
        levee_cmd(&origin, &listen, &notify),
        &listener,
        Stdio::null(),
    );
    notify.expect("READY=1");
    let answer = get_on(waiting, "/page");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    kill(&second, "TERM");
    wait_exit(&mut second);
}

#[test]
fn a_passed_socket_no_address_names_is_refused() {
    let origin = origin();
    let notify = Notify::bind();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // levee is told to listen elsewhere: the passed socket would never be served.
    let cmd = levee_cmd(&origin, "127.0.0.1:0", &notify);
    let child = spawn_activated(cmd, &listener, Stdio::piped());
    let out = child.wait_with_output().unwrap();
    // 2: the configuration (or levee.socket) must change.
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&listener.local_addr().unwrap().to_string())
            && stderr.contains("levee.socket"),
        "{stderr}"
    );
}

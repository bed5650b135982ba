//! systemd (issues 25 and 36), without systemd: the test plays the service manager. It
//! binds the `NOTIFY_SOCKET` datagram socket levee reports to (READY=1 once listening,
//! RELOADING=1 then READY=1 around a SIGHUP reload, STOPPING=1 on SIGTERM, WATCHDOG=1
//! pings, FDSTORE=1 with each listening socket levee hands over), and it passes listening
//! sockets to levee from fd 3 with `LISTEN_FDS`/`LISTEN_PID`, as a `.socket` unit or the
//! file descriptor store does: a connection made while no levee runs is answered by the
//! next.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use levee_test::{Origin, Recorded, Reply};

/// The fake service manager's end of `NOTIFY_SOCKET`, and every message received with
/// the descriptors that came with it.
struct Notify {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    seen: Vec<(String, Vec<OwnedFd>)>,
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
        self.expect_with_fds(line).0
    }

    /// [`expect`](Self::expect), with the descriptors the message carried (SCM_RIGHTS).
    fn expect_with_fds(&mut self, line: &str) -> (String, Vec<OwnedFd>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self
                .seen
                .iter()
                .position(|(m, _)| m.lines().any(|l| l == line))
            {
                return self.seen.drain(..=i).next_back().unwrap();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {line:?} from levee; got {:?}",
                self.seen.iter().map(|(m, _)| m).collect::<Vec<_>>()
            );
            self.socket.set_read_timeout(Some(left)).unwrap();
            if let Ok(message) = recv_with_fds(&self.socket) {
                self.seen.push(message);
            }
        }
    }
}

/// One datagram and the descriptors passed with it, as systemd receives them.
#[allow(unsafe_code)]
fn recv_with_fds(socket: &UnixDatagram) -> std::io::Result<(String, Vec<OwnedFd>)> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut buf = [0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s: aligned for cmsghdr.
    let mut control = [0u64; 64];
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg describes buffers that outlive the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the CMSG_* walk stays within msg_controllen, as the kernel filled it; each
    // SCM_RIGHTS descriptor is new to this process and owned once.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
    Ok((text, fds))
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
fn spawn_activated(cmd: Command, listener: &TcpListener, stderr: Stdio) -> Child {
    use std::os::fd::AsRawFd;
    spawn_fds(cmd, &[listener.as_raw_fd()], None, stderr)
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

/// The message's `KEY=` value.
fn field<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message.lines().find_map(|l| l.strip_prefix(key))
}

#[test]
fn a_restart_with_the_fd_store_refuses_no_connection() {
    let origin = origin();
    let mut notify = Notify::bind();
    // levee binds its own port, then hands the socket to the (fake) service manager.
    let mut first = levee_cmd(&origin, "127.0.0.1:0", &notify).spawn().unwrap();
    let (stored, mut fds) = notify.expect_with_fds("FDSTORE=1");
    assert_eq!(fds.len(), 1, "{stored:?}");
    let listener = TcpListener::from(fds.remove(0));
    let addr = listener.local_addr().unwrap();
    let name = format!("levee-listen-127.0.0.1_{}", addr.port());
    assert_eq!(field(&stored, "FDNAME="), Some(name.as_str()), "{stored:?}");
    notify.expect("READY=1");
    let miss = get(addr, "/page");
    assert!(miss.starts_with("HTTP/1.1 200"), "{miss}");

    kill(&first, "TERM");
    notify.expect("STOPPING=1");
    wait_exit(&mut first);
    // levee is gone, the socket is not: the connection waits in its queue.
    let waiting = TcpStream::connect(addr).expect("connection refused between two levees");
    // The next levee gets the stored socket back, named, as systemd passes it.
    let mut cmd = levee_cmd(&origin, &addr.to_string(), &notify);
    cmd.env("LISTEN_FDNAMES", &name);
    let mut second = spawn_activated(cmd, &listener, Stdio::null());
    // It stores it again (systemd keeps one copy of a socket stored twice).
    let (again, fds) = notify.expect_with_fds("FDSTORE=1");
    assert_eq!(field(&again, "FDNAME="), Some(name.as_str()), "{again:?}");
    let again = TcpListener::from(fds.into_iter().next().unwrap());
    assert_eq!(again.local_addr().unwrap(), addr);
    notify.expect("READY=1");
    let answer = get_on(waiting, "/page");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    kill(&second, "TERM");
    wait_exit(&mut second);
}

#[test]
fn a_stored_socket_no_address_names_is_released() {
    let origin = origin();
    let mut notify = Notify::bind();
    // Stored by a levee whose configuration listened here; this one's listens elsewhere.
    let old = TcpListener::bind("127.0.0.1:0").unwrap();
    let name = format!(
        "levee-listen-127.0.0.1_{}",
        old.local_addr().unwrap().port()
    );
    let mut cmd = levee_cmd(&origin, "127.0.0.1:0", &notify);
    cmd.env("LISTEN_FDNAMES", &name);
    let mut levee = spawn_activated(cmd, &old, Stdio::null());
    let removed = notify.expect("FDSTOREREMOVE=1");
    assert_eq!(
        field(&removed, "FDNAME="),
        Some(name.as_str()),
        "{removed:?}"
    );
    // Not an error, unlike a .socket unit's socket: levee serves on its own address.
    let (stored, fds) = notify.expect_with_fds("FDSTORE=1");
    assert_ne!(field(&stored, "FDNAME="), Some(name.as_str()));
    let addr = TcpListener::from(fds.into_iter().next().unwrap())
        .local_addr()
        .unwrap();
    notify.expect("READY=1");
    assert!(get(addr, "/page").starts_with("HTTP/1.1 200"));
    kill(&levee, "TERM");
    wait_exit(&mut levee);
}

/// levee started with several stored sockets, as systemd passes its fd store: `fds`
/// from fd 3 on, `LISTEN_FDS` their count, `LISTEN_FDNAMES` their names.
fn spawn_with_fds(cmd: Command, fds: &[(std::os::fd::RawFd, String)]) -> Child {
    let raw: Vec<std::os::fd::RawFd> = fds.iter().map(|(fd, _)| *fd).collect();
    let names: Vec<&str> = fds.iter().map(|(_, n)| n.as_str()).collect();
    spawn_fds(cmd, &raw, Some(&names), Stdio::null())
}

/// `cmd` through a shell that sets `LISTEN_PID` to its own pid and `LISTEN_FDS` to the
/// count of `raw`, then execs it with `raw` as fds 3, 4... (and `LISTEN_FDNAMES`, if
/// named).
#[allow(unsafe_code)]
fn spawn_fds(
    cmd: Command,
    raw: &[std::os::fd::RawFd],
    names: Option<&[&str]>,
    stderr: Stdio,
) -> Child {
    let raw = raw.to_vec();
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!(
            r#"export LISTEN_PID=$$ LISTEN_FDS={}; exec "$0" "$@""#,
            raw.len()
        ))
        .arg(program)
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    if let Some(names) = names {
        sh.env("LISTEN_FDNAMES", names.join(":"));
    }
    sh.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: between fork and exec only dup2, async-signal-safe: each descriptor first
    // to a high number (so that none overwrites another still to move), then to 3, 4...
    // (dup2's copies have no close-on-exec).
    unsafe {
        sh.pre_exec(move || {
            for (i, fd) in raw.iter().enumerate() {
                if libc::dup2(*fd, 200 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for i in 0..raw.len() {
                if libc::dup2(200 + i as i32, 3 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    sh.spawn().unwrap()
}

/// HTTP/3's UDP socket goes into the fd store with the TCP ones, and the next levee
/// takes it back: the same port, HTTP/3 served on it again, nothing bound anew.
#[test]
fn a_restart_with_the_fd_store_keeps_the_http3_socket() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let ca = super::tls::Ca::new("levee test CA");
    let (cert, key) = ca.issue(dir.path(), "a", &["a.test"]);
    let origin = origin();
    let mut notify = Notify::bind();
    let tls_args = |cmd: &mut Command, tls: &str| {
        cmd.args(["--listen-tls", tls])
            .args(["--tls-cert", cert.to_str().unwrap()])
            .args(["--tls-key", key.to_str().unwrap()]);
    };
    let mut cmd = levee_cmd(&origin, "127.0.0.1:0", &notify);
    tls_args(&mut cmd, "127.0.0.1:0");
    let mut first = cmd.spawn().unwrap();
    // Three sockets stored: cleartext, HTTPS, and HTTPS's UDP twin.
    let mut stored = Vec::new();
    for _ in 0..3 {
        let (message, mut fds) = notify.expect_with_fds("FDSTORE=1");
        assert_eq!(fds.len(), 1, "{message:?}");
        let name = field(&message, "FDNAME=").unwrap_or_default().to_string();
        stored.push((name, fds.remove(0)));
    }
    notify.expect("READY=1");
    let quic = stored
        .iter()
        .find(|(n, _)| n.starts_with("levee-quic-"))
        .unwrap_or_else(|| {
            panic!(
                "no HTTP/3 socket stored: {:?}",
                stored.iter().map(|s| &s.0).collect::<Vec<_>>()
            )
        });
    let udp = std::net::UdpSocket::from(quic.1.try_clone().unwrap());
    let port = udp.local_addr().unwrap().port();
    assert_eq!(quic.0, format!("levee-quic-127.0.0.1_{port}"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fetch = |rt: &tokio::runtime::Runtime| {
        rt.block_on(async {
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let mut c = levee_test::http3::H3::connect(addr, "a.test", &ca.der)
                .await
                .unwrap();
            let r = c.get("/page").await;
            c.close().await;
            r
        })
    };
    assert_eq!(fetch(&rt).status, 200);
    kill(&first, "TERM");
    notify.expect("STOPPING=1");
    wait_exit(&mut first);
    // The next levee, given the three back as systemd would.
    let tcp_addr = |name: &str| {
        let (_, fd) = stored.iter().find(|(n, _)| n == name).unwrap();
        TcpListener::from(fd.try_clone().unwrap())
            .local_addr()
            .unwrap()
    };
    let names: Vec<String> = stored.iter().map(|(n, _)| n.clone()).collect();
    let plain = names
        .iter()
        .find(|n| n.starts_with("levee-listen-") && tcp_addr(n).port() != port)
        .unwrap()
        .clone();
    let mut cmd = levee_cmd(&origin, &tcp_addr(&plain).to_string(), &notify);
    tls_args(&mut cmd, &format!("127.0.0.1:{port}"));
    let passed: Vec<(std::os::fd::RawFd, String)> = stored
        .iter()
        .map(|(n, fd)| (fd.as_raw_fd(), n.clone()))
        .collect();
    let mut second = spawn_with_fds(cmd, &passed);
    let mut again = Vec::new();
    for _ in 0..3 {
        let (message, _) = notify.expect_with_fds("FDSTORE=1");
        again.push(field(&message, "FDNAME=").unwrap_or_default().to_string());
    }
    notify.expect("READY=1");
    again.sort();
    let mut before = names.clone();
    before.sort();
    assert_eq!(again, before, "the same three stored again");
    assert_eq!(fetch(&rt).status, 200, "HTTP/3 on the kept socket");
    kill(&second, "TERM");
    wait_exit(&mut second);
}

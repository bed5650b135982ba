//! The pieces the Redis fixtures ([`RedisCluster`](crate::RedisCluster),
//! [`RedisSentinel`](crate::RedisSentinel)) share: a redis-server process ([`Node`]),
//! how their own client reaches it ([`Access`]: credentials, TLS), a RESP client
//! ([`Conn`]) and waiting on state ([`wait_for`]).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::redis::{require, spawn};
use crate::redis_tls::{RedisTls, Stream};

/// How long one redis-server may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Between two looks at the servers' state.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// How the fixtures' own client reaches a server: logged in or not, over TLS or not.
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub(crate) auth: Option<Auth>,
    pub(crate) tls: Option<RedisTls>,
}

impl Access {
    pub(crate) fn new(auth: Option<Auth>, tls: Option<RedisTls>) -> Access {
        Access { auth, tls }
    }

    /// The same without credentials: a sentinel takes none.
    pub(crate) fn without_auth(&self) -> Access {
        Access::new(None, self.tls.clone())
    }

    /// redis-cli's arguments for the same: `--tls --cacert CA`, `--user U --pass P`.
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let mut out = self.tls.as_ref().map_or(Vec::new(), RedisTls::cli_args);
        if let Some(a) = &self.auth {
            out.extend(
                ["--user", &a.user, "--pass", &a.pass, "--no-auth-warning"].map(str::to_string),
            );
        }
        out
    }
}

/// An ACL user with every right, and its password (also the `default` user's).
#[derive(Clone, Debug)]
pub(crate) struct Auth {
    pub(crate) user: String,
    pub(crate) pass: String,
}

impl Auth {
    pub(crate) fn new(user: &str, pass: &str) -> Auth {
        assert!(
            !user.is_empty() && !pass.is_empty() && !format!("{user}{pass}").contains(' '),
            "user and password must be non-empty, without spaces"
        );
        Auth {
            user: user.to_string(),
            pass: pass.to_string(),
        }
    }

    /// redis-server's arguments: the password, the user, and how a replica logs in to
    /// its primary.
    pub(crate) fn server_args(&self) -> Vec<String> {
        let (u, p) = (&self.user, &self.pass);
        format!(
            "--requirepass {p} --user {u} on >{p} ~* &* +@all --masteruser {u} --masterauth {p}"
        )
        .split(' ')
        .map(str::to_string)
        .collect()
    }

    /// `user:pass@`, both percent-encoded, for a URL.
    pub(crate) fn userinfo(auth: Option<&Auth>) -> String {
        let enc = |s: &str| -> String {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        char::from(b).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect()
        };
        auth.map_or(String::new(), |a| {
            format!("{}:{}@", enc(&a.user), enc(&a.pass))
        })
    }
}

/// One RESP reply, parsed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// A bulk or status reply's text ("" otherwise).
    pub(crate) fn text(&self) -> &str {
        match self {
            Reply::Status(s) | Reply::Bulk(Some(s)) => s,
            _ => "",
        }
    }

    /// An array reply's items (none otherwise).
    pub(crate) fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(v)) => v,
            _ => &[],
        }
    }
}

/// A RESP client connection to 127.0.0.1 (over TLS for a TLS server), logged in when
/// there are credentials.
pub(crate) struct Conn {
    stream: BufReader<Stream>,
}

impl Conn {
    pub(crate) fn open(port: u16, access: &Access, timeout: Duration) -> Result<Conn, String> {
        let s = Stream::connect(
            port,
            access.tls.as_ref(),
            timeout.min(Duration::from_secs(1)),
        )
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
        let _ = s.set_read_timeout(Some(timeout));
        let mut conn = Conn {
            stream: BufReader::new(s),
        };
        if let Some(a) = &access.auth {
            let (reply, _) = conn.call(&["AUTH", &a.user, &a.pass])?;
            if reply != Reply::Status("OK".into()) {
                return Err(format!("AUTH {} on 127.0.0.1:{port}: {reply:?}", a.user));
            }
        }
        Ok(conn)
    }

    /// Sends one command and reads its reply: parsed, and as raw RESP text.
    pub(crate) fn call(&mut self, args: &[&str]) -> Result<(Reply, String), String> {
        let mut cmd = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            cmd.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        let writer = self.stream.get_mut();
        writer
            .write_all(&cmd)
            .and_then(|()| writer.flush())
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        let reply = read_value(&mut self.stream, &mut raw)
            .map_err(|e| format!("reply to {}: {e}", args.join(" ")))?;
        Ok((reply, String::from_utf8_lossy(&raw).into_owned()))
    }
}

fn read_value(r: &mut impl BufRead, raw: &mut Vec<u8>) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    raw.extend_from_slice(&line);
    if !line.ends_with(b"\r\n") {
        return Err(bad("connection closed mid-reply"));
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let len = || text.parse::<i64>().map_err(|_| bad("bad length"));
    Ok(match line[0] {
        b'+' => Reply::Status(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(len()?),
        b'$' if len()? < 0 => Reply::Bulk(None),
        b'$' => {
            let mut body = vec![0; usize::try_from(len()?).map_err(|_| bad("length"))? + 2];
            r.read_exact(&mut body)?;
            raw.extend_from_slice(&body);
            Reply::Bulk(Some(
                String::from_utf8_lossy(&body[..body.len() - 2]).into_owned(),
            ))
        }
        b'*' if len()? < 0 => Reply::Array(None),
        b'*' => Reply::Array(Some(
            (0..len()?)
                .map(|_| read_value(r, raw))
                .collect::<std::io::Result<_>>()?,
        )),
        _ => return Err(bad("not a RESP reply")),
    })
}

/// One command on a new connection, with a short time limit: for polling.
pub(crate) fn query(port: u16, access: &Access, args: &[&str]) -> Result<Reply, String> {
    let (reply, _) = Conn::open(port, access, Duration::from_secs(2))?.call(args)?;
    match reply {
        Reply::Error(e) => Err(format!("{} on 127.0.0.1:{port}: {e}", args.join(" "))),
        r => Ok(r),
    }
}

/// `line` (space-separated arguments without spaces) sent to `port`; the raw reply.
/// Panics if the server cannot be reached.
pub(crate) fn raw_command(port: u16, access: &Access, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    let mut conn = Conn::open(port, access, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("redis on 127.0.0.1:{port}: {e}"));
    conn.call(&args)
        .unwrap_or_else(|e| panic!("redis on 127.0.0.1:{port}: {e}"))
        .1
}

/// The `field:value` of an INFO-like text.
pub(crate) fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim_end().strip_prefix(field)?.strip_prefix(':'))
}

/// Polls `probe` every [`POLL`] until it gives a value; past `timeout`, panics saying
/// what did not happen, what `probe` last saw and the servers' `logs`.
pub(crate) fn wait_for<T>(
    timeout: Duration,
    what: &str,
    logs: impl Fn() -> String,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(v) => return v,
            Err(why) if Instant::now() >= deadline => {
                // The logs first: a CI excerpt keeps a failure's last lines.
                panic!(
                    "{}\n{what}: not within {timeout:?}; last seen: {why}",
                    logs()
                )
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Waits until every replica of the primary on `port` has all it had been written
/// when called (by replication offset: `WAIT` counts only its own connection's writes).
pub(crate) fn wait_replicated(port: u16, access: &Access, logs: impl Fn() -> String) {
    let repl = |p| query(p, access, &["INFO", "replication"]).map(|r| r.text().to_string());
    let info = repl(port).unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    let target: u64 = info_field(&info, "master_repl_offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("127.0.0.1:{port} is not a primary:\n{info}"));
    let what = format!("the replicas of 127.0.0.1:{port} at offset {target}");
    wait_for(Duration::from_secs(10), &what, logs, || {
        let info = repl(port)?;
        let replicas: Vec<&str> = (0..)
            .map_while(|i| info_field(&info, &format!("slave{i}")))
            .collect();
        let behind = |r: &&str| {
            let offset = r.split(',').find_map(|kv| kv.strip_prefix("offset="));
            !r.contains("state=online") || offset.and_then(|o| o.parse().ok()) < Some(target)
        };
        match replicas.iter().any(behind) {
            false if !replicas.is_empty() => Ok(()),
            _ => Err(info.clone()),
        }
    });
}

/// The last `n` lines of `text`.
pub(crate) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One redis-server process (data node or sentinel) in a temporary directory of its
/// own, its log in `redis.log` there.
pub(crate) struct Node {
    child: Mutex<Option<Child>>,
    pub(crate) port: u16,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) name: String,
}

impl Node {
    /// Starts redis-server with the arguments `args(port, dir)` gives for a free port
    /// and a new directory, and waits until it answers (reached with `access`).
    /// A start that fails (the port was taken in between) is retried on a new port.
    pub(crate) fn launch(
        name: &str,
        access: &Access,
        args: &dyn Fn(u16, &Path) -> Vec<OsString>,
    ) -> Node {
        let mut last = String::new();
        for _ in 0..10 {
            let node = Node {
                child: Mutex::new(None),
                port: free_port(),
                dir: tempfile::tempdir().expect("create a redis-server temp dir"),
                name: name.to_string(),
            };
            match node.run(access, args(node.port, node.dir.path())) {
                Ok(child) => {
                    *node.child.lock().unwrap() = Some(child);
                    return node;
                }
                Err(e) => last = e,
            }
        }
        panic!("{name} did not start: {last}");
    }

    fn run(&self, access: &Access, args: Vec<OsString>) -> Result<Child, String> {
        let bin =
            require().ok_or("redis-server is not installed (and its tests were not skipped)")?;
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--"])
            .arg(bin)
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = spawn(cmd).map_err(|e| format!("cannot run setpriv redis-server: {e}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // setpriv execs redis-server: the server's process ID is the child's. Another
            // one answering means another process took the port in between.
            if let Ok(info) = query(self.port, access, &["INFO", "server"]) {
                let pid = info_field(info.text(), "process_id");
                if pid == Some(&child.id().to_string()) {
                    return Ok(child);
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "another server (pid {pid:?}) answers on {}",
                    self.port
                ));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited with {status}; its log:\n{}", self.log()));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no answer within {START_TIMEOUT:?}; its log:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A data node's arguments: on `port` of 127.0.0.1 (TLS only, replication too,
    /// with `access.tls`), nothing saved, its log and any file in `dir`, requiring
    /// `access.auth` if any.
    pub(crate) fn data_args(port: u16, dir: &Path, access: &Access) -> Vec<OsString> {
        const FIXED: [&str; 10] = [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            // A replica's first sync starts at once, not after 5 s.
            "--repl-diskless-sync-delay",
            "0",
        ];
        let mut a: Vec<OsString> = match &access.tls {
            Some(tls) => tls.server_args(port),
            None => vec!["--port".into(), port.to_string().into()],
        };
        a.extend(FIXED.map(OsString::from));
        a.extend(["--dir".into(), dir.as_os_str().to_owned()]);
        a.extend(["--logfile".into(), Node::log_path(dir).into_os_string()]);
        a.extend(
            access
                .auth
                .iter()
                .flat_map(Auth::server_args)
                .map(OsString::from),
        );
        a
    }

    pub(crate) fn log_path(dir: &Path) -> PathBuf {
        dir.join("redis.log")
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(Node::log_path(self.dir.path())).unwrap_or_default()
    }

    /// The last lines of the log under a heading, for a panic message.
    pub(crate) fn log_tail(&self) -> String {
        let state = if self.is_alive() { "" } else { ", killed" };
        let log = tail(&self.log(), 60);
        format!(
            "== {} 127.0.0.1:{}{state} ==\n{log}\n",
            self.name, self.port
        )
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.child.lock().unwrap().is_some()
    }

    /// SIGKILL, and waits for the process to end.
    pub(crate) fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Real Redis Sentinel for the shared tier's tests: a primary and its replica, watched
//! by three sentinels (quorum 2) as `mymaster`, every process on a free port of
//! 127.0.0.1 in a temporary directory of its own. The primary can be killed (SIGKILL,
//! as a crash) and the test waits until the sentinels promoted the replica. Every
//! process dies with the test, as in [`Redis`](crate::Redis): killed and waited for
//! when the guard drops, killed by the kernel when the test process dies
//! (`setpriv --pdeathsig KILL`).
//!
//! ```no_run
//! let Some(_) = levee_test::redis::require() else { return };
//! let sentinel = levee_test::RedisSentinel::start();
//! let url = sentinel.url(); // redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster
//! let old = sentinel.kill_primary();
//! let new = sentinel.wait_failover(old);
//! ```
//!
//! The pieces shared with [`RedisCluster`](crate::RedisCluster) live here too: a
//! redis-server process ([`Node`]), credentials ([`Auth`]), a RESP client ([`Conn`])
//! and waiting on state ([`wait_for`]).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::redis::{require, spawn};

/// The name the sentinels watch the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// How long one redis-server may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Between two looks at the servers' state.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// How long the sentinels may take to find each other and the replica, and to fail
/// over.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, its replica and three sentinels; see the module's documentation.
pub struct RedisSentinel {
    /// The first primary, then its replica.
    data: Vec<Node>,
    sentinels: Vec<Node>,
    auth: Option<Auth>,
}

impl RedisSentinel {
    /// Starts a primary, a replica of it and three sentinels, and waits until every
    /// sentinel names the primary and knows the replica and the two other sentinels, and
    /// the replica is in sync. Panics (with the logs) if it cannot.
    pub fn start() -> RedisSentinel {
        RedisSentinel::launch(None)
    }

    /// [`RedisSentinel::start`] with the primary and the replica requiring `password`,
    /// for the ACL user `user` (all rights) or the `default` user; the replica and the
    /// sentinels log in as `user`. The sentinels themselves need no password.
    pub fn start_with_auth(user: &str, password: &str) -> RedisSentinel {
        RedisSentinel::launch(Some(Auth::new(user, password)))
    }

    fn launch(auth: Option<Auth>) -> RedisSentinel {
        let data_args = |replica_of: Option<u16>| {
            let auth = auth.clone();
            move |port: u16, dir: &Path| -> Vec<OsString> {
                let mut a = Node::data_args(port, dir, auth.as_ref());
                if let Some(p) = replica_of {
                    a.extend(["--replicaof", "127.0.0.1", &p.to_string()].map(OsString::from));
                }
                a
            }
        };
        let primary = Node::launch("primary", auth.as_ref(), &data_args(None));
        let replica = Node::launch("replica", auth.as_ref(), &data_args(Some(primary.port)));
        let primary_port = primary.port;
        let sentinel_args = |port: u16, dir: &Path| -> Vec<OsString> {
            let conf = dir.join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir \"{}\"\nlogfile \"{}\"\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir.display(),
                Node::log_path(dir).display(),
            );
            if let Some(a) = &auth {
                text.push_str(&format!("sentinel auth-user {MASTER_NAME} {}\n", a.user));
                text.push_str(&format!("sentinel auth-pass {MASTER_NAME} {}\n", a.pass));
            }
            std::fs::write(&conf, text).expect("write sentinel.conf");
            vec![conf.into_os_string(), "--sentinel".into()]
        };
        let sentinels = (1..=3)
            .map(|i| Node::launch(&format!("sentinel {i}"), None, &sentinel_args))
            .collect();
        let set = RedisSentinel {
            data: vec![primary, replica],
            sentinels,
            auth,
        };
        set.wait_watching(primary_port);
        set
    }

    /// Every sentinel names `primary`, sees it up, knows one replica (up) and the two
    /// other sentinels; the replica's link to the primary is up.
    fn wait_watching(&self, primary: u16) {
        let replica = self.data[1].port;
        wait_for(
            TIMEOUT,
            "the sentinels watching",
            || self.logs(),
            || {
                for s in self.sentinel_ports() {
                    let named = master_addr(s)?;
                    if named != primary {
                        return Err(format!("sentinel {s} names {named}, not {primary}"));
                    }
                    let m = query(s, None, &["SENTINEL", "MASTER", MASTER_NAME])?;
                    let m_field = |name: &str| field(m.items(), name);
                    if m_field("flags") != "master"
                        || m_field("num-other-sentinels") != "2"
                        || m_field("num-slaves") != "1"
                    {
                        return Err(format!("sentinel {s} sees {m:?}"));
                    }
                    let r = query(s, None, &["SENTINEL", "REPLICAS", MASTER_NAME])?;
                    let up = r.items().iter().any(|r| {
                        field(r.items(), "port") == replica.to_string()
                            && field(r.items(), "flags") == "slave"
                    });
                    if !up {
                        return Err(format!("sentinel {s} sees replicas {r:?}"));
                    }
                }
                let info = query(replica, self.auth.as_ref(), &["INFO", "replication"])?;
                match info_field(info.text(), "master_link_status") {
                    Some("up") => Ok(()),
                    s => Err(format!("the replica's master_link_status is {s:?}")),
                }
            },
        );
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`, with
    /// `user:pass@` after the scheme when the data nodes need credentials.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let userinfo = Auth::userinfo(self.auth.as_ref());
        format!(
            "redis+sentinel://{userinfo}{}/{MASTER_NAME}",
            hosts.join(",")
        )
    }

    /// The port of the primary a live sentinel names now.
    pub fn primary_port(&self) -> u16 {
        let s = self
            .sentinels
            .iter()
            .find(|s| s.is_alive())
            .expect("a sentinel is running")
            .port;
        master_addr(s).unwrap_or_else(|e| panic!("sentinel {s}: {e}\n{}", self.logs()))
    }

    /// The ports of the data nodes: the first primary, then its replica.
    pub fn ports(&self) -> Vec<u16> {
        self.data.iter().map(|n| n.port).collect()
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|n| n.port).collect()
    }

    /// Waits until the replica has everything written to the current primary so far:
    /// what a test writes before [`RedisSentinel::kill_primary`] then survives.
    pub fn wait_replicated(&self) {
        wait_replicated(self.primary_port(), self.auth.as_ref(), || self.logs());
    }

    /// Kills the current primary (SIGKILL, as a crash), waits for it to end and returns
    /// its port.
    pub fn kill_primary(&self) -> u16 {
        let port = self.primary_port();
        let node = self
            .data
            .iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("the sentinels name 127.0.0.1:{port}, not a data node"));
        assert!(
            node.is_alive(),
            "the primary 127.0.0.1:{port} was already killed"
        );
        node.kill();
        port
    }

    /// Waits until every sentinel names a primary other than `old_port` and that node
    /// says it is a master (`ROLE`); returns its port. Panics (with the logs) after 30 s.
    pub fn wait_failover(&self, old_port: u16) -> u16 {
        let what = format!("a failover away from 127.0.0.1:{old_port}");
        wait_for(
            TIMEOUT,
            &what,
            || self.logs(),
            || {
                let mut named = Vec::new();
                for s in self.sentinels.iter().filter(|s| s.is_alive()) {
                    named.push(master_addr(s.port)?);
                }
                named.dedup();
                let new = match named[..] {
                    [p] if p != old_port => p,
                    _ => return Err(format!("the sentinels name {named:?}")),
                };
                let role = query(new, self.auth.as_ref(), &["ROLE"])?;
                match role.items().first().map(Reply::text) {
                    Some("master") => Ok(new),
                    r => Err(format!("127.0.0.1:{new} answers ROLE {r:?}")),
                }
            },
        )
    }

    /// Sends one command (space-separated arguments without spaces) to the node on
    /// `port` and returns its raw RESP reply; to a data node logged in when there are
    /// credentials, to a sentinel without.
    pub fn command(&self, port: u16, line: &str) -> String {
        let auth = self.data.iter().any(|n| n.port == port);
        raw_command(port, self.auth.as_ref().filter(|_| auth), line)
    }

    /// The end of every process's log, for a failing test's message.
    pub fn logs(&self) -> String {
        let mut out: String = self.data.iter().map(Node::log_tail).collect();
        for s in &self.sentinels {
            out.push_str(&s.log_tail());
            let conf = std::fs::read_to_string(s.dir.path().join("sentinel.conf"));
            let conf = tail(&conf.unwrap_or_default(), 30);
            out.push_str(&format!("-- its sentinel.conf --\n{conf}\n"));
        }
        out
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        // Sentinels first, so that none acts on a data node going away.
        for node in self.sentinels.iter().chain(&self.data) {
            node.kill();
        }
    }
}

/// The port of the primary the sentinel on `port` names.
fn master_addr(port: u16) -> Result<u16, String> {
    let r = query(
        port,
        None,
        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
    )?;
    r.items()
        .get(1)
        .and_then(|p| p.text().parse().ok())
        .ok_or_else(|| format!("sentinel {port}: get-master-addr-by-name: {r:?}"))
}

/// The value after `name` in a flat name/value array reply (`SENTINEL MASTER`).
fn field<'a>(items: &'a [Reply], name: &str) -> &'a str {
    items
        .chunks(2)
        .find(|kv| kv[0].text() == name)
        .and_then(|kv| kv.get(1))
        .map_or("", Reply::text)
}

// The pieces shared with RedisCluster.

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

/// A RESP client connection to 127.0.0.1, logged in when there are credentials.
pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    pub(crate) fn open(port: u16, auth: Option<&Auth>, timeout: Duration) -> Result<Conn, String> {
        let addr = ([127, 0, 0, 1], port).into();
        let s = TcpStream::connect_timeout(&addr, timeout.min(Duration::from_secs(1)))
            .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
        let _ = s.set_read_timeout(Some(timeout));
        let _ = s.set_nodelay(true);
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        let mut conn = Conn {
            reader: BufReader::new(s),
            writer,
        };
        if let Some(a) = auth {
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
        self.writer.write_all(&cmd).map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        let reply = read_value(&mut self.reader, &mut raw)
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
pub(crate) fn query(port: u16, auth: Option<&Auth>, args: &[&str]) -> Result<Reply, String> {
    let (reply, _) = Conn::open(port, auth, Duration::from_secs(2))?.call(args)?;
    match reply {
        Reply::Error(e) => Err(format!("{} on 127.0.0.1:{port}: {e}", args.join(" "))),
        r => Ok(r),
    }
}

/// `line` (space-separated arguments without spaces) sent to `port`; the raw reply.
/// Panics if the server cannot be reached.
pub(crate) fn raw_command(port: u16, auth: Option<&Auth>, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    let mut conn = Conn::open(port, auth, Duration::from_secs(5))
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
                panic!(
                    "{what}: not within {timeout:?}; last seen: {why}\n{}",
                    logs()
                )
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Waits until every replica of the primary on `port` has all it had been written
/// when called (by replication offset: `WAIT` counts only its own connection's writes).
pub(crate) fn wait_replicated(port: u16, auth: Option<&Auth>, logs: impl Fn() -> String) {
    let repl = |p| query(p, auth, &["INFO", "replication"]).map(|r| r.text().to_string());
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
    /// and a new directory, and waits until it answers (logged in with `auth`).
    /// A start that fails (the port was taken in between) is retried on a new port.
    pub(crate) fn launch(
        name: &str,
        auth: Option<&Auth>,
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
            match node.run(auth, args(node.port, node.dir.path())) {
                Ok(child) => {
                    *node.child.lock().unwrap() = Some(child);
                    return node;
                }
                Err(e) => last = e,
            }
        }
        panic!("{name} did not start: {last}");
    }

    fn run(&self, auth: Option<&Auth>, args: Vec<OsString>) -> Result<Child, String> {
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
            if let Ok(info) = query(self.port, auth, &["INFO", "server"]) {
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

    /// A data node's arguments: on `port` of 127.0.0.1, nothing saved, its log and
    /// any file in `dir`, requiring `auth` if any.
    pub(crate) fn data_args(port: u16, dir: &Path, auth: Option<&Auth>) -> Vec<OsString> {
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
        let mut a: Vec<OsString> = vec!["--port".into(), port.to_string().into()];
        a.extend(FIXED.map(OsString::from));
        a.extend(["--dir".into(), dir.as_os_str().to_owned()]);
        a.extend(["--logfile".into(), Node::log_path(dir).into_os_string()]);
        a.extend(
            auth.into_iter()
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

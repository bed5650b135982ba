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
//! [`RedisSentinel::start_tls`] runs every process on TLS only
//! (`rediss+sentinel://...`).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::redis_node::{
    info_field, query, raw_command, tail, wait_for, wait_replicated, Access, Auth, Node, Reply,
};
use crate::redis_tls::RedisTls;

/// The name the sentinels watch the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// How long the sentinels may take to find each other and the replica, and to fail
/// over.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, its replica and three sentinels; see the module's documentation.
pub struct RedisSentinel {
    /// The first primary, then its replica.
    data: Vec<Node>,
    sentinels: Vec<Node>,
    /// The data nodes'; the sentinels' is the same without credentials.
    access: Access,
}

impl RedisSentinel {
    /// Starts a primary, a replica of it and three sentinels, and waits until every
    /// sentinel names the primary and knows the replica and the two other sentinels, and
    /// the replica is in sync. Panics (with the logs) if it cannot.
    pub fn start() -> RedisSentinel {
        RedisSentinel::launch(Access::default())
    }

    /// [`RedisSentinel::start`] with the primary and the replica requiring `password`,
    /// for the ACL user `user` (all rights) or the `default` user; the replica and the
    /// sentinels log in as `user`. The sentinels themselves need no password.
    pub fn start_with_auth(user: &str, password: &str) -> RedisSentinel {
        RedisSentinel::launch(Access::new(Some(Auth::new(user, password)), None))
    }

    /// [`RedisSentinel::start`] on TLS only, with `tls`'s certificate: the data nodes
    /// (replication included) and the sentinels, which talk TLS to the data nodes and
    /// to each other. [`RedisSentinel::url`] is then `rediss+sentinel://...`.
    pub fn start_tls(tls: &RedisTls) -> RedisSentinel {
        RedisSentinel::launch(Access::new(None, Some(tls.clone())))
    }

    fn launch(access: Access) -> RedisSentinel {
        let data_args = |replica_of: Option<u16>| {
            let access = access.clone();
            move |port: u16, dir: &Path| -> Vec<OsString> {
                let mut a = Node::data_args(port, dir, &access);
                if let Some(p) = replica_of {
                    a.extend(["--replicaof", "127.0.0.1", &p.to_string()].map(OsString::from));
                }
                a
            }
        };
        let primary = Node::launch("primary", &access, &data_args(None));
        let replica = Node::launch("replica", &access, &data_args(Some(primary.port)));
        let primary_port = primary.port;
        let sentinel_args = |port: u16, dir: &Path| -> Vec<OsString> {
            let conf = dir.join("sentinel.conf");
            let mut text = match &access.tls {
                Some(tls) => tls.conf_lines(port),
                None => format!("port {port}\n"),
            };
            text.push_str(&format!(
                "bind 127.0.0.1\nprotected-mode no\ndir \"{}\"\nlogfile \"{}\"\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir.display(),
                Node::log_path(dir).display(),
            ));
            if let Some(a) = &access.auth {
                text.push_str(&format!("sentinel auth-user {MASTER_NAME} {}\n", a.user));
                text.push_str(&format!("sentinel auth-pass {MASTER_NAME} {}\n", a.pass));
            }
            std::fs::write(&conf, text).expect("write sentinel.conf");
            vec![conf.into_os_string(), "--sentinel".into()]
        };
        let sentinel = access.without_auth();
        let sentinels = (1..=3)
            .map(|i| Node::launch(&format!("sentinel {i}"), &sentinel, &sentinel_args))
            .collect();
        let set = RedisSentinel {
            data: vec![primary, replica],
            sentinels,
            access,
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
                let sentinel = self.access.without_auth();
                for s in self.sentinel_ports() {
                    let named = master_addr(s, &sentinel)?;
                    if named != primary {
                        return Err(format!("sentinel {s} names {named}, not {primary}"));
                    }
                    let m = query(s, &sentinel, &["SENTINEL", "MASTER", MASTER_NAME])?;
                    let m_field = |name: &str| field(m.items(), name);
                    if m_field("flags") != "master"
                        || m_field("num-other-sentinels") != "2"
                        || m_field("num-slaves") != "1"
                    {
                        return Err(format!("sentinel {s} sees {m:?}"));
                    }
                    let r = query(s, &sentinel, &["SENTINEL", "REPLICAS", MASTER_NAME])?;
                    let up = r.items().iter().any(|r| {
                        field(r.items(), "port") == replica.to_string()
                            && field(r.items(), "flags") == "slave"
                    });
                    if !up {
                        return Err(format!("sentinel {s} sees replicas {r:?}"));
                    }
                }
                let info = query(replica, &self.access, &["INFO", "replication"])?;
                match info_field(info.text(), "master_link_status") {
                    Some("up") => Ok(()),
                    s => Err(format!("the replica's master_link_status is {s:?}")),
                }
            },
        );
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`
    /// (`rediss+sentinel://` on TLS), with `user:pass@` after the scheme when the data
    /// nodes need credentials.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let userinfo = Auth::userinfo(self.access.auth.as_ref());
        let scheme = match self.access.tls {
            Some(_) => "rediss",
            None => "redis",
        };
        format!(
            "{scheme}+sentinel://{userinfo}{}/{MASTER_NAME}",
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
        master_addr(s, &self.access.without_auth())
            .unwrap_or_else(|e| panic!("sentinel {s}: {e}\n{}", self.logs()))
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
        wait_replicated(self.primary_port(), &self.access, || self.logs());
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
                let sentinel = self.access.without_auth();
                for s in self.sentinels.iter().filter(|s| s.is_alive()) {
                    named.push(master_addr(s.port, &sentinel)?);
                }
                named.dedup();
                let new = match named[..] {
                    [p] if p != old_port => p,
                    _ => return Err(format!("the sentinels name {named:?}")),
                };
                let role = query(new, &self.access, &["ROLE"])?;
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
        if self.data.iter().any(|n| n.port == port) {
            raw_command(port, &self.access, line)
        } else {
            raw_command(port, &self.access.without_auth(), line)
        }
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

/// The port of the primary the sentinel on `port` (reached with `access`) names.
fn master_addr(port: u16, access: &Access) -> Result<u16, String> {
    let r = query(
        port,
        access,
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

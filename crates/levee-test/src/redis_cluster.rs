//! A real Redis Cluster for the shared tier's tests: six redis-server processes (three
//! primaries, one replica each) on free ports of 127.0.0.1, each in a temporary
//! directory of its own, joined by `redis-cli --cluster create`. A primary can be
//! killed (SIGKILL, as a crash) and the test waits until its replica took over; slots
//! can be moved between primaries while the test runs (`redis-cli --cluster reshard`).
//! Every process dies with the test, as in [`Redis`](crate::Redis): killed and waited
//! for when the guard drops, killed by the kernel when the test process dies
//! (`setpriv --pdeathsig KILL`).
//!
//! ```no_run
//! let Some(_) = levee_test::redis::require() else { return };
//! let cluster = levee_test::RedisCluster::start();
//! let seeds = cluster.urls(); // redis://127.0.0.1:PORT of every node
//! let primary = cluster.primary_for_key("k");
//! cluster.kill(primary);
//! let promoted = cluster.wait_promoted(primary);
//! ```
//!
//! [`RedisCluster::start_tls`] runs every node on TLS only, the Cluster bus and
//! replication included (`rediss://...`).

use std::ffi::OsString;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::redis::spawn;
use crate::redis_node::{
    info_field, query, raw_command, tail, wait_for, wait_replicated, Access, Auth, Node, Reply,
    POLL,
};
use crate::redis_tls::RedisTls;

/// How long the cluster may take to form, to promote a replica, to settle after a
/// reshard.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one `redis-cli --cluster` run may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
/// Where Debian's package puts it.
const CLI: &str = "/usr/bin/redis-cli";
const SLOTS: u32 = 16384;

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug)]
struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    master: Option<String>,
    connected: bool,
    /// Slot ranges served; `[slot->-id]` / `[slot-<-id]` (moving) entries as `open`.
    slots: Vec<(u32, u32)>,
    open: bool,
}

impl NodeLine {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    fn failed(&self) -> bool {
        self.has("fail") || self.has("fail?")
    }
    fn serves(&self, slot: u32) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
    fn slot_count(&self) -> u32 {
        self.slots.iter().map(|(a, b)| b - a + 1).sum()
    }
}

fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let addr = f[1].split(['@', ',']).next()?;
            let mut slots = Vec::new();
            let mut open = false;
            for s in &f[8..] {
                if s.starts_with('[') {
                    open = true;
                } else if let Some((a, b)) = s.split_once('-') {
                    slots.push((a.parse().ok()?, b.parse().ok()?));
                } else {
                    let n = s.parse().ok()?;
                    slots.push((n, n));
                }
            }
            Some(NodeLine {
                id: f[0].to_string(),
                port: addr.rsplit(':').next()?.parse().ok()?,
                flags: f[2].split(',').map(str::to_string).collect(),
                master: (f[3] != "-").then(|| f[3].to_string()),
                connected: f[7] == "connected",
                slots,
                open,
            })
        })
        .collect()
}

/// Which primary (port) serves which slot ranges, sorted by port.
type SlotMap = Vec<(u16, Vec<(u32, u32)>)>;

/// What the cluster's processes share with a [`Reshard`] under way.
struct Inner {
    nodes: Vec<Node>,
    ids: Vec<String>,
    access: Access,
    /// For each killed primary: the ports of its replicas when it was killed.
    killed: Mutex<Vec<(u16, Vec<u16>)>>,
    /// What `redis-cli --cluster create` said.
    create_output: String,
}

impl Inner {
    fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    fn id(&self, port: u16) -> &str {
        let i = self.nodes.iter().position(|n| n.port == port);
        &self.ids[i.unwrap_or_else(|| panic!("no cluster node on port {port}"))]
    }

    fn live(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes.iter().filter(|n| n.is_alive()).map(|n| n.port)
    }

    fn any_live(&self) -> u16 {
        self.live()
            .next()
            .unwrap_or_else(|| panic!("every cluster node was killed"))
    }

    fn nodes_of(&self, port: u16) -> Result<Vec<NodeLine>, String> {
        Ok(parse_nodes(
            query(port, &self.access, &["CLUSTER", "NODES"])?.text(),
        ))
    }

    fn cluster_ok(&self, port: u16) -> Result<(), String> {
        let info = query(port, &self.access, &["CLUSTER", "INFO"])?;
        match info_field(info.text(), "cluster_state") {
            Some("ok") => Ok(()),
            s => Err(format!("127.0.0.1:{port} says cluster_state:{s:?}")),
        }
    }

    /// Every live node says `cluster_state:ok`, has no slot half-moved, and all of
    /// them agree which primary serves which slots (`slot map`, port → ranges).
    fn settled(&self) -> Result<SlotMap, String> {
        let mut agreed: Option<SlotMap> = None;
        for port in self.live() {
            self.cluster_ok(port)?;
            let lines = self.nodes_of(port)?;
            if lines.iter().any(|l| l.open) {
                return Err(format!("127.0.0.1:{port} has a slot being moved"));
            }
            let mut map: Vec<_> = lines
                .iter()
                .filter(|l| l.has("master") && !l.slots.is_empty())
                .map(|l| (l.port, l.slots.clone()))
                .collect();
            map.sort();
            match &agreed {
                Some(a) if *a != map => {
                    return Err(format!("nodes disagree on slots: {a:?} vs {map:?}"));
                }
                _ => agreed = Some(map),
            }
        }
        agreed.ok_or_else(|| "no node is alive".to_string())
    }

    fn logs(&self) -> String {
        let mut out: String = self.nodes.iter().map(Node::log_tail).collect();
        out.push_str("== redis-cli --cluster create ==\n");
        out.push_str(&tail(&self.create_output, 40));
        out
    }

    fn cli_args(&self) -> Vec<String> {
        self.access.cli_args()
    }
}

/// A running Redis Cluster; see the module's documentation.
pub struct RedisCluster {
    inner: Arc<Inner>,
}

impl RedisCluster {
    /// Starts six nodes, makes them a cluster of three primaries with one replica each
    /// and waits until every node says the cluster is ok, with all 16384 slots served
    /// and every replica in sync. Panics (with the logs) if it cannot.
    pub fn start() -> RedisCluster {
        RedisCluster::launch(Access::default())
    }

    /// [`RedisCluster::start`] with every node requiring `password`, for the ACL user
    /// `user` (all rights) or the `default` user; replicas log in as `user`.
    pub fn start_with_auth(user: &str, password: &str) -> RedisCluster {
        RedisCluster::launch(Access::new(Some(Auth::new(user, password)), None))
    }

    /// [`RedisCluster::start`] on TLS only, with `tls`'s certificate: clients, the
    /// Cluster bus and replication. [`RedisCluster::urls`] are then `rediss://...`.
    pub fn start_tls(tls: &RedisTls) -> RedisCluster {
        RedisCluster::launch(Access::new(None, Some(tls.clone())))
    }

    fn launch(access: Access) -> RedisCluster {
        let args = |port: u16, dir: &Path| -> Vec<OsString> {
            let mut a = Node::data_args(port, dir, &access);
            if access.tls.is_some() {
                a.extend(["--tls-cluster", "yes"].map(OsString::from));
            }
            a.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-replica-validity-factor",
                    "0",
                    "--cluster-port",
                ]
                .map(OsString::from),
            );
            a.push(free_port().to_string().into());
            a.push("--cluster-config-file".into());
            a.push(dir.join(format!("nodes-{port}.conf")).into());
            a
        };
        let nodes: Vec<Node> = (1..=6)
            .map(|i| Node::launch(&format!("cluster node {i}"), &access, &args))
            .collect();
        let ids = nodes
            .iter()
            .map(|n| match query(n.port, &access, &["CLUSTER", "MYID"]) {
                Ok(id) => id.text().to_string(),
                Err(e) => panic!("CLUSTER MYID: {e}\n{}", n.log_tail()),
            })
            .collect();
        let mut inner = Inner {
            nodes,
            ids,
            access,
            killed: Mutex::new(Vec::new()),
            create_output: String::new(),
        };
        let mut create = vec!["--cluster".to_string(), "create".into()];
        create.extend(inner.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(str::to_string));
        create.extend(inner.cli_args());
        let result = Cli::start(&create).wait();
        match result {
            Ok(out) => inner.create_output = out,
            Err(e) => panic!("redis-cli --cluster create failed: {e}\n{}", inner.logs()),
        }
        let cluster = RedisCluster {
            inner: Arc::new(inner),
        };
        cluster.wait_formed();
        cluster
    }

    /// Three primaries serving all slots, each with one replica in sync, in the view of
    /// every node, and `cluster_state:ok` everywhere.
    fn wait_formed(&self) {
        let inner = &*self.inner;
        wait_for(
            CLUSTER_TIMEOUT,
            "the cluster forming",
            || inner.logs(),
            || {
                let map = inner.settled()?;
                let covered: u32 = map
                    .iter()
                    .flat_map(|(_, r)| r)
                    .map(|(a, b)| b - a + 1)
                    .sum();
                if map.len() != 3 || covered != SLOTS {
                    return Err(format!("slots: {map:?}"));
                }
                for port in inner.live() {
                    let lines = inner.nodes_of(port)?;
                    let bad = lines.iter().find(|l| {
                        l.failed() || l.has("handshake") || l.has("noaddr") || !l.connected
                    });
                    if lines.len() != 6 || bad.is_some() {
                        return Err(format!("127.0.0.1:{port} sees {lines:?}"));
                    }
                    for m in lines.iter().filter(|l| l.has("master")) {
                        let replicas = lines.iter().filter(|l| l.master.as_ref() == Some(&m.id));
                        if replicas.count() != 1 {
                            return Err(format!(
                                "127.0.0.1:{port}: {} has not one replica",
                                m.port
                            ));
                        }
                    }
                    let role = query(port, &inner.access, &["INFO", "replication"])?;
                    if info_field(role.text(), "role") == Some("slave")
                        && info_field(role.text(), "master_link_status") != Some("up")
                    {
                        return Err(format!("replica 127.0.0.1:{port} is not in sync"));
                    }
                }
                Ok(())
            },
        );
    }

    /// `redis://127.0.0.1:PORT` of every node (`redis://user:pass@…` with credentials,
    /// `rediss://` on TLS), killed ones included.
    pub fn urls(&self) -> Vec<String> {
        let userinfo = Auth::userinfo(self.inner.access.auth.as_ref());
        let scheme = match self.inner.access.tls {
            Some(_) => "rediss",
            None => "redis",
        };
        self.ports()
            .iter()
            .map(|p| format!("{scheme}://{userinfo}127.0.0.1:{p}"))
            .collect()
    }

    /// The ports of all six nodes, killed ones included.
    pub fn ports(&self) -> Vec<u16> {
        self.inner.nodes.iter().map(|n| n.port).collect()
    }

    /// The node ID of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        self.inner.id(port).to_string()
    }

    /// The current primaries' ports (sorted), as a live node sees them: not failed,
    /// not killed.
    pub fn primaries(&self) -> Vec<u16> {
        let inner = &*self.inner;
        let port = inner.any_live();
        let lines = inner
            .nodes_of(port)
            .unwrap_or_else(|e| panic!("{e}\n{}", inner.logs()));
        let mut out: Vec<u16> = lines
            .iter()
            .filter(|l| l.has("master") && !l.failed())
            .filter(|l| inner.nodes.iter().any(|n| n.port == l.port && n.is_alive()))
            .map(|l| l.port)
            .collect();
        out.sort_unstable();
        out
    }

    /// The port of the primary serving `key`'s slot: the live node that says it serves
    /// that slot itself (waiting a moment while none or two do, as during a failover).
    pub fn primary_for_key(&self, key: &str) -> u16 {
        let inner = &*self.inner;
        let slot = match query(
            inner.any_live(),
            &inner.access,
            &["CLUSTER", "KEYSLOT", key],
        ) {
            Ok(Reply::Int(n)) => u32::try_from(n).unwrap_or(u32::MAX),
            r => panic!("CLUSTER KEYSLOT {key}: {r:?}"),
        };
        let what = format!("one primary serving slot {slot} of {key:?}");
        wait_for(
            CLUSTER_TIMEOUT,
            &what,
            || inner.logs(),
            || {
                let mut owners = Vec::new();
                for port in inner.live() {
                    let lines = inner.nodes_of(port)?;
                    if lines
                        .iter()
                        .any(|l| l.has("myself") && l.has("master") && l.serves(slot))
                    {
                        owners.push(port);
                    }
                }
                match owners[..] {
                    [one] => Ok(one),
                    _ => Err(format!("served by {owners:?}")),
                }
            },
        )
    }

    /// Kills the node on `port` (SIGKILL, as a crash) and waits for it to end.
    pub fn kill(&self, port: u16) {
        let inner = &*self.inner;
        let node = inner.node(port);
        if let Ok(lines) = inner.nodes_of(port) {
            let id = inner.id(port);
            let replicas = lines
                .iter()
                .filter(|l| l.master.as_deref() == Some(id))
                .map(|l| l.port)
                .collect();
            inner.killed.lock().unwrap().push((port, replicas));
        }
        node.kill();
    }

    /// Waits until the replica of the primary on `port` has everything written to that
    /// primary so far: what a test writes before [`RedisCluster::kill`] then survives.
    pub fn wait_replicated(&self, port: u16) {
        wait_replicated(port, &self.inner.access, || self.logs());
    }

    /// After [`RedisCluster::kill`] of a primary: waits until one of its replicas is a
    /// primary in the view of every live node, the killed one is marked failed, and
    /// every live node says `cluster_state:ok` again. Returns the promoted node's port.
    pub fn wait_promoted(&self, killed_port: u16) -> u16 {
        let inner = &*self.inner;
        let replicas = inner
            .killed
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(p, _)| *p == killed_port)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("127.0.0.1:{killed_port} was not killed by kill()"));
        assert!(
            !replicas.is_empty(),
            "127.0.0.1:{killed_port} had no replica when it was killed (was it a primary?)"
        );
        let killed_id = inner.id(killed_port).to_string();
        let what = format!("a replica of 127.0.0.1:{killed_port} ({replicas:?}) promoted");
        wait_for(
            CLUSTER_TIMEOUT,
            &what,
            || inner.logs(),
            || {
                let mut promoted = None;
                for port in inner.live() {
                    inner.cluster_ok(port)?;
                    let lines = inner.nodes_of(port)?;
                    if !lines.iter().any(|l| l.id == killed_id && l.has("fail")) {
                        return Err(format!(
                            "127.0.0.1:{port} has not marked {killed_port} failed"
                        ));
                    }
                    let new = lines
                        .iter()
                        .find(|l| {
                            replicas.contains(&l.port) && l.has("master") && l.slot_count() > 0
                        })
                        .map(|l| l.port)
                        .ok_or_else(|| format!("127.0.0.1:{port} sees no replica promoted"))?;
                    if promoted.is_some_and(|p| p != new) {
                        return Err(format!("nodes disagree: {promoted:?} vs {new}"));
                    }
                    promoted = Some(new);
                }
                promoted.ok_or_else(|| "no node is alive".to_string())
            },
        )
    }

    /// Moves `slots` slots (with their keys) from the primary on `from_port` to the one
    /// on `to_port` with `redis-cli --cluster reshard`, then waits until every live
    /// node agrees on the new slot map. Panics (with the logs) if it fails.
    pub fn reshard(&self, from_port: u16, to_port: u16, slots: usize) {
        if let Err(e) = self.reshard_in_background(from_port, to_port, slots).wait() {
            panic!("{e}\n{}", self.logs());
        }
    }

    /// [`RedisCluster::reshard`] started, not waited for: the test goes on while the
    /// slots move, and [`Reshard::wait`] says how it went.
    pub fn reshard_in_background(&self, from_port: u16, to_port: u16, slots: usize) -> Reshard {
        let inner = &self.inner;
        let mut args = vec!["--cluster".to_string(), "reshard".into()];
        args.push(format!("127.0.0.1:{}", inner.any_live()));
        args.extend(["--cluster-from".into(), inner.id(from_port).to_string()]);
        args.extend(["--cluster-to".into(), inner.id(to_port).to_string()]);
        args.extend(["--cluster-slots".into(), slots.to_string()]);
        args.push("--cluster-yes".into());
        args.extend(inner.cli_args());
        Reshard {
            cli: Cli::start(&args),
            inner: Arc::clone(inner),
        }
    }

    /// Sends one command (space-separated arguments without spaces) to the node on
    /// `port` (logged in when there are credentials) and returns its raw RESP reply,
    /// redirections (`-MOVED …`) included.
    pub fn command(&self, port: u16, line: &str) -> String {
        raw_command(port, &self.inner.access, line)
    }

    /// [`RedisCluster::command`] to some live node.
    pub fn cluster_command(&self, line: &str) -> String {
        self.command(self.inner.any_live(), line)
    }

    /// The end of every node's log, for a failing test's message.
    pub fn logs(&self) -> String {
        self.inner.logs()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // A Reshard handle may hold the nodes a while longer: they die now anyway.
        for node in &self.inner.nodes {
            node.kill();
        }
    }
}

/// A `redis-cli --cluster reshard` under way; see
/// [`RedisCluster::reshard_in_background`]. Killed if dropped unwaited.
pub struct Reshard {
    cli: Cli,
    inner: Arc<Inner>,
}

impl Reshard {
    /// Waits for redis-cli to end and then for the cluster to settle (every live node
    /// ok and agreeing on the slot map). `Err` says what failed, with redis-cli's output.
    pub fn wait(self) -> Result<(), String> {
        let out = self.cli.wait()?;
        let inner = &*self.inner;
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        loop {
            match inner.settled() {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "the cluster did not settle after resharding: {e}\n{out}"
                    ))
                }
                Err(_) => std::thread::sleep(POLL),
            }
        }
    }
}

/// A redis-cli run, its output in a file of its own temporary directory.
struct Cli {
    child: Option<Child>,
    dir: tempfile::TempDir,
    line: String,
}

impl Cli {
    fn start(args: &[String]) -> Cli {
        let dir = tempfile::tempdir().expect("create a redis-cli temp dir");
        let out = File::create(dir.path().join("out")).expect("create redis-cli's output file");
        let err = out.try_clone().expect("clone redis-cli's output file");
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--", CLI])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = spawn(cmd).unwrap_or_else(|e| panic!("cannot run setpriv {CLI}: {e}"));
        let line = args
            .iter()
            .map(String::as_str)
            .take_while(|a| *a != "--user")
            .collect::<Vec<_>>()
            .join(" ");
        Cli {
            child: Some(child),
            dir,
            line: format!("redis-cli {line}"),
        }
    }

    /// Waits (bounded) for the run to end: its output, or why it failed with it.
    fn wait(mut self) -> Result<String, String> {
        let mut child = self.child.take().expect("redis-cli was waited for once");
        let deadline = Instant::now() + CLI_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let out = std::fs::read_to_string(self.dir.path().join("out")).unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok(out),
            Some(s) => Err(format!(
                "{} exited with {s}:\n{}",
                self.line,
                tail(&out, 40)
            )),
            None => Err(format!(
                "{} did not end within {CLI_TIMEOUT:?}:\n{}",
                self.line,
                tail(&out, 40)
            )),
        }
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

//! The real `levee serve` process, on an ephemeral port, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{Req, Resp};

/// How long levee may take to print its "listening on" line.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Options for one `levee serve` process.
pub struct LeveeBuilder {
    bin: PathBuf,
    args: Vec<String>,
    config: Option<String>,
    admin_token: Option<String>,
    test_clock: bool,
    env: Vec<(String, std::ffi::OsString)>,
}

impl LeveeBuilder {
    /// `levee serve --listen 127.0.0.1:0` with the binary at `bin`; see also the
    /// [`levee!`](crate::levee) macro.
    pub fn new(bin: impl Into<PathBuf>) -> LeveeBuilder {
        LeveeBuilder {
            bin: bin.into(),
            args: vec!["serve".into(), "--listen".into(), "127.0.0.1:0".into()],
            config: None,
            admin_token: None,
            test_clock: true,
            env: Vec::new(),
        }
    }

    /// Runs levee as in production: without `LEVEE_TEST_CLOCK`, so its clock cannot be
    /// moved (`advance_clock` then fails).
    pub fn without_test_clock(mut self) -> LeveeBuilder {
        self.test_clock = false;
        self
    }

    pub fn backend(self, url: &str) -> LeveeBuilder {
        self.arg("--backend").arg(url)
    }

    pub fn arg(mut self, arg: &str) -> LeveeBuilder {
        self.args.push(arg.to_string());
        self
    }

    pub fn args(mut self, args: &[&str]) -> LeveeBuilder {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Sets the environment variable `key` to `value` for the levee process
    /// (`SSL_CERT_FILE`, say).
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> LeveeBuilder {
        self.env.push((key.to_string(), value.as_ref().to_owned()));
        self
    }

    /// `--admin-token TOKEN`; the helpers that read the admin listener send it.
    pub fn admin_token(mut self, token: &str) -> LeveeBuilder {
        self.admin_token = Some(token.to_string());
        self.arg("--admin-token").arg(token)
    }

    /// `--debug-headers`: adds `X-Cache-Reason`.
    pub fn debug_headers(self) -> LeveeBuilder {
        self.arg("--debug-headers")
    }

    /// A config file with this TOML text (appended to any set before).
    pub fn config(mut self, toml: &str) -> LeveeBuilder {
        let mut c = self.config.take().unwrap_or_default();
        c.push_str(toml);
        c.push('\n');
        self.config = Some(c);
        self
    }

    /// Spawns levee and waits until it listens. Panics (with levee's stderr) if it exits
    /// or does not listen in time.
    pub fn start(self) -> Levee {
        let config_file = self.config.as_ref().map(|text| {
            let path = temp_path("toml");
            std::fs::write(&path, text).expect("write config file");
            path
        });
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args);
        // The admin listener's counters are what tests wait on instead of sleeping.
        if !self.args.iter().any(|a| a == "--admin-listen") {
            cmd.args(["--admin-listen", "127.0.0.1:0"]);
        }
        if let Some(p) = &config_file {
            cmd.arg("--config").arg(p);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("LEVEE_LOG", "warn")
            .env_remove("LEVEE_TEST_CLOCK");
        if self.test_clock {
            // Lets `Levee::advance_clock` move levee's clock (admin `POST /clock`).
            cmd.env("LEVEE_TEST_CLOCK", "1");
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
        let admin = Arc::new(Mutex::new(None));
        let tls = Arc::new(Mutex::new(None));
        let (thread_log, thread_admin, thread_tls) = (log.clone(), admin.clone(), tls.clone());
        std::thread::spawn(move || {
            let mut addr_tx = Some(addr_tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(a) = line.strip_prefix("levee: admin listening on http://") {
                    *thread_admin.lock().unwrap() =
                        a.split(' ').next().and_then(|a| a.parse().ok());
                } else if let Some(a) = line.strip_prefix("levee: listening on https://") {
                    let mut t = thread_tls.lock().unwrap();
                    if t.is_none() {
                        *t = a.split([',', ' ']).next().and_then(|a| a.parse().ok());
                    }
                } else if let Some(tx) = &addr_tx {
                    if let Some(addr) = parse_listening(&line) {
                        let _ = tx.send(addr);
                        addr_tx = None;
                    }
                }
                let mut l = thread_log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let mut levee = Levee {
            child,
            addr: "0.0.0.0:0".parse().expect("placeholder"),
            log,
            admin,
            tls,
            config_file,
            args: self.args,
            admin_token: self.admin_token,
        };
        match addr_rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => levee.addr = addr,
            Err(_) => {
                let status = levee.child.try_wait().ok().flatten();
                std::thread::sleep(Duration::from_millis(50));
                panic!(
                    "levee {:?} did not start listening (exit status {status:?}); stderr:\n{}",
                    levee.args,
                    levee.stderr()
                );
            }
        }
        levee
    }
}

/// `levee: listening on http://127.0.0.1:PORT, backend ...` → the address.
fn parse_listening(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on http://").nth(1)?;
    let addr = rest.split([',', ' ']).next()?;
    addr.parse().ok()
}

fn temp_path(ext: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    std::env::temp_dir().join(format!("levee-test-{}-{n}.{ext}", std::process::id()))
}

/// A running `levee serve`. Killed (SIGKILL) when dropped, unless it already exited.
pub struct Levee {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
    /// The admin listener, printed right after the traffic addresses.
    admin: Arc<Mutex<Option<SocketAddr>>>,
    /// The first HTTPS listener (`--listen-tls`), printed after the cleartext ones.
    tls: Arc<Mutex<Option<SocketAddr>>>,
    config_file: Option<PathBuf>,
    args: Vec<String>,
    admin_token: Option<String>,
}

impl Levee {
    /// The config file written from [`LeveeBuilder::config`], if any: a test may rewrite
    /// it and send SIGHUP.
    pub fn config_path(&self) -> Option<&std::path::Path> {
        self.config_file.as_deref()
    }

    /// Sends `signal` (`"HUP"`, `"USR1"`...) to levee.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// The address levee listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What levee has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (at most 5 s) until levee's stderr contains `needle`; panics with the log
    /// otherwise. For what levee reports in the background (a log line after a response).
    pub async fn wait_log(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the log never said {needle:?}:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM (graceful drain).
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Kills levee with SIGKILL (no drain, nothing flushed: a crash) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit; `None` if it is still running after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The first HTTPS listener's address. Panics if levee printed none.
    pub async fn tls_addr(&self) -> SocketAddr {
        let found = crate::wait::eventually(Duration::from_secs(5), || {
            self.tls.lock().unwrap().is_some()
        })
        .await;
        let addr = *self.tls.lock().unwrap();
        match (found, addr) {
            (true, Some(a)) => a,
            _ => panic!("levee printed no HTTPS address; stderr:\n{}", self.stderr()),
        }
    }

    /// The admin listener's address. Panics if levee runs without one.
    pub async fn admin_addr(&self) -> SocketAddr {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(a) = *self.admin.lock().unwrap() {
                return a;
            }
            assert!(
                Instant::now() < deadline,
                "levee printed no admin address; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// One value of levee's `/metrics` (a counter by its `_total` name). Panics if it is
    /// not there.
    pub async fn metric(&self, name: &str) -> f64 {
        let r = self.admin(Req::get("/metrics")).await;
        assert_eq!(r.status, 200, "GET /metrics: {}", r.summary());
        let text = String::from_utf8_lossy(&r.body).into_owned();
        text.lines()
            .find_map(|l| {
                let (n, v) = l.split_once(' ')?;
                (n == name).then(|| v.trim().parse().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// The sum of a metric's samples over all its labels (`levee_x_total{a="b"}` and
    /// `levee_x_total{a="c"}`); 0 when it has none yet.
    pub async fn metric_sum(&self, name: &str) -> f64 {
        let r = self.admin(Req::get("/metrics")).await;
        assert_eq!(r.status, 200, "GET /metrics: {}", r.summary());
        String::from_utf8_lossy(&r.body)
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let value = match rest.strip_prefix('{') {
                    Some(labelled) => labelled.split_once("} ")?.1,
                    None => rest.strip_prefix(' ')?,
                };
                value.trim().parse::<f64>().ok()
            })
            .sum()
    }

    /// `req` to the admin listener, with the admin token if levee has one.
    pub async fn admin(&self, mut req: Req) -> Resp {
        if let Some(t) = &self.admin_token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        req.send_to(self.admin_addr().await).await
    }

    /// `POST /purge?QUERY` on the admin listener; the number of responses it says it
    /// purged (panics on anything but 200).
    pub async fn purge(&self, query: &str) -> u64 {
        let r = self
            .admin(Req::new("POST", &format!("/purge?{query}")))
            .await;
        assert_eq!(r.status, 200, "POST /purge?{query}: {}", r.summary());
        let text = r.text();
        text.split("\"purged\":")
            .nth(1)
            .and_then(|s| s.split([',', '}']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count in {text}"))
    }

    /// Moves levee's clock forward by `by` (`POST /clock?advance=` on the admin
    /// listener): every age, TTL, grace and micro-cache decision sees the time `by`
    /// later, without the test sleeping. Backends that send their own `Date` keep the
    /// real time: to them levee's clock is skewed, so advance before storing what must
    /// look fresh, or give the origin the same offset (`Origin::advance_clock`).
    pub async fn advance_clock(&self, by: Duration) {
        let r = self
            .admin(Req::new(
                "POST",
                &format!("/clock?advance={}ms", by.as_millis()),
            ))
            .await;
        assert_eq!(r.status, 200, "POST /clock: {}", r.summary());
    }

    /// Waits until `cond` holds for the metric `name` (5 s at most, then panics).
    pub async fn wait_metric(&self, name: &str, cond: impl Fn(f64) -> bool) {
        self.wait_metric_within(name, Duration::from_secs(5), cond)
            .await
    }

    /// Waits until every fill started so far has finished: its response stored, or
    /// found not storable, or given up. What a test needs before it checks what is
    /// cached (a response reaches the client before its fill stores it).
    pub async fn wait_fills_done(&self) {
        self.wait_metric("levee_fills_in_flight", |v| v == 0.0)
            .await
    }

    /// Waits until no request holds a backend slot.
    pub async fn wait_backend_idle(&self) {
        self.wait_metric("levee_backend_in_use", |v| v == 0.0).await
    }

    /// `GET path` on a new connection.
    pub async fn get(&self, path: &str) -> Resp {
        Req::get(path).send(self).await
    }

    /// Waits until a fresh response for `GET path` is stored (a response reaches the
    /// client a moment before the fill that produced it is stored). Polls with
    /// `Cache-Control: only-if-cached`, which never reaches the backend.
    pub async fn wait_stored(&self, path: &str) {
        self.wait_stored_req(Req::get(path)).await
    }

    /// [`wait_stored`](Self::wait_stored) for a request with its own headers (Vary).
    pub async fn wait_stored_req(&self, req: Req) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = req
                .clone()
                .header("cache-control", "only-if-cached")
                .send(self)
                .await;
            if r.status == 200 && r.x_cache() == "HIT" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the response was not stored within 5s: {}",
                r.summary()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until a response for `GET path` is stored, fresh or stale (one kept only for
    /// revalidation, say): polls with `only-if-cached, max-stale`, which never reaches
    /// the backend. Not for `no-cache` responses, which are never served unvalidated.
    pub async fn wait_kept(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = Req::get(path)
                .header("cache-control", "only-if-cached, max-stale")
                .send(self)
                .await;
            if r.status == 200 && matches!(r.x_cache(), "HIT" | "STALE") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the response was not stored within 5s: {}",
                r.summary()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `GET path` with extra headers, on a new connection.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        let mut r = Req::get(path);
        for (k, v) in headers {
            r = r.header(k, v);
        }
        r.send(self).await
    }

    /// [`wait_metric`](Self::wait_metric) with a deadline of its own, for what may take
    /// longer than 5 s on a loaded machine: an application process starting, say.
    pub async fn wait_metric_within(
        &self,
        name: &str,
        within: Duration,
        cond: impl Fn(f64) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let v = self.metric(name).await;
            if cond(v) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name} stayed at {v} for {within:?}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Levee {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        if let Some(p) = &self.config_file {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Req {
    /// Sends the request to levee on a new connection and reads the whole response.
    pub async fn send(self, levee: &Levee) -> Resp {
        self.send_to(levee.addr()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_line_is_parsed() {
        assert_eq!(
            parse_listening("levee: listening on http://127.0.0.1:4321, backend http://x:1"),
            Some("127.0.0.1:4321".parse().unwrap())
        );
        assert_eq!(parse_listening("levee: something else"), None);
    }
}

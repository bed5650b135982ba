//! A real php-fpm for integration tests: its own config, pid file, log and sockets in a
//! temporary directory, one pool on a Unix socket and one on `127.0.0.1`, killed when the
//! guard is dropped.

use std::fs::{self, File};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long php-fpm may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Options for one php-fpm; see [`PhpFpm::builder`].
pub struct PhpFpmBuilder {
    docroot: PathBuf,
    max_children: usize,
    max_requests: u32,
    ini: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

impl PhpFpmBuilder {
    /// Workers per pool (`pm = static`). Default: 4.
    pub fn max_children(mut self, n: usize) -> PhpFpmBuilder {
        self.max_children = n;
        self
    }

    /// `pm.max_requests`: a worker exits (closing its kept-alive connection) after this
    /// many requests. Default: 0, never.
    pub fn max_requests(mut self, n: u32) -> PhpFpmBuilder {
        self.max_requests = n;
        self
    }

    /// A `php_admin_value[name] = value` line for both pools.
    pub fn ini(mut self, name: &str, value: &str) -> PhpFpmBuilder {
        self.ini.push((name.to_string(), value.to_string()));
        self
    }

    /// An `env[name] = value` line for both pools: what the scripts see in `getenv()`.
    pub fn env(mut self, name: &str, value: &str) -> PhpFpmBuilder {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Starts php-fpm and waits until both pools accept connections. Panics, with
    /// php-fpm's log, if it cannot.
    pub fn start(self) -> PhpFpm {
        let bin = PhpFpm::binary();
        let mut last_log = String::new();
        // The TCP port is picked free and then handed to php-fpm: another process may take
        // it in between, so a bind failure is retried on a new port.
        for _ in 0..3 {
            match self.try_start(&bin) {
                Ok(fpm) => return fpm,
                Err(log) => last_log = log,
            }
        }
        panic!(
            "php-fpm ({}) did not start; its log:\n{last_log}",
            bin.display()
        );
    }

    fn try_start(&self, bin: &Path) -> Result<PhpFpm, String> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("levee-phpfpm-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create php-fpm temp dir");
        let socket = dir.join("php-fpm.sock");
        let port = crate::ports::free_port();
        let tcp: SocketAddr = ([127, 0, 0, 1], port).into();
        let root = fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .unwrap_or(false);

        let conf = dir.join("php-fpm.conf");
        fs::write(&conf, self.config(&dir, &socket, tcp, root)).expect("write php-fpm.conf");
        let stderr = File::create(dir.join("stderr.log")).expect("create stderr.log");
        let mut cmd = Command::new(bin);
        cmd.arg("--nodaemonize").arg("--fpm-config").arg(&conf);
        if root {
            // php-fpm refuses to run as root without it.
            cmd.arg("--allow-to-run-as-root");
        }
        // Its own process group, so that the workers can be killed with the master.
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut fpm = PhpFpm {
            child,
            dir,
            socket,
            tcp,
            docroot: self.docroot.clone(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if UnixStream::connect(&fpm.socket).is_ok()
                && TcpStream::connect_timeout(&fpm.tcp, Duration::from_millis(200)).is_ok()
            {
                return Ok(fpm);
            }
            if let Ok(Some(status)) = fpm.child.try_wait() {
                return Err(format!("(exited with {status})\n{}", fpm.error_log()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "(not listening after {START_TIMEOUT:?})\n{}",
                    fpm.error_log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn config(&self, dir: &Path, socket: &Path, tcp: SocketAddr, root: bool) -> String {
        let mut c = format!(
            "[global]\n\
             pid = {pid}\n\
             error_log = {log}\n\
             log_level = notice\n\
             daemonize = no\n\
             process_control_timeout = 2s\n",
            pid = dir.join("php-fpm.pid").display(),
            log = dir.join("php-fpm.log").display(),
        );
        for (name, listen) in [
            ("unix", socket.display().to_string()),
            ("tcp", tcp.to_string()),
        ] {
            c.push_str(&format!(
                "\n[{name}]\n\
                 listen = {listen}\n\
                 pm = static\n\
                 pm.max_children = {children}\n\
                 pm.max_requests = {max_requests}\n\
                 catch_workers_output = yes\n\
                 decorate_workers_output = no\n\
                 security.limit_extensions = .php\n\
                 php_admin_value[upload_max_filesize] = 64M\n\
                 php_admin_value[post_max_size] = 64M\n\
                 php_admin_value[memory_limit] = 256M\n\
                 php_admin_flag[log_errors] = on\n",
                children = self.max_children,
                max_requests = self.max_requests,
            ));
            if root {
                c.push_str("user = root\ngroup = root\n");
            }
            for (k, v) in &self.ini {
                c.push_str(&format!("php_admin_value[{k}] = {v}\n"));
            }
            for (k, v) in &self.env {
                c.push_str(&format!("env[{k}] = {v}\n"));
            }
        }
        c
    }
}

/// A running php-fpm serving a document root. Stopped (its whole process group) and its
/// temporary directory removed when dropped; the document root is left alone.
///
/// ```no_run
/// let fpm = levee_test::PhpFpm::start("/tmp/docroot");
/// let sock = fpm.socket_path(); // pool "unix"
/// let addr = fpm.tcp_addr();    // pool "tcp", on 127.0.0.1
/// ```
pub struct PhpFpm {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
    tcp: SocketAddr,
    docroot: PathBuf,
}

impl PhpFpm {
    /// php-fpm with 4 workers per pool, uploads up to 64 MiB.
    pub fn start(docroot: impl AsRef<Path>) -> PhpFpm {
        PhpFpm::builder(docroot).start()
    }

    pub fn builder(docroot: impl AsRef<Path>) -> PhpFpmBuilder {
        PhpFpmBuilder {
            docroot: docroot.as_ref().to_path_buf(),
            max_children: 4,
            max_requests: 0,
            ini: Vec::new(),
            env: Vec::new(),
        }
    }

    /// The php-fpm binary. Panics saying how to install it if there is none; tests call
    /// [`require!`](crate::require)`(levee_test::tools::PHP_FPM)` first, so that the
    /// person running them can opt out.
    pub fn binary() -> PathBuf {
        crate::tools::require(&crate::tools::PHP_FPM)
            .unwrap_or_else(|| panic!("php-fpm is not installed (and its tests were not skipped)"))
    }

    /// The Unix socket of the pool named `unix`.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The address of the pool named `tcp`.
    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp
    }

    pub fn docroot(&self) -> &Path {
        &self.docroot
    }

    /// The master process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// php-fpm's own log (startup, worker exits, `catch_workers_output`) and its stderr.
    pub fn error_log(&self) -> String {
        let log = fs::read_to_string(self.dir.join("php-fpm.log")).unwrap_or_default();
        let stderr = fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        format!("{log}{stderr}")
    }

    fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SIGTERM: the master stops its workers and exits; SIGKILL if it lingers.
            self.signal_group("TERM");
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Workers that outlived their master, if any.
        self.signal_group("KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

//! A private MariaDB server from Debian's `mariadb-server` package: its own data
//! directory and Unix socket in a temporary directory, no TCP port, stopped when dropped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::scratch;

/// How long the server may take to answer its first ping.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct MariaDb {
    dir: PathBuf,
    child: Child,
}

impl MariaDb {
    /// User and password of the account the applications use (all privileges).
    pub const USER: &'static str = "levee";
    pub const PASSWORD: &'static str = "levee-test-db";

    /// Creates a data directory and starts the server on it. Call
    /// `require!(tools::MARIADB)` first.
    pub fn start() -> MariaDb {
        let dir = scratch("mariadb");
        let data = dir.join("data");
        // Its own temporary directory: a starting server deletes the `#sql*` files it
        // finds in its tmpdir, so with a shared /tmp one test's instance removed the
        // temporary tables of another's bootstrap ("Could not remove temporary table ...
        // error: 2", then "Aborting"; seen once in CI).
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).expect("create mariadb's tmpdir");
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ])
            .output()
            .expect("run mariadb-install-db (apt-get install mariadb-server)");
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::File::create(dir.join("mariadbd.log")).unwrap();
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .args([
                "--skip-networking",
                "--user=root",
                "--innodb-buffer-pool-size=32M",
                // Tests do not need durability; commits that fsync cost seconds.
                "--innodb-flush-log-at-trx-commit=0",
                "--skip-log-bin",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            // Its own process group, so a test runner's Ctrl-C does not reach it first.
            .process_group(0)
            .spawn()
            .expect("run mariadbd (apt-get install mariadb-server)");
        let mut db = MariaDb { dir, child };
        let start = Instant::now();
        loop {
            if db.sql("SELECT 1").is_ok() {
                break;
            }
            if let Ok(Some(status)) = db.child.try_wait() {
                panic!("mariadbd exited ({status}); its log:\n{}", db.log());
            }
            assert!(
                start.elapsed() < START_TIMEOUT,
                "mariadbd did not answer within {START_TIMEOUT:?}; its log:\n{}",
                db.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        db.sql(&format!(
            "CREATE USER '{u}'@'localhost' IDENTIFIED BY '{p}'; \
             GRANT ALL ON *.* TO '{u}'@'localhost'",
            u = Self::USER,
            p = Self::PASSWORD
        ))
        .unwrap();
        db
    }

    /// The server's Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// Runs `sql` as root; its output, or the client's error.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .output()
            .map_err(|e| format!("run mariadb: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Creates an empty database.
    pub fn create_database(&self, name: &str) {
        self.sql(&format!("CREATE DATABASE `{name}`")).unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mariadbd.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Programs a test needs that cargo does not build (php-fpm, Chromium). A test whose tool
//! is missing fails, saying the command that installs it, so that a machine without it
//! never reports a green suite that tested nothing. Someone who knowingly runs without a
//! tool sets `LEVEE_TEST_SKIP_MISSING` (a comma-separated list of tool names, or `all`):
//! those tests then return early, saying so on stderr. CI never sets it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that lets tests whose tool is missing pass without running.
pub const SKIP_MISSING: &str = "LEVEE_TEST_SKIP_MISSING";

/// A program some tests need.
pub struct Tool {
    /// What `LEVEE_TEST_SKIP_MISSING` calls it.
    pub name: &'static str,
    /// Where it is looked for, first found wins.
    find: fn() -> Option<PathBuf>,
    /// The command that installs it on Debian.
    pub install: &'static str,
}

pub const CHROMIUM: Tool = Tool {
    name: "chromium",
    find: find_chromium,
    install: "apt-get install -y chromium",
};

pub const PHP_FPM: Tool = Tool {
    name: "php-fpm",
    find: find_php_fpm,
    install: "apt-get install -y php8.2-fpm php8.2-cli",
};

/// php-cgi, which runtime/levee-worker.php runs under (php-cli cannot see header()).
pub const PHP_CGI: Tool = Tool {
    name: "php-cgi",
    find: || {
        ["/usr/bin/php-cgi8.2", "/usr/bin/php-cgi"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    },
    install: "apt-get install -y php8.2-cgi php8.2-cli",
};

pub const DOKUWIKI: Tool = Tool {
    name: "dokuwiki",
    find: || {
        let p = PathBuf::from("/usr/share/dokuwiki/doku.php");
        p.is_file().then_some(p)
    },
    install: "apt-get install -y dokuwiki",
};

/// Python 3, for the app pool's test workers.
pub const PYTHON3: Tool = Tool {
    name: "python3",
    find: || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    },
    install: "apt-get install -y python3",
};

/// Debian's Python with its `websockets` library (an implementation of RFC 6455 that
/// levee's code shares nothing with), the WebSocket server of the WebSocket tests.
pub const PYTHON_WEBSOCKETS: Tool = Tool {
    name: "python3-websockets",
    find: || {
        let p = PathBuf::from("/usr/bin/python3");
        let lib = Path::new("/usr/lib/python3/dist-packages/websockets/__init__.py");
        (p.is_file() && lib.is_file()).then_some(p)
    },
    install: "apt-get install -y python3-websockets",
};

/// curl, a real HTTPS and HTTP/2 client for the TLS tests.
pub const CURL: Tool = Tool {
    name: "curl",
    find: || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join("curl"))
            .find(|p| p.is_file())
    },
    install: "apt-get install -y curl",
};

/// Pebble, Let's Encrypt's ACME test server, and its DNS server (see pebble.rs).
pub const PEBBLE: Tool = Tool {
    name: "pebble",
    find: || {
        let p = PathBuf::from("/usr/bin/pebble");
        let srv = Path::new("/usr/bin/pebble-challtestsrv");
        (p.is_file() && srv.is_file()).then_some(p)
    },
    install: "apt-get install -y pebble",
};

/// The MariaDB server and its PHP driver, for the database-backed applications.
pub const MARIADB: Tool = Tool {
    name: "mariadb",
    find: || {
        let server = PathBuf::from("/usr/sbin/mariadbd");
        let driver = Path::new("/etc/php/8.2/mods-available/mysqli.ini");
        (server.is_file() && driver.is_file()).then_some(server)
    },
    install: "apt-get install -y mariadb-server php8.2-mysql",
};

/// WordPress with its default theme (Debian's package ships none).
pub const WORDPRESS: Tool = Tool {
    name: "wordpress",
    find: || {
        let p = PathBuf::from("/usr/share/wordpress/wp-load.php");
        let theme = Path::new("/usr/share/wordpress/wp-content/themes/twentytwentythree");
        (p.is_file() && theme.is_dir()).then_some(p)
    },
    install: "apt-get install -y wordpress wordpress-theme-twentytwentythree",
};

pub const MEDIAWIKI: Tool = Tool {
    name: "mediawiki",
    find: || {
        let p = PathBuf::from("/usr/share/mediawiki/index.php");
        p.is_file().then_some(p)
    },
    install: "apt-get install -y mediawiki",
};

impl Tool {
    /// Where the tool is, if it is installed.
    pub fn path(&self) -> Option<PathBuf> {
        (self.find)()
    }
}

/// The tool's path; `None` when it is missing and the person running the tests opted
/// out of it (the test should return). Panics, saying how to install it, when it is
/// missing otherwise. See [`require!`](crate::require).
pub fn require(tool: &Tool) -> Option<PathBuf> {
    if let Some(p) = tool.path() {
        return Some(p);
    }
    if skipped(tool.name, std::env::var(SKIP_MISSING).ok().as_deref()) {
        eprintln!(
            "skipped: {} is not installed and {SKIP_MISSING} names it; this test did not run",
            tool.name
        );
        return None;
    }
    panic!(
        "{} is not installed: run `{}` (or set {SKIP_MISSING}={} to skip the tests that need it)",
        tool.name, tool.install, tool.name
    );
}

/// Whether the value of `LEVEE_TEST_SKIP_MISSING` names `tool`.
fn skipped(tool: &str, var: Option<&str>) -> bool {
    var.is_some_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|t| t.eq_ignore_ascii_case(tool) || t.eq_ignore_ascii_case("all"))
    })
}

/// At the top of a test: the tool's path, or return from the test when it is missing
/// and opted out (see [`require`](crate::tools::require)).
#[macro_export]
macro_rules! require {
    ($tool:expr) => {
        match $crate::tools::require(&$tool) {
            Some(path) => path,
            None => return,
        }
    };
}

fn find_chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// `/usr/sbin/php-fpm8.2`, or else the newest `php-fpm*` on `PATH` (or in `/usr/sbin`).
fn find_php_fpm() -> Option<PathBuf> {
    let preferred = Path::new("/usr/sbin/php-fpm8.2");
    if preferred.is_file() {
        return Some(preferred.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from));
    dirs.into_iter().find_map(|dir| {
        let mut found: Vec<PathBuf> = fs::read_dir(&dir)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("php-fpm"))
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found.pop()
    })
}

/// Runs headless Chromium with a hard time limit; returns (stdout, stderr).
pub fn run_chromium(bin: &Path, profile: &Path, extra: &[&str], url: &str) -> (String, String) {
    // QUIC only where a test asks for it (the HTTP/3 tests force it on for an origin).
    let quic = extra
        .iter()
        .any(|a| a.starts_with("--origin-to-force-quic-on"));
    let mut child = Command::new(bin)
        .args(["--disable-quic"].iter().filter(|_| !quic))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::skipped;

    #[test]
    fn the_variable_names_tools_or_all() {
        assert!(!skipped("chromium", None));
        assert!(!skipped("chromium", Some("")));
        assert!(!skipped("chromium", Some("php-fpm")));
        assert!(skipped("chromium", Some("php-fpm, chromium")));
        assert!(skipped("php-fpm", Some("ALL")));
    }

    #[test]
    #[should_panic(expected = "apt-get install -y nothing")]
    fn a_missing_tool_fails_with_its_install_command() {
        let t = super::Tool {
            name: "levee-test-no-such-tool",
            find: || None,
            install: "apt-get install -y nothing",
        };
        super::require(&t);
    }
}

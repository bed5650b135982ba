//! A real WebSocket server for the WebSocket tests: Debian's python3-websockets running
//! `websocket.py` (echo, and a few commands: see the script) on a free port of
//! 127.0.0.1. Killed and waited for when the guard drops, and by the kernel if the test
//! process dies first (`setpriv --pdeathsig KILL`).

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tools::{require, PYTHON_WEBSOCKETS};

const SCRIPT: &str = include_str!("websocket.py");

/// A running WebSocket server.
pub struct WsServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl WsServer {
    /// Starts the server; `None` when python3-websockets is missing and the tests that
    /// need it are skipped (`LEVEE_TEST_SKIP_MISSING`).
    pub fn start() -> Option<WsServer> {
        let python = require(&PYTHON_WEBSOCKETS)?;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("websocket.py");
        std::fs::write(&script, SCRIPT).unwrap();
        let port = crate::ports::free_port();
        let mut child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(python)
            .arg(&script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the WebSocket server");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the WebSocket server exited with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the WebSocket server did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(WsServer {
            child,
            port,
            _dir: dir,
        })
    }

    /// Its `http://` URL, for levee's `--backend` or a route.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// The server as a command for levee's app processes (`--app`), `{port}` left for levee
/// to fill: levee starts and stops it, as it would a Node or Reverb process. The script
/// is written into `dir`. `None` when python3-websockets is missing (skipped).
pub fn app_command(dir: &std::path::Path) -> Option<String> {
    let python = require(&PYTHON_WEBSOCKETS)?;
    let script = dir.join("websocket.py");
    std::fs::write(&script, SCRIPT).unwrap();
    Some(format!(
        "{} {} {{port}}",
        python.display(),
        script.display()
    ))
}

impl Drop for WsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

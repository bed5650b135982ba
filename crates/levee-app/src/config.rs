//! How the application's processes are run, and what can go wrong starting them.

use std::path::PathBuf;
use std::time::Duration;

/// How to run the application's processes.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// A shell command with a `{port}` placeholder: `php worker.php {port}`.
    pub command: String,
    pub processes: usize,
    /// Requests one process serves at once (1 for PHP).
    pub concurrency: usize,
    /// How long a process may take to accept connections after it starts.
    pub ready_timeout: Duration,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Replace a process after about this many requests (0: never).
    pub max_requests: u64,
    /// Replace a process whose resident memory exceeds this many bytes (0: never).
    pub max_memory: u64,
    /// Replace a process older than this.
    pub max_age: Option<Duration>,
    /// How long a replaced process may take to finish its requests.
    pub drain_timeout: Duration,
    /// Files or directories (recursively) whose changes restart every process, one by
    /// one (the application's code changed).
    pub watch: Vec<PathBuf>,
}

impl AppConfig {
    /// `command` run `processes` times, one request each, nothing recycled.
    pub fn new(command: impl Into<String>, processes: usize) -> AppConfig {
        AppConfig {
            command: command.into(),
            processes,
            concurrency: 1,
            ready_timeout: Duration::from_secs(10),
            cwd: None,
            env: Vec::new(),
            max_requests: 0,
            max_memory: 0,
            max_age: None,
            drain_timeout: Duration::from_secs(60),
            watch: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the app command `{0}` has no {{port}} placeholder: levee gives each process its own port; write it like `php worker.php {{port}}`")]
    NoPortPlaceholder(String),
    #[error("no app process became ready within {0:?}; see the app's output in levee's log")]
    NotReady(Duration),
    #[error("cannot start the app pool's thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot watch {path} for changes: {source}; check that it exists ([app] watch)")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
}

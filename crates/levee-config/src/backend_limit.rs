//! `limits.backend_max_concurrency`, as validated.

/// How many requests the backend sees at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendLimit {
    Fixed(usize),
    /// An app pool's processes × concurrency; php-fpm's `pm.max_children`; else
    /// adapted to the backend's latency.
    Auto,
}

impl std::fmt::Display for BackendLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendLimit::Fixed(n) => write!(f, "{n}"),
            BackendLimit::Auto => f.write_str("auto"),
        }
    }
}

//! Waiting on state with a deadline, never on a fixed sleep.

/// Polls `cond` every 10 ms until it holds or `timeout` passes; returns whether it held.
pub async fn eventually(timeout: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

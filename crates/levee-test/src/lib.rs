//! Test support for levee's integration tests.
//!
//! - [`Origin`]: a real HTTP/1.1 origin on `127.0.0.1:0` whose every response the test
//!   decides (status, headers, body, delay, streamed chunks), recording each request and
//!   the highest number of requests it had in flight at once. Stoppable, to simulate a
//!   backend that went down.
//! - [`Levee`]: the real `levee` binary, spawned on an ephemeral port, killed when the
//!   guard is dropped (also on panic).
//! - [`Req`], [`Resp`], [`Conn`], [`RawConn`]: HTTP client helpers with built-in time
//!   limits, so a test that would hang fails instead.
//!
//! Panicking is how a test fails, so this crate unwraps freely.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod apps;
mod client;
mod levee;
mod origin;
mod phpfpm;
pub mod tools;

pub use client::{Conn, H2Conn, RawConn, Req, Resp, REQUEST_TIMEOUT};
pub use levee::{Levee, LeveeBuilder};
pub use origin::{Origin, Recorded, Reply};
pub use phpfpm::PhpFpm;

/// `levee serve` builder for the binary of the calling integration test.
#[macro_export]
macro_rules! levee {
    () => {
        $crate::LeveeBuilder::new(env!("CARGO_BIN_EXE_levee"))
    };
}

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

/// `t` as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(t: std::time::SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

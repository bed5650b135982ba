//! Test support for levee's integration tests.
//!
//! - [`Origin`]: a real HTTP/1.1 origin on `127.0.0.1:0` whose every response the test
//!   decides (status, headers, body, delay, streamed chunks), recording each request and
//!   the highest number of requests it had in flight at once. Stoppable, to simulate a
//!   backend that went down.
//! - [`Levee`]: the real `levee` binary, spawned on an ephemeral port, killed when the
//!   guard is dropped (also on panic).
//! - [`Pebble`]: an ACME test server that validates against levee on this machine.
//! - [`Redis`]: a real redis-server on a free port, stoppable and restartable.
//! - [`RedisCluster`], [`RedisSentinel`]: a real Redis Cluster (3 primaries, 3
//!   replicas) and a real primary/replica pair under three sentinels, whose primaries
//!   a test can kill and see replaced.
//! - [`RedisTls`]: a private CA and a certificate for 127.0.0.1, with which
//!   [`Redis::start_tls`], [`RedisCluster::start_tls`] and [`RedisSentinel::start_tls`]
//!   run on TLS only (`rediss://`).
//! - [`Req`], [`Resp`], [`Conn`], [`RawConn`]: HTTP client helpers with built-in time
//!   limits, so a test that would hang fails instead.
//!
//! Panicking is how a test fails, so this crate unwraps freely.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod apps;
mod client;
pub mod http3;
mod levee;
mod origin;
pub mod pebble;
mod phpfpm;
pub mod ports;
pub mod redis;
mod redis_cluster;
mod redis_node;
mod redis_sentinel;
mod redis_tls;
pub mod tools;
mod wait;
pub mod websocket;

pub use client::{Conn, H2Conn, RawConn, Req, Resp, REQUEST_TIMEOUT};
pub use levee::{Levee, LeveeBuilder};
pub use origin::{Origin, Recorded, Reply};
pub use pebble::Pebble;
pub use phpfpm::PhpFpm;
pub use redis::Redis;
pub use redis_cluster::{RedisCluster, Reshard};
pub use redis_sentinel::{RedisSentinel, MASTER_NAME as SENTINEL_MASTER_NAME};
pub use redis_tls::RedisTls;
pub use wait::eventually;

/// `levee serve` builder for the binary of the calling integration test.
#[macro_export]
macro_rules! levee {
    () => {
        $crate::LeveeBuilder::new(env!("CARGO_BIN_EXE_levee"))
    };
}

/// `t` as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(t: std::time::SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// The digest of `data` in hex by a coreutils tool (`sha256sum`, `md5sum`): checked by a
/// program other than the one under test.
pub fn digest_hex(tool: &str, data: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(tool)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().expect("digest output");
    writer
        .join()
        .expect("writer")
        .expect("write to the digest tool");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("{tool} printed no digest"))
        .to_string()
}

/// `len` bytes that are not all alike (a simple LCG), so that a shifted or repeated
/// piece changes a checksum.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

/// A multipart/form-data body: (content type, body) of text fields and files.
pub fn multipart(fields: &[(&str, &str)], files: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "----leveeTest9Xq2b7WcR";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    for (name, filename, data) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; \
                 filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

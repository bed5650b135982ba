//! The app pool: application processes that levee starts and keeps warm (issue 12), as
//! php-pm, RoadRunner or FrankenPHP's worker mode do, so that a framework boots once per
//! process instead of once per request.
//!
//! A [`Pool`] runs `processes` copies of a command whose `{port}` placeholder becomes a
//! free loopback port. Each copy has a supervisor task: start, wait until the port
//! accepts connections (readiness), serve, and when the process exits, say so and start
//! it again after an exponential backoff. [`Pool::lease`] picks the ready process with
//! the fewest requests in flight, never more than `concurrency` per process (1 for
//! PHP-style workers), and the [`Lease`] gives the slot back when dropped.
//!
//! Recycling: after `max_requests` (with jitter, so that processes do not all recycle
//! together), above `max_memory` of resident memory, or after `max_age`, a replacement is
//! started and made ready first; then the old process gets no new requests, finishes
//! the ones it has (up to `drain_timeout`) and is stopped, so capacity never drops. The
//! same rolling replacement serves [`Pool::restart_all`] (a reload). A request that the
//! caller gives up on can [`Lease::kill`] its process, which is replaced at once.
//!
//! Modules: `pool` (the pool, leases, kept connections), `supervise` (one process's
//! life), `watch_files` (restarts on file changes), `process` (a process and its slot),
//! `config`. Not here yet: FastCGI workers.

mod config;
mod pool;
mod process;
mod supervise;
mod watch_files;

pub use config::{AppConfig, AppError};
pub use pool::{Lease, Pool};
pub use process::ProcessState;

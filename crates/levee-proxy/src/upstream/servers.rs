//! The servers of one HTTP backend (`backend = ["http://10.0.0.1", "http://10.0.0.2"]`):
//! which one takes the next request (the fewest requests outstanding among those up),
//! which are out (refused or timed out: out for a backoff that doubles, 1 s up to 60 s;
//! or failing the active check), and when they come back (an answer, a passed check, or
//! the backoff's end: one request tries it again).
//!
//! The backend's limiter (limit.rs) holds for all servers together, as the issue of
//! overload is the application's, not one machine's.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::Authority;

/// The first backoff after a failure; it doubles with each failure in a row.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// One server of the backend.
pub(crate) struct Server {
    pub authority: Authority,
    /// Requests sent and not finished (their response body not yet read or dropped).
    outstanding: AtomicUsize,
    /// Failures in a row.
    failures: AtomicU32,
    /// Out until this many milliseconds after `Servers::epoch` (0: in).
    out_until_ms: AtomicU64,
    /// The active check's verdict (true without one).
    checked_up: AtomicBool,
    pub failures_total: AtomicU64,
}

impl Server {
    /// Whether it takes requests at `now_ms`.
    fn is_in(&self, now_ms: u64) -> bool {
        self.checked_up.load(Ordering::Relaxed)
            && self.out_until_ms.load(Ordering::Relaxed) <= now_ms
    }

    /// Up as `/metrics` shows it: checked up and not backing off.
    pub fn is_up(&self, servers: &Servers) -> bool {
        self.is_in(servers.now_ms())
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }
}

/// The servers of an HTTP backend, shared by every worker thread.
pub(crate) struct Servers {
    pub list: Box<[Server]>,
    epoch: Instant,
    /// Where the next pick starts looking: among servers equally busy, turns are taken
    /// (as nginx's least_conn falls back to round robin).
    turn: AtomicUsize,
}

/// A request's hold on its server: counts as outstanding until dropped (with the
/// response body, so a slow download counts).
pub(crate) struct ServerGuard {
    servers: Arc<Servers>,
    index: usize,
}

impl ServerGuard {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn authority(&self) -> &Authority {
        &self.servers.list[self.index].authority
    }

    /// The server answered: it is in, whatever came before.
    pub fn succeeded(&self) {
        let s = &self.servers.list[self.index];
        if s.failures.load(Ordering::Relaxed) != 0 {
            s.failures.store(0, Ordering::Relaxed);
            s.out_until_ms.store(0, Ordering::Relaxed);
            tracing::info!(server = %s.authority, "backend server answers again");
        }
    }

    /// It refused the connection or did not answer in time: out for a backoff.
    pub fn failed(&self) {
        self.servers.failed(self.index);
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.servers.list[self.index]
            .outstanding
            .fetch_sub(1, Ordering::Relaxed);
    }
}

impl Servers {
    pub fn new(authorities: &[Authority]) -> Arc<Servers> {
        Arc::new(Servers {
            list: authorities
                .iter()
                .map(|a| Server {
                    authority: a.clone(),
                    outstanding: AtomicUsize::new(0),
                    failures: AtomicU32::new(0),
                    out_until_ms: AtomicU64::new(0),
                    checked_up: AtomicBool::new(true),
                    failures_total: AtomicU64::new(0),
                })
                .collect(),
            epoch: Instant::now(),
            turn: AtomicUsize::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The server for the next request, other than `except` when there is another: the
    /// fewest outstanding among those in; when none is in, the one back soonest (a
    /// request still tries, rather than failing without one).
    pub fn pick(self: &Arc<Self>, except: Option<usize>) -> ServerGuard {
        let now = self.now_ms();
        let n = self.list.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let candidates = || {
            (0..n)
                .map(move |k| (start + k) % n)
                .map(|i| (i, &self.list[i]))
                .filter(|(i, _)| Some(*i) != except || n == 1)
        };
        // `min_by_key` keeps the first of equals: the one whose turn it is.
        let index = candidates()
            .filter(|(_, s)| s.is_in(now))
            .min_by_key(|(_, s)| s.outstanding())
            .or_else(|| {
                candidates().min_by_key(|(_, s)| {
                    let checked = if s.checked_up.load(Ordering::Relaxed) {
                        0
                    } else {
                        1
                    };
                    (checked, s.out_until_ms.load(Ordering::Relaxed))
                })
            })
            .map_or(0, |(i, _)| i);
        self.list[index].outstanding.fetch_add(1, Ordering::Relaxed);
        ServerGuard {
            servers: self.clone(),
            index,
        }
    }

    fn failed(&self, index: usize) {
        let s = &self.list[index];
        s.failures_total.fetch_add(1, Ordering::Relaxed);
        let n = s.failures.fetch_add(1, Ordering::Relaxed).min(16);
        let backoff = BACKOFF_FIRST.saturating_mul(1 << n).min(BACKOFF_MAX);
        let until = self.now_ms() + u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX);
        s.out_until_ms.store(until, Ordering::Relaxed);
        if self.list.len() > 1 {
            tracing::warn!(server = %s.authority, ?backoff, "backend server taken out");
            eprintln!(
                "levee: backend server http://{} failed; taken out for {backoff:?}",
                s.authority
            );
        }
    }

    /// The active check's verdict for server `index`.
    pub fn set_checked(&self, index: usize, up: bool) {
        let s = &self.list[index];
        let was = s.checked_up.swap(up, Ordering::Relaxed);
        if was != up {
            let verdict = if up { "passes" } else { "fails" };
            tracing::warn!(server = %s.authority, verdict, "backend health check");
            eprintln!(
                "levee: backend server http://{} {verdict} its health check",
                s.authority
            );
            if up {
                s.failures.store(0, Ordering::Relaxed);
                s.out_until_ms.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// How often the active check runs, and how long one may take.
const CHECK_EVERY: Duration = Duration::from_secs(1);
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Starts the active check (`health = "/healthz"`): a thread that asks every server for
/// `path` each second and sets its verdict (2xx or 3xx: up). It ends when the backend is
/// dropped. A blocking client of a dozen lines, not hyper: only a status line is read,
/// and it must not share the serving threads' runtimes.
pub(crate) fn start_checks(servers: &Arc<Servers>, path: String, host: Option<String>) {
    let weak = Arc::downgrade(servers);
    let spawned = std::thread::Builder::new()
        .name("levee-health".into())
        .spawn(move || loop {
            let Some(servers) = weak.upgrade() else {
                return;
            };
            for (i, s) in servers.list.iter().enumerate() {
                let up = check(&s.authority, &path, host.as_deref()).is_ok();
                servers.set_checked(i, up);
            }
            drop(servers);
            std::thread::sleep(CHECK_EVERY);
        });
    if let Err(e) = spawned {
        eprintln!("levee: cannot start the backend health checks: {e}");
    }
}

/// One check: `GET path`, and whether the status is 2xx or 3xx.
fn check(authority: &Authority, path: &str, host: Option<&str>) -> std::io::Result<()> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let port = authority.port_u16().unwrap_or(80);
    let addr = (authority.host().trim_matches(['[', ']']), port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let mut conn = std::net::TcpStream::connect_timeout(&addr, CHECK_TIMEOUT)?;
    conn.set_read_timeout(Some(CHECK_TIMEOUT))?;
    conn.set_write_timeout(Some(CHECK_TIMEOUT))?;
    let host = host.unwrap_or(authority.as_str());
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: levee-health\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 16];
    let mut got = 0;
    while got < 12 {
        match conn.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    // "HTTP/1.1 200"
    match head.get(9) {
        Some(b'2' | b'3') if head.starts_with(b"HTTP/1.") => Ok(()),
        _ => Err(std::io::Error::other("not 2xx or 3xx")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: usize) -> Arc<Servers> {
        let list: Vec<Authority> = (0..n)
            .map(|i| format!("127.0.0.1:{}", 9000 + i).parse().unwrap())
            .collect();
        Servers::new(&list)
    }

    #[test]
    fn least_outstanding_takes_the_next_request() {
        let s = servers(3);
        let a = s.pick(None);
        let b = s.pick(None);
        let c = s.pick(None);
        let mut seen = [a.index(), b.index(), c.index()];
        seen.sort();
        assert_eq!(seen, [0, 1, 2], "each server gets one before any gets two");
        drop(b);
        let freed = s.list.iter().position(|x| x.outstanding() == 0).unwrap();
        assert_eq!(s.pick(None).index(), freed);
    }

    #[test]
    fn a_failed_server_is_skipped_until_its_backoff_ends_or_it_answers() {
        let s = servers(2);
        let g = s.pick(None);
        let bad = g.index();
        g.failed();
        drop(g);
        for _ in 0..5 {
            assert_ne!(s.pick(None).index(), bad);
        }
        assert!(!s.list[bad].is_up(&s));
        // Its backoff over (moved by hand here), it is tried again; an answer keeps it.
        s.list[bad].out_until_ms.store(0, Ordering::Relaxed);
        let (x, y) = (s.pick(None), s.pick(None));
        let back = if x.index() == bad { &x } else { &y };
        assert_eq!(back.index(), bad);
        back.succeeded();
        drop((x, y));
        assert!(s.list[bad].is_up(&s));
    }

    #[test]
    fn servers_equally_busy_take_turns() {
        let s = servers(3);
        let picked: Vec<usize> = (0..6).map(|_| s.pick(None).index()).collect();
        assert_eq!(picked, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn backoff_grows_with_failures_in_a_row() {
        let s = servers(2);
        let mut last = 0;
        for _ in 0..4 {
            let g = s.pick(Some(1));
            assert_eq!(g.index(), 0);
            g.failed();
            let until = s.list[0].out_until_ms.load(Ordering::Relaxed);
            assert!(until > last, "{until} > {last}");
            last = until;
        }
        assert!(last >= 8_000, "1 s, 2 s, 4 s, 8 s: {last}");
    }

    #[test]
    fn when_every_server_is_out_one_still_gets_the_request() {
        let s = servers(2);
        s.pick(Some(1)).failed();
        s.pick(Some(0)).failed();
        // Server 0 is back first.
        let now = s.now_ms();
        s.list[0].out_until_ms.store(now + 1_000, Ordering::Relaxed);
        s.list[1].out_until_ms.store(now + 5_000, Ordering::Relaxed);
        assert_eq!(s.pick(None).index(), 0);
        assert_eq!(s.pick(None).index(), 0, "whoever's turn it is");
        s.set_checked(0, false);
        assert_eq!(
            s.pick(None).index(),
            1,
            "a failed check counts more than a backoff"
        );
    }

    #[test]
    fn a_retry_avoids_the_server_that_failed() {
        let s = servers(2);
        assert_eq!(s.pick(Some(0)).index(), 1);
        assert_eq!(s.pick(Some(1)).index(), 0);
        let one = servers(1);
        assert_eq!(
            one.pick(Some(0)).index(),
            0,
            "with one server, it is the one"
        );
    }
}

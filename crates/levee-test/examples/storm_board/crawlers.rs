//! The crawlers of storm-board's storm phase, one kind per run (`--crawler-kind`):
//!
//! - `search`: the site-wide search (bbs/search.php) and the board's own with words no
//!   post holds, a new URL each time, no cookie;
//! - `member-pages`: profiles (bbs/profile.php?mb_id=, real and guessed ids), the memo
//!   box (bbs/memo.php), a member's posts (bbs/new.php?mb_id=), no cookie;
//! - `fake-session`: the search URLs with a made-up `PHPSESSID`, one per connection (as
//!   a crawler that keeps the first cookie it made up);
//! - `fake-session-each`: the same with a new made-up value on every request.
//!
//! No think time; a refusal (429, 503) is an answer the client could read, a connection
//! error (refused connect, reset, broken pipe, malformed answer) one it could not.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::board::{self, Rng};
use super::http::{Conn, Failure, Reply};
use super::stats::Tally;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Search,
    MemberPages,
    FakeSession,
    FakeSessionEach,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::Search,
        Kind::MemberPages,
        Kind::FakeSession,
        Kind::FakeSessionEach,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Search => "search",
            Kind::MemberPages => "member-pages",
            Kind::FakeSession => "fake-session",
            Kind::FakeSessionEach => "fake-session-each",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn names() -> String {
        Kind::ALL.map(Kind::name).join(", ")
    }
}

/// What every crawler of a run shares.
#[derive(Clone)]
pub struct Crawl {
    pub kind: Kind,
    pub target: SocketAddr,
    pub timeout: Duration,
    pub addrs: usize,
    pub board: String,
    /// Real member ids, for the profile URLs (guessed ones are made up on the way).
    pub members: Vec<String>,
    /// The pause after a 429 or 503 (see storm-board.sh's REFUSED_PAUSE_MS).
    pub refused_pause: Duration,
    /// The storm's start and end.
    pub start: Instant,
    pub end: Instant,
}

/// No crawler sends more than this many requests, whatever the clock says.
const MAX_REQUESTS: u64 = 5_000_000;

/// Crawler `i`'s storm: requests until the end, as fast as answers come, from its own
/// client network (127.1.N.1, N = i mod addrs). The tally and the connections it opened.
pub async fn crawler(c: Crawl, i: usize) -> (Tally, u64) {
    let mut tally = Tally::default();
    let mut conn = Conn::new(c.target, board::crawler_ip(i % c.addrs), c.timeout);
    let mut rng = Rng::new(1_000_000 + i as u64);
    // `fake-session`: this connection's one made-up value.
    let own = board::made_up_session_id(&mut rng);
    sleep_until(c.start.into()).await;
    for _ in 0..MAX_REQUESTS {
        if Instant::now() >= c.end {
            break;
        }
        let start = Instant::now();
        let r = request(&c, &mut conn, &mut rng, &own).await;
        tally.record(&r, start.elapsed());
        match &r {
            // A crawler retries at once; a pause only keeps a refused connect from
            // spinning this thread.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            // It ignores Retry-After; `refused_pause` stands for its round trip and its
            // own work between two requests (see storm-board.sh's REFUSED_PAUSE_MS).
            Ok(resp) if matches!(resp.status, 429 | 503) && !c.refused_pause.is_zero() => {
                tokio::time::sleep(c.refused_pause).await
            }
            Ok(_) => {}
        }
    }
    (tally, conn.opened)
}

async fn request(c: &Crawl, conn: &mut Conn, rng: &mut Rng, own: &str) -> Result<Reply, Failure> {
    let session = |value: &str| vec![("cookie", format!("PHPSESSID={value}"))];
    match c.kind {
        Kind::Search => conn.get(&board::search_path(rng, &c.board), &[]).await,
        Kind::MemberPages => {
            let path = board::member_page_path(rng, &c.members);
            conn.get(&path, &[]).await
        }
        Kind::FakeSession => {
            let path = board::search_path(rng, &c.board);
            conn.get(&path, &session(own)).await
        }
        Kind::FakeSessionEach => {
            let path = board::search_path(rng, &c.board);
            let value = board::made_up_session_id(rng);
            conn.get(&path, &session(&value)).await
        }
    }
}

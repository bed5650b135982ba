//! The crawlers of the storm phase, one kind per run (`--crawler-kind`):
//!
//! - `plain`: uncacheable URLs (history, old revisions, diffs, recent changes, what links
//!   here, searches), no cookie;
//! - `fake-session`: the same with a session cookie of the wiki's own name (as its login
//!   set it for the editors) and a made-up value, one per connection;
//! - `fake-session-each`: the same with a new made-up value on every request;
//! - `query`: article pages, made new URLs by a query parameter, no cookie;
//! - `login-flood`: Special:UserLogin's form posted with wrong passwords, no cookie jar;
//! - `replay`: one real logged-in session (its cookies as the login left them) sent by
//!   every connection, all from one client network (127.1.0.0/24).
//!
//! No think time; a refusal (429, 503) is counted as an answer the client could read,
//! a connection error (refused connect, reset, broken pipe, malformed answer) as one it
//! could not.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use levee_test::apps::MediaWiki;
use tokio::time::sleep_until;

use super::http::{Conn, Failure, Reply};
use super::stats::Tally;
use super::wiki::{self, Rng};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    FakeSession,
    FakeSessionEach,
    Query,
    LoginFlood,
    Replay,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Plain,
        Kind::FakeSession,
        Kind::FakeSessionEach,
        Kind::Query,
        Kind::LoginFlood,
        Kind::Replay,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::FakeSession => "fake-session",
            Kind::FakeSessionEach => "fake-session-each",
            Kind::Query => "query",
            Kind::LoginFlood => "login-flood",
            Kind::Replay => "replay",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn names() -> String {
        Kind::ALL.map(Kind::name).join(", ")
    }

    /// Whether the kind sends a session cookie of the wiki's name.
    pub fn needs_session_name(self) -> bool {
        matches!(self, Kind::FakeSession | Kind::FakeSessionEach)
    }
}

/// What every crawler of a run shares.
#[derive(Clone)]
pub struct Crawl {
    pub kind: Kind,
    pub target: SocketAddr,
    pub timeout: Duration,
    pub addrs: usize,
    pub pages: usize,
    /// The newest revision when the run started (old revisions and diffs up to it).
    pub max_rev: u64,
    /// The wiki's session cookie, as its login names it (`wiki_session`).
    pub session_cookie: String,
    /// `replay`: the `Cookie` header of the one logged-in session.
    pub replayed: Vec<(&'static str, String)>,
    /// The pause after a 429 or 503 (see storm.sh's REFUSED_PAUSE_MS).
    pub refused_pause: Duration,
    /// The storm's start and end.
    pub start: Instant,
    pub end: Instant,
}

/// Crawler `i`'s storm: requests until the end, as fast as answers come.
pub async fn crawler(c: Crawl, i: usize) -> (Tally, u64) {
    let mut tally = Tally::default();
    let local = match c.kind {
        Kind::Replay => wiki::one_network_ip(i),
        _ => wiki::crawler_ip(i % c.addrs),
    };
    let mut conn = Conn::new(c.target, local, c.timeout);
    let mut rng = Rng::new(1_000_000 + i as u64);
    // `fake-session`: this connection's one made-up value.
    let own = wiki::made_up_session_id(&mut rng);
    sleep_until(c.start.into()).await;
    for _ in 0..super::MAX_REQUESTS_PER_TASK {
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
            // own work between two requests (see storm.sh's REFUSED_PAUSE_MS).
            Ok(resp) if matches!(resp.status, 429 | 503) && !c.refused_pause.is_zero() => {
                tokio::time::sleep(c.refused_pause).await
            }
            Ok(_) => {}
        }
    }
    (tally, conn.opened)
}

async fn request(c: &Crawl, conn: &mut Conn, rng: &mut Rng, own: &str) -> Result<Reply, Failure> {
    let session = |value: &str| vec![("cookie", format!("{}={value}", c.session_cookie))];
    match c.kind {
        Kind::Plain => {
            let path = wiki::crawler_path(rng, c.pages, c.max_rev);
            conn.get(&path, &[]).await
        }
        Kind::FakeSession => {
            let path = wiki::crawler_path(rng, c.pages, c.max_rev);
            conn.get(&path, &session(own)).await
        }
        Kind::FakeSessionEach => {
            let path = wiki::crawler_path(rng, c.pages, c.max_rev);
            let value = wiki::made_up_session_id(rng);
            conn.get(&path, &session(&value)).await
        }
        Kind::Query => conn.get(&wiki::busting_path(rng, c.pages), &[]).await,
        Kind::LoginFlood => {
            // At the admin's account, as a password guesser would; the wiki refuses
            // the post for its token before it checks a password, so no throttle
            // locks the account out.
            let body: Bytes = wiki::wrong_login_form(rng, MediaWiki::ADMIN_NAME);
            let headers = [(
                "content-type",
                "application/x-www-form-urlencoded".to_string(),
            )];
            conn.send(Method::POST, wiki::LOGIN_PATH, &headers, body)
                .await
        }
        Kind::Replay => {
            let path = wiki::crawler_path(rng, c.pages, c.max_rev);
            conn.get(&path, &c.replayed).await
        }
    }
}

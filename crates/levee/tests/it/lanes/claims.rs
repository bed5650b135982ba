//! Issue 42 under load, with real php-fpm: a session cookie nobody proved is anonymous
//! work (fair per network, refused at once), one the backend gave out at a login keeps
//! its place ahead of it until a logout; one network or one session holds only its
//! share of the session class while other people wait; and a refused POST's client
//! reads its refusal.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use levee_test::Req;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

use super::support::*;

/// Two slots, both busy with anonymous work, another network's request waiting. A
/// crawler on network 4 with a made-up session cookie is anonymous work: one waits, the
/// next is refused at once (429, `network-over-share; unproven`), never reaching
/// php-fpm, and so is the cookie of a user who logged out. A logged-in editor on the
/// crawler's own network takes the next slot that frees, ahead of all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_made_up_session_is_anonymous_work_and_a_given_one_keeps_its_place() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(6);
    let levee = site
        .levee(
            "backend_max_concurrency = 2\nbackend_network_share = \"25%\"\n\
             backend_anonymous_wait = \"30s\"",
        )
        .debug_headers()
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        log_in(&levee, "PHPSESSID", "editor").await;
        let leaver = log_in(&levee, "PHPSESSID", "leaver").await;
        let r = Req::get("/logout.php")
            .header("cookie", &leaver)
            .send(&levee)
            .await;
        assert_eq!(r.status, 302, "the logout: {}", r.summary());

        let mut set = JoinSet::new();
        spawn(&mut set, addr, "a1", net(2, 1), work("a1", 1500));
        // Ending apart: the first slot that frees is the editor's alone.
        spawn(&mut set, addr, "a2", net(3, 1), work("a2", 3000));
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 2.0).await;
        spawn(&mut set, addr, "w", net(5, 1), work("w", 0));
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 1.0).await;
        let made_up = |n: u8| format!("PHPSESSID=made-up-by-a-crawler-{n}-0123456789");
        spawn(
            &mut set,
            addr,
            "c1",
            net(4, 1),
            work("c1", 0).header("cookie", &made_up(1)),
        );
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 2.0).await;
        for (host, tag, cookie) in [(2, "c2", made_up(2)), (3, "c3", leaver.clone())] {
            let start = Instant::now();
            let r = work(tag, 0)
                .header("cookie", &cookie)
                .send_from(addr, net(4, host))
                .await;
            assert_refused(
                tag,
                &r,
                start.elapsed(),
                429,
                "network-over-share; unproven",
            );
        }
        spawn(
            &mut set,
            addr,
            "editor",
            net(4, 9),
            session(work("editor", 0), "editor"),
        );
        wait_class(&levee, "levee_backend_queued", "session", |v| v == 1.0).await;
        let done = join_all(&mut set).await;
        assert_ok(&done);
        let (_, editor, _) = done.iter().find(|(n, _, _)| n == "editor").unwrap();
        assert_eq!(editor.reason(), "session-cookie:PHPSESSID");
        let (_, crawler, _) = done.iter().find(|(n, _, _)| n == "c1").unwrap();
        assert_eq!(crawler.reason(), "session-cookie:PHPSESSID; unproven");
        let started = site.started();
        assert_eq!(
            started.get(2).map(String::as_str),
            Some("editor"),
            "start order: {started:?}"
        );
        for refused in ["c2", "c3"] {
            assert!(
                !started.iter().any(|t| t == refused),
                "{refused} reached php-fpm"
            );
        }
        let m = Metrics::of(&levee).await;
        assert_eq!(
            m.get("levee_unproven_sessions_total", &[("outcome", "refused")]),
            2.0
        );
        assert_eq!(
            m.get("levee_unproven_sessions_total", &[("outcome", "admitted")]),
            1.0
        );
        let top = levee.admin(Req::get("/top.json")).await.text();
        assert!(
            top.contains("\"unproven_session_networks\":[{\"network\":\"127.4.0.0/24\""),
            "{top}"
        );
    })
    .await;
}

/// Four slots; one logged-in session (a script, from one network) sends six slow
/// requests at once: two run in the session class (one session's share), the rest are
/// anonymous work of its network, held to the lane's share while people have work (two
/// run, two wait). Another editor's request, though it came last, takes the first slot
/// that frees: the script cannot take the site from the other editors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_holds_only_its_share_of_the_session_class() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(6);
    let levee = site
        .levee("backend_max_concurrency = 4\nbackend_anonymous_wait = \"30s\"")
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        log_in(&levee, "PHPSESSID", "script").await;
        log_in(&levee, "PHPSESSID", "editor").await;
        let mut set = JoinSet::new();
        for i in 1..=6 {
            let tag = format!("script{i}");
            // Ending 400 ms apart: each freed slot is one waiter's alone.
            let req = session(work(&tag, 600 + 400 * u64::from(i)), "script");
            spawn(&mut set, addr, &tag, net(2, i), req);
        }
        wait_class(&levee, "levee_backend_in_flight", "session", |v| v == 2.0).await;
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 2.0).await;
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 2.0).await;
        spawn(
            &mut set,
            addr,
            "editor",
            net(3, 1),
            session(work("editor", 0), "editor"),
        );
        wait_class(&levee, "levee_backend_queued", "session", |v| v == 1.0).await;
        assert_ok(&join_all(&mut set).await);
        let started = site.started();
        assert_eq!(
            started.get(4).map(String::as_str),
            Some("editor"),
            "start order: {started:?}"
        );
        let m = Metrics::of(&levee).await;
        assert_eq!(m.get("levee_backend_sessions_over_share_total", &[]), 4.0);
    })
    .await;
}

/// One slot, busy, and the lane's one place taken: a form POST from another network is
/// refused at once, as its head arrives. levee reads the body the client then sends
/// before it answers, so the client reads the 503 and its `Retry-After`, and its
/// connection stays usable, instead of being closed under the body's write (a broken
/// pipe, or a reset on the next request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_posts_client_reads_its_refusal() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let site = Site::start(4);
    let levee = site
        .levee("backend_max_concurrency = 1\nbackend_queue = 1")
        .start();
    bounded(async {
        let addr = levee.addr();
        warm_up(&levee).await;
        let mut set = JoinSet::new();
        spawn(&mut set, addr, "busy", net(2, 1), work("busy", 1500));
        wait_class(&levee, "levee_backend_in_flight", "anonymous", |v| v == 1.0).await;
        spawn(&mut set, addr, "waiter", net(4, 1), work("waiter", 0));
        wait_class(&levee, "levee_backend_queued", "anonymous", |v| v == 1.0).await;
        let body = vec![b'x'; 64 * 1024];
        let (first, second) = raw_post(addr, net(3, 1), "/work.php?tag=login", &body)
            .await
            .unwrap_or_else(|e| panic!("the client could not read its refusal: {e}"));
        assert!(first.starts_with("HTTP/1.1 503"), "{first}");
        assert!(
            first.to_ascii_lowercase().contains("retry-after: "),
            "{first}"
        );
        assert!(
            second.starts_with("HTTP/1.1 "),
            "the next request: {second}"
        );
        assert_ok(&join_all(&mut set).await);
        assert!(
            !site.started().iter().any(|t| t == "login"),
            "it reached php-fpm"
        );
    })
    .await;
}

/// A client of one connection: a POST whose body follows its head a moment later (a
/// form posted as most clients send it, head and body apart), its answer read, then,
/// unless that answer said `Connection: close`, a GET on the same connection. The two
/// answers' heads, or what failed.
async fn raw_post(
    addr: SocketAddr,
    from: std::net::IpAddr,
    path: &str,
    body: &[u8],
) -> Result<(String, String), std::io::Error> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let conn = socket.connect(addr).await?;
    let mut conn = tokio::io::BufReader::new(conn);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: lanes.test\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.get_mut().write_all(head.as_bytes()).await?;
    // Until levee answers (a server that answers before reading the body), or a
    // moment (one that reads it first).
    let _ = tokio::time::timeout(Duration::from_millis(300), conn.get_ref().readable()).await;
    conn.get_mut().write_all(body).await?;
    let first = read_answer(&mut conn).await?;
    if first.to_ascii_lowercase().contains("connection: close") {
        return Ok((first, "HTTP/1.1 (closed, as announced)".into()));
    }
    let again = "GET /work.php?tag=again HTTP/1.1\r\nHost: lanes.test\r\n\r\n";
    conn.get_mut().write_all(again.as_bytes()).await?;
    let second = read_answer(&mut conn).await?;
    Ok((first, second))
}

/// One answer's head, its body (by `Content-Length`) read and dropped.
async fn read_answer(
    conn: &mut tokio::io::BufReader<tokio::net::TcpStream>,
) -> Result<String, std::io::Error> {
    let read = async {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if conn.read_line(&mut line).await? == 0 {
                return Err(std::io::Error::other(format!("closed after {head:?}")));
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let len = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0; len];
        conn.read_exact(&mut body).await?;
        Ok(head)
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| std::io::Error::other("no answer within 10 s"))?
}

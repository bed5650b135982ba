//! Anonymous sessions (issue 34): a session cookie levee saw the application start for a
//! visitor who held none keeps that visitor anonymous, until they POST with it.
//!
//! The origin behaves as gnuboard and Rhymix do (see benchmarks/seedapps/recordings/):
//! every page for a cookieless visitor starts a PHP session (`Set-Cookie: PHPSESSID`,
//! `no-cache`), the login form too; the login is a POST that marks the session logged
//! in, with or without a new session id; members' pages show their name.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use levee_test::{levee, Levee, Origin, Reply, Req, Resp};

/// A forum whose login keeps the session id (`regenerate = false`, the session fixation
/// case levee must survive) or gives a new one.
fn forum(regenerate: bool) -> (Origin, Arc<Mutex<HashSet<String>>>) {
    let members: Arc<Mutex<HashSet<String>>> = Arc::default();
    let m = members.clone();
    let origin = Origin::start(move |r| {
        let sid = r.cookie("PHPSESSID");
        let mut reply = if r.method == "POST" && r.path == "/bbs/login_check.php" {
            let id = if regenerate {
                format!("member{}", r.n)
            } else {
                sid.clone().unwrap_or_default()
            };
            m.lock().unwrap().insert(id.clone());
            let reply = Reply::status(302).header("location", "/");
            if regenerate {
                reply.header("set-cookie", &format!("PHPSESSID={id}; path=/"))
            } else {
                reply
            }
        } else {
            let member = sid.as_ref().is_some_and(|s| m.lock().unwrap().contains(s));
            let body = if member {
                "board for Ada"
            } else {
                "board for everyone"
            };
            Reply::text(format!("{body} ({})", r.path))
                .header("content-type", "text/html; charset=utf-8")
                .header("cache-control", "no-store, no-cache, must-revalidate")
                .header("expires", "Thu, 19 Nov 1981 08:52:00 GMT")
        };
        if sid.is_none() && !(r.method == "POST" && regenerate) {
            reply = reply.header("set-cookie", &format!("PHPSESSID=s{}; path=/", r.n));
        }
        reply
    });
    (origin, members)
}

fn start(origin: &Origin) -> Levee {
    levee!()
        .args(&["--backend", &origin.url(), "--preset", "gnuboard"])
        .debug_headers()
        .start()
}

async fn get(levee: &Levee, path: &str, cookie: &str) -> Resp {
    Req::get(path).header("cookie", cookie).send(levee).await
}

/// The session cookie a response sets, as `PHPSESSID=value`.
fn session_of(r: &Resp) -> String {
    r.header_all("set-cookie")
        .iter()
        .find_map(|c| c.split(';').next().filter(|c| c.starts_with("PHPSESSID=")))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no session started: {}", r.summary()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_who_opened_the_login_form_gets_hits_and_their_login_passes() {
    for regenerate in [false, true] {
        let (origin, members) = forum(regenerate);
        let levee = start(&origin);
        let first = levee.get("/").await;
        assert!(first.header("set-cookie").is_none(), "{}", first.summary());
        levee.wait_stored("/").await;
        // The login form is never stored: its session reaches the reader.
        let form = levee.get("/bbs/login.php").await;
        assert_eq!(form.x_cache(), "PASS", "{}", form.summary());
        let session = session_of(&form);
        // Remembered, and counted where operators look.
        assert!(levee.metric("levee_anonymous_sessions").await >= 1.0);
        // Back on the board with it: a hit, the page everyone gets.
        let back = get(&levee, "/", &session).await;
        assert_eq!(back.x_cache(), "HIT", "{}", back.summary());
        assert_eq!(back.text(), "board for everyone (/)");
        // Past the preset's 10 s: refreshed as for any reader, then hits again.
        levee.advance_clock(Duration::from_secs(15)).await;
        origin.advance_clock(Duration::from_secs(15));
        let refreshed = get(&levee, "/", &session).await;
        assert_ne!(refreshed.x_cache(), "PASS", "{}", refreshed.summary());
        assert_eq!(refreshed.text(), "board for everyone (/)");
        levee.wait_stored("/").await;
        assert_eq!(get(&levee, "/", &session).await.x_cache(), "HIT");
        // A page not stored yet (a captcha, a login's callback may need the session):
        // to the backend with the cookies, not a fill made without them.
        let other = get(&levee, "/bbs/board.php?bo_table=free", &session).await;
        assert_eq!(other.x_cache(), "PASS", "{}", other.summary());
        assert_eq!(
            origin.last().cookie("PHPSESSID").as_deref(),
            Some(session.trim_start_matches("PHPSESSID="))
        );
        let asked = origin.requests();
        // A made-up value, or one levee never saw given out, passes.
        let forged = get(&levee, "/", "PHPSESSID=s999").await;
        assert_eq!(forged.x_cache(), "PASS", "{}", forged.summary());
        assert_eq!(origin.requests(), asked + 1);
        // The login: a POST with the anonymous session.
        let login = Req::post("/bbs/login_check.php", "mb_id=ada&mb_password=x")
            .header("cookie", &session)
            .send(&levee)
            .await;
        assert_eq!(login.status, 302, "{}", login.summary());
        let cookie = if regenerate {
            session_of(&login)
        } else {
            session.clone()
        };
        assert!(members
            .lock()
            .unwrap()
            .contains(cookie.trim_start_matches("PHPSESSID=")));
        // Logged in, with the same id or the new one: their own board, never a stored one.
        for _ in 0..2 {
            let member = get(&levee, "/", &cookie).await;
            assert_eq!(member.x_cache(), "PASS", "{}", member.summary());
            assert_eq!(
                member.text(),
                "board for Ada (/)",
                "regenerate {regenerate}"
            );
        }
        // Readers still get the anonymous board from the cache.
        let reader = levee.get("/").await;
        assert_eq!(reader.text(), "board for everyone (/)");
    }
}

/// A session changed by the answer to a GET: a login by link (a redirect with a new
/// id) ends it; a renewal of the id on a page (Rhymix every 5 minutes) keeps the
/// visitor anonymous under the new id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_ends_the_anonymous_session_a_renewal_does_not() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("page {}", r.path))
            .header("content-type", "text/html")
            .header("cache-control", "no-store");
        match (r.path.as_str(), r.cookie("PHPSESSID")) {
            ("/magic-link", Some(_)) => Reply::status(302)
                .header("location", "/")
                .header("set-cookie", "PHPSESSID=logged-in; path=/"),
            ("/bbs/search.php", Some(_)) => {
                reply.header("set-cookie", &format!("PHPSESSID=renewed{}; path=/", r.n))
            }
            (_, None) => reply.header("set-cookie", &format!("PHPSESSID=a{}; path=/", r.n)),
            _ => reply,
        }
    });
    let levee = start(&origin);
    levee.get("/").await;
    levee.wait_stored("/").await;
    // Renewed on a page levee does not store: the new id is as anonymous as the old.
    let form = levee.get("/bbs/login.php").await;
    let session = session_of(&form);
    assert_eq!(get(&levee, "/", &session).await.x_cache(), "HIT");
    let search = get(&levee, "/bbs/search.php", &session).await;
    assert_eq!(search.x_cache(), "PASS", "{}", search.summary());
    let renewed = session_of(&search);
    assert_eq!(get(&levee, "/", &renewed).await.x_cache(), "HIT");
    assert_eq!(get(&levee, "/", &session).await.x_cache(), "PASS");
    // A login link: a redirect with a new id. Neither id is anonymous now.
    let link = get(&levee, "/magic-link", &renewed).await;
    assert_eq!(session_of(&link), "PHPSESSID=logged-in");
    for cookie in [renewed.as_str(), "PHPSESSID=logged-in"] {
        let r = get(&levee, "/", cookie).await;
        assert_eq!(r.x_cache(), "PASS", "{cookie}: {}", r.summary());
    }
}

/// `remember_anonymous_sessions = false`: every session cookie passes, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_every_session_cookie_passes() {
    let (origin, _) = forum(false);
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--preset", "gnuboard"])
        .config("[anonymous]\nremember_anonymous_sessions = false\n")
        .debug_headers()
        .start();
    levee.get("/").await;
    levee.wait_stored("/").await;
    let session = session_of(&levee.get("/bbs/login.php").await);
    let back = get(&levee, "/", &session).await;
    assert_eq!(back.x_cache(), "PASS", "{}", back.summary());
}

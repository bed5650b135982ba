//! Never break a session: a logged-in user of an application whose session cookie no
//! list knows (a custom `session_name()`, DokuWiki's `DokuWiki`) is never served what a
//! fill fetched without their cookies, and stays logged in. Real PHP on php-fpm, levee
//! with default settings.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use levee_test::{levee, Origin, PhpFpm, Reply, Req, Resp};

/// A PHP app with its own session cookie name, unknown to levee: PHP's default session
/// headers (no-store), a login, a page per user and a logout.
const APP: &[(&str, &str)] = &[
    (
        "boot.php",
        r#"<?php
session_name('MYAPPSESS');
session_start();
function who() { return $_SESSION['user'] ?? 'guest'; }
"#,
    ),
    (
        "index.php",
        r#"<?php require __DIR__ . '/boot.php';
header('Content-Type: text/html; charset=utf-8');
echo '<h1>Hello, ' . htmlspecialchars(who()) . '</h1>';
"#,
    ),
    (
        "page.php",
        r#"<?php require __DIR__ . '/boot.php';
header('Content-Type: text/html; charset=utf-8');
echo 'page ' . intval($_GET['id'] ?? 0) . ' for ' . htmlspecialchars(who());
"#,
    ),
    (
        "login.php",
        r#"<?php require __DIR__ . '/boot.php';
session_regenerate_id(true);
$_SESSION['user'] = $_POST['user'] ?? 'nobody';
header('Location: /index.php', true, 303);
"#,
    ),
    (
        "logout.php",
        r#"<?php require __DIR__ . '/boot.php';
$_SESSION = [];
setcookie(session_name(), '', time() - 3600, '/');
session_destroy();
header('Location: /index.php', true, 303);
"#,
    ),
];

struct App {
    base: PathBuf,
    fpm: Option<PhpFpm>,
}

impl App {
    fn start() -> App {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "levee-session-app-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["www", "sessions"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        for (name, text) in APP {
            std::fs::write(base.join("www").join(name), text).unwrap();
        }
        let fpm = PhpFpm::builder(base.join("www"))
            .ini(
                "session.save_path",
                &base.join("sessions").display().to_string(),
            )
            .start();
        App {
            base,
            fpm: Some(fpm),
        }
    }

    fn backend(&self) -> String {
        let fpm = self.fpm.as_ref().unwrap();
        format!("fastcgi+unix:{}", fpm.socket_path().display())
    }

    fn root(&self) -> String {
        self.base.join("www").display().to_string()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// `NAME=value` of the `Set-Cookie` for `name` in `r`, if any.
fn set_cookie(r: &Resp, name: &str) -> Option<String> {
    r.header_all("set-cookie")
        .into_iter()
        .filter_map(|c| c.split(';').next())
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// Logs `user` in through levee; returns the session cookie (`MYAPPSESS=...`).
async fn login(levee: &levee_test::Levee, user: &str) -> String {
    // The login form's page starts a session, as a browser's first visit would.
    let first = levee.get("/index.php").await;
    assert_eq!(first.status, 200, "{}", first.summary());
    let session = set_cookie(&first, "MYAPPSESS").expect("a session was started");
    let r = Req::post("/login.php", format!("user={user}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &session)
        .send(levee)
        .await;
    assert_eq!(r.status, 303, "{}", r.summary());
    // session_regenerate_id: the logged-in session has a new id.
    set_cookie(&r, "MYAPPSESS").expect("the login sets the new session id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_cookie_keeps_users_logged_in_with_default_settings() {
    levee_test::require!(levee_test::tools::PHP_FPM);
    let app = App::start();
    let levee = levee!()
        .backend(&app.backend())
        .args(&["--root", &app.root()])
        .debug_headers()
        .start();

    let alice = login(&levee, "alice").await;
    let bob = login(&levee, "bob").await;
    assert_ne!(alice, bob);

    // Each user's pages, including URLs levee has never fetched, are theirs.
    for (cookie, user) in [(&alice, "alice"), (&bob, "bob")] {
        let r = levee.get_with("/index.php", &[("cookie", cookie)]).await;
        assert_eq!(
            r.text(),
            format!("<h1>Hello, {user}</h1>"),
            "{}",
            r.summary()
        );
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
        // A learned name keeps its users' pages theirs, but proves no one logged in (it
        // could be a token set anew on every answer): listed in extra_session_cookies,
        // it would (claims.rs).
        assert_eq!(r.reason(), "session-cookie:MYAPPSESS; unproven");
        for id in [1, 2] {
            let path = format!("/page.php?id={id}&u={user}");
            let r = levee.get_with(&path, &[("cookie", cookie)]).await;
            assert_eq!(r.text(), format!("page {id} for {user}"), "{}", r.summary());
            assert!(set_cookie(&r, "MYAPPSESS").is_none(), "{}", r.summary());
        }
    }
    // Anonymous visitors never see a user's page.
    for _ in 0..2 {
        let r = levee.get("/page.php?id=1").await;
        assert_eq!(r.text(), "page 1 for guest", "{}", r.summary());
    }

    // Logout ends alice's session, and only hers.
    let r = Req::post("/logout.php", "")
        .header("cookie", &alice)
        .send(&levee)
        .await;
    assert_eq!(r.status, 303, "{}", r.summary());
    let r = levee.get_with("/index.php", &[("cookie", &alice)]).await;
    assert_eq!(r.text(), "<h1>Hello, guest</h1>", "{}", r.summary());
    let r = levee.get_with("/index.php", &[("cookie", &bob)]).await;
    assert_eq!(r.text(), "<h1>Hello, bob</h1>", "{}", r.summary());
}

/// The cookie was never seen by levee (set by the browser's own script, or before levee
/// was put in front), so nothing marks it a session. The cookie-less fill's answer is
/// not storable: the client must get its own page, fetched with its cookies, and never
/// the fresh session the fill was given.
#[tokio::test]
async fn a_cookie_levee_never_saw_still_reaches_the_backend_when_the_page_is_not_shared() {
    let origin = Origin::start(|r| match r.cookie("appsess") {
        Some(user) => Reply::text(format!("hello {user}"))
            .header("content-type", "text/html")
            .header("cache-control", "no-store"),
        None => Reply::text("hello guest")
            .header("content-type", "text/html")
            .header("cache-control", "no-store")
            .header("set-cookie", "appsess=fresh-guest-session; path=/"),
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    let r = levee
        .get_with("/never-seen", &[("cookie", "appsess=alice")])
        .await;
    assert_eq!(r.text(), "hello alice", "{}", r.summary());
    assert!(r.header("set-cookie").is_none(), "{}", r.summary());
    assert_eq!(origin.last().header("cookie"), Some("appsess=alice"));
    // From now on levee knows the name (the fill's answer set it): straight to the backend.
    let r = levee.get_with("/other", &[("cookie", "appsess=bob")]).await;
    assert_eq!(r.text(), "hello bob", "{}", r.summary());
    assert_eq!(r.reason(), "session-cookie:appsess; unproven");
    // A cookie-less visitor gets the fresh session: it is their own response.
    let r = levee.get("/never-seen").await;
    assert_eq!(r.text(), "hello guest");
    assert_eq!(
        set_cookie(&r, "appsess").as_deref(),
        Some("appsess=fresh-guest-session")
    );
}

/// Analytics and consent cookies, which only the browser's scripts set, do not split
/// the cache: a cacheable page is still a hit for them.
#[tokio::test]
async fn script_cookies_still_share_the_cached_page() {
    let origin = Origin::start(|_| {
        Reply::text("page")
            .header("content-type", "text/html")
            .header("cache-control", "public, max-age=60")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/p").await;
    levee.wait_stored("/p").await;
    let r = levee
        .get_with(
            "/p",
            &[(
                "cookie",
                "_ga=GA1.1.1; cookieconsent_status=allow; theme=dark",
            )],
        )
        .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests(), 1);
}

//! levee in front of real applications from Debian's packages, unchanged, with their own
//! headers and cookies (issue 9): a preset alone makes anonymous pages hits, and nobody
//! is ever logged out or served someone else's page.

use std::time::{Duration, Instant};

use levee_test::apps::{form_value, Browser, DokuWiki};
use levee_test::{levee, tools, Levee};

/// Waits (2 s at most) until an anonymous reader of `path` sees `needle`.
async fn anonymous_sees_within_2s(levee: &Levee, path: &str, needle: &str) {
    let start = Instant::now();
    loop {
        let r = levee.get(path).await;
        if r.text().contains(needle) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{path}: anonymous readers do not see {needle:?} 2 s after the edit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What no anonymous response may ever contain: the admin's name, CSRF token and cookie
/// values.
fn assert_nothing_of(admin: &Browser<'_>, sectok: &str, path: &str, r: &levee_test::Resp) {
    let text = r.text();
    assert!(
        !text.contains(DokuWiki::ADMIN_NAME),
        "{path} shows the admin's name to a visitor"
    );
    assert!(
        !text.contains(sectok),
        "{path} shows the admin's CSRF token to a visitor"
    );
    for value in admin.cookies.values() {
        assert!(
            !text.contains(value.as_str()),
            "{path} shows an admin cookie value"
        );
        for c in r.header_all("set-cookie") {
            assert!(
                !c.contains(value.as_str()),
                "{path} hands a visitor the admin's cookie"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dokuwiki_with_its_preset_caches_readers_and_keeps_the_admin_logged_in() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::DOKUWIKI);
    let wiki = DokuWiki::start();
    let mut args = wiki.levee_args();
    args.extend(["--preset".into(), "dokuwiki".into()]);
    let levee = levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .debug_headers()
        .start();

    // Anonymous readers: the front page and an article are hits from the second request.
    for path in ["/doku.php?id=start", "/doku.php?id=wiki:syntax"] {
        let first = levee.get(path).await;
        assert_eq!(first.status, 200, "{path}: {}", first.summary());
        assert_eq!(first.reason(), "stored", "{path}: {}", first.summary());
        assert!(
            first.header("set-cookie").is_none(),
            "{path}: {:?}",
            first.headers
        );
        levee.wait_stored(path).await;
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "HIT", "{path}: {}", r.summary());
    }

    // The admin logs in through levee and stays logged in everywhere.
    let mut admin = Browser::new(&levee);
    DokuWiki::login(&mut admin).await;
    let mut sectok = String::new();
    for path in [
        "/doku.php?id=start",
        "/doku.php?id=wiki:syntax",
        "/doku.php?id=wiki:never-fetched-before",
        "/doku.php?id=private:plans",
    ] {
        let r = admin.get(path).await;
        assert_eq!(r.x_cache(), "PASS", "{path}: {}", r.summary());
        assert!(
            r.text().contains(DokuWiki::ADMIN_NAME),
            "{path}: the admin was logged out: {}",
            r.summary()
        );
        if let Some(t) = form_value(&r.text(), "sectok").filter(|t| !t.is_empty()) {
            sectok = t;
        }
    }
    assert!(
        !sectok.is_empty(),
        "no CSRF token seen on the admin's pages"
    );
    let private = admin.get("/doku.php?id=private:plans").await;
    assert!(
        private.text().contains("Secret plans"),
        "{}",
        private.summary()
    );

    // Visitors never get anything of the admin's, nor each other's session.
    let mut handed_out = Vec::new();
    for path in [
        "/doku.php?id=start",
        "/doku.php?id=wiki:syntax",
        "/doku.php?id=wiki:never-fetched-before",
        "/doku.php?id=private:plans",
        "/doku.php?id=start&do=login",
    ] {
        for _ in 0..2 {
            let r = levee.get(path).await;
            assert_nothing_of(&admin, &sectok, path, &r);
            assert!(
                !r.text().contains("Secret plans"),
                "{path}: private page shown"
            );
            // Sessions handed out (a deletion, `DW…=deleted`, is the same for everyone).
            handed_out.extend(
                r.header_all("set-cookie")
                    .into_iter()
                    .filter_map(|c| c.split(';').next())
                    .filter(|c| !c.ends_with("=deleted") && !c.ends_with('='))
                    .map(str::to_string),
            );
        }
    }
    assert!(
        !handed_out.is_empty(),
        "the login form starts a session for each visitor"
    );
    let mut unique = handed_out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        handed_out.len(),
        "two visitors got the same Set-Cookie"
    );

    // The admin's edit reaches readers at once.
    DokuWiki::edit(
        &mut admin,
        "start",
        "====== Welcome ======\nEdited through levee.\n",
    )
    .await;
    anonymous_sees_within_2s(&levee, "/doku.php?id=start", "Edited through levee.").await;
    let r = admin.get("/doku.php?id=start").await;
    assert!(
        r.text().contains(DokuWiki::ADMIN_NAME),
        "logged out after the edit"
    );
}

/// The bug that made levee switch-off material: with default settings (no preset),
/// DokuWiki's admin was logged out by a response fetched without their cookies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dokuwiki_with_default_settings_never_logs_the_admin_out() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::DOKUWIKI);
    let wiki = DokuWiki::start();
    let args = wiki.levee_args();
    let levee = levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .start();
    let mut admin = Browser::new(&levee);
    DokuWiki::login(&mut admin).await;
    for path in [
        "/doku.php?id=start",
        "/doku.php?id=wiki:never-fetched-before",
        "/doku.php?id=private:plans",
        "/doku.php?id=start",
    ] {
        let r = admin.get(path).await;
        assert!(
            r.text().contains(DokuWiki::ADMIN_NAME),
            "{path}: the admin was logged out: {}",
            r.summary()
        );
    }
    let r = levee.get("/doku.php?id=start").await;
    assert!(!r.text().contains(DokuWiki::ADMIN_NAME));
}

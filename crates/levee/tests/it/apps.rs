//! levee in front of real applications from Debian's packages, unchanged, with their own
//! headers and cookies (issue 9): a preset alone makes anonymous pages hits, and nobody
//! is ever logged out or served someone else's page.
//!
//! Each application gets the same checks ([`anonymous_pages_are_hits`],
//! [`admin_stays_logged_in`], [`visitors_get_nothing_of`], [`anonymous_sees_within_2s`]);
//! only logging in and editing are the application's own.

use std::time::{Duration, Instant};

use levee_test::apps::{form_value, Browser, DokuWiki, MediaWiki, WordPress};
use levee_test::{levee, tools, Levee, Resp};

/// Starts levee in front of an application with `--preset preset` and nothing else
/// (debug headers only, so the tests can read why).
fn levee_with_preset(app_args: Vec<String>, preset: &str) -> Levee {
    let mut args = app_args;
    args.extend(["--preset".into(), preset.into()]);
    levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .debug_headers()
        .start()
}

/// The second anonymous request of each path is a HIT, and no anonymous page stored
/// starts a session.
async fn anonymous_pages_are_hits(levee: &Levee, paths: &[&str]) {
    for path in paths {
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
}

/// Every one of `paths` passes the cache for the admin and shows `name`: the admin was
/// not logged out by anything levee did.
async fn admin_stays_logged_in(admin: &mut Browser<'_>, name: &str, paths: &[&str]) -> Vec<Resp> {
    let mut pages = Vec::new();
    for path in paths {
        let r = admin.get(path).await;
        assert_eq!(r.x_cache(), "PASS", "{path}: {}", r.summary());
        assert!(
            r.text().contains(name),
            "{path}: the admin was logged out: {}",
            r.summary()
        );
        pages.push(r);
    }
    pages
}

/// Anonymous visitors of `paths` (twice each) never see `secrets` (the admin's name,
/// CSRF tokens, private text) nor the admin's cookie values, and no two of them are
/// handed the same cookie, except deletions and the cookies named in `alike` that the
/// application gives everybody with the same value.
async fn visitors_get_nothing_of(
    levee: &Levee,
    admin: &Browser<'_>,
    secrets: &[&str],
    paths: &[&str],
    alike: &[&str],
) -> usize {
    let mut handed_out = Vec::new();
    for path in paths {
        for _ in 0..2 {
            let r = levee.get(path).await;
            let text = r.text();
            for secret in secrets {
                assert!(
                    !text.contains(secret),
                    "{path} shows a visitor {secret:?}: {}",
                    r.summary()
                );
            }
            let set_cookies = r.header_all("set-cookie");
            let admins = admin
                .cookies
                .iter()
                .filter(|(name, value)| value.len() >= 8 && !alike.contains(&name.as_str()))
                .map(|(_, value)| value);
            for value in admins {
                assert!(
                    !text.contains(value.as_str()),
                    "{path} shows an admin cookie value"
                );
                for c in &set_cookies {
                    assert!(
                        !c.contains(value.as_str()),
                        "{path} hands a visitor the admin's cookie: {c}"
                    );
                }
            }
            handed_out.extend(
                set_cookies
                    .into_iter()
                    .filter_map(|c| c.split(';').next())
                    .filter(|c| !c.ends_with("=deleted") && !c.ends_with('='))
                    .filter(|c| !alike.iter().any(|a| c.starts_with(&format!("{a}="))))
                    .map(str::to_string),
            );
        }
    }
    let mut unique = handed_out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        handed_out.len(),
        "two visitors got the same Set-Cookie: {handed_out:?}"
    );
    handed_out.len()
}

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
            "{path}: anonymous readers do not see {needle:?} 2 s after the edit: {}",
            r.summary()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dokuwiki_with_its_preset_caches_readers_and_keeps_the_admin_logged_in() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::DOKUWIKI);
    let wiki = DokuWiki::start();
    let levee = levee_with_preset(wiki.levee_args(), "dokuwiki");

    anonymous_pages_are_hits(&levee, &["/doku.php?id=start", "/doku.php?id=wiki:syntax"]).await;

    let mut admin = Browser::new(&levee);
    DokuWiki::login(&mut admin).await;
    let pages = admin_stays_logged_in(
        &mut admin,
        DokuWiki::ADMIN_NAME,
        &[
            "/doku.php?id=start",
            "/doku.php?id=wiki:syntax",
            "/doku.php?id=wiki:never-fetched-before",
            "/doku.php?id=private:plans",
        ],
    )
    .await;
    assert!(
        pages[3].text().contains("Secret plans"),
        "{}",
        pages[3].summary()
    );
    let sectok = pages
        .iter()
        .find_map(|r| form_value(&r.text(), "sectok").filter(|t| !t.is_empty()))
        .expect("a CSRF token on the admin's pages");

    let sessions = visitors_get_nothing_of(
        &levee,
        &admin,
        &[DokuWiki::ADMIN_NAME, &sectok, "Secret plans"],
        &[
            "/doku.php?id=start",
            "/doku.php?id=wiki:syntax",
            "/doku.php?id=wiki:never-fetched-before",
            "/doku.php?id=private:plans",
            "/doku.php?id=start&do=login",
        ],
        &[],
    )
    .await;
    assert!(
        sessions > 0,
        "the login form starts a session for each visitor"
    );

    DokuWiki::edit(
        &mut admin,
        "start",
        "====== Welcome ======\nEdited through levee.\n",
    )
    .await;
    anonymous_sees_within_2s(&levee, "/doku.php?id=start", "Edited through levee.").await;
    admin_stays_logged_in(&mut admin, DokuWiki::ADMIN_NAME, &["/doku.php?id=start"]).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordpress_with_its_preset_caches_readers_and_keeps_the_admin_logged_in() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::MARIADB);
    levee_test::require!(tools::WORDPRESS);
    let site = WordPress::start();
    let levee = levee_with_preset(site.levee_args(), "wordpress");

    anonymous_pages_are_hits(&levee, &["/", "/hello-world/"]).await;

    let mut admin = Browser::new(&levee);
    WordPress::login(&mut admin).await;
    let pages = admin_stays_logged_in(
        &mut admin,
        WordPress::ADMIN_NAME,
        &["/", "/hello-world/", "/sample-page/", &site.private_path],
    )
    .await;
    assert!(
        pages[3].text().contains(WordPress::PRIVATE_TEXT),
        "{}",
        pages[3].summary()
    );
    let nonce = WordPress::rest_nonce(&mut admin).await;
    // The admin bar's logout link carries the admin's own nonce.
    let logout_nonce = pages[0]
        .text()
        .split("action=logout&#038;_wpnonce=")
        .nth(1)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
        })
        .filter(|n| n.len() >= 8)
        .expect("the admin bar has a logout link with a nonce");

    visitors_get_nothing_of(
        &levee,
        &admin,
        &[
            WordPress::ADMIN_NAME,
            &nonce,
            &logout_nonce,
            WordPress::PRIVATE_TEXT,
        ],
        &[
            "/",
            "/hello-world/",
            "/sample-page/",
            &site.private_path,
            "/wp-login.php",
        ],
        // The login form's cookie check is the same for everyone.
        &["wordpress_test_cookie"],
    )
    .await;

    // A visitor who opened the login form and left: its test cookie is the same for
    // everyone, so the front page is still the shared one.
    let mut visitor = Browser::new(&levee);
    visitor.get("/wp-login.php").await;
    assert!(visitor.cookies.contains_key("wordpress_test_cookie"));
    let r = visitor.get("/").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());

    WordPress::edit(&mut admin, site.hello_id, "Edited through levee.").await;
    anonymous_sees_within_2s(&levee, "/hello-world/", "Edited through levee.").await;
    anonymous_sees_within_2s(&levee, "/", "Edited through levee.").await;
    admin_stays_logged_in(&mut admin, WordPress::ADMIN_NAME, &["/"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mediawiki_with_its_preset_caches_readers_and_keeps_the_admin_logged_in() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::MARIADB);
    levee_test::require!(tools::MEDIAWIKI);
    // levee alone in front of Debian's MediaWiki: FastCGI to php-fpm, which is not told
    // where the wiki's settings are; levee sends MW_CONFIG_FILE as nginx would.
    let wiki = MediaWiki::start_for_fastcgi_params();
    let levee = levee!().config(&wiki.levee_site()).debug_headers().start();
    let article = format!("/index.php/{}", MediaWiki::ARTICLE);
    let logo = levee
        .get("/resources/assets/poweredby_mediawiki_88x31.png")
        .await;
    assert_eq!(logo.status, 200, "{}", logo.summary());
    assert_eq!(logo.x_cache(), "STATIC", "static files come from levee");

    anonymous_pages_are_hits(&levee, &["/index.php/Main_Page", &article]).await;

    let mut admin = Browser::new(&levee);
    MediaWiki::login(&mut admin).await;
    admin_stays_logged_in(
        &mut admin,
        MediaWiki::ADMIN_NAME,
        &[
            "/index.php/Main_Page",
            &article,
            "/index.php/Never_fetched_before",
            "/index.php/Special:Preferences",
        ],
    )
    .await;
    let token = MediaWiki::csrf_token(&mut admin).await;

    let sessions = visitors_get_nothing_of(
        &levee,
        &admin,
        &[MediaWiki::ADMIN_NAME, &token],
        &[
            "/index.php/Main_Page",
            &article,
            "/index.php/Never_fetched_before",
            "/index.php/Special:Preferences",
            "/index.php?title=Special:UserLogin",
        ],
        &[],
    )
    .await;
    assert!(
        sessions > 0,
        "the login form starts a session for each visitor"
    );

    MediaWiki::edit(&mut admin, MediaWiki::ARTICLE, "Edited through levee.").await;
    anonymous_sees_within_2s(&levee, &article, "Edited through levee.").await;
    admin_stays_logged_in(&mut admin, MediaWiki::ADMIN_NAME, &[&article]).await;
}

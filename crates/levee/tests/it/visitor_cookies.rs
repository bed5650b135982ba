//! Per-visitor cookies (issue 34): MoniWiki sets `MONI_TRAIL` (the trail of pages
//! visited) on every page view, with `Cache-Control: public, s-maxage=3, max-age=0,
//! must-revalidate` (wiki.php, github:wkpark/moniwiki at 6601ce2a: `setcookie('MONI_TRAIL',
//! $trail, time()+60*60*24*30, get_scriptname())`); its login is `MONI_ID=<ticket>.<user>`
//! (recorded from its login form on PHP 8.2, 2026-11-27: `Set-Cookie:
//! MONI_ID=b67facc7b2bc5b556c844ca901e4d19d.LeveeAdmin; ... Path=/`, with `PHPSESSID`
//! and `MONIWIKI`).
//! Replayed by an origin: with the moniwiki preset the page is stored without the trail,
//! a returning visitor who kept it still gets hits, and a login still passes.

use levee_test::{levee, Origin, Reply, Req};

fn moniwiki() -> Origin {
    Origin::start(|r| {
        let member = r.header("cookie").is_some_and(|c| c.contains("MONI_ID="));
        let body = if member {
            "page for Ada (logged in)"
        } else {
            "page for everyone"
        };
        Reply::text(body)
            .header("content-type", "text/html; charset=UTF-8")
            .header("cache-control", "public, s-maxage=3, max-age=0, must-revalidate")
            .header("set-cookie", "MONI_TRAIL=FrontPage%09RecentChanges; expires=Sun, 27-Dec-2026 00:00:00 GMT; path=/wiki.php")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trail_cookie_neither_stops_storing_nor_makes_a_returning_visitor_pass() {
    let origin = moniwiki();
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--preset", "moniwiki"])
        .debug_headers()
        .start();
    let first = levee.get("/wiki.php/FrontPage").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.reason(), "stored", "{}", first.summary());
    assert!(
        first.header("set-cookie").is_none(),
        "the trail is nobody's to share: {:?}",
        first.headers
    );
    levee.wait_stored("/wiki.php/FrontPage").await;
    // A returning visitor with the trail: a hit, the same page.
    let back = Req::get("/wiki.php/FrontPage")
        .header("cookie", "MONI_TRAIL=FrontPage%09SandBox")
        .send(&levee)
        .await;
    assert_eq!(back.x_cache(), "HIT", "{}", back.summary());
    assert_eq!(back.text(), "page for everyone");
    assert_eq!(origin.requests(), 1);
    // A member (their login cookie, with a trail too): passes with their cookies.
    let member = Req::get("/wiki.php/FrontPage")
        .header(
            "cookie",
            "MONI_TRAIL=FrontPage; MONI_ID=b67facc7b2bc5b556c844ca901e4d19d.Ada",
        )
        .send(&levee)
        .await;
    assert_eq!(member.x_cache(), "PASS", "{}", member.summary());
    assert_eq!(member.text(), "page for Ada (logged in)");
    assert!(origin
        .last()
        .header("cookie")
        .is_some_and(|c| c.contains("MONI_ID=b67f")));
}

/// Without the preset the trail is learnt as a session cookie, as before: the
/// mechanism is the preset's knowledge, not a guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_preset_the_trail_keeps_pages_from_being_stored() {
    let origin = moniwiki();
    let levee = levee!()
        .args(&["--backend", &origin.url()])
        .debug_headers()
        .start();
    let first = levee.get("/wiki.php/FrontPage").await;
    assert_ne!(first.reason(), "stored", "{}", first.summary());
    let again = levee.get("/wiki.php/FrontPage").await;
    assert_ne!(again.x_cache(), "HIT", "{}", again.summary());
}

/// gnuboard5 (github:gnuboard/gnuboard5 at 0b6f081f7, lib/common.lib.php's set_cookie():
/// `setcookie(md5($cookie_name), base64_encode($value), ...)`): every page starts a PHP
/// session and the first one of the day sets md5("ck_visit_ip"); a remembered login is
/// md5("ck_mb_id") and md5("ck_auto"). Its pages say `max-age=0`, `Expires: 0`,
/// `Pragma: no-cache`: the preset's anonymous TTL stores them for anonymous readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnuboards_hashed_visit_cookie_is_a_visitor_cookie_and_its_login_is_not() {
    const VISIT: &str = "2a0d2363701f23f8a75028924a3af643";
    const AUTO_LOGIN: &str = "a3e94372a6379bc1ae3698dfdf38595b";
    let origin = Origin::start(|r| {
        let member = r.header("cookie").is_some_and(|c| c.contains(AUTO_LOGIN));
        Reply::text(if member {
            "board for a member"
        } else {
            "board for everyone"
        })
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "max-age=0")
        .header("expires", "0")
        .header("pragma", "no-cache")
        .header("set-cookie", "PHPSESSID=fresh; path=/")
        .header(
            "set-cookie",
            &format!("{VISIT}=MTI3LjAuMC4x; expires=Sat, 28-Nov-2026 00:00:00 GMT; path=/"),
        )
    });
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--preset", "gnuboard"])
        .debug_headers()
        .start();
    let first = levee.get("/bbs/board.php?bo_table=free").await;
    assert_eq!(first.reason(), "stored", "{}", first.summary());
    assert!(first.header("set-cookie").is_none(), "{:?}", first.headers);
    levee.wait_stored("/bbs/board.php?bo_table=free").await;
    let back = Req::get("/bbs/board.php?bo_table=free")
        .header("cookie", &format!("{VISIT}=MTI3LjAuMC4x"))
        .send(&levee)
        .await;
    assert_eq!(back.x_cache(), "HIT", "{}", back.summary());
    let member = Req::get("/bbs/board.php?bo_table=free")
        .header(
            "cookie",
            &format!("{VISIT}=MTI3LjAuMC4x; {AUTO_LOGIN}=dG9rZW4="),
        )
        .send(&levee)
        .await;
    assert_eq!(member.x_cache(), "PASS", "{}", member.summary());
    assert_eq!(member.text(), "board for a member");
}

//! Edits visible at once: a logged-in user's edit arrives as a POST to a URL that is not
//! the page (WordPress REST, MediaWiki's api.php, DokuWiki's doku.php); anonymous readers
//! see it within a second or two anyway, not after the TTL.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use levee_test::{levee, Levee, Origin, Reply, Req};

/// A wiki: pages show the revision; a POST to /api.php makes a new one.
fn wiki() -> (Origin, Arc<AtomicUsize>) {
    wiki_with(Some("public, max-age=3600"))
}

/// `wiki`, its pages sent with this Cache-Control, or none.
fn wiki_with(cache_control: Option<&'static str>) -> (Origin, Arc<AtomicUsize>) {
    let revision = Arc::new(AtomicUsize::new(1));
    let rev = revision.clone();
    let origin = Origin::start(move |r| {
        // A login: the form posted, a redirect with the session (as MediaWiki's).
        if r.method == "POST" && r.path == "/login" {
            return Reply::status(302)
                .header("location", "/")
                .header(
                    "set-cookie",
                    &format!("wiki_session={EDITOR}; path=/; HttpOnly"),
                )
                .header("cache-control", "private");
        }
        if r.method == "POST" {
            rev.fetch_add(1, Ordering::SeqCst);
            return Reply::text("saved").header("cache-control", "no-store");
        }
        let page = Reply::text(format!(
            "{} revision {}",
            r.path,
            rev.load(Ordering::SeqCst)
        ))
        .header("content-type", "text/html");
        match cache_control {
            Some(cc) => page.header("cache-control", cc),
            None => page,
        }
    });
    (origin, revision)
}

/// The session the wiki gives its editor at login.
const EDITOR: &str = "5f0d8c2e9a7b41e3b6c1d0f2a8e4c7b9";

/// Logs the editor in through levee; returns the cookie the wiki gave out, which levee
/// then counts as a person's (it saw it given out at a login).
async fn log_in(levee: &Levee) -> String {
    let r = Req::post("/login", "user=admin&password=secret")
        .send(levee)
        .await;
    assert_eq!(r.status, 302, "{}", r.summary());
    format!("wiki_session={EDITOR}")
}

async fn stored_page(levee: &Levee, path: &str) -> String {
    let r = levee.get(path).await;
    levee.wait_stored(path).await;
    r.text()
}

/// Waits (2 s at most) until anonymous readers of `path` see `want`.
async fn seen_within_2s(levee: &Levee, path: &str, want: &str) -> Duration {
    let start = Instant::now();
    loop {
        let r = levee.get(path).await;
        if r.text() == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{path} still shows {:?} 2 s after the edit",
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_edit_with_a_session_makes_the_sites_pages_stale() {
    let (origin, _) = wiki();
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(
        stored_page(&levee, "/wiki/Main").await,
        "/wiki/Main revision 1"
    );
    assert_eq!(
        stored_page(&levee, "/wiki/Other").await,
        "/wiki/Other revision 1"
    );
    let cookie = log_in(&levee).await;
    let edit = Req::post("/api.php", "action=edit&title=Main")
        .header("cookie", &cookie)
        .send(&levee)
        .await;
    assert_eq!(edit.text(), "saved");
    seen_within_2s(&levee, "/wiki/Main", "/wiki/Main revision 2").await;
    seen_within_2s(&levee, "/wiki/Other", "/wiki/Other revision 2").await;
    // Stored again, and shared.
    levee.wait_stored("/wiki/Main").await;
    let before = origin.requests();
    assert_eq!(levee.get("/wiki/Main").await.x_cache(), "HIT");
    assert_eq!(origin.requests(), before);
}

#[tokio::test]
async fn an_anonymous_post_or_url_scope_invalidates_only_its_urls() {
    let (origin, _) = wiki();
    let levee = levee!().backend(&origin.url()).start();
    stored_page(&levee, "/wiki/Main").await;
    // No session: only the POST's own URL (RFC 9111 §4.4). Nor a session cookie
    // nobody gave out: anyone can write one, and a made-up cookie on every POST would
    // otherwise mark the whole site stale each time.
    for cookie in [None, Some("wiki_session=made-up-by-a-crawler-0123456789")] {
        let mut post = Req::post("/api.php", "x");
        if let Some(c) = cookie {
            post = post.header("cookie", c);
        }
        assert_eq!(post.send(&levee).await.text(), "saved");
        levee.wait_backend_idle().await;
        let r = levee.get("/wiki/Main").await;
        assert_eq!(r.x_cache(), "HIT", "{cookie:?}: {}", r.summary());
        assert_eq!(r.text(), "/wiki/Main revision 1");
    }

    let (origin, _) = wiki();
    let levee = levee!()
        .backend(&origin.url())
        .config("[anonymous]\nedit_invalidation = \"url\"")
        .start();
    stored_page(&levee, "/wiki/Main").await;
    let cookie = log_in(&levee).await;
    Req::post("/api.php", "x")
        .header("cookie", &cookie)
        .send(&levee)
        .await;
    levee.wait_backend_idle().await;
    let r = levee.get("/wiki/Main").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
}

/// A micro-cached page may be served stale while it is refreshed, but not after an edit
/// marked it stale: the next reader gets the new revision, never the old copy once more
/// (RFC 9111 §4.4: invalidated means validated before it is sent again).
#[tokio::test]
async fn an_edit_is_not_hidden_by_a_micro_cached_pages_stale_window() {
    // A page without freshness (WordPress's anonymous pages): micro-cached.
    let (origin, _) = wiki_with(None);
    let levee = levee!()
        .backend(&origin.url())
        .args(&["--micro-cache", "60s"])
        .start();
    assert_eq!(
        stored_page(&levee, "/wiki/Main").await,
        "/wiki/Main revision 1"
    );
    assert_eq!(levee.get("/wiki/Main").await.x_cache(), "HIT");
    let cookie = log_in(&levee).await;
    let edit = Req::post("/api.php", "action=edit&title=Main")
        .header("cookie", &cookie)
        .send(&levee)
        .await;
    assert_eq!(edit.text(), "saved");
    let start = Instant::now();
    loop {
        let r = levee.get("/wiki/Main").await;
        assert_ne!(
            r.x_cache(),
            "STALE",
            "the old copy after the edit: {}",
            r.summary()
        );
        if r.text() == "/wiki/Main revision 2" {
            break;
        }
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "still the old revision 2 s after the edit"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

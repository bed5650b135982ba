//! Priority under overload (issue 13): what never waits behind a saturated backend, and
//! who gets through it first.

use std::time::Duration;

use levee_test::{levee, Origin, Reply, Req};
use tokio::task::JoinSet;

/// The session the origin gives its editor at login.
const EDITOR: &str = "PHPSESSID=editor-5f0d8c2e9a7b41e3";

/// `/cached` is stored for a minute; a POST to `/login` logs the editor in (a redirect
/// with their session); everything else takes `delay` and is never stored.
fn origin(delay: Duration) -> Origin {
    Origin::start(move |r| {
        if r.method == "POST" && r.path == "/login" {
            return Reply::status(303)
                .header("location", "/")
                .header("set-cookie", &format!("{EDITOR}; path=/"));
        }
        if r.path == "/cached" {
            Reply::text("from the cache").header("cache-control", "max-age=60")
        } else {
            Reply::text(format!("{} {}", r.method, r.uri))
                .header("cache-control", "no-store")
                .delay(delay)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_url_is_served_while_every_backend_slot_is_busy_and_the_queue_is_full() {
    let origin = origin(Duration::from_secs(3));
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 1\nbackend_queue = 1")
        .start();
    assert_eq!(levee.get("/cached").await.x_cache(), "MISS");
    levee.wait_stored("/cached").await;
    let addr = levee.addr();
    let busy = tokio::spawn(async move { Req::get("/slow/a").send_to(addr).await });
    let queued = tokio::spawn(async move { Req::get("/slow/b").send_to(addr).await });
    levee
        .wait_metric("levee_backend_waiting", |n| n == 1.0)
        .await;
    assert_eq!(levee.metric("levee_backend_in_use").await, 1.0);
    // The queue is full: another uncached request is refused at once...
    assert_eq!(levee.get("/slow/c").await.status, 503);
    // ...while the cached page is still served, and a static answer too.
    for _ in 0..20 {
        let r = levee.get("/cached").await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
        assert_eq!(r.text(), "from the cache");
    }
    assert_eq!(origin.requests_for("/cached"), 1);
    busy.abort();
    queued.abort();
}

/// Two backend slots, both busy with anonymous requests and ten more waiting: a
/// logged-in editor's request takes the next slot that frees, ahead of all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_gets_through_a_saturated_backend_ahead_of_anonymous_traffic() {
    let origin = origin(Duration::from_millis(300));
    // Ten anonymous requests of 300 ms on the one slot the lane keeps while the editor
    // works take 3 s: past the lane's default 2 s wait, which lanes.rs tests.
    let levee = levee!()
        .backend(&origin.url())
        .config("[limits]\nbackend_max_concurrency = 2\nbackend_anonymous_wait = \"10s\"")
        .start();
    // The editor logs in through levee: their session is one the backend gave out.
    assert_eq!(Req::post("/login", "u=e").send(&levee).await.status, 303);
    let addr = levee.addr();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut set = JoinSet::new();
    for i in 0..12 {
        let done = done_tx.clone();
        set.spawn(async move {
            let r = Req::get(&format!("/anon/{i}")).send_to(addr).await;
            let _ = done.send(format!("anon {i} {}", r.status.as_u16()));
        });
    }
    levee
        .wait_metric("levee_backend_waiting", |n| n == 10.0)
        .await;
    let done = done_tx.clone();
    set.spawn(async move {
        let r = Req::get("/wp-admin/edit.php")
            .header("cookie", EDITOR)
            .send_to(addr)
            .await;
        let _ = done.send(format!("editor {}", r.status.as_u16()));
    });
    drop(done_tx);
    while set.join_next().await.is_some() {}
    let mut order = Vec::new();
    while let Some(line) = done_rx.recv().await {
        order.push(line);
    }
    let editor = order
        .iter()
        .position(|l| l.starts_with("editor"))
        .unwrap_or(usize::MAX);
    assert_eq!(order.get(editor).map(String::as_str), Some("editor 200"));
    // The two in flight finish, then the editor's runs beside one anonymous request:
    // it ends among the first four, not behind the ten that queued before it.
    assert!(editor < 4, "the editor waited its turn: {order:?}");
    assert!(order.iter().all(|l| l.ends_with(" 200")), "{order:?}");
}

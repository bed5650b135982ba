//! Desktop and mobile pages under one URL (issue 34): Rhymix answers a phone with its
//! mobile layout and a desktop with the full one, without `Vary`
//! (benchmarks/seedapps/recordings/rhymix.txt, exchanges 1 and 4: 20,778 and 5,345
//! bytes for `/`). With the rhymix preset each class is stored apart and a fill asks as
//! a browser of that class.

use levee_test::{levee, Origin, Reply, Req};

const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36";
/// base64url(md5(FIREFOX)), as Rhymix set it in the recording's `rx_uatype`.
const FIREFOX_HASH: &str = "Z2OUOxpBpebtRy10YF9KXQ";

/// Rhymix's choice, reduced to what the recording shows: a phone's User-Agent gets the
/// mobile layout, anything else the desktop one; `no-store` and a new session.
fn rhymix() -> Origin {
    Origin::start(|r| {
        let ua = r.header("user-agent").unwrap_or("");
        let layout = if ua.contains("iPhone") {
            "mobile"
        } else {
            "desktop"
        };
        Reply::text(format!("{layout} layout of {}", r.path))
            .header("content-type", "text/html; charset=UTF-8")
            .header("cache-control", "must-revalidate, no-store, no-cache")
            .header("expires", "Mon, 26 Jul 1997 05:00:00 GMT")
            .header(
                "set-cookie",
                &format!("PHPSESSID=s{}; path=/; HttpOnly", r.n),
            )
            .header("set-cookie", "rx_login_status=none; path=/; HttpOnly")
    })
}

async fn get(levee: &levee_test::Levee, ua: &str, cookie: Option<&str>) -> levee_test::Resp {
    let mut req = Req::get("/board").header("user-agent", ua);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send(levee).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phones_and_desktops_each_get_their_own_stored_page() {
    let origin = rhymix();
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--preset", "rhymix"])
        .debug_headers()
        .start();
    let desktop = get(&levee, FIREFOX, None).await;
    assert_eq!(desktop.text(), "desktop layout of /board");
    // The fill asked as a desktop browser, whatever this one's exact User-Agent.
    assert_eq!(origin.last().header("user-agent"), Some(FIREFOX));
    levee.wait_stored("/board").await;
    // A phone: not the desktop page; its own fill, as an iPhone.
    let phone = get(&levee, ANDROID, None).await;
    assert_eq!(
        phone.text(),
        "mobile layout of /board",
        "{}",
        phone.summary()
    );
    assert_eq!(origin.last().header("user-agent"), Some(IPHONE));
    assert!(origin.last().header("x-levee-device").is_none());
    for (ua, layout) in [
        (IPHONE, "mobile"),
        (FIREFOX, "desktop"),
        (ANDROID, "mobile"),
    ] {
        let r = eventually_hit(&levee, ua).await;
        assert_eq!(r.text(), format!("{layout} layout of /board"), "{ua}");
    }
    assert_eq!(origin.requests(), 2);
    // A client cannot choose the class by sending levee's field.
    let forged = Req::get("/board")
        .header("user-agent", FIREFOX)
        .header("x-levee-device", "mobile")
        .send(&levee)
        .await;
    assert_eq!(forged.text(), "desktop layout of /board");
    // The visitor's own choice of the mobile view (Rhymix's `?m=1` sets it in
    // rx_uatype, for their User-Agent): the mobile page, with the session they hold.
    let chose = format!("rx_uatype={FIREFOX_HASH}%3A1");
    let r = get(&levee, FIREFOX, Some(&chose)).await;
    assert_eq!(r.text(), "mobile layout of /board", "{}", r.summary());
    // Another browser's choice does not count for this one.
    let r = get(&levee, "Mozilla/5.0 (Windows NT 10.0)", Some(&chose)).await;
    assert_eq!(r.text(), "desktop layout of /board", "{}", r.summary());
}

/// Hits for a class once its page is stored (the second class's fill may still be
/// storing when the loop starts).
async fn eventually_hit(levee: &levee_test::Levee, ua: &str) -> levee_test::Resp {
    let mut last = None;
    for _ in 0..50 {
        let r = get(levee, ua, None).await;
        if r.x_cache() == "HIT" {
            return r;
        }
        last = Some(r);
        tokio::task::yield_now().await;
    }
    panic!(
        "never a hit for {ua}: {}",
        last.map(|r| r.summary()).unwrap_or_default()
    );
}

/// Without a preset that names a device rule, nothing changes: one page per URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_sites_keep_one_page_per_url() {
    let origin = rhymix();
    let levee = levee!()
        .args(&["--backend", &origin.url(), "--anonymous-ttl", "60s"])
        .config("[anonymous]\nextra_session_cookies = [\"rx_*\"]\n")
        .start();
    get(&levee, FIREFOX, None).await;
    levee.wait_stored("/board").await;
    let phone = get(&levee, IPHONE, None).await;
    assert_eq!(phone.x_cache(), "HIT");
    assert_eq!(origin.last().header("user-agent"), Some(FIREFOX));
}

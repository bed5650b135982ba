//! The rules people write in nginx, in `[[site.route]]` (issue 33): basic auth from an
//! htpasswd file, client networks, deny, redirects, a rewrite to a front controller,
//! response headers, and mistakes refused at start with what to write instead.

use std::net::{IpAddr, Ipv4Addr};

use base64::Engine;
use levee_test::{levee, Levee, Origin, Reply, Req};

/// An origin that says which path and query it got, storable for a minute.
fn echo() -> Origin {
    Origin::start(|r| {
        Reply::text(format!("origin {}", r.uri)).header("cache-control", "public, max-age=60")
    })
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

fn start(origin: &Origin, routes: &str) -> Levee {
    levee!()
        .config(&format!(
            "[[site]]\ndefault = true\nbackend = \"{}\"\n{routes}",
            origin.url()
        ))
        .debug_headers()
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_lets_the_right_password_in_and_never_shares_what_it_opens() {
    let origin = echo();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    let ada = bcrypt::hash("ada-secret", 4).unwrap();
    let bob = bcrypt::hash("bob-secret", 4).unwrap();
    std::fs::write(&file, format!("# admins\nada:{ada}\nbob:{bob}\n")).unwrap();
    let levee = start(
        &origin,
        &format!(
            "[[site.route]]\npath = \"/admin/\"\nauth_basic = \"Admin area\"\nauth_basic_user_file = \"{}\"\n",
            file.display()
        ),
    );

    // Absent, wrong, unknown: 401 with the realm, the backend never asked.
    let r = levee.get("/admin/page").await;
    assert_eq!(r.status, 401, "{}", r.summary());
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Admin area\", charset=\"UTF-8\"")
    );
    assert_eq!(r.header("cache-control"), Some("no-store"));
    for (user, password) in [("ada", "wrong"), ("eve", "ada-secret"), ("ada", "")] {
        let r = Req::get("/admin/page")
            .header("authorization", &basic(user, password))
            .send(&levee)
            .await;
        assert_eq!(r.status, 401, "{user}:{password}: {}", r.summary());
    }
    let r = Req::get("/admin/page")
        .header("authorization", "Bearer abc")
        .send(&levee)
        .await;
    assert_eq!(r.status, 401);
    // The same path spelt otherwise is the same path to the backend: still guarded.
    for spelt in [
        "/%61dmin/page",
        "//admin//page",
        "/x/../admin/page",
        "/x/%2e%2e/admin/page",
    ] {
        let r = levee.get(spelt).await;
        assert_eq!(r.status, 401, "{spelt}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 0, "nothing reached the backend");

    // The right password: through, twice (the second from the verified-credentials
    // memory), each time to the backend (a request with Authorization is never served
    // from the shared cache nor stored for others).
    for _ in 0..2 {
        let r = Req::get("/admin/page")
            .header("authorization", &basic("ada", "ada-secret"))
            .send(&levee)
            .await;
        assert_eq!(r.status, 200, "{}", r.summary());
        assert_eq!(r.text(), "origin /admin/page");
        assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    }
    assert_eq!(origin.requests(), 2);
    let r = Req::get("/admin/page")
        .header("authorization", &basic("bob", "bob-secret"))
        .send(&levee)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(origin.requests(), 3, "bob's request is his own");
    // Without credentials after all that: still 401, nothing stored answers it.
    let r = levee.get("/admin/page").await;
    assert_eq!(r.status, 401, "{}", r.summary());
    // Outside the route: open, and cached as usual.
    assert_eq!(levee.get("/public").await.status, 200);
    assert_eq!(levee.get("/public").await.x_cache(), "HIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn networks_are_allowed_or_refused_by_the_clients_address() {
    let origin = echo();
    let levee = start(
        &origin,
        "[[site.route]]\npath = \"/office/\"\nallow_networks = [\"127.0.0.2/32\", \"127.0.5.0/24\"]\n\
         [[site.route]]\npath = \"/office/blocked/\"\nallow_networks = [\"127.0.0.0/8\"]\ndeny_networks = [\"127.0.0.3\"]\n",
    );
    let from = |a: u8, b: u8| IpAddr::V4(Ipv4Addr::new(127, 0, a, b));
    let get = |path: &'static str, ip: IpAddr| Req::get(path).send_from(levee.addr(), ip);
    assert_eq!(get("/office/x", from(0, 2)).await.status, 200);
    assert_eq!(get("/office/x", from(5, 9)).await.status, 200);
    assert_eq!(get("/office/x", from(0, 1)).await.status, 403);
    assert_eq!(get("/office/x", from(6, 1)).await.status, 403);
    // A cached copy does not open the door to others either.
    assert_eq!(get("/office/x", from(0, 2)).await.x_cache(), "HIT");
    assert_eq!(get("/office/x", from(0, 1)).await.status, 403);
    assert_eq!(get("/office/blocked/y", from(0, 3)).await.status, 403);
    assert_eq!(get("/office/blocked/y", from(0, 4)).await.status, 200);
    // A forged X-Forwarded-For from an untrusted peer changes nothing.
    let r = Req::get("/office/x")
        .header("x-forwarded-for", "127.0.0.2")
        .send_from(levee.addr(), from(0, 1))
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_redirect_rewrite_and_headers() {
    let origin = echo();
    let levee = start(
        &origin,
        "[[site.route]]\npath = \"/private/\"\ndeny = true\n\
         [[site.route]]\npath = \"/old/\"\nredirect = \"https://new.example.com/blog/\"\n\
         [[site.route]]\npath = \"/moved/\"\nredirect = \"/here/\"\nredirect_status = 307\n\
         [[site.route]]\npath = \"/wiki/\"\nrewrite = \"/index.php?title={rest}\"\n\
         [[site.route]]\npath = \"/\"\nheaders = { \"X-Frame-Options\" = \"SAMEORIGIN\", \"X-Robots-Tag\" = \"noindex\" }\n",
    );
    let r = levee.get("/private/secrets.txt").await;
    assert_eq!(r.status, 403);
    assert_eq!(origin.requests(), 0);

    let r = levee.get("/old/2024/post?x=1&y=2").await;
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("https://new.example.com/blog/2024/post?x=1&y=2")
    );
    let r = levee.get("/moved/a").await;
    assert_eq!(r.status, 307);
    assert_eq!(r.header("location"), Some("/here/a"));
    assert_eq!(origin.requests(), 0, "redirects are levee's own");

    let r = levee.get("/wiki/Main_Page?action=view").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "origin /index.php?title=Main_Page&action=view");
    assert_eq!(origin.last().uri, "/index.php?title=Main_Page&action=view");
    // Stored under the client's URL: a hit there, the long form its own entry.
    assert_eq!(
        levee.get("/wiki/Main_Page?action=view").await.x_cache(),
        "HIT"
    );
    let long = levee.get("/index.php?title=Main_Page&action=view").await;
    assert_eq!(long.x_cache(), "MISS", "{}", long.summary());

    // Headers on a miss, a hit and levee's own answers under the route.
    let miss = levee.get("/page").await;
    let hit = levee.get("/page").await;
    assert_eq!(hit.x_cache(), "HIT");
    for r in [&miss, &hit] {
        assert_eq!(
            r.header("x-frame-options"),
            Some("SAMEORIGIN"),
            "{}",
            r.summary()
        );
        assert_eq!(r.header("x-robots-tag"), Some("noindex"));
    }
    // The longest prefix decides: /private/ has its own rules, not "/"'s headers.
    assert_eq!(
        levee.get("/private/x").await.header("x-frame-options"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_go_on_files_too() {
    let origin = echo();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("logo.txt"), "a file").unwrap();
    let levee = levee!()
        .config(&format!(
            "[[site]]\ndefault = true\nbackend = \"{}\"\nroot = \"{}\"\n[[site.route]]\npath = \"/\"\nheaders = {{ \"X-Content-Type-Options\" = \"nosniff\" }}\n",
            origin.url(),
            root.path().display()
        ))
        .start();
    let r = levee.get("/logo.txt").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "a file",
        "a rules-only route still serves the site's files"
    );
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn mistakes_in_rules_are_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let weak = dir.path().join("weak");
    std::fs::write(&weak, "ada:$apr1$abc$abcdefghijklmnopqrstuv\n").unwrap();
    for (route, says) in [
        (
            "path = \"/a/\"\nallow_networks = [\"office\"]",
            "not an address or network",
        ),
        ("path = \"/a/\"\nredirect = \"ftp://x\"", "absolute URL"),
        (
            "path = \"/a/\"\nredirect = \"/b/\"\nredirect_status = 404",
            "is not a redirect",
        ),
        ("path = \"/a/\"\ndeny = true\nrewrite = \"/x\"", "keep one"),
        (
            &format!(
                "path = \"/a/\"\nauth_basic = \"A\"\nauth_basic_user_file = \"{}\"",
                weak.display()
            ),
            "htpasswd -B",
        ),
        (
            "path = \"/a/\"\nauth_basic = \"A\"\nauth_basic_user_file = \"/nonexistent/htpasswd\"",
            "cannot read",
        ),
        ("path = \"/a/\"", "or a rule"),
    ] {
        let config = dir.path().join("levee.toml");
        std::fs::write(&config, format!("[[site]]\ndefault = true\nbackend = \"http://127.0.0.1:9\"\n[[site.route]]\n{route}\n")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["serve", "--check", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{route}: {stderr}");
        assert!(stderr.contains(says), "{route}: {stderr}");
    }
}

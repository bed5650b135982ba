//! levee alone in front of Debian's applications, no nginx (issue 33): with only their
//! preset and what a user must give (root, backend, fastcgi_params), every asset their
//! pages reference loads, and every path their own nginx guide keeps from the web is
//! refused before php-fpm is asked. Logins, privacy and edits on levee alone are
//! apps.rs's tests (they too run levee straight onto php-fpm).

use std::path::{Path, PathBuf};

use levee_test::apps::{page_assets, Browser, DokuWiki, MediaWiki, WordPress};
use levee_test::{levee, tools, Levee, Resp};

/// Every same-site image, style, script and icon of `page` answers 200.
/// 200, or the application's own redirect off-site (DokuWiki's fetch.php sends an
/// external image's URL on to its host, behind nginx too).
fn loaded(r: &Resp) -> bool {
    r.status == 200
        || (matches!(r.status.as_u16(), 301 | 302 | 303 | 307 | 308)
            && r.header("location").is_some_and(|l| {
                l.starts_with("http") && !l.contains("127.0.0.1") && !l.contains("localhost")
            }))
}

async fn assets_load(levee: &Levee, page: &Resp, what: &str) -> usize {
    let host = levee.addr().to_string();
    let assets = page_assets(&page.text(), &host);
    for asset in &assets {
        // MediaWiki links /favicon.ico and ships none (the admin brings one): the
        // application's own 404 page, as behind nginx, not levee's doing.
        if asset == "/favicon.ico" {
            continue;
        }
        let r = levee.get(asset).await;
        assert!(loaded(&r), "{what}: {asset}: {}", r.summary());
    }
    assets.len()
}

/// The same, fetched with the logged-in browser's cookies.
async fn assets_load_for(browser: &mut Browser<'_>, host: &str, page: &Resp, what: &str) {
    for asset in page_assets(&page.text(), host) {
        if asset == "/favicon.ico" {
            continue;
        }
        let r = browser.get(&asset).await;
        assert!(loaded(&r), "{what} (logged in): {asset}: {}", r.summary());
    }
}

/// A PHP file that leaves `<file>.ran` when php-fpm runs it.
struct Marker(PathBuf);

impl Marker {
    fn plant(path: PathBuf) -> Marker {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            &path,
            "<?php file_put_contents(__FILE__ . '.ran', 'ran'); echo 'marker ran';\n",
        )
        .unwrap();
        Marker(path)
    }

    fn ran(&self) -> bool {
        let mut ran = self.0.clone().into_os_string();
        ran.push(".ran");
        Path::new(&ran).exists()
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let mut ran = self.0.clone().into_os_string();
        ran.push(".ran");
        let _ = std::fs::remove_file(&ran);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Each of `paths` is refused (403 or 404) by levee itself, not by the application.
async fn refused(levee: &Levee, paths: &[&str]) {
    for path in paths {
        let r = levee.get(path).await;
        assert!(
            r.status == 403 || r.status == 404,
            "{path} must not be served: {}",
            r.summary()
        );
        assert!(
            !r.text().contains("marker ran"),
            "{path} ran: {}",
            r.summary()
        );
    }
}

/// A marker planted at `url` under `root` is refused and never runs; `control`, the same
/// marker where PHP does run, proves the planting works (so this check can fail).
async fn never_runs(levee: &Levee, root: &Path, urls: &[&str], control: &str) {
    let ok = Marker::plant(root.join(control.trim_start_matches('/')));
    let r = levee.get(control).await;
    assert!(
        r.status == 200 && ok.ran(),
        "the control marker {control} did not run: {}",
        r.summary()
    );
    for url in urls {
        let m = Marker::plant(root.join(url.trim_start_matches('/')));
        refused(levee, &[url]).await;
        assert!(!m.ran(), "php-fpm ran {url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dokuwiki_alone_serves_its_assets_and_keeps_its_internals() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::DOKUWIKI);
    let wiki = DokuWiki::start();
    let mut args = wiki.levee_args();
    args.extend(["--preset".into(), "dokuwiki".into()]);
    let levee = levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .start();

    // `index doku.php`: the front page is the wiki, not index.php's redirect.
    let front = levee.get("/").await;
    assert_eq!(front.status, 200, "{}", front.summary());
    assert!(front.text().contains("Welcome"), "{}", front.summary());
    // The theme's images are in /var/lib/dokuwiki, behind Debian's `lib/tpl` link.
    let logo = levee.get("/lib/tpl/dokuwiki/images/logo.png").await;
    assert_eq!(logo.status, 200, "{}", logo.summary());
    let n = assets_load(&levee, &front, "front page").await;
    let article = levee.get("/doku.php?id=wiki:syntax").await;
    assert_eq!(article.status, 200, "{}", article.summary());
    assert!(n + assets_load(&levee, &article, "wiki:syntax").await > 3);
    let mut admin = Browser::new(&levee);
    DokuWiki::login(&mut admin).await;
    let page = admin.get("/doku.php?id=start").await;
    assert!(
        page.text().contains(DokuWiki::ADMIN_NAME),
        "{}",
        page.summary()
    );
    assets_load_for(&mut admin, &levee.addr().to_string(), &page, "start").await;

    refused(
        &levee,
        &[
            "/bin/indexer.php",
            "/inc/init.php",
            "/vendor/autoload.php",
            "/install.php",
            "/%69nc/init.php",
            "//inc//init.php",
            "/VERSION",
        ],
    )
    .await;
    never_runs(
        &levee,
        &wiki.www(),
        &[
            "/bin/levee-marker.php",
            "/inc/levee-marker.php",
            "/vendor/levee-marker.php",
            "/conf/levee-marker.php",
            "/data/levee-marker.php",
        ],
        "/levee-marker.php",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordpress_alone_serves_its_assets_and_never_runs_an_upload() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::WORDPRESS);
    let blog = WordPress::start();
    let mut args = blog.levee_args();
    args.extend(["--preset".into(), "wordpress".into()]);
    let levee = levee!()
        .args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .start();
    let upload = blog.www().join("wp-content/uploads/2026/11/picture.png");
    std::fs::create_dir_all(upload.parent().unwrap()).unwrap();
    std::fs::write(&upload, "png").unwrap();

    let front = levee.get("/").await;
    assert_eq!(front.status, 200, "{}", front.summary());
    let n = assets_load(&levee, &front, "front page").await;
    let post = levee.get("/hello-world/").await;
    assert_eq!(post.status, 200, "{}", post.summary());
    assert!(n + assets_load(&levee, &post, "hello-world").await > 3);
    let media = levee.get("/wp-content/uploads/2026/11/picture.png").await;
    assert_eq!(media.status, 200, "{}", media.summary());
    let mut admin = Browser::new(&levee);
    WordPress::login(&mut admin).await;
    let dashboard = admin.get("/wp-admin/").await;
    assert!(
        dashboard.text().contains(WordPress::ADMIN_NAME),
        "{}",
        dashboard.summary()
    );
    assets_load_for(
        &mut admin,
        &levee.addr().to_string(),
        &dashboard,
        "wp-admin",
    )
    .await;

    refused(
        &levee,
        &["/wp-config-sample.php", "/backup.sql", "/readme.html"],
    )
    .await;
    never_runs(
        &levee,
        &blog.www(),
        &[
            "/wp-content/uploads/levee-marker.php",
            "/wp-content/uploads/2026/11/levee-marker.php",
            "/wp-content/uploads/2026/11/levee-marker.php/x.png",
            "/wp-content/uploads/2026/11/LEVEE-marker.PHP",
            "/wp-content/uploads/2026/11/levee-marker.phtml",
        ],
        "/levee-marker.php",
    )
    .await;
    // A directory's index.php in uploads is no front door either.
    let m = Marker::plant(blog.www().join("wp-content/uploads/2026/index.php"));
    refused(&levee, &["/wp-content/uploads/2026/"]).await;
    assert!(!m.ran());

    // `levee doctor --root` finds the same script, and the preset from the files.
    let www = blog.www();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_levee"))
            .args(["doctor", "--root"])
            .arg(&www)
            .output()
            .expect("run levee doctor")
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("preset wordpress, found from its files"),
        "{text}"
    );
    assert!(
        text.contains("/wp-content/uploads/2026/index.php"),
        "{text}"
    );
    assert!(text.contains("/wp-config-sample.php"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mediawiki_alone_serves_its_assets_and_keeps_its_internals() {
    levee_test::require!(tools::PHP_FPM);
    levee_test::require!(tools::MEDIAWIKI);
    let wiki = MediaWiki::start_for_fastcgi_params();
    let levee = levee!().config(&wiki.levee_site()).start();

    let page = levee.get("/index.php?title=Main_Page").await;
    assert_eq!(page.status, 200, "{}", page.summary());
    assert!(assets_load(&levee, &page, "Main_Page").await > 2);
    let mut admin = Browser::new(&levee);
    MediaWiki::login(&mut admin).await;
    let own = admin.get("/index.php?title=Main_Page").await;
    assets_load_for(&mut admin, &levee.addr().to_string(), &own, "Main_Page").await;

    refused(
        &levee,
        &[
            "/maintenance/update.php",
            "/includes/WebStart.php",
            "/vendor/autoload.php",
            "/cache/",
            "/languages/messages/MessagesEn.php",
            "/serialized/",
            "/tests/phpunit/bootstrap.php",
            "/mw-config/index.php",
            "/composer.json",
        ],
    )
    .await;
    // Debian's uploads: /usr/share/mediawiki/images links to /var/lib/mediawiki/images.
    // (Planted there for the test and removed by the markers' drop.)
    let probe = Path::new("/var/lib/mediawiki/images/levee-marker-test.php");
    if std::fs::write(probe, "").is_ok() {
        let m = Marker::plant(probe.to_path_buf());
        refused(&levee, &["/images/levee-marker-test.php"]).await;
        assert!(!m.ran(), "php-fpm ran a script under images/");
    }
}

//! WordPress 6.1 from Debian's `wordpress` package with its default theme
//! (`wordpress-theme-twentytwentythree`), on a private MariaDB.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{copy_tree, scratch, Browser, MariaDb};
use crate::phpfpm::PhpFpm;

/// A WordPress site as its installer leaves it, plus pretty permalinks (`/%postname%/`,
/// which every real site turns on and which put the REST API at `/wp-json/`), an admin
/// (`admin`, display name [`WordPress::ADMIN_NAME`]) and a private post only the admin
/// may read. The installer's public posts belong to another author, so the admin's name
/// appears only on pages made for the admin (the admin bar's "Howdy").
pub struct WordPress {
    dir: PathBuf,
    fpm: Option<PhpFpm>,
    _db: MariaDb,
    /// The id of the post WordPress's installer writes ("Hello world!").
    pub hello_id: u32,
    /// Where the private post is.
    pub private_path: String,
}

impl WordPress {
    pub const ADMIN_NAME: &'static str = "Ada Admin";
    pub const ADMIN_PASSWORD: &'static str = "levee-test-secret";
    pub const PRIVATE_TEXT: &'static str = "Secret plans of the admin";

    /// Installs and starts it. Call `require!(tools::WORDPRESS)` and
    /// `require!(tools::MARIADB)` first.
    pub fn start() -> WordPress {
        let db = MariaDb::start();
        db.create_database("wordpress");
        let dir = scratch("wordpress");
        let www = dir.join("www");
        copy_tree(Path::new("/usr/share/wordpress"), &www);
        // Debian's wp-config.php reads /etc/wordpress/config-HOST.php; this copy has its own.
        // WP_HOME follows the Host the request came with, as on a site moved between names;
        // the tests' levee listens on a port chosen at run time.
        std::fs::write(
            www.join("wp-config.php"),
            format!(
                r#"<?php
define('DB_NAME', 'wordpress');
define('DB_USER', '{user}');
define('DB_PASSWORD', '{password}');
define('DB_HOST', 'localhost:{socket}');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
define('AUTH_KEY', 'levee-test-auth');
define('SECURE_AUTH_KEY', 'levee-test-secure-auth');
define('LOGGED_IN_KEY', 'levee-test-logged-in');
define('NONCE_KEY', 'levee-test-nonce');
define('AUTH_SALT', 'levee-test-auth-salt');
define('SECURE_AUTH_SALT', 'levee-test-secure-auth-salt');
define('LOGGED_IN_SALT', 'levee-test-logged-in-salt');
define('NONCE_SALT', 'levee-test-nonce-salt');
$table_prefix = 'wp_';
$levee_host = $_SERVER['HTTP_HOST'] ?? 'localhost';
define('WP_HOME', 'http://' . $levee_host);
define('WP_SITEURL', 'http://' . $levee_host);
define('COOKIEHASH', md5('levee-test'));
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_CONTENT_DIR', '{www}/wp-content');
if (!defined('ABSPATH')) define('ABSPATH', __DIR__ . '/');
require_once ABSPATH . 'wp-settings.php';
"#,
                user = MariaDb::USER,
                password = MariaDb::PASSWORD,
                socket = db.socket().display(),
                www = www.display(),
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("install.php"),
            format!(
                r#"<?php
define('WP_INSTALLING', true);
require '{www}/wp-load.php';
require ABSPATH . 'wp-admin/includes/upgrade.php';
$r = wp_install('levee test blog', 'admin', 'admin@example.com', true, '', '{password}');
wp_update_user(['ID' => $r['user_id'], 'display_name' => '{name}', 'first_name' => 'Ada']);
update_option('permalink_structure', '/%postname%/');
flush_rewrite_rules(true);
// Posts show their author's name to everyone: the installer's posts go to another user,
// so that the admin's name on a page means the page was made for the admin.
$writer = wp_insert_user(['user_login' => 'writer', 'user_pass' => wp_generate_password(),
    'display_name' => 'Walt Writer', 'role' => 'author']);
$wpdb->update($wpdb->posts, ['post_author' => $writer], ['post_author' => $r['user_id']]);
$private = wp_insert_post(['post_title' => 'Plans', 'post_content' => '{private}',
    'post_status' => 'private', 'post_author' => $r['user_id']]);
$hello = get_page_by_path('hello-world', OBJECT, 'post');
echo "hello=" . $hello->ID . "\nprivate=" . $private . "\n";
echo "private_slug=" . get_post_field('post_name', $private) . "\n";
"#,
                www = www.display(),
                password = Self::ADMIN_PASSWORD,
                name = Self::ADMIN_NAME,
                private = Self::PRIVATE_TEXT,
            ),
        )
        .unwrap();
        let out = Command::new("php")
            .arg(dir.join("install.php"))
            .output()
            .expect("run php (apt-get install php8.2-cli php8.2-mysql)");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let id = |name: &str| -> u32 {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| {
                    panic!(
                        "the WordPress install failed: {stdout}{}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                })
        };
        let hello_id = id("hello");
        let private_slug = stdout
            .lines()
            .find_map(|l| l.strip_prefix("private_slug="))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| panic!("the private post has no slug: {stdout}"))
            .to_string();
        let fpm = PhpFpm::builder(&www).start();
        WordPress {
            dir,
            fpm: Some(fpm),
            _db: db,
            hello_id,
            private_path: format!("/{private_slug}/"),
        }
    }

    /// Its document root (one directory, `wp-content` inside).
    pub fn www(&self) -> PathBuf {
        self.dir.join("www")
    }

    /// `--backend` and `--root` for levee.
    pub fn levee_args(&self) -> Vec<String> {
        let fpm = self.fpm.as_ref().unwrap();
        vec![
            "--backend".into(),
            format!("fastcgi+unix:{}", fpm.socket_path().display()),
            "--root".into(),
            self.dir.join("www").display().to_string(),
        ]
    }

    /// Logs the admin in through `browser`, as the login form does (the form's GET sets
    /// the test cookie its POST checks).
    pub async fn login(browser: &mut Browser<'_>) {
        let form = browser.get("/wp-login.php").await;
        assert_eq!(form.status, 200, "{}", form.summary());
        let r = browser
            .post(
                "/wp-login.php",
                &[
                    ("log", "admin"),
                    ("pwd", Self::ADMIN_PASSWORD),
                    ("wp-submit", "Log In"),
                    ("testcookie", "1"),
                ],
            )
            .await;
        assert_eq!(r.status, 302, "the login was refused: {}", r.summary());
        assert!(
            browser
                .cookies
                .keys()
                .any(|k| k.starts_with("wordpress_logged_in_")),
            "no login cookie after the login: {:?}",
            r.headers
        );
    }

    /// The REST API's nonce for `browser`'s user (what wp-admin's scripts send as
    /// `X-WP-Nonce`), from the endpoint WordPress has for refreshing it.
    pub async fn rest_nonce(browser: &mut Browser<'_>) -> String {
        let r = browser
            .get("/wp-admin/admin-ajax.php?action=rest-nonce")
            .await;
        assert_eq!(r.status, 200, "no REST nonce: {}", r.summary());
        r.text().trim().to_string()
    }

    /// Replaces post `id`'s content through the REST API, as the block editor does:
    /// `POST /wp-json/wp/v2/posts/ID` with the nonce.
    pub async fn edit(browser: &mut Browser<'_>, id: u32, content: &str) {
        let nonce = Self::rest_nonce(browser).await;
        let body = serde_json::json!({ "content": content }).to_string();
        let r = browser
            .send(
                crate::Req::post(&format!("/wp-json/wp/v2/posts/{id}"), body)
                    .header("content-type", "application/json")
                    .header("x-wp-nonce", &nonce),
            )
            .await;
        assert_eq!(r.status, 200, "the edit was refused: {}", r.summary());
    }
}

impl Drop for WordPress {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

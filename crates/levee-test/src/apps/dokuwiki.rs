//! DokuWiki from Debian's `dokuwiki` package.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{copy_tree, copy_tree_keeping_links, form_value, scratch, Browser};
use crate::phpfpm::PhpFpm;

/// DokuWiki 2022-07-31 from Debian's `dokuwiki` package, as shipped: its code, its
/// default configuration and data, plus an admin user (`admin`, full name
/// [`DokuWiki::ADMIN_NAME`]), a start page and a `private:` namespace only the admin
/// may read.
pub struct DokuWiki {
    dir: PathBuf,
    fpm: Option<PhpFpm>,
}

impl DokuWiki {
    pub const ADMIN_NAME: &'static str = "Ada Admin";
    pub const ADMIN_PASSWORD: &'static str = "levee-test-secret";

    /// Installs and starts it. Call `require!(tools::DOKUWIKI)` first.
    pub fn start() -> DokuWiki {
        let dir = scratch("dokuwiki");
        let (www, conf, data) = (dir.join("www"), dir.join("conf"), dir.join("data"));
        // As installed: `lib/tpl` and `lib/plugins` stay links into /var/lib/dokuwiki.
        copy_tree_keeping_links(Path::new("/usr/share/dokuwiki"), &www);
        copy_tree(Path::new("/etc/dokuwiki"), &conf);
        copy_tree(Path::new("/var/lib/dokuwiki/data"), &data);
        // Debian's preload.php points at /etc/dokuwiki; this copy has its own.
        std::fs::write(
            www.join("inc/preload.php"),
            format!("<?php define('DOKU_CONF', '{}/');\n", conf.display()),
        )
        .unwrap();
        std::fs::write(
            conf.join("local.php"),
            format!(
                "<?php\n$conf['title'] = 'levee test wiki';\n$conf['savedir'] = '{}';\n\
                 $conf['useacl'] = 1;\n$conf['superuser'] = '@admin';\n",
                data.display()
            ),
        )
        .unwrap();
        let hash = Command::new("php")
            .args([
                "-r",
                &format!(
                    "echo password_hash('{}', PASSWORD_BCRYPT);",
                    Self::ADMIN_PASSWORD
                ),
            ])
            .output()
            .expect("run php (apt-get install php8.2-cli)");
        let hash = String::from_utf8(hash.stdout).unwrap();
        assert!(
            hash.starts_with("$2y$"),
            "php could not hash a password: {hash:?}"
        );
        std::fs::write(
            conf.join("users.auth.php"),
            format!(
                "admin:{hash}:{}:ada@example.com:admin,user\n",
                Self::ADMIN_NAME
            ),
        )
        .unwrap();
        std::fs::write(
            conf.join("acl.auth.php"),
            "*\t@ALL\t1\n*\t@user\t8\nprivate:*\t@ALL\t0\nprivate:*\t@admin\t16\n",
        )
        .unwrap();
        std::fs::create_dir_all(data.join("pages/private")).unwrap();
        std::fs::write(
            data.join("pages/start.txt"),
            "====== Welcome ======\nHello readers.\n",
        )
        .unwrap();
        std::fs::write(data.join("pages/private/plans.txt"), "Secret plans.\n").unwrap();
        let fpm = PhpFpm::builder(&www)
            .ini("session.save_path", &dir.display().to_string())
            .start();
        DokuWiki {
            dir,
            fpm: Some(fpm),
        }
    }

    /// Its document root (a copy of Debian's, links kept).
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

    /// Logs the admin in through `browser`, as the login form does.
    pub async fn login(browser: &mut Browser<'_>) {
        let form = browser.get("/doku.php?id=start&do=login").await;
        assert_eq!(form.status, 200, "{}", form.summary());
        let sectok = form_value(&form.text(), "sectok").unwrap_or_default();
        let r = browser
            .post(
                "/doku.php",
                &[
                    ("sectok", sectok.as_str()),
                    ("id", "start"),
                    ("do", "login"),
                    ("u", "admin"),
                    ("p", Self::ADMIN_PASSWORD),
                ],
            )
            .await;
        assert_eq!(r.status, 302, "the login was refused: {}", r.summary());
    }

    /// Saves `text` as page `id`, through the edit form, as `browser`'s user.
    pub async fn edit(browser: &mut Browser<'_>, id: &str, text: &str) {
        let form = browser.get(&format!("/doku.php?id={id}&do=edit")).await;
        let html = form.text();
        let sectok = form_value(&html, "sectok").expect("the edit form has a sectok");
        let date = form_value(&html, "date").unwrap_or_default();
        let r = browser
            .post(
                "/doku.php",
                &[
                    ("sectok", sectok.as_str()),
                    ("id", id),
                    ("do", "save"),
                    ("date", date.as_str()),
                    ("prefix", "."),
                    ("suffix", ""),
                    ("changecheck", ""),
                    ("summary", "levee test"),
                    ("wikitext", text),
                ],
            )
            .await;
        assert_eq!(r.status, 302, "the edit was refused: {}", r.summary());
    }
}

impl Drop for DokuWiki {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Real applications from Debian's packages, installed into a temporary directory and
//! run on a private php-fpm, unchanged: their own headers, cookies and forms. And a
//! [`Browser`] that keeps cookies, as a person's browser would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::client::{Req, Resp};
use crate::levee::Levee;
use crate::phpfpm::PhpFpm;

/// A fresh directory under the system's temporary one, removed by its owner's `Drop`.
fn scratch(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "levee-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cp -rL from to`: a copy with the package's symlinks resolved.
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-rL")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "cp -rL {} {} failed",
        from.display(),
        to.display()
    );
}

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
        copy_tree(Path::new("/usr/share/dokuwiki"), &www);
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

/// The `value` of the first `<input name="NAME" value="...">` in `html`.
pub fn form_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\""))?;
    let rest = &html[at..];
    let v = rest.find("value=\"")? + "value=\"".len();
    let end = rest[v..].find('"')?;
    Some(rest[v..v + end].to_string())
}

/// A client that keeps the cookies it is given, as a browser does (no expiry dates:
/// a cookie set with `Max-Age=0`, an expiry in 1970 or the value `deleted` is removed).
pub struct Browser<'a> {
    levee: &'a Levee,
    pub cookies: BTreeMap<String, String>,
}

impl<'a> Browser<'a> {
    pub fn new(levee: &'a Levee) -> Browser<'a> {
        Browser {
            levee,
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> Option<String> {
        (!self.cookies.is_empty()).then(|| {
            self.cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn keep(&mut self, r: &Resp) {
        for line in r.header_all("set-cookie") {
            let mut parts = line.split(';');
            let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
                continue;
            };
            let gone = value == "deleted"
                || parts.any(|a| {
                    let a = a.trim().to_ascii_lowercase();
                    a == "max-age=0" || a.contains("1970")
                });
            if gone {
                self.cookies.remove(name.trim());
            } else {
                self.cookies
                    .insert(name.trim().to_string(), value.to_string());
            }
        }
    }

    pub async fn send(&mut self, mut req: Req) -> Resp {
        if let Some(c) = self.cookie_header() {
            req = req.header("cookie", &c);
        }
        let r = req.send(self.levee).await;
        self.keep(&r);
        r
    }

    pub async fn get(&mut self, path: &str) -> Resp {
        self.send(Req::get(path)).await
    }

    /// A POST of `form` as `application/x-www-form-urlencoded`.
    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Resp {
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.send(Req::post(path, body).header("content-type", "application/x-www-form-urlencoded"))
            .await
    }
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

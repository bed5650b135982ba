//! MediaWiki 1.39 from Debian's `mediawiki` package, run from where the package put it
//! (its 280 MB are not copied): `MW_CONFIG_FILE` points it at a LocalSettings.php that
//! its own installer wrote into a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{form_value, scratch, Browser, MariaDb};
use crate::phpfpm::PhpFpm;

const ROOT: &str = "/usr/share/mediawiki";

/// A wiki as `maintenance/install.php` leaves it, with an admin named
/// [`MediaWiki::ADMIN_NAME`] and one more article, [`MediaWiki::ARTICLE`].
pub struct MediaWiki {
    dir: PathBuf,
    fpm: Option<PhpFpm>,
    _db: MariaDb,
}

impl MediaWiki {
    pub const ADMIN_NAME: &'static str = "Ada Admin";
    pub const ADMIN_PASSWORD: &'static str = "levee-test-secret";
    pub const ARTICLE: &'static str = "Levee_article";

    /// Installs and starts it, its php-fpm told where LocalSettings.php is (for a web
    /// server that cannot say it). Call `require!(tools::MEDIAWIKI)` and
    /// `require!(tools::MARIADB)` first.
    pub fn start() -> MediaWiki {
        Self::start_with(true)
    }

    /// As a Debian setup runs it: php-fpm knows nothing of the wiki, and the web server
    /// sends `MW_CONFIG_FILE` as a FastCGI parameter ([`MediaWiki::levee_site`]).
    pub fn start_for_fastcgi_params() -> MediaWiki {
        Self::start_with(false)
    }

    fn start_with(fpm_env: bool) -> MediaWiki {
        let db = MariaDb::start();
        db.create_database("wiki");
        let dir = scratch("mediawiki");
        let settings = dir.join("LocalSettings.php");
        let out = Command::new("php")
            .arg(format!("{ROOT}/maintenance/install.php"))
            .args(["--dbtype", "mysql", "--dbname", "wiki"])
            .arg("--dbserver")
            .arg(format!("localhost:{}", db.socket().display()))
            .args(["--dbuser", MariaDb::USER, "--dbpass", MariaDb::PASSWORD])
            .args(["--installdbuser", MariaDb::USER])
            .args(["--installdbpass", MariaDb::PASSWORD])
            .args(["--server", "http://localhost", "--scriptpath", ""])
            .arg("--confpath")
            .arg(&dir)
            .args(["--pass", Self::ADMIN_PASSWORD, "--lang", "en"])
            .args(["levee test wiki", Self::ADMIN_NAME])
            .env("MW_CONFIG_FILE", &settings)
            .output()
            .expect("run php (apt-get install php8.2-cli php8.2-mysql)");
        assert!(
            out.status.success() && settings.is_file(),
            "the MediaWiki install failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cache = dir.join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        // What a site moved behind a proxy sets: its name from the request (the tests'
        // levee listens on a port chosen at run time), and writable places of its own.
        let mut local = std::fs::read_to_string(&settings).unwrap();
        local.push_str(&format!(
            "\n$wgServer = WebRequest::detectServer();\n\
             $wgCacheDirectory = '{cache}';\n\
             $wgUploadDirectory = '{cache}';\n\
             $wgEnableUploads = false;\n",
            cache = cache.display()
        ));
        std::fs::write(&settings, local).unwrap();
        Self::maintenance(
            &settings,
            "edit.php",
            &[Self::ARTICLE],
            "An article about levee, for readers.",
        );
        let mut fpm = PhpFpm::builder(ROOT);
        if fpm_env {
            fpm = fpm.env("MW_CONFIG_FILE", &settings.display().to_string());
        }
        let fpm = fpm.start();
        MediaWiki {
            dir,
            fpm: Some(fpm),
            _db: db,
        }
    }

    fn maintenance(settings: &Path, script: &str, args: &[&str], stdin: &str) {
        use std::io::Write;
        let mut child = Command::new("php")
            .arg(format!("{ROOT}/maintenance/{script}"))
            .args(args)
            .env("MW_CONFIG_FILE", settings)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "maintenance/{script} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `--backend` and `--root` for levee.
    pub fn levee_args(&self) -> Vec<String> {
        let fpm = self.fpm.as_ref().unwrap();
        vec![
            "--backend".into(),
            format!("fastcgi+unix:{}", fpm.socket_path().display()),
            "--root".into(),
            ROOT.into(),
        ]
    }

    /// levee's whole configuration for the wiki, as a site moved from nginx would have
    /// it: FastCGI to php-fpm, the package's directory as the root (static files from
    /// levee), `MW_CONFIG_FILE` as a FastCGI parameter, the mediawiki preset.
    pub fn levee_site(&self) -> String {
        let fpm = self.fpm.as_ref().unwrap();
        format!(
            "[[site]]\nname = \"wiki\"\ndefault = true\nbackend = \"fastcgi+unix:{}\"\nroot = \"{ROOT}\"\npreset = [\"mediawiki\"]\n[site.fastcgi_params]\nMW_CONFIG_FILE = \"{}\"\n",
            fpm.socket_path().display(),
            self.dir.join("LocalSettings.php").display()
        )
    }

    /// Logs the admin in through `browser`, as Special:UserLogin's form does.
    pub async fn login(browser: &mut Browser<'_>) {
        let form = browser
            .get("/index.php?title=Special:UserLogin&returnto=Main_Page")
            .await;
        assert_eq!(form.status, 200, "{}", form.summary());
        let token = form_value(&form.text(), "wpLoginToken").expect("a login token");
        let r = browser
            .post(
                "/index.php?title=Special:UserLogin&returnto=Main_Page",
                &[
                    ("title", "Special:UserLogin"),
                    ("wpName", Self::ADMIN_NAME),
                    ("wpPassword", Self::ADMIN_PASSWORD),
                    ("wploginattempt", "Log in"),
                    ("wpEditToken", "+\\"),
                    ("authAction", "login"),
                    ("force", ""),
                    ("wpLoginToken", token.as_str()),
                ],
            )
            .await;
        assert_eq!(r.status, 302, "the login was refused: {}", r.summary());
    }

    /// The admin's CSRF token, as the API hands it to scripts.
    pub async fn csrf_token(browser: &mut Browser<'_>) -> String {
        let r = browser
            .get("/api.php?action=query&meta=tokens&format=json")
            .await;
        let v: serde_json::Value = serde_json::from_str(&r.text())
            .unwrap_or_else(|e| panic!("api.php answered no JSON ({e}): {}", r.summary()));
        v["query"]["tokens"]["csrftoken"]
            .as_str()
            .unwrap_or_else(|| panic!("no csrftoken: {v}"))
            .to_string()
    }

    /// Saves `text` as page `title` through the API, as the visual editor does.
    pub async fn edit(browser: &mut Browser<'_>, title: &str, text: &str) {
        let token = Self::csrf_token(browser).await;
        let r = browser
            .post(
                "/api.php",
                &[
                    ("action", "edit"),
                    ("format", "json"),
                    ("title", title),
                    ("text", text),
                    ("token", token.as_str()),
                ],
            )
            .await;
        assert!(
            r.status == 200 && r.text().contains("\"result\":\"Success\""),
            "the edit was refused: {}",
            r.summary()
        );
    }
}

impl Drop for MediaWiki {
    fn drop(&mut self) {
        self.fpm.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! What each application's own nginx configuration keeps from the web, carried by its
//! preset, so that levee alone is as safe as the application behind nginx: the paths
//! never served nor executed (internal directories, installers once installed, backups),
//! the upload directories where PHP never runs, the index file, and where Debian's
//! package puts the assets (directories its symlinks lead into, `wp-content`).
//!
//! Sources, each application's documentation for nginx:
//! - WordPress: developer.wordpress.org/advanced-administration/server/web-server/nginx
//!   ("Deny access to any files with a .php extension in the uploads directory"), and
//!   Debian's /usr/share/doc/wordpress/examples/nginx-wordpress.conf (`wp-content` from
//!   /var/lib/wordpress);
//! - MediaWiki: mediawiki.org Manual:Short URL/Nginx and Manual:Security (no PHP under
//!   images/; cache, includes, languages, maintenance, serialized, tests, vendor denied;
//!   mw-config once installed);
//! - DokuWiki: dokuwiki.org/install:nginx (`data`, `conf`, `bin`, `inc`, `vendor`
//!   denied; `install.php` once installed; `index doku.php`);
//! - Drupal: nginx.com's Drupal recipe (private files, PHP under `sites/*/files`,
//!   `vendor` PHP denied);
//! - Rhymix (XE): its nginx.conf (PHP and the like under `files/attach|config|cache`,
//!   `files/env`, composer and repository files);
//! - gnuboard5: no PHP under `data/` (uploads), `data/session` and `data/cache`
//!   denied, `install/` once `data/dbconfig.php` exists;
//! - MoniWiki: its `data/` (pages, users) and `config.php`-side files, `monisetup.php`
//!   once configured.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::{ConfigError, Preset};

/// Denied for every preset: backups and dumps left in a document root are the classic
/// leak (`db.sql`, `wp-config.php.bak` is refused by the file server already).
const BACKUPS: &[&str] = &[
    "*.sql",
    "*.sql.gz",
    "*.sql.bz2",
    "*.sql.xz",
    "*.sql.zst",
    "*.bak",
    "*.old",
    "*.orig",
    "*.swp",
    "*.swo",
    "*.save",
    "*.dump",
    "/composer.json",
    "/composer.lock",
];

/// An installer, denied once the application is installed: any of `installed` (relative
/// to the document root, or absolute) exists.
#[derive(Debug, Clone, Copy)]
pub struct Installer {
    pub path: &'static str,
    pub installed: &'static [&'static str],
    /// A FastCGI parameter naming the configuration file, whose existence also says
    /// installed (MediaWiki's `MW_CONFIG_FILE`).
    pub param: Option<&'static str>,
}

/// A URL prefix served as files only from another directory, as Debian's packages lay
/// out (nginx `alias`): only when the site's root is `when_root` and `dir` exists.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    pub path: &'static str,
    pub when_root: &'static str,
    /// The directory the whole request path is looked up under (nginx `root`).
    pub root: &'static str,
}

/// One application's hardening, as its preset carries it.
#[derive(Debug, Clone, Copy)]
pub struct PresetHardening {
    /// Globs over the decoded path (`*` crosses `/`), never served nor executed.
    pub deny: &'static [&'static str],
    /// Directories (ending in `/`) where PHP never runs: uploads.
    pub no_php: &'static [&'static str],
    pub installers: &'static [Installer],
    /// Directories outside the root that the package's symlinks lead into.
    pub link_dirs: &'static [&'static str],
    /// Index files tried before the defaults for a directory URL.
    pub index: &'static [&'static str],
    pub aliases: &'static [Alias],
}

impl Preset {
    pub fn hardening(self) -> PresetHardening {
        const NONE: PresetHardening = PresetHardening {
            deny: &[],
            no_php: &[],
            installers: &[],
            link_dirs: &[],
            index: &[],
            aliases: &[],
        };
        match self {
            Preset::Wordpress => PresetHardening {
                deny: &[
                    "/wp-config-sample.php",
                    "/wp-content/debug.log",
                    "/wp-content/uploads/*.log",
                    "/readme.html",
                    "/license.txt",
                ],
                // Not wp-includes: its TinyMCE loader (wp-tinymce.php) is asked for directly.
                no_php: &["/wp-content/uploads/", "/wp-content/files/"],
                link_dirs: &[
                    "/usr/share/wordpress",
                    "/usr/share/javascript",
                    "/var/lib/wordpress/wp-content",
                ],
                aliases: &[Alias {
                    path: "/wp-content/",
                    when_root: "/usr/share/wordpress",
                    root: "/var/lib/wordpress",
                }],
                ..NONE
            },
            Preset::Mediawiki => PresetHardening {
                deny: &[
                    "/cache/*",
                    "/includes/*",
                    "/languages/*",
                    "/maintenance/*",
                    "/serialized/*",
                    "/tests/*",
                    "/vendor/*",
                    "/docs/*",
                    "/config/*",
                    "/extensions/*.php",
                    "/skins/*.php",
                ],
                no_php: &["/images/"],
                installers: &[Installer {
                    path: "/mw-config/",
                    installed: &["LocalSettings.php"],
                    param: Some("MW_CONFIG_FILE"),
                }],
                link_dirs: &["/var/lib/mediawiki"],
                ..NONE
            },
            Preset::Dokuwiki => PresetHardening {
                deny: &[
                    "/data/*",
                    "/conf/*",
                    "/bin/*",
                    "/inc/*",
                    "/vendor/*",
                    "/VERSION",
                ],
                no_php: &[],
                installers: &[Installer {
                    path: "/install.php",
                    installed: &[
                        "conf/local.php",
                        "conf/users.auth.php",
                        "/etc/dokuwiki/local.php",
                    ],
                    param: None,
                }],
                link_dirs: &["/var/lib/dokuwiki/lib"],
                index: &["doku.php"],
                ..NONE
            },
            Preset::Drupal => PresetHardening {
                deny: &[
                    "/sites/*/private/*",
                    "/vendor/*",
                    "/core/*.txt",
                    "/*.txt.gz",
                ],
                no_php: &["/sites/default/files/", "/sites/all/files/"],
                installers: &[Installer {
                    path: "/core/install.php",
                    installed: &["sites/default/settings.php"],
                    param: None,
                }],
                ..NONE
            },
            Preset::Xe => PresetHardening {
                deny: &[
                    "/files/env/*",
                    "/files/config/*",
                    "/files/cache/*",
                    "/files/member_extra_info/new_message_flags/*",
                    "/files/member_extra_info/point/*",
                    "/vendor/*",
                    "/common/framework/*",
                    "/codeception.*",
                    "/Gruntfile.js",
                    "/package.json",
                ],
                no_php: &["/files/"],
                ..NONE
            },
            Preset::Gnuboard => PresetHardening {
                deny: &[
                    "/data/session/*",
                    "/data/cache/*",
                    "/data/tmp/*",
                    "/data/log/*",
                ],
                no_php: &["/data/"],
                installers: &[Installer {
                    path: "/install/",
                    installed: &["data/dbconfig.php"],
                    param: None,
                }],
                ..NONE
            },
            Preset::Moniwiki => PresetHardening {
                deny: &[
                    "/data/*",
                    "/config.php.*",
                    "/secure.php",
                    "/lib/*.php",
                    "/plugin/*.php.orig",
                ],
                no_php: &["/pds/", "/data/"],
                installers: &[Installer {
                    path: "/monisetup.php",
                    installed: &["config.php"],
                    param: None,
                }],
                ..NONE
            },
        }
    }
}

/// A site's hardening: its presets', merged; empty without a preset.
#[derive(Debug, Clone)]
pub struct Hardening {
    deny: Option<GlobSet>,
    deny_patterns: Vec<String>,
    /// Directories where PHP never runs (ending in `/`).
    pub no_php: Vec<String>,
    /// Installer path prefix, and the files that say it is installed (absolute).
    pub installers: Vec<(String, Vec<PathBuf>)>,
    /// Directories links out of the root may lead into.
    pub link_dirs: Vec<PathBuf>,
    /// Index files the presets put first.
    pub index: Vec<String>,
    /// Whose rules these are, for the answer's text: "the wordpress preset".
    pub by: String,
}

impl Hardening {
    /// The presets' rules, with installers' relative files under `root`. `link_dirs`:
    /// the site's own `static.link_dirs`, added to the presets'.
    pub fn new(
        presets: &[Preset],
        root: Option<&Path>,
        link_dirs: Vec<PathBuf>,
        fastcgi_params: &[(String, String)],
    ) -> Result<Hardening, ConfigError> {
        let mut deny: Vec<String> = Vec::new();
        let mut h = Hardening {
            deny: None,
            deny_patterns: Vec::new(),
            no_php: Vec::new(),
            installers: Vec::new(),
            link_dirs,
            index: Vec::new(),
            by: presets
                .iter()
                .map(|p| format!("the {} preset", p.name()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        if !presets.is_empty() {
            deny.extend(BACKUPS.iter().map(|s| s.to_string()));
        }
        for p in presets {
            let ph = p.hardening();
            deny.extend(ph.deny.iter().map(|s| s.to_string()));
            h.no_php.extend(ph.no_php.iter().map(|s| s.to_string()));
            for i in ph.installers {
                let mut files: Vec<PathBuf> = i
                    .installed
                    .iter()
                    .map(|f| match (Path::new(f).is_absolute(), root) {
                        (true, _) | (false, None) => PathBuf::from(f),
                        (false, Some(root)) => root.join(f),
                    })
                    .collect();
                let named = fastcgi_params
                    .iter()
                    .filter(|(k, _)| Some(k.as_str()) == i.param)
                    .map(|(_, v)| PathBuf::from(v));
                files.extend(named);
                h.installers.push((i.path.to_string(), files));
            }
            h.link_dirs.extend(ph.link_dirs.iter().map(PathBuf::from));
            h.index.extend(ph.index.iter().map(|s| s.to_string()));
        }
        h.link_dirs.sort();
        h.link_dirs.dedup();
        deny.sort();
        deny.dedup();
        if !deny.is_empty() {
            let mut b = GlobSetBuilder::new();
            for p in &deny {
                let glob = GlobBuilder::new(p)
                    .case_insensitive(true)
                    .literal_separator(false)
                    .build()
                    .map_err(|e| {
                        ConfigError::invalid("preset", format!("`{p}` is not a glob: {e}"))
                    })?;
                b.add(glob);
            }
            h.deny = Some(
                b.build()
                    .map_err(|e| ConfigError::invalid("preset", e.to_string()))?,
            );
        }
        h.deny_patterns = deny;
        Ok(h)
    }

    /// Whether a decoded, normalized request path (`levee_static::decoded_path`) is
    /// never served nor executed: a denied path, or an installer of an application
    /// that is installed (one `stat` per request for an installer's path only).
    pub fn denies(&self, decoded: &str) -> bool {
        if self.deny.as_ref().is_some_and(|d| d.is_match(decoded)) {
            return true;
        }
        self.installers
            .iter()
            .any(|(path, files)| under(decoded, path) && files.iter().any(|f| f.exists()))
    }

    /// Whether PHP may run the script at this decoded path (`/wp-content/uploads/x.php`
    /// may not).
    pub fn runs_php(&self, script: &str) -> bool {
        !self.no_php.iter().any(|d| under(script, d))
    }

    /// The denied globs, for `--check`.
    pub fn deny_patterns(&self) -> &[String] {
        &self.deny_patterns
    }

    /// Nothing to check.
    pub fn is_empty(&self) -> bool {
        self.deny.is_none() && self.no_php.is_empty() && self.installers.is_empty()
    }
}

/// `path` is `prefix` or below it; a prefix ending in `/` also covers the directory
/// asked without its slash (`/mw-config` for `/mw-config/`). Case-insensitive, as the
/// globs: a false positive only denies.
fn under(path: &str, prefix: &str) -> bool {
    let bytes = path.as_bytes();
    let p = prefix.as_bytes();
    let starts = bytes.len() >= p.len() && bytes[..p.len()].eq_ignore_ascii_case(p);
    starts || (prefix.ends_with('/') && path.eq_ignore_ascii_case(&prefix[..prefix.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(p: Preset) -> Hardening {
        Hardening::new(&[p], Some(Path::new("/nonexistent-root")), vec![], &[]).unwrap()
    }

    #[test]
    fn each_presets_internal_paths_are_denied_and_its_pages_are_not() {
        let d = of(Preset::Dokuwiki);
        for denied in [
            "/inc/init.php",
            "/bin/indexer.php",
            "/vendor/autoload.php",
            "/conf/local.php",
            "/data/pages/start.txt",
            "/backup.sql",
            "/Dump.SQL",
            "/INC/init.php",
        ] {
            assert!(d.denies(denied), "{denied}");
        }
        for served in [
            "/doku.php",
            "/lib/exe/css.php",
            "/lib/tpl/dokuwiki/images/logo.png",
            "/index.php",
        ] {
            assert!(!d.denies(served), "{served}");
        }
        let m = of(Preset::Mediawiki);
        assert!(m.denies("/maintenance/update.php"));
        assert!(m.denies("/extensions/Foo/Foo.php"));
        assert!(!m.denies("/extensions/Foo/foo.css"));
        assert!(!m.runs_php("/images/a/ab/shell.php"));
        assert!(m.runs_php("/index.php"));
        let w = of(Preset::Wordpress);
        assert!(!w.runs_php("/wp-content/uploads/2026/11/shell.php"));
        assert!(w.runs_php("/wp-admin/admin-ajax.php"));
    }

    #[test]
    fn an_installer_is_denied_once_installed() {
        let dir = tempfile::tempdir().unwrap();
        let h = Hardening::new(&[Preset::Mediawiki], Some(dir.path()), vec![], &[]).unwrap();
        assert!(!h.denies("/mw-config/index.php"), "not installed yet");
        std::fs::write(dir.path().join("LocalSettings.php"), "<?php").unwrap();
        assert!(h.denies("/mw-config/index.php"));
        // Or where MW_CONFIG_FILE says it is.
        let elsewhere = dir.path().join("etc/LocalSettings.php");
        let param = [(
            "MW_CONFIG_FILE".to_string(),
            elsewhere.display().to_string(),
        )];
        let h = Hardening::new(
            &[Preset::Mediawiki],
            Some(&dir.path().join("www")),
            vec![],
            &param,
        )
        .unwrap();
        assert!(!h.denies("/mw-config/"));
        std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
        std::fs::write(&elsewhere, "<?php").unwrap();
        assert!(h.denies("/mw-config/"));
        assert!(h.denies("/mw-config"));
        assert!(!h.denies("/mw-configuration"));
    }

    #[test]
    fn no_preset_no_rules() {
        let h = Hardening::new(&[], None, vec![], &[]).unwrap();
        assert!(h.is_empty());
        assert!(!h.denies("/backup.sql"));
    }
}

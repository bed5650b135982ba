//! `levee doctor --root DIR`: what levee alone would serve or run from a document root
//! that the application's own nginx configuration keeps from the web, and the PHP files
//! found where PHP never runs (an upload directory holding a script is how a web shell
//! looks). The rules are the presets' (levee-config's hardening.rs): the same ones
//! `levee serve` applies, so the report says exactly what the preset changes.

use std::path::{Path, PathBuf};

use levee_config::{Hardening, Preset};
use serde::Serialize;

/// Files looked at, at most: a root with more is reported as cut short.
const MAX_FILES: usize = 200_000;
/// Examples shown per finding.
const EXAMPLES: usize = 5;

/// Which application a document root holds, from files only it has.
pub fn detect(root: &Path) -> Option<Preset> {
    let has = |p: &str| root.join(p).exists();
    if has("wp-login.php") && has("wp-includes") {
        Some(Preset::Wordpress)
    } else if has("includes/WebStart.php") {
        Some(Preset::Mediawiki)
    } else if has("doku.php") {
        Some(Preset::Dokuwiki)
    } else if has("core/lib/Drupal.php") || has("includes/bootstrap.inc") {
        Some(Preset::Drupal)
    } else if has("common/autoload.php") || has("config/config.inc.php") {
        Some(Preset::Xe)
    } else if has("bbs/board.php") || has("common.php") && has("adm") {
        Some(Preset::Gnuboard)
    } else if has("wiki.php") && has("monisetup.php") {
        Some(Preset::Moniwiki)
    } else {
        None
    }
}

/// A kind of file the preset keeps from the web, how many, and a few of them.
#[derive(Debug, Default, Serialize)]
pub struct Finding {
    pub count: usize,
    pub examples: Vec<String>,
}

impl Finding {
    fn add(&mut self, path: String) {
        self.count += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(path);
        }
    }
}

/// What `--root` found.
#[derive(Debug, Serialize)]
pub struct RootReport {
    pub root: PathBuf,
    pub presets: Vec<&'static str>,
    /// The preset was found from the files (no `--preset`).
    pub detected: bool,
    /// Files the preset denies that levee without it would serve or run.
    pub denied: Finding,
    /// PHP files under directories where PHP never runs.
    pub php_in_uploads: Finding,
    /// Links out of the root the preset follows (`link -> target`).
    pub links_followed: Finding,
    /// Links out of the root refused with or without the preset.
    pub links_refused: Finding,
    /// More files than `MAX_FILES`: the walk stopped there.
    pub cut_short: bool,
}

/// Walks `root` (links into the preset's directories followed once, others not) and
/// sorts what it finds by the presets' rules.
pub fn audit(root: &Path, presets: &[Preset], detected: bool) -> Result<RootReport, String> {
    if !root.is_dir() {
        return Err(format!(
            "--root {}: not a directory; give the site's document root (where index.php is)",
            root.display()
        ));
    }
    let rules = Hardening::new(presets, Some(root), Vec::new(), &[]).map_err(|e| e.to_string())?;
    let links: Vec<PathBuf> = rules
        .link_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    let mut report = RootReport {
        root: root.to_path_buf(),
        presets: presets.iter().map(|p| p.name()).collect(),
        detected,
        denied: Finding::default(),
        php_in_uploads: Finding::default(),
        links_followed: Finding::default(),
        links_refused: Finding::default(),
        cut_short: false,
    };
    let mut seen = 0usize;
    // (directory on disk, its URL path ending in '/', reached through a link)
    let mut stack: Vec<(PathBuf, String, bool)> = vec![(root.to_path_buf(), "/".into(), false)];
    while let Some((dir, url, via_link)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_FILES {
                report.cut_short = true;
                return Ok(report);
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            // Hidden files are refused by the file server whatever the preset says.
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let file_url = format!("{url}{name}");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                let inside = target.starts_with(root.canonicalize().unwrap_or_default());
                if !inside {
                    let line = format!("{file_url} -> {}", target.display());
                    if links.iter().any(|d| target.starts_with(d)) {
                        report.links_followed.add(line);
                    } else if levee_static::php_script(&file_url).is_some() {
                        // A script is php-fpm's to open, never served as a file.
                        continue;
                    } else {
                        report.links_refused.add(line);
                        continue;
                    }
                }
                if target.is_dir() && !via_link {
                    stack.push((target, format!("{file_url}/"), true));
                    continue;
                }
            } else if kind.is_dir() {
                stack.push((path, format!("{file_url}/"), via_link));
                continue;
            }
            if rules.denies(&file_url) {
                report.denied.add(file_url);
            } else if levee_static::php_script(&file_url).is_some() && !rules.runs_php(&file_url) {
                report.php_in_uploads.add(file_url);
            }
        }
    }
    Ok(report)
}

/// The report as text.
pub fn text(r: &RootReport) -> String {
    let mut out = String::new();
    let how = if r.detected {
        "found from its files"
    } else {
        "as given"
    };
    out.push_str(&format!(
        "levee doctor --root {} (preset {}, {how})\n\n",
        r.root.display(),
        if r.presets.is_empty() {
            "none".to_string()
        } else {
            r.presets.join(", ")
        }
    ));
    let section = |out: &mut String, title: &str, f: &Finding| {
        if f.count == 0 {
            return;
        }
        out.push_str(&format!("{title}: {}\n", f.count));
        for e in &f.examples {
            out.push_str(&format!("  {e}\n"));
        }
        if f.count > f.examples.len() {
            out.push_str(&format!("  ... and {} more\n", f.count - f.examples.len()));
        }
        out.push('\n');
    };
    section(
        &mut out,
        "PHP files where PHP never runs (uploads): look at each, a script here is how a web shell looks",
        &r.php_in_uploads,
    );
    section(
        &mut out,
        "Served or run by levee without the preset, kept from the web by the application's nginx guide and by the preset (403)",
        &r.denied,
    );
    section(
        &mut out,
        "Links out of the root the preset follows (Debian's layout)",
        &r.links_followed,
    );
    section(
        &mut out,
        "Links out of the root that are refused (add the directory to [static] link_dirs if it is meant to be public)",
        &r.links_refused,
    );
    if r.presets.is_empty() {
        out.push_str("No application recognised: give --preset NAME (wordpress, mediawiki, dokuwiki, drupal, rhymix, gnuboard, moniwiki) to check its rules.\n");
    } else if r.denied.count + r.php_in_uploads.count == 0 {
        out.push_str("Nothing found that the preset keeps from the web.\n");
    } else {
        out.push_str(&format!(
            "Serve it with `preset = [\"{}\"]` (or --preset {}): every path above is then refused before php-fpm or the disk.\n",
            r.presets.join("\", \""),
            r.presets.join(" --preset ")
        ));
    }
    if r.cut_short {
        out.push_str(&format!("(stopped after {MAX_FILES} files)\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wordpress_root_with_a_shell_in_its_uploads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "wp-login.php",
            "index.php",
            "wp-includes/version.php",
            "backup.sql",
            "wp-content/uploads/2026/11/photo.jpg",
            "wp-content/uploads/2026/11/shell.php",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let preset = detect(root).unwrap();
        assert_eq!(preset, Preset::Wordpress);
        let r = audit(root, &[preset], true).unwrap();
        assert_eq!(
            r.php_in_uploads.examples,
            ["/wp-content/uploads/2026/11/shell.php"]
        );
        assert_eq!(r.denied.examples, ["/backup.sql"]);
        let t = text(&r);
        assert!(t.contains("web shell") && t.contains("/backup.sql"), "{t}");
    }
}

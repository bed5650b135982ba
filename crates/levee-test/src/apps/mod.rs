//! Real applications from Debian's packages, installed into a temporary directory and
//! run on a private php-fpm, unchanged: their own headers, cookies and forms. And a
//! [`Browser`] that keeps cookies, as a person's browser would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::client::{Req, Resp};
use crate::levee::Levee;

mod dokuwiki;
mod mariadb;
mod mediawiki;
mod wordpress;

pub use dokuwiki::DokuWiki;
pub use mariadb::MariaDb;
pub use mediawiki::MediaWiki;
pub use wordpress::WordPress;

/// A fresh directory under the system's temporary one, removed by its owner's `Drop`.
pub(crate) fn scratch(what: &str) -> PathBuf {
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
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    cp("-rL", from, to);
}

/// `cp -a from to`: a copy with the package's symlinks kept as they are (Debian's
/// layouts, links into /var/lib), as installed.
pub(crate) fn copy_tree_keeping_links(from: &Path, to: &Path) {
    cp("-a", from, to);
}

fn cp(flags: &str, from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg(flags)
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "cp {flags} {} {} failed",
        from.display(),
        to.display()
    );
}

/// The same-site images, styles, scripts and icons an HTML page references (`src` of
/// `img`/`script`, `href` of `link` with rel stylesheet, icon, preload or
/// modulepreload), as paths with their query; `host`: the site's own absolute URLs'
/// host (`127.0.0.1:PORT`).
pub fn page_assets(html: &str, host: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let attr = match name.as_str() {
            "img" | "script" => "src",
            "link" => {
                let rel = attribute(tag, "rel")
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let asset = rel
                    .split_whitespace()
                    .any(|r| matches!(r, "stylesheet" | "icon" | "preload" | "modulepreload"));
                if !asset {
                    continue;
                }
                "href"
            }
            _ => continue,
        };
        let Some(url) = attribute(tag, attr) else {
            continue;
        };
        let url = url.replace("&amp;", "&");
        let path = if let Some(p) = url
            .strip_prefix(&format!("http://{host}"))
            .or_else(|| url.strip_prefix(&format!("//{host}")))
        {
            p.to_string()
        } else if url.starts_with('/') && !url.starts_with("//") {
            url
        } else {
            continue;
        };
        let path = path.split('#').next().unwrap_or_default().to_string();
        if !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// The value of `name="..."` (or `'...'`) in a tag's text.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&format!("{name}=")) {
        let at = from + i;
        from = at + name.len() + 1;
        // A whole attribute name: `data-src=` is not `src=`.
        if at > 0 && !lower.as_bytes()[at - 1].is_ascii_whitespace() {
            continue;
        }
        let value = &tag[from..];
        let quote = value.chars().next()?;
        if quote == '"' || quote == '\'' {
            let inner = &value[1..];
            return Some(inner[..inner.find(quote)?].to_string());
        }
        let end = value
            .find(|c: char| c.is_ascii_whitespace() || c == '/')
            .unwrap_or(value.len());
        return Some(value[..end].to_string());
    }
    None
}

/// The `value` of the first `<input>` named `name` in `html`, whichever order the tag
/// writes its attributes in (`&amp;`, `&quot;` and `&#039;` decoded).
pub fn form_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\""))?;
    let tag_start = html[..at].rfind('<')?;
    let tag_end = at + html[at..].find('>')?;
    let tag = &html[tag_start..tag_end];
    let v = tag.find("value=\"")? + "value=\"".len();
    let end = tag[v..].find('"')?;
    Some(
        tag[v..v + end]
            .replace("&quot;", "\"")
            .replace("&#039;", "'")
            .replace("&amp;", "&"),
    )
}

/// One `Set-Cookie` line applied to a cookie jar as a browser would, without expiry
/// dates: a cookie set with `Max-Age=0`, an expiry in 1970 or the value `deleted` is
/// removed, any other is kept (also for the storm benchmark's clients).
pub fn keep_set_cookie(cookies: &mut BTreeMap<String, String>, line: &str) {
    let mut parts = line.split(';');
    let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
        return;
    };
    let gone = value == "deleted"
        || parts.any(|a| {
            let a = a.trim().to_ascii_lowercase();
            a == "max-age=0" || a.contains("1970")
        });
    if gone {
        cookies.remove(name.trim());
    } else {
        cookies.insert(name.trim().to_string(), value.trim().to_string());
    }
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
            keep_set_cookie(&mut self.cookies, line);
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

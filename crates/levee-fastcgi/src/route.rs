//! Which file answers a request path: what nginx does with
//!
//! ```nginx
//! location / { index index.php index.html; try_files $uri $uri/ /index.php?$args; }
//! location ~ [^/]\.php(/|$) { fastcgi_split_path_info ^(.+?\.php)(/.*)$;
//!                             try_files $fastcgi_script_name =404; ... }
//! location ~ /\.(?!well-known) { deny all; }
//! ```

use std::io;
use std::path::{Path, PathBuf};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A regular file to serve as it is.
    Static(PathBuf),
    /// A PHP script to run: `script_name` and `path_info` for [`CgiRequest`](crate::CgiRequest),
    /// `filename` is the file on disk (`SCRIPT_FILENAME`).
    Script {
        script_name: String,
        path_info: String,
        filename: PathBuf,
    },
    /// Refused: path traversal, an encoded `/` or NUL, a malformed escape, a dotfile
    /// (`.env`, `.git/`, `.htaccess`; `.well-known/` is allowed), or an unreadable file.
    Forbidden,
    /// No such script, and no front controller to hand the request to.
    NotFound,
}

/// Decides, from the files under `document_root`, what answers `uri_path` (the path of the
/// request target, still percent-encoded, without the query):
///
/// 1. The path is decoded once. `..`, `.` and other segments starting with a dot are
///    [`Route::Forbidden`] (except `.well-known`), as are `%2F` (an encoded `/` would let a
///    segment hide a separator), NUL bytes and malformed escapes.
/// 2. If a segment ends in `.php` (in any case, so `X.PHP` is never served as source) and
///    names a regular file, that is the script and the rest of the path is `PATH_INFO`
///    (`/index.php/a/b` → `/index.php` + `/a/b`). A `.php` segment that does not exist is
///    [`Route::NotFound`]: nothing else may run in its name (unlike php's
///    `cgi.fix_pathinfo`, so `/uploads/evil.jpg/x.php` never runs `evil.jpg`).
/// 3. A regular file is [`Route::Static`]. A directory is answered by its `index` (a
///    script) or `index.html` (static), whether or not the path ends in `/`; nginx would
///    first redirect `/dir` to `/dir/`, which is up to the caller.
/// 4. Anything else goes to the front controller `/{index}` (`PATH_INFO` empty; the
///    application reads the original path from `REQUEST_URI`), or is
///    [`Route::NotFound`] if there is none.
///
/// Symbolic links are followed, as nginx does by default. This looks at the file system,
/// so it blocks: call it from `spawn_blocking` where a stat may be slow.
pub fn route(document_root: &Path, uri_path: &str, index: &str) -> Route {
    let Some(decoded) = decode_path(uri_path) else {
        return Route::Forbidden;
    };
    let Ok(decoded) = String::from_utf8(decoded) else {
        // File names that are not UTF-8 cannot be named by a script_name.
        return Route::NotFound;
    };
    let segments: Vec<&str> = decoded.split('/').filter(|s| !s.is_empty()).collect();
    if segments.iter().any(|s| hidden(s)) {
        return Route::Forbidden;
    }
    let trailing_slash = decoded.ends_with('/') && !segments.is_empty();

    for (i, segment) in segments.iter().enumerate() {
        if !is_php(segment) {
            continue;
        }
        let script = &segments[..=i];
        let filename = join(document_root, script);
        match kind(&filename) {
            Kind::File => {
                let rest = &segments[i + 1..];
                let mut path_info = String::new();
                for s in rest {
                    path_info.push('/');
                    path_info.push_str(s);
                }
                if trailing_slash {
                    path_info.push('/');
                }
                return Route::Script {
                    script_name: absolute(script),
                    path_info,
                    filename,
                };
            }
            // A directory named like a script: keep looking further down.
            Kind::Dir => continue,
            Kind::Denied | Kind::Other => return Route::Forbidden,
            Kind::Missing => return Route::NotFound,
        }
    }

    let path = join(document_root, &segments);
    match kind(&path) {
        Kind::File => return Route::Static(path),
        Kind::Dir => {
            for name in [index, "index.html"] {
                let Some(idx) = index_segments(name) else {
                    continue;
                };
                let mut with_index = segments.clone();
                with_index.extend(idx);
                if let Some(r) = file_route(document_root, &with_index) {
                    return r;
                }
            }
        }
        Kind::Denied | Kind::Other => return Route::Forbidden,
        Kind::Missing => {}
    }
    match index_segments(index) {
        Some(idx) => file_route(document_root, &idx).unwrap_or(Route::NotFound),
        None => Route::NotFound,
    }
}

/// The route to an existing regular file: a script if it ends in `.php`, else static.
fn file_route(root: &Path, segments: &[&str]) -> Option<Route> {
    let filename = join(root, segments);
    if kind(&filename) != Kind::File {
        return None;
    }
    let last = segments.last().copied().unwrap_or("");
    Some(if is_php(last) {
        Route::Script {
            script_name: absolute(segments),
            path_info: String::new(),
            filename,
        }
    } else {
        Route::Static(filename)
    })
}

/// `index` as path segments, `None` if it is empty or would step outside the directory.
fn index_segments(index: &str) -> Option<Vec<&str>> {
    let segs: Vec<&str> = index.split('/').filter(|s| !s.is_empty()).collect();
    (!segs.is_empty() && !segs.iter().any(|s| hidden(s))).then_some(segs)
}

/// Dot segments: `.`, `..` (traversal) and dotfiles, except `.well-known` (RFC 8615, used
/// by ACME certificate challenges).
fn hidden(segment: &str) -> bool {
    segment.starts_with('.') && segment != ".well-known"
}

fn is_php(segment: &str) -> bool {
    let b = segment.as_bytes();
    b.len() > 4 && b[b.len() - 4..].eq_ignore_ascii_case(b".php")
}

fn absolute(segments: &[&str]) -> String {
    let mut s = String::new();
    for seg in segments {
        s.push('/');
        s.push_str(seg);
    }
    s
}

fn join(root: &Path, segments: &[&str]) -> PathBuf {
    let mut p = root.to_path_buf();
    p.extend(segments);
    p
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Missing,
    Denied,
    /// Sockets, FIFOs, devices: never served.
    Other,
}

fn kind(path: &Path) -> Kind {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Kind::File,
        Ok(m) if m.is_dir() => Kind::Dir,
        Ok(_) => Kind::Other,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Kind::Denied,
        // NotFound, and ENOTDIR when a file is used as a directory (`/style.css/x`).
        Err(_) => Kind::Missing,
    }
}

/// Percent-decodes a path once. `None` for a path that does not start with `/`, a
/// malformed escape, an encoded `/` or a NUL byte.
fn decode_path(path: &str) -> Option<Vec<u8>> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = match bytes[i] {
            b'%' => {
                let hi = hex(*bytes.get(i + 1)?)?;
                let lo = hex(*bytes.get(i + 2)?)?;
                i += 3;
                let b = hi << 4 | lo;
                if b == b'/' {
                    return None;
                }
                b
            }
            b => {
                i += 1;
                b
            }
        };
        if b == 0 {
            return None;
        }
        out.push(b);
    }
    Some(out)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::fs;

    use super::*;

    /// A throwaway document root, removed on drop.
    struct Root(PathBuf);

    impl Root {
        fn new(name: &str) -> Root {
            let dir = std::env::temp_dir()
                .join(format!("levee-fastcgi-route-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            for f in [
                "index.php",
                "wp-login.php",
                "style.css",
                "blog/index.php",
                "blog/feed.php",
                "docs/index.html",
                "dir.php/inner.php",
                "uploads/evil.jpg",
                "UPPER.PHP",
                ".env",
                ".git/config",
                ".well-known/acme-challenge/token",
                "empty/.keep",
                "caf\u{e9}.txt",
            ] {
                let p = dir.join(f);
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(&p, "x").unwrap();
            }
            Root(dir)
        }

        fn route(&self, path: &str) -> Route {
            route(&self.0, path, "index.php")
        }

        fn script(&self, name: &str, info: &str) -> Route {
            Route::Script {
                script_name: name.to_string(),
                path_info: info.to_string(),
                filename: self.0.join(name.trim_start_matches('/')),
            }
        }

        fn file(&self, name: &str) -> Route {
            Route::Static(self.0.join(name))
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn scripts_and_path_info() {
        let r = Root::new("scripts");
        assert_eq!(r.route("/wp-login.php"), r.script("/wp-login.php", ""));
        assert_eq!(r.route("/index.php/a/b"), r.script("/index.php", "/a/b"));
        assert_eq!(r.route("/index.php/a/b/"), r.script("/index.php", "/a/b/"));
        assert_eq!(r.route("/index.php/"), r.script("/index.php", "/"));
        assert_eq!(
            r.route("/blog/feed.php/rss2"),
            r.script("/blog/feed.php", "/rss2")
        );
        assert_eq!(
            r.route("/index.php/x.php/y"),
            r.script("/index.php", "/x.php/y"),
            "the first existing script wins"
        );
        assert_eq!(
            r.route("/dir.php/inner.php/z"),
            r.script("/dir.php/inner.php", "/z"),
            "a directory named .php is a directory"
        );
        assert_eq!(r.route("//blog//feed.php"), r.script("/blog/feed.php", ""));
        assert_eq!(r.route("/index%2Ephp/%61"), r.script("/index.php", "/a"));
        assert_eq!(
            r.route("/UPPER.PHP"),
            r.script("/UPPER.PHP", ""),
            "never as source"
        );
    }

    #[test]
    fn missing_scripts_are_not_found_and_nothing_runs_in_their_name() {
        let r = Root::new("missing");
        assert_eq!(r.route("/nope.php"), Route::NotFound);
        assert_eq!(r.route("/blog/nope.php/x"), Route::NotFound);
        assert_eq!(r.route("/uploads/evil.jpg/x.php"), Route::NotFound);
        assert_eq!(r.route("/style.css/x.php"), Route::NotFound);
    }

    #[test]
    fn static_files_directories_and_front_controller() {
        let r = Root::new("static");
        assert_eq!(r.route("/style.css"), r.file("style.css"));
        assert_eq!(r.route("/uploads/evil.jpg"), r.file("uploads/evil.jpg"));
        assert_eq!(r.route("/caf%C3%A9.txt"), r.file("caf\u{e9}.txt"));
        assert_eq!(r.route("/"), r.script("/index.php", ""));
        assert_eq!(r.route("/blog/"), r.script("/blog/index.php", ""));
        assert_eq!(r.route("/blog"), r.script("/blog/index.php", ""));
        assert_eq!(r.route("/docs/"), r.file("docs/index.html"));
        // No index in the directory, no such file: the front controller.
        assert_eq!(r.route("/uploads/"), r.script("/index.php", ""));
        assert_eq!(r.route("/2024/01/hello-world/"), r.script("/index.php", ""));
        assert_eq!(r.route("/style.css/more"), r.script("/index.php", ""));
        assert_eq!(r.route("/caf%E9.txt"), Route::NotFound, "not UTF-8");
    }

    #[test]
    fn without_a_front_controller_missing_paths_are_not_found() {
        let r = Root::new("nofront");
        assert_eq!(route(&r.0, "/pretty/url", "app.php"), Route::NotFound);
        assert_eq!(route(&r.0, "/style.css", "app.php"), r.file("style.css"));
        assert_eq!(route(&r.0, "/docs/", "app.php"), r.file("docs/index.html"));
        assert_eq!(route(&r.0, "/pretty", "../index.php"), Route::NotFound);
        assert_eq!(route(&r.0, "/pretty", ""), Route::NotFound);
    }

    #[test]
    fn traversal_is_forbidden_also_when_encoded() {
        let r = Root::new("traversal");
        for path in [
            "/../etc/passwd",
            "/blog/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/%2E%2E/etc/passwd",
            "/.%2e/etc/passwd",
            "/blog/..",
            "/index.php/../../etc/passwd",
            "/..%2fetc%2fpasswd",
            "/blog%2f..%2f..%2fetc/passwd",
            "/%2fetc/passwd",
            "/./index.php",
            "/index.php%00.txt",
            "/style.css%00",
            "/bad%zz",
            "/bad%4",
            "relative/path",
            "",
            "*",
        ] {
            assert_eq!(r.route(path), Route::Forbidden, "{path}");
        }
        // Decoded once only: a literal `%2e%2e` segment is a file name, not traversal.
        assert_eq!(r.route("/%252e%252e/x"), r.script("/index.php", ""));
    }

    #[test]
    fn dotfiles_are_forbidden_except_well_known() {
        let r = Root::new("dotfiles");
        for path in [
            "/.env",
            "/.git/config",
            "/.git/",
            "/%2Eenv",
            "/empty/.keep",
            "/.htaccess",
        ] {
            assert_eq!(r.route(path), Route::Forbidden, "{path}");
        }
        assert_eq!(
            r.route("/.well-known/acme-challenge/token"),
            r.file(".well-known/acme-challenge/token")
        );
    }

    #[test]
    fn decode_path_once() {
        assert_eq!(decode_path("/a%20b").unwrap(), b"/a b");
        assert_eq!(decode_path("/a+b").unwrap(), b"/a+b");
        assert_eq!(decode_path("/%41%7e").unwrap(), b"/A~");
        assert_eq!(decode_path("/%25").unwrap(), b"/%");
        assert!(decode_path("/%2F").is_none());
        assert!(decode_path("/%00").is_none());
        assert!(decode_path("/%").is_none());
        assert!(decode_path("/%g0").is_none());
    }
}

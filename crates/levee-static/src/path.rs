//! From the request target to a path below the document root.
//!
//! Everything here is decided on the request alone, before the filesystem is touched:
//! each segment is percent-decoded on its own, so that an encoded `/` (`%2f`) cannot
//! join two segments into a traversal, and a segment that could climb out of the root
//! (`..`), name a hidden file (`.env`, `.git`) or be PHP source is refused. The same
//! rules are applied again to the real path a symlink leads to ([`check_real`]).

use std::path::{Component, Path};

use percent_encoding::percent_decode_str;

/// Extensions that PHP-FPM may execute (Debian's and cPanel's handlers, plus `phar` and
/// `phps`). A file with one of them is never sent as it is: its source holds secrets.
const PHP_EXTENSIONS: &[&str] = &[
    "php", "php3", "php4", "php5", "php7", "php8", "pht", "phtml", "phar", "phps",
];

/// The only dot-directory that is public: RFC 8615 (ACME challenges, security.txt).
const WELL_KNOWN: &str = ".well-known";

/// What the request path alone says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A candidate for a static file or directory.
    Path(RequestPath),
    /// Traversal, a hidden file, a NUL or backslash, a PHP backup: refused.
    Forbidden,
    /// Not a path we could ever serve (`*`, a name that is not UTF-8).
    NotFound,
    /// A PHP script, by name: the decoded path up to and including the script, so
    /// `/index.php/feed` gives `/index.php` (the rest is PATH_INFO for the caller).
    Php(String),
}

/// A decoded request path whose segments passed [`Parsed`]'s checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestPath {
    /// Decoded segments, none empty, none containing `/`, `\` or NUL.
    pub segments: Vec<String>,
    /// The path ended with `/`: a directory was asked for.
    pub trailing_slash: bool,
    /// The raw (still percent-encoded) path with empty segments removed, for the
    /// `Location` of a directory redirect. Collapsing `//` matters: a redirect to
    /// `//evil.example/` would leave the site.
    pub normalized_raw: String,
}

impl RequestPath {
    /// The memory-cache key: the decoded path, with the final slash kept (`/a` and `/a/`
    /// resolve differently). Segments hold no `/`, so the key is unambiguous.
    pub fn key(&self) -> String {
        let mut key = String::with_capacity(self.normalized_raw.len() + 1);
        for s in &self.segments {
            key.push('/');
            key.push_str(s);
        }
        if self.trailing_slash || self.segments.is_empty() {
            key.push('/');
        }
        key
    }

    /// The decoded path of `name` inside the requested directory, e.g. `/blog/index.php`.
    pub fn child(&self, name: &str) -> String {
        let mut script = self.key();
        if !script.ends_with('/') {
            script.push('/');
        }
        script.push_str(name);
        script
    }
}

pub(crate) fn parse(raw: &str) -> Parsed {
    let RequestPath {
        segments,
        trailing_slash,
        normalized_raw,
    } = match split(raw) {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    match check(segments.iter().map(String::as_str)) {
        Verdict::Allowed => Parsed::Path(RequestPath {
            segments,
            trailing_slash,
            normalized_raw,
        }),
        Verdict::Forbidden => Parsed::Forbidden,
        Verdict::Php(upto) => {
            let mut script = String::new();
            for s in segments.iter().take(upto + 1) {
                script.push('/');
                script.push_str(s);
            }
            Parsed::Php(script)
        }
    }
}

/// The decoded segments of a request path, before the checks on what they name.
pub(crate) fn parse_segments(raw: &str) -> Option<RequestPath> {
    split(raw).ok()
}

fn split(raw: &str) -> Result<RequestPath, Parsed> {
    let Some(rest) = raw.strip_prefix('/') else {
        // `OPTIONS *` and the like name no file.
        return Err(Parsed::NotFound);
    };
    let trailing_slash = rest.is_empty() || rest.ends_with('/');
    let mut segments = Vec::new();
    let mut normalized_raw = String::with_capacity(raw.len());
    for raw_segment in rest.split('/').filter(|s| !s.is_empty()) {
        let decoded: Vec<u8> = percent_decode_str(raw_segment).collect();
        // `%2f` would let two segments pass the checks apart and traverse together;
        // a backslash is a separator on Windows and in some PHP code; NUL ends a C path.
        if decoded.iter().any(|&b| matches!(b, b'/' | b'\\' | 0)) {
            return Err(Parsed::Forbidden);
        }
        let Ok(segment) = String::from_utf8(decoded) else {
            // Also refuses overlong encodings such as `%c0%ae` for `.`.
            return Err(Parsed::NotFound);
        };
        segments.push(segment);
        normalized_raw.push('/');
        normalized_raw.push_str(raw_segment);
    }
    if trailing_slash {
        normalized_raw.push('/');
    }
    Ok(RequestPath {
        segments,
        trailing_slash,
        normalized_raw,
    })
}

/// The same rules for the real path of a file, relative to the real root, after symlinks
/// were followed: a link `notes.txt -> wp-config.php` or `x -> .git` must not expose
/// what its target's own URL would not. Here a PHP target is refused, not routed: the
/// client did not ask for a script.
pub(crate) fn check_real(relative: &Path) -> bool {
    let mut names = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(name) => match name.to_str() {
                Some(n) => names.push(n),
                None => return false,
            },
            // A canonical relative path has none of these; refuse if it ever does.
            _ => return false,
        }
    }
    check(names.into_iter()) == Verdict::Allowed
}

/// Whether a file name is a PHP script that PHP-FPM would run (`index.php`, `a.PHTML`).
pub(crate) fn is_php_script(name: &str) -> bool {
    php_kind(name) == PhpKind::Script
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Allowed,
    Forbidden,
    /// The segment at this index is a PHP script.
    Php(usize),
}

fn check<'a>(segments: impl Iterator<Item = &'a str>) -> Verdict {
    for (i, segment) in segments.enumerate() {
        // Covers `.` and `..` as well as `.env`, `.git`, `.htaccess`, `.user.ini`.
        if segment.starts_with('.') && !(i == 0 && segment == WELL_KNOWN) {
            return Verdict::Forbidden;
        }
        match php_kind(segment) {
            PhpKind::None => {}
            // A later segment is PATH_INFO (`/index.php/feed`): still the script's.
            PhpKind::Script => return Verdict::Php(i),
            PhpKind::Leak => return Verdict::Forbidden,
        }
    }
    Verdict::Allowed
}

#[derive(Debug, PartialEq, Eq)]
enum PhpKind {
    None,
    /// `x.php`: for PHP-FPM.
    Script,
    /// `wp-config.php.bak`, `index.php~`, `shell.php.jpg`: PHP source under another
    /// name (editor backups, the double-extension upload trick). Never sent.
    Leak,
}

/// Whether a raw request path names a PHP script by its plain segments (no escapes, no
/// hidden segment before it): decided without allocating, for the request path's
/// shortcut past the file server (`Php` is all it would answer).
pub(crate) fn names_php_script(raw: &str) -> bool {
    if raw.contains(['%', '\\', '\0']) {
        return false;
    }
    for segment in raw.split('/').filter(|s| !s.is_empty()) {
        if segment.starts_with('.') {
            return false;
        }
        match php_kind(segment) {
            PhpKind::None => {}
            PhpKind::Script => return true,
            PhpKind::Leak => return false,
        }
    }
    false
}

fn php_kind(name: &str) -> PhpKind {
    // The text before the first dot is the stem, not an extension: `php` alone is not.
    let mut extensions = name.split('.').skip(1).peekable();
    while let Some(ext) = extensions.next() {
        let bare = ext.trim_end_matches(|c: char| c == '~' || c.is_whitespace());
        if PHP_EXTENSIONS.iter().any(|p| bare.eq_ignore_ascii_case(p)) {
            let last = extensions.peek().is_none();
            return if last && bare.len() == ext.len() {
                PhpKind::Script
            } else {
                PhpKind::Leak
            };
        }
    }
    PhpKind::None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_php_script_agrees_with_parse_without_allocating() {
        for raw in [
            "/doku.php",
            "/index.php/Main_Page",
            "/a/b.PHTML",
            "/x.php~",
            "/x.php.bak",
            "/.git/x.php",
            "/%78.php",
            "/",
            "/style.css",
            "/php",
            "/a.php/.env",
            "/wp-admin/",
        ] {
            let by_parse = matches!(parse(raw), Parsed::Php(_));
            if names_php_script(raw) {
                assert!(
                    by_parse,
                    "{raw}: named a script that parse does not route to PHP"
                );
            }
        }
        assert!(names_php_script("/doku.php"));
        assert!(names_php_script("/index.php/Main_Page"));
        assert!(!names_php_script("/x.php.bak"));
        assert!(
            !names_php_script("/%78.php"),
            "escaped: left to the file server"
        );
    }

    fn path(segments: &[&str], trailing_slash: bool, raw: &str) -> Parsed {
        Parsed::Path(RequestPath {
            segments: segments.iter().map(|s| s.to_string()).collect(),
            trailing_slash,
            normalized_raw: raw.to_string(),
        })
    }

    #[test]
    fn plain_paths_decode_per_segment() {
        assert_eq!(parse("/"), path(&[], true, "/"));
        assert_eq!(
            parse("/a%20b/c.css"),
            path(&["a b", "c.css"], false, "/a%20b/c.css")
        );
        assert_eq!(parse("//a///b/"), path(&["a", "b"], true, "/a/b/"));
        assert_eq!(parse("*"), Parsed::NotFound);
    }

    #[test]
    fn traversal_is_forbidden_in_every_spelling() {
        for p in [
            "/../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/etc/passwd",
            "/a/%2e%2e/%2e%2e/etc/passwd",
            "/..%2f..%2fetc/passwd",
            "/a%2f..%2f..%2fetc",
            "/a/%2e./b",
            "/a/.%2e/b",
            "/./a",
            "/a%00.txt",
            "/a%5c..%5cb",
            "/a\\..\\b",
        ] {
            assert_eq!(parse(p), Parsed::Forbidden, "{p}");
        }
        // Overlong UTF-8 for `.` is not a name at all.
        assert_eq!(parse("/%c0%ae%c0%ae/etc"), Parsed::NotFound);
    }

    #[test]
    fn hidden_files_are_forbidden_but_well_known_is_public() {
        for p in [
            "/.env",
            "/.git/config",
            "/a/.htaccess",
            "/.well-known/.secret",
        ] {
            assert_eq!(parse(p), Parsed::Forbidden, "{p}");
        }
        assert!(matches!(
            parse("/.well-known/acme-challenge/x"),
            Parsed::Path(_)
        ));
        assert_eq!(parse("/a/.well-known/x"), Parsed::Forbidden);
    }

    #[test]
    fn php_scripts_go_to_php_and_php_backups_nowhere() {
        assert_eq!(parse("/index.php"), Parsed::Php("/index.php".into()));
        assert_eq!(parse("/A/B.PHP"), Parsed::Php("/A/B.PHP".into()));
        assert_eq!(parse("/x.phtml"), Parsed::Php("/x.phtml".into()));
        assert_eq!(parse("/x.php5"), Parsed::Php("/x.php5".into()));
        assert_eq!(parse("/x.phar"), Parsed::Php("/x.phar".into()));
        assert_eq!(parse("/x.ph%70"), Parsed::Php("/x.php".into()));
        assert_eq!(
            parse("/index.php/feed/atom"),
            Parsed::Php("/index.php".into())
        );
        for p in [
            "/wp-config.php.bak",
            "/index.php~",
            "/shell.php.jpg",
            "/x.php%20",
            "/x.php.",
        ] {
            assert_eq!(parse(p), Parsed::Forbidden, "{p}");
        }
        assert!(matches!(parse("/php"), Parsed::Path(_)));
        assert!(matches!(parse("/phpinfo.txt"), Parsed::Path(_)));
    }

    #[test]
    fn keys_keep_the_final_slash() {
        let Parsed::Path(a) = parse("/a") else {
            panic!()
        };
        let Parsed::Path(b) = parse("/a/") else {
            panic!()
        };
        assert_eq!(a.key(), "/a");
        assert_eq!(b.key(), "/a/");
        assert_eq!(b.child("index.php"), "/a/index.php");
        let Parsed::Path(root) = parse("/") else {
            panic!()
        };
        assert_eq!(root.key(), "/");
        assert_eq!(root.child("index.php"), "/index.php");
    }

    #[test]
    fn real_paths_follow_the_same_rules() {
        assert!(check_real(Path::new("a/b.css")));
        assert!(check_real(Path::new(".well-known/x")));
        assert!(!check_real(Path::new("a/.git/config")));
        assert!(!check_real(Path::new("wp-config.php")));
        assert!(!check_real(Path::new("../x")));
    }

    /// Every combination of up to four tricky pieces: whatever comes out as a path must
    /// be plain names only.
    #[test]
    fn no_combination_of_tricky_pieces_yields_an_unsafe_path() {
        let pieces = [
            "..",
            ".",
            "%2e",
            "%2E",
            "%2f",
            "%5c",
            "\\",
            "%00",
            "/",
            "a",
            ".well-known",
            "%c0%ae",
            "%",
            "%2",
            "x.php",
            "~",
        ];
        let mut checked = 0;
        let mut stack = vec![(String::new(), 0)];
        while let Some((prefix, depth)) = stack.pop() {
            if let Parsed::Path(p) = parse(&format!("/{prefix}")) {
                for (i, s) in p.segments.iter().enumerate() {
                    assert!(!s.contains(['/', '\\', '\0']), "{prefix}: {s:?}");
                    assert!(
                        !s.starts_with('.') || (i == 0 && s == ".well-known"),
                        "{prefix}: {s:?}"
                    );
                    let php_extension = s.split('.').skip(1).any(|e| {
                        let e = e.trim_end_matches(|c: char| c == '~' || c.is_whitespace());
                        PHP_EXTENSIONS.iter().any(|p| e.eq_ignore_ascii_case(p))
                    });
                    assert!(!php_extension, "{prefix}: {s:?}");
                }
            }
            checked += 1;
            if depth < 4 {
                for piece in pieces {
                    stack.push((format!("{prefix}{piece}"), depth + 1));
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }
}

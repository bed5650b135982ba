//! A document root in a temp dir, with the files every test file uses, and helpers to
//! ask `StaticFiles` directly.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Response};
use http_body_util::BodyExt;
use levee_static::{FileBody, Outcome, StaticConfig, StaticFiles};
use tempfile::TempDir;

/// 2023-11-14T22:13:20Z, the mtime given to `style.css`.
pub const MTIME: u64 = 1_700_000_000;
pub const STYLE: &str = "body { color: #333; }\n";
pub const SECRET: &str = "root:x:0:0:secret outside the document root";

/// `outer/` holds a secret; `outer/root/` is the document root.
pub struct Site {
    pub outer: TempDir,
    pub files: StaticFiles,
}

impl Site {
    pub fn root(&self) -> PathBuf {
        self.outer.path().join("root")
    }
}

pub fn write(path: &Path, content: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

pub fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// Deterministic bytes that are not all alike, so a misplaced chunk shows.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

pub fn site() -> Site {
    site_with(|_| {})
}

pub fn site_with(configure: impl FnOnce(&mut StaticConfig)) -> Site {
    let outer = tempfile::tempdir().unwrap();
    write(&outer.path().join("secret.txt"), SECRET);
    write(&outer.path().join("etc/passwd"), SECRET);
    let root = outer.path().join("root");
    write(&root.join("index.html"), "<h1>home</h1>");
    write(&root.join("style.css"), STYLE);
    set_mtime(&root.join("style.css"), MTIME);
    write(&root.join("app.js"), "console.log(1)");
    write(&root.join("logo.png"), [0x89, b'P', b'N', b'G']);
    write(&root.join("font.woff2"), "wOF2");
    write(&root.join("robots.txt"), "User-agent: *\n");
    write(&root.join("data.json"), "{}");
    write(&root.join("README"), "no extension");
    write(&root.join("hundred.txt"), pattern(100));
    write(&root.join("empty.txt"), "");
    write(&root.join(".env"), "DB_PASSWORD=secret");
    write(&root.join(".htaccess"), "Deny from all");
    write(&root.join(".git/config"), "[core]");
    write(&root.join(".well-known/security.txt"), "Contact: x");
    write(
        &root.join("wp-config.php"),
        "<?php define('DB_PASSWORD', 'secret');",
    );
    write(
        &root.join("wp-config.php.bak"),
        "<?php define('DB_PASSWORD', 'secret');",
    );
    write(&root.join("UPPER.PHP"), "<?php echo 1;");
    write(&root.join("page.phtml"), "<?php echo 1;");
    write(&root.join("blog/index.html"), "<h1>blog</h1>");
    write(&root.join("blog/post.html"), "<h1>post</h1>");
    write(&root.join("app/index.php"), "<?php echo 1;");
    write(&root.join("app/asset.css"), "a{}");
    std::fs::create_dir_all(root.join("noindex")).unwrap();
    write(&root.join("noindex/file.txt"), "x");
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink("../secret.txt", root.join("leak.txt")).unwrap();
        symlink(outer.path().join("etc"), root.join("etc-link")).unwrap();
        symlink("style.css", root.join("alias.css")).unwrap();
        symlink("blog", root.join("blog-alias")).unwrap();
        symlink(".env", root.join("env.txt")).unwrap();
        symlink("wp-config.php", root.join("config.txt")).unwrap();
    }
    let mut config = StaticConfig::new(&root);
    configure(&mut config);
    let files = StaticFiles::new(config).unwrap();
    Site { outer, files }
}

pub fn parts(method: Method, uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

pub async fn get(files: &StaticFiles, uri: &str) -> Outcome {
    files.serve(&parts(Method::GET, uri, &[])).await
}

pub async fn req(
    files: &StaticFiles,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
) -> Outcome {
    files.serve(&parts(method, uri, headers)).await
}

pub fn response(outcome: Outcome) -> Response<FileBody> {
    match outcome {
        Outcome::Response(r) => r,
        other => panic!("expected a response, got {other:?}"),
    }
}

pub async fn body(r: Response<FileBody>) -> Bytes {
    r.into_body().collect().await.unwrap().to_bytes()
}

pub fn header<'a>(r: &'a Response<FileBody>, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

pub fn now_plus(secs: i64) -> String {
    let now = SystemTime::now();
    let t = if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs((-secs) as u64)
    };
    httpdate::fmt_http_date(t)
}

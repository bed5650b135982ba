//! levee's static file server: what nginx's `root`, `try_files` and `open_file_cache`
//! did in front of PHP-FPM.
//!
//! [`StaticFiles::serve`] answers a GET or HEAD from a document root, or says why it
//! did not ([`Outcome`]), so the caller can route to PHP. It is careful about three
//! things:
//! - **Nothing outside the root, nothing hidden, no PHP source.** See `path.rs` for the
//!   request-path rules and `file.rs` for symlinks.
//! - **RFC 9110**: strong ETag and Last-Modified, preconditions in the order of §13.2.2
//!   (`conditional.rs`), single byte ranges with If-Range (`range.rs`).
//! - **Speed**: small files live in memory as `Bytes` with their header values already
//!   formatted, and are re-checked on disk at most every `revalidate_every`; big files
//!   stream from disk in 128 KiB chunks. Filesystem work runs on the blocking pool.
//!
//! Not done here: compression (precompressed `.gz`/`.br` siblings), multipart ranges,
//! directory listings.

mod body;
mod conditional;
mod file;
mod path;
mod range;

use std::collections::HashSet;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{
    HeaderValue, ACCEPT_RANGES, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, LAST_MODIFIED, LOCATION, X_CONTENT_TYPE_OPTIONS,
};
use http::{Method, Response, StatusCode};
use quick_cache::sync::Cache;
use quick_cache::Weighter;

pub use body::FileBody;

use file::{header_value, FileEntry, Resolved, Settings};
use path::{Parsed, RequestPath};

/// Where the files are and how they are served. Every field has a default from
/// [`StaticConfig::new`].
#[derive(Debug, Clone)]
pub struct StaticConfig {
    /// The document root (nginx `root`). May be a symlink; it is re-resolved on each
    /// revalidation so a deploy that switches it is picked up.
    pub root: PathBuf,
    /// Index files tried in order for a directory URL. Default `["index.html",
    /// "index.htm"]`; a directory with neither but an `index.php` goes to PHP.
    pub index: Vec<String>,
    /// Extensions (lowercase, no dot) that get `Cache-Control: public,
    /// max-age=<asset_max_age>`; every other file gets `no-cache`. Default: styles,
    /// scripts, images, fonts, audio, video, PDF, archives, text, XML and JSON.
    pub asset_extensions: Vec<String>,
    /// Browser cache lifetime of assets. Default 7 days: PHP sites seldom fingerprint
    /// file names (WordPress adds `?ver=` to some URLs, not to theme images or fonts),
    /// so a year or `immutable` would strand visitors on an old stylesheet; a week
    /// spares nearly all repeat requests, and afterwards the ETag makes revalidation
    /// a 304.
    pub asset_max_age: Duration,
    /// Bytes of file contents (and metadata) kept in memory. Default 64 MiB. 0 turns
    /// the memory cache off: every request then checks the disk.
    pub memory_cache: u64,
    /// Largest file kept in memory. Default 1 MiB: covers HTML, CSS, JS, icons and
    /// most images; anything larger streams from disk (the OS page cache still helps).
    pub memory_max_file: u64,
    /// How long an answer from memory is trusted before the file is looked at again
    /// (nginx `open_file_cache_valid`). Default 1 s: an edit shows up at once for
    /// practical purposes, while a hot file costs at most one `stat` per second.
    pub revalidate_every: Duration,
    /// Directories outside the root that a symlink in it may lead into (Debian's
    /// packages link `lib/tpl` to `/var/lib/dokuwiki/lib/tpl`, `images` to
    /// `/var/lib/mediawiki/images`). What a link reaches there passes the same checks
    /// as a requested path (no hidden file, no PHP source); a link anywhere else is
    /// still refused. Default: none.
    pub link_dirs: Vec<PathBuf>,
}

impl StaticConfig {
    /// The defaults, for the given document root.
    pub fn new(root: impl Into<PathBuf>) -> StaticConfig {
        StaticConfig {
            root: root.into(),
            index: vec!["index.html".into(), "index.htm".into()],
            asset_extensions: DEFAULT_ASSETS.iter().map(|s| s.to_string()).collect(),
            asset_max_age: Duration::from_secs(7 * 24 * 60 * 60),
            memory_cache: 64 * 1024 * 1024,
            memory_max_file: 1024 * 1024,
            revalidate_every: Duration::from_secs(1),
            link_dirs: Vec::new(),
        }
    }
}

/// The PHP script a request path names, decoded (`/a/x.php/more` gives `/a/x.php`),
/// by the same rules the file server routes PHP with; `None` when it names none.
pub fn php_script(raw_path: &str) -> Option<String> {
    match path::parse(raw_path) {
        Parsed::Php(script) => Some(script),
        _ => None,
    }
}

/// Whether `raw_path` names a PHP script (`/x.php`, `/x.php/more`) in plain segments,
/// without allocating: what [`StaticFiles::serve`] would answer `Php` for at once. An
/// escaped or unusual path says false: ask `serve`.
pub fn names_php_script(raw_path: &str) -> bool {
    path::names_php_script(raw_path)
}

/// A request path as the filesystem would see it: each segment percent-decoded, empty
/// segments dropped (`//inc//x` is `/inc/x`), the final slash kept. `None` when it
/// could never name a file (traversal, a hidden segment, an encoded `/`, not UTF-8):
/// what a rule about paths (the presets' denied directories) must be matched against,
/// so that `/%69nc/` or `//inc/` cannot walk around `/inc/`.
pub fn decoded_path(raw_path: &str) -> Option<String> {
    match path::parse(raw_path) {
        Parsed::Path(req) => Some(req.key()),
        Parsed::Php(_) => {
            let req = path::parse_segments(raw_path)?;
            Some(req.key())
        }
        Parsed::Forbidden | Parsed::NotFound => None,
    }
}

/// The same list as levee-config's `DEFAULTS` (levee-proxy's `request/site` tests
/// check that the two agree).
const DEFAULT_ASSETS: &[&str] = &[
    "css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp",
    "woff", "woff2", "ttf", "otf", "eot", "mp3", "mp4", "m4a", "m4v", "webm", "ogg", "oga", "ogv",
    "wav", "flac", "pdf", "zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "txt", "xml", "json",
    "wasm",
];

/// Why a [`StaticConfig`] cannot be used. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the document root {} cannot be opened ({source}): create it, or set the root to \
         the site's public directory (the one with index.php)",
        .path.display()
    )]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the document root {} is not a directory: set the root to the directory that \
         holds the site's files",
        .path.display()
    )]
    RootNotDirectory { path: PathBuf },
    #[error(
        "the index file name {name:?} is not a plain file name: use names like \
         \"index.html\", without '/', '\\\\' or a leading '.'"
    )]
    IndexName { name: String },
}

/// What [`StaticFiles::serve`] decided.
#[derive(Debug)]
pub enum Outcome {
    /// A complete answer: 200, 206, 304, 412, 416, 301 to the directory with a slash,
    /// 405 for a method other than GET and HEAD, or 500 after a filesystem error
    /// (logged).
    Response(Response<FileBody>),
    /// No such file, or a directory without an index: the caller may try PHP (a front
    /// controller's pretty URL) or answer 404.
    NotFound,
    /// Never to be served: traversal, a hidden file, a link out of the root, a PHP
    /// backup such as `wp-config.php.bak`. Answer 403 (or 404 to say less).
    Forbidden,
    /// A PHP script: a `.php` (`.phtml`, `.php5`, `.phar`, ...) URL, or a directory
    /// whose index is `index.php`. `script` is the decoded path of the script, e.g.
    /// `/index.php` for `/index.php/feed` or `/blog/index.php` for `/blog/`. Its
    /// existence is not checked for a `.php` URL: PHP-FPM answers that.
    Php { script: String },
}

/// The static file server. Cheap to clone: the memory cache is shared.
#[derive(Clone)]
pub struct StaticFiles {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    revalidate_every: Duration,
    /// Decoded request path (with its final slash) to what it resolved to.
    cache: Cache<String, Slot, SlotWeight>,
}

/// A slot's weight in bytes: the file's (bytes kept) or a small answer's.
#[derive(Clone)]
struct SlotWeight;

impl Weighter<String, Slot> for SlotWeight {
    fn weight(&self, key: &String, slot: &Slot) -> u64 {
        let value = match &slot.resolved {
            Resolved::File(entry) => entry.weight(),
            _ => 64,
        };
        key.len() as u64 + value
    }
}

#[derive(Clone)]
struct Slot {
    resolved: Resolved,
    /// When the filesystem was last looked at for this answer.
    checked: Instant,
}

impl std::fmt::Debug for StaticFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticFiles")
            .field("root", &self.inner.settings.root)
            .field("cached", &self.inner.cache.len())
            .finish()
    }
}

impl StaticFiles {
    /// Checks the configuration. This touches the filesystem (the root must be a
    /// directory), so call it at startup, not on the request path.
    pub fn new(config: StaticConfig) -> Result<StaticFiles, Error> {
        let meta = std::fs::metadata(&config.root).map_err(|source| Error::Root {
            path: config.root.clone(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(Error::RootNotDirectory { path: config.root });
        }
        for name in &config.index {
            let plain = !name.is_empty()
                && !name.starts_with('.')
                && !name.contains(['/', '\\', '\0'])
                && matches!(
                    path::parse(&format!("/{name}")),
                    Parsed::Path(_) | Parsed::Php(_)
                );
            if !plain {
                return Err(Error::IndexName { name: name.clone() });
            }
        }
        let asset_cache_control = header_value(format!(
            "public, max-age={}",
            config.asset_max_age.as_secs()
        ))
        .unwrap_or(HeaderValue::from_static("no-cache"));
        let settings = Settings {
            link_dirs: config.link_dirs,
            root: config.root,
            index: config.index,
            assets: config
                .asset_extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect::<HashSet<_>>(),
            asset_cache_control,
            // Pages and other non-assets may change at any time and must be seen at
            // once; `no-cache` still lets the browser keep its copy and revalidate it
            // with a cheap 304.
            other_cache_control: HeaderValue::from_static("no-cache"),
            memory_max_file: config.memory_max_file,
        };
        // quick_cache, as the response store: a read is a shard's read lock and a
        // hash, cheaper than moka's on every request a document root sees first.
        let items = usize::try_from(config.memory_cache / 2048)
            .unwrap_or(usize::MAX)
            .clamp(64, 1 << 20);
        let cache = Cache::with_weighter(items, config.memory_cache.max(1), SlotWeight);
        Ok(StaticFiles {
            inner: Arc::new(Inner {
                settings,
                revalidate_every: config.revalidate_every,
                cache,
            }),
        })
    }

    /// Answers a request for the path of `parts.uri` (percent-encoded, as in the
    /// request line), honouring its method, preconditions and `Range`.
    ///
    /// Path checks and PHP routing come first, for any method, so a caller may send
    /// every request here first; a method other than GET or HEAD on a static file or
    /// directory gets 405.
    pub async fn serve(&self, parts: &http::request::Parts) -> Outcome {
        let req = match path::parse(parts.uri.path()) {
            Parsed::Path(req) => req,
            Parsed::Forbidden => return Outcome::Forbidden,
            Parsed::NotFound => return Outcome::NotFound,
            Parsed::Php(script) => return Outcome::Php { script },
        };
        let key = req.key();
        let mut force = false;
        // A second round only when a big file changed between its cached lookup and
        // being opened: the cache entry is dropped and the path resolved afresh.
        for _ in 0..2 {
            let (resolved, open) = self.lookup(&key, &req, force).await;
            let entry = match resolved {
                Resolved::File(entry) => entry,
                Resolved::NotFound => return Outcome::NotFound,
                Resolved::Forbidden => return Outcome::Forbidden,
                Resolved::Php(script) => return Outcome::Php { script },
                Resolved::Failed => {
                    return Outcome::Response(empty(StatusCode::INTERNAL_SERVER_ERROR))
                }
                Resolved::Directory => {
                    if !get_or_head(&parts.method) {
                        return Outcome::Response(method_not_allowed());
                    }
                    return Outcome::Response(redirect_to_directory(&req, parts.uri.query()));
                }
            };
            if !get_or_head(&parts.method) {
                return Outcome::Response(method_not_allowed());
            }
            match respond(parts, &entry, open).await {
                Some(response) => return Outcome::Response(response),
                None => {
                    self.inner.cache.remove(&key);
                    force = true;
                }
            }
        }
        tracing::warn!(path = %key, "static file keeps changing while it is opened");
        Outcome::Response(empty(StatusCode::SERVICE_UNAVAILABLE))
    }

    /// The answer for `key`: from memory if it was checked within `revalidate_every`,
    /// else from the filesystem (reusing the cached bytes if the file is unchanged).
    async fn lookup(
        &self,
        key: &str,
        req: &RequestPath,
        force: bool,
    ) -> (Resolved, Option<std::fs::File>) {
        let cached = if force {
            None
        } else {
            self.inner.cache.get(key)
        };
        if let Some(slot) = &cached {
            if slot.checked.elapsed() < self.inner.revalidate_every {
                return (slot.resolved.clone(), None);
            }
        }
        let prev = match cached {
            Some(Slot {
                resolved: Resolved::File(entry),
                ..
            }) => Some(entry),
            _ => None,
        };
        // Taken before the lookup: a change during it is seen at the next revalidation.
        let checked = Instant::now();
        let inner = Arc::clone(&self.inner);
        let owned_req = req.clone();
        let found = tokio::task::spawn_blocking(move || {
            file::resolve(&inner.settings, &owned_req, prev.as_ref())
        })
        .await;
        let (resolved, open) = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(path = %key, error = %e, "static file lookup task failed");
                return (Resolved::Failed, None);
            }
        };
        if !matches!(resolved, Resolved::Failed) {
            self.inner.cache.insert(
                key.to_string(),
                Slot {
                    resolved: resolved.clone(),
                    checked,
                },
            );
        }
        (resolved, open)
    }
}

fn get_or_head(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// The response for a file, or `None` if a big file changed since it was looked up
/// (the caller then resolves it again).
async fn respond(
    parts: &http::request::Parts,
    entry: &Arc<FileEntry>,
    open: Option<std::fs::File>,
) -> Option<Response<FileBody>> {
    let head = &entry.head;
    let validators = entry.validators();
    match conditional::evaluate(&parts.method, &parts.headers, validators) {
        Some(StatusCode::NOT_MODIFIED) => return Some(not_modified(entry)),
        Some(status) => return Some(empty(status)),
        None => {}
    }
    let decision = if parts.method == Method::GET {
        range::decide(&parts.headers, head.len, validators)
    } else {
        range::Decision::Full
    };
    let (status, start, len) = match decision {
        range::Decision::Full => (StatusCode::OK, 0, head.len),
        range::Decision::Partial { start, end } => {
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
        range::Decision::Unsatisfiable => return Some(unsatisfiable(entry)),
    };
    let body = if parts.method == Method::HEAD {
        FileBody::empty()
    } else if let Some(bytes) = &entry.body {
        let from = usize::try_from(start).ok()?;
        let to = from.checked_add(usize::try_from(len).ok()?)?;
        if to > bytes.len() {
            // Cannot happen: head.len is bytes.len(). Refuse rather than panic in slice().
            return Some(empty(StatusCode::INTERNAL_SERVER_ERROR));
        }
        FileBody::bytes(bytes.slice(from..to))
    } else {
        match open_at(entry, open, start).await {
            Ok(Some(file)) => FileBody::file(tokio::fs::File::from_std(file), len),
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(path = %entry.path.display(), error = %e, "static file cannot be read");
                return Some(empty(StatusCode::INTERNAL_SERVER_ERROR));
            }
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, head.content_type.clone());
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    validator_headers(h, entry);
    // A text file uploaded to a PHP site must not be sniffed into HTML and run scripts.
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if status == StatusCode::PARTIAL_CONTENT {
        let end = start + len - 1;
        if let Some(v) = header_value(format!("bytes {start}-{end}/{}", head.len)) {
            h.insert(CONTENT_RANGE, v);
        }
    }
    Some(response)
}

/// Opens a big file (unless the lookup just did) and seeks to `start`, on the blocking
/// pool. `Ok(None)` if the file at the cached path is no longer the cached version.
async fn open_at(
    entry: &Arc<FileEntry>,
    open: Option<std::fs::File>,
    start: u64,
) -> std::io::Result<Option<std::fs::File>> {
    let entry = Arc::clone(entry);
    let task = tokio::task::spawn_blocking(move || -> std::io::Result<Option<std::fs::File>> {
        let mut file = match open {
            Some(file) => file,
            None => {
                let Ok(file) = std::fs::File::open(&entry.path) else {
                    return Ok(None);
                };
                if !file.metadata().is_ok_and(|m| entry.same_version(&m)) {
                    return Ok(None);
                }
                file
            }
        };
        file.seek(SeekFrom::Start(start))?;
        Ok(Some(file))
    });
    task.await.map_err(std::io::Error::other)?
}

fn validator_headers(h: &mut http::HeaderMap, entry: &FileEntry) {
    if let Some(etag) = &entry.head.etag_value {
        h.insert(ETAG, etag.clone());
    }
    if let Some(lm) = &entry.head.last_modified {
        h.insert(LAST_MODIFIED, lm.clone());
    }
    h.insert(CACHE_CONTROL, entry.head.cache_control.clone());
}

/// 304: the validators and Cache-Control the 200 would carry (RFC 9110 §15.4.5), no body.
///
/// It also carries the 200's Content-Type and Content-Length, which a 304 should not
/// send to clients: they are for the caller, which may send the 200 compressed (and then
/// a weak ETag and `Vary` on the 304 too) and removes them.
fn not_modified(entry: &FileEntry) -> Response<FileBody> {
    let mut response = Response::new(FileBody::empty());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let h = response.headers_mut();
    validator_headers(h, entry);
    h.insert(CONTENT_TYPE, entry.head.content_type.clone());
    h.insert(CONTENT_LENGTH, HeaderValue::from(entry.head.len));
    response
}

fn unsatisfiable(entry: &FileEntry) -> Response<FileBody> {
    let mut response = empty(StatusCode::RANGE_NOT_SATISFIABLE);
    let h = response.headers_mut();
    if let Some(v) = header_value(format!("bytes */{}", entry.head.len)) {
        h.insert(CONTENT_RANGE, v);
    }
    h.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    response
}

fn method_not_allowed() -> Response<FileBody> {
    let mut response = empty(StatusCode::METHOD_NOT_ALLOWED);
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// `/dir` → `/dir/`, query kept. Built from the request's own percent-encoded segments,
/// with `//` collapsed so the Location can never be `//other.host/`.
fn redirect_to_directory(req: &RequestPath, query: Option<&str>) -> Response<FileBody> {
    let mut location = req.normalized_raw.clone();
    location.push('/');
    if let Some(q) = query {
        location.push('?');
        location.push_str(q);
    }
    let Some(location) = header_value(location) else {
        return empty(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let mut response = empty(StatusCode::MOVED_PERMANENTLY);
    response.headers_mut().insert(LOCATION, location);
    response
}

fn empty(status: StatusCode) -> Response<FileBody> {
    let mut response = Response::new(FileBody::empty());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// Entry points for the fuzz targets in `fuzz/` (not an API): the parsers fed from the
/// network, which are private to this crate.
#[doc(hidden)]
pub mod __fuzz {
    /// The request-path rules (decoding, traversal, dotfiles).
    pub fn path(raw: &str) {
        let _ = crate::path::parse(raw);
    }

    /// `Range` and `If-Range` against a file of `len` bytes; a partial answer must lie
    /// inside the file.
    pub fn range(headers: &http::HeaderMap, len: u64) {
        let v = crate::conditional::Validators {
            etag: Some("\"abc\""),
            modified: Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000)),
        };
        if let crate::range::Decision::Partial { start, end } =
            crate::range::decide(headers, len, v)
        {
            assert!(start <= end && end < len, "{start}-{end} of {len}");
        }
        let _ = crate::conditional::if_range_matches("", v);
    }
}

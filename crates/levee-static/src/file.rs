//! Finding the file a request path names, on the blocking pool: symlinks resolved and
//! kept inside the root, directories to their index, small files read into memory, and
//! the response header values computed once per file version.

use std::collections::HashSet;
use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderValue;

use crate::conditional::Validators;
use crate::path::{check_real, is_php_script, RequestPath};

/// What `StaticFiles` needs at resolution time, derived once from `StaticConfig`.
#[derive(Debug)]
pub(crate) struct Settings {
    pub root: PathBuf,
    /// Where links out of the root may lead (`StaticConfig::link_dirs`).
    pub link_dirs: Vec<PathBuf>,
    pub index: Vec<String>,
    /// Lowercase extensions without the dot.
    pub assets: HashSet<String>,
    pub asset_cache_control: HeaderValue,
    pub other_cache_control: HeaderValue,
    pub memory_max_file: u64,
}

/// What a request path turned out to be. Cached (with the time it was checked) in the
/// memory cache, negative answers included: a PHP site's pretty URLs are files that do
/// not exist, asked for on every page view.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    File(Arc<FileEntry>),
    /// A directory asked for without the final slash: redirect.
    Directory,
    NotFound,
    Forbidden,
    /// A directory whose index is a PHP script: its decoded path.
    Php(String),
    /// An unexpected filesystem error, already logged. Never cached.
    Failed,
}

/// One version of one file: where it really is, how to tell whether it changed, its
/// response header values, and its bytes if it is small.
#[derive(Debug)]
pub(crate) struct FileEntry {
    pub path: PathBuf,
    pub id: FileId,
    pub head: Head,
    /// The whole file when it is at most `memory_max_file`; big files stream from disk.
    pub body: Option<Bytes>,
}

/// Header values computed once per file version, so a hit only clones them.
#[derive(Debug)]
pub(crate) struct Head {
    pub len: u64,
    /// Whole seconds, as `Last-Modified` carries it: comparisons with client dates must
    /// not fail on the sub-second part the client never saw.
    pub modified: Option<SystemTime>,
    /// The entity tag without its quotes.
    pub etag: Option<String>,
    pub etag_value: Option<HeaderValue>,
    pub last_modified: Option<HeaderValue>,
    pub content_type: HeaderValue,
    pub cache_control: HeaderValue,
}

impl FileEntry {
    pub fn validators(&self) -> Validators<'_> {
        Validators {
            etag: self.head.etag.as_deref(),
            modified: self.head.modified,
        }
    }

    /// Whether `meta` (of a freshly opened file) is still this version.
    pub fn same_version(&self, meta: &Metadata) -> bool {
        FileId::of(meta) == self.id
    }

    /// Weight in the memory cache, in bytes, roughly.
    pub fn weight(&self) -> u64 {
        let body = self.body.as_ref().map_or(0, |b| b.len() as u64);
        body + self.path.as_os_str().len() as u64 + 256
    }
}

/// What tells one version of a file from another without reading it. Besides size and
/// mtime, the inode (a deploy that renames a new file into place) and the ctime (an
/// in-place rewrite that restored the old mtime, as `cp -p` or `rsync -a` do; nobody
/// can set ctime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    len: u64,
    modified: Option<SystemTime>,
    inode: (u64, u64, i64, i64),
}

impl FileId {
    fn of(meta: &Metadata) -> FileId {
        FileId {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: inode(meta),
        }
    }
}

#[cfg(unix)]
fn inode(meta: &Metadata) -> (u64, u64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
}

#[cfg(not(unix))]
fn inode(_meta: &Metadata) -> (u64, u64, i64, i64) {
    (0, 0, 0, 0)
}

/// Resolves a request path under the root. Blocking: run it on the blocking pool.
///
/// `prev` is the cached entry being revalidated: when the file is unchanged it is
/// returned as it is, bytes and all, without reading the file again. For a file that
/// is not kept in memory the file opened here comes back with it, so the first
/// request does not open it twice.
pub(crate) fn resolve(
    settings: &Settings,
    req: &RequestPath,
    prev: Option<&Arc<FileEntry>>,
) -> (Resolved, Option<File>) {
    // The root is canonicalized on every resolution, not once at startup: deploy tools
    // switch a `current -> releases/N` symlink, and the new release must be served (and
    // be the prefix that files are checked against) within `revalidate_every`.
    let root = match std::fs::canonicalize(&settings.root) {
        Ok(root) => root,
        Err(e) => {
            tracing::warn!(root = %settings.root.display(), error = %e, "document root cannot be resolved");
            return (Resolved::Failed, None);
        }
    };
    let mut path = root.clone();
    path.extend(&req.segments);
    let bases = Bases {
        root: &root,
        links: settings
            .link_dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect(),
    };
    match bases.locate(&path) {
        Located::Other(r) => (r, None),
        Located::File(..) if req.trailing_slash => (Resolved::NotFound, None),
        Located::File(file, base) => open(settings, &base, file, prev),
        Located::Dir(_) if !req.trailing_slash => (Resolved::Directory, None),
        Located::Dir(dir) => {
            for name in &settings.index {
                let candidate = dir.join(name);
                if is_php_script(name) {
                    if candidate.is_file() {
                        return (Resolved::Php(req.child(name)), None);
                    }
                    continue;
                }
                match bases.locate(&candidate) {
                    Located::File(file, base) => return open(settings, &base, file, prev),
                    Located::Other(Resolved::Failed) => return (Resolved::Failed, None),
                    _ => {}
                }
            }
            // Like nginx's `index index.html index.php`: a PHP application's directory
            // belongs to PHP even when the configured list does not name index.php.
            if !settings.index.iter().any(|n| n == "index.php") && dir.join("index.php").is_file() {
                return (Resolved::Php(req.child("index.php")), None);
            }
            (Resolved::NotFound, None)
        }
    }
}

enum Located {
    /// A file, and the directory it was found beneath (the root or a link directory):
    /// what its open is confined to.
    File(PathBuf, PathBuf),
    Dir(PathBuf),
    Other(Resolved),
}

/// Where a file may really be: the root (canonical), and the directories links may
/// lead into (canonical; those that do not exist are left out).
struct Bases<'a> {
    root: &'a Path,
    links: Vec<PathBuf>,
}

impl Bases<'_> {
    /// The real path of `path`, if it is inside the root (or a link directory) and
    /// allowed.
    ///
    /// Symlinks are followed, and allowed when their target is inside the root and
    /// passes the same rules as a requested path: such a target is public under its own
    /// URL anyway, and sites use in-root links (`uploads -> ../shared/uploads` within
    /// the release, theme aliases). A link out of the root is refused, unless it leads
    /// into one of the link directories the site names, where its target passes the
    /// same rules relative to that directory: elsewhere are `/etc/passwd` and the other
    /// sites on the server.
    fn locate(&self, path: &Path) -> Located {
        let real = match std::fs::canonicalize(path) {
            Ok(real) => real,
            Err(e) => return Located::Other(from_io(e, path)),
        };
        let found = std::iter::once(self.root)
            .chain(self.links.iter().map(PathBuf::as_path))
            .find_map(|base| Some((base, real.strip_prefix(base).ok()?)));
        let Some((base, relative)) = found else {
            tracing::debug!(path = %path.display(), real = %real.display(), "refused: outside the document root");
            return Located::Other(Resolved::Forbidden);
        };
        if !check_real(relative) {
            return Located::Other(Resolved::Forbidden);
        }
        locate_real(real, base)
    }
}

fn locate_real(real: PathBuf, base: &Path) -> Located {
    let meta = match std::fs::metadata(&real) {
        Ok(meta) => meta,
        Err(e) => return Located::Other(from_io(e, &real)),
    };
    if meta.is_dir() {
        Located::Dir(real)
    } else if meta.is_file() {
        Located::File(real, base.to_path_buf())
    } else {
        // FIFOs, sockets, devices: opening one could block or read forever.
        Located::Other(Resolved::Forbidden)
    }
}

fn open(
    settings: &Settings,
    root: &Path,
    path: PathBuf,
    prev: Option<&Arc<FileEntry>>,
) -> (Resolved, Option<File>) {
    match open_inner(settings, root, &path, prev) {
        Ok(found) => found,
        Err(e) => (from_io(e, &path), None),
    }
}

/// Opens `path` (a real path inside `root`, as `locate` found it) so that the open
/// itself cannot leave the root: between `locate`'s check and this open, someone who can
/// write in the document root (an upload directory) could swap a directory for a
/// symlink to `/etc`. `openat2(RESOLVE_BENEATH)` resolves every component beneath the
/// root's descriptor (in-root symlinks still work), and `O_NONBLOCK` keeps a FIFO swapped
/// in from blocking the thread. Kernels before 5.6 have no openat2: plain open, after
/// the check, as before.
fn open_beneath(root: &Path, path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let Ok(relative) = path.strip_prefix(root) else {
        return Err(io::Error::from(io::ErrorKind::PermissionDenied));
    };
    let dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rustix::fs::openat2(
        &dir,
        relative,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::NOSYS) => File::open(path),
        // EXDEV: the path tried to leave the root.
        Err(rustix::io::Errno::XDEV) => Err(io::Error::from(io::ErrorKind::PermissionDenied)),
        Err(e) => Err(e.into()),
    }
}

fn open_inner(
    settings: &Settings,
    root: &Path,
    path: &Path,
    prev: Option<&Arc<FileEntry>>,
) -> io::Result<(Resolved, Option<File>)> {
    let mut file = open_beneath(root, path)?;
    // Validators and length come from the open file, not from the earlier stat, so they
    // describe what will be read even if the name was just replaced.
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok((Resolved::Forbidden, None));
    }
    let id = FileId::of(&meta);
    if let Some(prev) = prev.filter(|p| p.path == path && p.id == id) {
        let file = prev.body.is_none().then_some(file);
        return Ok((Resolved::File(Arc::clone(prev)), file));
    }
    // The version this one replaces, if it is the same file.
    let replaced = prev.filter(|p| p.path == path).map(|p| &**p);
    if meta.len() <= settings.memory_max_file {
        if let Some((bytes, meta)) = read_stable(&mut file, meta)? {
            let entry = FileEntry::new(settings, path, &meta, Some(bytes), replaced);
            return Ok((Resolved::File(Arc::new(entry)), None));
        }
        // Still being written after several tries: stream this version, keep no bytes.
        file.seek(SeekFrom::Start(0))?;
    }
    let meta = file.metadata()?;
    let entry = FileEntry::new(settings, path, &meta, None, replaced);
    Ok((Resolved::File(Arc::new(entry)), Some(file)))
}

/// Reads a small file whole, and only keeps the bytes if the file did not change while
/// it was read: a half-written file must not stay in memory under the new validators.
fn read_stable(file: &mut File, mut meta: Metadata) -> io::Result<Option<(Bytes, Metadata)>> {
    for _ in 0..3 {
        let len = meta.len();
        file.seek(SeekFrom::Start(0))?;
        let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        Read::by_ref(file).take(len).read_to_end(&mut buf)?;
        let after = file.metadata()?;
        if FileId::of(&after) == FileId::of(&meta) && buf.len() as u64 == len {
            return Ok(Some((Bytes::from(buf), after)));
        }
        meta = after;
    }
    Ok(None)
}

/// Filesystem errors to answers: a missing name, or one under a file (`/a.css/x`), is
/// not found; a permission problem is forbidden; anything else is a real failure.
fn from_io(e: io::Error, path: &Path) -> Resolved {
    match e.kind() {
        io::ErrorKind::NotFound => Resolved::NotFound,
        io::ErrorKind::PermissionDenied => Resolved::Forbidden,
        _ => match e.raw_os_error() {
            #[cfg(unix)]
            Some(libc::ENOTDIR | libc::ENAMETOOLONG | libc::ELOOP) => Resolved::NotFound,
            _ => {
                tracing::warn!(path = %path.display(), error = %e, "static file lookup failed");
                Resolved::Failed
            }
        },
    }
}

impl FileEntry {
    /// `replaced`: the previous version of the same file, if levee served it.
    fn new(
        settings: &Settings,
        path: &Path,
        meta: &Metadata,
        body: Option<Bytes>,
        replaced: Option<&FileEntry>,
    ) -> FileEntry {
        let len = body.as_ref().map_or(meta.len(), |b| b.len() as u64);
        let modified = meta.modified().ok().and_then(whole_seconds);
        // nginx's format, so that browsers' cached copies from before the switch to
        // levee still validate: hex seconds of mtime, hex length.
        let mut etag = nginx_etag(modified, len);
        // That tag stays the same through an edit within the same second that keeps the
        // length: clients would get 304 for the old bytes, or splice a resumed download
        // (If-Range) from two versions. When the version this one replaces had the same
        // tag, this one gets a suffix that tells them apart.
        if let (Some(tag), Some(old)) = (etag.as_mut(), replaced) {
            if nginx_etag(old.head.modified, old.head.len).as_deref() == Some(tag.as_str()) {
                tag.push_str(&format!("-{:x}", version_hash(meta)));
            }
        }
        let ext = extension(path);
        let cache_control = match &ext {
            Some(ext) if settings.assets.contains(ext) => settings.asset_cache_control.clone(),
            _ => settings.other_cache_control.clone(),
        };
        FileEntry {
            path: path.to_path_buf(),
            id: FileId::of(meta),
            head: Head {
                len,
                modified,
                etag_value: etag.as_ref().and_then(|e| header_value(format!("\"{e}\""))),
                etag,
                last_modified: modified.and_then(|m| header_value(httpdate::fmt_http_date(m))),
                content_type: content_type(ext.as_deref()),
                cache_control,
            },
            body,
        }
    }
}

/// `"<hex seconds of mtime>-<hex length>"`, nginx's entity tag (without quotes).
fn nginx_etag(modified: Option<SystemTime>, len: u64) -> Option<String> {
    modified
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map(|d| format!("{:x}-{:x}", d.as_secs(), len))
}

/// A number that differs between two versions of a file with the same mtime second and
/// length: from the sub-second mtime, the inode and the change time (FNV-1a).
fn version_hash(meta: &Metadata) -> u64 {
    let nanos = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.subsec_nanos());
    let (dev, ino, ctime, ctime_nsec) = inode(meta);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [u64::from(nanos), dev, ino, ctime as u64, ctime_nsec as u64] {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Before 1970 there is no HTTP-date: such a file simply has no validators.
fn whole_seconds(t: SystemTime) -> Option<SystemTime> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// The lowercase extension of the file name, if it has one (`.hidden` has none).
fn extension(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

/// By extension; unknown is `application/octet-stream`, which browsers download rather
/// than render. Text gets `charset=utf-8`, the encoding of nearly every site today.
pub(crate) fn content_type(ext: Option<&str>) -> HeaderValue {
    let mime = ext
        .and_then(|e| mime_guess::from_ext(e).first_raw())
        .unwrap_or("application/octet-stream");
    if is_text(mime) {
        header_value(format!("{mime}; charset=utf-8"))
            .unwrap_or(HeaderValue::from_static("application/octet-stream"))
    } else {
        header_value(mime.to_string())
            .unwrap_or(HeaderValue::from_static("application/octet-stream"))
    }
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/javascript" | "application/ecmascript" | "application/xml"
        )
        || (mime.starts_with("application/") && mime.ends_with("+xml"))
}

/// Values formatted here are ASCII (digits, hex, dates, MIME names); a failure would be
/// a bug, and drops the header rather than the response.
pub(crate) fn header_value(s: String) -> Option<HeaderValue> {
    HeaderValue::try_from(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The open that follows `locate`'s check cannot be led out of the root, even when a
    /// directory was swapped for a symlink in between; links inside the root still work.
    #[test]
    fn the_open_stays_beneath_the_root() {
        let tmp = std::env::temp_dir().join(format!("levee-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (root, outside) = (tmp.join("root"), tmp.join("outside"));
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("real/page.txt"), "public").unwrap();
        std::fs::write(outside.join("page.txt"), "secret").unwrap();
        std::os::unix::fs::symlink("real", root.join("inside")).unwrap();
        // The race, frozen: `uploads` was a directory when checked, a link out when opened.
        std::os::unix::fs::symlink(&outside, root.join("uploads")).unwrap();
        let read = |p: &str| {
            open_beneath(&root, &root.join(p)).map(|mut f| {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut f, &mut s).unwrap();
                s
            })
        };
        assert_eq!(read("real/page.txt").unwrap(), "public");
        assert_eq!(read("inside/page.txt").unwrap(), "public");
        let e = read("uploads/page.txt").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(open_beneath(&root, &outside.join("page.txt")).is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    fn ct(ext: &str) -> String {
        content_type(Some(ext)).to_str().unwrap().to_string()
    }

    #[test]
    fn content_types() {
        assert_eq!(ct("html"), "text/html; charset=utf-8");
        assert_eq!(ct("css"), "text/css; charset=utf-8");
        assert!(
            ct("js").ends_with("javascript; charset=utf-8"),
            "{}",
            ct("js")
        );
        assert_eq!(ct("png"), "image/png");
        assert_eq!(ct("svg"), "image/svg+xml");
        assert_eq!(ct("woff2"), "font/woff2");
        assert_eq!(ct("json"), "application/json");
        assert_eq!(ct("wasm"), "application/wasm");
        assert_eq!(ct("xyz-unknown"), "application/octet-stream");
        assert_eq!(
            content_type(None).to_str().unwrap(),
            "application/octet-stream"
        );
    }

    #[test]
    fn extensions() {
        assert_eq!(extension(Path::new("/a/B.CSS")), Some("css".into()));
        assert_eq!(extension(Path::new("/a/.hidden")), None);
        assert_eq!(extension(Path::new("/a/Makefile")), None);
        assert_eq!(extension(Path::new("/a/x.")), None);
    }
}

//! The directory's layout and the few file operations everything else is made of.
//!
//! ```text
//! PATH/
//!   LEVEE-DISK   what this directory is, and the format ("levee-disk 1")
//!   lock         flock'ed by the process that uses the directory
//!   bans         the ban log: one Ban::to_line per line (banlog.rs)
//!   clean        present only between a clean shutdown and the next open
//!   sessions     the proven sessions (sessions.rs), one line each
//!   00/ .. ff/   records, by the first two hex digits of their name (nginx's levels=2)
//!     <32 hex>       one key's record (levee_cache::codec), named by codec::key_hex
//!     <32 hex>.<run>.tmp   a record being written, renamed over <32 hex> once
//!                    complete; <run> names the process that opened the directory, so
//!                    that its opening scan deletes only what earlier ones left
//! ```

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use levee_cache::codec::key_hash;
use levee_cache::CacheKey;
use rustix::fs::{flock, FlockOperation};

use crate::DiskError;

/// The file that says a directory is a levee disk cache, and in which format.
pub const MARKER: &str = "LEVEE-DISK";
/// Its content: bumped when the layout or the record format changes incompatibly.
pub const FORMAT: &str = "levee-disk 1";
const LOCK: &str = "lock";
const CLEAN: &str = "clean";
/// Bytes charged per file are its length rounded up to this (what `du` counts on the
/// usual file systems: a 1 KiB object takes a 4 KiB block).
pub const BLOCK: u64 = 4096;

/// A record's name: the key's 128-bit hash (`codec::key_hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id(pub u128);

impl Id {
    pub fn of(key: &CacheKey) -> Id {
        Id(key_hash(key))
    }

    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }

    /// The subdirectory: the first two hex digits.
    pub fn bucket(self) -> usize {
        (self.0 >> 120) as usize
    }

    /// A record file's name back to its id; None for anything else (`.tmp`, strangers).
    pub fn parse(name: &str) -> Option<Id> {
        if name.len() != 32 || !name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        u128::from_str_radix(name, 16).ok().map(Id)
    }
}

impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Already a good hash: fold it to the 64 bits the map needs.
        state.write_u64((self.0 as u64) ^ ((self.0 >> 64) as u64));
    }
}

/// Bytes a file of `len` takes, as the byte bound counts them.
pub fn charged(len: u64) -> u64 {
    len.div_ceil(BLOCK).max(1) * BLOCK
}

/// The paths of one disk cache.
#[derive(Debug)]
pub struct Dir {
    pub root: PathBuf,
    /// This opening's mark on its temp files (`.<run>.tmp`): the opening scan runs
    /// while records are written, and must not delete a temp file about to be renamed.
    run: String,
}

impl Dir {
    pub fn new(root: PathBuf) -> Dir {
        // Unique enough: one process holds the directory's lock at a time, and a
        // leftover that happened to share the mark would only wait for the next opening.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Dir {
            root,
            run: format!(
                "{:x}",
                nanos ^ u64::from(std::process::id()).rotate_left(32)
            ),
        }
    }

    /// A temp file left by an earlier process (a crash mid-write): the opening scan
    /// deletes it. This process's own are being written and are left alone.
    pub fn is_leftover_temp(&self, name: &str) -> bool {
        name.strip_suffix(".tmp")
            .is_some_and(|rest| rest.rsplit_once('.').is_none_or(|(_, run)| run != self.run))
    }

    pub fn bucket_path(&self, bucket: usize) -> PathBuf {
        self.root.join(format!("{bucket:02x}"))
    }

    pub fn record(&self, id: Id) -> PathBuf {
        let hex = id.hex();
        self.root.join(&hex[..2]).join(hex)
    }

    pub fn temp(&self, id: Id) -> PathBuf {
        let hex = id.hex();
        self.root
            .join(&hex[..2])
            .join(format!("{hex}.{}.tmp", self.run))
    }

    /// Prepares `root` for use: created (0700) if missing, recognised as ours (or empty),
    /// locked against a second process, with its 256 subdirectories. Returns the lock
    /// file (the lock lasts as long as it is open) and whether the previous process shut
    /// down cleanly.
    pub fn prepare(root: &Path) -> Result<(File, bool), DiskError> {
        let root_buf = root.to_path_buf();
        match fs::metadata(root) {
            Ok(m) if !m.is_dir() => return Err(DiskError::NotADirectory { path: root_buf }),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(root)
                    .map_err(|source| DiskError::Create {
                        path: root_buf.clone(),
                        source,
                    })?
            }
            Err(source) => {
                return Err(DiskError::Io {
                    path: root_buf,
                    what: "cannot read its metadata",
                    source,
                })
            }
        }
        let io_err = |what: &'static str| {
            let path = root_buf.clone();
            move |source| DiskError::Io { path, what, source }
        };
        let marker = root.join(MARKER);
        match fs::read_to_string(&marker) {
            Ok(found) if found.trim_end() == FORMAT => {}
            Ok(found) => {
                return Err(DiskError::Format {
                    path: root_buf,
                    found: found.trim_end().chars().take(40).collect(),
                    ours: FORMAT,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let strangers = fs::read_dir(root)
                    .map_err(io_err("cannot list it"))?
                    .filter_map(Result::ok)
                    .any(|e| e.file_name() != "lost+found");
                if strangers {
                    return Err(DiskError::NotOurs { path: root_buf });
                }
                write_new(&marker, format!("{FORMAT}\n").as_bytes()).map_err(|source| {
                    DiskError::NotWritable {
                        path: root_buf.clone(),
                        source,
                    }
                })?;
                sync_dir(root).map_err(io_err("cannot sync it"))?;
            }
            Err(source) => {
                return Err(DiskError::Io {
                    path: root_buf,
                    what: "cannot read its LEVEE-DISK file",
                    source,
                })
            }
        }
        let lock_path = root.join(LOCK);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|source| DiskError::NotWritable {
                path: root_buf.clone(),
                source,
            })?;
        if let Err(e) = flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            return Err(if e == rustix::io::Errno::WOULDBLOCK {
                DiskError::Locked {
                    path: root_buf,
                    lock: lock_path,
                }
            } else {
                DiskError::Io {
                    path: root_buf,
                    what: "cannot lock its lock file",
                    source: e.into(),
                }
            });
        }
        let dir = Dir::new(root_buf.clone());
        for b in 0..256 {
            let p = dir.bucket_path(b);
            match DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
                Err(source) => {
                    return Err(DiskError::NotWritable {
                        path: root_buf,
                        source,
                    })
                }
            }
        }
        // The clean mark goes at once: a crash from now on must be seen at the next open.
        let clean = root.join(CLEAN);
        let was_clean = match fs::remove_file(&clean) {
            Ok(()) => {
                sync_dir(root).map_err(io_err("cannot sync it"))?;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(DiskError::NotWritable {
                    path: root_buf,
                    source,
                })
            }
        };
        Ok((lock, was_clean))
    }

    /// Leaves the mark of a clean shutdown. Not synced: it only spares the next open
    /// from reading every record in full, and reads check every record anyway.
    pub fn mark_clean(&self) -> io::Result<()> {
        write_new(&self.root.join(CLEAN), b"")
    }
}

fn write_new(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

/// Makes the directory's entries (created, renamed, removed files) durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Writes a record to `path` (a temp file), synced to disk only when `sync`.
pub fn write_file(path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)?;
    if sync {
        f.sync_data()?;
    }
    Ok(())
}

/// A record file read (whole, or its head), with its inode (to delete that file and
/// not a newer one) and its full length.
pub struct FileBytes {
    pub bytes: Bytes,
    pub ino: u64,
    pub len: u64,
}

/// Reads the file at `path` whole, or its first `limit` bytes. None when absent.
pub fn read(path: &Path, limit: u64) -> io::Result<Option<FileBytes>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    let want = meta.len().min(limit);
    let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    f.take(want).read_to_end(&mut buf)?;
    Ok(Some(FileBytes {
        bytes: Bytes::from(buf),
        ino: meta.ino(),
        len: meta.len(),
    }))
}

/// Removes `path` if it is still the file `ino` (a newer record renamed over it stays).
/// The caller holds the index lock, under which records are renamed into place.
pub fn remove_if_same(path: &Path, ino: u64) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.ino() == ino => remove(path).map(|_| true),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes a file; an absent one is not an error.
pub fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_files_and_read_back() {
        let id = Id(0xab00_0000_0000_0000_0000_0000_0000_00cd);
        assert_eq!(id.hex(), "ab0000000000000000000000000000cd");
        assert_eq!(id.bucket(), 0xab);
        assert_eq!(Id::parse(&id.hex()), Some(id));
        for bad in [
            "ab",
            "AB0000000000000000000000000000cd",
            "x",
            &format!("{}.tmp", id.hex()),
        ] {
            assert_eq!(Id::parse(bad), None, "{bad}");
        }
        let d = Dir::new("/c".into());
        let other = Dir::new("/c".into());
        let ours = d.temp(id);
        let ours = ours.file_name().unwrap().to_str().unwrap();
        assert!(
            ours.starts_with(&id.hex()) && ours.ends_with(".tmp"),
            "{ours}"
        );
        assert!(!d.is_leftover_temp(ours));
        assert!(
            d.is_leftover_temp(&format!("{}.tmp", id.hex())),
            "the old naming"
        );
        let theirs = other.temp(id);
        let theirs = theirs.file_name().unwrap().to_str().unwrap();
        assert!(d.is_leftover_temp(theirs) || d.run == other.run);
        assert!(
            !d.is_leftover_temp(&id.hex()),
            "a record is not a temp file"
        );
        assert_eq!(
            d.record(id),
            Path::new("/c/ab/ab0000000000000000000000000000cd")
        );
        assert_eq!(charged(0), BLOCK);
        assert_eq!(charged(1), BLOCK);
        assert_eq!(charged(BLOCK + 1), 2 * BLOCK);
    }
}

//! Why a disk cache could not be opened, each error saying what to do about it.

use std::io;
use std::path::PathBuf;

/// Why [`Disk::open`](crate::Disk::open) refused. Reading and writing objects never
/// fails to the caller: those errors are counted in [`DiskStats`](crate::DiskStats) and
/// logged.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("the disk cache size is 0: give a size such as 10GiB, or leave the disk cache out")]
    SizeZero,
    #[error(
        "{path} is not a directory: give a directory for the disk cache (levee creates it \
         if it is missing)"
    )]
    NotADirectory { path: PathBuf },
    #[error(
        "cannot create the disk cache directory {path}: {source}; create it, owned by the \
         user levee runs as (mode 0700), or give another path"
    )]
    Create { path: PathBuf, source: io::Error },
    #[error(
        "cannot write in the disk cache directory {path}: {source}; make it writable by \
         the user levee runs as (chown, chmod 0700), or give another path"
    )]
    NotWritable { path: PathBuf, source: io::Error },
    #[error(
        "{path} is not empty and is not a levee disk cache (it has no LEVEE-DISK file): give \
         an empty or a new directory (levee deletes files in its disk cache, so it never \
         takes over a directory it did not make)"
    )]
    NotOurs { path: PathBuf },
    #[error(
        "{path} holds a disk cache of another format ({found:?}, this levee writes \
         {ours:?}): empty the directory, or give another one"
    )]
    Format {
        path: PathBuf,
        found: String,
        ours: &'static str,
    },
    #[error(
        "the disk cache {path} is in use by another levee process (it holds the lock on \
         {lock}): stop that process, or give this one another disk cache directory"
    )]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("cannot open the disk cache {path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
    #[error("cannot start the disk cache's thread: {0}")]
    Thread(io::Error),
}

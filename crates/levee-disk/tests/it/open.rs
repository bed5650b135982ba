//! Opening a directory: created private, locked against a second levee, refused with a
//! message that says what to do.

use std::os::unix::fs::PermissionsExt;

use levee_disk::{Disk, DiskConfig, DiskError};

use crate::{key, page, Cache};

fn open_at(path: &std::path::Path, size: u64) -> Result<Disk, DiskError> {
    Disk::open(DiskConfig {
        path: path.to_path_buf(),
        size,
    })
}

#[tokio::test]
async fn a_second_open_of_one_directory_is_refused_until_the_first_is_dropped() {
    let cache = Cache::new(1 << 20);
    let first = cache.open();
    first.put(&key("/a"), &[page(b"a")]);
    let err = open_at(&cache.root, 1 << 20).err().unwrap();
    assert!(matches!(err, DiskError::Locked { .. }));
    let msg = err.to_string();
    assert!(msg.contains(&cache.root.display().to_string()), "{msg}");
    assert!(msg.contains("another levee process"), "{msg}");
    assert!(msg.contains("stop that process"), "{msg}");
    // Dropping the last clone ends its thread after the queued write, and unlocks.
    let clone = first.clone();
    drop(first);
    assert!(open_at(&cache.root, 1 << 20).is_err());
    drop(clone);
    let again = cache.open();
    assert!(again.get(&key("/a")).await.is_some());
}

#[test]
fn the_directory_is_made_private_with_its_subdirectories() {
    let cache = Cache::new(1 << 20);
    let _disk = cache.open();
    let mode = std::fs::metadata(&cache.root).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(cache.root.join("00").is_dir() && cache.root.join("ff").is_dir());
    assert!(cache.root.join("LEVEE-DISK").is_file());
}

#[test]
fn bad_settings_are_refused_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let err = |path: &std::path::Path, size| open_at(path, size).err().unwrap().to_string();

    assert!(err(&tmp.path().join("x"), 0).contains("size is 0"));

    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let msg = err(&file, 1 << 20);
    assert!(msg.contains("is not a directory"), "{msg}");
    let msg = err(&file.join("below"), 1 << 20);
    assert!(msg.contains("cannot create"), "{msg}");

    // A directory with files levee did not write is never taken over (it would delete
    // in it), and nothing in it is touched.
    let foreign = tmp.path().join("www");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("index.php"), "<?php").unwrap();
    let msg = err(&foreign, 1 << 20);
    assert!(msg.contains("not a levee disk cache"), "{msg}");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1);

    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("LEVEE-DISK"), "levee-disk 99\n").unwrap();
    let msg = err(&other, 1 << 20);
    assert!(msg.contains("another format"), "{msg}");
}

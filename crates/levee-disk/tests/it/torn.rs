//! Damaged files (cut short, altered, zeroed, left half-written) are never served and
//! are deleted: when read, or at open.

use std::fs::OpenOptions;

use crate::{key, page, Cache};

/// Damages the records of /cut, /flipped and /zeroed, and leaves a temp file and an
/// empty record, as a crash or a failing disk would.
fn damage(cache: &Cache) {
    let cut = cache.record(&key("/cut"));
    let len = std::fs::metadata(&cut).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let flipped = cache.record(&key("/flipped"));
    let mut bytes = std::fs::read(&flipped).unwrap();
    let mid = bytes.len() - 500;
    bytes[mid] ^= 1;
    std::fs::write(&flipped, bytes).unwrap();
    let zeroed = cache.record(&key("/zeroed"));
    let len = std::fs::metadata(&zeroed).unwrap().len();
    std::fs::write(&zeroed, vec![0; len as usize]).unwrap();
    let empty = cache.record(&key("/empty"));
    std::fs::write(&empty, b"").unwrap();
    let tmp = cache.record(&key("/half")).with_extension("tmp");
    std::fs::write(tmp, b"LVR1 half of a record").unwrap();
}

async fn fill(cache: &Cache) {
    let disk = cache.open();
    for p in ["/cut", "/flipped", "/zeroed", "/sound"] {
        // Larger than the 16 KiB head a scan reads when it trusts the last shutdown.
        disk.put(&key(p), &[page(&vec![7; 40_000])]);
    }
    disk.flush().await;
}

fn gone(cache: &Cache, path: &str) -> bool {
    !cache.record(&key(path)).exists()
}

#[tokio::test]
async fn a_damaged_record_is_never_served_and_is_deleted_when_read() {
    let cache = Cache::new(1 << 30);
    fill(&cache).await;
    damage(&cache);
    let disk = cache.open();
    for p in ["/cut", "/flipped", "/zeroed", "/empty"] {
        assert!(disk.get(&key(p)).await.is_none(), "{p}");
        assert!(gone(&cache, p), "{p}");
    }
    assert!(disk.get(&key("/sound")).await.is_some());
    disk.scanned().await;
    assert_eq!(disk.stats().torn, 4);
    assert!(crate::files(&cache.root)
        .iter()
        .all(|(p, _)| p.extension().is_none()));
}

#[tokio::test]
async fn the_scan_after_a_clean_shutdown_deletes_what_it_sees_unread() {
    let cache = Cache::new(1 << 30);
    fill(&cache).await;
    damage(&cache);
    // After a clean shutdown the scan reads heads only: what a crash leaves (temp
    // files, empty or zeroed files) goes; a record damaged past its head goes when read.
    let disk = cache.open();
    disk.scanned().await;
    for p in ["/zeroed", "/empty", "/half"] {
        assert!(gone(&cache, p), "{p}");
    }
    assert!(crate::files(&cache.root)
        .iter()
        .all(|(p, _)| p.extension().is_none()));
    assert_eq!(disk.stats().torn, 2);
    assert!(disk.get(&key("/cut")).await.is_none());
    assert!(disk.get(&key("/flipped")).await.is_none());
    assert_eq!(disk.stats().torn, 4);
}

#[tokio::test]
async fn the_scan_after_a_crash_reads_every_record_whole() {
    let cache = Cache::new(1 << 30);
    fill(&cache).await;
    damage(&cache);
    cache.forget_clean_shutdown();
    let disk = cache.open();
    disk.scanned().await;
    for p in ["/cut", "/flipped", "/zeroed", "/empty"] {
        assert!(gone(&cache, p), "{p}");
    }
    let st = disk.stats();
    assert_eq!((st.torn, st.objects), (4, 1));
    assert!(disk.get(&key("/sound")).await.is_some());
}

#[tokio::test]
async fn a_record_under_another_keys_name_is_not_served() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    let (a, b) = (key("/a"), key("/b"));
    disk.put(&a, &[page(b"A's page")]);
    disk.flush().await;
    std::fs::rename(cache.record(&a), cache.record(&b)).unwrap();
    assert!(disk.get(&b).await.is_none());
    assert!(disk.get(&a).await.is_none());
    assert!(gone(&cache, "/b"));
    assert_eq!(disk.stats().torn, 1);
}

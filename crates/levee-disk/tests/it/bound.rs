//! The byte bound: what is on disk never passes `size`; the oldest unread records go.

use crate::{du, entry, key, page, Cache, DAY};

/// A body whose record takes two 4 KiB blocks.
fn body(i: usize) -> Vec<u8> {
    vec![i as u8; 7000]
}

#[tokio::test]
async fn the_bytes_on_disk_stay_under_the_bound() {
    let cache = Cache::new(10 * 8192);
    let disk = cache.open();
    for round in 0..10 {
        for i in 0..7 {
            let n = round * 7 + i;
            disk.put(&key(&format!("/{n}")), &[page(&body(n))]);
        }
        disk.flush().await;
        let st = disk.stats();
        assert!(
            du(&cache.root) <= cache.size,
            "round {round}: {}",
            du(&cache.root)
        );
        assert_eq!(du(&cache.root), st.bytes, "round {round}");
        assert!(st.bytes <= st.capacity);
    }
    let st = disk.stats();
    assert_eq!((st.objects, st.writes, st.evictions), (10, 70, 60));
    assert!(disk.get(&key("/69")).await.is_some());
    assert!(disk.get(&key("/0")).await.is_none());
    assert!(!cache.record(&key("/0")).exists());
}

#[tokio::test]
async fn a_record_read_since_it_was_written_outlives_an_unread_one() {
    let cache = Cache::new(4 * 8192);
    let disk = cache.open();
    for n in 0..4 {
        disk.put(&key(&format!("/{n}")), &[page(&body(n))]);
    }
    disk.flush().await;
    assert!(disk.get(&key("/0")).await.is_some());
    disk.put(&key("/4"), &[page(&body(4))]);
    disk.flush().await;
    assert!(disk.get(&key("/0")).await.is_some(), "read, so kept");
    assert!(
        disk.get(&key("/1")).await.is_none(),
        "the oldest unread went"
    );
    assert_eq!(disk.stats().evictions, 1);
}

#[tokio::test]
async fn a_record_larger_than_the_whole_cache_is_not_written() {
    let cache = Cache::new(4 * 8192);
    let disk = cache.open();
    disk.put(
        &key("/huge"),
        &[entry(vec![0; 40_000], None, &[], "video/mp4", DAY)],
    );
    disk.flush().await;
    let st = disk.stats();
    assert_eq!((st.writes, st.write_dropped, st.objects), (0, 1, 0));
    assert_eq!(du(&cache.root), 0);
}

#[tokio::test]
async fn a_smaller_bound_at_open_evicts_the_oldest_before_any_write() {
    let mut cache = Cache::new(8 * 8192);
    let disk = cache.open();
    for n in 0..8 {
        disk.put(&key(&format!("/{n}")), &[page(&body(n))]);
    }
    disk.flush().await;
    drop(disk);
    // The files' mtimes give the order back at open (set here: they are coarser than
    // the time these writes take).
    for n in 0..8u64 {
        let f = std::fs::File::options()
            .write(true)
            .open(cache.record(&key(&format!("/{n}"))))
            .unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + n))
            .unwrap();
    }
    cache.size = 3 * 8192;
    let disk = cache.open();
    disk.scanned().await;
    assert!(du(&cache.root) <= cache.size);
    let st = disk.stats();
    assert_eq!((st.objects, st.evictions), (3, 5));
    assert!(disk.get(&key("/7")).await.is_some());
    assert!(disk.get(&key("/0")).await.is_none());
}

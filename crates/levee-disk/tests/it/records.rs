//! Records written, read back, replaced and removed, across a reopen; expiry.

use std::time::Duration;

use levee_cache::clock;

use crate::{bodies, entry, key, page, Cache, DAY};

#[tokio::test]
async fn records_read_back_as_written_across_a_reopen() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    let sizes = [0usize, 1, 4095, 4096, 70_000];
    let variants = |i: usize| {
        let n = sizes[i % sizes.len()];
        vec![
            entry(
                vec![i as u8; n],
                Some("en"),
                &["t1", "t2"],
                "text/html",
                DAY,
            ),
            entry(vec![!(i as u8); n + 3], Some("ko"), &[], "text/css", DAY),
        ]
    };
    for i in 0..40 {
        disk.put(&key(&format!("/p/{i}")), &variants(i));
    }
    disk.flush().await;
    let st = disk.stats();
    assert_eq!((st.writes, st.objects, st.write_errors), (40, 40, 0));
    drop(disk);

    let disk = cache.open();
    // Reads work before the scan ends; after it, the index is whole again.
    assert!(disk.get(&key("/p/3")).await.is_some());
    disk.scanned().await;
    let st = disk.stats();
    assert_eq!((st.objects, st.torn), (40, 0));
    assert!(st.bytes >= 40 * 4096 && st.bytes <= st.capacity);
    for i in 0..40 {
        let k = key(&format!("/p/{i}"));
        let got = disk.get(&k).await.unwrap();
        let want = variants(i);
        assert_eq!(got.key, k);
        assert_eq!(bodies(&got), vec![&want[0].body()[..], &want[1].body()[..]]);
        for (g, w) in got.variants.iter().zip(&want) {
            assert_eq!(g.vary(), w.vary());
            assert_eq!(g.headers, w.headers);
            assert_eq!(g.tags(), w.tags());
            assert_eq!(g.freshness(), w.freshness());
        }
        assert!(got.keep_until > got.written + DAY / 2);
    }
    assert_eq!(disk.stats().hits, 41);
}

#[tokio::test]
async fn a_put_replaces_the_record_and_no_variants_remove_it() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    let k = key("/r");
    disk.put(&k, &[page(b"one")]);
    disk.put(&k, &[page(b"two"), page(b"three")]);
    disk.flush().await;
    assert_eq!(
        bodies(&disk.get(&k).await.unwrap()),
        [&b"two"[..], b"three"]
    );
    assert_eq!(disk.stats().objects, 1);
    disk.put(&k, &[]);
    disk.flush().await;
    assert!(disk.get(&k).await.is_none());
    assert!(!cache.record(&k).exists());
    let st = disk.stats();
    assert_eq!((st.objects, st.bytes, st.misses), (0, 0, 1));
    assert!(disk.get(&key("/never")).await.is_none());
}

#[tokio::test]
async fn an_expired_record_is_neither_served_nor_kept() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    // Fresh for a minute, kept a minute more.
    let k = key("/minute");
    disk.put(
        &k,
        &[entry(
            b"soon gone".to_vec(),
            None,
            &[],
            "text/html",
            Duration::from_secs(60),
        )],
    );
    disk.put(&key("/day"), &[page(b"stays")]);
    disk.flush().await;
    assert!(disk.get(&k).await.is_some());
    // Only this test's records are this short-lived: the others keep a day.
    clock::advance(Duration::from_secs(180));
    assert!(disk.get(&k).await.is_none());
    assert!(!cache.record(&k).exists());
    assert_eq!(disk.stats().expired, 1);
    assert!(disk.get(&key("/day")).await.is_some());

    // One that expired while levee was down goes at the scan, unread.
    let k2 = key("/expired-on-disk");
    let record = levee_cache::codec::encode(
        &k2,
        &[entry(
            b"old".to_vec(),
            None,
            &[],
            "text/html",
            Duration::ZERO,
        )],
    );
    drop(disk);
    std::fs::write(cache.record(&k2), record).unwrap();
    let disk = cache.open();
    disk.scanned().await;
    assert!(!cache.record(&k2).exists());
    assert_eq!(disk.stats().expired, 1);
    assert!(disk.get(&key("/day")).await.is_some());
}

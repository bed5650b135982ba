//! Tests of the whole tier that need its insides: the writer held back, to fill its
//! queue or to land a purge between a `put` and its write. The rest is in tests/it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::StatusCode;
use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::entry::PURGED_SERVE_STALE;
use levee_cache::{CacheKey, Entry, EntryParts, Freshness, VaryKey};
use levee_compress::Coding;

use crate::queue::{MAX_JOBS, MAX_QUEUED_BYTES};
use crate::{Disk, DiskConfig};

fn entry(body: Vec<u8>, tags: &[&str]) -> Arc<Entry> {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
    Arc::new(Entry::new(EntryParts {
        // The tiers write an entry under the key they are given (the record's); the
        // key an entry holds is the memory tier's, not read here.
        key: &key("/"),
        id: Entry::next_id(),
        status: StatusCode::OK,
        headers: &h,
        body: Bytes::from(body),
        coding: Coding::Identity,
        levee_coded: None,
        vary: VaryKey::default(),
        freshness: Freshness {
            lifetime: Duration::from_secs(86400),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::ZERO,
            retain: Duration::ZERO,
        },
        initial_age: Duration::ZERO,
        response_time: levee_cache::clock::now(),
        tags: tags.iter().map(|&t| t.into()).collect(),
    }))
}

fn key(path: &str) -> CacheKey {
    CacheKey::stored(&format!("http://a.test{path}"), 0)
}

fn open(dir: &tempfile::TempDir) -> Disk {
    Disk::open(DiskConfig {
        path: dir.path().join("c"),
        size: 1 << 30,
    })
    .unwrap()
}

/// Waits for levee's clock to pass `ms` (a record written in the millisecond of a ban
/// is one the ban covers).
fn after(ms: u64) {
    while levee_cache::codec::unix_ms(levee_cache::clock::system_now()) <= ms {
        std::thread::yield_now();
    }
}

fn pause(disk: &Disk, on: bool) {
    disk.shared().queue.pause(on);
}

#[tokio::test]
async fn a_full_queue_drops_writes_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let disk = open(&dir);
    pause(&disk, true);
    let started = Instant::now();
    for i in 0..MAX_JOBS + 100 {
        disk.put(&key(&format!("/{i}")), &[entry(vec![1; 10], &[])]);
    }
    // By bytes too: one large write fills it alone; the next is dropped.
    let big = (MAX_QUEUED_BYTES / 2) as usize;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(disk.stats().write_dropped, 100);
    pause(&disk, false);
    disk.flush().await;
    assert_eq!(disk.stats().writes, MAX_JOBS as u64);
    assert!(disk.get(&key("/0")).await.is_some());
    assert!(disk
        .get(&key(&format!("/{}", MAX_JOBS + 50)))
        .await
        .is_none());

    pause(&disk, true);
    disk.put(&key("/big1"), &[entry(vec![2; big], &[])]);
    disk.put(&key("/big2"), &[entry(vec![3; big], &[])]);
    assert_eq!(disk.stats().write_dropped, 101);
    pause(&disk, false);
    disk.flush().await;
    assert!(disk.get(&key("/big1")).await.is_some());
    assert!(disk.get(&key("/big2")).await.is_none());
}

#[tokio::test]
async fn a_purge_reaches_a_write_still_queued() {
    let dir = tempfile::tempdir().unwrap();
    let disk = open(&dir);
    disk.put(&key("/gone"), &[entry(b"old".to_vec(), &[])]);
    disk.flush().await;
    pause(&disk, true);
    // The page is written again, then purged before the writer gets to it.
    disk.put(&key("/gone"), &[entry(b"old again".to_vec(), &[])]);
    disk.put(&key("/marked"), &[entry(b"m".to_vec(), &["t"])]);
    disk.ban(Ban::now(BanMode::Remove, BanTarget::Url(key("/gone"))));
    disk.ban(Ban::now(
        BanMode::Stale,
        BanTarget::Tag {
            tag: "t".into(),
            site: None,
        },
    ));
    pause(&disk, false);
    disk.flush().await;
    assert!(disk.get(&key("/gone")).await.is_none());
    assert!(!disk
        .shared()
        .dir
        .record(crate::Id::of(&key("/gone")))
        .exists());
    let marked = disk.get(&key("/marked")).await.unwrap();
    assert_eq!(
        marked.variants[0].soft_purged.load(Ordering::Relaxed),
        PURGED_SERVE_STALE
    );
    // Written marked: the mark survives a restart.
    drop(disk);
    let disk = open(&dir);
    let marked = disk.get(&key("/marked")).await.unwrap();
    assert_eq!(
        marked.variants[0].soft_purged.load(Ordering::Relaxed),
        PURGED_SERVE_STALE
    );
    assert!(disk.get(&key("/gone")).await.is_none());
}

#[tokio::test]
async fn a_record_being_written_when_a_purge_comes_is_not_renamed_into_place() {
    let dir = tempfile::tempdir().unwrap();
    let disk = open(&dir);
    let s = disk.shared();
    let k = key("/racing");
    let record = levee_cache::codec::encode(&k, &[entry(b"before the purge".to_vec(), &[])]);
    let queued = levee_cache::clock::system_now();
    let seen = s.bans_made();
    let ban = Ban::now(BanMode::Remove, BanTarget::Url(k.clone()));
    disk.ban(ban.clone());
    after(ban.at_ms);
    // What the writer does with a job it took before the ban.
    assert!(!s.store(&k, &record, queued, seen, false));
    assert!(disk.get(&k).await.is_none());
    // A write queued after the purge goes in.
    let later = levee_cache::codec::encode(&k, &[entry(b"after".to_vec(), &[])]);
    assert!(s.store(
        &k,
        &later,
        levee_cache::clock::system_now() + Duration::from_millis(5),
        s.bans_made(),
        false
    ));
    assert_eq!(
        &disk.get(&k).await.unwrap().variants[0].body()[..],
        b"after"
    );
}

/// The opening scan runs while levee serves and writes records: it deletes the temp
/// files a crashed process left, never one this process is about to rename (it did,
/// and that write failed as "disk full? permissions?").
#[tokio::test]
async fn the_opening_scan_deletes_only_an_earlier_process_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let disk = open(&dir);
    disk.scanned().await;
    let s = disk.shared();
    let id = crate::Id::of(&key("/being-written"));
    let ours = s.dir.temp(id);
    std::fs::write(&ours, b"half a record").unwrap();
    let bucket = ours.parent().unwrap();
    let leftovers = [
        bucket.join(format!("{}.tmp", id.hex())),
        bucket.join(format!("{}.0123abcd.tmp", id.hex())),
    ];
    for l in &leftovers {
        std::fs::write(l, b"left by a crash").unwrap();
    }
    assert!(s.measure().is_some());
    assert!(
        ours.exists(),
        "this process's temp file was deleted under it"
    );
    for l in &leftovers {
        assert!(!l.exists(), "{} was kept", l.display());
    }
}

#[tokio::test]
async fn a_sweep_applies_a_prefix_purge_to_the_files_and_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let disk = open(&dir);
    disk.scanned().await;
    for p in ["/blog/1", "/blog/2", "/shop/1"] {
        disk.put(&key(p), &[entry(p.as_bytes().to_vec(), &[])]);
    }
    disk.flush().await;
    let s = disk.shared();
    s.sweep_every_ms.store(0, Ordering::Relaxed);
    disk.ban(Ban::now(BanMode::Remove, BanTarget::Prefix(key("/blog/"))));
    // No read: the sweep finds the files, deletes them, syncs, settles the ban.
    let deadline = Instant::now() + Duration::from_secs(20);
    while disk.stats().bans > 0 {
        assert!(Instant::now() < deadline, "no sweep");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let st = disk.stats();
    assert_eq!((st.purged, st.objects), (2, 1));
    assert!(!s.dir.record(crate::Id::of(&key("/blog/1"))).exists());
    assert!(crate::banlog::BanLog::lines(&s.dir.root).is_empty());
    assert_eq!(s.bans.len(), 0, "the read filter forgot it too");
    assert!(disk.get(&key("/shop/1")).await.is_some());
}

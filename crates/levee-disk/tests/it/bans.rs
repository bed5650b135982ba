//! Purges: applied at once, kept across a restart, replayed over what a crash left,
//! and gone from the log once applied everywhere.

use std::sync::atomic::Ordering;

use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::entry::{PURGED_NOT, PURGED_SERVE_STALE, PURGED_VALIDATE};

use crate::{after, bodies, entry, eventually, key, page, Cache, DAY};

fn mark(d: &levee_cache::codec::Decoded, i: usize) -> u8 {
    d.variants[i].soft_purged.load(Ordering::Relaxed)
}

#[tokio::test]
async fn a_url_purge_deletes_at_once_and_stays_purged_after_a_restart() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    disk.put(&key("/gone"), &[page(b"old")]);
    disk.put(&key("/kept"), &[page(b"kept")]);
    disk.flush().await;
    disk.ban(Ban::now(BanMode::Remove, BanTarget::Url(key("/gone"))));
    assert!(!cache.record(&key("/gone")).exists());
    assert!(disk.get(&key("/gone")).await.is_none());
    let st = disk.stats();
    assert_eq!((st.purged, st.objects), (1, 1));
    drop(disk);
    let disk = cache.open();
    disk.scanned().await;
    assert!(disk.get(&key("/gone")).await.is_none());
    assert!(disk.get(&key("/kept")).await.is_some());
}

#[tokio::test]
async fn a_logged_purge_is_replayed_over_a_record_a_crash_left_behind() {
    // levee logged the purge and died before deleting the file.
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    disk.put(&key("/x"), &[page(b"purged before the crash")]);
    disk.put(&key("/y"), &[page(b"not purged")]);
    disk.flush().await;
    drop(disk);
    let ban = Ban::now(BanMode::Remove, BanTarget::Url(key("/x")));
    std::fs::write(cache.root.join("bans"), format!("{}\n", ban.to_line())).unwrap();
    cache.forget_clean_shutdown();

    let disk = cache.open();
    assert!(
        disk.get(&key("/x")).await.is_none(),
        "refused before the scan gets to it"
    );
    disk.scanned().await;
    assert!(!cache.record(&key("/x")).exists());
    assert!(disk.get(&key("/y")).await.is_some());
    // Applied to every record: the log is empty again.
    assert_eq!(cache.ban_log(), "");
    assert_eq!(disk.stats().bans, 0);
}

#[tokio::test]
async fn prefix_and_tag_purges_survive_a_restart_and_spare_the_rest() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    let both = |body: &str| {
        vec![
            entry(
                format!("{body} en"),
                Some("en"),
                &["post-1"],
                "text/html",
                DAY,
            ),
            entry(
                format!("{body} ko"),
                Some("ko"),
                &["post-2"],
                "text/html",
                DAY,
            ),
        ]
    };
    disk.put(&key("/blog/1"), &[page(b"blog 1")]);
    disk.put(&key("/blog/2"), &[page(b"blog 2")]);
    disk.put(&key("/shop/1"), &[page(b"shop")]);
    disk.put(&key("/tagged"), &both("tagged"));
    disk.flush().await;
    disk.ban(Ban::now(BanMode::Remove, BanTarget::Prefix(key("/blog/"))));
    let tag = Ban::now(
        BanMode::Remove,
        BanTarget::Tag {
            tag: "post-1".into(),
            site: Some(0),
        },
    );
    disk.ban(tag.clone());
    let check = |disk: levee_disk::Disk| async move {
        assert!(disk.get(&key("/blog/1")).await.is_none());
        assert!(disk.get(&key("/blog/2")).await.is_none());
        assert_eq!(bodies(&disk.get(&key("/shop/1")).await.unwrap()), [b"shop"]);
        let tagged = disk.get(&key("/tagged")).await.unwrap();
        assert_eq!(bodies(&tagged), [b"tagged ko"]);
    };
    // Applied to reads at once; the files wait for a sweep (or a read: see below).
    assert_eq!(
        bodies(&disk.get(&key("/tagged")).await.unwrap()),
        [b"tagged ko"]
    );
    assert!(cache.record(&key("/blog/1")).exists());
    assert_eq!(cache.ban_log().lines().count(), 2);
    assert_eq!(disk.stats().bans, 2);
    drop(disk);

    // The scan at open applies the logged bans to the files, then empties the log.
    let disk = cache.open();
    disk.scanned().await;
    assert!(!cache.record(&key("/blog/1")).exists());
    assert!(!cache.record(&key("/blog/2")).exists());
    assert_eq!(cache.ban_log(), "");
    let st = disk.stats();
    assert_eq!((st.purged, st.bans, st.objects), (2, 0, 2));
    check(disk.clone()).await;
    // The partly purged record was rewritten without the variant: its file no longer
    // needs the ban.
    drop(disk);
    let disk = cache.open();
    assert_eq!(
        bodies(&disk.get(&key("/tagged")).await.unwrap()),
        [b"tagged ko"]
    );

    // A page stored after a purge is not touched by it.
    after(tag.at_ms);
    disk.put(&key("/blog/3"), &[page(b"new post")]);
    disk.flush().await;
    assert!(disk.get(&key("/blog/3")).await.is_some());
}

#[tokio::test]
async fn a_soft_purge_marks_the_variants_stale_and_the_mark_outlives_a_restart() {
    let cache = Cache::new(1 << 30);
    let disk = cache.open();
    disk.put(&key("/soft"), &[page(b"soft")]);
    disk.put(&key("/page"), &[page(b"html")]);
    disk.put(
        &key("/style.css"),
        &[entry(b"css".to_vec(), None, &[], "text/css", DAY)],
    );
    disk.flush().await;
    disk.ban(Ban::now(BanMode::Stale, BanTarget::Url(key("/soft"))));
    disk.ban(Ban::now(
        BanMode::Validate,
        BanTarget::HostHtml {
            site: 0,
            host: "a.test".into(),
        },
    ));
    let check = |disk: levee_disk::Disk| async move {
        // The URL's soft purge first, then the edit's: the stronger mark wins.
        assert_eq!(
            mark(&disk.get(&key("/soft")).await.unwrap(), 0),
            PURGED_VALIDATE
        );
        assert_eq!(
            mark(&disk.get(&key("/page")).await.unwrap(), 0),
            PURGED_VALIDATE
        );
        let css = disk.get(&key("/style.css")).await.unwrap();
        assert_eq!(mark(&css, 0), PURGED_NOT);
    };
    check(disk.clone()).await;
    drop(disk);
    let disk = cache.open();
    disk.scanned().await;
    check(disk.clone()).await;
    assert_eq!(cache.ban_log(), "");
    drop(disk);
    // Marked in the files themselves now.
    let disk = cache.open();
    check(disk.clone()).await;

    // A URL's soft purge alone is settled at once: its one file is rewritten marked.
    disk.put(&key("/soft2"), &[page(b"soft2")]);
    disk.flush().await;
    let ban = Ban::now(BanMode::Stale, BanTarget::Url(key("/soft2")));
    disk.ban(ban.clone());
    let d = disk.clone();
    eventually("the URL ban is settled", move || d.stats().bans == 0).await;
    assert_eq!(
        mark(&disk.get(&key("/soft2")).await.unwrap(), 0),
        PURGED_SERVE_STALE
    );
    assert!(!cache.ban_log().contains(&ban.to_line()));
    drop(disk);
    let disk = cache.open();
    assert_eq!(
        mark(&disk.get(&key("/soft2")).await.unwrap(), 0),
        PURGED_SERVE_STALE
    );
}

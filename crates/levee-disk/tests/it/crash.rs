//! kill -9 in the middle of heavy writes: after a restart, every record served is one
//! that was written, whole: no torn body, no body of another key or variant.
//!
//! The test runs this test binary again as the writer (`crash_writer`, which does
//! nothing unless LEVEE_DISK_CRASH_DIR is set) and kills it with SIGKILL once it has
//! written thousands of records, rewriting the same keys over and over; three times
//! over the same directory, each check after a reopen.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use levee_cache::codec::Decoded;
use xxhash_rust::xxh3::xxh3_64;

use crate::{entry, key, Cache, DAY};

const ENV: &str = "LEVEE_DISK_CRASH_DIR";
const ROUND: &str = "LEVEE_DISK_CRASH_ROUND";
const KEYS: u32 = 600;
const KILL_AFTER: u64 = 2000;

/// The body of variant `v` of key `k` at its `gen`-th write: its own identity in the
/// first 9 bytes, then bytes only that identity gives, 0 to 40 KB.
fn body(k: u32, gen: u32, v: u8) -> Vec<u8> {
    let mut id = Vec::with_capacity(9);
    id.extend_from_slice(&k.to_le_bytes());
    id.extend_from_slice(&gen.to_le_bytes());
    id.push(v);
    let mut x = xxh3_64(&id) | 1;
    let len = 9 + (x % 40_000) as usize;
    let mut out = id;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn lang(v: u8) -> &'static str {
    ["en", "ko"][usize::from(v)]
}

fn variants(k: u32, gen: u32) -> Vec<std::sync::Arc<levee_cache::Entry>> {
    (0..=(gen % 2) as u8)
        .map(|v| entry(body(k, gen, v), Some(lang(v)), &[], "text/html", DAY))
        .collect()
}

/// A record read back is exactly one write of its key: each variant's body is the one
/// its identity names, for this key, under the variant's own Vary value, all from the
/// same write.
fn check(k: u32, d: &Decoded) {
    assert_eq!(d.key, key(&format!("/k/{k}")));
    let mut gens = Vec::new();
    for (i, e) in d.variants.iter().enumerate() {
        let b = &e.body();
        assert!(b.len() >= 9, "key {k} variant {i}: {} bytes", b.len());
        let id = |r: std::ops::Range<usize>| u32::from_le_bytes(b[r].try_into().unwrap());
        let (bk, gen, v) = (id(0..4), id(4..8), b[8]);
        assert_eq!(bk, k, "key {k} variant {i} holds key {bk}'s body");
        assert_eq!(
            &b[..],
            &body(k, gen, v)[..],
            "key {k} variant {i}: torn body"
        );
        let vary = e.vary().fields();
        assert_eq!(
            vary[0].1.as_deref(),
            Some(lang(v).as_bytes()),
            "key {k} variant {i}"
        );
        gens.push(gen);
    }
    assert!(
        gens.windows(2).all(|w| w[0] == w[1]),
        "key {k}: mixed writes {gens:?}"
    );
    assert_eq!(d.variants.len(), (gens[0] % 2 + 1) as usize);
}

/// The child: writes as fast as the queue takes, says how many records are in place.
#[tokio::test]
async fn crash_writer() {
    let Ok(dir) = std::env::var(ENV) else {
        return;
    };
    let round: u32 = std::env::var(ROUND).unwrap().parse().unwrap();
    let disk = levee_disk::Disk::open(levee_disk::DiskConfig {
        path: dir.into(),
        size: 1 << 30,
    })
    .unwrap();
    for n in 0u32..1_000_000 {
        let k = n % KEYS;
        disk.put(
            &key(&format!("/k/{k}")),
            &variants(k, round * 10_000 + n / KEYS),
        );
        if n % 64 == 63 {
            println!("writes {}", disk.stats().writes);
        }
        if n % 512 == 511 {
            // Keeps the queue under its bound: no put is dropped.
            disk.flush().await;
        }
    }
}

/// Runs the writer on `cache` until it has written `KILL_AFTER` records, and kills it
/// with SIGKILL (writes queued, one likely half-written). Returns the temp files left.
fn write_and_kill(cache: &Cache, round: u32) -> usize {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::crash_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV, &cache.root)
        .env(ROUND, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    // Generous: the machine may be busy; the writer normally gets there in seconds.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut written = 0;
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("writes ") {
            written = n.parse().unwrap();
            if written >= KILL_AFTER {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the writer is too slow: {written} writes"
        );
    }
    assert!(
        written >= KILL_AFTER,
        "the writer stopped early: {written} writes"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    crate::files(&cache.root)
        .iter()
        .filter(|(p, _)| p.extension().is_some())
        .count()
}

#[test]
fn kill_9_in_the_middle_of_writes_leaves_no_torn_or_mixed_record() {
    let cache = Cache::new(1 << 30);
    let rt = tokio::runtime::Runtime::new().unwrap();
    for round in 0..3 {
        let temps = write_and_kill(&cache, round);
        eprintln!("round {round}: killed with {temps} temp files left");
        rt.block_on(async {
            let disk = cache.open();
            disk.scanned().await;
            for k in 0..KEYS {
                let d = disk.get(&key(&format!("/k/{k}"))).await;
                check(k, &d.expect("every key was written before the kill"));
            }
            let st = disk.stats();
            assert_eq!(st.torn, 0, "a kill tears no renamed record");
            assert_eq!(st.objects, u64::from(KEYS));
            assert!(crate::files(&cache.root)
                .iter()
                .all(|(p, _)| p.extension().is_none()));
        });
    }
}

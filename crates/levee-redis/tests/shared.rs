//! The shared tier against a real redis-server (levee_test::Redis): several `Redis`
//! clients in one process stand for several levee nodes. Tests wait on state, never on
//! fixed sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::StatusCode;
use levee_cache::ban::{Ban, BanMode, BanTarget};
use levee_cache::codec::{encode, key_hex};
use levee_cache::{CacheKey, Entry, EntryParts, Freshness, Scheme, VaryKey};
use levee_compress::Coding;
use levee_redis::{Lock, Redis, RedisConfig, RedisError};
use levee_test::eventually;

const OP_TIMEOUT: Duration = Duration::from_millis(250);
const UP_WITHIN: Duration = Duration::from_secs(10);

fn key(path: &str) -> CacheKey {
    let mut h = HeaderMap::new();
    h.insert("host", HeaderValue::from_static("shared.test"));
    CacheKey::for_request(Scheme::Http, &path.parse().unwrap(), &h).in_site(1)
}

/// A stored 200 fresh for `ttl`, worth keeping 10 s longer.
fn entry(body: impl Into<Bytes>, ttl: Duration, tags: &[&str]) -> Arc<Entry> {
    entry_aged(body, ttl, tags, Duration::ZERO)
}

/// [`entry`], `initial_age` old when it arrived.
fn entry_aged(
    body: impl Into<Bytes>,
    ttl: Duration,
    tags: &[&str],
    initial_age: Duration,
) -> Arc<Entry> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
    Arc::new(Entry::new(EntryParts {
        // The tiers write an entry under the key they are given (the record's); the
        // key an entry holds is the memory tier's, not read here.
        key: &key("/"),
        id: Entry::next_id(),
        status: StatusCode::OK,
        headers: &headers,
        body: body.into(),
        coding: Coding::Identity,
        levee_coded: None,
        vary: VaryKey::from_fields(Vec::new()),
        freshness: Freshness {
            lifetime: ttl,
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::from_secs(10),
            retain: Duration::from_secs(10),
        },
        initial_age,
        response_time: levee_cache::clock::now(),
        tags: tags.iter().map(|t| Box::<str>::from(*t)).collect(),
    }))
}

/// One levee node on `server`, with the bans other nodes sent it.
struct Node {
    redis: Redis,
    bans: Arc<Mutex<Vec<(Ban, Instant)>>>,
}

impl Node {
    fn start(url: &str) -> Node {
        let bans = Arc::new(Mutex::new(Vec::new()));
        let seen = bans.clone();
        let redis = Redis::connect(
            RedisConfig {
                urls: vec![url.to_string()],
                op_timeout: OP_TIMEOUT,
                lock_ttl: Duration::from_secs(10),
                ..RedisConfig::default()
            },
            Arc::new(move |ban| seen.lock().unwrap().push((ban, Instant::now()))),
        )
        .unwrap();
        Node { redis, bans }
    }

    async fn up(server: &levee_test::Redis) -> Node {
        let node = Node::start(&server.url());
        assert!(
            eventually(UP_WITHIN, || node.redis.is_up()).await,
            "not connected to {}",
            server.url()
        );
        node
    }

    fn bans(&self) -> Vec<Ban> {
        self.bans
            .lock()
            .unwrap()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }
}

fn record_name(k: &CacheKey) -> String {
    format!("levee:o:{{{}}}", key_hex(k))
}

fn lock_name(k: &CacheKey) -> String {
    format!("levee:l:{{{}}}", key_hex(k))
}

/// The keys matching `pattern`, sorted.
fn keys(server: &levee_test::Redis, pattern: &str) -> Vec<String> {
    let reply = server.command(&format!("KEYS {pattern}"));
    let mut keys: Vec<String> = reply
        .lines()
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

/// An integer reply (`:42`).
fn int(server: &levee_test::Redis, command: &str) -> i64 {
    let reply = server.command(command);
    reply
        .trim()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{command}: {reply}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_stored_by_one_node_is_read_by_another() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let k = key("/page?x=1");
    let e = entry("hello from A", Duration::from_secs(60), &["t1"]);
    a.redis.put_now(&k, std::slice::from_ref(&e)).await;
    let got = b.redis.get(&k).await.expect("B reads A's record");
    assert_eq!(got.key, k);
    assert_eq!(got.variants.len(), 1);
    assert_eq!(got.variants[0].body(), e.body());
    assert_eq!(got.variants[0].tags(), e.tags());
    assert_eq!(b.redis.get(&key("/other")).await.map(|d| d.key), None);
    let (sa, sb) = (a.redis.stats(), b.redis.stats());
    assert_eq!((sa.writes, sb.hits, sb.misses, sb.errors), (1, 1, 1, 0));

    // The background put gets there too.
    let k2 = key("/later");
    a.redis
        .put(&k2, &[entry("later", Duration::from_secs(60), &[])]);
    let mut found = false;
    for _ in 0..200 {
        if b.redis.get(&k2).await.is_some() {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(found, "the background put never arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_record_is_stored_in_chunks_and_read_back_whole() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let k = key("/big.bin");
    let body = Bytes::from(levee_test::pseudo_random(2 << 20, 7));
    a.redis
        .put_now(&k, &[entry(body.clone(), Duration::from_secs(60), &[])])
        .await;
    let name = record_name(&k);
    let stored = keys(&server, &format!("{name}*"));
    // The head and five chunks of at most 512 KiB (2 MiB of body plus the meta).
    assert_eq!(stored.len(), 6, "{stored:?}");
    assert!(
        int(&server, &format!("STRLEN {name}")) < 100,
        "the head is small"
    );
    for chunk in &stored[1..] {
        assert!(int(&server, &format!("STRLEN {chunk}")) <= 512 * 1024);
    }
    let got = b.redis.get(&k).await.expect("reassembled");
    assert_eq!(got.variants[0].body(), body);

    // Replaced: the new generation's chunks, the old ones gone.
    let body2 = Bytes::from(levee_test::pseudo_random(1 << 20, 8));
    a.redis
        .put_now(&k, &[entry(body2.clone(), Duration::from_secs(60), &[])])
        .await;
    let stored2 = keys(&server, &format!("{name}*"));
    assert_eq!(stored2.len(), 4, "{stored2:?}");
    assert!(stored2[1..].iter().all(|c| !stored.contains(c)));
    assert_eq!(b.redis.get(&k).await.unwrap().variants[0].body(), body2);

    // A missing chunk: a miss, not a panic, not a torn body.
    server.command(&format!("DEL {}", stored2[2]));
    assert!(b.redis.get(&k).await.is_none());
    // A chunk of the right size with other bytes: the checksum refuses it.
    a.redis
        .put_now(&k, &[entry(body2.clone(), Duration::from_secs(60), &[])])
        .await;
    let stored3 = keys(&server, &format!("{name}*"));
    let len = int(&server, &format!("STRLEN {}", stored3[1])) as usize;
    server.set_raw(&stored3[1], &vec![b'x'; len]);
    let errors = b.redis.stats().errors;
    assert!(b.redis.get(&k).await.is_none());
    assert_eq!(b.redis.stats().errors, errors + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_expire_when_they_are_no_longer_worth_keeping() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let a = Node::up(&server).await;
    let k = key("/ttl");
    let e = entry("x", Duration::from_secs(60), &[]);
    let keep = e.time_to_keep(levee_cache::clock::now());
    a.redis.put_now(&k, &[e]).await;
    let pttl = int(&server, &format!("PTTL {}", record_name(&k)));
    assert!(
        pttl > 0 && pttl as u128 <= keep.as_millis(),
        "{pttl} vs {keep:?}"
    );
    assert!(
        pttl as u128 > keep.as_millis() - 5_000,
        "{pttl} vs {keep:?}"
    );

    // Nothing left to keep: not written.
    let k2 = key("/gone");
    let old = entry_aged("old", Duration::ZERO, &[], Duration::from_secs(3600));
    a.redis.put_now(&k2, &[old]).await;
    assert_eq!(int(&server, &format!("EXISTS {}", record_name(&k2))), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_of_many_takes_the_fill_lock() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let nodes = [
        Node::up(&server).await,
        Node::up(&server).await,
        Node::up(&server).await,
    ];
    let k = key("/contended");
    let mut tasks = Vec::new();
    for i in 0..12 {
        let (redis, k) = (nodes[i % 3].redis.clone(), k.clone());
        tasks.push(tokio::spawn(async move { redis.lock(&k).await }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let acquired: Vec<_> = results
        .iter()
        .filter(|l| matches!(l, Lock::Acquired(_)))
        .collect();
    let busy = results.iter().filter(|l| matches!(l, Lock::Busy)).count();
    assert_eq!((acquired.len(), busy), (1, 11), "{results:?}");
    let pttl = int(&server, &format!("PTTL {}", lock_name(&k)));
    assert!(pttl > 0 && pttl <= 10_000, "{pttl}");

    // Dropping the guard releases it: the next one can take it.
    drop(results);
    let lock = format!("EXISTS {}", lock_name(&k));
    assert!(eventually(Duration::from_secs(2), || int(&server, &lock) == 0).await);
    assert!(matches!(nodes[1].redis.lock(&k).await, Lock::Acquired(_)));
    let total: u64 = nodes.iter().map(|n| n.redis.stats().locks_acquired).sum();
    assert_eq!(total, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_node_gets_the_record_the_lock_holder_stores() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let k = key("/filled");
    // A stale record is there already: the fill replaces it, and the waiter must not
    // take it for the new one.
    let stale = entry("stale", Duration::ZERO, &[]);
    a.redis.put_now(&k, &[stale]).await;
    let Lock::Acquired(guard) = a.redis.lock(&k).await else {
        panic!("A gets the lock")
    };
    assert!(matches!(b.redis.lock(&k).await, Lock::Busy));
    let waiter = {
        let (redis, k) = (b.redis.clone(), k.clone());
        tokio::spawn(async move { redis.wait_for(&k, Duration::from_secs(5)).await })
    };
    // The waiter is polling (and refusing the stale record) before A stores.
    assert!(eventually(UP_WITHIN, || b.redis.stats().hits >= 1).await);
    assert!(!waiter.is_finished());
    let fresh = entry("fresh", Duration::from_secs(60), &[]);
    a.redis.put_now(&k, &[fresh]).await;
    let stored = Instant::now();
    drop(guard);
    let got = waiter.await.unwrap().expect("the record A stored");
    assert_eq!(got.variants[0].body(), "fresh");
    assert!(stored.elapsed() < Duration::from_millis(500));
    assert_eq!(b.redis.stats().waits_served, 1);

    // A fill that stores nothing: the waiter is let go when the lock goes.
    let k2 = key("/uncacheable");
    let Lock::Acquired(guard) = a.redis.lock(&k2).await else {
        panic!("A gets the lock")
    };
    let waiter = {
        let (redis, k2) = (b.redis.clone(), k2.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            (
                redis.wait_for(&k2, Duration::from_secs(5)).await,
                t.elapsed(),
            )
        })
    };
    drop(guard);
    let (got, waited) = waiter.await.unwrap();
    assert!(got.is_none());
    assert!(waited < Duration::from_secs(1), "{waited:?}");

    // A holder that never finishes: the waiter gives up at its limit.
    let Lock::Acquired(_held) = a.redis.lock(&k2).await else {
        panic!("A gets the lock")
    };
    let t = Instant::now();
    assert!(b
        .redis
        .wait_for(&k2, Duration::from_millis(200))
        .await
        .is_none());
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(700),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_published_on_one_node_reaches_the_others_within_100ms() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b, c) = (
        Node::up(&server).await,
        Node::up(&server).await,
        Node::up(&server).await,
    );
    let ban = Ban::now(BanMode::Remove, BanTarget::Url(key("/purged")));
    let sent = Instant::now();
    a.redis.publish(ban.clone());
    assert!(eventually(Duration::from_secs(2), || !b.bans().is_empty()).await);
    for node in [&b, &c] {
        assert!(eventually(Duration::from_secs(2), || !node.bans().is_empty()).await);
        let (got, at) = node.bans.lock().unwrap()[0].clone();
        assert_eq!(got, ban);
        let took = at.duration_since(sent);
        // Pushed, not polled; the bound leaves room for a loaded machine.
        assert!(took < Duration::from_millis(500), "took {took:?}");
        eprintln!("ban from A seen after {took:?}");
    }
    // A does not hear its own: once A has B's later ban (same channel, in order), A's
    // own message has come and gone.
    let ban2 = Ban::now(BanMode::Stale, BanTarget::Url(key("/second")));
    b.redis.publish(ban2.clone());
    assert!(eventually(Duration::from_secs(2), || !a.bans().is_empty()).await);
    assert_eq!(a.bans(), vec![ban2]);
    assert_eq!(a.redis.stats().bans_received, 1);
    assert_eq!(b.redis.stats().bans_received, 1);
    assert_eq!(c.redis.stats().bans_received, 2);

    // A node that connects later finds both in Redis.
    let d = Node::up(&server).await;
    assert_eq!(d.bans().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_ban_removes_the_record_for_everyone() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let k = key("/article");
    let body = Bytes::from(levee_test::pseudo_random(1 << 20, 3));
    b.redis
        .put_now(&k, &[entry(body, Duration::from_secs(60), &[])])
        .await;
    assert!(a.redis.get(&k).await.is_some());
    assert!(keys(&server, &format!("{}*", record_name(&k))).len() > 1);
    a.redis
        .publish(Ban::now(BanMode::Remove, BanTarget::Url(k.clone())));
    // Gone at once for A (its own ban applies before Redis is even told).
    assert!(a.redis.get(&k).await.is_none());
    let pattern = format!("{}*", record_name(&k));
    assert!(
        eventually(Duration::from_secs(2), || keys(&server, &pattern)
            .is_empty())
        .await
    );
    assert!(b.redis.get(&k).await.is_none());
    assert!(eventually(Duration::from_secs(2), || !b.bans().is_empty()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_ban_applies_to_records_read_afterwards() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let (tagged, other, soft) = (key("/tagged"), key("/other"), key("/soft"));
    a.redis
        .put_now(
            &tagged,
            &[entry("t", Duration::from_secs(60), &["product-7"])],
        )
        .await;
    a.redis
        .put_now(
            &other,
            &[entry("o", Duration::from_secs(60), &["product-8"])],
        )
        .await;
    a.redis
        .put_now(&soft, &[entry("s", Duration::from_secs(60), &["news"])])
        .await;
    let tag = |t: &str| BanTarget::Tag {
        tag: t.to_string(),
        site: Some(1),
    };
    a.redis.publish(Ban::now(BanMode::Remove, tag("product-7")));
    a.redis.publish(Ban::now(BanMode::Stale, tag("news")));
    assert!(eventually(Duration::from_secs(2), || b.bans().len() == 2).await);
    // Still in Redis, but not served to anyone.
    assert_eq!(int(&server, &format!("EXISTS {}", record_name(&tagged))), 1);
    for node in [&a, &b] {
        assert!(node.redis.get(&tagged).await.is_none());
        assert!(node.redis.get(&other).await.is_some());
        let s = node.redis.get(&soft).await.expect("a soft purge keeps it");
        assert!(s.variants[0].serve_stale_after_purge(), "marked stale");
    }
    // Written after the ban: served again.
    b.redis
        .put_now(
            &tagged,
            &[entry("t2", Duration::from_secs(60), &["product-7"])],
        )
        .await;
    assert_eq!(a.redis.get(&tagged).await.unwrap().variants[0].body(), "t2");
    // A node that starts later applies the bans it finds in Redis.
    let c = Node::up(&server).await;
    assert_eq!(c.bans().len(), 2);
    assert!(c.redis.get(&soft).await.unwrap().variants[0].serve_stale_after_purge());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_nothing_waits_for_it_and_it_comes_back() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let mut server = levee_test::Redis::start();
    let (a, b) = (Node::up(&server).await, Node::up(&server).await);
    let k = key("/before");
    a.redis
        .put_now(&k, &[entry("x", Duration::from_secs(60), &[])])
        .await;
    server.stop();
    // Right after the crash, before the nodes noticed: no longer than op_timeout.
    let t = Instant::now();
    assert!(a.redis.get(&k).await.is_none());
    assert!(matches!(a.redis.lock(&k).await, Lock::Unavailable));
    let took = t.elapsed();
    assert!(
        took < OP_TIMEOUT * 2 + Duration::from_millis(100),
        "{took:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || !a.redis.is_up()
            && !b.redis.is_up())
        .await
    );
    // Once they know: at once.
    let t = Instant::now();
    for _ in 0..100 {
        assert!(a.redis.get(&k).await.is_none());
        assert!(matches!(a.redis.lock(&k).await, Lock::Unavailable));
        assert!(a.redis.wait_for(&k, Duration::from_secs(1)).await.is_none());
    }
    let took = t.elapsed();
    // 300 calls, none waiting for a timeout (one wait alone would take OP_TIMEOUT).
    assert!(took < OP_TIMEOUT, "{took:?}");
    let dropped = a.redis.stats().write_dropped;
    a.redis.put(&k, &[entry("y", Duration::from_secs(60), &[])]);
    a.redis
        .put_now(&k, &[entry("y", Duration::from_secs(60), &[])])
        .await;
    assert_eq!(a.redis.stats().write_dropped, dropped + 2);
    assert!(!a.redis.stats().up);
    // A purge made meanwhile is sent when Redis is back.
    let ban = Ban::now(BanMode::Remove, BanTarget::Url(key("/purged-offline")));
    a.redis.publish(ban.clone());

    server.restart();
    let back = Duration::from_secs(40);
    assert!(eventually(back, || a.redis.is_up() && b.redis.is_up()).await);
    assert!(a.redis.stats().reconnects >= 1);
    assert!(eventually(Duration::from_secs(5), || b.bans() == vec![ban.clone()]).await);
    let k2 = key("/after");
    a.redis
        .put_now(&k2, &[entry("z", Duration::from_secs(60), &[])])
        .await;
    assert_eq!(b.redis.get(&k2).await.unwrap().variants[0].body(), "z");
    assert!(matches!(b.redis.lock(&k2).await, Lock::Acquired(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatever_is_written_to_redis_by_hand_never_makes_a_node_panic() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let a = Node::up(&server).await;
    let k = key("/victim");
    let name = record_name(&k);
    let valid = encode(&k, &[entry("ok", Duration::from_secs(60), &[])]);
    let other = encode(&key("/other"), &[entry("no", Duration::from_secs(60), &[])]);
    let mut flipped = valid.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let mut lying_head = b"LVRC".to_vec();
    lying_head.extend_from_slice(&1u64.to_le_bytes());
    lying_head.extend_from_slice(&u32::MAX.to_le_bytes());
    lying_head.extend_from_slice(&u64::MAX.to_le_bytes());
    let mut big_head = b"LVRC".to_vec();
    big_head.extend_from_slice(&1u64.to_le_bytes());
    big_head.extend_from_slice(&2048u32.to_le_bytes());
    big_head.extend_from_slice(&(2048u64 * 512 * 1024).to_le_bytes());
    let garbage: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"hello".to_vec(),
        b"LVR1".to_vec(),
        levee_test::pseudo_random(4096, 1),
        valid[..valid.len() / 2].to_vec(),
        flipped,
        other,
        lying_head,
        big_head,
    ];
    for (i, g) in garbage.iter().enumerate() {
        server.set_raw(&name, g);
        assert!(a.redis.get(&k).await.is_none(), "garbage {i} was served");
        assert!(a
            .redis
            .wait_for(&k, Duration::from_millis(50))
            .await
            .is_none());
    }
    assert!(a.redis.stats().errors >= garbage.len() as u64 - 1);
    // A lock value that is not a token; bans that are not bans.
    server.set_raw(&lock_name(&k), &[0xff, 0x00, b':']);
    assert!(matches!(a.redis.lock(&k).await, Lock::Busy));
    assert!(a
        .redis
        .wait_for(&k, Duration::from_millis(50))
        .await
        .is_none());
    server.command("PUBLISH levee:purge garbage");
    server.command("PUBLISH levee:purge \"other-node 12 remove url x\"");
    server.command("ZADD levee:bans 1 nonsense");
    let b = Node::up(&server).await;
    assert!(b.bans().is_empty());
    // And the valid record is served again once it is put back.
    server.set_raw(&name, &valid);
    assert_eq!(a.redis.get(&k).await.unwrap().variants[0].body(), "ok");
    assert!(a.redis.is_up());
}

#[tokio::test]
async fn bad_urls_are_refused_and_a_redis_down_at_start_is_not() {
    for bad in ["localhost:6379", "http://localhost:6379", "redis://"] {
        let cfg = RedisConfig {
            urls: vec![bad.to_string()],
            ..RedisConfig::default()
        };
        let e = Redis::connect(cfg, Arc::new(|_| {})).unwrap_err();
        assert!(e.to_string().contains("redis://host:port/db"), "{e}");
    }
    let mixed = RedisConfig {
        urls: vec![
            "redis://a:6379".into(),
            "redis+sentinel://b:26379/mymaster".into(),
        ],
        ..RedisConfig::default()
    };
    let e = Redis::connect(mixed, Arc::new(|_| {})).unwrap_err();
    assert!(matches!(e, RedisError::Url { .. }), "{e}");
    assert!(e.to_string().contains("Sentinel"), "{e}");
    // Nothing listens there: connected in the background, forever; nothing waits.
    let port = levee_test::pebble::free_port();
    let node = Node::start(&format!("redis://127.0.0.1:{port}/0"));
    let t = Instant::now();
    assert!(node.redis.get(&key("/x")).await.is_none());
    assert!(matches!(
        node.redis.lock(&key("/x")).await,
        Lock::Unavailable
    ));
    // Nothing waited for a timeout (bounds from OP_TIMEOUT, not from a quiet machine).
    assert!(t.elapsed() < OP_TIMEOUT / 2);
    assert!(!node.redis.is_up());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_clone_closes_its_connections() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let clients = || {
        server
            .command("CLIENT LIST")
            .lines()
            .filter(|l| l.starts_with("id="))
            .count()
    };
    let before = clients();
    let a = Node::up(&server).await;
    let clone = a.redis.clone();
    // Commands and the subscription.
    assert_eq!(clients(), before + 2);
    drop(a);
    assert_eq!(clients(), before + 2, "a clone still holds them");
    drop(clone);
    assert!(eventually(Duration::from_secs(5), || clients() == before).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_costs_a_request_at_most_op_timeout_then_nothing() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let server = levee_test::Redis::start();
    let a = Node::up(&server).await;
    let k = key("/slow");
    a.redis
        .put_now(&k, &[entry("x", Duration::from_secs(60), &[])])
        .await;
    // SIGSTOP: the connection stays open and nothing answers.
    server.pause();
    let t = Instant::now();
    assert!(a.redis.get(&k).await.is_none());
    let took = t.elapsed();
    // One timeout, not a retry (two would take 2 x OP_TIMEOUT).
    assert!(took >= OP_TIMEOUT && took < OP_TIMEOUT * 2, "{took:?}");
    let t = Instant::now();
    assert!(matches!(a.redis.lock(&k).await, Lock::Unavailable));
    assert!(t.elapsed() < OP_TIMEOUT * 2);
    // Unanswered PINGs: taken for down, and then nothing waits at all.
    assert!(eventually(Duration::from_secs(10), || !a.redis.is_up()).await);
    let t = Instant::now();
    assert!(a.redis.get(&k).await.is_none());
    assert!(t.elapsed() < OP_TIMEOUT / 2, "it waited");
    server.resume();
    assert!(eventually(Duration::from_secs(40), || a.redis.is_up()).await);
    assert_eq!(a.redis.get(&k).await.unwrap().variants[0].body(), "x");
}

//! What the store costs per object, without sockets: fills a [`Store`] with N entries
//! shaped like a fill of `levee origin --body-size 1024` stores them (4 header fields,
//! bodies of 1,023 to 1,030 bytes, one hit each so their `Bytes` are shared as a hit
//! shares them), then prints RSS per object and the rate of random gets over all N keys
//! against one hot key. With jemalloc, as the levee binary runs.
//!
//! `cargo run --release -p levee-cache --example store_memory -- [N] [BODY]`
//! (defaults 1000000 and 1024). benchmarks/scale.sh measures the whole server; this
//! measures the store alone, to compare layouts quickly (ARCHITECTURE.md, "The memory
//! tier", has the figures of each layout tried).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, DATE};
use levee_cache::{CacheKey, Entry, EntryParts, Freshness, Scheme, Store, VaryKey};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn key(i: usize) -> CacheKey {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::HOST,
        HeaderValue::from_static("127.0.0.1:41234"),
    );
    let uri: http::Uri = format!("/o/{i}").parse().unwrap_or_default();
    CacheKey::for_request(Scheme::Http, &uri, &h)
}

fn entry(key: &CacheKey, i: usize, body_size: usize) -> Arc<Entry> {
    // The origin's bodies differ by a few bytes from the size asked for.
    let len = body_size - 1 + i % 8;
    let mut b = BytesMut::with_capacity(len);
    b.resize(len, b'x');
    let body: Bytes = b.freeze();
    let mut h = HeaderMap::new();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(
        DATE,
        HeaderValue::from_static("Thu, 26 Nov 2026 02:20:00 GMT"),
    );
    Arc::new(Entry::new(EntryParts {
        key,
        id: Entry::next_id(),
        status: http::StatusCode::OK,
        headers: &h,
        body,
        coding: levee_compress::Coding::Identity,
        levee_coded: None,
        vary: VaryKey::default(),
        freshness: Freshness {
            lifetime: Duration::from_secs(3600),
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            grace: Duration::from_secs(10),
            retain: Duration::from_secs(10),
        },
        initial_age: Duration::ZERO,
        response_time: Instant::now(),
        tags: Default::default(),
    }))
}

/// Gets per second over `keys`, picked by a xorshift sequence, for `secs`.
fn get_rate(store: &Store, keys: &[CacheKey], secs: f64) -> f64 {
    let req = HeaderMap::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let start = Instant::now();
    let mut n = 0u64;
    let mut bytes = 0usize;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = &keys[(x % keys.len() as u64) as usize];
            if let Some(e) = store.get(k, &req) {
                let b = e.body();
                bytes += b.len();
            }
            n += 1;
        }
    }
    std::hint::black_box(bytes);
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let body: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    println!(
        "size_of Entry {} StoredHeaders {} CacheKey {}",
        std::mem::size_of::<Entry>(),
        std::mem::size_of::<levee_cache::StoredHeaders>(),
        std::mem::size_of::<CacheKey>()
    );
    let store = Store::new(64 << 30);
    let keys: Vec<CacheKey> = (0..n).map(key).collect();
    // The keys the harness keeps to look entries up are not the store's cost.
    let before = rss_bytes();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        store.insert(k.clone(), entry(k, i, body));
    }
    let fill = t.elapsed();
    // The first call sweeps the whole store for useless entries (then at most once a
    // minute): what a walk of every shard costs.
    let t = Instant::now();
    store.run_pending_tasks();
    let sweep = t.elapsed();
    // One hit each, as the check pass of the benchmark makes.
    let req = HeaderMap::new();
    let mut hits = 0;
    for k in &keys {
        if let Some(e) = store.get(k, &req) {
            std::hint::black_box(e.body());
            hits += 1;
        }
    }
    store.run_pending_tasks();
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_bytes();
    let bodies: u64 = (0..n).map(|i| (body - 1 + i % 8) as u64).sum();
    let per = (after - before) as f64 / n as f64;
    println!(
        "sweep of {n} objects: {:.1} ms",
        sweep.as_secs_f64() * 1000.0
    );
    println!(
        "{n} objects: fill {:.2} s, {hits} hits, len {}, weighted {} MiB; RSS +{:.1} MiB, \
         {:.0} B/object, overhead beyond the nominal {body} B body {:.0} B, beyond the real bodies {:.0} B",
        fill.as_secs_f64(),
        store.len(),
        store.weighted_size() >> 20,
        (after - before) as f64 / 1048576.0,
        per,
        per - body as f64,
        ((after - before) as f64 - bodies as f64) / n as f64,
    );
    let hot = [keys[n / 2].clone()];
    let mut random = Vec::new();
    let mut one = Vec::new();
    for _ in 0..3 {
        random.push(get_rate(&store, &keys, 1.0));
        one.push(get_rate(&store, &hot, 1.0));
    }
    random.sort_by(f64::total_cmp);
    one.sort_by(f64::total_cmp);
    println!(
        "gets/s, one thread, median of 3: random over {n} {:.0}, one hot key {:.0}, ratio {:.2}",
        random[1],
        one[1],
        random[1] / one[1]
    );
}

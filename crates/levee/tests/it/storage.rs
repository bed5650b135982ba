//! Storage: the object size limit, streaming while storing, bounded memory.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use levee_test::{levee, Origin, Reply, Req};

fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed)
        .collect::<Vec<u8>>()
        .into()
}

#[tokio::test]
async fn responses_over_max_object_size_stream_through_complete_but_are_not_stored() {
    let big = pattern(200 * 1024, 7);
    let body = big.clone();
    let origin = Origin::start(move |r| {
        let reply = Reply::ok().header("cache-control", "max-age=60");
        match r.path.as_str() {
            // Content-Length known up front.
            "/sized" => reply.body(body.clone()),
            // Chunked: the size is only known once the limit has been passed.
            _ => reply.chunks(
                body.chunks(16 * 1024)
                    .map(|c| (Duration::ZERO, Bytes::copy_from_slice(c)))
                    .collect(),
            ),
        }
    });
    let levee = levee!()
        .backend(&origin.url())
        .debug_headers()
        .config("[cache]\nmax_object_size = \"64KiB\"")
        .start();
    for path in ["/sized", "/chunked"] {
        for round in 0..3 {
            let r = levee.get(path).await;
            assert_eq!(r.status, 200, "{path}");
            assert_eq!(r.body.len(), big.len(), "{path} round {round}: truncated");
            assert!(r.body == big, "{path} round {round}: body altered");
            assert_ne!(r.x_cache(), "HIT", "{path} round {round}: {}", r.summary());
        }
        assert_eq!(origin.requests_for(path), 3, "{path} was stored");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_response_reaches_the_client_before_the_origin_has_finished() {
    const TOTAL: usize = 5 << 20;
    const FIRST: usize = 64 << 10;
    let body = pattern(TOTAL, 3);
    let origin_body = body.clone();
    let origin = Origin::start(move |_| {
        let rest = origin_body.slice(FIRST..);
        let mut chunks = vec![(Duration::ZERO, origin_body.slice(..FIRST))];
        // A pause after the first chunk, then the rest.
        let mut delay = Duration::from_secs(1);
        for c in rest.chunks(256 << 10) {
            chunks.push((delay, Bytes::copy_from_slice(c)));
            delay = Duration::ZERO;
        }
        Reply::ok()
            .header("cache-control", "max-age=60")
            .header("content-length", &TOTAL.to_string())
            .chunks(chunks)
    });
    let levee = levee!().backend(&origin.url()).start();

    let start = Instant::now();
    let resp = Req::get("/big").send_streaming(levee.addr()).await;
    assert_eq!(resp.status(), 200);
    let mut body_stream = resp.into_body();
    let mut got = Vec::with_capacity(TOTAL);
    let mut first_byte_at = None;
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(20), body_stream.frame())
        .await
        .expect("body stalled")
    {
        let frame = frame.expect("body failed");
        if let Ok(data) = frame.into_data() {
            if first_byte_at.is_none() && !data.is_empty() {
                first_byte_at = Some(start.elapsed());
            }
            got.extend_from_slice(&data);
        }
    }
    let total_time = start.elapsed();
    let first = first_byte_at.expect("no body at all");
    assert!(
        first < Duration::from_millis(700),
        "first bytes took {first:?}: the response was buffered instead of streamed"
    );
    assert!(
        total_time >= Duration::from_millis(950),
        "the whole body came in {total_time:?}, before the origin sent it"
    );
    assert_eq!(got.len(), TOTAL);
    assert!(got == body[..], "streamed body altered");

    // And it was stored while streaming.
    levee.wait_stored("/big").await;
    let r = levee.get("/big").await;
    assert_eq!(r.x_cache(), "HIT");
    assert!(r.body == body, "stored body altered");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_size_bounds_what_is_stored_and_evicts_without_failing() {
    const OBJECTS: usize = 100;
    const SIZE: usize = 64 << 10;
    let origin = Origin::start(|r| {
        let seed = r
            .path
            .trim_start_matches("/obj/")
            .parse::<u8>()
            .unwrap_or(0);
        Reply::ok()
            .header("cache-control", "max-age=600")
            .body(pattern(SIZE, seed))
    });
    let levee = levee!()
        .backend(&origin.url())
        .config("[cache]\nsize = \"1MiB\"\nmax_object_size = \"128KiB\"")
        .start();
    for i in 0..OBJECTS {
        let r = levee.get(&format!("/obj/{i}")).await;
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(SIZE, i as u8), "/obj/{i} altered");
    }
    // Let the fills store and the store settle (reading the metrics runs its pending
    // evictions), then count what is still there without touching the backend.
    levee.wait_fills_done().await;
    let mut stored = Vec::new();
    for i in 0..OBJECTS {
        let r = levee
            .get_with(&format!("/obj/{i}"), &[("cache-control", "only-if-cached")])
            .await;
        match r.status.as_u16() {
            200 => {
                assert!(r.body == pattern(SIZE, i as u8), "stored /obj/{i} altered");
                stored.push(i);
            }
            504 => {}
            other => panic!("/obj/{i}: unexpected {other}"),
        }
    }
    // 1 MiB holds at most 16 objects of 64 KiB (fewer with the per-entry overhead).
    assert!(
        stored.len() <= 16,
        "{} objects of 64 KiB stored in a 1 MiB cache: {stored:?}",
        stored.len()
    );
    assert!(
        stored.len() < 10 || !(0..10).all(|i| stored.contains(&i)),
        "nothing was evicted: {stored:?}"
    );
    assert_eq!(origin.requests(), OBJECTS);
    // Still serving after all that eviction.
    let r = levee.get("/obj/1").await;
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(SIZE, 1));
}

/// Issue 26: what levee keeps beside a stored page (its body in other codings, the memfd
/// copy sendfile sends) goes with the page. Pages refreshed 2,000 times over leave
/// only what the live pages need: before, every refresh left its uncompressed copy in a
/// side cache until that filled up (16 MiB by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshing_pages_thousands_of_times_leaves_only_what_the_live_pages_need() {
    const SMALL: usize = 12 * 1024;
    const LARGE: usize = 100 * 1024;
    let origin = Origin::start(|r| {
        let len = if r.path.starts_with("/large") {
            LARGE
        } else {
            SMALL
        };
        let line = format!("<p>{} is a page about caching and cookies.</p>\n", r.path);
        let body: String = line.repeat(len / line.len() + 1)[..len].to_string();
        Reply::ok()
            .header("content-type", "text/html; charset=utf-8")
            .header("cache-control", "public, max-age=3600")
            .header("surrogate-key", "pages")
            .body(body)
    });
    let levee = levee!().backend(&origin.url()).start();
    let pages: Vec<String> = (0..8)
        .map(|i| format!("/small/{i}"))
        .chain((0..2).map(|i| format!("/large/{i}")))
        .collect();
    let mut conn = levee_test::Conn::open(levee.addr()).await;
    let mut most_derived = 0.0_f64;
    let mut most_sendfile = 0.0_f64;
    for round in 0..200 {
        // Twice each: the first fetches or refreshes it, the second is a hit. No
        // Accept-Encoding: the stored (gzip) page is sent uncompressed, made from it once
        // and kept with it; large ones from a memfd copy, with sendfile.
        for _ in 0..2 {
            for p in &pages {
                let r = conn.send(Req::get(p)).await;
                assert_eq!(r.status, 200, "{p}: {}", r.summary());
                let len = if p.starts_with("/large") {
                    LARGE
                } else {
                    SMALL
                };
                assert_eq!(r.body.len(), len, "{p}");
            }
        }
        levee.wait_fills_done().await;
        if round % 20 == 0 {
            most_derived = most_derived.max(levee.metric("levee_transcoded_bytes").await);
            most_sendfile = most_sendfile.max(levee.metric("levee_sendfile_bytes").await);
        }
        // Refreshed (a soft purge: validated, here fetched again, and replaced) or removed
        // (a purge), in turns.
        let soft = if round % 2 == 0 { "&soft=1" } else { "" };
        assert_eq!(
            levee.purge(&format!("tag=pages{soft}")).await,
            pages.len() as u64
        );
    }
    assert!(
        origin.requests() >= 1800,
        "the pages were not refreshed: {} backend requests",
        origin.requests()
    );
    // The test measures something: other forms were made and kept.
    assert!(most_derived > 0.0, "no uncompressed form was ever kept");
    assert!(most_sendfile > 0.0, "no memfd copy was ever kept");
    let live = (8 * (SMALL + 64) + 2 * (LARGE + 64)) as f64;
    let derived = levee.metric("levee_transcoded_bytes").await;
    assert!(
        derived <= live,
        "{derived} bytes of other codings kept for {live} bytes of live pages"
    );
    let sendfile = levee.metric("levee_sendfile_bytes").await;
    assert!(
        sendfile <= (2 * (LARGE + 64)) as f64,
        "{sendfile} bytes of memfd copies kept for 2 large pages"
    );
    assert!(levee.metric("levee_cache_objects").await <= pages.len() as f64);
    assert!(levee.metric("levee_cache_bytes").await <= live);
    assert!(levee.metric("levee_hit_for_pass_urls").await <= pages.len() as f64);
    assert_eq!(levee.metric("levee_fills_registered").await, 0.0);
    assert!(levee.metric("levee_top_urls_tracked").await <= pages.len() as f64);
}

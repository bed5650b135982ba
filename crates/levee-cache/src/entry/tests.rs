use super::*;

#[test]
fn size_classes_are_jemallocs() {
    let got: Vec<usize> = [
        1, 8, 9, 16, 100, 128, 129, 160, 161, 1024, 1025, 1280, 1281, 1600, 2049,
    ]
    .iter()
    .map(|&n| size_class(n))
    .collect();
    assert_eq!(
        got,
        [8, 8, 16, 16, 112, 128, 160, 160, 192, 1024, 1280, 1280, 1536, 1792, 2560]
    );
}
use crate::key::Scheme;
use http::header::{CONTENT_TYPE, ETAG, VARY};

fn parts<'a>(key: &'a CacheKey, headers: &'a HeaderMap, body: Bytes) -> EntryParts<'a> {
    EntryParts {
        key,
        id: 42,
        status: StatusCode::NOT_FOUND,
        headers,
        body,
        coding: Coding::Br,
        levee_coded: None,
        vary: VaryKey::default(),
        freshness: Freshness {
            lifetime: Duration::from_millis(1500),
            stale_while_revalidate: Duration::from_secs(7),
            stale_if_error: Duration::from_nanos(3),
            must_revalidate: true,
            no_cache: false,
            grace: Duration::from_secs(3600),
            retain: Duration::MAX,
        },
        initial_age: Duration::from_secs(2),
        response_time: Instant::now(),
        tags: Tags::default(),
    }
}

fn key() -> CacheKey {
    let mut h = HeaderMap::new();
    h.insert(http::header::HOST, HeaderValue::from_static("Entry.test"));
    CacheKey::for_request(Scheme::Https, &"/p?q=1".parse().unwrap(), &h).in_site(3)
}

#[test]
fn every_fact_reads_back_as_stored() {
    let k = key();
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
    h.insert("x-custom", HeaderValue::from_static("1"));
    let p = parts(&k, &h, Bytes::from_static(b"<p>body</p>"));
    let (freshness, at) = (p.freshness, p.response_time);
    let e = Entry::new(p);
    assert_eq!(e.id(), 42);
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
    assert_eq!(e.coding(), Coding::Br);
    // Durations to the nanosecond; beyond u64 nanoseconds (584 years), saturated.
    let got = e.freshness();
    assert_eq!(got.retain, Duration::from_nanos(u64::MAX));
    assert_eq!(
        Freshness {
            retain: freshness.retain,
            ..got
        },
        freshness
    );
    assert_eq!(e.initial_age(), Duration::from_secs(2));
    assert_eq!(e.response_time(), at);
    assert_eq!(e.body(), "<p>body</p>");
    assert_eq!(e.body_bytes(), b"<p>body</p>");
    assert_eq!(e.headers.to_map(), h);
    assert!(e.is_for(&k));
    assert!(!e.is_for(&k.clone().in_site(0)));
    assert!(!e.is_for(&k.with_scheme(Scheme::Http)));
    assert_eq!(e.key(), k);
    assert_eq!(e.key().host(), "entry.test");
    assert!(e.vary().is_empty() && e.tags().is_empty() && e.levee_coded().is_none());
    assert!(e.rare.is_none(), "nothing rare, nothing allocated for it");
    assert!(
        std::mem::size_of::<Entry>() <= 80,
        "{}",
        std::mem::size_of::<Entry>()
    );
}

#[test]
fn a_large_body_rare_fields_and_an_early_response_time_are_kept() {
    let k = key();
    let mut h = HeaderMap::new();
    h.insert(VARY, HeaderValue::from_static("accept-language"));
    h.insert(ETAG, HeaderValue::from_static("W/\"x\""));
    let mut req = HeaderMap::new();
    req.insert("accept-language", HeaderValue::from_static("ko"));
    let large = Bytes::from(vec![9u8; crate::headers::INLINE_BODY_MAX + 1]);
    let mut p = parts(&k, &h, large.clone());
    p.vary = VaryKey::new(&h, &req);
    p.tags = vec![Box::<str>::from("t")].into();
    p.levee_coded = Some(LeveeCoded {
        original_etag: Some(HeaderValue::from_static("\"x\"")),
    });
    // Before the instant response times are counted from (a record read back from
    // disk, written long before this process started).
    let early = epoch()
        .checked_sub(Duration::from_secs(1000))
        .unwrap_or_else(epoch);
    p.response_time = early;
    let e = Entry::new(p);
    assert_eq!(e.response_time(), early);
    assert_eq!(e.body().as_ptr(), large.as_ptr(), "not copied");
    assert!(e.vary().matches(&req));
    assert_eq!(&**e.tags(), &[Box::<str>::from("t")]);
    assert_eq!(e.etag(), Some(HeaderValue::from_static("\"x\"")));
    // A large body is charged as it is, beside the buffer's size class.
    assert!(e.weight() as usize >= large.len() + ENTRY_OVERHEAD);
}

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{StatusCode, Version};

use super::*;

fn ex(status: u16, fields: &[(&str, &str)], body: &str) -> Exchange {
    let now = SystemTime::now();
    let mut headers = HeaderMap::new();
    headers.insert(
        header::DATE,
        HeaderValue::from_str(&httpdate::fmt_http_date(now)).unwrap(),
    );
    for (n, v) in fields {
        headers.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    Exchange {
        status: StatusCode::from_u16(status).unwrap(),
        version: Version::HTTP_11,
        headers,
        body: Bytes::from(body.to_string()),
        truncated: false,
        elapsed: Duration::from_millis(5),
        received: now,
        closed: false,
    }
}

fn probe(first: Exchange) -> Probe {
    Probe {
        second: Some(first.clone()),
        conditional: None,
        identity: None,
        first,
    }
}

fn ids(p: &Probe) -> Vec<&'static str> {
    reasons(p, &|n| n == "PHPSESSID")
        .iter()
        .map(|r| r.id)
        .collect()
}

const GOOD: &[(&str, &str)] = &[
    ("cache-control", "public, max-age=60"),
    ("etag", "\"v1\""),
    ("content-type", "text/html"),
];

#[test]
fn a_well_behaved_page_has_no_reasons_and_is_storable() {
    let mut p = probe(ex(200, GOOD, "short"));
    p.conditional = Some(ex(304, &[], ""));
    assert!(ids(&p).is_empty(), "{:?}", reasons(&p, &|_| false));
    assert!(storable(&p.first));
}

#[test]
fn each_problem_is_named() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("set-cookie", "PHPSESSID=a; path=/")], "session-cookie"),
        (&[("cache-control", "private")], "private"),
        (&[("cache-control", "no-store")], "no-store"),
        (&[("cache-control", "max-age=0")], "no-freshness"),
        (&[("vary", "Accept-Encoding, Cookie")], "vary-cookie"),
        (&[("vary", "*")], "vary-star"),
        (&[("age", "x")], "age"),
        (
            &[("expires", "Thu, 19 Nov 1981 08:52:00 GMT")],
            "no-freshness",
        ),
    ];
    for (fields, id) in cases {
        let mut all: Vec<(&str, &str)> = vec![("etag", "\"v1\""), ("content-type", "text/html")];
        all.extend_from_slice(fields);
        let p = probe(ex(200, &all, ""));
        assert!(ids(&p).contains(id), "{fields:?}: {:?}", ids(&p));
        assert!(!storable(&p.first), "{fields:?}");
    }
}

#[test]
fn validators_and_304() {
    let p = probe(ex(200, &[("cache-control", "max-age=60")], ""));
    assert!(ids(&p).contains(&"no-validator"));
    let mut p = probe(ex(200, GOOD, ""));
    p.conditional = Some(ex(200, GOOD, ""));
    assert!(ids(&p).contains(&"no-304"));
}

#[test]
fn a_cookie_new_for_each_visitor_is_told_from_one_everyone_gets() {
    let mut p = probe(ex(200, &[("set-cookie", "visit=1; path=/")], ""));
    p.second = Some(ex(200, &[("set-cookie", "visit=2; path=/")], ""));
    assert!(ids(&p).contains(&"cookie-differs"));
    let p = probe(ex(200, &[("set-cookie", "lang=en; path=/")], ""));
    assert!(ids(&p).contains(&"set-cookie"));
    assert!(!ids(&p).contains(&"cookie-differs"));
}

#[test]
fn compression_keep_alive_and_date() {
    let big = "x".repeat(2000);
    let p = probe(ex(200, GOOD, &big));
    assert!(ids(&p).contains(&"no-compression"));
    let mut gz = ex(200, GOOD, &big);
    gz.headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    assert!(!ids(&probe(gz)).contains(&"no-compression"));
    let mut closing = ex(200, GOOD, "");
    closing.closed = true;
    assert!(ids(&probe(closing)).contains(&"no-keep-alive"));
    let mut dateless = ex(200, GOOD, "");
    dateless.headers.remove(header::DATE);
    assert!(ids(&probe(dateless)).contains(&"date"));
    let mut skewed = ex(200, GOOD, "");
    skewed.headers.insert(
        header::DATE,
        HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
    );
    assert!(ids(&probe(skewed)).contains(&"date"));
}

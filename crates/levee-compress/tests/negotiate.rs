//! Accept-Encoding, Content-Encoding, Content-Type and Vary handling.
// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use levee_compress::{add_vary_accept_encoding, compressible, Accepted, Coding};
use Coding::{Br, Gzip, Identity, Zstd};

const PREFERRED: [Coding; 4] = [Br, Zstd, Gzip, Identity];

fn headers(lines: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for l in lines {
        h.append(ACCEPT_ENCODING, HeaderValue::from_str(l).unwrap());
    }
    h
}

fn parse(lines: &[&str]) -> Accepted {
    Accepted::parse(&headers(lines))
}

fn qs(a: &Accepted) -> [u16; 4] {
    [a.q(Identity), a.q(Gzip), a.q(Br), a.q(Zstd)]
}

#[test]
fn no_header_means_identity_only() {
    let a = parse(&[]);
    assert!(!a.is_present());
    assert_eq!(qs(&a), [1000, 0, 0, 0]);
    assert_eq!(a.choose(&PREFERRED), Some(Identity));
    assert_eq!(a.choose(&[Gzip, Br]), None);
    assert_eq!(a, Accepted::default());
}

#[test]
fn empty_header_means_identity_only() {
    for v in ["", "   ", ",", " , ,, "] {
        let a = parse(&[v]);
        assert!(a.is_present(), "{v:?}");
        assert!(a.accepts(Identity), "{v:?}");
        assert!(
            !a.accepts(Gzip) && !a.accepts(Br) && !a.accepts(Zstd),
            "{v:?}"
        );
        assert_eq!(a.choose(&PREFERRED), Some(Identity), "{v:?}");
    }
}

#[test]
fn browser_headers() {
    let chrome = parse(&["gzip, deflate, br, zstd"]);
    assert_eq!(qs(&chrome), [1, 1000, 1000, 1000]);
    assert_eq!(chrome.choose(&PREFERRED), Some(Br));
    assert_eq!(chrome.choose(&[Gzip, Br, Identity]), Some(Gzip));
    let curl = parse(&["deflate, gzip"]);
    assert_eq!(curl.choose(&PREFERRED), Some(Gzip));
    let old = parse(&["gzip;q=1.0, identity; q=0.5, *;q=0"]);
    assert_eq!(qs(&old), [500, 1000, 0, 0]);
    assert_eq!(old.choose(&PREFERRED), Some(Gzip));
}

#[test]
fn q_zero_refuses() {
    let a = parse(&["br;q=0, gzip"]);
    assert_eq!(a.q(Br), 0);
    assert_eq!(a.choose(&PREFERRED), Some(Gzip));
    let a = parse(&["gzip;q=0"]);
    assert_eq!(a.choose(&[Gzip, Br]), None);
    assert_eq!(a.choose(&PREFERRED), Some(Identity));
    let a = parse(&["gzip;q=0.000, br;q=0.0"]);
    assert_eq!(a.choose(&PREFERRED), Some(Identity));
}

#[test]
fn star() {
    let a = parse(&["*"]);
    assert_eq!(qs(&a), [1000, 1000, 1000, 1000]);
    assert_eq!(a.choose(&PREFERRED), Some(Br));
    let a = parse(&["*;q=0.5, gzip"]);
    assert_eq!(qs(&a), [500, 1000, 500, 500]);
    assert_eq!(a.choose(&PREFERRED), Some(Gzip));
    // `*;q=0` refuses everything not named, identity included.
    let a = parse(&["*;q=0"]);
    assert_eq!(qs(&a), [0, 0, 0, 0]);
    assert_eq!(a.choose(&PREFERRED), None);
    let a = parse(&["gzip, *;q=0"]);
    assert_eq!(qs(&a), [0, 1000, 0, 0]);
    assert_eq!(a.choose(&PREFERRED), Some(Gzip));
    let a = parse(&["*;q=0, identity"]);
    assert_eq!(a.choose(&PREFERRED), Some(Identity));
}

#[test]
fn identity_refused() {
    let a = parse(&["identity;q=0"]);
    assert_eq!(qs(&a), [0, 0, 0, 0]);
    assert_eq!(a.choose(&PREFERRED), None);
    let a = parse(&["gzip, identity;q=0"]);
    assert_eq!(a.choose(&[Identity]), None);
    assert_eq!(a.choose(&PREFERRED), Some(Gzip));
    let a = parse(&["identity;q=0, *"]);
    assert_eq!(qs(&a), [0, 1000, 1000, 1000]);
}

#[test]
fn identity_unnamed_is_least_preferred() {
    let a = parse(&["gzip;q=0.001"]);
    assert_eq!(a.q(Identity), 1);
    // A tie between the two at the lowest weight goes to the candidate listed first.
    assert_eq!(a.choose(&[Gzip, Identity]), Some(Gzip));
    assert_eq!(a.choose(&[Identity, Gzip]), Some(Identity));
    let a = parse(&["gzip;q=0.002"]);
    assert_eq!(a.choose(&[Identity, Gzip]), Some(Gzip));
}

#[test]
fn case_and_spaces() {
    let a = parse(&["  GZIP ; Q=0.5 ,\tBr;q = 0.8 , ZsTd\t;\tq=0.3  "]);
    assert_eq!(qs(&a), [1, 500, 800, 300]);
    assert_eq!(a.choose(&PREFERRED), Some(Br));
    let a = parse(&["X-GZIP"]);
    assert_eq!(a.q(Gzip), 1000);
    let a = parse(&["x-gzip;q=0.4, gzip;q=0.9"]);
    // x-gzip is gzip, so these are duplicates and the lowest weight stands.
    assert_eq!(a.q(Gzip), 400);
}

#[test]
fn invalid_q_ignores_the_element() {
    for v in [
        "gzip;q=2",
        "gzip;q=1.5",
        "gzip;q=-1",
        "gzip;q=abc",
        "gzip;q=.5",
        "gzip;q=0.5x",
        "gzip;q=0.1234",
        "gzip;q=",
        "gzip;q",
        "gzip;q=\"0.5\"",
    ] {
        let a = parse(&[v, "br;q=0.1"]);
        assert_eq!(a.q(Gzip), 0, "{v}");
        assert_eq!(a.q(Br), 100, "{v}");
        assert_eq!(a.choose(&PREFERRED), Some(Br), "{v}");
    }
    // Other parameters and stray semicolons are ignored, not fatal.
    let a = parse(&["gzip;level=9;;q=0.7;"]);
    assert_eq!(a.q(Gzip), 700);
}

#[test]
fn garbage_is_ignored() {
    for v in [
        "gz ip",
        "gzip br",
        ";q=1",
        "===",
        ";;;,,,;;",
        "\"gzip\"",
        "gzip/br",
        "compress, deflate, exi, pack200-gzip",
    ] {
        let a = parse(&[v]);
        assert_eq!(qs(&a)[1..], [0, 0, 0], "{v}");
        assert_eq!(a.choose(&PREFERRED), Some(Identity), "{v}");
    }
    // Bytes that are not visible ASCII cannot make a HeaderValue::from_str, but can
    // arrive from the wire.
    let mut h = HeaderMap::new();
    h.append(
        ACCEPT_ENCODING,
        HeaderValue::from_bytes(b"\xff\xfe, gzip;q=0.\xe9, br").unwrap(),
    );
    let a = Accepted::parse(&h);
    assert_eq!(qs(&a), [1, 0, 1000, 0]);
}

#[test]
fn duplicates_take_the_lowest_weight() {
    let a = parse(&["gzip, gzip;q=0"]);
    assert_eq!(a.q(Gzip), 0);
    let a = parse(&["gzip;q=0.3, gzip"]);
    assert_eq!(a.q(Gzip), 300);
    let a = parse(&["br", "br;q=0.2", "gzip"]);
    assert_eq!(a.q(Br), 200);
    assert_eq!(a.choose(&PREFERRED), Some(Gzip));
    let a = parse(&["*;q=0.9, *;q=0.1"]);
    assert_eq!(a.q(Zstd), 100);
}

#[test]
fn field_lines_are_combined() {
    let a = parse(&["gzip", "br;q=0.5", "", "identity;q=0"]);
    assert_eq!(qs(&a), [0, 1000, 500, 0]);
    assert_eq!(Accepted::from_value("gzip, br;q=0.5, identity;q=0"), a);
}

#[test]
fn choose_ties_go_to_the_first_candidate() {
    let a = parse(&["gzip, br, zstd"]);
    assert_eq!(a.choose(&[Zstd, Br, Gzip]), Some(Zstd));
    assert_eq!(a.choose(&[Gzip, Zstd, Br]), Some(Gzip));
    // A higher weight beats the order.
    let a = parse(&["gzip;q=0.9, br;q=0.8"]);
    assert_eq!(a.choose(&[Br, Gzip]), Some(Gzip));
    // Candidates the client refused are skipped, duplicates are harmless.
    let a = parse(&["gzip;q=0.5, br;q=0"]);
    assert_eq!(a.choose(&[Br, Br, Gzip, Gzip]), Some(Gzip));
    assert_eq!(a.choose(&[]), None);
}

#[test]
fn tokens() {
    for c in Coding::ALL {
        assert_eq!(Coding::from_token(c.token()), Some(c));
        assert_eq!(Coding::from_token(&c.token().to_uppercase()), Some(c));
        assert_eq!(c.to_string(), c.token());
    }
    assert_eq!(Coding::from_token("x-gzip"), Some(Gzip));
    assert_eq!(Coding::from_token("deflate"), None);
    assert_eq!(Coding::from_token(""), None);
}

#[test]
fn content_encoding() {
    let ce = |s: &[u8]| Coding::from_content_encoding(&HeaderValue::from_bytes(s).unwrap());
    assert_eq!(ce(b"gzip"), Some(Gzip));
    assert_eq!(ce(b" BR "), Some(Br));
    assert_eq!(ce(b"zstd"), Some(Zstd));
    assert_eq!(ce(b"x-gzip"), Some(Gzip));
    assert_eq!(ce(b""), Some(Identity));
    assert_eq!(ce(b"identity"), Some(Identity));
    assert_eq!(ce(b"identity, gzip"), Some(Gzip));
    assert_eq!(ce(b"gzip, ,identity"), Some(Gzip));
    assert_eq!(ce(b"gzip, br"), None);
    assert_eq!(ce(b"gzip, gzip"), None);
    assert_eq!(ce(b"deflate"), None);
    assert_eq!(ce(b"gzip;q=1"), None);
    assert_eq!(ce(b"\xffgzip"), None);

    let mut h = HeaderMap::new();
    assert_eq!(Coding::from_headers(&h), Some(Identity));
    h.append(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    assert_eq!(Coding::from_headers(&h), Some(Gzip));
    h.append(CONTENT_ENCODING, HeaderValue::from_static("identity"));
    assert_eq!(Coding::from_headers(&h), Some(Gzip));
    h.append(CONTENT_ENCODING, HeaderValue::from_static("br"));
    assert_eq!(Coding::from_headers(&h), None);
}

#[test]
fn compressible_types() {
    let yes = [
        "text/html",
        "text/html; charset=UTF-8",
        "TEXT/HTML;CHARSET=utf-8",
        "text/css",
        "text/plain",
        "text/csv",
        "text/javascript",
        "text/xml",
        "  text/html  ; charset=euc-kr",
        "application/json",
        "application/json; charset=utf-8",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/xml",
        "application/xhtml+xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/ld+json",
        "application/manifest+json",
        "application/problem+json",
        "application/vnd.api+json",
        "application/wasm",
        "application/vnd.ms-fontobject",
        "application/x-font-ttf",
        "application/x-font-otf",
        "application/x-ndjson",
        "image/svg+xml",
        "image/x-icon",
        "image/vnd.microsoft.icon",
        "image/bmp",
        "font/ttf",
        "font/otf",
        "Font/OTF",
        "font/collection",
    ];
    let no = [
        "",
        "text",
        "text/",
        "/html",
        "html",
        "text/event-stream",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "video/mp4",
        "audio/mpeg",
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-bzip2",
        "application/zstd",
        "application/pdf",
        "application/octet-stream",
        "application/x-7z-compressed",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "font/woff",
        "font/woff2",
        "application/font-woff",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json5x",
        "textual/html",
    ];
    for t in yes {
        assert!(
            compressible(Some(&HeaderValue::from_str(t).unwrap())),
            "{t}"
        );
    }
    for t in no {
        assert!(
            !compressible(Some(&HeaderValue::from_str(t).unwrap())),
            "{t}"
        );
    }
    assert!(!compressible(None));
    assert!(!compressible(Some(
        &HeaderValue::from_bytes(b"text/\xffhtml").unwrap()
    )));
}

fn vary(lines: &[&str]) -> Vec<String> {
    let mut h = HeaderMap::new();
    for l in lines {
        h.append(VARY, HeaderValue::from_str(l).unwrap());
    }
    add_vary_accept_encoding(&mut h);
    h.get_all(VARY)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn vary_accept_encoding() {
    assert_eq!(vary(&[]), ["Accept-Encoding"]);
    assert_eq!(vary(&[""]), ["Accept-Encoding"]);
    assert_eq!(vary(&["Cookie"]), ["Cookie, Accept-Encoding"]);
    assert_eq!(
        vary(&["Cookie, User-Agent"]),
        ["Cookie, User-Agent, Accept-Encoding"]
    );
    assert_eq!(
        vary(&["Cookie", "Origin"]),
        ["Cookie, Origin, Accept-Encoding"]
    );
    assert_eq!(
        vary(&[" Cookie ,, Origin "]),
        ["Cookie, Origin, Accept-Encoding"]
    );
    // Already there, in any form: unchanged.
    assert_eq!(vary(&["accept-encoding"]), ["accept-encoding"]);
    assert_eq!(
        vary(&["Cookie,ACCEPT-ENCODING"]),
        ["Cookie,ACCEPT-ENCODING"]
    );
    assert_eq!(
        vary(&["Cookie", "Accept-Encoding"]),
        ["Cookie", "Accept-Encoding"]
    );
    // `*` already varies on everything.
    assert_eq!(vary(&["*"]), ["*"]);
    assert_eq!(vary(&["Cookie, *"]), ["Cookie, *"]);
    // Twice is the same as once.
    let mut h = HeaderMap::new();
    h.insert(VARY, HeaderValue::from_static("Origin"));
    add_vary_accept_encoding(&mut h);
    add_vary_accept_encoding(&mut h);
    assert_eq!(h.get_all(VARY).iter().count(), 1);
    assert_eq!(h[VARY], "Origin, Accept-Encoding");
}

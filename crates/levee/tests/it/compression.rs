//! Content coding end to end (crates/levee-proxy/src/encoding.rs): real levee, real
//! origin, every path a response can take.
//!
//! - Stored responses are compressed once (gzip); br, zstd and identity are derived from
//!   the stored copy without asking the origin again.
//! - Negotiation: q-values, ties to gzip, case, `x-gzip`, refusals (identity anyway).
//! - Validators: weak `ETag` for coded forms, the origin's strong one for identity and for
//!   revalidation; 304s in every coding; `Vary: Accept-Encoding`.
//! - What is never compressed: small bodies, compressed media types, `no-transform`,
//!   bodies the origin compressed, 204/206/304, HEAD bodies, compression turned off.
//! - Streaming: misses, passes, slow origins (progressively), big static files.
//! - Static files from `--root`: in memory, large, ranges, images, edits.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::BodyExt;
use levee_compress::{compress, decompress, Coding, DecompressBody, Level};
use levee_test::{levee, Levee, Origin, Reply, Req, Resp};

const HTML: &str = "text/html; charset=utf-8";

/// Compressible HTML of at least `size` bytes, different for each `tag`.
fn html(tag: &str, size: usize) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html><head><title>levee</title></head><body>\n");
    let mut i = 0;
    while s.len() < size {
        s.push_str(&format!(
            "<p class=\"row-{}\">{tag} paragraph {i}: levee compresses this text once and \
             serves it many times.</p>\n",
            i % 7
        ));
        i += 1;
    }
    s.push_str("</body></html>\n");
    s
}

/// `GET path`, with `Accept-Encoding: ae` unless `ae` is `None` (no header at all).
async fn get(levee: &Levee, path: &str, ae: Option<&str>) -> Resp {
    with_ae(Req::get(path), ae).send(levee).await
}

fn with_ae(req: Req, ae: Option<&str>) -> Req {
    match ae {
        Some(ae) => req.header("accept-encoding", ae),
        None => req,
    }
}

/// The coding a response says it is in.
fn coding_of(r: &Resp) -> Coding {
    match r.header_all("content-encoding").as_slice() {
        [] => Coding::Identity,
        [one] => Coding::from_token(one)
            .unwrap_or_else(|| panic!("unknown Content-Encoding {one:?}: {}", r.summary())),
        many => panic!("several Content-Encoding fields {many:?}: {}", r.summary()),
    }
}

/// The body with its content coding undone.
fn decoded(r: &Resp) -> Bytes {
    let coding = coding_of(r);
    decompress(coding, &r.body, 64 << 20)
        .unwrap_or_else(|e| panic!("the {coding} body does not decode ({e}): {:?}", r.headers))
}

/// Whether `Vary` names `Accept-Encoding` exactly once (over all its field lines).
fn varies_on_accept_encoding(r: &Resp) -> bool {
    r.header_all("vary")
        .iter()
        .flat_map(|v| v.split(','))
        .filter(|n| n.trim().eq_ignore_ascii_case("accept-encoding"))
        .count()
        == 1
}

#[track_caller]
fn assert_vary(r: &Resp, what: &str) {
    assert!(
        varies_on_accept_encoding(r),
        "{what}: Vary should name Accept-Encoding once, got {:?}: {}",
        r.header_all("vary"),
        r.summary()
    );
}

#[track_caller]
fn assert_body(got: &[u8], want: &[u8], what: &str) {
    assert!(
        got == want,
        "{what}: body differs from the origin's ({} bytes, expected {}; starts {:?})",
        got.len(),
        want.len(),
        String::from_utf8_lossy(&got[..got.len().min(80)])
    );
}

/// A complete 200 in `coding` with an exact `Content-Length`, decoding to `plain`.
#[track_caller]
fn assert_sized(r: &Resp, coding: Coding, plain: &[u8], what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.summary());
    assert_eq!(coding_of(r), coding, "{what}: {:?}", r.headers);
    let len = r
        .header("content-length")
        .unwrap_or_else(|| panic!("{what}: no Content-Length: {:?}", r.headers));
    assert_eq!(
        len,
        r.body.len().to_string(),
        "{what}: wrong Content-Length"
    );
    assert!(!r.has("transfer-encoding"), "{what}: {:?}", r.headers);
    assert_body(&decoded(r), plain, what);
}

/// A 200 compressed on the fly in `coding`: chunked, no `Content-Length`.
#[track_caller]
fn assert_streamed(r: &Resp, coding: Coding, plain: &[u8], what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.summary());
    assert_ne!(coding, Coding::Identity, "use assert_sized");
    assert_eq!(coding_of(r), coding, "{what}: {:?}", r.headers);
    assert!(
        !r.has("content-length"),
        "{what}: a streamed coded body cannot have a Content-Length: {:?}",
        r.headers
    );
    assert_eq!(
        r.header("transfer-encoding"),
        Some("chunked"),
        "{what}: {:?}",
        r.headers
    );
    assert_body(&decoded(r), plain, what);
}

/// A 200 sent exactly as the origin sent it: no coding, the same bytes.
#[track_caller]
fn assert_untouched(r: &Resp, plain: &[u8], what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.summary());
    assert!(
        !r.has("content-encoding"),
        "{what}: must not be compressed: {:?}",
        r.headers
    );
    assert_body(&r.body, plain, what);
}

fn etag(r: &Resp) -> &str {
    r.header("etag").unwrap_or("")
}

/// Waits (3 s at most) until `GET path` in the coding `ae` asks for shows `want`.
/// levee-static re-checks a file held in memory at most once a second by the real clock
/// (levee's test clock does not move it), so an edit shows up to a second later.
async fn eventually_shows(levee: &Levee, path: &str, ae: Option<&str>, want: &[u8]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let r = get(levee, path, ae).await;
        if r.status == 200 && decoded(&r) == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path}, Accept-Encoding {ae:?}: the edit was not seen within 3 s: {}",
            r.summary()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every coding a client can ask for, with the header that asks for it.
const CODINGS: [(Option<&str>, Coding); 4] = [
    (Some("gzip"), Coding::Gzip),
    (Some("br"), Coding::Br),
    (Some("zstd"), Coding::Zstd),
    (None, Coding::Identity),
];

/// An origin answering every path with the same cacheable 20 KiB page, `ETag: "v1"`.
fn page_origin(body: &str) -> Origin {
    let body = body.to_string();
    Origin::fixed(move || {
        Reply::text(body.clone())
            .header("content-type", HTML)
            .header("cache-control", "max-age=60")
            .header("etag", "\"v1\"")
    })
}

// ---------------------------------------------------------------------------------------
// Stored responses: one compressed copy, every coding.

#[tokio::test]
async fn every_coding_is_served_from_one_stored_copy() {
    let body = html("stored", 20_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();

    let r = get(&levee, "/page", Some("gzip")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_streamed(&r, Coding::Gzip, body.as_bytes(), "miss");
    levee.wait_stored("/page").await;

    // Twice: the second round comes from the side cache of derived forms.
    for round in 1..=2 {
        for (ae, coding) in CODINGS {
            let what = format!("round {round}, Accept-Encoding {ae:?}");
            let r = get(&levee, "/page", ae).await;
            assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
            assert_sized(&r, coding, body.as_bytes(), &what);
            assert_vary(&r, &what);
        }
    }
    assert_eq!(origin.requests(), 1, "other codings must not refetch");
    let fill = origin.last();
    assert_eq!(
        fill.header("accept-encoding"),
        None,
        "a fill must not forward the client's Accept-Encoding"
    );
}

#[tokio::test]
async fn client_without_accept_encoding_gets_the_original_from_a_compressed_entry() {
    let body = html("identity", 20_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();

    // Stored compressed (the fill's client accepted gzip, and levee stores gzip anyway).
    let r = get(&levee, "/page", Some("gzip, deflate, br")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    levee.wait_stored("/page").await;
    let r = get(&levee, "/page", Some("gzip")).await;
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(coding_of(&r), Coding::Gzip);

    for ae in [None, Some("identity"), Some("")] {
        let what = format!("Accept-Encoding {ae:?}");
        let r = get(&levee, "/page", ae).await;
        assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
        assert_sized(&r, Coding::Identity, body.as_bytes(), &what);
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{what}"
        );
        assert_eq!(etag(&r), "\"v1\"", "{what}: the origin's strong ETag");
        assert_vary(&r, &what);
    }
    assert_eq!(origin.requests(), 1);
}

// ---------------------------------------------------------------------------------------
// Negotiation.

#[tokio::test]
async fn q_values_ties_case_and_refusals_choose_the_coding() {
    use Coding::*;
    let body = html("negotiation", 8_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();
    get(&levee, "/page", None).await;
    levee.wait_stored("/page").await;

    let cases: &[(&str, Coding)] = &[
        ("gzip;q=0, br", Br),
        ("br;q=0.5, zstd;q=0.9", Zstd),
        ("gzip, br", Gzip),
        ("br, gzip", Gzip),
        ("zstd, br, gzip", Gzip),
        ("gzip;q=1.0, br;q=0.999", Gzip),
        ("GZIP", Gzip),
        ("BR", Br),
        ("ZStd", Zstd),
        ("Gzip;Q=0.4, bR;q=0.5", Br),
        ("x-gzip", Gzip),
        ("X-GZIP", Gzip),
        ("*", Gzip),
        ("*;q=0.5, br", Br),
        ("identity;q=0, zstd", Zstd),
        // The element with a malformed q is ignored: gzip is not offered.
        ("gzip;q=2, br", Br),
        // br at the lowest weight still beats identity, which was not named.
        ("br;q=0.001", Br),
        ("identity, gzip;q=0.5", Identity),
        ("deflate", Identity),
        ("", Identity),
        ("gzip;q=0", Identity),
        // Nothing acceptable at all: levee sends identity anyway (RFC 9110 §12.5.3 allows
        // ignoring the header; no 406).
        ("*;q=0", Identity),
        ("identity;q=0", Identity),
        ("identity;q=0, *;q=0", Identity),
        ("gzip;q=0, identity;q=0", Identity),
    ];
    for &(ae, want) in cases {
        // From the stored copy...
        let what = format!("HIT, Accept-Encoding {ae:?}");
        let r = get(&levee, "/page", Some(ae)).await;
        assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
        assert_sized(&r, want, body.as_bytes(), &what);
        assert_vary(&r, &what);
        // ...and compressed on the fly for a pass: the same choice.
        let what = format!("PASS, Accept-Encoding {ae:?}");
        let r = Req::get("/page")
            .header("cookie", "PHPSESSID=x")
            .header("accept-encoding", ae)
            .send(&levee)
            .await;
        assert_eq!(r.x_cache(), "PASS", "{what}: {}", r.summary());
        if want == Identity {
            assert_untouched(&r, body.as_bytes(), &what);
        } else {
            assert_streamed(&r, want, body.as_bytes(), &what);
        }
        assert_vary(&r, &what);
    }
    // A tie between br and zstd: either, but the same on both paths.
    let hit = get(&levee, "/page", Some("br, zstd")).await;
    let pass = Req::get("/page")
        .header("cookie", "PHPSESSID=x")
        .header("accept-encoding", "br, zstd")
        .send(&levee)
        .await;
    assert!(matches!(coding_of(&hit), Br | Zstd), "{:?}", hit.headers);
    assert_eq!(coding_of(&hit), coding_of(&pass));
    assert_body(&decoded(&hit), body.as_bytes(), "br/zstd tie");
}

// ---------------------------------------------------------------------------------------
// Validators.

#[tokio::test]
async fn coded_forms_have_weak_etags_and_answer_if_none_match_in_every_coding() {
    let body = html("etag", 8_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();
    get(&levee, "/page", Some("gzip")).await;
    levee.wait_stored("/page").await;

    let forms = [
        (Some("gzip"), Coding::Gzip, "W/\"v1\""),
        (Some("br"), Coding::Br, "W/\"v1\""),
        (Some("zstd"), Coding::Zstd, "W/\"v1\""),
        (None, Coding::Identity, "\"v1\""),
        (Some("identity"), Coding::Identity, "\"v1\""),
    ];
    for (ae, coding, tag) in forms {
        let what = format!("Accept-Encoding {ae:?}");
        let r = get(&levee, "/page", ae).await;
        assert_sized(&r, coding, body.as_bytes(), &what);
        assert_eq!(etag(&r), tag, "{what}");

        // If-None-Match uses the weak comparison: strong or weak form, same answer.
        for inm in ["\"v1\"", "W/\"v1\"", "\"other\", W/\"v1\""] {
            let what = format!("{what}, If-None-Match {inm}");
            let r = with_ae(Req::get("/page"), ae)
                .header("if-none-match", inm)
                .send(&levee)
                .await;
            assert_eq!(r.status, 304, "{what}: {}", r.summary());
            assert!(r.body.is_empty(), "{what}");
            assert_eq!(etag(&r), tag, "{what}: the 304 names the form it validates");
            assert_vary(&r, &what);
            assert_eq!(r.x_cache(), "HIT", "{what}");
        }
        let r = with_ae(Req::get("/page"), ae)
            .header("if-none-match", "\"other\"")
            .send(&levee)
            .await;
        assert_sized(&r, coding, body.as_bytes(), &format!("{what}, other ETag"));
    }
    assert_eq!(origin.requests(), 1);
}

/// A conditional request that misses answers 304 from the fill's head; the 304 must
/// carry what the 200 to this client would have (RFC 9110 §15.4.5: ETag and Vary).
#[tokio::test]
async fn conditional_miss_answers_304_with_the_validators_of_the_coded_200() {
    let body = html("conditional-miss", 8_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();

    for (path, ae, tag) in [
        ("/gzip", Some("gzip"), "W/\"v1\""),
        ("/identity", None, "\"v1\""),
    ] {
        let what = format!("{path}, Accept-Encoding {ae:?}");
        let r = with_ae(Req::get(path), ae)
            .header("if-none-match", "\"v1\"")
            .send(&levee)
            .await;
        assert_eq!(r.status, 304, "{what}: {}", r.summary());
        assert_eq!(r.x_cache(), "MISS", "{what}");
        assert!(
            varies_on_accept_encoding(&r) && etag(&r) == tag,
            "{what}: the 304 should carry Vary: Accept-Encoding and ETag {tag}, as the 200 \
             would; got Vary {:?}, ETag {:?}",
            r.header_all("vary"),
            etag(&r)
        );
    }
}

#[tokio::test]
async fn revalidation_sends_the_origin_strong_etag_and_a_304_refreshes_every_coding() {
    let body = html("revalidate", 20_000);
    let served = body.clone();
    let origin = Origin::start(move |r| {
        if r.header("if-none-match") == Some("\"v1\"") {
            return Reply::status(304)
                .header("cache-control", "max-age=2")
                .header("etag", "\"v1\"");
        }
        Reply::text(served.clone())
            .header("content-type", HTML)
            .header("cache-control", "max-age=2")
            .header("etag", "\"v1\"")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = get(&levee, "/page", Some("gzip")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    levee.wait_stored("/page").await;

    for (round, first_ae) in [(1, Some("br")), (2, None)] {
        // Past max-age=2. (2 s of freshness: room for the checks after each revalidation
        // on a busy machine, where 1 s of real time ran out mid-loop.)
        levee.advance_clock(Duration::from_secs(3)).await;
        origin.advance_clock(Duration::from_secs(3));
        let before = origin.requests();
        let r = get(&levee, "/page", first_ae).await;
        let what = format!("revalidation {round}");
        assert_eq!(r.x_cache(), "REVALIDATED", "{what}: {}", r.summary());
        assert_eq!(origin.requests(), before + 1, "{what}");
        let sent = origin.last();
        assert_eq!(
            sent.header("if-none-match"),
            Some("\"v1\""),
            "{what}: revalidate with the origin's own strong ETag, not levee's weak one"
        );
        assert_eq!(sent.header("accept-encoding"), None, "{what}");
        let coding = if first_ae.is_some() {
            Coding::Br
        } else {
            Coding::Identity
        };
        assert_sized(&r, coding, body.as_bytes(), &what);
        assert_vary(&r, &what);

        for (ae, coding) in CODINGS {
            let what = format!("after revalidation {round}, Accept-Encoding {ae:?}");
            let r = get(&levee, "/page", ae).await;
            assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
            assert_sized(&r, coding, body.as_bytes(), &what);
            assert_vary(&r, &what);
            let tag = if coding == Coding::Identity {
                "\"v1\""
            } else {
                "W/\"v1\""
            };
            assert_eq!(etag(&r), tag, "{what}");
        }
    }
    assert_eq!(origin.requests(), 3);
}

// ---------------------------------------------------------------------------------------
// Vary.

#[tokio::test]
async fn origin_vary_accept_encoding_does_not_split_variants() {
    let body = html("vary", 8_000);
    let served = body.clone();
    let origin = Origin::fixed(move || {
        Reply::text(served.clone())
            .header("content-type", HTML)
            .header("cache-control", "max-age=60")
            .header("vary", "Accept-Encoding")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = get(&levee, "/page", Some("gzip")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_vary(&r, "miss");
    levee.wait_stored("/page").await;
    for ae in [
        Some("br"),
        Some("zstd"),
        None,
        Some("identity"),
        Some("gzip, br"),
        Some("gzip"),
    ] {
        let what = format!("Accept-Encoding {ae:?}");
        let r = get(&levee, "/page", ae).await;
        assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
        assert_body(&decoded(&r), body.as_bytes(), &what);
        assert_vary(&r, &what);
    }
    assert_eq!(
        origin.requests(),
        1,
        "one origin request for every Accept-Encoding"
    );
    assert!(origin
        .recorded()
        .iter()
        .all(|r| r.header("accept-encoding").is_none()));
}

// ---------------------------------------------------------------------------------------
// What is not compressed.

#[tokio::test]
async fn small_bodies_compressed_types_and_no_transform_are_sent_as_they_are() {
    let small = html("small", 500);
    assert!(small.len() < 1024);
    let big = html("big", 8_000);
    let (s, b) = (small.clone(), big.clone());
    let origin = Origin::start(move |r| {
        let (ct, cc, body) = match r.path.as_str() {
            "/small" => (HTML, "max-age=60", s.clone()),
            "/png" => ("image/png", "max-age=60", b.clone()),
            "/zip" => ("application/zip", "max-age=60", b.clone()),
            "/no-transform" => (HTML, "public, max-age=60, no-transform", b.clone()),
            _ => return Reply::status(404),
        };
        Reply::text(body)
            .header("content-type", ct)
            .header("cache-control", cc)
    });
    let levee = levee!().backend(&origin.url()).start();

    for (path, body) in [
        ("/small", &small),
        ("/png", &big),
        ("/zip", &big),
        ("/no-transform", &big),
    ] {
        let r = get(&levee, path, Some("gzip, br, zstd")).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
        assert_untouched(&r, body.as_bytes(), &format!("{path} miss"));
        levee.wait_stored(path).await;
        for ae in ["gzip", "br", "zstd", "gzip, br, zstd"] {
            let what = format!("{path} hit, Accept-Encoding {ae}");
            let r = get(&levee, path, Some(ae)).await;
            assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
            assert_untouched(&r, body.as_bytes(), &what);
            assert_eq!(
                r.header("content-length"),
                Some(body.len().to_string().as_str()),
                "{what}"
            );
        }
        let r = Req::get(path)
            .header("cookie", "PHPSESSID=x")
            .header("accept-encoding", "gzip")
            .send(&levee)
            .await;
        assert_eq!(r.x_cache(), "PASS", "{path}: {}", r.summary());
        assert_untouched(&r, body.as_bytes(), &format!("{path} pass"));
    }
    assert_eq!(origin.requests(), 8);
}

#[tokio::test]
async fn origin_compressed_response_is_kept_for_gzip_clients_and_decoded_for_others() {
    let body = html("precompressed", 20_000);
    let gz = compress(Coding::Gzip, body.as_bytes(), Level::Default).expect("gzip");
    let served = gz.clone();
    let origin = Origin::fixed(move || {
        Reply::text(served.clone())
            .header("content-type", HTML)
            .header("content-encoding", "gzip")
            .header("cache-control", "max-age=60")
            .header("etag", "\"g1\"")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = get(&levee, "/page", Some("gzip")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(coding_of(&r), Coding::Gzip);
    assert_body(&r.body, &gz, "miss: the origin's bytes as they are");
    assert_eq!(etag(&r), "\"g1\"");
    assert_vary(&r, "miss");
    levee.wait_stored("/page").await;

    for ae in ["gzip", "x-gzip, br", "GZIP;q=0.5"] {
        let what = format!("Accept-Encoding {ae}");
        let r = get(&levee, "/page", Some(ae)).await;
        assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
        assert_eq!(coding_of(&r), Coding::Gzip, "{what}");
        assert_body(&r.body, &gz, &what);
        assert_sized(&r, Coding::Gzip, body.as_bytes(), &what);
        assert_eq!(
            etag(&r),
            "\"g1\"",
            "{what}: the origin's ETag of its own bytes"
        );
        assert_vary(&r, &what);
    }
    // Clients that cannot take gzip get it decoded; the origin's ETag named the gzip
    // bytes, so the decoded form's is weak.
    for ae in [None, Some("br"), Some("zstd"), Some("gzip;q=0")] {
        let what = format!("Accept-Encoding {ae:?}");
        let r = get(&levee, "/page", ae).await;
        assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
        assert_sized(&r, Coding::Identity, body.as_bytes(), &what);
        assert_eq!(etag(&r), "W/\"g1\"", "{what}");
        assert_vary(&r, &what);
    }
    assert_eq!(origin.requests(), 1);
}

/// The origin compresses although levee's fill (or the client of a pass) did not ask for
/// it: a client that does not accept gzip must not get gzip, stored or not.
#[tokio::test]
async fn origin_compressed_miss_and_pass_are_decoded_for_identity_clients() {
    let body = html("precompressed-miss", 20_000);
    let gz = compress(Coding::Gzip, body.as_bytes(), Level::Default).expect("gzip");
    let origin = Origin::fixed(move || {
        Reply::text(gz.clone())
            .header("content-type", HTML)
            .header("content-encoding", "gzip")
            .header("cache-control", "max-age=60")
            .header("etag", "\"g1\"")
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = get(&levee, "/miss", None).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_untouched(&r, body.as_bytes(), "miss without Accept-Encoding");
    assert_vary(&r, "miss without Accept-Encoding");
    assert_eq!(
        etag(&r),
        "W/\"g1\"",
        "the gzip bytes' ETag, weak on decoded bytes"
    );

    let r = get(&levee, "/miss-br", Some("br")).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    assert_eq!(coding_of(&r), Coding::Identity, "{:?}", r.headers);
    assert_body(&r.body, body.as_bytes(), "miss, br only");

    let r = Req::get("/pass")
        .header("cookie", "PHPSESSID=x")
        .send(&levee)
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_untouched(&r, body.as_bytes(), "pass without Accept-Encoding");

    let r = Req::head("/head-miss").send(&levee).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert!(!r.has("content-encoding"), "HEAD: {:?}", r.headers);
}

#[tokio::test]
async fn partial_not_modified_and_no_content_responses_are_not_compressed() {
    let body = html("status", 8_000);
    let served = body.clone();
    let origin = Origin::start(move |r| match r.path.as_str() {
        "/ranged" => {
            let part = served.as_bytes()[..2000].to_vec();
            Reply::status(206)
                .header("content-type", HTML)
                .header("content-range", &format!("bytes 0-1999/{}", served.len()))
                .body(part)
        }
        "/not-modified" => Reply::status(304)
            .header("content-type", HTML)
            .header("etag", "\"v1\""),
        "/no-content" => Reply::status(204)
            .header("content-type", HTML)
            .header("cache-control", "max-age=60"),
        _ => Reply::status(404),
    });
    let levee = levee!().backend(&origin.url()).start();

    let r = Req::get("/ranged")
        .header("cookie", "PHPSESSID=x")
        .header("range", "bytes=0-1999")
        .header("accept-encoding", "gzip")
        .send(&levee)
        .await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert!(!r.has("content-encoding"), "206: {:?}", r.headers);
    assert_body(&r.body, &body.as_bytes()[..2000], "206");

    let r = Req::get("/not-modified")
        .header("cookie", "PHPSESSID=x")
        .header("if-none-match", "\"v1\"")
        .header("accept-encoding", "gzip")
        .send(&levee)
        .await;
    assert_eq!(r.status, 304, "{}", r.summary());
    assert!(!r.has("content-encoding"), "304: {:?}", r.headers);
    assert!(r.body.is_empty());

    for _ in 0..2 {
        let r = get(&levee, "/no-content", Some("gzip, br")).await;
        assert_eq!(r.status, 204, "{}", r.summary());
        assert!(!r.has("content-encoding"), "204: {:?}", r.headers);
        assert!(r.body.is_empty());
    }
}

#[tokio::test]
async fn head_gets_the_headers_of_get_without_a_body() {
    let body = html("head", 20_000);
    let origin = page_origin(&body);
    let levee = levee!().backend(&origin.url()).start();

    // A miss: compressed on the fly, so no Content-Length, as for the GET.
    let get_miss = get(&levee, "/get-miss", Some("gzip")).await;
    let head_miss = with_ae(Req::head("/head-miss"), Some("gzip"))
        .send(&levee)
        .await;
    assert_eq!(head_miss.x_cache(), "MISS", "{}", head_miss.summary());
    assert!(head_miss.body.is_empty());
    for name in ["content-encoding", "etag", "vary", "content-type"] {
        assert_eq!(
            head_miss.header_all(name),
            get_miss.header_all(name),
            "HEAD miss {name}: {:?} vs GET {:?}",
            head_miss.headers,
            get_miss.headers
        );
    }
    assert!(
        !head_miss.has("content-length"),
        "HEAD miss promises a length the GET does not have: {:?}",
        head_miss.headers
    );

    levee.wait_stored("/head-miss").await;
    for (ae, coding) in CODINGS {
        let what = format!("HEAD hit, Accept-Encoding {ae:?}");
        let g = get(&levee, "/head-miss", ae).await;
        assert_sized(&g, coding, body.as_bytes(), &what);
        let h = with_ae(Req::head("/head-miss"), ae).send(&levee).await;
        assert_eq!(h.status, 200, "{what}: {}", h.summary());
        assert_eq!(h.x_cache(), "HIT", "{what}");
        assert!(h.body.is_empty(), "{what}");
        for name in [
            "content-encoding",
            "content-length",
            "etag",
            "vary",
            "content-type",
        ] {
            assert_eq!(
                h.header_all(name),
                g.header_all(name),
                "{what}: {name} differs from the GET's"
            );
        }
    }

    let h = Req::head("/head-pass")
        .header("cookie", "PHPSESSID=x")
        .header("accept-encoding", "br")
        .send(&levee)
        .await;
    assert_eq!(h.x_cache(), "PASS", "{}", h.summary());
    assert_eq!(coding_of(&h), Coding::Br, "{:?}", h.headers);
    assert!(h.body.is_empty());
    assert_vary(&h, "HEAD pass");
}

#[tokio::test]
async fn compression_can_be_turned_off_by_flag_or_config() {
    let body = html("off", 20_000);
    let origin = page_origin(&body);
    let by_flag = levee!()
        .backend(&origin.url())
        .arg("--no-compression")
        .start();
    let by_config = levee!()
        .backend(&origin.url())
        .config("[compression]\nenabled = false")
        .start();

    for (name, levee) in [
        ("--no-compression", &by_flag),
        ("enabled = false", &by_config),
    ] {
        let r = get(levee, "/page", Some("gzip, br, zstd")).await;
        assert_eq!(r.x_cache(), "MISS", "{name}: {}", r.summary());
        assert_untouched(&r, body.as_bytes(), &format!("{name}: miss"));
        levee.wait_stored("/page").await;
        for ae in ["gzip", "br", "zstd"] {
            let what = format!("{name}: hit, Accept-Encoding {ae}");
            let r = get(levee, "/page", Some(ae)).await;
            assert_eq!(r.x_cache(), "HIT", "{what}: {}", r.summary());
            assert_sized(&r, Coding::Identity, body.as_bytes(), &what);
            assert_eq!(etag(&r), "\"v1\"", "{what}");
        }
        let r = Req::get("/page")
            .header("cookie", "PHPSESSID=x")
            .header("accept-encoding", "gzip")
            .send(levee)
            .await;
        assert_eq!(r.x_cache(), "PASS", "{name}: {}", r.summary());
        assert_untouched(&r, body.as_bytes(), &format!("{name}: pass"));
    }
}

// ---------------------------------------------------------------------------------------
// Streaming.

#[tokio::test]
async fn misses_and_passes_are_compressed_on_the_fly() {
    let body = html("stream", 20_000);
    let served = body.clone();
    let origin = Origin::start(move |r| {
        let reply = Reply::text(served.clone()).header("content-type", HTML);
        if r.method == http::Method::POST {
            reply.header("cache-control", "no-store")
        } else {
            reply.header("cache-control", "max-age=60")
        }
    });
    let levee = levee!().backend(&origin.url()).start();

    for (path, ae, coding) in [
        ("/miss-gzip", "gzip", Coding::Gzip),
        ("/miss-br", "br", Coding::Br),
        ("/miss-zstd", "zstd", Coding::Zstd),
    ] {
        let r = get(&levee, path, Some(ae)).await;
        assert_eq!(r.x_cache(), "MISS", "{path}: {}", r.summary());
        assert_streamed(&r, coding, body.as_bytes(), path);
        assert_vary(&r, path);
        assert_eq!(etag(&r), "", "{path}");
    }

    let r = Req::get("/miss-gzip")
        .header("cookie", "PHPSESSID=x")
        .header("accept-encoding", "gzip")
        .send(&levee)
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_streamed(&r, Coding::Gzip, body.as_bytes(), "session pass");
    assert_vary(&r, "session pass");
    assert_eq!(origin.last().cookie("PHPSESSID").as_deref(), Some("x"));

    let r = Req::post("/form", "a=1")
        .header("accept-encoding", "br, gzip;q=0.5")
        .send(&levee)
        .await;
    assert_eq!(r.x_cache(), "PASS", "{}", r.summary());
    assert_streamed(&r, Coding::Br, body.as_bytes(), "POST");
    assert_eq!(origin.last().method, http::Method::POST);
}

/// Reads a decoded body until `want` bytes came, it ended, or `deadline` passed;
/// returns what came.
async fn decode_until(
    body: &mut DecompressBody<hyper::body::Incoming>,
    want: usize,
    deadline: tokio::time::Instant,
) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < want {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    got.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => panic!("decoding the streamed body failed: {e}"),
            Ok(None) | Err(_) => break,
        }
    }
    got
}

#[tokio::test]
async fn a_slowly_streamed_page_reaches_the_client_progressively_compressed() {
    const PAUSE: Duration = Duration::from_secs(3);
    let first = html("first part", 4_000);
    let second = html("second part", 4_000);
    let (f, s) = (Bytes::from(first.clone()), Bytes::from(second.clone()));
    let origin = Origin::start(move |r| {
        let reply = Reply::ok()
            .header("content-type", HTML)
            .chunks(vec![(Duration::ZERO, f.clone()), (PAUSE, s.clone())]);
        if r.method == http::Method::POST {
            reply
        } else {
            reply.header("cache-control", "max-age=60")
        }
    });
    let levee = levee!().backend(&origin.url()).start();

    let check = |req: Req, coding: Coding, what: &'static str| {
        let levee = &levee;
        let (first, second) = (first.clone(), second.clone());
        async move {
            let start = tokio::time::Instant::now();
            let resp = req
                .header("accept-encoding", coding.token())
                .send_streaming(levee.addr())
                .await;
            assert_eq!(resp.status(), 200, "{what}");
            let ce = resp.headers().get("content-encoding").cloned();
            assert_eq!(
                ce.as_ref().and_then(|v| v.to_str().ok()),
                Some(coding.token()),
                "{what}: {:?}",
                resp.headers()
            );
            assert!(!resp.headers().contains_key("content-length"), "{what}");
            let mut body = DecompressBody::new(resp.into_body(), coding);
            // The first part must decode before the origin sends the second (PAUSE), with
            // a margin for a loaded machine.
            let early = decode_until(
                &mut body,
                first.len(),
                start + PAUSE - Duration::from_millis(500),
            )
            .await;
            assert!(
                early == first.as_bytes(),
                "{what}: {} decoded bytes of the first part within {:?} (want {}): \
                 the compressor holds back what the origin already sent",
                early.len(),
                PAUSE - Duration::from_millis(500),
                first.len()
            );
            let rest = decode_until(&mut body, usize::MAX, start + PAUSE * 3).await;
            let all = [early, rest].concat();
            assert!(
                all == [first.as_bytes(), second.as_bytes()].concat(),
                "{what}: the whole body ({} bytes) differs",
                all.len()
            );
            assert!(
                body.frame().await.is_none(),
                "{what}: body did not end cleanly"
            );
        }
    };
    tokio::join!(
        check(Req::get("/slow-gzip"), Coding::Gzip, "miss, gzip"),
        check(Req::get("/slow-zstd"), Coding::Zstd, "miss, zstd"),
        check(
            Req::get("/slow-br").header("cookie", "PHPSESSID=x"),
            Coding::Br,
            "session pass, br"
        ),
        check(Req::post("/slow-post", "x=1"), Coding::Gzip, "POST, gzip"),
    );
    assert_eq!(origin.requests(), 4);
}

// ---------------------------------------------------------------------------------------
// Static files.

/// A document root and a levee serving it in front of an origin that must never be asked.
struct Site {
    dir: tempfile::TempDir,
    origin: Origin,
    levee: Levee,
}

impl Site {
    fn start(files: &[(&str, &[u8])]) -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).expect("write file");
        }
        let origin = Origin::fixed(|| Reply::status(404));
        let root = dir.path().to_str().expect("utf-8 temp path").to_string();
        let levee = levee!()
            .backend(&origin.url())
            .args(&["--root", &root])
            .start();
        Site { dir, origin, levee }
    }

    fn write(&self, name: &str, content: &[u8]) {
        std::fs::write(self.dir.path().join(name), content).expect("write file");
    }
}

#[tokio::test]
async fn static_files_in_memory_are_compressed_with_weak_etags() {
    let page = html("static", 50_000);
    let site = Site::start(&[("page.html", page.as_bytes())]);
    let levee = &site.levee;

    let plain = get(levee, "/page.html", None).await;
    assert_eq!(plain.x_cache(), "STATIC", "{}", plain.summary());
    assert_sized(&plain, Coding::Identity, page.as_bytes(), "identity");
    assert_vary(&plain, "identity");
    let strong = etag(&plain).to_string();
    assert!(strong.starts_with('"'), "{strong}");
    let weak = format!("W/{strong}");

    for round in 1..=2 {
        for (ae, coding) in CODINGS {
            let what = format!("round {round}, Accept-Encoding {ae:?}");
            let r = get(levee, "/page.html", ae).await;
            assert_eq!(r.x_cache(), "STATIC", "{what}: {}", r.summary());
            assert_sized(&r, coding, page.as_bytes(), &what);
            assert_vary(&r, &what);
            let tag = if coding == Coding::Identity {
                &strong
            } else {
                &weak
            };
            assert_eq!(etag(&r), tag, "{what}");
        }
    }

    // HEAD: the GET's headers (a length computed only with the content may be left out).
    let g = get(levee, "/page.html", Some("gzip")).await;
    let h = with_ae(Req::head("/page.html"), Some("gzip"))
        .send(levee)
        .await;
    assert_eq!(h.status, 200, "{}", h.summary());
    assert!(h.body.is_empty());
    for name in ["content-encoding", "etag", "vary", "content-type"] {
        assert_eq!(h.header_all(name), g.header_all(name), "HEAD {name}");
    }
    if let Some(len) = h.header("content-length") {
        assert_eq!(Some(len), g.header("content-length"), "HEAD Content-Length");
    }
    assert_eq!(site.origin.requests(), 0);
}

/// RFC 9110 §15.4.5: a 304 carries the ETag and Vary the 200 would have.
#[tokio::test]
async fn static_not_modified_carries_the_coded_validators() {
    let page = html("static-304", 8_000);
    let site = Site::start(&[("page.html", page.as_bytes())]);
    let levee = &site.levee;
    let r = get(levee, "/page.html", Some("gzip")).await;
    assert_eq!(coding_of(&r), Coding::Gzip);
    let weak = etag(&r).to_string();
    assert!(weak.starts_with("W/\""), "{weak}");
    let strong = weak.trim_start_matches("W/").to_string();

    for (ae, tag) in [(Some("gzip"), &weak), (None, &strong)] {
        for inm in [&weak, &strong] {
            let what = format!("Accept-Encoding {ae:?}, If-None-Match {inm}");
            let r = with_ae(Req::get("/page.html"), ae)
                .header("if-none-match", inm)
                .send(levee)
                .await;
            assert_eq!(r.status, 304, "{what}: {}", r.summary());
            assert!(
                varies_on_accept_encoding(&r) && etag(&r) == tag,
                "{what}: the 304 should carry Vary: Accept-Encoding and ETag {tag}, as the \
                 200 would; got Vary {:?}, ETag {:?}",
                r.header_all("vary"),
                etag(&r)
            );
        }
    }
}

#[tokio::test]
async fn a_large_static_file_streams_compressed() {
    let big = html("large", 2 << 20);
    let site = Site::start(&[("big.html", big.as_bytes())]);
    let levee = &site.levee;

    let r = get(levee, "/big.html", Some("gzip")).await;
    assert_eq!(r.x_cache(), "STATIC", "{}", r.summary());
    assert_streamed(&r, Coding::Gzip, big.as_bytes(), "2 MiB, gzip");
    assert_vary(&r, "2 MiB, gzip");
    assert!(r.body.len() < big.len() / 4, "{} bytes", r.body.len());
    assert!(etag(&r).starts_with("W/\""), "{:?}", r.headers);

    let r = get(levee, "/big.html", None).await;
    assert_sized(&r, Coding::Identity, big.as_bytes(), "2 MiB, identity");
    assert!(etag(&r).starts_with('"'), "{:?}", r.headers);
    assert_eq!(site.origin.requests(), 0);
}

#[tokio::test]
async fn static_ranges_and_images_are_never_compressed() {
    let page = html("ranges", 50_000);
    let big = html("ranges-big", 2 << 20);
    // Compressible bytes, but a PNG by name: a real PNG is compressed already.
    let png = html("png", 20_000);
    let site = Site::start(&[
        ("page.html", page.as_bytes()),
        ("big.html", big.as_bytes()),
        ("image.png", png.as_bytes()),
    ]);
    let levee = &site.levee;

    for (path, content) in [("/page.html", &page), ("/big.html", &big)] {
        let r = Req::get(path)
            .header("range", "bytes=0-99")
            .header("accept-encoding", "gzip, br, zstd")
            .send(levee)
            .await;
        assert_eq!(r.status, 206, "{path}: {}", r.summary());
        assert!(!r.has("content-encoding"), "{path}: {:?}", r.headers);
        assert_eq!(r.header("content-length"), Some("100"), "{path}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes 0-99/{}", content.len()).as_str()),
            "{path}"
        );
        assert_body(&r.body, &content.as_bytes()[..100], path);
    }

    for ae in ["gzip", "br", "zstd"] {
        let r = get(levee, "/image.png", Some(ae)).await;
        assert_eq!(r.x_cache(), "STATIC", "{}", r.summary());
        assert_untouched(&r, png.as_bytes(), &format!("image.png, {ae}"));
        assert_eq!(r.header("content-type"), Some("image/png"));
        assert!(etag(&r).starts_with('"'), "{:?}", r.headers);
    }
    assert_eq!(site.origin.requests(), 0);
}

#[tokio::test]
async fn an_edited_static_file_is_compressed_anew() {
    let v1 = html("version one", 4_000);
    let v2 = html("version two, longer", 6_000);
    let site = Site::start(&[("page.html", v1.as_bytes())]);
    let levee = &site.levee;

    for (ae, coding) in CODINGS {
        let r = get(levee, "/page.html", ae).await;
        assert_sized(&r, coding, v1.as_bytes(), "before the edit");
    }
    site.write("page.html", v2.as_bytes());
    eventually_shows(levee, "/page.html", CODINGS[0].0, v2.as_bytes()).await;
    for (ae, coding) in CODINGS {
        let what = format!("after the edit, Accept-Encoding {ae:?}");
        let r = get(levee, "/page.html", ae).await;
        assert_sized(&r, coding, v2.as_bytes(), &what);
    }
}

/// `rsync -a` or `cp -p` of a same-size edit: the size and the (whole-second) mtime, and
/// so the ETag, stay the same; levee-static still sees the new version (ctime, inode),
/// and every coding must show it, not a compressed copy of the old content.
#[tokio::test]
async fn a_static_file_edited_in_place_keeping_size_and_mtime_is_compressed_anew() {
    let v1 = html("version one", 4_000);
    let v2 = v1.replace("version one", "version TWO");
    assert_eq!(v1.len(), v2.len());
    let site = Site::start(&[("page.html", v1.as_bytes())]);
    let path = site.dir.path().join("page.html");
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let set_mtime = || {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open")
            .set_modified(mtime)
            .expect("set mtime");
    };
    set_mtime();
    let levee = &site.levee;

    let mut tags = Vec::new();
    for (ae, coding) in CODINGS {
        let r = get(levee, "/page.html", ae).await;
        assert_sized(&r, coding, v1.as_bytes(), "before the edit");
        tags.push(etag(&r).to_string());
    }
    site.write("page.html", v2.as_bytes());
    set_mtime();
    eventually_shows(levee, "/page.html", CODINGS[0].0, v2.as_bytes()).await;
    for (i, (ae, coding)) in CODINGS.into_iter().enumerate() {
        let what = format!("after the edit, Accept-Encoding {ae:?}");
        let r = get(levee, "/page.html", ae).await;
        // levee-static saw the old version, so the new one gets another ETag even though
        // nginx's (mtime, length) tag is the same: no 304 for the old copy.
        assert_ne!(etag(&r), tags[i], "{what}: a new version needs a new ETag");
        assert_sized(&r, coding, v2.as_bytes(), &what);
    }
}

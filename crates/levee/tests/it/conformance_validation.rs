//! RFC 9111 conformance around selecting and validating stored responses, observed from
//! outside (real levee, real origin on loopback):
//!
//! - §4.1 Vary: secondary keys, normalisation, `Vary: *` in every spelling, fields the
//!   request lacks, variants that do not evict each other.
//! - §4.3.1 validation requests: the stored validators and the varying request fields.
//! - §4.3.3–4.3.4 validation responses: which fields a 304 updates (and which it must
//!   not), which stored response a 304 applies to, a 304 without validators, a full
//!   response replacing the stored one, a 5xx during validation.
//! - §4.3.2 conditional requests answered from the cache (RFC 9110 §13): weak
//!   comparison, lists, `*`, If-Modified-Since without Last-Modified, precedence;
//!   If-Match / If-Unmodified-Since left to the origin.
//! - §5.2.1 request directives: no-cache, max-age, min-fresh, max-stale, only-if-cached.
//! - §4.4 invalidation by unsafe and unknown methods, Location / Content-Location of the
//!   same origin only, and only after non-error responses.
//! - HEAD answered from a stored GET, and partial content (§3.3–3.4): a 206 is never
//!   stored nor served to a request without Range; ranges are cut from the stored 200
//!   (ranges.rs).
//!
//! levee's deliberate deviations are noted where a test touches them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use levee_compress::{decompress, Coding};
use levee_test::{http_date, levee, Levee, Origin, Reply, Req, Resp};

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LM_LATER: &str = "Mon, 07 Nov 1994 08:49:37 GMT";

/// Moves past a 1-second freshness lifetime, once every fill so far is stored: levee's
/// clock, and the origin's with it for what it answers after.
async fn past_one_second(levee: &Levee, origin: &Origin) {
    levee.wait_fills_done().await;
    let by = Duration::from_millis(1500);
    levee.advance_clock(by).await;
    origin.advance_clock(by);
}

/// Request header lines, in order.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn req(path: &str, headers: &[(&str, &str)]) -> Req {
    headers
        .iter()
        .fold(Req::get(path), |r, (k, v)| r.header(k, v))
}

async fn send(levee: &Levee, path: &str, headers: &[(&str, &str)]) -> Resp {
    req(path, headers).send(levee).await
}

/// Compressible HTML of about `size` bytes (levee stores it gzip-compressed).
fn html(tag: &str, size: usize) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html><body>\n");
    let mut i = 0;
    while s.len() < size {
        s.push_str(&format!(
            "<p>{tag} line {i}: the same words again and again.</p>\n"
        ));
        i += 1;
    }
    s.push_str("</body></html>\n");
    s
}

fn vary_names(r: &Resp) -> Vec<String> {
    r.header_all("vary")
        .iter()
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect()
}

// ---------------------------------------------------------------------------------------
// §4.1 Vary
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn vary_selects_on_the_listed_request_fields_only() {
    let origin = Origin::start(|r| {
        let foo = r.header_joined("foo").unwrap_or_else(|| "-".into());
        let bar = r.header_joined("bar").unwrap_or_else(|| "-".into());
        let reply = Reply::text(format!("foo={foo} bar={bar} #{}", r.n))
            .header("cache-control", "max-age=60");
        match r.path.as_str() {
            // Two field lines, names in another case: the same as "Foo, Bar".
            "/two-lines" => reply.header("vary", "FOO").header("vary", "bar"),
            _ => reply.header("vary", "Foo, Bar"),
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();

    for path in ["/v", "/two-lines"] {
        let first = send(&levee, path, &[("foo", "1"), ("bar", "abc")]).await;
        assert_eq!(first.x_cache(), "MISS", "{path}: {}", first.summary());
        levee
            .wait_stored_req(req(path, &[("foo", "1"), ("bar", "abc")]))
            .await;
        // The same values, whatever else differs (Other is not listed).
        let r = send(
            &levee,
            path,
            &[("bar", "abc"), ("foo", "1"), ("other", "3")],
        )
        .await;
        assert_eq!(r.x_cache(), "HIT", "{path}: {}", r.summary());
        assert_eq!(r.text(), first.text());
        // One listed field differs, or is missing: not this response.
        for h in [
            &[("foo", "2"), ("bar", "abc")][..],
            &[("foo", "1"), ("bar", "abc4")][..],
            &[("foo", "1")][..],
            &[][..],
        ] {
            let r = send(&levee, path, h).await;
            assert_ne!(r.x_cache(), "HIT", "{path} {h:?}: {}", r.summary());
            assert!(!r.text().starts_with("foo=1 bar=abc "), "{path} {h:?}");
        }
    }
    // A field absent from both requests matches (RFC 9111 §4.1: absent = absent).
    let r = send(&levee, "/omit", &[("foo", "1")]).await;
    assert_eq!(r.x_cache(), "MISS");
    levee.wait_stored_req(req("/omit", &[("foo", "1")])).await;
    let r = send(&levee, "/omit", &[("foo", "1")]).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert!(r.text().starts_with("foo=1 bar=- "), "{}", r.summary());
    // ...but a field present in only one of them does not.
    let r = send(&levee, "/omit", &[("foo", "1"), ("bar", "")]).await;
    assert_ne!(
        r.x_cache(),
        "HIT",
        "empty Bar is not absent Bar: {}",
        r.summary()
    );
}

#[tokio::test]
async fn vary_values_are_normalised_and_variants_coexist() {
    let origin = Origin::start(|r| {
        let foo = r.header_joined("foo").unwrap_or_else(|| "-".into());
        Reply::text(format!("foo={foo} #{}", r.n))
            .header("cache-control", "max-age=60")
            .header("vary", "Foo")
    });
    let levee = levee!().backend(&origin.url()).start();

    // RFC 9111 §4.1: whitespace around list members and the split into field lines are
    // not significant.
    send(&levee, "/n", &[("foo", "1,2")]).await;
    levee.wait_stored_req(req("/n", &[("foo", "1,2")])).await;
    for h in [
        &[("foo", " 1, 2 ")][..],
        &[("foo", "1"), ("foo", "2")][..],
        &[("foo", "1 ,2")][..],
    ] {
        let r = send(&levee, "/n", h).await;
        assert_eq!(r.x_cache(), "HIT", "{h:?}: {}", r.summary());
        assert!(r.text().starts_with("foo=1,2 #1"), "{h:?}: {}", r.summary());
    }
    // Order is significant without a field-specific rule.
    let r = send(&levee, "/n", &[("foo", "2, 1")]).await;
    assert_ne!(r.x_cache(), "HIT", "{}", r.summary());

    // A second variant does not evict the first.
    send(&levee, "/both", &[("foo", "a")]).await;
    levee.wait_stored_req(req("/both", &[("foo", "a")])).await;
    send(&levee, "/both", &[("foo", "b")]).await;
    levee.wait_stored_req(req("/both", &[("foo", "b")])).await;
    for v in ["a", "b"] {
        let r = send(&levee, "/both", &[("foo", v)]).await;
        assert_eq!(r.x_cache(), "HIT", "{v}: {}", r.summary());
        assert!(
            r.text().starts_with(&format!("foo={v} #")),
            "{}",
            r.summary()
        );
    }
    assert_eq!(origin.requests_for("/both"), 2);
}

#[tokio::test]
async fn vary_star_in_any_spelling_is_never_reused() {
    let origin = Origin::start(|r| {
        let reply =
            Reply::text(format!("{} #{}", r.path, r.n)).header("cache-control", "max-age=60");
        match r.path.as_str() {
            "/star" => reply.header("vary", "*"),
            "/star-star" => reply.header("vary", "*, *"),
            "/star-lines" => reply.header("vary", "*").header("vary", "*"),
            "/empty-star" => reply.header("vary", ", *"),
            "/empty-line-star" => reply.header("vary", "").header("vary", "*"),
            "/star-foo" => reply.header("vary", "*, Foo"),
            "/foo-star" => reply.header("vary", "Foo, *"),
            "/foo-line-star" => reply.header("vary", "Foo").header("vary", " * "),
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    let paths = [
        "/star",
        "/star-star",
        "/star-lines",
        "/empty-star",
        "/empty-line-star",
        "/star-foo",
        "/foo-star",
        "/foo-line-star",
    ];
    for path in paths {
        for _ in 0..3 {
            let r = send(&levee, path, &[("foo", "1")]).await;
            assert_eq!(r.status, 200, "{path}");
            assert_ne!(r.x_cache(), "HIT", "{path}: {}", r.summary());
        }
        assert_eq!(origin.requests_for(path), 3, "{path} was reused");
    }
}

/// levee's deviation: it never sends Cookie or Accept-Encoding with a request whose
/// response may be stored (it negotiates codings itself), so `Vary: Accept-Encoding`
/// and `Vary: Cookie` cannot tell variants apart and are not part of the key.
#[tokio::test]
async fn vary_on_accept_encoding_or_cookie_keeps_one_variant() {
    let origin = Origin::start(|r| {
        Reply::text(format!("#{}", r.n))
            .header("cache-control", "max-age=60")
            .header("vary", "Accept-Encoding, Cookie")
    });
    let levee = levee!().backend(&origin.url()).start();
    send(&levee, "/d", &[("accept-encoding", "gzip")]).await;
    levee.wait_stored("/d").await;
    let r = send(
        &levee,
        "/d",
        &[("accept-encoding", "br"), ("cookie", "theme=dark")],
    )
    .await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests(), 1);
    assert!(origin.last().header("cookie").is_none());
    assert!(origin.last().header("accept-encoding").is_none());
}

// ---------------------------------------------------------------------------------------
// §4.3.1 sending a validation request
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn validation_sends_the_stored_validators_and_the_varying_fields() {
    let origin = Origin::start(|r| {
        let etag = match r.path.as_str() {
            "/weak" => "W/\"w1\"",
            _ => "\"s1\"",
        };
        if r.header("if-none-match") == Some(etag) {
            return Reply::status(304)
                .header("etag", etag)
                .header("cache-control", "max-age=1");
        }
        Reply::text(format!("{} #{}", r.path, r.n))
            .header("cache-control", "max-age=1")
            .header("etag", etag)
            .header("last-modified", LM)
            .header("vary", "Abc")
    });
    let levee = levee!().backend(&origin.url()).start();
    for path in ["/strong", "/weak"] {
        send(&levee, path, &[("abc", "123"), ("cookie", "_ga=1")]).await;
    }
    past_one_second(&levee, &origin).await;
    for (path, etag) in [("/strong", "\"s1\""), ("/weak", "W/\"w1\"")] {
        let r = send(&levee, path, &[("abc", "123"), ("cookie", "_ga=1")]).await;
        assert_eq!(r.x_cache(), "REVALIDATED", "{path}: {}", r.summary());
        assert_eq!(
            r.text(),
            format!("{path} #{}", if path == "/strong" { 1 } else { 2 })
        );
        let seen = origin.last();
        assert_eq!(seen.method, "GET");
        assert_eq!(seen.header("if-none-match"), Some(etag), "{path}");
        assert_eq!(seen.header("if-modified-since"), Some(LM), "{path}");
        // RFC 9111 §4.3.1: the request fields the stored response varies on.
        assert_eq!(seen.header("abc"), Some("123"), "{path}");
        assert!(
            seen.header("cookie").is_none(),
            "{path}: a fill sent Cookie"
        );
    }
    // Another value of a varying field selects no stored response: nothing to validate.
    let r = send(&levee, "/strong", &[("abc", "456")]).await;
    assert_eq!(r.x_cache(), "MISS", "{}", r.summary());
    let seen = origin.last();
    assert!(seen.header("if-none-match").is_none(), "{:?}", seen.headers);
    assert!(
        seen.header("if-modified-since").is_none(),
        "{:?}",
        seen.headers
    );
}

#[tokio::test]
async fn client_validators_never_reach_the_origin_with_a_fill() {
    let origin = Origin::fixed(|| {
        Reply::text("body")
            .header("cache-control", "max-age=60")
            .header("etag", "\"e\"")
    });
    let levee = levee!().backend(&origin.url()).start();
    // A conditional request that misses: levee fills unconditionally (the response is
    // for everyone) and answers the client's precondition itself against the response
    // it is storing. (RFC 9111 §4.3.2 would have a cache without a stored response
    // forward the precondition; the answer is the same as the origin's for
    // If-None-Match / If-Modified-Since, and the fill stays shareable.)
    let r = send(
        &levee,
        "/c",
        &[("if-none-match", "\"e\""), ("if-modified-since", LM)],
    )
    .await;
    assert_eq!(r.status, 304, "{}", r.summary());
    let seen = origin.last();
    assert!(seen.header("if-none-match").is_none());
    assert!(seen.header("if-modified-since").is_none());
    levee.wait_stored("/c").await;
    let r = levee.get("/c").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "body");
}

// ---------------------------------------------------------------------------------------
// §4.3.3–4.3.4 handling the validation response
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_304_updates_the_stored_fields_but_not_the_ones_describing_the_stored_bytes() {
    let page = html("freshen", 6_000);
    let body = page.clone();
    let origin = Origin::start(move |r| {
        if r.header("if-none-match") == Some("\"p1\"") {
            // A 304 that also says things it should not: another coding, a length, and a
            // Vary without Accept-Encoding (the origin does not know levee compresses).
            return Reply::status(304)
                .header("etag", "\"p1\"")
                .header("cache-control", "max-age=3600")
                .header("x-test", "B")
                .header("content-type", "text/html; charset=iso-8859-1")
                .header("content-encoding", "br")
                .header("vary", "Accept-Language")
                .header(
                    "expires",
                    &http_date(SystemTime::now() + Duration::from_secs(3600)),
                );
        }
        Reply::text(body.clone())
            .header("etag", "\"p1\"")
            .header("cache-control", "max-age=1")
            .header("content-type", "text/html; charset=utf-8")
            .header("vary", "Accept-Language")
            .header("x-test", "A")
            .header("x-kept", "stays")
    });
    let levee = levee!().backend(&origin.url()).start();
    let r = levee.get("/p").await;
    assert_eq!(r.header("x-test"), Some("A"));
    past_one_second(&levee, &origin).await;

    // The response to the request that validated: the 304's fields.
    let r = send(&levee, "/p", &[("accept-encoding", "gzip")]).await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    check_freshened(&r, &page, Coding::Gzip);
    assert_eq!(origin.requests(), 2);

    // The stored response was updated: fresh for an hour now, with the new fields, in
    // every coding.
    for (ae, coding) in [
        (Some("gzip"), Coding::Gzip),
        (None, Coding::Identity),
        (Some("br"), Coding::Br),
    ] {
        let mut h = vec![];
        if let Some(ae) = ae {
            h.push(("accept-encoding", ae));
        }
        let r = send(&levee, "/p", &h).await;
        assert_eq!(r.x_cache(), "HIT", "{ae:?}: {}", r.summary());
        check_freshened(&r, &page, coding);
    }
    assert_eq!(origin.requests(), 2);
}

#[track_caller]
fn check_freshened(r: &Resp, page: &str, coding: Coding) {
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.header("x-test"), Some("B"), "{:?}", r.headers);
    assert_eq!(r.header("x-kept"), Some("stays"), "{:?}", r.headers);
    assert_eq!(r.header("cache-control"), Some("max-age=3600"));
    assert_eq!(
        r.header("content-type"),
        Some("text/html; charset=iso-8859-1"),
        "Content-Type is updated"
    );
    // RFC 9111 §3.2: Content-Length is never updated; Content-Encoding describes the
    // bytes levee holds, not the 304.
    let got = match r.header_all("content-encoding").as_slice() {
        [] => Coding::Identity,
        [one] => Coding::from_token(one).unwrap(),
        many => panic!("several Content-Encoding: {many:?}"),
    };
    assert_eq!(got, coding, "{:?}", r.headers);
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str()),
        "{:?}",
        r.headers
    );
    let plain = decompress(coding, &r.body, 1 << 20).expect("the body decodes");
    assert_eq!(plain, page.as_bytes());
    let vary = vary_names(r);
    assert!(vary.contains(&"accept-language".to_string()), "{vary:?}");
    if coding != Coding::Identity {
        assert!(
            vary.contains(&"accept-encoding".to_string()),
            "a coded body lost Vary: Accept-Encoding after the 304: {vary:?}"
        );
    }
}

#[tokio::test]
async fn a_304_about_another_representation_does_not_update_the_stored_one() {
    let origin = Origin::start(|r| {
        let conditional =
            r.header("if-none-match").is_some() || r.header("if-modified-since").is_some();
        match (r.path.as_str(), conditional) {
            // The stored response has ETag "v1"; the 304 names "v2", a representation
            // levee never saw (RFC 9111 §4.3.4: MUST NOT update).
            ("/etag", true) => Reply::status(304)
                .header("etag", "\"v2\"")
                .header("cache-control", "max-age=60")
                .header("x-from", "304"),
            ("/etag", false) => Reply::text(format!("etag #{}", r.n))
                .header("etag", if r.n == 1 { "\"v1\"" } else { "\"v2\"" })
                .header("cache-control", "max-age=1"),
            // Only Last-Modified: the 304 names another date.
            ("/lm", true) => Reply::status(304)
                .header("last-modified", LM_LATER)
                .header("cache-control", "max-age=60")
                .header("x-from", "304"),
            ("/lm", false) => Reply::text(format!("lm #{}", r.n))
                .header("last-modified", if r.n <= 2 { LM } else { LM_LATER })
                .header("cache-control", "max-age=1"),
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(levee.get("/etag").await.text(), "etag #1");
    assert_eq!(levee.get("/lm").await.text(), "lm #2");
    past_one_second(&levee, &origin).await;

    for (path, body) in [("/etag", "etag #4"), ("/lm", "lm #6")] {
        let before = origin.requests();
        let r = levee.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.summary());
        assert_eq!(
            r.text(),
            body,
            "{path}: the stale body was served as if validated"
        );
        assert!(r.header("x-from").is_none(), "{path}: {:?}", r.headers);
        // The conditional request, then the same request without validators.
        let seen = origin.recorded();
        assert_eq!(seen.len(), before + 2, "{path}");
        let (cond, full) = (&seen[before], &seen[before + 1]);
        assert!(
            cond.header("if-none-match").is_some() || cond.header("if-modified-since").is_some(),
            "{path}"
        );
        assert!(full.header("if-none-match").is_none(), "{path}");
        assert!(full.header("if-modified-since").is_none(), "{path}");
    }
}

/// A 304 with no validator at all: RFC 9111 §4.3.4 identifies a stored response by its
/// validators; levee sent one stored response's validators, so a bare 304 (which RFC
/// 9110 §15.4.5 says should have carried them) is taken as about that response.
#[tokio::test]
async fn a_304_without_validators_freshens_the_response_levee_asked_about() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match").is_some() {
            Reply::status(304).header("cache-control", "max-age=60")
        } else {
            Reply::text(format!("bare #{}", r.n))
                .header("etag", "\"b\"")
                .header("cache-control", "max-age=1")
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/bare").await;
    past_one_second(&levee, &origin).await;
    let r = levee.get("/bare").await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(r.text(), "bare #1");
    assert_eq!(r.header("etag"), Some("\"b\""), "the stored ETag is kept");
    let r = levee.get("/bare").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn a_304_that_forbids_storing_drops_only_the_response_it_validated() {
    let origin = Origin::start(|r| {
        let foo = r.header("foo").unwrap_or("-").to_string();
        if r.header("if-none-match").is_some() {
            return Reply::status(304)
                .header("etag", &format!("\"{foo}\""))
                .header("cache-control", "no-store");
        }
        let cc = if foo == "1" {
            "max-age=1"
        } else {
            "max-age=60"
        };
        Reply::text(format!("foo={foo}"))
            .header("etag", &format!("\"{foo}\""))
            .header("cache-control", cc)
            .header("vary", "Foo")
    });
    let levee = levee!().backend(&origin.url()).start();
    send(&levee, "/v", &[("foo", "1")]).await;
    send(&levee, "/v", &[("foo", "2")]).await;
    levee.wait_stored_req(req("/v", &[("foo", "2")])).await;
    past_one_second(&levee, &origin).await;
    let r = send(&levee, "/v", &[("foo", "1")]).await;
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(r.text(), "foo=1");
    let oic = ("cache-control", "only-if-cached");
    let r = send(&levee, "/v", &[("foo", "1"), oic]).await;
    assert_eq!(r.status, 504, "kept after a no-store 304: {}", r.summary());
    let r = send(&levee, "/v", &[("foo", "2"), oic]).await;
    assert_eq!(
        r.x_cache(),
        "HIT",
        "another variant was dropped: {}",
        r.summary()
    );
}

#[tokio::test]
async fn a_full_response_to_a_validation_replaces_the_stored_one() {
    let private_calls = AtomicUsize::new(0);
    let origin = Origin::start(move |r| {
        let v = r.n;
        match r.path.as_str() {
            // A changed resource: the validation gets a new 200.
            "/changed" => Reply::text(format!("changed v{v}"))
                .header("etag", &format!("\"{v}\""))
                .header(
                    "cache-control",
                    if v == 1 { "max-age=1" } else { "max-age=60" },
                ),
            // The new 200 cannot be stored; the old one must not stand in for it either.
            "/now-private" if private_calls.fetch_add(1, Ordering::SeqCst) == 0 => {
                Reply::text("public v1")
                    .header("etag", "\"1\"")
                    .header("cache-control", "max-age=1")
            }
            "/now-private" => Reply::text(format!("no-store v{v}"))
                .header("etag", &format!("\"{v}\""))
                .header("cache-control", "no-store"),
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    assert_eq!(levee.get("/changed").await.text(), "changed v1");
    assert_eq!(levee.get("/now-private").await.text(), "public v1");
    past_one_second(&levee, &origin).await;

    let r = levee.get("/changed").await;
    assert_eq!(r.text(), "changed v3", "{}", r.summary());
    assert_eq!(origin.last().header("if-none-match"), Some("\"1\""));
    levee.wait_stored("/changed").await;
    let r = levee.get("/changed").await;
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(r.text(), "changed v3");

    let r = levee.get("/now-private").await;
    assert_eq!(r.text(), "no-store v4", "{}", r.summary());
    // A client that accepts any staleness still does not get the superseded response.
    let r = send(&levee, "/now-private", &[("cache-control", "max-stale")]).await;
    assert_ne!(r.text(), "public v1", "{}", r.summary());
    let r = send(
        &levee,
        "/now-private",
        &[("cache-control", "only-if-cached, max-stale")],
    )
    .await;
    assert_eq!(r.status, 504, "{}", r.summary());
}

#[tokio::test]
async fn a_server_error_during_validation_keeps_the_stored_response() {
    let failing = Arc::new(AtomicUsize::new(1));
    let f = failing.clone();
    let origin = Origin::start(move |r| {
        let cc = if r.path == "/must" {
            "max-age=1, must-revalidate"
        } else {
            "max-age=1"
        };
        if r.n > 2 && f.load(Ordering::SeqCst) == 1 {
            return Reply::status(500).body("origin broke");
        }
        if r.header("if-none-match") == Some("\"e\"") {
            return Reply::status(304)
                .header("etag", "\"e\"")
                .header("cache-control", cc);
        }
        Reply::text(format!("{} stored", r.path))
            .header("etag", "\"e\"")
            .header("cache-control", cc)
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/plain").await;
    levee.get("/must").await;
    past_one_second(&levee, &origin).await;
    // RFC 9111 §4.3.3: a 5xx while validating may be forwarded or treated as a failure
    // to respond (then the stale response may be served, §4.2.4) ...
    let r = levee.get("/plain").await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/plain stored");
    // ... except where must-revalidate forbids serving it stale (§5.2.2.2).
    let r = levee.get("/must").await;
    assert_eq!(r.status, 500, "{}", r.summary());
    assert_eq!(r.text(), "origin broke");
    // Neither error replaced nor removed the stored response: once the origin is back,
    // a 304 validates it.
    failing.store(0, Ordering::SeqCst);
    for path in ["/plain", "/must"] {
        let r = levee.get(path).await;
        assert_eq!(r.x_cache(), "REVALIDATED", "{path}: {}", r.summary());
        assert_eq!(r.text(), format!("{path} stored"));
    }
}

// ---------------------------------------------------------------------------------------
// §4.3.2 conditional requests answered from the cache (RFC 9110 §13)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn conditional_requests_are_answered_from_a_stored_200() {
    let origin = Origin::start(|r| {
        let reply = Reply::text(format!("{} body", r.path)).header("cache-control", "max-age=60");
        match r.path.as_str() {
            "/tagged" => reply
                .header("etag", "\"abc,def\"")
                .header("last-modified", LM),
            "/weak" => reply.header("etag", "W/\"w\""),
            // No validator at all: If-Modified-Since is evaluated against Date.
            "/dated" => reply,
            _ => Reply::status(404),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/tagged", "/weak", "/dated"] {
        levee.get(p).await;
        levee.wait_stored(p).await;
    }
    let hour_ago = http_date(SystemTime::now() - Duration::from_secs(3600));
    let in_an_hour = http_date(SystemTime::now() + Duration::from_secs(3600));
    let cases: &[(&str, Headers, u16)] = &[
        // A quoted tag may contain a comma; lists, and lists over several lines.
        ("/tagged", &[("if-none-match", "\"abc,def\"")], 304),
        (
            "/tagged",
            &[("if-none-match", "\"x\", W/\"abc,def\", \"y\"")],
            304,
        ),
        (
            "/tagged",
            &[("if-none-match", "\"x\""), ("if-none-match", "\"abc,def\"")],
            304,
        ),
        ("/tagged", &[("if-none-match", "\"abc\"")], 200),
        // If-None-Match wins over If-Modified-Since, both ways.
        (
            "/tagged",
            &[("if-none-match", "\"x\""), ("if-modified-since", LM)],
            200,
        ),
        (
            "/tagged",
            &[
                ("if-none-match", "\"abc,def\""),
                ("if-modified-since", "Sat, 01 Jan 1994 00:00:00 GMT"),
            ],
            304,
        ),
        ("/tagged", &[("if-modified-since", LM)], 304),
        ("/tagged", &[("if-modified-since", LM_LATER)], 304),
        (
            "/tagged",
            &[("if-modified-since", "Sat, 05 Nov 1994 08:49:37 GMT")],
            200,
        ),
        // An invalid date, or a list of dates, is ignored.
        ("/tagged", &[("if-modified-since", "yesterday")], 200),
        (
            "/tagged",
            &[("if-modified-since", &format!("{LM}, {LM}"))],
            200,
        ),
        // Weak comparison: a weak stored tag matches its strong spelling too.
        ("/weak", &[("if-none-match", "W/\"w\"")], 304),
        ("/weak", &[("if-none-match", "\"w\"")], 304),
        // `*` matches any current representation, with or without an ETag.
        ("/weak", &[("if-none-match", "*")], 304),
        ("/dated", &[("if-none-match", "*")], 304),
        // RFC 9111 §4.3.2: no Last-Modified, so the stored Date decides.
        ("/dated", &[("if-modified-since", &in_an_hour)], 304),
        ("/dated", &[("if-modified-since", &hour_ago)], 200),
    ];
    for (path, headers, status) in cases {
        for method in ["GET", "HEAD"] {
            let r = headers
                .iter()
                .fold(Req::new(method, path), |q, (k, v)| q.header(k, v))
                .send(&levee)
                .await;
            let what = format!("{method} {path} {headers:?}");
            assert_eq!(r.status, *status, "{what}: {}", r.summary());
            assert_eq!(r.x_cache(), "HIT", "{what}");
            if *status == 304 {
                assert!(r.body.is_empty(), "{what}");
                // RFC 9110 §15.4.5: the fields the 200 would carry.
                assert_eq!(r.header("cache-control"), Some("max-age=60"), "{what}");
                assert!(r.has("date"), "{what}");
                assert!(!r.has("content-type"), "{what}: {:?}", r.headers);
                if *path != "/dated" {
                    assert!(r.has("etag"), "{what}");
                }
            } else if method == "GET" {
                assert_eq!(r.text(), format!("{path} body"), "{what}");
            }
        }
    }
    assert_eq!(
        origin.requests(),
        3,
        "a conditional request reached the origin"
    );
}

/// A client validating its copy of a response levee holds stale: levee validates its own
/// copy first (with its own validators), then answers the client's condition.
#[tokio::test]
async fn a_conditional_request_for_a_stale_response_is_answered_after_validation() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match") == Some("\"c1\"") {
            return Reply::status(304)
                .header("etag", "\"c1\"")
                .header("cache-control", "max-age=1");
        }
        Reply::text(format!("stale #{}", r.n))
            .header("etag", "\"c1\"")
            .header("last-modified", LM)
            .header("cache-control", "max-age=1")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/s").await;
    for h in [("if-none-match", "\"c1\""), ("if-modified-since", LM)] {
        past_one_second(&levee, &origin).await;
        let before = origin.requests();
        let r = send(&levee, "/s", &[h]).await;
        assert_eq!(r.status, 304, "{h:?}: {}", r.summary());
        assert_eq!(r.x_cache(), "REVALIDATED", "{h:?}: {}", r.summary());
        assert_eq!(r.header("etag"), Some("\"c1\""));
        assert_eq!(origin.requests(), before + 1, "{h:?}");
        let seen = origin.last();
        assert_eq!(seen.header("if-none-match"), Some("\"c1\""), "{h:?}");
        assert_eq!(seen.header("if-modified-since"), Some(LM), "{h:?}");
    }
    // A client whose copy is not levee's gets the full response.
    past_one_second(&levee, &origin).await;
    let r = send(&levee, "/s", &[("if-none-match", "\"old\"")]).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "REVALIDATED");
    assert_eq!(r.text(), "stale #1");
}

#[tokio::test]
async fn preconditions_never_turn_a_stored_error_or_redirect_into_304_or_412() {
    let origin = Origin::start(|r| match r.path.as_str() {
        "/gone" => Reply::status(404)
            .body("not here")
            .header("cache-control", "max-age=60")
            .header("etag", "\"g\""),
        _ => Reply::status(301)
            .header("location", "/elsewhere")
            .header("cache-control", "max-age=60")
            .header("etag", "\"m\""),
    });
    let levee = levee!().backend(&origin.url()).start();
    for (path, status) in [("/gone", 404), ("/moved", 301)] {
        levee.get(path).await;
        let tag = if path == "/gone" { "\"g\"" } else { "\"m\"" };
        let mut hit = false;
        for _ in 0..100 {
            if send(&levee, path, &[("cache-control", "only-if-cached")])
                .await
                .x_cache()
                == "HIT"
            {
                hit = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(hit, "{path} was not stored");
        // RFC 9110 §13.2.1: a response other than 2xx takes precedence over preconditions.
        for h in [
            ("if-none-match", tag),
            ("if-none-match", "*"),
            ("if-modified-since", LM_LATER),
        ] {
            let r = send(&levee, path, &[h, ("cache-control", "only-if-cached")]).await;
            assert_eq!(r.status, status, "{path} {h:?}: {}", r.summary());
        }
        let r = send(
            &levee,
            path,
            &[
                ("if-match", "\"nope\""),
                ("cache-control", "only-if-cached"),
            ],
        )
        .await;
        assert_eq!(r.status, status, "{path}: {}", r.summary());
    }
    assert_eq!(origin.requests(), 2);
}

/// RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are not applicable to a cache (it
/// MUST NOT evaluate preconditions that only apply to the origin): levee forwards such a
/// request and the origin's answer (here 412 or 200) reaches the client unstored.
#[tokio::test]
async fn if_match_and_if_unmodified_since_are_left_to_the_origin() {
    let origin = Origin::start(|r| {
        let ok = match (r.header("if-match"), r.header("if-unmodified-since")) {
            (Some(m), _) => m == "\"cur\"" || m == "*",
            (None, Some(d)) => d == LM,
            (None, None) => true,
        };
        if ok {
            Reply::text(format!("origin #{}", r.n))
                .header("cache-control", "max-age=60")
                .header("etag", "\"cur\"")
                .header("last-modified", LM)
        } else {
            Reply::status(412)
        }
    });
    let levee = levee!().backend(&origin.url()).debug_headers().start();
    levee.get("/r").await;
    levee.wait_stored("/r").await;
    let cases: [(&str, &str, u16); 5] = [
        ("if-match", "\"other\"", 412),
        ("if-match", "W/\"cur\"", 412),
        ("if-match", "\"cur\"", 200),
        ("if-unmodified-since", "Sat, 05 Nov 1994 08:49:37 GMT", 412),
        ("if-unmodified-since", LM, 200),
    ];
    for (i, (name, value, status)) in cases.into_iter().enumerate() {
        let r = send(&levee, "/r", &[(name, value)]).await;
        assert_eq!(r.status, status, "{name}: {value}: {}", r.summary());
        assert_eq!(r.x_cache(), "PASS", "{name}: {value}");
        assert_eq!(r.reason(), "origin-precondition");
        assert_eq!(
            origin.requests(),
            2 + i,
            "{name}: {value} was not forwarded"
        );
        assert_eq!(origin.last().header(name), Some(value));
    }
    // The stored response is untouched.
    let r = levee.get("/r").await;
    assert_eq!(r.x_cache(), "HIT");
    assert_eq!(r.text(), "origin #1");
    // When the client forbids contacting the origin, the stored response answers them.
    let oic = ("cache-control", "only-if-cached");
    let r = send(&levee, "/r", &[("if-match", "\"other\""), oic]).await;
    assert_eq!(r.status, 412, "{}", r.summary());
    let r = send(&levee, "/r", &[("if-match", "\"cur\""), oic]).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    let r = send(&levee, "/r", &[("if-match", "*"), oic]).await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(origin.requests(), 6);
}

// ---------------------------------------------------------------------------------------
// §5.2.1 request directives
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn request_directives_decide_whether_a_stored_response_may_be_used() {
    let origin = Origin::start(|r| {
        let cc = match r.path.as_str() {
            "/short" => "max-age=1",
            "/must" => "max-age=1, must-revalidate",
            "/swr" => "max-age=1, stale-while-revalidate=60",
            _ => "max-age=3600",
        };
        if r.header("if-none-match") == Some("\"t\"") {
            return Reply::status(304)
                .header("etag", "\"t\"")
                .header("cache-control", cc);
        }
        Reply::text(format!("{} #{}", r.path, r.n))
            .header("cache-control", cc)
            .header("etag", "\"t\"")
    });
    let levee = levee!().backend(&origin.url()).start();
    for p in ["/long", "/short", "/must", "/swr"] {
        levee.get(p).await;
    }
    // (The 1-second responses are only used once stale, long after they are stored.)
    levee.wait_stored("/long").await;
    let validated = |r: &Resp, what: &str| {
        assert_eq!(r.x_cache(), "REVALIDATED", "{what}: {}", r.summary());
        assert_eq!(
            origin.last().header("if-none-match"),
            Some("\"t\""),
            "{what}"
        );
    };
    // max-age=0 validates even a response stored a moment ago (Age 0).
    let r = send(&levee, "/long", &[("cache-control", "max-age=0")]).await;
    validated(&r, "max-age=0");
    for cc in ["no-cache", "no-cache, max-stale=100", "min-fresh=7200"] {
        let r = send(&levee, "/long", &[("cache-control", cc)]).await;
        validated(&r, cc);
    }
    let r = send(&levee, "/long", &[("pragma", "no-cache")]).await;
    validated(&r, "pragma");
    // RFC 9111 §5.2.1.5: request no-store forbids storing, not using a stored response;
    // levee serves the hit (and stores nothing from such a request, see below).
    let r = send(&levee, "/long", &[("cache-control", "no-store")]).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    let r = send(&levee, "/unstored", &[("cache-control", "no-store")]).await;
    assert_eq!(r.x_cache(), "MISS");
    levee.wait_fills_done().await;
    let r = send(&levee, "/unstored", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(
        r.status,
        504,
        "a request with no-store was stored: {}",
        r.summary()
    );
    // Within what the client asked for: a hit.
    for cc in ["max-age=60", "min-fresh=60", "max-stale=5"] {
        let r = send(&levee, "/long", &[("cache-control", cc)]).await;
        assert_eq!(r.x_cache(), "HIT", "{cc}: {}", r.summary());
    }
    past_one_second(&levee, &origin).await;
    // max-stale accepts a stale response unless the response or the request forbids it.
    let r = send(&levee, "/short", &[("cache-control", "max-stale=60")]).await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    assert_eq!(r.text(), "/short #2");
    let r = send(&levee, "/short", &[("cache-control", "max-stale")]).await;
    assert_eq!(r.x_cache(), "STALE", "{}", r.summary());
    for (path, cc) in [
        ("/must", "max-stale=60"),
        ("/short", "max-stale=60, no-cache"),
        ("/short", "max-stale=60, max-age=0"),
    ] {
        let r = send(&levee, path, &[("cache-control", cc)]).await;
        validated(&r, &format!("{path} {cc}"));
        past_one_second(&levee, &origin).await;
    }
    // stale-while-revalidate does not override a client that asked for a young response.
    let r = send(&levee, "/swr", &[("cache-control", "max-age=0")]).await;
    validated(&r, "swr max-age=0");
    // only-if-cached: the stored response if usable, else 504 without the origin.
    let before = origin.requests();
    let r = send(&levee, "/long", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(r.x_cache(), "HIT");
    past_one_second(&levee, &origin).await;
    let r = send(&levee, "/short", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(r.status, 504, "{}", r.summary());
    let r = send(&levee, "/nothing", &[("cache-control", "only-if-cached")]).await;
    assert_eq!(r.status, 504, "{}", r.summary());
    assert_eq!(
        origin.requests(),
        before,
        "only-if-cached reached the origin"
    );
}

// ---------------------------------------------------------------------------------------
// §4.4 invalidation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn unsafe_and_unknown_methods_invalidate_after_non_error_responses() {
    let origin = Origin::start(|r| {
        if r.method == "GET" {
            return Reply::text(format!("{} #{}", r.path, r.n))
                .header("cache-control", "max-age=60")
                .header("vary", "Foo");
        }
        let status: u16 = r
            .header("x-status")
            .and_then(|s| s.parse().ok())
            .unwrap_or(200);
        let mut reply = Reply::status(status);
        if let Some(l) = r.header("x-location") {
            reply = reply.header("location", l);
        }
        if let Some(l) = r.header("x-content-location") {
            reply = reply.header("content-location", l);
        }
        reply
    });
    let levee = levee!().backend(&origin.url()).start();
    let host = levee.addr().to_string();
    let warm = |paths: Vec<&'static str>| {
        let levee = &levee;
        async move {
            for p in paths {
                for foo in ["1", "2"] {
                    send(levee, p, &[("foo", foo)]).await;
                    levee.wait_stored_req(req(p, &[("foo", foo)])).await;
                }
            }
        }
    };
    let is_hit = |p: &'static str| {
        let levee = &levee;
        async move {
            let r = send(
                levee,
                p,
                &[("foo", "1"), ("cache-control", "only-if-cached")],
            )
            .await;
            r.x_cache() == "HIT"
        }
    };

    // Every unsafe method, and one levee does not know, invalidates every variant.
    for method in ["POST", "PUT", "DELETE", "PATCH", "M-SEARCH"] {
        warm(vec!["/item"]).await;
        let r = Req::new(method, "/item").body("x").send(&levee).await;
        assert_eq!(r.status, 200, "{method}: {}", r.summary());
        for foo in ["1", "2"] {
            let r = send(
                &levee,
                "/item",
                &[("foo", foo), ("cache-control", "only-if-cached")],
            )
            .await;
            assert_eq!(
                r.status,
                504,
                "{method} left variant foo={foo}: {}",
                r.summary()
            );
        }
    }
    // 3xx is not an error: it invalidates too.
    warm(vec!["/item"]).await;
    Req::post("/item", "x")
        .header("x-status", "303")
        .send(&levee)
        .await;
    assert!(!is_hit("/item").await, "303 did not invalidate");
    // Error responses (4xx, 5xx) do not.
    for status in ["400", "404", "409", "500", "503"] {
        warm(vec!["/item"]).await;
        let r = Req::post("/item", "x")
            .header("x-status", status)
            .send(&levee)
            .await;
        assert_eq!(r.status.as_str(), status);
        assert!(
            is_hit("/item").await,
            "a {status} invalidated the stored response"
        );
    }
    // Safe methods do not.
    for method in ["OPTIONS", "TRACE"] {
        let r = Req::new(method, "/item").send(&levee).await;
        assert_eq!(r.status, 200, "{method}");
        assert!(is_hit("/item").await, "{method} invalidated");
    }

    // Location and Content-Location: same origin only (relative, or absolute with the
    // same scheme, host and port).
    let same = format!("http://{host}/abs");
    let cases: [(&str, String, &'static str, bool); 6] = [
        ("x-location", "/rel".to_string(), "/rel", true),
        ("x-content-location", "/cl?q=1".to_string(), "/cl?q=1", true),
        ("x-location", same, "/abs", true),
        (
            "x-location",
            format!("http://other.example/{}", "abs2"),
            "/abs2",
            false,
        ),
        ("x-location", format!("https://{host}/tls"), "/tls", false),
        (
            "x-content-location",
            "http://127.0.0.2:1/port".to_string(),
            "/port",
            false,
        ),
    ];
    for (field, value, path, invalidated) in cases {
        warm(vec![path]).await;
        let r = Req::post("/item", "x")
            .header(field, &value)
            .send(&levee)
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(
            !is_hit(path).await,
            invalidated,
            "{field}: {value} (invalidation of {path} expected: {invalidated})"
        );
    }
}

// ---------------------------------------------------------------------------------------
// HEAD
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn head_uses_and_validates_the_stored_get() {
    let origin = Origin::start(|r| {
        if r.header("if-none-match") == Some("\"h\"") {
            return Reply::status(304)
                .header("etag", "\"h\"")
                .header("cache-control", "max-age=60")
                .header("x-version", "2");
        }
        Reply::text("0123456789")
            .header("etag", "\"h\"")
            .header("cache-control", "max-age=1")
            .header("x-version", "1")
    });
    let levee = levee!().backend(&origin.url()).start();
    levee.get("/h").await;

    // A stale stored GET is validated with a conditional GET (levee never sends HEAD for
    // a request that may use the cache), and the 304 freshens it for the requests after.
    past_one_second(&levee, &origin).await;
    let r = Req::head("/h").send(&levee).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.x_cache(), "REVALIDATED", "{}", r.summary());
    assert_eq!(r.header("x-version"), Some("2"));
    assert_eq!(r.header("content-length"), Some("10"));
    assert!(r.body.is_empty());
    let seen = origin.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.header("if-none-match"), Some("\"h\""));

    // A fresh stored GET answers HEAD, conditional or not.
    let r = Req::head("/h").send(&levee).await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.header("content-length"), Some("10"));
    assert_eq!(r.header("x-version"), Some("2"));
    assert!(r.body.is_empty());
    let r = Req::head("/h")
        .header("if-none-match", "\"h\"")
        .send(&levee)
        .await;
    assert_eq!(r.status, 304);
    assert_eq!(r.x_cache(), "HIT");
    let r = levee.get("/h").await;
    assert_eq!(r.x_cache(), "HIT", "{}", r.summary());
    assert_eq!(r.header("x-version"), Some("2"));
    assert_eq!(r.text(), "0123456789");
    assert_eq!(origin.requests(), 2);
}

// ---------------------------------------------------------------------------------------
// Partial content (RFC 9111 §3.3–3.4, RFC 9110 §14)
// ---------------------------------------------------------------------------------------

/// levee stores no partial response and combines none (RFC 9111 §3.3–3.4); it cuts
/// ranges from the whole stored 200 (ranges.rs has the rest): a Range miss asks the
/// origin for everything, and a 206 is never stored nor served without Range.
#[tokio::test]
async fn ranges_are_cut_from_the_whole_response_and_206s_are_never_stored() {
    let origin = Origin::start(|r| {
        let range = r.header("range").map(str::to_string);
        match (r.path.as_str(), range) {
            // An origin that answers 206 even to a request without Range.
            ("/always-206", _) => Reply::status(206)
                .header("content-range", "bytes 0-4/10")
                .header("cache-control", "max-age=60")
                .body("01234"),
            (_, Some(_)) => Reply::status(206)
                .header("content-range", "bytes 0-1/10")
                .header("cache-control", "max-age=60")
                .body("01"),
            _ => Reply::text("0123456789").header("cache-control", "max-age=60"),
        }
    });
    let levee = levee!().backend(&origin.url()).start();
    // A miss with Range: the fill asks for the whole response, the client gets its range.
    let r = send(&levee, "/full", &[("range", "bytes=0-1")]).await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert_eq!(r.text(), "01");
    assert_eq!(r.header("content-range"), Some("bytes 0-1/10"));
    assert!(origin.last().header("range").is_none());
    levee.wait_stored("/full").await;
    // A hit with Range: a range of the stored 200; an If-Range that does not hold: all.
    for (h, status, text) in [
        (&[("range", "bytes=0-1")][..], 206, "01"),
        (&[("range", "bytes=-1")][..], 206, "9"),
        (
            &[("range", "bytes=2-"), ("if-range", "\"x\"")][..],
            200,
            "0123456789",
        ),
    ] {
        let r = send(&levee, "/full", h).await;
        assert_eq!(r.status, status, "{h:?}: {}", r.summary());
        assert_eq!(r.x_cache(), "HIT");
        assert_eq!(r.text(), text);
    }
    assert_eq!(origin.requests(), 1);

    // A 206 is not stored, even with explicit freshness.
    let r = levee.get("/always-206").await;
    assert_eq!(r.status, 206);
    let r = send(
        &levee,
        "/always-206",
        &[("cache-control", "only-if-cached")],
    )
    .await;
    assert_eq!(r.status, 504, "a 206 was stored: {}", r.summary());

    // A range request that passes (Authorization) gets the origin's 206, which is not
    // stored: the next anonymous GET gets a whole 200.
    let r = send(
        &levee,
        "/passed",
        &[("authorization", "Bearer x"), ("range", "bytes=0-1")],
    )
    .await;
    assert_eq!(r.status, 206, "{}", r.summary());
    assert_eq!(r.x_cache(), "PASS");
    let r = levee.get("/passed").await;
    assert_eq!(r.status, 200, "{}", r.summary());
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(r.text(), "0123456789");
}
